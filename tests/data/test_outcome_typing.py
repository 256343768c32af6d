"""Outcome typing with floating-point noise (issue 37): values within SNAP_TOL of 0 or 1
are read as 0 or 1 when that keeps the column in [0, 1], counted and reported; a type that
a few values decide against the rest of the column is named with the first such value."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.data.parse import SNAP_TOL
from evalmix.errors import EvalmixWarning, InvalidTableError

ROUNDED = 0.1 * 3 / 0.3  # 1.0000000000000002


def _frame(y: list[float] | np.ndarray) -> pd.DataFrame:
    n = len(y)
    return pd.DataFrame({"item": [f"q{i // 2}" for i in range(n)],
                         "model": ["a", "b"] * (n // 2), "score": y})


def _read(df: pd.DataFrame, **kw: object) -> evalmix.EvalTable:
    return evalmix.read(df, outcome="score", condition="model", clusters={"item": "item"},
                        **kw)


def _proportions(n: int = 40, seed: int = 1) -> np.ndarray:
    return np.round(np.random.default_rng(seed).uniform(0, 1, n), 3)


def test_rounding_error_keeps_a_proportion_and_says_so():
    assert ROUNDED > 1 and ROUNDED - 1 < SNAP_TOL
    y = _proportions()
    y[7] = ROUNDED
    with pytest.warns(EvalmixWarning, match=r"1 value\(s\) within 1e-09 of 0 or 1 read as "
                      r"0 or 1 .*first 1.0000000000000002 in row 7"):
        t = _read(_frame(y))
    assert t.outcome_type == "proportion"
    assert t.y.max() == 1.0 and np.sum(t.y == 1.0) == np.sum(y >= 1.0)
    assert len(t.outcome_notes) == 1
    assert "Outcome type: outcome column 'score': 1 value(s)" in t.describe().to_markdown()
    assert t.describe().to_dict()["outcome_notes"] == list(t.outcome_notes)
    assert pickle.loads(pickle.dumps(t)).outcome_notes == t.outcome_notes
    # the same from text (a CSV column), and with the type given
    with pytest.warns(EvalmixWarning, match="row 7"):
        assert _read(_frame(y.astype(str))).outcome_type == "proportion"
    with pytest.warns(EvalmixWarning, match="within 1e-09"):
        assert _read(_frame(y), outcome_type="proportion").y.max() == 1.0


def test_rounding_error_reaches_the_report(tmp_path):
    y = _proportions()
    y[3] = -1e-17  # 0.1 + 0.2 - 0.3 - 1e-17 style noise below 0
    with pytest.warns(EvalmixWarning, match="within 1e-09"):
        t = _read(_frame(y))
    assert t.outcome_type == "proportion" and t.y.min() == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(t, fast=True, reps=99, seed=1, progress=False,
                              methods=["naive", "wilson", "CR2"])
    assert any("within 1e-09 of 0 or 1" in w for w in rep.warnings)
    assert (rep.intervals["method"] == "wilson").any()  # a proportion keeps its Wilson rows
    rep.write(tmp_path / "out")
    assert "Outcome type: outcome column 'score'" in (tmp_path / "out" / "design.md").read_text()


def test_off_by_more_than_the_tolerance_is_numeric_and_named():
    y = _proportions()
    y[11] = 1 + 1e-6
    with pytest.warns(EvalmixWarning, match=r"read as numeric because of 1 of 40 values "
                      r"\(first 1.000001 in row 11\); the others are all in \[0, 1\]"):
        t = _read(_frame(y))
    assert t.outcome_type == "numeric" and t.y.max() == 1 + 1e-6  # not snapped
    assert len(t.outcome_notes) == 1 and "row 11" in t.outcome_notes[0]
    with pytest.raises(InvalidTableError, match="must be a proportion"):
        _read(_frame(y), outcome_type="proportion")
    with warnings.catch_warnings():  # the type given: nothing to say
        warnings.simplefilter("error")
        assert _read(_frame(y), outcome_type="numeric").outcome_notes == ()


def test_binary_with_rounding_and_with_one_fraction():
    y = np.tile([0.0, 1.0], 20)
    y[5] = 1 - 1e-12
    with pytest.warns(EvalmixWarning, match="first 0.999999999999 in row 5"):
        t = _read(_frame(y))
    assert t.outcome_type == "binary" and set(t.y) == {0.0, 1.0}
    y[5] = 0.5
    with pytest.warns(EvalmixWarning, match=r"read as proportion because of 1 of 40 values "
                      r"\(first 0.5 in row 5\); the others are all 0 or 1"):
        assert _read(_frame(y)).outcome_type == "proportion"


def test_no_note_where_rounding_and_a_few_values_decide_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # a proportion with a value just below 1 stays as it is
        y = _proportions()
        y[2] = 1 - 1e-12
        t = _read(_frame(y))
        assert t.outcome_type == "proportion" and t.y[2] == 1 - 1e-12 and not t.outcome_notes
        # a numeric score near an integer is not moved
        y = np.tile([1.0, 5.0], 20)
        y[0] = 3.0000000000000004
        t = _read(_frame(y))
        assert t.outcome_type == "numeric" and t.y[0] == 3.0000000000000004
        # a numeric column well outside [0, 1], and a short column
        assert _read(_frame(np.linspace(-3, 3, 40))).outcome_notes == ()
        assert _read(_frame([0.1, 0.2, 0.3, 1.5])).outcome_type == "numeric"
