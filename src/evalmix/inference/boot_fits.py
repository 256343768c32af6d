"""A block of bootstrap replicates fitted at once from weighted per-block sums.

OLS coefficients (and their CR1 standard errors, for the studentized interval) of every
replicate in a block are ``W @ sums`` solved batch-wise; logistic coefficients use a
batched Newton iteration on the same weights over the cells of the design.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse, special

from evalmix.inference.boot_weights import _gather_sums
from evalmix.inference.sandwich import (
    cluster_sums,
    cr1_factor,
)


def _block_sums(X: np.ndarray, y: np.ndarray, block: np.ndarray, n_blocks: int,
                studentized: bool) -> dict[str, np.ndarray]:
    """Per-block sums that determine the weighted OLS fit (and its CR1 SE)."""
    k = X.shape[1]
    xx = (X[:, :, None] * X[:, None, :]).reshape(len(y), k * k)
    out = {"n": np.bincount(block, minlength=n_blocks).astype(float),
           "H": cluster_sums(xx, block, n_blocks).reshape(n_blocks, k, k),
           "s": cluster_sums(X * y[:, None], block, n_blocks)}
    if studentized:
        s, H = out["s"], out["H"]
        out["ss"] = s[:, :, None] * s[:, None, :]
        out["sH"] = s[:, :, None, None] * H[:, None, :, :]
        out["HH"] = H[:, :, :, None, None] * H[:, None, None, :, :]
    return out


def _solve(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Batched solve; rows whose matrix is (near) singular come back NaN.

    A symmetric positive semi-definite matrix counts as singular when its determinant is
    below 1e-12 times the product of its diagonal (Hadamard's bound, scale-free).
    """
    k = A.shape[-1]
    diag = np.prod(np.diagonal(A, axis1=-2, axis2=-1), axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        det = np.linalg.det(A)
        bad = ~(np.abs(det) > 1e-12 * np.abs(diag)) | ~np.isfinite(det)
    A = np.where(bad[:, None, None], np.eye(k), A)
    x = np.linalg.solve(A, b[..., None])[..., 0]
    x[bad] = np.nan
    return x, bad


def _linear_fit(W: np.ndarray, sums: dict[str, np.ndarray], target: int,
                studentized: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Coefficient ``target`` (and its CR1 variance) for every row of weights ``W``."""
    g, k = sums["s"].shape
    H = (W @ sums["H"].reshape(g, k * k)).reshape(-1, k, k)
    s = W @ sums["s"]
    beta, bad = _solve(H, s)
    if not studentized:
        return beta[:, target], None
    return beta[:, target], _linear_cr1(W, sums, H, beta, target)


def _linear_cr1(W: np.ndarray, sums: dict[str, np.ndarray], H: np.ndarray,
                beta: np.ndarray, target: int) -> np.ndarray:
    """CR1 variance of coefficient ``target`` in each weighted fit (copies = clusters)."""
    g, k = sums["s"].shape
    e = np.zeros((W.shape[0], k))
    e[:, target] = 1.0
    q, _ = _solve(H, e)
    A = (W @ sums["ss"].reshape(g, -1)).reshape(-1, k, k)
    T = (W @ sums["sH"].reshape(g, -1)).reshape(-1, k, k, k)
    HH = (W @ sums["HH"].reshape(g, -1)).reshape(-1, k, k, k, k)
    meat = (np.einsum("bi,bij,bj->b", q, A, q)
            - 2 * np.einsum("bi,bj,bl,bijl->b", q, q, beta, T)
            + np.einsum("bi,bj,bl,bm,bijlm->b", q, beta, q, beta, HH))
    n_cl = W.sum(axis=1) if W.shape[1] == g else np.full(W.shape[0], g)
    n_obs = W @ sums["n"]
    return np.maximum(meat, 0) * cr1_factor(n_cl, n_obs, k)


def _linear_from_gather(idx: np.ndarray, columns: np.ndarray, k: int,
                        target: int) -> np.ndarray:
    """Coefficient ``target`` of each resample from drawn indices (few-column fast path)."""
    agg = _gather_sums(idx, columns)
    H = agg[:, :k * k].reshape(-1, k, k)
    if k == 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(H[:, 0, 0] > 0, agg[:, 1] / H[:, 0, 0], np.nan)
    return _solve(H, agg[:, k * k:])[0][:, target]


@dataclass(frozen=True)
class _Cells:
    X: np.ndarray  # (C, k) distinct covariate rows within blocks
    n: np.ndarray  # (C,) rows per cell
    y: np.ndarray  # (C,) sum of y per cell
    block: np.ndarray  # (C,) block of each cell


def _cells(X: np.ndarray, y: np.ndarray, block: np.ndarray) -> _Cells:
    key = np.column_stack([block.astype(float), X])
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    c = uniq.shape[0]
    return _Cells(X=uniq[:, 1:], n=np.bincount(inv, minlength=c).astype(float),
                  y=np.bincount(inv, weights=y, minlength=c),
                  block=uniq[:, 0].astype(np.int64))


def _logit_fit(W: np.ndarray, cells: _Cells, target: int, start: np.ndarray,
               studentized: bool, n_blocks: int, max_iter: int = 30,
               tol: float = 1e-10, return_beta: bool = False) -> Any:
    """Batched Newton-Raphson for weighted logistic regressions, one per row of ``W``."""
    Wc = W[:, cells.block]
    nw, yw = Wc * cells.n, Wc * cells.y
    Xc = cells.X
    beta = np.tile(start, (W.shape[0], 1))
    done = np.zeros(W.shape[0], dtype=bool)
    for _ in range(max_iter):
        p = special.expit(beta @ Xc.T)
        grad = (yw - nw * p) @ Xc
        info = np.einsum("bc,ck,cl->bkl", nw * p * (1 - p), Xc, Xc)
        step, bad = _solve(info, grad)
        step[bad] = 0.0
        beta = beta + np.where(done[:, None], 0.0, step)
        done |= np.max(np.abs(step), axis=1) < tol * (1 + np.max(np.abs(beta), axis=1))
        if done.all():
            break
    ok = done & np.all(np.isfinite(beta), axis=1) & (np.max(np.abs(beta), axis=1) < 30)
    est = np.where(ok, beta[:, target], np.nan)
    if return_beta:
        return beta[0]
    if not studentized:
        return est, None
    p = special.expit(beta @ Xc.T)
    info = np.einsum("bc,ck,cl->bkl", nw * p * (1 - p), Xc, Xc)
    e = np.zeros_like(beta)
    e[:, target] = 1.0
    q, _ = _solve(info, e)
    # per-block score of the target direction, q' X_b'(y_b - n_b p_b), then weighted sum
    r = (cells.y - cells.n * p) * (Xc @ q.T).T  # (B, C)
    member = sparse.csr_matrix((np.ones(cells.block.size), (cells.block,
                                                            np.arange(cells.block.size))),
                               shape=(n_blocks, cells.block.size))
    score = np.asarray(member @ r.T).T  # (B, blocks): per-block sums of r
    meat = np.sum(W * score**2, axis=1)
    n_cl = W.sum(axis=1)
    n_obs = W @ np.bincount(cells.block, weights=cells.n, minlength=n_blocks)
    k = Xc.shape[1]
    var = meat * cr1_factor(n_cl, n_obs, k)
    return est, np.where(ok, var, np.nan)
