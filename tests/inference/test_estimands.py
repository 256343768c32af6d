"""Estimands as regression problems (evalmix.inference.estimands).

References: pandas group means computed by hand on the same rows (exact), statsmodels
OLS/GLM coefficients for ``coef`` (same design), and the simulator's design.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

import evalmix
from evalmix.errors import DroppedRowsWarning, EvalmixError, InvalidOptionError
from evalmix.inference.estimands import build_problem, fit_problem

#: Same arithmetic done two ways (pandas means vs least squares) in double precision.
EXACT_TOL = 1e-10


def _fit_est(p):
    return fit_problem(p).beta[p.target]


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(4)
    items = np.repeat(np.arange(30), 2)
    frame = pd.DataFrame({
        "item": [f"i{v}" for v in items],
        "judge": rng.choice(["j1", "j2", "j3"], size=60),
        "condition": np.tile(["base", "tuned"], 30),
        "score": rng.integers(0, 2, 60).astype(float),
    })
    frame = frame.sample(frac=1, random_state=1).reset_index(drop=True)
    return frame, evalmix.read(frame, outcome="score", condition="condition",
                               clusters={"item": "item"})


@pytest.fixture(scope="module")
def pairwise():
    return evalmix.sim.pairwise_judges(n_scenarios=10, seed=3).table()


def test_mean_overall_and_by_condition(scores):
    frame, t = scores
    p = build_problem(t, "mean")
    assert p.contrast == "overall" and p.n_obs == 60
    assert _fit_est(p) == pytest.approx(frame["score"].mean(), rel=EXACT_TOL)
    p = build_problem(t, "mean", contrast="tuned")
    assert _fit_est(p) == pytest.approx(
        frame.loc[frame.condition == "tuned", "score"].mean(), rel=EXACT_TOL)
    assert p.null == 0.5 and p.cluster_codes["item"].max() + 1 == 30
    with pytest.raises(EvalmixError, match="not found"):
        build_problem(t, "mean", contrast="nope")


def test_paired_difference_is_mean_of_item_differences(scores):
    frame, t = scores
    p = build_problem(t, "difference", conditions=("base", "tuned"))
    wide = frame.pivot(index="item", columns="condition", values="score")
    assert p.paired is True and p.n_obs == 30 and p.contrast == "tuned - base"
    assert _fit_est(p) == pytest.approx((wide.tuned - wide.base).mean(), rel=EXACT_TOL)
    # each difference keeps its item code: 30 clusters of one
    assert np.array_equal(np.sort(p.cluster_codes["item"]), np.arange(30))
    # forcing the unpaired estimator gives the same point estimate (balanced), paired=False
    r = build_problem(t, "difference", contrast="tuned - base")
    assert r.contrast == "tuned - base" and _fit_est(r) == pytest.approx(_fit_est(p))
    q = build_problem(t, "difference", conditions=("base", "tuned"), paired=False)
    assert q.paired is False and q.n_obs == 60 and q.names[1] == "condition[tuned]"
    assert _fit_est(q) == pytest.approx(_fit_est(p), rel=EXACT_TOL)


def test_difference_unpaired_when_units_do_not_match(scores):
    frame, _ = scores
    f = frame.copy()
    f["item"] = f["item"] + "_" + f["condition"]  # every item seen under one condition
    t = evalmix.read(f, outcome="score", condition="condition", clusters={"item": "item"})
    p = build_problem(t, "difference")
    assert p.paired is False
    means = f.groupby("condition")["score"].mean()
    assert _fit_est(p) == pytest.approx(means["tuned"] - means["base"], rel=EXACT_TOL)
    with pytest.raises(EvalmixError, match="paired=True"):
        build_problem(t, "difference", paired=True)


def test_partially_paired_drops_with_warning(scores):
    frame, _ = scores
    f = frame[~((frame.item == "i0") & (frame.condition == "base"))]
    t = evalmix.read(f, outcome="score", condition="condition", clusters={"item": "item"})
    with pytest.warns(DroppedRowsWarning, match="1 of 30 units"):
        p = build_problem(t, "difference")  # auto: 29 of 30 units matched (>= 90%)
    assert p.paired is True and p.n_obs == 29
    wide = f.pivot(index="item", columns="condition", values="score").dropna()
    assert _fit_est(p) == pytest.approx((wide.tuned - wide.base).mean(), rel=EXACT_TOL)
    # 5 of 30 units unmatched (83%): auto falls back to unpaired; forcing pairs warns
    g = frame[~(frame.item.isin([f"i{v}" for v in range(5)]) & (frame.condition == "base"))]
    t = evalmix.read(g, outcome="score", condition="condition", clusters={"item": "item"})
    assert build_problem(t, "difference").paired is False
    with pytest.warns(DroppedRowsWarning, match="5 of 30 units"):
        assert build_problem(t, "difference", paired=True).n_obs == 25


def test_win_rate_orientation(pairwise):
    d = pairwise.data
    p = build_problem(pairwise, "win_rate")
    assert _fit_est(p) == pytest.approx(d["y"].mean(), rel=EXACT_TOL)
    assert p.details["scored_for"] == "reference" and p.null == 0.5
    p = build_problem(pairwise, "win_rate", model="treatment")
    rows = d["model_b"] == "treatment"
    assert _fit_est(p) == pytest.approx(1 - d.loc[rows, "y"].mean(), rel=EXACT_TOL)
    assert p.contrast == "treatment vs reference"
    # a contrast naming a model is that model's win rate (the label says so)
    p = build_problem(pairwise, "win_rate", contrast="control")
    assert _fit_est(p) == pytest.approx(1 - d.loc[d.model_b == "control", "y"].mean(),
                                        rel=EXACT_TOL)
    assert p.contrast == "control vs reference"


def test_win_rate_separate_ties_scores_strict_wins():
    sim = evalmix.sim.pairwise_judges(n_scenarios=6, seed=8)
    t = sim.table(ties="separate")
    d = t.data
    p = build_problem(t, "win_rate", model="treatment")
    rows = d["model_b"] == "treatment"
    assert _fit_est(p) == pytest.approx((d.loc[rows, "verdict"] == "b").mean(), rel=EXACT_TOL)


def test_controlled_win_rate_is_average_of_orders(pairwise):
    d = pairwise.data
    p = build_problem(pairwise, "controlled_win_rate", model="treatment")
    rows = d[d.model_b == "treatment"]
    won = 1 - rows["y"]
    first = 1 - rows["a_first"]  # treatment is model_b: shown first when a_first == 0
    by_order = won.groupby(first).mean()
    assert _fit_est(p) == pytest.approx(by_order.mean(), rel=EXACT_TOL)
    assert p.names == ("(Intercept)", "position")
    assert p.pair_codes is not None and p.pair_codes.max() + 1 == p.n_obs // 2


def test_controlled_win_rate_drops_incomplete_pairs(pairwise):
    keep = np.ones(pairwise.n_obs, dtype=bool)
    keep[:3] = False  # breaks up to 3 pairs
    t = pairwise.subset(keep)
    with pytest.warns(DroppedRowsWarning, match="without their other-order partner"):
        p = build_problem(t, "controlled_win_rate")
    assert p.n_obs % 2 == 0 and p.details["rows_without_partner"] >= 1


def test_coef_linear_and_logit_match_statsmodels(pairwise):
    d = pairwise.data
    X = np.column_stack([np.ones(len(d)), (d.model_b == "treatment").astype(float),
                         d.a_first - 0.5])
    y = d["y"].to_numpy(float)
    p = build_problem(pairwise, "coef")
    assert p.names == ("(Intercept)", "model_b[treatment]", "position") and p.target == 1
    np.testing.assert_allclose(fit_problem(p).beta, sm.OLS(y, X).fit().params, rtol=1e-9)
    q = build_problem(pairwise, "coef", term="position", family="binomial")
    assert q.target == 2
    ref = sm.GLM(y, X, family=sm.families.Binomial()).fit(tol=1e-13).params
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(fit_problem(q).beta, ref, rtol=1e-7)
    assert build_problem(pairwise, "coef", term="treatment").target == 1


def test_errors(scores, pairwise):
    _, t = scores
    with pytest.raises(EvalmixError, match="pairwise table"):
        build_problem(t, "win_rate")
    with pytest.raises(InvalidOptionError, match="'mean', 'win_rate'"):
        build_problem(t, "median")
    with pytest.raises(InvalidOptionError, match="is not a coefficient"):
        build_problem(pairwise, "coef", term="nope")
    with pytest.raises(InvalidOptionError, match="family='binomial'"):
        build_problem(t, "mean", family="binomial")
    with pytest.raises(InvalidOptionError, match="two labels"):
        build_problem(t, "difference", conditions=("base",))
    with pytest.raises(EvalmixError, match="no comparison"):
        build_problem(pairwise, "win_rate", model="gpt-9")


def test_build_problem_refuses_a_misspelt_option():
    """build_problem's typed **options: a misspelt one is refused with the list."""
    t = evalmix.sim.clustered_scores(10, 5, p=0.7, icc=0.1, seed=1).table()
    with pytest.raises(InvalidOptionError, match="contrasts='x'; it takes contrast, model"):
        build_problem(t, "mean", contrasts="x")  # type: ignore[call-arg]
