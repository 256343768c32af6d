"""Paired differences of two runs on the same samples: the arrays behind
:func:`evalmix.compare_runs`.

Each aligned sample x epoch gives one difference ``d = y_b - y_a``; the estimate is
their mean, a regression of ``d`` on an intercept, so its standard error is the
cluster-robust one of :func:`~evalmix.inference.sandwich.vcov_cluster` with the sample
(or a grouping field) as the cluster and the epochs as replicates inside it: CR2 with
clubSandwich's Satterthwaite df, or CR1 with ``G - 1`` df (which equals Inspect's
``stderr(cluster=)`` and, with one row per cluster, the paired t test's standard error).

For binary scores with one epoch per sample, McNemar's exact test conditions on the
discordant pairs (``b`` = A right and B wrong, ``c`` = the reverse): under no
difference ``b ~ Binomial(b + c, 1/2)``. The paired cluster bootstrap resamples
clusters and gives a percentile interval and the two-sided achieved significance level
of the null-shifted draws.

References
----------
McNemar, Q. (1947). Note on the sampling error of the difference between correlated
proportions or percentages. Psychometrika 12, 153-157. doi:10.1007/BF02295996
Dietterich, T. G. (1998). Approximate statistical tests for comparing supervised
classification learning algorithms. Neural Computation 10, 1895-1923.
Efron, B. & Tibshirani, R. J. (1993). An Introduction to the Bootstrap, section 16.4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from evalmix.inference.bootstrap import cluster_weights, norm_inter
from evalmix.inference.naive import binomial_pvalue
from evalmix.inference.power_t import solve_ncp
from evalmix.inference.sandwich import CRType, cluster_codes, satterthwaite_df, vcov_cluster

__all__ = ["PairedSE", "paired_se", "paired_bootstrap", "mcnemar_pvalue", "unpaired_z",
           "detectable_difference"]

#: resamples per chunk of the paired bootstrap (bounds memory at reps x clusters)
_CHUNK_ENTRIES = 2_000_000


@dataclass(frozen=True)
class PairedSE:
    """The mean paired difference, its cluster-robust SE and t reference df."""

    estimate: float
    se: float
    df: float
    n_clusters: int


def paired_se(d: np.ndarray, clusters: np.ndarray, *, type: CRType = "CR2") -> PairedSE:
    """Mean of the differences ``d`` with its cluster-robust standard error.

    Parameters
    ----------
    d : (n,) array
        Paired differences, one per aligned sample x epoch.
    clusters : (n,) array
        Cluster of each difference (the sample id, or a grouping field).
    type : {"CR0", "CR1", "CR2", "CR3"}
        Small-sample correction; CR2 gets Satterthwaite df, the others ``G - 1``.

    Examples
    --------
    >>> d = np.array([1., 0, -1, 1, 0, 1])
    >>> r = paired_se(d, np.arange(6), type="CR1")
    >>> bool(np.isclose(r.se, d.std(ddof=1) / np.sqrt(6)))   # the paired t test's SE
    True
    """
    d = np.asarray(d, dtype=float)
    codes, g = cluster_codes(np.asarray(clusters))
    X = np.ones((d.size, 1))
    est = float(d.mean())
    V = vcov_cluster(X, d - est, codes, type=type)
    df = float(satterthwaite_df(X, codes, type="CR2")[0]) if type == "CR2" else g - 1.0
    return PairedSE(estimate=est, se=float(np.sqrt(V[0, 0])), df=df, n_clusters=g)


def paired_bootstrap(d: np.ndarray, clusters: np.ndarray, *, reps: int, level: float,
                     rng: np.random.Generator) -> tuple[float, float, float, float]:
    """Paired cluster bootstrap of the mean difference: ``(lo, hi, p_value, se_boot)``.

    Clusters are drawn with replacement (all epochs of a sample together); the interval
    is the percentile one (quantiles as R's ``boot``), the p-value the share of
    null-shifted draws ``|d* - d| >= |d|``, counted as ``(1 + k) / (1 + reps)``.
    """
    d = np.asarray(d, dtype=float)
    codes, g = cluster_codes(np.asarray(clusters))
    total = np.bincount(codes, weights=d, minlength=g)
    count = np.bincount(codes, minlength=g).astype(float)
    est = total.sum() / count.sum()
    draws = np.empty(reps)
    chunk = max(1, _CHUNK_ENTRIES // max(g, 1))
    for a in range(0, reps, chunk):
        W = cluster_weights(g, min(chunk, reps - a), rng)
        draws[a:a + W.shape[0]] = (W @ total) / (W @ count)
    alpha = 1 - level
    lo, hi = norm_inter(draws, np.array([alpha / 2, 1 - alpha / 2]))
    extreme = np.abs(draws - est) >= abs(est) - 1e-12 * max(1.0, abs(est))
    p = (1 + int(extreme.sum())) / (1 + reps)
    return float(lo), float(hi), float(min(p, 1.0)), float(draws.std(ddof=1))


def mcnemar_pvalue(b: int, c: int) -> float:
    """McNemar's exact (conditional binomial) two-sided p-value from the discordant
    counts ``b`` and ``c``; 1 when there are none.

    Equals ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True).pvalue``
    (tests/compare/test_compare_runs.py).

    Examples
    --------
    >>> round(mcnemar_pvalue(10, 2), 4)
    0.0386
    """
    n = int(b) + int(c)
    if n == 0:
        return 1.0
    return binomial_pvalue(int(b) / n, n, 0.5)


def unpaired_z(y_a: np.ndarray, y_b: np.ndarray) -> tuple[float, float]:
    """lm-eval's ``scripts/model_comparator.py`` test: ``(mean_b - mean_a) /
    sqrt(se_a^2 + se_b^2)`` with each SE ``sd(ddof=1) / sqrt(n)`` (lm-eval's
    ``mean_stderr``), two-sided normal p: ``(se, p_value)``. It ignores the pairing; kept
    as the row that shows what the paired tests gain (lm-eval issue #3831)."""
    a, b = np.asarray(y_a, dtype=float), np.asarray(y_b, dtype=float)
    se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
    if not se > 0:
        return se, float("nan")
    z = (b.mean() - a.mean()) / se
    return se, float(2 * stats.norm.sf(abs(z)))


def detectable_difference(se: float, df: float, *, level: float, power: float) -> float:
    """The minimum detectable difference of a two-sided test at ``level`` with this
    standard error and df: ``ncp * se``, ``ncp`` where the noncentral t test reaches
    ``power`` (:func:`~evalmix.inference.power_t.solve_ncp`, as
    :func:`evalmix.plan.mde`)."""
    if not (np.isfinite(se) and se > 0 and df > 0):
        return float("nan")
    return solve_ncp(power, df, level, "two-sided") * se
