"""Pairs cluster bootstrap, vectorised: resampling weights times per-cluster sums.

A replicate of the pairs cluster bootstrap draws ``G`` clusters with replacement; the
replicate's OLS fit only needs the per-cluster sums ``X_g'X_g`` and ``X_g'y_g`` weighted by
how often each cluster was drawn. So a whole block of replicates is one matrix product
``W @ sums`` with ``W`` the (reps x G) multinomial counts; there is no Python loop over
replicates. Logistic coefficients use a batched Newton iteration on the same weights.

Intervals follow R's ``boot`` (Canty & Ripley) exactly, including its interpolation of
order statistics on the normal quantile scale (``norm.inter``): percentile, BCa (with the
acceleration from the jackknife over clusters) and studentized (bootstrap-t, with a CR1
standard error recomputed in every replicate from per-cluster sums).

References
----------
Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application.
Cambridge University Press. doi:10.1017/CBO9780511802843
Efron, B. (1987). Better bootstrap confidence intervals. JASA 82, 171-185.
doi:10.1080/01621459.1987.10478410
Hesterberg, T. C. (2015). What teachers should know about the bootstrap. The American
Statistician 69, 371-386. doi:10.1080/00031305.2015.1089789
Field, C. A. & Welsh, A. H. (2007). Bootstrapping clustered data. JRSS B 69, 369-390.
doi:10.1111/j.1467-9868.2007.00593.x

The pieces: the resampling weights in :mod:`evalmix.inference.boot_weights`, a block of
replicates fitted from weighted per-block sums in :mod:`evalmix.inference.boot_fits`, boot's
intervals in :mod:`evalmix.inference.boot_intervals` (re-exported here); the result and
:func:`cluster_bootstrap` here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast, get_args

import numpy as np
import pandas as pd

from evalmix.errors import (
    EvalmixError,
    FewClustersWarning,
    InvalidOptionError,
    TooFewClustersError,
    check_count,
    check_level,
    check_option,
)
from evalmix.families import REGRESSION_FAMILIES, Regression, family_name
from evalmix.inference.boot_fits import (
    _block_sums,
    _cells,
    _linear_fit,
    _linear_from_gather,
    _logit_fit,
)
from evalmix.inference.boot_intervals import (
    bca_interval,
    expanded_interval,
    norm_inter,
    percentile_interval,
    studentized_interval,
)
from evalmix.inference.boot_weights import (
    CHUNK_ENTRIES,
    _counts,
    _nested_weights,
    cluster_weights,
    index_chunks,
)
from evalmix.inference.sandwich import (
    FEW_CLUSTERS,
    MIN_BOOTSTRAP_CLUSTERS,
    cluster_codes,
    regression_arrays,
)
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import PicklableProxies, tidy_rows
from evalmix.vocabulary import CIType

__all__ = ["MIN_REPS", "BootstrapResult", "cluster_bootstrap", "cluster_weights", "index_chunks",
           "norm_inter",
           "percentile_interval", "expanded_interval", "bca_interval", "studentized_interval"]

#: The fewest replicates any resampling interval takes (cluster and wild bootstrap alike):
#: one draw gives no spread, so no interval.
MIN_REPS = 2

CI_TYPES: tuple[str, ...] = get_args(CIType)


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class BootstrapResult(PicklableProxies):
    """A pairs cluster bootstrap of one coefficient.

    Attributes
    ----------
    estimate : float
        The coefficient on the full sample.
    se : float
        Standard deviation of the finite bootstrap draws.
    lo, hi : float
        Interval bounds of type ``ci_type`` at ``level``.
    draws : numpy.ndarray
        The ``reps`` bootstrap replicates of the coefficient (NaN where a replicate's fit
        was singular or did not converge; those are left out of every interval).
    reps, seed, ci_type, n_clusters, level, family : as requested
    nested : bool
        True for two-stage resampling (clusters, then units within clusters).
    n_failed : int
        Replicates without a finite estimate.
    se_cr1 : float
        CR1 standard error of the full-sample coefficient (``"studentized"`` uses it).
    t_draws : numpy.ndarray or None
        Studentized replicates ``(draw - estimate) / se_draw`` for ``"studentized"``.
    details : Mapping
        ``bias``, and for BCa ``z0`` and ``acceleration``.
    """

    estimate: float
    se: float
    lo: float
    hi: float
    draws: np.ndarray = field(repr=False)
    reps: int
    seed: int | str | None
    ci_type: str
    n_clusters: int
    level: float = 0.95
    family: str = "gaussian"
    nested: bool = False
    n_failed: int = 0
    se_cr1: float = float("nan")
    t_draws: np.ndarray | None = field(default=None, repr=False)
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    def tidy(self) -> pd.DataFrame:
        """One row in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand="coef"``, ``method="bootstrap"``, ``scale`` ``"log-odds"`` for a logit
        coefficient else ``"identity"``; then ``ci_type, family, nested, n_failed, bias``."""
        row = {"estimate": self.estimate, "se": self.se, "lo": self.lo, "hi": self.hi,
               "level": self.level, "reps": self.reps, "seed": self.seed,
               "n_clusters": self.n_clusters, "ci_type": self.ci_type,
               "family": self.family, "nested": self.nested, "n_failed": self.n_failed,
               "bias": self.details.get("bias", float("nan"))}
        return tidy_rows([row], estimand="coef", method="bootstrap",
                         scale="log-odds" if self.family == "binomial" else "identity",
                         note="")

    def __str__(self) -> str:
        return (f"cluster bootstrap ({self.ci_type}, {self.reps} reps, "
                f"{self.n_clusters} clusters): {self.estimate:.4g}, {self.level:.0%} CI "
                f"[{self.lo:.4g}, {self.hi:.4g}], se={self.se:.3g}")


# ------------------------------------------------------------------------ main entry
def cluster_bootstrap(
    X: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    *,
    target: int = 0,
    family: Regression = "gaussian",
    reps: int = 2000,
    level: float = 0.95,
    ci: CIType = "percentile",
    seed: SeedLike = None,
    nested: np.ndarray | None = None,
) -> BootstrapResult:
    """Pairs cluster bootstrap of one OLS (or logit) coefficient.

    Parameters
    ----------
    X : (n, k) array
        Design matrix (a column of ones for a mean).
    y : (n,) array
        Outcome (0/1 for ``family="binomial"``).
    clusters : (n,) int array
        Codes of the resampling unit (cluster). Rows that must stay together (the AB and
        BA records of one comparison) must share a code.
    target : int
        Column of ``X`` whose coefficient is bootstrapped.
    family : {"gaussian", "binomial"}
        OLS (means, differences, linear-probability coefficients) or logistic regression
        (batched Newton on the cluster-weighted data; slower).
    reps : int
        Bootstrap replicates.
    level : float
        Confidence level.
    ci : {"percentile", "expanded", "bca", "studentized"}
        Percentile, expanded percentile (Hesterberg 2015; percentiles widened for G
        clusters, better coverage with 20-50 clusters), BCa (jackknife over clusters for
        the acceleration) or bootstrap-t (studentized by the CR1 standard error
        recomputed in each replicate).
    seed : int or numpy.random.Generator
        Seeds the resampling.
    nested : (n,) int array, optional
        Second-stage units (e.g. items, or AB/BA pairs) nested in ``clusters``: two-stage
        resampling draws clusters, then units with replacement within each drawn cluster.

    Returns
    -------
    BootstrapResult

    Raises
    ------
    TooFewClustersError
        With fewer than 5 clusters (bootstrap intervals are not trustworthy there).

    References
    ----------
    Davison & Hinkley (1997), doi:10.1017/CBO9780511802843, chapters 3.8 and 5;
    Efron (1987), doi:10.1080/01621459.1987.10478410;
    Cameron, Gelbach & Miller (2008), doi:10.1162/rest.90.3.414.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> g = np.repeat(np.arange(30), 4)
    >>> y = rng.normal(size=30)[g] + rng.normal(size=120)
    >>> res = cluster_bootstrap(np.ones((120, 1)), y, g, reps=999, seed=1)
    >>> bool(res.lo < y.mean() < res.hi)
    True
    """
    family = cast(Regression, family_name(family, REGRESSION_FAMILIES))
    check_option("ci", ci, CI_TYPES)
    X, y, codes, g = regression_arrays(X, y, clusters, target=target)
    n, k = X.shape
    level = check_level(level)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    if g < MIN_BOOTSTRAP_CLUSTERS:
        raise TooFewClustersError(
            f"only {g} clusters; bootstrap intervals need at least "
            f"{MIN_BOOTSTRAP_CLUSTERS}. Report per-cluster (stratified) results, or use the "
            "wild cluster bootstrap (method='wild') or CR2 with Satterthwaite df.")
    if g < FEW_CLUSTERS:
        warnings.warn(f"only {g} clusters: cluster bootstrap intervals may under-cover; "
                      "CR2 (Satterthwaite df) or the wild cluster bootstrap is the "
                      "trustworthy choice", FewClustersWarning, stacklevel=2)
    if nested is not None and ci == "studentized":
        raise InvalidOptionError("ci='studentized' is not available with nested resampling; use "
                                 "ci='percentile' or 'bca'")
    rng, seed = seeded_rng(seed)
    studentized = ci == "studentized"

    if nested is None:
        block, block_cluster = codes, np.arange(g)
    else:
        units = cluster_codes(np.asarray(nested))[0]
        if units.shape != (n,):
            raise EvalmixError("nested must have one code per row")
        pairs = pd.DataFrame({"u": units, "c": codes}).drop_duplicates()
        if pairs["u"].duplicated().any():
            raise EvalmixError("nested units must be nested in clusters: a unit code "
                               "appears in more than one cluster")
        block = units
        block_cluster = pairs.sort_values("u")["c"].to_numpy()
    n_blocks = int(block.max()) + 1

    gather = None
    if family == "gaussian":
        sums = _block_sums(X, y, block, n_blocks, True)
        if nested is None and not studentized and k <= 2:
            gather = np.column_stack([sums["H"].reshape(n_blocks, k * k), sums["s"]])

        def fit(W: np.ndarray, stud: bool = studentized
                ) -> tuple[np.ndarray, np.ndarray | None]:
            return _linear_fit(W, sums, target, stud)
    else:
        cells = _cells(X, y, block)
        start = _logit_fit(np.ones((1, n_blocks)), cells, target, np.zeros(k), False,
                           n_blocks, max_iter=100, return_beta=True)

        def fit(W: np.ndarray, stud: bool = studentized
                ) -> tuple[np.ndarray, np.ndarray | None]:
            return _logit_fit(W, cells, target, start, stud, n_blocks)

    ones = np.ones((1, n_blocks))
    est0, var0 = fit(ones, True)
    estimate = float(est0[0])
    if not np.isfinite(estimate):
        raise EvalmixError("the full-sample fit failed (singular design or separation)")

    draws = np.empty(reps)
    var = np.empty(reps) if studentized else None
    step = max(1, CHUNK_ENTRIES // max(n_blocks, 1))
    chunks: Iterator[tuple[int, int, np.ndarray | None]] = (
        index_chunks([np.arange(g)], reps, rng, n_blocks) if nested is None else
        ((a, min(reps, a + step), None) for a in range(0, reps, step)))
    for a, b, idx in chunks:
        if idx is None:
            d, v = fit(_nested_weights(block_cluster, g, b - a, rng))
        elif gather is not None:
            d, v = _linear_from_gather(idx, gather, k, target), None
        else:
            d, v = fit(_counts(idx, g))
        draws[a:b] = d
        if var is not None:
            var[a:b] = v
    finite = np.isfinite(draws) if var is None else np.isfinite(draws) & (var > 0)
    n_failed = int((~finite).sum())
    if finite.sum() < 2:
        raise EvalmixError("fewer than 2 bootstrap replicates gave a finite estimate")
    draws = np.where(finite, draws, np.nan)
    good = draws[finite]
    details: dict[str, Any] = {"bias": float(good.mean() - estimate)}
    assert var0 is not None  # the full-sample fit always computes its CR1 variance
    se_cr1 = float(np.sqrt(var0[0]))
    t_draws = None
    if ci == "percentile":
        lo, hi = percentile_interval(good, level)
    elif ci == "expanded":
        lo, hi = expanded_interval(good, g, level)
    elif ci == "bca":
        jack = np.empty(g)
        jchunk = max(1, CHUNK_ENTRIES // max(n_blocks, 1))
        for a in range(0, g, jchunk):
            b = min(g, a + jchunk)
            Wj = np.ones((b - a, g))
            Wj[np.arange(b - a), np.arange(a, b)] = 0.0
            jack[a:b] = fit(Wj[:, block_cluster])[0]
        (lo, hi), z0, acc = bca_interval(good, estimate, jack, level)
        details.update(z0=z0, acceleration=acc)
    else:
        assert var is not None  # studentized: every chunk returned variances
        t_draws = (draws - estimate) / np.sqrt(var)
        lo, hi = studentized_interval(estimate, se_cr1, t_draws[finite], level)
    return BootstrapResult(
        estimate=estimate, se=float(good.std(ddof=1)), lo=float(lo), hi=float(hi),
        draws=draws, reps=int(reps), seed=seed, ci_type=ci, n_clusters=g,
        level=level, family=family, nested=nested is not None, n_failed=n_failed,
        se_cr1=se_cr1, t_draws=t_draws, details=details)
