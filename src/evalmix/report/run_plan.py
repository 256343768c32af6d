"""The first two steps of :func:`~evalmix.report.analyze.analyze`: check the options, then
decide once what to run.

:func:`plan_run` returns a :class:`RunPlan`, frozen: the table with its sampled factors
settled, the recommendation made from it, the contrasts, cluster levels, methods and the
design jobs. Every later step (the design jobs, the design-only parts, the model fits,
the assembly) reads what it needs from the plan and decides nothing again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalmix.compare.recommend import (
    ALL_METHODS,
    MODEL_METHODS,
    Contrast,
    Recommendation,
    check_methods,
    contrasts,
    judge_role,
    levels_to_run,
    recommend_cluster,
)
from evalmix.errors import InvalidOptionError, check_count, check_level, check_option
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.report.controlled import choose_controlled
from evalmix.vocabulary import ControlledEstimand

if TYPE_CHECKING:
    import pandas as pd

    from evalmix.data.analysis_plan import AnalysisPlan
    from evalmix.data.table import EvalTable

__all__ = ["Job", "RunPlan", "plan_run", "check_options"]

#: Methods that take several cluster factors at once (multiway).
_MULTIWAY = {"CR1", "CR2"}


@dataclass(frozen=True)
class Job:
    """One design-based interval: a contrast by a method at a cluster level (and, for
    the judge-stratified rows, within one judge)."""

    contrast: Contrast
    method: str
    level: tuple[str, ...]
    judge: str | None = None  # judge-stratified job: the judge's label


@dataclass(frozen=True)
class RunPlan:
    """What one :func:`~evalmix.report.analyze.analyze` call runs, decided once.

    ``table`` has its sampled factors and strata settled (and the analysis plan's, when
    one is given); ``recommendation`` is made from it and carried down to every step.
    """

    table: EvalTable
    recommendation: Recommendation
    contrasts: tuple[Contrast, ...]
    levels: tuple[tuple[str, ...], ...]
    design_methods: tuple[str, ...]
    model_methods: tuple[str, ...] | None
    judge: str | None
    jobs: tuple[Job, ...]
    judge_jobs: tuple[Job, ...]
    level: float
    reps: int
    seed: int
    controlled: str
    style_features: tuple[str, ...]
    notes: tuple[str, ...]
    planned: Any = None   # the resolved analysis plan (report.planned), or None


def check_options(*, out: str | Path | None, backend: str | None, level: float,
                  model_timeout: float | None, reps: int) -> tuple[float, int]:
    """Refuse a bad option before any work starts; (level, reps) as used.

    Parameters
    ----------
    out, backend, level, model_timeout, reps
        As :func:`~evalmix.report.analyze.analyze` takes them.

    Returns
    -------
    tuple
        The checked level and reps.
    """
    from evalmix.report.report import check_report_dir

    if out is not None:
        check_report_dir(out)
    if backend is not None:
        check_option("backend", backend, ("bayes", "statsmodels"))
    level = check_level(level)
    if model_timeout is not None and (
            isinstance(model_timeout, bool) or not isinstance(model_timeout, int | float)
            or not math.isfinite(model_timeout) or model_timeout < 0):
        raise InvalidOptionError(
            f"model_timeout={model_timeout!r}: give seconds >= 0 (0 or None = no limit)")
    return level, check_count("reps", reps, minimum=MIN_REPS)


def plan_run(table: EvalTable, *, cluster_levels: Sequence[str] | None,
             methods: Sequence[str] | None, sampled: str | Sequence[str] | None,
             strata: str | Sequence[str] | None, level: float, reps: int, seed: int,
             plan: AnalysisPlan | None, controlled: ControlledEstimand, baseline: str | None,
             style_features: Sequence[str] | None, columns: pd.DataFrame | None) -> RunPlan:
    """The :class:`RunPlan` of a checked call (options from :func:`check_options`).

    Parameters
    ----------
    table : EvalTable
        The checked table.
    cluster_levels, methods, sampled, strata, plan, controlled, baseline, style_features, columns
        As :func:`~evalmix.report.analyze.analyze` takes them.
    level : float
        The checked confidence level (a plan's replaces it).
    reps : int
        The checked bootstrap replicates (a plan's replace them).
    seed : int
        The resolved master seed.

    Returns
    -------
    RunPlan
    """
    chosen = check_methods(methods)
    design_methods = [m for m in ALL_METHODS if m in chosen]
    model_methods = (tuple(m for m in MODEL_METHODS if m in chosen) if methods is not None
                     else None)
    table = table.with_sampled(sampled, strata=strata)
    controlled, style_feats = choose_controlled(table, controlled, baseline=baseline,
                                                style_features=style_features, columns=columns)
    use = None
    if plan is not None:
        from evalmix.report.planned import resolve_plan

        use = resolve_plan(plan, table)
        table, reps, level = use.table, plan.reps, check_level(plan.level)
    levels_run = levels_to_run(table, cluster_levels)
    judge = judge_role(table)
    rec = recommend_cluster(table)
    todo = contrasts(table)
    notes: list[str] = list(table.outcome_notes)
    if rec.cluster not in levels_run:
        levels_run.append(rec.cluster)
        if cluster_levels is not None:
            notes.append(f"the recommended cluster level '{rec.label}' was added to the "
                         "levels you asked for, so the headline can compare against it")
    if "naive" not in design_methods or rec.method not in design_methods:
        design_methods = list(dict.fromkeys(["naive", *design_methods, rec.method]))
    if use is not None:  # every level and method the plan names is run
        levels_run += [lv for lv in use.levels if lv not in levels_run]
        design_methods = list(dict.fromkeys([*design_methods, *use.methods]))
    jobs = tuple(Job(c, m, lv) for c in todo for m in design_methods for lv in levels_run
                 if _applicable(table, c, m, lv))
    return RunPlan(
        table=table, recommendation=rec, contrasts=tuple(todo), levels=tuple(levels_run),
        design_methods=tuple(design_methods), model_methods=model_methods, judge=judge,
        jobs=jobs, judge_jobs=_judge_jobs(table, judge, todo, rec, use), level=level,
        reps=reps, seed=seed, controlled=controlled,
        style_features=tuple(style_feats),
        notes=tuple(notes), planned=use)


def _judge_jobs(table: EvalTable, judge: str | None, todo: Sequence[Contrast],
                rec: Recommendation, use: Any) -> tuple[Job, ...]:
    """Per judge and contrast: the naive row, the recommended one and the plan's."""
    jobs: list[Job] = []
    if judge is not None and table.n_levels(judge) > 1:
        for jl in table.levels(judge):
            for c in todo:
                planned = ((use.method, use.cluster),) if use and use.judge else ()
                for m, lv in dict.fromkeys((("naive", ()), (rec.method, rec.cluster),
                                            *planned)):
                    if lv or m == "naive":
                        jobs.append(Job(c, m, lv, judge=str(jl)))
    return tuple(jobs)


def _applicable(table: EvalTable, c: Contrast, method: str, level: tuple[str, ...]
                ) -> bool:
    if method in ("naive", "wilson"):
        if level:
            return False
        if method == "wilson":
            return c.estimand in ("win_rate", "mean") and table.outcome_type in (
                "binary", "proportion")
        return True
    if not level:
        return False
    if len(level) > 1 and method not in _MULTIWAY:
        return False
    return True
