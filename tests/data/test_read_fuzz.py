"""Issue 12: a hypothesis fuzz test of ``evalmix.read`` over file formats and dtypes.

Random small tables whose id and outcome columns take pandas' extension dtypes (nullable
Int64, boolean, string[pyarrow], category, datetime ids) are passed as a DataFrame or
written as CSV, Parquet or JSONL. Whatever the table, ``read`` either returns a valid
table or raises an EvalmixError (never another exception), never modifies its input, and
``n_raw == n_obs + sum(dropped)`` holds, also after ``subset()``.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import evalmix
from evalmix.errors import EvalmixError

ID_DTYPES = ["object", "string[pyarrow]", "category", "Int64", "datetime64[ns]", "boolean"]
OUTCOME_DTYPES = ["Int64", "boolean", "float64", "string[pyarrow]", "category", "object"]
FORMATS = ["frame", "csv", "parquet", "jsonl"]

def _mostly(valid: list, odd: list) -> st.SearchStrategy:
    """Usually a well-formed value, sometimes an odd one (NA, padded, NA-like text)."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid),
                     st.sampled_from(valid), st.sampled_from(odd))


ID_VALUES = {
    "object": _mostly(["q1", "q2", "q3"], [" q1", "NA", "nan", "", None, "café", 7]),
    "string[pyarrow]": _mostly(["q1", "q2", "q3"], ["Q1 ", "null", "", None]),
    "category": _mostly(["a", "b", "x"], ["tie", None]),
    "Int64": _mostly([0, 1, 7], [2, None]),
    "datetime64[ns]": _mostly(["2024-01-01", "2024-01-02", "2024-03-05"], [None]),
    "boolean": _mostly([True, False], [None]),
}
OUTCOME_VALUES = {
    "Int64": _mostly([0, 1], [2, None]),
    "boolean": _mostly([True, False], [None]),
    "float64": _mostly([0.0, 0.5, 1.0], [3.5, -1.0, float("nan"), 1e200, float("inf")]),
    "string[pyarrow]": _mostly(["1", "0", "a", "b", "tie"], ["yes", "100%", "x", None]),
    "category": _mostly(["a", "b", "tie"], ["m1", "m2", None]),
    "object": _mostly([1, 0, "a", "b"], ["1", "m1", None, 0.5, True, "NA"]),
}


def _column(values: list, dtype: str) -> pd.Series:
    if dtype == "datetime64[ns]":
        return pd.Series(pd.to_datetime(pd.Series(values, dtype=object)), dtype=dtype)
    if dtype == "object":
        return pd.Series(values, dtype=object)
    return pd.Series(values, dtype=dtype)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 12))
    dtypes = {c: draw(st.sampled_from(ID_DTYPES)) for c in ("item", "judge", "model_a",
                                                              "model_b")}
    frame = {c: _column(draw(st.lists(ID_VALUES[d], min_size=n, max_size=n)), d)
             for c, d in dtypes.items()}
    y_dtype = draw(st.sampled_from(OUTCOME_DTYPES))
    frame["y"] = _column(draw(st.lists(OUTCOME_VALUES[y_dtype], min_size=n, max_size=n)),
                         y_dtype)
    df = pd.DataFrame(frame)
    kw: dict = {"outcome": "y"}
    kw["clusters"] = draw(st.sampled_from([{}, {}, {"item": "item"},
                                           {"item": "item", "judge": "judge"}]))
    if draw(st.booleans()):
        kw.update(model_a="model_a", model_b="model_b",
                  outcome_kind=draw(st.sampled_from(["auto", "verdict", "winner"])),
                  ties=draw(st.sampled_from(["half", "exclude", "separate"])))
    elif draw(st.booleans()):
        kw["condition"] = "model_a"
    kw["on_unparsed"] = draw(st.sampled_from(["auto", "error", "drop"]))
    fmt = draw(st.sampled_from(FORMATS))
    mask_seed = draw(st.integers(0, 2**16))
    return df, kw, fmt, mask_seed


def _write(df: pd.DataFrame, fmt: str, folder: Path) -> Path | pd.DataFrame:
    if fmt == "frame":
        return df
    path = folder / f"t.{fmt}"
    try:
        if fmt == "csv":
            df.to_csv(path, index=False)
        elif fmt == "parquet":
            df.to_parquet(path)
        else:
            df.to_json(path, orient="records", lines=True, date_format="iso")
    except (ValueError, TypeError, OverflowError, ImportError) as exc:  # pandas/pyarrow
        assume(False)  # a table its own writer refuses is not a test of read
        raise AssertionError from exc  # pragma: no cover
    return path


@settings(max_examples=int(os.environ.get("EVALMIX_FUZZ_EXAMPLES", 200)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(tables())
def test_fuzz_read_over_formats_and_dtypes(case):
    df, kw, fmt, mask_seed = case
    before = df.copy(deep=True)
    dtypes = df.dtypes.copy()
    with tempfile.TemporaryDirectory() as folder:
        source = _write(df, fmt, Path(folder))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                table = evalmix.read(source, **kw)
            except EvalmixError:
                table = None
    pd.testing.assert_frame_equal(df, before)
    pd.testing.assert_series_equal(df.dtypes, dtypes)
    if table is None:
        return
    assert table.n_obs >= 1
    assert table.n_raw == len(df)
    assert table.n_raw == table.n_obs + sum(table.dropped.values())
    assert np.isfinite(table.y).all()
    for role in table.clusters:
        assert table.n_levels(role) >= 2
    mask = np.random.default_rng(mask_seed).random(table.n_obs) < 0.5
    mask[0] = True
    sub = table.subset(mask)
    assert sub.n_obs == int(mask.sum())
    assert sub.n_raw == sub.n_obs + sum(sub.dropped.values()) == table.n_raw
    table.describe().to_json()


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_extension_dtypes_read_like_the_frame(tmp_path, fmt):
    # the same well-formed table in every format and dtype gives the same numbers
    df = pd.DataFrame({
        "item": pd.Series(["q1", "q1", "q2", "q2", "q3", "q3"], dtype="string[pyarrow]"),
        "model": pd.Series(["x", "y"] * 3, dtype="category"),
        "correct": pd.Series([1, 0, 1, 1, 0, None], dtype="Int64"),
    })
    ref = evalmix.read(df, outcome="correct", condition="model", clusters={"item": "item"})
    path = _write(df, fmt, tmp_path)
    t = evalmix.read(path, outcome="correct", condition="model", clusters={"item": "item"})
    assert t.y.tolist() == ref.y.tolist() == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert dict(t.dropped) == dict(ref.dropped) == {"na_outcome": 1}
    assert t.data["item"].tolist() == ref.data["item"].tolist()
