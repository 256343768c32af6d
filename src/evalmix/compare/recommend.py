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
from evalmix.data.table import INTERACTION_SEP, is_judge_role
from evalmix.errors import EvalmixError, check_option
from evalmix.inference.estimands import mean_null
from evalmix.inference.sandwich import FEW_CLUSTERS

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = [
    "ALL_METHODS", "FEW_LEVELS", "Contrast", "Recommendation", "levels_to_run",
    "contrasts", "recommend_cluster", "judge_role",
]

#: Design-based methods a report runs, in display order.
ALL_METHODS: tuple[str, ...] = ("naive", "wilson", "CR1", "CR2", "CR3", "bootstrap", "wild")
#: Model-based methods (rows added from :func:`evalmix.fit`).
MODEL_METHODS: tuple[str, ...] = ("mixedlm", "glmm_laplace", "glmm_vb", "glmm_map", "bayes")
#: Below this many levels a sampled factor makes the interval wide: the report says so.
FEW_LEVELS = 10
#: Pairwise tables with at most this many ``model_b`` levels also get all differences.
MAX_DIFFERENCE_LEVELS = 4


@dataclass(frozen=True)
class Contrast:
    """One estimand on one contrast, with the rows it uses.

    ``model`` names the model whose win rate a pairwise row states (the first name of
    the label ``"X vs Y"``); differences ``"B - A"`` of pairwise tables are B's win rate
    minus A's (both against the same opponent). One sign convention everywhere: the
    API (:func:`evalmix.interval`), the report and the CLI give the same number for the
    same label.
    """

    estimand: str
    contrast: str
    column: str | None  # canonical column that selects the rows ("model_b", "condition")
    levels: tuple[str, ...]  # one level (win rate / mean) or (reference, other) for differences
    null: float
    model: str | None = None
    primary: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.estimand, self.contrast)


