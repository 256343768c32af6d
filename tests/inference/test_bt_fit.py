"""Bradley-Terry on aggregated patterns (evalmix.inference.bt_fit) against the row-level
fit and sandwich it replaces: estimates and CR0-CR3 / multiway covariances to 1e-10."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalmix.errors import EvalmixError
from evalmix.inference import bt_fit
from evalmix.inference.bt_fit import aggregate, fit_bt, vcov_bt, vcov_bt_multiway
from evalmix.inference.estimands import fit_logit
from evalmix.inference.sandwich import cluster_codes, vcov_cluster, vcov_multiway


def battles(n=600, k=6, items=40, judges=3, seed=3):
    """Rows with repeated (pair, outcome, item) patterns, both orders, ties."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(0, 0.8, k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    item = rng.integers(0, items, n)
    judge = rng.integers(0, judges, n)
    p = 1 / (1 + np.exp(-(skill[a] - skill[b])))
    u = rng.random(n)
    y = np.where(u < 0.1, 0.5, (u < 0.1 + 0.9 * p).astype(float))
    return a, b, y, item, judge


def row_level(a, b, y, k):
    X = np.zeros((a.size, k))
    X[np.arange(a.size), a] = 1.0
    X[np.arange(a.size), b] = -1.0
    Xr = X[:, 1:]
    return Xr, fit_logit(Xr, y)


def padded(V):
    out = np.zeros((V.shape[0] + 1, V.shape[0] + 1))
    out[1:, 1:] = V
    return out


def close(A, B, tol=1e-10):
    return np.max(np.abs(A - B)) <= tol * max(1.0, np.max(np.abs(B)))


def test_patterns_compress_and_keep_counts():
    a, b, y, item, _ = battles(items=4)
    bt = aggregate(a, b, y, [cluster_codes(item)[0]], 6)
    assert bt.a.size <= 4 * 15 * 3 < a.size / 2  # duplicates and mirror images collapse
    assert bt.count.sum() == a.size == bt.n_obs
    assert np.all(bt.a < bt.b)
    # mirror images are one pattern: (1, 0, y=0) is (0, 1, y=1)
    one = aggregate(np.array([1, 0]), np.array([0, 1]), np.array([0.0, 1.0]),
                    [np.array([0, 0])], 2)
    assert one.count.tolist() == [2.0] and one.y.tolist() == [1.0]


def test_fit_equals_row_level_fit():
    a, b, y, item, _ = battles()
    Xr, ref = row_level(a, b, y, 6)
    fit = fit_bt(aggregate(a, b, y, [cluster_codes(item)[0]], 6))
    assert fit.theta[0] == 0.0
    assert np.max(np.abs(fit.theta[1:] - ref.beta)) < 1e-10
    assert fit.iterations == ref.iterations


@pytest.mark.parametrize("type", ["CR0", "CR1", "CR2", "CR3"])
def test_vcov_equals_row_level_sandwich(type):
    """CR2/CR3 against the per-cluster dense (m x m) path of the sandwich module, the
    implementation the leaderboard used before (clubSandwich's logit CR2)."""
    a, b, y, item, _ = battles()
    Xr, ref = row_level(a, b, y, 6)
    V_ref = vcov_cluster(Xr, ref.resid, item, type=type, working_weights=ref.working_weights)
    bt = aggregate(a, b, y, [cluster_codes(item)[0]], 6)
    V = vcov_bt(bt, fit_bt(bt), bt.clusters[0], type=type)
    assert np.all(V[0] == 0) and np.all(V[:, 0] == 0)
    assert close(V, padded(V_ref))


def test_cr2_batches_give_the_same_covariance(monkeypatch):
    a, b, y, item, _ = battles()
    bt = aggregate(a, b, y, [cluster_codes(item)[0]], 6)
    fit = fit_bt(bt)
    whole = vcov_bt(bt, fit, bt.clusters[0], type="CR2")
    monkeypatch.setattr(bt_fit, "BATCH_ENTRIES", 1)  # one cluster per batch
    assert close(vcov_bt(bt, fit, bt.clusters[0], type="CR2"), whole, 1e-12)


@pytest.mark.parametrize("type", ["CR0", "CR1", "CR2"])
def test_multiway_equals_row_level(type):
    a, b, y, item, judge = battles()
    Xr, ref = row_level(a, b, y, 6)
    V_ref = vcov_multiway(Xr, ref.resid, [item, judge], type=type,
                          working_weights=ref.working_weights).vcov
    bt = aggregate(a, b, y, [cluster_codes(item)[0], cluster_codes(judge)[0]], 6)
    assert close(vcov_bt_multiway(bt, fit_bt(bt), type=type), padded(V_ref))


