"""A hand-written log density and gradient of the model in :mod:`evalmix.models.pymc_model`.

Same parameters, priors and transforms as the PyMC model (tests check the log density
and gradient against PyMC's compiled ones), but evaluated by one fused Numba loop over the
collapsed rows, compiled once and cached on disk (``cache=True``), and handed to nutpie
through :func:`nutpie.compiled_pyfunc.from_pyfunc`. This removes the per-process
PyTensor + Numba compile (15-25 s here) that dominated a 20,000-row fit.

Unconstrained coordinates, in order: ``b`` (k); per random term ``log sd`` (absent for
``marginal`` terms, whose SD is integrated out) then the free deviations (``G - 1``
zero-sum coordinates mapped by PyMC's Householder ``zerosum`` transform, or ``G`` plain
ones); ``log sigma`` (gaussian).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from evalmix.models.pymc_model import (
    FIXED_SD,
    RAYLEIGH_SCALE,
    SD_SCALE,
    TermInfo,
    fixed_shift,
    marginal_sd_terms,
    uncentre,
)
from evalmix.models.spec import Collapsed, ModelSpec

__all__ = ["DensityKernel", "KERNEL_FAMILIES"]

KERNEL_FAMILIES = ("bernoulli", "binomial", "gaussian")


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


def zerosum_forward(x: np.ndarray) -> np.ndarray:
    """PyMC's zero-sum backward transform: R^(G-1) -> zero-sum R^G (an isometry)."""
    n = x.shape[0] + 1
    s = x.sum()
    norm = s / (np.sqrt(n) + n)
    out = np.empty(n)
    out[:-1] = x - norm
    out[-1] = -s / np.sqrt(n)
    return out


def zerosum_grad(g_u: np.ndarray) -> np.ndarray:
    """Transpose of :func:`zerosum_forward`'s Jacobian applied to ``g_u``."""
    n = g_u.shape[0]
    return g_u[:-1] - g_u[:-1].sum() / (np.sqrt(n) + n) - g_u[-1] / np.sqrt(n)