@dataclass(frozen=True)
class Recommendation:
    """The interval the report recommends (its headline), and why.

    Attributes
    ----------
    cluster : tuple of str
        ``()`` (rows, or AB/BA pairs, independent), one role (one-way), or several roles
        (multiway: crossed sampled factors).
    method : str
        ``"CR2"`` (one-way or multiway, Satterthwaite df) or ``"naive"``.
    n_clusters : int
        Fewest levels among ``cluster`` (rows when there is none).
    reason : str
        One paragraph in plain words.
    sampled, fixed : tuple of str
        The roles the claim generalises over, and those held fixed (strata excluded).
    few_levels : tuple of str
        Sampled factors of ``cluster`` with fewer than :data:`FEW_LEVELS` levels (the
        interval is wide because the design has few independent levels of them).
    strata : tuple of str
        Roles that are strata: chosen groupings (benchmark subsets, categories) held
        fixed; the interval clusters within them and never by them.
    """

    cluster: tuple[str, ...]
    method: str
    n_clusters: int
    reason: str
    sampled: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    few_levels: tuple[str, ...] = ()
    strata: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The cluster level as the interval rows name it (``"a+b"`` for multiway)."""
        return level_label(self.cluster)

    @property
    def estimable(self) -> bool:
        """False when a sampled factor of the recommendation has fewer than 2 levels."""
        return not self.cluster or self.n_clusters >= 2

    def sentence(self) -> str:
        """The estimand in one sentence: what the headline generalises over, what is
        held fixed (strata, judges, replicates) and how to change it. The report opens
        with it."""
        change = ("Change this with --sampled ROLES / --strata ROLES (API: sampled=, "
                  "strata=) if your claim is different.")
        strata = (f"; {_names(self.strata)} {_is(self.strata)} "
                  f"{'a stratum' if len(self.strata) == 1 else 'strata'} (chosen, not "
                  "sampled: held fixed, the interval clusters within "
                  f"{'it' if len(self.strata) == 1 else 'them'})") if self.strata else ""
        fixed = (f"; {_names(self.fixed)} {_is(self.fixed)} held fixed (the ones in this "
                 "table)") if self.fixed else ""
        if not self.sampled:
            return ("No cluster factor is taken as sampled, so the intervals describe these "
                    f"rows only: they treat rows as independent{strata}{fixed}. {change}")
        return (f"The headline generalises over new levels of {_names(self.sampled)}"
                f"{strata}{fixed}. {change}")


def _names(roles: Sequence[str]) -> str:
    return ", ".join(roles)


def _is(roles: Sequence[str]) -> str:
    return "is" if len(roles) == 1 else "are"


def judge_role(table: EvalTable) -> str | None:
    """The cluster role that holds the judge (a role named like ``judge``/``rater``)."""
    for role in table.clusters:
        if is_judge_role(role):
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
            out.append(Contrast("win_rate", label, column, levels, 0.5, model=str(mb)))
            if table.has_order:
                out.append(Contrast("controlled_win_rate", label, column, levels, 0.5,
                                    model=str(mb), primary=False))
        bs = sorted({str(mb) for _, mb in pairs})
        # differences of win rates against the same reference (baseline designs only)
        if baseline and 2 <= len(bs) <= MAX_DIFFERENCE_LEVELS:
            for ref, other in combinations(bs, 2):
                out.append(Contrast("difference", f"{other} - {ref}", "model_b", (ref, other),
                                    0.0))
    else:
        if table.has_condition:
            conds = sorted(d["condition"].astype(str).unique())
            for c in conds:
                out.append(Contrast("mean", c, "condition", (c,), mean_null(table)))
            if 2 <= len(conds) <= MAX_DIFFERENCE_LEVELS:
                for ref, other in combinations(conds, 2):
                    out.append(Contrast("difference", f"{other} - {ref}", "condition",
                                        (ref, other), 0.0))
            elif len(conds) > MAX_DIFFERENCE_LEVELS:
                for other in conds[1:]:
                    out.append(Contrast("difference", f"{other} - {conds[0]}", "condition",
                                        (conds[0], other), 0.0))
        else:
            out.append(Contrast("mean", "overall", None, (), mean_null(table)))
    return out


def _relation(table: EvalTable, r1: str, r2: str) -> str:
    relation, _ = factor_relation(table.codes(r1), table.codes(r2))
    return relation


def output_cell(table: EvalTable) -> str | None:
    """The interaction of every sampled role (``"scenario:persona:author"``), if new.

    The unit that generated one output when each combination of the sampled factors'
    levels produced its own answer (the PsycheEval audit unit). ``None`` with fewer than
    two sampled roles, or when a declared role already groups the rows that way.
    """
    base = [r for r in table.sampled if INTERACTION_SEP not in table.roles.clusters[r]]
    if len(base) < 2:
        return None
    cell = INTERACTION_SEP.join(base)
    codes = table.codes(cell)
    for r in table.clusters:
        if factor_relation(codes, table.codes(r))[0] == "equivalent":
            return None
    return cell


def levels_to_run(table: EvalTable, asked: Sequence[str] | None = None
                  ) -> list[tuple[str, ...]]:
    """Cluster levels to run: none, each role, and two-way combinations of crossed roles.

    The default list also holds the output-generating cell (:func:`output_cell`).
    ``asked`` restricts the list: role names, ``"a:b"`` for an interaction cell,
    ``"a+b"`` for multiway, ``""``/``"none"`` for independent rows.
    """
    all_levels: list[tuple[str, ...]] = [()]
    all_levels += [(r,) for r in table.clusters]
    for r1, r2 in combinations(table.clusters, 2):
        if _relation(table, r1, r2) in ("crossed", "partially crossed"):
            all_levels.append((r1, r2))
    cell = output_cell(table)
    if cell is not None:
        all_levels.append((cell,))
    if asked is None:
        return all_levels
    wanted: list[tuple[str, ...]] = []
    for lv in asked:
        key = () if lv in ("", "none", None) else tuple(str(lv).split("+"))
        table.check_cluster(key or None)
        if key not in wanted:
            wanted.append(key)
    return wanted


def _top_sampled(table: EvalTable, sampled: Sequence[str]) -> list[str]:
    """Sampled factors not nested in another sampled factor (one per equivalence class)."""
    top: list[str] = []
    for r in sampled:
        inside = False
        for o in sampled:
            if o == r:
                continue
            rel = _relation(table, r, o)
            if rel == "nested" or (rel == "equivalent" and o in top):
                inside = True
                break
        if not inside:
            top.append(r)
    return top


def recommend_cluster(table: EvalTable, *, sampled: Sequence[str] | None = None,
                      strata: Sequence[str] | None = None) -> Recommendation:
    """The interval that accounts for every sampled factor of the design.

    Rows that share a level of a *sampled* factor (one the claim generalises over) are
    correlated, so the interval must treat that factor's levels as the independent
    units. The rule, from the design alone (never the outcome):

    * the sampled factors are ``sampled`` (default ``table.sampled``: every cluster role
      but judges, replicates and strata, which are fixed); a *stratum* (a grouping that
      was chosen: a benchmark's subsets, categories) is never the cluster unit, the
      interval clusters within it;
    * a sampled factor nested in another sampled factor (questions in passages, items
      in templates, output cells in scenarios) is covered by its parent: cluster at the
      coarsest sampled level, *whatever its number of levels* -- a finer level with
      many clusters treats the rows of one passage as independent and under-covers
      (docs/coverage.md);
    * one such top factor: one-way CR2 (Bell-McCaffrey) with Satterthwaite degrees of
      freedom, which stays close to nominal with few clusters where CR1 and the
      bootstrap under-cover; two or more crossed top factors (scenarios and personas
      both sampled): multiway CR2 over all of them (Cameron, Gelbach & Miller 2011)
      with Welch-Satterthwaite degrees of freedom of the inclusion-exclusion sum, kept
      between the smallest and largest factor df
      (:func:`~evalmix.inference.sandwich.multiway_df`), so a factor with few levels
      widens the interval as it should;
    * no sampled factor: rows (or matched AB/BA pairs) are treated as independent.

    References
    ----------
    Cameron, A. C., Gelbach, J. B. & Miller, D. L. (2011). Robust inference with
    multiway clustering. J. Business & Economic Statistics 29(2), 238-249.
    doi:10.1198/jbes.2010.07136
    Pustejovsky, J. E. & Tipton, E. (2018). Small-sample methods for cluster-robust
    variance estimation and hypothesis testing in fixed effects models. JBES 36(4).
    doi:10.1080/07350015.2016.1247004
    """
    table = table.with_sampled(sampled, strata=strata)
    samp = table.sampled
    strata = table.strata
    fixed = tuple(r for r in table.fixed if r not in strata)
    if not samp:
        unit = "matched AB/BA pairs" if table.has_order else "rows"
        return Recommendation(
            (), "naive", table.n_obs,
            f"no cluster factor is sampled, so {unit} are treated as independent; name the "
            "item/scenario column with clusters= (CLI --cluster) and, if judges or "
            "replicates are all you have, say so with sampled=[...]",
            samp, fixed, strata=strata)
    top = _top_sampled(table, samp)
    n = {r: table.n_levels(r) for r in top}
    few = tuple(r for r in top if n[r] < FEW_LEVELS)
    covered = [r for r in samp if r not in top]
    g_min = min(n.values())
    if len(top) == 1:
        r = top[0]
        reason = (f"'{r}' is the coarsest sampled factor ({n[r]} levels): rows within one "
                  f"{r} are correlated, so the interval sandwiches over whole {r} clusters "
                  "(CR2, Satterthwaite df)")
    else:
        reason = (f"{' and '.join(repr(r) for r in top)} are sampled and crossed: the "
                  "interval must account for all of them, so it is clustered on each "
                  "(multiway CR2; Satterthwaite df, never more optimistic than the "
                  "best-measured factor's nor less than the fewest-level factor's)")
    if covered:
        reason += ("; " + ", ".join(repr(c) for c in covered)
                   + (" is" if len(covered) == 1 else " are")
                   + " nested in it and covered by it")
    if g_min < 2:
        reason += ("; with fewer than 2 levels of a sampled factor no interval can be "
                   "trusted: not estimable at this cluster level")
    elif few:
        reason += ("; " + ", ".join(f"'{r}' has only {n[r]} levels" for r in few)
                   + ", so the interval is wide because the design has few independent "
                   "levels: add levels of " + " and ".join(few) + " to narrow it")
    elif g_min < FEW_CLUSTERS:
        reason += (f"; with {g_min} clusters CR2 is still close to nominal where CR1 and "
                   "the bootstrap are too narrow")
    if strata:
        reason += (f"; {_names(strata)} {_is(strata)} "
                   f"{'a stratum' if len(strata) == 1 else 'strata'} (chosen, not sampled), "
                   "so the interval clusters within "
                   f"{'it' if len(strata) == 1 else 'them'}, never by "
                   f"{'it' if len(strata) == 1 else 'them'}")
    return Recommendation(tuple(top), "CR2", g_min, reason + ".", samp, fixed, few,
                          strata)


def check_methods(methods: Sequence[str] | None) -> tuple[str, ...]:
    """Validate a ``methods`` argument (``None`` = all design-based methods)."""
    if methods is None:
        return ALL_METHODS
    if isinstance(methods, str):
        methods = (methods,)
    for m in methods:
        check_option("methods", m, ALL_METHODS + MODEL_METHODS)
    return tuple(methods)


class RowSelector:
    """:func:`select_rows` for many contrasts of one table: each column's labels are coded
    once (a 100-model leaderboard has 100 contrasts on the same two columns; comparing
    100,000 strings per contrast was most of a fast report's time)."""

    def __init__(self, table: EvalTable):
        self.table = table
        self._coded: dict[str, tuple[np.ndarray, dict[str, int]]] = {}

    def _codes(self, column: str) -> tuple[np.ndarray, dict[str, int]]:
        if column not in self._coded:
            codes, labels = pd.factorize(self.table.data[column].astype(str))
            self._coded[column] = (codes, {str(v): i for i, v in enumerate(labels)})
        return self._coded[column]

    def _is(self, column: str, labels: Sequence[str]) -> np.ndarray:
        codes, index = self._codes(column)
        wanted = [index[v] for v in labels if v in index]
        return np.isin(codes, wanted) if len(wanted) > 1 else (
            codes == wanted[0] if wanted else np.zeros(codes.size, dtype=bool))

    def __call__(self, c: Contrast) -> np.ndarray:
        """Boolean mask of the rows contrast ``c`` uses."""
        if c.column is None:
            return np.ones(self.table.n_obs, dtype=bool)
        if c.column == "pair":
            mask = self._is("model_a", c.levels[:1]) & self._is("model_b", c.levels[1:2])
        else:
            mask = self._is(c.column, list(c.levels))
        if not mask.any():
            raise EvalmixError(f"contrast {c.contrast!r} selects no rows")
        return mask


def select_rows(table: EvalTable, c: Contrast) -> np.ndarray:
    """Boolean mask of the rows a contrast uses."""
    return RowSelector(table)(c)


def level_label(level: tuple[str, ...]) -> str:
    return "+".join(level)


def cluster_counts(table: EvalTable, level: tuple[str, ...]) -> int:
    if not level:
        return table.n_obs
    return min(table.n_levels(r) for r in level)
