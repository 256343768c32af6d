"""What a report runs: contrasts, cluster levels, methods, and the recommended level.

Everything here looks at the table's *design* only (labels and codes), never at the
outcome, so the plan of a report cannot be tuned to its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix.data.summary import factor_relation
from evalmix.errors import EvalmixError, check_option

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = [
    "ALL_METHODS", "MIN_CLUSTERS", "Contrast", "Recommendation", "cluster_levels",
    "contrasts", "recommend_cluster", "judge_role",
]

#: Design-based methods a report runs, in display order.
ALL_METHODS: tuple[str, ...] = ("naive", "wilson", "CR1", "CR2", "CR3", "bootstrap", "wild")
#: Model-based methods (rows added from :func:`evalmix.fit`).
MODEL_METHODS: tuple[str, ...] = ("mixedlm", "glmm_laplace", "glmm_vb", "glmm_map", "bayes")
#: Fewest clusters for which cluster-robust and bootstrap intervals are trusted
#: (below about 20 they under-cover; Cameron & Miller 2015, doi:10.3368/jhr.50.2.317).
MIN_CLUSTERS = 20
#: Pairwise tables with at most this many ``model_b`` levels also get all differences.
MAX_DIFFERENCE_LEVELS = 4


@dataclass(frozen=True)
class Contrast:
    """One estimand on one contrast, with the rows it uses.

    ``flip`` is True when the table's ``y`` scores the *other* side (pairwise tables score
    ``model_a``; a report states win rates of ``model_b``), so estimates become ``1 - x``
    (win rates) or ``-x`` (differences) and the bounds swap.
    """

    estimand: str
    contrast: str
    column: str | None  # canonical column that selects the rows ("model_b", "condition")
    levels: tuple[str, ...]  # one level (win rate / mean) or (reference, other) for differences
    null: float
    flip: bool = False
    primary: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.estimand, self.contrast)


@dataclass(frozen=True)
class Recommendation:
    """The recommended cluster level and method, and why."""

    cluster: str
    method: str
    n_clusters: int
    reason: str


def judge_role(table: EvalTable) -> str | None:
    """The cluster role that holds the judge (a role named like ``judge``/``rater``)."""
    for role in table.clusters:
        low = role.lower()
        if any(w in low for w in ("judge", "rater", "annotator", "grader", "evaluator")):
            return role
    return None


def contrasts(table: EvalTable) -> list[Contrast]:
    """Every estimand x contrast a report computes for ``table``."""
    d = table.data
    out: list[Contrast] = []
    if table.kind == "pairwise":
        pairs = d.groupby(["model_a", "model_b"], sort=True).size().index.tolist()
        baseline = len({str(ma) for ma, _ in pairs}) == 1  # one model_a: a fixed reference
        for ma, mb in pairs:
            label = f"{mb} vs {ma}"
            # rows of this (model_a, model_b) pair only
            column, levels = ("model_b", (str(mb),)) if baseline else ("pair", (str(ma),
                                                                                str(mb)))
            out.append(Contrast("win_rate", label, column, levels, 0.5, flip=True))
            if table.has_order:
                out.append(Contrast("controlled_win_rate", label, column, levels, 0.5,
                                    flip=True, primary=False))
        bs = sorted({str(mb) for _, mb in pairs})
        # differences of win rates against the same reference (baseline designs only)
        if baseline and 2 <= len(bs) <= MAX_DIFFERENCE_LEVELS:
            for ref, other in combinations(bs, 2):
                out.append(Contrast("difference", f"{other} - {ref}", "model_b", (ref, other),
                                    0.0, flip=True))
    else:
        if table.has_condition:
            conds = sorted(d["condition"].astype(str).unique())
            for c in conds:
                out.append(Contrast("mean", c, "condition", (c,), _mean_null(table)))
            if 2 <= len(conds) <= MAX_DIFFERENCE_LEVELS:
                for ref, other in combinations(conds, 2):
                    out.append(Contrast("difference", f"{other} - {ref}", "condition",
                                        (ref, other), 0.0))
            elif len(conds) > MAX_DIFFERENCE_LEVELS:
                for other in conds[1:]:
                    out.append(Contrast("difference", f"{other} - {conds[0]}", "condition",
                                        (conds[0], other), 0.0))
        else:
            out.append(Contrast("mean", "overall", None, (), _mean_null(table)))
    return out


def _mean_null(table: EvalTable) -> float:
    # 0.5 for 0/1 and proportion scores (chance for a binary choice); a numeric score
    # has no natural null, so its means get no decision (NaN) and only differences do
    return 0.5 if table.outcome_type in ("binary", "proportion") else float("nan")


def _relation(table: EvalTable, r1: str, r2: str) -> str:
    relation, _ = factor_relation(table.codes(r1), table.codes(r2))
    return relation


def cluster_levels(table: EvalTable, levels: Sequence[str] | None = None
                   ) -> list[tuple[str, ...]]:
    """Cluster levels to run: none, each role, and two-way combinations of crossed roles.

    ``levels`` restricts the list: role names, ``"a+b"`` for multiway, ``""``/``"none"``
    for independent rows.
    """
    all_levels: list[tuple[str, ...]] = [()]
    all_levels += [(r,) for r in table.clusters]
    for r1, r2 in combinations(table.clusters, 2):
        if _relation(table, r1, r2) in ("crossed", "partially crossed"):
            all_levels.append((r1, r2))
    if levels is None:
        return all_levels
    wanted: list[tuple[str, ...]] = []
    for lv in levels:
        key = () if lv in ("", "none", None) else tuple(str(lv).split("+"))
        table.check_cluster(key or None)
        if key not in wanted:
            wanted.append(key)
    return wanted


def recommend_cluster(table: EvalTable, *, min_clusters: int = MIN_CLUSTERS,
                      judge: str | None = None) -> Recommendation:
    """The coarsest sampled cluster level with at least ``min_clusters`` clusters.

    Rows that share a cluster are not independent, so an interval must resample (or
    sandwich over) the *coarsest* unit that was sampled: if items are nested in
    categories and categories were sampled, clustering by item still treats items of one
    category as independent. But cluster-robust and bootstrap intervals need many
    clusters (about 20 or more); with fewer they are too narrow. The report therefore
    recommends the coarsest level that still has enough clusters, and shows coarser
    levels (with CR2 and the wild bootstrap, which cope best with few clusters) as
    sensitivity rows. The judge factor is treated as fixed (the judges are the ones
    you chose, not a sample), and so is never recommended.

    Method: CR2 (Bell-McCaffrey bias-reduced sandwich with Satterthwaite degrees of
    freedom; Pustejovsky & Tipton 2018, doi:10.1080/07350015.2016.1247004), which is
    close to nominal from about 20 clusters and never worse than CR1.
    """
    roles = [r for r in table.clusters if r != judge]
    if not roles:
        return Recommendation("", "naive", table.n_obs,
                              "no sampled cluster factor was given, so rows are treated as "
                              "independent; name the item/scenario column with --cluster")
    n = {r: table.n_levels(r) for r in roles}
    enough = [r for r in roles if n[r] >= min_clusters]
    # order coarse -> fine: fewer levels first; a factor that contains another is coarser
    def coarser_count(r: str) -> int:
        return sum(1 for o in roles if o != r and _relation(table, o, r) == "nested")

    order = sorted(roles, key=lambda r: (-coarser_count(r), n[r]))
    skipped = [r for r in order if r not in enough]
    if enough:
        best = sorted(enough, key=lambda r: (-coarser_count(r), n[r]))[0]
        reason = (f"'{best}' is the coarsest sampled factor with at least {min_clusters} "
                  f"clusters ({n[best]}); rows within one {best} are correlated, so "
                  f"intervals resample or sandwich over whole {best} clusters")
        too_few = [r for r in skipped if n[r] < n[best]]
        if too_few:
            reason += ("; " + ", ".join(f"'{r}' ({n[r]} clusters)" for r in too_few)
                       + " has too few clusters for trustworthy cluster-robust intervals and"
                       " is shown as a sensitivity check")
        return Recommendation(best, "CR2", n[best], reason + ".")
    best = max(roles, key=lambda r: n[r])
    return Recommendation(
        best, "CR2", n[best],
        f"no sampled factor has {min_clusters} or more clusters; '{best}' has the most "
        f"({n[best]}). With this few clusters read the CR2 and wild-bootstrap rows, and "
        "treat every interval as optimistic.")


def check_methods(methods: Sequence[str] | None) -> tuple[str, ...]:
    """Validate a ``methods`` argument (``None`` = all design-based methods)."""
    if methods is None:
        return ALL_METHODS
    if isinstance(methods, str):
        methods = (methods,)
    for m in methods:
        check_option("methods", m, ALL_METHODS + MODEL_METHODS)
    return tuple(methods)


def select_rows(table: EvalTable, c: Contrast) -> np.ndarray:
    """Boolean mask of the rows a contrast uses."""
    if c.column is None:
        return np.ones(table.n_obs, dtype=bool)
    if c.column == "pair":
        d = table.data
        mask = ((d["model_a"].astype(str).to_numpy() == c.levels[0])
                & (d["model_b"].astype(str).to_numpy() == c.levels[1]))
        if not mask.any():
            raise EvalmixError(f"contrast {c.contrast!r} selects no rows")
        return mask
    col = table.data[c.column].astype(str).to_numpy()
    mask = np.isin(col, list(c.levels))
    if not mask.any():
        raise EvalmixError(f"contrast {c.contrast!r} selects no rows")
    return mask


def level_label(level: tuple[str, ...]) -> str:
    return "+".join(level)


def cluster_counts(table: EvalTable, level: tuple[str, ...]) -> int:
    if not level:
        return table.n_obs
    return int(min(pd.factorize(table.data[r])[0].max() + 1 for r in level))
