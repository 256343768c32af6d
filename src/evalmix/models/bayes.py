"""Bayesian back end: crossed random-effects GLMMs sampled with nutpie (or PyMC's NUTS).

Engines
-------
``"kernel"`` (default for binomial and gaussian families when nutpie is installed)
    The model of :mod:`evalmix.models.pymc_model` with its log density and gradient
    written by hand in one cached Numba loop (:mod:`evalmix.models.kernel`); no PyTensor
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
import importlib.util
import json
import time
import warnings
from typing import Literal, cast

import numpy as np
import pandas as pd

from evalmix.errors import (
    ConvergenceWarning,
    EvalmixError,
    FewClustersWarning,
    check_option,
)
from evalmix.models.pymc_model import (
    DEFAULT_PRIORS,
    FEW_LEVELS,
    RAYLEIGH_SCALE,
    build_model,
    choose_parameterization,
    draw_marginal_sd,
    population_draws,
)
from evalmix.models.result import DIAGNOSTIC_COLUMNS, ModelFit
from evalmix.models.spec import ModelSpec, collapse
from evalmix.models.summaries import fixed_table, variance_table

__all__ = ["fit_bayes", "ENGINES", "SAMPLERS", "RHAT_MAX", "ESS_MIN", "FEW_LEVELS"]

ENGINES = ("auto", "kernel", "pymc", "bambi")
SAMPLERS = ("auto", "nutpie", "pymc")
#: Convergence thresholds (Vehtari et al. 2021, doi:10.1214/20-BA1221).
RHAT_MAX = 1.01
ESS_MIN = 400
#: target_accept of the automatic re-run after divergences.
RETRY_TARGET_ACCEPT = 0.95


def _has(mod: str) -> bool:
    return importlib.util.find_spec(mod) is not None


def _seed_int(seed) -> int:
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1)[0] % (2**31 - 1))
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**31 - 1))
    return int(seed)


def _stack(idata, name: str) -> np.ndarray:
    a = idata.posterior[name].to_numpy()
    return a.reshape((-1, *a.shape[2:]))


def _sample(spec: ModelSpec, data, terms, *, engine: str, sampler: str, draws: int,
            tune: int, chains: int, seed: int, prior_scale: float, progress: bool,
            target_accept: float | None):
    """Return (idata, engine, sampler, coordinates): the last says which terms the
    kernel sampled in other coordinates (empty for the PyMC engine)."""
    if engine == "kernel":
        import nutpie

        from evalmix.models.kernel import DensityKernel

        kern = DensityKernel(spec, data, terms, prior_scale=prior_scale)
        kw = {"target_accept": target_accept} if target_accept else {}
        idata = nutpie.sample(kern.nutpie_model(), draws=draws, tune=tune, chains=chains,
                              cores=chains, seed=seed, progress_bar=progress, **kw)
        return idata, "kernel", "nutpie", kern.coordinates()
    model, _ = build_model(spec, data, prior_scale=prior_scale, terms=terms)
    if sampler == "nutpie":
        import nutpie

        kw = {"target_accept": target_accept} if target_accept else {}
        compiled = nutpie.compile_pymc_model(model)
        idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, cores=chains,
                              seed=seed, progress_bar=progress, **kw)
    else:
        import pymc as pm

        with model:
            idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1,
                              random_seed=seed, progressbar=progress,
                              target_accept=target_accept or 0.8,
                              compute_convergence_checks=False)
    return idata, "pymc", sampler, {}


def _diagnostics(idata, names: list[str]) -> pd.DataFrame:
    import arviz as az

    # the default fmt="wide" gives a DataFrame (an xarray Dataset only for fmt="xarray")
    s = cast(pd.DataFrame, az.summary(idata, var_names=names, kind="all", round_to="none"))
    out = s.reset_index().rename(columns={"index": "parameter"})
    return out[list(DIAGNOSTIC_COLUMNS)]


def summarise(spec: ModelSpec, terms, post: dict[str, np.ndarray], *, level: float,
              seed: int, backend: str = "bayes") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fixed-effects and variance tables from stacked posterior draws."""
    rng = np.random.default_rng(seed + 1)
    pop = population_draws(spec, terms, post, rng=rng)
    sd = {t.sd_var: np.asarray(post[t.sd_var], dtype=float) for t in terms}
    b = pop.get("b", np.zeros((len(next(iter(post.values()))), 0)))
    fixed = fixed_table(spec, terms, b, pop["u"], sd, pop.get("cutpoints"), level=level)
    var = variance_table(spec, terms, sd, post.get("sigma"), level=level, backend=backend)
    return fixed, var


