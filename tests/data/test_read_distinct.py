"""read's label work on distinct values (issue 32, Arena scale): each step equals the
row-by-row pandas operation it replaces, so the table read is the same.

References: ``Series.astype("string")`` (the text of each row), ``DataFrame.duplicated``
(exact duplicate rows), ``pd.factorize(sort=True)`` on the table's text column (the cluster
codes, :func:`evalmix.data.table.dense_codes`), and ``Series.nunique``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.data.labels import Labels, distinct_text, text_labels
from evalmix.data.table import dense_codes
from evalmix.data.validate import _duplicated

ODD_TEXT = ["Caf\u00e9", "Cafe\u0301", " a ", "a", "", "  ", "\u00e9t\u00e9", "Z", "z",
            "\U0001f600", "a\x00", "10", "9", "1.0"]


@pytest.mark.parametrize("values", [
    pd.Series(ODD_TEXT * 3 + [None], dtype="str"),
    pd.Series(ODD_TEXT * 3 + [None], dtype="string"),
    pd.Series(ODD_TEXT * 3 + [None, np.nan], dtype=object),
    pd.Series([3, 1, 3, 10, -2, 0] * 4, dtype="int64"),
    pd.Series([3, None, 3, 10, 2**40] * 4, dtype="Int64"),
    pd.Series([True, False, True], dtype=bool),
    pd.Series([True, None, False], dtype="boolean"),
    pd.Series([1.0, -0.0, 0.0, np.nan, 2.5, 1e20] * 3),
    pd.Series([1, "1", 1.0, True, None, "a", np.int64(1)] * 2, dtype=object),
    pd.Series([np.int64(7), 7, 8, None] * 2, dtype=object),
    pd.Series(pd.Categorical(["b", "a", None, "b"])),
    pd.Series(pd.to_datetime(["2024-01-01", None, "2024-01-01"])),
])
def test_distinct_text_is_the_text_of_each_row(values):
    codes, text = distinct_text(values)
    per_row = values.astype("string").to_numpy(dtype=object, na_value=None)
    spread = np.append(text.to_numpy(dtype=object, na_value=None), None)[codes]
    assert list(spread) == list(per_row)
    assert text.dtype == "string" and not text.isna().any()
    assert text.is_unique


def test_text_labels_merge_nfc_spellings_and_strip():
    lab = text_labels(pd.Series(ODD_TEXT + [None], dtype="str"))
    ref = (pd.Series(ODD_TEXT + [None], dtype="string").str.normalize("NFC").str.strip()
           .to_numpy(dtype=object, na_value=None))
    assert list(lab.values()) == list(ref)
    assert len(set(lab.labels)) == len(lab.labels)  # "Café" in two spellings: one label
    assert lab.codes[0] == lab.codes[1] and lab.codes[-1] == -1
    assert lab.n_levels() == pd.Series(ref).nunique()
    rows = np.array([0, 1, 3])
    assert lab.n_levels(rows) == 2  # café and a


def test_dense_codes_from_distinct_labels_equal_factorizing_the_column():
    rng = np.random.default_rng(3)
    words = np.array(ODD_TEXT[:-3] + [str(i) for i in range(40)], dtype=object)
    lab = text_labels(pd.Series(words[rng.integers(0, words.size, 500)], dtype="str"))
    lab = Labels(lab.codes, lab.labels)
    rows = np.flatnonzero(rng.random(500) < 0.3)
    column = lab.column(rows)
    assert column.dtype == "str" and list(column) == list(lab.values(rows))
    assert np.array_equal(lab.dense(rows), pd.factorize(column, sort=True)[0])
    assert np.array_equal(lab.dense(rows), dense_codes(column.to_numpy(dtype=object)))
    assert np.array_equal(dense_codes(column.array), dense_codes(column.to_numpy(dtype=object)))


def _random_frame(rng: np.random.Generator) -> pd.DataFrame:
    n = int(rng.integers(2, 80))
    cols = {
        "i": rng.integers(0, 3, n),
        "s": pd.Series(rng.choice(["x", "y", "z"], n), dtype="str").where(rng.random(n) > .2),
        "f": rng.choice([0.0, -0.0, np.nan, 1.5], n),
        "o": pd.Series(rng.choice(np.array([1, "1", 1.0, None, True], dtype=object), n),
                       dtype=object),
        "u": np.arange(n),
    }
    keep = rng.permutation(list(cols))[: int(rng.integers(2, 5))]
    return pd.DataFrame({k: cols[k] for k in keep})


def test_duplicated_narrowed_by_column_equals_pandas():
    rng = np.random.default_rng(11)
    for _ in range(400):
        frame = _random_frame(rng)
        ref = frame.duplicated(keep=False).to_numpy()
        assert np.array_equal(_duplicated(frame), ref), frame


def test_arena_read_equals_the_row_by_row_reading():
    """A small arena log (int prompts, text models, a/b/tie) read as a DataFrame, a
    Parquet file and a CSV file: the canonical columns are the per-row text of the
    source, the codes those of the columns, duplicates found like pandas."""
    sim = evalmix.sim.arena_battles(12, 3000, seed=5)
    frame = sim.data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = evalmix.read(frame, **sim.read_kwargs)
    d = table.data
    assert list(d["prompt"]) == list(frame["prompt"].astype(str))
    assert list(d["model_a"]) == list(frame["model_a"])
    assert list(d["verdict"]) == list(frame["outcome"])
    assert np.array_equal(table.y, frame["outcome"].map({"a": 1.0, "b": 0.0, "tie": 0.5}))
    assert np.array_equal(table.codes("prompt"), pd.factorize(d["prompt"], sort=True)[0])
    assert all(d[c].dtype == "str" for c in ("prompt", "model_a", "model_b", "verdict"))
    twice = pd.concat([frame.drop(columns="battle")] * 2, ignore_index=True)
    with pytest.raises(evalmix.errors.InvalidTableError, match="6000 rows are exact dup"):
        evalmix.read(twice, **sim.read_kwargs)


def _match_pairs_by_groupby(a_names, b_names, others, a_first):
    """The AB/BA matching as pandas groupby states it (the row-by-row reference)."""
    a = np.asarray([str(v) for v in a_names], dtype=object)
    b = np.asarray([str(v) for v in b_names], dtype=object)
    a_is_lo = a <= b
    lo, hi = np.where(a_is_lo, a, b), np.where(a_is_lo, b, a)
    keys = pd.DataFrame({"lo": lo, "hi": hi,
                         **{f"k{i}": np.asarray(o, dtype=object) for i, o in enumerate(others)}})
    key_id = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    lo_first = np.where(a_first == 1.0, a_is_lo, ~a_is_lo).astype(np.int64)
    order = pd.Series(np.where(np.isnan(a_first), -1, lo_first))
    known = order.where(order >= 0)
    by_key = pd.DataFrame({"k": key_id, "o": order, "known": known})
    n_orders = by_key.groupby("k")["known"].transform("nunique").to_numpy()
    multi = (by_key.groupby(["k", "o"])["o"].transform("size").to_numpy() > 1) & (order >= 0)
    pair_key = pd.DataFrame({"lo": lo, "hi": hi}).groupby(["lo", "hi"]).ngroup().to_numpy()
    pair_orders = pd.Series(known).groupby(pair_key).transform("nunique").to_numpy()
    first_a = pd.Series(a).groupby(key_id).transform("first").to_numpy()
    return {"comparison": key_id, "n_orders": n_orders, "multi": np.asarray(multi),
            "swapped": first_a != a, "pair_orders": pair_orders}


def test_ab_ba_matching_on_codes_equals_the_groupby_reading():
    from evalmix.data.pairs import _match_pairs

    rng = np.random.default_rng(8)
    names = np.array(["m1", "m2", "M1", "Caf\u00e9", "None", "b", None], dtype=object)
    for _ in range(150):
        n = int(rng.integers(1, 40))
        a = text_labels(pd.Series(rng.choice(names, n), dtype=object))
        b = text_labels(pd.Series(rng.choice(names, n), dtype=object))
        others = [text_labels(pd.Series(rng.choice(np.array(["x", "y", None], dtype=object),
                                                   n), dtype=object))
                  for _ in range(int(rng.integers(0, 3)))]
        first = rng.choice([1.0, 0.0, np.nan], n)
        got = _match_pairs(a, b, others, first)
        ref = _match_pairs_by_groupby(a.values(), b.values(), [o.values() for o in others],
                                      first)
        for key, value in ref.items():
            assert np.array_equal(got[key], value), key
