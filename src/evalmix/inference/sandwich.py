"""Cluster-robust (sandwich) variances: CR0, CR1, CR2, CR3 and multiway, for OLS and logit.

Pure array functions: ``X`` (n, k), residuals (n,), integer cluster codes (n,). One
sandwich serves a mean (intercept-only ``X``), a paired difference, a regression
coefficient and a logit coefficient.

Notation. ``M = (X' W X)^{-1}`` is the bread (``W`` = GLM working weights, identity for
OLS); the estimating-equation scores are ``X' e`` with ``e = y - mu`` (response
residuals; for the logit link the GLM score is exactly ``x_i (y_i - mu_i)``). With
``Xw = W^{1/2} X`` and ``ew = W^{-1/2} e`` every formula below is the OLS one applied to
``(Xw, ew)``; ``H_gg = Xw_g M Xw_g'`` is the hat-matrix block of cluster ``g``.

* ``CR0``: ``M (sum_g X_g'e_g e_g'X_g) M`` (Liang & Zeger 1986).
* ``CR1``: CR0 times ``G/(G-1) * (N-1)/(N-k)``, as ``sandwich::vcovCL(type="HC1")`` and
  Stata's ``vce(cluster)``.
* ``CR2``: Bell & McCaffrey (2002) with adjustment ``A_g = (I - H_gg)^{-1/2}`` (symmetric
  square root; Moore-Penrose for eigenvalues <= 1e-12), exactly as ``clubSandwich``'s
  ``vcovCR(type="CR2")`` for ``lm`` (working model = target = identity). For ``glm``
  clubSandwich uses ``A_g = T_g^{1/2} [T_g (I - H_gg) T_g]^{-1/2} T_g^{1/2}`` with
  ``T_g = diag(w)``; we follow it (``_dense_pieces``).
* ``CR3``: ``A_g = (I - H_gg)^{-1}``: the cluster jackknife, as clubSandwich's CR3
  (no ``(G-1)/G`` factor).
* Satterthwaite degrees of freedom for one coefficient, as ``clubSandwich::coef_test(
  test="Satterthwaite")``: with ``p_g`` the n-vector such that the CR estimate of the
  coefficient's variance is ``sum_g (p_g'e)^2``, ``df = (sum_g p_g'p_g)^2 /
  sum_{g,h} (p_g'p_h)^2`` (working model: independent, equal variances).
* Multiway (Cameron, Gelbach & Miller 2011): inclusion-exclusion over every non-empty
  set of factors, ``V = V_A + V_B - V_{A cap B}``, each term with its own ``G/(G-1)``
  (as ``sandwich::vcovCL(cluster = ~a + b, multi0 = FALSE)``), negative eigenvalues set
  to zero when the sum is not positive semi-definite.

The per-cluster pieces (whitening, each cluster's adjustment, cluster sums, the CR1
factor) are in :mod:`evalmix.inference.sandwich_pieces` and re-exported here; the
variances, the Satterthwaite df and the multiway sandwich are here.

Speed: the adjustment matrices are ``m_g x m_g``, but ``H_gg`` has rank <= k, so with the
whitened design ``Z = Xw L`` (``L L' = M``) and the eigen-decomposition of the k x k
matrix ``Z_g'Z_g = V diag(lam) V'`` one gets ``Z_g' f(I - H_gg) e_g = V diag(f(1 - lam))
V' Z_g'e_g`` for any matrix function ``f`` with ``f(1) = 1``. Nothing n x n or m_g x m_g
is ever formed (except for logit CR2, whose clubSandwich definition is not a function of
``H_gg`` alone; it is done per cluster, batched by cluster size).

References
----------
Liang, K.-Y. & Zeger, S. L. (1986). Longitudinal data analysis using generalized linear
models. Biometrika 73, 13-22. doi:10.1093/biomet/73.1.13
Bell, R. M. & McCaffrey, D. F. (2002). Bias reduction in standard errors for linear
regression with multi-stage samples. Survey Methodology 28, 169-181.
Pustejovsky, J. E. & Tipton, E. (2018). Small-sample methods for cluster-robust variance
estimation and hypothesis testing in fixed effects models. Journal of Business &
Economic Statistics 36, 672-683. doi:10.1080/07350015.2016.1247004
Cameron, A. C., Gelbach, J. B. & Miller, D. L. (2011). Robust inference with multiway
clustering. Journal of Business & Economic Statistics 29, 238-249.
doi:10.1198/jbes.2010.07136
Cameron, A. C. & Miller, D. L. (2015). A practitioner's guide to cluster-robust
inference. Journal of Human Resources 50, 317-372. doi:10.3368/jhr.50.2.317
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from evalmix.data.table import cluster_codes, intersect_codes
from evalmix.errors import EvalmixError, InvalidOptionError, check_option
from evalmix.inference.sandwich_pieces import (
    CR_TYPES,
    _check_residual_df,
    _Pieces,
    _pieces,
    _whiten,
    _Whitened,
    cluster_sums,
    cr1_factor,
    regression_arrays,
)
from evalmix.inference.sandwich_pieces import DENSE_MAX_SIZE as DENSE_MAX_SIZE
from evalmix.inference.sandwich_pieces import EIGEN_TOL as EIGEN_TOL
from evalmix.vocabulary import CRType, MultiwayCRType

__all__ = ["CR_TYPES", "FEW_CLUSTERS", "MIN_BOOTSTRAP_CLUSTERS", "MultiwayTerm", "MultiwayVcov",
           "cluster_codes", "cluster_sums", "regression_arrays", "cr1_factor", "vcov_cluster",
           "satterthwaite_df", "vcov_multiway", "multiway_df", "intersect_codes"]

#: Below this many clusters CR0/CR1/CR3 and the pairs bootstrap under-cover (Cameron &
#: Miller 2015, doi:10.3368/jhr.50.2.317): evalmix warns, and analyze recommends CR2.
FEW_CLUSTERS = 20
#: Below this many clusters bootstrap intervals are refused (FEW_CLUSTERS only warns).
MIN_BOOTSTRAP_CLUSTERS = 5


# --------------------------------------------------------------------------- public
def vcov_cluster(
    X: np.ndarray,
    resid: np.ndarray,
    clusters: np.ndarray,
    *,
    type: CRType = "CR1",
    working_weights: np.ndarray | None = None,
) -> np.ndarray:
    """Cluster-robust covariance matrix of OLS (or GLM) coefficients.

    Parameters
    ----------
    X : (n, k) array
        Design matrix.
    resid : (n,) array
        Response residuals ``y - fitted`` (for a logit fit, ``y - mu``).
    clusters : (n,) array
        Cluster labels or integer codes.
    type : {"CR0", "CR1", "CR2", "CR3"}
        ``CR1`` multiplies CR0 by ``G/(G-1) * (N-1)/(N-k)`` (``sandwich::vcovCL``
        ``type="HC1"``, Stata). CR2 and CR3 follow clubSandwich.
    working_weights : (n,) array, optional
        GLM working weights (``mu (1 - mu)`` for the logit link); ``None`` for OLS.

    Returns
    -------
    (k, k) ndarray

    Examples
    --------
    >>> y = np.array([1., 4, 11, 6, 13, 8]); X = np.ones((6, 1))
    >>> V = vcov_cluster(X, y - y.mean(), np.array([1, 1, 2, 2, 3, 3]), type="CR1")
    >>> round(float(np.sqrt(V[0, 0])), 7)
    2.4037009

    References
    ----------
    Cameron & Miller (2015), doi:10.3368/jhr.50.2.317; Pustejovsky & Tipton (2018),
    doi:10.1080/07350015.2016.1247004.
    """
    _check_residual_df(*np.shape(X))
    pieces, wh = _pieces(X, resid, clusters, type, working_weights, want_df=False)
    return _sandwich(pieces, wh, type)


def _sandwich(pieces: _Pieces, wh: _Whitened, type: str) -> np.ndarray:
    """``L (sum_g t_g t_g') L'`` (times the CR1 factor for CR1), symmetrised."""
    V = pieces.L @ (pieces.t.T @ pieces.t) @ pieces.L.T
    if type == "CR1":
        n, k = wh.Z.shape
        V = V * cr1_factor(pieces.n_clusters, n, k)
    return (V + V.T) / 2


def _satterthwaite(d: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """The df per coefficient from ``P_gh = delta_gh d_g - omega_g' omega_h``."""
    om2 = (omega**2).sum(axis=1)  # (G, k): ||omega_g,i||^2
    trace = d.sum(axis=0) - om2.sum(axis=0)
    cross = np.einsum("gji,gli->ijl", omega, omega)  # (k, k, k): sum_g w_gj w_gl per i
    sumsq = (d**2).sum(axis=0) - 2 * (d * om2).sum(axis=0) + (cross**2).sum(axis=(1, 2))
    return trace**2 / sumsq


def satterthwaite_df(
    X: np.ndarray,
    clusters: np.ndarray,
    *,
    type: CRType = "CR2",
    working_weights: np.ndarray | None = None,
) -> np.ndarray:
    """Satterthwaite degrees of freedom of each coefficient's CR t statistic.

    As ``clubSandwich::coef_test(vcovCR(fit, cluster, type), test="Satterthwaite")``:
    ``df = (sum_g p_g'p_g)^2 / sum_{g,h} (p_g'p_h)^2`` under a working model of
    independent, equal-variance errors (Bell & McCaffrey 2002; Pustejovsky & Tipton 2018,
    doi:10.1080/07350015.2016.1247004). ``G x G`` sums are done with k x k pieces.

    Returns
    -------
    (k,) ndarray
    """
    pieces, _ = _pieces(X, None, clusters, type, working_weights, want_df=True)
    return _satterthwaite(pieces.d, pieces.omega)


def _vcov_and_df_dense(X, resid, clusters, *, type, working_weights=None):
    """Reference path (per-cluster m x m matrices) for tests: (vcov, df)."""
    pieces, wh = _pieces(X, resid, clusters, type, working_weights, want_df=True,
                         dense=True)
    return _sandwich(pieces, wh, type), _satterthwaite(pieces.d, pieces.omega)


@dataclass(frozen=True)
class MultiwayTerm:
    """One inclusion-exclusion term ``sign * V_S`` of a multiway covariance.

    Attributes
    ----------
    sign : int
        ``(-1)^(|S|+1)``.
    factors : tuple of int
        The factor set ``S`` (indices into the factors given).
    n_clusters : int
        Levels of the intersection of the factors in ``S``.
    vcov : (k, k) ndarray
        The one-way covariance clustered on that intersection (of the multiway type).
    df : (k,) ndarray or None
        CR2 Satterthwaite df of each coefficient for a single factor of a CR2 multiway
        covariance (computed with its variance, from the same per-cluster pieces).
    """

    sign: int
    factors: tuple[int, ...]
    n_clusters: int
    vcov: np.ndarray
    df: np.ndarray | None = None


@dataclass(frozen=True)
class MultiwayVcov:
    """Multiway cluster-robust covariance.

    Attributes
    ----------
    vcov : (k, k) ndarray
    n_clusters : tuple of int
        Levels of each factor (in the order given).
    fixed : bool
        True when the inclusion-exclusion sum was not positive semi-definite and its
        negative eigenvalues were set to zero.
    min_eigenvalue : float
        Smallest eigenvalue before the fix.
    type : str
        "CR0", "CR1" or "CR2".
    terms : tuple of MultiwayTerm
        Every inclusion-exclusion term; :func:`multiway_df` reuses them, and
        :meth:`one_way` gives a single factor's covariance.
    """

    vcov: np.ndarray
    n_clusters: tuple[int, ...]
    fixed: bool
    min_eigenvalue: float
    type: str = "CR1"
    terms: tuple[MultiwayTerm, ...] = ()

    def one_way(self, factor: int) -> np.ndarray:
        """The one-way covariance (of the same type) clustered on factor ``factor``."""
        return next(t.vcov for t in self.terms if t.factors == (factor,))


def _inclusion_exclusion(codes: Sequence[np.ndarray]
                         ) -> Iterator[tuple[int, tuple[int, ...], np.ndarray, int]]:
    """(sign, factor subset, codes of its intersection, G) for every non-empty subset.

    Raises when a single factor has fewer than 2 levels.
    """
    for r in range(1, len(codes) + 1):
        for combo in combinations(range(len(codes)), r):
            cc = codes[combo[0]] if r == 1 else intersect_codes(*(codes[i] for i in combo))
            G = int(cc.max()) + 1
            if r == 1 and G < 2:
                raise EvalmixError("each cluster factor needs at least 2 levels")
            yield (-1) ** (r + 1), combo, cc, G


def _psd(terms: list[MultiwayTerm], n_levels: Sequence[int], type: str) -> MultiwayVcov:
    """Sum the terms, symmetrise, and set negative eigenvalues to zero (CGM 2011, 2.3)."""
    V = np.sum([t.sign * t.vcov for t in terms], axis=0)
    V = (V + V.T) / 2
    lam, Q = np.linalg.eigh(V)
    fixed = bool(lam.min() < 0)
    if fixed:
        V = (Q * np.maximum(lam, 0.0)) @ Q.T
    return MultiwayVcov(V, tuple(n_levels), fixed, float(lam.min()), type, tuple(terms))


def _terms(X: np.ndarray, resid: np.ndarray, codes: Sequence[np.ndarray], type: str,
           working_weights: np.ndarray | None) -> list[MultiwayTerm]:
    """Every inclusion-exclusion term; CR2 single factors carry their Satterthwaite df."""
    if type == "CR2":
        out = []
        for sign, combo, cc, G in _inclusion_exclusion(codes):
            pieces, wh = _pieces(X, resid, cc, "CR2", working_weights,
                                 want_df=len(combo) == 1)
            df = _satterthwaite(pieces.d, pieces.omega) if len(combo) == 1 else None
            out.append(MultiwayTerm(sign, combo, G, _sandwich(pieces, wh, "CR2"), df))
        return out
    wh = _whiten(X, resid, working_weights)
    n, k = wh.Z.shape
    s = wh.Z * wh.ew[:, None]
    out = []
    for sign, combo, cc, G in _inclusion_exclusion(codes):
        sums = cluster_sums(s, cc, G)
        adj = cr1_factor(G, n, k) if (type == "CR1" and G > 1) else 1.0
        V = adj * (wh.L @ (sums.T @ sums) @ wh.L.T)
        out.append(MultiwayTerm(sign, combo, G, (V + V.T) / 2))
    return out


def vcov_multiway(
    X: np.ndarray,
    resid: np.ndarray,
    clusters: Sequence[np.ndarray],
    *,
    type: MultiwayCRType = "CR1",
    working_weights: np.ndarray | None = None,
) -> MultiwayVcov:
    """Multiway (crossed) cluster-robust covariance, Cameron, Gelbach & Miller (2011).

    ``V = sum over non-empty factor sets S of (-1)^(|S|+1) V_S``, with ``V_S`` the
    one-way CR0 sandwich clustered on the intersection of the factors in ``S``, times
    ``G_S/(G_S - 1)`` for CR1; CR1 then multiplies the sum by ``(N-1)/(N-k)``. This equals
    ``sandwich::vcovCL(fit, cluster = ~a + b, type = "HC1", multi0 = FALSE)``. When the
    sum has a negative eigenvalue it is replaced by ``Q max(Lambda, 0) Q'`` (CGM 2011,
    section 2.3; ``vcovCL(fix = TRUE)``). ``type="CR2"`` uses the same inclusion-exclusion
    with every ``V_S`` the bias-reduced CR2 sandwich of :func:`vcov_cluster` (the
    small-sample correction applied per term, as CGM 2011 sec. 2.3 suggest for CR1);
    with one factor it is that factor's CR2.

    References
    ----------
    Cameron, Gelbach & Miller (2011), doi:10.1198/jbes.2010.07136.
    """
    check_option("type", type, ("CR0", "CR1", "CR2"))
    if len(clusters) < 1:
        raise InvalidOptionError("vcov_multiway needs at least one cluster factor")
    _check_residual_df(*np.shape(np.asarray(X).reshape(np.shape(X)[0], -1)))
    codes = [cluster_codes(c)[0] for c in clusters]
    n_levels = [int(c.max()) + 1 for c in codes]
    return _psd(_terms(X, resid, codes, type, working_weights), n_levels, type)


def multiway_df(
    X: np.ndarray,
    resid: np.ndarray,
    clusters: Sequence[np.ndarray],
    *,
    target: int = 0,
    working_weights: np.ndarray | None = None,
    multiway: MultiwayVcov | None = None,
) -> tuple[float, tuple[float, ...]]:
    """Degrees of freedom of a multiway CR2 t statistic, and each factor's own df.

    The multiway variance is the inclusion-exclusion sum ``V = sum_S (-1)^(|S|+1) V_S``
    (:func:`vcov_multiway`). Its Welch-Satterthwaite df is ``V^2 / sum_S V_S^2 / nu_S``
    with ``nu_S`` the one-way CR2 Satterthwaite df (:func:`satterthwaite_df`) of a
    single factor and ``G_S - 1`` for an intersection. Because the intersection terms
    are subtracted this can collapse towards 0 when ``V`` is small; the df is therefore
    kept between the smallest and the largest single-factor df -- the floor is the
    ``G_min - 1`` rule of Cameron, Gelbach & Miller (2011) and MacKinnon, Nielsen & Webb
    (2021) in its Satterthwaite form. docs/coverage.md has the coverage study that chose
    this rule (the plain ``G_min - 1`` over-covered proportions at 97-98%, a
    Satterthwaite df that ignored the subtracted term under-covered at 92-94%).

    Pass ``multiway``, the CR2 :func:`vcov_multiway` of the same data, to reuse its
    terms instead of computing every CR2 sandwich again.

    Returns
    -------
    (df, per-factor df)

    References
    ----------
    Satterthwaite, F. E. (1946). An approximate distribution of estimates of variance
    components. Biometrics Bulletin 2(6), 110-114. doi:10.2307/3002019
    MacKinnon, J. G., Nielsen, M. O. & Webb, M. D. (2021). Wild bootstrap and asymptotic
    inference with multiway clustering. JBES 39(2), 505-519.
    doi:10.1080/07350015.2019.1677472
    """
    if multiway is None:
        multiway = vcov_multiway(X, resid, clusters, type="CR2",
                                 working_weights=working_weights)
    elif multiway.type != "CR2" or len(multiway.n_clusters) != len(clusters):
        raise EvalmixError("multiway_df needs the CR2 vcov_multiway of the same factors")
    by = tuple(float(t.df[target]) for t in multiway.terms if t.df is not None)
    total, denom = 0.0, 0.0
    for t in multiway.terms:
        v = float(t.vcov[target, target])
        nu = by[t.factors[0]] if len(t.factors) == 1 else float(t.n_clusters - 1)
        total += t.sign * v
        denom += v * v / max(nu, 1e-12)
    satt = total * total / denom if denom > 0 and total > 0 else 0.0
    return float(min(max(satt, min(by)), max(by))), by
