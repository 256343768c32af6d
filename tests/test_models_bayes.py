"""Bayesian back end against frozen lme4 references (tests/reference/models/).

References: ``fit_reference.R`` (lme4 1.1.31 / glmmTMB 1.1.5, R 4.2.2) fitted ``cbpp`` and
the seeded ``crossed_binary.csv``; the R script and sessionInfo sit beside the CSVs.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.errors import ConvergenceWarning, FewClustersWarning
from evalmix.models.kernel import DensityKernel
from evalmix.models.pymc_model import build_model, choose_parameterization
from evalmix.models.spec import build_spec, collapse
from evalmix.sim import pairwise_judges

pytestmark = pytest.mark.mcmc
REF = Path(__file__).resolve().parent / "reference" / "models"

#: A posterior median is not the Laplace mode; issue 4 asks for agreement within a
#: quarter of a posterior SD on fixed effects (reference README, "Tolerances").
MEDIAN_TOL_SD = 0.25
#: Interval level for the variance-component check (issue 4: 90% intervals contain
#: the glmer estimate).
VC_LEVEL = 0.90
#: Hand-written density vs PyMC's compiled density: same arithmetic, rounding only.
KERNEL_RTOL = 1e-9
SHORT = {"draws": 400, "tune": 300, "chains": 2, "progress": False}


def _ref(dataset: str, model_contains: str = "binomial, Laplace"):
    fx = pd.read_csv(REF / "reference_fixed.csv")
    vc = pd.read_csv(REF / "reference_varcomp.csv")
    sel = lambda d: d[(d.dataset == dataset) & (d.software == "lme4")  # noqa: E731
                      & d.model.str.contains(model_contains, regex=False)]
    return sel(fx).set_index("term"), sel(vc).set_index("group")


def _fit_quiet(table, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewClustersWarning)
        return evalmix.fit(table, **kw)


def _check_fixed(fit, ref, mapping):
    fx = fit.fixed_effects[fit.fixed_effects.label.str.startswith("fixed effect")]
    fx = fx.set_index("term")
    for mine, theirs in mapping.items():
        est, sd = fx.loc[mine, "estimate"], fx.loc[mine, "se"]
        gap = abs(est - ref.loc[theirs, "estimate"]) / sd
        assert gap <= MEDIAN_TOL_SD, (mine, est, ref.loc[theirs, "estimate"], sd, gap)


def _check_vc(fit, ref, groups):
    v = fit.variance.set_index("factor")
    for g in groups:
        assert v.loc[g, "lo"] <= ref.loc[g, "sd"] <= v.loc[g, "hi"], (g, v.loc[g].to_dict(),
                                                                      ref.loc[g, "sd"])


@pytest.fixture(scope="module")
def cbpp_table():
    d = pd.read_csv(REF / "cbpp.csv")
    rows = []
    for r in d.itertuples():  # binomial counts -> one 0/1 row per animal
        rows += [(str(r.herd), str(r.period), 1)] * r.incidence
        rows += [(str(r.herd), str(r.period), 0)] * (r.size - r.incidence)
    long = pd.DataFrame(rows, columns=["herd", "period", "sick"])
    long["animal"] = np.arange(len(long))  # rows are distinct animals, not duplicates
    return evalmix.read(long, outcome="sick", condition="period", clusters={"herd": "herd"})


@pytest.fixture(scope="module")
def crossed():
    d = pd.read_csv(REF / "crossed_binary.csv")
    return d


def test_cbpp_matches_glmer(cbpp_table):
    fit = _fit_quiet(cbpp_table, seed=11, level=VC_LEVEL, **SHORT)
    # 842 animal rows collapse to the 56 herd x period cells of the original data
    assert fit.provenance["collapsed_rows"] == 56
    fx, vc = _ref("cbpp")
    _check_fixed(fit, fx, {"Intercept": "(Intercept)", "condition[2]": "period2",
                           "condition[3]": "period3", "condition[4]": "period4"})
    _check_vc(fit, vc, ["herd"])
    assert fit.divergences == 0


def test_crossed_binary_matches_glmer(crossed):
    t = evalmix.read(crossed, outcome="outcome", model_a="model_a", model_b="model_b",
                     first_shown="first_shown",
                     clusters={c: c for c in ("scenario", "persona", "author", "judge")})
    fit = _fit_quiet(t, seed=5, judge_position=False, level=VC_LEVEL, **SHORT)
    assert fit.formula == ("y ~ 1 + condition + position + (1|scenario) + (1|persona) + "
                           "(1|author) + (1|judge)")
    fx, vc = _ref("crossed_binary")
    _check_fixed(fit, fx, {"Intercept": "(Intercept)",
                           "condition[treatment]": "conditiontreatment",
                           "position": "position"})
    _check_vc(fit, vc, ["scenario", "persona", "author", "judge"])
    # residual row and shares: pi^2/3 on the logit scale, shares sum to 1
    v = fit.variance.set_index("factor")
    assert v.loc["Residual", "variance"] == pytest.approx(np.pi ** 2 / 3)
    assert fit.idata.posterior.attrs["formula"] == fit.formula
    assert fit.provenance["seed"] == 5


def test_linear_probability_matches_lmer(crossed):
    """Gaussian family (numeric scores) against lmer REML on the same 0/1 outcome."""
    t = evalmix.read(crossed, outcome="b_wins", condition="condition", position="position",
                     clusters={c: c for c in ("scenario", "persona", "author", "judge")},
                     outcome_type="numeric")
    fit = _fit_quiet(t, seed=3, level=VC_LEVEL, **SHORT)
    assert fit.family == "gaussian"
    fx, vc = _ref("crossed_binary", "linear probability")
    _check_fixed(fit, fx, {"Intercept": "(Intercept)",
                           "condition[treatment]": "conditiontreatment",
                           "position": "position"})
    _check_vc(fit, vc, ["scenario", "persona", "Residual"])


@pytest.mark.parametrize("layout", ["rows", "grid"])
def test_kernel_density_equals_pymc(layout):
    """The hand-written Numba density and gradient equal PyMC's, for every
    parameterisation and both data layouts (identity: same model, two
    implementations)."""
    import dataclasses

    t = pairwise_judges(8, 3, 3, 3, seed=2, tie_threshold=0.2).table(ties="half")
    spec = build_spec(t, slopes=("judge",))
    data = collapse(spec)
    base = choose_parameterization(spec, data)
    variants = [base, [dataclasses.replace(x, centred=False) for x in base],
                [dataclasses.replace(x, zero_sum=False, centred=i % 2 == 0)
                 for i, x in enumerate(base)]]
    rng = np.random.default_rng(0)
    for terms in variants:
        model, _ = build_model(spec, data, terms=terms, prior_scale=1.7)
        kern = DensityKernel(spec, data, terms, prior_scale=1.7, layout=layout)
        assert (kern.grid is not None) == (layout == "grid")
        # FAST_COMPILE: no C compilation for these tiny graphs (keeps the test quick)
        logp = model.compile_logp(mode="FAST_COMPILE")
        dlogp = model.compile_dlogp(mode="FAST_COMPILE")
        offsets = []
        for _ in range(2):
            x = rng.normal(0, 0.5, kern.ndim)
            point, order = {"b": x[:kern.k]}, ["b"]
            for tt, (i0, i1, i2) in zip(terms, kern.slices, strict=True):
                dev = ("z_" + tt.var[2:] if not tt.centred else tt.var) + (
                    "_zerosum__" if tt.zero_sum else "")
                point[tt.sd_var + "_log__"] = x[i0]
                point[dev] = x[i1:i2]
                order += [tt.sd_var + "_log__", dev]
            mine, grad = kern.logp(x)
            g = dlogp(point)
            sizes = {v.name: np.size(point[v.name]) for v in model.value_vars}
            starts = np.cumsum([0] + [sizes[v.name] for v in model.value_vars])
            at = {v.name: (s, s + sizes[v.name]) for v, s in zip(model.value_vars, starts[:-1], strict=True)}
            g_mine_order = np.concatenate([g[at[n][0]:at[n][1]] for n in order])
            np.testing.assert_allclose(grad, g_mine_order, rtol=KERNEL_RTOL, atol=1e-9)
            offsets.append(logp(point) - mine)
        # the densities differ only by a constant (normalising terms)
        assert offsets[0] == pytest.approx(offsets[1], abs=1e-8)


def test_grid_layout_equals_row_loop_and_is_chosen_only_when_dense():
    """The dense (item x rest-pattern) layout gives the row loop's log density and
    gradient (to summation order), with empty cells, fractional successes (ties
    "half") and a random slope; "auto" takes it for a full crossing only."""
    sim = pairwise_judges(30, 4, 3, 3, seed=5, tie_threshold=0.3)
    full = sim.table(ties="half")
    spec = build_spec(full, slopes=("judge",))
    data = collapse(spec)
    terms = choose_parameterization(spec, data)
    auto = DensityKernel(spec, data, terms)
    assert auto.grid is not None and auto.grid.n_levels == 30
    assert auto.grid.succ.shape == (30, data.n_patterns // 30)
    # keep 40% of the (scenario, persona, author) cells: too sparse for "auto", still
    # exact when forced
    d = sim.data
    cell = d["scenario"] + d["persona"] + d["author"]
    labels = cell.unique()
    kept = set(labels[np.random.default_rng(1).random(len(labels)) < 0.4])
    sparse = evalmix.read(d[cell.isin(kept)], **{**sim.read_kwargs, "ties": "half"})
    spec2 = build_spec(sparse, slopes=("judge",))
    data2 = collapse(spec2)
    terms2 = choose_parameterization(spec2, data2)
    assert DensityKernel(spec2, data2, terms2).grid is None
    rng = np.random.default_rng(7)
    for sp, da, te in [(spec, data, terms), (spec2, data2, terms2)]:
        rows = DensityKernel(sp, da, te, layout="rows")
        grid = DensityKernel(sp, da, te, layout="grid")
        assert rows.grid is None and grid.grid is not None
        for _ in range(3):
            x = rng.normal(0, 0.7, rows.ndim)
            (l1, g1), (l2, g2) = rows.logp(x), grid.logp(x)
            assert l2 == pytest.approx(l1, rel=1e-12)
            np.testing.assert_allclose(g2, g1, rtol=1e-9, atol=1e-9)


def test_convergence_warning_on_too_short_chains(tmp_path):
    t = pairwise_judges(6, 3, 3, 3, seed=4, tie_threshold=0).table()
    with pytest.warns(ConvergenceWarning, match="bulk ESS < 400"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            fit = evalmix.fit(t, seed=1, draws=60, tune=60, chains=2, progress=False)
    assert any("ESS" in w for w in fit.warnings)
    assert set(fit.diagnostics.columns) >= {"parameter", "r_hat", "ess_bulk", "ess_tail"}
    # the posterior saves and reloads with its provenance (attrs must be plain scalars)
    import arviz as az

    path = tmp_path / "fit.nc"
    fit.idata.to_netcdf(path)
    back = az.from_netcdf(path)
    assert back.posterior.attrs["formula"] == fit.formula
    assert back.posterior.attrs["seed"] == 1
