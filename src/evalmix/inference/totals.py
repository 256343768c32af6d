"""Intervals for a smooth function of cluster totals: delta method and cluster bootstrap.

Many statistics are a smooth function ``f(T)`` of a vector of totals ``T = sum_g S_g``
over clusters ``g`` (an agreement table, Krippendorff's coincidence matrix, the moments
of a set of ratings): percent agreement, Cohen's kappa, Gwet's AC1, Krippendorff's alpha,
Kendall's tau-b and Spearman's rho of a contingency table. Two intervals follow from
the per-cluster totals ``S`` (G x d) alone:

* **delta** (linearisation): the influence of cluster ``g`` is ``grad f(T) . (S_g -
  T/G)``; ``var = c sum_g IF_g^2`` with ``c = G/(G-1)`` when the clusters are real
  clusters (the CR1 factor of a mean, :func:`evalmix.inference.sandwich.cr1_factor`) and
  ``c = 1`` when each unit is its own cluster. For units drawn independently this is the
  multinomial delta method, e.g. the large-sample variance of Cohen's kappa of Fleiss,
  Cohen & Everitt (1969). The gradient is taken by complex step (Squire & Trapp 1998),
  exact to rounding, so ``f`` must be written with complex-safe operations.
* **bootstrap**: a replicate's totals are ``W @ S`` with ``W`` the multinomial cluster
  counts of :func:`evalmix.inference.bootstrap.cluster_weights`; one ``W`` serves every
  statistic of a call, so all of them are resampled together.

References
----------
Fleiss, J. L., Cohen, J. & Everitt, B. S. (1969). Large sample standard errors of kappa
and weighted kappa. Psychological Bulletin 72, 323-327. doi:10.1037/h0028106
Squire, W. & Trapp, G. (1998). Using complex variables to estimate derivatives of real
functions. SIAM Review 40, 110-112. doi:10.1137/S003614459631241X
Field, C. A. & Welsh, A. H. (2007). Bootstrapping clustered data. JRSS B 69, 369-390.
doi:10.1111/j.1467-9868.2007.00593.x
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalmix.inference.bootstrap import percentile_interval
from evalmix.inference.sandwich import cr1_factor
from evalmix.inference.scale import t_quantile

__all__ = ["Statistic", "TotalsInterval", "totals_delta", "totals_draws", "draws_interval"]

#: ``f``: totals (r, d) -> statistics (r,), vectorised over the leading axis and
#: complex-safe (the delta method differentiates it by complex step).
Statistic = Callable[[np.ndarray], np.ndarray]
#: Complex step, relative to the largest total (any tiny step is exact to rounding).
_STEP = 1e-30


@dataclass(frozen=True)
class TotalsInterval:
    """A statistic of cluster totals with its delta-method SE and interval."""

    estimate: float
    se: float
    lo: float
    hi: float
    df: float
    n_clusters: int


def _influence(stat: Statistic, total: np.ndarray, deviations: np.ndarray) -> np.ndarray:
    """``grad stat(total) . deviations[g]`` for every row, by complex step: one
    evaluation per row, or per coordinate when there are fewer coordinates."""
    g, d = deviations.shape
    h = _STEP * max(float(np.max(np.abs(total))), 1.0)
    base = total.astype(complex)
    if d < g:
        grad = np.asarray(stat(base + 1j * h * np.eye(d))).imag / h
        return deviations @ grad
    return np.asarray(stat(base + 1j * h * deviations)).imag / h


def totals_delta(S: np.ndarray, stat: Statistic, *, clustered: bool,
                 counts: np.ndarray | None = None, level: float = 0.95) -> TotalsInterval:
    """Delta-method SE and interval of ``stat(sum_g S_g)`` from per-cluster totals.

    Parameters
    ----------
    S : (G, d) array
        Totals of each cluster (or of each unit when ``clustered`` is False).
    stat : callable
        ``(r, d) -> (r,)``, vectorised and complex-safe.
    clustered : bool
        True: ``G/(G-1)`` small-sample factor and a ``t(G-1)`` reference; False: units
        are independent (the multinomial delta method, normal reference).
    counts : (G,) array, optional
        Unclustered only: row ``g`` of ``S`` is the total of ``counts[g]`` identical
        units (a pattern of ratings), so the variance sums over units, not rows.
    level : float
        Confidence level.

    Examples
    --------
    >>> S = np.array([[1., 1], [0, 1], [1, 1]])   # a proportion: (successes, trials)
    >>> r = totals_delta(S, lambda t: t[:, 0] / t[:, 1], clustered=False)
    >>> round(r.estimate, 4), round(r.se, 4)
    (0.6667, 0.2722)
    """
    S = np.asarray(S, dtype=float)
    G = S.shape[0]
    m = np.ones(G) if counts is None or clustered else np.asarray(counts, dtype=float)
    n = float(m.sum())
    total = S.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = float(np.real(stat(total[None, :]))[0])
        if not np.isfinite(est) or n < 2:
            nan = float("nan")
            return TotalsInterval(est, nan, nan, nan, nan, G)
        infl = _influence(stat, total, S / m[:, None] - total / n)
    factor = cr1_factor(G, G, 1) if clustered else 1.0
    se = float(np.sqrt(factor * np.sum(m * infl**2)))
    df = float(G - 1) if clustered else float("inf")
    q = t_quantile(level, df)
    return TotalsInterval(est, se, est - q * se, est + q * se, df, G)


def totals_draws(S: np.ndarray, stat: Statistic, W: np.ndarray) -> np.ndarray:
    """Bootstrap replicates ``stat(W @ S)`` for resampling counts ``W`` (reps, G).

    Examples
    --------
    >>> S = np.array([[1., 1], [0, 1]]); W = np.array([[2., 0], [1, 1]])
    >>> totals_draws(S, lambda t: t[:, 0] / t[:, 1], W).tolist()
    [1.0, 0.5]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.real(stat(W @ np.asarray(S, dtype=float)))


def draws_interval(draws: np.ndarray, level: float) -> tuple[float, float, float]:
    """``(se, lo, hi)`` of bootstrap draws: SD and percentile interval (R boot's
    ``perc``), NaN when fewer than 2 draws are finite."""
    finite = draws[np.isfinite(draws)]
    if finite.size < 2:
        return float("nan"), float("nan"), float("nan")
    lo, hi = percentile_interval(finite, level)
    return float(np.std(finite, ddof=1)), float(lo), float(hi)
