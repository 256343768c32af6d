"""Power of the t (or z) test from its noncentrality, and the noncentrality a target
power needs: the primitive behind :func:`evalmix.plan.power`, :func:`evalmix.plan.mde`
and the minimum detectable effect of a paired comparison
(:func:`evalmix.compare_runs`): ``solve_ncp(power, df, level) * se``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import optimize, stats

__all__ = ["power_from_ncp", "solve_ncp"]


def power_from_ncp(
    ncp: Any, df: Any, level: Any, alternative: str = "two-sided"
) -> np.ndarray:
    """Power of a t test (``df`` finite) or z test (``df = inf``) with noncentrality ``ncp``.

    Two-sided: ``P(T' > t_c) + P(T' < -t_c)`` with ``T' ~ nct(df, ncp)`` and
    ``t_c = t_{1 - (1 - level)/2, df}``; one-sided tests use ``t_{level, df}``.
    """
    ncp, df, level = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (ncp, df, level)))
    alpha = 1 - level
    two = alternative == "two-sided"
    q = 1 - alpha / 2 if two else 1 - alpha
    sign = -1.0 if alternative == "smaller" else 1.0
    out = np.empty(ncp.shape, dtype=float)
    normal = ~np.isfinite(df)
    if normal.any():
        zc = stats.norm.ppf(q[normal])
        d = sign * ncp[normal]
        out[normal] = stats.norm.sf(zc - d) + (stats.norm.cdf(-zc - d) if two else 0.0)
    t = ~normal
    if t.any():
        tc = stats.t.ppf(q[t], df[t])
        d = sign * ncp[t]
        with np.errstate(all="ignore"):
            upper = stats.nct.sf(tc, df[t], d)
            lower = stats.nct.cdf(-tc, df[t], d) if two else np.zeros_like(d)
        # scipy's noncentral t returns NaN for a negligible far tail at large |ncp|;
        # the normal tail is as negligible there
        upper = np.where(np.isfinite(upper), upper, stats.norm.sf(tc - d))
        lower = np.where(np.isfinite(lower), lower, stats.norm.cdf(-tc - d) if two else 0.0)
        out[t] = upper + lower
    return out


def solve_ncp(target: float, df: float, level: float, alternative: str) -> float:
    """The noncentrality at which the test reaches ``target`` power."""
    if not (1 - level) < target < 1:  # power at ncp = 0 is the size 1 - level
        return float("nan")

    sign = -1.0 if alternative == "smaller" else 1.0

    def f(d: float) -> float:
        return float(power_from_ncp(sign * d, df, level, alternative)[()] - target)

    hi = 1.0
    while f(hi) < 0:
        hi *= 2
        if hi > 1e6:
            return float("nan")
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12))
