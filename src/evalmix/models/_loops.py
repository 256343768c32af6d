"""The per-row loops of :mod:`evalmix.models.kernel`: log-likelihood and gradient over
the collapsed rows (Numba, cached on disk), in two layouts.

* **rows**: gather the linear predictor per collapsed row (:func:`_eta`), ``exp`` and
  ``log1p`` by NumPy's SIMD ufuncs, then scatter the derivative back to the fixed effects
  and level effects (:func:`_scatter`).
* **grid** (:class:`_Grid`): for (nearly) fully crossed designs, rows are
  ``levels of the largest unit-scale factor x rest patterns``; ``eta = a[item] + B[rest]``
  is a dense grid with contiguous loops and no gathers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["GRID_MIN_FILL"]


@numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
def _eta(X, b, cg, xs, unit, u, eta, nabs):  # pragma: no cover
    """Linear predictor per row (``eta``) and ``-|eta|`` (``nabs``).

    ``cg`` (m, r) int32 and ``xs`` (m, r) are row-major so that one row's codes and
    scales are contiguous; ``unit[t]`` marks terms whose scale is 1 everywhere (their
    multiplication by 1.0 is exact, so it is skipped)."""
    m, k = X.shape
    r = cg.shape[1]
    for i in range(m):
        e = 0.0
        for j in range(k):
            e += X[i, j] * b[j]
        for t in range(r):
            if unit[t]:
                e += u[cg[i, t]]
            else:
                e += u[cg[i, t]] * xs[i, t]
        eta[i] = e
        nabs[i] = -abs(e)


@numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
def _scatter(X, cg, xs, unit, g, g_b, g_u):  # pragma: no cover
    """Gradients w.r.t. ``b`` and ``u`` from the per-row derivative ``g`` of the
    log-likelihood with respect to ``eta`` (the transpose of :func:`_eta`)."""
    m, k = X.shape
    r = cg.shape[1]
    for j in range(k):
        g_b[j] = 0.0
    for j in range(g_u.shape[0]):
        g_u[j] = 0.0
    for i in range(m):
        gi = g[i]
        for j in range(k):
            g_b[j] += X[i, j] * gi
        for t in range(r):
            if unit[t]:
                g_u[cg[i, t]] += gi
            else:
                g_u[cg[i, t]] += gi * xs[i, t]


@numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
def _binom_grad(X, cg, xs, unit, eta, ex, l1p, succ, trials, g_b, g_u):  # pragma: no cover
    """Binomial log-likelihood sum(s*eta - n*softplus(eta)) and its gradients w.r.t.
    ``b`` and ``u``, given ``ex = exp(-|eta|)`` and ``l1p = log1p(ex)`` (computed by
    NumPy's SIMD ufuncs). The softplus is branch-free: ``max(eta, 0) + l1p``."""
    m = eta.shape[0]
    g = np.empty(m)
    total = 0.0
    for i in range(m):
        et = eta[i]
        e = ex[i]
        inv = 1.0 / (1.0 + e)
        pos = et > 0.0
        sp = (et if pos else 0.0) + l1p[i]
        p = inv * (1.0 if pos else e)
        total += succ[i] * et - trials[i] * sp
        g[i] = succ[i] - trials[i] * p
    _scatter(X, cg, xs, unit, g, g_b, g_u)
    return total


def _gauss_rows(X, b, cg, xs, unit, u, succ, trials, s2, inv_var, g_b, g_u):
    """Gaussian quadratic form sum(s2 - 2 eta s + n eta^2) and its gradients."""
    m = X.shape[0]
    eta = np.empty(m)
    _eta(X, b, cg, xs, unit, u, eta, np.empty(m))
    total = float(np.sum(s2 - 2.0 * eta * succ + trials * eta * eta))
    _scatter(X, cg, xs, unit, (succ - trials * eta) * inv_var, g_b, g_u)
    return total


def _rows(X, b, cg, xs, unit, u, succ, trials, s2, family, inv_var, g_b, g_u):
    """Log-likelihood (family 0) or Gaussian quadratic form (family 1) over the rows,
    with gradients w.r.t. ``b`` and the concatenated level effects ``u`` (filled in
    ``g_b``, ``g_u``). Family 0 runs gather (Numba) -> exp/log1p (NumPy SIMD ufuncs,
    which release the GIL) -> scatter (Numba); scalar libm exp/log1p were most of the
    per-row cost. Buffers are per call (nutpie evaluates chains in parallel threads)."""
    if family != 0:
        return _gauss_rows(X, b, cg, xs, unit, u, succ, trials, s2, inv_var, g_b, g_u)
    m = X.shape[0]
    eta = np.empty(m)
    buf = np.empty(m)
    _eta(X, b, cg, xs, unit, u, eta, buf)
    np.exp(buf, out=buf)
    l1p = np.log1p(buf)
    return _binom_grad(X, cg, xs, unit, eta, buf, l1p, succ, trials, g_b, g_u)


@numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
def _grid_eta(a, B, E, nabs):  # pragma: no cover
    """Grid layout: ``E[s, c] = a[s] + B[c]`` and ``nabs = -|E|`` (no gathers)."""
    S, C = E.shape
    for s in range(S):
        av = a[s]
        for c in range(C):
            e = av + B[c]
            E[s, c] = e
            nabs[s, c] = -abs(e)


@numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
def _grid_grad(E, ex, l1p, succ, trials, g_a, g_B):  # pragma: no cover
    """Grid layout of :func:`_binom_grad`: the log-likelihood, its derivative summed over
    each row (``g_a``, the row factor's levels) and each column (``g_B``, the rest
    patterns). Empty cells have ``trials = succ = 0`` and contribute nothing."""
    S, C = E.shape
    for c in range(C):
        g_B[c] = 0.0
    total = 0.0
    for s in range(S):
        acc = 0.0
        for c in range(C):
            et = E[s, c]
            e = ex[s, c]
            inv = 1.0 / (1.0 + e)
            pos = et > 0.0
            sp = (et if pos else 0.0) + l1p[s, c]
            p = inv * (1.0 if pos else e)
            total += succ[s, c] * et - trials[s, c] * sp
            g = succ[s, c] - trials[s, c] * p
            acc += g
            g_B[c] += g
        g_a[s] = acc
    return total


@dataclass(frozen=True)
class _Grid:
    """Collapsed rows laid out as a dense (levels of one factor) x (rest pattern) grid.

    Eval designs are (nearly) fully crossed: every item is seen by every judge, author,
    condition and order. Then ``eta = a[item] + B[rest]`` with only a few hundred distinct
    rest patterns, and the per-row gathers and scatters (most of the cost of
    :func:`_binom_grad`) become contiguous loops over a dense grid; ``B`` and its
    gradient are computed on the rest patterns only."""

    term: int               # index of the row term
    lo: int                 # its offset in the concatenated level effects
    n_levels: int
    X: np.ndarray           # (C, k) rest patterns
    cg: np.ndarray          # (C, r - 1) level codes of the other terms (with offsets)
    xs: np.ndarray          # (C, r - 1)
    unit: np.ndarray        # (r - 1,)
    succ: np.ndarray        # (S, C)
    trials: np.ndarray      # (S, C)


#: Use the grid layout when at least this fraction of its cells hold data.
GRID_MIN_FILL = 0.5


def _make_grid(X, cg, xs, unit, u_off, succ, trials, min_fill: float = GRID_MIN_FILL
               ) -> _Grid | None:
    """The grid layout for the unit-scale term with most levels, or None when too sparse."""
    m, r = cg.shape
    cand = [t for t in range(r) if unit[t]]
    if not cand or m < 4:
        return None
    t = max(cand, key=lambda i: int(u_off[i + 1] - u_off[i]))
    S = int(u_off[t + 1] - u_off[t])
    rest = [i for i in range(r) if i != t]
    key = np.column_stack([X, cg[:, rest].astype(float), xs[:, rest]]) if (
        X.shape[1] or rest) else np.zeros((m, 1))
    uniq, first, col = np.unique(key, axis=0, return_index=True, return_inverse=True)
    C = uniq.shape[0]
    if S < 2 or m < min_fill * S * C:
        return None
    row = cg[:, t] - int(u_off[t])
    col = col.ravel()
    S_, T_ = np.zeros((S, C)), np.zeros((S, C))
    S_[row, col] = succ
    T_[row, col] = trials
    return _Grid(term=t, lo=int(u_off[t]), n_levels=S,
                 X=np.ascontiguousarray(X[first]),
                 cg=np.ascontiguousarray(cg[first][:, rest]),
                 xs=np.ascontiguousarray(xs[first][:, rest]),
                 unit=np.ascontiguousarray(unit[rest]), succ=S_, trials=T_)


def _grid_rows(grid: _Grid, b, u, g_b, g_u):
    """:func:`_rows` (binomial) on the grid layout."""
    C = grid.X.shape[0]
    B = np.empty(C)
    _eta(grid.X, b, grid.cg, grid.xs, grid.unit, u, B, np.empty(C))
    S = grid.n_levels
    E = np.empty((S, C))
    buf = np.empty((S, C))
    _grid_eta(u[grid.lo:grid.lo + S], B, E, buf)
    np.exp(buf, out=buf)
    l1p = np.log1p(buf)
    g_a, g_B = np.empty(S), np.empty(C)
    total = _grid_grad(E, buf, l1p, grid.succ, grid.trials, g_a, g_B)
    _scatter(grid.X, grid.cg, grid.xs, grid.unit, g_B, g_b, g_u)   # zeroes g_b, g_u
    g_u[grid.lo:grid.lo + S] = g_a
    return total
