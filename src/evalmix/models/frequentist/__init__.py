"""Frequentist (statsmodels) back ends for crossed random-effects models.

Four methods, all with *crossed* factors (every factor spans all rows); ``"auto"`` picks
``"mixedlm"`` for numeric outcomes and ``"laplace"`` for binary / tie-scored ones:

``"mixedlm"``
    REML linear mixed model (statsmodels ``MixedLM`` fitted from the optimum of lme4's
    profiled REML criterion); exact for continuous outcomes, a *linear probability*
    model (an approximation) on 0/1 outcomes. See :mod:`evalmix.models.frequentist._reml`.
``"laplace"``
    Maximum-likelihood logit GLMM with the random effects integrated out by the Laplace
    approximation (``lme4::glmer``'s default, nAGQ = 1; statsmodels has none). See
    :mod:`evalmix.models.frequentist._laplace`.
``"vb"``
    :class:`statsmodels.genmod.bayes_mixed_glm.BinomialBayesMixedGLM` ``fit_vb``:
    mean-field variational Bayes for a logit GLMM (binary outcomes). Approximate:
    mean-field VB understates the posterior SD of fixed effects correlated with the
    random effects (the intercept most of all).
``"map"``
    The same model's ``fit_map``: the joint posterior mode over fixed effects, log-SDs
    *and random effects*, with a Laplace (Hessian) covariance. Approximate: unlike
    ``lme4::glmer``'s Laplace, it does not integrate the random effects out, so the
    variance components are those of a joint mode (pulled towards the log-SD prior).

Both Bayesian GLMM methods put independent priors ``N(0, fe_prior_sd^2)`` on the fixed
effects and ``N(0, vc_prior_sd^2)`` on each log-SD (statsmodels' ``fe_p`` and ``vcp_p``).

The array-level functions (:func:`fit_mixedlm_arrays`, :func:`fit_laplace_arrays`,
:func:`fit_glmm_arrays`) take
the outcome, a fixed-effects design matrix and integer codes per factor, and return a
:class:`CrossedFit`; :func:`fit_statsmodels` builds those from an
:class:`~evalmix.data.table.EvalTable` and packs the tidy :class:`ModelFit` (rows built
in :mod:`evalmix.models.frequentist._tidy_frequentist`). Every name listed in ``__all__`` is
importable from here, wherever it is defined.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
Blei, D. M., Kucukelbir, A., McAuliffe, J. D. (2017). Variational inference: a review
for statisticians. JASA 112(518), 859-877. doi:10.1080/01621459.2017.1285773
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Literal, Unpack, cast, get_args

import numpy as np
import pandas as pd
from scipy import sparse

from evalmix._version import package_versions
from evalmix.errors import (
    ConvergenceWarning,
    EvalmixError,
    FewClustersWarning,
    InvalidOptionError,
    SingularFitWarning,
    check_keywords,
    check_number,
    check_option,
    renamed_option,
)
from evalmix.models._deadline import check_deadline
from evalmix.models.frequentist._crossed import (
    LOGIT_RESIDUAL_VAR,
    SINGULAR_TOL,
    CrossedFit,
    _check_arrays,
    _term_matrix,
    _z,
    intercept_term,
)
from evalmix.models.frequentist._laplace import LaplaceResults, fit_laplace_arrays
from evalmix.models.frequentist._reml import fit_mixedlm_arrays, reml_deviance
from evalmix.models.frequentist._tidy_frequentist import (
    _NOTES,
    _TYPICAL,
    _fixed_rows,
    _level_rows,
    _probability_rows,
    _variance_frame,
    containment_df,
)
from evalmix.models.result import FIXED_COLUMNS, ModelFit
from evalmix.models.spec import ModelSpec, RandomTerm, build_spec, collapse
from evalmix.models.spec._build import SPEC_DEFAULTS, SpecOptions
from evalmix.models.spec._maximal import decorrelate, simplify
from evalmix.seeding import resolve_seed
from evalmix.vocabulary import DfMethod, FitMethod

__all__ = [
    "METHODS",
    "CrossedFit",
    "fit_mixedlm_arrays",
    "reml_deviance",
    "fit_glmm_arrays",
    "fit_laplace_arrays",
    "LaplaceResults",
    "fit_statsmodels",
    "StatsmodelsOptions",
    "STATSMODELS_DEFAULTS",
    "intercept_term",
    "containment_df",
]

METHODS: tuple[str, ...] = get_args(FitMethod)

#: Factors with fewer levels get a FewClustersWarning (their SD is barely identified).
FEW_LEVELS = 5
#: An SD interval whose upper/lower ratio exceeds this is uninformative (near-zero SD).
_MAX_INTERVAL_RATIO = 1e4
#: Gradient norm (per row, on the optimiser's scale) above which a fit is not converged.
GRAD_TOL = 1e-5


def _map_joint_cov(results: Any, p: int, k: int) -> np.ndarray:
    cov = np.asarray(results.cov_params(), dtype=float)
    idx = np.concatenate([np.arange(p), np.arange(p + k, cov.shape[0])])
    return cov[np.ix_(idx, idx)]


# ---------------------------------------------------------------------------- GLMM
def fit_glmm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                    terms: Sequence[RandomTerm], *, method: Literal["vb", "map"] = "vb",
                    level: float = 0.95, vc_prior_sd: float = 1.0,
                    fe_prior_sd: float = 2.0, seed: int = 0,
                    deadline: float | None = None) -> CrossedFit:
    """Logit GLMM with crossed factors by statsmodels' BinomialBayesMixedGLM.

    Parameters
    ----------
    y : (n,) array in [0, 1]
        0/1 outcomes; fractions (e.g. ties scored 1/2) give the fractional binomial
        quasi-likelihood.
    X : (n, k) array
        Fixed-effects design (include the intercept column).
    fe_names : sequence of str
        Names of the columns of ``X``.
    terms : sequence of RandomTerm
        The random terms (crossed or nested intercepts and slopes).
    method : {"vb", "map"}
        ``"vb"``: mean-field variational Bayes; ``"map"``: joint posterior mode with a
        Laplace covariance.
    level : float
        Level of the normal intervals (VB: posterior mean +- z SD; for SDs on log-SD).
    vc_prior_sd, fe_prior_sd : float
        Prior SDs of each log-SD (mean 0) and of each fixed effect (statsmodels'
        ``vcp_p``, ``fe_p``).
    seed : int
        Seeds statsmodels' random starting values.
    deadline : float, optional
        As for :func:`fit_mixedlm_arrays`, checked at every gradient.

    Returns
    -------
    CrossedFit
        SDs are ``exp(E[log SD])`` (the median of the lognormal VB factor; the mode's
        value for MAP), intervals ``exp(E[log SD] +- z SD[log SD])``.

    Examples
    --------
    >>> import numpy as np
    >>> from evalmix.sim import clustered_scores
    >>> sim = clustered_scores(20, 30, p=0.5, icc=0.2, seed=2)
    >>> y, g = sim.data["y"].to_numpy(float), np.repeat(np.arange(20), 30)
    >>> fit = fit_glmm_arrays(y, np.ones((600, 1)), ["Intercept"], [intercept_term("g", g)],
    ...                       method="vb", seed=1)
    >>> fit.method
    'vb'

    References
    ----------
    Blei, D. M., Kucukelbir, A., McAuliffe, J. D. (2017). Variational inference: a review
    for statisticians. JASA 112(518), 859-877. doi:10.1080/01621459.2017.1285773
    """
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    check_option("method", method, ("vb", "map"))
    y, X = _check_arrays(y, X, fe_names, terms)
    if np.any((y < 0) | (y > 1)):
        bad = np.unique(y[(y < 0) | (y > 1)])[:5]
        raise EvalmixError(
            f"method={method!r} fits a logit model and needs a 0/1 (or fractional 0..1) "
            f"outcome; found values such as {bad.tolist()}. Use method='mixedlm' for "
            "numeric scores")
    z = _z(level)
    n = y.size
    exog_vc = sparse.hstack([_term_matrix(t, n) for t in terms]).tocsr()
    ident = np.concatenate([np.full(t.n_levels, k, dtype=int) for k, t in enumerate(terms)])
    model = BinomialBayesMixedGLM(y, X, exog_vc, ident, vcp_p=vc_prior_sd, fe_p=fe_prior_sd,
                                  fep_names=list(fe_names), vcp_names=[t.name for t in terms])
    if deadline is not None:  # statsmodels' optimiser calls the gradient every iteration
        name = "vb_elbo_grad" if method == "vb" else "logposterior_grad"
        gradient = getattr(model, name)

        def checked(*args: Any) -> Any:
            check_deadline(deadline)
            return gradient(*args)

        setattr(model, name, checked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "vb":
            results = model.fit_vb(rng=np.random.default_rng(seed))
        else:
            results = model.fit_map(rng=np.random.default_rng(seed))
    opt = results.optim_retvals
    grad_norm = float(np.max(np.abs(opt.jac))) / n if opt.jac is not None else np.nan
    converged = bool(opt.success) or grad_norm < GRAD_TOL
    fe = np.asarray(results.fe_mean, dtype=float)
    fe_se = np.asarray(results.fe_sd, dtype=float)
    log_sd = np.asarray(results.vcp_mean, dtype=float)
    log_sd_se = np.asarray(results.vcp_sd, dtype=float)
    sd = np.exp(log_sd)
    resid = float(np.sqrt(LOGIT_RESIDUAL_VAR))
    singular = sd < SINGULAR_TOL * resid
    return CrossedFit(
        method=method, fe_names=tuple(fe_names), fe_est=fe, fe_se=fe_se,
        vc_names=tuple(t.name for t in terms), vc_sd=sd,
        vc_lo=np.exp(log_sd - z * log_sd_se), vc_hi=np.exp(log_sd + z * log_sd_se),
        resid_sd=resid, resid_lo=np.nan, resid_hi=np.nan, level=level,
        converged=converged, grad_norm=grad_norm, results=results,
        singular=tuple(t.name for t, s in zip(terms, singular, strict=True) if s),
        re_est=np.asarray(results.vc_mean, dtype=float),
        re_sd=np.asarray(results.vc_sd, dtype=float),
        fe_re_cov=(None if method == "vb" else _map_joint_cov(results, X.shape[1], len(terms))),
        details={"optimizer": "BFGS", "optimizer_message": str(opt.message),
                 "iterations": int(getattr(opt, "nit", -1)),
                 "vc_prior_sd": vc_prior_sd, "fe_prior_sd": fe_prior_sd, "seed": seed,
                 "interval": ("posterior mean +- z posterior SD (mean-field VB)"
                              if method == "vb" else
                              "mode +- z Laplace SD (joint mode incl. random effects)")},
    )


def _needs_simpler(spec: ModelSpec, fit: CrossedFit) -> str | None:
    """Why the maximal default's fit should step down (None: it need not): a condition
    slope it added is estimated at zero, or the optimiser did not converge."""
    added = [t.name for t in spec.random
             if t.factor in spec.maximal and t.term in spec.condition_terms]
    zero = [n for n in fit.singular if n in added]
    if zero:
        return f"singular: the SD of {', '.join(zero)} was estimated at 0"
    edge = [c for c in fit.details.get("singular_correlations", ())
            if c.rpartition("|")[2] in spec.maximal]
    if edge:
        return f"singular: {', '.join(edge)} was estimated at -1 or +1"
    if not fit.converged:
        return f"the optimiser did not converge (largest gradient {fit.grad_norm:.2g})"
    return None


def _fit_core(spec: ModelSpec, method: str, o: _StatsmodelsOptions, level: float,
              seed_used: int, deadline: float | None, logit: bool
              ) -> tuple[CrossedFit, str, bool, str, str, str, str]:
    """One fit of ``spec`` by ``method``: (fit, backend, approximate, note, scale, label,
    family)."""
    terms = list(spec.random)
    if method == "mixedlm":
        # a linear probability model without an intercept (Bradley-Terry design) must
        # measure win probabilities from 1/2, as the logit model does from log-odds 0
        offset = 0.5 if logit and "Intercept" not in spec.fixed_names else 0.0
        fit = fit_mixedlm_arrays(spec.y - offset, spec.X, spec.fixed_names, terms,
                                 level=level, deadline=deadline)
        backend, approximate = "mixedlm", logit
        note = (_NOTES["lpm"] + (" The response is y - 1/2 (no intercept: equal abilities "
                                 "mean a 1/2 win rate)." if offset else "")) if logit else (
            "REML estimates; Wald z intervals for fixed effects and on log-SD for variance "
            "components (can be too narrow for factors with few levels)")
        scale = "probability" if logit else "identity"
        label = "linear model: conditional = population-averaged"
        family = "gaussian"
    elif method == "laplace":
        # rows with identical covariates and levels enter as one binomial count (the
        # likelihood is the same up to a constant, which we leave out so that the
        # log-likelihood is that of the individual rows)
        col = collapse(spec)
        if col.n_patterns < spec.n_obs:
            cterms = [RandomTerm(t.factor, t.term, c, t.levels, x, t.correlated)
                      for t, c, x in zip(terms, col.codes, col.x, strict=True)]
            fit = fit_laplace_arrays(col.successes / col.trials, col.X, spec.fixed_names,
                                     cterms, trials=col.trials, level=level,
                                     binomial_constant=False, sd_penalty=o.sd_penalty,
                                     deadline=deadline)
        else:
            fit = fit_laplace_arrays(spec.y, spec.X, spec.fixed_names, terms, level=level,
                                     sd_penalty=o.sd_penalty, deadline=deadline)
        backend, approximate, note = "glmm_laplace", False, _NOTES["laplace"]
        if o.sd_penalty:
            note += (f" Penalised (sd_penalty={o.sd_penalty:g}, Chung et al. 2013/2015, "
                     "blme's bglmer): the SDs are the mode of the likelihood times a "
                     "Wishart(d + 2) prior, never on the boundary; not glmer's ML fit.")
        scale, label, family = "log-odds", _TYPICAL, spec.family
    else:
        fit = fit_glmm_arrays(spec.y, spec.X, spec.fixed_names, terms,
                              method=cast(Literal["vb", "map"], method),
                              level=level, vc_prior_sd=o.vc_prior_sd,
                              fe_prior_sd=o.fe_prior_sd,
                              seed=seed_used, deadline=deadline)
        backend, approximate, note = f"glmm_{method}", True, _NOTES[method]
        scale, label, family = "log-odds", _TYPICAL, spec.family
    return fit, backend, approximate, note, scale, label, family


# ---------------------------------------------------------------------------- public
@dataclass(frozen=True)
class _StatsmodelsOptions:
    """The options of :func:`fit_statsmodels` besides the model's (typed by
    :class:`StatsmodelsOptions`) with their defaults: the one place they are listed."""

    method: FitMethod = "auto"
    level: float = 0.95
    vc_prior_sd: float = 1.0
    fe_prior_sd: float = 2.0
    seed: int | np.random.Generator | None = None
    draws: int = 4000
    df: DfMethod = "containment"
    sd_penalty: float = 0.0
    deadline: float | None = None


class StatsmodelsOptions(SpecOptions, total=False):
    """The keywords of :func:`fit_statsmodels`, typed for static checkers: the model
    options of :class:`~evalmix.models.spec._build.SpecOptions` and the back end's own."""

    method: FitMethod
    level: float
    vc_prior_sd: float
    fe_prior_sd: float
    seed: int | np.random.Generator | None
    draws: int
    n_draws: int   # the old name of draws (FutureWarning)
    df: DfMethod
    sd_penalty: float
    deadline: float | None