@dataclass
class DensityKernel:
    """Log density + gradient of a collapsed spec (binomial or gaussian families)."""

    spec: ModelSpec
    data: Collapsed
    terms: list[TermInfo]
    prior_scale: float = 1.0
    #: "auto": the grid layout (:class:`_Grid`) when the design is dense enough, else
    #: one loop over the collapsed rows; "rows" / "grid" force one (tests).
    layout: str = "auto"

    def __post_init__(self) -> None:
        spec, data = self.spec, self.data
        if spec.family not in KERNEL_FAMILIES:
            raise ValueError(f"kernel does not handle family {spec.family!r}")
        self.family = 1 if spec.family == "gaussian" else 0
        if self.family == 1:
            self.ysd = float(np.std(spec.y)) or 1.0
            ymean = float(np.mean(spec.y))
        else:
            self.ysd, ymean = 1.0, 0.0
        k = len(spec.fixed_names)
        self.k = k
        self.mu_b = np.zeros(k)
        if "Intercept" in spec.fixed_names:
            self.mu_b[spec.fixed_names.index("Intercept")] = ymean
        self.sd_b = FIXED_SD * self.ysd
        self.sd_prior = SD_SCALE * self.prior_scale * self.ysd
        self.rayleigh = RAYLEIGH_SCALE * self.prior_scale * self.ysd
        # sampled on centred columns (see pymc_model.fixed_shift); b is reported uncentred
        self.shift = fixed_shift(spec, data)
        self.X = np.ascontiguousarray(np.asarray(data.X, dtype=np.float64) - self.shift)
        sizes = [t.n_levels for t in self.terms]
        self.u_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        r = len(self.terms)
        # row-major (m, r): one row's level codes and scales are contiguous
        self.cg = np.zeros((data.n_patterns, r), dtype=np.int32)
        self.xs = np.ones((data.n_patterns, r))
        self.unit = np.ones(r, dtype=np.bool_)
        for i, (c, x) in enumerate(zip(data.codes, data.x, strict=True)):
            self.cg[:, i] = c + self.u_off[i]
            self.xs[:, i] = x
            self.unit[i] = bool(np.all(self.xs[:, i] == 1.0))
        self.succ = np.ascontiguousarray(data.sum_y if self.family else data.successes,
                                         dtype=np.float64)
        self.trials = np.ascontiguousarray(data.trials, dtype=np.float64)
        self.s2 = np.ascontiguousarray(data.sum_y2, dtype=np.float64)
        self.n_total = float(self.trials.sum())
        self.grid = None
        if self.family == 0 and self.layout != "rows":
            self.grid = _make_grid(self.X, self.cg, self.xs, self.unit, self.u_off,
                                   self.succ, self.trials,
                                   min_fill=0.0 if self.layout == "grid" else GRID_MIN_FILL)
        # slices of the unconstrained vector
        pos = k
        self.slices = []
        for t in self.terms:
            nfree = t.n_levels - 1 if t.zero_sum else t.n_levels
            nsd = 0 if t.marginal else 1
            self.slices.append((pos, pos + nsd, pos + nsd + nfree))
            pos += nsd + nfree
        self.marginal_n = np.array([i2 - i1 for t, (_, i1, i2) in zip(
            self.terms, self.slices, strict=True) if t.marginal], dtype=float)
        self.sigma_at = pos if self.family == 1 else None
        self.ndim = pos + (1 if self.family == 1 else 0)

    # ------------------------------------------------------------------ transforms
    def _levels(self, x: np.ndarray):
        """Level effects per term and cached pieces for the gradient."""
        u_all = np.empty(int(self.u_off[-1]))
        cache = []
        for t, (i0, i1, i2), lo, hi in zip(self.terms, self.slices, self.u_off[:-1],
                                           self.u_off[1:], strict=True):
            sd = np.nan if t.marginal else np.exp(x[i0])
            free = x[i1:i2]
            v = zerosum_forward(free) if t.zero_sum else free
            u = v if (t.centred or t.marginal) else sd * v
            u_all[lo:hi] = u
            cache.append((sd, free, v, u))
        return u_all, cache

    def logp(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        k = self.k
        grad = np.zeros(self.ndim)
        b = x[:k]
        u_all, cache = self._levels(x)
        if self.family == 1:
            log_sigma = x[self.sigma_at]
            sigma = np.exp(log_sigma)
            inv_var = 1.0 / (sigma * sigma)
        else:
            inv_var = 1.0
        # fresh gradient buffers per call: nutpie evaluates chains in parallel threads
        g_b, g_u_all = np.empty(k), np.empty(u_all.shape[0])
        if self.grid is not None:
            q = _grid_rows(self.grid, np.ascontiguousarray(b), u_all, g_b, g_u_all)
        else:
            q = _rows(self.X, np.ascontiguousarray(b), self.cg, self.xs, self.unit, u_all,
                      self.succ, self.trials, self.s2, self.family, inv_var, g_b, g_u_all)
        if self.family == 1:
            lp = -self.n_total * log_sigma - 0.5 * q * inv_var
            grad[self.sigma_at] = -self.n_total + q * inv_var
            # HalfNormal(ysd) prior on sigma, log transform
            lp += -0.5 * sigma * sigma / self.ysd ** 2 + log_sigma
            grad[self.sigma_at] += -sigma * sigma / self.ysd ** 2 + 1.0
        else:
            lp = q
        # fixed effects: Normal(mu_b, sd_b)
        d = b - self.mu_b
        lp += -0.5 * float(d @ d) / self.sd_b ** 2
        grad[:k] = g_b - d / self.sd_b ** 2
        s2p = self.sd_prior ** 2
        if self.marginal_n.size:   # all marginal terms in one vectorised Bessel call
            rs = np.array([np.sqrt(c[1] @ c[1]) for t, c in zip(self.terms, cache,
                                                                strict=True) if t.marginal])
            m_lp, m_coef = marginal_sd_terms(rs, self.marginal_n, self.rayleigh)
        j_m = 0
        for t, (i0, i1, i2), lo, hi, (sd, free, _v, u) in zip(
                self.terms, self.slices, self.u_off[:-1], self.u_off[1:], cache, strict=True):
            g_u = g_u_all[lo:hi]
            nfree = i2 - i1
            if t.marginal:
                # u under its marginal prior (sd ~ Rayleigh integrated out)
                lp += float(m_lp[j_m])
                grad[i1:i2] = (zerosum_grad(g_u) if t.zero_sum else g_u) + m_coef[j_m] * free
                j_m += 1
                continue
            if t.sd_prior == "rayleigh":
                # Rayleigh(s): log sd - sd^2 / (2 s^2), log transform (+ log sd)
                r2 = self.rayleigh ** 2
                lp += -0.5 * sd * sd / r2 + 2.0 * x[i0]
                g_log_sd = -sd * sd / r2 + 2.0
            else:
                # HalfNormal(sd_prior) on sd with log transform (Jacobian + log sd)
                lp += -0.5 * sd * sd / s2p + x[i0]
                g_log_sd = -sd * sd / s2p + 1.0
            if t.centred:
                # free ~ N(0, sd^2), u = Q free (or free)
                ss = float(free @ free)
                lp += -nfree * x[i0] - 0.5 * ss / (sd * sd)
                g_log_sd += -nfree + ss / (sd * sd)
                g_v = g_u
                g_free = (zerosum_grad(g_v) if t.zero_sum else g_v) - free / (sd * sd)
            else:
                # free ~ N(0, 1), u = sd * Q free
                lp += -0.5 * float(free @ free)
                g_log_sd += float(g_u @ u)
                g_v = sd * g_u
                g_free = (zerosum_grad(g_v) if t.zero_sum else g_v) - free
            grad[i0] = g_log_sd
            grad[i1:i2] = g_free
        return float(lp), grad

    def expand(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out = {"b": np.array(uncentre(np.asarray(x[:self.k]), self.shift, self.spec),
                             dtype=np.float64)}
        _, cache = self._levels(x)
        for t, (sd, _free, _v, u) in zip(self.terms, cache, strict=True):
            out[t.sd_var] = np.asarray(sd, dtype=np.float64)
            out[t.var] = np.array(u, dtype=np.float64)
        if self.family == 1:
            out["sigma"] = np.asarray(np.exp(x[self.sigma_at]), dtype=np.float64)
        return out

    def initial_point(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        x = rng.uniform(-0.5, 0.5, self.ndim) * 0.2
        x[:self.k] += self.mu_b
        if self.family == 0 and "Intercept" in self.spec.fixed_names:
            p = float(np.clip(self.succ.sum() / self.n_total, 0.02, 0.98))
            x[self.spec.fixed_names.index("Intercept")] = np.log(p / (1 - p))
        for t, (i0, _, _) in zip(self.terms, self.slices, strict=True):
            if not t.marginal:
                x[i0] = np.log(0.3 * self.sd_prior) + rng.uniform(-0.2, 0.2)
        if self.family == 1:
            x[self.sigma_at] = np.log(0.8 * self.ysd)
        return x

    def nutpie_model(self):
        """A nutpie compiled model (no PyTensor, no per-process compile)."""
        from nutpie.compiled_pyfunc import from_pyfunc

        names = ["b"] + [v for t in self.terms for v in (t.sd_var, t.var)]
        shapes = [(self.k,)] + [s for t in self.terms for s in ((), (t.n_levels,))]
        coords = {"fixed": list(self.spec.fixed_names)}
        dims = {"b": ("fixed",)}
        for t, r in zip(self.terms, self.spec.random, strict=True):
            coords[t.var + "_level"] = list(r.levels)
            dims[t.var] = (t.var + "_level",)
        if self.family == 1:
            names.append("sigma")
            shapes.append(())
        logp, expand, init = self.logp, self.expand, self.initial_point
        return from_pyfunc(
            ndim=self.ndim,
            make_logp_fn=lambda: (lambda x, **_: logp(x)),
            make_expand_fn=lambda *a: (lambda x, **_: expand(x)),
            expanded_dtypes=[np.dtype("float64")] * len(names),
            expanded_shapes=shapes, expanded_names=names,
            coords=coords, dims=dims,
            make_initial_point_fn=lambda seed: init(int(seed)),
        )
