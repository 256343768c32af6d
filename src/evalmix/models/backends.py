"""The model back ends as typed option objects: ``fit(table, backend=Laplace(df="none"))``.

Each back end of :func:`evalmix.fit` is a frozen dataclass holding the options that only
it takes (pyfixest's ``MapDemeaner`` / ``LsmrDemeaner`` pattern), checked when it is
made, so an option of one back end cannot be handed to another:

========================  ======================  =================================
object                    ``ModelFit.backend``    fitted by
========================  ======================  =================================
:class:`Bayes`            ``"bayes"``             NUTS (:func:`~evalmix.models.bayes.fit_bayes`)
:class:`REML`             ``"mixedlm"``           REML linear mixed model
:class:`Laplace`          ``"glmm_laplace"``      Laplace logit GLMM (``lme4::glmer``)
:class:`VB`               ``"glmm_vb"``           variational Bayes logit GLMM
:class:`MAP`              ``"glmm_map"``          posterior-mode logit GLMM
========================  ======================  =================================

``fit(backend=...)`` also takes the names in the middle column (each back end with its
defaults, the words of ``analyze(methods=...)``), and ``"statsmodels"``: the frequentist
default for the outcome, :class:`Laplace` for 0/1, proportion and pairwise outcomes and
:class:`REML` for numeric scores (what ``analyze(backend="statsmodels")`` fits).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Any, ClassVar, get_args

from evalmix.errors import InvalidOptionError, check_count, check_number, check_option
from evalmix.vocabulary import DfMethod, Engine, FitBackend, Sampler, SensitivityMethod

__all__ = ["Bayes", "REML", "Laplace", "VB", "MAP", "ModelBackend", "backend_from_name",
           "resolve_backend", "LEGACY_OPTIONS"]


@dataclass(frozen=True)
class Bayes:
    """The Bayesian back end: NUTS on the crossed model (nutpie with the Numba kernel).

    Parameters
    ----------
    engine : {"auto", "kernel", "pymc", "bambi"}
        ``"auto"``: the Numba kernel with nutpie when possible, else PyMC.
    sampler : {"auto", "nutpie", "pymc"}
        The NUTS implementation (``"auto"``: nutpie if installed).
    draws : int, optional
        Posterior draws per chain (>= 50). None: as many as the convergence checks need
        (see :func:`~evalmix.models.bayes.fit_bayes`).
    tune : int
        Warm-up draws per chain (>= 0).
    chains : int
        Number of chains (>= 1).
    prior_scale : float
        Multiplies the SD priors (> 0).
    sensitivity : float, optional
        Also give the posterior with the SD priors at this scale (> 0).
    sensitivity_method : {"auto", "psis", "refit"}
        How that second posterior is obtained.
    target_accept : float, optional
        NUTS target acceptance, in (0, 1).
    retry_divergent : bool
        Sample once more at ``target_accept=0.95`` when the first run diverges.

    Examples
    --------
    >>> Bayes(draws=500, chains=4).draws
    500
    """

    engine: Engine = "auto"
    sampler: Sampler = "auto"
    draws: int | None = None
    tune: int = 400
    chains: int = 2
    prior_scale: float = 1.0
    sensitivity: float | None = None
    sensitivity_method: SensitivityMethod = "auto"
    target_accept: float | None = None
    retry_divergent: bool = True

    #: the word of ``ModelFit.backend`` and ``analyze(methods=)``
    name: ClassVar[str] = "bayes"

    def __post_init__(self) -> None:
        check_option("engine", self.engine, get_args(Engine))
        check_option("sampler", self.sampler, get_args(Sampler))
        check_option("sensitivity_method", self.sensitivity_method,
                     get_args(SensitivityMethod))
        if self.draws is not None:
            _set(self, "draws", check_count("draws", self.draws, minimum=50))
        _set(self, "tune", check_count("tune", self.tune, minimum=0))
        _set(self, "chains", check_count("chains", self.chains, minimum=1))
        _set(self, "prior_scale", check_number("prior_scale", self.prior_scale, low=0,
                                               low_open=True))
        if self.sensitivity is not None:
            _set(self, "sensitivity", check_number("sensitivity", self.sensitivity, low=0,
                                                   low_open=True))
        if self.target_accept is not None:
            _set(self, "target_accept", check_number(
                "target_accept", self.target_accept, low=0, high=1, low_open=True,
                high_open=True))
        _check_bool("retry_divergent", self.retry_divergent)


@dataclass(frozen=True)
class REML:
    """REML linear mixed model (``lme4::lmer``); on 0/1 outcomes a linear probability
    model (flagged as an approximation).

    Parameters
    ----------
    df : {"containment", "none"}
        Fixed-effect intervals from ``t`` with containment degrees of freedom, or the
        normal.

    Examples
    --------
    >>> REML(df="none").name
    'mixedlm'
    """

    df: DfMethod = "containment"

    name: ClassVar[str] = "mixedlm"
    _method: ClassVar[str] = "mixedlm"

    def __post_init__(self) -> None:
        check_option("df", self.df, get_args(DfMethod))


@dataclass(frozen=True)
class Laplace:
    """Maximum-likelihood logit GLMM by the Laplace approximation (``lme4::glmer``'s
    default) for 0/1, proportion and pairwise outcomes.

    Parameters
    ----------
    df : {"containment", "none"}
        Fixed-effect intervals from ``t`` with containment degrees of freedom, or the
        normal.
    draws : int
        Draws from the estimates' approximate sampling distribution behind the
        probability-scale rows (>= 100).
    sd_penalty : float
        0 (default): maximum likelihood, ``glmer``'s fit. 2: Chung et al.'s (2013, 2015)
        boundary-avoiding penalised likelihood (blme's ``bglmer``; a Wishart(d + 2)
        prior with infinite scale on each term's covariance), whose SDs are never 0 and
        correlations never +-1; the report's model rows use 2 (``docs/models.md``).

    Examples
    --------
    >>> Laplace().name
    'glmm_laplace'
    """

    df: DfMethod = "containment"
    draws: int = 4000
    sd_penalty: float = 0.0

    name: ClassVar[str] = "glmm_laplace"
    _method: ClassVar[str] = "laplace"

    def __post_init__(self) -> None:
        check_option("df", self.df, get_args(DfMethod))
        _set(self, "draws", check_count("draws", self.draws, minimum=100))
        _set(self, "sd_penalty", check_number("sd_penalty", self.sd_penalty, low=0))


@dataclass(frozen=True)
class VB:
    """Logit GLMM by variational Bayes (statsmodels ``BinomialBayesMixedGLM``; an
    approximation, flagged as one).

    Parameters
    ----------
    vc_prior_sd : float
        Prior ``log SD ~ N(0, vc_prior_sd^2)`` of each variance component (> 0).
    fe_prior_sd : float
        Prior ``N(0, fe_prior_sd^2)`` of each fixed effect (> 0).
    draws : int
        Draws behind the probability-scale rows (>= 100).

    Examples
    --------
    >>> VB(vc_prior_sd=2.0).name
    'glmm_vb'
    """

    vc_prior_sd: float = 1.0
    fe_prior_sd: float = 2.0
    draws: int = 4000

    name: ClassVar[str] = "glmm_vb"
    _method: ClassVar[str] = "vb"

    def __post_init__(self) -> None:
        for k in ("vc_prior_sd", "fe_prior_sd"):
            _set(self, k, check_number(k, getattr(self, k), low=0, low_open=True))
        _set(self, "draws", check_count("draws", self.draws, minimum=100))


@dataclass(frozen=True)
class MAP(VB):
    """Logit GLMM at the joint posterior mode (statsmodels ``BinomialBayesMixedGLM``; an
    approximation, flagged as one).

    Parameters
    ----------
    vc_prior_sd : float
        Prior ``log SD ~ N(0, vc_prior_sd^2)`` of each variance component (> 0).
    fe_prior_sd : float
        Prior ``N(0, fe_prior_sd^2)`` of each fixed effect (> 0).
    draws : int
        Draws behind the probability-scale rows (>= 100).

    Examples
    --------
    >>> MAP().name
    'glmm_map'
    """

    name: ClassVar[str] = "glmm_map"
    _method: ClassVar[str] = "map"


#: a back-end object
ModelBackend = Bayes | REML | Laplace | VB | MAP

_BY_NAME: dict[str, Any] = {c.name: c for c in (Bayes, REML, Laplace, VB, MAP)}

#: the options ``fit`` took as keywords before the back-end objects, by the back end
#: that takes them (``n_draws`` is now the frequentist objects' ``draws``)
LEGACY_OPTIONS: dict[str, tuple[str, ...]] = {
    "bayes": tuple(f.name for f in fields(Bayes)),
    "statsmodels": ("method", "vc_prior_sd", "fe_prior_sd", "n_draws", "df")}

#: the legacy ``method=`` of the statsmodels back end -> the object
_METHODS: dict[str, Any] = {"mixedlm": REML, "laplace": Laplace, "vb": VB, "map": MAP}


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)   # the checked value (frozen dataclass)


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidOptionError(f"{name} must be True or False, got {value!r}")


def backend_from_name(name: str, options: dict[str, Any] | None = None) -> ModelBackend:
    """The back end called ``name`` (a ``ModelFit.backend`` word), with those of
    ``options`` (fit's option names) that it takes; the others are left out.

    ``analyze(fit_options=...)`` serves every back end this way.

    Parameters
    ----------
    name : {"bayes", "mixedlm", "glmm_laplace", "glmm_vb", "glmm_map"}
        The back end.
    options : dict, optional
        Option name -> value, e.g. ``{"tune": 100, "df": "none"}``; ``n_draws`` is the
        frequentist back ends' ``draws``.

    Returns
    -------
    Bayes, REML, Laplace, VB or MAP

    Examples
    --------
    >>> backend_from_name("glmm_laplace", {"tune": 100, "n_draws": 500})
    Laplace(df='containment', draws=500, sd_penalty=0.0)
    """
    check_option("backend", name, tuple(_BY_NAME))
    cls = _BY_NAME[name]
    opts = dict(options or {})
    if cls is not Bayes and "n_draws" in opts:
        opts["draws"] = opts.pop("n_draws")
    own = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in opts.items() if k in own})


def resolve_backend(backend: object, legacy: dict[str, Any], *,
                    where: str = "fit") -> tuple[str, dict[str, Any], str]:
    """``fit``'s back end as (kind, the back-end function's options, what it is called).

    ``kind`` is ``"bayes"`` (options for :func:`~evalmix.models.bayes.fit_bayes`) or
    ``"statsmodels"`` (options for
    :func:`~evalmix.models.frequentist.fit_statsmodels`, ``method`` included).

    Parameters
    ----------
    backend : object
        A back-end object, one of :data:`~evalmix.vocabulary.FitBackend`'s names, or
        ``"statsmodels"`` (the frequentist default for the outcome).
    legacy : dict
        The old back-end keywords given to ``fit`` (``draws=``, ``method=``, ...): still
        taken with a :class:`FutureWarning` naming the new spelling; an option of another
        back end than ``backend`` is an :class:`~evalmix.errors.InvalidOptionError`.
    where : str
        The caller's name in messages.

    Returns
    -------
    tuple
        (kind, options, label).
    """
    known = {k for v in LEGACY_OPTIONS.values() for k in v}
    unknown = sorted(set(legacy) - known)
    if unknown:
        raise InvalidOptionError(
            f"{where}() got unknown keyword(s) {', '.join(unknown)}; the options are listed "
            f"in help(evalmix.{where}) (model: formula, slopes, fixed, random, ...); a back "
            "end's own options go in its object: backend=Bayes(draws=..., chains=...), "
            "Laplace(df=...), REML(...), VB(...), MAP(...)")
    if isinstance(backend, Bayes | REML | Laplace | VB | MAP):
        if legacy:
            given = ", ".join(f"{k}={v!r}" for k, v in legacy.items())
            raise InvalidOptionError(
                f"{given}: with backend={backend!r}, give the back end's options in its "
                f"object only ({type(backend).__name__}(...)), not as keywords of {where}()")
        return _kind_options(backend)
    if not isinstance(backend, str):
        raise InvalidOptionError(
            f"backend={backend!r} is not a back end; give Bayes(...), REML(...), "
            f"Laplace(...), VB(...), MAP(...) or one of "
            f"{', '.join(map(repr, get_args(FitBackend)))}")
    check_option("backend", backend, get_args(FitBackend))
    if not legacy:
        if backend == "statsmodels":
            return "statsmodels", {"method": "auto"}, "statsmodels"
        return _kind_options(backend_from_name(backend))
    family = "bayes" if backend == "bayes" else "statsmodels"
    other = "statsmodels" if family == "bayes" else "bayes"
    wrong = [k for k in legacy if k in LEGACY_OPTIONS[other] and k not in LEGACY_OPTIONS[family]]
    if wrong:
        raise InvalidOptionError(
            f"{', '.join(f'{k}={legacy[k]!r}' for k in wrong)} applies to backend="
            f"{other!r} only, not backend={backend!r}; drop it or change the back end")
    if family == "bayes":
        new = Bayes(**legacy)
        _warn_legacy(where, backend, legacy, _short(new))
        return _kind_options(new)
    opts = dict(legacy)
    method = opts.pop("method", "auto")
    if backend != "statsmodels":
        if "method" in legacy:
            raise InvalidOptionError(f"backend={backend!r} names the method; drop method=")
        method = _BY_NAME[backend]._method
    check_option("method", method, ("auto", *_METHODS))
    if method == "auto":
        laplace = backend_from_name("glmm_laplace", opts)
        reml = backend_from_name("mixedlm", opts)
        _warn_legacy(where, backend, legacy,
                     f"{_short(laplace)} (0/1 outcomes) or {_short(reml)} (numeric scores)")
        return "statsmodels", {"method": "auto", **{("draws" if k == "n_draws" else k): v
                                                    for k, v in opts.items()}}, "statsmodels"
    cls = _METHODS[method]
    own = {f.name for f in fields(cls)} | ({"n_draws"} if "draws" in
                                          {f.name for f in fields(cls)} else set())
    extra = sorted(k for k in opts if k not in own)
    if extra:   # e.g. vc_prior_sd with method="laplace": ignored before, refused now
        raise InvalidOptionError(
            f"{', '.join(extra)} does not apply to method={method!r} "
            f"({cls.__name__}() takes {', '.join(f.name for f in fields(cls))})")
    frequentist = backend_from_name(cls.name, opts)
    _warn_legacy(where, backend, legacy, _short(frequentist))
    return _kind_options(frequentist)


def _kind_options(b: ModelBackend) -> tuple[str, dict[str, Any], str]:
    if isinstance(b, Bayes):
        return "bayes", {f.name: getattr(b, f.name) for f in fields(b)}, b.name
    opts: dict[str, Any] = {"method": b._method}
    for f in fields(b):
        opts[f.name] = getattr(b, f.name)
    return "statsmodels", opts, b.name


def _short(b: ModelBackend) -> str:
    """``b`` as it is written: its options that differ from the defaults."""
    given = ", ".join(f"{f.name}={getattr(b, f.name)!r}" for f in fields(b)
                      if getattr(b, f.name) != f.default)
    return f"{type(b).__name__}({given})"


def _warn_legacy(where: str, backend: str, legacy: dict[str, Any], new: str) -> None:
    old = ", ".join([f"backend={backend!r}"] * (backend != "bayes")
                    + [f"{k}={v!r}" for k, v in legacy.items()])
    warnings.warn(f"{where}({old}) is now {where}(backend={new}); the back end's options "
                  "are given in its object and the old keywords will be removed",
                  FutureWarning, stacklevel=4)