def test_near_separation_warns_with_bradley_terry_advice():
    """A model that wins almost every comparison: the Newton steps stop short (100 of
    101 wins for model 0), and the warning names the ability, not a covariate or a
    `family=` option that a Bradley-Terry board does not have."""
    a = np.zeros(101, dtype=int)
    b = np.r_[np.ones(50, dtype=int), np.full(51, 2)]
    y = np.r_[np.ones(100), 0.0]
    a = np.r_[a, 1, 2]
    b = np.r_[b, 2, 1]
    y = np.r_[y, 1.0, 0.0]
    bt = aggregate(a, b, y, [np.zeros(a.size, dtype=int)], 3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bt_fit, "LOGIT_MAXIT", 1)
        with pytest.warns(Warning, match="Bradley-Terry fit did not converge") as rec:
            fit_bt(bt)
    text = " ".join(str(w.message) for w in rec)
    assert "family=" not in text and "Drop that model" in text


def test_cr2_refuses_a_cluster_with_too_many_patterns(monkeypatch):
    a, b, y, _, judge = battles()
    bt = aggregate(a, b, y, [cluster_codes(judge)[0]], 6)
    monkeypatch.setattr(bt_fit, "DENSE_MAX_SIZE", 5)
    with pytest.raises(EvalmixError, match="patterns"):
        vcov_bt(bt, fit_bt(bt), bt.clusters[0], type="CR2")


@pytest.mark.filterwarnings("ignore::evalmix.errors.FewClustersWarning")
@pytest.mark.parametrize(("cluster", "method"), [("item", "CR2"), ("item", "CR3"),
                                                 (["item", "judge"], "CR2")])
def test_leaderboard_equals_the_row_level_sandwich(cluster, method):
    """The board's abilities and covariance are those of the row-level logit fit and
    its dense sandwich (the leaderboard's implementation before the patterns)."""
    import evalmix
    from evalmix.inference.leaderboard import leaderboard
    from evalmix.sim.boards import round_robin

    d = round_robin(n_models=5, n_items=30, tie_threshold=0.4, seed=4).table().frame()
    d["judge"] = np.arange(len(d)) % 3
    table = evalmix.read(d[["model_a", "model_b", "item", "judge", "verdict"]],
                         outcome="verdict", model_a="model_a", model_b="model_b",
                         clusters={"item": "item", "judge": "judge"})
    board = leaderboard(table, cluster=cluster, method=method, seed=1, reps=500)
    models = np.sort(pd.unique(d[["model_a", "model_b"]].to_numpy().ravel()))
    a = np.searchsorted(models, table.data["model_a"].to_numpy())
    b = np.searchsorted(models, table.data["model_b"].to_numpy())
    Xr, ref = row_level(a, b, table.y, 5)
    if isinstance(cluster, str):
        Vr = vcov_cluster(Xr, ref.resid, table.codes("item"), type=method,
                          working_weights=ref.working_weights)
    else:
        Vr = vcov_multiway(Xr, ref.resid, [table.codes("item"), table.codes("judge")],
                           type=method, working_weights=ref.working_weights).vcov
    A = np.eye(5) - 1 / 5
    theta = A @ np.concatenate([[0.0], ref.beta])
    se = np.sqrt(np.diag(A @ padded(Vr) @ A.T))
    m = board.tidy().set_index("model").loc[models]
    np.testing.assert_allclose(m["estimate"], theta, rtol=0, atol=1e-10)
    np.testing.assert_allclose(m["se"], se, rtol=1e-10)
    assert (m["n_obs"] == np.bincount(a, minlength=5) + np.bincount(b, minlength=5)).all()


def test_arena_battles_recover_abilities_and_cluster_by_prompt():
    """Without answer effects and ties the simulated model is Bradley-Terry itself, so
    the board recovers the abilities within its SEs; with them (the defaults) the
    abilities are attenuated on the logit scale but keep their order."""
    from evalmix.inference.leaderboard import leaderboard
    from evalmix.sim import arena_battles

    sim = arena_battles(n_models=12, n_battles=6000, sd_output=0.0, tie_threshold=0.0,
                        seed=2)
    d = sim.data
    assert d["prompt"].nunique() <= 1500 and (d["model_a"] != d["model_b"]).all()
    board = leaderboard(sim.table(), cluster="prompt", method="CR2", seed=1, reps=500)
    m = board.tidy().set_index("model")
    truth = pd.Series(sim.truth["abilities"])[m.index]
    assert ((m["estimate"] - truth).abs() / m["se"]).max() < 3.5
    sim = arena_battles(n_models=12, n_battles=6000, seed=2)
    assert set(sim.data["outcome"]) == {"a", "b", "tie"}
    m = leaderboard(sim.table(), cluster="prompt", method="CR1", seed=1,
                    draws=500).tidy().set_index("model")
    truth = pd.Series(sim.truth["abilities"])[m.index]
    assert m["estimate"].corr(truth, method="spearman") > 0.95
