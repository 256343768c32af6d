"""The kernel's pair layout (issue 35): rows that hardly collapse, ``eta = A[p] + B[q]``.

Checked against the row loop (same log density and gradient to rounding) and, on a
small fixed-seed fit, against the row loop's posterior (means and SDs within Monte
Carlo error)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import evalmix
from evalmix.models.bayes import kernel
from evalmix.models.bayes.kernel import DensityKernel
from evalmix.models.bayes.pymc_model import choose_parameterization
from evalmix.models.spec import build_spec, collapse
from evalmix.models.spec._maximal import decorrelate
from evalmix.sim.designs import unique_rows


def _unique_rows_table(n: int, n_scenarios: int, seed: int):
    """The issue's design, scaled (6 personas): most rows are their own pattern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return unique_rows(n, n_scenarios, n_personas=6, seed=seed)


def _kernels(table):
    spec = decorrelate(build_spec(table), "test")
    data = collapse(spec)
    terms = choose_parameterization(spec, data)
    return (DensityKernel(spec, data, terms, layout="rows"),
            DensityKernel(spec, data, terms), data)


def test_pair_layout_equals_the_row_loop_and_is_chosen_when_rows_do_not_collapse():
    """Auto takes the pair layout (not the grid: too sparse) with the scenario's
    intercept and condition slope on the A side (60 scenarios x 2 conditions) and the
    rest on the B side; its density and gradient equal the row loop's on one-trial and
    several-trial rows and far out in warm-up (``max |A| + max |B| > 700``: per-row
    ``exp``)."""
    rows, pairs, data = _kernels(_unique_rows_table(6000, 60, seed=3))
    assert rows.pairs is None and rows.grid is None
    assert pairs.grid is None and pairs.pairs is not None
    pr = pairs.pairs
    assert pr.cg.shape == (120, 2)                      # 60 scenarios x 2 conditions
    assert pr.X.shape[0] == 6 * 3 * 3 * 2 * 2           # the other patterns
    assert 0 < pr.n_bin < data.n_patterns               # both row paths are used
    assert np.all(pr.trials[:pr.n_bin] == 1) and np.all(pr.trials[pr.n_bin:] > 1)
    rng = np.random.default_rng(5)
    i1, i2 = rows.slices[0][1:]
    for far in (False, True):
        x = rng.normal(0, 0.7, rows.ndim)
        if far:
            x[i1:i2] = np.linspace(-900.0, 900.0, i2 - i1)
        (l1, g1), (l2, g2) = rows.logp(x), pairs.logp(x)
        assert l2 == pytest.approx(l1, rel=1e-12)
        np.testing.assert_allclose(g2, g1, rtol=1e-9, atol=1e-9)


def test_pair_layout_is_not_used_where_rows_collapse_into_a_grid():
    """A fully crossed intercept-only design keeps the grid; a forced pair layout is
    still exact. (With the default condition slopes on the scenarios, the grid's rest
    patterns multiply by the scenarios, and the pair layout is taken.)"""
    from evalmix.sim import pairwise_judges

    t = pairwise_judges(30, 4, 3, 3, seed=5, tie_threshold=0).table()
    spec = build_spec(t, slopes=())
    data = collapse(spec)
    terms = choose_parameterization(spec, data)
    auto = DensityKernel(spec, data, terms)
    assert auto.grid is not None and auto.pairs is None
    slopes = decorrelate(build_spec(t), "test")
    sdata = collapse(slopes)
    maximal = DensityKernel(slopes, sdata, choose_parameterization(slopes, sdata))
    assert maximal.grid is None and maximal.pairs is not None
    rows = DensityKernel(spec, data, terms, layout="rows")
    forced = DensityKernel(spec, data, terms, layout="pairs")
    assert forced.pairs is not None and forced.grid is None
    x = np.random.default_rng(2).normal(0, 0.7, rows.ndim)
    (l1, g1), (l2, g2) = rows.logp(x), forced.logp(x)
    assert l2 == pytest.approx(l1, rel=1e-12)
    np.testing.assert_allclose(g2, g1, rtol=1e-9, atol=1e-9)


@pytest.mark.mcmc
def test_pair_layout_fit_has_the_row_loops_posterior(monkeypatch):
    """A small fixed-seed fit (3,000 nearly unique rows, 2 x 400 draws) on the pair
    layout against the same fit on the row loop: every fixed effect's and SD's posterior
    mean agrees within 4 Monte Carlo standard errors (posterior SD / sqrt(ESS), both
    fits' errors combined), and the posterior SDs within 15%."""
    table = _unique_rows_table(3000, 40, seed=11)
    kw = {"draws": 400, "tune": 300, "seed": 4, "progress": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fp = evalmix.fit(table, **kw)
        monkeypatch.setattr(kernel, "PAIRS_MAX_PATTERNS", 0.0)   # the row loop
        fr = evalmix.fit(table, **kw)
    da, db = fp.diagnostics.set_index("parameter"), fr.diagnostics.set_index("parameter")
    keep = [p for p in da.index if p.startswith("b[") or p.startswith("sd_")]
    assert len(keep) >= 5
    a, b = da.loc[keep], db.loc[keep]
    mcse = np.sqrt(a["sd"] ** 2 / a["ess_bulk"] + b["sd"] ** 2 / b["ess_bulk"])
    assert np.all(np.abs(a["mean"] - b["mean"]) <= 4 * mcse), (a["mean"] - b["mean"]) / mcse
    np.testing.assert_allclose(a["sd"], b["sd"], rtol=0.15)
