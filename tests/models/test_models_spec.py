"""ModelSpec, the formula parser and collapsing (fast, no MCMC)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.errors import EvalmixError
from evalmix.models.spec import build_spec, collapse, parse_formula, unique_rows
from evalmix.sim import pairwise_judges

# ties="exclude" drops tie rows on purpose here
pytestmark = pytest.mark.filterwarnings("ignore::evalmix.errors.DroppedRowsWarning")


@pytest.fixture(scope="module")
def sim():
    return pairwise_judges(6, 2, 2, 2, seed=1, tie_threshold=0.3)


def test_default_spec_is_the_simulators_model(sim):
    t = sim.table(ties="exclude")
    s = build_spec(t, slopes=("judge",))
    assert s.formula == ("y ~ 1 + condition + position + (1|scenario) + (1|persona) + "
                         "(1|author) + (1|judge) + (0 + position|judge) + (0 + condition|judge)")
    assert s.design == "baseline" and s.family == "bernoulli"
    assert s.fixed_names == ("Intercept", "condition[treatment]", "position")
    d = t.data
    # response: evaluated output (model_b) wins = 1 - table y
    np.testing.assert_array_equal(s.y, 1 - d["y"].to_numpy())
    # position: +1/2 when model_b was shown first (a_first = 0)
    np.testing.assert_array_equal(s.X[:, 2], 0.5 - d["a_first"].to_numpy())
    np.testing.assert_array_equal(s.X[:, 1], (d["model_b"] == "treatment").to_numpy() * 1.0)
    slope = s.random[-1]
    assert slope.name == "condition[treatment]|judge"
    np.testing.assert_array_equal(slope.x, s.X[:, 1])
    np.testing.assert_array_equal(s.random[3].codes, t.codes("judge"))


def test_ties_half_is_fractional_and_separate_is_cumulative(sim):
    half = build_spec(sim.table(ties="half"))
    assert half.family == "binomial" and set(np.unique(half.y)) == {0.0, 0.5, 1.0}
    sep = build_spec(sim.table(ties="separate"))
    assert sep.family == "cumulative" and "Intercept" not in sep.fixed_names
    assert sep.categories == ("model_a wins", "tie", "model_b wins")
    v = sim.table(ties="separate").data["verdict"].to_numpy()
    np.testing.assert_array_equal(sep.y == 1, v == "tie")
    np.testing.assert_array_equal(sep.y == 2, v == "b")


def test_bradley_terry_design_when_model_a_varies():
    rng = np.random.default_rng(0)
    models = np.array(["m1", "m2", "m3"])
    n = 60
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    df = pd.DataFrame({"model_a": models[a], "model_b": models[b],
                       "winner": np.where(rng.random(n) < 0.5, "a", "b"),
                       "first": np.where(rng.random(n) < 0.5, "a", "b"),
                       "judge": rng.choice(["j1", "j2"], n), "item": np.arange(n) % 12,
                       "id": np.arange(n)})
    t = evalmix.read(df, outcome="winner", model_a="model_a", model_b="model_b",
                     first_shown="first", clusters={"judge": "judge", "item": "item"},
                     unmatched="drop")
    s = build_spec(t, formula="y ~ model + position + (0 + model|judge)")
    assert s.design == "bradley-terry" and s.reference == "m1"
    assert s.fixed_names == ("model[m2]", "model[m3]", "position")
    d = t.data
    expect = (d.model_a == "m2").to_numpy() * 1.0 - (d.model_b == "m2").to_numpy()
    np.testing.assert_array_equal(s.X[:, 0], expect)
    np.testing.assert_array_equal(s.X[:, 2], d["a_first"].to_numpy() - 0.5)
    assert [c for c, _ in s.contrasts] == ["model[m3] - model[m2]"]
    assert [r.name for r in s.random] == ["model[m2]|judge", "model[m3]|judge"]
    # the default formula says there is no intercept, and reads back to the same spec
    s0 = build_spec(t)
    assert s0.formula.startswith("y ~ 0 + condition + position + ")
    assert "Intercept" not in s0.fixed_names
    again = build_spec(t, formula=s0.formula)
    assert again.fixed_names == s0.fixed_names
    np.testing.assert_array_equal(again.X, s0.X)


def test_formula_parser_subset():
    p = parse_formula("y ~ condition + position + (1|scenario) + (0 + condition|judge)")
    assert p.intercept and p.fixed == (("condition",), ("position",))
    assert p.random == (((), ("scenario",), True), (("condition",), ("judge",), False))
    p = parse_formula("y ~ 0 + condition:judge + (1 + position||judge) + (1|judge:item)")
    assert not p.intercept and p.fixed == (("condition", "judge"),)
    assert p.random[0] == (("position",), ("judge",), True)
    assert p.random[1] == ((), ("judge", "item"), True)
    p = parse_formula("y ~ condition + (1 + condition|judge) + (1 + position||scenario)")
    assert p.random[0] == (("condition",), ("judge",), True)
    assert p.correlated == (True, False)
    for bad, word in [("y ~ a*b", "'\\*'"),
                      ("y ~ (1 + condition|judge) + (1 + position|judge)", "second correlated"),
                      ("y ~ (1|a/b)", "'/'"), ("y ~ log(x)", "log\\(x\\)"),
                      ("cbind(a, b) ~ x", "response"), ("y ~ x - z", "removing")]:
        with pytest.raises(EvalmixError, match=word):
            parse_formula(bad)


def test_formula_terms_resolve_against_table(sim):
    t = sim.table(ties="exclude")
    s = build_spec(t, formula="y ~ condition + judge + (1|scenario) + (1|judge:scenario)")
    assert s.fixed_names == ("Intercept", "condition[treatment]", "judge[judge2]")
    inter = s.random[1]
    assert inter.factor == "judge:scenario" and inter.n_levels == 2 * 6
    with pytest.raises(EvalmixError, match="unknown model term 'foo'"):
        build_spec(t, formula="y ~ foo + (1|scenario)")
    with pytest.raises(EvalmixError, match="not a cluster role"):
        build_spec(t, formula="y ~ 1 + (1|nosuch)")
    with pytest.raises(EvalmixError, match="rank deficient"):
        build_spec(t, formula="y ~ condition + condition:judge + judge + judge:condition")


def test_fixed_alternative_for_few_levels(sim):
    s = build_spec(sim.table(ties="exclude"), fixed=("judge",), judge_position=False)
    assert "judge[judge2]" in s.fixed_names
    assert "judge" not in s.factors


def test_collapse_preserves_sufficient_statistics():
    # every pattern twice: counts double, successes add up
    sim = pairwise_judges(5, 2, 2, 2, seed=3, tie_threshold=0.4)
    t = sim.table(ties="half")
    s = build_spec(t, judge_position=False)
    c = collapse(s)
    assert c.n_rows == t.n_obs and c.trials.sum() == t.n_obs
    np.testing.assert_allclose(c.successes.sum(), s.y.sum())
    # each original row maps to a pattern with its own covariates and levels
    np.testing.assert_array_equal(c.X[c.pattern], s.X)
    for r, codes in zip(s.random, c.codes, strict=True):
        np.testing.assert_array_equal(codes[c.pattern], r.codes)
    # dropping position makes AB/BA rows identical: half as many patterns
    s2 = build_spec(t, position=False)
    c2 = collapse(s2)
    assert c2.n_patterns == t.n_obs // 2
    assert set(np.unique(c2.trials)) == {2.0}
    # binomial log-likelihood is identical on rows and on patterns
    eta = np.random.default_rng(1).normal(size=c2.n_patterns)
    ll_rows = np.sum(s2.y * eta[c2.pattern] - np.log1p(np.exp(eta[c2.pattern])))
    ll_pat = np.sum(c2.successes * eta - c2.trials * np.log1p(np.exp(eta)))
    assert ll_rows == pytest.approx(ll_pat, rel=1e-12)


def test_unique_rows_equals_numpy_unique_axis0():
    """collapse's and the grid's distinct rows (per-column codes combined into one
    integer key) are np.unique(axis=0)'s, in the same order: repeated rows, -0.0 next
    to 0.0, an empty key, and a key too wide for 62 bits (the axis=0 fallback)."""
    rng = np.random.default_rng(2)
    base = np.column_stack([rng.integers(0, 3, 500), rng.normal(size=500).round(1),
                            rng.integers(0, 40, 500).astype(float)])
    base[::7, 1] = -0.0
    wide = rng.normal(size=(300, 4))[rng.integers(0, 300, 900)]
    wide = np.column_stack([wide, rng.normal(size=(900, 4))])   # ~900^8 codes > 2^62
    for key in (base, base[:, :1], np.zeros((0, 2)), wide):
        _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        f2, i2 = unique_rows(key)
        np.testing.assert_array_equal(f2, first)
        np.testing.assert_array_equal(i2, inv.ravel())
        assert i2.dtype == np.int64


def test_cumulative_and_gaussian_statistics(sim):
    s = build_spec(sim.table(ties="separate"), position=False)
    c = collapse(s)
    assert c.counts.shape == (c.n_patterns, 3)
    np.testing.assert_array_equal(c.counts.sum(0), np.bincount(s.y.astype(int), minlength=3))
    df = pd.DataFrame({"score": np.arange(12.0) % 5, "cond": ["x", "y"] * 6,
                       "item": np.repeat(np.arange(3), 4), "rep": np.arange(12)})
    t = evalmix.read(df, outcome="score", condition="cond", clusters={"item": "item"},
                     outcome_type="numeric")
    g = build_spec(t)
    assert g.family == "gaussian" and g.link == "identity"
    cg = collapse(g)
    np.testing.assert_allclose(cg.sum_y2.sum(), np.sum(g.y ** 2))
    assert cg.n_patterns == 6
