"""Analytic power (evalmix.plan.power) against closed forms, statsmodels and simulation.

References:
- statsmodels ``TTestPower`` (one-sample t test, noncentral t): a cluster of size 1 with
  ICC 0 is one independent observation, so our power must equal it to solver precision.
- Simulation: the cluster-robust (CR1, intercept-only) t test with K - 1 df run on data
  drawn from the design itself; analytic and simulated power must agree within Monte
  Carlo error (exact for normal cluster means with equal sizes, approximate otherwise).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower

import evalmix
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.plan.power import design_variance, mde, n_clusters_for_power, power

#: statsmodels and scipy use the same noncentral t; differences are solver tolerance.
CLOSED_FORM_TOL = 1e-6
#: simulation reps; Monte Carlo SE of a power near 0.5 is sqrt(.25 / 4000) = 0.008
SIM_REPS = 4000
#: agreement in Monte Carlo SEs (4 SE: a false alarm about 1 in 16,000 per check)
MC_Z = 4.0
#: extra allowance where the noncentral t is an approximation (binary scores, unequal
#: sizes: CR1 variance is not exactly scaled chi-square), measured at about 0.01-0.02
APPROX_ALLOWANCE = 0.025


def test_icc_zero_single_items_equals_statsmodels_ttestpower():
    for effect, k in [(0.2, 30), (0.5, 12), (0.35, 60)]:
        ours = float(power(effect, n_clusters=k, cluster_size=1, icc=0.0, sd=1.0).power)
        ref = TTestPower().power(effect_size=effect, nobs=k, alpha=0.05)
        assert abs(ours - ref) < CLOSED_FORM_TOL
        for alt, sm_alt in [("larger", "larger"), ("smaller", "smaller")]:
            e = effect if alt == "larger" else -effect
            ours = float(power(e, n_clusters=k, sd=1.0, alternative=alt).power)
            ref = TTestPower().power(effect_size=e, nobs=k, alpha=0.05, alternative=sm_alt)
            assert abs(ours - ref) < CLOSED_FORM_TOL


def test_icc_zero_cluster_power_uses_effective_sample():
    # ICC 0: clusters of m behave like K m independent items except for the t(K - 1) df;
    # with the normal reference the power is the z-test power with n = K m exactly.
    res = power(0.1, n_clusters=40, cluster_size=5, icc=0.0, sd=1.0, distribution="normal")
    z = stats.norm.ppf(0.975)
    ncp = 0.1 * np.sqrt(200)
    assert abs(float(res.power) - (stats.norm.sf(z - ncp) + stats.norm.cdf(-z - ncp))) < 1e-12
    assert float(res.deff) == pytest.approx(1.0)


def test_design_effect_closed_forms():
    # equal sizes: Kish 1 + (m - 1) rho
    _, deff = design_variance(n_clusters=30, cluster_size=20, icc=0.05, sd=1.0)
    assert float(deff) == pytest.approx(1 + 19 * 0.05, rel=1e-12)
    # unequal sizes: 1 + ((1 + CV^2) m_bar - 1) rho, from the actual sizes
    sizes = np.array([2, 4, 8, 10, 26])
    res = power(0.1, cluster_sizes=sizes, icc=0.2, sd=1.0)
    cv2 = sizes.var() / sizes.mean() ** 2
    assert float(res.deff) == pytest.approx(1 + ((1 + cv2) * sizes.mean() - 1) * 0.2, rel=1e-12)
    # that formula is the exact variance of the item-weighted mean
    exact = (0.2 * (sizes**2).sum() + 0.8 * sizes.sum()) / sizes.sum() ** 2
    assert float(res.se) ** 2 == pytest.approx(exact, rel=1e-12)


def test_mde_inverts_power_and_n_clusters_is_minimal():
    res = mde([0.5, 0.8, 0.9], n_clusters=[[8], [25], [100]], cluster_size=12, icc=0.08, sd=2.0)
    back = power(res.mde, n_clusters=[[8], [25], [100]], cluster_size=12, icc=0.08, sd=2.0)
    np.testing.assert_allclose(back.power, np.broadcast_to([0.5, 0.8, 0.9], (3, 3)), atol=1e-8)
    wr = mde(0.8, n_clusters=[15, 60], cluster_size=10, icc=0.1, estimand="win_rate")
    back = power(wr.mde, n_clusters=[15, 60], cluster_size=10, icc=0.1, estimand="win_rate")
    np.testing.assert_allclose(back.power, 0.8, atol=1e-8)
    kres = n_clusters_for_power(0.8, effect=0.05, cluster_size=[1, 10, 50], icc=0.1, sd=0.45)
    k = kres.n_clusters
    assert np.all(kres.power >= 0.8)
    below = power(0.05, n_clusters=k - 1, cluster_size=[1, 10, 50], icc=0.1, sd=0.45).power
    assert np.all(below < 0.8)


def test_crossed_factor_caps_power():
    # 3 judges with ICC 0.05: no number of scenarios removes their variance
    capped = n_clusters_for_power(0.8, effect=0.05, cluster_size=10, icc=0.1, sd=0.45,
                                  crossed={"judge": (0.05, 3)})
    assert np.isnan(capped.n_clusters)
    v_big, _ = design_variance(n_clusters=1e9, cluster_size=10, icc=0.1, sd=1.0,
                               crossed={"judge": (0.05, 3)})
    assert float(v_big) == pytest.approx(0.05 / 3, rel=1e-6)


def test_bad_options_raise():
    with pytest.raises(InvalidOptionError, match="win_rate"):
        power(0.1, n_clusters=10, sd=1, estimand="median")
    with pytest.raises(EvalmixError, match="sd is required"):
        power(0.1, n_clusters=10)
    with pytest.raises(EvalmixError, match="at least 2"):
        power(0.1, n_clusters=1, sd=1)
    assert evalmix.power is power


# ------------------------------------------------------------------ simulation checks

def _cr1_reject(sums: np.ndarray, sizes: np.ndarray, null: float, level: float = 0.95):
    """Intercept-only CR1 t test on per-cluster sums, stacked over replications."""
    k = sizes.size
    n = sizes.sum()
    est = sums.sum(axis=1) / n
    scores = sums - sizes[None, :] * est[:, None]
    se = np.sqrt(k / (k - 1) * (scores**2).sum(axis=1)) / n
    t = (est - null) / se
    return np.abs(t) > stats.t.ppf(1 - (1 - level) / 2, k - 1)


def _check(simulated: np.ndarray, analytic: float, allowance: float = 0.0) -> None:
    p_hat = simulated.mean()
    mcse = np.sqrt(analytic * (1 - analytic) / simulated.size)
    assert abs(p_hat - analytic) < MC_Z * mcse + allowance, (p_hat, analytic, mcse)


def test_power_matches_simulation_normal_equal_sizes():
    # normal random-intercept scores: the noncentral t is exact here
    rng = np.random.default_rng(11)
    k, m, rho, sd, effect = 10, 5, 0.2, 1.0, 0.45
    a = rng.normal(0, np.sqrt(rho) * sd, (SIM_REPS, k))
    e = rng.normal(0, np.sqrt((1 - rho) * m) * sd, (SIM_REPS, k))  # sums of m residuals
    sums = m * (effect + a) + e
    analytic = float(power(effect, n_clusters=k, cluster_size=m, icc=rho, sd=sd).power)
    _check(_cr1_reject(sums, np.full(k, m), 0.0), analytic)


def test_power_matches_simulation_beta_binomial_mean():
    # accuracy 0.62 vs null 0.55 with beta-binomial clusters (ICC exact)
    rng = np.random.default_rng(12)
    k, m, rho, p, null = 30, 10, 0.1, 0.62, 0.55
    scale = (1 - rho) / rho
    pk = rng.beta(p * scale, (1 - p) * scale, (SIM_REPS, k))
    sums = rng.binomial(m, pk).astype(float)
    analytic = float(power(p - null, n_clusters=k, cluster_size=m, icc=rho,
                           sd=np.sqrt(p * (1 - p))).power)
    assert 0.3 < analytic < 0.9
    _check(_cr1_reject(sums, np.full(k, m), null), analytic, APPROX_ALLOWANCE)


def test_power_matches_simulation_unequal_sizes_paired_difference():
    # per-item differences d = delta + a_k + e with difference ICC 0.15, unequal sizes
    rng = np.random.default_rng(13)
    sizes = np.maximum(1, np.round(rng.gamma(2.0, 4.0, 40))).astype(int)
    rho, sd, delta = 0.15, 1.0, 0.22
    a = rng.normal(0, np.sqrt(rho) * sd, (SIM_REPS, sizes.size))
    e = rng.normal(0, 1, (SIM_REPS, sizes.size)) * np.sqrt((1 - rho) * sizes) * sd
    sums = sizes * (delta + a) + e
    analytic = float(power(delta, cluster_sizes=sizes, icc=rho, sd=sd,
                           estimand="difference").power)
    assert 0.3 < analytic < 0.9
    _check(_cr1_reject(sums, sizes.astype(float), 0.0), analytic, APPROX_ALLOWANCE)


def test_win_rate_power_matches_simulation():
    # win rate 0.58 vs 0.5, beta-binomial clusters of 8 comparisons, ICC 0.05
    rng = np.random.default_rng(14)
    k, m, rho, p = 40, 8, 0.05, 0.58
    scale = (1 - rho) / rho
    sums = rng.binomial(m, rng.beta(p * scale, (1 - p) * scale, (SIM_REPS, k))).astype(float)
    analytic = float(power(p - 0.5, n_clusters=k, cluster_size=m, icc=rho,
                           estimand="win_rate").power)
    _check(_cr1_reject(sums, np.full(k, m), 0.5), analytic, APPROX_ALLOWANCE)


# ------------------------------------------------------------------ pilot simulation
from evalmix.plan.pilot import (  # noqa: E402
    bootstrap_power,
    components_from_fit,
    parametric_power,
    pilot_power,
)


def test_parametric_power_matches_analytic_gaussian():
    # scenario random intercepts (ICC 0.2 with residual SD sqrt(0.8)), 8 items each, mean
    # tested against 0: the noncentral t is exact, so simulation must agree within MC error
    reps = 1500
    res = parametric_power({"scenario": np.sqrt(0.2), "item": 0.0},
                           n_levels={"scenario": 12, "item": 8}, vary={"scenario": [24]},
                           estimand="mean", family="gaussian", residual_sd=np.sqrt(0.8),
                           effect=0.3, reps=reps, seed=3)
    for _, row in res.table.iterrows():
        analytic = float(power(0.3, n_clusters=row.n_clusters, cluster_size=8, icc=0.2,
                               sd=1.0).power)
        mcse = np.sqrt(analytic * (1 - analytic) / reps)
        assert abs(row.power - analytic) < MC_Z * mcse, (row.plan, row.power, analytic)
        # the MDE uses the same multiplier as evalmix.mde, so it is close to the analytic one
        analytic_mde = float(mde(0.8, n_clusters=row.n_clusters, cluster_size=8, icc=0.2,
                                 sd=1.0).mde)
        assert abs(row.mde - analytic_mde) < 0.03 * analytic_mde + MC_Z * row.mde_mcse


def test_parametric_interaction_term_acts_as_item_noise():
    # a scenario:item intercept with one row per (scenario, item) is item-level noise: the
    # same design as above with the residual moved into the interaction term
    reps = 1500
    res = parametric_power({"scenario": np.sqrt(0.2), "scenario:item": np.sqrt(0.79)},
                           n_levels={"scenario": 12, "item": 8}, estimand="mean",
                           family="gaussian", residual_sd=0.1, effect=0.3, reps=reps, seed=4)
    analytic = float(power(0.3, n_clusters=12, cluster_size=8, icc=0.2, sd=1.0).power)
    mcse = np.sqrt(analytic * (1 - analytic) / reps)
    assert abs(res.table.loc[0, "power"] - analytic) < MC_Z * mcse


def test_pilot_bootstrap_power_tracks_analytic_with_a_large_pilot():
    # a pilot of 400 normal clusters (ICC 0.15, m = 6) pins the variance components down,
    # so resampling 15 or 40 clusters must give the analytic power up to MC error plus the
    # pilot's own error in its variance (sd of a variance estimate from 400 clusters ~7%)
    rng = np.random.default_rng(21)
    g, m, rho = 400, 6, 0.15
    cl = np.repeat(np.arange(g), m)
    y = rng.normal(0, np.sqrt(rho), g)[cl] + rng.normal(0, np.sqrt(1 - rho), cl.size)
    reps = 2000
    res = bootstrap_power(np.ones((cl.size, 1)), y, cl, n_clusters=[15, 40], effect=0.25,
                          reps=reps, seed=2)
    for _, row in res.table.iterrows():
        analytic = float(power(0.25, n_clusters=row.n_clusters, cluster_size=m, icc=rho,
                               sd=1.0).power)
        mcse = np.sqrt(analytic * (1 - analytic) / reps)
        assert abs(row.power - analytic) < MC_Z * mcse + APPROX_ALLOWANCE + 0.02, row
    assert (res.table.effect == 0.25).all()


def test_pilot_power_on_eval_tables():
    from evalmix.sim import clustered_scores, pairwise_judges

    table = clustered_scores(30, 8, p=0.65, icc=0.1, seed=4).table()
    res = pilot_power(table, n_clusters=[10, 60], null=0.5, reps=400, seed=1)
    assert res.table.power.is_monotonic_increasing
    assert (res.table.mde.diff().dropna() < 0).all()
    pw = pairwise_judges(12, 3, 2, 2, seed=5).table()
    diff = pilot_power(pw, estimand="difference", cluster="scenario", n_clusters=[24],
                       reps=300, seed=2)
    assert diff.table.loc[0, "n_clusters"] == 24
    with pytest.raises(EvalmixError, match="one cluster role"):
        pilot_power(pw, cluster=["scenario", "judge"], n_clusters=[10])


def test_pilot_power_fallback_matches_build_problem(monkeypatch):
    import sys

    from evalmix.sim import clustered_scores

    table = clustered_scores(25, 6, p=0.6, icc=0.1, seed=9).table()
    kwargs = dict(n_clusters=[15, 50], null=0.5, reps=300, seed=4)
    first = pilot_power(table, **kwargs).table
    monkeypatch.setitem(sys.modules, "evalmix.inference.estimands", None)  # import fails
    fallback = pilot_power(table, **kwargs).table
    np.testing.assert_allclose(fallback.power, first.power)
    np.testing.assert_allclose(fallback.mde, first.mde, rtol=1e-10)


def test_components_from_model_fit_variance_frame():
    import pandas as pd

    from evalmix.models.result import ModelFit

    # labels as evalmix.models writes them (intercepts by factor, slopes "term|factor")
    variance = pd.DataFrame({"factor": ["scenario", "judge", "scenario:judge",
                                        "condition[treatment]|judge", "position|judge",
                                        "Residual"],
                             "sd": [0.8, 0.4, 0.2, 0.3, 0.5, 1.8138]})
    fit = ModelFit(backend="glmm_map", family="bernoulli", formula="y ~ ...",
                   fixed_effects=pd.DataFrame(), variance=variance)
    intercepts, slopes, family, _ = components_from_fit(fit)
    assert intercepts == {"scenario": 0.8, "judge": 0.4, "scenario:judge": 0.2}
    assert slopes == {"judge": 0.3} and family == "binomial"
    assert components_from_fit({"scenario": 0.5})[0] == {"scenario": 0.5}
    res = parametric_power(fit, n_levels={"scenario": 10, "judge": 3}, estimand="difference",
                           effect=0.5, reps=50, seed=1, cluster=["scenario", "judge"])
    assert res.table.loc[0, "df"] == 2  # multiway: min(G) - 1


def test_parametric_multiway_variance_equals_inference_sandwich():
    from evalmix.inference import sandwich
    from evalmix.plan.pilot_parametric import _multiway_var

    rng = np.random.default_rng(5)
    grid = np.indices((7, 4, 3)).reshape(3, -1)
    codes = {"scenario": grid[0], "persona": grid[1], "judge": grid[2]}
    y = rng.normal(size=(3, grid.shape[1])) + rng.normal(size=7)[grid[0]]
    resid = y - y.mean(axis=1, keepdims=True)
    ours, df = _multiway_var(resid, codes)
    assert df == 2
    checked = 0
    for i in range(3):
        ref = sandwich.vcov_multiway(np.ones((resid.shape[1], 1)), resid[i],
                                     list(codes.values()), type="CR1")
        if not ref.fixed:  # where the CGM sum is negative we fall back differently
            assert ours[i] == pytest.approx(float(ref.vcov[0, 0]), rel=1e-10)
            checked += 1
    assert checked >= 2


def test_hemming_fixed_number_of_clusters_formula():
    # Hemming et al. (2011), doi:10.1186/1471-2288-11-102, eq. 3: with K clusters fixed, an
    # individually randomised sample size n_I is matched by clusters of
    # m = n_I (1 - rho) / (K - n_I rho); under the normal reference the clustered design
    # must then have exactly the power of the unclustered z test with n_I observations.
    for n_i, k, rho in [(100, 40, 0.05), (60, 25, 0.2), (300, 90, 0.01)]:
        m = n_i * (1 - rho) / (k - n_i * rho)
        clustered = power(0.3, n_clusters=k, cluster_size=m, icc=rho, sd=1.0,
                          distribution="normal")
        simple = power(0.3, n_clusters=n_i, cluster_size=1, icc=0.0, sd=1.0,
                       distribution="normal")
        assert float(clustered.power) == pytest.approx(float(simple.power), rel=1e-12)


def test_design_keywords_are_typed_and_checked_in_one_place():
    """power, mde and n_clusters_for_power share one list of design keywords: the
    TypedDict for static checkers names exactly the keywords the functions take, and a
    misspelt or solved-for keyword is refused with the list instead of being ignored."""
    from evalmix.plan.power import DESIGN_OPTIONS, DesignOptions

    assert tuple(DesignOptions.__annotations__) == DESIGN_OPTIONS
    with pytest.raises(InvalidOptionError, match="n_cluster=20; it takes n_clusters, cluster_size"):
        evalmix.power(0.05, n_cluster=20, sd=0.5)  # type: ignore[call-arg]
    with pytest.raises(InvalidOptionError, match="solves for it"):
        evalmix.n_clusters_for_power(0.8, effect=0.05, n_clusters=20, sd=0.5)
    with pytest.raises(InvalidOptionError, match="estimand"):
        evalmix.mde(0.8, n_clusters=20, sd=0.5, estimand="median")  # type: ignore[typeddict-item]
