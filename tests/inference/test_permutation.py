"""Cluster randomization tests: exact enumeration, scipy's paired test, Monte Carlo."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import evalmix
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference.permutation import permutation_test


def _within(g: int = 8, seed: int = 1, effect: float = 0.4) -> pd.DataFrame:
    """Each scenario under both conditions, unequal numbers of items per scenario."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, size=g)
    scen = np.repeat(np.arange(g), 2 * sizes)
    cond = np.concatenate([np.repeat(["A", "B"], s) for s in sizes])
    u = rng.normal(size=g)[scen]
    y = u + effect * (cond == "B") + rng.normal(size=scen.size)
    return pd.DataFrame({"scenario": scen, "condition": cond, "y": y})


def _difference(d: pd.DataFrame) -> float:
    m = d.groupby("condition")["y"].mean()
    return float(m["B"] - m["A"])


def test_exact_p_value_equals_full_enumeration_for_8_clusters():
    d = _within()
    res = permutation_test(d, cluster="scenario", progress=False)
    assert res.exact and res.design == "within" and res.reps == 2**8
    # brute force: every way of swapping the two conditions in each scenario
    values = []
    for flips in itertools.product([False, True], repeat=8):
        swap = np.asarray(flips)[d["scenario"]]
        relabel = np.where(swap, np.where(d["condition"] == "A", "B", "A"), d["condition"])
        values.append(_difference(d.assign(condition=relabel)))
    values = np.asarray(values)
    obs = _difference(d)
    p = min(1.0, 2 * min(np.mean(values >= obs - 1e-12), np.mean(values <= obs + 1e-12)))
    assert res.estimate == pytest.approx(obs, rel=1e-12)
    assert res.p_value == p
    np.testing.assert_allclose(np.sort(res.null_draws), np.sort(values), rtol=1e-10)
    # a Python statistic gives the same test as the fast path
    slow = permutation_test(d, _difference, cluster="scenario", progress=False)
    assert slow.p_value == res.p_value


def test_equal_sized_paired_design_matches_scipy():
    rng = np.random.default_rng(7)
    g = 10
    a, b = rng.normal(size=g), rng.normal(size=g) + 0.6
    d = pd.DataFrame({"s": np.repeat(np.arange(g), 2), "condition": ["A", "B"] * g,
                      "y": np.column_stack([a, b]).ravel()})
    ref = stats.permutation_test((b, a), lambda x, y: np.mean(x - y),
                                 permutation_type="samples", n_resamples=np.inf)
    res = permutation_test(d, cluster="s", progress=False)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    one = permutation_test(d, cluster="s", alternative="larger", progress=False)
    ref1 = stats.permutation_test((b, a), lambda x, y: np.mean(x - y),
                                  permutation_type="samples", n_resamples=np.inf,
                                  alternative="greater")
    assert one.p_value == pytest.approx(ref1.pvalue, rel=1e-12)


def test_between_clusters_enumerates_combinations_within_strata():
    rng = np.random.default_rng(3)
    g = 10
    cond = np.array(["A", "B"] * 5)
    stratum = np.repeat(["x", "y"], 5)
    d = pd.DataFrame({"s": np.repeat(np.arange(g), 3), "condition": np.repeat(cond, 3),
                      "site": np.repeat(stratum, 3)})
    d["y"] = rng.normal(size=len(d)) + 0.5 * (d["condition"] == "B")
    res = permutation_test(d, cluster="s", strata="site", progress=False)
    # x holds clusters 0-4 (2 of them B), y clusters 5-9 (3 B): C(5,2) * C(5,3) = 100
    assert res.design == "between" and res.n_assignments == 100 and res.exact
    values = []
    for bx in itertools.combinations(range(5), 2):
        for by in itertools.combinations(range(5, 10), 3):
            z = np.isin(np.arange(g), bx + by)
            values.append(_difference(d.assign(condition=np.where(z[d["s"]], "B", "A"))))
    values, obs = np.asarray(values), _difference(d)
    p = min(1.0, 2 * min(np.mean(values >= obs - 1e-12), np.mean(values <= obs + 1e-12)))
    assert res.p_value == p


@pytest.mark.parametrize("binary", [False, True])
def test_monte_carlo_agrees_with_exact_and_is_seeded(binary):
    d = _within(g=14, seed=2)
    if binary:  # a lattice of values: ties with the observed value on both sides
        d["y"] = (d["y"] > 0.3).astype(float)
    exact = permutation_test(d, cluster="scenario", progress=False)
    assert exact.exact and exact.n_assignments == 2**14
    import evalmix.inference.permutation as perm

    limit = perm.EXACT_LIMIT
    perm.EXACT_LIMIT = 100
    try:
        mc = permutation_test(d, cluster="scenario", reps=4000, seed=5, progress=False)
        again = permutation_test(d, cluster="scenario", reps=4000, seed=5, progress=False)
    finally:
        perm.EXACT_LIMIT = limit
    assert not mc.exact and mc.seed == 5 and mc.p_value == again.p_value
    se = np.sqrt(exact.p_value * (1 - exact.p_value) / 4000)
    assert abs(mc.p_value - exact.p_value) < 4 * se + 1 / 4000
    row = mc.tidy().iloc[0]
    assert row["method"] == "permutation" and row["p_value"] == mc.p_value


def test_pairwise_table_and_bad_designs():
    sim = evalmix.sim.pairwise_judges(8, 2, 2, 2, seed=1)
    t = evalmix.read(sim.data, **sim.read_kwargs)
    res = permutation_test(t, cluster="scenario", progress=False)
    assert res.details["column"] == "model_b" and res.design == "within"
    assert res.contrast == "treatment - control"
    # the balanced design: the pooled difference is the built-in (paired) difference
    ref = evalmix.interval(t, "difference", method="CR2", cluster="scenario")
    assert res.estimate == pytest.approx(ref.estimate, rel=1e-12)
    d = _within()
    mixed = d[~((d["scenario"] == 0) & (d["condition"] == "B"))]
    with pytest.raises(EvalmixError, match="neither within nor between"):
        permutation_test(mixed, cluster="scenario", progress=False)
    with pytest.raises(InvalidOptionError, match="alternative"):
        permutation_test(d, cluster="scenario", alternative="both", progress=False)
