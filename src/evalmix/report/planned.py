"""An analysis plan applied to a report: the pre-declared primary result first.

:func:`resolve_plan` checks an :class:`~evalmix.data.analysis_plan.AnalysisPlan`
against a table (roles, estimand, contrasts, methods, ties, judges; every problem at
once, naming the plan file) and decides what the data force: when the primary cluster
has fewer than the plan's ``min_clusters`` levels, the plan's fallback is used and the
report says so (a *deviation*). :func:`apply_plan` then labels every row of the report:
``primary`` (the pre-declared result as run), ``sensitivity`` (the pre-declared
sensitivity levels), ``declared primary, replaced by the fallback`` and ``exploratory``
(everything else), and records the plan (path, SHA-256, the eight items, deviations,
the primary rows) in the report and ``summary.json``. :func:`plan_markdown` and
:func:`plan_html` render the block the report opens with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix.compare.recommend import (
    ALL_METHODS,
    contrasts,
    judge_role,
    level_label,
)
from evalmix.errors import InvalidTableError
from evalmix.report.plan_view import plan_html, plan_markdown

if TYPE_CHECKING:
    from evalmix.data.analysis_plan import AnalysisPlan
    from evalmix.data.table import EvalTable
    from evalmix.report.report import Report

__all__ = ["PlanUse", "resolve_plan", "apply_plan", "plan_markdown", "plan_html",
           "PRIMARY", "SENSITIVITY", "REPLACED", "EXPLORATORY"]

PRIMARY = "primary"
SENSITIVITY = "sensitivity"
REPLACED = "declared primary, replaced by the fallback"
EXPLORATORY = "exploratory"
#: Methods with one cluster factor at most (analyze runs multiway CR1 and CR2 only).
_MULTIWAY = ("CR1", "CR2")
#: Fewest clusters analyze runs a cluster bootstrap with.
_MIN_BOOT_CLUSTERS = 5


@dataclass(frozen=True)
class PlanUse:
    """A plan resolved against a table: what runs and what the data forced.

    Attributes
    ----------
    plan : AnalysisPlan
    table : EvalTable
        The table with the plan's judge rule applied (``judges = "sampled"`` adds the
        judge role to the sampled roles).
    cluster : tuple of str
        The cluster level the primary result uses (the fallback's after a deviation).
    method : str
        The interval method the primary result uses.
    keys : tuple of (estimand, contrast)
        The primary contrasts.
    deviations : tuple of str
        What the data forced, in plain words (empty: the plan ran as written).
    levels : tuple of tuple of str
        Every cluster level the plan names (primary, fallback, sensitivity).
    methods : tuple of str
        Every interval method the plan names.
    declared : tuple of str
        The primary cluster level as declared (before any fallback).
    fallback : tuple of str
        The fallback's cluster level (the declared one when the fallback names none).
    sensitivity : tuple of tuple of str
        The sensitivity cluster levels.
    judge : str or None
        The judge role (``judges = "per_judge"``: the primary rows are per judge).
    """

    plan: AnalysisPlan
    table: EvalTable
    cluster: tuple[str, ...]
    method: str
    keys: tuple[tuple[str, str], ...]
    deviations: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    methods: tuple[str, ...]
    declared: tuple[str, ...] = ()
    fallback: tuple[str, ...] = ()
    sensitivity: tuple[tuple[str, ...], ...] = ()
    judge: str | None = None

    @property
    def label(self) -> str:
        return level_label(self.cluster)

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` records of the plan (the primary rows are added by
        :func:`apply_plan`)."""
        p = self.plan
        return {"path": p.path, "sha256": p.sha256, "title": p.title, "items": p.items(),
                "used": {"cluster": self.label or "none", "method": self.method},
                "deviations": list(self.deviations)}


def _split(level: str) -> tuple[str, ...]:
    return tuple(level.split("+")) if level else ()


def _fewest(table: EvalTable, level: tuple[str, ...]) -> int | None:
    return min(table.n_levels(r) for r in level) if level else None


def _method_problems(where: str, key: str, method: str, level: tuple[str, ...],
                     table: EvalTable, estimand: str) -> list[str]:
    if method not in ALL_METHODS:
        return [f"{where}: {key} = {method!r} is not an interval method; use one of "
                f"{', '.join(ALL_METHODS)}"]
    out = []
    if method in ("naive", "wilson") and level:
        out.append(f"{where}: {key} = {method!r} treats rows as independent, but the plan "
                   f"clusters by {level_label(level)!r}; declare a cluster-robust method "
                   "(CR2, wild, bootstrap) or cluster = \"none\"")
    if method not in ("naive", "wilson") and not level:
        out.append(f"{where}: {key} = {method!r} needs a cluster level; the plan says "
                   "\"none\": declare a cluster, or method = \"naive\"")
    if len(level) > 1 and method not in _MULTIWAY:
        out.append(f"{where}: {key} = {method!r} takes one cluster factor; "
                   f"{level_label(level)!r} is multiway: use CR1 or CR2")
    if method == "wilson" and not (estimand in ("win_rate", "mean")
                                   and table.outcome_type in ("binary", "proportion")):
        out.append(f"{where}: {key} = 'wilson' is for rates of 0/1 outcomes (win_rate, mean "
                   "of a 0/1 score); declare \"naive\"")
    return out


def resolve_plan(plan: AnalysisPlan, table: EvalTable) -> PlanUse:
    """Check ``plan`` against ``table`` and decide the primary cluster and method.

    Raises
    ------
    InvalidTableError
        Listing every problem (each names the plan file, the key, the value and the
        fix): roles the table lacks, an estimand or contrast it does not have, a method
        that cannot run at its level, ties read differently, a judge rule without a
        judge role.
    """
    where = f"analysis plan {plan.path!r}"
    problems = [f"{where}: {p}" for p in plan.problems(table)]
    if problems:  # the rest needs the roles to exist
        raise InvalidTableError(problems)
    judge = judge_role(table)
    if plan.judges == "sampled" and judge is not None and judge not in table.sampled:
        table = table.with_sampled((*table.sampled, judge))
    declared = table.check_cluster(_split(plan.cluster))
    fallback = table.check_cluster(_split(plan.fallback_cluster)) \
        if plan.fallback_cluster is not None else declared
    sensitivity = tuple(table.check_cluster(_split(s)) for s in plan.sensitivity)
    problems += _method_problems(where, "[interval] method", plan.method, declared, table,
                                 plan.estimand)
    if plan.fallback_method is not None or plan.fallback_cluster is not None:
        problems += _method_problems(where, "[fallback] method" if plan.fallback_method
                                     else "[interval] method (with the fallback cluster)",
                                     plan.fallback_method or plan.method, fallback, table,
                                     plan.estimand)
    for i, lv in enumerate(plan.sensitivity):
        if len(_split(lv)) > 1 and plan.method not in _MULTIWAY:
            problems.append(f"{where}: [sensitivity] clusters[{i}] = {lv!r} is multiway; "
                            f"the plan's method {plan.method!r} takes one cluster factor: "
                            "use CR1 or CR2, or one-way levels")
    offered = [c for c in contrasts(table) if c.estimand == plan.estimand]
    labels = [c.contrast for c in offered]
    if not offered:
        problems.append(f"{where}: [primary] estimand = {plan.estimand!r}: this table has "
                        "no such contrast (the report computes "
                        f"{', '.join(sorted({c.estimand for c in contrasts(table)}))}); "
                        "declare one of those")
    for c in plan.contrasts:
        if offered and c not in labels:
            some = ", ".join(repr(x) for x in labels[:4]) + (" ..." if len(labels) > 4 else "")
            problems.append(f"{where}: [primary] contrast = {c!r} is not a {plan.estimand} "
                            f"contrast of this table; its contrasts are {some} (as "
                            "intervals.csv spells them)")
    if problems:
        raise InvalidTableError(problems)
    keys = tuple((plan.estimand, c) for c in (plan.contrasts or labels))
    cluster, method, deviations = declared, plan.method, []
    n = _fewest(table, declared)
    if n is not None and n < plan.min_clusters:
        cluster, method = fallback, plan.fallback_method or plan.method
        deviations.append(
            f"the primary cluster '{plan.cluster}' has {n} levels, fewer than the plan's "
            f"min_clusters = {plan.min_clusters}: the plan's fallback was used, {method} "
            f"clustered by '{level_label(cluster) or 'none'}'")
    m = _fewest(table, cluster)
    if m is not None and m < 2:
        deviations.append(f"'{level_label(cluster)}' has {m} level: no clustered interval "
                          "can be computed, the primary result has none")
    elif m is not None and method == "bootstrap" and m < _MIN_BOOT_CLUSTERS:
        deviations.append(f"'{level_label(cluster)}' has {m} levels, fewer than the "
                          f"{_MIN_BOOT_CLUSTERS} a cluster bootstrap needs: the primary "
                          "result has no interval")
    return PlanUse(plan=plan, table=table, cluster=cluster, method=method, keys=keys,
                   deviations=tuple(deviations),
                   levels=tuple(dict.fromkeys([declared, fallback, *sensitivity])),
                   methods=tuple(dict.fromkeys([plan.method, method])),
                   declared=declared, fallback=fallback, sensitivity=sensitivity,
                   judge=judge if plan.judges == "per_judge" else None)


def _labels(frame: pd.DataFrame, use: PlanUse) -> tuple[np.ndarray, np.ndarray]:
    """``analysis`` and ``deviation`` labels of interval-like rows."""
    n = len(frame)
    analysis = np.full(n, EXPLORATORY, dtype=object)
    deviation = np.full(n, "", dtype=object)
    if n == 0:
        return analysis, deviation
    keys = set(use.keys)
    key = pd.Series(list(zip(frame["estimand"].astype(str), frame["contrast"].astype(str),
                             strict=True)), index=frame.index).isin(keys).to_numpy()
    design = frame["source"].eq("design").to_numpy() if "source" in frame else np.ones(n, bool)
    method = frame["method"].astype(str).to_numpy()
    cluster = frame["cluster"].fillna("").astype(str).to_numpy()
    sens = [level_label(s) for s in use.sensitivity]
    base = key & design
    analysis[base & (method == use.plan.method) & np.isin(cluster, sens)] = SENSITIVITY
    if use.deviations and (use.method, use.label) != (use.plan.method,
                                                      level_label(use.declared)):
        analysis[base & (method == use.plan.method)
                 & (cluster == level_label(use.declared))] = REPLACED
    primary = base & (method == use.method) & (cluster == use.label)
    analysis[primary] = PRIMARY
    deviation[primary] = "; ".join(use.deviations)
    return analysis, deviation


def _primary_rows(rep: Report, use: PlanUse) -> pd.DataFrame:
    source = rep.judges if use.judge is not None else rep.intervals
    if source is None or source.empty or "analysis" not in source:
        return pd.DataFrame()
    rows = source[source["analysis"] == PRIMARY]
    cols = [c for c in ("judge", "estimand", "contrast", "estimate", "lo", "hi", "level",
                        "method", "cluster", "n_clusters", "decision", "deviation")
            if c in rows.columns]
    return rows[cols].reset_index(drop=True)


def apply_plan(rep: Report, use: PlanUse) -> Report:
    """``rep`` with every row labelled against the plan and the plan recorded.

    ``intervals``, ``judges``, ``headline``, ``position`` and ``position_classes`` get
    an ``analysis`` column (``primary``, ``sensitivity``, ``declared primary, replaced by the
    fallback`` or ``exploratory``); ``intervals`` and ``judges`` also a ``deviation``
    column (what the data forced, on the primary rows). ``rep.plan`` and
    ``summary["plan"]`` hold the path, SHA-256, the eight items, the cluster and method
    used, the deviations and the primary rows.
    """
    iv = rep.intervals.copy()
    if not iv.empty:
        iv["analysis"], iv["deviation"] = _labels(iv, use)
    judges = rep.judges.copy()
    if not judges.empty:
        judges["analysis"], judges["deviation"] = EXPLORATORY, ""
        if use.judge is not None:
            judges["source"] = "design"
            judges["analysis"], judges["deviation"] = _labels(judges, use)
            judges = judges.drop(columns="source")
    head = rep.headline.copy()
    if not head.empty:
        head["source"] = "design"
        head["analysis"] = _labels(head, use)[0] if use.judge is None else EXPLORATORY
        head = head.drop(columns="source")
    position = rep.position.copy()
    if not position.empty:
        position["analysis"] = EXPLORATORY
    classes = rep.position_classes
    if classes is not None:
        classes = classes.assign(analysis=EXPLORATORY)
    out = replace(rep, intervals=iv, judges=judges, headline=head, position=position,
                  position_classes=classes)
    primary = _primary_rows(out, use)
    record = {**use.summary(), "primary": primary}
    return replace(out, plan=record, summary={**rep.summary, "plan": record})
