"""Bayesian back end: crossed random-effects GLMMs sampled with nutpie (or PyMC's NUTS).

Engines
-------
``"kernel"`` (default for binomial and gaussian families when nutpie is installed)
    The model of :mod:`evalmix.models.bayes.pymc_model` with its log density and gradient
    written by hand in one cached Numba loop (:mod:`evalmix.models.bayes.kernel`); no PyTensor
    compile in the fitting process. Tests check it against PyMC's own log density.
``"pymc"``
    The same model built in PyMC, sampled with nutpie (Numba back end) when installed,
    else PyMC's NUTS. Used for the cumulative family (``ties="separate"``).
``"bambi"``
    The same formula handed to Bambi (non-centred, Bambi's default priors), for users who
    want Bambi's model object; slow on crossed designs (see docs/models.md).

All engines return the same :class:`~evalmix.models.result.ModelFit`.

References
----------
Gelman, A. and Hill, J. (2007). Data Analysis Using Regression and Multilevel/Hierarchical
Models. Cambridge University Press. doi:10.1017/CBO9780511790942
Nakagawa, S., Johnson, P. C. D. and Schielzeth, H. (2017). The coefficient of
determination R2 and intra-class correlation coefficient from generalized linear
mixed-effects models revisited. J. R. Soc. Interface 14: 20170213. doi:10.1098/rsif.2017.0213
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from evalmix._version import package_versions
from evalmix.errors import (
    ConvergenceWarning,
    InvalidOptionError,
    check_option,
)
from evalmix.models.bayes._posterior import (
    BAYES_PACKAGES,
    ESS_MIN,
    RHAT_MAX,
    check_quality,
    diagnostics,
    summarise,
)
from evalmix.models.bayes._sampling import (
    DRAWS_FIRST,
    DRAWS_MAX,
    RETRY_TARGET_ACCEPT,
    RHAT_STOP,
    STEPS_MAX,
    _fixed_draws,
    _has,
    _marginal_sds,
    _names,
    _retry_pays,
    _stack,
    mass_matrix,
    sample,
    tree_depth,
)
from evalmix.models.bayes._sensitivity import psis_sensitivity, sensitivity_table
from evalmix.models.bayes.pymc_model import (
    DEFAULT_PRIORS,
    FEW_LEVELS,
    RAYLEIGH_SCALE,
    TermInfo,
    choose_parameterization,
)
from evalmix.models.result import ModelFit, PosteriorDraws
from evalmix.models.spec import Collapsed, ModelSpec, collapse
from evalmix.models.spec._maximal import decorrelate
from evalmix.seeding import resolve_seed
from evalmix.vocabulary import Engine, Sampler, SensitivityMethod

__all__ = ["fit_bayes", "ENGINES", "SAMPLERS", "RHAT_MAX", "ESS_MIN", "FEW_LEVELS",
           "DRAWS_FIRST", "DRAWS_MAX", "RHAT_STOP", "STEPS_MAX", "mass_matrix", "tree_depth",
           "psis_sensitivity", "sensitivity_table", "_fixed_draws"]

ENGINES = ("auto", "kernel", "pymc", "bambi")
SAMPLERS = ("auto", "nutpie", "pymc")
SENSITIVITY_METHODS = ("auto", "psis", "refit")


@dataclass(frozen=True)
class _Plan:
    """What :func:`fit_bayes` runs, fixed once its options passed their checks: the
    collapsed data, each term's coordinates and the resolved engine and sampler."""

    spec: ModelSpec
    data: Collapsed
    terms: tuple[TermInfo, ...]
    engine: str
    sampler: str
    draws: int | None
    tune: int
    chains: int
    seed: int
    prior_scale: float
    level: float
    target_accept: float | None
    retry_divergent: bool
    progress: bool
    started: float


@dataclass(frozen=True)
class _Run:
    """The sampling's outcome: the run kept (after any re-run) and how it came about."""

    trace: PosteriorDraws
    engine: str
    sampler: str
    coords: dict
    budget: int | None          # post-warm-up leapfrog steps when STEPS_MAX stopped it
    checked: tuple | None       # (R-hat, bulk ESS, tail ESS) of the check that passed
    divergences_first: int      # divergences of the first run
    retried: dict | None        # the re-run at RETRY_TARGET_ACCEPT after divergences
    uncapped: dict | None       # the re-run without the depth cap
    seconds: float              # from the start of the fit to the end of sampling


