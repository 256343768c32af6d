"""The design-based step of :func:`~evalmix.report.analyze.analyze`: run every job of a
:class:`~evalmix.report.run_plan.RunPlan` (a contrast by a method at a cluster level,
and the judge-stratified ones), one interval row each.

A method that fails yields a row with a note and a collected error, never a crash; the
callee warnings are collected and summarised (:func:`summarise_warnings`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from evalmix.compare._calls import guarded
from evalmix.compare.recommend import RowSelector, level_label
from evalmix.inference.api import interval
from evalmix.inference.estimands import build_problem
from evalmix.seeding import child_seed

if TYPE_CHECKING:
    from evalmix._progress import Progress
    from evalmix.compare.recommend import Contrast
    from evalmix.data.table import EvalTable
    from evalmix.report.run_plan import Job, RunPlan

__all__ = ["DesignRows", "run_design_jobs", "summarise_warnings", "empty_row"]

#: Fewest clusters for a cluster bootstrap (the inference package refuses fewer).
_MIN_BOOT_CLUSTERS = 5


@dataclass
class DesignRows:
    """What the design jobs gave: the rows, the judge-stratified rows, the callee
    warnings (category, message), the failures (method, contrast, error) and notes."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    judge_rows: list[dict[str, Any]] = field(default_factory=list)
    raw_warnings: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Cells:
    """The rows of each contrast (and judge) and each contrast's problem, built on first
    use and dropped after their last job (jobs of one contrast are adjacent: holding them
    all kept several copies of the table)."""

    def __init__(self, plan: RunPlan) -> None:
        table, judge = plan.table, plan.judge
        every = plan.jobs + plan.judge_jobs
        self.table = table
        self.last_subset = {(j.contrast.column, j.contrast.levels, j.judge): i
                            for i, j in enumerate(every)}
        self.last_problem = {(j.contrast.key, j.judge): i for i, j in enumerate(every)}
        self.rows_of = RowSelector(table)
        self.judge_codes = table.codes(judge) if judge is not None else None
        self.judge_code = ({str(lv): i for i, lv in enumerate(table.levels(judge))}
                           if judge is not None else {})
        self.subsets: dict[tuple, EvalTable | None] = {}
        self.problems: dict[tuple, tuple[Any, list[tuple[str, str]], str | None]] = {}

    def subset(self, c: Contrast, judge_label: str | None) -> EvalTable | None:
        """The rows of a contrast (and judge); None when that cell has no rows."""
        key = (c.column, c.levels, judge_label)
        if key not in self.subsets:
            mask = self.rows_of(c)
            if judge_label is not None:
                mask = mask & (self.judge_codes == self.judge_code[judge_label])
            self.subsets[key] = ((self.table if mask.all() else self.table.subset(mask))
                                 if mask.any() else None)
        return self.subsets[key]

    def release(self, job: Job, i: int) -> None:
        if self.last_subset[(job.contrast.column, job.contrast.levels, job.judge)] == i:
            self.subsets.pop((job.contrast.column, job.contrast.levels, job.judge), None)
        if self.last_problem[(job.contrast.key, job.judge)] == i:
            self.problems.pop((job.contrast.key, job.judge), None)


def run_design_jobs(plan: RunPlan, bar: Progress) -> DesignRows:
    """Every design job of ``plan``, in order, with its progress on ``bar``.

    Parameters
    ----------
    plan : RunPlan
        What to run (:func:`~evalmix.report.run_plan.plan_run`).
    bar : Progress
        The progress display; the jobs count on "intervals", the judge-stratified ones
        on "judge-stratified".

    Returns
    -------
    DesignRows
    """
    out = DesignRows()
    cells = _Cells(plan)
    empty_cells: set[tuple[str, str]] = set()
    t_main = bar.task("intervals", len(plan.jobs))
    t_judge = None  # counted from its first job: its timer then times its own jobs
    for i, job in enumerate(plan.jobs + plan.judge_jobs):
        sub = cells.subset(job.contrast, job.judge)
        if sub is None:
            empty_cells.add((str(job.judge), job.contrast.contrast))
        row, w, err = _one_job(plan, cells, job, sub, i)
        out.raw_warnings += w
        cells.release(job, i)
        if err:
            out.errors.append((job.method, job.contrast.contrast, err))
        if job.judge is None:
            out.rows.append(row)
            bar.advance(t_main)
        else:
            row["judge"] = job.judge
            out.judge_rows.append(row)
            if t_judge is None:
                t_judge = bar.task("judge-stratified", len(plan.judge_jobs))
            bar.advance(t_judge)
    if empty_cells:
        judges_empty = sorted({j for j, _ in empty_cells})
        out.notes.append(f"{len(empty_cells)} judge x contrast cell(s) have no rows (judges "
                         f"{', '.join(judges_empty[:5])}{' ...' if len(judges_empty) > 5 else ''}"
                         " did not judge every contrast); judge-stratified rows are shown "
                         "only where the cell exists")
    return out


