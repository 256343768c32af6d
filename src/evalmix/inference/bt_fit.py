"""Bradley-Terry on aggregated battles: the fit and its cluster-robust covariance.

An arena table has millions of rows (battles) and hundreds of models, but each row's
design vector has two non-zero entries (``+1`` for model a, ``-1`` for model b), and
rows that share their (pair, outcome, cluster) are interchangeable. So nothing here
holds an ``n x k`` design or a per-row copy:

* :func:`aggregate` keeps one pattern per distinct (model a, model b, outcome, cluster
  codes) with its count -- the binomial counts of the Bayesian back end
  (:mod:`evalmix.models.bayes`) for a quasi-binomial fit. The pair is put in model-code
  order (``a < b``, outcome ``1 - y`` when swapped), which changes no estimate and no
  variance: a row and its mirror image have the same score contribution.
* :func:`fit_bt` is the Newton-IRLS of :func:`evalmix.inference.estimands.fit_logit`
  (same start, step, tolerance and warnings) on the patterns, with the gradient and the
  ``k x k`` information matrix summed by ``np.bincount``.
* :func:`vcov_bt` is :func:`evalmix.inference.sandwich.vcov_cluster` of that fit. CR0 /
  CR1: the meat ``sum_g s_g s_g'`` from a sparse (clusters x models) score matrix.
  CR2 / CR3 (clubSandwich's logit CR2, the per-cluster path of the sandwich module): the
  adjustment matrix of a cluster is formed on its distinct patterns, in batches of
  clusters of one size, so at most :data:`BATCH_ENTRIES` matrix entries are held at
  once and never a (clusters x k x k) array.

Why patterns give the row-level CR2 exactly: in cluster ``g`` with rows grouped into
patterns (indicator ``P``, counts ``C``), the whitened design is ``Z = P Z_q`` and the
working weights ``T = diag(P w_q)``, so ``T (I - Z Z') T`` leaves the span of ``P``
invariant. On it (orthonormal basis ``P C^{-1/2}``) the matrix is ``T_q (I - Z_s Z_s')
T_q`` with ``Z_s = C^{1/2} Z_q`` -- the whitened design of the fit with weights ``c w``
-- and the residual vector ``T e`` lies in that span. So the adjusted score of the
cluster is the dense formula applied to the patterns with ``Z_s``, the summed residual
``c e`` and the per-row weights ``w`` (not ``c w``) in ``T``. CR3 is the same without
``T``. tests/inference/test_bt_fit.py checks both against the row-level sandwich to 1e-10.

References
----------
Bell, R. M. & McCaffrey, D. F. (2002). Bias reduction in standard errors for linear
regression with multi-stage samples. Survey Methodology 28(2), 169-181.
Pustejovsky, J. E. & Tipton, E. (2018). Small-sample methods for cluster-robust variance
estimation and hypothesis testing in fixed effects models. JBES 36(4), 672-683.
doi:10.1080/07350015.2016.1247004
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse

from evalmix.data.table import dense_codes, intersect_codes
from evalmix.errors import ConvergenceWarning, EvalmixError, check_option
from evalmix.inference.estimands import LOGIT_MAXIT, LOGIT_TOL
from evalmix.inference.sandwich import (
    CR_TYPES,
    DENSE_MAX_SIZE,
    EIGEN_TOL,
    CRType,
    MultiwayTerm,
    _check_residual_df,
    _inclusion_exclusion,
    _psd,
    cr1_factor,
)

__all__ = ["Battles", "BTFit", "aggregate", "fit_bt", "vcov_bt", "vcov_bt_multiway"]

#: Matrix entries (patterns x patterns over a batch of clusters) formed at once by the
#: CR2/CR3 path: about 2 MB per array.
BATCH_ENTRIES = 2**18


@dataclass(frozen=True)
class Battles:
    """Distinct (model a, model b, outcome, cluster codes) patterns and their counts.

    Attributes
    ----------
    a, b : (q,) int64 arrays
        Model codes of the pattern's pair, ``a < b``.
    y : (q,) float array
        Model a's score (1 win, 1/2 tie, 0 loss, or any proportion).
    count : (q,) float array
        Rows with this pattern.
    clusters : tuple of (q,) int64 arrays
        Dense codes of each cluster factor.
    n_models : int
    n_obs : int
        Rows (the sum of ``count``).
    """

    a: np.ndarray
    b: np.ndarray
    y: np.ndarray
    count: np.ndarray
    clusters: tuple[np.ndarray, ...]
    n_models: int
    n_obs: int


def aggregate(a: np.ndarray, b: np.ndarray, y: np.ndarray,
              clusters: Sequence[np.ndarray], n_models: int) -> Battles:
    """Collapse rows to their distinct (pair, outcome, cluster) patterns with counts.

    Parameters
    ----------
    a, b : (n,) integer arrays
        Model codes ``0..n_models-1`` of each row's two models (``a != b``).
    y : (n,) float array
        Model a's score in [0, 1].
    clusters : sequence of (n,) integer arrays
        Dense codes ``0..G-1`` of each cluster factor (several: multiway).
    n_models : int
        Number of models (the codes' range).

    Examples
    --------
    >>> bt = aggregate(np.array([0, 1, 0]), np.array([1, 0, 1]), np.array([1., 0., 1.]),
    ...                [np.array([0, 0, 0])], 2)
    >>> bt.count.tolist(), bt.y.tolist()
    ([3.0], [1.0])
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    y = np.asarray(y, dtype=float)
    if np.any((y < 0) | (y > 1)):
        raise EvalmixError("Bradley-Terry needs outcomes in [0, 1] (1 win, 1/2 tie, 0 loss)")
    # one pass per key part, each temporary freed before the next (no per-row copies
    # kept: the patterns' values are read from the rows at their first occurrence)
    pair = np.minimum(a, b) * n_models
    pair += np.maximum(a, b)
    swapped = np.where(a > b, 1.0 - y, y)
    outcome = dense_codes(swapped)
    del swapped
    key = intersect_codes(pair, outcome, *clusters)
    del pair, outcome
    q = int(key.max()) + 1 if key.size else 0
    first = np.empty(q, dtype=np.int64)
    first[key[::-1]] = np.arange(key.size - 1, -1, -1)
    count = np.bincount(key, minlength=q).astype(float)
    del key
    fa, fb, fy = a[first], b[first], y[first]
    swap = fa > fb
    return Battles(np.where(swap, fb, fa), np.where(swap, fa, fb),
                   np.where(swap, 1.0 - fy, fy), count,
                   tuple(np.asarray(c)[first].astype(np.int64) for c in clusters),
                   int(n_models), int(a.size))


@dataclass(frozen=True)
class BTFit:
    """Bradley-Terry fit on patterns (model 0's ability fixed at 0).

    Attributes
    ----------
    theta : (k,) array
        Abilities, ``theta[0] = 0``.
    mu : (q,) array
        ``P(a beats b)`` of each pattern.
    w : (q,) array
        Working weights ``mu (1 - mu)`` per row of the pattern.
    bread : (k, k) array
        ``(X'WX)^{-1}`` of the free abilities, row and column 0 zero.
    converged : bool
    iterations : int
    """

    theta: np.ndarray
    mu: np.ndarray
    w: np.ndarray
    bread: np.ndarray
    converged: bool
    iterations: int


def _information(bt: Battles, cw: np.ndarray) -> np.ndarray:
    """``X' diag(cw) X`` of all k abilities (a graph Laplacian), from bincounts."""
    k = bt.n_models
    pair = np.bincount(bt.a * k + bt.b, weights=cw, minlength=k * k).reshape(k, k)
    pair = pair + pair.T
    return np.diag(pair.sum(axis=1)) - pair


def _scores(bt: Battles, v: np.ndarray) -> np.ndarray:
    """``X' v``: each model's sum of ``+v`` (as model a) and ``-v`` (as model b)."""
    k = bt.n_models
    return np.bincount(bt.a, weights=v, minlength=k) - np.bincount(bt.b, weights=v,
                                                                   minlength=k)


def fit_bt(bt: Battles) -> BTFit:
    """Quasi-binomial logit Bradley-Terry fit by Newton-IRLS on the patterns.

    The steps of :func:`~evalmix.inference.estimands.fit_logit` on the row-level design
    (``+1`` model a, ``-1`` model b, model 0's column dropped), the same estimates.
    """
    k = bt.n_models
    theta = np.zeros(k)
    converged = False
    it = 0
    for it in range(1, LOGIT_MAXIT + 1):  # noqa: B007 (used after the loop)
        mu = 1 / (1 + np.exp(-(theta[bt.a] - theta[bt.b])))
        info = _information(bt, bt.count * mu * (1 - mu))[1:, 1:]
        grad = _scores(bt, bt.count * (bt.y - mu))[1:]
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError:
            raise EvalmixError(
                "the Bradley-Terry fit broke down (singular information matrix after "
                f"{it} Newton steps, largest |ability| {np.max(np.abs(theta)):.3g}): a "
                "model wins (or loses) every comparison, so its ability is infinite. Drop "
                "that model or compare it with stronger (weaker) ones") from None
        theta[1:] += step
        if np.max(np.abs(step)) < LOGIT_TOL * (1 + np.max(np.abs(theta[1:]))):
            converged = True
            break
    mu = 1 / (1 + np.exp(-(theta[bt.a] - theta[bt.b])))
    w = mu * (1 - mu)
    if not converged or np.min(w) < 1e-12:
        warnings.warn(
            f"the Bradley-Terry fit did not converge in {it} iterations (largest "
            f"|ability| {np.max(np.abs(theta)):.3g}): a model may win (or lose) nearly "
            "every comparison. Drop that model or compare it with stronger (weaker) ones",
            ConvergenceWarning, stacklevel=3,
        )
        w = np.maximum(w, 1e-300)
    try:
        chol = linalg.cho_factor(_information(bt, bt.count * w)[1:, 1:])
    except linalg.LinAlgError as err:
        raise EvalmixError(
            "X'X is singular: the design has collinear or constant columns; drop a "
            "redundant covariate or level") from err
    bread = np.zeros((k, k))
    bread[1:, 1:] = linalg.cho_solve(chol, np.eye(k - 1))
    return BTFit(theta, mu, w, (bread + bread.T) / 2, converged, it)


def _meat(bt: Battles, v: np.ndarray, codes: np.ndarray, n_clusters: int) -> np.ndarray:
    """``sum_g s_g s_g'`` with ``s_g = X_g' v_g``, from a sparse (G x k) score matrix."""
    k = bt.n_models
    rows = np.concatenate([codes, codes])
    cols = np.concatenate([bt.a, bt.b])
    S = sparse.csr_matrix((np.concatenate([v, -v]), (rows, cols)), shape=(n_clusters, k))
    return np.asarray((S.T @ S).toarray())


def _adjusted(bt: Battles, fit: BTFit, codes: np.ndarray, n_clusters: int,
              type: str) -> np.ndarray:
    """Each pattern's CR2 (or CR3) adjusted score ``sqrt(c w) (B_g ew_g)``, computed per
    cluster on its patterns, clusters of one size in batches."""
    sizes = np.bincount(codes, minlength=n_clusters)
    if sizes.max() > DENSE_MAX_SIZE:
        raise EvalmixError(
            f"Bradley-Terry {type} forms a matrix per cluster over its distinct (pair, "
            f"outcome) patterns and the largest cluster has {int(sizes.max())} (limit "
            f"{DENSE_MAX_SIZE}); use CR1 for this factor or a finer cluster factor")
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    M = fit.bread
    cw = bt.count * fit.w
    sw = np.sqrt(cw)
    ew = bt.count * (bt.y - fit.mu) / sw
    out = np.empty(bt.a.size)
    for m in np.unique(sizes[sizes > 0]):
        same = np.flatnonzero(sizes == m)
        m = int(m)
        step = max(1, BATCH_ENTRIES // (m * m))
        for lo in range(0, same.size, step):
            idx = order[starts[same[lo:lo + step]][:, None] + np.arange(m)[None, :]]
            a, b = bt.a[idx], bt.b[idx]
            xmx = (M[a[:, :, None], a[:, None, :]] - M[a[:, :, None], b[:, None, :]]
                   - M[b[:, :, None], a[:, None, :]] + M[b[:, :, None], b[:, None, :]])
            s = sw[idx]
            IH = np.eye(m)[None] - s[:, :, None] * xmx * s[:, None, :]
            del xmx
            e = ew[idx]
            if type == "CR2":
                t = fit.w[idx]
                lam, U = np.linalg.eigh(t[:, :, None] * IH * t[:, None, :])
                p = np.where(lam > EIGEN_TOL, np.where(lam > EIGEN_TOL, lam, 1.0) ** -0.5,
                             0.0)
                u = np.einsum("bij,bj->bi", U, p * np.einsum("bji,bj->bi", U, t * e))
            else:
                u = np.linalg.solve(IH, e[:, :, None])[:, :, 0]
            out[idx] = s * u
    return out


def vcov_bt(bt: Battles, fit: BTFit, codes: np.ndarray, *, type: CRType = "CR1"
            ) -> np.ndarray:
    """Cluster-robust covariance (k x k, row and column 0 zero) of the abilities.

    Equals :func:`~evalmix.inference.sandwich.vcov_cluster` of the row-level fit
    (design without model 0's column, ``working_weights = mu (1 - mu)``) clustered on the
    same factor; ``codes`` are the patterns' dense codes of that factor.
    """
    check_option("type", type, CR_TYPES)
    k = bt.n_models
    _check_residual_df(bt.n_obs, k - 1)
    G = int(codes.max()) + 1
    if G < 2:
        raise EvalmixError(
            "cluster-robust variance needs at least 2 clusters; found 1. Use a finer "
            "cluster factor or report the single cluster descriptively")
    if type in ("CR0", "CR1"):
        v = bt.count * (bt.y - fit.mu)
    else:
        v = _adjusted(bt, fit, codes, G, type)
    V = fit.bread @ _meat(bt, v, codes, G) @ fit.bread
    if type == "CR1":
        V = V * cr1_factor(G, bt.n_obs, k - 1)
    return (V + V.T) / 2


def vcov_bt_multiway(bt: Battles, fit: BTFit, *, type: CRType = "CR1") -> np.ndarray:
    """Multiway covariance (k x k, row and column 0 zero) over ``bt.clusters``, as
    :func:`~evalmix.inference.sandwich.vcov_multiway` of the row-level fit
    (inclusion-exclusion of one-way covariances on every intersection, negative
    eigenvalues of the free abilities' block set to zero)."""
    check_option("type", type, ("CR0", "CR1", "CR2"))
    _check_residual_df(bt.n_obs, bt.n_models - 1)
    codes = list(bt.clusters)
    terms = []
    for sign, combo, cc, G in _inclusion_exclusion(codes):
        if type == "CR2":
            V = vcov_bt(bt, fit, cc, type="CR2")
        else:
            V = vcov_bt(bt, fit, cc, type="CR0")
            if type == "CR1" and G > 1:
                V = V * cr1_factor(G, bt.n_obs, bt.n_models - 1)
        terms.append(MultiwayTerm(sign, combo, G, V[1:, 1:]))
    out = np.zeros((bt.n_models, bt.n_models))
    out[1:, 1:] = _psd(terms, [int(c.max()) + 1 for c in codes], type).vcov
    return out
