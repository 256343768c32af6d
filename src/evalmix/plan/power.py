"""Analytic power, minimum detectable effect and number of clusters for clustered evals.

An eval with ``K`` clusters (scenarios, passages, prompts) of ``m`` items each has, for
its mean, win rate or paired difference, the variance

    Var(estimate) = sd^2 / (K m) * DEFF,     DEFF = 1 + ((1 + CV^2) m - 1) rho

(Kish 1965; CV is the coefficient of variation of the cluster sizes, 0 for equal sizes,
Eldridge et al. 2006). The test is the cluster-robust t test with ``K - 1`` degrees of
freedom, so power comes from the noncentral t distribution with noncentrality
``effect / sqrt(Var)`` (the exact power of the t test on cluster means when those are
normal and the clusters equal-sized). Optional fully crossed random factors (judges,
personas) with few levels add ``icc_f sd^2 / n_f`` each, which no number of clusters can
remove.

All functions broadcast their numeric arguments, so arrays give whole power curves.

The design's options, checks and variance are in :mod:`evalmix.plan.power_design`, the
result in :mod:`evalmix.plan.power_result` (both re-exported here); the three questions
(:func:`power`, :func:`mde`, :func:`n_clusters_for_power`) here.
"""

from __future__ import annotations

from typing import Any, Unpack

import numpy as np
from scipy import optimize

from evalmix.errors import InvalidOptionError
from evalmix.inference.power_t import power_from_ncp, solve_ncp
from evalmix.plan.power_design import DESIGN_OPTIONS, DesignOptions, _Design, design_variance
from evalmix.plan.power_result import PowerResult

__all__ = ["PowerResult", "DesignOptions", "DESIGN_OPTIONS", "power", "mde",
           "n_clusters_for_power", "design_variance", "power_from_ncp"]


# ---------------------------------------------------------------- public API

def power(effect: Any = None, **design: Unpack[DesignOptions]) -> PowerResult:
    """Power of the cluster-robust t test of a mean, win rate or paired difference.

    Parameters
    ----------
    effect : float or array
        True value minus the null: mean minus ``null`` (default 0), win rate minus 0.5,
        or the paired difference (treatment minus control).
    **design
        The design keywords (:data:`DESIGN_OPTIONS`, typed by :class:`DesignOptions`);
        numbers broadcast, so arrays give whole power curves. An unknown keyword is an
        :class:`~evalmix.errors.InvalidOptionError` that lists them.

        - ``n_clusters`` (int or array): number of clusters ``K`` (scenarios, passages);
          defaults to ``len(cluster_sizes)``.
        - ``cluster_size`` (float or array, default 1): items per cluster ``m`` (the mean
          size when ``size_cv > 0``).
        - ``icc`` (float or array, default 0): intra-cluster correlation of the scores;
          for ``estimand="difference"`` the ICC of the per-item differences.
        - ``sd`` (float or array): SD of one score (``mean``) or of one per-item
          difference (``difference``). For ``win_rate`` it defaults to
          ``sqrt(p (1 - p))`` at ``p = 0.5 + effect`` (pass it when ties lower the
          variance).
        - ``level`` (float, default 0.95): confidence level; the test has size
          ``1 - level``.
        - ``estimand``: ``"mean"`` (default), ``"win_rate"`` or ``"difference"``.
        - ``alternative``: ``"two-sided"`` (default), ``"larger"`` or ``"smaller"``.
        - ``size_cv`` (float or array, default 0): coefficient of variation of the
          cluster sizes (the unequal-size design effect).
        - ``cluster_sizes`` (sequence of int): the actual sizes of a design; sets
          ``cluster_size``, ``size_cv`` and by default ``n_clusters``.
        - ``crossed`` (mapping): fully crossed random factors ``{name: (icc, n_levels)}``
          (e.g. ``{"judge": (0.03, 3)}``) whose levels do not grow with ``K``; each adds
          ``icc sd^2 / n_levels``.
        - ``null`` (float): the null value (defaults: 0.5 for win rates, 0 otherwise);
          only used to set the default ``sd`` for win rates.
        - ``distribution``: ``"t"`` (default: t(K - 1) critical values and the
          noncentral t) or ``"normal"`` (the large-sample z approximation).

    Returns
    -------
    PowerResult

    References
    ----------
    Kish, L. (1965). *Survey Sampling*. Wiley. ISBN 0-471-48900-X.
    Donner, A., & Klar, N. (2000). *Design and Analysis of Cluster Randomization Trials
    in Health Research*. Arnold. ISBN 0-340-69153-0.
    Eldridge, S. M., Ashby, D., & Kerry, S. (2006). https://doi.org/10.1093/ije/dyl129
    Hemming, K., Girling, A. J., Sitch, A. J., Marsh, J., & Lilford, R. J. (2011). Sample
    size calculations for cluster randomised controlled trials with a fixed number of
    clusters. *BMC Medical Research Methodology*, 11, 102.
    https://doi.org/10.1186/1471-2288-11-102
    Miller, E. (2024). Adding error bars to evals. arXiv:2411.00640.
    https://doi.org/10.48550/arXiv.2411.00640

    Examples
    --------
    >>> import evalmix
    >>> res = evalmix.power(0.05, n_clusters=[20, 40, 80], cluster_size=10, icc=0.1,
    ...                     sd=0.45)
    >>> res.power.round(2).tolist()
    [0.19, 0.35, 0.61]
    """
    d = _Design.of("power", design)
    if effect is None or d.n_clusters is None:
        raise InvalidOptionError("power needs effect= and n_clusters= (or cluster_sizes=)")
    d.check(effect=effect)
    return d.result(solved_for="power", effect=effect, sd=d.sd_at(effect),
                    target_power=np.nan)