def fit_bayes(
    spec: ModelSpec,
    *,
    engine: Engine = "auto",
    sampler: Sampler = "auto",
    draws: int | None = None,
    tune: int = 400,
    chains: int = 2,
    seed=None,
    prior_scale: float = 1.0,
    sensitivity: float | None = None,
    level: float = 0.95,
    target_accept: float | None = None,
    retry_divergent: bool = True,
    sensitivity_method: SensitivityMethod = "auto",
    progress: bool = True,
) -> ModelFit:
    """Fit a :class:`ModelSpec` by NUTS; see the module docstring for the engines.

    Parameters
    ----------
    spec : ModelSpec
        The model, from :func:`~evalmix.models.spec.build_spec`.
    engine, sampler : str
        ``"auto"``: the Numba kernel with nutpie when possible, else PyMC with nutpie if
        installed, else PyMC's NUTS.
    draws : int, optional
        Draws per chain. Default (None): as many as the checks need. The chains run in
        the background and are checked after 200 draws, then every 1.1 times as many;
        sampling stops at the first check where every parameter (level effects and
        SDs included) has bulk and tail ESS >= 400 and R-hat <= 1.008 (a margin below
        the reported check's 1.01), or after 4,000 draws per chain (then the usual
        warning). An int fixes the number. With a
        diagonal mass matrix and many coordinates the kernel's NUTS trees are capped
        at depth 3 (:func:`tree_depth`); a capped run that does not pass its checks is
        run again without the cap.
    tune, chains : int
        Per chain.
    seed : int or numpy.random.Generator, optional
        Recorded in ``provenance`` and ``idata.posterior.attrs``.
    prior_scale : float
        Multiplies the SD priors (Rayleigh(0.8) on the logit scale by default).
    sensitivity : float, optional
        The posterior with the SD priors at this scale, side by side with this fit, in
        ``provenance["prior_sensitivity"]`` (how it was obtained, with the Pareto k, in
        ``provenance["prior_sensitivity_method"]``).
    sensitivity_method : {"auto", "psis", "refit"}
        ``"auto"``: reweight this fit's draws (:func:`psis_sensitivity`) and refit only
        when the Pareto k says the weights are unreliable; ``"psis"``: never refit (no
        table then); ``"refit"``: always refit.
    level : float
        Interval level (equal-tailed posterior quantiles).
    target_accept : float, optional
        NUTS target acceptance (sampler default 0.8). When given, the kernel's trees are
        not capped (:func:`tree_depth`; nutpie's maximum depth of 10 applies).
    retry_divergent : bool
        When the first run has divergences (and ``target_accept`` was not given), sample
        once more with ``target_accept=0.95`` and keep that run (recorded in
        ``provenance["retried"]``).
    progress : bool
        Show progress (default True, as :func:`evalmix.fit`): with ``draws=None`` the warm-up, then the draws per chain
        against the number the checks are projected to need (with the worst ESS and
        R-hat, and an ETA); with a fixed ``draws`` nutpie's progress bar.

    Returns
    -------
    ModelFit
    """
    _check_options(engine, sampler, draws, tune, chains, sensitivity, sensitivity_method)
    started = time.perf_counter()
    # (1 + x|g): independent intercept and slopes here (docs/models.md says why)
    spec = decorrelate(spec, "the Bayesian back end fits correlated terms (1 + x|g) with "
                             "independent intercepts and slopes, each SD with its own prior")
    seed_i = resolve_seed(seed)
    if engine == "bambi":
        from evalmix.models.bayes.bambi_engine import fit_bambi

        return fit_bambi(spec, draws=draws or 1000, tune=tune, chains=chains, seed=seed_i,
                         sampler="pymc" if sampler == "auto" else sampler, level=level,
                         progress=progress)
    plan = _plan(spec, engine=engine, sampler=sampler, draws=draws, tune=tune, chains=chains,
                 seed=seed_i, prior_scale=prior_scale, level=level,
                 target_accept=target_accept, retry_divergent=retry_divergent,
                 progress=progress, started=started)
    run = _run(plan)
    post, fixed, var, diag, msgs, prov = _assemble(plan, run)
    if sensitivity is not None:
        msgs = _prior_sensitivity(plan, post, fixed, var, msgs, prov, sensitivity,
                                  sensitivity_method)
    for m, cls in msgs:
        warnings.warn(m, cls, stacklevel=3)
    return _model_fit(plan, run, fixed, var, diag, msgs, prov)


