"""The per-cluster pieces every sandwich is made of (:mod:`evalmix.inference.sandwich`).

The regression whitened by its GLM working weights, each cluster's adjustment of
``I - H_gg`` (CR0/CR1 none, CR2 the inverse symmetric square root, CR3 the inverse) on a
fast path for small clusters and a dense per-cluster path (batched) otherwise, the
clusters' sums, the CR1 factor and the residual-df check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import numpy as np
from scipy import linalg

from evalmix._blas import one_blas_thread
from evalmix.data.table import cluster_codes
from evalmix.errors import EvalmixError, InvalidOptionError, check_option
from evalmix.vocabulary import CRType

CR_TYPES: tuple[str, ...] = get_args(CRType)


#: Eigenvalues of ``I - H_gg`` at or below this are treated as zero (clubSandwich's
#: ``matrix_power`` uses the same 1e-12 cut-off).
EIGEN_TOL = 1e-12


#: Largest cluster for the per-cluster (m x m) path, and entries per batch of clusters.
DENSE_MAX_SIZE = 3000


DENSE_BATCH_ENTRIES = 2_000_000


def regression_arrays(X: np.ndarray, y: np.ndarray, clusters: np.ndarray, *, target: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Checked ``(X as (n, k) floats, y, dense cluster codes, G)`` for a method that
    resamples or tests coefficient ``target`` of ``y ~ X`` clustered on ``clusters``."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    y = np.asarray(y, dtype=float)
    n, k = X.shape
    codes, g = cluster_codes(np.asarray(clusters).reshape(-1))
    if y.shape != (n,) or codes.shape != (n,):
        raise EvalmixError(f"X has {n} rows but y has shape {y.shape} and clusters "
                           f"{np.shape(clusters)}; they must match")
    if not 0 <= target < k:
        raise InvalidOptionError(f"target={target} is not a column of X (it has {k} columns)")
    return X, y, codes, g


def cluster_sums(values: np.ndarray, codes: np.ndarray, n_clusters: int) -> np.ndarray:
    """Sum the rows of ``values`` (n, ...) within clusters -> (G, ...)."""
    v = np.asarray(values, dtype=float)
    flat = v.reshape(v.shape[0], -1)
    out = np.empty((n_clusters, flat.shape[1]))
    for j in range(flat.shape[1]):
        out[:, j] = np.bincount(codes, weights=flat[:, j], minlength=n_clusters)
    return out.reshape((n_clusters, *v.shape[1:]))


@dataclass(frozen=True)
class _Whitened:
    Z: np.ndarray  # (n, k) = W^{1/2} X L
    ew: np.ndarray  # (n,) = W^{-1/2} e  (None-safe: zeros when only df is wanted)
    L: np.ndarray  # (k, k) upper triangular, L L' = (X'WX)^{-1}
    Xw: np.ndarray  # (n, k)
    w: np.ndarray | None


def _whiten(X: np.ndarray, resid: np.ndarray | None,
            working_weights: np.ndarray | None) -> _Whitened:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    n, k = X.shape
    e = np.zeros(n) if resid is None else np.asarray(resid, dtype=float).reshape(-1)
    if e.shape != (n,):
        raise EvalmixError(f"residuals have {e.shape[0]} rows; X has {n}")
    if working_weights is None:
        Xw, ew, w = X, e, None
    else:
        w = np.asarray(working_weights, dtype=float).reshape(-1)
        if w.shape != (n,) or np.any(w <= 0):
            raise EvalmixError("working_weights must be n positive numbers (GLM IRLS weights)")
        sw = np.sqrt(w)
        Xw, ew = X * sw[:, None], e / sw
    try:
        R = linalg.cholesky(Xw.T @ Xw, lower=False)
    except linalg.LinAlgError as err:
        raise EvalmixError(
            "X'X is singular: the design has collinear or constant columns; drop a "
            "redundant covariate or level"
        ) from err
    L = np.triu(np.linalg.inv(R))
    # einsum without BLAS: a threaded gemm on a tall, k-column matrix stalls on a busy
    # machine (measured 60-80 ms against 2 ms here for 100,000 x 3)
    return _Whitened(Z=np.einsum("nj,jk->nk", Xw, L), ew=ew, L=L, Xw=Xw, w=w)


def _adjust_fn(type: str, one_minus_lam: np.ndarray) -> np.ndarray:
    pos = one_minus_lam > EIGEN_TOL
    safe = np.where(pos, one_minus_lam, 1.0)
    if type == "CR2":
        return np.where(pos, safe ** -0.5, 0.0)
    if type == "CR3":
        return np.where(pos, 1.0 / safe, 0.0)
    return np.ones_like(one_minus_lam)


@dataclass(frozen=True)
class _Pieces:
    """Per-cluster whitened pieces: ``t_g = Z_g' A_g ew_g`` (G, k) and df ingredients."""

    t: np.ndarray  # (G, k)
    d: np.ndarray | None  # (G, k): ||row i of M Xw_g' A_g||^2 (in whitened units)
    omega: np.ndarray | None  # (G, k, k): column i is L' Xw_g' A_g Xw_g M e_i
    L: np.ndarray
    n_clusters: int


