"""Wild cluster bootstrap-t (WCR): brute-force enumeration, CR1 identity, inversion."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from conftest import REFERENCE
from scipy import stats

from evalmix.errors import InvalidOptionError
from evalmix.inference.wild import (
    WEBB_BELOW,
    WEBB_VALUES,
    choose_weights,
    min_p_value,
    wild_cluster_bootstrap,
    wild_weights,
)

#: Same arithmetic up to float rounding (closed form vs explicit refits).
EXACT_TOL = 1e-9
#: With 400 clusters the bootstrap-t and the t(G-1) reference agree to O(1/G) plus
#: Monte Carlo error of a p-value near 0.5 with 9,999 draws (sd 0.005).
LARGE_G_P_TOL = 0.02
#: wildboottest forms t* from differently ordered float sums (JSON keeps 17 digits).
WILDBOOTTEST_TOL = 1e-7


def _data(G=7, seed=3):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), rng.integers(3, 9, G))
    n = g.size
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = X @ [1, 0.3, 0.2] + rng.normal(size=G)[g] + rng.normal(size=n)
    return X, y, g


def _brute_t(X, y, g, target, null, V):
    """Explicit WCR: restricted fit, y* for each weight vector, refit, statsmodels CR1."""
    Xr = np.delete(X, target, axis=1)
    yr = y - null * X[:, target]
    br = np.linalg.lstsq(Xr, yr, rcond=None)[0]
    ur = yr - Xr @ br
    fitted = Xr @ br + null * X[:, target]
    out = []
    for v in V:
        fit = sm.OLS(fitted + ur * v[g], X).fit(cov_type="cluster", cov_kwds={"groups": g})
        out.append((fit.params[target] - null) / fit.bse[target])
    return np.array(out)


def test_observed_t_is_cr1_t():
    X, y, g = _data()
    res = wild_cluster_bootstrap(X, y, g, target=1, null=0.1, reps=999, seed=1)
    fit = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": g})
    assert res.se_cr1 == pytest.approx(fit.bse[1], rel=EXACT_TOL)
    assert res.t_obs == pytest.approx((fit.params[1] - 0.1) / fit.bse[1], rel=EXACT_TOL)


def test_observed_t_is_sandwich_cr1_t():
    from evalmix.inference import sandwich
    X, y, g = _data()
    res = wild_cluster_bootstrap(X, y, g, target=2, reps=99, seed=1)
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    V = sandwich.vcov_cluster(X, y - X @ beta, g, type="CR1")
    assert res.t_obs == pytest.approx(beta[2] / np.sqrt(V[2, 2]), rel=EXACT_TOL)


def test_full_enumeration_equals_brute_force():
    X, y, g = _data(G=7)
    res = wild_cluster_bootstrap(X, y, g, target=1, null=0.1, reps=9999, seed=1)
    assert res.enumerated and res.reps == 2**7
    V = np.array(list(itertools.product((1.0, -1.0), repeat=7)))
    t = _brute_t(X, y, g, 1, 0.1, V)
    np.testing.assert_allclose(res.t_draws, t, rtol=EXACT_TOL, atol=EXACT_TOL)
    assert res.p_value == np.mean(np.abs(t) >= abs(res.t_obs) * (1 - 1e-8))


def test_hand_computed_mean_three_clusters():
    """y = 1,4,11,6,13,8 in clusters 1,1,2,2,3,3 (the CR1 example of the issue); H0: mu=5.

    Under H0 the restricted residuals are y - 5 (cluster sums -3, 7, 11); the 8 sign
    vectors give mean* = 5 + (sum_g v_g s_g) / 6 and a CR1 SE from the cluster sums of
    y* - mean*. By hand: t_obs = (43/6 - 5) / 2.4037009 = 0.90140.
    """
    y = np.array([1.0, 4, 11, 6, 13, 8])
    g = np.array([1, 1, 2, 2, 3, 3])
    res = wild_cluster_bootstrap(np.ones((6, 1)), y, g, target=0, null=5.0, reps=999)
    assert res.se_cr1 == pytest.approx(2.4037009, abs=1e-7)
    assert res.t_obs == pytest.approx((43 / 6 - 5) / 2.4037009, rel=1e-7)
    s = np.array([-3.0, 7.0, 11.0])
    t = []
    for v in itertools.product((1.0, -1.0), repeat=3):
        ystar = 5 + (y - 5) * np.array(v)[g - 1]
        mu = ystar.mean()
        cs = np.bincount(g - 1, weights=ystar - mu)
        t.append((mu - 5) / np.sqrt(3 / 2 * np.sum(cs**2) / 36))
    assert np.sum(s) == pytest.approx(15.0)
    np.testing.assert_allclose(res.t_draws, t, rtol=EXACT_TOL)
    assert res.p_value == pytest.approx(np.mean(np.abs(t) >= abs(res.t_obs) * (1 - 1e-8)))


def test_large_g_agrees_with_cr1_t_test():
    rng = np.random.default_rng(3)
    G = 400
    g = np.repeat(np.arange(G), 5)
    X = np.column_stack([np.ones(G * 5), rng.normal(size=G * 5)])
    y = 0.05 * X[:, 1] + rng.normal(size=G)[g] + rng.normal(size=G * 5)
    res = wild_cluster_bootstrap(X, y, g, target=1, reps=9999, seed=2)
    fit = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": g})
    p_t = 2 * stats.t.sf(abs(fit.tvalues[1]), G - 1)
    assert res.p_value == pytest.approx(p_t, abs=LARGE_G_P_TOL)
    half = stats.t.ppf(0.975, G - 1) * fit.bse[1]
    assert res.lo == pytest.approx(fit.params[1] - half, abs=0.05 * half)
    assert res.hi == pytest.approx(fit.params[1] + half, abs=0.05 * half)


def test_interval_bounds_are_where_the_test_flips():
    X, y, g = _data(G=8, seed=5)
    res = wild_cluster_bootstrap(X, y, g, target=1, reps=9999, level=0.9)
    V = np.array(list(itertools.product((1.0, -1.0), repeat=8)))
    eps = 1e-6 * res.se_cr1
    for bound, inside in ((res.lo, res.lo + eps), (res.hi, res.hi - eps)):
        outside = 2 * bound - inside
        for theta, rejects in ((inside, False), (outside, True)):
            t = _brute_t(X, y, g, 1, theta, V)
            t_obs = (res.estimate - theta) / res.se_cr1
            p = np.mean(np.abs(t) >= abs(t_obs) * (1 - 1e-8))
            assert bool(p < 0.1) == rejects
    assert res.lo < res.estimate < res.hi


def test_relabelling_clusters_changes_nothing_under_enumeration():
    X, y, g = _data(G=7)
    a = wild_cluster_bootstrap(X, y, g, target=1, reps=9999)
    perm = np.random.default_rng(0).permutation(7)
    b = wild_cluster_bootstrap(X, y, perm[g], target=1, reps=9999)
    c = wild_cluster_bootstrap(X, y, np.array([f"c{k}" for k in g]), target=1, reps=9999)
    for other in (b, c):
        assert other.p_value == a.p_value
        assert (other.lo, other.hi) == pytest.approx((a.lo, a.hi), rel=1e-8)


def test_webb_weights():
    v = wild_weights(5, 60_000, "webb", np.random.default_rng(1))
    assert set(np.unique(v)) == set(WEBB_VALUES)
    assert abs(v.mean()) < 0.01 and abs(v.var() - 1) < 0.01
    assert WEBB_VALUES @ WEBB_VALUES / 6 == pytest.approx(1.0)
    X, y, g = _data(G=6)
    a = wild_cluster_bootstrap(X, y, g, target=1, weights="webb", reps=1999, seed=4)
    b = wild_cluster_bootstrap(X, y, g, target=1, weights="webb", reps=1999, seed=4)
    assert not a.enumerated and a.reps == 1999 and a.seed == 4
    assert a.p_value == b.p_value and np.array_equal(a.t_draws, b.t_draws)
    V = wild_weights(6, 1999, "webb", np.random.default_rng(4))
    np.testing.assert_allclose(a.t_draws[:20], _brute_t(X, y, g, 1, 0.0, V[:20]),
                               rtol=EXACT_TOL, atol=EXACT_TOL)


def test_options():
    X, y, g = _data()
    with pytest.raises(InvalidOptionError, match="'rademacher', 'webb'"):
        wild_cluster_bootstrap(X, y, g, target=1, weights="mammen")
    res = wild_cluster_bootstrap(X, y, g, target=1, null=0.0, reps=99, seed=1)
    assert res.tidy().loc[0, "ci_type"] == "test-inversion"
    at_estimate = wild_cluster_bootstrap(X, y, g, target=1, null=res.estimate, reps=99)
    assert at_estimate.p_value == 1.0


def test_five_clusters_rademacher_cannot_reject_at_5_percent():
    """With G = 5 the 32 sign vectors give p >= 2/32 > 0.05: the 95% interval is the
    whole line; Webb's six-point weights (7,776 vectors) give a finite interval."""
    X, y, g = _data(G=5, seed=8)
    rad = wild_cluster_bootstrap(X, y, g, target=1, reps=9999)
    assert rad.enumerated and rad.reps == 32 and rad.p_value >= 2 / 32
    assert rad.lo == -np.inf and rad.hi == np.inf
    webb = wild_cluster_bootstrap(X, y, g, target=1, weights="webb", reps=9999, seed=1)
    assert np.isfinite([webb.lo, webb.hi]).all() and webb.lo < webb.estimate < webb.hi


