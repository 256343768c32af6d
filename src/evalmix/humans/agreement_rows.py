"""The rows of an agreement table: rater pairs, pooled agreement with the human votes
and panels, each statistic with its delta-method and cluster-bootstrap interval.

One :class:`_Ctx` per stratum holds each unit's resampled cluster (or rating pattern,
without clusters) and the bootstrap counts shared by every statistic;
:func:`_emit` turns per-cluster totals into rows (:mod:`evalmix.inference.totals`).
Used by :func:`evalmix.humans.concordance.agreement`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.data.table import dense_codes
from evalmix.errors import FewClustersWarning
from evalmix.humans.coefficients import (
    alpha_moments,
    moment_totals,
    panel_stat,
    panel_totals,
    pooled_ratio,
    table_stat,
)
from evalmix.humans.ratings import Ratings
from evalmix.inference.bootstrap import cluster_weights
from evalmix.inference.sandwich import FEW_CLUSTERS, MIN_BOOTSTRAP_CLUSTERS, cluster_sums
from evalmix.inference.scale import bounded_interval
from evalmix.inference.totals import draws_interval, totals_delta

__all__ = ["PAIR_STATISTICS", "PANEL_STATISTICS", "MAX_CELLS", "MAX_BOOT_CELLS",
           "MAX_WEIGHTS", "AUTO_PAIRS", "stratum_context", "pair_rows", "panel_rows",
           "vs_humans_rows"]

#: Largest rank-correlation table (cells) of continuous scores given an interval, and
#: given a bootstrap interval (each replicate is a table; above it: delta method only).
MAX_CELLS = 2500
MAX_BOOT_CELLS = 400
#: Largest bootstrap count matrix (reps x clusters) held in memory.
MAX_WEIGHTS = 20_000_000
#: ``pairs="auto"`` computes every pair up to this many, else pairs with a human.
AUTO_PAIRS = 200
#: Statistics by kind of rating (pairs; panels drop the correlations and add Fleiss).
PAIR_STATISTICS: dict[str, tuple[str, ...]] = {
    "nominal": ("percent_agreement", "cohen_kappa", "gwet_ac1", "alpha_nominal"),
    "ordered": ("percent_agreement", "cohen_kappa", "kappa_linear", "kappa_quadratic",
                "gwet_ac1", "alpha_nominal", "alpha_ordinal", "alpha_interval", "spearman",
                "kendall"),
    "continuous": ("alpha_interval", "spearman", "kendall"),
}
PANEL_STATISTICS: dict[str, tuple[str, ...]] = {
    "nominal": ("percent_agreement", "fleiss_kappa", "gwet_ac1", "alpha_nominal"),
    "ordered": ("percent_agreement", "fleiss_kappa", "gwet_ac1", "alpha_nominal",
                "alpha_ordinal", "alpha_interval"),
    "continuous": ("alpha_interval",),
}

@dataclass
class _Ctx:
    """One stratum: the resampled cluster (or rating pattern) of each unit and the
    bootstrap counts shared by every statistic."""

    clusters: np.ndarray
    G: int
    W: np.ndarray | None
    clustered: bool
    level: float
    method: str
    rows: list[dict[str, Any]]
    no_boot: str = ""

    def sums(self, units: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-cluster totals of per-unit ``values`` and the units in each cluster."""
        codes = self.clusters[units]
        return (cluster_sums(values, codes, self.G),
                np.bincount(codes, minlength=self.G).astype(float))

    def table(self, units: np.ndarray, cells: np.ndarray, d: int
              ) -> tuple[np.ndarray, np.ndarray]:
        """Per-cluster agreement tables (flattened) from each unit's cell index."""
        codes = self.clusters[units]
        S = np.bincount(codes * d + cells, minlength=self.G * d).reshape(self.G, d)
        return S.astype(float), np.bincount(codes, minlength=self.G).astype(float)


def _emit(ctx: _Ctx, S: np.ndarray, m: np.ndarray, stats_: list[tuple[str, Any]],
          base: dict[str, Any], no_boot: str = "") -> None:
    """Rows for several statistics of the same per-cluster totals ``S`` (G, d)."""
    used = m > 0
    n_clusters = int(used.sum()) if ctx.clustered else int(m.sum())
    draws_T = None
    if ctx.method != "delta" and ctx.W is not None and not no_boot:
        # W counts clusters, or units of each rating pattern (then S holds pattern totals)
        per_draw = S[used] if ctx.clustered else S[used] / m[used, None]
        draws_T = ctx.W[:, used] @ per_draw
    for name, stat in stats_:
        row = {**base, "statistic": name}
        if ctx.method in ("both", "delta"):
            d = totals_delta(S[used], stat, clustered=ctx.clustered, counts=m[used],
                             level=ctx.level)
            lo, hi = d.lo, d.hi
            if name == "percent_agreement":  # a proportion: logit-scale interval
                lo, hi, _ = bounded_interval(d.estimate, d.se, d.df, ctx.level, 0.5)
            ctx.rows.append({**row, "method": "delta", "estimate": d.estimate, "se": d.se,
                             "lo": lo, "hi": hi, "df": d.df, "n_clusters": n_clusters,
                             "note": ""})
        if ctx.method in ("both", "bootstrap"):
            with np.errstate(divide="ignore", invalid="ignore"):
                est = float(np.real(stat(S.sum(axis=0)[None, :]))[0])
            if draws_T is None:
                se = lo = hi = float("nan")
                why = no_boot or ctx.no_boot
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    se, lo, hi = draws_interval(np.real(stat(draws_T)), ctx.level)
                why = ""
            ctx.rows.append({**row, "method": "bootstrap", "estimate": est, "se": se,
                             "lo": lo, "hi": hi, "df": float("nan"),
                             "n_clusters": n_clusters, "note": why})