def _fast_pieces(wh: _Whitened, codes: np.ndarray, G: int, type: str,
                 want_df: bool) -> _Pieces:
    Z, ew = wh.Z, wh.ew
    beta = cluster_sums(Z * ew[:, None], codes, G)  # (G, k)
    if type in ("CR0", "CR1") and not want_df:
        return _Pieces(beta, None, None, wh.L, G)
    C = cluster_sums(Z[:, :, None] * Z[:, None, :], codes, G)  # (G, k, k)
    lam, V = np.linalg.eigh(C)
    f = _adjust_fn(type, 1.0 - lam)  # (G, k)
    Vb = np.einsum("gji,gj->gi", V, beta)
    t = np.einsum("gij,gj->gi", V, f * Vb)
    if not want_df:
        return _Pieces(t, None, None, wh.L, G)
    # a_i = L' e_i, i.e. column i of L'; Q_g = V diag(lam f) V', D_g = V diag(lam f^2) V'
    At = wh.L.T  # (k, k): column i = a_i
    VA = np.einsum("gji,jl->gil", V, At)  # V' a  (G, k, k)
    omega = np.einsum("gij,gj,gjl->gil", V, lam * f, VA)
    d = np.einsum("gjl,gj->gl", VA**2, lam * f**2)
    return _Pieces(t, d, omega, wh.L, G)


