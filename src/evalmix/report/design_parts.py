"""The report's parts besides the interval table, a step of
:func:`~evalmix.report.analyze.analyze` each: the leaderboard, the length- or
style-controlled estimand, the G study, the custom statistics and randomization test,
position bias and the judges-against-humans section.

Each reads the :class:`~evalmix.report.run_plan.RunPlan` (the table, the recommendation,
the level and seed decided once); a part that fails becomes a note, never a crash.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalmix.compare._calls import guarded
from evalmix.compare.position import position_bias, position_classes
from evalmix.compare.recommend import MAX_DIFFERENCE_LEVELS, Recommendation
from evalmix.errors import FewClustersWarning
from evalmix.report.controlled import length_control_rows, style_control_rows
from evalmix.report.custom_statistics import custom_rows
from evalmix.report.reliability import reliability
from evalmix.seeding import child_seed

if TYPE_CHECKING:
    from evalmix._progress import Progress
    from evalmix.data.table import EvalTable
    from evalmix.inference.custom import Statistic
    from evalmix.report.run_plan import RunPlan

__all__ = ["DesignParts", "design_parts", "CustomParts", "custom_parts"]


@dataclass(frozen=True)
class DesignParts:
    """The leaderboard (and its pairs), the controlled estimand's rows and the G study."""

    leaderboard: pd.DataFrame | None
    leaderboard_pairs: pd.DataFrame | None
    length_control: pd.DataFrame | None
    style_control: pd.DataFrame | None
    reliability: Any


@dataclass(frozen=True)
class CustomParts:
    """The custom statistics, position bias (per judge and by class) and the humans
    section."""

    custom: pd.DataFrame | None
    position: pd.DataFrame
    position_classes: pd.DataFrame | None
    humans: Any


def design_parts(plan: RunPlan, bar: Progress, *, letters: bool, baseline: str | None,
                 columns: pd.DataFrame | None, fast: bool, model_timeout: float | None
                 ) -> tuple[DesignParts, list[str]]:
    """The leaderboard, the controlled estimand and the G study, with their notes.

    Parameters
    ----------
    plan : RunPlan
        What the call runs.
    bar : Progress
        The progress display (a stage per part).
    letters, baseline, columns, fast, model_timeout
        As :func:`~evalmix.report.analyze.analyze` takes them.

    Returns
    -------
    tuple
        The parts and the notes they left.
    """
    table, level, seed = plan.table, plan.level, plan.seed
    notes: list[str] = []
    with bar.stage("leaderboard: every model pair") if _n_models(table) > \
            MAX_DIFFERENCE_LEVELS + 1 else nullcontext():
        board, board_pairs, board_note = _leaderboard(table, plan.recommendation,
                                                      level=level, seed=seed, letters=letters)
    if board_note:
        notes.append(board_note)
    lc_rows = sc_rows = None
    if plan.controlled == "length":
        with bar.stage("length-controlled win rate"):
            lc_rows, lc_note = length_control_rows(table, level=level, seed=seed,
                                                   reps=plan.reps, baseline=baseline,
                                                   columns=columns)
        notes += [lc_note] if lc_note else []
    elif plan.controlled == "style":
        sc_rows, sc_note = style_control_rows(table, list(plan.style_features), level=level,
                                              columns=columns)
        notes += [sc_note] if sc_note else []
    with bar.stage("G study: reliability and budget"):
        rel, rel_note = reliability(table, level=level, seed=seed, fast=fast,
                                    model_timeout=model_timeout)
    if rel_note:
        notes.append(rel_note)
    return DesignParts(board, board_pairs, lc_rows, sc_rows, rel), notes


def custom_parts(plan: RunPlan, bar: Progress, rows: list[dict[str, Any]], *,
                 statistics: Mapping[str, Statistic] | None, randomized: bool,
                 columns: pd.DataFrame | None, humans: Sequence[str] | None,
                 notes: list[str]) -> CustomParts:
    """The custom statistics and randomization test, position bias and the humans
    section; their notes are appended to ``notes``.

    Parameters
    ----------
    plan : RunPlan
        What the call runs.
    bar : Progress
        The progress display.
    rows : list of dict
        The design-based interval rows (the randomization test sits beside them).
    statistics, randomized, columns, humans
        As :func:`~evalmix.report.analyze.analyze` takes them.
    notes : list of str
        The report's notes so far, extended here.

    Returns
    -------
    CustomParts
    """
    table, rec, level, seed = plan.table, plan.recommendation, plan.level, plan.seed
    custom: pd.DataFrame | None = None
    if statistics or randomized:
        with bar.stage("custom statistics and randomization test"):
            custom, custom_notes = custom_rows(
                table, statistics=dict(statistics or {}), cluster=rec.cluster,
                randomized=randomized, intervals=pd.DataFrame(rows), method=rec.method,
                columns=columns, reps=plan.reps, seed=seed, level=level)
        notes += custom_notes
    one_way = rec.cluster[0] if len(rec.cluster) == 1 else None
    position = position_bias(table, judge=plan.judge, cluster=one_way, level=level)
    with warnings.catch_warnings():  # few clusters: the report's warnings say so
        warnings.simplefilter("ignore", FewClustersWarning)
        classes = position_classes(
            table, judge=plan.judge, cluster=one_way, level=level, reps=plan.reps,
            seed=child_seed(seed, len(plan.jobs) + len(plan.judge_jobs)))
    section = None
    if humans is not None:
        with bar.stage("judges against humans"):
            section = _humans_section(table, humans, level, notes)
    return CustomParts(custom, position, None if classes.empty else classes, section)


def _humans_section(table: EvalTable, humans: Sequence[str], level: float,
                    notes: list[str]) -> Any:
    """The "Judges against humans" section; a failure becomes a warning, not a crash."""
    from evalmix.report.judges_vs_humans import humans_section

    out = guarded(humans_section, table, list(humans), level=level)
    if out.error:
        notes.append(f"judges against humans: not computed ({out.error})")
    return out.value


def _n_models(table: EvalTable) -> int:
    d = table.data
    if table.kind == "pairwise":
        return len(set(d["model_a"].astype(str)) | set(d["model_b"].astype(str)))
    return int(d["condition"].nunique()) if table.has_condition else 0


def _leaderboard(table: EvalTable, rec: Recommendation, *, level: float, seed: int,
                 letters: bool = True) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str]:
    """Model-vs-model comparisons for tables with more models than the contrasts list.

    Every pair of models, paired on shared items, clustered at the recommended level,
    with simultaneous (max-t) intervals and rank intervals
    (:func:`evalmix.inference.leaderboard.leaderboard`); a multiway recommendation
    (crossed sampled factors) gives the multiway CR2 covariance.
    """
    from evalmix.inference.leaderboard import leaderboard

    if _n_models(table) <= MAX_DIFFERENCE_LEVELS + 1:
        return None, None, ""
    cluster = (None if not rec.cluster else rec.cluster[0] if len(rec.cluster) == 1
               else list(rec.cluster))
    out = guarded(leaderboard, table, cluster=cluster, method="CR2", level=level, seed=seed,
                  letters=letters)
    if not out.ok:
        return None, None, f"the leaderboard could not be computed ({out.error})"
    return out.value.tidy(), out.value.tidy_pairs(), "; ".join(out.value.notes)