def _check_options(engine: str, sampler: str, draws: int | None, tune: int, chains: int,
                   sensitivity: float | None, sensitivity_method: str) -> None:
    """The options' values, before any work (:class:`InvalidOptionError`)."""
    check_option("engine", engine, ENGINES)
    check_option("sampler", sampler, SAMPLERS)
    if sensitivity is not None:
        check_option("sensitivity_method", sensitivity_method, SENSITIVITY_METHODS)
    if (draws is not None and draws < 50) or tune < 0 or chains < 1:
        raise InvalidOptionError(f"draws={draws}, tune={tune}, chains={chains}: need draws >= 50, "
                                 "tune >= 0 and chains >= 1")


def _plan(spec: ModelSpec, *, engine: str, sampler: str, seed: int, prior_scale: float,
          **options: Any) -> _Plan:
    """Collapse the rows, resolve ``"auto"`` engine and sampler (the kernel with nutpie
    when installed and the family allows) and choose each term's coordinates
    (:func:`~evalmix.models.bayes.pymc_model.choose_parameterization`, with its pilot)."""
    data = collapse(spec)
    if sampler == "auto":
        sampler = "nutpie" if _has("nutpie") else "pymc"
    if engine == "auto":
        from evalmix.models.bayes.kernel import KERNEL_FAMILIES

        engine = ("kernel" if sampler == "nutpie" and spec.family in KERNEL_FAMILIES
                  else "pymc")
    if engine == "kernel" and (sampler != "nutpie" or not _has("nutpie")):
        raise InvalidOptionError("engine='kernel' needs the nutpie sampler (pip install nutpie); "
                                 "use engine='pymc' otherwise")
    terms = choose_parameterization(spec, data, prior_sd=prior_scale)
    if engine != "kernel":
        # the PyMC model samples (u, sd) jointly (same posterior, centred geometry)
        terms = [dataclasses.replace(t, marginal=False) for t in terms]
    return _Plan(spec=spec, data=data, terms=tuple(terms), engine=engine, sampler=sampler,
                 seed=seed, prior_scale=prior_scale, **options)


def _run(plan: _Plan) -> _Run:
    """Sample; after divergences (when a re-run pays, :func:`_retry_pays`) once more at
    ``RETRY_TARGET_ACCEPT``; when capped trees did not pass the checks, once more
    without the cap. The SDs integrated out while sampling are drawn from ``sd | u``."""
    p = plan
    common: dict[str, Any] = dict(engine=p.engine, sampler=p.sampler, draws=p.draws, tune=p.tune,
                  chains=p.chains, prior_scale=p.prior_scale, progress=p.progress)
    terms = list(p.terms)
    trace, engine, sampler, coords, budget, checked = sample(
        p.spec, p.data, terms, seed=p.seed, target_accept=p.target_accept,
        capped=p.target_accept is None,
        stop_on_divergence=p.target_accept is None and p.retry_divergent, **common)
    retried = None
    n_div = int(trace.sample_stats["diverging"].sum())
    if (n_div and p.target_accept is None and p.retry_divergent
            and _retry_pays(trace.sample_stats["n_steps"])):
        # divergences come from the funnel of poorly identified SDs (few levels, small
        # data); a smaller step size usually removes most of them (docs/models.md)
        retried = {"divergences_first_run": n_div, "target_accept": RETRY_TARGET_ACCEPT}
        trace, engine, sampler, coords, budget, checked = sample(
            p.spec, p.data, terms, seed=p.seed + 1, target_accept=RETRY_TARGET_ACCEPT,
            retry=True, **common)
    uncapped = None
    if p.draws is None and checked is None and trace.attrs.get("max_tree_depth") is not None:
        # the capped trees did not pass the checks: NUTS's own trajectory lengths
        uncapped = {"max_tree_depth": trace.attrs["max_tree_depth"],
                    "draws_first_run": trace.n_draws}
        trace, engine, sampler, coords, budget, checked = sample(
            p.spec, p.data, terms, seed=p.seed + 2,
            target_accept=RETRY_TARGET_ACCEPT if retried else p.target_accept,
            capped=False, **common)
    sds = _marginal_sds(p.spec, terms, trace.posterior, prior_scale=p.prior_scale,
                        seed=p.seed)
    trace = dataclasses.replace(trace, posterior={**trace.posterior, **sds})
    return _Run(trace=trace, engine=engine, sampler=sampler, coords=coords, budget=budget,
                checked=checked, divergences_first=n_div, retried=retried,
                uncapped=uncapped, seconds=time.perf_counter() - p.started)