def mde(power: Any = 0.8, **design: Unpack[DesignOptions]) -> PowerResult:
    """Minimum detectable effect: the effect at which the test reaches ``power``.

    Same design arguments as :func:`power`. The effect is positive (negative for
    ``alternative="smaller"``). For win rates with the default ``sd`` the SD depends on
    the effect and the equation is solved numerically; NaN marks designs that cannot
    reach the power. ``result.mde`` (= ``result.effect``) holds the answer.

    References
    ----------
    Bloom, H. S. (1995). Minimum detectable effects: a simple way to report the
    statistical power of experimental designs. *Evaluation Review*, 19(5), 547-556.
    https://doi.org/10.1177/0193841X9501900504

    Examples
    --------
    >>> import evalmix
    >>> float(evalmix.mde(0.8, n_clusters=50, cluster_size=10, icc=0.1, sd=0.5).mde)
    0.0880...
    """
    d = _Design.of("mde", design)
    if d.n_clusters is None:
        raise InvalidOptionError("mde needs n_clusters= (or cluster_sizes=)")
    d.check()
    target = np.asarray(power, dtype=float)
    k = np.asarray(d.n_clusters, dtype=float)
    sign = -1.0 if d.alternative == "smaller" else 1.0
    if d.estimand == "win_rate" and d.sd is None:
        bshape = np.broadcast_shapes(target.shape, k.shape, np.shape(d.cluster_size),
                                     np.shape(d.icc), np.shape(d.level), np.shape(d.size_cv))
        b = [np.broadcast_to(np.asarray(v, dtype=float), bshape)
             for v in (target, k, d.cluster_size, d.icc, d.level, d.size_cv)]
        effect = np.full(bshape, np.nan)
        null_value = d.null_value
        room = (1 - null_value) if sign > 0 else null_value
        for idx in np.ndindex(bshape):
            tp, kk, mm, rr, lv, cv = (a[idx] for a in b)

            def gap(e: float, kk=kk, mm=mm, rr=rr, lv=lv, tp=tp, cv=cv) -> float:
                p = null_value + sign * e
                v, _ = design_variance(n_clusters=kk, cluster_size=mm, icc=rr,
                                       sd=np.sqrt(p * (1 - p)), size_cv=cv,
                                       crossed=d.crossed)
                return float(power_from_ncp(sign * e / np.sqrt(v), d.df(kk), lv,
                                            d.alternative)[()] - tp)

            hi = room * (1 - 1e-9)
            if gap(hi) < 0 or not (1 - lv) < tp < 1:
                continue
            effect[idx] = sign * optimize.brentq(gap, 1e-12, hi, xtol=1e-14)
        p_alt = null_value + effect
        sd_ = np.sqrt(p_alt * (1 - p_alt))  # NaN where the power cannot be reached
    else:
        sd_ = d.sd_at(0.0)
        var, _ = design_variance(n_clusters=k, cluster_size=d.cluster_size, icc=d.icc,
                                 sd=sd_, size_cv=d.size_cv, crossed=d.crossed)
        tgt, df_b, lv_b = np.broadcast_arrays(target, d.df(k),
                                              np.asarray(d.level, dtype=float))
        cache: dict[tuple[float, float, float], float] = {}
        ncp = np.empty(tgt.shape)
        for idx in np.ndindex(tgt.shape):
            key = (float(tgt[idx]), float(df_b[idx]), float(lv_b[idx]))
            if key not in cache:
                cache[key] = solve_ncp(*key, d.alternative)
            ncp[idx] = cache[key]
        effect = sign * ncp * np.sqrt(var)
    return d.result(solved_for="effect", effect=effect, sd=sd_, target_power=target)


