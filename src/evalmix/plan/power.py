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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypedDict, Unpack, get_args

import numpy as np
import pandas as pd
from scipy import optimize

from evalmix.errors import InvalidOptionError, check_keywords, check_level, check_option
from evalmix.inference.power_t import power_from_ncp, solve_ncp
from evalmix.tidy import RESULT_COLUMNS, tidy_rows
from evalmix.vocabulary import Alternative, Distribution, PowerEstimand

__all__ = ["PowerResult", "DesignOptions", "DESIGN_OPTIONS", "power", "mde",
           "n_clusters_for_power", "design_variance", "power_from_ncp"]


ESTIMANDS: tuple[str, ...] = get_args(PowerEstimand)
ALTERNATIVES: tuple[str, ...] = get_args(Alternative)
DISTRIBUTIONS: tuple[str, ...] = get_args(Distribution)

#: Columns of :meth:`PowerResult.tidy`: the result contract's
#: :data:`~evalmix.tidy.RESULT_COLUMNS` (``contrast`` names the design, ``estimate`` is
#: the effect and ``se`` its standard error under the design), then the design's own.
TIDY_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "effect", "cluster_size", "size_cv", "icc", "sd", "alternative", "distribution", "deff",
    "n_eff", "ncp", "power", "target_power", "solved_for",
)
#: The design columns that name a row (``contrast``).
_DESIGN = ("n_clusters", "cluster_size", "size_cv", "icc", "sd", "effect", "level",
           "target_power")


