"""The Numba code of :class:`~evalmix.models.bayes.kernel.DensityKernel`: the log-likelihood
loops, the whole log density (priors, transforms, couplings) and the C callbacks that
nutpie calls from its sampler threads (no Python, no GIL: both chains run at once).
One file because Numba's disk cache is invalidated per source file: a function cached
here must not depend on compiled code from another file.

Likelihood loops, in two layouts:

* **rows**: the linear predictor per collapsed row, the family's log-likelihood and its
  derivative, scattered back to the fixed effects and level effects (binomial,
  gaussian; the cumulative logit as a binomial grid of cut points x rows,
  :func:`cumulative_grid`). Fixed columns and random terms are each row's non-zeros of
  the raw (uncentred) covariates; the centring is a shift of the coefficients
  (:func:`_raw_b`) and of the coupled intercepts' levels (:func:`_couple`).
* **grid** (:class:`_Grid`, binomial): for (nearly) fully crossed designs, rows are
  ``levels of the largest unit-scale factor x rest patterns``; ``eta = a[item] + B[rest]``
  is a dense grid with contiguous loops and no gathers, and ``exp(-|eta|)`` is the
  product of per-row and per-column factors (:func:`_grid_row`: a few
  multiplications and one division per cell; 24 -> ~4 ns per cell on 100k cells here).

``exp``, ``log1p`` and the reciprocal of the binomial loops are written as polynomials
and Newton steps (:func:`_vexp_neg`, :func:`_log1p01`, :func:`_recip12`) that LLVM
vectorises: scalar libm calls were most of the per-row cost, and the previous kernel's
NumPy SIMD ufuncs between Numba loops need the interpreter. All three are accurate to
a few units in the last place (tested against NumPy).


The log density and the callbacks:

The model's arrays are handed over as one int64 *header* (:func:`pack`): per array its
address and shape, in the fixed order of :data:`ARRAYS`. The header, and the arrays it
points to, must stay alive while the sampler runs (the kernel keeps them).

The modified Bessel function of the marginal SD prior is scipy's ``kve`` (the double
version exported by :mod:`scipy.special.cython_special`), called through its address,
which is passed at run time so that the compiled code can be cached on disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import get_cython_function_address, intrinsic

from evalmix.models.spec import parent_levels, unique_rows

__all__ = ["GRID_MIN_FILL", "PAIRS_MAX_PATTERNS", "ARRAYS", "KVE_ADDRESS", "logp_core", "expand_core", "pack",
           "logp_cfunc", "expand_cfunc"]

_JIT = dict(cache=True, nogil=True, fastmath=False, boundscheck=False)
#: fused multiply-add allowed (polynomials); with reassociation for the sums over rows
_JIT_FMA = dict(_JIT, fastmath={"contract"})
_JIT_SUM = dict(_JIT, fastmath={"contract", "reassoc", "nsz"})
#: and a division that LLVM vectorises (no zero-division check: never by zero there)
_JIT_DIV = dict(_JIT_SUM, error_model="numpy")
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00


#: Taylor coefficients of ``exp(-r)`` in ``-r``, highest first: ``1/13!, ..., 1/2, 1, 1``
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))
#: ``atanh(s) / s = sum_k s^(2k) / (2k + 1)`` to ``s^34`` as ``s^2 P(s^4) + Q(s^4)``
#: (two chains of 9 terms instead of one of 18), highest first
_ATANH_P = tuple(1.0 / k for k in range(35, 0, -4))   # 1/35, 1/31, ..., 1/3
_ATANH_Q = tuple(1.0 / k for k in range(33, 0, -4))   # 1/33, 1/29, ..., 1


@numba.njit(inline="always", **_JIT_FMA)
def _horner(coeffs, x):  # pragma: no cover
    """``sum_k coeffs[k] x^(n-k)`` by Horner's rule; ``coeffs`` is a constant tuple, so
    the loop is unrolled and the polynomial stays vectorisable in its caller."""
    p = coeffs[0]
    for k in range(1, len(coeffs)):
        p = p * x + coeffs[k]
    return p


@numba.njit(inline="always", **_JIT_FMA)
def _recip12(y):  # pragma: no cover
    """``1 / y`` for ``y`` in [1, 2] without a division (which stops LLVM from
    vectorising): linear start (error <= 1/17) and four Newton steps."""
    r = 24.0 / 17.0 - (8.0 / 17.0) * y
    r = r * (2.0 - y * r)
    r = r * (2.0 - y * r)
    r = r * (2.0 - y * r)
    return r * (2.0 - y * r)


@numba.njit(**_JIT_FMA)
def _vexp_neg(a, out, bits):  # pragma: no cover
    """``out[i] = exp(-a[i])`` for ``a[i] >= 0`` (clamped at 708, where exp is 3e-308):
    ``a = n ln 2 + r``, the degree-13 Taylor polynomial of ``exp(-r)`` (|r| <= ln 2 / 2,
    remainder 4e-18) and ``2^-n`` built from its exponent bits, in two branch-free loops
    that LLVM vectorises."""
    m = a.shape[0]
    for i in range(m):
        ai = min(a[i], 708.0)
        n = math.floor(ai * _INV_LN2 + 0.5)
        r = -((ai - n * _LN2_HI) - n * _LN2_LO)
        out[i] = _horner(_EXP_TAYLOR, r)
        bits[i] = (1023 - np.int64(n)) << 52
    scale = bits.view(np.float64)
    for i in range(m):
        out[i] *= scale[i]


@numba.njit(inline="always", **_JIT_FMA)
def _log1p01(e):  # pragma: no cover
    """``log1p(e)`` for ``e`` in [0, 1]: ``2 atanh(s)``, ``s = e / (2 + e) <= 1/3``, the
    odd series to ``s^35`` (remainder < 1e-17), split in two Horner chains in ``s^4``
    (11 ns per value here, against 14 ns for the one chain in ``s^2``)."""
    s = e * (0.5 * _recip12(1.0 + 0.5 * e))
    s2 = s * s
    s4 = s2 * s2
    return 2.0 * s * (s2 * _horner(_ATANH_P, s4) + _horner(_ATANH_Q, s4))


@numba.njit(**_JIT)
def _eta(X, b, cg, xs, unit, u, eta, nabs):  # pragma: no cover
    """Linear predictor per row (``eta``) and ``|eta|`` (``nabs``).

    ``cg`` (m, r) and ``xs`` (m, r) are row-major so that one row's codes and scales are
    contiguous (in the row layout a column is a row's t-th non-zero term, not a term);
    ``unit[t]`` marks columns whose scale is 1 everywhere (their multiplication by 1.0 is
    exact, so it is skipped)."""
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
def _eta_sparse(Xj, Xv, b, cg, xs, unit, u, eta, nabs):  # pragma: no cover
    """:func:`_eta` with the fixed columns of each row as its non-zeros only (``Xj``
    column indices, ``Xv`` values, padded with zeros): treatment-coded rows hold ~3
    non-zeros of K + 2 columns (MT-Bench: 31), so the dense row sum costs ~10x more."""
    m, w = Xj.shape
    _eta(np.zeros((m, 0)), b[:0], cg, xs, unit, u, eta, nabs)   # the level effects
    for i in range(m):
        e = eta[i]
        for t in range(w):
            e += Xv[i, t] * b[Xj[i, t]]
        eta[i] = e
        nabs[i] = abs(e)


@numba.njit(**_JIT)
def _scatter_sparse(Xj, Xv, cg, xs, unit, g, g_b, g_u):  # pragma: no cover
    """The transpose of :func:`_eta_sparse`."""
    m, w = Xj.shape
    for i in range(m):
        gi = g[i]
        for t in range(w):
            g_b[Xj[i, t]] += Xv[i, t] * gi
    _scatter(np.zeros((m, 0)), cg, xs, unit, g, g_b[:0], g_u)


@numba.njit(**_JIT_SUM)
def _binom_terms(eta, ex, succ, trials, g, binary=False):  # pragma: no cover
    """sum(s*eta - n*softplus(eta)) and ``g = s - n * sigmoid(eta)`` per element, given
    ``ex = exp(-|eta|)``; branch-free, vectorised. With ``binary`` (one trial each, at
    most 512 elements), ``sum log1p(exp(-|eta|))`` is the log of the product of the
    factors ``1 + exp(-|eta|)`` (each in [1, 2]: 512 of them stay finite), one log per
    call instead of a :func:`_log1p01` per element (as :func:`_grid_row`; MT-Bench's
    14,368 rows: 167 -> 60 us); LLVM takes the branch out of the loop."""
    total = 0.0
    prod = 1.0
    for i in range(eta.shape[0]):
        et = eta[i]
        e = ex[i]
        inv = _recip12(1.0 + e)
        pos = et > 0.0
        p = inv * (1.0 if pos else e)
        if binary:
            total += succ[i] * et - (et if pos else 0.0)
            prod *= 1.0 + e
            g[i] = succ[i] - p
        else:
            sp = (et if pos else 0.0) + _log1p01(e)
            total += succ[i] * et - trials[i] * sp
            g[i] = succ[i] - trials[i] * p
    return total - math.log(prod)


@numba.njit(**_JIT)
def binomial_rows(Xj, Xv, b, cg, xs, unit, u, succ, trials, binary, g_b, g_u
                  ):  # pragma: no cover
    """Binomial log-likelihood over the collapsed rows (fixed columns as non-zeros,
    :func:`_eta_sparse`); adds its gradients to ``g_b``, ``g_u``. ``binary``: every row
    has one trial (:func:`_binom_terms` in blocks of 512)."""
    m = Xj.shape[0]
    eta, buf, g = np.empty(m), np.empty(m), np.empty(m)
    _eta_sparse(Xj, Xv, b, cg, xs, unit, u, eta, buf)
    _vexp_neg(buf, buf, np.empty(m, dtype=np.int64))
    if binary:
        total = 0.0
        for c0 in range(0, m, 512):
            # slices, not index bounds (see _grid_sum)
            c1 = min(c0 + 512, m)
            total += _binom_terms(eta[c0:c1], buf[c0:c1], succ[c0:c1], trials[c0:c1],
                                  g[c0:c1], True)
    else:
        total = _binom_terms(eta, buf, succ, trials, g)
    _scatter_sparse(Xj, Xv, cg, xs, unit, g, g_b, g_u)
    return total


@numba.njit(**_JIT)
def gaussian_rows(Xj, Xv, b, cg, xs, unit, u, sum_y, n, sum_y2, inv_var, g_b, g_u
                  ):  # pragma: no cover
    """Gaussian quadratic form sum(S2 - 2 eta S1 + n eta^2); adds ``(S1 - n eta) /
    sigma^2`` scattered to ``g_b``, ``g_u``."""
    m = Xj.shape[0]
    eta, g = np.empty(m), np.empty(m)
    _eta_sparse(Xj, Xv, b, cg, xs, unit, u, eta, g)
    total = 0.0
    for i in range(m):
        total += sum_y2[i] - 2.0 * eta[i] * sum_y[i] + n[i] * eta[i] * eta[i]
        g[i] = (sum_y[i] - n[i] * eta[i]) * inv_var
    _scatter_sparse(Xj, Xv, cg, xs, unit, g, g_b, g_u)
    return total


@numba.njit(inline="always", **_JIT)
def _log1m_exp_neg(d):  # pragma: no cover
    """``(log(1 - exp(-d)), 1 / expm1(d))`` for ``d > 0``, each accurate, from two calls
    (``log1p`` of ``-exp(-d)`` above ln 2, ``log`` of ``-expm1(-d)`` below)."""
    if d > 0.6931471805599453:
        ed = math.exp(-d)
        return math.log1p(-ed), ed / (1.0 - ed)
    em = math.expm1(-d)
    return math.log(-em), -(1.0 + em) / em


@numba.njit(**_JIT)
def _exp_pm(x, e_neg, e_pos, bits):  # pragma: no cover
    """``e_neg = exp(-x)`` and ``e_pos = exp(x)`` (vectorised: one :func:`_vexp_neg` of
    ``|x|`` and one reciprocal; a few units in the last place for ``|x| <= 708``)."""
    m = x.shape[0]
    for i in range(m):
        e_pos[i] = abs(x[i])
    _vexp_neg(e_pos, e_pos, bits)
    for i in range(m):
        ex = e_pos[i]
        inv = 1.0 / ex
        pos = x[i] >= 0.0
        e_neg[i] = ex if pos else inv
        e_pos[i] = inv if pos else ex


@numba.njit(**_JIT_DIV)
def _grid_row(av, an, ap, B, b_neg, b_pos, succ, trials, binary, g_B):  # pragma: no cover
    """Cells of one grid row (at most 512 of them): ``exp(-|eta|)`` as the product
    ``exp(-a) exp(-B)`` (or ``exp(a) exp(B)``) of precomputed factors, so that a cell costs
    a few multiplications and one division. With ``binary`` (every cell has 0 or 1
    trials), ``sum n log1p(exp(-|eta|))`` is the log of the product of the factors
    ``1 + n exp(-|eta|)`` (each in [1, 2]: 512 of them stay finite), one log per call;
    otherwise one ``log1p`` per cell. ``binary`` is the same for every cell, so LLVM
    takes the branch out of the loop. Returns (log-likelihood, sum of ``g``)."""
    total = 0.0
    acc = 0.0
    prod = 1.0
    for c in range(B.shape[0]):
        et = av + B[c]
        pos = et > 0.0
        e = an * b_neg[c] if pos else ap * b_pos[c]
        q = 1.0 / (1.0 + e)
        n = trials[c]
        if binary:
            total += succ[c] * et - n * (et if pos else 0.0)
            prod *= 1.0 + n * e
        else:
            total += succ[c] * et - n * ((et if pos else 0.0) + _log1p01(e))
        g = succ[c] - n * (q if pos else e * q)
        acc += g
        g_B[c] += g
    return total - math.log(prod), acc


#: a grid row whose ``|a| + max |B|`` is at most this uses the factored ``exp`` (every
#: factor and product then stays inside double range)
_GRID_FACTOR_MAX = 700.0


@numba.njit(**_JIT)
def _grid_sum(a, B, succ, trials, binary, g_a, g_B):  # pragma: no cover
    """The binomial log-likelihood of the grid ``E[s, c] = a[s] + B[c]`` (successes
    ``succ``, trials ``trials``, both (S, C)); its derivative w.r.t. ``E`` summed over
    each row into ``g_a`` and added over each column to ``g_B``. ``binary``: every cell
    has 0 or 1 trials (:func:`_grid_row`). Rows with an extreme ``|a| + max |B|``
    (far out in warm-up) take the :func:`_vexp_neg` path."""
    S, C = succ.shape
    bmax = 0.0
    for c in range(C):
        bmax = max(bmax, abs(B[c]))
    bits = np.empty(max(C, S), dtype=np.int64)
    b_neg, b_pos = np.empty(C), np.empty(C)
    _exp_pm(B, b_neg, b_pos, bits)
    a_neg, a_pos = np.empty(S), np.empty(S)
    _exp_pm(a, a_neg, a_pos, bits)
    e, ex, g = np.empty(C), np.empty(C), np.empty(C)
    total = 0.0
    for s in range(S):
        av = a[s]
        if abs(av) + bmax <= _GRID_FACTOR_MAX:
            lp, acc = 0.0, 0.0
            for c0 in range(0, C, 512):
                # slices, not index bounds: with bounds LLVM's loop ran 2x slower
                c1 = min(c0 + 512, C)
                lpc, accc = _grid_row(av, a_neg[s], a_pos[s], B[c0:c1], b_neg[c0:c1],
                                      b_pos[c0:c1], succ[s, c0:c1], trials[s, c0:c1],
                                      binary, g_B[c0:c1])
                lp += lpc
                acc += accc
            g_a[s] = acc
            total += lp
            continue
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
    return total


@numba.njit(**_JIT)
def binomial_grid(a, gX, b, gcg, gxs, gunit, u, succ, trials, binary, g_b, g_u, g_a
                  ):  # pragma: no cover
    """:func:`binomial_rows` on the grid layout (:class:`_Grid`): ``E[s, c] = a[s] +
    B[c]`` (:func:`_grid_sum`); the derivative is summed over each row (``g_a``, the row
    factor's levels) and each column (scattered from the rest patterns to ``g_b``,
    ``g_u``). Empty cells have ``trials = succ = 0`` and contribute nothing."""
    C = gX.shape[0]
    B = np.empty(C)
    _eta(gX, b, gcg, gxs, gunit, u, B, np.empty(C))
    g_B = np.zeros(C)
    total = _grid_sum(a, B, succ, trials, binary, g_a, g_B)
    _scatter(gX, gcg, gxs, gunit, g_B, g_b, g_u)
    return total


@numba.njit(**_JIT)
def _pair_eta(p, q, A, An, Ap, B, Bn, Bp, eta, ex):  # pragma: no cover
    """``eta[c] = A[p[c]] + B[q[c]]`` and ``ex[c] = exp(-|eta[c]|)`` as the product of
    the precomputed factors ``exp(-A) exp(-B)`` (or ``exp(A) exp(B)``): two gathers of
    each per row and no ``exp``."""
    for c in range(p.shape[0]):
        i, j = p[c], q[c]
        et = A[i] + B[j]
        eta[c] = et
        ex[c] = An[i] * Bn[j] if et > 0.0 else Ap[i] * Bp[j]


@numba.njit(**_JIT)
def binomial_pairs(acg, axs, aunit, gX, b, gcg, gxs, gunit, u, pidx, succ, trials, n_bin,
                   g_b, g_u):  # pragma: no cover
    """:func:`binomial_rows` on the pair layout (:class:`_Pairs`): ``eta = A[p] + B[q]``,
    ``A`` the linear predictor of the largest factor's terms on its ``P`` patterns (a
    scenario's intercept and its condition slope: ``acg``, ``axs``, ``aunit``), ``B``
    that of the fixed columns and the other terms on their ``Q`` patterns (``gX``,
    ``gcg``, ``gxs``, ``gunit``), both computed once per call (:func:`_eta`); per
    collapsed row only the pair ``pidx[:, c] = (p, q)`` is gathered
    (:func:`_pair_eta`), and the log-likelihood terms are the row loop's vectorised
    :func:`_binom_terms` (the first ``n_bin`` rows have one trial each: one log per 512
    of them). The derivative w.r.t. ``eta`` is summed per pattern of each side and
    scattered from there (:func:`_scatter`). A call where ``max |A| + max |B|`` exceeds
    700 (far out in warm-up) computes ``exp(-|eta|)`` per row (:func:`_vexp_neg`)."""
    P, Q = acg.shape[0], gX.shape[0]
    m = pidx.shape[1]
    p, q = pidx[0], pidx[1]
    A, absA, B, absB = np.empty(P), np.empty(P), np.empty(Q), np.empty(Q)
    _eta(np.zeros((P, 0)), b[:0], acg, axs, aunit, u, A, absA)
    _eta(gX, b, gcg, gxs, gunit, u, B, absB)
    eta, ex, g = np.empty(m), np.empty(m), np.empty(m)
    if absA.max() + absB.max() <= _GRID_FACTOR_MAX:
        bits = np.empty(max(P, Q), dtype=np.int64)
        An, Ap, Bn, Bp = np.empty(P), np.empty(P), np.empty(Q), np.empty(Q)
        _exp_pm(A, An, Ap, bits)
        _exp_pm(B, Bn, Bp, bits)
        _pair_eta(p, q, A, An, Ap, B, Bn, Bp, eta, ex)
    else:
        for c in range(m):
            eta[c] = A[p[c]] + B[q[c]]
            ex[c] = abs(eta[c])
        _vexp_neg(ex, ex, np.empty(m, dtype=np.int64))
    total = 0.0
    for c0 in range(0, n_bin, 512):
        # slices, not index bounds (see _grid_sum)
        c1 = min(c0 + 512, n_bin)
        total += _binom_terms(eta[c0:c1], ex[c0:c1], succ[c0:c1], trials[c0:c1],
                              g[c0:c1], True)
    if n_bin < m:
        total += _binom_terms(eta[n_bin:], ex[n_bin:], succ[n_bin:], trials[n_bin:],
                              g[n_bin:])
    gA, gB = np.zeros(P), np.zeros(Q)
    for c in range(m):
        gA[p[c]] += g[c]
        gB[q[c]] += g[c]
    _scatter(np.zeros((P, 0)), acg, axs, aunit, gA, g_b[:0], g_u)
    _scatter(gX, gcg, gxs, gunit, gB, g_b, g_u)
    return total


@numba.njit(**_JIT)
def cumulative_grid(X, b, cg, xs, unit, u, csucc, ctrials, binary, n_cat, cut, g_b, g_u,
                    g_cut):  # pragma: no cover
    """Cumulative-logit log-likelihood ``sum_k n_k log P(y = k)``, ``P(y <= k) =
    sigmoid(c_k - eta)``; adds its gradients to ``g_b``, ``g_u`` and ``g_cut``.

    With ``z = c_j - eta``, category ``j`` contributes ``log sigmoid(c_j - eta) +
    log sigmoid(eta - c_{j-1}) + log(1 - exp(c_{j-1} - c_j))`` (the first term absent
    for the last category, the second for the first), since ``sigmoid(a) - sigmoid(b)
    = sigmoid(a) sigmoid(-b) (1 - exp(b - a))``. So the likelihood is a binomial one on
    the (cut point x row) grid ``E[j, i] = c_j - eta_i`` with ``n_ij`` successes out of
    ``n_ij + n_i,j+1`` trials (``csucc``, ``ctrials``: (K - 1, m)), computed by
    :func:`_grid_sum`, plus ``sum_j N_j log(1 - exp(c_{j-1} - c_j))`` over the middle
    categories (``n_cat``: the total count per category), which depends on the cut
    points only."""
    m = X.shape[0]
    eta, nabs = np.empty(m), np.empty(m)
    _eta(X, b, cg, xs, unit, u, eta, nabs)
    for i in range(m):
        nabs[i] = -eta[i]
    g_B = np.zeros(m)
    g_a = np.empty(cut.shape[0])
    total = _grid_sum(cut, nabs, csucc, ctrials, binary, g_a, g_B)
    for j in range(cut.shape[0]):
        g_cut[j] += g_a[j]
    for j in range(1, cut.shape[0]):   # middle category j: cuts j - 1 and j
        nj = n_cat[j]
        if nj != 0.0:
            lm, q = _log1m_exp_neg(cut[j] - cut[j - 1])
            total += nj * lm
            g_cut[j] += nj * q
            g_cut[j - 1] -= nj * q
    for i in range(m):
        g_B[i] = -g_B[i]
    _scatter(X, cg, xs, unit, g_B, g_b, g_u)
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
    binary: bool            # every cell has 0 or 1 trials
    up: np.ndarray          # (S, p) level codes (with offsets) of the unit terms whose
    #                         level is set by the row term's (an item's category): they
    #                         join a[s], not the rest patterns


#: Use the grid layout when at least this fraction of its cells hold data.
GRID_MIN_FILL = 0.5


def _make_grid(X, cg, xs, unit, u_off, succ, trials, min_fill: float = GRID_MIN_FILL
               ) -> _Grid | None:
    """The grid layout for the unit-scale term with most levels, or None when too sparse.

    Unit-scale terms nested above that term (each of its levels inside one of theirs:
    an item's category) join its levels (``_Grid.up``) instead of the rest patterns."""
    m, r = cg.shape
    cand = [t for t in range(r) if unit[t]]
    if not cand or m < 4:
        return None
    t = max(cand, key=lambda i: int(u_off[i + 1] - u_off[i]))
    S = int(u_off[t + 1] - u_off[t])
    row = cg[:, t] - int(u_off[t])
    # unit terms nested above the row term (each row level in one of their levels) go
    # with the row: eta = a[s] + u_up[parent(s)] + B[rest]; else they would multiply the
    # rest patterns (MT-Bench: 80 items in 8 categories, 1,440 patterns and 12% of the
    # cells filled, against 180 and ~100%)
    up, ups = [], []
    for i in range(r):
        if i != t and unit[i]:
            parent = parent_levels(row, cg[:, i], S)
            if parent is not None:
                up.append(i)
                ups.append(parent)
    rest = [i for i in range(r) if i != t and i not in up]
    key = np.column_stack([X, cg[:, rest].astype(float), xs[:, rest]]) if (
        X.shape[1] or rest) else np.zeros((m, 1))
    first, col = unique_rows(key)
    C = first.shape[0]
    if S < 2 or m < min_fill * S * C:
        return None
    S_, T_ = np.zeros((S, C)), np.zeros((S, C))
    S_[row, col] = succ
    T_[row, col] = trials
    return _Grid(term=t, lo=int(u_off[t]), n_levels=S,
                 X=np.ascontiguousarray(X[first]),
                 cg=np.ascontiguousarray(cg[first][:, rest]),
                 xs=np.ascontiguousarray(xs[first][:, rest]),
                 unit=np.ascontiguousarray(unit[rest]), succ=S_, trials=T_,
                 binary=bool(np.all((T_ == 0.0) | (T_ == 1.0))),
                 up=np.ascontiguousarray(np.column_stack(ups) if ups else
                                         np.zeros((S, 0)), dtype=np.int64))


@dataclass(frozen=True)
class _Pairs:
    """Collapsed rows as pairs (``A`` pattern, ``B`` pattern): ``eta = A[p] + B[q]``.

    Where rows hardly collapse (a per-row covariate such as a randomised +-1 position,
    many scenarios, each seen in a few of its cells) the grid is too sparse, yet the
    linear predictor still splits into the part of the factor with the most level
    effects (a scenario's intercept and condition slope: ``P`` patterns, e.g. 400
    scenarios x 2 conditions) and the rest (fixed columns and the other factors: ``Q``
    patterns, e.g. 12 personas x 3 authors x 3 judges x 2 conditions x 2 positions).
    Each side's linear predictor is computed on its patterns only, and a row costs a
    gather of two numbers instead of a sum over all its terms (:func:`binomial_pairs`)."""

    term_a: np.ndarray      # the row-factor's term indices (A side)
    term_b: np.ndarray      # the other terms (B side)
    cg: np.ndarray          # (P, len(term_a)) level codes (with offsets)
    xs: np.ndarray          # (P, len(term_a))
    unit: np.ndarray        # (len(term_a),)
    X: np.ndarray           # (Q, k) fixed columns (centred)
    bcg: np.ndarray         # (Q, len(term_b))
    bxs: np.ndarray         # (Q, len(term_b))
    bunit: np.ndarray       # (len(term_b),)
    pidx: np.ndarray        # (2, m): each row's (A pattern, B pattern), rows reordered
    succ: np.ndarray        # (m,) in that order
    trials: np.ndarray      # (m,)
    n_bin: int              # the first n_bin rows have one trial each


#: Use the pair layout when its patterns are at most this fraction of the rows.
PAIRS_MAX_PATTERNS = 0.25


def _make_pairs(X, cg, xs, unit, u_off, factors, succ, trials,
                max_patterns: float = PAIRS_MAX_PATTERNS) -> _Pairs | None:
    """The pair layout (:class:`_Pairs`) with the factor of most level effects on the A
    side, or None when the two sides' patterns are more than ``max_patterns`` of the
    rows (``factors``: each term's factor name)."""
    m, r = cg.shape
    if r == 0 or m < 4:
        return None
    size: dict[str, int] = {}
    for t in range(r):
        size[factors[t]] = size.get(factors[t], 0) + int(u_off[t + 1] - u_off[t])
    big = max(size, key=lambda f: size[f])
    ta = np.array([t for t in range(r) if factors[t] == big], dtype=np.int64)
    tb = np.array([t for t in range(r) if factors[t] != big], dtype=np.int64)
    fa, p = unique_rows(np.column_stack([cg[:, ta].astype(float), xs[:, ta]]))
    keyb = np.column_stack([X, cg[:, tb].astype(float), xs[:, tb]])
    fb, q = unique_rows(keyb if keyb.shape[1] else np.zeros((m, 1)))
    if fa.shape[0] + fb.shape[0] > max_patterns * m:
        return None
    one = np.asarray(trials) == 1.0
    order = np.lexsort((q, p, ~one))     # one-trial rows first, then by A pattern
    c = np.ascontiguousarray
    return _Pairs(term_a=ta, term_b=tb, cg=c(cg[fa][:, ta]), xs=c(xs[fa][:, ta]),
                  unit=c(unit[ta]), X=c(X[fb]), bcg=c(cg[fb][:, tb]), bxs=c(xs[fb][:, tb]),
                  bunit=c(unit[tb]), pidx=c(np.vstack([p[order], q[order]]),
                                            dtype=np.int64),
                  succ=c(np.asarray(succ, dtype=np.float64)[order]),
                  trials=c(np.asarray(trials, dtype=np.float64)[order]),
                  n_bin=int(one.sum()))


#: scipy.special.kve(double, double) (``__pyx_fuse_0`` is the complex version).
KVE_ADDRESS = get_cython_function_address("scipy.special.cython_special",
                                          "__pyx_fuse_1kve")

#: (name, dtype, ndim) of the arrays in the header, in order. ``meta`` (int64) holds
#: family, k, r, number of level effects, ndim, sigma index, cut index, number of cut
#: points, grid flag, grid term, grid offset, grid levels, kve address, intercept index,
#: expanded size, binary (grid: every cell 0 or 1 trials; cumulative: of the cut-point
#: grid; rows: every row 1 trial), pair-layout flag, its one-trial rows (:class:`_Pairs`;
#: its B side is in the grid's ``gX``, ``gcg``, ``gxs``, ``gunit``). ``flt`` holds SD-prior scale, Rayleigh scale, sd(y), total trials, then mu_b
#: (k), sd_b (k), shift (k), the cut-point prior means and the total count of each
#: category but the last (cumulative). ``counts`` (cumulative) holds the successes
#: then the trials of :func:`cumulative_grid`'s grid, (2 (K - 1), m). ``cg``, ``xs``,
#: ``unit`` are the row layout's random terms (the terms non-zero in every row, then each
#: row's non-zeros of the others: :func:`~evalmix.models.bayes.kernel._row_terms`).
ARRAYS = (("meta", np.int64, 1), ("terms", np.int64, 2), ("flt", np.float64, 1),
          ("X", np.float64, 2), ("cg", np.int64, 2), ("xs", np.float64, 2),
          ("unit", np.bool_, 1), ("succ", np.float64, 1), ("trials", np.float64, 1),
          ("s2", np.float64, 1), ("counts", np.float64, 2),
          ("gX", np.float64, 2), ("gcg", np.int64, 2), ("gxs", np.float64, 2),
          ("gunit", np.bool_, 1), ("gsucc", np.float64, 2), ("gtrials", np.float64, 2),
          ("pairs", np.int64, 2), ("pxbar", np.float64, 1), ("nests", np.int64, 2),
          ("npar", np.int64, 1), ("Xj", np.int64, 2), ("Xv", np.float64, 2),
          ("gup", np.int64, 2), ("acg", np.int64, 2), ("axs", np.float64, 2),
          ("aunit", np.bool_, 1), ("pidx", np.int64, 2), ("psucc", np.float64, 1),
          ("ptrials", np.float64, 1))
#: columns of ``terms``: level offsets, SD index (-1: integrated out), free slice,
#: zero-sum, mode (0 SD integrated out, 1 centred, 2 non-centred), SD prior (0
#: half-normal, 1 Rayleigh), outer factor of a nested pair.
T_LO, T_HI, T_SD, T_F1, T_F2, T_ZS, T_MODE, T_PRIOR, T_OUTER = range(9)
_LOG_2PI = math.log(2.0 * math.pi)


@intrinsic
def _call_kve(typingctx, addr, v, z):
    sig = types.float64(types.int64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType(), ir.DoubleType()])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [args[1], args[2]])

    return sig, codegen


