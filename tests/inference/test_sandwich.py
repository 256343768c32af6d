"""Cluster-robust variances (evalmix.inference.sandwich) against R and identities.

References
----------
- tests/reference/sandwich/reference.csv: made by reference.R (R 4.2.2, sandwich 3.0-2,
  clubSandwich 0.5.8; see sessionInfo.txt) on data.csv (made by make_data.py):
  CR0/CR1 and two-way CR0/CR1 from sandwich::vcovCL, CR2/CR3 SEs and Satterthwaite df
  from clubSandwich::vcovCR + coef_test, for an intercept-only lm, an lm with two
  covariates and a logit glm, clustered by factor a (30 levels) and b (12 levels).
- statsmodels OLS(cov_type="cluster") for CR1 and HC1 for singleton clusters.
- Closed forms: intercept-only CR1 with equal cluster sizes = SE of cluster means.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from conftest import REFERENCE

from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference import sandwich as sw
from evalmix.inference.estimands import fit_logit

REF = REFERENCE / "sandwich"
#: R wrote 15 significant digits; our arithmetic agrees to ~1e-13. The issue asks 1e-8.
R_TOL = 1e-8
#: Two exact computations of the same quantity in double precision.
EXACT_TOL = 1e-10


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return pd.read_csv(REF / "data.csv")


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return pd.read_csv(REF / "reference.csv")


def _model(data: pd.DataFrame, name: str):
    X = np.column_stack([np.ones(len(data)), data["x"], data["treat"]])
    if name == "mean":
        X1 = np.ones((len(data), 1))
        y = data["y"].to_numpy(float)
        return X1, y - y.mean(), None
    if name == "ols":
        y = data["y"].to_numpy(float)
        beta = np.linalg.lstsq(X, y, rcond=None)[0]
        return X, y - X @ beta, None
    f = fit_logit(X, data["ybin"].to_numpy(float))
    return X, f.resid, f.working_weights


CASES = [(m, t, c) for m in ("mean", "ols", "logit") for t in ("CR0", "CR1", "CR2", "CR3")
         for c in ("a", "b")] + [(m, t, "a+b") for m in ("mean", "ols", "logit")
                                 for t in ("CR0", "CR1")]


@pytest.mark.parametrize(("model", "type_", "cluster"), CASES)
def test_matches_r(data, reference, model, type_, cluster):
    ref = reference[(reference.model == model) & (reference.type == type_)
                    & (reference.cluster == cluster)]
    assert len(ref) in (1, 3)
    X, e, w = _model(data, model)
    if cluster == "a+b":
        mw = sw.vcov_multiway(X, e, [data["a"].to_numpy(), data["b"].to_numpy()],
                              type=type_, working_weights=w)
        assert mw.n_clusters == (30, 12)
        V = mw.vcov
    else:
        V = sw.vcov_cluster(X, e, data[cluster].to_numpy(), type=type_, working_weights=w)
    np.testing.assert_allclose(np.sqrt(np.diag(V)), ref["se"].to_numpy(), rtol=R_TOL)
    if type_ in ("CR2", "CR3") and cluster != "a+b":
        df = sw.satterthwaite_df(X, data[cluster].to_numpy(), type=type_,
                                 working_weights=w)
        np.testing.assert_allclose(df, ref["df"].to_numpy(), rtol=R_TOL)


def test_logit_fit_matches_r(data):
    coefs = pd.read_csv(REF / "coefficients.csv")
    X, _, _ = _model(data, "ols")
    f = fit_logit(X, data["ybin"].to_numpy(float))
    np.testing.assert_allclose(f.beta, coefs[coefs.model == "logit"]["estimate"], rtol=R_TOL)


def test_cr1_matches_statsmodels(data):
    X, e, _ = _model(data, "ols")
    fit = sm.OLS(data["y"].to_numpy(float), X).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(data["a"])[0]})
    V = sw.vcov_cluster(X, e, data["a"].to_numpy(), type="CR1")
    np.testing.assert_allclose(V, fit.cov_params(), rtol=EXACT_TOL)


def test_cr1_singletons_equal_hc1(data):
    X, e, _ = _model(data, "ols")
    hc1 = sm.OLS(data["y"].to_numpy(float), X).fit(cov_type="HC1").cov_params()
    V = sw.vcov_cluster(X, e, np.arange(len(e)), type="CR1")
    np.testing.assert_allclose(V, hc1, rtol=EXACT_TOL)


def test_intercept_only_cr1_is_se_of_cluster_means():
    y = np.array([1.0, 4, 11, 6, 13, 8])
    g = np.array([1, 1, 2, 2, 3, 3])
    V = sw.vcov_cluster(np.ones((6, 1)), y - y.mean(), g, type="CR1")
    means = np.array([2.5, 8.5, 10.5])
    assert np.sqrt(V[0, 0]) == pytest.approx(means.std(ddof=1) / np.sqrt(3), rel=EXACT_TOL)
    assert np.sqrt(V[0, 0]) == pytest.approx(2.4037009, abs=5e-8)


def test_intercept_only_equal_sizes_cr2_is_cr1_with_df_g_minus_1():
    """Equal sizes m: (I - H_gg)^{-1/2} scales e_g by ..., CR2 = G/(G-1) CR0, df = G - 1."""
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(9), 5)
    y = rng.normal(size=45) + rng.normal(size=9)[g]
    X = np.ones((45, 1))
    V1 = sw.vcov_cluster(X, y - y.mean(), g, type="CR1")
    V2 = sw.vcov_cluster(X, y - y.mean(), g, type="CR2")
    assert V2[0, 0] == pytest.approx(V1[0, 0], rel=EXACT_TOL)
    assert sw.satterthwaite_df(X, g)[0] == pytest.approx(8.0, rel=EXACT_TOL)


def _unbalanced(seed=0, n=240, G=25):
    rng = np.random.default_rng(seed)
    g = rng.choice(G, size=n, p=rng.dirichlet(np.ones(G)))
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = X @ [0.2, 0.5, -0.3] + rng.normal(size=G)[g] + rng.normal(size=n)
    e = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    return X, y, e, g


@pytest.mark.parametrize("type_", ["CR0", "CR1", "CR2", "CR3"])
def test_relabel_and_permute_change_nothing(type_):
    X, _, e, g = _unbalanced()
    V = sw.vcov_cluster(X, e, g, type=type_)
    df = sw.satterthwaite_df(X, g, type=type_)
    labels = np.array([f"cl-{v * 7 % 25:03d}" for v in g])  # new labels, other order
    perm = np.random.default_rng(1).permutation(len(e))
    V2 = sw.vcov_cluster(X[perm], e[perm], labels[perm], type=type_)
    np.testing.assert_allclose(V2, V, rtol=EXACT_TOL)
    np.testing.assert_allclose(sw.satterthwaite_df(X[perm], labels[perm], type=type_), df,
                               rtol=EXACT_TOL)


@pytest.mark.parametrize("type_", ["CR2", "CR3"])
def test_low_rank_path_equals_per_cluster_matrices(type_):
    """The k x k shortcut equals forming (I - H_gg)^{-1/2} per cluster (incl. singletons)."""
    X, _, e, g = _unbalanced(seed=5, n=150, G=40)
    V = sw.vcov_cluster(X, e, g, type=type_)
    Vd, dfd = sw._vcov_and_df_dense(X, e, g, type=type_)
    np.testing.assert_allclose(V, Vd, rtol=EXACT_TOL)
    np.testing.assert_allclose(sw.satterthwaite_df(X, g, type=type_), dfd, rtol=EXACT_TOL)


def test_cr2_by_brute_force_small():
    """CR2 and its df from explicit n x n matrices on a tiny problem (the definitions)."""
    X, _, e, g = _unbalanced(seed=9, n=40, G=7)
    n = len(e)
    M = np.linalg.inv(X.T @ X)
    IH = np.eye(n) - X @ M @ X.T
    meat = np.zeros((3, 3))
    p_vecs = []
    for c in np.unique(g):
        idx = np.flatnonzero(g == c)
        lam, U = np.linalg.eigh(IH[np.ix_(idx, idx)])
        A = U @ np.diag(lam ** -0.5) @ U.T
        s = X[idx].T @ A @ e[idx]
        meat += np.outer(s, s)
        # p_g: the n-vector with (M X_g' A_g (I - H)_{g,.}) e = contribution to coef
        p_vecs.append(M @ X[idx].T @ A @ IH[idx, :])
    V = M @ meat @ M
    np.testing.assert_allclose(sw.vcov_cluster(X, e, g, type="CR2"), V, rtol=EXACT_TOL)
    df = []
    for i in range(3):
        P = np.array([p[i] for p in p_vecs])  # (G, n)
        Pm = P @ P.T
        df.append(np.trace(Pm) ** 2 / (Pm**2).sum())
    np.testing.assert_allclose(sw.satterthwaite_df(X, g), df, rtol=EXACT_TOL)


def test_singular_adjustment_uses_pseudo_inverse():
    """A cluster with its own dummy has leverage 1: CR2 treats the zero eigenvalue as
    clubSandwich does (Moore-Penrose), giving a finite variance."""
    X, _, _, g = _unbalanced(seed=2, n=60, G=6)
    X = np.column_stack([X, (g == 0).astype(float)])
    y = np.random.default_rng(0).normal(size=60)
    e = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    V = sw.vcov_cluster(X, e, g, type="CR2")
    Vd, _ = sw._vcov_and_df_dense(X, e, g, type="CR2")
    assert np.all(np.isfinite(V))
    np.testing.assert_allclose(V, Vd, rtol=1e-8, atol=1e-14)


def test_multiway_fix_gives_psd():
    """Negative-eigenvalue inclusion-exclusion sums are clipped to the PSD cone."""
    rng = np.random.default_rng(11)
    n = 60
    a, b = rng.integers(0, 3, n), rng.integers(0, 3, n)
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.normal(size=n)])
    found = False
    for _ in range(200):
        e = rng.normal(size=n)
        mw = sw.vcov_multiway(X, e, [a, b], type="CR0")
        assert np.linalg.eigvalsh(mw.vcov).min() >= -1e-12
        if mw.fixed:
            found = True
            assert mw.min_eigenvalue < 0
            break
    assert found, "no non-PSD case found; the fix was not exercised"


def test_one_factor_multiway_equals_one_way():
    X, _, e, g = _unbalanced()
    V = sw.vcov_cluster(X, e, g, type="CR1")
    np.testing.assert_allclose(sw.vcov_multiway(X, e, [g], type="CR1").vcov, V,
                               rtol=EXACT_TOL)


def test_errors():
    X, _, e, g = _unbalanced()
    with pytest.raises(EvalmixError, match="at least 2 clusters"):
        sw.vcov_cluster(X, e, np.zeros(len(e)), type="CR1")
    with pytest.raises(InvalidOptionError, match="CR2"):
        sw.vcov_cluster(X, e, g, type="HC9")
    with pytest.raises(EvalmixError, match="singular"):
        sw.vcov_cluster(np.column_stack([X, X[:, 1]]), e, g, type="CR1")
