"""``evalmix.gstudy``: the variance components of an eval design and its G coefficients.

Reads a long table (or an :class:`~evalmix.data.table.EvalTable`) into an object of
measurement and facets, finds nesting and unlabelled
replicates, and estimates one variance component per effect of the design by

- ``"anova"``: expected mean squares on balanced data
  (:func:`evalmix.design.anova.balanced_anova`), intervals by the exact parametric
  bootstrap of the mean squares;
- ``"reml"``: the REML linear mixed model of :mod:`evalmix.models.frequentist._reml` (checked
  against ``lme4::lmer``), any design, intervals by a parametric bootstrap (refits of
  data simulated from the estimates);
- ``"bayes"``: the Bayesian crossed GLMM of :mod:`evalmix.models.bayes` for binary,
  tie-scored or ordinal outcomes, on its *latent* scale (logistic residual ``pi^2 / 3``),
  intervals from the posterior draws.

It lives in ``compare`` (not ``design``) because the REML and Bayesian paths fit models;
the coefficients themselves are :mod:`evalmix.design.gtheory`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypedDict, cast, get_args

import numpy as np
import pandas as pd

from evalmix._progress import Progress
from evalmix.compare._gframe import REPLICATE, Y, data_frame, find_nesting, table_frame
from evalmix.data.table import EvalTable, dense_codes, intersect_codes
from evalmix.design.anova import balanced_anova, is_balanced, level_positions
from evalmix.design.gresult import GStudyResult
from evalmix.design.gtheory import GDesign
from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
)
from evalmix.families import Family, family_name
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.vocabulary import GStudyMethod

__all__ = ["gstudy", "GStudyOptions", "GSTUDY_DEFAULTS", "METHODS"]

METHODS: tuple[str, ...] = get_args(GStudyMethod)
#: Parametric-bootstrap replicates by default.
REPS = 2000


class GStudyOptions(TypedDict, total=False):
    """The keywords of :func:`gstudy` after the data, typed for static checkers
    (:func:`evalmix.dstudy` forwards them)."""

    object: str | None
    facets: Sequence[str] | None
    outcome: str | None
    nested: Mapping[str, str | Sequence[str]] | None
    fixed: Sequence[str]
    method: GStudyMethod
    family: str | None
    level: float
    reps: int | None
    draws: int | None
    seed: SeedLike
    progress: bool
    deadline: float | None


# ---------------------------------------------------------------------- estimation
def _effect_codes(design: GDesign, codes: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    order = design.factors
    return [intersect_codes(*(codes[f] for f in sorted(e, key=order.index)))
            for e in design.effects]


def _terms(design: GDesign, codes: Mapping[str, np.ndarray], safe: bool = False) -> list:
    from evalmix.models.spec import RandomTerm

    out, seen = [], set()
    n = next(iter(codes.values())).size
    for e, c in zip(design.effects[:-1], _effect_codes(design, codes)[:-1], strict=True):
        name = design.label(e)
        if safe:
            name = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "effect"
            while name in seen:
                name += "x"
            seen.add(name)
        levels = tuple(str(i) for i in range(int(c.max()) + 1))
        out.append(RandomTerm(name, "1", c, levels, np.ones(n)))
    return out


def _simulated(y_mean: float, terms: list, sd: np.ndarray, n: int, reps: int,
               rng: np.random.Generator, block: int = 256):
    """Blocks of ``reps`` responses drawn from the fitted variance components."""
    for c0 in range(0, reps, block):
        m = min(block, reps - c0)
        Y = y_mean + rng.normal(0.0, sd[-1], (n, m))
        for t, s in zip(terms, sd[:-1], strict=True):
            if s > 0:
                Y += rng.normal(0.0, s, (t.n_levels, m))[t.codes]
        yield Y


def _reml(y: np.ndarray, design: GDesign, codes: Mapping[str, np.ndarray], *,
          reps: int, level: float, rng: np.random.Generator, progress: bool,
          deadline: float | None = None
          ) -> tuple[np.ndarray, np.ndarray, str, dict[str, Any]]:
    from evalmix.models.frequentist._reml import fit_mixedlm_arrays
    from evalmix.models.frequentist._reml_scoring import SCORING_MAX_LEVELS, reml_scoring_step

    terms = _terms(design, codes)
    X = np.ones((y.size, 1))
    with Progress(progress) as bar:
        with bar.stage("G study: REML fit"):
            fit = fit_mixedlm_arrays(y, X, ["Intercept"], terms, level=level,
                                     results=False, deadline=deadline)
        variances = np.append(np.asarray(fit.vc_sd) ** 2, fit.resid_sd**2)
        details = {"fit": fit, "converged": bool(fit.converged), "singular": fit.singular}
        if sum(t.n_levels for t in terms) <= SCORING_MAX_LEVELS:
            task = bar.task("G study: parametric bootstrap", reps)
            sims = _simulated(float(fit.fe_est[0]), terms, np.sqrt(variances), y.size, reps,
                              rng)
            done = [0]

            def step(now: int) -> None:
                bar.advance(task, now - done[0])
                done[0] = now

            drawn = reml_scoring_step(sims, X, terms, variances, step=step)
            return variances, drawn, ("parametric bootstrap (data simulated from the REML "
                                      "estimates, one REML scoring step each)"), details
    # too many levels for the scoring step's dense Z'PZ: the REML fit's own Wald
    # intervals on log-SD, drawn jointly so that functions of them get intervals
    kept = list(fit.details["logsd_terms"]) + [len(terms)]
    cov = np.asarray(fit.details["logsd_cov"])
    drawn = np.zeros((reps, variances.size))
    if np.all(np.isfinite(cov)):
        drawn[:, kept] = np.exp(2 * rng.multivariate_normal(
            0.5 * np.log(variances[kept]), cov, reps))
    else:
        drawn[:] = np.nan
    return variances, drawn, (f"Wald on log-SD (REML information; more than "
                              f"{SCORING_MAX_LEVELS} levels for the bootstrap), components at "
                              "0 stay 0"), details


def _bayes(y: np.ndarray, design: GDesign, codes: Mapping[str, np.ndarray], *,
           family: str | None, level: float, draws: int | None, seed: int, progress: bool
           ) -> tuple[np.ndarray, np.ndarray, str, dict[str, Any]]:
    from evalmix.models.bayes import fit_bayes
    from evalmix.models.spec import ModelSpec

    terms = _terms(design, codes, safe=True)
    fam = family_name(family) if family is not None else (
        "bernoulli" if np.isin(y, (0.0, 1.0)).all() else
        "binomial" if ((y >= 0) & (y <= 1)).all() else "gaussian")
    categories: tuple[str, ...] = ()
    yy = y
    if fam == "cumulative":
        values = np.unique(y)
        categories = tuple(f"{v:g}" for v in values)
        yy = np.searchsorted(values, y).astype(float)
    elif fam in ("bernoulli", "binomial") and not ((y >= 0) & (y <= 1)).all():
        raise EvalmixError(f"family={family!r} needs scores in [0, 1]; use family=None for "
                           "numeric scores")
    X = np.ones((y.size, 0 if fam == "cumulative" else 1))
    spec = ModelSpec(
        formula="y ~ 1 + " + " + ".join(f"(1|{t.factor})" for t in terms),
        family=cast("Family", fam),
        link="identity" if fam == "gaussian" else "logit", response="the score",
        y=yy, X=X, fixed_names=() if fam == "cumulative" else ("Intercept",),
        random=tuple(terms), design="scores", categories=categories)
    fit = fit_bayes(spec, seed=seed, draws=draws, level=level, progress=progress)
    post = fit.draws.posterior if fit.draws is not None else {}
    sds = [np.asarray(post["sd_" + t.factor], dtype=float).reshape(-1) for t in terms]
    if fam == "gaussian":
        resid = np.asarray(post["sigma"], dtype=float).reshape(-1) ** 2
        scale = "identity"
    else:
        resid = np.full(sds[0].size, np.pi**2 / 3)
        scale = "latent logit" if fam != "cumulative" else "latent cumulative logit"
    drawn = np.column_stack([s**2 for s in sds] + [resid])
    return np.median(drawn, axis=0), drawn, scale, {"fit": fit, "family": fam}


def _n_observed(frame: pd.DataFrame, design: GDesign) -> dict[str, float]:
    out = {}
    for f in design.facets:
        if f in design.differentiation:
            continue
        by = [g for g in design.factors if g in design.ancestors(f) or g == design.object]
        counts = frame.groupby(by, sort=False, observed=True)[f].nunique().to_numpy()
        out[f] = float(counts.size / np.sum(1.0 / counts))   # harmonic mean
    return out


def gstudy(
    data: pd.DataFrame | EvalTable,
    object: str | None = None,  # noqa: A002 - G theory's "object of measurement"
    facets: Sequence[str] | None = None,
    *,
    outcome: str | None = None,
    nested: Mapping[str, str | Sequence[str]] | None = None,
    fixed: Sequence[str] = (),
    method: GStudyMethod = "auto",
    family: str | None = None,
    level: float = 0.95,
    reps: int | None = None,
    draws: int | None = None,
    seed: SeedLike = None,
    progress: bool = True,
    deadline: float | None = None,
) -> GStudyResult:
    """Variance components of an eval design, its G coefficients and error variances.

    Parameters
    ----------
    data : pandas.DataFrame or EvalTable
        A long table, one row per score. From an EvalTable the factors are its
        condition (``"condition"``; pairwise one-baseline tables: ``"model"``, the
        evaluated ``model_b``, scored 1 when it wins, ties 1/2), its cluster roles, the
        presentation order (``"order"``) and the replicate column (``"replicate"``).
    object : str, optional
        The object of measurement: the evaluated models, systems or conditions (or the
        items, to ask how reliably an eval ranks items). Default from an EvalTable: its
        condition / model.
    facets : sequence of str, optional
        The facets the scores were observed over (items, judges, prompt templates,
        runs, orders, personas ...). Default from an EvalTable: every factor but the
        object.
    outcome : str, optional
        The score column of a DataFrame (numeric: 0/1, a fraction or a rating).
    nested : mapping of str to str or sequence of str, optional
        Facet -> the factors it is nested within, e.g. ``{"run": "judge"}`` (each judge's
        runs are its own) or ``{"item": "scenario"}``. Found from the data when every
        level of a facet occurs within one level of another; facets named like repeats
        (``run``, ``rep``, ``epoch``, ``seed``, ``replicate`` ...) are nested within all
        other factors unless given here (``{"run": ()}``: crossed). Rows repeating a
        cell of all factors get a ``"replicate"`` facet numbering them.
    fixed : sequence of str
        Facets held fixed (e.g. ``("order",)`` when every comparison is always judged in
        both orders): part of the universe score, never varied in a D study.
    method : {"auto", "anova", "reml", "bayes"}
        ``"auto"``: ANOVA when the design is balanced, else REML. ``"bayes"``: the
        Bayesian crossed model on the latent (logit) scale for binary, tie-scored
        (1/2) or ordinal scores (``family="ordinal"``); Gaussian for other scores.
    family : {None, "ordinal"}, optional
        ``method="bayes"`` only: ``"ordinal"`` fits a cumulative logit to ratings.
    level : float
        Interval level.
    reps : int, optional
        Parametric-bootstrap replicates (default 2,000). ANOVA: the mean squares are
        drawn from their scaled chi-square distributions (exact for normal effects).
        REML: data sets are simulated from the estimates and each is estimated by one
        REML Fisher-scoring step from them (MINQUE; equal to the ANOVA estimates on
        balanced data), one factorisation for all; beyond 2,000 levels in all, Wald
        draws on the log-SD scale instead.
    draws : int, optional
        ``method="bayes"``: posterior draws per chain (default: until the convergence
        checks pass, see :func:`evalmix.fit`).
    seed : int or numpy.random.Generator, optional
        Recorded in the result.
    progress : bool
        Progress bar for the REML bootstrap and the sampler.
    deadline : float, optional
        ``method="reml"``: a :func:`time.monotonic` instant past which the fit stops with
        ``StoppedAtLimit`` (``analyze(model_timeout=)`` sets it).

    Returns
    -------
    GStudyResult
        ``.components()`` (variance per effect with intervals and shares),
        ``.project(n)`` (coefficients at any facet sizes), ``.facets()`` (what to
        sample and what to repeat), ``.tidy()``; :func:`evalmix.dstudy` tabulates and
        plots projections and finds the smallest and the cost-optimal design.

    Notes
    -----
    Every facet is random unless ``fixed``: the coefficients generalise over new items,
    new judges, new runs. ``se_score`` is the SE of one object's mean score as an
    estimate of its universe score (the mean over the universe of items, judges ...),
    ``se_diff`` that of a difference between two objects crossed with the same facet
    levels. On binary outcomes ANOVA and REML work on the probability scale (a linear
    probability model: the SEs are those of win rates and accuracies); the Bayesian
    model's components are on the latent logit scale, stated in ``scale``.

    References
    ----------
    Brennan, R. L. (2001). Generalizability Theory. Springer.
    doi:10.1007/978-1-4757-3456-0
    Bates, D., Maechler, M., Bolker, B. & Walker, S. (2015). Fitting linear
    mixed-effects models using lme4. Journal of Statistical Software 67(1).
    doi:10.18637/jss.v067.i01

    Examples
    --------
    >>> import pandas as pd, evalmix
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame([(m, i, j) for m in range(4) for i in range(20) for j in range(3)],
    ...                   columns=["model", "item", "judge"])
    >>> df["score"] = rng.normal(size=len(df)) + df["model"] * 0.5
    >>> g = evalmix.gstudy(df, "model", ["item", "judge"], outcome="score", seed=1)
    >>> g.method, round(float(g.project({"item": 40})["se_diff"][0]), 3)
    ('anova', 0.206)
    """
    level = check_level(level)
    check_option("method", method, METHODS)
    if isinstance(data, EvalTable):
        if outcome is not None:
            raise InvalidOptionError("outcome= is for a DataFrame; an EvalTable has its outcome")
        frame, obj, facet_list, notes = table_frame(data, object, facets)
    elif isinstance(data, pd.DataFrame):
        frame, obj, facet_list, notes = data_frame(data, object, facets, outcome)
    else:
        raise InvalidOptionError(f"gstudy needs a pandas DataFrame or an EvalTable, got "
                                 f"{type(data).__name__}")
    if method != "bayes" and family is not None:
        raise InvalidOptionError("family= is for method='bayes'")
    nesting, found = find_nesting(frame, obj, facet_list, nested)
    notes += found
    factors = [obj, *facet_list]
    dup = frame.groupby(factors, sort=False, observed=True).cumcount().to_numpy()
    if dup.max(initial=0) > 0:
        name = REPLICATE if REPLICATE not in factors else REPLICATE + "_"
        frame[name] = dup.astype(str)
        facet_list.append(name)
        nesting[name] = tuple(factors)
        notes.append(f"cells of {' x '.join(factors)} hold up to {dup.max() + 1} scores: "
                     f"numbered as facet {name!r}, nested within them")
    design = GDesign(obj, tuple(facet_list), nesting, tuple(fixed))
    codes = {f: dense_codes(frame[f].to_numpy()) for f in design.factors}
    n_levels = {f: int(c.max()) + 1 for f, c in codes.items()}
    one = [f for f, k in n_levels.items() if k < 2]
    if one:
        raise EvalmixError(f"factor {', '.join(map(repr, one))} has a single level: its "
                           "variance cannot be estimated; drop it from the facets")
    _, per_parent = level_positions(codes, design)
    single = [f for f in design.facets if design.ancestors(f) and per_parent[f].max() < 2]
    if single:
        raise EvalmixError(f"facet {', '.join(map(repr, single))} has one level within each "
                           "of its parents, so its variance cannot be told from theirs; "
                           "drop it from the facets")
    y = frame[Y].to_numpy(dtype=float)
    rng, recorded = seeded_rng(seed)
    balanced = is_balanced(codes, design)
    if method == "auto":
        method = "anova" if balanced else "reml"
    if method == "anova" and not balanced:
        raise EvalmixError("method='anova' needs a balanced design (one score in every cell, "
                           "as many nested levels in every parent); this one is not: use "
                           "method='reml'")
    details: dict[str, Any] = {}
    scale = "identity"
    if method == "anova":
        n_reps = check_count("reps", reps if reps is not None else REPS)
        anova = balanced_anova(y, codes, design)
        variances, drawn = anova.variances, anova.draws(n_reps, rng)
        interval = "parametric bootstrap (chi-square mean squares, normal effects)"
        details["anova"] = anova.table()
    elif method == "reml":
        n_reps = check_count("reps", reps if reps is not None else REPS)
        variances, drawn, interval, details = _reml(
            y, design, codes, reps=n_reps, level=level, rng=rng, progress=progress,
            deadline=deadline)
    else:
        if reps is not None:
            raise InvalidOptionError("reps= is for the bootstrap of method='anova' or 'reml'; the "
                                     "Bayesian intervals come from draws=")
        variances, drawn, scale, details = _bayes(
            y, design, codes, family=family, level=level, draws=draws, seed=recorded,
            progress=progress)
        interval = "posterior draws"
        n_reps = drawn.shape[0]
    by_obj = frame.groupby(obj, sort=True, observed=True)[Y]
    scores = pd.DataFrame({"n": by_obj.size(), "mean": by_obj.mean(),
                           "sd": by_obj.std(ddof=1)}).rename_axis("object").reset_index()
    scores["naive_se"] = scores["sd"] / np.sqrt(scores["n"])
    return GStudyResult(
        design=design, method=method, scale=scale, variances=np.asarray(variances),
        draws=drawn, interval=interval,
        n_observed=MappingProxyType(_n_observed(frame, design)),
        n_levels=MappingProxyType(n_levels), n_obs=int(y.size), scores=scores, level=level,
        reps=n_reps, seed=recorded, notes=tuple(notes), details=MappingProxyType(details))


#: The options of :func:`gstudy` and their defaults (read from its signature).
GSTUDY_DEFAULTS: dict[str, Any] = {
    name: p.default for name, p in inspect.signature(gstudy).parameters.items()
    if p.default is not inspect.Parameter.empty}