def fit_bayes(
    spec: ModelSpec,
    *,
    engine: Literal["auto", "kernel", "pymc", "bambi"] = "auto",
    sampler: Literal["auto", "nutpie", "pymc"] = "auto",
    draws: int = 2000,
    tune: int = 400,
    chains: int = 2,
    seed=None,
    prior_scale: float = 1.0,
    sensitivity: float | None = None,
    level: float = 0.95,
    target_accept: float | None = None,
    retry_divergent: bool = True,
    progress: bool = False,
) -> ModelFit:
    """Fit a :class:`ModelSpec` by NUTS; see the module docstring for the engines.

    Parameters
    ----------
    spec : ModelSpec
    engine, sampler : str
        ``"auto"``: the Numba kernel with nutpie when possible, else PyMC with nutpie if
        installed, else PyMC's NUTS.
    draws, tune, chains : int
        Per chain. 2 x 2,000 draws is the total of Stan's default (4 x 1,000). On the
        benchmark designs this gives bulk ESS >= 1,700 and tail ESS >= 1,700 for the
        slowest of up to ~500 parameters: the largest of P R-hats grows with P, and
        with 2 x 1,000 draws (tail ESS ~800) the largest of 486 was 1.012-1.017.
    seed : int or numpy.random.Generator, optional
        Recorded in ``provenance`` and ``idata.attrs``.
    prior_scale : float
        Multiplies the SD priors (Rayleigh(0.8) on the logit scale by default).
    sensitivity : float, optional
        Refit with the SD priors at this scale and put a side-by-side table in
        ``provenance["prior_sensitivity"]``.
    level : float
        Interval level (equal-tailed posterior quantiles).
    target_accept : float, optional
        NUTS target acceptance (sampler default 0.8).
    retry_divergent : bool
        When the first run has divergences (and ``target_accept`` was not given), sample
        once more with ``target_accept=0.95`` and keep that run (recorded in
        ``provenance["retried"]``).

    Returns
    -------
    ModelFit
    """
    check_option("engine", engine, ENGINES)
    check_option("sampler", sampler, SAMPLERS)
    if draws < 50 or tune < 0 or chains < 1:
        raise EvalmixError(f"draws={draws}, tune={tune}, chains={chains}: need draws >= 50, "
                           "tune >= 0 and chains >= 1")
    t0 = time.perf_counter()
    seed_i = _seed_int(seed)
    data = collapse(spec)
    if engine == "bambi":
        from evalmix.models.bambi_engine import fit_bambi

        return fit_bambi(spec, draws=draws, tune=tune, chains=chains, seed=seed_i,
                         sampler="pymc" if sampler == "auto" else sampler, level=level,
                         progress=progress)
    if sampler == "auto":
        sampler = "nutpie" if _has("nutpie") else "pymc"
    if engine == "auto":
        from evalmix.models.kernel import KERNEL_FAMILIES

        engine = ("kernel" if sampler == "nutpie" and spec.family in KERNEL_FAMILIES
                  else "pymc")
    if engine == "kernel" and (sampler != "nutpie" or not _has("nutpie")):
        raise EvalmixError("engine='kernel' needs the nutpie sampler (pip install nutpie); "
                           "use engine='pymc' otherwise")
    terms = choose_parameterization(spec, data, prior_sd=prior_scale)
    if engine != "kernel":
        # the PyMC model samples (u, sd) jointly (same posterior, centred geometry)
        terms = [dataclasses.replace(t, marginal=False) for t in terms]
    idata, engine_used, sampler_used, coords = _sample(
        spec, data, terms, engine=engine, sampler=sampler, draws=draws, tune=tune,
        chains=chains, seed=seed_i, prior_scale=prior_scale, progress=progress,
        target_accept=target_accept)
    retried = None
    n_div = int(idata.sample_stats["diverging"].sum())
    if n_div and target_accept is None and retry_divergent:
        # divergences come from the funnel of poorly identified SDs (few levels, small
        # data); a smaller step size usually removes most of them (docs/models.md)
        retried = {"divergences_first_run": n_div, "target_accept": RETRY_TARGET_ACCEPT}
        idata, engine_used, sampler_used, coords = _sample(
            spec, data, terms, engine=engine, sampler=sampler, draws=draws, tune=tune,
            chains=chains, seed=seed_i + 1, prior_scale=prior_scale, progress=progress,
            target_accept=RETRY_TARGET_ACCEPT)
    _draw_marginal_sds(spec, terms, idata, prior_scale=prior_scale, seed=seed_i)
    t_sample = time.perf_counter() - t0
    names = ["b"] * bool(spec.fixed_names) + [v for t in terms for v in (t.sd_var, t.var)]
    names += [n for n in ("sigma", "cutpoints") if n in idata.posterior]
    post = {n: _stack(idata, n) for n in names}
    fixed, var = summarise(spec, terms, post, level=level, seed=seed_i)
    diag = _diagnostics(idata, names)
    divergences = int(idata.sample_stats["diverging"].sum())
    msgs = _check(spec, diag, divergences, var)
    if retried and msgs and msgs[0][1] is ConvergenceWarning:
        msgs[0] = (msgs[0][0].replace(
            "MCMC did not pass", f"MCMC (re-run at target_accept={RETRY_TARGET_ACCEPT} after "
            f"{retried['divergences_first_run']} divergences) did not pass"), ConvergenceWarning)
    prov = _provenance(spec, data, terms, engine_used, sampler_used, seed_i, draws, tune,
                       chains, prior_scale, time.perf_counter() - t0, t_sample)
    if engine_used == "kernel":
        prov["coordinates"] = coords
    prov["target_accept"] = (RETRY_TARGET_ACCEPT if retried else target_accept) or 0.8
    if retried:
        prov["retried"] = retried
    if sensitivity is not None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                alt = fit_bayes(spec, engine=engine, sampler=sampler, draws=draws,
                                tune=tune, chains=chains, seed=seed_i,
                                prior_scale=sensitivity, level=level,
                                target_accept=target_accept,
                                retry_divergent=retry_divergent, progress=progress)
            except Exception as e:  # noqa: BLE001 - the main fit stands without it
                alt = None
                msgs.append((f"the prior-sensitivity refit (prior_scale={sensitivity:g}) "
                             f"failed ({type(e).__name__}: {e}); no sensitivity table",
                             ConvergenceWarning))
        if alt is not None:
            prov["prior_sensitivity"] = sensitivity_table(fixed, var, alt, prior_scale,
                                                          sensitivity)
            msgs = [(m.replace("Check the prior sensitivity (fit(..., sensitivity=2.5))",
                               "Its prior sensitivity is in fit.prior_sensitivity"), c)
                    for m, c in msgs]
            bad = [str(w.message) for w in caught
                   if issubclass(w.category, ConvergenceWarning)]
            if bad:
                msgs.append((f"the prior-sensitivity refit (prior_scale={sensitivity:g}) "
                             "did not pass the convergence checks: " + bad[0],
                             ConvergenceWarning))
    for k, v in prov.items():
        if isinstance(v, int | float | str):
            # plain Python scalars only: numpy scalars (e.g. np.str_) break to_netcdf
            idata.posterior.attrs[k] = v.item() if isinstance(v, np.generic) else v
    idata.posterior.attrs["priors"] = json.dumps(prov["priors"])
    idata.posterior.attrs["versions"] = json.dumps(prov["versions"])
    for m, cls in msgs:
        warnings.warn(m, cls, stacklevel=3)
    return ModelFit(backend="bayes", family=spec.family, formula=spec.formula,
                    fixed_effects=fixed, variance=var, diagnostics=diag,
                    divergences=divergences, idata=idata, approximate=False,
                    provenance=prov, warnings=tuple(m for m, _ in msgs))


