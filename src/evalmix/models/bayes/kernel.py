"""A hand-written log density and gradient of the model in :mod:`evalmix.models.bayes.pymc_model`.

Same parameters, priors and transforms as the PyMC model (tests check the log density
and gradient against PyMC's compiled ones), but evaluated by Numba loops over the
collapsed rows (:mod:`evalmix.models.bayes._loops`: a row layout and a dense grid layout for
crossed designs), compiled once and cached on disk (``cache=True``), and handed to nutpie
as C callbacks (:func:`~evalmix.models.bayes._loops.logp_cfunc`) that its sampler threads call
without Python or the GIL. This removes the per-process PyTensor + Numba compile (15-25
s here) and the interpreter's ~0.4 ms per evaluation, most of a small fit's time (4,320
rows, same load: 530 -> 122 us per density + gradient).

Unconstrained coordinates, in order: ``b`` (k); per random term ``log sd`` (absent for
``marginal`` terms, whose SD is integrated out) then the free deviations (``G - 1``
zero-sum coordinates mapped by PyMC's Householder ``zerosum`` transform, or ``G`` plain
ones); ``log sigma`` (gaussian) or the cut points (cumulative: the first, then the logs
of the gaps, PyMC's ``ordered`` transform).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalmix.models.bayes._loops import (
    ARRAYS,
    GRID_MIN_FILL,
    KVE_ADDRESS,
    PAIRS_MAX_PATTERNS,
    _make_grid,
    _make_pairs,
    expand_cfunc,
    expand_core,
    logp_cfunc,
    logp_core,
    pack,
)
from evalmix.models.bayes._nutpie import model_from_callbacks
from evalmix.models.bayes.pymc_model import (
    RAYLEIGH_SCALE,
    SD_SCALE,
    TermInfo,
    fixed_prior_sd,
    fixed_shift,
    nested_parents,
)
from evalmix.models.spec import Collapsed, ModelSpec

__all__ = ["DensityKernel", "KERNEL_FAMILIES"]

KERNEL_FAMILIES = ("bernoulli", "binomial", "gaussian", "cumulative")


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


def _nonzeros(X: np.ndarray) -> dict[str, np.ndarray]:
    """The columns of each row as its non-zeros, padded with zeros to the most any row
    has: ``Xj`` column indices, ``Xv`` values (the row layout's form of the raw fixed
    columns, see :func:`~evalmix.models.bayes._loops._eta_sparse`, and of the random terms,
    :func:`_row_terms`)."""
    m, k = X.shape
    nz = X != 0.0
    w = max(int(nz.sum(axis=1).max(initial=0)), 1)
    Xj = np.zeros((m, w), dtype=np.int64)
    Xv = np.zeros((m, w))
    rows, cols = np.nonzero(nz)
    slot = np.arange(rows.size) - np.searchsorted(rows, rows)   # rank within its row
    Xj[rows, slot] = cols
    Xv[rows, slot] = X[rows, cols]
    return {"Xj": Xj, "Xv": Xv}


def _row_terms(cg: np.ndarray, xs: np.ndarray, unit: np.ndarray
               ) -> dict[str, np.ndarray]:
    """The random terms of each row in the row layout: the terms non-zero in every row
    as they are (level codes ``cg``, scales ``xs``, ``unit`` flags), then each row's
    non-zeros of the others, padded with scale 0 (code: any of the row's). Coupled slopes
    keep their raw covariates (the centring is a shift per level, see
    :func:`~evalmix.models.bayes._loops.logp_core`), so a row of MT-Bench's 30
    treatment-coded condition slopes holds 1-2 of them."""
    dense = np.all(xs != 0.0, axis=0)
    cgs, xss, units = [cg[:, dense]], [xs[:, dense]], [unit[dense]]
    if not dense.all():
        nz = _nonzeros(xs[:, ~dense])
        cgs.append(np.take_along_axis(cg[:, ~dense], nz["Xj"], axis=1))
        xss.append(nz["Xv"])
        units.append(np.zeros(nz["Xj"].shape[1], dtype=np.bool_))
    c = np.ascontiguousarray
    return {"cg": c(np.hstack(cgs)), "xs": c(np.hstack(xss)), "unit": c(np.concatenate(units))}


@dataclass
class DensityKernel:
    """Log density + gradient of a collapsed spec (binomial or gaussian families)."""

    spec: ModelSpec
    data: Collapsed
    terms: list[TermInfo]
    prior_scale: float = 1.0
    #: "auto": the grid layout (:class:`_Grid`) when the design is dense enough, else
    #: the pair layout (:class:`_Pairs`) when the rows split into few patterns of the
    #: largest factor and of the rest, else one loop over the collapsed rows; "rows" /
    #: "grid" / "pairs" force one (tests).
    layout: str = "auto"
    #: sample intercepts coupled to their factor's slopes (:func:`_slope_centring`)
    centre_slopes: bool = True
    #: sample nested factors' total effects (:func:`~evalmix.models.bayes.pymc_model.nested_parents`)
    centre_nested: bool = True

    def __post_init__(self) -> None:
        spec, data = self.spec, self.data
        if spec.family not in KERNEL_FAMILIES:
            raise ValueError(f"kernel does not handle family {spec.family!r}")
        self.family = {"gaussian": 1, "cumulative": 2}.get(spec.family, 0)
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
        self.cg = np.zeros((data.n_patterns, r), dtype=np.int64)
        self.xs = np.ones((data.n_patterns, r))
        self.unit = np.ones(r, dtype=np.bool_)
        for i, (c, x) in enumerate(zip(data.codes, data.x, strict=True)):
            self.cg[:, i] = c + self.u_off[i]
            self.xs[:, i] = x
            self.unit[i] = bool(np.all(self.xs[:, i] == 1.0))
        self.succ = np.ascontiguousarray(data.sum_y if self.family == 1 else data.successes,
                                         dtype=np.float64)
        self.trials = np.ascontiguousarray(data.trials, dtype=np.float64)
        self.s2 = np.ascontiguousarray(data.sum_y2, dtype=np.float64)
        self.n_total = float(self.trials.sum())
        # coupled slopes are on centred covariates x - xbar; xs keeps the raw x (sparse)
        self.couple = _slope_centring(self.terms, data) if self.centre_slopes else {}
        coupled = set(self.couple) | {j for lst in self.couple.values() for j, _ in lst}
        self.nest = (nested_parents(self.terms, data, coupled) if self.centre_nested
                     else {})
        self.outer = {j for j, _ in self.nest.values()}
        self.grid = None
        if self.family == 0 and self.layout in ("auto", "grid"):
            self.grid = _make_grid(self.X, self.cg, self.xs, self.unit, self.u_off,
                                   self.succ, self.trials,
                                   min_fill=0.0 if self.layout == "grid" else GRID_MIN_FILL)
        self.pairs = None
        if self.family == 0 and self.grid is None and self.layout in ("auto", "pairs"):
            self.pairs = _make_pairs(self.X, self.cg, self.xs, self.unit, self.u_off,
                                     [t.factor for t in self.terms], self.succ, self.trials,
                                     max_patterns=1.0 if self.layout == "pairs" else
                                     PAIRS_MAX_PATTERNS)
        # slices of the unconstrained vector
        pos = k
        self.slices = []
        for t in self.terms:
            nfree = t.n_levels - 1 if t.zero_sum else t.n_levels
            nsd = 0 if t.marginal else 1
            self.slices.append((pos, pos + nsd, pos + nsd + nfree))
            pos += nsd + nfree
        self.sigma_at = pos if self.family == 1 else None
        self.ncut = len(spec.categories) - 1 if self.family == 2 else 0
        self.cut_at = pos if self.family == 2 else None
        self.ndim = pos + (1 if self.family == 1 else 0) + self.ncut
        self._arrays = self._pack_arrays()
        self.header = pack(self._arrays)

    def _pack_arrays(self) -> dict[str, np.ndarray]:
        """The arrays of :data:`~evalmix.models.bayes._loops.ARRAYS` (kept alive here)."""
        k, r = self.k, len(self.terms)
        terms = np.zeros((r, 9), dtype=np.int64)
        for i, (t, (i0, i1, i2)) in enumerate(zip(self.terms, self.slices, strict=True)):
            mode = 0 if t.marginal else (1 if t.centred else 2)
            terms[i] = (self.u_off[i], self.u_off[i + 1], -1 if t.marginal else i0, i1,
                        i2, t.zero_sum, mode, t.sd_prior == "rayleigh", i in self.outer)
        pairs = [(i, j, xbar) for i, lst in self.couple.items() for j, xbar in lst]
        nests, npar, off = [], [], 0
        for i, (j, parent) in self.nest.items():
            nests.append((i, j, off))
            npar.append(np.asarray(parent, dtype=np.int64))
            off += len(parent)
        g, pr = self.grid, self.pairs
        cut_mu = np.linspace(-1, 1, self.ncut) if self.ncut else np.zeros(0)
        # cumulative: the binomial (cut point x row) grid of _loops.cumulative_grid
        cnt = np.asarray(self.data.counts, dtype=np.float64).reshape(
            self.data.n_patterns, -1) if self.ncut else np.zeros((0, 1))
        cgrid = np.vstack([cnt[:, :-1].T, (cnt[:, :-1] + cnt[:, 1:]).T])
        n_cat = cnt.sum(axis=0)[:-1]
        if self.ncut:
            binary = bool(np.all((cgrid == 0.0) | (cgrid == 1.0)))
        elif g:
            binary = g.binary
        else:   # binomial rows of one trial each (binomial_rows)
            binary = self.family == 0 and bool(np.all(self.trials == 1.0))
        icpt = (self.spec.fixed_names.index("Intercept")
                if "Intercept" in self.spec.fixed_names else -1)
        n_exp = k + sum(1 + t.n_levels for t in self.terms) + (
            1 if self.family == 1 else 0) + self.ncut
        self.n_expanded = n_exp
        meta = [self.family, k, r, int(self.u_off[-1]), self.ndim,
                self.sigma_at if self.sigma_at is not None else -1,
                self.cut_at if self.cut_at is not None else -1, self.ncut,
                g is not None, g.term if g else -1, g.lo if g else 0,
                g.n_levels if g else 0, KVE_ADDRESS, icpt, n_exp, binary,
                pr is not None, pr.n_bin if pr else 0]
        c = np.ascontiguousarray

        def f2(a, ncol):
            return c(np.asarray(a, dtype=np.float64).reshape(-1, ncol))

        return {
            "meta": np.array(meta, dtype=np.int64), "terms": terms,
            "flt": np.concatenate([[self.sd_prior, self.rayleigh, self.ysd, self.n_total],
                                   self.mu_b, self.sd_b, self.shift, cut_mu, n_cat]),
            "X": f2(self.X, k), **_row_terms(self.cg, self.xs, self.unit),
            "succ": self.succ, "trials": self.trials, "s2": self.s2,
            "counts": c(cgrid),
            # the grid's rest patterns, or the pair layout's B side
            "gX": f2(g.X, k) if g else (f2(pr.X, k) if pr else np.zeros((0, 0))),
            "gcg": c(g.cg.astype(np.int64)) if g else (
                c(pr.bcg, dtype=np.int64) if pr else np.zeros((0, 0), dtype=np.int64)),
            "gxs": f2(g.xs, max(g.xs.shape[1], 1)) if g else (
                c(pr.bxs, dtype=np.float64) if pr else np.zeros((0, 0))),
            "gunit": c(g.unit) if g else (c(pr.bunit) if pr else np.zeros(0, dtype=np.bool_)),
            "gsucc": c(g.succ) if g else np.zeros((0, 0)),
            "gtrials": c(g.trials) if g else np.zeros((0, 0)),
            "gup": c(g.up) if g else np.zeros((0, 0), dtype=np.int64),
            "acg": c(pr.cg, dtype=np.int64) if pr else np.zeros((0, 0), dtype=np.int64),
            "axs": c(pr.xs, dtype=np.float64) if pr else np.zeros((0, 0)),
            "aunit": c(pr.unit) if pr else np.zeros(0, dtype=np.bool_),
            "pidx": pr.pidx if pr else np.zeros((2, 0), dtype=np.int64),
            "psucc": pr.succ if pr else np.zeros(0),
            "ptrials": pr.trials if pr else np.zeros(0),
            "pairs": np.array([(i, j) for i, j, _ in pairs], dtype=np.int64).reshape(-1, 2),
            "pxbar": np.array([xb for _, _, xb in pairs], dtype=np.float64),
            "nests": np.array(nests, dtype=np.int64).reshape(-1, 3),
            "npar": (np.concatenate(npar) if npar else np.zeros(0, dtype=np.int64)),
            **_nonzeros(np.asarray(self.data.X, dtype=np.float64)),
        }

    def coordinates(self) -> dict[str, str]:
        """Terms sampled in other coordinates than their own effects (same model)."""
        out = {self.terms[i].name: "coupled to its slopes: sampled as u + sum xbar * v, "
               "slopes on centred covariates" for i in self.couple}
        for i, (j, _parent) in self.nest.items():
            f = self.terms[j].factor
            out[self.terms[i].name] = (f"hierarchically centred: sampled as u + u_{f}"
                                       f"[parent] (nested in {f})")
        return out

    def logp(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """Log density (up to a constant) and its gradient at ``x``."""
        a = self._arrays
        grad = np.empty(self.ndim)
        lp = logp_core(np.ascontiguousarray(x, dtype=np.float64), grad,
                       *(a[name] for name, _, _ in ARRAYS))
        return float(lp), grad

    def expand(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """The stored variables at ``x`` (``b`` uncentred, SDs, level effects ...)."""
        a = self._arrays
        out = np.empty(self.n_expanded)
        expand_core(np.ascontiguousarray(x, dtype=np.float64), out, a["meta"], a["terms"],
                    a["flt"], a["pairs"], a["pxbar"], a["nests"], a["npar"])
        res, pos = {}, 0
        for name, shape in zip(*self._expanded(), strict=True):
            size = int(np.prod(shape))
            res[name] = out[pos:pos + size].reshape(shape)
            pos += size
        return res

    def _expanded(self) -> tuple[list[str], list[tuple[int, ...]]]:
        names = ["b"] + [v for t in self.terms for v in (t.sd_var, t.var)]
        shapes: list[tuple[int, ...]] = [(self.k,)] + [
            s for t in self.terms for s in ((), (t.n_levels,))]
        if self.family == 1:
            names.append("sigma")
            shapes.append(())
        elif self.family == 2:
            names.append("cutpoints")
            shapes.append((self.ncut,))
        return names, shapes

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
        elif self.cut_at is not None:
            # cut points at the observed cumulative proportions (logit scale)
            tot = np.asarray(self.data.counts).sum(axis=0)
            p = np.clip(np.cumsum(tot)[:-1] / max(tot.sum(), 1.0), 0.02, 0.98)
            c = np.maximum.accumulate(np.log(p / (1 - p)))
            c = c + 0.05 * np.arange(self.ncut)    # strictly increasing
            x[self.cut_at] = c[0] + rng.uniform(-0.1, 0.1)
            x[self.cut_at + 1:self.cut_at + self.ncut] = np.log(np.diff(c)) + \
                rng.uniform(-0.1, 0.1, self.ncut - 1)
        return x

    def nutpie_model(self) -> tuple[Any, dict[str, list], dict[str, tuple[str, ...]]]:
        """(model, coords, dims): a nutpie model whose log density and expansion are the
        C callbacks of :mod:`evalmix.models.bayes._loops` (no PyTensor, no per-process compile,
        no GIL), and the labels of its stored variables."""
        names, shapes = self._expanded()
        coords: dict[str, list] = {"fixed": list(self.spec.fixed_names)}
        dims: dict[str, tuple[str, ...]] = {"b": ("fixed",)}
        for t, r in zip(self.terms, self.spec.random, strict=True):
            coords[t.var + "_level"] = list(r.levels)
            dims[t.var] = (t.var + "_level",)
        model = model_from_callbacks(
            ndim=self.ndim, n_expanded=self.n_expanded, logp=logp_cfunc, expand=expand_cfunc,
            user_data=self.header, keep=self, names=names, shapes=shapes, coords=coords,
            dims=dims, initial_point=lambda seed: self.initial_point(int(seed)))
        return model, coords, dims
