"""One home per array primitive: every fast path equals the reference implementation.

The reference is :mod:`evalmix.inference.sandwich` (itself checked against R's sandwich
and clubSandwich in test_sandwich.py); each test below feeds a fast path and the
reference the same data and asks for agreement to rounding error.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT

from evalmix.compare.position import mean_cr1
from evalmix.design.effect import deff_empirical
from evalmix.inference.bootstrap import cluster_bootstrap
from evalmix.inference.compare_all import cell_means_vcov
from evalmix.inference.sandwich import cr1_factor, vcov_cluster
from evalmix.inference.wild import wild_cluster_bootstrap

#: Agreement of two floating-point routes to the same sum (no approximation involved).
RTOL = 1e-10


def _clustered(seed: int = 0, g: int = 25, k: int = 2):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 7, size=g)
    codes = np.repeat(np.arange(g), sizes)
    n = codes.size
    X = np.column_stack([np.ones(n), rng.normal(size=(n, k - 1))])
    y = X @ np.linspace(0.5, -0.5, k) + rng.normal(size=g)[codes] + rng.normal(size=n)
    return X, y, codes


def _cr1_se(X, y, codes, target=0):
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    return float(np.sqrt(vcov_cluster(X, y - X @ beta, codes, type="CR1")[target, target]))


def test_cr1_factor_is_the_ratio_of_cr1_to_cr0():
    X, y, codes = _clustered()
    e = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    ratio = vcov_cluster(X, e, codes, type="CR1") / vcov_cluster(X, e, codes, type="CR0")
    n, k = X.shape
    assert np.allclose(ratio, 25 / 24 * (n - 1) / (n - k), rtol=RTOL)
    assert cr1_factor(25, n, k) == pytest.approx(25 / 24 * (n - 1) / (n - k), rel=1e-15)
    assert np.allclose(cr1_factor(np.array([5.0, 10.0]), np.array([50.0, 80.0]), 1),
                       [5 / 4, 10 / 9])


def test_wild_and_bootstrap_cr1_se_equal_the_sandwich():
    X, y, codes = _clustered(1)
    ref = _cr1_se(X, y, codes, target=1)
    wild = wild_cluster_bootstrap(X, y, codes, target=1, reps=99, seed=1)
    boot = cluster_bootstrap(X, y, codes, target=1, reps=50, seed=1)
    assert wild.se_cr1 == pytest.approx(ref, rel=RTOL)
    assert boot.se_cr1 == pytest.approx(ref, rel=RTOL)
    boot_t = cluster_bootstrap(X, y, codes, target=1, reps=50, seed=1, ci="studentized")
    assert boot_t.se_cr1 == pytest.approx(ref, rel=RTOL)


def test_logit_bootstrap_cr1_se_equals_the_glm_sandwich():
    from scipy import special

    X, _, codes = _clustered(2)
    rng = np.random.default_rng(3)
    y = (rng.random(codes.size) < special.expit(X @ [0.2, 0.8])).astype(float)
    boot = cluster_bootstrap(X, y, codes, target=1, reps=50, seed=1, family="binomial")
    beta = np.zeros(2)
    for _ in range(50):  # Newton-Raphson for the full-sample logit fit
        mu = special.expit(X @ beta)
        beta += np.linalg.solve((X * (mu * (1 - mu))[:, None]).T @ X, X.T @ (y - mu))
    mu = special.expit(X @ beta)
    V = vcov_cluster(X, y - mu, codes, type="CR1", working_weights=mu * (1 - mu))
    assert boot.se_cr1 == pytest.approx(np.sqrt(V[1, 1]), rel=1e-8)


def test_mean_cr1_and_design_effect_use_the_sandwich_cr1():
    _, y, codes = _clustered(4)
    ones = np.ones((y.size, 1))
    ref = _cr1_se(ones, y, codes)
    assert mean_cr1(y, codes)[1] == pytest.approx(ref, rel=RTOL)
    naive = y.var(ddof=1) / y.size
    assert deff_empirical(y, codes) == pytest.approx(ref**2 / naive, rel=RTOL)


def test_cell_means_cr1_equals_the_sandwich_on_group_dummies():
    rng = np.random.default_rng(5)
    g, m = 12, 3
    codes = np.repeat(np.arange(g), 9)
    group = rng.integers(0, m, size=codes.size)
    y = rng.normal(size=codes.size) + group
    count = np.zeros((g, m))
    total = np.zeros((g, m))
    np.add.at(count, (codes, group), 1.0)
    np.add.at(total, (codes, group), y)
    means, vcov, _ = cell_means_vcov(count, total, method="CR1")
    X = np.eye(m)[group]
    ref = vcov_cluster(X, y - X @ means, codes, type="CR1")
    assert np.allclose(vcov, ref, rtol=RTOL, atol=1e-15)


# ----------------------------------------------------------------- dense cluster codes
@pytest.mark.parametrize("labels", [
    np.array([5, 3, 3, 9, 0, 5]),  # small non-negative range: presence-table fast path
    np.array([10**9, 7, 7, 10**12]),  # wide range: hashing
    np.array([-2, 4, -2, 1]),
    np.array(["item-b", "item-a", "item-b", "c"], dtype=object),
    np.array([0.5, 0.25, 0.5]),
])
def test_dense_codes_equal_sorted_factorize(labels):
    import pandas as pd

    from evalmix.data.table import dense_codes

    ref = pd.factorize(labels, sort=True)[0]
    assert np.array_equal(dense_codes(labels), ref)
    assert dense_codes(labels).dtype == np.int64


def test_intersect_codes_equal_groupby_and_unique_rows():
    import pandas as pd

    from evalmix.data.table import intersect_codes

    rng = np.random.default_rng(6)
    a, b, c = (rng.integers(-1, k, size=200) for k in (4, 7, 3))  # -1: a missing label
    ref = pd.DataFrame({"a": a, "b": b, "c": c}).groupby(["a", "b", "c"]).ngroup()
    assert np.array_equal(intersect_codes(a, b, c), ref.to_numpy())
    rows = np.unique(np.column_stack([a, b, c]), axis=0, return_inverse=True)[1]
    assert np.array_equal(intersect_codes(a, b, c), rows.ravel())


def test_cluster_codes_refuse_missing_labels():
    from evalmix.errors import EvalmixError
    from evalmix.inference.sandwich import cluster_codes

    codes, g = cluster_codes(np.array(["b", "a", "b"]))
    assert codes.tolist() == [1, 0, 1] and g == 2
    with pytest.raises(EvalmixError, match="missing"):
        cluster_codes(np.array([1.0, np.nan, 2.0]))
    with pytest.raises(EvalmixError, match="missing"):
        cluster_bootstrap(np.ones(3), np.ones(3), np.array([1.0, np.nan, 2.0]))


# ------------------------------------------------------------- CR2 Satterthwaite df
def test_cell_means_satterthwaite_fast_path_equals_the_sandwich():
    from evalmix.inference.ranking import pairwise_satterthwaite
    from evalmix.inference.sandwich import satterthwaite_df

    rng = np.random.default_rng(7)
    g, m = 9, 4
    codes = np.repeat(np.arange(g), 12)
    group = rng.integers(0, m, size=codes.size)
    group[:m] = np.arange(m)
    count = np.zeros((g, m))
    np.add.at(count, (codes, group), 1.0)
    _, _, factor = cell_means_vcov(count, np.zeros((g, m)), method="CR2")
    means_df = pairwise_satterthwaite(count, factor)
    assert np.allclose(means_df, satterthwaite_df(np.eye(m)[group], codes), rtol=1e-9)
    for i in range(m):  # reference group i: coefficient j is mu_j - mu_i
        others = [j for j in range(m) if j != i]
        X = np.column_stack([np.ones(codes.size), np.eye(m)[group][:, others]])
        ref = satterthwaite_df(X, codes)[1:]
        fast = pairwise_satterthwaite(count, factor, np.full(m - 1, i), np.array(others))
        assert np.allclose(fast, ref, rtol=1e-9)


# ------------------------------------------------------------ multiway terms, once
@pytest.mark.parametrize("type_", ["CR0", "CR1", "CR2"])
def test_multiway_terms_are_the_one_way_sandwiches(type_):
    from evalmix.inference.sandwich import multiway_df, satterthwaite_df, vcov_multiway

    rng = np.random.default_rng(8)
    n = 240
    a, b = rng.integers(0, 12, n), rng.integers(0, 9, n)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    y = X @ [0.2, 0.5] + rng.normal(size=12)[a] + rng.normal(size=9)[b] + rng.normal(size=n)
    e = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    mw = vcov_multiway(X, e, [a, b], type=type_)
    for i, c in enumerate((a, b)):
        assert np.allclose(mw.one_way(i), vcov_cluster(X, e, c, type=type_), rtol=1e-12)
    assert len(mw.terms) == 3 and [t.sign for t in mw.terms] == [1, 1, -1]
    if type_ == "CR2":
        for i, c in enumerate((a, b)):
            assert np.allclose(mw.terms[i].df, satterthwaite_df(X, c), rtol=1e-12)
        assert multiway_df(X, e, [a, b], target=1, multiway=mw) == multiway_df(
            X, e, [a, b], target=1)


# ------------------------------------------------------------- confidence levels
def _level_calls():
    import evalmix
    from evalmix.design.effect import design_effect
    from evalmix.inference.ranking import maxt_critical
    from evalmix.plan import coverage
    from evalmix.sim import clustered_scores, pairwise_judges

    X, y, codes = _clustered(9)
    scores = clustered_scores(20, 4, seed=1).table()
    pairs = pairwise_judges(n_scenarios=12, seed=1).table()
    grid = {"n_clusters": [5], "cluster_size": [2], "icc": [0.1]}
    return {
        "interval": lambda lv: evalmix.interval(scores, "mean", cluster="cluster", level=lv),
        "cluster_bootstrap": lambda lv: cluster_bootstrap(X, y, codes, level=lv),
        "wild": lambda lv: wild_cluster_bootstrap(X, y, codes, target=1, level=lv),
        "compare_all": lambda lv: evalmix.compare_all(pairs, cluster="scenario", level=lv),
        "leaderboard": lambda lv: evalmix.leaderboard(pairs, cluster="scenario", level=lv),
        "maxt_critical": lambda lv: maxt_critical(np.eye(3), np.array([0]), np.array([1]),
                                                  level=lv, rng=np.random.default_rng(0)),
        "design_effect": lambda lv: design_effect(scores, level=lv),
        "power": lambda lv: evalmix.power(0.05, n_clusters=[10], cluster_size=10, icc=0.1,
                                          level=lv),
        "coverage": lambda lv: coverage(["naive"], grid, reps=10, level=lv, progress=False),
        "analyze": lambda lv: evalmix.analyze(scores, level=lv, fast=True, progress=False),
    }


@pytest.mark.parametrize("bad", [95, 0.0, 1.0, float("nan"), "high"])
def test_every_level_check_has_one_class_and_one_wording(bad):
    from evalmix.errors import InvalidOptionError, check_level

    with pytest.raises(InvalidOptionError, match=r"level must be in \(0, 1\)"):
        check_level(bad)
    for call in _level_calls().values():
        with pytest.raises(InvalidOptionError, match=r"level must be in \(0, 1\)"):
            call(bad)


# ------------------------------------------------------------------------ versions
def test_one_version_and_one_way_to_collect_versions():
    import re
    import sys

    import evalmix
    from evalmix._version import __version__, package_versions

    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == __version__
    assert evalmix.__version__ == __version__
    v = package_versions("numpy", "surely-not-a-package")
    assert v["evalmix"] == __version__ and v["numpy"] == np.__version__
    assert "surely-not-a-package" not in v and v["python"] == ".".join(
        map(str, sys.version_info[:3]))
    loaded = package_versions("numpy", "bambi", loaded_only=True)
    assert ("bambi" in loaded) == ("bambi" in sys.modules)


def test_t_quantile_and_p_value_equal_scipy_stats():
    """scale.t_quantile / t_pvalue call scipy.special directly; they must equal
    scipy.stats' t and normal distributions to the last bit (df finite and infinite)."""
    from scipy import stats

    from evalmix.inference.scale import t_pvalue, t_quantile

    for df in (1.0, 2.5, 7.0, 30.0, 1e6, float("inf")):
        dist = stats.t(df) if np.isfinite(df) else stats.norm()
        for level in (0.5, 0.8, 0.9, 0.95, 0.99):
            assert t_quantile(level, df) == float(dist.ppf(0.5 + level / 2))
        for t in (0.0, 0.3, -1.7, 2.228139, 8.0):
            assert t_pvalue(t, df) == float(2 * dist.sf(abs(t)))


@pytest.mark.parametrize("bad", [True, 99.5, 99.0, "99", None, [3]])
def test_check_count_refuses_what_range_refuses(bad):
    from evalmix.errors import InvalidOptionError, check_count

    with pytest.raises(InvalidOptionError, match="reps must be an integer"):
        check_count("reps", bad, minimum=2)
    with pytest.raises(TypeError):  # the same values range() refuses (bool aside)
        if isinstance(bad, bool):
            raise TypeError
        range(bad)  # type: ignore[call-overload]


def test_check_count_takes_numpy_integers_and_enforces_the_minimum():
    from evalmix.errors import InvalidOptionError, check_count

    assert check_count("reps", np.int32(7), minimum=2) == 7
    assert type(check_count("reps", np.int64(7))) is int
    with pytest.raises(InvalidOptionError, match="at least 2, got 1"):
        check_count("reps", 1, minimum=2)
