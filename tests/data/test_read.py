"""Reading good input: readers agree, roles files, tie policies, dropped rows, AB/BA
matching, immutability, outcome types and the design summary of a hand-built table.

Expected numbers are counted by hand from the small tables built here.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

import evalmix
from evalmix.data.summary import factor_relation
from evalmix.errors import DroppedRowsWarning, EvalmixError, EvalmixWarning, InvalidTableError

PAIR_KW = dict(outcome="outcome", model_a="model_a", model_b="model_b",
               first_shown="first_shown", clusters={"item": "item", "judge": "judge"})


def pair_frame() -> pd.DataFrame:
    """3 items x 2 judges x both orders = 12 judgments: 5 'a', 3 'b', 3 'tie', 1 NA."""
    outcomes = ["a", "a", "b", "tie", "a", None, "tie", "b", "a", "tie", "b", "a"]
    rows = []
    k = 0
    for item in ("007", "7", "i3"):  # "007" and "7" are different items
        for judge in (1, 2):
            for first in ("a", "b"):
                rows.append({"item": item, "judge": judge, "model_a": "base",
                             "model_b": "new", "first_shown": first, "outcome": outcomes[k]})
                k += 1
    return pd.DataFrame(rows)


def read_quiet(source, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        return evalmix.read(source, **kw)


# ---------------------------------------------------------------- readers agree
def test_csv_parquet_jsonl_and_dataframe_give_identical_tables(tmp_path: Path):
    df = pair_frame()
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_csv(tmp_path / "t.tsv", index=False, sep="\t")
    df.to_parquet(tmp_path / "t.parquet", index=False)
    df.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    ref = read_quiet(df, **PAIR_KW)
    assert ref.n_levels("item") == 3  # "007" and "7" stay distinct
    assert list(ref.levels("judge")) == ["1", "2"]
    for name in ("t.csv", "t.tsv", "t.parquet", "t.jsonl"):
        t = read_quiet(tmp_path / name, **PAIR_KW)
        assert t.source == str(tmp_path / name)
        pd.testing.assert_frame_equal(t.data, ref.data, check_dtype=True)
        assert dict(t.dropped) == dict(ref.dropped) == {"na_outcome": 1}
        assert (t.n_raw, t.n_obs, t.n_ties) == (12, 11, 3)
        assert t.describe().to_dict() | {"source": ""} == ref.describe().to_dict() | {
            "source": ""}


def test_scores_readers_agree(tmp_path: Path):
    df = pd.DataFrame({"q": ["q1", "q1", "q2", "q2"], "m": ["x", "y", "x", "y"],
                       "score": [7.0, 3.5, None, 9.0]})
    df.to_csv(tmp_path / "s.csv", index=False)
    df.to_json(tmp_path / "s.jsonl", orient="records", lines=True)
    ref = read_quiet(df, outcome="score", condition="m", clusters={"item": "q"})
    for name in ("s.csv", "s.jsonl"):
        t = read_quiet(tmp_path / name, outcome="score", condition="m", clusters={"item": "q"})
        pd.testing.assert_frame_equal(t.data, ref.data)
    assert ref.outcome_type == "numeric" and ref.n_obs == 3


# ---------------------------------------------------------------- roles file
def test_toml_roles_equal_keyword_roles_and_keywords_override(tmp_path: Path):
    path = tmp_path / "roles.toml"
    path.write_text(
        'outcome = "outcome"\nmodel_a = "model_a"\nmodel_b = "model_b"\n'
        'first_shown = "first_shown"\nties = "exclude"\n\n'
        '[clusters]\nitem = "item"\njudge = "judge"\n'
    )
    by_file = read_quiet(pair_frame(), roles=path)
    by_kw = read_quiet(pair_frame(), **PAIR_KW, ties="exclude")
    pd.testing.assert_frame_equal(by_file.data, by_kw.data)
    assert by_file.roles == by_kw.roles and by_file.ties == "exclude"
    assert hash(by_file.roles) == hash(by_kw.roles)
    # keywords override the file: the tie policy ...
    t = read_quiet(pair_frame(), roles=path, ties="half")
    assert t.ties == "half" and t.n_ties == 3 and t.n_obs == 11
    # ... and clusters= merges into the file's [clusters] table (same role: keyword wins)
    df = pair_frame().assign(rater=lambda d: "r" + d["judge"].astype(str))
    t = read_quiet(df, roles=path, clusters={"judge": "rater"})
    assert dict(t.roles.clusters) == {"item": "item", "judge": "rater"}
    assert list(t.levels("judge")) == ["r1", "r2"]


def test_shipped_example_roles_file_parses():
    path = ROOT / "docs" / "examples" / "roles.toml"
    if not path.exists():
        pytest.skip("docs/examples/roles.toml not written yet")
    from evalmix.data.load import _load_roles

    spec = _load_roles(path)
    assert "outcome" in spec and isinstance(spec.get("clusters"), dict)


# ---------------------------------------------------------------- tie policies
def test_tie_policy_half():
    t = read_quiet(pair_frame(), **PAIR_KW, ties="half")
    assert t.outcome_type == "proportion" and t.n_ties == 3 and t.n_obs == 11
    ties = t.data["verdict"] == "tie"
    assert ties.sum() == 3 and (t.y[ties.to_numpy()] == 0.5).all()
    assert t.y.sum() == pytest.approx(5 + 0.5 * 3)  # 5 'a' wins, 3 ties


def test_tie_policy_exclude_drops_and_counts():
    with pytest.warns(DroppedRowsWarning, match=r"dropped 4 of 12 rows \(1 na outcome, 3 tie "
                                                r"excluded\)"):
        t = evalmix.read(pair_frame(), **PAIR_KW, ties="exclude")
    assert dict(t.dropped) == {"na_outcome": 1, "tie_excluded": 3}
    assert t.n_obs == 8 and t.n_ties == 3 and t.outcome_type == "binary"
    assert sorted(t.y) == [0.0] * 3 + [1.0] * 5
    assert "tie" not in set(t.data["verdict"])


def test_tie_policy_separate_keeps_ties_as_a_third_verdict():
    t = read_quiet(pair_frame(), **PAIR_KW, ties="separate")
    assert t.n_obs == 11 and t.outcome_type == "binary" and "tie_excluded" not in t.dropped
    v = t.data["verdict"].to_numpy()
    assert (v == "tie").sum() == 3
    assert (t.y[v == "tie"] == 0).all() and (t.y[v == "a"] == 1).all()
    assert t.y.sum() == 5  # strict model_a wins


# ---------------------------------------------------------------- dropped rows
def test_na_and_unparsed_outcomes_dropped_counted_and_warned():
    df = pd.DataFrame({"q": ["q1", "q1", "q2", "q2", "q3", "q3"],
                       "correct": ["1", "0", "NA", "maybe", "", "TRUE"]})
    # 1 of 4 readable outcomes is more than the 5% that on_unparsed='auto' drops
    with pytest.raises(InvalidTableError, match=r"1 of 4 non-missing outcomes.*'maybe'"):
        evalmix.read(df, outcome="correct", clusters={"item": "q"})
    with pytest.warns(DroppedRowsWarning, match=r"dropped 3 of 6 rows \(2 na outcome, 1 "
                                                r"unparsed outcome \(e.g. 'maybe'\)\)"):
        t = evalmix.read(df, outcome="correct", clusters={"item": "q"}, on_unparsed="drop")
    assert dict(t.dropped) == {"na_outcome": 2, "unparsed_outcome": 1}
    assert list(t.data["row"]) == [0, 1, 5] and list(t.y) == [1.0, 0.0, 1.0]
    s = t.describe().to_dict()
    assert s["rows_raw"] == 6 and s["rows_used"] == 3 and s["dropped_total"] == 3


def test_pairwise_unparsed_outcome_counted():
    df = pair_frame()
    df.loc[2, "outcome"] = "???"
    with pytest.raises(InvalidTableError, match=r"1 of 11 non-missing outcomes"):
        evalmix.read(df, **PAIR_KW)
    with pytest.warns(DroppedRowsWarning, match=r"1 unparsed outcome \(e.g. '\?\?\?'\)"):
        t = evalmix.read(df, **PAIR_KW, on_unparsed="drop")
    assert dict(t.dropped) == {"na_outcome": 1, "unparsed_outcome": 1}


def test_no_warning_when_nothing_dropped():
    df = pair_frame()
    df = df[df["item"] != "7"]  # the item with the NA outcome
    with warnings.catch_warnings():
        warnings.simplefilter("error", DroppedRowsWarning)
        t = evalmix.read(df, **PAIR_KW)
    assert dict(t.dropped) == {}


# ---------------------------------------------------------------- AB/BA matching
def test_ab_ba_records_share_a_pair_id():
    t = read_quiet(pair_frame(), **PAIR_KW)
    d = t.data
    assert t.pairs_read == {"comparisons": 6, "both_orders": 6, "one_order_only": 0}
    per_pair = d.groupby("pair_id").agg(n=("y", "size"), a_first=("a_first", "sum"),
                                        item=("item", "nunique"), judge=("judge", "nunique"))
    # the NA outcome leaves one pair with a single record
    assert sorted(per_pair["n"]) == [1] + [2] * 5
    full = per_pair[per_pair["n"] == 2]
    assert (full["a_first"] == 1).all()  # one AB and one BA record
    assert (full["item"] == 1).all() and (full["judge"] == 1).all()
    assert np.array_equal(np.sort(np.unique(t.pair_codes())), np.arange(6))
    t.check_pairs_within(["item", "judge"])  # pairs never split by item or judge


def test_matching_keys_on_cluster_roles():
    df = pair_frame().assign(order_block=lambda d: np.where(d["first_shown"] == "a", "x", "y"))
    t = read_quiet(df, **PAIR_KW)
    # order_block is not a cluster role so matching ignores it; add it via clusters it
    # would split pairs, so matching (which keys on clusters) leaves them unmatched:
    split = {**PAIR_KW, "clusters": {"item": "item", "block": "order_block"}}
    with pytest.raises(EvalmixError, match="no partner.*order_design='single'"):
        read_quiet(df, **split, order_design="matched")
    assert t.pairs_read["both_orders"] == 6 and not t.single_order
    # with no comparison in both orders, "auto" reads it as a single-order design
    single = read_quiet(df, **split)
    assert single.single_order and single.pairs_read["single_order"] == 1
    assert single.pairs_read["one_order_only"] == 12
    assert single.data["pair_id"].is_unique


def test_repeated_runs_are_grouped_with_a_warning_not_paired_in_file_order():
    df = pd.concat([pair_frame().assign(run=1), pair_frame().assign(run=2)],
                   ignore_index=True)
    with pytest.warns(EvalmixWarning, match=r"6 comparisons have several records in the "
                      r"same order \(24 records\).*replicate="):
        t = read_quiet(df, **PAIR_KW)
    assert t.pairs_read == {"comparisons": 6, "both_orders": 6, "one_order_only": 0,
                            "multi_record_comparisons": 6}
    # both runs of a comparison share its id (the NA outcome's comparison lost 2 rows)
    assert sorted(t.data.groupby("pair_id").size()) == [2, 4, 4, 4, 4, 4]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvalmixWarning)
        r = read_quiet(df, **PAIR_KW, replicate="run")
    assert r.replicate == "run" and "replicate" not in r.clusters
    assert r.pairs_read == {"comparisons": 12, "both_orders": 12, "one_order_only": 0}
    d = r.data
    assert d.groupby("pair_id")["replicate"].nunique().eq(1).all()
    # each run's AB with its BA (the NA outcome's pair, in both runs, kept one record)
    assert sorted(d.groupby("pair_id")["a_first"].nunique()) == [1, 1] + [2] * 10
    runs = pd.Series(df["run"].to_numpy()[d["row"].to_numpy()])
    assert (runs.astype(str).to_numpy() == d["replicate"].to_numpy()).all()


def test_unmatched_drop_counts_rows():
    df = pair_frame().iloc[[0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]]  # row 3's partner kept
    with pytest.warns(DroppedRowsWarning, match="1 unmatched pair"):
        t = evalmix.read(df, **PAIR_KW, unmatched="drop")
    assert t.dropped["unmatched_pair"] == 1
    assert t.pairs_read == {"comparisons": 6, "both_orders": 5, "one_order_only": 1}
    assert t.n_obs == 11 - 1 - 1  # minus the unmatched record and the NA outcome


def test_swapped_model_order_is_matched_as_the_same_comparison():
    # model_a is always the model shown first: the BA record lists the models swapped
    df = pd.DataFrame({
        "item": ["i1", "i1", "i2", "i2"],
        "model_a": ["x", "y", "x", "y"],
        "model_b": ["y", "x", "y", "x"],
        "first_shown": ["a", "a", "a", "a"],
        "outcome": ["a", "b", "b", "a"],
    })
    t = evalmix.read(df, outcome="outcome", model_a="model_a", model_b="model_b",
                     first_shown="first_shown", clusters={"item": "item"})
    assert t.pairs_read["both_orders"] == 2 and t.pairs_read["swapped_records"] == 2
    assert t.data.groupby("pair_id")["item"].nunique().eq(1).all()
    # same first_shown twice in one orientation is *not* a pair
    same = df.assign(model_a="x", model_b="y")
    with pytest.raises(EvalmixError, match="no partner"):
        evalmix.read(same, outcome="outcome", model_a="model_a", model_b="model_b",
                     first_shown="first_shown", clusters={"item": "item"})


def test_first_shown_accepts_model_names():
    df = pair_frame()
    df["first_shown"] = np.where(df["first_shown"] == "a", "base", "new")
    t = read_quiet(df, **PAIR_KW)
    ref = read_quiet(pair_frame(), **PAIR_KW)
    pd.testing.assert_frame_equal(t.data, ref.data)


def test_no_order_column_gives_pair_id_minus_one():
    t = read_quiet(pair_frame(), outcome="outcome", model_a="model_a", model_b="model_b",
                   clusters={"item": "item"})
    assert not t.has_order and (t.data["pair_id"] == -1).all()
    assert np.isnan(t.data["a_first"]).all()
    assert np.array_equal(t.pair_codes(), np.arange(t.n_obs))
    assert t.describe().pairs["order_known"] is False


# ---------------------------------------------------------------- immutability
def test_eval_table_is_immutable():
    t = read_quiet(pair_frame(), **PAIR_KW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.kind = "scores"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.data = pd.DataFrame()  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        t.y[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        t.codes("item")[0] = 3
    with pytest.raises(TypeError):
        t.dropped["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        t.roles.clusters["x"] = "y"  # type: ignore[index]
    before = t.frame()
    d = t.data
    d.loc[0, "y"] = 42.0
    d["extra"] = 1
    f = t.frame()
    f.loc[0, "judge"] = "zzz"
    pd.testing.assert_frame_equal(t.data, before)
    assert list(t.y) == list(before["y"])


def test_subset_recomputes_codes_and_keeps_counts():
    t = read_quiet(pair_frame(), **PAIR_KW)
    s = t.subset(t.data["judge"].to_numpy() == "2")
    assert s.n_obs == 6 and s.n_levels("judge") == 1 and s.n_levels("item") == 3
    assert dict(s.dropped) == {**t.dropped, "not_selected": 5} and s.n_raw == 12
    assert s.n_raw == s.n_obs + sum(s.dropped.values())
    s2 = s.subset(s.data["item"].to_numpy() != s.data["item"].iloc[0])
    assert s2.n_raw == s2.n_obs + sum(s2.dropped.values()) == 12
    assert s.codes("item").tolist() == sorted(s.codes("item").tolist())
    with pytest.raises(EvalmixError, match="selected no rows"):
        t.subset(np.zeros(t.n_obs, dtype=bool))
    with pytest.raises(EvalmixError, match="expected"):
        t.subset([True])


def test_check_cluster():
    t = read_quiet(pair_frame(), **PAIR_KW)
    assert t.check_cluster(None) == ()
    assert t.check_cluster("item") == ("item",)
    assert t.check_cluster(["judge", "item"]) == ("judge", "item")
    with pytest.raises(EvalmixError, match=r"'scenario' is not a cluster factor.*'item', "
                                           r"'judge'"):
        t.check_cluster("scenario")


# ---------------------------------------------------------------- outcome types
@pytest.mark.parametrize("values, kind, expected", [
    ([1, 0, 1, 1], "binary", [1, 0, 1, 1]),
    ([True, False, True, True], "binary", [1, 0, 1, 1]),
    (["True", "False", "true", "FALSE"], "binary", [1, 0, 1, 0]),
    (["yes", "no", "pass", "fail"], "binary", [1, 0, 1, 0]),
    ([0.25, 0.5, 1.0, 0.0], "proportion", [0.25, 0.5, 1.0, 0.0]),
    ([1, 10, 7, 3], "numeric", [1, 10, 7, 3]),
    (["1", "10", "7.5", "3"], "numeric", [1, 10, 7.5, 3]),
    ([-1.5, 2.0, 0.5, 3.0], "numeric", [-1.5, 2.0, 0.5, 3.0]),
])
def test_scores_outcome_types(values, kind, expected):
    df = pd.DataFrame({"q": ["q1", "q1", "q2", "q2"], "m": ["x", "y", "x", "y"], "v": values})
    t = evalmix.read(df, outcome="v", clusters={"item": "q"})
    assert t.kind == "scores" and t.outcome_type == kind
    assert list(t.y) == pytest.approx(expected)


def test_forced_outcome_types():
    df = pd.DataFrame({"q": ["q1", "q1", "q2", "q2"], "m": ["x", "y", "x", "y"],
                       "v": [1, 0, 1, 1]})
    assert evalmix.read(df, outcome="v", outcome_type="numeric").outcome_type == "numeric"
    assert evalmix.read(df, outcome="v", outcome_type="proportion").outcome_type == "proportion"


def test_pairwise_outcome_spellings():
    ref = read_quiet(pair_frame(), **PAIR_KW)
    num = pair_frame()
    num["outcome"] = num["outcome"].map({"a": 1.0, "b": 0.0, "tie": 0.5})
    names = pair_frame()
    names["outcome"] = names["outcome"].map({"a": "base", "b": "new", "tie": "TIE"})
    for df in (num, names):
        t = read_quiet(df, **PAIR_KW)
        pd.testing.assert_frame_equal(t.data, ref.data)


def test_condition_and_position_columns():
    df = pd.DataFrame({"q": ["q1", "q1", "q2", "q2"], "m": [" x", "y", "x", "y"],
                       "pos": [0, 1, 0, 1], "v": [1, 0, 1, 1]})
    t = evalmix.read(df, outcome="v", condition="m", position="pos", clusters={"item": "q"})
    assert t.has_condition and list(t.data["condition"]) == ["x", "y", "x", "y"]
    assert list(t.data["position"]) == [0, 1, 0, 1]
    cond = t.describe().conditions
    assert list(cond["condition"]) == ["x", "y"] and list(cond["mean"]) == [1.0, 0.5]


# ---------------------------------------------------------------- describe()
def design_frame() -> pd.DataFrame:
    """4 items nested in 2 groups, crossed with 3 judges; item i4 has one judge missing.

    items i1, i2 in group g1; i3, i4 in g2; every item x judge cell once, except
    (i4, j3); plus the column 'alias' that relabels the items one-to-one.
    """
    rows = []
    for item, group in (("i1", "g1"), ("i2", "g1"), ("i3", "g2"), ("i4", "g2")):
        for judge in ("j1", "j2", "j3"):
            if (item, judge) == ("i4", "j3"):
                continue
            rows.append({"item": item, "group": group, "judge": judge,
                         "alias": item.upper(), "correct": int(judge != "j2")})
    return pd.DataFrame(rows)


def test_describe_numbers_on_hand_built_table():
    t = evalmix.read(design_frame(), outcome="correct",
                     clusters={"item": "item", "group": "group", "judge": "judge"})
    s = t.describe()
    f = s.factors.set_index("factor")
    assert f.loc["item", "levels"] == 4 and f.loc["group", "levels"] == 2
    assert f.loc["judge", "levels"] == 3
    # item sizes 3,3,3,2; group sizes 6,5; judge sizes 4,4,3
    assert (f.loc["item", "size_min"], f.loc["item", "size_median"],
            f.loc["item", "size_max"]) == (2, 3.0, 3)
    assert (f.loc["group", "size_min"], f.loc["group", "size_max"]) == (5, 6)
    assert (f.loc["judge", "size_min"], f.loc["judge", "size_median"]) == (3, 4.0)
    rel = {(r.factor_1, r.factor_2): (r.relation, r.share_of_combinations)
           for r in s.relations.itertuples()}
    assert rel[("item", "group")] == ("item nested in group", 0.5)
    assert rel[("item", "judge")] == ("partially crossed", round(11 / 12, 4))
    assert rel[("group", "judge")] == ("crossed", 1.0)
    d = s.to_dict()
    assert d["rows_raw"] == d["rows_used"] == 11 and d["kind"] == "scores"
    assert d["outcome_mean"] == pytest.approx(7 / 11)
    json.loads(s.to_json())
    md = s.to_markdown()
    assert "item nested in group" in md and "| item | item | 4 | 2 | 3 | 3 |" in md


def test_describe_reverse_nesting_and_equivalent_factors():
    t = evalmix.read(design_frame(), outcome="correct",
                     clusters={"group": "group", "item": "item", "alias": "alias"})
    rel = {(r.factor_1, r.factor_2): r.relation for r in t.describe().relations.itertuples()}
    assert rel[("group", "item")] == "item nested in group"
    assert rel[("item", "alias")] == "item and alias are the same grouping"


def test_factor_relation_identities():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, 200)
    b = rng.integers(0, 4, 200)
    rel, share = factor_relation(a, b)
    assert rel == "crossed" and share == 1.0
    # relabelling levels changes nothing
    perm = rng.permutation(5)
    assert factor_relation(perm[a], b) == factor_relation(a, b)


def test_describe_pairwise_ab_ba_balance():
    s = read_quiet(pair_frame(), **PAIR_KW).describe()
    p = s.pairs
    assert p["comparisons"] == 6 and p["both_orders"] == 6 and p["one_order_only"] == 0
    assert p["used_both_orders"] == 5 and p["used_one_order_only"] == 1
    assert p["share_a_first"] == pytest.approx(6 / 11)
    assert p["verdicts"] == {"a": 5, "b": 3, "tie": 3}
    d = s.to_dict()
    assert d["ties_count"] == 3 and d["dropped"] == {"na_outcome": 1}
    assert "AB/BA as read: 6 comparisons, 6 in both orders" in s.to_markdown()


def test_pairwise_condition_column_in_summary():
    df = pair_frame().assign(prompt_style=lambda d: np.where(d["item"] == "i3", "cot", "plain"))
    t = read_quiet(df, **PAIR_KW, condition="prompt_style")
    cond = t.describe().conditions
    assert list(cond.columns[:3]) == ["condition", "model_a", "model_b"]
    assert dict(zip(cond["condition"], cond["rows"], strict=True)) == {"cot": 4, "plain": 7}


@pytest.mark.parametrize("module", ["evalmix.data.read", "evalmix.data.summary",
                                    "evalmix.sim.scores", "evalmix.sim.pairwise"])
def test_docstring_examples_run(module: str):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_more_file_forms_and_id_dtypes(tmp_path: Path):
    df = pair_frame()
    ref = read_quiet(df, **PAIR_KW)
    df.to_csv(tmp_path / "t.csv.gz", index=False)
    df.to_json(tmp_path / "t.json", orient="records")  # a JSON array, not lines
    for name in ("t.csv.gz", "t.json"):
        pd.testing.assert_frame_equal(read_quiet(tmp_path / name, **PAIR_KW).data, ref.data)
    # categorical and nullable-integer id columns give the same labels
    typed = df.assign(item=df["item"].astype("category"), judge=df["judge"].astype("Int64"))
    pd.testing.assert_frame_equal(read_quiet(typed, **PAIR_KW).data, ref.data)
    with pytest.raises(EvalmixError, match="is a folder"):
        evalmix.read(tmp_path, outcome="outcome")


def test_eval_table_pickles_and_copies():
    """joblib/dask workers receive tables by pickle; deepcopy goes the same way."""
    import copy
    import pickle

    t = read_quiet(pair_frame(), **PAIR_KW)
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        pd.testing.assert_frame_equal(u.data, t.data)
        assert u.roles == t.roles and dict(u.dropped) == dict(t.dropped)
        assert dict(u.pairs_read) == dict(t.pairs_read) and u.n_raw == t.n_raw
        assert np.array_equal(u.codes("item"), t.codes("item"))
        with pytest.raises(ValueError, match="read-only"):
            u.y[0] = 1.0


def test_bare_outcome_column_is_not_a_table_of_duplicates():
    t = evalmix.read(pd.DataFrame({"correct": [1, 0, 1, 1]}), outcome="correct")
    assert t.n_obs == 4 and t.clusters == () and "_none_" in t.describe().to_markdown()


def test_check_pairs_within_raises_when_a_factor_splits_pairs():
    t = read_quiet(pair_frame(), **PAIR_KW)
    d = t.frame()
    # relabel the judge of every BA record: each complete pair now spans two judges
    d.loc[d["a_first"] == 0.0, "judge"] = "j9"
    split = dataclasses.replace(t, data=d)
    split.check_pairs_within("item")
    with pytest.raises(EvalmixError, match=r"'judge' .* splits 5 matched AB/BA pairs"):
        split.check_pairs_within(["item", "judge"])


def test_label_work_on_distinct_values_equals_the_per_row_work():
    """read normalises each distinct label once (data.parse.per_text) and spreads it
    back: the same keys as the per-row string operations, missing values None."""
    from evalmix.data.parse import _fold, nfc_labels

    raw = pd.Series(["Caf\u00e9", "Cafe\u0301", " a ", None, "1", 1, 1.0, "A", np.nan,
                     "TIE", "caf\u00e9"] * 3, dtype=object)
    text = raw.astype("string")
    per_row = text.str.normalize("NFC").str.strip().to_numpy(dtype=object, na_value=None)
    assert list(nfc_labels(text)) == list(per_row)
    folded = _fold(raw)
    assert folded[0] == folded[1] == folded[10] == "caf\u00e9"
    assert folded[4] == folded[5] == folded[6] == repr(1.0)
    assert folded[3] is None and folded[8] is None and folded[9] == "tie"
