"""ICC by one-way ANOVA, design effects and effective N: R reference, simulator truth."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.design import deff_empirical, deff_equal, deff_unequal, design_effect, icc_anova
from evalmix.errors import EvalmixError
from evalmix.sim import clustered_scores, pairwise_judges

REF_DIR = REFERENCE / "design"
#: Same closed form as the R script (aov mean squares, qf quantiles): rounding only.
R_TOL = 1e-10
#: lme4's REML optimum is found numerically (bobyqa, rhoend 1e-10).
LME4_TOL = 1e-6


@pytest.fixture(scope="module")
def ref():
    return json.loads((REF_DIR / "icc_reference.json").read_text())


@pytest.mark.parametrize("name", ["unbalanced", "balanced"])
def test_icc_equals_r_aov(ref, name):
    """icc_reference.R: one-way ANOVA by aov(), n0 for unequal sizes, F interval."""
    d = pd.read_csv(REF_DIR / f"{name}.csv")
    r = ref[name]
    res = icc_anova(d["y"], d["cluster"])
    for field, key in (("msb", "msb"), ("msw", "msw"), ("n0", "n0"), ("f", "F"),
                       ("icc", "icc"), ("lo", "lo"), ("hi", "hi")):
        assert getattr(res, field) == pytest.approx(r[key], rel=R_TOL), field
    res90 = icc_anova(d["y"], d["cluster"], level=0.90)
    assert (res90.lo, res90.hi) == pytest.approx((r["lo90"], r["hi90"]), rel=R_TOL)


def test_balanced_anova_icc_equals_lme4_reml_ratio(ref):
    d = pd.read_csv(REF_DIR / "balanced.csv")
    assert icc_anova(d["y"], d["cluster"]).icc == pytest.approx(
        ref["balanced"]["lme4_ratio"], rel=LME4_TOL)


def test_icc_recovers_the_simulators_exact_icc():
    """Beta-binomial clusters have ICC exactly `icc`; the ANOVA estimator is nearly
    unbiased (bias O(1/G)), so the mean over 400 replications lies within 3 MC SEs."""
    est, emp, model, truth = [], [], [], []
    for s in range(400):
        sim = clustered_scores(60, 8, p=0.6, icc=0.15, size_cv=0.6, seed=s)
        y, g = sim.data["y"].to_numpy(), sim.data["cluster"].to_numpy()
        r = icc_anova(y, g)
        est.append(r.icc)
        emp.append(deff_empirical(y, g))
        model.append(deff_unequal(sim.truth["sizes"], r.icc))
        truth.append(sim.truth["deff"])
    mc_se = np.std(est) / np.sqrt(400)
    assert abs(np.mean(est) - 0.15) < 3 * mc_se + 0.005
    # both design-effect estimators track the simulator's design effect (unequal sizes)
    assert np.mean(emp) == pytest.approx(np.mean(truth), rel=0.04)
    assert np.mean(model) == pytest.approx(np.mean(truth), rel=0.04)


def test_icc_interval_covers_about_level():
    """Equal sizes: the F interval is exact, so coverage is 95% up to MC error."""
    hits = 0
    for s in range(300):
        sim = clustered_scores(30, 6, p=0.5, icc=0.2, seed=1000 + s)
        r = icc_anova(sim.data["y"], sim.data["cluster"])
        hits += r.lo <= 0.2 <= r.hi
    # beta-binomial 0/1 scores are not normal, so allow a few points either way
    assert 0.88 <= hits / 300 <= 0.99


def test_design_effect_formulas():
    assert deff_equal(10, 0.1) == pytest.approx(1.9)
    assert deff_unequal(np.full(7, 10), 0.1) == pytest.approx(1.9)
    sizes = np.array([2, 4, 6])  # m_bar 4, CV^2 = (8/3) / 16 = 1/6
    assert deff_unequal(sizes, 0.3) == pytest.approx(1 + ((1 + 1 / 6) * 4 - 1) * 0.3)
    # singleton clusters: CR1 equals HC1 and the empirical design effect is exactly 1
    y = np.random.default_rng(0).normal(size=50)
    assert deff_empirical(y, np.arange(50)) == pytest.approx(1.0, rel=1e-12)
    # equal sizes: the empirical design effect is (G/(G-1)) m s_b^2/s^2 by hand
    y = np.array([1.0, 4, 11, 6, 13, 8])
    g = np.array([1, 1, 2, 2, 3, 3])
    cr1 = 1.5 * np.sum((np.array([5.0, 17, 21]) - 2 * 43 / 6) ** 2) / 36
    assert cr1 == pytest.approx(2.4037009**2, rel=1e-7)
    assert deff_empirical(y, g) == pytest.approx(cr1 / (np.var(y, ddof=1) / 6), rel=1e-12)


def test_relabelling_and_row_order_change_nothing():
    sim = clustered_scores(25, 6, p=0.6, icc=0.2, size_cv=0.5, seed=3)
    y, g = sim.data["y"].to_numpy(), sim.data["cluster"].to_numpy()
    perm = np.random.default_rng(1).permutation(y.size)
    a, b = icc_anova(y, g), icc_anova(y[perm], np.char.add("x", g[perm].astype(str)))
    assert (a.icc, a.lo, a.hi) == pytest.approx((b.icc, b.lo, b.hi), rel=1e-12)
    assert deff_empirical(y, g) == pytest.approx(deff_empirical(y[perm], g[perm]), rel=1e-12)


def test_design_effect_on_a_table():
    sim = pairwise_judges(n_scenarios=30, n_personas=6, seed=2)
    table = sim.table()
    res = evalmix.design_effect(table)
    tidy = res.tidy()
    assert list(tidy["cluster"]) == list(table.clusters)
    assert {"icc", "icc_lo", "icc_hi", "deff", "deff_equal", "deff_empirical", "n_eff",
            "n_eff_empirical"} <= set(tidy.columns)
    row = res[table.clusters[0]]
    assert row.n_eff == pytest.approx(row.n_obs / row.deff)
    assert row.n_clusters == table.n_levels(table.clusters[0])
    one = design_effect(table, cluster=table.clusters[0])
    assert len(one.factors) == 1 and one.factors[0] == row
    with pytest.raises(EvalmixError, match="not a cluster factor"):
        design_effect(table, cluster="nonexistent")
    assert "ICC" in str(res)


def test_design_effect_matches_array_functions_on_scores():
    sim = clustered_scores(40, 10, p=0.7, icc=0.2, size_cv=0.4, seed=5)
    row = design_effect(sim.table(), cluster="cluster").factors[0]
    y, g = sim.data["y"].to_numpy(), sim.data["cluster"].to_numpy()
    r = icc_anova(y, g)
    assert row.icc == pytest.approx(r.icc, rel=1e-12)
    assert row.deff == pytest.approx(deff_unequal(sim.truth["sizes"], r.icc), rel=1e-12)
    assert row.deff_empirical == pytest.approx(deff_empirical(y, g), rel=1e-12)
    assert not row.centred_by_condition


def test_pairwise_design_effect_is_net_of_pair_and_order():
    """A pairwise table's ICC is that of "A wins" net of the ordered pair and the order
    shown: the same numbers as a scores table whose condition is (model_a, model_b,
    order), and larger than the pooled outcome's ICC (which counts the pairs'
    different win rates and the position bias as within-cluster noise)."""
    sim = pairwise_judges(n_scenarios=30, n_personas=6, seed=2)
    table = sim.table()
    d = table.data
    cond = (d["model_a"].astype(str) + "/" + d["model_b"].astype(str) + "/"
            + d["a_first"].astype(str))
    roles = list(table.clusters)
    scores = pd.DataFrame({"y": table.y, "condition": cond, **{r: d[r] for r in roles}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = evalmix.read(scores, outcome="y", condition="condition",
                           clusters={r: r for r in roles}, outcome_type="numeric")
    got, want = design_effect(table).tidy(), design_effect(ref).tidy()
    for col in ("icc", "icc_lo", "icc_hi", "deff", "deff_empirical", "n_eff"):
        np.testing.assert_allclose(got[col], want[col], rtol=1e-10)
    assert got["centred_by_condition"].all()
    for r in roles:   # closed form on the pooled outcome, for contrast
        pooled = icc_anova(table.y, table.codes(r)).icc
        assert got.set_index("cluster").loc[r, "icc"] > pooled
