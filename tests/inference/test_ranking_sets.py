"""Step-down rank confidence sets, tau-best sets and tie groups (evalmix.inference.ranking)
against csranks (Mogstad, Romano, Shaikh & Wilhelm 2024), frozen by
tests/reference/ranks/csranks_reference.R from the package's own R code.

csranks draws its bootstrap anew at every step and evalmix keeps one set of draws, so
the two agree wherever a bound is not on the edge of its critical value: the reference
records, per bound, whether five csranks seeds agreed (``*_stable``); the bounds on
which those and three evalmix seeds agree are compared exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference.leaderboard import leaderboard
from evalmix.inference.ranking import (
    all_pairs,
    maxt_critical,
    pair_se,
    rank_intervals,
    rank_sets,
    tau_best,
    tie_groups,
)
from evalmix.sim.boards import round_robin

REF = REFERENCE / "ranks"
DRAWS = 20_000  # as the reference (csranks' R)
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def pisa() -> pd.DataFrame:
    return pd.read_csv(REF / "csranks_pisa.csv").merge(
        pd.read_csv(REF / "pisa2018_math.csv"), on="jurisdiction", validate="1:1")


def _sets(x, V, seed=1, **kw):
    return rank_sets(x, V, draws=DRAWS, rng=np.random.default_rng(seed), **kw)


def test_pisa_2018_math_published_numbers(pisa):
    # csranks' vignette: the 95% set for the top 5 has 12 countries, 11 at 90% (Sweden
    # leaves); the United Kingdom is ranked 13th, its marginal 95% set is 7 to 23
    x, V = pisa["math_score"].to_numpy(), np.diag(pisa["math_se"].to_numpy() ** 2)
    names = pisa["jurisdiction"].to_numpy()
    s95, s90 = _sets(x, V), _sets(x, V, level=0.90)
    top95, top90 = set(names[tau_best(s95, 5)]), set(names[tau_best(s90, 5)])
    assert len(top95) == 12 and len(top90) == 11
    assert top95 - top90 == {"Sweden"}
    assert top95 == set(names[pisa["best5_95"].to_numpy(bool)])
    uk = int(np.flatnonzero(names == "United Kingdom")[0])
    marg = _sets(x, V, simultaneous=False)
    assert marg.rank[uk] == 13 and marg.hi[uk] == 23
    # the lower bound is on the edge: csranks gives 7 (the vignette, R = 1000) or 8
    # (seed 1, R = 20000) by seed, and the reference marks it unstable
    assert marg.lo[uk] in (7, 8) and not pisa.loc[uk, "marg_L_stable"]


@pytest.mark.parametrize("case", ["pisa", "correlated"])
def test_rank_sets_equal_csranks(case, pisa):
    if case == "pisa":
        ref = pisa
        x, V = ref["math_score"].to_numpy(), np.diag(ref["math_se"].to_numpy() ** 2)
    else:
        ref = pd.read_csv(REF / "csranks_correlated.csv")
        x = ref["x"].to_numpy()
        V = ref[[f"V.{i}" for i in range(1, len(ref) + 1)]].to_numpy()
    runs = {name: [_sets(x, V, seed=seed, **kw) for seed in SEEDS] for name, kw in [
        ("simul", {}), ("single", {"stepdown": False}), ("marg", {"simultaneous": False}),
        ("simul90", {"level": 0.9})]}
    np.testing.assert_array_equal(runs["simul"][0].rank, ref["rank"])
    compared = 0
    for col, run, get in [
            ("simul_L", "simul", lambda s: s.lo), ("simul_U", "simul", lambda s: s.hi),
            ("single_L", "single", lambda s: s.lo), ("single_U", "single", lambda s: s.hi),
            ("marg_L", "marg", lambda s: s.lo), ("marg_U", "marg", lambda s: s.hi),
            ("best1_95", "simul", lambda s: tau_best(s, 1)),
            ("best5_95", "simul", lambda s: tau_best(s, 5)),
            ("best5_90", "simul90", lambda s: tau_best(s, 5))]:
        ours = np.array([get(s) for s in runs[run]])
        # compared where neither Monte Carlo is on the edge: csranks' five seeds agree,
        # and so do evalmix's three
        stable = ref[f"{col}_stable"].to_numpy(bool) & (ours == ours[0]).all(axis=0)
        np.testing.assert_array_equal(ours[0][stable], ref[col].to_numpy()[stable],
                                      err_msg=col)
        compared += int(stable.sum())
    assert compared >= 0.9 * 9 * len(ref)  # nearly every bound is compared
    # step-down is never wider than the single step (the same draws), and marginal
    # sets are never wider than simultaneous ones (here)
    simul, marg = runs["simul"][0], runs["marg"][0]
    single = _sets(x, V, seed=SEEDS[0], stepdown=False)
    assert (simul.lo >= single.lo).all() and (simul.hi <= single.hi).all()
    assert (marg.lo >= simul.lo).all() and (marg.hi <= simul.hi).all()


def test_stepdown_narrows_where_a_first_step_rejects():
    # two pairs far apart, each pair 2.47 SEs apart: the single step (critical value
    # 2.73 for 4 models) separates only the pairs; without those comparisons the second
    # step's critical value is that of two differences (2.24) and separates both pairs
    x = np.array([10.0, 6.5, 0.0, -3.5])
    V = np.eye(4)
    single = _sets(x, V, stepdown=False)
    step = _sets(x, V)
    assert single.lo.tolist() == [1, 1, 3, 3] and single.hi.tolist() == [2, 2, 4, 4]
    assert step.lo.tolist() == [1, 2, 3, 4] == step.hi.tolist() and step.steps == 3
    np.testing.assert_array_equal(tie_groups(x, step.better), [1, 2, 3, 4])
    np.testing.assert_array_equal(tie_groups(x, single.better), [1, 1, 2, 2])
    # single step = the inversion of the max-t intervals of maxt_critical
    i, j = all_pairs(4)
    mt = maxt_critical(V, i, j, draws=DRAWS, rng=np.random.default_rng(5))
    t = (x[i] - x[j]) / pair_se(V, i, j)
    better = np.zeros((4, 4), dtype=bool)
    better[i, j], better[j, i] = t > mt.crit, t < -mt.crit
    _, lo, hi = rank_intervals(x, better)
    np.testing.assert_array_equal(lo, single.lo)
    np.testing.assert_array_equal(hi, single.hi)
    # starting from those rejections gives the same step-down sets
    seeded = _sets(x, V, rejected=better)
    np.testing.assert_array_equal(seeded.lo, step.lo)
    np.testing.assert_array_equal(seeded.hi, step.hi)
    # a given first step that rejected nothing ends the procedure: no second look at the
    # whole family with new draws (which would test it twice)
    none = _sets(x, V, rejected=np.zeros((4, 4), dtype=bool))
    assert none.steps == 1 and not none.better.any()
    assert none.lo.tolist() == [1] * 4 and none.hi.tolist() == [4] * 4


def test_multivariate_t_sets_are_wider_than_normal():
    x = np.linspace(3, 0, 8)
    V = np.eye(8) * 0.1
    normal, t4 = _sets(x, V), _sets(x, V, df=4.0)
    assert (t4.hi - t4.lo).sum() > (normal.hi - normal.lo).sum()


def test_tie_groups_by_hand():
    est = np.array([0.0, 3.0, 2.9, -3.0])  # order: 1, 2, 0, 3
    better = np.zeros((4, 4), dtype=bool)
    better[[1, 2], 0] = better[[1, 2, 0], 3] = True
    np.testing.assert_array_equal(tie_groups(est, better), [2, 1, 1, 3])
    # one missing comparison across a boundary removes it, though neighbours differ
    better[2, 0] = False
    np.testing.assert_array_equal(tie_groups(est, better), [1, 1, 1, 2])
    assert tie_groups(est, np.zeros((4, 4), dtype=bool)).tolist() == [1, 1, 1, 1]


def test_bad_input_is_refused():
    rng = np.random.default_rng(1)
    with pytest.raises(EvalmixError, match="finite"):
        rank_sets(np.array([1.0, np.nan]), np.eye(2), rng=rng)
    with pytest.raises(EvalmixError, match=r"\(3, 3\)"):
        rank_sets(np.zeros(3), np.eye(2), rng=rng)
    with pytest.raises(InvalidOptionError, match="draws"):
        rank_sets(np.zeros(2), np.eye(2), draws=10, rng=rng)
    sets = rank_sets(np.arange(3.0), np.eye(3), draws=200, rng=rng)
    with pytest.raises(InvalidOptionError, match="tau"):
        tau_best(sets, 4)
    marg = rank_sets(np.arange(3.0), np.eye(3), draws=200, simultaneous=False, rng=rng)
    with pytest.raises(InvalidOptionError, match="simultaneous"):
        tau_best(marg, 1)


@pytest.fixture(scope="module")
def rr_board():
    sim = round_robin(n_models=7, n_items=40, tie_threshold=0.3, seed=4)
    return leaderboard(sim.table(), cluster="item", seed=2, reps=4000)


def test_leaderboard_rank_sets_tie_groups_and_top_set(rr_board):
    m = rr_board.tidy()
    p = rr_board.tidy_pairs()
    k = len(m)
    for _, r in m.iterrows():
        # step-down: inside the single-step inversion of the pairs' max-t intervals
        n_better = ((p["model_b"] == r["model"]) & p["significant"]).sum()
        n_worse = ((p["model_a"] == r["model"]) & p["significant"]).sum()
        assert 1 + n_better <= r["rank_lo"] <= r["rank"] <= r["rank_hi"] <= k - n_worse
        # a model's own set lies inside its simultaneous one
        assert r["rank_lo"] <= r["rank_lo_marginal"] <= r["rank"] <= r["rank_hi_marginal"]
        assert r["rank_hi_marginal"] <= r["rank_hi"]
    # tie groups: numbered 1, 2, ... down the board; at every boundary the models above
    # have rank sets above it and the models below sets below it
    g = m["tie_group"].to_numpy()
    assert g[0] == 1 and set(np.diff(g)) <= {0, 1}
    for cut in np.flatnonzero(np.diff(g)) + 1:
        assert (m["rank_hi"].iloc[:cut] <= cut).all() and (m["rank_lo"].iloc[cut:] > cut).all()
    assert g.max() >= 2  # the board is separable somewhere (abilities sd 1, 40 items)
    # the confidence set for the best k: rank range starting at k or better
    for top in (1, 3):
        want = m.loc[m["rank_lo"] <= top, "model"].tolist()
        assert rr_board.top_set(top) == want
        assert set(m.loc[m["rank"] <= top, "model"]) <= set(want)
    with pytest.raises(InvalidOptionError, match="k must be"):
        rr_board.top_set(k + 1)
    assert "group" in str(rr_board)


def test_leaderboard_report_shows_tie_groups(rr_board):
    from evalmix.report.leaderboard_view import leaderboard_frame, leaderboard_markdown
    m = rr_board.tidy()
    view = leaderboard_frame(m)
    assert view["tie group"].tolist() == m["tie_group"].tolist()
    assert view["own rank range"].iloc[0] == (
        f"{m['rank_lo_marginal'].iloc[0]}-{m['rank_hi_marginal'].iloc[0]}")
    text = leaderboard_markdown(m)
    assert "set for the best model: " + ", ".join(rr_board.top_set(1)) in text
    assert f"({m['tie_group'].max()} groups)" in text