def _no_interval(ctx: _Ctx, base: dict[str, Any], estimate: float, note: str) -> None:
    for m in (("delta", "bootstrap") if ctx.method == "both" else (ctx.method,)):
        ctx.rows.append({**base, "method": m, "estimate": estimate, "se": float("nan"),
                         "lo": float("nan"), "hi": float("nan"), "df": float("nan"),
                         "n_clusters": 0, "note": note})


def pair_rows(ctx: _Ctx, r: Ratings, scale: str, base: dict[str, Any], x: np.ndarray,
               y: np.ndarray, cx: np.ndarray, cy: np.ndarray, units: np.ndarray) -> None:
    names = PAIR_STATISTICS[scale]
    if scale != "continuous":
        k = len(r.categories)
        S, m = ctx.table(units, (cx * k + cy).astype(np.int64), k * k)
        _emit(ctx, S, m, [(n, table_stat(n, r.values, k)) for n in names], base)
        return
    S, m = ctx.sums(units, moment_totals(np.column_stack([x, y])))
    _emit(ctx, S, m, [("alpha_interval", alpha_moments)], base)
    ux, ix = np.unique(x, return_inverse=True)
    uy, iy = np.unique(y, return_inverse=True)
    ranks = [n for n in names if n != "alpha_interval"]
    if ux.size * uy.size > MAX_CELLS:
        for name in ranks:
            f = stats.spearmanr if name == "spearman" else stats.kendalltau
            _no_interval(ctx, {**base, "statistic": name}, float(f(x, y).statistic),
                         f"{ux.size} x {uy.size} distinct values: estimate only")
        return
    cells = ux.size * uy.size
    S, m = ctx.table(units, ix * uy.size + iy, cells)
    shape = (ux.size, uy.size)
    _emit(ctx, S, m, [(n, table_stat(n, np.zeros(1), 1, shape=shape)) for n in ranks], base,
          no_boot=(f"{ux.size} x {uy.size} distinct values: delta method only"
                   if cells > MAX_BOOT_CELLS else ""))


def _counts(codes: np.ndarray, k: int) -> np.ndarray:
    """Per-unit category counts of a (units, raters) code matrix (-1 missing)."""
    return np.stack([(codes == c).sum(axis=1) for c in range(k)], axis=1).astype(float)


def panel_rows(ctx: _Ctx, r: Ratings, scale: str, base: dict[str, Any],
                codes: np.ndarray, values: np.ndarray) -> None:
    units = np.flatnonzero((np.isfinite(values)).sum(axis=1) >= 2)
    if units.size < 2:
        return
    base = {**base, "n_units": int(units.size)}
    if scale == "continuous":
        S, m = ctx.sums(units, moment_totals(values[units]))
        _emit(ctx, S, m, [("alpha_interval", alpha_moments)], base)
        return
    k = len(r.categories)
    S, m = ctx.sums(units, panel_totals(_counts(codes[units], k)))
    _emit(ctx, S, m, [(n, panel_stat(n, r.values, k)) for n in PANEL_STATISTICS[scale]], base)


def vs_humans_rows(ctx: _Ctx, r: Ratings, stratum: str, raters: list[str],
               codes: np.ndarray) -> None:
    k = len(r.categories)
    human = np.array([r.kind_of(x) == "human" for x in raters])
    if human.sum() == 0:
        return
    H = _counts(np.where(human[None, :], codes, -1), k)
    total = H.sum(axis=1)
    for j, name in enumerate(raters):
        c = codes[:, j]
        own = 1.0 if human[j] else 0.0
        pairs = np.where(c >= 0, total - own, 0.0)
        units = np.flatnonzero(pairs > 0)
        if units.size < 2:
            continue
        match = H[units, c[units].astype(int)] - own
        S, m = ctx.sums(units, np.column_stack([match, pairs[units]]))
        base = {"stratum": stratum, "kind": "vs humans", "rater_1": name, "rater_2": "humans",
                "n_units": int(units.size)}
        _emit(ctx, S, m, [("percent_agreement", pooled_ratio)], base)


def stratum_context(r: Ratings, idx: pd.Index, values: np.ndarray, method: str, reps: int,
             level: float, rng: np.random.Generator, rows: list[dict[str, Any]],
             stratum: str) -> _Ctx:
    """Clusters of a stratum (units with identical ratings pooled when unclustered: an
    exact multinomial bootstrap of units) and its bootstrap counts."""
    if r.cluster:
        clusters = dense_codes(r.units.loc[idx, "cluster"].to_numpy())
        G = int(clusters.max()) + 1
        if G < FEW_CLUSTERS:
            warnings.warn(f"stratum {stratum or '(all)'}: {G} clusters of {r.cluster!r}; "
                          "agreement intervals may under-cover", FewClustersWarning,
                          stacklevel=3)
        ok = G >= MIN_BOOTSTRAP_CLUSTERS and reps * G <= MAX_WEIGHTS
        W = cluster_weights(G, reps, rng) if method != "delta" and ok else None
    else:
        _, clusters, size = np.unique(np.nan_to_num(values, nan=-1e300), axis=0,
                                      return_inverse=True, return_counts=True)
        clusters = clusters.reshape(-1)
        G = size.size
        ok = reps * G <= MAX_WEIGHTS
        W = (rng.multinomial(len(idx), size / size.sum(), size=reps).astype(float)
             if method != "delta" and ok else None)
    why = (f"fewer than {MIN_BOOTSTRAP_CLUSTERS} clusters: no bootstrap" if G <
           MIN_BOOTSTRAP_CLUSTERS else "too many clusters x reps: delta only")
    return _Ctx(clusters, G, W, bool(r.cluster), level, method, rows, why)
