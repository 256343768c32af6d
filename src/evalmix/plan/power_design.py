"""The design of a power calculation: its options (written once, :class:`_Design`, typed by
:class:`DesignOptions`), their checks, and the variance of the estimate under the design
(:func:`design_variance`: ``sd^2 / (K m) * DEFF`` plus the crossed factors' share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict, get_args

import numpy as np

from evalmix.errors import InvalidOptionError, check_keywords, check_level, check_option
from evalmix.inference.power_t import power_from_ncp
from evalmix.plan.power_result import PowerResult
from evalmix.vocabulary import Alternative, Distribution, PowerEstimand

ESTIMANDS: tuple[str, ...] = get_args(PowerEstimand)


ALTERNATIVES: tuple[str, ...] = get_args(Alternative)


DISTRIBUTIONS: tuple[str, ...] = get_args(Distribution)


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
