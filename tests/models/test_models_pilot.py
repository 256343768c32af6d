"""The pilot before sampling (issue 35): each term's SD estimated from the data decides
its coordinates (centred where the data pin each level far more than the SD, else
non-centred).

Checked against the simulation's known SDs (the pilot's estimates), and on a small but
real fit of the issue's design (12,500 rows, 50 scenarios of 250 rows, no true condition
slopes): with the pilot's choice the fit passes its checks; with the prior-based choice
alone (the scenario slope's SD integrated out, a funnel once its posterior is near 0)
the same number of draws does not."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from evalmix.models import bayes
from evalmix.models.bayes._pilot import pilot_sds
from evalmix.models.bayes.pymc_model import choose_parameterization
from evalmix.models.spec import build_spec, collapse
from evalmix.models.spec._maximal import decorrelate
from evalmix.sim.designs import unique_rows


def _spec(n: int, n_scenarios: int, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = unique_rows(n, n_scenarios, seed=seed)
    spec = decorrelate(build_spec(table), "test")
    return spec, collapse(spec)


def test_pilot_recovers_the_simulated_sds_and_flags_the_absent_slopes():
    """unique_rows: SDs 0.8 (scenario), 0.5 (persona), 0.3 (author), 0.4 (judge), no
    condition slopes. The scenario SD (400 levels) within 0.1, persona's (12) within
    0.25; every condition slope's ``info * sd**2`` below 1 (-> non-centred where the
    factor has >= 10 levels) and the scenario intercept's far above (-> centred)."""
    spec, data = _spec(100_000, 400, seed=20261207)
    p = pilot_sds(spec, data)
    assert p is not None
    sd = {r.name: s for r, s in zip(spec.random, p.sd, strict=True)}
    ratio = {r.name: q for r, q in zip(spec.random, p.ratio(), strict=True)}
    assert sd["1|scenario"] == pytest.approx(0.8, abs=0.1)
    assert sd["1|persona"] == pytest.approx(0.5, abs=0.25)
    for r in spec.random:
        if r.term != "1":
            assert ratio[r.name] < 1.0, r.name
    assert ratio["1|scenario"] > 10.0
    terms = {t.name: t for t in choose_parameterization(spec, data)}
    slope = terms["condition[treatment]|scenario"]
    assert not slope.centred and not slope.marginal and slope.pilot
    # no depth cap then: the weakly identified SD is the slowest direction
    assert bayes.tree_depth(spec, list(terms.values()), data, ndim=831) is None
    assert terms["1|scenario"].centred
    # 3 authors: too few levels for the pilot's switch; the SD stays integrated out
    assert terms["condition[treatment]|author"].marginal
    old = {t.name: t for t in choose_parameterization(spec, data, pilot=False)}
    assert old["condition[treatment]|scenario"].centred
    assert bayes.tree_depth(spec, list(old.values()), data, ndim=831) == 3


def test_pilot_on_gaussian_scores_recovers_the_item_sd():
    """Gaussian scores, 300 items x 20 rows, item SD 0.6, residual SD 1, no condition
    slopes: the item SD within 0.1, the slope's ratio below 1."""
    import pandas as pd

    from evalmix import read

    rng = np.random.default_rng(3)
    g, n = 300, 20
    item = np.repeat(np.arange(g), n)
    cond = np.tile([0, 1], g * n // 2)
    y = 0.5 * cond + rng.normal(0, 0.6, g)[item] + rng.normal(0, 1.0, g * n)
    df = pd.DataFrame({"item": item.astype(str), "condition": np.where(cond, "b", "a"),
                       "y": y})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = build_spec(read(df, outcome="y", condition="condition",
                               clusters={"item": "item"}))
    assert spec.family == "gaussian"
    p = pilot_sds(spec, collapse(spec))
    assert p is not None
    assert p.sd[0] == pytest.approx(0.6, abs=0.1)
    assert p.ratio()[1] < 1.0 < p.ratio()[0]


def test_pilot_is_none_without_random_terms_or_for_the_cumulative_family():
    spec, data = _spec(2_000, 20, seed=1)
    assert pilot_sds(spec.replace(random=()), data) is None
    assert pilot_sds(spec.replace(family="cumulative"), data) is None


def _checks(fit) -> tuple[float, float, int]:
    d = fit.diagnostics
    return float(d["ess_bulk"].min()), float(d["r_hat"].max()), int(fit.divergences)


@pytest.mark.mcmc
def test_pilot_choice_passes_where_the_prior_choice_does_not(monkeypatch):
    """12,500 rows, 50 scenarios: 2 x 1,000 draws. Measured (load ~12): the pilot's
    choice min bulk ESS 665, R-hat 1.002; the prior-based one (the slope SD integrated
    out) 57 and 1.014."""
    spec, _ = _spec(12_500, 50, seed=20261207)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = bayes.fit_bayes(spec, draws=1000, seed=1)
        monkeypatch.setattr(bayes, "choose_parameterization",
                            functools.partial(choose_parameterization, pilot=False))
        old = bayes.fit_bayes(spec, draws=1000, seed=1)
    par = new.provenance["parameterization"]["condition[treatment]|scenario"]
    assert "non-centred" in par
    assert "integrated out" in old.provenance["parameterization"][
        "condition[treatment]|scenario"]
    ess, rhat, div = _checks(new)
    assert ess >= 400 and rhat <= 1.01 and div == 0, (ess, rhat, div)
    ess_old, rhat_old, _ = _checks(old)
    assert ess_old < 400 or rhat_old > 1.01, (ess_old, rhat_old)
    assert np.isfinite(ess_old)
