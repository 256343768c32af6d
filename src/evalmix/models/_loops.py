"""The per-row loops of :mod:`evalmix.models.kernel`: log-likelihood and gradient over
the collapsed rows (Numba, cached on disk, no Python and no GIL), in two layouts.

* **rows**: the linear predictor per collapsed row, the family's log-likelihood and its
  derivative, scattered back to the fixed effects and level effects (binomial,
  gaussian, cumulative logit).
* **grid** (:class:`_Grid`, binomial): for (nearly) fully crossed designs, rows are
  ``levels of the largest unit-scale factor x rest patterns``; ``eta = a[item] + B[rest]``
  is a dense grid with contiguous loops and no gathers.

``exp`` and ``log1p`` of the binomial loops are written as polynomials (:func:`_vexp_neg`,
:func:`_log1p01`) that LLVM vectorises; scalar libm calls were most of the per-row cost
(the previous kernel called NumPy's SIMD ufuncs between Numba loops, which needs the
interpreter). Both are accurate to a few units in the last place (tested against NumPy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["GRID_MIN_FILL"]

_JIT = dict(cache=True, nogil=True, fastmath=False, boundscheck=False)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
#: 1 / k! for k = 13 .. 1 (Horner order): exp(-r), |r| <= ln 2 / 2, to 4e-18.
_EXP_C = tuple(1.0 / math.factorial(k) for k in range(13, 0, -1))
#: 1 / (2k + 1) for k = 17 .. 1: log1p(e) = 2 atanh(e / (2 + e)), e in [0, 1].
_ATANH_C = tuple(1.0 / (2 * k + 1) for k in range(17, 0, -1))


@numba.njit(**_JIT)
def _vexp_neg(a, out, bits):  # pragma: no cover
    """``out[i] = exp(-a[i])`` for ``a[i] >= 0`` (clamped at 708, where exp is 3e-308):
    ``a = n ln 2 + r``, a Taylor polynomial for ``exp(-r)`` and ``2^-n`` built from its
    exponent bits, in two branch-free loops that LLVM vectorises."""
    m = a.shape[0]
    for i in range(m):
        ai = min(a[i], 708.0)
        n = math.floor(ai * _INV_LN2 + 0.5)
        r = (ai - n * _LN2_HI) - n * _LN2_LO
        p = _EXP_C[0]
        for c in _EXP_C[1:]:
            p = p * (-r) + c
        out[i] = p * (-r) + 1.0
        bits[i] = (1023 - np.int64(n)) << 52
    scale = bits.view(np.float64)
    for i in range(m):
        out[i] *= scale[i]


@numba.njit(inline="always", **_JIT)
def _log1p01(e):  # pragma: no cover
    """``log1p(e)`` for ``e`` in [0, 1]: ``2 atanh(s)``, ``s = e / (2 + e) <= 1/3``."""
    s = e / (2.0 + e)
    s2 = s * s
    p = _ATANH_C[0]
    for c in _ATANH_C[1:]:
        p = p * s2 + c
    return 2.0 * s * (p * s2 + 1.0)


@numba.njit(**_JIT)
def _eta(X, b, cg, xs, unit, u, eta, nabs):  # pragma: no cover
    """Linear predictor per row (``eta``) and ``|eta|`` (``nabs``).

    ``cg`` (m, r) and ``xs`` (m, r) are row-major so that one row's codes and scales are
    contiguous; ``unit[t]`` marks terms whose scale is 1 everywhere (their
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
        nabs[i] = abs(e)


@numba.njit(**_JIT)
def _scatter(X, cg, xs, unit, g, g_b, g_u):  # pragma: no cover
    """Add the gradients w.r.t. ``b`` and ``u`` from the per-row derivative ``g`` of the
    log-likelihood with respect to ``eta`` (the transpose of :func:`_eta`)."""
    m, k = X.shape
    r = cg.shape[1]
    for i in range(m):
        gi = g[i]
        for j in range(k):
            g_b[j] += X[i, j] * gi
        for t in range(r):
            if unit[t]:
                g_u[cg[i, t]] += gi
            else:
                g_u[cg[i, t]] += gi * xs[i, t]


@numba.njit(**_JIT)
def _binom_terms(eta, ex, succ, trials, g):  # pragma: no cover
    """sum(s*eta - n*softplus(eta)) and ``g = s - n * sigmoid(eta)`` per element, given
    ``ex = exp(-|eta|)``; branch-free, vectorised."""
    total = 0.0
    for i in range(eta.shape[0]):
        et = eta[i]
        e = ex[i]
        inv = 1.0 / (1.0 + e)
        pos = et > 0.0
        sp = (et if pos else 0.0) + _log1p01(e)
        p = inv * (1.0 if pos else e)
        total += succ[i] * et - trials[i] * sp
        g[i] = succ[i] - trials[i] * p
    return total


@numba.njit(**_JIT)
def binomial_rows(X, b, cg, xs, unit, u, succ, trials, g_b, g_u):  # pragma: no cover
    """Binomial log-likelihood over the collapsed rows; adds its gradients to ``g_b``,
    ``g_u``."""
    m = X.shape[0]
    eta, buf, g = np.empty(m), np.empty(m), np.empty(m)
    _eta(X, b, cg, xs, unit, u, eta, buf)
    _vexp_neg(buf, buf, np.empty(m, dtype=np.int64))
    total = _binom_terms(eta, buf, succ, trials, g)
    _scatter(X, cg, xs, unit, g, g_b, g_u)
    return total


@numba.njit(**_JIT)
def gaussian_rows(X, b, cg, xs, unit, u, sum_y, n, sum_y2, inv_var, g_b, g_u
                  ):  # pragma: no cover
    """Gaussian quadratic form sum(S2 - 2 eta S1 + n eta^2); adds ``(S1 - n eta) /
    sigma^2`` scattered to ``g_b``, ``g_u``."""
    m = X.shape[0]
    eta, g = np.empty(m), np.empty(m)
    _eta(X, b, cg, xs, unit, u, eta, g)
    total = 0.0
    for i in range(m):
        total += sum_y2[i] - 2.0 * eta[i] * sum_y[i] + n[i] * eta[i] * eta[i]
        g[i] = (sum_y[i] - n[i] * eta[i]) * inv_var
    _scatter(X, cg, xs, unit, g, g_b, g_u)
    return total


@numba.njit(inline="always", **_JIT)
def _softplus(z):  # pragma: no cover
    return max(z, 0.0) + math.log1p(math.exp(-abs(z)))


@numba.njit(inline="always", **_JIT)
def _sigmoid(z):  # pragma: no cover
    if z >= 0.0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@numba.njit(**_JIT)
def cumulative_rows(X, b, cg, xs, unit, u, counts, cut, g_b, g_u, g_cut
                    ):  # pragma: no cover
    """Cumulative-logit log-likelihood ``sum_k n_k log P(y = k)``,
    ``P(y <= k) = sigmoid(c_k - eta)``; adds its gradients to ``g_b``, ``g_u`` and
    ``g_cut``. The middle categories use ``log(sigmoid(a) - sigmoid(b)) =
    -softplus(-a) - softplus(b) + log(-expm1(b - a))`` (no cancellation)."""
    m = X.shape[0]
    kc = counts.shape[1]
    eta, g = np.empty(m), np.empty(m)
    _eta(X, b, cg, xs, unit, u, eta, g)
    total = 0.0
    for i in range(m):
        et = eta[i]
        gi = 0.0
        n0 = counts[i, 0]
        if n0 != 0.0:       # log sigmoid(c_0 - eta)
            z = cut[0] - et
            total -= n0 * _softplus(-z)
            d = n0 * _sigmoid(-z)      # d/dz
            g_cut[0] += d
            gi -= d
        nl = counts[i, kc - 1]
        if nl != 0.0:       # log(1 - sigmoid(c_last - eta))
            z = cut[kc - 2] - et
            total -= nl * _softplus(z)
            d = nl * _sigmoid(z)
            g_cut[kc - 2] -= d
            gi += d
        for j in range(1, kc - 1):
            nj = counts[i, j]
            if nj == 0.0:
                continue
            a = cut[j] - et
            bb = cut[j - 1] - et
            dlt = a - bb
            total += nj * (-_softplus(-a) - _softplus(bb) + math.log(-math.expm1(-dlt)))
            q = 1.0 / math.expm1(dlt)
            da = _sigmoid(-a) + q
            db = -_sigmoid(bb) - q
            g_cut[j] += nj * da
            g_cut[j - 1] += nj * db
            gi -= nj * (da + db)
        g[i] = gi
    _scatter(X, cg, xs, unit, g, g_b, g_u)
    return total


@numba.njit(**_JIT)
def binomial_grid(a, gX, b, gcg, gxs, gunit, u, succ, trials, g_b, g_u, g_a
                  ):  # pragma: no cover
    """:func:`binomial_rows` on the grid layout (:class:`_Grid`): ``E[s, c] = a[s] +
    B[c]``; the derivative is summed over each row (``g_a``, the row factor's levels)
    and each column (scattered from the rest patterns to ``g_b``, ``g_u``). Empty cells
    have ``trials = succ = 0`` and contribute nothing."""
    C = gX.shape[0]
    S = a.shape[0]
    B = np.empty(C)
    _eta(gX, b, gcg, gxs, gunit, u, B, np.empty(C))
    g_B = np.zeros(C)
    e, ex, g = np.empty(C), np.empty(C), np.empty(C)
    bits = np.empty(C, dtype=np.int64)
    total = 0.0
    for s in range(S):
        av = a[s]
        for c in range(C):
            e[c] = av + B[c]
            ex[c] = abs(e[c])
        _vexp_neg(ex, ex, bits)
        total += _binom_terms(e, ex, succ[s], trials[s], g)
        acc = 0.0
        for c in range(C):
            acc += g[c]
            g_B[c] += g[c]
        g_a[s] = acc
    _scatter(gX, gcg, gxs, gunit, g_B, g_b, g_u)
    return total


@dataclass(frozen=True)
class _Grid:
    """Collapsed rows laid out as a dense (levels of one factor) x (rest pattern) grid.

    Eval designs are (nearly) fully crossed: every item is seen by every judge, author,
    condition and order. Then ``eta = a[item] + B[rest]`` with only a few hundred distinct
    rest patterns, and the per-row gathers and scatters become contiguous loops over a
    dense grid; ``B`` and its gradient are computed on the rest patterns only."""

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