def _assemble(plan: _Plan, run: _Run):
    """The tables, diagnostics, the checks' messages and the provenance of ``run``:
    (posterior by name with chains stacked, fixed effects, variance, diagnostics,
    messages as (text, warning class), provenance)."""
    p, trace = plan, run.trace
    terms = list(p.terms)
    names = _names(p.spec, terms, trace.posterior)
    post = {n: _stack(trace.posterior[n]) for n in names}
    fixed, var = summarise(p.spec, terms, post, level=p.level, seed=p.seed)
    diag = diagnostics(trace.posterior, names, trace.coords, trace.dims, stats=run.checked)
    divergences = int(trace.sample_stats["diverging"].sum())
    msgs = _messages(plan, run, check_quality(p.spec, diag, divergences, var))
    prov = _provenance(p.spec, p.data, terms, run.engine, run.sampler, p.seed,
                       trace.n_draws, p.tune, p.chains, p.prior_scale,
                       time.perf_counter() - p.started, run.seconds)
    if run.engine == "kernel":
        prov["coordinates"] = run.coords
    if run.sampler == "nutpie":
        prov["mass_matrix"] = mass_matrix(p.spec)
    prov["target_accept"] = (RETRY_TARGET_ACCEPT if run.retried else p.target_accept) or 0.8
    if trace.attrs.get("max_tree_depth") is not None:
        prov["max_tree_depth"] = trace.attrs["max_tree_depth"]
    for key, value in (("uncapped_rerun", run.uncapped), ("retried", run.retried)):
        if value:
            prov[key] = value
    if run.budget is not None:
        prov["stopped_at_steps"] = run.budget
    return post, fixed, var, diag, msgs, prov


def _messages(plan: _Plan, run: _Run, msgs: list) -> list:
    """The checks' messages, the first (a :class:`ConvergenceWarning`) saying how the
    run came about: not re-run after divergences (too many steps per draw), re-run, or
    stopped at its step budget."""
    if not msgs or msgs[0][1] is not ConvergenceWarning:
        return msgs
    trace, first = run.trace, msgs[0][0]
    if (run.divergences_first and not run.retried and plan.target_accept is None
            and plan.retry_divergent):
        per_draw = float(np.mean(trace.sample_stats["n_steps"]))
        first = first.replace(
            "MCMC did not pass", f"MCMC (not re-run at target_accept={RETRY_TARGET_ACCEPT}: "
            f"at {per_draw:.0f} leapfrog steps per draw a re-run would cost several times "
            "this fit) did not pass", 1)
    if run.retried:
        first = first.replace(
            "MCMC did not pass", f"MCMC (re-run at target_accept={RETRY_TARGET_ACCEPT} after "
            f"{run.retried['divergences_first_run']} divergences) did not pass")
    if run.budget is not None:
        first = first.replace(
            "did not pass", f"stopped at its budget ({run.budget:,} leapfrog steps in a chain "
            f"after warm-up, {trace.n_draws} draws per chain) and did not pass", 1)
    return [(first, ConvergenceWarning), *msgs[1:]]


