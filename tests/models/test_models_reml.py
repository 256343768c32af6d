"""REML back end (models/frequentist/_reml.py): the exact gradient, correlated terms, the nested factor.

References: dense numpy algebra on the same small matrices; central finite differences
of the REML criterion; lme4::lmer REML fits frozen in
tests/reference/models/reference_reml_slopes.csv (fit_reml_slopes.R on the seeded
gaussian_slopes.csv and on WildBench's scores).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

from evalmix.models.frequentist import _pls, intercept_term
from evalmix.models.frequentist._pls import CrossedDesign
from evalmix.models.frequentist._reml import _RemlCriterion, fit_mixedlm_arrays
from evalmix.models.spec import RandomTerm

REF = REFERENCE / "models"
#: Dense and sparse algebra compute the same numbers in a different order: rounding.
ALGEBRA_RTOL = 1e-9
#: Exact gradient vs central differences with step 1e-5: truncation ~h^2 times the third
#: derivative (criterion of order 1e3) and rounding ~1e-13 / h; measured below 1e-5.
GRADIENT_ATOL = 1e-4
#: Issue 28's agreement with lmer: fixed effects 1e-4 and variance components 1e-3
#: (relative); the REML criterion at least as low as lmer's (BOBYQA with rhoend 1e-10).
FIXED_RTOL = 1e-4
VC_RTOL = 1e-3


def _term(factor: str, codes: np.ndarray, x: np.ndarray | None = None, term: str = "1",
          correlated: bool = False) -> RandomTerm:
    codes = np.asarray(codes, dtype=np.int64)
    x = np.ones(codes.size) if x is None else np.asarray(x, dtype=float)
    return RandomTerm(factor, term, codes, tuple(map(str, range(codes.max() + 1))), x,
                      correlated)


def _nested(seed: int = 0):
    """item:model levels (the largest term), the items they are nested in, judges with
    a position slope: S has a diagonal item block (the arrow factor's case)."""
    rng = np.random.default_rng(seed)
    n_item, n_model = 30, 4
    item = np.repeat(np.arange(n_item), n_model * 6)
    model = np.tile(np.repeat(np.arange(n_model), 6), n_item)
    judge = np.tile(np.arange(3), item.size // 3)
    pos = rng.choice([-0.5, 0.5], item.size)
    im = item * n_model + model
    y = (0.2 * model + rng.normal(0, 1, n_item)[item] + rng.normal(0, 0.5, im.max() + 1)[im]
         + rng.normal(0, 0.3, 3)[judge] + rng.normal(0, 1, item.size))
    X = np.column_stack([np.ones(item.size)] + [(model == m).astype(float) for m in (1, 2, 3)])
    terms = [_term("item", item), _term("item:model", im), _term("judge", judge),
             _term("judge", judge, pos, "position")]
    return y, X, terms


@pytest.mark.parametrize("plan", [True, False])
def test_arrow_factor_equals_dense_algebra(monkeypatch, plan):
    """With the design's index plan (S filled on its fixed pattern by bincounts) and
    without it (S from sparse products, the fallback when B has too many pairs)."""
    monkeypatch.setattr(_pls, "SPARSE_MIN", 0)
    if not plan:
        monkeypatch.setattr(CrossedDesign, "arrow_plan", property(lambda self: None))
    y, X, terms = _nested()
    des = CrossedDesign(terms, y.size)
    assert (des.arrow_plan is not None) == plan
    assert des.s_lead is not None and des.s_lead[0].size == 30  # the items are the lead
    rng = np.random.default_rng(1)
    lam = np.array([0.8, 1.1, 0.5, 0.3])[des.comp]
    w = rng.uniform(0.5, 1.5, y.size)
    F = des.factor(lam, w)
    assert F._arrow is not None and (F._plan is not None) == plan
    Z = des.Z.toarray()
    A = lam[:, None] * (Z.T @ (w[:, None] * Z)) * lam[None, :] + np.eye(lam.size)
    Ainv = np.linalg.inv(A)
    np.testing.assert_allclose(F.logdet, np.linalg.slogdet(A)[1], rtol=ALGEBRA_RTOL)
    R = rng.normal(size=(des.q, 3))
    np.testing.assert_allclose(F.solve(R), np.linalg.solve(A, R), rtol=1e-8, atol=1e-12)
    h, diag = F.leverages(lam)
    np.testing.assert_allclose(diag, np.diag(Ainv), rtol=ALGEBRA_RTOL)
    ZL = Z * lam[None, :]
    np.testing.assert_allclose(h, np.einsum("ij,jk,ik->i", ZL, Ainv, ZL), rtol=1e-8)
    # the row solves (A^-1 Lambda z_i at the row's columns) the REML gradient uses
    full = ZL @ Ainv
    ms = F.row_solves(lam)
    off = np.concatenate([[0], np.cumsum([t.n_levels for t in terms])])
    for j, t in enumerate(terms):
        np.testing.assert_allclose(ms[j], full[np.arange(y.size), off[j] + t.codes],
                                   rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("correlated", [False, True])
def test_reml_gradient_equals_finite_differences(correlated):
    y, X, terms = _nested(seed=2)
    if correlated:  # (1 + position | judge)
        terms = [*terms[:2], *(RandomTerm(t.factor, t.term, t.codes, t.levels, t.x, True)
                               for t in terms[2:])]
    crit = _RemlCriterion(y, X, terms, CrossedDesign(terms, y.size))
    theta = (np.array([0.9, 0.6, 0.4, 0.2, 0.3]) if correlated
             else np.array([0.9, 0.6, 0.4, 0.3]))
    f, g = crit.value_and_gradient(theta)
    fd = np.empty_like(theta)
    for j in range(theta.size):
        up, dn = theta.copy(), theta.copy()
        up[j] += 1e-5
        dn[j] -= 1e-5
        fd[j] = (crit(up) - crit(dn)) / 2e-5
    np.testing.assert_allclose(g, fd, rtol=0, atol=GRADIENT_ATOL)
    assert np.max(np.abs(g)) > 1.0  # away from the optimum: the check has teeth


def _ref(model: str) -> pd.DataFrame:
    r = pd.read_csv(REF / "reference_reml_slopes.csv")
    return r[r.model == model].set_index(["kind", "name"])


def test_reml_correlated_slopes_equal_lmer():
    d = pd.read_csv(REF / "gaussian_slopes.csv")
    treat = (d.condition == "treatment").to_numpy(dtype=float)
    X = np.column_stack([np.ones(len(d)), treat])
    names = ["(Intercept)", "conditiontreatment"]
    terms = []
    for f in ("scenario", "persona"):
        codes = pd.factorize(d[f], sort=True)[0]
        terms += [_term(f, codes, correlated=True),
                  _term(f, codes, treat, "conditiontreatment", correlated=True)]
    terms.append(intercept_term("judge", d.judge))
    fit = fit_mixedlm_arrays(d.y.to_numpy(), X, names, terms)
    ref = _ref("gaussian_correlated")
    np.testing.assert_allclose(fit.fe_est, ref.loc["fixed"].loc[names, "value"],
                               rtol=FIXED_RTOL)
    np.testing.assert_allclose(fit.fe_se, ref.loc["fixed"].loc[names, "se"], rtol=VC_RTOL)
    sds = ref.loc["sd"].loc[["scenario", "conditiontreatment|scenario", "persona",
                             "conditiontreatment|persona", "judge"], "value"]
    np.testing.assert_allclose(fit.vc_sd, sds, rtol=VC_RTOL)
    np.testing.assert_allclose(fit.resid_sd, ref.loc[("sd", "Residual"), "value"],
                               rtol=VC_RTOL)
    cors = {c["factor"]: c["correlation"] for c in fit.details["correlations"]}
    for f in ("scenario", "persona"):
        np.testing.assert_allclose(cors[f], ref.loc[("cor", f), "value"], atol=VC_RTOL)
    crit = ref.loc[("criterion", "REMLcrit"), "value"]
    assert fit.details["reml_criterion"] <= crit + 1e-9 * crit
    assert fit.converged and fit.results is None and fit.fe_re_cov is None
    # correlation intervals (Wald on atanh) contain the estimate; conditional SDs exist
    for c in fit.details["correlations"]:
        assert c["lo"] < c["correlation"] < c["hi"]
    assert fit.re_sd is not None and np.all(fit.re_sd > 0)


def test_correlation_at_one_fits_and_has_intervals():
    """A boundary fit: lmer puts the scenario intercept-slope correlation at +1. The
    interval step used to stop there with a raw LinAlgError (numpy's Cholesky of a
    semidefinite correlation matrix); now the fit equals lmer (fixed effects, the
    scenario SDs, the correlation) and its free SDs have Wald intervals."""
    d = pd.read_csv(REF / "reml_boundary.csv")
    X = np.column_stack([np.ones(len(d)), d.ct])
    names = ["(Intercept)", "ct"]
    sc = pd.factorize(d.scenario, sort=True)[0]
    terms = [_term("scenario", sc, correlated=True),
             _term("scenario", sc, d.ct, "ct", correlated=True),
             intercept_term("persona", d.persona), intercept_term("author", d.author)]
    fit = fit_mixedlm_arrays(d.y.to_numpy(), X, names, terms)
    ref = pd.read_csv(REF / "reference_reml_boundary.csv").set_index("name")["value"]
    np.testing.assert_allclose(fit.fe_est, ref[["fixed_intercept", "fixed_ct"]],
                               rtol=FIXED_RTOL)
    np.testing.assert_allclose(fit.vc_sd[:2], ref[["sd_scenario", "sd_ct_scenario"]],
                               rtol=VC_RTOL)
    (cor,) = fit.details["correlations"]
    assert cor["correlation"] == pytest.approx(ref["cor_scenario"], abs=VC_RTOL)
    # KNOWN GAP (issue 28): here the optimiser stops 0.005 above lmer's criterion with the
    # author SD at 0 (lmer: 0.008); elsewhere it ends at or below lmer's
    assert fit.details["reml_criterion"] <= ref["reml_crit"] + 0.01
    assert np.isfinite(fit.vc_hi[:2]).all() and (fit.vc_lo[:2] < fit.vc_sd[:2]).all()


@pytest.mark.slow
def test_reml_wildbench_equals_lmer():
    """The REML speed case (benchmarks/bench_reml.py): WildBench's 29,653 scores with
    item, item:model (15,339 levels) and judge-run intercepts, the arrow factor."""
    from evalmix.datasets import wildbench

    w = wildbench().dropna(subset=["score"])
    models = sorted(w.model.unique())
    X = np.column_stack([np.ones(len(w))] + [(w.model == m).to_numpy(dtype=float)
                                             for m in models[1:]])
    names = ["(Intercept)"] + [f"model{m}" for m in models[1:]]
    terms = [intercept_term("item_id", w.item_id),
             intercept_term("item_model", w.item_id + ":" + w.model),
             intercept_term("judge_run", w.judge_run)]
    assert CrossedDesign(terms, len(w)).s_lead is not None
    fit = fit_mixedlm_arrays(w.score.to_numpy(dtype=float), X, names, terms)
    ref = _ref("wildbench")
    np.testing.assert_allclose(fit.fe_est, ref.loc["fixed"].loc[names, "value"],
                               rtol=FIXED_RTOL)
    np.testing.assert_allclose(fit.vc_sd, ref.loc["sd"].loc[["item_id", "item_model",
                                                             "judge_run"], "value"],
                               rtol=VC_RTOL)
    crit = ref.loc[("criterion", "REMLcrit"), "value"]
    assert fit.details["reml_criterion"] <= crit + 1e-9 * crit


@pytest.mark.parametrize("written", [False, True], ids=["default", "formula"])
def test_default_score_model_is_correlated_and_equals_lmer(written):
    """The default model of a two-condition score table is lme4's ``(1 + condition|
    scenario) + (1 + condition|persona) + (1|judge)`` (issue 28), fitted by REML; the same
    as that formula written out, and equal to lmer (fit_reml_slopes.R): REML
    log-likelihood and fixed effects to 1e-4, SDs and both correlations to 1e-3."""
    import evalmix
    from evalmix.errors import FewClustersWarning
    from evalmix.models.frequentist import fit_statsmodels

    d = pd.read_csv(REF / "gaussian_slopes.csv")
    t = evalmix.read(d, outcome="y", condition="condition",
                     clusters={"scenario": "scenario", "persona": "persona",
                               "judge": "judge"})
    formula = ("y ~ 1 + condition + (1 + condition|scenario) + (1 + condition|persona) + "
               "(1|judge)")
    with pytest.warns(FewClustersWarning, match="judge"):  # 3 judges: said, not hidden
        fit = fit_statsmodels(t, formula=formula) if written else fit_statsmodels(t)
    assert fit.formula == formula
    assert fit.provenance["simplified"] == []
    ref = _ref("gaussian_correlated")
    fe = fit.fixed_effects[fit.fixed_effects["scale"] == "identity"].set_index("term")
    np.testing.assert_allclose(fe.loc[["Intercept", "condition[treatment]"], "estimate"],
                               ref.loc["fixed"].loc[["(Intercept)", "conditiontreatment"],
                                                    "value"], rtol=FIXED_RTOL)
    np.testing.assert_allclose(fe.loc[["Intercept", "condition[treatment]"], "se"],
                               ref.loc["fixed"].loc[["(Intercept)", "conditiontreatment"],
                                                    "se"], rtol=VC_RTOL)
    sd = fit.variance.set_index("factor")["sd"]
    np.testing.assert_allclose(
        sd[["scenario", "condition[treatment]|scenario", "persona",
            "condition[treatment]|persona", "judge", "Residual"]],
        ref.loc["sd"].loc[["scenario", "conditiontreatment|scenario", "persona",
                           "conditiontreatment|persona", "judge", "Residual"], "value"],
        rtol=VC_RTOL)
    cors = {c["factor"]: c["correlation"] for c in fit.provenance["correlations"]}
    for f in ("scenario", "persona"):
        assert cors[f] == pytest.approx(ref.loc[("cor", f), "value"], abs=VC_RTOL)
    # the REML log-likelihood is -criterion / 2
    crit = ref.loc[("criterion", "REMLcrit"), "value"]
    assert -fit.provenance["reml_criterion"] / 2 == pytest.approx(-crit / 2, abs=1e-4)


def test_default_score_model_steps_down_like_lmer():
    """A score table whose maximal model is singular (lmer: the persona intercept-slope
    correlation at +1, ``isSingular``; fit_reml_singular.R): the default steps down to
    independent terms (lme4's ``||``), says so, and equals lmer's fit of that model
    (REML log-likelihood and fixed effects to 1e-4, SDs to 1e-3); the maximal model
    written out reaches lmer's criterion with the correlation at the same bound."""
    import evalmix
    from evalmix.errors import SingularFitWarning
    from evalmix.models.frequentist import fit_statsmodels

    d = pd.read_csv(REF / "gaussian_singular.csv")
    t = evalmix.read(d, outcome="y", condition="condition",
                     clusters={"scenario": "scenario", "persona": "persona"})
    r = pd.read_csv(REF / "reference_reml_singular.csv").set_index(["model", "kind", "name"])
    ref = r["value"]
    assert ref[("maximal", "criterion", "isSingular")] == 1
    with pytest.warns(SingularFitWarning, match="correlations"):
        fit = fit_statsmodels(t)
    assert fit.formula == ("y ~ 1 + condition + (1|scenario) + (0 + condition|scenario) + "
                           "(1|persona) + (0 + condition|persona)")
    (note,) = fit.provenance["simplified"]
    assert "cor(1, condition[treatment])|persona" in note
    ind = ref.loc["independent"]
    fe = fit.fixed_effects[fit.fixed_effects["scale"] == "identity"].set_index("term")
    np.testing.assert_allclose(fe.loc[["Intercept", "condition[treatment]"], "estimate"],
                               ind.loc["fixed"].loc[["(Intercept)", "ct"]], rtol=FIXED_RTOL)
    np.testing.assert_allclose(fe.loc[["Intercept", "condition[treatment]"], "se"],
                               ind.loc["fixed_se"].loc[["(Intercept)", "ct"]], rtol=VC_RTOL)
    sd = fit.variance.set_index("factor")["sd"]
    np.testing.assert_allclose(
        sd[["scenario", "condition[treatment]|scenario", "persona",
            "condition[treatment]|persona", "Residual"]],
        ind.loc["sd"].loc[["scenario", "ct|scenario", "persona", "ct|persona",
                           "Residual"]], rtol=VC_RTOL)
    assert -fit.provenance["reml_criterion"] / 2 == pytest.approx(
        ind[("criterion", "logLik")], abs=1e-4)
    # the maximal model as a user writes it is fitted as written, at lmer's boundary
    full = fit_statsmodels(t, formula="y ~ 1 + condition + (1 + condition|scenario) + "
                                      "(1 + condition|persona)")
    mx = ref.loc["maximal"]
    cors = {c["factor"]: c["correlation"] for c in full.provenance["correlations"]}
    assert abs(cors["persona"]) == pytest.approx(1.0, abs=VC_RTOL)
    assert full.provenance["reml_criterion"] <= mx[("criterion", "REMLcrit")] + 1e-4


def test_correlation_at_one_warns_like_lmer():
    """lme4 says "boundary (singular) fit: see help('isSingular')" when a correlation is
    at +-1; the structure asked for by formula (not simplified) says so too, on REML
    (the reml_boundary.csv fit above) and on Laplace, and not with independent terms."""
    import warnings

    from evalmix.errors import SingularFitWarning
    from evalmix.models.frequentist import fit_statsmodels
    from evalmix.sim import pairwise_judges

    t = pairwise_judges(12, 3, 2, 2, tie_threshold=0, seed=3).table()
    formula = "y ~ 1 + condition + (1 + condition|scenario) + (1|persona) + (1|author)"
    for method in ("mixedlm", "laplace"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = fit_statsmodels(t, method=method, formula=formula, seed=1)
        (cor,) = fit.provenance["correlations"]
        assert abs(cor["correlation"]) > 0.999
        said = [str(w.message) for w in caught if issubclass(w.category, SingularFitWarning)
                and "isSingular" in str(w.message)]
        assert len(said) == 1 and "cor(1, condition[treatment])|scenario" in said[0], said
        assert said[0] in fit.warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_statsmodels(t, method="mixedlm", formula=formula.replace("|scenario", "||scenario"),
                        seed=1)
    assert not [w for w in caught if "isSingular" in str(w.message)]
