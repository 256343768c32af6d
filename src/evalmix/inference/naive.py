"""Intervals that treat rows as independent: normal (Wald) and Wilson.

The naive standard error is the heteroskedasticity-robust HC1 sandwich with every row its
own cluster (``vcov_cluster(..., clusters=arange(n), type="CR1")`` = ``N/(N-k)`` times
HC0). For a mean it is exactly ``s / sqrt(n)`` (sample SD with ``n - 1``); for an
unpaired difference it is close to Welch's SE; for a logit coefficient it is the robust
(quasi-likelihood) SE. It ignores every cluster factor, which is the point of showing it.

References
----------
Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
inference. JASA 22, 209-212. doi:10.1080/01621459.1927.10502953
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

__all__ = ["naive_se", "normal_interval", "wilson_interval"]

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
    if not -PROPORTION_ROUNDOFF <= p <= 1 + PROPORTION_ROUNDOFF:
        raise EvalmixError(f"Wilson interval needs a proportion in [0, 1]; got {p}")
    p = min(max(float(p), 0.0), 1.0)  # a mean of 1s can come out as 1 + 2e-16
    if n <= 0:
        raise EvalmixError("Wilson interval needs at least one row")
    z = stats.norm.ppf(0.5 + level / 2)
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return float(centre - half), float(centre + half)