def test_matches_wildboottest_package():
    """wildboottest 0.3.2 (independent implementation; wildboottest_reference.py).

    The bootstrap |t*| (all 2^G sign vectors) and t agree to rounding. p-values differ
    only in tie handling: wildboottest counts |t*| > |t| while evalmix counts
    |t*| >= |t| (the all-ones and all-minus-ones vectors reproduce +-t exactly, so the
    exact randomisation p-value is at least 2 / 2^G); the gap is at most 2 / 2^G.
    """
    ref = json.loads((REFERENCE / "bootstrap"
                      / "wildboottest_reference.json").read_text())
    for case in ref["cases"]:
        X, y, g = np.array(case["X"]), np.array(case["y"]), np.array(case["cluster"])
        res = wild_cluster_bootstrap(X, y, g, target=1, reps=99_999)
        assert res.enumerated and res.reps == 2 ** case["G"]
        assert res.t_obs == pytest.approx(case["t_stat"], rel=EXACT_TOL)
        np.testing.assert_allclose(np.sort(np.abs(res.t_draws)), case["abs_t_boot_sorted"],
                                   rtol=WILDBOOTTEST_TOL)
        assert case["p_value"] <= res.p_value <= case["p_value"] + 2 / 2 ** case["G"]


# ------------------------------------------------------------------ few clusters
def test_webb_distribution_closed_form_moments():
    """Webb (2023): six points +-sqrt(1/2), +-1, +-sqrt(3/2), each 1/6: mean 0,
    variance 1, third moment 0, fourth moment (1/4 + 1 + 9/4) / 3 = 7/6."""
    v = WEBB_VALUES
    assert v.size == 6 and np.allclose(np.sort(v ** 2), [0.5, 0.5, 1, 1, 1.5, 1.5])
    moments = [np.mean(v ** k) for k in (1, 2, 3, 4)]
    np.testing.assert_allclose(moments, [0.0, 1.0, 0.0, 7 / 6], atol=1e-15)


