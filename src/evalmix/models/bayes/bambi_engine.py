"""``engine="bambi"``: the same spec handed to Bambi (its priors, non-centred terms).

Kept for users who want Bambi's model object and as the benchmark baseline. Bambi
parameterises every group-specific term non-centred with no zero-sum option, which on
crossed eval designs needs many more leapfrog steps per draw (docs/models.md). Supports
the bernoulli and gaussian families (not fractional ties or the cumulative family).
"""

from __future__ import annotations

import re
import time
import warnings

import numpy as np
import pandas as pd

from evalmix.errors import InvalidOptionError
from evalmix.models.bayes.pymc_model import TermInfo
from evalmix.models.result import ModelFit, PosteriorDraws
from evalmix.models.spec import ModelSpec

__all__ = ["fit_bambi", "bambi_model"]


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", s).strip("_")


def bambi_model(spec: ModelSpec):
    """Return ``(bambi.Model, names)``; ``names`` maps spec names to Bambi's."""
    import bambi as bmb

    if spec.family not in ("bernoulli", "gaussian"):
        raise InvalidOptionError(f"engine='bambi' supports the bernoulli and gaussian families, "
                                 f"not {spec.family!r}; use engine='auto'")
    frame = pd.DataFrame({"y": spec.y})
    fixed_map, rhs = {}, []
    for j, n in enumerate(spec.fixed_names):
        if n == "Intercept":
            fixed_map[n] = "Intercept"
            continue
        frame[f"x{j}"] = spec.X[:, j]
        fixed_map[n] = f"x{j}"
        rhs.append(f"x{j}")
    rhs.insert(0, "1" if "Intercept" in spec.fixed_names else "0")
    rand_map = {}
    for r in spec.random:
        g = "g_" + _safe(r.factor)
        if g not in frame:
            frame[g] = pd.Categorical(np.asarray(r.levels, dtype=object)[r.codes],
                                      categories=list(r.levels))
        lhs = "1" if r.is_intercept else fixed_map.get(r.term)
        if lhs is None:
            lhs = "s_" + _safe(r.term)
            frame[lhs] = r.x
        rhs.append(f"({lhs}|{g})" if r.is_intercept else f"(0 + {lhs}|{g})")
        rand_map[r.name] = (f"{lhs}|{g}", g)
    formula = "y ~ " + " + ".join(rhs)
    family = "bernoulli" if spec.family == "bernoulli" else "gaussian"
    model = bmb.Model(formula, frame, family=family)
    return model, {"fixed": fixed_map, "random": rand_map, "formula": formula}


def fit_bambi(spec: ModelSpec, *, draws: int, tune: int, chains: int, seed: int,
              sampler: str = "pymc", level: float = 0.95, progress: bool = True) -> ModelFit:
    from evalmix._version import package_versions
    from evalmix.models.bayes._posterior import (
        BAYES_PACKAGES,
        check_quality,
        idata_diagnostics,
        summarise,
    )

    t0 = time.perf_counter()
    model, names = bambi_model(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        idata = model.fit(draws=draws, tune=tune, chains=chains, random_seed=seed,
                          inference_method=sampler, progressbar=progress)
    wall = time.perf_counter() - t0
    post_b = idata.posterior
    stack = lambda a: a.to_numpy().reshape((-1, *a.shape[2:]))  # noqa: E731
    post: dict[str, np.ndarray] = {}
    if spec.fixed_names:
        post["b"] = np.column_stack([stack(post_b[names["fixed"][n]])
                                     for n in spec.fixed_names])
    terms = []
    for r in spec.random:
        bname, g = names["random"][r.name]
        var, sd_var = "u_" + _safe(r.name), "sd_" + _safe(r.name)
        u = post_b[bname]
        dim = [d for d in u.dims if d not in ("chain", "draw")][0]
        u = u.sel({dim: list(r.levels)})
        post[var] = stack(u)
        post[sd_var] = stack(post_b[bname + "_sigma"])
        terms.append(TermInfo(name=r.name, var=var, sd_var=sd_var, factor=r.factor,
                              term=r.term, n_levels=r.n_levels, zero_sum=False,
                              centred=False, absorbed_by=None))
    if spec.family == "gaussian":
        post["sigma"] = stack(post_b["sigma"])
    fixed, var = summarise(spec, terms, post, level=level, seed=seed, backend="bambi")
    bambi_vars = [v for v in post_b.data_vars if not v.endswith("_offset")
                  and v not in ("mu", "p")]
    diag = idata_diagnostics(idata, bambi_vars)
    divergences = int(idata.sample_stats["diverging"].sum())
    msgs = check_quality(spec, diag, divergences, var)
    for m, cls in msgs:
        warnings.warn(m, cls, stacklevel=3)
    prov = {"formula": spec.formula, "bambi_formula": names["formula"], "engine": "bambi",
            "sampler": sampler, "seed": seed, "draws": draws, "tune": tune,
            "chains": chains, "priors": "Bambi defaults", "rows": spec.n_obs,
            "collapsed_rows": spec.n_obs, "wall_seconds": round(wall, 3),
            "versions": package_versions(*BAYES_PACKAGES)}
    idata.posterior.attrs["evalmix_formula"] = spec.formula
    idata.posterior.attrs["seed"] = seed
    return ModelFit(backend="bayes", family=spec.family, formula=spec.formula,
                    fixed_effects=fixed, variance=var, diagnostics=diag,
                    divergences=divergences,
                    draws=PosteriorDraws.from_inference_data(idata), provenance=prov,
                    warnings=tuple(m for m, _ in msgs))
