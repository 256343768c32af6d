"""Leaderboards clustered multiway (issue 14): the cell-means covariance of crossed
factors equals the general multiway sandwich of y ~ 0 + model, its CR2 df equal
multiway_df of the same contrast, and a report whose recommendation is multiway CR2 has
its leaderboard at that level."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.errors import EvalmixError
from evalmix.inference.leaderboard import leaderboard
from evalmix.inference.sandwich import multiway_df, vcov_multiway
from evalmix.sim.boards import baseline_leaderboard

#: Two code paths for the same algebra (closed-form cell sums vs the general sandwich).
ALGEBRA_TOL = 1e-9


@pytest.fixture(scope="module")
def table():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return baseline_leaderboard(n_models=7, n_items=60, n_judges=4, extra_judge_prob=0.4,
                                    tie_threshold=0.3, seed=5).table()


def _stacked(table):
    d = table.data
    y = 1.0 - table.y  # model_a is the baseline in every row
    models = np.sort(d["model_b"].unique())
    D = (d["model_b"].to_numpy()[:, None] == models[None, :]).astype(float)
    beta = np.linalg.lstsq(D, y, rcond=None)[0]
    return D, y - D @ beta, models


@pytest.mark.parametrize("method", ["CR1", "CR2"])
def test_multiway_covariance_equals_the_general_sandwich(table, method):
    board = leaderboard(table, cluster=["item", "judge"], method=method, seed=1, reps=500)
    D, resid, models = _stacked(table)
    codes = [table.codes("item"), table.codes("judge")]
    V = vcov_multiway(D, resid, codes, type=method).vcov
    index = {m: n for n, m in enumerate(models)}
    for _, r in board.tidy_pairs().iterrows():
        a, b = index[r["model_a"]], index[r["model_b"]]
        assert r["se"] == pytest.approx(np.sqrt(V[a, a] + V[b, b] - 2 * V[a, b]),
                                        rel=ALGEBRA_TOL)
    m = board.tidy().set_index("model")
    np.testing.assert_allclose(m.loc[models, "se"], np.sqrt(np.diag(V)), rtol=ALGEBRA_TOL)
    assert set(m["cluster"]) == {"item+judge"}
    assert set(m["n_clusters"]) == {table.n_levels("judge")}  # G_min


def test_multiway_cr2_df_equal_multiway_df(table):
    board = leaderboard(table, cluster=["item", "judge"], method="CR2", seed=1, reps=500)
    D, resid, models = _stacked(table)
    codes = [table.codes("item"), table.codes("judge")]
    m = board.tidy().set_index("model")
    for t, model in enumerate(models[:3]):
        assert m.loc[model, "df"] == pytest.approx(
            multiway_df(D, resid, codes, target=t)[0], rel=ALGEBRA_TOL)
    # a pair as a coefficient: beta_0 = mu_a, beta_1 = mu_b - mu_a (CR2 is invariant to
    # the parametrisation)
    pairs = board.tidy_pairs()
    r = pairs.iloc[0]
    a, b = (int(np.flatnonzero(models == r["model_a"])[0]),
            int(np.flatnonzero(models == r["model_b"])[0]))
    T = np.eye(len(models))
    T[:, [0, a]] = T[:, [a, 0]]  # column 0 <-> a: mu_a is beta_0
    X = D @ T
    X[:, 0] += X[:, b]  # mu_b = beta_0 + beta_b
    swap = np.arange(len(models))
    swap[[1, b]] = swap[[b, 1]]
    X = X[:, swap]  # beta_1 = mu_b - mu_a
    assert r["df"] == pytest.approx(multiway_df(X, resid, codes, target=1)[0],
                                    rel=ALGEBRA_TOL)


def test_multiway_refuses_cr3(table):
    with pytest.raises(EvalmixError, match="multiway clustering takes method"):
        leaderboard(table, cluster=["item", "judge"], method="CR3")


def _crossed_scores(n_models=7, n_items=40, n_personas=25, seed=3):
    rng = np.random.default_rng(seed)
    grid = pd.MultiIndex.from_product([range(n_models), range(n_items), range(n_personas)],
                                      names=["m", "item", "persona"]).to_frame(index=False)
    eta = (0.1 * grid["m"] + rng.normal(0, 0.6, n_items)[grid["item"]]
           + rng.normal(0, 0.5, n_personas)[grid["persona"]])
    grid["score"] = (rng.random(len(grid)) < 1 / (1 + np.exp(-eta))).astype(int)
    grid["model"] = "model_" + grid["m"].astype(str)
    return evalmix.read(grid, outcome="score", condition="model",
                        clusters={"item": "item", "persona": "persona"})


def test_a_report_with_a_multiway_recommendation_has_its_leaderboard():
    table = _crossed_scores()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=49, seed=2, progress=False,
                              methods=["naive", "CR2"])
    assert rep.recommendation["cluster"] == "item+persona"
    assert rep.leaderboard is not None and len(rep.leaderboard) == 7
    assert set(rep.leaderboard["cluster"]) == {"item+persona"}
    assert not any("leaderboard" in w for w in rep.warnings)
    direct = leaderboard(table, cluster=["item", "persona"], method="CR2", seed=2)
    pd.testing.assert_frame_equal(rep.leaderboard, direct.tidy())
    # the leaderboard's mean for a model is the recommended headline interval's mean
    iv = rep.intervals
    cr2 = iv[(iv["method"] == "CR2") & (iv["cluster"] == "item+persona")
             & (iv["estimand"] == "mean")].set_index("contrast")
    board = rep.leaderboard.set_index("model")
    common = board.index.intersection(cr2.index)
    assert len(common) > 0
    np.testing.assert_allclose(board.loc[common, "estimate"], cr2.loc[common, "estimate"],
                               rtol=1e-12)