def _one_job(plan: RunPlan, cells: _Cells, job: Job, sub: EvalTable | None, i: int
             ) -> tuple[dict[str, Any], list[tuple[str, str]], str | None]:
    """(row, callee warnings, error) of one job on its rows ``sub``."""
    level = plan.level
    if sub is None:
        return empty_row(job, 0, level, "no rows: this judge did not judge this contrast "
                         "(empty cell)"), [], None
    if any(sub.n_levels(r) < 2 for r in job.level):
        return empty_row(job, sub.n_obs, level, "fewer than 2 clusters in these rows"), [], None
    if job.method == "bootstrap" and any(sub.n_levels(r) < _MIN_BOOT_CLUSTERS
                                         for r in job.level):
        return empty_row(job, sub.n_obs, level,
                         f"not run: fewer than {_MIN_BOOT_CLUSTERS} clusters for a cluster "
                         "bootstrap (read the wild bootstrap row)"), [], None
    pkey = (job.contrast.key, job.judge)
    first: list[tuple[str, str]] = []
    if pkey not in cells.problems:
        cells.problems[pkey] = _problem_for(sub, job.contrast)
        first = cells.problems[pkey][1]
    problem, _, perr = cells.problems[pkey]
    if perr is not None:
        return empty_row(job, sub.n_obs, level, perr), first, perr
    row, w, err = _call_interval(sub, job, level=level, reps=plan.reps,
                                 seed=child_seed(plan.seed, i), problem=problem)
    return row, first + w, err


def _row_from(res: Any, job: Job, n_obs: int) -> dict[str, Any]:
    row = res.row()
    if res.details.get("pairing_note") and not row.get("note"):
        row["note"] = res.details["pairing_note"]
    row["estimand"] = job.contrast.estimand
    row["contrast"] = job.contrast.contrast
    row["method"] = job.method
    row["cluster"] = level_label(job.level)
    row.setdefault("n_obs", n_obs)
    row["null"] = job.contrast.null
    row["source"] = "design"
    row.setdefault("note", "")
    return row


def empty_row(job: Job, n_obs: int, level_value: float, note: str) -> dict[str, Any]:
    """The interval row of a job that gave no interval, with ``note`` saying why.

    Parameters
    ----------
    job : Job
        The job.
    n_obs : int
        Its rows.
    level_value : float
        The confidence level.
    note : str
        Why there is no interval.

    Returns
    -------
    dict
    """
    return {
        "estimand": job.contrast.estimand, "contrast": job.contrast.contrast,
        "method": job.method, "cluster": level_label(job.level), "estimate": np.nan,
        "se": np.nan, "lo": np.nan, "hi": np.nan, "level": level_value, "df": np.nan,
        "n_clusters": np.nan, "n_obs": n_obs, "null": job.contrast.null,
        "p_value": np.nan, "reps": 0, "seed": None, "ci_type": "", "paired": None,
        "source": "design", "note": note,
    }


def _problem_for(sub: EvalTable, c: Contrast) -> tuple[Any, list[tuple[str, str]], str | None]:
    """The contrast's LinearProblem on its rows (built once, reused by every job)."""
    kwargs: dict[str, Any] = {}
    if c.estimand == "difference":
        kwargs["conditions"] = c.levels
    if c.model is not None:
        kwargs["model"] = c.model
    out = guarded(build_problem, sub, c.estimand, **kwargs)
    return out.value, out.warnings, out.error


def _call_interval(sub: EvalTable, job: Job, *, level: float, reps: int,
                   seed: int, problem: Any = None
                   ) -> tuple[dict[str, Any], list[tuple[str, str]], str | None]:
    c = job.contrast
    kwargs: dict[str, Any] = {"method": job.method, "level": level, "problem": problem}
    if job.level:
        kwargs["cluster"] = job.level[0] if len(job.level) == 1 else list(job.level)
    if job.method in ("bootstrap", "wild"):
        kwargs["reps"] = reps
        kwargs["seed"] = seed
    if job.method == "bootstrap":
        # the plain percentile interval under-covers with 20-50 clusters (0.93 at 20);
        # the expanded percentile holds 94-96% from 20 (docs/planning.md, docs/coverage.md)
        kwargs["ci"] = "expanded"
    if problem is None:  # else the problem already carries the estimand's options
        if c.estimand == "difference":
            kwargs["conditions"] = c.levels
        if c.model is not None:
            kwargs["model"] = c.model
    out = guarded(interval, sub, c.estimand, **kwargs)
    if out.ok:
        return _row_from(out.value, job, sub.n_obs), out.warnings, None
    return empty_row(job, sub.n_obs, level, out.error or ""), out.warnings, out.error


def summarise_warnings(raw: list[tuple[str, str]], errors: list[tuple[str, str, str]]
                       ) -> list[str]:
    """Collapse repeated callee warnings and failures into a few plain lines.

    Parameters
    ----------
    raw : list of (str, str)
        The callee warnings as (category, message).
    errors : list of (str, str, str)
        The failures as (method, contrast, error).

    Returns
    -------
    list of str
    """
    out: list[str] = []
    counts = Counter(raw)
    by_cat: dict[str, list[tuple[str, int]]] = {}
    for (cat, msg), n in counts.items():
        by_cat.setdefault(cat, []).append((msg, n))
    for cat, items in by_cat.items():
        items.sort(key=lambda t: -t[1])
        total = sum(n for _, n in items)
        head = items[0][0]
        more = f" (and {len(items) - 1} similar messages)" if len(items) > 1 else ""
        out.append(f"{cat} x{total}: {head}{more}")
    fails = Counter((m, e.split(":")[0]) for m, _, e in errors)
    for (method, kind), n in fails.items():
        example = next(e for m, _, e in errors if m == method and e.startswith(kind))
        out.append(f"method {method} failed on {n} interval(s); those rows are empty "
                   f"(first error: {example})")
    return out