@dataclass(frozen=True, eq=False)
class PowerResult:
    """Power of the cluster-robust t test for one design or a broadcast grid of designs.

    Every numeric attribute is a numpy array of the common broadcast shape (0-d for a
    single design). ``solved_for`` says which quantity was solved for: ``"power"``
    (:func:`power`), ``"effect"`` (:func:`mde`) or ``"n_clusters"``
    (:func:`n_clusters_for_power`).

    Attributes
    ----------
    effect : array
        Effect on the estimand's scale (mean minus null; win rate minus 0.5; paired
        difference).
    n_clusters, cluster_size, size_cv, icc, sd, level : array
        The design (``cluster_size`` is the mean size when sizes vary).
    deff : array
        Design effect ``Var(estimate) / (sd^2 / N)``.
    n_eff : array
        Effective number of independent items, ``N / deff``.
    se, df, ncp : array
        Standard error of the estimate, degrees of freedom (``K - 1``; inf for the
        normal reference) and noncentrality ``effect / se``.
    power : array
        Probability of rejecting the null at ``level``.
    target_power : array
        The requested power (NaN when power was computed, not solved for).
    crossed : mapping
        Crossed factors ``{name: (icc, n_levels)}`` included in the variance.
    """

    estimand: str
    alternative: str
    distribution: str
    solved_for: str
    effect: np.ndarray
    n_clusters: np.ndarray
    cluster_size: np.ndarray
    size_cv: np.ndarray
    icc: np.ndarray
    sd: np.ndarray
    level: np.ndarray
    deff: np.ndarray
    n_eff: np.ndarray
    se: np.ndarray
    df: np.ndarray
    ncp: np.ndarray
    power: np.ndarray
    target_power: np.ndarray
    crossed: Mapping[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def mde(self) -> np.ndarray:
        """The minimum detectable effect (``effect`` of a result from :func:`mde`)."""
        return self.effect

    def tidy(self) -> pd.DataFrame:
        """One row per design in the broadcast grid, columns :data:`TIDY_COLUMNS`.

        In the result contract a row is the estimator under one design: ``estimate`` the
        effect, ``se``/``df`` its standard error and degrees of freedom, ``method``
        ``"analytic"``; ``contrast`` names the design (``"n_clusters=20, cluster_size=5,
        ..."``), so it is the row's key within the grid.
        """
        names = [k for k in TIDY_COLUMNS if k not in (
            "estimand", "contrast", "method", "cluster", "scale", "estimate", "lo", "hi",
            "n_clusters", "reps", "seed", "note", "alternative", "distribution",
            "solved_for")] + ["n_clusters"]
        arrays = {k: np.ravel(getattr(self, k)) for k in names}
        n = max(a.size for a in arrays.values())
        frame = pd.DataFrame({k: np.broadcast_to(a, (n,)) if a.size == 1 else a
                              for k, a in arrays.items()})
        frame["estimate"] = frame["effect"]
        frame["contrast"] = [", ".join(f"{k}={v:.6g}" for k, v in zip(_DESIGN, r, strict=True))
                             for r in frame[list(_DESIGN)].itertuples(index=False)]
        frame["alternative"] = self.alternative
        frame["distribution"] = self.distribution
        frame["solved_for"] = self.solved_for
        for name, (icc_f, levels_f) in self.crossed.items():
            frame[f"icc_{name}"] = icc_f
            frame[f"n_levels_{name}"] = levels_f
        frame = tidy_rows(frame, estimand=self.estimand, method="analytic", cluster="",
                          scale="identity", reps=0, seed=None, note="")
        return frame[list(TIDY_COLUMNS) + [c for c in frame.columns if c not in TIDY_COLUMNS]]

    def __str__(self) -> str:
        head = (f"PowerResult({self.estimand}, {self.alternative}, {self.distribution}"
                f" reference, solved for {self.solved_for})")
        frame = self.tidy()
        show = ["effect", "n_clusters", "cluster_size", "icc", "deff", "se", "df", "power"]
        return head + "\n" + frame[show].to_string(index=False, float_format="{:.4g}".format)


# ---------------------------------------------------------------- pure array functions

def design_variance(
    *,
    n_clusters: Any,
    cluster_size: Any,
    icc: Any,
    sd: Any,
    size_cv: Any = 0.0,
    crossed: Mapping[str, tuple[float, int]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Variance of a cluster-sampled mean and its design effect.

    ``Var = sd^2 [rho (1 + CV^2) / K + (1 - rho - sum_f rho_f) / (K m) + sum_f rho_f / n_f]``,
    which for no crossed factors is ``sd^2 / (K m) * (1 + ((1 + CV^2) m - 1) rho)``.

    Returns
    -------
    variance, deff : arrays
        ``deff = variance / (sd^2 / (K m))``.

    References
    ----------
    Kish, L. (1965). *Survey Sampling*. Wiley. ISBN 0-471-48900-X.
    Eldridge, S. M., Ashby, D., & Kerry, S. (2006). Sample size for cluster randomized
    trials: effect of coefficient of variation of cluster size and analysis method.
    *International Journal of Epidemiology*, 35(5), 1292-1300.
    https://doi.org/10.1093/ije/dyl129
    """
    k = np.asarray(n_clusters, dtype=float)
    m = np.asarray(cluster_size, dtype=float)
    rho = np.asarray(icc, dtype=float)
    s2 = np.asarray(sd, dtype=float) ** 2
    cv2 = np.asarray(size_cv, dtype=float) ** 2
    crossed_share = 0.0
    crossed_var = 0.0
    for icc_f, levels_f in (crossed or {}).values():
        crossed_share = crossed_share + icc_f
        crossed_var = crossed_var + icc_f / levels_f
    var = s2 * (rho * (1 + cv2) / k + (1 - rho - crossed_share) / (k * m) + crossed_var)
    return var, var / (s2 / (k * m))


# ---------------------------------------------------------------- validation helpers

def _sizes_summary(cluster_sizes: Sequence[int] | np.ndarray) -> tuple[int, float, float]:
    sizes = np.asarray(cluster_sizes, dtype=float)
    if sizes.ndim != 1 or sizes.size < 2 or (sizes < 1).any():
        raise InvalidOptionError(
            f"cluster_sizes must be a 1-D list of at least 2 sizes >= 1, got {sizes!r}; "
            "pass cluster_size= and size_cv= for a hypothetical design")
    m_bar = sizes.mean()
    return sizes.size, float(m_bar), float(sizes.std() / m_bar)


def _check_design(n_clusters, cluster_size, icc, sd, level, size_cv, crossed,
                  min_clusters: float = 2, effect: Any = None) -> None:
    # written as "not (inside)" so that NaN, which fails every comparison, is refused
    if not np.all(np.asarray(n_clusters, dtype=float) >= min_clusters):
        raise InvalidOptionError(f"n_clusters must be at least {min_clusters} (the t test has K - 1 "
                                 f"degrees of freedom), got {n_clusters!r}")
    if not np.all(np.asarray(cluster_size, dtype=float) >= 1):
        raise InvalidOptionError(f"cluster_size must be at least 1, got {cluster_size!r}")
    rho = np.asarray(icc, dtype=float)
    share = sum(float(v[0]) for v in (crossed or {}).values())
    if not (np.all(rho >= 0) and np.all(rho + share < 1)):
        raise InvalidOptionError(f"icc must be in [0, 1) and icc + crossed ICCs below 1, got icc={icc!r}"
                           f" and crossed ICCs summing to {share}")
    if sd is not None and not np.all(np.asarray(sd, dtype=float) > 0):
        raise InvalidOptionError(f"sd must be positive, got {sd!r}")
    if sd is not None and not np.all(np.isfinite(np.asarray(sd, dtype=float))):
        raise InvalidOptionError(f"sd must be finite, got {sd!r}")
    for lv in np.atleast_1d(np.asarray(level, dtype=object)).ravel():
        check_level(lv)
    if not np.all(np.asarray(size_cv, dtype=float) >= 0):
        raise InvalidOptionError(f"size_cv must be >= 0, got {size_cv!r}")
    if effect is not None and not np.all(np.isfinite(np.asarray(effect, dtype=float))):
        raise InvalidOptionError(f"effect must be a finite number, got {effect!r}")
    for name, value in (crossed or {}).items():
        if len(value) != 2 or not value[1] >= 1 or not 0 <= value[0] < 1:
            raise InvalidOptionError(f"crossed[{name!r}] must be (icc in [0, 1), n_levels >= 1), "
                               f"got {value!r}")


@dataclass(frozen=True)
class _Design:
    """The design keywords of :func:`power`, :func:`mde` and :func:`n_clusters_for_power`
    (typed by :class:`DesignOptions`) with their defaults: the one place they are listed."""

    n_clusters: Any = None
    cluster_size: Any = 1
    icc: Any = 0.0
    sd: Any = None
    level: Any = 0.95
    estimand: PowerEstimand = "mean"
    alternative: Alternative = "two-sided"
    size_cv: Any = 0.0
    cluster_sizes: Sequence[int] | np.ndarray | None = None
    crossed: Mapping[str, tuple[float, int]] | None = None
    null: float | None = None
    distribution: Distribution = "t"

    @classmethod
    def of(cls, caller: str, options: Mapping[str, Any],
           solved: tuple[str, ...] = ()) -> _Design:
        """The design from a caller's keywords: names checked (``solved`` are the ones the
        caller solves for and may not be given), options checked, sizes summarised."""
        d = cls(**check_keywords(caller, options, DESIGN_OPTIONS, solved=solved))
        check_option("estimand", d.estimand, ESTIMANDS)
        check_option("alternative", d.alternative, ALTERNATIVES)
        check_option("distribution", d.distribution, DISTRIBUTIONS)
        if d.cluster_sizes is not None:
            k_sizes, m_bar, cv = _sizes_summary(d.cluster_sizes)
            d = replace(d, cluster_size=m_bar, size_cv=cv,
                        n_clusters=k_sizes if d.n_clusters is None else d.n_clusters)
        return d

    def check(self, *, n_clusters: Any = None, effect: Any = None) -> None:
        """Refuse out-of-range values (``n_clusters`` given when the caller solves for it)."""
        _check_design(self.n_clusters if n_clusters is None else n_clusters,
                      self.cluster_size, self.icc, self.sd, self.level, self.size_cv,
                      self.crossed, effect=effect)

    @property
    def null_value(self) -> float:
        """The null (defaults: 0.5 for win rates, 0 otherwise)."""
        if self.null is not None:
            return float(self.null)
        return 0.5 if self.estimand == "win_rate" else 0.0

    def sd_at(self, effect: Any) -> np.ndarray:
        """The SD of one observation; for win rates by default ``sqrt(p (1 - p))`` at
        ``p = null + effect``."""
        if self.sd is not None:
            return np.asarray(self.sd, dtype=float)
        if self.estimand == "win_rate":
            p = self.null_value + np.asarray(effect, dtype=float)
            if np.any((p <= 0) | (p >= 1)):
                raise InvalidOptionError(f"win rate null + effect must be in (0, 1), got {p!r}")
            return np.sqrt(p * (1 - p))
        raise InvalidOptionError(
            f"sd is required for estimand={self.estimand!r}: the SD of one score (mean) or "
            "of one per-item difference (difference); for a proportion p use sqrt(p (1 - p))")

    def df(self, n_clusters: Any) -> np.ndarray:
        """Degrees of freedom of the test: ``K - 1``, or inf for the normal reference."""
        k = np.asarray(n_clusters, dtype=float)
        return k - 1 if self.distribution == "t" else np.full(np.shape(k), np.inf)

    def result(self, *, solved_for: str, effect: Any, sd: Any, target_power: Any,
               n_clusters: Any = None) -> PowerResult:
        """The :class:`PowerResult` of this design at ``effect`` (and ``n_clusters``)."""
        n_clusters = self.n_clusters if n_clusters is None else n_clusters
        var, deff = design_variance(n_clusters=n_clusters, cluster_size=self.cluster_size,
                                    icc=self.icc, sd=sd, size_cv=self.size_cv,
                                    crossed=self.crossed)
        se = np.sqrt(var)
        k = np.asarray(n_clusters, dtype=float)
        df = self.df(k)
        eff = np.asarray(effect, dtype=float)
        ncp = eff / se
        pw = power_from_ncp(ncp, df, self.level, self.alternative)
        arrays = np.broadcast_arrays(
            eff, k, np.asarray(self.cluster_size, dtype=float),
            np.asarray(self.size_cv, dtype=float), np.asarray(self.icc, dtype=float),
            np.asarray(sd, dtype=float), np.asarray(self.level, dtype=float), deff, se, df,
            ncp, pw, np.asarray(target_power, dtype=float))
        (eff, k, m, cv, rho, sd_, lv, deff, se, df, ncp, pw, tp) = (np.array(a) for a in arrays)
        return PowerResult(
            estimand=self.estimand, alternative=self.alternative,
            distribution=self.distribution, solved_for=solved_for, effect=eff, n_clusters=k,
            cluster_size=m, size_cv=cv, icc=rho, sd=sd_, level=lv, deff=deff,
            n_eff=k * m / deff, se=se, df=df, ncp=ncp, power=pw, target_power=tp,
            crossed=dict(self.crossed or {}))


class DesignOptions(TypedDict, total=False):
    """The design keywords of :func:`power`, :func:`mde` and :func:`n_clusters_for_power`,
    typed for static checkers (:func:`power` documents them)."""

    n_clusters: Any
    cluster_size: Any
    icc: Any
    sd: Any
    level: Any
    estimand: PowerEstimand
    alternative: Alternative
    size_cv: Any
    cluster_sizes: Sequence[int] | np.ndarray | None
    crossed: Mapping[str, tuple[float, int]] | None
    null: float | None
    distribution: Distribution


#: The design keywords, in the order :func:`power` documents them.
DESIGN_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(_Design))


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
