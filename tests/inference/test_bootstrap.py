"""Pairs cluster bootstrap: exact agreement with R's boot, identities, invariances."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

from evalmix.errors import FewClustersWarning, InvalidOptionError, TooFewClustersError
from evalmix.inference import bootstrap as bs
from evalmix.inference.bootstrap import cluster_bootstrap, cluster_weights

REF_DIR = REFERENCE / "bootstrap"
#: Same replicates as R (weights exported from Python), so only float rounding differs.
R_EXACT_TOL = 1e-10
#: Monte Carlo error of a bootstrap SD with B = 20,000 is about 1/sqrt(2B) = 0.5%.
MC_SE_TOL = 0.025
#: statsmodels' IRLS stops at its own tolerance (1e-8 on the deviance).
STATSMODELS_TOL = 1e-6
SEED = 20261130 + 1  # seed of weights.csv (see make_data.py)


@pytest.fixture(scope="module")
def ref_data():
    d = pd.read_csv(REF_DIR / "data.csv")
    W = pd.read_csv(REF_DIR / "weights.csv").to_numpy(float)
    ref = json.loads((REF_DIR / "boot_reference.json").read_text())
    X = np.column_stack([np.ones(len(d)), d["x"]])
    return X, d["y"].to_numpy(), d["cluster"].to_numpy(), W, ref


def _quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewClustersWarning)
        return cluster_bootstrap(*args, **kwargs)


def test_weights_are_multinomial_counts():
    W = cluster_weights(40, 500, np.random.default_rng(3))
    assert W.shape == (500, 40)
    assert np.all(W.sum(axis=1) == 40)
    # E[count] = 1, Var[count] = 1 - 1/G for Multinomial(G, 1/G)
    assert abs(W.mean() - 1) < 1e-12
    assert abs(W.var() - (1 - 1 / 40)) < 0.05


@pytest.mark.parametrize("name,target", [("mean", 0), ("slope", 1)])
@pytest.mark.parametrize("ci,key", [("percentile", "perc"), ("bca", "bca"),
                                    ("studentized", "stud")])
def test_intervals_equal_r_boot(ref_data, name, target, ci, key):
    """boot.ci on the same replicates (weights.csv): reference boot_reference.R."""
    X, y, g, W, ref = ref_data
    Xm = X[:, :1] if name == "mean" else X
    sums = bs._block_sums(Xm, y, g, 15, studentized=True)
    draws, var = bs._linear_fit(W, sums, target, studentized=True)
    np.testing.assert_allclose(draws[:5], ref[name]["draws_head"], rtol=R_EXACT_TOL)
    np.testing.assert_allclose(var[:5], ref[name]["var_head"], rtol=R_EXACT_TOL)
    if not np.array_equal(W, cluster_weights(15, 999, np.random.default_rng(SEED))):
        pytest.skip("numpy's random stream changed; the frozen weights no longer match")
    res = _quiet(Xm, y, g, target=target, reps=999, ci=ci, seed=SEED)
    assert res.estimate == pytest.approx(ref[name]["t0"], rel=R_EXACT_TOL)
    assert res.se == pytest.approx(ref[name]["sd"], rel=R_EXACT_TOL)
    np.testing.assert_allclose([res.lo, res.hi], ref[name][key], rtol=R_EXACT_TOL)
    if ci == "studentized":
        assert res.se_cr1 == pytest.approx(ref[name]["se_cr1"], rel=R_EXACT_TOL)


def test_bootstrap_se_tends_to_cr0_for_equal_sizes():
    """Ideal bootstrap variance of a mean of equal-sized clusters is exactly CR0."""
    rng = np.random.default_rng(7)
    G, m = 40, 5
    g = np.repeat(np.arange(G), m)
    y = rng.normal(size=G)[g] + rng.normal(size=G * m)
    cm = y.reshape(G, m).mean(axis=1)
    cr0 = np.sqrt(np.sum((cm - cm.mean()) ** 2)) / G
    res = cluster_bootstrap(np.ones((G * m, 1)), y, g, reps=20_000, seed=1)
    assert res.se == pytest.approx(cr0, rel=MC_SE_TOL)
    assert res.estimate == pytest.approx(y.mean(), rel=1e-12)


def test_row_order_and_order_preserving_relabelling_change_nothing():
    rng = np.random.default_rng(2)
    g = np.repeat(np.arange(25), rng.integers(1, 6, 25))
    n = g.size
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    y = X[:, 1] + rng.normal(size=25)[g] + rng.normal(size=n)
    base = cluster_bootstrap(X, y, g, target=1, reps=500, ci="bca", seed=5)
    perm = rng.permutation(n)
    shuffled = cluster_bootstrap(X[perm], y[perm], g[perm], target=1, reps=500, ci="bca",
                                 seed=5)
    relabelled = cluster_bootstrap(X, y, 1000 + 7 * g, target=1, reps=500, ci="bca", seed=5)
    np.testing.assert_allclose(shuffled.draws, base.draws, rtol=1e-10)
    np.testing.assert_allclose(relabelled.draws, base.draws, rtol=1e-12)
    assert (shuffled.lo, shuffled.hi) == pytest.approx((base.lo, base.hi), rel=1e-10)
    # a non-order-preserving relabelling gives the same distribution (not the same draws)
    other = cluster_bootstrap(X, y, (g * 7) % 25, target=1, reps=4000, seed=6)
    big = cluster_bootstrap(X, y, g, target=1, reps=4000, seed=7)
    assert other.se == pytest.approx(big.se, rel=0.06)


def test_ab_ba_pairs_are_never_split():
    """y = +1 (AB) and -1 (BA) in every pair: a replicate mean is 0 iff pairs stay whole."""
    rng = np.random.default_rng(4)
    n_pairs = 120
    pair = np.repeat(np.arange(n_pairs), 2)
    cluster = rng.integers(0, 30, n_pairs)[pair]
    y = np.tile([1.0, -1.0], n_pairs)
    ones = np.ones((2 * n_pairs, 1))
    for res in (cluster_bootstrap(ones, y, cluster, reps=300, seed=1),
                cluster_bootstrap(ones, y, cluster, reps=300, seed=1, nested=pair),
                cluster_bootstrap(ones, y, pair, reps=300, seed=1)):
        assert np.max(np.abs(res.draws)) < 1e-12
    split = cluster_bootstrap(ones, y, cluster, reps=300, seed=1, nested=np.arange(2 * n_pairs))
    assert np.max(np.abs(split.draws)) > 0.05  # rows resampled alone do split pairs


def test_nested_two_stage_adds_within_variance():
    rng = np.random.default_rng(8)
    g = np.repeat(np.arange(40), 10)
    y = 0.3 * rng.normal(size=40)[g] + rng.normal(size=400)
    one = np.ones((400, 1))
    plain = cluster_bootstrap(one, y, g, reps=4000, seed=1)
    two = cluster_bootstrap(one, y, g, reps=4000, seed=1, nested=np.arange(400))
    # two-stage variance ~ between + within/m over clusters: larger than one-stage
    cm = y.reshape(40, 10).mean(axis=1)
    within = np.mean(y.reshape(40, 10).var(axis=1, ddof=0))
    expected = np.sqrt((np.sum((cm - cm.mean()) ** 2) / 40**2) + within / 400)
    assert two.se > plain.se
    assert two.se == pytest.approx(expected, rel=0.06)
    with pytest.raises(bs.EvalmixError, match="nested"):
        cluster_bootstrap(one, y, g, nested=np.arange(400) % 7, reps=10)


def test_logit_matches_statsmodels_per_replicate():
    import statsmodels.api as sm
    rng = np.random.default_rng(11)
    g = np.repeat(np.arange(30), rng.integers(5, 15, 30))
    n = g.size
    X = np.column_stack([np.ones(n), rng.integers(0, 2, n), rng.normal(size=n)])
    eta = -0.3 + 0.6 * X[:, 1] + 0.5 * X[:, 2] + rng.normal(scale=0.5, size=30)[g]
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    res = cluster_bootstrap(X, y, g, target=1, family="binomial", reps=200, seed=3,
                            ci="studentized")
    fit = sm.Logit(y, X).fit(disp=0, cov_type="cluster", cov_kwds={"groups": g})
    assert res.estimate == pytest.approx(fit.params[1], rel=STATSMODELS_TOL)
    assert res.se_cr1 == pytest.approx(fit.bse[1], rel=STATSMODELS_TOL)
    W = cluster_weights(30, 200, np.random.default_rng(3))
    for b in range(3):
        wb = sm.GLM(y, X, family=sm.families.Binomial(), freq_weights=W[b, g]).fit(tol=1e-12)
        assert res.draws[b] == pytest.approx(wb.params[1], rel=STATSMODELS_TOL)
    assert res.n_failed == 0


def test_singular_replicates_are_dropped_and_counted():
    rng = np.random.default_rng(5)
    g = np.repeat(np.arange(8), 6)
    treat = (g == 0).astype(float)  # only one cluster is treated
    X = np.column_stack([np.ones(48), treat])
    y = rng.normal(size=48)
    with pytest.warns(FewClustersWarning):
        res = cluster_bootstrap(X, y, g, target=1, reps=400, seed=1)
    # P(cluster 0 not drawn) = (7/8)^8 ~ 0.34
    assert 0.25 < res.n_failed / 400 < 0.45
    assert np.isnan(res.draws).sum() == res.n_failed
    assert np.isfinite([res.lo, res.hi]).all()


def test_options_and_errors():
    y = np.arange(12.0)
    with pytest.raises(TooFewClustersError, match="wild"):
        cluster_bootstrap(np.ones((12, 1)), y, np.repeat(np.arange(4), 3))
    with pytest.warns(FewClustersWarning, match="CR2"):
        cluster_bootstrap(np.ones((12, 1)), y, np.repeat(np.arange(6), 2), reps=50, seed=1)
    with pytest.raises(InvalidOptionError, match="'percentile', 'expanded', 'bca'"):
        cluster_bootstrap(np.ones((12, 1)), y, np.arange(12), ci="basic")
    with pytest.raises(InvalidOptionError, match="family"):
        cluster_bootstrap(np.ones((12, 1)), y, np.arange(12), family="probit")


def test_seed_is_recorded_and_reproducible():
    rng = np.random.default_rng(1)
    g = np.repeat(np.arange(25), 4)
    y = rng.normal(size=100)
    a = cluster_bootstrap(np.ones((100, 1)), y, g, reps=300, seed=42)
    b = cluster_bootstrap(np.ones((100, 1)), y, g, reps=300, seed=42)
    assert a.seed == 42 and np.array_equal(a.draws, b.draws)
    gen = cluster_bootstrap(np.ones((100, 1)), y, g, reps=300, seed=np.random.default_rng(1))
    assert isinstance(gen.seed, int)  # the int drawn from the Generator reproduces it
    again = cluster_bootstrap(np.ones((100, 1)), y, g, reps=300, seed=gen.seed)
    assert np.array_equal(gen.draws, again.draws)
    row = a.tidy()
    assert list(row[["estimate", "lo", "hi", "reps", "seed", "ci_type", "n_clusters"]]
                .iloc[0]) == [a.estimate, a.lo, a.hi, 300, 42, "percentile", 25]


def test_norm_inter_is_vectorised_over_rows():
    rng = np.random.default_rng(0)
    t = rng.normal(size=(4, 999))
    rows = np.array([bs.percentile_interval(r) for r in t])
    np.testing.assert_allclose(bs.percentile_interval(t), rows, rtol=1e-14)


def test_expanded_percentile_uses_hesterbergs_alpha():
    """alpha' = Phi(sqrt(G/(G-1)) t_{alpha/2,G-1}): 0.01588 for G = 20 at 95% (by hand:
    t_{0.025,19} = -2.0930, times sqrt(20/19) = -2.1474)."""
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(20), 5)
    y = rng.normal(size=20)[g] + rng.normal(size=100)
    res = cluster_bootstrap(np.ones((100, 1)), y, g, reps=1999, ci="expanded", seed=2)
    a = 0.0158808
    expected = bs.norm_inter(res.draws, np.array([a, 1 - a]))
    np.testing.assert_allclose([res.lo, res.hi], expected, rtol=1e-5)
    perc = bs.percentile_interval(res.draws)
    assert res.lo < perc[0] and res.hi > perc[1]
    # many clusters: expanded and plain percentile intervals coincide
    wide = bs.expanded_interval(res.draws, 10**7)
    np.testing.assert_allclose(wide, perc, rtol=1e-6)


def test_se_cr1_is_statsmodels_cluster_se():
    import statsmodels.api as sm
    rng = np.random.default_rng(12)
    g = np.repeat(np.arange(30), rng.integers(2, 9, 30))
    n = g.size
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = X @ [0.2, 0.5, -0.3] + rng.normal(size=30)[g] + rng.normal(size=n)
    fit = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": g})
    for ci in ("percentile", "bca", "studentized"):
        res = cluster_bootstrap(X, y, g, target=2, reps=200, ci=ci, seed=1)
        assert res.se_cr1 == pytest.approx(fit.bse[2], rel=STATSMODELS_TOL)


def test_studentized_replicate_se_is_cr1_of_the_expanded_resample():
    """Each resample's SE (linear and logit) equals statsmodels' cluster SE on the
    explicitly expanded resample, every drawn copy of a cluster its own cluster."""
    import statsmodels.api as sm
    rng = np.random.default_rng(21)
    g = np.repeat(np.arange(12), rng.integers(6, 12, 12))
    n = g.size
    X = np.column_stack([np.ones(n), rng.integers(0, 2, n)])
    y = (rng.random(n) < 0.3 + 0.3 * X[:, 1]).astype(float)
    W = cluster_weights(12, 3, np.random.default_rng(8)).astype(int)
    for family in ("gaussian", "binomial"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            res = cluster_bootstrap(X, y, g, target=1, family=family, reps=3,
                                    ci="studentized", seed=8)
        for b in range(3):
            rows = np.concatenate([np.flatnonzero(g == c) for c in range(12)
                                   for _ in range(W[b, c])])
            copy = np.concatenate([np.full((g == c).sum(), 100 * c + k) for c in range(12)
                                   for k in range(W[b, c])])
            model = sm.OLS if family == "gaussian" else sm.Logit
            kw = {} if family == "gaussian" else {"disp": 0}
            fit = model(y[rows], X[rows]).fit(cov_type="cluster",
                                              cov_kwds={"groups": copy}, **kw)
            assert res.draws[b] == pytest.approx(fit.params[1], rel=STATSMODELS_TOL)
            se_b = (res.draws[b] - res.estimate) / res.t_draws[b]
            assert se_b == pytest.approx(fit.bse[1], rel=STATSMODELS_TOL)
