"""``fit(backend=...)``: the back ends as typed objects (issue 34, item 2).

Each back end's options live in its own frozen object, checked when it is made, so an
option of one back end cannot reach another; the old keywords still work with a
FutureWarning naming the new spelling, and give the same fit.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import pandas as pd
import pytest

import evalmix
from evalmix import MAP, REML, VB, Bayes, Laplace
from evalmix.errors import InvalidOptionError
from evalmix.models.backends import backend_from_name
from evalmix.sim import pairwise_judges


@pytest.fixture(scope="module")
def table():
    return pairwise_judges(8, 3, 3, 2, tie_threshold=0, seed=1).table()


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _fixed(f):
    return f.fixed_effects.reset_index(drop=True)


# -- the objects ------------------------------------------------------------------------
def test_objects_are_frozen_and_exported_at_the_top():
    b = Bayes(draws=100, chains=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.draws = 5  # type: ignore[misc]
    assert dataclasses.replace(b, tune=50) == Bayes(draws=100, chains=4, tune=50)
    assert {"Bayes", "REML", "Laplace", "VB", "MAP"} <= set(evalmix.__all__)
    assert VB() != MAP() and MAP().vc_prior_sd == VB().vc_prior_sd


@pytest.mark.parametrize("make, match", [
    (lambda: Bayes(draws=10), "draws must be at least 50"),
    (lambda: Bayes(draws=100.0), "draws must be an integer"),
    (lambda: Bayes(chains=0), "chains must be at least 1"),
    (lambda: Bayes(tune=-1), "tune must be at least 0"),
    (lambda: Bayes(engine="stan"), "engine='stan' is not allowed"),
    (lambda: Bayes(sampler="hmc"), "sampler='hmc'"),
    (lambda: Bayes(prior_scale=0), r"prior_scale must be > 0"),
    (lambda: Bayes(sensitivity=-2), r"sensitivity must be > 0"),
    (lambda: Bayes(target_accept=1.2), r"target_accept must be in \(0, 1\)"),
    (lambda: Bayes(retry_divergent="yes"), "retry_divergent must be True or False"),
    (lambda: Bayes(sensitivity_method="is"), "sensitivity_method='is'"),
    (lambda: REML(df="kr"), "df='kr' is not allowed"),
    (lambda: Laplace(draws=10), "draws must be at least 100"),
    (lambda: Laplace(sd_penalty=-1.0), "sd_penalty must be >= 0"),
    (lambda: VB(vc_prior_sd=0), "vc_prior_sd must be > 0"),
    (lambda: MAP(fe_prior_sd=float("nan")), "fe_prior_sd must be"),
])
def test_objects_check_their_options_when_made(make, match):
    with pytest.raises(InvalidOptionError, match=match):
        make()


def test_an_option_of_another_back_end_cannot_be_written():
    with pytest.raises(TypeError, match="tune"):
        Laplace(tune=100)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="df"):
        Bayes(df="none")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="vc_prior_sd"):
        Laplace(vc_prior_sd=2.0)  # type: ignore[call-arg]


def test_names_are_the_words_of_analyze_and_model_fit(table):
    """Each object's ``name`` is the ``ModelFit.backend`` it gives, and the word
    ``analyze(methods=)`` uses for it; ``fit(backend=name)`` is the object's default."""
    from evalmix.compare.recommend import MODEL_METHODS

    assert {c.name for c in (Bayes, REML, Laplace, VB, MAP)} == set(MODEL_METHODS)
    for cls in (REML, Laplace, VB, MAP):
        f = _quiet(evalmix.fit, table, backend=cls(), seed=1, slopes=(),
                   random=["scenario", "persona"])
        assert f.backend == cls.name
        g = _quiet(evalmix.fit, table, backend=cls.name, seed=1, slopes=(),
                   random=["scenario", "persona"])
        pd.testing.assert_frame_equal(_fixed(f), _fixed(g))
    assert backend_from_name("glmm_vb", {"tune": 9, "n_draws": 300, "vc_prior_sd": 2.0}) \
        == VB(vc_prior_sd=2.0, draws=300)


# -- the default fit is unchanged -----------------------------------------------------
def test_the_default_fit_hands_fit_bayes_the_same_options(table, monkeypatch):
    """``fit(table)`` calls fit_bayes with exactly the options it passed before the
    objects (so the default fit's numbers are unchanged)."""
    import evalmix.models.bayes as bayes

    seen = {}
    monkeypatch.setattr(bayes, "fit_bayes", lambda spec, **kw: seen.update(kw))
    evalmix.fit(table, seed=3)
    assert seen == {"engine": "auto", "sampler": "auto", "draws": None, "tune": 400,
                    "chains": 2, "prior_scale": 1.0, "sensitivity": None,
                    "sensitivity_method": "auto", "target_accept": None,
                    "retry_divergent": True, "level": 0.95, "seed": 3, "progress": True}
    seen.clear()
    evalmix.fit(table, seed=3, backend=Bayes(draws=80, chains=3), progress=False)
    assert (seen["draws"], seen["chains"], seen["progress"]) == (80, 3, False)


