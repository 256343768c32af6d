"""The PyMC model of a :class:`~evalmix.models.spec.ModelSpec`, built by hand for speed.

Why not Bambi: Bambi parameterises every group effect non-centred without a zero-sum
option; on crossed eval designs that geometry needs 30-240 leapfrog steps per draw and
diverges (``../shared/PERF_NOTES.md``). Here each random term is parameterised for its own
geometry:

* **zero-sum, centred** (``pm.ZeroSumNormal(sigma=sd)``) when the term's mean is absorbed
  by a fixed column (the intercept for random intercepts, the matching fixed slope for
  random slopes, the cut points in a cumulative model) and each level carries much
  information (the default for eval designs: every scenario/judge has many rows);
* **zero-sum, non-centred** (``sd * ZeroSumNormal(sigma=1)``) when levels carry little
  information (e.g. one or two rows per item). Measured: non-centring the 3-level factors
  of a 4,320-row design removed its divergences but took 10x longer (strongly
  informative levels make the non-centred posterior narrow and correlated), so
  informative factors stay centred even with few levels;
* a plain normal (centred / non-centred by the same rule) when no fixed column absorbs
  the mean (e.g. random intercepts in a Bradley-Terry design without an intercept);
* **nested factors** (:func:`nested_parents`, e.g. PandaLM's 170 items in 50 apps): the
  outer factor learns about its levels only through its inner levels, so its
  information is capped at the number of inner levels per level; below 4 it is
  non-centred with its SD sampled, and the kernel samples the inner factor's total
  effects ``u_item + u_app[parent]`` (hierarchical centring). Measured on PandaLM
  (2 x 2,000 draws): app SD integrated out, bulk ESS of sd_app 129 and R-hat 1.013;
  with hierarchical centring alone 109; app non-centred alone 261; both 822+ (every
  parameter) and R-hat 1.006.

Every SD has a boundary-avoiding **Rayleigh** prior (density 0 at SD = 0, like the
gamma(2) prior of Chung et al. 2013). For factors with up to ``MARGINAL_MAX_LEVELS`` =
50 levels (judges, author models, personas, categories: the ones whose SD the data
cannot pin away from 0) the kernel engine integrates the SD out analytically
(``marginal``): with ``n`` free deviations ``u`` and
``sd ~ Rayleigh(s)``, ``sd^2 ~ Exponential(1 / (2 s^2))`` and

    p(u) = (2 pi)^(-n/2) s^-2 (r s)^lam K_lam(r / s),   r = |u|,  lam = 1 - n/2,

(a generalised-inverse-Gaussian integral; K is the modified Bessel function of the second
kind), and ``sd^2 | u ~ GIG(lam, 1/s^2, r^2)`` is drawn exactly after sampling. Why: with
3 levels the SD's posterior runs from ~0 to ~1 while the data pin the level effects to
within ~0.05 (4,000 rows); whenever the chain visits SD << 0.05 the centred geometry has
a funnel neck and NUTS diverges (50-250 divergences per 2 x 2,000 draws on 4,320-row
designs), and the non-centred one is a curved ridge (ESS 80-300). Sampling the level
effects under their marginal prior has neither; the half-normal's marginal would have a
``1/r`` spike at ``u = 0`` (another funnel), the Rayleigh's is ``-log r`` (G = 3). The
same funnel appeared for an 8-level category factor holding MT-Bench's items (SD
posterior down to 0.01) and a 5-level judge factor (PandaLM). Factors with more levels
(items, scenarios) keep the centred / non-centred rule above: their SDs are well
identified, and the Bessel order ``G/2 - 1`` stays where ``K`` is finite in doubles.

With an intercept, the non-intercept fixed columns are centred (:func:`fixed_shift`):
the sampler's intercept is the one at the column means, and ``b`` is reported on the
original columns.

Reference: Chung, Y., Rabe-Hesketh, S., Dorie, V., Gelman, A. and Liu, J. (2013). A
nondegenerate penalized likelihood estimator for variance parameters in multilevel
models. Psychometrika 78: 685-709. doi:10.1007/s11336-013-9328-2

Zero-sum deviations reparameterise the usual model ``u_f ~ N(0, sd_f^2)``: write
``u_f = d_f + m_f`` with ``d_f`` summing to zero and ``m_f ~ N(0, sd_f^2 / G_f)``; the
likelihood sees only ``grand = alpha + sum_f m_f``. With a flat prior on the fixed effect
the posterior of ``(grand, d, sd)`` is the same, and the population-level ``alpha`` is
recovered by drawing ``m_f | sd_f`` from its prior after sampling
(:func:`population_draws`). The fixed-effect prior is then placed on ``grand`` instead of
``alpha`` (a weakly informative Normal, so the difference is negligible).

Rows are first collapsed into patterns (:func:`~evalmix.models.spec.collapse`); the
likelihood is written on the sufficient statistics as a ``pm.Potential``:

* binomial: ``k log sigma(eta) + (n - k) log sigma(-eta)``; under ``ties="half"`` ``k`` is
  fractional (a tie counts one half): a fractional-binomial (quasi-)likelihood that keeps
  one judgment's worth of information per row (encoding a tie as 1 success out of 2
  trials would double the information and shrink intervals by ``sqrt(2)``);
* gaussian: ``-n log sigma - (S2 - 2 mu S1 + n mu^2) / (2 sigma^2)``;
* cumulative logit: ``sum_k n_k log P(y = k)`` with ordered cut points.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Required, TypedDict, cast

import numpy as np

from evalmix.models.bayes._pilot import pilot_sds
from evalmix.models.spec import Collapsed, ModelSpec, parent_levels

__all__ = ["TermInfo", "build_model", "choose_parameterization", "DEFAULT_PRIORS",
           "population_draws", "FEW_LEVELS", "RAYLEIGH_SCALE", "fixed_shift", "uncentre",
           "draw_marginal_sd", "log_marginal_prior"]

#: Weakly informative priors on the latent (link) scale; ``prior_scale`` multiplies the
#: SD priors. Gaussian models use the same numbers times ``sd(y)``.
DEFAULT_PRIORS = {
    "fixed": "Normal(0, 2.5 / sd(x)) per column (rstanarm's autoscaling)",
    "intercept": "Normal(0, 2.5) on the intercept at the mean of the other columns",
    "sd": "Rayleigh(0.8 * prior_scale); integrated out analytically (kernel engine) for "
          "factors with <= 50 levels",
    "sigma": "HalfNormal(1.0) (gaussian residual SD, times sd(y))",
    "cutpoints": "ordered Normal(0, 2.5)",
}
FIXED_SD = 2.5
SD_SCALE = 1.0
#: A level is "informative" (centred parameterisation) when its expected Fisher
#: information times the prior SD squared exceeds this.
CENTRED_INFORMATION = 4.0
#: Factors with fewer levels get a FewClustersWarning (SD barely identified).
FEW_LEVELS = 5
#: Rayleigh scale: its 95% quantile (1.96) equals HalfNormal(1)'s; P(sd < 0.1) = 0.8%
#: (HalfNormal(1): 8%); mean 1.0.
RAYLEIGH_SCALE = 0.8
#: Largest factor whose SD is integrated out (the Bessel order is G/2 - 1; keeps K
#: finite in double precision).
MARGINAL_MAX_LEVELS = 50
#: A term whose pilot information ratio (information per level x estimated variance,
#: :func:`~evalmix.models.bayes._pilot.pilot_sds`) is below this is non-centred with its SD
#: sampled, whatever the prior-based rule says; only for factors with at least
#: :data:`PILOT_MIN_LEVELS` levels (with fewer the SD is integrated out: the data pin
#: the effects, and the non-centred posterior is a curved ridge, see above).
PILOT_NONCENTRED_MAX = 1.0
PILOT_MIN_LEVELS = 10


@dataclass(frozen=True)
class TermInfo:
    """How one random term was put into the model."""

    name: str            # display name "1|judge"
    var: str             # PyMC name of the deviations
    sd_var: str          # PyMC name of the SD
    factor: str
    term: str
    n_levels: int
    zero_sum: bool
    centred: bool
    absorbed_by: str | None   # fixed column (or "cutpoints") absorbing the mean
    sd_prior: str = "halfnormal"   # or "rayleigh" (factors with few levels)
    marginal: bool = False    # SD integrated out (kernel engine), drawn after sampling
    pilot: bool = False       # non-centred because of the pilot's SD estimate


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", s).strip("_")


def choose_parameterization(spec: ModelSpec, data: Collapsed, *, prior_sd: float = SD_SCALE,
                            pilot: bool = True) -> list[TermInfo]:
    """Pick zero-sum / centred per random term (rules in the module docstring).

    With ``pilot`` the data decide too: a term of a factor with at least
    :data:`PILOT_MIN_LEVELS` levels whose estimated SD is small next to the information
    per level (:func:`~evalmix.models.bayes._pilot.pilot_sds`: ``info * sd**2`` below
    :data:`PILOT_NONCENTRED_MAX`) is non-centred with its SD sampled. The prior-based
    rule alone assumes an SD at the prior's scale; a condition slope that hardly varies
    across 400 scenarios of 250 rows each then gets the centred funnel (issue 35: bulk
    ESS 44 of its SD after 2 x 2,668 draws; non-centred, the fit passes its checks)."""
    if spec.family == "gaussian":
        yv = float(np.var(spec.y)) or 1.0
        weight, prior_sd = 1.0 / yv, prior_sd * float(np.sqrt(yv))
    else:
        weight = 0.25
    out = []
    used: set[str] = set()
    for r, x in zip(spec.random, data.x, strict=True):
        if r.is_intercept:
            absorb = ("Intercept" if "Intercept" in spec.fixed_names
                      else "cutpoints" if spec.family == "cumulative" else None)
        else:
            absorb = r.term if r.term in spec.fixed_names else None
        info = (float(np.sum(data.trials * x * x)) / r.n_levels) * weight * prior_sd ** 2
        var = _safe(f"u_{r.factor}" if r.is_intercept else f"u_{r.term}_{r.factor}")
        while var in used:
            var += "_"
        used.add(var)
        out.append(TermInfo(name=r.name, var=var, sd_var="sd_" + var[2:], factor=r.factor,
                            term=r.term, n_levels=r.n_levels,
                            zero_sum=absorb is not None and r.n_levels > 1,
                            centred=info >= CENTRED_INFORMATION, absorbed_by=absorb,
                            sd_prior="rayleigh",
                            marginal=r.n_levels <= MARGINAL_MAX_LEVELS))
    # an outer factor of a nested pair learns about its levels only through its inner
    # levels (each inner effect one noisy observation at about the prior's scale):
    # PandaLM, 3.4 items per app, is prior-dominated -> non-centred, SD sampled
    for i, (j, _parent) in nested_parents(out, data).items():
        if out[i].n_levels / out[j].n_levels < CENTRED_INFORMATION:
            out[j] = dataclasses.replace(out[j], centred=False, marginal=False)
    est = pilot_sds(spec, data) if pilot else None
    if est is not None:
        # nested pairs keep their hierarchical centring (PandaLM's items in apps: the
        # pilot cannot split an item's variance between its intercept and its slopes)
        nested = {k for i, (j, _) in nested_parents(out, data).items() for k in (i, j)}
        for i, ratio in enumerate(est.ratio()):
            if (out[i].n_levels >= PILOT_MIN_LEVELS and ratio < PILOT_NONCENTRED_MAX
                    and i not in nested):
                out[i] = dataclasses.replace(out[i], centred=False, marginal=False,
                                             pilot=out[i].centred or out[i].marginal)
    return out


def _unit_intercepts(terms: list[TermInfo], data: Collapsed) -> list[bool]:
    """Per term: a random intercept (covariate 1 in every row)."""
    return [t.term == "1" and bool(np.all(np.asarray(x) == 1.0))
            for t, x in zip(terms, data.x, strict=True)]


def has_nested_factors(terms: list[TermInfo], data: Collapsed) -> bool:
    """Whether a random intercept's levels lie each inside one level of another factor's
    random intercept (items in categories, passages in items), whatever their
    parameterization (:func:`nested_parents` takes only some such pairs)."""
    unit = _unit_intercepts(terms, data)
    return any(
        unit[i] and unit[j] and o.factor != t.factor and 2 <= o.n_levels < t.n_levels
        and parent_levels(np.asarray(data.codes[i]), np.asarray(data.codes[j]),
                          t.n_levels) is not None
        for i, t in enumerate(terms) for j, o in enumerate(terms))


def nested_parents(terms: list[TermInfo], data: Collapsed, skip: Iterable[int] = ()
                   ) -> dict[int, tuple[int, np.ndarray]]:
    """Hierarchical centring of nested factors: inner term -> (outer term, parent level).

    With ``(1|item) + (1|app)`` and every item inside one app (PandaLM: 170 items in 50
    apps), the data see only ``w_i = u_item_i + u_app[app(i)]``; the item and app
    effects then trade off along a ridge (sd_app bulk ESS ~130). The sampler instead sees
    ``w`` (the total item effect) and ``u_app``; the item prior is on the original
    ``u_item = w - u_app[parent]`` (unit Jacobian, same model) and the app enters only
    through that prior (hierarchical centring, Gelfand, Sahu and Carlin 1995). Only for
    plain (not zero-sum) inner intercepts whose prior is on the level effects (centred
    or SD integrated out), an outer random intercept, and terms not in ``skip`` (the
    kernel's slope-coupled terms). Used by :func:`choose_parameterization` (the outer
    factor's information) and the kernel (the coordinates)."""
    out: dict[int, tuple[int, np.ndarray]] = {}
    used: set[int] = set(skip)
    unit = _unit_intercepts(terms, data)
    direct = [u and (t.centred or t.marginal) for t, u in zip(terms, unit, strict=True)]
    # innermost first: the inner term with the most levels takes its outer term
    order = sorted(range(len(terms)), key=lambda i: -terms[i].n_levels)
    for i in order:
        t = terms[i]
        if not direct[i] or t.zero_sum or i in used:
            continue
        ci = np.asarray(data.codes[i])
        best = None
        for j in order:
            o = terms[j]
            if (j == i or j in used or not unit[j] or o.factor == t.factor
                    or o.n_levels >= t.n_levels or o.n_levels < 2):
                continue
            parent = parent_levels(ci, np.asarray(data.codes[j]), t.n_levels)
            if parent is None:
                continue
            if best is None or o.n_levels > terms[best[0]].n_levels:
                best = (j, parent)
        if best is not None:
            out[i] = best
            used.update((i, best[0]))
    return out


def fixed_prior_sd(spec: ModelSpec, data: Collapsed) -> np.ndarray:
    """Prior SDs of the fixed effects: ``2.5 / sd(x_j)`` per column (times ``sd(y)`` for
    Gaussian models), ``2.5`` for the intercept (rstanarm's autoscaled default, Gabry and
    Goodrich 2020, "Prior distributions for rstanarm models").

    Why scaled: with K treatment-coded conditions, K - 1 independent Normal(0, 2.5)
    priors on the contrasts each say "this level equals the reference" and together
    pull the reference level towards the others. MT-Bench, 31 conditions: every
    contrast moved 0.06-0.08 (about 0.4 SE) away from the maximum-likelihood estimate
    in the same direction. A dummy with mean p has sd sqrt(p (1 - p)), so its prior
    widens as the level gets rarer (p = 1/31: sd 14) and the pull vanishes; balanced
    two-level columns get 5."""
    k = len(spec.fixed_names)
    ysd = (float(np.std(spec.y)) or 1.0) if spec.family == "gaussian" else 1.0
    out = np.full(k, FIXED_SD * ysd)
    if k == 0 or data.n_patterns == 0:
        return out
    w = np.asarray(data.trials, dtype=float)
    X = np.asarray(data.X, dtype=float)
    mean = (w @ X) / w.sum()
    sdx = np.sqrt(np.maximum((w @ (X - mean) ** 2) / w.sum(), 0.0))
    for j, name in enumerate(spec.fixed_names):
        if name != "Intercept" and sdx[j] > 1e-12:
            out[j] = FIXED_SD * ysd / sdx[j]
    return out


def fixed_shift(spec: ModelSpec, data: Collapsed) -> np.ndarray:
    """Column means (over rows) subtracted from the non-intercept fixed columns.

    With an intercept, the sampler works with centred columns: every treatment-coded
    condition column is otherwise strongly correlated with the intercept (a diagonal
    mass matrix cannot follow that; on MT-Bench, 30 conditions, bulk ESS was ~110-190).
    The prior ``Normal(0, 2.5)`` is then on the intercept at the mean of the other
    columns (as brms does); the reported ``Intercept`` is transformed back. Zeros when
    there is no intercept (Bradley-Terry, cumulative)."""
    k = len(spec.fixed_names)
    shift = np.zeros(k)
    if "Intercept" not in spec.fixed_names or data.n_patterns == 0:
        return shift
    w = np.asarray(data.trials, dtype=float)
    shift[:] = (w @ np.asarray(data.X, dtype=float)) / w.sum()
    shift[spec.fixed_names.index("Intercept")] = 0.0
    return shift


def uncentre(bc, shift: np.ndarray, spec: ModelSpec):
    """Fixed effects on the original columns from those on the centred columns (works on
    NumPy arrays (..., k) and PyTensor vectors)."""
    if not np.any(shift):
        return bc
    i = spec.fixed_names.index("Intercept")
    e = np.zeros(len(shift))
    e[i] = 1.0
    if isinstance(bc, np.ndarray):
        return bc - np.multiply.outer(bc @ shift, e)
    return bc - e * (bc * shift).sum()


def log_marginal_prior(u: np.ndarray, n: int, scale: float) -> np.ndarray:
    """Log density of a marginal term's level effects with ``sd ~ Rayleigh(scale)``
    integrated out (the module docstring's ``p(u)``, the kernel's prior of ``u``).

    ``u`` has shape (..., G) with ``n`` free coordinates (``G - 1`` for a zero-sum term);
    returns (...)."""
    from scipy.special import kve

    lam = 1.0 - 0.5 * n
    z = np.maximum(np.sqrt(np.sum(u * u, axis=-1)) / scale, 1e-8)
    return (-0.5 * n * np.log(2.0 * np.pi) - 2.0 * np.log(scale)
            + lam * np.log(z * scale * scale) + np.log(kve(lam, z)) - z)


def draw_marginal_sd(u: np.ndarray, n: int, scale: float, rng: np.random.Generator
                     ) -> np.ndarray:
    """Exact draws of ``sd | u`` for a marginal term: ``sd^2 | u ~ GIG(lam, 1/s^2, r^2)``.

    ``u`` has shape (..., G): the level effects (for a zero-sum term ``n = G - 1`` free
    coordinates; the zero-sum map is an isometry, so ``|u|`` is theirs); returns (...)."""
    r = np.maximum(np.sqrt(np.sum(u * u, axis=-1)), 1e-150)
    # density of t = sd^2 oc t^(lam-1) exp(-(t/s^2 + r^2/t)/2)
    t = _gig_draws(1.0 - 0.5 * n, 1.0 / scale ** 2, (r * r).ravel(), rng)
    return np.sqrt(t).reshape(r.shape)


def _gig_draws(lam: float, a: float, b: np.ndarray, rng: np.random.Generator
               ) -> np.ndarray:
    """Exact, vectorised draws of ``t ~ GIG(lam, a, b)`` (density oc
    ``t^(lam-1) exp(-(a t + b / t) / 2)``), one per element of ``b``.

    ``y = log t`` has the log-concave density ``g(y) = lam y - (a e^y + b e^-y) / 2``.
    Rejection from the envelope ``min(g(mode), tangent at mode -/+ 1/sqrt(-g''(mode)))``
    (tangents of a concave function lie above it, so the envelope is exact): an
    exponential left tail, a flat middle, an exponential right tail; acceptance ~0.7.
    (scipy.stats.geninvgauss loops in Python over distinct parameters: ~75 us a draw.)"""
    b = np.asarray(b, dtype=float)

    def g(y, b):
        return lam * y - 0.5 * (a * np.exp(y) + b * np.exp(-y))

    def dg(y, b):
        return lam - 0.5 * (a * np.exp(y) - b * np.exp(-y))

    # mode: a e^2y - 2 lam e^y - b = 0, in the form without cancellation
    root = np.sqrt(lam * lam + a * b)
    ym = (np.log((lam + root) / a) if lam >= 0 else np.log(b / (root - lam)))
    gm = g(ym, b)
    w = 1.0 / np.sqrt(0.5 * (a * np.exp(ym) + b * np.exp(-ym)))
    y1, y2 = ym - w, ym + w
    s1, s2 = dg(y1, b), dg(y2, b)                  # > 0, < 0
    yl = y1 + (gm - g(y1, b)) / s1                 # where the tangents reach g(mode)
    yr = y2 + (gm - g(y2, b)) / s2
    m_left, m_mid, m_right = 1.0 / s1, yr - yl, -1.0 / s2
    total = m_left + m_mid + m_right
    out = np.empty_like(b)
    todo = np.arange(b.shape[0])
    while todo.size:
        k = todo
        pick = rng.random(k.size) * total[k]
        v = 1.0 - rng.random(k.size)               # (0, 1]
        left = pick < m_left[k]
        right = pick >= m_left[k] + m_mid[k]
        y = np.where(left, yl[k] + np.log(v) / s1[k],
                     np.where(right, yr[k] + np.log(v) / s2[k],
                              yl[k] + v * m_mid[k]))
        env = gm[k] + np.where(left, s1[k] * (y - yl[k]),
                               np.where(right, s2[k] * (y - yr[k]), 0.0))
        ok = np.log(1.0 - rng.random(k.size)) <= g(y, b[k]) - env
        out[k[ok]] = np.exp(y[ok])
        todo = k[~ok]
    return out


def build_model(spec: ModelSpec, data: Collapsed, *, prior_scale: float = 1.0,
                terms: list[TermInfo] | None = None):
    """Build the PyMC model; returns ``(model, terms)``.

    Variables: ``b`` (fixed effects, dims ``fixed``), ``sd_*`` and ``u_*`` per random term,
    ``sigma`` (gaussian), ``cutpoints`` (cumulative).
    """
    import pymc as pm
    import pytensor.tensor as pt

    terms = terms if terms is not None else choose_parameterization(spec, data)
    if spec.family == "gaussian":
        ysd = float(np.std(spec.y)) or 1.0
        ymean = float(np.mean(spec.y))
    else:
        ysd, ymean = 1.0, 0.0
    coords = {"fixed": list(spec.fixed_names)}
    for t in terms:
        coords[t.var + "_level"] = list(spec.random[terms.index(t)].levels)
    with pm.Model(coords=coords) as model:
        k = len(spec.fixed_names)
        mu_b = np.zeros(k)
        if "Intercept" in spec.fixed_names:
            mu_b[spec.fixed_names.index("Intercept")] = ymean
        if k:
            shift = fixed_shift(spec, data)
            bc = pm.Normal("b_centred", mu=mu_b, sigma=fixed_prior_sd(spec, data),
                           dims="fixed")
            eta = pt.dot(pt.as_tensor_variable(np.asarray(data.X) - shift), bc)
            pm.Deterministic("b", uncentre(bc, shift, spec), dims="fixed")
        else:
            eta = pt.zeros(data.n_patterns)
        for t, codes, x in zip(terms, data.codes, data.x, strict=True):
            # the PyMC model is the joint (u, sd) form; ``marginal`` is a kernel feature
            if t.sd_prior == "rayleigh":
                # Rayleigh(s) = Weibull(alpha=2, beta=s*sqrt(2))
                sd = pm.Weibull(t.sd_var, alpha=2.0,
                                beta=np.sqrt(2.0) * RAYLEIGH_SCALE * prior_scale * ysd)
            else:
                sd = pm.HalfNormal(t.sd_var, sigma=SD_SCALE * prior_scale * ysd)
            dims = t.var + "_level"
            if t.zero_sum and t.centred:
                u = pm.ZeroSumNormal(t.var, sigma=sd, dims=dims)
            elif t.zero_sum:
                z = pm.ZeroSumNormal("z_" + t.var[2:], sigma=1.0, dims=dims)
                u = pm.Deterministic(t.var, sd * z, dims=dims)
            elif t.centred:
                u = pm.Normal(t.var, 0.0, sd, dims=dims)
            else:
                z = pm.Normal("z_" + t.var[2:], 0.0, 1.0, dims=dims)
                u = pm.Deterministic(t.var, sd * z, dims=dims)
            contrib = u[np.asarray(codes)]
            if t.term != "1":
                contrib = contrib * np.asarray(x)
            eta = eta + contrib
        n = np.asarray(data.trials)
        if spec.family in ("bernoulli", "binomial"):
            s = np.asarray(data.successes)
            ll = pt.sum(-s * pt.softplus(-eta) - (n - s) * pt.softplus(eta))
        elif spec.family == "gaussian":
            sigma = pm.HalfNormal("sigma", sigma=ysd)
            s1, s2 = np.asarray(data.sum_y), np.asarray(data.sum_y2)
            ll = pt.sum(-n * (pt.log(sigma) + 0.5 * np.log(2 * np.pi))
                        - (s2 - 2 * eta * s1 + n * eta ** 2) / (2 * sigma ** 2))
        elif spec.family == "cumulative":
            kc = len(spec.categories)
            cut = pm.Normal("cutpoints", mu=np.linspace(-1, 1, kc - 1), sigma=FIXED_SD,
                            transform=pm.distributions.transforms.ordered,
                            shape=kc - 1)
            counts = np.asarray(data.counts)
            ll = 0.0
            # P(y <= j) = sigma(c_j - eta)
            cdf = [pt.sigmoid(cut[j] - eta) for j in range(kc - 1)]
            ll = ll + pt.sum(counts[:, 0] * -pt.softplus(-(cut[0] - eta)))
            ll = ll + pt.sum(counts[:, -1] * -pt.softplus(cut[kc - 2] - eta))
            for j in range(1, kc - 1):
                ll = ll + pt.sum(counts[:, j] * pt.log(pt.clip(cdf[j] - cdf[j - 1], 1e-300, 1)))
        else:  # pragma: no cover - spec validates families
            raise ValueError(spec.family)
        pm.Potential("loglik", ll)
    return model, terms


class PopulationDraws(TypedDict, total=False):
    """What :func:`population_draws` returns: level deviations, fixed effects, cut points."""

    u: Required[dict[str, np.ndarray]]
    b: np.ndarray
    cutpoints: np.ndarray


def population_draws(spec: ModelSpec, terms: list[TermInfo], post: dict[str, np.ndarray],
                     *, rng: np.random.Generator) -> PopulationDraws:
    """Population-level fixed effects (and cut points) from zero-sum posterior draws.

    ``post`` maps variable names to arrays of shape (draws, ...) (chains stacked). For
    every zero-sum term ``m_f ~ N(0, sd_f^2 / G_f)`` is drawn and removed from the fixed
    column (or cut points) that absorbed it; the term's deviations get ``m_f`` added so
    that ``b + u`` (the realised level effects) is unchanged.
    """
    b = np.array(post["b"], dtype=float, copy=True) if "b" in post else None
    cut = np.array(post["cutpoints"], dtype=float, copy=True) if "cutpoints" in post else None
    u_full: dict[str, np.ndarray] = {}
    for t in terms:
        u = np.asarray(post[t.var], dtype=float)
        if not t.zero_sum:
            u_full[t.var] = u
            continue
        sd = np.asarray(post[t.sd_var], dtype=float)
        m = rng.standard_normal(sd.shape) * sd / np.sqrt(t.n_levels)
        if t.absorbed_by == "cutpoints":
            cut = cut + m[:, None]
        else:
            j = spec.fixed_names.index(t.absorbed_by)
            b_arr = cast(np.ndarray, b)  # a zero-sum term absorbed by a fixed column: b is set
            b_arr[:, j] = b_arr[:, j] - m
        u_full[t.var] = u + m[:, None]
    out: PopulationDraws = {"u": u_full}
    if b is not None:
        out["b"] = b
    if cut is not None:
        out["cutpoints"] = cut
    return out
