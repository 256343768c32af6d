"""``evalmix.fit``: one entry point for the model-based analysis."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError, check_option
from evalmix.models.result import ModelFit
from evalmix.models.spec import build_spec

if TYPE_CHECKING:
    from evalmix.models.frequentist import Method

__all__ = ["fit", "BACKENDS"]

BACKENDS = ("bayes", "statsmodels")


def fit(
    table,
    *,
    backend: Literal["bayes", "statsmodels"] = "bayes",
    formula: str | None = None,
    slopes: Iterable[str] = (),
    position: bool = True,
    judge_position: bool = True,
    fixed: Iterable[str] = (),
    reference: str | None = None,
    family: str | None = None,
    strata: str | None = None,
    engine: Literal["auto", "kernel", "pymc", "bambi"] = "auto",
    sampler: Literal["auto", "nutpie", "pymc"] = "auto",
    method: str = "auto",
    seed=None,
    draws: int | None = None,
    tune: int = 400,
    chains: int = 2,
    prior_scale: float = 1.0,
    sensitivity: float | None = None,
    level: float = 0.95,
    progress: bool = True,
    **backend_kwargs: Any,
) -> ModelFit:
    """Fit a crossed random-effects model to an eval table.

    Parameters
    ----------
    table : EvalTable
        From :func:`evalmix.read`.
    backend : {"bayes", "statsmodels"}
        ``"bayes"``: NUTS (nutpie) on the model of :mod:`evalmix.models.pymc_model`;
        ``"statsmodels"``: :func:`evalmix.models.frequentist.fit_statsmodels`
        (``method="auto"`` -- Laplace for binary outcomes, REML MixedLM for numeric ones --
        or ``"laplace"``, ``"mixedlm"``, ``"vb"``, ``"map"``; approximations are flagged).
    formula : str, optional
        lme4-syntax formula (supported subset: see :mod:`evalmix.models.spec`). Default:
        condition + position + a random intercept per cluster role + judge-specific
        position bias.
    slopes : iterable of str
        Factors with random condition slopes, e.g. ``("judge",)``.
    fixed : iterable of str
        Cluster roles entered as fixed effects (alternative for factors with few levels).
    family : {None, "ordinal"}
        ``"ordinal"``: a cumulative-logit model for numeric scores (1-10 ratings) instead
        of the Gaussian one (Bayesian back end; see :func:`~evalmix.models.spec.build_spec`).
    strata : str, optional
        Fit separately within each level of this cluster role (e.g. ``"judge"``); the
        tables are stacked with ``"<role>=<level>: "`` prefixed to terms and factors.
    seed, draws, tune, chains, prior_scale, sensitivity, level, engine, sampler
        Bayesian options, see :func:`evalmix.models.bayes.fit_bayes`.
    progress : bool
        Show the sampler's progress bar.

    Returns
    -------
    ModelFit

    Examples
    --------
    >>> import evalmix
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(10, 3, 3, 3, tie_threshold=0, seed=1).table()
    >>> f = evalmix.fit(t, seed=1, draws=200, tune=200, progress=False)  # doctest: +SKIP
    >>> f.fixed_effects.query("term == 'condition[treatment]'")        # doctest: +SKIP
    """
    check_option("backend", backend, BACKENDS)
    if strata is not None:
        return _fit_strata(table, strata, backend=backend, formula=formula, slopes=slopes,
                           position=position, judge_position=judge_position, fixed=fixed,
                           reference=reference, family=family, engine=engine,
                           sampler=sampler,
                           method=method, seed=seed, draws=draws, tune=tune, chains=chains,
                           prior_scale=prior_scale, sensitivity=sensitivity, level=level,
                           progress=progress, **backend_kwargs)
    spec = build_spec(table, formula=formula, slopes=tuple(slopes), position=position,
                      judge_position=judge_position, fixed=tuple(fixed), reference=reference,
                      family=family)
    if backend == "statsmodels":
        from evalmix.models.frequentist import fit_statsmodels

        # ``method`` stays a plain str here; fit_statsmodels validates it
        return fit_statsmodels(table, spec, method=cast("Method", method), level=level, seed=seed,
                               **backend_kwargs)
    from evalmix.models.bayes import fit_bayes

    return fit_bayes(spec, engine=engine, sampler=sampler, draws=draws, tune=tune,
                     chains=chains, seed=seed, prior_scale=prior_scale,
                     sensitivity=sensitivity, level=level, progress=progress,
                     **backend_kwargs)


def _fit_strata(table, strata: str, **kw) -> ModelFit:
    role = table.check_cluster(strata)[0]
    labels = table.data[role].astype(str).to_numpy()
    fits, fixed, var, diag = {}, [], [], []
    formula = kw.pop("formula")
    if formula is not None:
        raise EvalmixError("strata=... builds one default model per stratum; pass the "
                           "formula without strata, or fit table.subset(...) yourself")
    judge_position = kw.pop("judge_position") and role != "judge"
    slopes = tuple(s for s in kw.pop("slopes") if s.rpartition("|")[2].strip() != role)
    fixed_roles = tuple(f for f in kw.pop("fixed") if f != role)
    others = [c for c in table.clusters if c != role and c not in fixed_roles]
    seed = kw.pop("seed")
    rng = np.random.default_rng(seed if not isinstance(seed, np.random.Generator) else None)
    for lev in sorted(set(labels)):
        sub = table.subset(labels == lev)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = fit(sub, formula=None, slopes=slopes, judge_position=judge_position,
                    fixed=fixed_roles, seed=int(rng.integers(2**31 - 1)), **kw,
                    ) if others else None
        if f is None:
            raise EvalmixError(f"strata={role!r} leaves no other cluster factor")
        for w in caught:
            warnings.warn(f"[{role}={lev}] {w.message}", w.category, stacklevel=2)
        fits[lev] = f
        p = f"{role}={lev}: "
        fixed.append(f.fixed_effects.assign(term=p + f.fixed_effects["term"]))
        var.append(f.variance.assign(factor=p + f.variance["factor"]))
        diag.append(f.diagnostics.assign(parameter=p + f.diagnostics["parameter"]))
    first = next(iter(fits.values()))
    return ModelFit(
        backend=first.backend, family=first.family, formula=f"{first.formula} [by {role}]",
        fixed_effects=pd.concat(fixed, ignore_index=True),
        variance=pd.concat(var, ignore_index=True),
        diagnostics=pd.concat(diag, ignore_index=True),
        divergences=sum(f.divergences for f in fits.values()), idata=None, results=fits,
        approximate=first.approximate,
        provenance={"strata": role, "levels": list(fits), "seed": seed,
                    "fits": {k: dict(v.provenance) for k, v in fits.items()}},
        warnings=tuple(f"[{role}={k}] {w}" for k, v in fits.items() for w in v.warnings),
    )
