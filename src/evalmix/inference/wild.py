"""Wild cluster bootstrap-t with the null imposed (WCR), p-value and test-inversion CI.

The bootstrap samples are ``y* = X beta_r + u_r * v_g`` with ``(beta_r, u_r)`` the OLS
fit restricted by ``beta[target] = null`` and ``v_g`` one Rademacher or Webb weight per
cluster. Every replicate's coefficient and CR1 standard error are linear and quadratic
forms in ``v`` (Roodman, MacKinnon, Nielsen & Webb 2019), so all replicates come out of a
few matrix products: with ``q = (X'X)^{-1} e_target``, cluster scores ``S_g = X_g'u_r``,
``a_g = q'S_g`` and ``R_g = q' X_g'X_g (X'X)^{-1}``,

    beta*_target - null = v . a,     q' X_g'e*_g = v_g a_g - R_g . (S' v).

Because ``u_r`` is linear in the null value, the whole bootstrap distribution at any
null value follows from five numbers per replicate, which makes inverting the test into a
confidence interval a cheap one-dimensional root search.

References
----------
Cameron, A. C., Gelbach, J. B. & Miller, D. L. (2008). Bootstrap-based improvements for
inference with clustered errors. Review of Economics and Statistics 90, 414-427.
doi:10.1162/rest.90.3.414
Webb, M. D. (2023). Reworking wild bootstrap-based inference for clustered errors.
Canadian Journal of Economics 56, 839-858. doi:10.1111/caje.12661
Roodman, D., MacKinnon, J. G., Nielsen, M. O. & Webb, M. D. (2019). Fast and wild:
bootstrap inference in Stata using boottest. Stata Journal 19, 4-60.
doi:10.1177/1536867X19830877
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import cast, get_args

import numpy as np
import pandas as pd

from evalmix.errors import (
    EvalmixError,
    TooFewClustersError,
    check_count,
    check_level,
    check_option,
)
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.inference.sandwich import cluster_sums, cr1_factor, regression_arrays
from evalmix.inference.scale import t_quantile
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import WildWeights

__all__ = ["WildResult", "wild_cluster_bootstrap", "wild_weights", "WEBB_VALUES",
           "WEBB_BELOW", "choose_weights", "min_p_value"]

WEIGHTS: tuple[str, ...] = get_args(WildWeights)
#: Webb's six-point distribution: +-sqrt(1/2), +-1, +-sqrt(3/2), each with probability 1/6.
WEBB_VALUES = np.array([-np.sqrt(1.5), -1.0, -np.sqrt(0.5), np.sqrt(0.5), 1.0, np.sqrt(1.5)])
CHUNK_ENTRIES = 4_000_000
#: ``weights="auto"`` takes Webb's six-point weights below this many clusters (Webb 2023;
#: Roodman et al. 2019 recommend them below about 12), Rademacher from it.
WEBB_BELOW = 12
#: Every distinct weight vector is used (exact randomisation distribution) when there are
#: at most this many (or at most ``reps``): Rademacher up to 13 clusters, Webb up to 5.
ENUMERATE_MAX = 10_000


def choose_weights(weights: WildWeights, n_clusters: int) -> str:
    """``weights`` with ``"auto"`` resolved: Webb below :data:`WEBB_BELOW` clusters.

    Examples
    --------
    >>> choose_weights("auto", 5), choose_weights("auto", 40), choose_weights("webb", 40)
    ('webb', 'rademacher', 'webb')
    """
    check_option("weights", weights, WEIGHTS)
    if weights == "auto":
        return "webb" if n_clusters < WEBB_BELOW else "rademacher"
    return weights


def min_p_value(weights: str, n_clusters: int) -> float:
    """Smallest p-value the wild cluster bootstrap-t can give with ``n_clusters``.

    A constant weight vector ``v = c`` (each of the ``K`` values, ``K`` = 2 Rademacher,
    6 Webb) scales the restricted residuals of every cluster alike, so its bootstrap t
    is ``+-t_obs`` (the t statistic is scale-free): ``K`` of the ``K^G`` equally likely
    vectors reach ``|t_obs|`` and the p-value is at least ``K / K^G = K^(1-G)`` -- also
    with random draws, which sample those vectors. A test at level ``1 - alpha`` can
    reject only if this is below ``alpha``: Rademacher needs 6 clusters for 95%
    (``1/16 = 0.0625`` with 5), Webb 3 (``1/6`` with 2, ``1/36`` with 3).

    Examples
    --------
    >>> min_p_value("rademacher", 5), round(min_p_value("webb", 5), 6)
    (0.0625, 0.000772)
    """
    k = 2 if weights == "rademacher" else 6
    return float(k ** (1.0 - n_clusters))


@dataclass(frozen=True)
class WildResult:
    """Wild cluster bootstrap-t (WCR) test and confidence interval for one coefficient.

    Attributes
    ----------
    estimate : float
        OLS coefficient.
    t_obs : float
        Observed t statistic against ``null`` with the CR1 standard error (``se_cr1``).
    p_value : float
        Symmetric bootstrap p-value, the share of ``|t*| >= |t_obs|``.
    lo, hi : float
        Confidence interval by test inversion: the null values whose p-value is at least
        ``1 - level``.
    reps : int
        Replicates used (``2^G`` under full enumeration).
    seed, weights, n_clusters, level, null : as requested
    se_cr1 : float
    enumerated : bool
        True when every distinct weight vector was used (``2^G`` Rademacher, ``6^G``
        Webb).
    t_draws : numpy.ndarray
        Bootstrap t statistics at ``null``.
    min_p_value : float
        Smallest attainable p-value (:func:`min_p_value`): above ``1 - level`` no null
        value can be rejected and the interval is the whole line.
    """

    estimate: float
    t_obs: float
    p_value: float
    lo: float
    hi: float
    reps: int
    seed: int | str | None
    weights: str
    n_clusters: int
    level: float = 0.95
    null: float = 0.0
    se_cr1: float = float("nan")
    enumerated: bool = False
    t_draws: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    min_p_value: float = 0.0

    def tidy(self) -> pd.DataFrame:
        """One row in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand="coef"``, ``method="wild"``, ``se`` the CR1 SE; then ``t_obs, p_value,
        null, weights, enumerated, ci_type``."""
        return tidy_rows([{
            "estimate": self.estimate, "se": self.se_cr1, "lo": self.lo, "hi": self.hi,
            "level": self.level, "reps": self.reps, "seed": self.seed,
            "n_clusters": self.n_clusters, "t_obs": self.t_obs, "p_value": self.p_value,
            "null": self.null, "weights": self.weights, "enumerated": self.enumerated,
            "min_p_value": self.min_p_value, "ci_type": "test-inversion"}], estimand="coef", method="wild",
            scale="identity", note="")

    def __str__(self) -> str:
        return (f"wild cluster bootstrap-t ({self.weights}, {self.reps} reps, "
                f"{self.n_clusters} clusters): {self.estimate:.4g}, t={self.t_obs:.3g}, "
                f"p={self.p_value:.3g}, {self.level:.0%} CI [{self.lo:.4g}, {self.hi:.4g}]")


def wild_weights(n_clusters: int, reps: int, kind: WildWeights,
                 rng: np.random.Generator) -> np.ndarray:
    """(reps, n_clusters) wild bootstrap weights: Rademacher (+-1) or Webb six-point."""
    check_option("weights", kind, WEIGHTS[1:])
    if kind == "rademacher":
        return rng.integers(0, 2, size=(reps, n_clusters), dtype=np.int8) * 2.0 - 1.0
    return WEBB_VALUES[rng.integers(0, 6, size=(reps, n_clusters), dtype=np.int8)]


@dataclass(frozen=True)
class _Parts:
    """Pieces of the bootstrap t as a function of the null value theta."""

    beta: float
    se: float
    adj: float
    a0: np.ndarray
    a1: np.ndarray
    S0: np.ndarray
    S1: np.ndarray
    R: np.ndarray


def _parts(X: np.ndarray, y: np.ndarray, codes: np.ndarray, g: int, target: int) -> _Parts:
    n, k = X.shape
    xtx = X.T @ X
    try:
        A = np.linalg.inv(xtx)
    except np.linalg.LinAlgError as err:
        raise EvalmixError("X'X is singular; drop collinear columns of X") from err
    beta = A @ (X.T @ y)
    q = A[:, target]
    adj = cr1_factor(g, n, k)
    # CR1 standard error of the unrestricted fit
    resid = y - X @ beta
    score = cluster_sums(X * resid[:, None], codes, g) @ q
    se = float(np.sqrt(adj * np.sum(score**2)))
    # restricted residuals u_r(theta) = u0 - theta * u1
    xt = X[:, target]
    Xr = np.delete(X, target, axis=1)
    if Xr.shape[1]:
        proj = np.linalg.lstsq(Xr, np.column_stack([y, xt]), rcond=None)[0]
        u = np.column_stack([y, xt]) - Xr @ proj
    else:
        u = np.column_stack([y, xt])
    S0 = cluster_sums(X * u[:, :1], codes, g)
    S1 = cluster_sums(X * u[:, 1:], codes, g)
    xx = (X[:, :, None] * X[:, None, :]).reshape(n, k * k)
    H = cluster_sums(xx, codes, g).reshape(g, k, k)
    R = np.einsum("i,gij,jl->gl", q, H, A)
    return _Parts(beta=float(beta[target]), se=se, adj=adj, a0=S0 @ q, a1=S1 @ q,
                  S0=S0, S1=S1, R=R)


def _moments(V: np.ndarray, p: _Parts) -> np.ndarray:
    """(reps, 5): N0, N1, sum P^2, sum P Q, sum Q^2 with scores(theta) = P - theta Q."""
    out = np.empty((V.shape[0], 5))
    chunk = max(1, CHUNK_ENTRIES // V.shape[1])
    for a in range(0, V.shape[0], chunk):
        v = V[a:a + chunk]
        P = v * p.a0 - (v @ p.S0) @ p.R.T
        Q = v * p.a1 - (v @ p.S1) @ p.R.T
        out[a:a + chunk] = np.column_stack([v @ p.a0, v @ p.a1, np.sum(P * P, axis=1),
                                            np.sum(P * Q, axis=1), np.sum(Q * Q, axis=1)])
    return out


def _t_star(m: np.ndarray, theta: float, adj: float) -> np.ndarray:
    num = m[:, 0] - theta * m[:, 1]
    den2 = adj * (m[:, 2] - 2 * theta * m[:, 3] + theta**2 * m[:, 4])
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / np.sqrt(np.maximum(den2, 0.0))


#: Relative slack when counting |t*| >= |t|: the all-ones (and all-minus-ones) weight
#: vectors reproduce +-t exactly in exact arithmetic; in floating point they differ by
#: about 1e-11 relative (more far from the estimate), and must still count as ties.
TIE_RTOL = 1e-8
#: Doublings of the search bracket before an interval end is declared infinite
#: (2^20 times the t-based half-width; further out, rounding in the quadratic forms
#: of the bootstrap t exceeds TIE_RTOL).
MAX_WIDEN = 20


def _p_value(m: np.ndarray, theta: float, p: _Parts) -> float:
    t_obs = (p.beta - theta) / p.se
    t = _t_star(m, theta, p.adj)
    t = np.where(np.isfinite(t), t, 0.0)  # a degenerate draw (all scores zero) counts as 0
    return float(np.mean(np.abs(t) >= np.abs(t_obs) * (1 - TIE_RTOL)))


def _invert(m: np.ndarray, p: _Parts, alpha: float, side: int) -> float:
    """Null value on one side of the estimate where the p-value falls to ``alpha``."""
    inner = p.beta
    step = t_quantile(1 - alpha, max(len(p.a0) - 1, 1)) * p.se
    outer = p.beta + side * step
    for _ in range(MAX_WIDEN):  # widen until the test rejects
        if _p_value(m, outer, p) < alpha:
            break
        inner, outer = outer, p.beta + side * 2 * abs(outer - p.beta)
    else:
        return side * np.inf
    for _ in range(80):  # bisection on the step function p(theta) - alpha
        mid = 0.5 * (inner + outer)
        if _p_value(m, mid, p) >= alpha:
            inner = mid
        else:
            outer = mid
        if abs(outer - inner) <= 1e-10 * (abs(p.se) + abs(p.beta)):
            break
    return 0.5 * (inner + outer)


def wild_cluster_bootstrap(
    X: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    *,
    target: int,
    reps: int = 9999,
    level: float = 0.95,
    weights: WildWeights = "rademacher",
    null: float = 0.0,
    seed: SeedLike = None,
) -> WildResult:
    """Wild cluster bootstrap-t with the null imposed (WCR) for one OLS coefficient.

    Parameters
    ----------
    X, y : (n, k) and (n,) arrays
        The regression, as for :func:`~evalmix.inference.bootstrap.cluster_bootstrap`.
    clusters : (n,) array
        Cluster codes (or labels).
    target : int
        Column of ``X`` tested.
    reps : int
        Bootstrap replicates. When the weights have at most ``max(reps, ENUMERATE_MAX)``
        distinct vectors (``2^G`` Rademacher, ``6^G`` Webb) all of them are enumerated
        instead (exact randomisation distribution).
    level : float
        Level of the test-inversion confidence interval.
    weights : {"rademacher", "webb", "auto"}
        Webb's six-point weights are preferred with fewer than about 12 clusters, where
        Rademacher's ``2^G`` sign vectors make the test too coarse to reject (with 5
        clusters the smallest p-value is ``1/16``); ``"auto"`` takes Webb below
        :data:`WEBB_BELOW` clusters.
    null : float
        Null value of the coefficient for ``t_obs`` and ``p_value``.
    seed : int or numpy.random.Generator
        Seeds the bootstrap weights (unused when the sign vectors are enumerated).

    Returns
    -------
    WildResult

    References
    ----------
    Cameron, Gelbach & Miller (2008), doi:10.1162/rest.90.3.414;
    Webb (2023), doi:10.1111/caje.12661;
    Roodman, MacKinnon, Nielsen & Webb (2019), doi:10.1177/1536867X19830877.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> g = np.repeat(np.arange(12), 10)
    >>> X = np.column_stack([np.ones(120), rng.integers(0, 2, 12)[g]])
    >>> y = 0.5 * X[:, 1] + rng.normal(size=12)[g] + rng.normal(size=120)
    >>> res = wild_cluster_bootstrap(X, y, g, target=1, weights="webb", seed=1)
    >>> 0 <= res.p_value <= 1
    True
    """
    check_option("weights", weights, WEIGHTS)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    X, y, codes, g = regression_arrays(X, y, clusters, target=target)
    weights = cast(WildWeights, choose_weights(weights, g))
    level = check_level(level)
    if g < 2:
        raise TooFewClustersError("the wild cluster bootstrap needs at least 2 clusters")
    parts = _parts(X, y, codes, g, target)
    if not parts.se > 0:
        raise EvalmixError("the CR1 standard error is zero; the coefficient has no "
                           "within-sample variation to test")
    rng, seed = seeded_rng(seed)
    values = (1.0, -1.0) if weights == "rademacher" else tuple(WEBB_VALUES)
    enumerated = g < 64 and len(values) ** g <= max(reps, ENUMERATE_MAX)
    if enumerated:
        V = np.array(list(itertools.product(values, repeat=g)))
    else:
        V = wild_weights(g, reps, weights, rng)
    m = _moments(V, parts)
    alpha = 1 - level
    lo = _invert(m, parts, alpha, -1)
    hi = _invert(m, parts, alpha, +1)
    return WildResult(
        estimate=parts.beta, t_obs=(parts.beta - null) / parts.se,
        p_value=_p_value(m, null, parts), lo=float(lo), hi=float(hi), reps=int(V.shape[0]),
        seed=seed, weights=weights, n_clusters=g, level=level, null=null,
        se_cr1=parts.se, enumerated=enumerated, t_draws=_t_star(m, null, parts.adj),
        min_p_value=min_p_value(weights, g))