def _draw_marginal_sds(spec: ModelSpec, terms, idata, *, prior_scale: float,
                       seed: int) -> None:
    """Fill the SDs of ``marginal`` terms (integrated out while sampling) with exact
    draws from ``sd | u`` (one per posterior draw), in place."""
    marg = [t for t in terms if t.marginal]
    if not marg:
        return
    ysd = (float(np.std(spec.y)) or 1.0) if spec.family == "gaussian" else 1.0
    rng = np.random.default_rng([seed, 7])
    for t in marg:
        u = idata.posterior[t.var]
        n = t.n_levels - 1 if t.zero_sum else t.n_levels
        sd = draw_marginal_sd(u.to_numpy(), n, RAYLEIGH_SCALE * prior_scale * ysd, rng)
        idata.posterior[t.sd_var] = (("chain", "draw"), sd)


def _check(spec: ModelSpec, diag: pd.DataFrame, divergences: int, var: pd.DataFrame
           ) -> list[tuple[str, type[Warning]]]:
    msgs: list[tuple[str, type[Warning]]] = []
    bad_r = diag[diag["r_hat"] > RHAT_MAX]
    bad_e = diag[diag["ess_bulk"] < ESS_MIN]
    if divergences or len(bad_r) or len(bad_e):
        parts = []
        if divergences:
            parts.append(f"{divergences} divergent transitions")
        if len(bad_r):
            parts.append(f"R-hat > {RHAT_MAX} for {len(bad_r)} parameters (max "
                         f"{diag['r_hat'].max():.3f}: {bad_r['parameter'].iloc[0]})")
        if len(bad_e):
            parts.append(f"bulk ESS < {ESS_MIN} for {len(bad_e)} parameters (min "
                         f"{diag['ess_bulk'].min():.0f}: "
                         f"{diag.loc[diag['ess_bulk'].idxmin(), 'parameter']})")
        msgs.append(("MCMC did not pass the convergence checks: " + "; ".join(parts)
                     + ". Increase draws/tune (e.g. draws=4000, tune=1000), or simplify "
                     "the random-effect structure; do not report these intervals as is.",
                     ConvergenceWarning))
    seen = set()
    for r in spec.random:
        if r.n_levels < FEW_LEVELS and r.factor not in seen:
            seen.add(r.factor)
            row = var[var["factor"] == r.factor]
            rng = (f" (SD interval {row['lo'].iloc[0]:.2f}-{row['hi'].iloc[0]:.2f})"
                   if len(row) else "")
            msgs.append((
                f"factor {r.factor!r} has only {r.n_levels} levels: its variance is barely "
                f"identified{rng} and leans on the prior. Check the prior sensitivity "
                f"(fit(..., sensitivity=2.5)), or treat it as fixed effects "
                f"(fixed=('{r.factor}',)) or fit each level separately "
                f"(strata='{r.factor}').", FewClustersWarning))
    return msgs


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for p in ("evalmix", "numpy", "numba", "nutpie", "pymc", "pytensor", "arviz", "bambi"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            pass
    return out


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
                                + (", half-normal SD prior" if t.sd_prior == "halfnormal"
                                   else "")) for t in terms},
        "rows": spec.n_obs, "collapsed_rows": data.n_patterns,
        "wall_seconds": round(wall, 3), "sampling_seconds": round(t_sample, 3),
        "versions": _versions(), "notes": list(spec.notes),
    }


def sensitivity_table(fixed: pd.DataFrame, var: pd.DataFrame, alt: ModelFit,
                      scale_a: float, scale_b: float) -> pd.DataFrame:
    """Side-by-side estimates and intervals at two SD-prior scales."""
    cols = ["estimate", "lo", "hi"]
    fa = fixed[fixed["scale"].isin(["log-odds", "identity"])].set_index("term")[cols]
    fb = alt.fixed_effects[alt.fixed_effects["scale"].isin(["log-odds", "identity"])
                           ].set_index("term")[cols]
    va = var.set_index("factor").rename(columns={"sd": "estimate"})[cols]
    vb = alt.variance.set_index("factor").rename(columns={"sd": "estimate"})[cols]
    a = pd.concat([fa, va.rename(index=lambda s: f"sd[{s}]")])
    b = pd.concat([fb, vb.rename(index=lambda s: f"sd[{s}]")])
    out = a.add_suffix(f"@{scale_a:g}").join(b.add_suffix(f"@{scale_b:g}"), how="outer")
    return out.reset_index().rename(columns={"index": "term"})
