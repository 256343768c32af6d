"""Intervals for proportions that stay in [0, 1]: the clustered SE on the logit scale.

A Wald interval ``p -+ t se`` for a win rate or an accuracy leaves [0, 1] near the
bounds (0.996 [0.987, 1.004]) and is symmetric where the sampling distribution of a
proportion is not. The interval here keeps the clustered standard error and its degrees
of freedom and moves them to the log-odds scale by the delta method::

    se_logit = se / (p (1 - p)),   [lo, hi] = expit(logit(p) -+ t se_logit)

so it is the same test as the Wald interval near p = 1/2 and respects the bounds
everywhere. At p = 0 or 1 there is no variation to estimate a clustered SE from: the
interval is not estimable (the report says so instead of printing [1.000, 1.000]).
Its coverage on crossed, nested and one-way designs is in ``docs/coverage.md``.

References
----------
Agresti, A. (2013). Categorical Data Analysis, 3rd ed., sec. 3.1 (logit intervals for a
proportion). Wiley. ISBN 978-0-470-46363-5
Korn, E. L. & Graubard, B. I. (1998). Confidence intervals for proportions with small
expected number of positive counts estimated from survey data. Survey Methodology 24(2),
193-201. (intervals for clustered proportions that respect the bounds)
"""

from __future__ import annotations

from typing import get_args

import numpy as np
from scipy import special
from scipy.special import expit, logit

from evalmix.vocabulary import Scale

__all__ = ["SCALES", "Scale", "bounded_interval", "t_quantile", "t_pvalue"]

SCALES: tuple[str, ...] = get_args(Scale)


def t_quantile(level: float, df: float) -> float:
    """Two-sided critical value: ``t_{df}`` (normal when ``df`` is infinite).

    The special functions behind ``scipy.stats.t.ppf`` / ``norm.ppf`` (same values to
    the last bit), called directly: ``stats.t.ppf`` spends ~250 us checking its
    arguments, and a report asks thousands of times.

    Examples
    --------
    >>> round(t_quantile(0.95, 10), 6), round(t_quantile(0.95, float("inf")), 6)
    (2.228139, 1.959964)
    """
    p = 0.5 + level / 2
    return float(special.stdtrit(df, p) if np.isfinite(df) else special.ndtri(p))


def t_pvalue(t: float, df: float) -> float:
    """Two-sided p-value of ``t`` under ``t_{df}`` (normal when ``df`` is infinite).

    Examples
    --------
    >>> round(t_pvalue(2.228139, 10), 6)
    0.05
    """
    x = -abs(t)
    return float(2 * (special.stdtr(df, x) if np.isfinite(df) else special.ndtr(x)))


def bounded_interval(estimate: float, se: float, df: float, level: float,
                     null: float) -> tuple[float, float, float]:
    """Logit-scale interval and p-value for a proportion ``estimate`` with Wald ``se``.

    Returns ``(lo, hi, p_value)``; all NaN when ``estimate`` is 0 or 1 or ``se`` is not
    positive (not estimable).

    Examples
    --------
    >>> lo, hi, p = bounded_interval(0.99, 0.01, 40.0, 0.95, 0.5)
    >>> 0 < lo < 0.99 < hi < 1
    True
    """
    if not (0 < estimate < 1) or not se > 0 or not np.isfinite(se):
        return float("nan"), float("nan"), float("nan")
    q = t_quantile(level, df)
    se_l = se / (estimate * (1 - estimate))
    centre = float(logit(estimate))
    lo, hi = float(expit(centre - q * se_l)), float(expit(centre + q * se_l))
    p = float("nan")
    if 0 < null < 1:
        p = t_pvalue((centre - float(logit(null))) / se_l, df)
    return lo, hi, p