# -- the old spellings -------------------------------------------------------------------
@pytest.mark.parametrize("old, new", [
    ({"backend": "statsmodels", "method": "laplace"}, Laplace()),
    ({"backend": "statsmodels", "method": "vb", "n_draws": 300}, VB(draws=300)),
    ({"backend": "statsmodels", "method": "map", "vc_prior_sd": 2.0}, MAP(vc_prior_sd=2.0)),
    ({"backend": "statsmodels", "df": "none"}, Laplace(df="none")),
    ({"backend": "statsmodels", "method": "mixedlm"}, REML()),
])
def test_old_keywords_warn_name_the_new_spelling_and_fit_the_same(table, old, new):
    opts = {"seed": 2, "slopes": (), "random": ["scenario", "persona"]}
    with pytest.warns(FutureWarning, match=r"is now fit\(backend=" + new.__class__.__name__):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            a = evalmix.fit(table, **old, **opts)
    b = _quiet(evalmix.fit, table, backend=new, **opts)
    assert a.backend == b.backend == new.name
    pd.testing.assert_frame_equal(_fixed(a), _fixed(b))


def test_old_bayes_keywords_reach_fit_bayes(table, monkeypatch):
    import evalmix.models.bayes as bayes

    seen = {}
    monkeypatch.setattr(bayes, "fit_bayes", lambda spec, **kw: seen.update(kw))
    with pytest.warns(FutureWarning, match=r"fit\(draws=100, tune=50\) is now "
                                           r"fit\(backend=Bayes\(draws=100, tune=50\)\)"):
        evalmix.fit(table, draws=100, tune=50)
    assert (seen["draws"], seen["tune"], seen["chains"]) == (100, 50, 2)


# -- wrong combinations ---------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"backend": Bayes(), "draws": 100}, r"draws=100: with backend=Bayes.*in its object only"),
    ({"backend": Laplace(), "df": "none"}, r"df='none': with backend=Laplace"),
    ({"backend": "bayes", "vc_prior_sd": 3}, r"vc_prior_sd=3 applies to backend='statsmodels'"),
    ({"backend": "statsmodels", "draws": 100}, r"draws=100 applies to backend='bayes' only"),
    ({"backend": "glmm_laplace", "tune": 100}, r"tune=100 applies to backend='bayes' only"),
    ({"backend": "glmm_laplace", "method": "vb"}, "names the method; drop method="),
    ({"backend": "statsmodels", "method": "laplace", "vc_prior_sd": 2.0},
     r"vc_prior_sd does not apply to method='laplace'"),
    ({"backend": "statsmodels", "method": "mixedlm", "n_draws": 200},
     r"n_draws does not apply to method='mixedlm'"),
    ({"backend": "statsmodels", "method": "glmer"}, "method='glmer' is not allowed"),
    ({"backend": "lme4"}, "backend='lme4' is not allowed"),
    ({"backend": 3}, "backend=3 is not a back end"),
    ({"backend": Bayes(), "deadline": time.monotonic() + 60},
     "deadline=.* applies to the frequentist back ends only"),
    ({"drawz": 3}, r"unknown keyword\(s\) drawz.*backend=Bayes\(draws="),
])
def test_wrong_combinations_are_refused_by_name(table, kw, match):
    with pytest.raises(InvalidOptionError, match=match):
        evalmix.fit(table, **kw)


def test_fit_statsmodels_n_draws_is_the_old_name_of_draws(table):
    """The frequentist back ends' probability-scale draws are ``draws`` (as in
    ``Laplace(draws=)``); ``n_draws=`` still works with a FutureWarning."""
    from evalmix.models.frequentist import STATSMODELS_DEFAULTS, fit_statsmodels

    assert "draws" in STATSMODELS_DEFAULTS and "n_draws" not in STATSMODELS_DEFAULTS
    opts = {"method": "laplace", "seed": 3, "slopes": (), "random": ["scenario", "persona"]}
    with pytest.warns(FutureWarning, match=r"fit_statsmodels\(n_draws=...\) is now "):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            old = fit_statsmodels(table, n_draws=300, **opts)
    new = _quiet(fit_statsmodels, table, draws=300, **opts)
    assert new.provenance.get("probability_draws", 300) == 300
    pd.testing.assert_frame_equal(_fixed(old), _fixed(new))
    with pytest.raises(InvalidOptionError, match="give draws= only"):
        fit_statsmodels(table, n_draws=300, draws=300, **opts)
