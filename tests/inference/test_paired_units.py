"""The paired difference's units from integer codes equal the groupby construction.

Reference: the earlier construction (pandas ``groupby(keys + [condition]).mean().unstack()``
on the label columns, string factorisation of the unit labels), kept here verbatim in
:func:`_groupby_reference`; the fast path must give bit-identical outcomes and the same
cluster and pair codes (issue 14, item 6).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.inference.estimands import build_problem


def _dense(codes):
    return pd.factorize(np.asarray(codes), sort=True)[0].astype(np.int64)


def _groupby_reference(table, a, b):
    d = table.data
    col = "condition" if "condition" in d.columns else "model_b"
    lab = d[col].astype(str).to_numpy()
    mask = (lab == a) | (lab == b)
    keys = list(table.clusters)
    if table.kind == "pairwise" and table.has_order and keys:
        keys = keys + ["a_first"]
    sub = d.loc[mask, keys].copy()
    sub["_cond"] = np.where(lab[mask] == b, "B", "A")
    sub["_y"] = table.y[mask]
    cells = sub.groupby(keys + ["_cond"], dropna=False, sort=True)["_y"].mean().unstack("_cond")
    both = cells.notna().all(axis=1)
    cells = cells[both]
    diffs = (cells["B"] - cells["A"]).to_numpy(dtype=float)
    idx = cells.index.to_frame(index=False)
    codes = {r: _dense(idx[r].astype(str).to_numpy()) for r in table.clusters}
    pair_codes = None
    if "a_first" in keys:
        pair_codes = _dense(pd.MultiIndex.from_frame(
            idx[list(table.clusters)].astype(str)).factorize()[0])
    return diffs, codes, pair_codes, int(both.sum()), len(both)


def _scores(seed, numeric_labels):
    rng = np.random.default_rng(seed)
    n = 3000
    item = rng.integers(0, 150, n)
    judge = rng.integers(0, 12, n)  # 12 levels: "10" sorts before "2" as text
    d = pd.DataFrame({
        "item": item if numeric_labels else np.char.add("q", item.astype(str)),
        "judge": judge if numeric_labels else np.char.add("j", judge.astype(str)),
        "condition": rng.choice(["base", "tuned"], n),
        "score": rng.normal(0, 1, n).round(3),
        "sample": np.arange(n)})
    return evalmix.read(d, outcome="score", condition="condition",
                        clusters={"item": "item", "judge": "judge"})


@pytest.mark.parametrize("numeric_labels", [False, True])
def test_paired_units_equal_groupby_on_scores(numeric_labels):
    t = _scores(1, numeric_labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = build_problem(t, "difference", conditions=("base", "tuned"), paired=True)
    diffs, codes, pair_codes, n_match, n_units = _groupby_reference(t, "base", "tuned")
    np.testing.assert_array_equal(p.y, diffs)  # bit-identical
    for r in t.clusters:
        np.testing.assert_array_equal(p.cluster_codes[r], codes[r])
    assert p.pair_codes is None and pair_codes is None
    assert (p.details["units_matched"], p.details["units_total"]) == (n_match, n_units)


def test_paired_units_equal_groupby_on_ordered_pairwise():
    t = evalmix.sim.pairwise_judges(n_scenarios=12, seed=4).table()
    p = build_problem(t, "difference", conditions=("control", "treatment"), paired=True)
    diffs, codes, pair_codes, n_match, n_units = _groupby_reference(t, "control", "treatment")
    # the table's y scores model_a; a difference of model_b labels is stated for model_b
    # (one sign convention: B's win rate minus A's), whose score is 1 - y
    np.testing.assert_allclose(p.y, -diffs, rtol=0, atol=1e-15)
    for r in t.clusters:
        np.testing.assert_array_equal(p.cluster_codes[r], codes[r])
    np.testing.assert_array_equal(p.pair_codes, pair_codes)
    assert p.details["units_matched"] == n_match == n_units


@pytest.mark.parametrize("method", ["CR1", "CR2"])
def test_paired_interval_unchanged(method):
    # the interval itself (estimate, SE, df) through the public API
    t = _scores(2, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evalmix.interval(t, "difference", method=method, cluster="item",
                             conditions=("base", "tuned"), paired=True)
    diffs, codes, *_ = _groupby_reference(t, "base", "tuned")
    assert r.estimate == pytest.approx(diffs.mean(), rel=1e-12)
    # CR1 of an intercept-only model: G/(G-1) * sum of squared cluster sums / n^2
    if method == "CR1":
        e = diffs - diffs.mean()
        s = np.bincount(codes["item"], weights=e)
        g = s.size
        n = diffs.size
        se = np.sqrt(g / (g - 1) * (n - 1) / (n - 1) * (s @ s) / n**2)
        assert r.se == pytest.approx(se, rel=1e-10)
