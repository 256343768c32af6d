"""Intra-cluster correlation, design effect and effective sample size, per cluster factor.

Pure array functions do the arithmetic (:func:`icc_anova`, :func:`deff_equal`,
:func:`deff_unequal`, :func:`deff_empirical`); :func:`design_effect` lifts them to an
:class:`~evalmix.data.table.EvalTable`, one row per cluster factor.

References
----------
Kish, L. (1965). Survey Sampling. Wiley. (design effect 1 + (m - 1) rho)
Searle, S. R. (1971). Linear Models. Wiley. (F-based interval for the ICC)
Donner, A. (1986). A review of inference procedures for the intraclass correlation
coefficient in the one-way random effects model. International Statistical Review 54,
67-82. doi:10.2307/1403259
Eldridge, S. M., Ashby, D. & Kerry, S. (2006). Sample size for cluster randomized trials:
effect of coefficient of variation of cluster size and analysis method. International
Journal of Epidemiology 35, 1292-1300. doi:10.1093/ije/dyl129
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.data.table import check_table, cluster_codes, intersect_codes
from evalmix.errors import EvalmixError, check_level
from evalmix.tidy import RESULT_COLUMNS, tidy_rows

__all__ = [
    "ICCResult",
    "FactorDesignEffect",
    "DesignEffectResult",
    "icc_anova",
    "deff_equal",
    "deff_unequal",
    "deff_empirical",
    "design_effect",
]


@dataclass(frozen=True)
class ICCResult:
    """One-way ANOVA intra-cluster correlation with its F-based interval."""

    icc: float
    lo: float
    hi: float
    level: float
    msb: float
    msw: float
    n0: float
    f: float
    df_between: int
    df_within: int

    def tidy(self) -> pd.DataFrame:
        """One row in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand="icc"``, ``method="anova"``, the ICC and its F interval; then ``msb,
        msw, n0, f, df_between, df_within``."""
        return tidy_rows([{
            "estimate": self.icc, "lo": self.lo, "hi": self.hi, "level": self.level,
            "msb": self.msb, "msw": self.msw, "n0": self.n0, "f": self.f,
            "df_between": self.df_between, "df_within": self.df_within}],
            estimand="icc", method="anova", scale="identity", note="")

    def __str__(self) -> str:
        return (f"ICC (one-way ANOVA): {self.icc:.4g}, {self.level:.0%} CI "
                f"[{self.lo:.4g}, {self.hi:.4g}] (F = {self.f:.3g} on {self.df_between}, "
                f"{self.df_within} df; n0 = {self.n0:.3g})")


def icc_anova(y: np.ndarray, clusters: np.ndarray, *, level: float = 0.95) -> ICCResult:
    """ICC by one-way ANOVA, ``(MSB - MSW) / (MSB + (n0 - 1) MSW)``, with its interval.

    ``n0 = (N - sum n_g^2 / N) / (G - 1)`` is the average cluster size adjusted for
    unequal sizes. The interval inverts ``F = MSB / MSW ~ F(G - 1, N - G)`` (exact for
    equal sizes, Searle 1971; the usual approximation with ``n0`` otherwise, Donner 1986):
    ``(F / F_u - 1) / (F / F_u + n0 - 1)`` with ``F_u`` the upper and lower quantiles.
    The estimate can be negative (less variation between clusters than chance gives).

    References
    ----------
    Searle (1971); Donner (1986), doi:10.2307/1403259.

    Examples
    --------
    >>> r = icc_anova([1, 4, 11, 6, 13, 8], [1, 1, 2, 2, 3, 3])
    >>> round(r.icc, 4)
    0.5581
    """
    y = np.asarray(y, dtype=float)
    codes, g = cluster_codes(clusters)
    n_total = y.size
    if codes.shape != y.shape:
        raise EvalmixError(f"y has {y.size} values but clusters has {codes.size}")
    if g < 2:
        raise EvalmixError("the ICC needs at least 2 clusters")
    sizes = np.bincount(codes, minlength=g).astype(float)
    means = np.bincount(codes, weights=y, minlength=g) / sizes
    grand = y.mean()
    ssb = np.sum(sizes * (means - grand) ** 2)
    ssw = np.sum((y - means[codes]) ** 2)
    df1, df2 = g - 1, n_total - g
    msb = ssb / df1
    msw = ssw / df2 if df2 > 0 else np.nan
    n0 = (n_total - np.sum(sizes**2) / n_total) / df1
    with np.errstate(divide="ignore", invalid="ignore"):
        icc = (msb - msw) / (msb + (n0 - 1) * msw)
        f = msb / msw
        alpha = 1 - level
        if df2 > 0 and np.isfinite(f):
            fl = f / stats.f.ppf(1 - alpha / 2, df1, df2)
            fu = f / stats.f.ppf(alpha / 2, df1, df2)
            lo, hi = (fl - 1) / (fl + n0 - 1), (fu - 1) / (fu + n0 - 1)
        else:
            lo = hi = np.nan
    return ICCResult(icc=float(icc), lo=float(lo), hi=float(hi), level=level,
                     msb=float(msb), msw=float(msw), n0=float(n0), f=float(f),
                     df_between=int(df1), df_within=int(df2))


def deff_equal(cluster_size: float, icc: float) -> float:
    """Kish's design effect for equal cluster sizes, ``1 + (m - 1) rho``."""
    return 1.0 + (cluster_size - 1.0) * icc


