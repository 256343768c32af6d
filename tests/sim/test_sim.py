"""Known-truth simulators: reproducible, and their truth matches what they simulate.

References
----------
- Beta-binomial ICC: p_k ~ Beta(a, b) gives corr = 1 / (a + b + 1) (Kish 1965;
  Ridout, Demetrio & Firth 1999, doi:10.1111/j.0006-341X.1999.00137.x); the ANOVA
  estimator of the ICC is computed by hand here (one-way random-effects ANOVA).
- Design effect of a mean over clusters of unequal sizes m_k with a common ICC rho:
  Var(ybar) = p(1-p)/N * (1 + (sum m_k^2 / N - 1) rho), i.e. 1 + ((1 + CV^2) m_bar - 1) rho
  (Eldridge, Ashby & Kerry 2006, doi:10.1093/ije/dyl129).
- The pairwise marginal truth (Monte Carlo inside the simulator) is checked against
  Gauss-Hermite quadrature of the same latent normal model, and against the empirical
  rates of a large simulation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit

from evalmix.errors import EvalmixError
from evalmix.sim import DEFAULT_SDS, cluster_sizes, clustered_scores, pairwise_judges

#: z multiplier for Monte Carlo checks: a correct simulator fails about 1 in 15,000 runs
#: per check (and the seeds are fixed, so these tests are deterministic).
Z_MC = 4.0
#: Monte Carlo error of the simulator's own truth (400,000 internal draws): the SD of a
#: probability estimate is at most 0.5 / sqrt(400,000) = 0.0008.
TRUTH_MC_SE = 0.0008


# ---------------------------------------------------------------- reproducibility
def test_same_seed_same_table_different_seed_different():
    a, b, c = (pairwise_judges(4, 3, 2, 2, seed=s) for s in (7, 7, 8))
    pd.testing.assert_frame_equal(a.data, b.data)
    assert a.truth["judge_position"] == b.truth["judge_position"]
    assert a.truth["marginal"] == b.truth["marginal"]
    assert not a.data["outcome"].equals(c.data["outcome"])
    assert a.truth["judge_position"] != c.truth["judge_position"]
    assert a.seed == 7 and c.seed == 8

    s1, s2, s3 = (clustered_scores(30, 5, p=0.6, icc=0.3, size_cv=0.5, seed=s)
                  for s in (1, 1, 2))
    pd.testing.assert_frame_equal(s1.data, s2.data)
    assert np.array_equal(s1.truth["sizes"], s2.truth["sizes"])
    assert not s1.data["y"].equals(s3.data["y"]) or len(s1.data) != len(s3.data)


def test_generator_seed_is_recorded_and_bad_seed_rejected():
    res = clustered_scores(10, 3, seed=np.random.default_rng(3))
    assert isinstance(res.seed, int)  # the int drawn from the Generator reproduces it
    pd.testing.assert_frame_equal(res.data, clustered_scores(10, 3, seed=res.seed).data)
    fresh = clustered_scores(10, 3, seed=None)
    assert isinstance(fresh.seed, int)
    pd.testing.assert_frame_equal(fresh.data, clustered_scores(10, 3, seed=fresh.seed).data)
    with pytest.raises(EvalmixError, match="seed must be an int"):
        clustered_scores(10, 3, seed="abc")  # type: ignore[arg-type]


# ---------------------------------------------------------------- clustered scores
def anova_icc(y: np.ndarray, cluster: np.ndarray, m: int) -> float:
    """One-way ANOVA ICC for equal cluster sizes m: (MSB - MSW) / (MSB + (m - 1) MSW)."""
    k = cluster.max() + 1
    means = np.bincount(cluster, weights=y) / m
    grand = y.mean()
    msb = m * ((means - grand) ** 2).sum() / (k - 1)
    msw = ((y - means[cluster]) ** 2).sum() / (k * (m - 1))
    return (msb - msw) / (msb + (m - 1) * msw)


def test_clustered_scores_recovers_mean_and_icc():
    p, icc, m, blocks, per_block = 0.7, 0.2, 10, 20, 1000
    res = clustered_scores(blocks * per_block, m, p=p, icc=icc, seed=11)
    assert res.data.shape == (blocks * per_block * m, 3)
    y = res.data["y"].to_numpy(dtype=float)
    cluster = pd.factorize(res.data["cluster"])[0]
    # mean: SE from the design effect of equal clusters, 1 + (m - 1) icc
    se_mean = np.sqrt(p * (1 - p) / y.size * (1 + (m - 1) * icc))
    assert abs(y.mean() - p) < Z_MC * se_mean
    # ICC: ANOVA estimate in independent blocks of clusters; MC error from the blocks
    est = np.array([
        anova_icc(y[cluster // per_block == b], cluster[cluster // per_block == b] % per_block, m)
        for b in range(blocks)
    ])
    se_icc = est.std(ddof=1) / np.sqrt(blocks)
    assert abs(est.mean() - icc) < Z_MC * se_icc
    assert se_icc < 0.01  # the check has teeth: +-0.04 at most around 0.2
    # read() accepts it
    table = res.table()
    assert table.outcome_type == "binary" and table.n_levels("cluster") == blocks * per_block


def test_clustered_scores_icc_zero_is_independent():
    res = clustered_scores(3000, 5, p=0.4, icc=0.0, seed=5)
    y = res.data["y"].to_numpy(dtype=float)
    est = anova_icc(y, pd.factorize(res.data["cluster"])[0], 5)
    assert abs(est) < Z_MC * np.sqrt(2 / (5 * 4 * 3000))  # normal-theory SE at rho = 0
    assert res.truth["deff"] == 1.0


def test_unequal_sizes_design_effect():
    rho, p = 0.2, 0.5
    sizes = cluster_sizes(50, 10, size_cv=0.8, seed=3)
    assert sizes.min() >= 1 and abs(sizes.mean() - 10) < 4
    one = clustered_scores(50, sizes, p=p, icc=rho, seed=1)
    n = sizes.sum()
    deff = 1 + ((sizes**2).sum() / n - 1) * rho  # sum m^2 / N form
    assert one.truth["deff"] == pytest.approx(deff, rel=1e-12)
    cv2 = sizes.var() / sizes.mean() ** 2
    assert deff == pytest.approx(1 + ((1 + cv2) * sizes.mean() - 1) * rho)
    assert deff > 1 + (sizes.mean() - 1) * rho  # unequal sizes cost more than equal ones
    # Monte Carlo: R replicates of the same 50 sizes, drawn in one call
    reps = 1000
    res = clustered_scores(50 * reps, np.tile(sizes, reps), p=p, icc=rho, seed=9)
    y = res.data["y"].to_numpy(dtype=float)
    rep = np.repeat(np.arange(reps), n)
    means = np.bincount(rep, weights=y) / n
    var_ratio = means.var(ddof=1) / (p * (1 - p) / n)
    # the sample variance of R normal-ish means has relative SE sqrt(2 / (R - 1))
    assert abs(var_ratio / deff - 1) < Z_MC * np.sqrt(2 / (reps - 1))


def test_clustered_scores_rejects_bad_parameters():
    with pytest.raises(EvalmixError, match="p must be in"):
        clustered_scores(10, 3, p=1.2)
    with pytest.raises(EvalmixError, match="icc must be in"):
        clustered_scores(10, 3, icc=1.0)
    with pytest.raises(EvalmixError, match="one size >= 1 per cluster"):
        clustered_scores(3, np.array([1, 2]))


# ---------------------------------------------------------------- pairwise judges
def test_pairwise_design_shape_and_crossing():
    s, p, a, j = 4, 3, 2, 3
    res = pairwise_judges(s, p, a, j, seed=2)
    d = res.data
    assert len(d) == s * p * a * 2 * j * 2
    assert set(d["model_a"]) == {"reference"} and set(d["model_b"]) == {"control", "treatment"}
    per_output = d.groupby("output_id").agg(n=("judge", "size"), judges=("judge", "nunique"),
                                            orders=("first_shown", "nunique"))
    assert len(per_output) == s * p * a * 2
    assert (per_output["n"] == 2 * j).all() and (per_output["judges"] == j).all()
    assert (per_output["orders"] == 2).all()
    table = res.table()
    summary = table.describe().to_dict()
    assert {f["factor"]: f["levels"] for f in summary["factors"]} == {
        "scenario": s, "persona": p, "author": a, "judge": j}
    assert {r["relation"] for r in summary["relations"]} == {"crossed"}
    assert summary["pairs"]["comparisons"] == summary["pairs"]["both_orders"] == len(d) // 2
    assert summary["pairs"]["share_a_first"] == 0.5
    # y is "model_a (the reference) wins"
    assert np.array_equal(table.y == 1.0, (d["outcome"] == "a").to_numpy())


def test_pairwise_without_ties():
    res = pairwise_judges(5, 2, 2, 2, tie_threshold=0.0, seed=4)
    assert "tie" not in set(res.data["outcome"])
    assert res.table().outcome_type == "binary"
    for cond in ("control", "treatment"):
        assert res.truth["marginal"][cond]["p_tie"] == pytest.approx(0.0, abs=1e-12)


def quadrature_truth(alpha, beta, tau, sds, sd_jc, pos_mean, pos_sd):
    """P(b wins), P(tie) per condition by Gauss-Hermite: eta is normal given the order."""
    z, w = hermegauss(101)
    w = w / w.sum()
    out = {}
    base_var = sum(v**2 for v in sds.values())
    for cond, treat in (("control", 0.0), ("treatment", 1.0)):
        win = tie = 0.0
        for x in (0.5, -0.5):
            mu = alpha + beta * treat + pos_mean * x
            sd = np.sqrt(base_var + treat * sd_jc**2 + x**2 * pos_sd**2)
            eta = mu + sd * z
            p_b, p_a = expit(eta - tau), expit(-eta - tau)
            win += 0.5 * (w * p_b).sum()
            tie += 0.5 * (w * (1 - p_a - p_b)).sum()
        out[cond] = (win, tie)
    return out


def test_marginal_truth_matches_quadrature():
    kw = dict(intercept=-0.2, condition_effect=0.5, position_bias=0.4,
              sd_judge_condition=0.3, sd_position_judge=0.6, tie_threshold=0.4)
    res = pairwise_judges(2, 2, 2, 2, **kw, seed=1)
    ref = quadrature_truth(-0.2, 0.5, 0.4, DEFAULT_SDS, 0.3, 0.4, 0.6)
    for cond in ("control", "treatment"):
        t = res.truth["marginal"][cond]
        assert t["p_win"] == pytest.approx(ref[cond][0], abs=Z_MC * TRUTH_MC_SE)
        assert t["p_tie"] == pytest.approx(ref[cond][1], abs=Z_MC * TRUTH_MC_SE)
        assert t["score"] == pytest.approx(t["p_win"] + 0.5 * t["p_tie"])
    diff = res.truth["marginal"]["treatment"]["score"] - res.truth["marginal"]["control"]["score"]
    assert res.truth["marginal"]["difference_score"] == pytest.approx(diff)


def test_truth_matches_empirical_rates_of_a_large_simulation():
    # persona SD 0 (one persona) so scenarios are the only crossed random factor left to
    # average over: the empirical rate is then a mean of independent scenario rates and
    # its MC error is their SD / sqrt(S). Authors and judges are conditioned on.
    n_s = 20_000
    res = pairwise_judges(n_s, 1, 2, 2, sds={"persona": 0.0}, condition_effect=0.6,
                          position_bias=0.5, tie_threshold=0.3, seed=21)
    d = res.data
    truth = res.truth["given_authors_judges"]
    for cond in ("control", "treatment"):
        part = d[d["condition"] == cond]
        for key, verdict in (("p_win", "b"), ("p_tie", "tie")):
            per_scen = (part["outcome"] == verdict).groupby(part["scenario"]).mean()
            se = per_scen.std(ddof=1) / np.sqrt(n_s)
            tol = Z_MC * np.hypot(se, TRUTH_MC_SE)
            assert per_scen.mean() == pytest.approx(truth[cond][key], abs=tol), (cond, key)
    emp_diff = ((d["outcome"] == "b") + 0.5 * (d["outcome"] == "tie")).groupby(
        d["condition"]).mean()
    assert emp_diff["treatment"] - emp_diff["control"] == pytest.approx(
        truth["difference_score"], abs=0.01)
    assert truth["difference_score"] > 0.05  # the effect is there to be found


def test_position_bias_direction_per_judge():
    res = pairwise_judges(150, 4, 3, judges={"fair": 0.0, "first": 1.5, "second": -1.5},
                          position_bias=0.0, sd_position_judge=0.0, seed=8)
    assert res.truth["judge_position"] == {"fair": 0.0, "first": 1.5, "second": -1.5}
    d = res.data[res.data["outcome"] != "tie"]
    first_wins = (d["outcome"] == d["first_shown"]).groupby(d["judge"]).agg(["mean", "size"])
    se = np.sqrt(0.25 / first_wins["size"])
    # with no position bias the first-shown answer wins half the untied judgments exactly
    assert abs(first_wins.loc["fair", "mean"] - 0.5) < Z_MC * se["fair"]
    assert first_wins.loc["first", "mean"] > 0.5 + Z_MC * se["first"]
    assert first_wins.loc["second", "mean"] < 0.5 - Z_MC * se["second"]
    # and the sign is the same whichever model is shown first
    for judge, sign in (("first", 1), ("second", -1)):
        part = res.data[res.data["judge"] == judge]
        p_b = (part["outcome"] == "b").groupby(part["first_shown"]).mean()
        assert sign * (p_b["b"] - p_b["a"]) > 0.1


def test_pairwise_rejects_bad_parameters():
    with pytest.raises(EvalmixError, match="unknown keys in sds"):
        pairwise_judges(2, 2, 2, 2, sds={"item": 1.0})
    with pytest.raises(EvalmixError, match="n_scenarios must be at least 1"):
        pairwise_judges(0, 2, 2, 2)
    with pytest.raises(EvalmixError, match="two distinct labels other than 'reference'"):
        pairwise_judges(2, 2, 2, 2, conditions=("reference", "new"))
    with pytest.raises(EvalmixError, match="tie_threshold must be >= 0"):
        pairwise_judges(2, 2, 2, 2, tie_threshold=-1)
    with pytest.raises(EvalmixError, match="standard deviations must be >= 0"):
        pairwise_judges(2, 2, 2, 2, sd_judge_condition=-0.1)
