"""AB/BA classes of matched cells (issue 31, item 3).

References: a hand-computed table of eight cells (one of each kind, the counts, shares
and both rates worked out below); on the Judging-the-Judges MT-Bench file the classes
sum to the matched cells and reproduce :func:`position_bias`'s first-shown win rates,
flip rates and consistency, and :func:`evalmix.interval`'s controlled win rates; a
class share's interval equals the built-in cluster bootstrap of the mean of its
indicator with the same seed (identical draws).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.compare.position import (
    CLASS_COLUMNS,
    CLASS_QUANTITIES,
    classes_wide,
    position_bias,
    position_classes,
)
from evalmix.compare.position_classes import _cells
from evalmix.datasets import load_table

#: (verdict when model_a 'base' is shown first, verdict when 'new' is shown first)
HAND = [("a", "a"), ("b", "b"), ("a", "b"), ("b", "a"), ("tie", "tie"), ("a", "tie"),
        ("tie", "b"), ("b", "tie")]


def _hand_table(ties: str = "half", swapped: bool = False, judges: int = 1):
    """Eight matched cells, one per item. ``swapped``: the BA record lists the models
    the other way round (model_a 'new'), its verdict re-expressed."""
    flip = {"a": "b", "b": "a", "tie": "tie"}
    rows = []
    for j in range(judges):
        for i, (ab, ba) in enumerate(HAND):
            rows.append({"item": f"i{i}", "judge": f"j{j}", "model_a": "base",
                         "model_b": "new", "first_shown": "a", "outcome": ab})
            if swapped:
                rows.append({"item": f"i{i}", "judge": f"j{j}", "model_a": "new",
                             "model_b": "base", "first_shown": "a", "outcome": flip[ba]})
            else:
                rows.append({"item": f"i{i}", "judge": f"j{j}", "model_a": "base",
                             "model_b": "new", "first_shown": "b", "outcome": ba})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.read(pd.DataFrame(rows), outcome="outcome", model_a="model_a",
                            model_b="model_b", first_shown="first_shown",
                            clusters={"item": "item", **({"judge": "judge"} if judges > 1
                                                         else {})}, ties=ties)


def _pooled(frame: pd.DataFrame) -> pd.Series:
    return frame[frame["judge"] == "(all judges)"].set_index("quantity")["estimate"]


@pytest.mark.parametrize("swapped", [False, True])
def test_hand_computed_cells(swapped):
    c = position_classes(_hand_table(swapped=swapped), cluster="item", reps=99, seed=1)
    assert list(c.columns) == list(CLASS_COLUMNS)
    assert list(c["quantity"]) == list(CLASS_QUANTITIES)
    by = c.set_index("quantity")
    counts = by["count"].dropna().astype(int).to_dict()
    assert counts == {"stable_condition_win": 2, "stable_slot_win": 2, "stable_tie": 1,
                      "flip": 3, "condition_win_a": 1, "condition_win_b": 1,
                      "slot_win_first": 1, "slot_win_second": 1, "flip_to_a": 1,
                      "flip_to_b": 2}
    assert (by["n_cells"] == 8).all() and (by["n_clusters"] == 8).all()
    assert by.loc["stable_condition_win", "estimate"] == 0.25
    assert by.loc["flip", "estimate"] == 0.375
    # decisive verdicts: 2 in each of cells 1-4, 1 in each flip = 11; won by the answer
    # shown first: cells 1, 2 (one each), 3 (both), 6 and 7 (their decisive one) = 6
    assert by.loc["first_shown_win_rate", "estimate"] == pytest.approx(6 / 11)
    # new's score averaged over both orders: 0, 1, .5, .5, .5, .25, .75, .75 -> 4.25 / 8
    assert by.loc["controlled_win_rate", "estimate"] == pytest.approx(4.25 / 8)
    lo, hi = by["lo"].to_numpy(float), by["hi"].to_numpy(float)
    est = by["estimate"].to_numpy(float)
    assert np.all(lo <= est + 1e-12) and np.all(est <= hi + 1e-12)


def test_hand_cells_under_separate_ties():
    c = position_classes(_hand_table("separate"), reps=99, seed=1).set_index("quantity")
    # a tie scores 0 for new: 0, 1, .5, .5, 0, 0, .5, .5 -> 3 / 8
    assert c.loc["controlled_win_rate", "estimate"] == pytest.approx(3 / 8)
    assert c.loc["stable_tie", "count"] == 1 and c["cluster"].iloc[0] == "pair"


def test_excluded_ties_leave_cells_unmatched():
    c = position_classes(_hand_table("exclude"), reps=99, seed=1).set_index("quantity")
    # cells with a tie lost that record: 4 matched cells left, none of them tie or flip
    assert c.loc["stable_tie", "n_cells"] == 4
    assert c.loc["stable_tie", "count"] == 0 and c.loc["flip", "count"] == 0
    # 4 cells are too few clusters for a bootstrap interval: estimates only
    assert c["lo"].isna().all() and (c["n_clusters"] == 4).all()
    assert c.loc["stable_slot_win", "estimate"] == 0.5


def test_per_judge_blocks_and_seeds():
    c = position_classes(_hand_table(judges=2), judge="judge", cluster="item", reps=99,
                         seed=7)
    assert list(dict.fromkeys(c["judge"])) == ["j0", "j1", "(all judges)"]
    pooled = c[c["judge"] == "(all judges)"].set_index("quantity")
    assert pooled.loc["stable_slot_win", "count"] == 4 and pooled["n_cells"].iloc[0] == 16
    # the pooled block resamples items, both judges' cells of an item together
    assert pooled["n_clusters"].iloc[0] == 8
    assert c.groupby("judge")["seed"].nunique().eq(1).all() and c["seed"].nunique() == 3
    again = position_classes(_hand_table(judges=2), judge="judge", cluster="item", reps=99,
                             seed=7)
    pd.testing.assert_frame_equal(c, again)
    wide = classes_wide(c)
    assert list(wide["judge"]) == ["j0", "j1", "(all judges)"]
    assert wide.loc[2, "stable slot wins"].startswith("0.250 [")
    assert wide.loc[2, "stable slot wins"].endswith("(4)")


def test_no_matched_cells_gives_an_empty_frame():
    rows = [{"item": f"i{i}", "model_a": "x", "model_b": "y", "outcome": "a"}
            for i in range(6)]
    t = evalmix.read(pd.DataFrame(rows), outcome="outcome", model_a="model_a",
                     model_b="model_b", clusters={"item": "item"})
    out = position_classes(t, seed=1)
    assert out.empty and list(out.columns) == list(CLASS_COLUMNS)
    assert classes_wide(out).empty


# ----------------------------------------------------------- the MT-Bench file
@pytest.fixture(scope="module")
def mtbench():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_table("mtbench_position_bias")


@pytest.fixture(scope="module")
def mt_classes(mtbench):
    return position_classes(mtbench, judge="judge", cluster="item", reps=199, seed=11)


def test_mtbench_classes_sum_to_the_matched_cells(mtbench, mt_classes):
    c = mt_classes
    main = ["stable_condition_win", "stable_slot_win", "stable_tie", "flip"]
    counts = c.pivot(index="judge", columns="quantity", values="count")[main]
    cells = c.groupby("judge")["n_cells"].first()
    np.testing.assert_array_equal(counts.sum(axis=1).to_numpy(), cells.loc[counts.index])
    shares = c.pivot(index="judge", columns="quantity", values="estimate")[main]
    np.testing.assert_allclose(shares.sum(axis=1), 1.0, rtol=1e-12)
    # 7,200 comparisons in both orders; 32 NA verdicts leave 7,171 complete cells
    assert cells.loc["(all judges)"] == 7171 == cells.drop("(all judges)").sum()
    pos = position_bias(mtbench, judge="judge", cluster="item").set_index("judge")
    np.testing.assert_array_equal(pos.loc[cells.index, "n_pairs"], cells)


def test_mtbench_classes_reproduce_the_position_table(mtbench, mt_classes):
    est = mt_classes.pivot(index="judge", columns="quantity", values="estimate")
    cells = _cells(mtbench.data)
    matched = mtbench.subset(mtbench.data["pair_id"].isin(cells["pair_id"]).to_numpy())
    pos = position_bias(matched, judge="judge", cluster="item").set_index("judge")
    # on the matched rows the first-shown win rate is the same sum, to rounding
    np.testing.assert_allclose(est["first_shown_win_rate"],
                               pos.loc[est.index, "first_shown_win_rate"], rtol=1e-12)
    # the stable slot wins are the flip rate; condition wins and ties the consistency
    np.testing.assert_allclose(est["stable_slot_win"], pos.loc[est.index, "flip_rate"],
                               rtol=1e-12)
    np.testing.assert_allclose(est["stable_condition_win"] + est["stable_tie"],
                               pos.loc[est.index, "consistency"], rtol=1e-12)
    # the rates the report shows for every row (29 rows lack their partner) agree to 1e-3
    full = position_bias(mtbench, judge="judge", cluster="item").set_index("judge")
    np.testing.assert_allclose(est["first_shown_win_rate"],
                               full.loc[est.index, "first_shown_win_rate"], atol=1e-3)
    assert est.loc["gemini-pro", "first_shown_win_rate"] == pytest.approx(0.350, abs=5e-4)


def test_mtbench_controlled_rate_equals_the_estimand(mtbench, mt_classes):
    cells = _cells(mtbench.data)
    matched = mtbench.subset(mtbench.data["pair_id"].isin(cells["pair_id"]).to_numpy())
    pooled = _pooled(mt_classes)
    base = evalmix.interval(matched, "controlled_win_rate", model="vicuna-13b-v1.3",
                            method="naive")
    # ties scored 1/2: the candidates' rate is 1 - the baseline's
    assert pooled["controlled_win_rate"] == pytest.approx(1 - base.estimate, rel=1e-12)
    one = matched.subset((matched.data["model_b"] == "gpt-4").to_numpy())
    mine = _pooled(position_classes(one, cluster="item", reps=99, seed=1))
    ref = evalmix.interval(one, "controlled_win_rate", contrast="gpt-4", method="naive")
    assert mine["controlled_win_rate"] == pytest.approx(ref.estimate, rel=1e-12)


def test_class_interval_is_the_builtin_cluster_bootstrap():
    # without strata (the bundled table declares the categories one): the built-in
    # bootstrap of a mean resamples the items alone
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mtbench = load_table("mtbench_position_bias", strata=[])
    c = position_classes(mtbench, cluster="item", reps=499, seed=5).set_index("quantity")
    cells = _cells(mtbench.data)
    item = mtbench.data.groupby("pair_id")["item"].first()
    frame = pd.DataFrame({"y": cells["code"].isin([2, 3]).astype(float),
                          "item": item.loc[cells["pair_id"]].to_numpy()})
    t = evalmix.read(frame, outcome="y", clusters={"item": "item"})
    ref = evalmix.interval(t, "mean", method="bootstrap", cluster="item", reps=499, seed=5,
                           ci="expanded")
    got = c.loc["stable_slot_win"]
    assert got["estimate"] == pytest.approx(ref.estimate, rel=1e-12)
    assert (got["lo"], got["hi"]) == pytest.approx((ref.lo, ref.hi), rel=1e-12)


def test_report_position_section_has_the_classes(tmp_path):
    from evalmix.sim import pairwise_judges

    table = pairwise_judges(10, 3, 2, 2, seed=1).table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=99, seed=2, progress=False)
    c = rep.position_classes
    assert set(c["judge"]) == {"judge1", "judge2", "(all judges)"}
    rep.write(tmp_path / "r")
    written = pd.read_csv(tmp_path / "r" / "position_classes.csv")
    assert len(written) == len(c)
    md = (tmp_path / "r" / "report.md").read_text()
    pos = md.index("## Position bias by judge")
    assert pos < md.index("### AB/BA classes") < md.index("## Variance components")
    assert "stable condition wins" in md
    assert "<h3>AB/BA classes</h3>" in (tmp_path / "r" / "report.html").read_text()