def deff_unequal(sizes: np.ndarray, icc: float) -> float:
    """Design effect for unequal sizes, ``1 + ((1 + CV^2) m_bar - 1) rho``.

    ``CV`` is the coefficient of variation of the cluster sizes (population SD over the
    mean; Eldridge, Ashby & Kerry 2006, doi:10.1093/ije/dyl129). Equals
    :func:`deff_equal` when all sizes are equal.
    """
    sizes = np.asarray(sizes, dtype=float)
    m_bar = sizes.mean()
    cv2 = sizes.var() / m_bar**2
    return 1.0 + ((1.0 + cv2) * m_bar - 1.0) * icc


def deff_empirical(y: np.ndarray, clusters: np.ndarray) -> float:
    """Empirical design effect of the mean: CR1 variance over the naive variance.

    ``var_CR1 = G / (G - 1) sum_g (sum_{i in g} (y_i - ybar))^2 / N^2`` (for a mean the
    (N - 1)/(N - k) factor is 1) and ``var_naive = s^2 / N`` with ``s^2`` on N - 1 df.
    """
    y = np.asarray(y, dtype=float)
    codes, g = cluster_codes(clusters)
    n = y.size
    dev = y - y.mean()
    ss = np.sum(dev**2)
    if ss == 0 or g < 2:
        return float("nan")
    # the CR1 factor of a mean, G/(G-1) (inference.sandwich.cr1_factor with k = 1; design
    # does not import inference: tests/common/test_primitives.py checks the two agree)
    cr1 = g / (g - 1) * np.sum(np.bincount(codes, weights=dev, minlength=g) ** 2) / n**2
    return float(cr1 / (ss / (n - 1) / n))


@dataclass(frozen=True)
class FactorDesignEffect:
    """ICC, design effects and effective sample size for one cluster factor."""

    cluster: str
    n_clusters: int
    n_obs: int
    mean_size: float
    cv_size: float
    icc: float
    icc_lo: float
    icc_hi: float
    level: float
    deff_equal: float
    deff: float
    deff_empirical: float
    n_eff: float
    n_eff_empirical: float
    centred_by_condition: bool


#: Columns of :meth:`DesignEffectResult.tidy`: the result contract's
#: :data:`~evalmix.tidy.RESULT_COLUMNS` (``estimate`` is ``deff``, ``lo``/``hi`` NaN),
#: then every field of :class:`FactorDesignEffect`.
TIDY_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + tuple(
    f for f in FactorDesignEffect.__dataclass_fields__ if f not in RESULT_COLUMNS)


@dataclass(frozen=True)
class DesignEffectResult:
    """Design effects of a table, one :class:`FactorDesignEffect` per cluster factor."""

    factors: tuple[FactorDesignEffect, ...]

    def __getitem__(self, cluster: str) -> FactorDesignEffect:
        for f in self.factors:
            if f.cluster == cluster:
                return f
        raise KeyError(cluster)

    def tidy(self) -> pd.DataFrame:
        """One row per cluster factor (columns: :data:`TIDY_COLUMNS`): ``estimand``
        ``"design_effect"``, ``method="anova"`` (the ICC's), ``estimate`` the design
        effect ``deff``."""
        rows = [{**asdict(f), "estimate": f.deff} for f in self.factors]
        frame = tidy_rows(pd.DataFrame(rows, columns=[*FactorDesignEffect.__dataclass_fields__,
                                                      "estimate"]),
                          estimand="design_effect", method="anova", scale="identity",
                          reps=0, seed=None, note="")
        return frame[list(TIDY_COLUMNS)]

    def __str__(self) -> str:
        lines = ["design effects (ICC by one-way ANOVA):"]
        for f in self.factors:
            lines.append(
                f"  {f.cluster}: G={f.n_clusters}, m_bar={f.mean_size:.3g}, "
                f"ICC={f.icc:.3g} [{f.icc_lo:.3g}, {f.icc_hi:.3g}], DEFF={f.deff:.3g} "
                f"(empirical {f.deff_empirical:.3g}), effective N={f.n_eff:.4g} of {f.n_obs}")
        return "\n".join(lines)


