"""Leaderboards: every pairwise difference between conditions or models.

Each condition's mean score (scores tables) or each model's win rate (pairwise tables,
counting a model's comparisons as ``model_a`` and as ``model_b``) is a coefficient of a
cell-means regression ``y ~ 0 + group``; every difference of two of them gets

- a cluster-robust standard error (CR0/CR1/CR2/CR3), a t test (CR2: Satterthwaite df as
  in ``clubSandwich``; otherwise G - 1 df), and Holm-adjusted p-values;
- a simultaneous interval and a single-step adjusted p-value by the max-t method, with
  the critical value from a pairs cluster bootstrap of all differences at once
  (studentized by the CR1 standard error recomputed in every resample).

For the cell-means design the CR2 adjustment ``(I - H_gg)^{-1/2}`` has a closed form:
within cluster ``g`` and group ``m``, ``H_gg`` is ``J / n_m`` on the ``N_gm`` rows of the
cell, so the adjusted residual sum of the cell is ``E_gm / sqrt(1 - N_gm / n_m)``.

References
----------
Bell, R. M. & McCaffrey, D. F. (2002). Bias reduction in standard errors for linear
regression with multi-stage samples. Survey Methodology 28, 169-181.
Pustejovsky, J. E. & Tipton, E. (2018). Small-sample methods for cluster-robust variance
estimation and hypothesis testing in fixed effects models. Journal of Business & Economic
Statistics 36, 672-683. doi:10.1080/07350015.2016.1247004
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian
Journal of Statistics 6, 65-70.
Romano, J. P. & Wolf, M. (2005). Exact and approximate stepdown methods for multiple
hypothesis testing. JASA 100, 94-108. doi:10.1198/016214504000000539
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.data.table import check_table
from evalmix.errors import (
    EvalmixError,
    FewClustersWarning,
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
)
from evalmix.inference.bootstrap import MIN_REPS, cluster_weights, norm_inter
from evalmix.inference.ranking import pairwise_satterthwaite
from evalmix.inference.sandwich import (
    CR_TYPES,
    MIN_BOOTSTRAP_CLUSTERS,
    CRType,
    cluster_codes,
    cr1_factor,
)
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import RESULT_COLUMNS

__all__ = ["compare_all", "ComparisonResult", "holm", "benjamini_hochberg", "cell_means_vcov"]

Method = CRType
METHODS: tuple[str, ...] = CR_TYPES
CHUNK_ENTRIES = 4_000_000

#: Columns of :meth:`ComparisonResult.tidy`: the result contract's
#: :data:`~evalmix.tidy.RESULT_COLUMNS`, then the comparison's own.
COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "group_a", "group_b", "estimate_a", "estimate_b", "t", "p_value", "p_holm", "se_cr1",
    "crit", "sim_lo", "sim_hi", "p_maxt", "se_boot", "n_obs", "n_failed",
)


@dataclass(frozen=True, eq=False)
class ComparisonResult:
    """Every pairwise difference of :func:`compare_all`, one row per pair.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per pair ``group_b - group_a``, columns :data:`COLUMNS` (see
        :func:`compare_all`).
    estimand, method, cluster : str
    level : float
    n_clusters, reps : int
    seed : int, str or None
    crit : float
        Max-t critical value of the simultaneous intervals (NaN with too few clusters).
    """

    table: pd.DataFrame
    estimand: str
    method: str
    cluster: str
    level: float
    n_clusters: int
    reps: int
    seed: int | str | None
    crit: float

    def tidy(self) -> pd.DataFrame:
        """The pairs (a copy), columns :data:`COLUMNS`."""
        return self.table.copy()

    def __str__(self) -> str:
        head = (f"{len(self.table)} pairwise differences of {self.estimand} ({self.method}, "
                f"cluster: {self.cluster or 'none'}, {self.n_clusters} clusters); "
                f"{self.level:.0%} intervals per pair and simultaneous (max-t, critical "
                f"value {self.crit:.3f})")
        show = self.table[["contrast", "estimate", "lo", "hi", "sim_lo", "sim_hi", "p_holm"]]
        return head + "\n" + show.to_string(index=False, float_format="{:.4g}".format)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    k = p.size
    adj = np.minimum(1.0, np.maximum.accumulate((k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adj
    return out


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (false discovery rate), as R's
    ``p.adjust(p, "BH")``; NaN stays NaN and is not counted.

    Examples
    --------
    >>> benjamini_hochberg(np.array([0.01, 0.04, 0.03])).round(3).tolist()
    [0.03, 0.04, 0.04]
    """
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    k = q.size
    if k == 0:
        return out
    order = np.argsort(q)[::-1]
    adj = np.minimum(1.0, np.minimum.accumulate(q[order] * k / np.arange(k, 0, -1)))
    res = np.empty(k)
    res[order] = adj
    out[ok] = res
    return out


