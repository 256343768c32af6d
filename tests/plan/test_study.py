"""Coverage studies (evalmix.plan.coverage): kernels, coverage, seeds, Dask, resume.

References:
- R clubSandwich 0.5.8 / sandwich 3.0-2 (tests/reference/plan/cr2_intercept.R):
  CR2 SE, Satterthwaite df and CR1 SE of an intercept-only fit with unequal clusters.
- statsmodels OLS ``cov_type="cluster"`` for the CR1 SE.
- evalmix.inference.bootstrap.cluster_bootstrap (when present): the stacked bootstrap
  must reproduce it draw for draw with the same seed.
- Closed form: large-sample naive coverage 2 Phi(1.96 / sqrt(DEFF)) - 1 (Kish 1965).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from conftest import REFERENCE, mc_band

from evalmix.errors import EvalmixError
from evalmix.plan import coverage
from evalmix.plan import study as study_mod
from evalmix.plan._cells import check_cell, simulate_cell, stacked_intervals

REF = REFERENCE / "plan"
#: R prints 17 significant digits; the kernels are closed forms (sums of squares)
R_TOL = 1e-10
#: coverage within this many Monte Carlo SEs of its target (1 false alarm in ~2,000)
MC_Z = 3.5
#: the naive formula is large-sample (normal estimate, consistent SE); with >= 50
#: clusters its finite-sample gap measured at 10,000 reps is under 0.008
NAIVE_ALLOWANCE = 0.008


def _suff(cl: np.ndarray, y: np.ndarray):
    return (np.bincount(cl, y)[None], np.bincount(cl).astype(float)[None],
            np.bincount(cl, y * y)[None])


def test_cr2_and_cr1_kernels_match_r_clubsandwich():
    data = pd.read_csv(REF / "cr2_intercept_data.csv")
    ref = pd.read_csv(REF / "cr2_intercept.csv").iloc[0]
    s, n, q = _suff(data["cluster"].to_numpy() - 1, data["y"].to_numpy())
    res = stacked_intervals(["CR1", "CR2"], s, n, q, level=0.95, boot_reps=2, rng=None)
    est, lo, hi, se = res["CR2"]
    assert est[0] == pytest.approx(ref["estimate"], rel=R_TOL)
    assert se[0] == pytest.approx(ref["se_cr2"], rel=R_TOL)
    from scipy import stats
    assert (hi[0] - est[0]) / se[0] == pytest.approx(stats.t.ppf(0.975, ref["df_cr2"]),
                                                     rel=R_TOL)
    assert res["CR1"][3][0] == pytest.approx(ref["se_cr1"], rel=R_TOL)


def test_cr1_kernel_matches_statsmodels_on_stacked_replications():
    cell = check_cell({"n_clusters": 15, "cluster_size": 6, "size_cv": 0.5, "icc": 0.2})
    s, n, q = simulate_cell(cell, 3, np.random.default_rng(4))
    res = stacked_intervals(["CR1"], s, n, q, level=0.95, boot_reps=2, rng=None)
    for i in range(3):
        sizes = n[i].astype(int)
        cl = np.repeat(np.arange(sizes.size), sizes)
        pos = np.arange(cl.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        y = (pos < np.repeat(s[i], sizes)).astype(float)
        fit = sm.OLS(y, np.ones((y.size, 1))).fit(cov_type="cluster",
                                                   cov_kwds={"groups": cl})
        assert res["CR1"][3][i] == pytest.approx(fit.bse[0], rel=1e-10)


def test_stacked_sandwich_equals_inference_sandwich():
    from evalmix.inference import sandwich
    cell = check_cell({"n_clusters": 9, "cluster_size": 6, "size_cv": 0.7, "icc": 0.3,
                       "estimand": "difference"})
    s, n, q = simulate_cell(cell, 4, np.random.default_rng(8))
    res = stacked_intervals(["CR1", "CR2"], s, n, q, level=0.95, boot_reps=2, rng=None)
    from scipy import stats
    for i in range(4):
        sizes = n[i].astype(int)
        cl = np.repeat(np.arange(sizes.size), sizes)
        # any items with these cluster sums serve: the SEs use only the sums
        y = np.repeat(s[i] / sizes, sizes)
        X = np.ones((y.size, 1))
        for name in ("CR1", "CR2"):
            v = sandwich.vcov_cluster(X, y - y.mean(), cl, type=name)
            assert res[name][3][i] == pytest.approx(np.sqrt(v[0, 0]), rel=1e-10)
        df = sandwich.satterthwaite_df(X, cl, type="CR2")[0]
        est, _, hi, se = (a[i] for a in res["CR2"])
        assert (hi - est) / se == pytest.approx(stats.t.ppf(0.975, df), rel=1e-10)


def test_stacked_bootstrap_equals_inference_cluster_bootstrap():
    from evalmix.inference import bootstrap as boot
    rng = np.random.default_rng(3)
    sizes = np.array([3, 5, 2, 8, 4, 6, 7, 3, 2, 9, 4, 4, 5, 6, 2, 3, 8, 1, 2, 5, 6])
    cl = np.repeat(np.arange(sizes.size), sizes)
    y = rng.normal(size=cl.size) + rng.normal(size=sizes.size)[cl]
    s, n, q = _suff(cl, y)
    ours = stacked_intervals(["bootstrap", "bootstrap-t"], s, n, q, level=0.9,
                             boot_reps=999, rng=np.random.default_rng(7))
    X = np.ones((cl.size, 1))
    for ci, name in (("percentile", "bootstrap"), ("studentized", "bootstrap-t")):
        ref = boot.cluster_bootstrap(X, y, cl, reps=999, level=0.9, seed=7, ci=ci)
        assert ours[name][1][0] == pytest.approx(ref.lo, rel=1e-10)
        assert ours[name][2][0] == pytest.approx(ref.hi, rel=1e-10)


def _check_grid(res, *, strict_band: bool) -> None:
    t = res.table
    naive = t[(t.method == "naive") & (t.n_clusters >= 50)]
    assert len(naive) > 0
    gap = (naive.coverage - naive.naive_analytic).abs()
    assert (gap < MC_Z * naive.mcse + NAIVE_ALLOWANCE).all(), naive
    # bootstrap-t is slightly conservative at 20 clusters (0.961 +- 0.002 at 10,000 reps),
    # so it is held to 94-96% up to Monte Carlo error only
    for method in ("CR1", "bootstrap-expanded", "bootstrap-t"):
        rows = t[(t.method == method) & (t.n_clusters >= 20)]
        assert len(rows) > 0
        if strict_band and method in ("CR1", "bootstrap-expanded"):
            lo, hi = mc_band(0.95, int(rows.reps.iloc[0]), len(t))
            assert rows.coverage.between(lo, hi).all(), rows
        else:
            assert (rows.coverage > 0.94 - MC_Z * rows.mcse).all(), rows
            assert (rows.coverage < 0.96 + MC_Z * rows.mcse).all(), rows
    # the percentile bootstrap is z-based with a (G-1)/G-shrunk variance: fine from ~100
    # clusters, under-covers at 20 (about 0.93 at 10,000 reps; see docs/planning.md)
    pct = t[(t.method == "bootstrap") & (t.n_clusters >= 100)]
    band = (mc_band(0.95, int(pct.reps.iloc[0]), len(t)) if strict_band
            else (0.94 - MC_Z * pct.mcse, 0.96 + MC_Z * pct.mcse))
    assert ((pct.coverage >= band[0]) & (pct.coverage <= band[1])).all(), pct


def test_small_coverage_grid_fast():
    grid = [{"n_clusters": 100, "cluster_size": 10, "icc": 0.2},
            {"n_clusters": 50, "cluster_size": 20, "icc": 0.1},
            {"n_clusters": 20, "cluster_size": 10, "icc": 0.1},
            {"estimand": "difference", "n_clusters": 60, "cluster_size": 8, "icc": 0.3,
             "size_cv": 0.4}]
    res = coverage(["naive", "CR1", "CR2", "bootstrap", "bootstrap-t", "bootstrap-expanded"],
                   grid, reps=2000, seed=11, boot_reps=399, progress=False)
    assert list(res.table.columns) == list(study_mod.COVERAGE_COLUMNS)
    assert len(res.table) == 24 and (res.table.reps == 2000).all()
    _check_grid(res, strict_band=False)
    # equal sizes: CR2 is CR1 exactly
    eq = res.table[res.table.size_cv == 0]
    np.testing.assert_allclose(eq[eq.method == "CR2"].coverage.to_numpy(),
                               eq[eq.method == "CR1"].coverage.to_numpy())


@pytest.mark.slow
def test_issue_grid_10000_reps():
    # issue 3's design: N = 1,000, m in {1, 5, 10, 20, 50}, rho in {0.1, 0.2}
    res = coverage(["naive", "CR1", "CR2", "bootstrap", "bootstrap-t", "bootstrap-expanded"],
                   None, reps=10_000,
                   seed=2026, jobs=2, progress=False)
    assert res.seconds < 120
    _check_grid(res, strict_band=True)


def test_seeds_are_per_cell_and_backends_agree():
    grid = {"n_clusters": [8, 30], "cluster_size": [5], "icc": [0.1, 0.3]}
    methods = ["naive", "CR1", "bootstrap"]
    local = coverage(methods, grid, reps=300, seed=5, boot_reps=199, progress=False)
    again = coverage(methods, grid, reps=300, seed=5, boot_reps=199, progress=False)
    drop = ["seconds"]
    pd.testing.assert_frame_equal(local.table.drop(columns=drop), again.table.drop(columns=drop))
    other = coverage(methods, grid, reps=300, seed=6, boot_reps=199, progress=False)
    assert not np.allclose(other.table.coverage, local.table.coverage)
    # a cell's numbers do not depend on the rest of the grid
    one = coverage(methods, {"n_clusters": [30], "cluster_size": [5], "icc": [0.3]}, reps=300,
                   seed=5, boot_reps=199, progress=False).table
    same = local.table[(local.table.n_clusters == 30) & (local.table.icc == 0.3)]
    np.testing.assert_array_equal(one.coverage.to_numpy(), same.coverage.to_numpy())
    par = coverage(methods, grid, reps=300, seed=5, boot_reps=199, jobs=2, progress=False)
    assert par.backend == "joblib"
    pd.testing.assert_frame_equal(par.table.drop(columns=drop), local.table.drop(columns=drop))
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        dsk = coverage(methods, grid, reps=300, seed=5, boot_reps=199, client=client,
                       progress=False)
    assert dsk.backend == "dask"
    pd.testing.assert_frame_equal(dsk.table.drop(columns=drop), local.table.drop(columns=drop))


def test_resume_after_interruption(tmp_path, monkeypatch):
    grid = {"n_clusters": [10, 20, 40], "cluster_size": [4], "icc": [0.05, 0.2]}
    methods = ["naive", "CR1"]
    full = coverage(methods, grid, reps=200, seed=9, progress=False)

    real_task = study_mod._task
    calls = {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real_task(*args, **kwargs)

    monkeypatch.setattr(study_mod, "_task", interrupted)
    out = tmp_path / "grid"
    with pytest.raises(KeyboardInterrupt):
        coverage(methods, grid, reps=200, seed=9, out=out, progress=False)
    lines = (out / "coverage.jsonl").read_text().splitlines()
    assert len(lines) == 3  # the three finished cells were kept
    # a kill in the middle of a write leaves half a line: resume must drop and rerun it
    with (out / "coverage.jsonl").open("a") as fh:
        fh.write(lines[0][: len(lines[0]) // 2])
    monkeypatch.setattr(study_mod, "_task", real_task)
    with pytest.raises(EvalmixError, match="resume"):
        coverage(methods, grid, reps=200, seed=9, out=out, progress=False)
    with pytest.raises(EvalmixError, match="reps=200"):
        coverage(methods, grid, reps=100, seed=9, out=out, resume=True, progress=False)
    res = coverage(methods, grid, reps=200, seed=9, out=out, resume=True, progress=False)
    assert res.n_resumed == 3
    pd.testing.assert_frame_equal(res.table.drop(columns="seconds"),
                                  full.table.drop(columns="seconds"))
    assert len((out / "coverage.jsonl").read_text().splitlines()) == 6
    saved = pd.read_csv(out / "coverage.csv")
    assert list(saved.columns) == list(study_mod.COVERAGE_COLUMNS)
    assert json.loads((out / "manifest.json").read_text())["reps"] == 200


def test_bad_grids_raise():
    with pytest.raises(EvalmixError, match="unknown grid keys"):
        coverage(["CR1"], {"clusters": [10]}, reps=10, progress=False)
    with pytest.raises(EvalmixError, match="n_clusters >= 2"):
        coverage(["CR1"], {"n_clusters": [1]}, reps=10, progress=False)
    with pytest.raises(EvalmixError, match="repeats a cell"):
        coverage(["CR1"], [{"n_clusters": 10}, {"n_clusters": 10}], reps=10, progress=False)


def test_generic_methods_go_through_evalmix_interval(monkeypatch):
    # a stand-in for evalmix.interval (evalmix.inference.api.interval) computing CR1 from the table it is given: the
    # per-replication tables must reproduce the fast path's numbers exactly
    import evalmix.inference.api
    from evalmix.inference.result import IntervalResult

    calls = []

    def fake_interval(table, estimand, *, method, cluster, level, reps=None, seed=None):
        calls.append((estimand, method, cluster))
        data = table.data
        if estimand == "difference":
            wide = data.pivot_table(index=["item", "cluster"], columns="condition",
                                    values="y").reset_index()
            y = (wide["treatment"] - wide["control"]).to_numpy()
            cl = wide["cluster"].to_numpy()
        else:
            y, cl = table.y, data["cluster"].to_numpy()
        _, codes = np.unique(cl, return_inverse=True)
        s, n, q = _suff(codes, y)
        est, lo, hi, se = stacked_intervals(["CR1"], s, n, q, level=level, boot_reps=2,
                                            rng=None)["CR1"]
        return IntervalResult(estimand=estimand, contrast="overall", method=method,
                              cluster=cluster, estimate=est[0], se=se[0], lo=lo[0], hi=hi[0],
                              level=level, df=float(codes.max()), n_clusters=codes.max() + 1,
                              n_obs=y.size)

    monkeypatch.setattr(evalmix.inference.api, "interval", fake_interval)
    grid = [{"n_clusters": 6, "cluster_size": 4, "size_cv": 0.5},
            {"estimand": "difference", "n_clusters": 5, "cluster_size": 3, "icc": 0.3}]
    res = coverage(["CR1", "fake-CR1"], grid, reps=40, seed=3, progress=False)
    t = res.table
    for cell in (0, 1):
        fast = t[(t.cell == cell) & (t.method == "CR1")].iloc[0]
        slow = t[(t.cell == cell) & (t.method == "fake-CR1")].iloc[0]
        for col in ("coverage", "mean_width", "mean_se", "sd_estimate"):
            assert slow[col] == pytest.approx(fast[col], rel=1e-9)
    assert len(calls) == 80 and calls[-1] == ("difference", "fake-CR1", "cluster")


def test_dask_scheduler_address_string():
    distributed = pytest.importorskip("distributed")
    grid = {"n_clusters": [12], "cluster_size": [3], "icc": [0.2]}
    local = coverage(["CR1"], grid, reps=100, seed=1, progress=False)
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc:
        dsk = coverage(["CR1"], grid, reps=100, seed=1, client=lc.scheduler_address,
                       progress=False)
    assert dsk.backend == "dask"
    assert dsk.table.coverage.tolist() == local.table.coverage.tolist()


def test_a_dask_client_without_dask_installed_is_a_clear_error(monkeypatch):
    """Dask is an optional extra: without it, client= says how to install it."""
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)
    grid = {"n_clusters": [12], "cluster_size": [3], "icc": [0.2]}
    with pytest.raises(EvalmixError, match=r"pip install 'evalmix\[dask\]'"):
        coverage(["CR1"], grid, reps=20, seed=1, client="tcp://127.0.0.1:1", progress=False)


def test_seed_none_is_drawn_recorded_and_kept_on_resume(tmp_path):
    """coverage() defaults to seed=None as every random function does: a seed is drawn
    and recorded; a resumed run without a seed continues with its manifest's."""
    grid = {"n_clusters": [10, 20], "cluster_size": [5], "icc": [0.1]}
    first = coverage(["naive"], grid, reps=20, out=tmp_path, progress=False)
    assert isinstance(first.seed, int)
    again = coverage(["naive"], grid, reps=20, out=tmp_path, resume=True, progress=False)
    assert again.seed == first.seed and again.n_resumed == 2
