"""The seed's example statistics: closed forms, brute force, and the fast path."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.inference.statistics import (
    judge_agreement,
    red_flag_rate,
    rubric_delta,
    tie_adjusted_win_rate,
    weighted_composite,
)


def _frame(g: int = 25, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = g * 8
    d = pd.DataFrame({"scenario": np.repeat(np.arange(g), 8),
                      "condition": np.tile(list("AB"), n // 2)})
    u = rng.normal(0, 0.5, g)[d["scenario"]]
    d["red_flag"] = (rng.random(n) < 0.2 + 0.1 * (d["condition"] == "B") + 0.1 * u).astype(int)
    for c in ("accuracy", "safety", "helpfulness"):
        d[c] = (rng.random(n) < 0.6 + 0.1 * u).astype(int)
    d["rubric_fact"] = rng.integers(1, 6, n)
    d["rubric_tone"] = rng.integers(1, 6, n)
    d["score"] = rng.normal(size=n) + u
    return d


def test_red_flag_ratio_and_composite_equal_their_fast_expressions():
    d = _frame()
    kw = dict(cluster="scenario", reps=120, seed=4, progress=False)
    slow = evalmix.bootstrap(d, red_flag_rate, **kw)
    fast = evalmix.bootstrap(
        d, 'mean(red_flag, condition == "B") / mean(red_flag, condition == "A")', **kw)
    j = slow.names.index("B / A")
    np.testing.assert_allclose(slow.draws[:, j], fast.draws[:, 0], rtol=1e-12)
    comp = functools.partial(weighted_composite, by=None)
    c_slow = evalmix.bootstrap(d, comp, name="composite", **kw)
    c_fast = evalmix.bootstrap(
        d, "0.5 * mean(accuracy) + 0.3 * mean(safety) + 0.2 * mean(helpfulness)", **kw)
    np.testing.assert_allclose(c_slow.draws[:, 0], c_fast.draws[:, 0], rtol=1e-12)
    assert c_slow.statistic == "composite"


def test_rubric_delta_and_tie_adjusted_win_rate_closed_forms():
    d = _frame()
    got = rubric_delta(d)
    for c in ("rubric_fact", "rubric_tone"):
        m = d.groupby("condition")[c].mean()
        assert got[c] == pytest.approx(m["B"] - m["A"])
    assert got["overall"] == pytest.approx((got["rubric_fact"] + got["rubric_tone"]) / 2)
    sim = evalmix.sim.pairwise_judges(10, 2, 2, 2, seed=3)
    t = evalmix.read(sim.data, **{**sim.read_kwargs, "ties": "half"})
    w = tie_adjusted_win_rate(t.data)
    assert w["win_rate"] == pytest.approx(1 - t.y.mean())  # y is model_a's score
    ties = (t.data["verdict"] == "tie").mean()
    assert w["tie_rate"] == pytest.approx(ties)


def test_judge_agreement_equals_counting_rater_pairs():
    sim = evalmix.sim.pairwise_judges(20, 2, 2, 3, seed=5)
    t = evalmix.read(sim.data, **sim.read_kwargs)
    d = t.data
    units = ["scenario", "persona", "author", "model_b", "a_first"]
    agree = pairs = unanimous = n_units = 0
    for _, g in d.groupby(units):
        v = g["y"].to_numpy()
        if v.size < 2:
            continue
        same = [a == b for a, b in itertools.combinations(v, 2)]
        agree, pairs = agree + sum(same), pairs + len(same)
        unanimous, n_units = unanimous + all(same), n_units + 1
    got = judge_agreement(d, unit=units)
    assert got["pairwise_agreement"] == pytest.approx(agree / pairs)
    assert got["unanimous"] == pytest.approx(unanimous / n_units)
    boot = evalmix.bootstrap(t, functools.partial(judge_agreement, unit=units),
                             cluster="scenario", reps=40, seed=1, progress=False)
    # each drawn copy of a scenario is its own set of units: agreement stays in [0, 1]
    assert np.all((boot.draws >= 0) & (boot.draws <= 1)) and boot.n_failed.sum() == 0


def test_source_columns_reach_the_statistic_of_an_eval_table():
    d = _frame()
    d["scenario"] = [f"s{k:02d}" for k in d["scenario"]]  # sorted alike as text and as read
    t = evalmix.read(d, outcome="score", condition="condition",
                     clusters={"scenario": "scenario"})
    kw = dict(cluster="scenario", reps=60, seed=2, progress=False)
    on_table = evalmix.bootstrap(t, red_flag_rate, columns=d, **kw)
    on_frame = evalmix.bootstrap(d, red_flag_rate, **kw)
    np.testing.assert_allclose(on_table.draws, on_frame.draws, rtol=1e-12)
    with pytest.raises(evalmix.InvalidTableError, match="red_flag"):
        evalmix.bootstrap(t, red_flag_rate, **kw)  # the canonical frame lacks the column
