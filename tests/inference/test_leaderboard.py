"""Leaderboards: K x K covariance against the stacked sandwich and evalmix.interval, Holm
against statsmodels, max-t against Tukey's studentized range and the bivariate normal,
rank intervals, Bradley-Terry against statsmodels, sparse judge strata."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE
from scipy import stats

import evalmix
from evalmix.errors import EvalmixError, FewClustersWarning, InvalidOptionError
from evalmix.inference.leaderboard import MODEL_COLUMNS, PAIR_COLUMNS, leaderboard
from evalmix.inference.ranking import (
    all_pairs,
    maxt_adjusted_p,
    maxt_critical,
    pairwise_satterthwaite,
    rank_intervals,
)
from evalmix.inference.sandwich import vcov_cluster
from evalmix.sim.boards import baseline_leaderboard, round_robin

#: Closed forms and the general sandwich agree up to rounding.
R_TOL = 1e-9
#: Monte Carlo max-t quantile with 40,000 draws: its SE is about 0.01 here (binomial
#: SE of the 95% quantile / density); 0.04 is four SEs.
MC_TOL = 0.04


@pytest.fixture(scope="module")
def small():
    return baseline_leaderboard(n_models=8, n_items=60, n_judges=3, extra_judge_prob=0.3,
                                tie_threshold=0.3, seed=11)


@pytest.fixture(scope="module")
def small_board(small):
    return leaderboard(small.table(), cluster="item", seed=1, reps=4000)


def _stacked(table):
    """Scored rows of the one-baseline design: y (model's score), dummies, labels."""
    d = table.data
    y = 1.0 - table.y  # model_a is the baseline in every row
    models = np.sort(d["model_b"].unique())
    D = (d["model_b"].to_numpy()[:, None] == models[None, :]).astype(float)
    return y, D, models


@pytest.mark.parametrize("method", ["CR1", "CR2", "CR3"])
def test_covariance_equals_stacked_sandwich(small, method):
    """All K(K-1)/2 SEs from one K x K matrix equal the sandwich of y ~ 0 + model."""
    table = small.table()
    board = leaderboard(table, cluster="item", method=method, seed=1, reps=500)
    y, D, models = _stacked(table)
    beta = np.linalg.lstsq(D, y, rcond=None)[0]
    V = vcov_cluster(D, y - D @ beta, table.codes("item"), type=method)
    index = {m: n for n, m in enumerate(models)}
    pairs = board.tidy_pairs()
    assert len(pairs) == len(models) * (len(models) - 1) // 2
    for _, r in pairs.iterrows():
        a, b = index[r["model_a"]], index[r["model_b"]]
        assert r["estimate"] == pytest.approx(beta[a] - beta[b], abs=1e-12)
        assert r["se"] == pytest.approx(np.sqrt(V[a, a] + V[b, b] - 2 * V[a, b]), rel=R_TOL)
    m = board.tidy().set_index("model")
    np.testing.assert_allclose(m.loc[models, "se"], np.sqrt(np.diag(V)), rtol=R_TOL)


def test_paired_difference_equals_interval():
    """Every model judged by every judge: a unit (item x judge) has one row per model, so
    the CR0 difference of win rates is evalmix.interval's paired difference (CR0)."""
    sim = baseline_leaderboard(n_models=5, n_items=40, n_judges=2, extra_judge_prob=1.0,
                               seed=3)
    table = sim.table()
    pairs = leaderboard(table, cluster="item", method="CR0", seed=1, reps=500).tidy_pairs()
    for _, r in pairs.head(4).iterrows():
        res = evalmix.interval(table, "difference", conditions=(r["model_a"], r["model_b"]),
                               method="CR0", cluster="item")
        assert res.paired
        # interval's "B - A" is B's win rate minus A's; the pair row is A's minus B's
        assert res.estimate == pytest.approx(-r["estimate"], rel=1e-12)
        assert res.se == pytest.approx(r["se"], rel=R_TOL)


def _satterthwaite(count: np.ndarray, factor: np.ndarray, c: np.ndarray) -> float:
    """Satterthwaite df of CR2 for contrast ``c`` of cell means (working model I).

    With ``p_g = A_g X_g M c`` and ``Omega_gh = delta_gh p_g'p_g - p_g'X_g M X_h'p_h``,
    ``df = tr(Omega)^2 / ||Omega||_F^2`` (Bell & McCaffrey 2002), for any contrast (the
    general form that compare_all used before it shared pairwise_satterthwaite).
    """
    n_m = count.sum(axis=0)
    phi = c / n_m * factor  # (G, M): value of p_g on the rows of cell (g, m)
    d = np.sum(count * phi**2, axis=1)  # p_g'p_g
    F = count * phi / np.sqrt(n_m)  # Omega = diag(d) - F F'
    f2 = np.sum(F**2, axis=1)
    trace = d.sum() - f2.sum()
    frob = np.sum(d**2) - 2 * np.sum(d * f2) + np.sum((F.T @ F) ** 2)
    return float(trace**2 / frob) if frob > 0 else float("nan")


def test_satterthwaite_for_all_pairs_equals_closed_form():
    rng = np.random.default_rng(2)
    count = rng.integers(0, 4, (30, 6)).astype(float)
    count[0] = 1
    factor = rng.uniform(1.0, 1.4, count.shape)
    i, j = all_pairs(6)
    df = pairwise_satterthwaite(count, factor, i, j)
    for p in range(len(i)):
        c = np.zeros(6)
        c[i[p]], c[j[p]] = 1.0, -1.0
        assert df[p] == pytest.approx(_satterthwaite(count, factor, c), rel=1e-10)
    single = pairwise_satterthwaite(count, factor)
    for m in range(6):
        assert single[m] == pytest.approx(_satterthwaite(count, factor, np.eye(6)[m]),
                                          rel=1e-10)


def test_holm_equals_statsmodels(small_board):
    from statsmodels.stats.multitest import multipletests
    pairs = small_board.tidy_pairs()
    np.testing.assert_allclose(pairs["p_holm"],
                               multipletests(pairs["p_value"], method="holm")[1], rtol=1e-12)


@pytest.mark.parametrize("k,df", [(4, np.inf), (6, 20.0)])
def test_maxt_equals_tukey_studentized_range(k, df):
    """Independent, equal-variance means: max |T| over all pairs is the studentized range
    over sqrt(2) (Tukey's HSD)."""
    i, j = all_pairs(k)
    mt = maxt_critical(2.0 * np.eye(k), i, j, level=0.95, df=df, draws=40_000,
                       rng=np.random.default_rng(4))
    exact = stats.studentized_range.ppf(0.95, k, df) / np.sqrt(2)
    assert mt.crit == pytest.approx(exact, abs=MC_TOL)


def test_maxt_equals_bivariate_normal_with_known_correlation():
    """Two contrasts sharing a model (Dunnett-type): correlation 1/2 exactly; the max-t
    critical value c solves P(|Z1| <= c, |Z2| <= c) = 0.95 for that bivariate normal."""
    V = np.eye(3)
    i, j = np.array([1, 2]), np.array([0, 0])
    mt = maxt_critical(V, i, j, level=0.95, draws=40_000, rng=np.random.default_rng(5))
    mvn = stats.multivariate_normal(mean=[0, 0], cov=[[1, 0.5], [0.5, 1]])
    c = mt.crit
    prob = mvn.cdf([c, c]) - 2 * mvn.cdf([c, -c]) + mvn.cdf([-c, -c])
    assert prob == pytest.approx(0.95, abs=0.003)
    # one contrast: the adjusted p-value is the two-sided normal p-value
    one = maxt_critical(V, i[:1], j[:1], draws=40_000, rng=np.random.default_rng(6))
    assert one.crit == pytest.approx(1.96, abs=MC_TOL)
    assert maxt_adjusted_p(one, np.array([2.0]))[0] == pytest.approx(
        2 * stats.norm.sf(2.0), abs=0.005)


def test_rank_intervals_by_hand():
    est = np.array([0.9, 0.5, 0.45, 0.1])
    better = np.zeros((4, 4), dtype=bool)
    better[0, [1, 2, 3]] = True  # model 0 beats everyone
    better[1, 3] = better[2, 3] = True
    rank, lo, hi = rank_intervals(est, better)
    assert rank.tolist() == [1, 2, 3, 4]
    assert lo.tolist() == [1, 2, 2, 4] and hi.tolist() == [1, 3, 3, 4]


def test_board_columns_ranks_and_truth(small, small_board):
    m = small_board.tidy()
    assert list(m.columns) == list(MODEL_COLUMNS)
    assert list(small_board.tidy_pairs().columns) == list(PAIR_COLUMNS)
    assert (m["estimate"].diff().dropna() <= 0).all()  # best first
    assert ((m["rank_lo"] <= m["rank"]) & (m["rank"] <= m["rank_hi"])).all()
    # rank ranges step down from the inversion of the simultaneous pairs (Klein et al.
    # 2020; Mogstad et al. 2024): never wider (tests/inference/test_ranking_sets.py)
    p = small_board.tidy_pairs()
    for _, r in m.iterrows():
        n_better = ((p["model_b"] == r["model"]) & p["significant"]).sum()
        n_worse = ((p["model_a"] == r["model"]) & p["significant"]).sum()
        assert r["rank_lo"] >= 1 + n_better and r["rank_hi"] <= len(m) - n_worse
    # estimates are the row means of each model's score; the baseline is not ranked
    d = small.data
    score = (d["outcome"] == "b") + 0.5 * (d["outcome"] == "tie")
    by_hand = score.groupby(d["model_b"]).mean()
    np.testing.assert_allclose(m.set_index("model")["estimate"], by_hand[m["model"]],
                               rtol=1e-12)
    assert small_board.baseline == "baseline" and "baseline" not in set(m["model"])
    assert (p["sim_hi"] - p["sim_lo"] > p["hi"] - p["lo"]).all()
    text = str(small_board)
    assert "win rate vs 'baseline'" in text and "rank range" in text


def test_invariant_to_row_order_and_labels(small):
    a = leaderboard(small.table(), cluster="item", seed=3, reps=2000).tidy()
    d = small.data.sample(frac=1.0, random_state=2)
    d = d.assign(item="q" + d["item"])
    b = leaderboard(evalmix.read(d, **small.read_kwargs), cluster="item", seed=3,
                    reps=2000).tidy()
    num = ["estimate", "se", "lo", "hi", "df", "rank_lo", "rank_hi", "crit"]
    np.testing.assert_allclose(a[num].to_numpy(float), b[num].to_numpy(float), rtol=1e-10)
    assert (a["tier"] == b["tier"]).all()


def test_interaction_cluster_equals_combined_column(small):
    d = small.data.assign(cell=small.data["item"] + "|" + small.data["judge"])
    t2 = evalmix.read(d, **{**small.read_kwargs, "clusters": {"item": "item",
                                                              "judge": "judge",
                                                              "cell": "cell"}})
    a = leaderboard(t2, cluster="item:judge", seed=1, reps=1000).tidy()
    b = leaderboard(t2, cluster="cell", seed=1, reps=1000).tidy()
    np.testing.assert_allclose(a["se"], b["se"], rtol=1e-12)
    assert (a["cluster"] == "item:judge").all()


def test_requested_pairs_form_their_own_family(small, small_board):
    table = small.table()
    want = [("model0", "model1"), ("model5", "model2")]
    sub = leaderboard(table, cluster="item", pairs=want, seed=1, reps=4000)
    p = sub.tidy_pairs()
    assert list(p["contrast"]) == ["model0 - model1", "model5 - model2"]
    m = small_board.tidy().set_index("model")["estimate"]
    assert p["estimate"].iloc[1] == pytest.approx(m["model5"] - m["model2"], rel=1e-12)
    assert p["crit"].iloc[0] < small_board.tidy_pairs()["crit"].iloc[0]
    pd.testing.assert_frame_equal(sub.tidy(), small_board.tidy())  # ranks: all pairs


def test_bradley_terry_equals_statsmodels():
    import statsmodels.api as sm
    sim = round_robin(n_models=5, n_items=40, seed=8)
    table = sim.table()
    board = leaderboard(table, cluster="item", method="CR1", seed=1, reps=1000)
    assert board.estimand == "bradley_terry"
    d = table.data
    models = np.sort(pd.unique(d[["model_a", "model_b"]].to_numpy().ravel()))
    X = ((d["model_a"].to_numpy()[:, None] == models).astype(float)
         - (d["model_b"].to_numpy()[:, None] == models))[:, 1:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels: non-integer successes
        fit = sm.GLM(table.y, X, family=sm.families.Binomial()).fit(
            cov_type="cluster", cov_kwds={"groups": table.codes("item")})
    theta = np.concatenate([[0.0], fit.params])
    m = board.tidy().set_index("model")
    np.testing.assert_allclose(m.loc[models, "estimate"], theta - theta.mean(), atol=1e-8)
    assert m["estimate"].sum() == pytest.approx(0.0, abs=1e-10)
    p = board.tidy_pairs().set_index("contrast")
    cov = np.zeros((5, 5))
    cov[1:, 1:] = fit.cov_params()
    for a, b in [(1, 0), (3, 2), (4, 1)]:
        r = p.loc[f"{models[a]} - {models[b]}"] if f"{models[a]} - {models[b]}" in p.index \
            else p.loc[f"{models[b]} - {models[a]}"]
        se = np.sqrt(cov[a, a] + cov[b, b] - 2 * cov[a, b])
        assert r["se"] == pytest.approx(se, rel=1e-6)
    truth = sim.truth["rank"]
    assert all(r.rank_lo <= truth[r.model] <= r.rank_hi for r in board.tidy().itertuples())


def test_sparse_judges_boards_and_empty_cells():
    sim = baseline_leaderboard(n_models=12, n_items=50, n_judges=4, extra_judge_prob=0.2,
                               seed=9)
    board = leaderboard(sim.table(), cluster="item", by="judge", seed=1, reps=1000)
    m = board.tidy()
    judged = sim.truth["cell_win_rate"]
    assert len(board.empty_cells) == 4 * 12 - len(judged)
    for judge, group in judged.groupby("judge"):
        rows = m[m["stratum"] == f"judge={judge}"]
        if len(group) >= 2:
            assert set(rows["model"]) == set(group["model"])
        else:
            assert f"judge={judge}" in board.skipped_strata
    empty = set(zip(board.empty_cells["by"], board.empty_cells["model"], strict=True))
    assert not empty & set(zip(judged["judge"], judged["model"], strict=True))
    assert "cells are empty" in str(board)


def test_errors_and_warnings(small):
    table = small.table()
    with pytest.raises(InvalidOptionError, match="'max-t', 'bonferroni', 'none'"):
        leaderboard(table, adjust="tukey")
    with pytest.raises(EvalmixError, match="'item:judge'"):
        leaderboard(table, cluster=[])  # a list is multiway (test_leaderboard_multiway.py)
    with pytest.raises(EvalmixError, match="also the cluster factor"):
        leaderboard(table, cluster="judge", by="judge")
    with pytest.raises(EvalmixError, match="not on the board"):
        leaderboard(table, cluster="item", pairs=[("model0", "baseline")])
    with pytest.raises(EvalmixError, match="needs a scores table"):
        leaderboard(table, estimand="mean")
    rr = round_robin(n_models=4, n_items=10, seed=1).table()
    with pytest.raises(EvalmixError, match="appears in every row"):
        leaderboard(rr, estimand="win_rate")
    d = pd.DataFrame({"item": ["i1", "i2", "i3", "i4"] * 2, "model_a": ["a"] * 4 + ["c"] * 4,
                      "model_b": ["b"] * 4 + ["d"] * 4, "outcome": ["a", "b"] * 4})
    split = evalmix.read(d, outcome="outcome", model_a="model_a", model_b="model_b",
                         clusters={"item": "item"})
    with pytest.raises(EvalmixError, match="disconnected"):
        leaderboard(split, estimand="bradley_terry", cluster="item")
    with pytest.warns(FewClustersWarning, match="only 3 clusters"):
        leaderboard(table, cluster="judge", reps=500, seed=1)


def test_report_table_and_plot(small_board):
    from evalmix.report import leaderboard_view as rl

    models, pairs = small_board.tidy(), small_board.tidy_pairs()
    view = rl.leaderboard_frame(models)
    assert list(view["model"]) == list(models["model"])  # best first
    assert view["rank range"].iloc[0] == f"{models['rank_lo'].iloc[0]}-{models['rank_hi'].iloc[0]}"
    md = rl.leaderboard_markdown(models, pairs, max_pairs=5)
    # two tables, each a header and a separator line plus its rows
    assert md.count("\n| ") == (2 + len(models)) + (2 + 5)
    assert "simultaneous comparisons of all pairs (max-t, critical value" in md
    html = rl.leaderboard_html(models.assign(model=models["model"] + "<x>"), pairs)
    assert "&lt;x&gt;" in html and "<x>" not in html
    closest = rl.pairs_frame(pairs, max_rows=3)
    smallest = pairs["t"].abs().sort_values(kind="stable").index[:3]
    assert list(closest["contrast"]) == list(pairs.loc[smallest, "contrast"])
    fig = rl.leaderboard_plot(models)
    ax = fig.axes[0]
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    top = labels[int(np.argmax(ax.get_yticks()))]
    assert top == f"1. {models['model'].iloc[0]}" and len(labels) == len(models)
    with pytest.raises(ValueError, match="no board for stratum"):
        rl.leaderboard_frame(models, stratum="judge=nobody")


def test_scores_board_equals_clubsandwich():
    """Condition means of a scores table: the CR2 SEs and Satterthwaite df of the three
    differences equal clubSandwich's (frozen by tests/reference/bootstrap/
    compare_reference.R: vcovCR(type='CR2') + linear_contrast(test='Satterthwaite'))."""
    import json

    ref_dir = REFERENCE / "bootstrap"
    ref = json.loads((ref_dir / "compare_reference.json").read_text())
    table = evalmix.read(pd.read_csv(ref_dir / "compare_scores.csv"), outcome="y",
                         condition="condition", clusters={"item": "item"})
    want = [("beta", "alpha"), ("gamma", "alpha"), ("gamma", "beta")]
    with pytest.warns(FewClustersWarning, match="only 18 clusters"):
        board = leaderboard(table, cluster="item", pairs=want, seed=1, reps=1000)
    assert board.estimand == "mean"
    p = board.tidy_pairs()
    np.testing.assert_allclose(p["estimate"], ref["estimate"], rtol=R_TOL)
    np.testing.assert_allclose(p["se"], ref["CR2"]["se"], rtol=R_TOL)
    np.testing.assert_allclose(p["df"], ref["CR2"]["df"], rtol=R_TOL)
    np.testing.assert_allclose(p["lo"], ref["CR2"]["lo"], rtol=R_TOL)
    np.testing.assert_allclose(p["p_value"], ref["CR2"]["p"], rtol=R_TOL)
