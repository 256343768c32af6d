"""Single randomised order per comparison: reading, standardised win rate, position term.

The unit tests check the estimates against their closed forms and the CR1 standard
errors against statsmodels' cluster-robust OLS; the slow study checks coverage on a
simulated single-order table with a known position effect and an unbalanced order
(the scored model shown first 70% of the time), where the naive pooled win rate is
biased by delta * (0.7 - 0.5) and must not cover.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.compare.position import position_bias
from evalmix.errors import EvalmixError, FewClustersWarning
from evalmix.inference.estimands import build_problem, fit_problem

#: each record is its own comparison: several judgments of one item in random orders
#: are not AB/BA pairs (order_design="auto" would match an item's two orders)
KW = dict(outcome="outcome", model_a="model_a", model_b="model_b", first_shown="first_shown",
          clusters={"item": "item"}, order_design="single")


def single_order_frame(rng: np.random.Generator, *, n_items: int = 60, per_item: int = 10,
                       p_first: float = 0.7, mean: float = 0.6, spread: float = 20.0,
                       delta: float = 0.2) -> pd.DataFrame:
    """``new`` vs ``base``: P(new wins | item, s) = p_item + delta (s - 1/2), s = 1 when
    new was shown first (probability ``p_first``), p_item ~ Beta(mean * spread,
    (1 - mean) * spread). True standardised win rate ``mean``, position term ``delta``."""
    p_item = rng.beta(mean * spread, (1 - mean) * spread, n_items)
    item = np.repeat(np.arange(n_items), per_item)
    s = (rng.random(item.size) < p_first).astype(float)
    p = np.clip(p_item[item] + delta * (s - 0.5), 0, 1)
    new_won = rng.random(item.size) < p
    # half the records list the models the other way round (as a log would)
    flip = rng.random(item.size) < 0.5
    return pd.DataFrame({
        "battle_id": np.arange(item.size),
        "item": item.astype(str),
        "model_a": np.where(flip, "base", "new"),
        "model_b": np.where(flip, "new", "base"),
        "first_shown": np.where((s == 1) ^ flip, "a", "b"),
        "outcome": np.where(new_won ^ flip, "a", "b"),
    })


def test_single_order_table_is_read_and_standardised_by_hand():
    df = pd.DataFrame({
        "item": ["i1", "i1", "i2", "i2", "i3", "i3", "i4", "i4"],
        "model_a": ["new", "base", "new", "new", "base", "new", "new", "base"],
        "model_b": ["base", "new", "base", "base", "new", "base", "base", "new"],
        "first_shown": ["a", "a", "a", "b", "b", "a", "a", "b"],
        "outcome": ["a", "a", "tie", "b", "b", "a", "b", "b"],
    })
    t = evalmix.read(df, **KW)
    assert t.single_order and t.pairs_read == {"comparisons": 8, "both_orders": 0,
                                               "one_order_only": 8, "single_order": 1}
    # new's score and whether it was shown first, row by row:
    #   1: 1 first | 2: 0 second | 3: .5 first | 4: 0 second | 5: 1 first | 6: 1 first
    #   7: 0 first | 8: 1 first
    first = [1, .5, 1, 1, 0, 1]
    second = [0, 0]
    problem = build_problem(t, "controlled_win_rate", model="new")
    assert problem.details["method"].startswith("standardisation")
    assert (problem.details["n_first"], problem.details["n_second"]) == (6, 2)
    est = fit_problem(problem).beta
    assert est[0] == pytest.approx((np.mean(first) + np.mean(second)) / 2)
    assert est[1] == pytest.approx(np.mean(first) - np.mean(second))  # position term
    naive = fit_problem(build_problem(t, "win_rate", model="new")).beta[0]
    assert naive == pytest.approx(np.mean(first + second))
    # the answer shown first won 6 of the 7 decisive verdicts (all but row 7)
    row = position_bias(t, judge=None, cluster="item").iloc[-1]
    assert row["n_decisive"] == 7 and row["first_shown_win_rate"] == pytest.approx(6 / 7)
    assert row["n_clusters"] == 4 and row["first_shown_cluster"] == "item"
    assert row["n_pairs"] == 0 and np.isnan(row["flip_rate"])
    summary = t.describe()
    assert summary.pairs["single_order"] is True and summary.pairs["share_a_first"] == 5 / 8
    assert "- Order: one randomised order per comparison (8 judgments" in str(summary)


def test_cr1_standard_errors_match_statsmodels_cluster_ols():
    import statsmodels.api as sm
    df = single_order_frame(np.random.default_rng(3), n_items=25, per_item=6)
    t = evalmix.read(df, **KW)
    problem = build_problem(t, "controlled_win_rate", model="new")
    res = sm.OLS(problem.y, problem.X).fit(
        cov_type="cluster", cov_kwds={"groups": problem.cluster_codes["item"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewClustersWarning)
        wr = evalmix.interval(t, "controlled_win_rate", model="new", method="CR1",
                              cluster="item")
        pos = evalmix.interval(t, "coef", term="position", method="CR1", cluster="item")
    assert wr.estimate == pytest.approx(res.params[0], abs=1e-12)
    assert wr.se == pytest.approx(res.bse[0], rel=1e-10)
    # the coef estimand is y (model_a's score) ~ 1 + model_b dummy + (a_first - 1/2):
    # its position term is model_a's first-shown advantage, whichever side new is on
    d = t.data
    X = np.column_stack([np.ones(t.n_obs), (d["model_b"] == "new").astype(float),
                         d["a_first"] - 0.5])
    ref = sm.OLS(t.y, X).fit(cov_type="cluster", cov_kwds={"groups": t.codes("item")})
    assert pos.estimate == pytest.approx(ref.params[2], abs=1e-12)
    assert pos.se == pytest.approx(ref.bse[2], rel=1e-10)


def test_position_on_a_pairwise_table_is_refused_and_unrandomised_order_too():
    df = single_order_frame(np.random.default_rng(1), n_items=5, per_item=4)
    with pytest.raises(EvalmixError, match="position='first_shown' was given for a pairwise"):
        evalmix.read(df, outcome="outcome", model_a="model_a", model_b="model_b",
                     position="first_shown", clusters={"item": "item"})
    fixed = df.assign(model_a="new", model_b="base", first_shown="a")
    with pytest.raises(EvalmixError, match="presentation order was not randomised"):
        evalmix.read(fixed, **KW)
    # a one-sided subset cannot be adjusted: the scored model was always first
    t = evalmix.read(df, **KW)
    only_first = t.subset(((t.data["model_a"] == "new") == (t.data["a_first"] == 1)).to_numpy())
    with pytest.raises(EvalmixError, match="shown first in all .* cannot be adjusted"):
        build_problem(only_first, "controlled_win_rate", model="new")


@pytest.mark.slow
def test_single_order_coverage_position_term_and_standardised_win_rate():
    """1,000 tables of 60 items x 10 judgments (CR2 by item, t df): the standardised win
    rate and the position term cover their truths at 93-97%; the naive pooled win rate
    (biased by 0.2 x 0.2 = 0.04 towards the over-shown order) does not."""
    rng = np.random.default_rng(2026)
    reps, mean, delta = 1_000, 0.6, 0.2
    hits = {"standardised": 0, "position": 0, "naive": 0}
    for _ in range(reps):
        t = evalmix.read(single_order_frame(rng, mean=mean, delta=delta), **KW)
        std = evalmix.interval(t, "controlled_win_rate", model="new", method="CR2",
                               cluster="item")
        naive = evalmix.interval(t, "win_rate", model="new", method="CR2", cluster="item")
        # y ~ 1 + model_b dummy + (a_first - 1/2): delta for either orientation
        pos = evalmix.interval(t, "coef", term="position", method="CR2", cluster="item")
        hits["standardised"] += std.lo <= mean <= std.hi
        hits["naive"] += naive.lo <= mean <= naive.hi
        hits["position"] += pos.lo <= delta <= pos.hi
    cover = {k: v / reps for k, v in hits.items()}
    print(f"single-order coverage over {reps} tables: {cover}")
    assert 0.93 <= cover["standardised"] <= 0.97, cover
    assert 0.93 <= cover["position"] <= 0.97, cover
    assert cover["naive"] < 0.85, cover