@intrinsic
def _as_voidptr(typingctx, addr):
    sig = types.voidptr(addr)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return sig, codegen


def pack(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The header: ``[n, addr_0, d0_0, d1_0, addr_1, ...]`` for :data:`ARRAYS`."""
    hdr = [0]
    for name, dtype, ndim in ARRAYS:
        a = arrays[name]
        if a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            raise ValueError(f"kernel array {name}: {a.dtype} {a.shape}")
        shape = list(a.shape) + [0] * (2 - ndim)
        hdr += [a.ctypes.data, *shape]
    hdr[0] = len(hdr)
    return np.array(hdr, dtype=np.int64)


@numba.njit(inline="always", **_JIT)
def _zs_forward(free, out):  # pragma: no cover
    """PyMC's zero-sum map R^(G-1) -> zero-sum R^G (an isometry)."""
    n = free.shape[0] + 1
    s = 0.0
    for i in range(n - 1):
        s += free[i]
    norm = s / (math.sqrt(n) + n)
    for i in range(n - 1):
        out[i] = free[i] - norm
    out[n - 1] = -s / math.sqrt(n)


@numba.njit(inline="always", **_JIT)
def _zs_grad(g, out):  # pragma: no cover
    """Transpose of :func:`_zs_forward`'s Jacobian applied to ``g`` (written to ``out``)."""
    n = g.shape[0]
    s = 0.0
    for i in range(n - 1):
        s += g[i]
    c = s / (math.sqrt(n) + n) + g[n - 1] / math.sqrt(n)
    for i in range(n - 1):
        out[i] = g[i] - c


@numba.njit(inline="always", **_JIT)
def _pull_back(g, out, zs):  # pragma: no cover
    """Gradient ``g`` on the level effects taken to the free coordinates (``out``)."""
    if zs:
        _zs_grad(g, out)
    else:
        out[:] = g


@numba.njit(**_JIT)
def _levels(x, meta, terms, v, uu, ueta):  # pragma: no cover
    """Level effects per term: ``v`` (zero-sum mapped), ``uu`` (the term's effects) and
    ``ueta`` (what enters eta: 0 for the outer factor of a nested pair)."""
    for t in range(terms.shape[0]):
        lo, hi, i0, i1, i2 = (terms[t, T_LO], terms[t, T_HI], terms[t, T_SD],
                              terms[t, T_F1], terms[t, T_F2])
        if terms[t, T_ZS]:
            _zs_forward(x[i1:i2], v[lo:hi])
        else:
            v[lo:hi] = x[i1:i2]
        sd = math.exp(x[i0]) if i0 >= 0 else 1.0
        for j in range(lo, hi):
            uu[j] = sd * v[j] if terms[t, T_MODE] == 2 else v[j]
            ueta[j] = 0.0 if terms[t, T_OUTER] else uu[j]


@numba.njit(inline="always", **_JIT)
def _couple(terms, pairs, pxbar, src, dst, adjoint, lo, hi):  # pragma: no cover
    """The coupling of each intercept to its slope (pair p: intercept entries from
    ``a``, slope entries from ``c``, ``m`` of each): ``dst[a + q] -= xbar src[c + q]``
    (``u = u' - sum xbar v``), or with ``adjoint`` its transpose ``dst[c + q] -= xbar
    src[a + q]`` (the chain rule back through it). The entries are the free
    coordinates (``lo, hi = T_F1, T_F2``) or the level effects (``T_LO, T_HI``: the
    same map, as the zero-sum map is linear)."""
    for p in range(pairs.shape[0]):
        a, c = terms[pairs[p, 0], lo], terms[pairs[p, 1], lo]
        to, frm = (c, a) if adjoint else (a, c)
        for q in range(terms[pairs[p, 0], hi] - a):
            dst[to + q] -= pxbar[p] * src[frm + q]


@numba.njit(**_JIT)
def _prior_free(x, terms, pairs, pxbar, nests, npar, uu, pf):  # pragma: no cover
    """The free coordinates each prior sees (aligned with ``x``): for an intercept
    coupled to its slopes ``u' - sum xbar v``; for the inner factor of a nested pair
    ``w - u_outer[parent]``; else the sampled ones."""
    pf[:] = x
    _couple(terms, pairs, pxbar, x, pf, False, T_F1, T_F2)
    for p in range(nests.shape[0]):
        i, j, off = nests[p, 0], nests[p, 1], nests[p, 2]
        a, lo = terms[i, T_F1], terms[j, T_LO]
        for q in range(terms[i, T_F2] - a):
            pf[a + q] = x[a + q] - uu[lo + npar[off + q]]


@numba.njit(**_JIT)
def _raw_b(b, meta, flt):  # pragma: no cover
    """Coefficients on the raw columns that give the centred columns' linear predictor.

    The row layout keeps the fixed columns uncentred (sparse, ``Xj``/``Xv``) while the
    sampler's ``b`` is on the centred columns ``X - shift``: ``(X - shift) b = X b'`` with
    ``b' = b`` except the intercept, ``b'_0 = b_0 - shift . b`` (the intercept's own
    shift is 0; without an intercept the shift is all 0)."""
    k, icpt = meta[1], meta[13]
    out = b.copy()
    if icpt >= 0:
        shift = flt[4 + 2 * k:4 + 3 * k]
        acc = 0.0
        for j in range(k):
            acc += shift[j] * b[j]
        out[icpt] -= acc
    return out


@numba.njit(**_JIT)
def _centred_grad(g_b, meta, flt):  # pragma: no cover
    """``X' g`` on the raw columns into ``(X - shift)' g = X' g - shift sum(g)``, in
    place (``sum(g)`` is the intercept's entry of ``X' g``)."""
    k, icpt = meta[1], meta[13]
    if icpt >= 0:
        shift = flt[4 + 2 * k:4 + 3 * k]
        s = g_b[icpt]
        for j in range(k):
            g_b[j] -= shift[j] * s


@numba.njit(**_JIT)
def logp_core(x, grad, meta, terms, flt, X, cg, xs, unit, succ, trials, s2, counts,
              gX, gcg, gxs, gunit, gsucc, gtrials, pairs, pxbar, nests, npar, Xj, Xv,
              gup, acg, axs, aunit, pidx, psucc, ptrials):  # pragma: no cover
    """Log density at ``x`` (unconstrained coordinates); its gradient in ``grad``."""
    family, k, nu = meta[0], meta[1], meta[3]
    sigma_at, cut_at, ncut = meta[5], meta[6], meta[7]
    sd_prior, rayleigh, ysd, n_total = flt[0], flt[1], flt[2], flt[3]
    mu_b, sd_b = flt[4:4 + k], flt[4 + k:4 + 2 * k]
    for i in range(grad.shape[0]):
        grad[i] = 0.0
    v, uu, ueta = np.empty(nu), np.empty(nu), np.empty(nu)
    _levels(x, meta, terms, v, uu, ueta)
    # coupled slopes enter eta on their raw (sparse) covariates: sum_s (x_s - xbar_s) v_s
    # = sum_s x_s v_s - sum_s xbar_s v_s, the last sum taken off the intercept's levels
    # (the original u = u' - sum xbar v); their gradient gets -xbar_s (sum of g over the
    # level) below
    _couple(terms, pairs, pxbar, ueta, ueta, False, T_LO, T_HI)
    b = x[:k]
    g_b, g_u = np.zeros(k), np.zeros(nu)
    if family == 0 and meta[8]:
        lo, S = meta[10], meta[11]
        a = ueta[lo:lo + S].copy()
        for s in range(S):   # the terms nested above the row term join its levels
            for q in range(gup.shape[1]):
                a[s] += ueta[gup[s, q]]
        g_a = np.empty(S)
        lp = binomial_grid(a, gX, b, gcg, gxs, gunit, ueta, gsucc, gtrials,
                           meta[15] != 0, g_b, g_u, g_a)
        g_u[lo:lo + S] += g_a
        for s in range(S):
            for q in range(gup.shape[1]):
                g_u[gup[s, q]] += g_a[s]
    elif family == 0 and meta[16]:
        lp = binomial_pairs(acg, axs, aunit, gX, b, gcg, gxs, gunit, ueta, pidx, psucc,
                            ptrials, meta[17], g_b, g_u)
    elif family == 0:
        lp = binomial_rows(Xj, Xv, _raw_b(b, meta, flt), cg, xs, unit, ueta, succ, trials,
                           meta[15] != 0, g_b, g_u)
        _centred_grad(g_b, meta, flt)
    elif family == 1:
        log_sigma = x[sigma_at]
        sigma = math.exp(log_sigma)
        inv_var = 1.0 / (sigma * sigma)
        q = gaussian_rows(Xj, Xv, _raw_b(b, meta, flt), cg, xs, unit, ueta, succ, trials,
                          s2, inv_var, g_b, g_u)
        _centred_grad(g_b, meta, flt)
        lp = -n_total * log_sigma - 0.5 * q * inv_var
        grad[sigma_at] = -n_total + q * inv_var
        # HalfNormal(ysd) prior on sigma, log transform
        lp += -0.5 * sigma * sigma / ysd ** 2 + log_sigma
        grad[sigma_at] += -sigma * sigma / ysd ** 2 + 1.0
    else:
        # ordered cut points: c_0 = y_0, c_j = c_{j-1} + exp(y_j) (PyMC's transform)
        y = x[cut_at:cut_at + ncut]
        cut = np.empty(ncut)
        g_cut = np.zeros(ncut)
        cut[0] = y[0]
        for j in range(1, ncut):
            cut[j] = cut[j - 1] + math.exp(y[j])
        cut_mu = flt[4 + 3 * k:4 + 3 * k + ncut]
        n_cat = flt[4 + 3 * k + ncut:4 + 3 * k + 2 * ncut]
        lp = cumulative_grid(X, b, cg, xs, unit, ueta, counts[:ncut], counts[ncut:],
                             meta[15] != 0, n_cat, cut, g_b, g_u, g_cut)
        for j in range(ncut):   # Normal(cut_mu, 2.5) prior on the cut points
            d = (cut[j] - cut_mu[j]) / 2.5
            lp -= 0.5 * d * d
            g_cut[j] -= d / 2.5
        acc = 0.0
        for j in range(ncut - 1, -1, -1):   # d c_i / d y_j = exp(y_j) for i >= j >= 1
            acc += g_cut[j]
            if j == 0:
                grad[cut_at] = acc
            else:
                lp += y[j]
                grad[cut_at + j] = acc * math.exp(y[j]) + 1.0
    _couple(terms, pairs, pxbar, g_u, g_u, True, T_LO, T_HI)
    # fixed effects: Normal(mu_b, sd_b)
    for j in range(k):
        d = (b[j] - mu_b[j]) / sd_b[j]
        lp -= 0.5 * d * d
        grad[j] = g_b[j] - d / sd_b[j]
    r = terms.shape[0]
    for t in range(r):   # eta does not depend on an outer factor's effects
        if terms[t, T_OUTER]:
            g_u[terms[t, T_LO]:terms[t, T_HI]] = 0.0
    pf = np.empty(x.shape[0])
    _prior_free(x, terms, pairs, pxbar, nests, npar, uu, pf)
    gpr = np.zeros(x.shape[0])    # prior gradients w.r.t. the prior's coordinates
    gv = np.empty(nu)
    kve = meta[12]
    s2p = sd_prior * sd_prior
    for t in range(r):
        lo, hi, i0, i1, i2 = (terms[t, T_LO], terms[t, T_HI], terms[t, T_SD],
                              terms[t, T_F1], terms[t, T_F2])
        mode, zs = terms[t, T_MODE], terms[t, T_ZS]
        nfree = i2 - i1
        free = pf[i1:i2]
        ss = 0.0
        for q in range(nfree):
            ss += free[q] * free[q]
        if mode == 0:
            # u under its marginal prior (sd ~ Rayleigh(s) integrated out): p(u) =
            # (2 pi)^(-n/2) s^-2 (r s)^lam K_lam(r / s), lam = 1 - n/2
            lam = 1.0 - 0.5 * nfree
            z = max(math.sqrt(ss) / rayleigh, 1e-8)
            rr = z * rayleigh
            # K_-v = K_v; with n = |lam|, K_(lam-1) + K_(lam+1) = 2 K_|n-1| + (2n/z) K_n
            # (the recurrence, all terms positive): two Bessel calls, not three
            n = abs(lam)
            kl = _call_kve(kve, n, z)
            k_sum = 2.0 * _call_kve(kve, abs(n - 1.0), z) + (2.0 * n / z) * kl
            lp += (-0.5 * nfree * _LOG_2PI - 2.0 * math.log(rayleigh)
                   + lam * math.log(rr * rayleigh) + math.log(kl) - z)
            coef = (lam / rr - k_sum / (2.0 * rayleigh * kl)) / rr
            for q in range(nfree):
                gpr[i1 + q] = coef * free[q]
            _pull_back(g_u[lo:hi], grad[i1:i2], zs)
            for q in range(nfree):
                grad[i1 + q] += gpr[i1 + q]
            continue
        sd = math.exp(x[i0])
        if terms[t, T_PRIOR] == 1:
            # Rayleigh(s): log sd - sd^2 / (2 s^2), log transform (+ log sd)
            lp += -0.5 * sd * sd / (rayleigh * rayleigh) + 2.0 * x[i0]
            g_log_sd = -sd * sd / (rayleigh * rayleigh) + 2.0
        else:
            # HalfNormal(sd_prior) on sd with log transform (Jacobian + log sd)
            lp += -0.5 * sd * sd / s2p + x[i0]
            g_log_sd = -sd * sd / s2p + 1.0
        if mode == 1:
            # free ~ N(0, sd^2), u = Q free (or free)
            lp += -nfree * x[i0] - 0.5 * ss / (sd * sd)
            g_log_sd += -nfree + ss / (sd * sd)
            for q in range(nfree):
                gpr[i1 + q] = -free[q] / (sd * sd)
            _pull_back(g_u[lo:hi], grad[i1:i2], zs)
            for q in range(nfree):
                grad[i1 + q] += gpr[i1 + q]
        else:
            # free ~ N(0, 1), u = sd * Q free
            lp += -0.5 * ss
            for j in range(lo, hi):
                g_log_sd += g_u[j] * uu[j]
                gv[j] = sd * g_u[j]
            _pull_back(gv[lo:hi], grad[i1:i2], zs)
            for q in range(nfree):
                grad[i1 + q] -= free[q]
        grad[i0] = g_log_sd
    # coupled slopes: d(prior of u = u' - sum xbar v)/dv = -xbar * (its prior gradient)
    _couple(terms, pairs, pxbar, gpr, grad, True, T_F1, T_F2)
    # nested: the inner prior is on w - u_outer[parent]
    for p in range(nests.shape[0]):
        i, j, off = nests[p, 0], nests[p, 1], nests[p, 2]
        a = terms[i, T_F1]
        lo, hi, j0, j1, j2 = (terms[j, T_LO], terms[j, T_HI], terms[j, T_SD],
                              terms[j, T_F1], terms[j, T_F2])
        g_o = np.zeros(hi - lo)
        for q in range(terms[i, T_F2] - a):
            g_o[npar[off + q]] -= gpr[a + q]
        if terms[j, T_MODE] == 2:   # u_outer = sd * v
            sd = math.exp(x[j0])
            for q in range(hi - lo):
                grad[j0] += g_o[q] * uu[lo + q]
                g_o[q] *= sd
        if terms[j, T_ZS]:
            tmp = np.empty(j2 - j1)
            _zs_grad(g_o, tmp)
            grad[j1:j2] += tmp
        else:
            grad[j1:j2] += g_o
    return lp


@numba.njit(**_JIT)
def expand_core(x, out, meta, terms, flt, pairs, pxbar, nests, npar):  # pragma: no cover
    """What is stored per draw: ``b`` on the original columns, then per term its SD
    (NaN when integrated out) and level effects (original coordinates), then sigma
    (gaussian) or the cut points (cumulative)."""
    family, k, nu = meta[0], meta[1], meta[3]
    icpt = meta[13]
    shift = flt[4 + 2 * k:4 + 3 * k]
    bs = 0.0
    for j in range(k):
        bs += x[j] * shift[j]
    for j in range(k):
        out[j] = x[j] - bs if j == icpt else x[j]
    v, uu, ueta = np.empty(nu), np.empty(nu), np.empty(nu)
    _levels(x, meta, terms, v, uu, ueta)
    pf = np.empty(x.shape[0])
    _prior_free(x, terms, pairs, pxbar, nests, npar, uu, pf)
    pos = k
    r = terms.shape[0]
    reported = np.zeros(r, dtype=np.bool_)
    for p in range(pairs.shape[0]):
        reported[pairs[p, 0]] = True
    for p in range(nests.shape[0]):
        reported[nests[p, 0]] = True
    for t in range(r):
        lo, hi, i0, i1, i2 = (terms[t, T_LO], terms[t, T_HI], terms[t, T_SD],
                              terms[t, T_F1], terms[t, T_F2])
        out[pos] = math.exp(x[i0]) if i0 >= 0 else np.nan
        pos += 1
        if reported[t]:   # the original deviations
            if terms[t, T_ZS]:
                _zs_forward(pf[i1:i2], out[pos:pos + hi - lo])
            else:
                out[pos:pos + hi - lo] = pf[i1:i2]
        else:
            out[pos:pos + hi - lo] = uu[lo:hi]
        pos += hi - lo
    if family == 1:
        out[pos] = math.exp(x[meta[5]])
    elif family == 2:
        c = meta[6]
        out[pos] = x[c]
        for j in range(1, meta[7]):
            out[pos + j] = out[pos + j - 1] + math.exp(x[c + j])


#: dtypes of the packed arrays (compile-time constants in the callbacks)
_F8, _I8, _B1 = np.float64, np.int64, np.bool_


@numba.njit(**_JIT)
def _unpack1(hdr, i, dtype):  # pragma: no cover
    """Array ``i`` of the header (pointer, length) as a 1-D view of ``dtype``."""
    return numba.carray(_as_voidptr(hdr[1 + 3 * i]), (hdr[2 + 3 * i],), dtype)


@numba.njit(**_JIT)
def _unpack2(hdr, i, dtype):  # pragma: no cover
    """Array ``i`` of the header (pointer, rows, columns) as a 2-D view of ``dtype``."""
    return numba.carray(_as_voidptr(hdr[1 + 3 * i]), (hdr[2 + 3 * i], hdr[3 + 3 * i]),
                        dtype)


@numba.njit(inline="always", **_JIT)
def _header(user_data):  # pragma: no cover
    """The packed header (its first entry is its own length) behind nutpie's pointer."""
    return numba.carray(user_data, (numba.carray(user_data, (1,), np.int64)[0],), np.int64)


_C_LOGP = types.int64(types.uint64, types.CPointer(types.double),
                      types.CPointer(types.double), types.CPointer(types.double),
                      types.voidptr)
_C_EXPAND = types.int64(types.uint64, types.uint64, types.CPointer(types.double),
                        types.CPointer(types.double), types.voidptr)


@numba.cfunc(_C_LOGP, cache=True, nogil=True)
def logp_cfunc(dim, x_, grad_, logp_, user_data):  # pragma: no cover
    """The nutpie logp callback: 0 on success, 3/4 for a non-finite gradient/density."""
    hdr = _header(user_data)
    x = numba.carray(x_, (dim,))
    grad = numba.carray(grad_, (dim,))
    out = numba.carray(logp_, (1,))
    lp = logp_core(
        x, grad, _unpack1(hdr, 0, _I8), _unpack2(hdr, 1, _I8), _unpack1(hdr, 2, _F8),
        _unpack2(hdr, 3, _F8), _unpack2(hdr, 4, _I8), _unpack2(hdr, 5, _F8),
        _unpack1(hdr, 6, _B1), _unpack1(hdr, 7, _F8), _unpack1(hdr, 8, _F8),
        _unpack1(hdr, 9, _F8), _unpack2(hdr, 10, _F8), _unpack2(hdr, 11, _F8),
        _unpack2(hdr, 12, _I8), _unpack2(hdr, 13, _F8), _unpack1(hdr, 14, _B1),
        _unpack2(hdr, 15, _F8), _unpack2(hdr, 16, _F8), _unpack2(hdr, 17, _I8),
        _unpack1(hdr, 18, _F8), _unpack2(hdr, 19, _I8), _unpack1(hdr, 20, _I8),
        _unpack2(hdr, 21, _I8), _unpack2(hdr, 22, _F8), _unpack2(hdr, 23, _I8),
        _unpack2(hdr, 24, _I8), _unpack2(hdr, 25, _F8), _unpack1(hdr, 26, _B1),
        _unpack2(hdr, 27, _I8), _unpack1(hdr, 28, _F8), _unpack1(hdr, 29, _F8))
    out[0] = lp
    for i in range(dim):
        if not math.isfinite(grad[i]):
            return 3
    if not math.isfinite(lp):
        return 4
    return 0


@numba.cfunc(_C_EXPAND, cache=True, nogil=True)
def expand_cfunc(dim, n_expanded, x_, out_, user_data):  # pragma: no cover
    """The nutpie expand callback (the stored draw of :func:`expand_core`)."""
    hdr = _header(user_data)
    x = numba.carray(x_, (dim,))
    out = numba.carray(out_, (n_expanded,))
    expand_core(x, out, _unpack1(hdr, 0, _I8), _unpack2(hdr, 1, _I8),
                _unpack1(hdr, 2, _F8), _unpack2(hdr, 17, _I8), _unpack1(hdr, 18, _F8),
                _unpack2(hdr, 19, _I8), _unpack1(hdr, 20, _I8))
    return 0