#: The statsmodels back end's own options and their defaults.
STATSMODELS_DEFAULTS: MappingProxyType[str, Any] = MappingProxyType(
    {f.name: f.default for f in fields(_StatsmodelsOptions)})


def fit_statsmodels(table: Any, spec: ModelSpec | None = None,
                    **options: Unpack[StatsmodelsOptions]) -> ModelFit:
    """Fit a crossed random-effects model with a statsmodels back end.

    Parameters
    ----------
    table : EvalTable
        The validated table (used to build the spec when ``spec`` is None; may be None
        when a spec is given).
    spec : ModelSpec, optional
        From :func:`evalmix.models.build_spec`; built from ``table`` (with the model
        options) when omitted.
    **options
        The options below (:data:`STATSMODELS_DEFAULTS` has them with their defaults) and
        the model options of :func:`~evalmix.models.spec.build_spec` (``formula``,
        ``slopes``, ``fixed``, ``position``, ``judge_position``, ``random``, ``reference``,
        ``family``), all typed by :class:`StatsmodelsOptions`; an unknown one is an
        :class:`~evalmix.errors.InvalidOptionError` that lists them.

    Other Parameters
    ----------------
    method : {"auto", "mixedlm", "laplace", "vb", "map"}
        ``"mixedlm"``: REML linear mixed model (Gaussian scores; on 0/1 outcomes a linear
        probability model). ``"laplace"``: maximum-likelihood logit GLMM by the Laplace
        approximation (``lme4::glmer``'s default; evalmix's implementation, statsmodels
        has none). ``"vb"``/``"map"``: logit GLMM by variational Bayes or by the joint
        posterior mode (statsmodels ``BinomialBayesMixedGLM``). ``"auto"``: ``"mixedlm"``
        for numeric outcomes, ``"laplace"`` for binary / tie-scored ones. See the module
        docstring for which are approximations.
    level : float
        Interval level.
    vc_prior_sd, fe_prior_sd : float
        ``"vb"``/``"map"`` priors: ``log SD ~ N(0, vc_prior_sd^2)``, each fixed effect
        ``~ N(0, fe_prior_sd^2)``.
    sd_penalty : float
        ``"laplace"`` only. 0 (default): maximum likelihood, ``glmer``'s fit. 2: the
        boundary-avoiding penalised likelihood of Chung et al. (2013, 2015; blme's
        ``bglmer``): ``-2 sum log`` of the Cholesky diagonal of each term's covariance is
        added to the deviance (a Wishart(d + 2) prior with infinite scale; gamma(2, 0) on
        a lone SD), so no SD is estimated at 0 and no correlation at +-1, and the maximal
        model needs no step-down. The report's model rows use 2 (docs/coverage.md: the
        population-averaged difference in a crossed design with 5 personas covers
        91.0% by maximum likelihood, whose singular fits drop the persona slope, and
        96.0% penalised).
    seed : int or numpy.random.Generator, optional
        Seeds statsmodels' starting values (vb/map) and the draws behind the
        probability-scale rows; recorded in ``provenance["seed"]``.
    draws : int
        Draws from the approximate sampling distribution for probability-scale rows
        (``n_draws=``, its old name, still works with a :class:`FutureWarning`).
    df : {"containment", "none"}
        Reference distribution of the fixed-effect intervals of ``"mixedlm"`` and
        ``"laplace"``: ``t`` with containment degrees of freedom (levels - 1 of the
        factors whose random terms contain the effect; see :func:`containment_df`), or
        the normal (``"none"``). VB/MAP intervals are posterior (normal) intervals.
    deadline : float, optional
        A :func:`time.monotonic` instant (:mod:`evalmix.models._deadline`): past it the
        fit stops with :class:`~evalmix.models._deadline.StoppedAtLimit`.

    Returns
    -------
    ModelFit
        ``backend`` is ``"mixedlm"``, ``"glmm_laplace"``, ``"glmm_vb"`` or ``"glmm_map"``;
        ``results`` holds the statsmodels results (:class:`LaplaceResults` for
        ``"laplace"``); ``approximate`` is True for VB, MAP and linear probability fits,
        with the reason in ``provenance["note"]`` (always filled).

    Raises
    ------
    InvalidOptionError
        Unknown ``method``.
    EvalmixError
        A numeric or ordinal outcome with ``method="laplace"``/``"vb"``/``"map"``; an ordinal
        (ties="separate") outcome with ``"mixedlm"``; a model without random terms.

    Warns
    -----
    FewClustersWarning
        A random factor has fewer than 5 levels.
    SingularFitWarning
        A variance component is (near) zero.
    ConvergenceWarning
        The optimiser did not reach a stationary point.

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(8, 3, 2, 2, tie_threshold=0, seed=3).table()
    >>> fit = fit_statsmodels(t, method="vb", judge_position=False, seed=1)
    >>> fit.backend, fit.approximate
    ('glmm_vb', True)

    References
    ----------
    Bates, D. et al. (2015). Fitting linear mixed-effects models using lme4. Journal of
    Statistical Software 67(1). doi:10.18637/jss.v067.i01
    Blei, D. M. et al. (2017). Variational inference: a review for statisticians. JASA
    112(518). doi:10.1080/01621459.2017.1285773
    """
    raw: dict[str, Any] = dict(options)
    if "n_draws" in raw:
        raw["draws"] = renamed_option("fit_statsmodels", "n_draws", "draws", raw.pop("n_draws"),
                                      raw.pop("draws", None))
    given = check_keywords("fit_statsmodels", raw, (*SPEC_DEFAULTS, *STATSMODELS_DEFAULTS))
    o = _StatsmodelsOptions(**{k: v for k, v in given.items() if k in STATSMODELS_DEFAULTS})
    method, level, seed, n_draws, df, deadline = (o.method, o.level, o.seed, o.draws, o.df,
                                                  o.deadline)
    check_option("method", method, METHODS)
    check_option("df", df, ("containment", "none"))
    check_number("sd_penalty", o.sd_penalty, low=0.0)
    t0 = time.perf_counter()
    spec_options = {k: v for k, v in given.items() if k in SPEC_DEFAULTS}
    if spec is None:
        if table is None:
            raise InvalidOptionError("fit_statsmodels needs a table or a spec")
        spec = build_spec(table, **spec_options)
    elif spec_options:
        raise InvalidOptionError("pass either a spec or the model options (formula, ...), not both")
    if spec.family == "cumulative":
        raise EvalmixError(
            "the statsmodels back end has no ordinal (cumulative) model (ties='separate' "
            "or family='ordinal'); use backend='bayes', or read the table with ties='half' "
            "or 'exclude' (the default Gaussian model for scores)")
    if not spec.random:
        raise EvalmixError(
            f"the model {spec.formula!r} has no random terms; add e.g. (1|item), or use "
            "the design-based intervals (evalmix.interval) for a model without them")
    logit = spec.family in ("bernoulli", "binomial")
    if method == "auto":
        method = "laplace" if logit else "mixedlm"
    if o.sd_penalty and method != "laplace":
        raise InvalidOptionError(f"sd_penalty={o.sd_penalty:g} applies to method='laplace' "
                                 f"only, not method={method!r} (use sd_penalty=0)")
    if method in ("vb", "map", "laplace") and not logit:
        raise EvalmixError(
            f"method={method!r} fits a logit model for binary outcomes, but the outcome is "
            f"{spec.family} ({spec.response}); use method='mixedlm' for numeric scores")
    correlated = any(t.correlated for t in spec.random)
    user = sorted({t.factor for t in spec.random if t.correlated} - set(spec.maximal))
    # REML fits correlated terms: a user's, and the maximal default's of score tables;
    # the default's of a 0/1 table fitted as a linear probability model stay independent
    if method != "laplace" and correlated and not (method == "mixedlm"
                                                   and (user or not logit)):
        if user:
            raise EvalmixError(
                f"method={method!r} has no correlated random effects (the terms of "
                f"{', '.join(user)}); use method='laplace' for a logit model, or write "
                "(1 + x||g) for independent intercept and slopes")
        spec = decorrelate(spec, f"method={method!r} fits the maximal model's intercepts "
                                 "and condition slopes as independent terms")
    seed_used = resolve_seed(seed)
    rng = np.random.default_rng(seed_used)
    fitted = _fit_core(spec, method, o, level, seed_used, deadline, logit)
    simplified: list[str] = []
    while spec.maximal and method in ("laplace", "mixedlm"):
        reason = _needs_simpler(spec, fitted[0])
        if reason is None:
            break
        simpler = simplify(spec, fitted[0].vc_sd, reason)
        if simpler is None:
            break
        simplified.append(simpler.notes[-1])
        spec = simpler
        fitted = _fit_core(spec, method, o, level, seed_used, deadline, logit)
    fit, backend, approximate, note, scale, label, family = fitted
    terms = list(spec.random)

    messages: list[str] = list(simplified)
    for msg in simplified:
        warnings.warn(msg, SingularFitWarning, stacklevel=2)
    few = sorted({t.factor for t in terms if t.n_levels < FEW_LEVELS})
    if few:
        msg = (f"factor(s) {', '.join(few)} have fewer than {FEW_LEVELS} levels: their "
               f"variance is barely identified and {backend}'s Wald intervals for it (and "
               "for effects that vary by it) are too narrow. Report the Bayesian back end's "
               "intervals, or enter the factor as a fixed effect (fixed=[...]) or fit per "
               "level")
        messages.append(msg)
        warnings.warn(msg, FewClustersWarning, stacklevel=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        wide = (fit.vc_sd > 0) & ~(fit.vc_hi / fit.vc_lo < _MAX_INTERVAL_RATIO)
    if wide.any():
        names = [t.name for t, w in zip(terms, wide, strict=True) if w]
        lo, hi = fit.vc_lo.copy(), fit.vc_hi.copy()
        lo[wide], hi[wide] = 0.0, np.nan
        fit = replace(fit, vc_lo=lo, vc_hi=hi)
        msg = (f"variance component(s) {', '.join(names)} near zero: the Wald interval on the "
               "log-SD scale spans several orders of magnitude and is reported as [0, NaN]. "
               "The data barely identify them; use the Bayesian back end for an interval, "
               "or drop the term")
        messages.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=2)
    if fit.singular:
        msg = (f"variance component(s) {', '.join(fit.singular)} estimated at (or near) zero "
               f"by {backend}; the data do not identify them. Consider dropping the term or "
               "entering the factor as a fixed effect (fixed=[...])")
        if method == "map":
            msg += ("; with method='map' this is usually the joint-mode collapse described "
                    "in the note: try method='vb' or the Bayesian back end")
        messages.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=2)
    edge = fit.details.get("singular_correlations", ())
    if edge:
        msg = (f"correlation(s) {', '.join(edge)} estimated at -1 or +1 by {backend}: a "
               "boundary (singular) fit, lme4's isSingular; the data do not identify the "
               "correlation. Consider independent terms, (1 + x||g), or dropping the slope")
        messages.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=2)
    if not fit.converged:
        msg = (f"{backend}: the optimiser did not reach a stationary point (largest gradient "
               f"{fit.grad_norm:.2g}; {fit.details.get('optimizer_message', '')}). Treat the "
               "estimates as unreliable; simplify the random terms or use the Bayesian back "
               "end")
        messages.append(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)

    dfs = (containment_df(spec.fixed_names, terms)
           if df == "containment" and method in ("mixedlm", "laplace")
           else dict.fromkeys(spec.fixed_names, float("inf")))
    rows = _fixed_rows(fit, spec, logit and method != "mixedlm", scale, label, dfs)
    rows += _level_rows(fit, terms, scale)
    if method != "mixedlm":
        rows += _probability_rows(fit, spec, terms, rng, n_draws)
    fixed = pd.DataFrame(rows)
    fixed["level"] = level
    fixed = fixed[list(FIXED_COLUMNS)]
    variance = _variance_frame(fit, terms, backend,
                               "Residual" if method == "mixedlm" else "Residual")
    provenance = {
        "formula": spec.formula, "method": method, "backend": backend, "family": family,
        "link": "identity" if method == "mixedlm" else "logit", "response": spec.response,
        "design": spec.design, "n_obs": spec.n_obs, "level": level, "seed": seed_used,
        "note": note, "simplified": simplified, "notes": list(spec.notes),
        "correlations": list(fit.details.get("correlations", [])),
        "intervals": (fit.details.get("interval", "").replace(
            "Wald z (fixed effects)", "Wald t with containment df (fixed effects)")
            if df == "containment" else fit.details.get("interval", "")),
        "optimizer": fit.details.get("optimizer", ""), "converged": fit.converged,
        "df": dfs, "sd_penalty": o.sd_penalty,
        "versions": package_versions("numpy", "scipy", "pandas", "statsmodels"), "wall_s": time.perf_counter() - t0,
        "residual": ("pi^2/3 (logistic latent residual, fixed)" if method != "mixedlm"
                     else "estimated residual SD"),
        "share": "share and icc among random intercepts and the residual, covariates at 0",
    }
    if method in ("vb", "map"):
        provenance["priors"] = {"log_sd": f"Normal(0, {o.vc_prior_sd})",
                                "fixed": f"Normal(0, {o.fe_prior_sd})"}
        provenance["probability_draws"] = n_draws
    else:
        provenance["reml_criterion"] = fit.details.get("reml_criterion")
    return ModelFit(backend=backend, family=family, formula=spec.formula,
                    fixed_effects=fixed, variance=variance, results=fit.results,
                    approximate=approximate, provenance=provenance,
                    warnings=tuple(messages))