def _prior_sensitivity(plan: _Plan, post: dict, fixed: pd.DataFrame, var: pd.DataFrame,
                       msgs: list, prov: dict, sensitivity: float, method: str) -> list:
    """``prov["prior_sensitivity"]`` (the tables at SD-prior scale ``sensitivity``, by
    :func:`psis_sensitivity` or a refit) and how it was obtained; returns the messages
    updated (the advice to check the sensitivity replaced, a failed refit added)."""
    p = plan
    alt_tables, info = (None, {}) if method == "refit" else \
        psis_sensitivity(p.spec, list(p.terms), post, scale_a=p.prior_scale,
                         scale_b=sensitivity, level=p.level, seed=p.seed)
    caught: list = []
    prov["prior_sensitivity_method"] = info
    if alt_tables is None and method != "psis":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                alt = fit_bayes(p.spec, engine=cast(Engine, p.engine),
                                sampler=cast(Sampler, p.sampler), draws=p.draws,
                                tune=p.tune, chains=p.chains, seed=p.seed,
                                prior_scale=sensitivity, level=p.level,
                                target_accept=p.target_accept,
                                retry_divergent=p.retry_divergent, progress=p.progress)
                alt_tables = (alt.fixed_effects, alt.variance)
                prov["prior_sensitivity_method"] = {
                    "method": "refit", **({"psis": info} if info else {})}
            except Exception as e:  # noqa: BLE001 - the main fit stands without it
                return [*msgs, (f"the prior-sensitivity refit (prior_scale="
                                f"{sensitivity:g}) failed ({type(e).__name__}: {e}); no "
                                "sensitivity table", ConvergenceWarning)]
    if alt_tables is None:
        return msgs
    alt_fixed, alt_var = alt_tables
    prov["prior_sensitivity"] = sensitivity_table(fixed, var, alt_fixed, alt_var,
                                                  p.prior_scale, sensitivity)
    msgs = [(m.replace("Check the prior sensitivity (fit(..., backend=Bayes(sensitivity=2.5)))",
                       "Its prior sensitivity is in fit.prior_sensitivity"), c)
            for m, c in msgs]
    bad = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    if bad:
        msgs.append((f"the prior-sensitivity refit (prior_scale={sensitivity:g}) "
                     "did not pass the convergence checks: " + bad[0], ConvergenceWarning))
    return msgs


def _model_fit(plan: _Plan, run: _Run, fixed: pd.DataFrame, var: pd.DataFrame,
               diag: pd.DataFrame, msgs: list, prov: dict) -> ModelFit:
    """The :class:`ModelFit`; the draws' attrs hold the provenance's plain values."""
    # plain Python scalars only: numpy scalars (e.g. np.str_) break to_netcdf
    attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in prov.items()
             if isinstance(v, int | float | str)}
    attrs["priors"] = json.dumps(prov["priors"])
    attrs["versions"] = json.dumps(prov["versions"])
    spec, trace = plan.spec, run.trace
    return ModelFit(backend="bayes", family=spec.family, formula=spec.formula,
                    fixed_effects=fixed, variance=var, diagnostics=diag,
                    divergences=int(trace.sample_stats["diverging"].sum()),
                    draws=dataclasses.replace(trace, attrs=attrs), approximate=False,
                    provenance=prov, warnings=tuple(m for m, _ in msgs))


def _provenance(spec, data, terms, engine, sampler, seed, draws, tune, chains, prior_scale,
                wall, t_sample) -> dict:
    return {
        "formula": spec.formula, "family": spec.family, "response": spec.response,
        "design": spec.design, "reference": spec.reference or "",
        "engine": engine, "sampler": sampler, "seed": seed, "draws": draws, "tune": tune,
        "chains": chains, "prior_scale": prior_scale,
        "priors": {**DEFAULT_PRIORS, "sd": f"Rayleigh({RAYLEIGH_SCALE * prior_scale:g})"
                   + (" x sd(y)" if spec.family == "gaussian" else "")},
        "parameterization": {t.name: ("zero-sum " if t.zero_sum else "")
                             + ("SD integrated out" if t.marginal else
                                ("centred" if t.centred else "non-centred")
                                + (" (the pilot's SD estimate)" if t.pilot else "")
                                + (", half-normal SD prior" if t.sd_prior == "halfnormal"
                                   else "")) for t in terms},
        "rows": spec.n_obs, "collapsed_rows": data.n_patterns,
        "wall_seconds": round(wall, 3), "sampling_seconds": round(t_sample, 3),
        "versions": package_versions(*BAYES_PACKAGES), "notes": list(spec.notes),
    }
