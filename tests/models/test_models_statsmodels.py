"""statsmodels back ends against frozen lme4/glmmTMB references.

References: tests/reference/models/ (fit_reference.R, R 4.2.2, lme4 1.1.31, glmmTMB
1.1.5; see its README). CI never runs R.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.errors import EvalmixError, InvalidOptionError, SingularFitWarning
from evalmix.models.frequentist import (
    fit_glmm_arrays,
    fit_laplace_arrays,
    fit_mixedlm_arrays,
    fit_statsmodels,
    intercept_term,
)
from evalmix.models.result import FIXED_COLUMNS, VARIANCE_COLUMNS
from evalmix.models.spec import build_spec

REF = REFERENCE / "models"

#: MixedLM REML vs lmer REML (issue 4): same optimum; lme4 and glmmTMB agree to 6e-5.
REML_RTOL = 1e-4
#: SE of a fixed effect from the Hessian at the optimum (lme4 vs glmmTMB: 3e-5).
SE_RTOL = 1e-3
#: Wald-on-log-SD interval ends vs glmmTMB's (same REML Hessian; numerical differences).
WALD_RTOL = 1e-3
#: Our REML criterion and statsmodels' -2 llf are the same function: rounding only.
IDENTITY_RTOL = 1e-9
#: Linear probability model on crossed_binary: 4 components, two with 3 levels (flat REML
#: surface near the optimum): variances to 1e-3, fixed effects to 1e-5 absolute.
LPM_VAR_RTOL = 1e-3
LPM_FE_ATOL = 1e-5
#: VB/MAP vs glmer (Laplace) fixed effects on crossed_binary: different approximations of
#: the same posterior/likelihood; measured differences <= 0.007 (intercept) and <= 0.002
#: (condition, position), i.e. < 0.05 glmer SE. Tolerance: 0.02 (about 0.35 SE for
#: condition/position, 0.05 SE for the intercept).
GLMM_FE_ATOL = 0.02
#: Our Laplace GLMM vs glmmTMB (both at the Laplace optimum; measured agreement 1e-6):
#: estimates, SEs and Wald-on-log-SD interval ends to 1e-4 relative, logLik to 1e-8.
LAPLACE_RTOL = 1e-4
#: vs lme4's glmer: its optimiser stops slightly early (cbpp logLik -92.02657 vs the
#: optimum -92.02628) and its SEs use a different Hessian (0.1-1.5% off glmmTMB's).
GLMER_FE_ATOL = 2e-3
GLMER_SE_RTOL = 0.02
#: MAP's Laplace SEs vs glmer's SEs (measured within 2.1%).
MAP_SE_RTOL = 0.05
#: VB/MAP SDs: approximations (prior on log SD, no integration over random effects);
#: required to lie within a factor 2 of glmer's and to cover it with their 95% interval.
SD_RATIO = 2.0


def _ref(dataset: str, software: str = "lme4", contains: str = "") -> tuple[pd.DataFrame,
                                                                          pd.DataFrame]:
    fx = pd.read_csv(REF / "reference_fixed.csv")
    vc = pd.read_csv(REF / "reference_varcomp.csv")
    sel = lambda d: d[(d.dataset == dataset) & (d.software == software)  # noqa: E731
                      & d.model.str.contains(contains, regex=False)]
    return sel(fx).set_index("term"), sel(vc).set_index("group")


# ---------------------------------------------------------------------------- Penicillin
@pytest.fixture(scope="module")
def penicillin():
    d = pd.read_csv(REF / "penicillin.csv")
    fit = fit_mixedlm_arrays(d["diameter"].to_numpy(), np.ones((len(d), 1)), ["Intercept"],
                             [intercept_term("plate", d["plate"]),
                              intercept_term("sample", d["sample"])])
    return d, fit


def test_penicillin_variance_components_equal_lmer(penicillin):
    _, fit = penicillin
    _, vc = _ref("penicillin")
    got = dict(zip(fit.vc_names, fit.vc_sd**2, strict=True))
    np.testing.assert_allclose(got["1|plate"], vc.loc["plate", "variance"], rtol=REML_RTOL)
    np.testing.assert_allclose(got["1|sample"], vc.loc["sample", "variance"], rtol=REML_RTOL)
    np.testing.assert_allclose(fit.resid_sd**2, vc.loc["Residual", "variance"], rtol=REML_RTOL)
    # the published values (lme4's own optimum is loose in the flat sample direction:
    # glmmTMB gives 3.730924, we 3.73091; both within 1e-4 relative of 3.7311)
    np.testing.assert_allclose([got["1|plate"], got["1|sample"], fit.resid_sd**2],
                               [0.7169, 3.7311, 0.3024], rtol=REML_RTOL)
    assert fit.converged and not fit.singular


def test_penicillin_fixed_effect_and_se_equal_lmer(penicillin):
    _, fit = penicillin
    fx, _ = _ref("penicillin")
    np.testing.assert_allclose(fit.fe_est[0], fx.loc["(Intercept)", "estimate"], rtol=REML_RTOL)
    np.testing.assert_allclose(fit.fe_se[0], fx.loc["(Intercept)", "se"], rtol=SE_RTOL)


def test_penicillin_reml_criterion_identities(penicillin):
    _, fit = penicillin
    ref = pd.read_csv(REF / "reference_fit.csv")
    crit = ref[(ref.dataset == "penicillin") & (ref.criterion == "REML_criterion")].value.item()
    np.testing.assert_allclose(fit.details["reml_criterion"], crit, rtol=1e-8)
    # lme4's REML criterion (ours) == -2 x statsmodels' REML log-likelihood
    np.testing.assert_allclose(fit.details["reml_criterion"], -2 * fit.results.llf,
                               rtol=IDENTITY_RTOL)


def test_penicillin_statsmodels_results_equal_ours(penicillin):
    # identity: statsmodels MixedLM fitted from our optimum reports the same numbers
    _, fit = penicillin
    r = fit.results
    np.testing.assert_allclose(r.vcomp, fit.vc_sd**2, rtol=1e-5)
    np.testing.assert_allclose(r.scale, fit.resid_sd**2, rtol=1e-6)
    np.testing.assert_allclose(r.fe_params, fit.fe_est, rtol=1e-9)
    np.testing.assert_allclose(r.bse_fe, fit.fe_se, rtol=1e-5)


def test_penicillin_sd_intervals_equal_glmmtmb_wald_on_log_sd(penicillin):
    _, fit = penicillin
    _, vc = _ref("penicillin", "glmmTMB")
    for name, group in (("1|plate", "plate"), ("1|sample", "sample")):
        j = fit.vc_names.index(name)
        np.testing.assert_allclose([fit.vc_lo[j], fit.vc_hi[j]],
                                   vc.loc[group, ["sd_lo", "sd_hi"]].to_numpy(dtype=float),
                                   rtol=WALD_RTOL)
    # and they sit inside lme4's (wider, asymmetric) profile intervals' neighbourhood:
    _, prof = _ref("penicillin")
    j = fit.vc_names.index("1|plate")
    assert abs(fit.vc_lo[j] - prof.loc["plate", "sd_lo"]) < 0.02


# ---------------------------------------------------------------------------- crossed binary
@pytest.fixture(scope="module")
def crossed_table():
    d = pd.read_csv(REF / "crossed_binary.csv", dtype={"outcome": str})
    return evalmix.read(d, outcome="outcome", model_a="model_a", model_b="model_b",
                        first_shown="first_shown", ties="exclude",
                        clusters={f: f for f in ("scenario", "persona", "author", "judge")})


@pytest.fixture(scope="module")
def crossed_spec(crossed_table):
    return build_spec(crossed_table, judge_position=False, slopes=())  # glmer's model


@pytest.fixture(scope="module")
def crossed_fits(crossed_table, crossed_spec):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingularFitWarning)
        fits = {m: fit_statsmodels(None, crossed_spec, method=m, seed=11, draws=1000)
                for m in ("mixedlm", "vb", "map")}
        fits["laplace"] = fit_statsmodels(None, crossed_spec, seed=11, draws=1000)  # auto
    return fits


R_TERMS = {"Intercept": "(Intercept)", "condition[treatment]": "conditiontreatment",
           "position": "position"}
FACTORS = ("scenario", "persona", "author", "judge")


def test_spec_matches_reference_coding(crossed_spec):
    d = pd.read_csv(REF / "crossed_binary.csv")
    # rows keep their order through read(): y is "model_b wins", position +-1/2
    np.testing.assert_array_equal(crossed_spec.y, d["b_wins"].to_numpy(dtype=float))
    j = crossed_spec.fixed_names.index("position")
    np.testing.assert_array_equal(crossed_spec.X[:, j], d["position"].to_numpy())
    assert crossed_spec.fixed_names == tuple(R_TERMS)


def test_mixedlm_linear_probability_equals_lmer(crossed_fits):
    fit = crossed_fits["mixedlm"]
    fx, vc = _ref("crossed_binary", contains="linear probability")
    fe = fit.fixed_effects.set_index("term")
    for ours, theirs in R_TERMS.items():
        assert abs(fe.loc[ours, "estimate"] - fx.loc[theirs, "estimate"]) < LPM_FE_ATOL
        np.testing.assert_allclose(fe.loc[ours, "se"], fx.loc[theirs, "se"], rtol=SE_RTOL)
    v = fit.variance.set_index("factor")
    for f in (*FACTORS, "Residual"):
        np.testing.assert_allclose(v.loc[f, "variance"], vc.loc[f, "variance"],
                                   rtol=LPM_VAR_RTOL)
    assert fit.approximate and "linear probability" in fit.provenance["note"]
    assert set(fe["scale"]) == {"probability"}


def test_laplace_equals_glmer_and_glmmtmb_on_crossed_binary(crossed_fits):
    fit = crossed_fits["laplace"]
    assert fit.backend == "glmm_laplace" and not fit.approximate
    # 3 authors and 3 judges: warned (FewClustersWarning), recorded in fit.warnings
    assert any(w.startswith("factor(s) author, judge have fewer than 5") for w in fit.warnings)
    fe = fit.fixed_effects
    fe = fe[fe.scale == "log-odds"].set_index("term")
    v = fit.variance.set_index("factor")
    for sw in ("lme4", "glmmTMB"):
        fx, vc = _ref("crossed_binary", sw, contains="binomial")
        for ours, theirs in R_TERMS.items():
            assert abs(fe.loc[ours, "estimate"] - fx.loc[theirs, "estimate"]) < 1e-4
        for f in FACTORS:
            np.testing.assert_allclose(v.loc[f, "sd"], vc.loc[f, "sd"], rtol=LAPLACE_RTOL)
    fx, vc = _ref("crossed_binary", "glmmTMB", contains="binomial")
    for ours, theirs in R_TERMS.items():
        np.testing.assert_allclose(fe.loc[ours, "se"], fx.loc[theirs, "se"], rtol=LAPLACE_RTOL)
    for f in FACTORS:
        np.testing.assert_allclose(v.loc[f, ["sd_lo", "sd_hi"]].to_numpy(dtype=float),
                                   vc.loc[f, ["sd_lo", "sd_hi"]].to_numpy(dtype=float),
                                   rtol=LAPLACE_RTOL)
    ll = pd.read_csv(REF / "reference_fit.csv")
    ll = ll[(ll.dataset == "crossed_binary") & (ll.software == "glmmTMB")].value.item()
    np.testing.assert_allclose(fit.results.llf, ll, rtol=1e-8)


@pytest.mark.parametrize("method", ["vb", "map"])
def test_glmm_fixed_effects_close_to_glmer(crossed_fits, method):
    fit = crossed_fits[method]
    fx, _ = _ref("crossed_binary", contains="binomial")
    fe = fit.fixed_effects
    fe = fe[fe.scale == "log-odds"].set_index("term")
    for ours, theirs in R_TERMS.items():
        assert abs(fe.loc[ours, "estimate"] - fx.loc[theirs, "estimate"]) < GLMM_FE_ATOL, ours
    assert fit.approximate and fit.backend == f"glmm_{method}"


def test_map_se_close_to_glmer_and_vb_intercept_se_too_small(crossed_fits):
    fx, _ = _ref("crossed_binary", contains="binomial")
    fe = crossed_fits["map"].fixed_effects
    fe = fe[fe.scale == "log-odds"].set_index("term")
    for ours, theirs in R_TERMS.items():
        np.testing.assert_allclose(fe.loc[ours, "se"], fx.loc[theirs, "se"], rtol=MAP_SE_RTOL)
    # the documented limitation of mean-field VB: the intercept's posterior SD is far too
    # small (it ignores the intercept's correlation with the random effects)
    vb = crossed_fits["vb"].fixed_effects
    vb_int = vb[(vb.term == "Intercept") & (vb.scale == "log-odds")].se.item()
    assert vb_int < 0.2 * fx.loc["(Intercept)", "se"]


@pytest.mark.parametrize("method", ["vb", "map"])
def test_glmm_variance_components_positive_and_cover_glmer(crossed_fits, method):
    _, vc = _ref("crossed_binary", contains="binomial")
    v = crossed_fits[method].variance.set_index("factor")
    for f in FACTORS:
        sd, ref = v.loc[f, "sd"], vc.loc[f, "sd"]
        assert sd > 0
        assert 1 / SD_RATIO < sd / ref < SD_RATIO, (f, sd, ref)
        assert v.loc[f, "sd_lo"] < ref < v.loc[f, "sd_hi"], (f, v.loc[f, ["sd_lo", "sd_hi"]], ref)
    np.testing.assert_allclose(v.loc["Residual", "variance"], np.pi**2 / 3)


def test_tidy_frames_follow_the_contract(crossed_fits):
    for fit in crossed_fits.values():
        assert tuple(fit.fixed_effects.columns) == FIXED_COLUMNS
        assert tuple(fit.variance.columns) == VARIANCE_COLUMNS
        v = fit.variance
        np.testing.assert_allclose(v["share"].sum(), 1.0, rtol=1e-12)  # intercepts only
        np.testing.assert_allclose(v["variance"], v["sd"] ** 2)
        assert fit.provenance["seed"] == 11 and fit.results is not None


def test_probability_rows_typical_and_population(crossed_fits):
    fit = crossed_fits["map"]
    fe = fit.fixed_effects
    b = fe[fe.scale == "log-odds"].set_index("term")["estimate"]
    typ = fe[fe.scale == "probability-typical"]
    pop = fe[fe.scale == "probability"]
    assert typ.label.str.startswith("typical").all()
    assert pop.label.str.startswith("population").all()
    typ, pop = typ.set_index("term")["estimate"], pop.set_index("term")["estimate"]
    expit = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    # typical cluster, order-balanced: average over x_pos = +-1/2 with random effects at 0
    want = np.mean([expit(b["Intercept"] + b["condition[treatment]"] + s * b["position"])
                    for s in (0.5, -0.5)])
    np.testing.assert_allclose(typ["P[treatment]"], want, rtol=1e-12)
    # integrating random effects out attenuates the contrast towards 0
    assert 0 < pop["P[treatment] - P[control]"] < typ["P[treatment] - P[control]"]
    # odds ratio row is exp(log-odds)
    orow = fe[(fe.scale == "odds-ratio") & (fe.term == "condition[treatment]")]
    np.testing.assert_allclose(orow.estimate.item(), np.exp(b["condition[treatment]"]))


def test_seed_reproducible(crossed_spec):
    a = fit_statsmodels(None, crossed_spec, method="map", seed=5, draws=200)
    b = fit_statsmodels(None, crossed_spec, method="map", seed=5, draws=200)
    pd.testing.assert_frame_equal(a.fixed_effects, b.fixed_effects)


# ---------------------------------------------------------------------------- cbpp
@pytest.fixture(scope="module")
def cbpp_bernoulli():
    d = pd.read_csv(REF / "cbpp.csv")
    rep = d.loc[d.index.repeat(d["size"])].reset_index(drop=True)
    k = rep.groupby(["herd", "period"]).cumcount()
    inc = d.set_index(["herd", "period"])["incidence"]
    rep["y"] = (k < inc.loc[list(zip(rep.herd, rep.period, strict=True))].to_numpy()).astype(float)
    X = np.column_stack([np.ones(len(rep))] + [(rep.period == j).astype(float)
                                               for j in (2, 3, 4)])
    return rep, X


def test_cbpp_laplace_with_binomial_counts_equals_glmmtmb():
    d = pd.read_csv(REF / "cbpp.csv")
    X = np.column_stack([np.ones(len(d))] + [(d.period == j).astype(float) for j in (2, 3, 4)])
    fit = fit_laplace_arrays((d.incidence / d["size"]).to_numpy(), X,
                             ["(Intercept)", "period2", "period3", "period4"],
                             [intercept_term("herd", d["herd"])], trials=d["size"].to_numpy())
    fx, vc = _ref("cbpp", "glmmTMB")
    terms = list(fit.fe_names)
    np.testing.assert_allclose(fit.fe_est, fx.loc[terms, "estimate"], rtol=LAPLACE_RTOL)
    np.testing.assert_allclose(fit.fe_se, fx.loc[terms, "se"], rtol=LAPLACE_RTOL)
    np.testing.assert_allclose([fit.vc_sd[0], fit.vc_lo[0], fit.vc_hi[0]],
                               vc.loc["herd", ["sd", "sd_lo", "sd_hi"]].to_numpy(dtype=float),
                               rtol=LAPLACE_RTOL)
    ll = pd.read_csv(REF / "reference_fit.csv").query("dataset == 'cbpp' and criterion == 'logLik'")
    np.testing.assert_allclose(fit.results.llf, ll[ll.software == "glmmTMB"].value.item(),
                               rtol=1e-8)
    # glmer stops slightly short of the optimum: ours is at least as high
    assert fit.results.llf >= ll[ll.software == "lme4"].value.item()
    fx4, _ = _ref("cbpp", "lme4")
    np.testing.assert_allclose(fit.fe_est, fx4.loc[terms, "estimate"], atol=GLMER_FE_ATOL)
    np.testing.assert_allclose(fit.fe_se, fx4.loc[terms, "se"], rtol=GLMER_SE_RTOL)


def test_cbpp_vb_close_to_glmer_and_map_collapses(cbpp_bernoulli):
    rep, X = cbpp_bernoulli
    names = ["Intercept", "period2", "period3", "period4"]
    terms = [intercept_term("herd", rep["herd"])]
    fx, vc = _ref("cbpp")
    assert rep["y"].sum() == pd.read_csv(REF / "cbpp.csv")["incidence"].sum()
    vb = fit_glmm_arrays(rep["y"].to_numpy(), X, names, terms, method="vb", seed=1)
    want = fx.loc[["(Intercept)", "period2", "period3", "period4"], "estimate"].to_numpy()
    np.testing.assert_allclose(vb.fe_est, want, atol=GLMM_FE_ATOL)
    assert vb.vc_lo[0] < vc.loc["herd", "sd"] < vb.vc_hi[0]
    # MAP is a joint mode over random effects and SDs: here it collapses the herd SD to ~0
    # (glmer: 0.64). The back end must flag that, not report it silently.
    mp = fit_glmm_arrays(rep["y"].to_numpy(), X, names, terms, method="map", seed=1)
    assert mp.vc_sd[0] < 1e-3 and mp.singular == ("1|herd",)


# ---------------------------------------------------------------------------- warnings/errors
def test_singular_component_flagged():
    rng = np.random.default_rng(3)
    a, b = np.repeat(np.arange(20), 30), np.tile(np.arange(30), 20)
    y = rng.normal(0, 1, 20)[a] + rng.normal(0, 1, 600)  # factor b has no variance
    fit = fit_mixedlm_arrays(y, np.ones((600, 1)), ["Intercept"],
                             [intercept_term("a", a), intercept_term("b", b)])
    assert fit.singular == ("1|b",) and fit.vc_sd[1] == 0 and fit.vc_lo[1] == 0
    assert np.isnan(fit.vc_hi[1]) and fit.converged
    # the statsmodels table route warns
    t = evalmix.read(pd.DataFrame({"y": y, "a": a.astype(str), "b": b.astype(str)}),
                     outcome="y", clusters={"a": "a", "b": "b"})
    with pytest.warns(SingularFitWarning, match="1\\|b"):
        f2 = fit_statsmodels(t, method="mixedlm")
    assert not f2.approximate and f2.variance.set_index("factor").loc["b", "sd"] == 0


def test_bad_inputs_give_clear_errors(crossed_table):
    scores = evalmix.read(pd.DataFrame({"y": [1.5, 2.0, 3.5, 4.0], "g": list("aabb")}),
                          outcome="y", clusters={"g": "g"})
    with pytest.raises(EvalmixError, match="method='vb' fits a logit model.*mixedlm"):
        fit_statsmodels(scores, method="vb")
    with pytest.raises(EvalmixError, match="method='laplace' fits a logit model"):
        fit_statsmodels(scores, method="laplace")
    with pytest.raises(InvalidOptionError, match="'auto', 'mixedlm', 'laplace', 'vb', 'map'"):
        fit_statsmodels(crossed_table, method="glmer")  # type: ignore[arg-type]
    with pytest.raises(EvalmixError, match="needs a 0/1"):
        fit_glmm_arrays(np.array([0.0, 2.0, 1.0, 0.0]), np.ones((4, 1)), ["Intercept"],
                        [intercept_term("g", list("aabb"))])
    with pytest.raises(EvalmixError, match="at least 2 levels"):
        fit_mixedlm_arrays(np.arange(4.0), np.ones((4, 1)), ["Intercept"],
                           [intercept_term("g", list("aaaa"))])
    with pytest.raises(EvalmixError, match="rank deficient"):
        fit_mixedlm_arrays(np.arange(4.0), np.ones((4, 2)), ["a", "b"],
                           [intercept_term("g", list("aabb"))])
    with pytest.raises(EvalmixError, match="not both"):
        fit_statsmodels(crossed_table, build_spec(crossed_table), formula="y ~ 1 + (1|judge)")


# ---------------------------------------------------------------------------- random effects
#: Conditional modes / SDs vs lme4's ranef(condVar = TRUE): same formulas at optima that
#: agree to ~1e-5 (REML) and ~1e-5 (Laplace; glmer stops marginally short).
RANEF_ATOL = 1e-3


def _ranef(dataset: str) -> pd.DataFrame:
    r = pd.read_csv(REF / "reference_ranef.csv")
    return r[r.dataset == dataset]


def test_penicillin_conditional_modes_equal_lme4_and_statsmodels(penicillin):
    _, fit = penicillin
    ref = _ranef("penicillin")
    np.testing.assert_allclose(fit.re_est, ref.estimate, atol=RANEF_ATOL)
    np.testing.assert_allclose(fit.re_sd, ref.cond_sd, rtol=RANEF_ATOL)
    # identity: our BLUPs are statsmodels' (same model, same optimum)
    sm_blups = np.asarray(next(iter(fit.results.random_effects.values())))
    np.testing.assert_allclose(fit.re_est, sm_blups, rtol=1e-6, atol=1e-9)


def test_laplace_conditional_modes_equal_glmer(crossed_fits):
    fit = crossed_fits["laplace"]
    ref = _ranef("crossed_binary")
    levels = pd.read_csv(REF / "crossed_binary.csv")
    order = [lev for f in FACTORS for lev in sorted(levels[f].unique())]
    assert list(ref.level) == order  # lme4 lists factors and levels in our order
    assert fit.provenance["converged"]
    res = fit.results
    np.testing.assert_allclose(res.modes, ref.estimate, atol=RANEF_ATOL)


def test_per_level_slope_rows_recover_judge_position_bias():
    # judge-specific position bias = position + conditional mode, SE from the joint
    # covariance of (fixed, random) effects given the SDs
    from evalmix.sim import pairwise_judges

    sim = pairwise_judges(12, 4, 2, 3, tie_threshold=0, sd_position_judge=0.8, seed=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingularFitWarning)  # seed 10: judges differ clearly
        fit = fit_statsmodels(sim.table(), method="laplace", seed=1, slopes=())
    fe = fit.fixed_effects.set_index("term")
    truth = sim.truth["judge_position"]
    pos = fe[fe.scale == "log-odds"].loc["position"]
    j = list(fit.results.modes)
    # the slope term last
    k0 = sum(t.n_levels for t in build_spec(sim.table(), slopes=()).random[:-1])
    for i, (judge, true) in enumerate(sorted(truth.items())):
        row = fe.loc[f"position[judge={judge}]"]
        assert row.label.startswith("judge-specific")
        np.testing.assert_allclose(row.estimate, pos.estimate + j[k0 + i], rtol=1e-12)
        assert abs(row.estimate - true) < 3 * row.se, (judge, row.estimate, true, row.se)
        # per-judge effects are better determined than the overall mean of 3 judges
        assert row.se < pos.se


def test_bradley_terry_design_abilities_and_lpm_offset():
    # three models compared pairwise (model_a varies): abilities 0, 0.5, 1 on log-odds
    rng = np.random.default_rng(1)
    n = 1200
    ab = np.array([rng.choice(3, 2, replace=False) for _ in range(n)])
    ability = np.array([0.0, 0.5, 1.0])
    eta = ability[ab[:, 0]] - ability[ab[:, 1]]
    win_a = rng.random(n) < 1 / (1 + np.exp(-eta))
    models = np.array(["m1", "m2", "m3"])
    d = pd.DataFrame({"rep": np.arange(n).astype(str), "model_a": models[ab[:, 0]],
                      "model_b": models[ab[:, 1]], "outcome": np.where(win_a, "a", "b"),
                      "item": rng.integers(0, 40, n).astype(str),
                      "judge": rng.integers(0, 3, n).astype(str)})
    t = evalmix.read(d, outcome="outcome", model_a="model_a", model_b="model_b",
                     clusters={"item": "item", "judge": "judge"})
    formula = "y ~ condition + (1|item) + (1|judge)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)  # true SDs are 0
        fit = fit_statsmodels(t, method="laplace", formula=formula, seed=1)
        lpm = fit_statsmodels(t, method="mixedlm", formula=formula)
    fe = fit.fixed_effects
    fe = fe[fe.scale == "log-odds"].set_index("term")
    for term, true in (("model[m2]", 0.5), ("model[m3]", 1.0), ("model[m3] - model[m2]", 0.5)):
        assert abs(fe.loc[term, "estimate"] - true) < 3 * fe.loc[term, "se"], term
    # without an intercept the linear probability model measures from 1/2; otherwise the
    # judge intercepts would absorb the 1/2 (SD about 0.5)
    assert lpm.variance.set_index("factor").loc["judge", "sd"] < 0.1
    assert "y - 1/2" in lpm.provenance["note"]


def test_laplace_collapsed_counts_equal_row_level_fit():
    # identity: identical rows collapsed into binomial counts give the same fit (and, with
    # the binomial constant left out, the same log-likelihood) as the 0/1 rows
    from evalmix.sim import clustered_scores

    t = clustered_scores(25, 12, p=0.3, icc=0.1, seed=4).table()
    fit = fit_statsmodels(t, method="laplace", seed=1)  # collapses 300 rows to 25 patterns
    spec = build_spec(t)
    rows = fit_laplace_arrays(spec.y, spec.X, spec.fixed_names, list(spec.random))
    fe = fit.fixed_effects
    np.testing.assert_allclose(fe[fe.scale == "log-odds"].estimate, rows.fe_est, rtol=1e-5)
    np.testing.assert_allclose(fe[fe.scale == "log-odds"].se, rows.fe_se, rtol=1e-4)
    np.testing.assert_allclose(fit.variance.sd.iloc[0], rows.vc_sd[0], rtol=1e-5)
    np.testing.assert_allclose(fit.results.llf, rows.results.llf, rtol=1e-9)


def test_containment_df_and_t_intervals(crossed_fits, crossed_table):
    from scipy import stats

    from evalmix.models.frequentist import containment_df

    spec = build_spec(crossed_table, slopes=("judge",))
    df = containment_df(spec.fixed_names, spec.random)
    # intercept: contained by the random intercepts, smallest factor has 3 levels;
    # condition and position: by their judge slopes (3 judges)
    assert df == {"Intercept": 2.0, "condition[treatment]": 2.0, "position": 2.0}
    nospec = build_spec(crossed_table, judge_position=False)
    assert containment_df(nospec.fixed_names, nospec.random)["position"] == np.inf
    fit = crossed_fits["laplace"]
    fe = fit.fixed_effects
    row = fe[(fe.term == "Intercept") & (fe.scale == "log-odds")].iloc[0]
    q = stats.t.ppf(0.975, 2)
    np.testing.assert_allclose([row.lo, row.hi], [row.estimate - q * row.se,
                                                  row.estimate + q * row.se], rtol=1e-12)
    row = fe[(fe.term == "position") & (fe.scale == "log-odds")].iloc[0]
    np.testing.assert_allclose(row.hi - row.estimate, stats.norm.ppf(0.975) * row.se)
    assert fit.provenance["df"]["Intercept"] == 2.0


# ---------------------------------------------------------------------------- slow: coverage
#: Issue 4's bar: 90% intervals contain the truth in at least 80 of 100 seeded fits.
COVERAGE_MIN = 0.80


@pytest.mark.slow
def test_laplace_coverage_on_simulated_truth():
    """100 seeded pairwise designs (20 scenarios x 6 personas x 3 authors x 3 judges x 2
    conditions x 2 orders = 4,320 rows; judge x condition and judge x position slopes,
    SD 0.3 each), Laplace fit with both slopes, 90% intervals. Table in
    docs/models-frequentist.md (about 4 minutes on 2 cores)."""
    from evalmix.sim import pairwise_judges

    hits: dict[str, list[bool]] = {k: [] for k in ("condition", "position", "scenario",
                                                  "persona", "author")}
    converged = 0
    for seed in range(100):
        sim = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_statsmodels(sim.table(), method="laplace", level=0.90,
                                  slopes=("judge",), seed=seed, draws=100)
        converged += bool(fit.provenance["converged"])
        fe = fit.fixed_effects
        fe = fe[fe.scale == "log-odds"].set_index("term")
        v = fit.variance.set_index("factor")
        for key, term, truth in (("condition", "condition[treatment]",
                                  sim.truth["condition_effect"]),
                                 ("position", "position", sim.truth["position_bias"])):
            hits[key].append(bool(fe.loc[term, "lo"] <= truth <= fe.loc[term, "hi"]))
        for f in ("scenario", "persona", "author"):
            hi = v.loc[f, "sd_hi"] if np.isfinite(v.loc[f, "sd_hi"]) else np.inf
            hits[f].append(bool(v.loc[f, "sd_lo"] <= sim.truth["sds"][f] <= hi))
    cover = {k: float(np.mean(h)) for k, h in hits.items()}
    print("coverage of 90% intervals:", cover, "converged:", converged)
    assert converged >= 95
    for k in ("condition", "position", "scenario", "persona"):
        assert cover[k] >= COVERAGE_MIN, (k, cover[k])
