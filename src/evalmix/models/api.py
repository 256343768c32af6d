"""``evalmix.fit``: one entry point for the model-based analysis."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any, cast

import numpy as np
import pandas as pd

from evalmix.data.table import check_table
from evalmix.errors import InvalidOptionError, renamed_option
from evalmix.models.backends import ModelBackend, resolve_backend
from evalmix.models.result import ModelFit
from evalmix.models.spec import ModelSpec, build_spec
from evalmix.models.spec._build import SPEC_DEFAULTS
from evalmix.seeding import SeedLike
from evalmix.vocabulary import FitBackend, FitMethod

__all__ = ["fit"]


def fit(
    data,
    *,
    backend: ModelBackend | FitBackend = "bayes",
    formula: str | None = None,
    slopes: Iterable[str] | None = None,
    position: bool = True,
    judge_position: bool = True,
    fixed: Sequence[str] = (),
    random: Iterable[str] | None = None,
    reference: str | None = None,
    family: str | None = None,
    by: str | None = None,
    level: float = 0.95,
    seed: SeedLike = None,
    progress: bool = True,
    deadline: float | None = None,
    **legacy: Any,
) -> ModelFit:
    """Fit a crossed random-effects model to an eval table (or to a built spec).

    Parameters
    ----------
    data : EvalTable or ModelSpec
        A table from :func:`evalmix.read` (the model is built from its roles with the
        options below), or a :class:`~evalmix.models.spec.ModelSpec` from
        :func:`~evalmix.models.spec.build_spec` (then the model options must be left at
        their defaults and ``by`` is not available).
    backend : Bayes, REML, Laplace, VB, MAP or str
        The back end with its own options, an object of :mod:`evalmix.models.backends`
        (exported at the top level): ``Bayes(draws=..., chains=...)`` (NUTS with nutpie,
        the default), ``REML(df=...)`` (linear mixed model, ``lme4::lmer``),
        ``Laplace(df=..., draws=...)`` (logit GLMM, ``lme4::glmer``), ``VB(...)`` or
        ``MAP(...)`` (approximate logit GLMMs, flagged as such). By name, the back end
        with its defaults: ``"bayes"``, ``"mixedlm"``, ``"glmm_laplace"``,
        ``"glmm_vb"``, ``"glmm_map"`` (the words of ``ModelFit.backend`` and
        ``analyze(methods=)``), or ``"statsmodels"``: ``Laplace()`` for 0/1, proportion
        and pairwise outcomes, ``REML()`` for numeric scores.
    formula : str, optional
        lme4-syntax formula (supported subset: see :mod:`evalmix.models.spec`). Default:
        condition + position + a random intercept per cluster role + judge-specific
        position bias + a condition slope for every sampled factor (the maximal model,
        see ``slopes``).
    slopes : iterable of str, optional
        Factors with random condition slopes, e.g. ``("judge",)``. None (the default):
        the maximal model, a condition slope for every sampled factor whose levels see
        more than one condition (``docs/models.md``; the statsmodels back end steps down
        from it when the fit is singular and says so). ``()``: no slopes.
    position, judge_position : bool
        The position term and judge-specific position bias (see
        :func:`~evalmix.models.spec.build_spec`).
    fixed : sequence of str
        Cluster roles entered as fixed effects (alternative for factors with few levels).
    random : iterable of str, optional
        Cluster roles with random intercepts (default: every role not in ``fixed``).
    reference : str, optional
        Reference level of the condition / model abilities.
    family : {None, "ordinal", "cumulative", "gaussian", "bernoulli", "binomial"}
        ``None``: the family follows from the table (Gaussian for numeric scores, binomial
        for 0/1 and proportion outcomes and pairwise verdicts). ``"ordinal"``: a
        cumulative-logit model for numeric scores (1-10 ratings) instead of the Gaussian
        one (Bayesian back end; see :func:`~evalmix.models.spec.build_spec`). Any other
        name must be the family the table implies (``"bernoulli"`` and ``"binomial"`` both
        name the logistic model of 0/1 rows); a family that does not fit is refused.
    by : str, optional
        Fit separately within each level of this cluster role (e.g. ``"judge"``, as
        ``leaderboard(by=)`` stratifies); the
        tables are stacked with ``"<role>=<level>: "`` prefixed to terms and factors, and
        the per-stratum fits are in :attr:`ModelFit.strata`. Inside a stratum the role is
        constant, so its random terms (``(1|role)``, slopes by it, judge position bias
        when it is the judge) are left out. Each stratum gets its own seed drawn from
        ``seed`` (recorded in ``provenance["stratum_seeds"]``). Its old name ``strata=``
        still works, with a :class:`FutureWarning` (``strata`` elsewhere names the roles
        that are strata of the design, not sampled: ``read(strata=)``).
    level : float
        Interval level.
    seed : int or numpy.random.Generator, optional
        Seeds the sampler (Bayesian) or the starting values and probability-scale draws
        (statsmodels); recorded in the provenance.
    progress : bool
        Show the sampler's progress bar (Bayesian back end).
    deadline : float, optional
        A :func:`time.monotonic` instant past which a frequentist fit stops with
        ``StoppedAtLimit`` (``analyze(model_timeout=)`` sets it); the Bayesian fit has no
        deadline check, so it is refused there.
    **legacy
        The back ends' options as keywords, as ``fit`` took them before the back-end
        objects (``draws=``, ``tune=``, ... for Bayes; ``method=``, ``df=``,
        ``n_draws=``, ``vc_prior_sd=``, ``fe_prior_sd=`` with
        ``backend="statsmodels"``): still taken, with a :class:`FutureWarning` naming
        the new spelling. An option of the other back end, or one beside a back-end
        object, is an :class:`~evalmix.errors.InvalidOptionError`, as is an unknown
        keyword.

    Returns
    -------
    ModelFit

    Raises
    ------
    InvalidOptionError
        An unknown keyword, an unknown ``backend``, an option of another back end, or a
        back end's option given both in its object and as a keyword.

    Examples
    --------
    >>> import evalmix
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(10, 3, 3, 3, tie_threshold=0, seed=1).table()
    >>> b = evalmix.Bayes(draws=200, tune=200)
    >>> f = evalmix.fit(t, backend=b, seed=1, progress=False)  # doctest: +SKIP
    >>> f.fixed_effects.query("term == 'condition[treatment]'")        # doctest: +SKIP
    """
    given = dict(locals())   # every option by name (first, so nothing else is in it)
    by = renamed_option("fit", "strata", "by", legacy.pop("strata", None), by)
    kind, backend_options, label = resolve_backend(backend, legacy)
    if deadline is not None and (kind == "bayes" or not (
            isinstance(deadline, int | float) and not isinstance(deadline, bool)
            and np.isfinite(deadline))):
        raise InvalidOptionError(
            f"deadline={deadline!r}: give a time.monotonic() instant (e.g. "
            "time.monotonic() + 60) or None; analyze(model_timeout=SECONDS) sets it"
            if kind != "bayes" else
            f"deadline={deadline!r} applies to the frequentist back ends only, not "
            f"backend={label!r} (the sampler has no deadline check; analyze(model_timeout=) "
            "bounds it in a child process)")
    spec_options: dict[str, Any] = {
        **{k: given[k] for k in _SPEC_OPTIONS},
        "slopes": None if slopes is None else tuple(slopes), "fixed": tuple(fixed),
        "random": None if random is None else tuple(random)}
    common = {"level": level, "seed": seed, "progress": progress, "deadline": deadline}
    if not isinstance(data, ModelSpec):
        data = check_table(data, "fit")
    if isinstance(data, ModelSpec):
        set_ = [k for k in _SPEC_OPTIONS if spec_options[k] != _DEFAULTS[k]]
        if set_ or by is not None:
            bad = set_ + (["by"] if by is not None else [])
            raise InvalidOptionError(
                f"{', '.join(bad)} build a model from a table; with a ModelSpec, build the "
                "spec with those options (build_spec(table, ...)) or pass the table")
        return _fit_spec(data, kind, common, backend_options)
    if by is not None:
        return _fit_strata(data, by, kind=kind, spec_options=spec_options,
                           common=common, backend_options=backend_options)
    return _fit_spec(build_spec(data, **spec_options), kind, common, backend_options)


#: The defaults of :func:`fit`'s options, read from its signature (their one home).
_DEFAULTS: dict[str, Any] = {name: p.default for name, p in
                             inspect.signature(fit).parameters.items()
                             if p.default is not inspect.Parameter.empty}
#: The options that build the model from a table's roles (ignored when a spec is given).
_SPEC_OPTIONS = tuple(k for k in SPEC_DEFAULTS if k in _DEFAULTS)


def _fit_spec(spec: ModelSpec, kind: str, common: dict[str, Any],
              backend_options: dict[str, Any]) -> ModelFit:
    if kind == "statsmodels":
        from evalmix.models.frequentist import fit_statsmodels

        opts = dict(backend_options)
        # ``method`` stays a plain str here; fit_statsmodels validates it
        return fit_statsmodels(None, spec, method=cast(FitMethod, opts.pop("method")),
                               level=common["level"], seed=common["seed"],
                               deadline=common["deadline"], **opts)
    from evalmix.models.bayes import fit_bayes

    return fit_bayes(spec, level=common["level"], seed=common["seed"],
                     progress=common["progress"], **backend_options)


def _fit_strata(table, by: str, *, kind: str, spec_options: dict[str, Any],
                common: dict[str, Any], backend_options: dict[str, Any]) -> ModelFit:
    role = table.check_cluster(by)[0]
    labels = table.data[role].astype(str).to_numpy()
    if spec_options["formula"] is not None:
        raise InvalidOptionError("by=... builds one default model per stratum; pass the "
                                 "formula without by, or fit table.subset(...) yourself")
    # the role is constant inside a stratum: none of its random terms is identified
    fixed_roles = tuple(f for f in spec_options["fixed"] if f != role)
    given_random = spec_options["random"]
    random = tuple(c for c in (table.clusters if given_random is None else given_random)
                   if c != role and c not in fixed_roles)
    if not random:
        raise InvalidOptionError(f"by={role!r} leaves no other cluster factor with a random "
                                 "intercept; fit without by or add a cluster role")
    options = {**spec_options, "fixed": fixed_roles, "random": random,
               "judge_position": spec_options["judge_position"] and role != "judge",
               "slopes": None if spec_options["slopes"] is None else
               tuple(s for s in spec_options["slopes"] if s.rpartition("|")[2].strip() != role)}
    seed = common["seed"]
    rng = np.random.default_rng(seed)   # an int, a Generator (advanced here) or None
    fits: dict[str, ModelFit] = {}
    seeds: dict[str, int] = {}
    fixed, var, diag = [], [], []
    for lev in sorted(set(labels)):
        sub = table.subset(labels == lev)
        seeds[lev] = int(rng.integers(2**31 - 1))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = _fit_spec(build_spec(sub, **options), kind,
                          {**common, "seed": seeds[lev]}, backend_options)
        for w in caught:
            warnings.warn(f"[{role}={lev}] {w.message}", w.category, stacklevel=3)
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
        divergences=sum(f.divergences for f in fits.values()), draws=None, results=None,
        strata=MappingProxyType(fits), approximate=first.approximate,
        provenance={"strata": role, "levels": list(fits),
                    "seed": seed if seed is None or isinstance(seed, int | np.integer)
                    else "Generator",
                    "stratum_seeds": seeds,
                    "fits": {k: dict(v.provenance) for k, v in fits.items()}},
        warnings=tuple(f"[{role}={k}] {w}" for k, v in fits.items() for w in v.warnings),
    )
