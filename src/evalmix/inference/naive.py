"""Intervals that treat rows as independent: normal (Wald), Wilson and Clopper-Pearson.

The naive standard error is the heteroskedasticity-robust HC1 sandwich with every row its
own cluster (``vcov_cluster(..., clusters=arange(n), type="CR1")`` = ``N/(N-k)`` times
HC0). For a mean it is exactly ``s / sqrt(n)`` (sample SD with ``n - 1``); for an
unpaired difference it is close to Welch's SE; for a logit coefficient it is the robust
(quasi-likelihood) SE. It ignores every cluster factor, which is the point of showing it.

Wilson and Clopper-Pearson are defined where the Wald interval is not: at a proportion of
0 or 1 (40 of 40 correct gives Wilson [0.912, 1] and Clopper-Pearson [0.912, 1]), where
every row agrees and no standard error can be estimated.

References
----------
Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
inference. JASA 22, 209-212. doi:10.1080/01621459.1927.10502953
Clopper, C. J. & Pearson, E. S. (1934). The use of confidence or fiducial limits
illustrated in the case of the binomial. Biometrika 26, 404-413. doi:10.2307/2331986
Brown, L. D., Cai, T. T. & DasGupta, A. (2001). Interval estimation for a binomial
proportion. Statistical Science 16, 101-133. doi:10.1214/ss/1009213286
MacKinnon, J. G. & White, H. (1985). Some heteroskedasticity-consistent covariance matrix
estimators with improved finite sample properties. Journal of Econometrics 29, 305-325.
doi:10.1016/0304-4076(85)90158-7
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from evalmix.errors import EvalmixError
from evalmix.inference.sandwich import vcov_cluster

__all__ = ["naive_se", "normal_interval", "wilson_interval", "wilson_pvalue",
           "clopper_pearson_interval", "binomial_pvalue"]

#: proportions this far outside [0, 1] are floating-point round-off, clipped in Wilson
PROPORTION_ROUNDOFF = 1e-9


def naive_se(X: np.ndarray, resid: np.ndarray, *, target: int = 0,
             working_weights: np.ndarray | None = None) -> float:
    """HC1 standard error of coefficient ``target`` (rows independent).

    Examples
    --------
    >>> y = np.array([1., 2, 3, 4]); X = np.ones((4, 1))
    >>> bool(np.isclose(naive_se(X, y - y.mean()), y.std(ddof=1) / 2))
    True
    """
    n = np.asarray(X).shape[0]
    V = vcov_cluster(X, resid, np.arange(n), type="CR1", working_weights=working_weights)
    return float(np.sqrt(V[target, target]))


def normal_interval(estimate: float, se: float, level: float = 0.95) -> tuple[float, float]:
    """``estimate -+ z_{(1+level)/2} * se``."""
    z = stats.norm.ppf(0.5 + level / 2)
    return estimate - z * se, estimate + z * se


def wilson_interval(p: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``p`` from ``n`` independent rows.

    A proportion outcome (ties scored 1/2) is treated as ``n * p`` successes.

    Examples
    --------
    >>> lo, hi = wilson_interval(0.5, 100)
    >>> round(lo, 4), round(hi, 4)
    (0.4038, 0.5962)
    """
    p = _proportion(p, n, "Wilson")
    z = stats.norm.ppf(0.5 + level / 2)
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    # at p = 0 or 1 one bound is exactly 0 or 1 (centre -+ half is off by round-off)
    lo = 0.0 if p == 0 else float(centre - half)
    hi = 1.0 if p == 1 else float(centre + half)
    return lo, hi


def _proportion(p: float, n: float, what: str) -> float:
    if not -PROPORTION_ROUNDOFF <= p <= 1 + PROPORTION_ROUNDOFF:
        raise EvalmixError(f"{what} interval needs a proportion in [0, 1]; got {p}")
    if n <= 0:
        raise EvalmixError(f"{what} interval needs at least one row")
    return min(max(float(p), 0.0), 1.0)  # a mean of 1s can come out as 1 + 2e-16


def wilson_pvalue(p: float, n: float, null: float) -> float:
    """Two-sided p-value of the score test of ``null`` that the Wilson interval inverts
    (the interval excludes ``null`` exactly when this is below 1 - level).

    Examples
    --------
    >>> round(wilson_pvalue(0.6, 100, 0.5), 4)
    0.0455
    """
    if not 0 < null < 1:
        return float("nan")
    z = (_proportion(p, n, "Wilson") - null) / np.sqrt(null * (1 - null) / n)
    return float(2 * stats.norm.sf(abs(z)))


def clopper_pearson_interval(p: float, n: float, level: float = 0.95
                             ) -> tuple[float, float]:
    """Clopper-Pearson ("exact") interval for a proportion ``p`` of ``n`` independent rows:
    Beta quantiles of ``k = n * p`` successes (``k`` may be fractional with ties scored
    1/2, the usual continuous extension).

    Examples
    --------
    >>> lo, hi = clopper_pearson_interval(1.0, 40)
    >>> round(lo, 4), hi
    (0.9119, 1.0)
    """
    p = _proportion(p, n, "Clopper-Pearson")
    k, alpha = p * n, 1 - level
    lo = 0.0 if k <= 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def binomial_pvalue(p: float, n: float, null: float) -> float:
    """Two-sided exact binomial test of ``null`` (:func:`scipy.stats.binomtest`); NaN
    when ``n * p`` is not a whole number of successes."""
    k = _proportion(p, n, "Clopper-Pearson") * n
    if not 0 < null < 1 or abs(k - round(k)) > 1e-6 or abs(n - round(n)) > 1e-9:
        return float("nan")
    return float(stats.binomtest(int(round(k)), int(round(n)), null).pvalue)