def _fixed_cells(table) -> list[str]:  # noqa: ANN001
    """Columns whose combinations are the fixed design cells (empty: none)."""
    cols = table.data.columns
    if table.kind == "pairwise":
        keys = ["model_a", "model_b"] + (["a_first"] if table.has_order else [])
        return keys + (["condition"] if "condition" in cols else [])
    return ["condition"] if table.has_condition else []


def design_effect(table, cluster: str | Sequence[str] | None = None, *,  # noqa: ANN001
                  level: float = 0.95) -> DesignEffectResult:
    """ICC, design effect and effective sample size for each cluster factor.

    Parameters
    ----------
    table : EvalTable
        The eval table (from :func:`evalmix.read`).
    cluster : str, list of str or None
        Cluster factor role(s); ``None`` means every cluster factor of the table.
    level : float
        Level of the ICC interval.

    Returns
    -------
    DesignEffectResult
        ``.tidy()`` has one row per factor: ``icc`` (one-way ANOVA) with ``icc_lo``,
        ``icc_hi``; ``deff_equal`` = 1 + (m_bar - 1) rho; ``deff`` = 1 + ((1 + CV^2)
        m_bar - 1) rho; ``deff_empirical`` = var_CR1 / var_naive of the mean;
        ``n_eff`` = N / deff and ``n_eff_empirical`` = N / deff_empirical.

    Notes
    -----
    When the table has a condition column, scores are centred within condition first,
    so the ICC is that of the outcome net of condition effects (what matters for
    per-condition means and their differences). Pairwise tables are centred within
    the ordered pair (``model_a``, ``model_b``) and, when known, the order shown:
    pooling all pairs' "A wins" outcomes would count the differences between pairs (and
    the position bias) as within-cluster noise and understate the ICC.

    References
    ----------
    Kish (1965); Donner (1986), doi:10.2307/1403259; Eldridge et al. (2006),
    doi:10.1093/ije/dyl129.

    Examples
    --------
    >>> from evalmix.sim import clustered_scores
    >>> table = clustered_scores(40, 10, p=0.7, icc=0.2, seed=1).table()
    >>> design_effect(table).tidy()["cluster"].tolist()
    ['cluster']
    """
    table = check_table(table, "design_effect")
    roles = table.check_cluster(cluster) if cluster is not None else table.clusters
    if not roles:
        raise EvalmixError("the table has no cluster factors; pass clusters= to "
                           "evalmix.read to name one (e.g. clusters={'item': 'item_id'})")
    level = check_level(level)
    y = table.y
    keys = _fixed_cells(table)
    centred = bool(keys)
    if centred:
        # integer codes of the cells (a missing value is its own level, as groupby's
        # dropna=False), not per-row copies of the model names
        d = table.data
        cell = intersect_codes(*(pd.factorize(d[k], use_na_sentinel=False)[0]
                                 for k in keys))
        means = np.bincount(cell, weights=y) / np.bincount(cell)
        y = y - means[cell] + y.mean()
        del cell
    rows = []
    for role in roles:
        codes = table.codes(role)
        g = int(codes.max()) + 1
        sizes = np.bincount(codes, minlength=g)
        if g < 2:
            raise EvalmixError(f"cluster factor {role!r} has a single level; the design "
                               "effect needs at least 2 clusters")
        icc = icc_anova(y, codes, level=level)
        rho = icc.icc if np.isfinite(icc.icc) else 0.0  # all singletons: no within pairs
        d = deff_unequal(sizes, rho)
        d_emp = deff_empirical(y, codes)
        n = y.size
        rows.append(FactorDesignEffect(
            cluster=role, n_clusters=g, n_obs=n, mean_size=float(sizes.mean()),
            cv_size=float(sizes.std() / sizes.mean()), icc=icc.icc, icc_lo=icc.lo,
            icc_hi=icc.hi, level=level, deff_equal=deff_equal(sizes.mean(), rho), deff=d,
            deff_empirical=d_emp, n_eff=n / d if d > 0 else float("inf"),
            n_eff_empirical=n / d_emp if d_emp > 0 else float("nan"),
            centred_by_condition=centred))
    return DesignEffectResult(factors=tuple(rows))
