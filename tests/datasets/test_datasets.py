"""The bundled data sets: equal to the ../shared/data CSVs, read with fitting roles."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest
from conftest import REFERENCE, SHARED_DATA, SHARED_FILES

import evalmix
import evalmix.datasets
from evalmix.errors import DroppedRowsWarning, EvalmixError

HASHES = json.loads((REFERENCE / "datasets" / "hashes.json").read_text())


def frame_hash(frame: pd.DataFrame) -> str:
    """As tests/reference/datasets/build_datasets.py records it."""
    values = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return f"{list(frame.columns)}:{int(values.sum(dtype='uint64'))}:{len(frame)}"


def quiet(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        return evalmix.datasets.load_table(name, **kw)


def test_names_are_the_documented_six():
    assert evalmix.datasets.names() == [
        "mtbench_position_bias", "mtbench_repetition", "devbench_repetition", "pandalm",
        "wildbench", "mtbench_human"]
    assert set(SHARED_FILES) == set(evalmix.datasets.names()) == set(HASHES)


@pytest.mark.parametrize("name", list(SHARED_FILES))
def test_bundled_table_equals_the_shared_csv(name):
    """Against the frozen hash of ``pandas.read_csv`` of the shared CSV (recorded when
    the Parquet was built) and, where ../shared/data sits beside the repository, against
    the CSV itself."""
    frame = evalmix.datasets.load(name)
    assert HASHES[name]["file"] == SHARED_FILES[name]
    assert frame_hash(frame) == HASHES[name]["hash"]
    csv = SHARED_DATA / SHARED_FILES[name]
    if csv.exists():
        pd.testing.assert_frame_equal(frame, pd.read_csv(csv))
        assert frame_hash(pd.read_csv(csv)) == HASHES[name]["hash"]


def test_hash_tells_a_changed_value_apart():
    frame = evalmix.datasets.load("mtbench_repetition")
    changed = frame.copy()
    changed.loc[17, "outcome"] = "tie" if changed.loc[17, "outcome"] != "tie" else "a"
    assert frame_hash(changed) != frame_hash(frame)


def test_load_returns_a_fresh_frame_and_rejects_unknown_names():
    a = evalmix.datasets.load("pandalm")
    a.loc[0, "outcome"] = "changed"
    assert evalmix.datasets.load("pandalm").loc[0, "outcome"] != "changed"
    with pytest.raises(EvalmixError, match=r"no bundled data set named 'mtbench'.*"
                                           r"'mtbench_position_bias'"):
        evalmix.datasets.load("mtbench")


def test_load_table_mtbench_position_bias_roles_and_counts():
    with pytest.warns(DroppedRowsWarning, match=r"dropped 32 of 14400 rows"):
        t = evalmix.datasets.load_table("mtbench_position_bias")
    assert t.kind == "pairwise" and t.has_order and t.ties == "half"
    assert t.roles.first_shown == "first_shown"
    assert dict(t.roles.clusters) == {"item": "item_id", "item_group": "item_group",
                                      "judge": "judge"}
    assert t.n_obs == 14_368 and t.n_ties == 1_010
    assert {r: t.n_levels(r) for r in t.clusters} == {"item": 80, "item_group": 8, "judge": 3}
    assert t.pairs_read["both_orders"] == 7_200
    assert t.source.endswith("mtbench_position_bias.parquet")


def test_load_table_overrides_defaults_key_by_key():
    t = quiet("mtbench_position_bias", ties="exclude",
              clusters={"item": "item_id", "judge": "judge"})
    assert t.ties == "exclude" and t.clusters == ("item", "judge")
    assert dict(t.dropped) == {"na_outcome": 32, "tie_excluded": 1_010}


@pytest.mark.parametrize("name, rows, used, levels", [
    ("mtbench_repetition", 5_184, 5_184 - 28, {"item": 24, "item_group": 8, "judge": 9}),
    ("devbench_repetition", 3_888, 3_888 - 2, {"item": 18, "item_group": 3, "judge": 9}),
    ("pandalm", 4_995, 4_995 - 25, {"item": 170, "item_group": 50, "judge": 5}),
    ("wildbench", 29_653, 29_653, {"item": 1_024, "judge": 2}),
    ("mtbench_human", 2_983, 2_983, {"item": 1_232, "item_group": 8, "judge": 66}),
])
def test_load_table_other_sets(name, rows, used, levels):
    t = quiet(name)
    assert t.n_raw == rows and t.n_obs == used
    assert {r: t.n_levels(r) for r in levels} == levels
    if name == "wildbench":
        assert t.kind == "scores" and t.has_condition and t.outcome_type == "numeric"
    elif name in ("pandalm", "mtbench_human"):
        assert t.kind == "pairwise" and not t.has_order
    else:
        assert t.has_order and t.pairs_read["one_order_only"] == 0
        assert t.replicate == "rep" and "rep" not in t.roles.clusters.values()
        assert t.pairs_read["comparisons"] == rows // 2   # each run's AB with its BA


def test_mtbench_categories_are_a_stratum_by_default():
    """MT-Bench's 8 categories were chosen, not sampled (issue 26): the bundled table
    holds them fixed, so the recommendation never clusters by them; clusters= without
    them drops the default stratum, and strata=[] takes them as sampled again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.datasets.load_table("mtbench_position_bias")
        assert t.strata == ("item_group",)
        assert "item_group" not in t.sampled
        assert evalmix.datasets.load_table(
            "mtbench_position_bias", clusters={"item": "item_id", "judge": "judge"}).strata == ()
        assert "item_group" in evalmix.datasets.load_table(
            "mtbench_position_bias", strata=[]).sampled