def test_webb_full_enumeration_equals_brute_force():
    """6^3 = 216 Webb vectors: t* equal explicit statsmodels refits, p is the exact
    randomisation p-value."""
    X, y, g = _data(G=3, seed=2)
    res = wild_cluster_bootstrap(X, y, g, target=1, null=0.1, weights="webb", reps=99)
    assert res.enumerated and res.reps == 6 ** 3 and res.weights == "webb"
    V = np.array(list(itertools.product(WEBB_VALUES, repeat=3)))
    t = _brute_t(X, y, g, 1, 0.1, V)
    np.testing.assert_allclose(res.t_draws, t, rtol=EXACT_TOL, atol=EXACT_TOL)
    assert res.p_value == np.mean(np.abs(t) >= abs(res.t_obs) * (1 - 1e-8))


@pytest.mark.parametrize(("weights", "G", "k"), [("rademacher", 5, 2), ("webb", 3, 6),
                                                 ("webb", 2, 6)])
def test_smallest_attainable_p_value_is_k_to_the_one_minus_g(weights, G, k):
    """Far from the estimate only the K constant weight vectors (t* = +-t_obs, the t
    statistic being scale-free) reach |t_obs|: the enumerated p-value is exactly
    K / K^G, the closed form of min_p_value."""
    X, y, g = _data(G=G, seed=4)
    res = wild_cluster_bootstrap(X, y, g, target=1, weights=weights, reps=99,
                                 null=1e6)
    assert res.enumerated and res.p_value == pytest.approx(k / k ** G, rel=1e-12)
    assert res.min_p_value == min_p_value(weights, G) == pytest.approx(k / k ** G)


