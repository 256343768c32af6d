"""A hand-written log density and gradient of the model in :mod:`evalmix.models.pymc_model`.

Same parameters, priors and transforms as the PyMC model (tests check the log density
and gradient against PyMC's compiled ones), but evaluated by Numba loops over the
collapsed rows (:mod:`evalmix.models._loops`: a row layout and a dense grid layout for
crossed designs), compiled once and cached on disk (``cache=True``), and handed to nutpie
through :func:`nutpie.compiled_pyfunc.from_pyfunc`. This removes the per-process
PyTensor + Numba compile (15-25 s here) that dominated a 20,000-row fit.

Unconstrained coordinates, in order: ``b`` (k); per random term ``log sd`` (absent for
``marginal`` terms, whose SD is integrated out) then the free deviations (``G - 1``
zero-sum coordinates mapped by PyMC's Householder ``zerosum`` transform, or ``G`` plain
ones); ``log sigma`` (gaussian).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalmix.models._loops import GRID_MIN_FILL, _grid_rows, _make_grid, _rows
from evalmix.models.pymc_model import (
    RAYLEIGH_SCALE,
    SD_SCALE,
    TermInfo,
    fixed_prior_sd,
    fixed_shift,
    marginal_sd_terms,
    nested_parents,
    uncentre,
)
from evalmix.models.spec import Collapsed, ModelSpec

__all__ = ["DensityKernel", "KERNEL_FAMILIES"]

KERNEL_FAMILIES = ("bernoulli", "binomial", "gaussian")


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


#: Couple a factor's intercept to its slopes only when the slopes inflate the intercept's
#: variance at least this much (1 + xbar' Cov(x)^-1 xbar: K for K balanced
#: treatment-coded conditions). Measured: MT-Bench, 31 conditions, helps (1 divergence,
#: ESS 209 -> 0, 415); the simulated design, 2 conditions, hurts (0 -> 4 in 100 fits
#: with one divergence each).
SLOPE_CENTRING_MIN_INFLATION = 4.0


def _slope_centring(terms: list[TermInfo], data: Collapsed
                    ) -> dict[int, list[tuple[int, float]]]:
    """Random slopes centred within their factor: intercept term -> [(slope term, xbar)].

    With a random intercept ``u`` and condition slopes ``v_s`` for the same factor (e.g.
    ``(1|judge) + (0 + condition|judge)``), each judge's intercept is pinned only by the
    reference condition's rows and is correlated with all its slopes (MT-Bench with 30
    models: ~37 leapfrog steps per draw, intercept ESS ~200). The sampler instead sees
    ``u' = u + sum_s xbar_s v_s`` and slopes on centred covariates ``x_s - xbar_s``
    (``xbar_s`` their row mean), a linear map with unit Jacobian; the prior is still on
    ``u`` (same model), and ``u`` is what is reported. Only where the intercept and the
    slopes put their prior directly on the level effects (centred or SD integrated out),
    share the zero-sum form, and the slopes inflate the intercept's variance by at
    least :data:`SLOPE_CENTRING_MIN_INFLATION`."""
    w = np.asarray(data.trials, dtype=float)
    out: dict[int, list[tuple[int, float]]] = {}
    for i, t in enumerate(terms):
        if t.term != "1" or not (t.centred or t.marginal):
            continue
        lst, cols = [], []
        for j, s in enumerate(terms):
            if (s.factor == t.factor and s.term != "1" and s.n_levels == t.n_levels
                    and s.zero_sum == t.zero_sum and (s.centred or s.marginal)):
                xj = np.asarray(data.x[j], dtype=float)
                xbar = float(w @ xj / w.sum())
                if abs(xbar) > 1e-12:
                    lst.append((j, xbar))
                    cols.append(xj - xbar)
        if not lst:
            continue
        xc = np.column_stack(cols)
        cov = (xc * w[:, None]).T @ xc / w.sum()
        xb = np.array([xbar for _, xbar in lst])
        inflation = 1.0 + float(xb @ np.linalg.lstsq(cov, xb, rcond=None)[0])
        if inflation >= SLOPE_CENTRING_MIN_INFLATION:
            out[i] = lst
    return out


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
    #: sample intercepts coupled to their factor's slopes (:func:`_slope_centring`)
    centre_slopes: bool = True
    #: sample nested factors' total effects (:func:`~evalmix.models.pymc_model.nested_parents`)
    centre_nested: bool = True

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
        self.sd_b = fixed_prior_sd(spec, data)
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
        self.couple = _slope_centring(self.terms, data) if self.centre_slopes else {}
        for lst in self.couple.values():
            for j, xbar in lst:
                self.xs[:, j] -= xbar
                self.unit[j] = False
        coupled = set(self.couple) | {j for lst in self.couple.values() for j, _ in lst}
        self.nest = (nested_parents(self.terms, data, coupled) if self.centre_nested
                     else {})
        self.outer = {j for j, _ in self.nest.values()}
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

    def coordinates(self) -> dict[str, str]:
        """Terms sampled in other coordinates than their own effects (same model)."""
        out = {self.terms[i].name: "coupled to its slopes: sampled as u + sum xbar * v, "
               "slopes on centred covariates" for i in self.couple}
        for i, (j, _parent) in self.nest.items():
            f = self.terms[j].factor
            out[self.terms[i].name] = (f"hierarchically centred: sampled as u + u_{f}"
                                       f"[parent] (nested in {f})")
        return out

    # ------------------------------------------------------------------ transforms
    def _prior_free(self, cache) -> list[np.ndarray]:
        """Per term, the free coordinates its prior sees: for an intercept coupled to its
        factor's slopes (:func:`_slope_centring`) the sampled ``u'`` minus
        ``sum_s xbar_s v_s`` (the original intercept deviations), else the sampled ones."""
        out = [c[1] for c in cache]
        for i, lst in self.couple.items():
            f = np.array(out[i], dtype=float, copy=True)
            for j, xbar in lst:
                f -= xbar * cache[j][1]
            out[i] = f
        for i, (j, parent) in self.nest.items():
            out[i] = cache[i][1] - cache[j][3][parent]
        return out

    def _levels(self, x: np.ndarray):
        """Level effects per term and cached pieces for the gradient."""
        u_all = np.empty(int(self.u_off[-1]))
        cache: list[tuple] = []
        for t, (i0, i1, i2), lo, hi in zip(self.terms, self.slices, self.u_off[:-1],
                                           self.u_off[1:], strict=True):
            sd = np.nan if t.marginal else np.exp(x[i0])
            free = x[i1:i2]
            v = zerosum_forward(free) if t.zero_sum else free
            u = v if (t.centred or t.marginal) else sd * v
            # an outer factor of a nested pair enters eta through the inner term's w
            u_all[lo:hi] = 0.0 if len(cache) in self.outer else u
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
        d = d / self.sd_b
        lp += -0.5 * float(d @ d)
        grad[:k] = g_b - d / self.sd_b
        s2p = self.sd_prior ** 2
        for j in self.outer:   # eta does not depend on an outer factor's effects
            g_u_all[self.u_off[j]:self.u_off[j + 1]] = 0.0
        pfree = self._prior_free(cache)
        if self.marginal_n.size:   # all marginal terms in one vectorised Bessel call
            rs = np.array([np.sqrt(f @ f) for t, f in zip(self.terms, pfree, strict=True)
                           if t.marginal])
            m_lp, m_coef = marginal_sd_terms(rs, self.marginal_n, self.rayleigh)
        j_m = 0
        g_prior = {}   # prior gradients of coupled intercepts (w.r.t. their prior coords)
        for it, (t, (i0, i1, i2), lo, hi, (sd, _free, _v, u)) in enumerate(zip(
                self.terms, self.slices, self.u_off[:-1], self.u_off[1:], cache,
                strict=True)):
            g_u = g_u_all[lo:hi]
            nfree = i2 - i1
            free = pfree[it]
            if t.marginal:
                # u under its marginal prior (sd ~ Rayleigh integrated out)
                lp += float(m_lp[j_m])
                gp = m_coef[j_m] * free
                grad[i1:i2] = (zerosum_grad(g_u) if t.zero_sum else g_u) + gp
                g_prior[it] = gp
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
                g_prior[it] = -free / (sd * sd)
                g_free = (zerosum_grad(g_v) if t.zero_sum else g_v) + g_prior[it]
            else:
                # free ~ N(0, 1), u = sd * Q free
                lp += -0.5 * float(free @ free)
                g_log_sd += float(g_u @ u)
                g_v = sd * g_u
                g_free = (zerosum_grad(g_v) if t.zero_sum else g_v) - free
            grad[i0] = g_log_sd
            grad[i1:i2] = g_free
        # coupled slopes: d(prior of u = u' - sum xbar v)/dv = -xbar * (its prior gradient)
        for i, lst in self.couple.items():
            for j, xbar in lst:
                _, j1, j2 = self.slices[j]
                grad[j1:j2] -= xbar * g_prior[i]
        # nested: the inner prior is on w - u_outer[parent]
        for i, (j, parent) in self.nest.items():
            o = self.terms[j]
            g_o = -np.bincount(parent, weights=g_prior[i], minlength=o.n_levels)
            j0, j1, j2 = self.slices[j]
            if not (o.centred or o.marginal):   # u_outer = sd * v
                grad[j0] += float(g_o @ cache[j][3])
                g_o = cache[j][0] * g_o
            grad[j1:j2] += zerosum_grad(g_o) if o.zero_sum else g_o
        return float(lp), grad

    def expand(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out = {"b": np.array(uncentre(np.asarray(x[:self.k]), self.shift, self.spec),
                             dtype=np.float64)}
        _, cache = self._levels(x)
        pfree = self._prior_free(cache)
        for it, (t, (sd, _free, _v, u)) in enumerate(zip(self.terms, cache, strict=True)):
            if it in self.couple or it in self.nest:   # report the original deviations
                u = zerosum_forward(pfree[it]) if t.zero_sum else pfree[it]
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
