"""Agreement between LLM judges and human raters, with intervals that respect the design.

:func:`agreement` computes, for every pair of raters and for the panels of humans, LLMs
and all raters: percent agreement, Cohen's kappa (unweighted, linear, quadratic), Gwet's
AC1, Fleiss' kappa (panels), Krippendorff's alpha (nominal, ordinal, interval; missing
ratings allowed) and, for scores, Spearman's rho and Kendall's tau-b. Each rater is also
compared with the pooled human votes (``vs humans``: the share of (rating, human rating)
pairs on the same unit that agree, leaving a human's own vote out), the statistic of
Zheng et al. (2023); the human-human pooled agreement is the ceiling a judge is compared
with.

Every coefficient is a smooth function of totals over units
(:mod:`evalmix.humans.coefficients`), so it gets two intervals from the same per-cluster
totals (:mod:`evalmix.inference.totals`): the delta method (for units drawn
independently this is the large-sample variance of Fleiss, Cohen & Everitt 1969; with
clusters a cluster-robust linearisation with a ``t(G-1)`` reference) and a cluster
bootstrap that resamples the clusters (or the units) with one set of replicates for every
statistic. Rank correlations of continuous scores are tables over each rater's own
values; above :data:`MAX_CELLS` cells only the estimate is given.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import numpy as np
import pandas as pd

from evalmix.errors import check_count, check_level, check_option
from evalmix.humans.agreement_rows import (
    AUTO_PAIRS,
    PAIR_STATISTICS,
    pair_rows,
    panel_rows,
    stratum_context,
    vs_humans_rows,
)
from evalmix.humans.ratings import Ratings, read_ratings
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import AgreementMethod, AgreementPairs, HumanTies

__all__ = ["agreement", "AgreementResult", "PAIR_STATISTICS"]

PAIRS: tuple[str, ...] = get_args(AgreementPairs)
METHODS: tuple[str, ...] = get_args(AgreementMethod)
_COLUMNS = ["stratum", "kind", "rater_1", "rater_2", "statistic", "method", "estimate", "se",
            "lo", "hi", "df", "n_units", "n_clusters", "note"]


@dataclass(frozen=True)
class AgreementResult:
    """Agreement between raters (see :func:`agreement`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (stratum, rater pair or panel, statistic, method): ``kind``
        (``llm-human``, ``human-human``, ``llm-llm``, ``order`` for a judge's [AB] vs
        [BA], ``vs humans``, ``panel``), ``rater_1``, ``rater_2``, ``statistic``,
        ``method`` (``delta`` or ``bootstrap``), ``estimate``, ``se``, ``lo``, ``hi``,
        ``df``, ``n_units``, ``n_clusters``, ``note``.
    ratings : Ratings
        The ratings read.
    scale : {"nominal", "ordered", "continuous"}
    level, reps, seed : as used
    cluster : str
        The resampled cluster (``""``: units).
    n_skipped : int
        Rater pairs sharing fewer than ``min_items`` units (not reported).
    """

    table: pd.DataFrame = field(repr=False)
    ratings: Ratings = field(repr=False)
    scale: str
    level: float
    reps: int
    seed: int
    cluster: str
    n_skipped: int = 0

    def ceiling(self, statistic: str = "percent_agreement", method: str = "delta"
                ) -> pd.DataFrame:
        """The human panel's agreement per stratum: the ceiling a judge is compared with."""
        t = self.table
        return t[(t["kind"] == "panel") & (t["rater_1"] == "humans")
                 & (t["statistic"] == statistic) & (t["method"] == method)].reset_index(drop=True)

    def vs_humans(self, method: str = "delta") -> pd.DataFrame:
        """Each rater's pooled agreement with the human votes, beside the human ceiling."""
        t = self.table
        rows = t[(t["kind"] == "vs humans") & (t["method"] == method)].copy()
        ceil = self.ceiling("percent_agreement", method).set_index("stratum")["estimate"]
        rows["human_ceiling"] = rows["stratum"].map(ceil)
        return rows.reset_index(drop=True)

    def tidy(self) -> pd.DataFrame:
        """Rows in the result contract: ``estimand`` = statistic, ``contrast`` =
        ``"[stratum: ]rater_1 vs rater_2"`` (``"panel: humans"``), ``method`` = delta /
        bootstrap, ``cluster`` = the resampled cluster; then ``kind``, ``stratum``,
        ``rater_1``, ``rater_2``, ``n_units``."""
        t = self.table
        prefix = np.where(t["stratum"] != "", t["stratum"] + ": ", "")
        contrast = np.where(t["kind"] == "panel", "panel: " + t["rater_1"],
                            t["rater_1"] + " vs " + t["rater_2"])
        frame = pd.DataFrame({
            "estimand": t["statistic"], "contrast": prefix + contrast, "method": t["method"],
            "cluster": self.cluster, "scale": "identity", "estimate": t["estimate"],
            "se": t["se"], "lo": t["lo"], "hi": t["hi"], "level": self.level, "df": t["df"],
            "n_clusters": t["n_clusters"],
            "reps": np.where(t["method"] == "bootstrap", self.reps, 0), "seed": self.seed,
            "note": t["note"], "kind": t["kind"], "stratum": t["stratum"],
            "rater_1": t["rater_1"], "rater_2": t["rater_2"], "n_units": t["n_units"]})
        return tidy_rows(frame)

    def __str__(self) -> str:
        r = self.ratings
        where = f"clusters of {self.cluster!r}" if self.cluster else "units"
        lines = [f"Agreement: {r.describe()}",
                 f"{self.level:.0%} intervals: delta method and bootstrap over {where} "
                 f"({self.reps} reps, seed {self.seed})"]
        for stratum in r.strata:
            t = self.table[(self.table["stratum"] == stratum) & (self.table["method"] == "delta")]
            head = f"[{stratum}] " if stratum else ""
            ceil = t[(t["kind"] == "panel") & (t["rater_1"] == "humans")]
            for _, row in ceil.iterrows():
                lines.append(f"{head}human ceiling, {row['statistic']}: {_fmt(row)}")
            vs = t[t["kind"] == "vs humans"]
            llm = vs[vs["rater_1"].map(r.kind_of) != "human"]
            people = vs[vs["rater_1"].map(r.kind_of) == "human"]
            if len(vs):
                lines.append(f"{head}agreement with the human votes (pooled pairs):")
            for _, row in (vs if len(people) <= 10 else llm).iterrows():
                lines.append(f"  {row['rater_1']:<32} {_fmt(row)}  n={row['n_units']}")
            if len(people) > 10:
                q = people["estimate"].quantile([0.25, 0.5, 0.75]).to_numpy()
                lines.append(f"  {len(people)} human raters vs the other humans: median "
                             f"{q[1]:.3f} (quartiles {q[0]:.3f}, {q[2]:.3f})")
        n_pairs = self.table[self.table["kind"].isin(
            ["llm-human", "human-human", "llm-llm", "order"])][["stratum", "rater_1",
                                                                "rater_2"]].drop_duplicates()
        lines.append(f"{len(n_pairs)} rater pairs in .table / .tidy()"
                     + (f"; {self.n_skipped} pairs shared too few units" if self.n_skipped
                        else ""))
        return "\n".join(lines)


def _fmt(row: pd.Series) -> str:
    if not np.isfinite(row["lo"]):
        return f"{row['estimate']:.3f}"
    return f"{row['estimate']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"


# ---------------------------------------------------------------------------- helpers
def _scale(r: Ratings) -> str:
    if r.kind != "score":
        return "nominal"
    return "ordered" if r.categories else "continuous"


def _pair_kind(r: Ratings, a: str, b: str, order_pairs: set[frozenset[str]]) -> str:
    if frozenset((a, b)) in order_pairs:
        return "order"
    kinds = sorted(k or "rater" for k in (r.kind_of(a), r.kind_of(b)))
    return "-".join(kinds[::-1]) if kinds[0] != kinds[1] else f"{kinds[0]}-{kinds[1]}"


def _pairs(r: Ratings, raters: list[str], present: np.ndarray, pairs: str, min_items: int
           ) -> tuple[list[tuple[int, int, str]], int]:
    order_pairs = {frozenset(o[1:3]) for o in r.orders}
    variants = {n for o in r.orders for n in o[1:3]}
    shared = present.T.astype(float) @ present.astype(float)
    out, skipped = [], 0
    for i in range(len(raters)):
        for j in range(i + 1, len(raters)):
            a, b = raters[i], raters[j]
            kind = _pair_kind(r, a, b, order_pairs)
            if kind != "order" and "human" not in kind and (a in variants or b in variants):
                continue  # judge-judge pairs use each judge's combined verdict
            out.append((i, j, kind))
    if pairs == "humans" or (pairs == "auto" and len(out) > AUTO_PAIRS):
        out = [p for p in out if "human" in p[2] or p[2] == "order"]
    keep = []
    for i, j, kind in out:
        if shared[i, j] >= min_items:
            keep.append((i, j, kind))
        else:
            skipped += 1
    # human-llm pairs listed as llm first
    keep = [(j, i, k) if r.kind_of(raters[i]) == "human" and r.kind_of(raters[j]) == "llm"
            else (i, j, k) for i, j, k in keep]
    return keep, skipped


# ---------------------------------------------------------------------------- public
def agreement(
    data: Ratings | str | os.PathLike[str] | pd.DataFrame,
    *,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
    cluster: str | None = None,
    by: str | Sequence[str] | None = None,
    first_shown: str | None = "first_shown",
    ties: HumanTies = "keep",
    pairs: AgreementPairs = "auto",
    min_items: int = 10,
    method: AgreementMethod = "both",
    reps: int = 999,
    level: float = 0.95,
    seed: SeedLike = None,
) -> AgreementResult:
    """Agreement of LLM judges with humans and with each other, with design-based intervals.

    Parameters
    ----------
    data : path, DataFrame or Ratings
        A long table, one row per rating (see :func:`evalmix.humans.read_ratings`).
    item, rater, rating, rater_kind, humans, cluster, by, first_shown, ties
        How to read it (:func:`evalmix.humans.read_ratings`): the unit and rater
        columns, the rating, who is human, a cluster above the units (the bootstrap
        resamples its clusters and the delta method is cluster-robust), strata, the
        presentation order of verdicts, and ``ties="exclude"`` for agreement without
        ties.
    pairs : {"auto", "all", "humans"}
        Which rater pairs: all, those with a human (plus each judge's [AB] vs [BA]), or
        ``"auto"``: all when there are at most 200, else those with a human.
    min_items : int
        Pairs sharing fewer units are skipped (counted in ``n_skipped``).
    method : {"both", "delta", "bootstrap"}
        Intervals to compute.
    reps : int
        Bootstrap replicates.
    level : float
        Confidence level.
    seed : int, Generator or None
        Seed of the bootstrap (recorded).

    Returns
    -------
    AgreementResult

    Examples
    --------
    >>> import pandas as pd, evalmix
    >>> df = pd.DataFrame({"item_id": [i // 3 for i in range(60)],
    ...                    "rater": ["ann", "bob", "gpt"] * 20,
    ...                    "rater_kind": ["human", "human", "llm"] * 20,
    ...                    "outcome": (["a", "a", "a", "a", "b", "a"] * 10)})
    >>> res = evalmix.agreement(df, seed=1, reps=199)
    >>> row = res.vs_humans().iloc[-1]
    >>> row["rater_1"], round(float(row["estimate"]), 2), round(float(row["human_ceiling"]), 2)
    ('gpt', 0.75, 0.5)

    References
    ----------
    Fleiss, Cohen & Everitt (1969), doi:10.1037/h0028106; Gwet (2008),
    doi:10.1348/000711006X126600; Hayes & Krippendorff (2007),
    doi:10.1080/19312450709336664; Zheng et al. (2023), arXiv:2306.05685.
    """
    check_option("pairs", pairs, PAIRS)
    check_option("method", method, METHODS)
    min_items = check_count("min_items", min_items, minimum=2)
    reps = check_count("reps", reps, minimum=2)
    level = check_level(level)
    if isinstance(data, Ratings):
        r = data
    else:
        r = read_ratings(data, item=item, rater=rater, rating=rating, rater_kind=rater_kind,
                         humans=humans, cluster=cluster, by=by, first_shown=first_shown,
                         ties=ties)
    rng, recorded = seeded_rng(seed)
    scale = _scale(r)
    rows: list[dict[str, Any]] = []
    skipped = 0
    for stratum in r.strata:
        raters = list(pd.unique(r.frame.loc[r.frame["stratum"] == stratum, "rater"]))
        idx, values = r.matrix(stratum, raters)
        _, codes = r.matrix(stratum, raters, column="code")
        ctx = stratum_context(r, idx, values, method, reps, level, rng, rows, stratum)
        present = np.isfinite(values)
        pair_list, n_skip = _pairs(r, raters, present, pairs, min_items)
        skipped += n_skip
        for i, j, kind in pair_list:
            units = np.flatnonzero(present[:, i] & present[:, j])
            base = {"stratum": stratum, "kind": kind, "rater_1": raters[i],
                    "rater_2": raters[j], "n_units": int(units.size)}
            pair_rows(ctx, r, scale, base, values[units, i], values[units, j],
                       codes[units, i], codes[units, j], units)
        if scale != "continuous":
            vs_humans_rows(ctx, r, stratum, raters, codes)
        variants = {n for o in r.orders for n in o[1:3]}
        panels = {"humans": [x for x in raters if r.kind_of(x) == "human"],
                  "llms": [x for x in raters if r.kind_of(x) == "llm" and x not in variants],
                  "all": [x for x in raters if x not in variants]}
        for name, members in panels.items():
            if len(members) < 2 or (name == "all" and len(members) == len(panels["humans"])):
                continue
            cols = [raters.index(x) for x in members]
            base = {"stratum": stratum, "kind": "panel", "rater_1": name, "rater_2": ""}
            panel_rows(ctx, r, scale, base, codes[:, cols], values[:, cols])
    table = pd.DataFrame(rows, columns=_COLUMNS) if rows else pd.DataFrame(columns=_COLUMNS)
    return AgreementResult(table, r, scale, level, reps, recorded, r.cluster or "", skipped)