def n_clusters_for_power(
    power: Any = 0.8,
    *,
    effect: Any = None,
    max_clusters: int = 1_000_000,
    **design: Unpack[DesignOptions],
) -> PowerResult:
    """Smallest number of clusters ``K`` whose test reaches ``power``.

    Answers "how many scenarios do I need". Same design arguments as :func:`power`;
    ``result.n_clusters`` holds ``K`` (NaN where even ``max_clusters`` clusters fall short,
    e.g. when a crossed factor with few levels caps the power) and ``result.power`` the
    power reached. Power rises with ``K`` at fixed ``m``, so an integer bisection finds it.

    References
    ----------
    Hemming, K., Girling, A. J., Sitch, A. J., Marsh, J., & Lilford, R. J. (2011).
    https://doi.org/10.1186/1471-2288-11-102

    Examples
    --------
    >>> import evalmix
    >>> int(evalmix.n_clusters_for_power(0.8, effect=0.05, cluster_size=10, icc=0.1,
    ...                                  sd=0.45).n_clusters)
    123
    """
    d = _Design.of("n_clusters_for_power", design, solved=("n_clusters", "cluster_sizes"))
    if effect is None:
        raise InvalidOptionError("n_clusters_for_power needs effect=")
    d.check(n_clusters=2, effect=effect)
    sd_ = d.sd_at(effect)
    target = np.asarray(power, dtype=float)
    shape = np.broadcast_shapes(target.shape, np.shape(effect), np.shape(d.cluster_size),
                                np.shape(d.icc), np.shape(sd_), np.shape(d.level),
                                np.shape(d.size_cv))

    def pw(k: np.ndarray) -> np.ndarray:
        return d.result(solved_for="power", effect=effect, n_clusters=k, sd=sd_,
                        target_power=np.nan).power

    lo = np.full(shape, 2.0)
    hi = np.full(shape, float(max_clusters))
    reachable = pw(hi) >= target
    done_lo = pw(lo) >= target
    # invariant: pw(lo) < target <= pw(hi) for the undecided cells
    while True:
        open_ = reachable & ~done_lo & (hi - lo > 1)
        if not open_.any():
            break
        mid = np.floor((lo + hi) / 2)
        ok = pw(mid) >= target
        hi = np.where(open_ & ok, mid, hi)
        lo = np.where(open_ & ~ok, mid, lo)
    k = np.where(done_lo, lo, hi)
    k = np.where(reachable, k, np.nan)
    res = d.result(solved_for="n_clusters", effect=effect,
                   n_clusters=np.where(np.isfinite(k), k, float(max_clusters)), sd=sd_,
                   target_power=target)
    unreachable = ~np.broadcast_to(reachable, res.power.shape)
    object.__setattr__(res, "n_clusters", np.where(unreachable, np.nan, res.n_clusters))
    return res
