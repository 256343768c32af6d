"""The result contract (issue 16): every public result is a frozen dataclass with
``__str__`` and ``.tidy()``; ``.tidy()`` starts with :data:`evalmix.tidy.RESULT_COLUMNS`
and its rows are unique on :data:`evalmix.tidy.KEY_COLUMNS`.

Each result is built from small, fast inputs (the MCMC fit has 60 draws): these tests
check the shape of the contract, the numbers are checked by each method's own tests.
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.design.effect import design_effect, icc_anova
from evalmix.humans.budget import label_budget
from evalmix.humans.transport import transport_check
from evalmix.inference.bootstrap import cluster_bootstrap
from evalmix.inference.compare_all import compare_all
from evalmix.inference.leaderboard import leaderboard
from evalmix.inference.wild import wild_cluster_bootstrap
from evalmix.plan.headline import DESIGNS, headline_coverage
from evalmix.plan.pilot import parametric_power, pilot_power
from evalmix.plan.power import mde, power
from evalmix.plan.study import coverage
from evalmix.sim import baseline_leaderboard, clustered_scores, pairwise_judges
from evalmix.sim.judges import judge_labels
from evalmix.tidy import KEY_COLUMNS, RESULT_COLUMNS, tidy_rows


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@pytest.fixture(scope="module")
def scores():
    return clustered_scores(30, 6, p=0.7, icc=0.2, seed=1).table()


@pytest.fixture(scope="module")
def judged():
    return _quiet(pairwise_judges(8, 3, 3, 2, tie_threshold=0, seed=1).table)


def _humans():
    """Two humans on 60 of 200 units, a judge on all of them."""
    d = judge_labels(10, 10, n_labelled=60, models={"A": {"mu": 0.3, "fp": -2, "fn": -2}},
                     seed=1).data
    second = d[d["rater"] == "human"].assign(rater="human2", score=lambda f: 1 - f["score"])
    return pd.concat([d, second.iloc[::3]], ignore_index=True)


def _xy(table):
    return np.ones((table.n_obs, 1)), table.y, table.codes("cluster")


BUILDERS = {
    "IntervalResult": lambda s, j: evalmix.interval(s, "mean", method="CR2",
                                                    cluster="cluster"),
    "BootstrapResult": lambda s, j: cluster_bootstrap(*_xy(s), reps=199, seed=1),
    "WildResult": lambda s, j: wild_cluster_bootstrap(*_xy(s), target=0, reps=199,
                                                      null=0.7, seed=1),
    "ComparisonResult": lambda s, j: compare_all(j, cluster="scenario", reps=199, seed=1),
    "StatisticBootstrap": lambda s, j: evalmix.bootstrap(
        s, "m = mean(y)\nn = count()", cluster="cluster", reps=50, seed=1, progress=False),
    "PermutationResult": lambda s, j: evalmix.permutation_test(
        j, cluster="scenario", reps=50, seed=1, progress=False),
    "LeaderboardResult": lambda s, j: _quiet(
        leaderboard, baseline_leaderboard(6, 30, seed=2).table(), cluster="item",
        by="judge", seed=1, draws=500),
    "ICCResult": lambda s, j: icc_anova(s.y, s.codes("cluster")),
    "DesignEffectResult": lambda s, j: design_effect(j),
    "PowerResult": lambda s, j: power([0.05, 0.1], n_clusters=[[10], [20], [40]],
                                      cluster_size=5, icc=0.1, sd=0.5),
    "PowerResult (mde)": lambda s, j: mde(0.8, n_clusters=[10, 20], cluster_size=5, icc=0.1,
                                          sd=0.5),
    "PilotPowerResult": lambda s, j: pilot_power(s, n_clusters=[10, 20], null=0.5, reps=100,
                                                 seed=1),
    "PilotPowerResult (parametric)": lambda s, j: parametric_power(
        {"scenario": 0.4, "item": 0.0}, n_levels={"scenario": 8, "item": 4},
        vary={"scenario": [8, 16]}, estimand="mean", family="gaussian", residual_sd=1.0,
        effect=0.3, reps=100, seed=3),
    "HeadlineCoverage": lambda s, j: headline_coverage([next(iter(DESIGNS))], reps=4,
                                                       progress=False),
    "CoverageResult": lambda s, j: coverage(
        ["naive", "CR1"], [{"n_clusters": 20, "cluster_size": 5, "icc": 0.1},
                           {"n_clusters": 30, "cluster_size": 5, "icc": 0.2}],
        reps=50, seed=1, progress=False),
    "SimResult": lambda s, j: pairwise_judges(4, 2, 2, 2, seed=1),
    "GStudyResult": lambda s, j: evalmix.gstudy(j, seed=1, reps=50, progress=False),
    "DStudyResult": lambda s, j: evalmix.dstudy(j, target=0.8, budget=5000, seed=1,
                                                reps=50, progress=False),
    "ProjectionStudy": lambda s, j: _projection(),
    "ModelFit (statsmodels)": lambda s, j: _quiet(evalmix.fit, j, backend="statsmodels",
                                                  seed=1),
    "ModelFit (strata)": lambda s, j: _quiet(evalmix.fit, j, backend="statsmodels",
                                             by="judge", seed=1),
    "AgreementResult": lambda s, j: evalmix.agreement(_humans(), seed=1, reps=99,
                                                      cluster="cluster"),
    "AltTestResult": lambda s, j: evalmix.alt_test(_humans(), min_items=10),
    "PPIResult": lambda s, j: evalmix.ppi(_humans(), judge="judge", cluster="cluster"),
    "RoganGladenResult": lambda s, j: evalmix.rogan_gladen(_humans(), judge="judge"),
    "TransportResult": lambda s, j: transport_check(
        judge_labels(20, 10, n_labelled=200, seed=1).data, by="model", rating="score"),
    "LabelBudget": lambda s, j: label_budget(_humans(), judge="judge", target_se=0.05),
    "RunComparison": lambda s, j: evalmix.compare_runs([_two_runs()], reps=50, seed=1),
    "Report": lambda s, j: _quiet(evalmix.analyze, j, methods=["naive", "CR2",
                                                               "glmm_laplace"],
                                  reps=199, seed=3, progress=False),
}


def _two_runs():
    """Two runs of two tasks, 12 samples each, as one table (compare_runs)."""
    rng = np.random.default_rng(1)
    d = pd.DataFrame({"task": np.tile(np.repeat(["t1", "t2"], 12), 2),
                      "id": np.tile([f"t{t}/{i}" for t in (1, 2) for i in range(12)], 2),
                      "model": np.repeat(["a", "b"], 24), "y": rng.integers(0, 2, 48)})
    return evalmix.read(d, outcome="y", condition="model",
                        clusters={"item": "id", "task": "task"})


def _projection():
    from evalmix.design.gtheory import GDesign
    from evalmix.plan.dstudy_coverage import projection_study

    return projection_study(GDesign("m", ("i",)), [1.0, 0.5, 1.0], n_objects=3,
                            pilots=[{"i": 5}], targets=[{"i": 10}], n_pilots=3, sims=20,
                            seed=1, progress=False)


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def result(request, scores, judged):
    return _quiet(BUILDERS[request.param], scores, judged)


def _check_contract(r) -> pd.DataFrame:
    assert dataclasses.is_dataclass(r) and type(r).__dataclass_params__.frozen
    first = dataclasses.fields(r)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(r, first, None)
    assert any("__str__" in vars(c) for c in type(r).__mro__[:-1]), "no own __str__"
    assert str(r).strip()
    t = r.tidy()
    assert isinstance(t, pd.DataFrame) and len(t) > 0
    assert tuple(t.columns[:len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    keys = t[list(KEY_COLUMNS)]
    assert keys.notna().all().all(), "a key column holds NaN"
    dup = t.duplicated(list(KEY_COLUMNS), keep=False)
    assert not dup.any(), t.loc[dup, list(KEY_COLUMNS)]
    # selecting any row by its key returns exactly that row
    for i in (0, len(t) - 1):
        row = t.iloc[i]
        hit = t[(keys == row[list(KEY_COLUMNS)]).all(axis=1)]
        assert len(hit) == 1
    return t


def test_every_public_result_follows_the_contract(result):
    _check_contract(result)


def test_leaderboard_pairs_follow_the_contract():
    """tidy_pairs() on a board with strata: the same pair in two strata has two keys."""
    board = _quiet(leaderboard, baseline_leaderboard(5, 30, seed=2).table(), cluster="item",
                   by="judge", seed=1, draws=200)
    pairs = board.tidy_pairs()
    assert tuple(pairs.columns[:len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert pairs["stratum"].nunique() > 1
    assert not pairs.duplicated(list(KEY_COLUMNS)).any()
    assert pairs[list(KEY_COLUMNS)].notna().all().all()


@pytest.mark.mcmc
def test_bayesian_model_fit_follows_the_contract(judged):
    f = _quiet(evalmix.fit, judged, seed=1, backend=evalmix.Bayes(draws=60, tune=60),
               progress=False)
    t = _check_contract(f)
    assert set(t["estimand"]) == {"fixed_effect", "sd"} and (t["method"] == "bayes").all()


def test_model_fit_tidy_rows_are_its_tables(judged):
    f = _quiet(evalmix.fit, judged, backend="statsmodels", seed=1)
    t = f.tidy().set_index(["estimand", "contrast", "scale"])
    fe = f.fixed_effects.set_index(["term", "scale"])
    for (term, scale), row in fe.iterrows():
        got = t.loc[("fixed_effect", term, scale)]
        np.testing.assert_equal([got["estimate"], got["lo"], got["hi"]],
                                [row["estimate"], row["lo"], row["hi"]])
    v = f.variance.set_index("factor")
    for factor, row in v.iterrows():
        got = t.loc[("sd", factor, "sd")]
        np.testing.assert_equal([got["estimate"], got["lo"], got["hi"]],
                                [row["sd"], row["sd_lo"], row["sd_hi"]])
        np.testing.assert_allclose([row["var_lo"], row["var_hi"]],
                                   [row["sd_lo"] ** 2, row["sd_hi"] ** 2])
    assert not f.fixed_effects.duplicated(["term", "scale"]).any()
    assert (f.tidy()["cluster"] == "model").all() and f.strata == {}


def test_interval_details_are_read_only_and_survive_pickling(scores):
    r = evalmix.interval(scores, "mean", method="bootstrap", cluster="cluster", reps=199,
                         seed=1)
    assert r.details
    with pytest.raises(TypeError):
        r.details["extra"] = 1       # type: ignore[index]
    back = pickle.loads(pickle.dumps(r))
    assert dict(back.details) == dict(r.details)
    with pytest.raises(TypeError):
        back.details["extra"] = 1    # type: ignore[index]
    boot = cluster_bootstrap(*_xy(scores), reps=99, seed=1)
    with pytest.raises(TypeError):
        boot.details["bias"] = 0.0   # type: ignore[index]


def test_strata_are_read_only_and_pickle(judged):
    f = _quiet(evalmix.fit, judged, backend="statsmodels", by="judge", seed=1)
    with pytest.raises(TypeError):
        f.strata["judge9"] = f       # type: ignore[index]
    back = pickle.loads(pickle.dumps(dataclasses.replace(f, draws=None)))
    assert list(back.strata) == list(f.strata)
    pd.testing.assert_frame_equal(back.tidy(), f.tidy())


def test_report_tidy_is_its_interval_table(judged):
    rep = _quiet(evalmix.analyze, judged, methods=["naive", "CR2"], fast=True, reps=199,
                 seed=3, progress=False)
    t = rep.tidy()
    assert len(t) == len(rep.intervals)
    assert set(rep.intervals.columns) <= set(t.columns)
    pd.testing.assert_frame_equal(t[list(rep.intervals.columns)], rep.intervals,
                                  check_dtype=False)


def test_tidy_rows_fills_the_schema():
    f = tidy_rows([{"estimate": 1.0, "cluster": None, "extra": "x"}], estimand="mean")
    assert tuple(f.columns) == RESULT_COLUMNS + ("extra",)
    assert f.loc[0, "cluster"] == "" and f.loc[0, "contrast"] == ""
    assert np.isnan(f.loc[0, "se"])
