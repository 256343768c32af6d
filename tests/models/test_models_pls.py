"""Sparse penalised least squares (models/frequentist/_pls.py) and the Laplace gradient.

References: dense numpy linear algebra on the same small matrices (exact up to
rounding); central finite differences of the Laplace deviance; the frozen lme4
references in tests/reference/models/ are checked in test_models_statsmodels.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.errors import EvalmixError
from evalmix.models.frequentist import _pls, fit_laplace_arrays, fit_mixedlm_arrays, fit_statsmodels
from evalmix.models.frequentist._laplace import _LaplaceDeviance
from evalmix.models.spec import RandomTerm

#: Dense and sparse algebra compute the same numbers in a different order: rounding.
ALGEBRA_RTOL = 1e-9
#: Analytic gradient vs central differences (step 1e-4): truncation error ~h^2 (measured
#: 6e-7 absolute, 4e-5 at step 1e-3, so it is truncation, not a wrong term); the PIRLS
#: tolerance (1e-10 on u) adds ~1e-10 / h of noise.
GRADIENT_ATOL = 2e-6


def _design(seed: int = 0, n: int = 400):
    rng = np.random.default_rng(seed)
    item = rng.integers(0, 40, n)
    judge = rng.integers(0, 4, n)
    persona = rng.integers(0, 7, n)
    pos = rng.choice([-0.5, 0.5], n)
    terms = [RandomTerm("item", "1", item, tuple(map(str, range(40))), np.ones(n)),
             RandomTerm("judge", "1", judge, tuple(map(str, range(4))), np.ones(n)),
             RandomTerm("persona", "1", persona, tuple(map(str, range(7))), np.ones(n)),
             RandomTerm("judge", "position", judge, tuple(map(str, range(4))), pos)]
    X = np.column_stack([np.ones(n), pos, rng.integers(0, 2, n)])
    eta = 0.2 + 0.3 * X[:, 2] + rng.normal(0, 0.8, 40)[item] + rng.normal(0, 0.4, 4)[judge]
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    return y, X, terms


def _dense_reference(des, lam, w):
    Z = des.Z.toarray()
    A = lam[:, None] * (Z.T @ (w[:, None] * Z)) * lam[None, :] + np.eye(lam.size)
    Ainv = np.linalg.inv(A)
    ZL = Z * lam[None, :]
    return A, Ainv, np.einsum("ij,jk,ik->i", ZL, Ainv, ZL)


@pytest.mark.parametrize("dense_max", [_pls.DENSE_MAX, 0])
def test_block_factor_equals_dense_algebra(monkeypatch, dense_max):
    # dense_max=0 forces the SuperLU path for the Schur complement
    monkeypatch.setattr(_pls, "DENSE_MAX", dense_max)
    y, X, terms = _design()
    des = _pls.CrossedDesign(terms, y.size)
    rng = np.random.default_rng(5)
    lam = np.array([0.7, 1.3, 0.4, 0.9])[des.comp]
    w = rng.uniform(0.05, 0.25, y.size)
    F = des.factor(lam, w)
    A, Ainv, h_ref = _dense_reference(des, lam, w)
    np.testing.assert_allclose(F.logdet, np.linalg.slogdet(A)[1], rtol=ALGEBRA_RTOL)
    R = rng.normal(size=(des.q, 3))
    np.testing.assert_allclose(F.solve(R), np.linalg.solve(A, R), rtol=1e-8, atol=1e-12)
    h, diag = F.leverages(lam)
    np.testing.assert_allclose(diag, np.diag(Ainv), rtol=ALGEBRA_RTOL)
    np.testing.assert_allclose(h, h_ref, rtol=1e-8)
    idx = np.array([3, 41, 50, 54])
    np.testing.assert_allclose(F.submatrix_inverse(idx), Ainv[np.ix_(idx, idx)], rtol=1e-8,
                               atol=1e-14)


def test_laplace_gradient_equals_finite_differences():
    y, X, terms = _design(seed=2)
    dev = _LaplaceDeviance(y, np.ones(y.size), X, terms)
    theta, beta = np.array([0.8, 0.5, 0.3, 0.6]), np.array([0.1, 0.2, 0.3])
    x0 = np.concatenate([theta, beta])
    _, g = dev.gradient(theta, beta)
    fd = np.empty_like(x0)
    for j in range(x0.size):
        up, dn = x0.copy(), x0.copy()
        up[j] += 1e-4
        dn[j] -= 1e-4
        fd[j] = (dev(up[:4], up[4:]) - dev(dn[:4], dn[4:])) / 2e-4
    np.testing.assert_allclose(g, fd, rtol=0, atol=GRADIENT_ATOL)


def test_reml_splu_path_equals_dense_path(monkeypatch):
    rng = np.random.default_rng(3)
    n = 600
    a, b = rng.integers(0, 50, n), rng.integers(0, 30, n)
    y = rng.normal(0, 1, 50)[a] + rng.normal(0, 0.6, 30)[b] + rng.normal(0, 1, n)
    terms = [RandomTerm("a", "1", a, tuple(map(str, range(50))), np.ones(n)),
             RandomTerm("b", "1", b, tuple(map(str, range(30))), np.ones(n))]
    dense = fit_mixedlm_arrays(y, np.ones((n, 1)), ["Intercept"], terms)
    monkeypatch.setattr(_pls, "DENSE_MAX", 0)
    lu = fit_mixedlm_arrays(y, np.ones((n, 1)), ["Intercept"], terms)
    np.testing.assert_allclose(lu.details["reml_criterion"], dense.details["reml_criterion"],
                               rtol=1e-10)
    np.testing.assert_allclose(lu.vc_sd, dense.vc_sd, rtol=1e-6)
    np.testing.assert_allclose(lu.re_sd, dense.re_sd, rtol=1e-6)


# ---------------------------------------------------------------------------- issue 12
@pytest.mark.parametrize("value", ["a", "b"])
def test_laplace_refuses_all_same_outcome(value):
    # issue 12: all-ones outcomes reported the start value as the SD with a NaN SE
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"model_a": "base", "model_b": "new", "outcome": value,
                      "sample": np.arange(200).astype(str),
                      "item": rng.integers(0, 20, 200).astype(str),
                      "judge": rng.integers(0, 4, 200).astype(str)})
    t = evalmix.read(d, outcome="outcome", model_a="model_a", model_b="model_b",
                     clusters={"item": "item", "judge": "judge", "sample": "sample"})
    with pytest.raises(EvalmixError, match=r"every outcome is [01] .*design-based"):
        fit_statsmodels(t, method="laplace", formula="y ~ 1 + (1|item) + (1|judge)")
    y = np.full(200, 1.0 if value == "b" else 0.0)
    with pytest.raises(EvalmixError, match="every outcome is"):
        fit_laplace_arrays(y, np.ones((200, 1)), ["Intercept"],
                           [RandomTerm("item", "1", rng.integers(0, 20, 200),
                                       tuple(map(str, range(20))), np.ones(200))])


def test_laplace_refuses_separated_fixed_effect():
    # the treatment wins every comparison: no finite log-odds ratio
    rng = np.random.default_rng(1)
    n = 400
    treat = np.repeat([0.0, 1.0], n // 2)
    item = rng.integers(0, 25, n)
    y = np.where(treat == 1, 1.0, (rng.random(n) < 0.4).astype(float))
    X = np.column_stack([np.ones(n), treat])
    with pytest.raises(EvalmixError, match="separated by treat"):
        fit_laplace_arrays(y, X, ["Intercept", "treat"],
                           [RandomTerm("item", "1", item, tuple(map(str, range(25))),
                                       np.ones(n))])


# ---------------------------------------------------------------------------- new design vs R
#: Against glmmTMB (exact optimum of the same criterion; lme4's optimisers stop within
#: 2e-3 relative on the 4-level judge SD): estimates and SDs 1e-4 relative, SEs 1e-3
#: (Hessian by differences), log-likelihood 1e-9 relative (measured 1e-11).
SPARSE_RTOL = 1e-4
SPARSE_SE_RTOL = 1e-3


def _sparse_ref(model: str, software: str) -> pd.DataFrame:
    r = pd.read_csv(_REF / "reference_sparse.csv")
    r = r[(r.model == model) & (r.software == software)].copy()
    r["name"] = r["name"].str.replace(r"\.1$", "", regex=True)
    return r.set_index(["kind", "name"])


_REF = REFERENCE / "models"


@pytest.fixture(scope="module")
def sparse_design():
    d = pd.read_csv(_REF / "sparse_design.csv")
    X = np.column_stack([np.ones(len(d))] + [(d.model == f"m{j}").astype(float)
                                             for j in (1, 2, 3)])
    return d, X, ["(Intercept)", "modelm1", "modelm2", "modelm3"]


def test_reml_interaction_factor_equals_lmer_and_glmmtmb(sparse_design):
    from evalmix.models.frequentist import intercept_term

    d, X, names = sparse_design
    fit = fit_mixedlm_arrays(d.score.to_numpy(), X, names,
                             [intercept_term("item", d.item),
                              intercept_term("item_model", d.item_model),
                              intercept_term("judge", d.judge)])
    tmb, lme4 = _sparse_ref("gaussian_interaction", "glmmTMB"), _sparse_ref(
        "gaussian_interaction", "lme4")
    np.testing.assert_allclose(fit.fe_est, tmb.loc["fixed"].loc[names, "value"], rtol=1e-8)
    np.testing.assert_allclose(fit.fe_se, tmb.loc["fixed"].loc[names, "se"],
                               rtol=SPARSE_SE_RTOL)
    sds = tmb.loc["sd"].loc[["item", "item_model", "judge"], "value"].to_numpy()
    np.testing.assert_allclose(fit.vc_sd, sds, rtol=SPARSE_RTOL)
    np.testing.assert_allclose(fit.resid_sd, tmb.loc[("sd", "Residual"), "value"],
                               rtol=SPARSE_RTOL)
    # at least as low a REML criterion as lmer's own optimum
    crit = lme4.loc[("criterion", "REMLcrit"), "value"]
    assert fit.details["reml_criterion"] <= crit + 1e-9 * crit
    assert fit.converged and fit.results is not None  # 303 levels: statsmodels built


def test_laplace_slope_design_equals_glmmtmb(sparse_design):
    from evalmix.models.frequentist import intercept_term

    d, X, names = sparse_design
    judge = intercept_term("judge", d.judge)
    slope = RandomTerm("judge", "position", judge.codes, judge.levels,
                       d.position.to_numpy(dtype=float))
    names = [*names, "position"]
    fit = fit_laplace_arrays(d.win.to_numpy(dtype=float), np.column_stack([X, d.position]),
                             names, [intercept_term("item", d.item), judge, slope])
    tmb = _sparse_ref("logit_slope", "glmmTMB")
    np.testing.assert_allclose(fit.fe_est, tmb.loc["fixed"].loc[names, "value"],
                               rtol=SPARSE_RTOL, atol=1e-5)
    np.testing.assert_allclose(fit.fe_se, tmb.loc["fixed"].loc[names, "se"],
                               rtol=SPARSE_SE_RTOL)
    sds = tmb.loc["sd"].loc[["item", "judge", "position|judge"], "value"].to_numpy()
    np.testing.assert_allclose(fit.vc_sd, sds, rtol=SPARSE_RTOL)
    np.testing.assert_allclose(fit.results.llf, tmb.loc[("criterion", "logLik"), "value"],
                               rtol=1e-9)
    # glmer stops marginally short of the optimum
    assert fit.results.llf >= _sparse_ref("logit_slope", "lme4").loc[
        ("criterion", "logLik"), "value"]
    # per-level slope rows use the restricted joint covariance (fixed + slope levels)
    assert fit.fe_re_cov is not None and fit.fe_re_cov.shape == (5 + 4, 5 + 4)