def test_auto_weights_are_webb_below_twelve_clusters():
    X, y, g = _data(G=5, seed=8)
    auto = wild_cluster_bootstrap(X, y, g, target=1, weights="auto", reps=999, seed=1)
    assert auto.weights == "webb" and auto.enumerated and auto.reps == 6 ** 5
    assert choose_weights("auto", WEBB_BELOW - 1) == "webb"
    assert choose_weights("auto", WEBB_BELOW) == "rademacher"


def test_interval_with_too_few_clusters_for_the_level_is_not_estimable():
    """The API's default weights decide with 5 clusters; Rademacher (min p 1/16) and Webb
    with 2 clusters (min p 1/6) cannot reach 95%: no interval, a note, a warning."""
    import evalmix
    from evalmix.errors import NotEstimableWarning

    rng = np.random.default_rng(7)
    g = np.repeat(np.arange(5), 30)
    frame = pd.DataFrame({"y": (rng.random(150) < 0.4 + 0.05 * g).astype(int),
                          "cluster": g})
    t = evalmix.read(frame, outcome="y", clusters={"cluster": "cluster"})
    auto = evalmix.interval(t, "mean", method="wild", cluster="cluster", seed=1)
    assert auto.details["weights"] == "webb" and auto.details["enumerated"]
    assert 0 < auto.lo < auto.estimate < auto.hi < 1
    with pytest.warns(NotEstimableWarning, match="cannot reach the 95% level"):
        rad = evalmix.interval(t, "mean", method="wild", cluster="cluster",
                               weights="rademacher", seed=1)
    assert np.isnan(rad.lo) and np.isnan(rad.hi) and "0.0625" in rad.note
    # at 90% Rademacher with 5 clusters can decide (2/32 < 0.10)
    r90 = evalmix.interval(t, "mean", method="wild", cluster="cluster", level=0.9,
                           weights="rademacher", seed=1)
    assert np.isfinite([r90.lo, r90.hi]).all()
    two = t.subset(frame["cluster"].to_numpy() < 2)
    with pytest.warns(NotEstimableWarning, match="0.167"):
        assert np.isnan(evalmix.interval(two, "mean", method="wild", cluster="cluster",
                                         seed=1).lo)