def _dense_pieces(wh: _Whitened, codes: np.ndarray, G: int, type: str,
                  want_df: bool) -> _Pieces:
    """Per-cluster m_g x m_g computation (logit CR2 as clubSandwich defines it).

    Works on whitened quantities: component ``Xw_g' B_g ew_g`` with
    ``B_g = [T (I - H) T]^{-1/2} T`` for CR2 (``T = diag(w)``; ``T = I`` for OLS, where
    this is ``(I - H)^{-1/2}``), ``(I - H)^{-1}`` for CR3, ``I`` for CR0/CR1. Clusters of
    equal size are processed as one batch.
    """
    Z, ew = wh.Z, wh.ew
    n, k = Z.shape
    w = np.ones(n) if wh.w is None else wh.w
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=G)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    t = np.zeros((G, k))
    d = np.zeros((G, k))
    omega = np.zeros((G, k, k))
    if sizes.max() > DENSE_MAX_SIZE:
        raise EvalmixError(
            f"logit CR2 forms an m x m matrix per cluster and the largest cluster has "
            f"{int(sizes.max())} rows (limit {DENSE_MAX_SIZE}); use CR1/CR3 for this "
            "factor, family='gaussian', or a finer cluster factor"
        )
    batches = []
    for m in np.unique(sizes):
        same = np.flatnonzero(sizes == m)
        step = max(1, DENSE_BATCH_ENTRIES // int(m * m))
        batches += [(int(m), same[i:i + step]) for i in range(0, len(same), step)]
    for m, gs in batches:
        idx = order[starts[gs][:, None] + np.arange(m)[None, :]]  # (b, m)
        Zg = Z[idx]  # (b, m, k)
        eg = ew[idx]
        Hg = Zg @ np.swapaxes(Zg, 1, 2)  # (b, m, m)
        IH = np.eye(m)[None] - Hg
        if type == "CR2":
            tg = w[idx]
            Gm = tg[:, :, None] * IH * tg[:, None, :]
            lam, U = np.linalg.eigh(Gm)
            p = np.where(lam > EIGEN_TOL, np.where(lam > EIGEN_TOL, lam, 1.0) ** -0.5, 0.0)
            B = (U * p[:, None, :]) @ np.swapaxes(U, 1, 2) * tg[:, None, :]
        elif type == "CR3":
            B = np.linalg.inv(IH)
        else:
            B = np.broadcast_to(np.eye(m), (len(gs), m, m))
        ZB = np.swapaxes(Zg, 1, 2) @ B  # (b, k, m) = Z_g' B_g
        t[gs] = np.einsum("bkm,bm->bk", ZB, eg)
        if want_df:
            # rows of M Xw' B = L (Z' B); its squared row norms in whitened units use L
            LZB = np.einsum("ij,bjm->bim", wh.L, ZB)
            d[gs] = (LZB**2).sum(axis=2)
            ZBZ = ZB @ Zg  # (b, k, k): Z' B Z (not symmetric for logit CR2)
            omega[gs] = np.einsum("bji,jl->bil", ZBZ, wh.L.T)
    return _Pieces(t, d if want_df else None, omega if want_df else None, wh.L, G)


def _pieces(X, resid, clusters, type, working_weights, want_df, dense=False):
    check_option("type", type, CR_TYPES)
    wh = _whiten(X, resid, working_weights)
    codes, G = cluster_codes(clusters)
    if codes.shape[0] != wh.Z.shape[0]:
        raise EvalmixError(f"clusters have {codes.shape[0]} rows; X has {wh.Z.shape[0]}")
    if G < 2:
        raise EvalmixError(
            "cluster-robust variance needs at least 2 clusters; found 1. Use a finer "
            "cluster factor or report the single cluster descriptively"
        )
    use_dense = dense or (type == "CR2" and working_weights is not None)
    if not use_dense:
        return _fast_pieces(wh, codes, G, type, want_df), wh
    with one_blas_thread():
        return _dense_pieces(wh, codes, G, type, want_df), wh


def cr1_factor(n_clusters, n_obs, n_coef):  # noqa: ANN001, ANN201 (float or array)
    """The CR1 small-sample factor ``G/(G-1) * (N-1)/(N-k)`` (elementwise for arrays).

    ``sandwich::vcovCL(type="HC1")`` and Stata's ``vce(cluster)``; for a mean (``k = 1``)
    it is ``G/(G-1)``. Every CR1 variance in evalmix uses this function.

    Examples
    --------
    >>> cr1_factor(10, 100, 2)
    1.1224489795918366
    """
    return n_clusters / (n_clusters - 1) * (n_obs - 1) / (n_obs - n_coef)


def _check_residual_df(n: int, k: int) -> None:
    """A regression with as many coefficients as rows fits every row exactly: its
    residuals are all zero and no variance can be estimated from them."""
    if n <= k:
        raise EvalmixError(
            f"{n} row{'s' if n != 1 else ''} for {k} coefficient{'s' if k != 1 else ''}: "
            "the fit is exact (all residuals are 0), so "
            "no standard error can be estimated; more rows are needed (e.g. a difference "
            "needs more than one item per condition)"
        )