def _cells(y: np.ndarray, group: np.ndarray, codes: np.ndarray, n_groups: int,
           n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """(G, M) row counts and sums of y per cluster x group cell."""
    idx = codes * n_groups + group
    size = n_clusters * n_groups
    count = np.bincount(idx, minlength=size).reshape(n_clusters, n_groups).astype(float)
    total = np.bincount(idx, weights=y, minlength=size).reshape(n_clusters, n_groups)
    return count, total


def cell_means_vcov(count: np.ndarray, total: np.ndarray, *, method: Method = "CR2"
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group means, their cluster-robust covariance and the per-cell CR factors.

    Parameters
    ----------
    count, total : (G, M) arrays
        Rows and sum of the outcome in each cluster x group cell.
    method : {"CR0", "CR1", "CR2", "CR3"}
        Cluster-robust covariance (small-sample correction) of the cell means.

    Returns
    -------
    means : (M,) array
    vcov : (M, M) array
    factor : (G, M) array
        Multiplier of each cell's residual sum (1 for CR0/CR1,
        ``(1 - N_gm / n_m)^{-1/2}`` for CR2, ``(1 - N_gm / n_m)^{-1}`` for CR3; 0 where a
        cluster holds a whole group, the pseudo-inverse).
    """
    check_option("method", method, METHODS)
    g, m = count.shape
    n_m = count.sum(axis=0)
    if (n_m == 0).any():
        raise EvalmixError("a group has no rows")
    means = total.sum(axis=0) / n_m
    resid = total - count * means
    share = count / n_m
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "CR2":
            factor = np.where(share < 1 - 1e-12, 1 / np.sqrt(1 - share), 0.0)
        elif method == "CR3":
            factor = np.where(share < 1 - 1e-12, 1 / (1 - share), 0.0)
        else:
            factor = np.ones_like(share)
    scores = resid * factor / n_m
    vcov = scores.T @ scores
    if method == "CR1":
        n = count.sum()
        vcov *= cr1_factor(g, n, m)
    return means, vcov, factor


def _stack(table, cluster: str | Sequence[str] | None):  # noqa: ANN001, ANN202
    """Long arrays (y, group labels, cluster codes) for the cell-means regression."""
    roles = table.check_cluster(cluster)
    if len(roles) > 1:
        raise InvalidOptionError(
            f"compare_all clusters by one factor, got {list(roles)}; pick the factor that "
            "dominates the design effect (see evalmix.design_effect) or use "
            "evalmix.interval with a list of roles for multiway clustering")
    if roles:
        table.check_pairs_within(roles[0])
        codes = np.asarray(table.codes(roles[0]))
    elif table.kind == "pairwise":
        codes = np.asarray(table.pair_codes())  # AB/BA records of a comparison together
    else:
        codes = np.arange(table.n_obs)
    data = table.data
    if table.kind == "scores":
        if not table.has_condition:
            raise EvalmixError("compare_all needs a condition column in a scores table "
                               "(evalmix.read(..., condition='model'))")
        return "difference", table.y, data["condition"].astype(str).to_numpy(), codes, roles
    y_a = table.y
    if table.ties == "separate":
        y_b = (data["verdict"].to_numpy() == "b").astype(float)
    else:
        y_b = 1.0 - y_a
    labels = np.concatenate([data["model_a"].astype(str).to_numpy(),
                             data["model_b"].astype(str).to_numpy()])
    return ("win_rate", np.concatenate([y_a, y_b]), labels, np.concatenate([codes, codes]),
            roles)


def _bootstrap_maxt(count: np.ndarray, total: np.ndarray, pairs: np.ndarray, est: np.ndarray,
                    reps: int, level: float, rng: np.random.Generator):  # noqa: ANN202
    """Max-|t| critical value from a pairs cluster bootstrap of all differences."""
    g, m = count.shape
    C = np.zeros((len(pairs), m))
    C[np.arange(len(pairs)), pairs[:, 1]] = 1.0
    C[np.arange(len(pairs)), pairs[:, 0]] = -1.0
    chunk = max(1, CHUNK_ENTRIES // (g * m))
    diffs = np.empty((reps, len(pairs)))
    tstat = np.empty((reps, len(pairs)))
    n_cell = count.sum(axis=1)
    for a in range(0, reps, chunk):
        W = cluster_weights(g, min(chunk, reps - a), rng)
        nw = W @ count
        with np.errstate(divide="ignore", invalid="ignore"):
            mw = (W @ total) / nw
            s = (total[None] - count[None] * mw[:, None, :]) / nw[:, None, :]  # (B, G, M)
            s = np.nan_to_num(s, nan=0.0, posinf=0.0, neginf=0.0)
            # per-resample meat of the group means: sum_g w_g s_g s_g' (copies = clusters)
            Q = np.matmul((s * W[:, :, None]).transpose(0, 2, 1), s)  # (B, M, M)
            i, j = pairs[:, 0], pairs[:, 1]
            var = Q[:, i, i] + Q[:, j, j] - 2 * Q[:, i, j]
            n_star = W @ n_cell
            var *= cr1_factor(g, n_star, m)[:, None]
            d = mw @ C.T
            diffs[a:a + W.shape[0]] = d
            tstat[a:a + W.shape[0]] = (d - est) / np.sqrt(var)
    ok = np.all(np.isfinite(tstat), axis=1)
    maxabs = np.max(np.abs(tstat[ok]), axis=1)
    crit = float(norm_inter(maxabs, np.array([level]))[0])
    return crit, maxabs, diffs[ok].std(axis=0, ddof=1), int((~ok).sum())


def compare_all(
    table,  # noqa: ANN001
    *,
    cluster: str | Sequence[str] | None = None,
    level: float = 0.95,
    reps: int = 2000,
    seed: SeedLike = None,
    method: Method = "CR2",
) -> ComparisonResult:
    """Every pairwise difference between conditions (scores) or models (pairwise).

    Parameters
    ----------
    table : EvalTable
        The eval table (from :func:`evalmix.read`).
    cluster : str or None
        One cluster factor. ``None`` treats rows as independent (pairwise tables with an
        order column: the AB and BA records of a comparison form one cluster).
    level : float
        Confidence level of the per-comparison and simultaneous intervals.
    reps : int
        Cluster bootstrap resamples for the simultaneous (max-t) intervals.
    seed : int or numpy.random.Generator
        Seeds the bootstrap resamples.
    method : {"CR0", "CR1", "CR2", "CR3"}
        Standard error of the per-comparison intervals and tests (CR2 with Satterthwaite
        df; the others with G - 1 df).

    Returns
    -------
    ComparisonResult
        ``.tidy()``: one row per pair ``group_b - group_a`` (groups in sorted order),
        columns :data:`COLUMNS`: ``estimate``, ``se``, ``df``, ``t``, ``p_value``, ``p_holm``
        (Holm), ``lo``/``hi`` (per comparison, ``method``), ``sim_lo``/``sim_hi``
        (simultaneous at ``level``: estimate -+ ``crit`` x ``se_cr1``, ``crit`` the
        bootstrap quantile of max |t*|), ``p_maxt`` (single-step max-t adjusted p),
        ``se_boot`` (bootstrap SD of the difference).

    References
    ----------
    Pustejovsky & Tipton (2018), doi:10.1080/07350015.2016.1247004; Holm (1979);
    Romano & Wolf (2005), doi:10.1198/016214504000000539.

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> table = pairwise_judges(n_scenarios=30, seed=1).table()
    >>> out = compare_all(table, cluster="scenario", reps=500, seed=1).tidy()
    >>> list(out["contrast"])
    ['reference - control', 'treatment - control', 'treatment - reference']
    """
    table = check_table(table, "compare_all")
    check_option("method", method, METHODS)
    level = check_level(level)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    estimand, y, labels, codes, roles = _stack(table, cluster)
    group, levels = pd.factorize(labels, sort=True)
    m = len(levels)
    if m < 2:
        raise EvalmixError(f"compare_all needs at least 2 conditions/models, found {m}")
    codes, g = cluster_codes(codes)
    if g < 2:
        raise EvalmixError("compare_all needs at least 2 clusters")
    count, total = _cells(y, group, codes, m, g)
    means, vcov, factor = cell_means_vcov(count, total, method=method)
    _, vcov1, _ = cell_means_vcov(count, total, method="CR1")
    pairs = np.array([(i, j) for i in range(m) for j in range(i + 1, m)])
    C = np.zeros((len(pairs), m))
    C[np.arange(len(pairs)), pairs[:, 1]] = 1.0
    C[np.arange(len(pairs)), pairs[:, 0]] = -1.0
    est = C @ means
    se = np.sqrt(np.einsum("pi,ij,pj->p", C, vcov, C))
    se1 = np.sqrt(np.einsum("pi,ij,pj->p", C, vcov1, C))
    if method == "CR2":
        df = pairwise_satterthwaite(count, factor, pairs[:, 0], pairs[:, 1])
    else:
        df = np.full(len(pairs), g - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = est / se
    p = 2 * stats.t.sf(np.abs(t), df)
    q = stats.t.ppf(0.5 + level / 2, df)
    crit, p_maxt, se_boot, n_failed = (np.nan, np.full(len(pairs), np.nan),
                                       np.full(len(pairs), np.nan), 0)
    rng, seed = seeded_rng(seed)
    if g < MIN_BOOTSTRAP_CLUSTERS:
        warnings.warn(f"only {g} clusters: no simultaneous bootstrap intervals (the "
                      f"cluster bootstrap needs at least {MIN_BOOTSTRAP_CLUSTERS}); use the Holm "
                      "p-values, or report per-cluster results", FewClustersWarning,
                      stacklevel=2)
    else:
        crit, maxabs, se_boot, n_failed = _bootstrap_maxt(
            count, total, pairs, est, reps, level, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = np.abs(est / se1)
        p_maxt = np.array([np.mean(maxabs >= x) for x in t1])
    out = pd.DataFrame({
        "estimand": estimand,
        "contrast": [f"{levels[j]} - {levels[i]}" for i, j in pairs],
        "group_a": [levels[i] for i, _ in pairs], "group_b": [levels[j] for _, j in pairs],
        "estimate_a": means[pairs[:, 0]], "estimate_b": means[pairs[:, 1]],
        "estimate": est, "se": se, "df": df, "t": t, "p_value": p, "p_holm": holm(p),
        "lo": est - q * se, "hi": est + q * se, "se_cr1": se1, "crit": crit,
        "sim_lo": est - crit * se1, "sim_hi": est + crit * se1, "p_maxt": p_maxt,
        "se_boot": se_boot, "level": level, "method": method,
        "cluster": roles[0] if roles else "", "n_clusters": g, "n_obs": table.n_obs,
        "reps": reps, "seed": seed, "n_failed": n_failed, "scale": "identity",
        "note": "",
    }, columns=list(COLUMNS))
    return ComparisonResult(table=out, estimand=estimand, method=method,
                            cluster=roles[0] if roles else "", level=level, n_clusters=g,
                            reps=reps, seed=seed, crit=float(crit))
