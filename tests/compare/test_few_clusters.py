"""Few clusters: the wild bootstrap decides (Webb weights), a method that cannot reach
the level gives no interval and no vote, and the headline's "too narrow" ratio is stated
only when the standard errors differ."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

import evalmix
from evalmix.compare.decide import add_decisions, headline
from evalmix.data.readers import read_log

UP = FIXTURES / "upstream"


def _rows(specs):
    return pd.DataFrame([{"estimand": "win_rate", "contrast": c, "method": m, "cluster": cl,
                          "estimate": est, "se": se, "lo": est - 2 * se, "hi": est + 2 * se,
                          "null": 0.5, "source": "design", "note": "", "n_clusters": 30}
                         for c, m, cl, est, se in specs])


def test_too_narrow_only_when_the_standard_errors_differ():
    f = _rows([("A", "naive", "", 0.6, 0.010), ("A", "CR2", "item", 0.6, 0.0101),
               ("B", "naive", "", 0.6, 0.010), ("B", "CR2", "item", 0.6, 0.012),
               ("C", "naive", "", 0.6, 0.010), ("C", "CR2", "item", 0.6, 0.008)])
    # a t critical value widens A's interval although the SEs agree
    f.loc[1, ["lo", "hi"]] = [0.6 - 2.2 * 0.0101, 0.6 + 2.2 * 0.0101]
    h = headline(add_decisions(f), cluster="item", few_levels="item").set_index("contrast")
    assert h.loc["A", "width_ratio"] > 1.05
    assert h.loc["A", "message"].startswith("naive and clustered standard errors agree")
    assert "too narrow" not in h.loc["A", "message"]
    assert h.loc["B", "message"].startswith("your error bar was 1.2x too narrow; wide")
    # a narrower clustered interval is not "wide because of few levels"
    assert h.loc["C", "message"] == "the clustered error bar is 1.2x narrower than the naive one"


@pytest.fixture(scope="module")
def alpaca():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_log(UP / "alpaca_eval" / "results")


def _analyze(table, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.analyze(table, fast=True, reps=199, seed=1, progress=False,
                               methods=["naive", "CR1", "CR2", "wild"], **kw)


def test_alpaca_eval_default_clusters_by_instruction_and_nothing_is_fragile(alpaca):
    rep = _analyze(alpaca)
    assert rep.recommendation["cluster"] == "item"
    assert rep.recommendation["strata"] == ["item_group"]
    head = rep.headline
    assert len(head) == 6 and not head["fragile"].any()
    # one row per instruction: CR2 by instruction has the leaderboard's SE (within 1%)
    iv = rep.intervals
    ratio = (iv.loc[(iv["method"] == "CR2") & (iv["cluster"] == "item"), "se"].to_numpy()
             / iv.loc[iv["method"] == "naive", "se"].to_numpy())
    assert np.allclose(ratio, 1.0, atol=0.01)
    assert head["message"].str.startswith("naive and clustered standard errors agree").all()
    # the wild rows by the 5 subsets are shown, decide (Webb weights), and do not vote
    wild = iv[(iv["method"] == "wild") & (iv["cluster"] == "item_group")]
    assert len(wild) == 6 and wild["lo"].notna().all() and not wild["votes"].any()
    assert ((wild["hi"] - wild["lo"]) < 0.25).all()


def test_alpaca_eval_subsets_sampled_wild_rows_decide_and_vote(alpaca):
    rep = _analyze(alpaca, strata=[])
    assert rep.recommendation["cluster"] == "item_group"
    iv = rep.intervals
    wild = iv[(iv["method"] == "wild") & (iv["cluster"] == "item_group")]
    # Rademacher with 5 subsets gave [0, 1] and flagged every contrast fragile
    assert wild["lo"].notna().all() and wild["votes"].all()
    assert ((wild["hi"] - wild["lo"]) < 0.25).all()
    assert rep.headline["fragile"].sum() <= 1


def test_unreachable_wild_rows_give_no_interval_and_no_vote():
    rng = np.random.default_rng(2)
    g = np.repeat(np.arange(2), 40)
    frame = pd.DataFrame({"y": rng.integers(0, 2, 80), "group": g,
                          "model": np.tile(["m1", "m2"], 40)})
    t = evalmix.read(frame, outcome="y", condition="model", clusters={"group": "group"})
    rep = _analyze(t)
    wild = rep.intervals[rep.intervals["method"] == "wild"]
    assert len(wild) and wild["lo"].isna().all() and not wild["votes"].any()
    assert wild["note"].str.contains("cannot reach the 95% level").all()


def test_stratified_scores_truth_is_the_weighted_population_score():
    """The truth (Gauss-Hermite, weights = the strata's shares of items) against the
    mean of a large simulated sample, and against a Monte Carlo integral."""
    from scipy.special import expit

    from evalmix.sim.designs import stratified_scores

    sim = stratified_scores({"a": -1.0, "b": 1.0}, [5000, 15000], item_sd=0.8,
                            slope_sd=0.3, intercept=0.2, condition_effect=0.4, seed=3)
    t = sim.truth
    assert t["weights"] == [0.25, 0.75]
    z = np.random.default_rng(0).normal(size=400_000)
    mc = 0.25 * expit(-0.8 + 0.8 * z).mean() + 0.75 * expit(1.2 + 0.8 * z).mean()
    assert t["control"] == pytest.approx(mc, abs=2e-3)
    means = sim.data.groupby("condition")["y"].mean()
    assert means["control"] == pytest.approx(t["control"], abs=0.012)
    assert means["treatment"] == pytest.approx(t["treatment"], abs=0.012)
    table = sim.table()
    assert table.strata == ("subset",) and table.sampled == ("item",)
