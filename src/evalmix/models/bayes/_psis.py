"""Pareto-smoothed importance sampling of one vector of log weights.

The algorithm of ``arviz.psislw`` (and of the R package loo), for the one case the prior
sensitivity check needs: a single vector of draws, relative efficiency 1, normalised
weights. It is written here because ``import arviz`` costs ~2.7 s of a fresh process
(matplotlib, ``scipy.stats``, xarray, a Numba compile) and a Bayesian fit no longer
imports it otherwise (docs/models.md, *Latency*); the tests check it equals
``arviz.psislw`` to rounding.

References
----------
Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
importance sampling. JMLR 25(72): 1-58. arXiv:1507.02646
Zhang, J. and Stephens, M. A. (2009). A new and efficient estimation method for the
generalized Pareto distribution. Technometrics 51: 316-325. doi:10.1198/tech.2009.08017
"""

from __future__ import annotations

import numpy as np

__all__ = ["psis"]


def psis(log_weights: np.ndarray) -> tuple[np.ndarray, float]:
    """Smoothed, normalised log weights and the Pareto shape estimate ``k``.

    The largest ``ceil(min(S / 5, 3 sqrt(S)))`` weights are replaced by the expected
    order statistics of a generalized Pareto distribution fitted to them (Zhang and
    Stephens' empirical-Bayes estimate, with a weak prior pulling ``k`` to 0.5), capped
    at the largest raw weight; ``k = inf`` when the tail has at most 4 draws.

    Examples
    --------
    >>> lw, k = psis(np.random.default_rng(0).normal(size=1000))
    >>> round(float(np.exp(lw).sum()), 12), bool(k < 0.5)
    (1.0, True)
    """
    x = np.array(log_weights, dtype=float)
    n = x.size
    x -= x.max()
    order = np.argsort(x)
    cut = -int(np.ceil(min(n / 5.0, 3 * n ** 0.5))) - 1
    x_cut = max(x[order[cut]], np.log(np.finfo(float).tiny))
    (tail,) = np.nonzero(x > x_cut)
    k = np.inf
    if tail.size > 4:
        tail_order = np.argsort(x[tail])
        excess = (np.exp(x[tail]) - np.exp(x_cut))[tail_order]
        k, sigma = _gpd_fit(excess)
        if np.isfinite(k):
            probs = np.arange(0.5, tail.size) / tail.size
            x[tail[tail_order]] = np.log(_gpd_quantile(probs, k, sigma) + np.exp(x_cut))
            x[x > 0] = 0
    top = x.max()
    return x - (top + np.log(np.exp(x - top).sum())), float(k)


def _gpd_fit(excess: np.ndarray) -> tuple[float, float]:
    """(k, sigma) of a generalized Pareto distribution for sorted positive ``excess``
    (Zhang and Stephens 2009, with the prior of ``k`` of Vehtari et al.)."""
    n = excess.size
    m = 30 + int(n ** 0.5)
    b = 1 - np.sqrt(m / (np.arange(1, m + 1, dtype=float) - 0.5))
    b /= 3 * excess[int(n / 4 + 0.5) - 1]
    b += 1 / excess[-1]
    k = np.log1p(-b[:, None] * excess).mean(axis=1)
    profile = n * (np.log(-(b / k)) - k - 1)
    w = 1 / np.exp(profile - profile[:, None]).sum(axis=1)
    keep = w >= 10 * np.finfo(float).eps
    b, w = b[keep], w[keep] / w[keep].sum()
    b_post = np.sum(b * w)
    k_post = np.log1p(-b_post * excess).mean()
    sigma = -k_post / b_post
    return (n * k_post + 10 * 0.5) / (n + 10), sigma


def _gpd_quantile(probs: np.ndarray, k: float, sigma: float) -> np.ndarray:
    """Quantiles of the generalized Pareto distribution (``probs`` inside (0, 1))."""
    if sigma <= 0:
        return np.full_like(probs, np.nan)
    if abs(k) < np.finfo(float).eps:
        return -np.log1p(-probs) * sigma
    return np.expm1(-k * np.log1p(-probs)) / k * sigma
