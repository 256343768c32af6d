"""``evalmix.fit``: its keywords, a ModelSpec as input, stratified fits (issue 16).

The stratified-fit tests pin two bugs: inside a stratum the stratifying factor is
constant, so ``(1|judge)`` is not identified (statsmodels raised; the Bayesian back end
reported the prior as a judge SD), and a Generator seed was ignored (fresh entropy per
call). The MCMC fits are small (60 draws): they check the plumbing, not the numbers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.models.spec import build_spec
from evalmix.sim import pairwise_judges

TINY_BAYES = evalmix.Bayes(draws=60, tune=60, chains=2)


@pytest.fixture(scope="module")
def table():
    return pairwise_judges(8, 3, 3, 2, tie_threshold=0, seed=1).table()


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@pytest.mark.parametrize("backend", ["bayes", "statsmodels"])
def test_unknown_keyword_names_it(table, backend):
    with pytest.raises(InvalidOptionError, match="drawz"):
        evalmix.fit(table, backend=backend, drawz=100)


def test_option_of_the_other_backend_is_refused(table):
    with pytest.raises(InvalidOptionError, match=r"vc_prior_sd=3.*backend='statsmodels' only"):
        evalmix.fit(table, backend="bayes", vc_prior_sd=3)
    with pytest.raises(InvalidOptionError, match=r"draws=100.*backend='bayes' only"):
        evalmix.fit(table, backend="statsmodels", draws=100)


def test_a_model_spec_is_accepted_and_spec_options_beside_it_refused(table):
    spec = build_spec(table, random=["scenario", "persona"])
    a = _quiet(evalmix.fit, spec, backend="statsmodels", seed=3)
    b = _quiet(evalmix.fit, table, backend="statsmodels", random=["scenario", "persona"],
               seed=3)
    assert a.formula == b.formula
    pd.testing.assert_frame_equal(a.fixed_effects, b.fixed_effects)
    with pytest.raises(InvalidOptionError, match="slopes"):
        evalmix.fit(spec, backend="statsmodels", slopes=("judge",))
    with pytest.raises(InvalidOptionError, match="^by build"):
        evalmix.fit(spec, backend="statsmodels", by="judge")
    # None is the default (the maximal model), an empty list is an option (no slopes);
    # an empty fixed=[] is the default
    c = _quiet(evalmix.fit, spec, backend="statsmodels", slopes=None, fixed=[], seed=3)
    assert c.formula == a.formula
    with pytest.raises(InvalidOptionError, match="slopes"):
        evalmix.fit(spec, backend="statsmodels", slopes=[])


@pytest.mark.mcmc
@pytest.mark.parametrize("backend", ["bayes", "statsmodels"])
def test_random_passes_through_fit(table, backend):
    """``random=`` reaches the spec on both back ends (a raw TypeError on the Bayesian
    one before)."""
    f = _quiet(evalmix.fit, table, backend=TINY_BAYES if backend == "bayes" else backend,
               random=["scenario"], judge_position=False, slopes=(), seed=1, progress=False)
    assert f.formula == "y ~ 1 + condition + position + (1|scenario)"
    assert f.variance["factor"].tolist() == ["scenario", "Residual"]


@pytest.mark.mcmc
def test_both_backends_spell_terms_alike():
    """The same design gives the same (term, scale) keys on both back ends, so the report
    finds the same rows (compare/model_rows.py looks them up by exact term)."""
    t = pairwise_judges(8, 3, 3, 3, tie_threshold=0, seed=1).table()
    fb = _quiet(evalmix.fit, t, random=["scenario", "judge"], slopes=(), seed=1,
                backend=TINY_BAYES, progress=False)
    fs = _quiet(evalmix.fit, t, backend="statsmodels", random=["scenario", "judge"],
                slopes=(), seed=1)
    keys = [set(zip(f.fixed_effects["term"], f.fixed_effects["scale"], strict=True))
            for f in (fb, fs)]
    assert keys[0] == keys[1]
    assert ("P[treatment] - P[control]", "probability") in keys[0]
    assert fb.variance["factor"].tolist() == fs.variance["factor"].tolist()
    for f in (fb, fs):
        assert not f.fixed_effects.duplicated(["term", "scale"]).any()


@pytest.mark.mcmc
@pytest.mark.parametrize("backend", ["bayes", "statsmodels"])
def test_strata_drop_the_stratifying_factor(table, backend):
    """Within a judge, ``(1|judge)`` has one level: it is left out, not fitted (statsmodels
    raised) nor reported from its prior (Bayesian back end)."""
    f = _quiet(evalmix.fit, table, backend=TINY_BAYES if backend == "bayes" else backend,
               by="judge", slopes=(), seed=1, progress=False)
    assert set(f.strata) == {"judge1", "judge2"}
    for lev, sub in f.strata.items():
        assert "judge" not in sub.formula, sub.formula
        assert sub.variance["factor"].tolist() == ["scenario", "persona", "author",
                                                   "Residual"]
        assert f"judge={lev}: judge" not in set(f.variance["factor"])
    assert f.results is None and f.formula.endswith("[by judge]")


def test_strata_honour_a_generator_seed(table):
    """Two Generators from the same seed give the same stratified fit (the per-stratum
    seeds, and so the probability-scale draws); another seed gives other draws."""
    def run(seed):
        return _quiet(evalmix.fit, table, by="judge",
                      random=["scenario", "persona"], seed=seed,
                      backend=evalmix.Laplace(draws=200))

    a, b = run(np.random.default_rng(5)), run(np.random.default_rng(5))
    assert a.provenance["stratum_seeds"] == b.provenance["stratum_seeds"]
    pd.testing.assert_frame_equal(a.fixed_effects, b.fixed_effects)
    c = run(np.random.default_rng(6))
    assert c.provenance["stratum_seeds"] != a.provenance["stratum_seeds"]
    prob = a.fixed_effects["scale"] == "probability"
    assert not np.allclose(a.fixed_effects.loc[prob, "se"], c.fixed_effects.loc[prob, "se"])
    # an int seed is reproducible too, and recorded as given
    assert run(7).provenance["seed"] == 7


def test_analyze_hands_each_backend_only_its_fit_options(table):
    """``analyze(fit_options=...)`` serves every back end: a Bayesian option (``tune``,
    ``sensitivity``) does not reach, and so does not stop, the statsmodels fit."""
    rep = _quiet(evalmix.analyze, table, methods=["naive", "glmm_laplace"], reps=199,
                 seed=1, progress=False, fit_options={"tune": 100, "sensitivity": 2.5})
    assert not any("could not be fitted" in w for w in rep.warnings), rep.warnings
    assert (rep.intervals["method"] == "glmm_laplace").any()


def test_fit_defaults_are_the_back_ends_defaults():
    """fit lists the model options explicitly and takes each back end's own as an object;
    build_spec and fit_statsmodels take the same ones as typed keywords with their
    defaults in one dataclass each, and fit_bayes has its own signature. The defaults
    must agree, or fit(...) and the back end called directly would fit different models."""
    import dataclasses
    import inspect

    from evalmix.models.bayes import fit_bayes
    from evalmix.models.frequentist import STATSMODELS_DEFAULTS
    from evalmix.models.spec._build import SPEC_DEFAULTS

    fit = inspect.signature(evalmix.fit).parameters
    checked = [name for name in SPEC_DEFAULTS if name in fit]
    assert len(checked) == len(SPEC_DEFAULTS) - 1   # all but build_spec's judge
    for name in checked:
        assert fit[name].default == SPEC_DEFAULTS[name], name
    for name in ("level", "seed", "deadline"):
        assert fit[name].default == STATSMODELS_DEFAULTS[name], name
    bayes = inspect.signature(fit_bayes).parameters
    for f in dataclasses.fields(evalmix.Bayes):
        assert f.default == bayes[f.name].default, f.name
    for name in ("level", "seed"):   # progress: fit shows it
        assert fit[name].default == bayes[name].default, name
    for cls in (evalmix.REML, evalmix.Laplace, evalmix.VB, evalmix.MAP):
        for f in dataclasses.fields(cls):
            assert f.default == STATSMODELS_DEFAULTS[f.name], (cls, f.name)


def test_typed_keywords_refuse_a_misspelt_option(table):
    """build_spec and fit_statsmodels take typed **options: a misspelt one is refused with
    the list of options, not passed on or ignored."""
    from evalmix.models.frequentist import fit_statsmodels

    with pytest.raises(InvalidOptionError, match="slope=.*it takes formula, slopes"):
        build_spec(table, slope=("judge",))  # type: ignore[call-arg]
    with pytest.raises(InvalidOptionError, match="vc_prior=2.*vc_prior_sd"):
        fit_statsmodels(table, method="vb", vc_prior=2.0)  # type: ignore[call-arg]
    with pytest.raises(EvalmixError, match="either a spec or the model options"):
        fit_statsmodels(table, build_spec(table), slopes=("judge",))


def test_strata_is_the_old_name_of_by(table):
    """``fit(strata=role)`` (one fit per level) is now ``fit(by=role)``, the word
    ``leaderboard(by=)`` uses; ``strata`` names the design's strata roles elsewhere."""
    opts = {"backend": "glmm_laplace", "random": ["scenario", "persona"], "seed": 2}
    with pytest.warns(FutureWarning, match=r"fit\(strata=...\) is now fit\(by=...\)"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            old = evalmix.fit(table, strata="judge", **opts)
    new = _quiet(evalmix.fit, table, by="judge", **opts)
    pd.testing.assert_frame_equal(old.fixed_effects, new.fixed_effects)
    with pytest.raises(InvalidOptionError, match="give by= only"):
        evalmix.fit(table, strata="judge", by="judge", **opts)

