"""Bayesian back end against frozen lme4 references (tests/reference/models/).

References: ``fit_reference.R`` (lme4 1.1.31 / glmmTMB 1.1.5, R 4.2.2) fitted ``cbpp`` and
the seeded ``crossed_binary.csv``; the R script and sessionInfo sit beside the CSVs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.errors import ConvergenceWarning, FewClustersWarning
from evalmix.models.bayes.kernel import DensityKernel
from evalmix.models.bayes.pymc_model import build_model, choose_parameterization
from evalmix.models.spec import build_spec, collapse
from evalmix.sim import pairwise_judges
from evalmix.sim.designs import Factor, crossed_scores

pytestmark = pytest.mark.mcmc
REF = REFERENCE / "models"

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
        assert v.loc[g, "sd_lo"] <= ref.loc[g, "sd"] <= v.loc[g, "sd_hi"], (g, v.loc[g].to_dict(),
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
    fit = _fit_quiet(cbpp_table, seed=11, level=VC_LEVEL, slopes=(), **SHORT)  # glmer's
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
    fit = _fit_quiet(t, seed=5, judge_position=False, level=VC_LEVEL, slopes=(), **SHORT)
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
    fit = _fit_quiet(t, seed=3, level=VC_LEVEL, slopes=(), **SHORT)
    assert fit.family == "gaussian"
    fx, vc = _ref("crossed_binary", "linear probability")
    _check_fixed(fit, fx, {"Intercept": "(Intercept)",
                           "condition[treatment]": "conditiontreatment",
                           "position": "position"})
    _check_vc(fit, vc, ["scenario", "persona", "Residual"])


def _assert_kernel_equals_pymc(model, kern, terms, rng, *, cutpoints=False, T=None):
    """At two random points: the kernel's gradient equals PyMC's (in PyMC's value-variable
    order) and the two log densities differ by the same constant (normalising terms).
    With ``T``, the kernel's coordinates ``x`` are PyMC's ``T x`` (a linear map with unit
    Jacobian): the kernel's gradient is ``T'`` PyMC's. Returns the points."""
    # FAST_COMPILE: no C compilation for these tiny graphs (keeps the test quick); the
    # terms summed outside PyTensor (its Python Add takes at most 32 inputs: 11 terms)
    terms_logp = model.compile_logp(mode="FAST_COMPILE", sum=False)
    logp = lambda point: float(sum(np.sum(a) for a in terms_logp(point)))  # noqa: E731
    dlogp = model.compile_dlogp(mode="FAST_COMPILE")
    offsets, points = [], []
    for _ in range(2):
        x_kern = rng.normal(0, 0.5, kern.ndim)
        x = x_kern if T is None else T @ x_kern
        point, order = {"b_centred": x[:kern.k]}, ["b_centred"]
        for tt, (i0, i1, i2) in zip(terms, kern.slices, strict=True):
            dev = ("z_" + tt.var[2:] if not tt.centred else tt.var) + (
                "_zerosum__" if tt.zero_sum else "")
            point[tt.sd_var + "_log__"] = x[i0]
            point[dev] = x[i1:i2]
            order += [tt.sd_var + "_log__", dev]
        if cutpoints:
            point["cutpoints_ordered__"] = x[kern.cut_at:]
            order.append("cutpoints_ordered__")
        if kern.sigma_at is not None:
            point["sigma_log__"] = x[kern.sigma_at]
            order.append("sigma_log__")
        mine, grad = kern.logp(x_kern)
        g = dlogp(point)
        sizes = {v.name: np.size(point[v.name]) for v in model.value_vars}
        starts = np.cumsum([0] + [sizes[v.name] for v in model.value_vars])
        at = {v.name: (a, a + sizes[v.name])
              for v, a in zip(model.value_vars, starts[:-1], strict=True)}
        g = np.concatenate([g[at[n][0]:at[n][1]] for n in order])
        np.testing.assert_allclose(grad, g if T is None else T.T @ g,
                                   rtol=KERNEL_RTOL, atol=1e-9)
        offsets.append(logp(point) - mine)
        points.append(x_kern)
    assert offsets[0] == pytest.approx(offsets[1], abs=1e-8)
    return points


@pytest.mark.parametrize("layout", ["rows", "grid"])
def test_kernel_density_equals_pymc(layout):
    """The hand-written Numba density and gradient equal PyMC's, for every
    parameterisation and both data layouts (identity: same model, two
    implementations)."""
    import dataclasses

    t = pairwise_judges(8, 3, 3, 3, seed=2, tie_threshold=0.2).table(ties="half")
    spec = build_spec(t, slopes=("judge",))
    data = collapse(spec)
    # PyMC samples (u, sd) jointly: compare the joint form (marginal=False); both SD
    # priors (Rayleigh for the 3-level factors, half-normal otherwise) are covered
    base = [dataclasses.replace(x, marginal=False)
            for x in choose_parameterization(spec, data)]
    assert {x.sd_prior for x in base} == {"rayleigh"}
    variants = [base, [dataclasses.replace(x, centred=False) for x in base],
                [dataclasses.replace(x, zero_sum=False, centred=i % 2 == 0,
                                     sd_prior=("rayleigh", "halfnormal")[i % 2])
                 for i, x in enumerate(base)]]
    rng = np.random.default_rng(0)
    for terms in variants:
        model, _ = build_model(spec, data, terms=terms, prior_scale=1.7)
        kern = DensityKernel(spec, data, terms, prior_scale=1.7, layout=layout,
                             centre_slopes=False, centre_nested=False)
        assert (kern.grid is not None) == (layout == "grid")
        _assert_kernel_equals_pymc(model, kern, terms, rng)


@pytest.mark.parametrize("outcome", ["binary", "numeric"])
def test_kernel_with_many_conditions_equals_pymc(outcome):
    """Rows of 12 treatment-coded conditions hold 2 non-zero fixed columns of 12 (+
    position): the row layout keeps them as non-zeros of the raw columns and applies the
    centring shift to the coefficients and the gradient (same density as PyMC's, which
    multiplies the dense centred columns), for the logit and the Gaussian families."""
    import dataclasses

    rng = np.random.default_rng(5)
    items, conds = 24, 12
    df = pd.DataFrame({"item": np.repeat([f"q{i}" for i in range(items)], conds),
                       "model": np.tile([f"m{j:02d}" for j in range(conds)], items)})
    df["judge"] = rng.choice(["ja", "jb", "jc"], len(df))
    eta = rng.normal(0, 0.5, items)[np.repeat(np.arange(items), conds)] + np.tile(
        np.linspace(-1, 1, conds), items)
    df["score"] = (rng.random(len(df)) < 1 / (1 + np.exp(-eta))).astype(float) \
        if outcome == "binary" else eta + rng.normal(0, 1, len(df))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.read(df, outcome="score", condition="model",
                         clusters={"item": "item", "judge": "judge"})
    spec = build_spec(t)
    data = collapse(spec)
    terms = [dataclasses.replace(x, marginal=False) for x in choose_parameterization(spec, data)]
    model, _ = build_model(spec, data, terms=terms)
    kern = DensityKernel(spec, data, terms, layout="rows", centre_slopes=False,
                         centre_nested=False)
    assert kern.k >= conds and kern._arrays["Xj"].shape[1] <= 3 and kern.shift.any()
    _assert_kernel_equals_pymc(model, kern, terms, np.random.default_rng(1))


@pytest.mark.parametrize(("outcome", "layout"), [("binary", "rows"), ("binary", "grid"),
                                                 ("numeric", "rows"), ("ordinal", "rows")])
def test_kernel_with_coupled_slopes_on_many_conditions_equals_pymc(outcome, layout):
    """Judge slopes on 10 treatment-coded conditions, coupled to the judge intercept
    (sampled as u' = u + sum xbar v, slopes on centred covariates x - xbar): the row
    layout keeps each row's one raw non-zero condition and takes sum xbar v off the
    intercept's levels (and -xbar R_j off the slopes' gradient). The kernel at x equals
    PyMC's density, which multiplies the dense covariates, at the plain coordinates T x,
    and its gradient is T' PyMC's, on the row and grid layouts, logit, Gaussian and
    cumulative logit (1-5 scores)."""
    import dataclasses

    rng = np.random.default_rng(8)
    items, conds = 16, 10
    df = pd.DataFrame({"item": np.repeat([f"q{i}" for i in range(items)], 3 * conds),
                       "model": np.tile(np.repeat([f"m{j}" for j in range(conds)], 3),
                                        items),
                       "judge": np.tile(["ja", "jb", "jc"], items * conds)})
    eta = rng.normal(0, 0.5, items)[np.repeat(np.arange(items), 3 * conds)] + np.tile(
        np.repeat(np.linspace(-1, 1, conds), 3), items)
    df["score"] = {"binary": (rng.random(len(df)) < 1 / (1 + np.exp(-eta))).astype(float),
                   "numeric": eta + rng.normal(0, 1, len(df)),
                   "ordinal": 1 + ((eta + rng.logistic(size=len(df)))[:, None]
                                   > np.linspace(-1.5, 1.5, 4)).sum(axis=1)}[outcome]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.read(df, outcome="score", condition="model",
                         clusters={"item": "item", "judge": "judge"})
    spec = build_spec(t, slopes=("judge",), **(
        {"family": "ordinal"} if outcome == "ordinal" else {}))
    data = collapse(spec)
    terms = [dataclasses.replace(x, marginal=False, centred=True)
             for x in choose_parameterization(spec, data)]
    model, _ = build_model(spec, data, terms=terms)
    kern = DensityKernel(spec, data, terms, layout=layout, centre_nested=False)
    (i, lst), = kern.couple.items()
    assert terms[i].factor == "judge" and len(lst) == conds - 1
    assert all(abs(xbar) > 0.05 for _, xbar in lst)
    assert (kern.grid is not None) == (layout == "grid")
    # one trial per row (per cut-point cell): the product-of-factors paths
    assert bool(kern._arrays["meta"][15]) == (outcome != "numeric")
    # item and judge intercepts in every row, then one non-zero condition slope
    assert kern._arrays["xs"].shape[1] == 3 < len(terms)
    T = np.eye(kern.ndim)
    _, a1, a2 = kern.slices[i]
    for j, xbar in lst:
        _, c1, c2 = kern.slices[j]
        T[a1:a2, c1:c2] -= xbar * np.eye(a2 - a1)
    _assert_kernel_equals_pymc(model, kern, terms, np.random.default_rng(2), T=T,
                               cutpoints=outcome == "ordinal")


@pytest.mark.parametrize("source", ["ties_separate", "ordinal_scores"])
def test_cumulative_kernel_density_equals_pymc(source):
    """The cumulative-logit (ordered cut points) density and gradient of the Numba
    kernel equal PyMC's, on a pairwise table with ties="separate" and on 1-6 scores,
    for the centred, non-centred and plain parameterisations."""
    import dataclasses

    if source == "ties_separate":
        t = pairwise_judges(8, 3, 3, 3, seed=2, tie_threshold=0.3).table(ties="separate")
        spec = build_spec(t)
    else:
        t = evalmix.read(REF / "ordinal_scores.csv", outcome="score", condition="model",
                         clusters={"item": "item", "judge": "judge"})
        spec = build_spec(t, family="ordinal")
    assert spec.family == "cumulative" and "Intercept" not in spec.fixed_names
    data = collapse(spec)
    base = [dataclasses.replace(x, marginal=False)
            for x in choose_parameterization(spec, data)]
    variants = [base, [dataclasses.replace(x, centred=False) for x in base],
                [dataclasses.replace(x, zero_sum=False, sd_prior="halfnormal")
                 for x in base]]
    rng = np.random.default_rng(1)
    for terms in variants:
        model, _ = build_model(spec, data, terms=terms, prior_scale=1.3)
        kern = DensityKernel(spec, data, terms, prior_scale=1.3, centre_slopes=False,
                             centre_nested=False)
        for x in _assert_kernel_equals_pymc(model, kern, terms, rng, cutpoints=True):
            # the stored cut points are PyMC's ordered transform of the same coordinates
            e = kern.expand(x)["cutpoints"]
            y = x[kern.cut_at:]
            np.testing.assert_allclose(e, np.cumsum(np.r_[y[0], np.exp(y[1:])]),
                                       rtol=1e-14)


def test_vectorised_exp_and_log1p_match_numpy():
    """The kernel's branch-free exp / log1p / reciprocal (vectorised by LLVM) against
    NumPy over the whole range a binomial row can reach."""
    from evalmix.models.bayes import _loops

    a = np.concatenate([np.linspace(0, 40, 20001), [1e-300, 300.0, 707.0, 708.0, 1e4]])
    out, bits = np.empty_like(a), np.empty(a.shape[0], dtype=np.int64)
    _loops._vexp_neg(a, out, bits)
    np.testing.assert_allclose(out, np.exp(-np.minimum(a, 708.0)), rtol=4e-16, atol=0)
    eta = np.linspace(-30, 30, 6001)
    succ, trials, g = np.full(eta.shape, 0.3), np.ones_like(eta), np.empty_like(eta)
    ex = np.exp(-np.abs(eta))
    total = _loops._binom_terms(eta, ex, succ, trials, g)
    assert total == pytest.approx(np.sum(succ * eta - np.logaddexp(0, eta)), rel=1e-14)
    np.testing.assert_allclose(g, succ - 1 / (1 + np.exp(-eta)), rtol=0, atol=4e-16)


def test_vectorised_diagnostics_equal_arviz():
    """R-hat (rank, bulk/folded), bulk and tail ESS for many parameters at once equal
    ArviZ's one-parameter functions (AR(1) chains, a shifted chain, tied values)."""
    import arviz as az

    from evalmix.models.bayes._mcmc_diagnostics import rhat_ess

    rng = np.random.default_rng(1)
    a = np.empty((30, 2, 301))
    for p in range(30):
        phi = rng.uniform(-0.3, 0.95)
        x = rng.normal(size=(2, 301))
        for i in range(1, 301):
            x[:, i] = phi * x[:, i - 1] + x[:, i]
        a[p] = x + (p % 3 == 0) * np.array([[0.0], [0.5]])
    a[5] = np.round(a[5])
    r, eb, et = rhat_ess(a)
    np.testing.assert_allclose(r, [az.rhat(x) for x in a], rtol=1e-12)
    np.testing.assert_allclose(eb, [az.ess(x, method="bulk") for x in a], rtol=1e-10)
    np.testing.assert_allclose(et, [az.ess(x, method="tail") for x in a], rtol=1e-10)
    # the early exit of a failing check: same R-hat, ESS skipped only above the bound
    r2, eb2, et2 = rhat_ess(a, rhat_max=float(r.max()) - 1e-9)
    np.testing.assert_array_equal(r2, r)
    assert np.isnan(eb2).all() and np.isnan(et2).all()
    _, eb3, et3 = rhat_ess(a, rhat_max=float(r.max()))
    np.testing.assert_array_equal(eb3, eb)
    np.testing.assert_array_equal(et3, et)


def test_average_ranks_equal_scipy_with_ties_and_nan():
    """The diagnostics' ranks (one sort; tie runs resolved only in rows that have them)
    equal scipy's ``rankdata(method="average")``: continuous rows, rows with repeated
    draws (runs of 2 and 50, at the ends too), all equal, and a NaN (propagated)."""
    from scipy import stats

    from evalmix.models.bayes._mcmc_diagnostics import average_ranks

    rng = np.random.default_rng(4)
    x = rng.normal(size=(12, 400))
    x[1, 100:150] = x[1, 7]
    x[2, 5] = x[2, 6]
    x[3, :] = 1.5
    x[4] = np.round(x[4])
    x[5, np.argsort(x[5])[:3]] = x[5].min()     # a tie at the lowest rank
    x[6, 11] = np.nan
    np.testing.assert_array_equal(average_ranks(x),
                                  stats.rankdata(x, axis=1, method="average"))


def test_inference_data_equals_arviz_from_dict():
    """The sampled trace's InferenceData, built directly from the arrays, is
    ``arviz.from_dict``'s: same groups, dimensions (named and default), coordinates,
    dtypes and attributes (but the creation time), the raw trace's chain and draw
    statistics dropped as there."""
    import arviz as az
    import xarray as xr

    from evalmix.models.result import PosteriorDraws

    rng = np.random.default_rng(0)
    post = {"b": rng.normal(size=(2, 70, 3)), "sd_x": rng.random((2, 70)),
            "u_x": rng.normal(size=(2, 70, 46)), "cutpoints": rng.normal(size=(2, 70, 5))}
    stats = {"diverging": np.zeros((2, 70), bool), "n_steps": np.ones((2, 70), np.uint64),
             "step_size": rng.random((2, 70)),   # nutpie's raw trace has these two:
             "chain": np.repeat([[0], [1]], 70, axis=1).astype(np.uint64),
             "draw": np.tile(np.arange(70, dtype=np.uint64), (2, 1))}
    coords = {"fixed": ["Intercept", "a", "b"], "u_x_level": [f"l{i}" for i in range(46)]}
    dims = {"b": ("fixed",), "u_x": ("u_x_level",)}
    ref = az.from_dict(posterior=post, sample_stats=stats, coords=coords,
                       dims={k: list(v) for k, v in dims.items()})
    mine = PosteriorDraws(post, stats, coords=coords, dims=dims).to_inference_data()
    assert isinstance(mine, az.InferenceData) and mine.groups() == ref.groups()
    for g in ("posterior", "sample_stats"):
        a, b = ref[g].copy(), mine[g].copy()
        assert a.attrs.pop("created_at") and b.attrs.pop("created_at")
        xr.testing.assert_identical(a, b)


@pytest.mark.parametrize("settings", [{}, {"low_rank": True, "target_accept": 0.9}])
def test_nutpie_driver_draws_equal_nutpie_sample(settings):
    """evalmix drives nutpie's compiled core itself (``_nutpie.start``, no ArviZ import);
    for the same model, seed and settings its draws and statistics are bit for bit those
    of ``nutpie.sample`` on nutpie's own ``CompiledPyMCModel`` of the same callbacks."""
    import nutpie
    from nutpie.compile_pymc import CompiledPyMCModel

    from evalmix.models.bayes import _fixed_draws
    from evalmix.models.bayes._loops import expand_cfunc, logp_cfunc
    from evalmix.models.bayes._nutpie import start

    spec = build_spec(pairwise_judges(12, 4, 3, 3, seed=2).table())
    data = collapse(spec)
    kern = DensityKernel(spec, data, choose_parameterization(spec, data))
    names, shapes = kern._expanded()
    _, coords, dims = kern.nutpie_model()
    sizes = np.cumsum([int(np.prod(x)) for x in shapes])
    theirs = CompiledPyMCModel(
        _n_dim=kern.ndim, dims=dims, _coords=coords, _shapes=dict(zip(names, shapes, strict=True)),
        compiled_logp_func=logp_cfunc, compiled_expand_func=expand_cfunc,
        initial_point_func=lambda seed: kern.initial_point(int(seed)),
        shared_data=dict(kern._arrays), user_data=kern.header, n_expanded=kern.n_expanded,
        shape_info=(names, [slice(int(e - int(np.prod(x))), int(e))
                            for e, x in zip(sizes, shapes, strict=True)], shapes),
        logp_func=kern.logp, expand_func=kern.expand)
    low_rank = settings.pop("low_rank", False)
    ref = nutpie.sample(theirs, draws=150, tune=150, chains=2, cores=2, seed=11,
                        progress_bar=False, save_warmup=False,
                        low_rank_modified_mass_matrix=low_rank, **settings)
    post, stats = _fixed_draws(start(kern.nutpie_model()[0], draws=150, tune=150, chains=2,
                                     seed=11, progress=False, low_rank=low_rank,
                                     **settings), 150)
    for name in names:
        np.testing.assert_array_equal(post[name], ref.posterior[name].to_numpy())
    for name in ("n_steps", "step_size", "diverging", "energy"):
        np.testing.assert_array_equal(stats[name], ref.sample_stats[name].to_numpy())


def test_nutpie_driver_in_a_notebook_starts_through_nutpies_wrapper(monkeypatch):
    """With a progress bar in a notebook the chains are started by nutpie's own
    ``_BackgroundSampler`` (its HTML progress); the draws are the same."""
    from evalmix.models.bayes import _fixed_draws, _nutpie

    spec = build_spec(pairwise_judges(8, 3, 3, 3, seed=4).table())
    data = collapse(spec)
    kern = DensityKernel(spec, data, choose_parameterization(spec, data))
    runs = []
    for notebook in (False, True):
        monkeypatch.setattr(_nutpie, "in_notebook", lambda nb=notebook: nb)
        run = _nutpie.start(kern.nutpie_model()[0], draws=60, tune=60, chains=2, seed=5,
                            progress=True)
        assert (run.owner is not None) == notebook
        runs.append(_fixed_draws(run, 60)[0])
    for name, a in runs[0].items():
        np.testing.assert_array_equal(a, runs[1][name])


@pytest.mark.parametrize("sampler", ["nutpie", "pymc"])
def test_pymc_engine_fits_the_kernels_posterior(sampler):
    """The PyMC model, sampled by nutpie (through the same driver) or by PyMC's NUTS
    (its InferenceData kept as ``idata``), gives the kernel's posterior means of the
    fixed effects within Monte Carlo error, with the same provenance in ``idata``."""
    table = pairwise_judges(8, 3, 3, 3, seed=1).table()
    kw = {"draws": 300, "tune": 300, "progress": False, "seed": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = evalmix.fit(table, **kw)
        fit = evalmix.fit(table, engine="pymc", sampler=sampler, **kw)
    assert (fit.provenance["engine"], fit.provenance["sampler"]) == ("pymc", sampler)
    assert fit.idata.posterior["b"].shape == (2, 300, 3) == ref.idata.posterior["b"].shape
    assert fit.idata.posterior.attrs["formula"] == fit.formula == ref.formula
    a, b = (f.draws.posterior["b"].reshape(-1, 3) for f in (fit, ref))
    se = np.sqrt(a.var(axis=0) / 150 + b.var(axis=0) / 150)   # ESS >= 150 of 600 draws
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 4 * se), (a.mean(0), b.mean(0))


def test_nutpie_run_stops_its_chains_on_ctrl_c_and_on_errors():
    """After Ctrl-C a run returns the trace so far (as ``nutpie.sample`` does); after
    any other error it stops the chains and raises it. Both stop the sampler."""
    from evalmix.models.bayes._nutpie import Run

    class Sampler:
        def __init__(self, error):
            self.error, self.calls = error, []

        def wait(self, timeout):
            self.calls.append("wait")
            raise self.error

        def abort(self):
            self.calls.append("abort")

        def take_results(self):
            self.calls.append("take")
            return "trace so far"

    ctrl_c = Sampler(KeyboardInterrupt())
    assert Run(ctrl_c).results() == "trace so far"
    assert ctrl_c.calls == ["wait", "abort", "take"]
    failed = Sampler(RuntimeError("logp failed"))
    with pytest.raises(RuntimeError, match="logp failed"):
        Run(failed).results()
    assert failed.calls == ["wait", "abort"]


def test_a_fit_imports_neither_arviz_nor_nutpies_python_layer():
    """A default Bayesian fit leaves ArviZ unimported (~2.7 s) until ``fit.idata`` is
    read; nutpie imported afterwards finds its compiled core already loaded."""
    import subprocess
    import sys

    code = """
import sys, warnings
warnings.simplefilter("ignore")
import evalmix
from evalmix.sim import pairwise_judges
f = evalmix.fit(pairwise_judges(10, 4, 3, 3, seed=1).table(), progress=False, draws=100,
                tune=100)
assert "arviz" not in sys.modules and "nutpie.sample" not in sys.modules, "imported"
assert f.idata.posterior["b"].shape[:2] == (2, 100) and "arviz" in sys.modules
assert f.idata is f.idata and f.idata.posterior.attrs["formula"] == f.formula
from evalmix._version import package_versions
assert "nutpie" in package_versions("nutpie", loaded_only=True)   # its core is loaded
import nutpie
assert nutpie._lib is sys.modules["nutpie._lib"]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


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


def test_grid_takes_the_factors_nested_above_its_row_term():
    """MT-Bench (80 items nested in 8 categories), 6 models: the category joins each
    item's level in the grid (``a[s] + u_category[parent(s)]``), so the rest patterns
    are condition x judge x position (36, not x 8), the grid is nearly full and "auto"
    takes it; its density and gradient equal the row loop's, with judge slopes and
    without, and the category's gradient is not zero; and on PandaLM's hierarchically
    centred items."""
    import evalmix.datasets

    d = evalmix.datasets.load("mtbench_position_bias")
    keep = sorted(d["model_b"].unique())[:6]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.read(d[d["model_b"].isin(keep)], outcome="outcome", model_a="model_a",
                         model_b="model_b", first_shown="first_shown",
                         clusters={"item": "item_id", "category": "item_group",
                                   "judge": "judge"})
    rng = np.random.default_rng(11)
    for slopes in ((), ("judge",)):
        spec = build_spec(t, slopes=slopes)
        data = collapse(spec)
        terms = choose_parameterization(spec, data)
        auto = DensityKernel(spec, data, terms)
        assert auto.grid is not None and auto.grid.n_levels == 80
        assert auto.grid.up.shape == (80, 1) and auto.grid.succ.shape[1] == 36
        rows = DensityKernel(spec, data, terms, layout="rows")
        cat = [i for i, tm in enumerate(terms) if tm.factor == "category"][0]
        i1, i2 = rows.slices[cat][1:]
        for _ in range(3):
            x = rng.normal(0, 0.7, rows.ndim)
            (l1, g1), (l2, g2) = rows.logp(x), auto.logp(x)
            assert l2 == pytest.approx(l1, rel=1e-12)
            np.testing.assert_allclose(g2, g1, rtol=1e-9, atol=1e-9)
            assert np.abs(g2[i1:i2]).max() > 1e-3
    # PandaLM: 170 items in 50 apps, hierarchically centred (the app enters eta through
    # the items' totals only), so the app joins the grid's rows at zero
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = evalmix.datasets.load_table("pandalm")
    spec = build_spec(p, slopes=())  # the intercept model whose items are centred
    data = collapse(spec)
    terms = choose_parameterization(spec, data)
    auto = DensityKernel(spec, data, terms)
    assert auto.nest and auto.grid is not None and auto.grid.up.shape == (170, 1)
    rows = DensityKernel(spec, data, terms, layout="rows")
    x = rng.normal(0, 0.7, rows.ndim)
    (l1, g1), (l2, g2) = rows.logp(x), auto.logp(x)
    assert l2 == pytest.approx(l1, rel=1e-12)
    np.testing.assert_allclose(g2, g1, rtol=1e-9, atol=1e-9)


def test_grid_row_paths_equal_the_row_loop():
    """The grid's three row paths give the row loop's log density and gradient: 0/1
    trials (factored exp, one log per product of up to 512 cells), any trial counts
    (repeated runs: 2 per cell) and rows with an extreme ``|eta|`` (polynomial exp)."""
    sim = pairwise_judges(30, 4, 3, 3, seed=5, tie_threshold=0.3)
    twice = pd.concat([sim.data.assign(epoch=1), sim.data.assign(epoch=2)])
    tables = [sim.table(ties="half"),
              evalmix.read(twice, **{**sim.read_kwargs, "ties": "half"}, replicate="epoch")]
    rng = np.random.default_rng(3)
    for t, binary in zip(tables, [True, False], strict=True):
        spec = build_spec(t, slopes=("judge",))
        data = collapse(spec)
        terms = choose_parameterization(spec, data)
        rows = DensityKernel(spec, data, terms, layout="rows")
        grid = DensityKernel(spec, data, terms, layout="grid")
        assert grid.grid.binary == binary and grid.grid.term == 0
        # and the row loop's one-trial path (binomial_rows, binary) or its log1p path
        assert bool(rows._arrays["meta"][15]) == binary
        x = rng.normal(0, 0.7, rows.ndim)
        far = x.copy()   # scenario effects far out: |a| + max |B| > 700 in some rows
        i1, i2 = rows.slices[0][1:]
        far[i1:i2] = np.linspace(-900.0, 900.0, i2 - i1)
        for point in (x, far):
            (l1, g1), (l2, g2) = rows.logp(point), grid.logp(point)
            assert l2 == pytest.approx(l1, rel=1e-12)
            np.testing.assert_allclose(g2, g1, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("marginal", [True, False])
def test_slope_centring_is_the_same_density_in_other_coordinates(marginal, monkeypatch):
    """Coupled intercept u' = u + sum xbar v (slopes on centred covariates) is a linear
    map with unit Jacobian: log p_coupled(x) = log p_plain(T x) and
    grad_coupled = T' grad_plain; expand reports the original u."""
    import dataclasses

    from evalmix.models.bayes import kernel

    t = pairwise_judges(8, 3, 3, 3, seed=2, tie_threshold=0).table()
    spec = build_spec(t, slopes=("judge",))
    data = collapse(spec)
    terms = [dataclasses.replace(x, marginal=marginal, centred=True)
             for x in choose_parameterization(spec, data)]
    # 2 balanced conditions inflate the judge intercept's variance 2x: below the rule's
    # threshold, not coupled by default (tests/datasets/test_shared_data.py: MT-Bench is)
    assert DensityKernel(spec, data, terms).couple == {}
    monkeypatch.setattr(kernel, "SLOPE_CENTRING_MIN_INFLATION", 1.9)
    kc = DensityKernel(spec, data, terms)
    monkeypatch.setattr(kernel, "SLOPE_CENTRING_MIN_INFLATION", 2.1)
    assert DensityKernel(spec, data, terms).couple == {}
    kp = DensityKernel(spec, data, terms, centre_slopes=False)
    assert len(kc.couple) == 1
    (i, lst), = kc.couple.items()
    assert terms[i].factor == "judge" and terms[i].term == "1"
    assert [terms[j].term for j, _ in lst] == ["condition[treatment]"]
    T = np.eye(kc.ndim)
    _, a1, a2 = kc.slices[i]
    for j, xbar in lst:
        _, c1, c2 = kc.slices[j]
        T[a1:a2, c1:c2] -= xbar * np.eye(a2 - a1)
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.normal(0, 0.5, kc.ndim)
        (l1, g1), (l2, g2) = kc.logp(x), kp.logp(T @ x)
        assert l1 == pytest.approx(l2, rel=1e-12)
        np.testing.assert_allclose(g1, T.T @ g2, rtol=1e-9, atol=1e-9)
        e1, e2 = kc.expand(x), kp.expand(T @ x)
        for name in e1:
            np.testing.assert_allclose(e1[name], e2[name], rtol=1e-12, atol=1e-12)


def _items_in_apps_table(seed: int = 3):
    """A small Bradley-Terry table: 24 items nested in 8 apps, 4 models, 3 judges."""
    rng = np.random.default_rng(seed)
    models = ["m0", "m1", "m2", "m3"]
    app_eff = rng.normal(0, 0.5, 8)
    rows = []
    for item in range(24):
        app = item % 8
        eff = app_eff[app] + rng.normal(0, 0.7)
        for a in range(4):
            for b in range(a + 1, 4):
                for judge in ("j1", "j2", "j3"):
                    p = 1 / (1 + np.exp(-(eff + 0.3 * (b - a))))
                    rows.append({"item_id": f"i{item}", "app": f"a{app}", "judge": judge,
                                 "model_a": models[a], "model_b": models[b],
                                 "outcome": "a" if rng.random() < p else "b"})
    df = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.read(df, outcome="outcome", model_a="model_a", model_b="model_b",
                            clusters={"item": "item_id", "app": "app", "judge": "judge"})


@pytest.mark.parametrize("app_form", ["centred", "marginal", "noncentred"])
def test_nested_centring_is_the_same_density_in_other_coordinates(app_form):
    """Items nested in apps: the sampler sees w = u_item + u_app[parent] (hierarchical
    centring), a linear map with unit Jacobian; log p(x) = log p_plain(T x),
    grad = T' grad_plain, and expand reports the original u_item."""
    import dataclasses

    t = _items_in_apps_table()
    spec = build_spec(t)
    data = collapse(spec)
    default = choose_parameterization(spec, data)
    # 3 items per app: the app factor is prior-dominated -> non-centred, SD sampled
    app = next(x for x in default if x.factor == "app")
    assert not app.centred and not app.marginal
    terms = [dataclasses.replace(x, centred=x.factor != "app" or app_form != "noncentred",
                                 marginal=app_form == "marginal")
             if x.factor in ("item", "app") else x for x in default]
    kc = DensityKernel(spec, data, terms)
    kp = DensityKernel(spec, data, terms, centre_nested=False)
    assert len(kc.nest) == 1
    (i, (j, parent)), = kc.nest.items()
    assert (terms[i].factor, terms[j].factor) == ("item", "app")
    assert not terms[i].zero_sum
    levels_i, levels_j = spec.random[i].levels, spec.random[j].levels
    assert [levels_j[p] for p in parent] == [f"a{int(lv[1:]) % 8}" for lv in levels_i]
    # x_plain = T x: u_item = w - u_app[parent] (u_app = v, or sd * v non-centred)
    _, a1, a2 = kc.slices[i]
    j0, c1, c2 = kc.slices[j]
    assert not terms[j].zero_sum
    P = np.zeros((a2 - a1, c2 - c1))
    P[np.arange(a2 - a1), parent] = 1.0
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = rng.normal(0, 0.5, kc.ndim)
        # u_app = sd * v when non-centred: the map is linear in v at fixed log sd
        sd = np.exp(x[j0]) if app_form == "noncentred" else 1.0
        T = np.eye(kc.ndim)
        T[a1:a2, c1:c2] -= sd * P
        (l1, g1), (l2, g2) = kc.logp(x), kp.logp(T @ x)
        assert l1 == pytest.approx(l2, rel=1e-12)
        # chain rule; for non-centred apps also through log sd: d u_item / d log sd
        J = T.copy()
        if app_form == "noncentred":
            J[a1:a2, j0] = -sd * P @ x[c1:c2]
        np.testing.assert_allclose(g1, J.T @ g2, rtol=1e-9, atol=1e-9)
        e1, e2 = kc.expand(x), kp.expand(T @ x)
        for name in e1:
            np.testing.assert_allclose(e1[name], e2[name], rtol=1e-12, atol=1e-12)
    # not nested once an item spans two apps
    assert not _nested_pairs_after_moving_one_row(spec, data, terms, i, j)


def _nested_pairs_after_moving_one_row(spec, data, terms, i, j):
    import dataclasses

    codes = list(data.codes)
    cj = np.array(codes[j], copy=True)
    first_item_rows = np.flatnonzero(np.asarray(codes[i]) == codes[i][0])
    cj[first_item_rows[0]] = (cj[first_item_rows[0]] + 1) % terms[j].n_levels
    codes[j] = cj
    return DensityKernel(spec, dataclasses.replace(data, codes=codes), terms).nest


def test_marginal_kernel_integrates_the_joint_over_the_sd():
    """A ``marginal`` term's density equals the joint kernel density integrated over
    that term's SD (numerical quadrature over log sd), up to one constant."""
    import dataclasses

    from scipy import integrate

    t = pairwise_judges(8, 3, 3, 3, seed=2, tie_threshold=0).table()
    spec = build_spec(t, slopes=("judge",))
    data = collapse(spec)
    terms = choose_parameterization(spec, data)
    j = next(i for i, x in enumerate(terms) if x.factor == "judge" and x.marginal)
    marg = [dataclasses.replace(x, marginal=(i == j)) for i, x in enumerate(terms)]
    joint = [dataclasses.replace(x, marginal=False) for x in terms]
    km = DensityKernel(spec, data, marg, prior_scale=1.3)
    kj = DensityKernel(spec, data, joint, prior_scale=1.3)
    assert kj.ndim == km.ndim + 1
    i0 = kj.slices[j][0]
    rng = np.random.default_rng(3)
    offsets = []
    for _ in range(3):
        xm = rng.normal(0, 0.4, km.ndim)
        base = kj.logp(np.insert(xm, i0, 0.0))[0]

        def f(log_sd, xm=xm, base=base):
            return np.exp(kj.logp(np.insert(xm, i0, log_sd))[0] - base)

        val = integrate.quad(f, -12, 4, limit=400, epsabs=0, epsrel=1e-10)[0]
        offsets.append(km.logp(xm)[0] - (base + np.log(val)))
        # gradient of the marginal density by central differences
        g = km.logp(xm)[1]
        h = 1e-6
        e = np.zeros(km.ndim)
        for k in (0, km.slices[j][1], km.ndim - 1):
            e[:] = 0
            e[k] = h
            fd = (km.logp(xm + e)[0] - km.logp(xm - e)[0]) / (2 * h)
            assert g[k] == pytest.approx(fd, rel=1e-5, abs=1e-5)
    assert np.ptp(offsets) < 1e-7


def test_marginal_sd_draws_follow_the_conditional_posterior():
    """``sd | u`` drawn by GIG equals the numerically normalised
    N(u; 0, sd^2) x Rayleigh(sd) (Kolmogorov-Smirnov)."""
    from scipy import integrate, stats

    from evalmix.models.bayes.pymc_model import draw_marginal_sd

    rng = np.random.default_rng(0)
    grid = np.linspace(1e-6, 6.0, 60001)
    for n in (1, 2, 3):
        u = rng.normal(0, 0.3, n)
        dens = np.exp(stats.norm.logpdf(u[:, None], 0, grid).sum(axis=0)) * \
            stats.rayleigh.pdf(grid, scale=0.8)
        cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
        cdf /= cdf[-1]
        draws = draw_marginal_sd(np.tile(u, (3000, 1)), n, 0.8, rng)
        p = stats.kstest(draws, lambda x, cdf=cdf: np.interp(x, grid, cdf)).pvalue
        assert p > 0.01
        # and it is not the prior (the test can fail)
        assert stats.kstest(draws, stats.rayleigh(scale=0.8).cdf).pvalue < 1e-6


def test_three_judges_defaults_do_not_diverge():
    """4,320 rows, 3 judges, 3 authors, judge slope and judge position bias: the design
    whose centred fits diverged 50-250 times per 2 x 2,000 draws (seed 1003: 253). With
    the few-level SDs integrated out, defaults give 0 divergences and pass the checks."""
    t = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=1003).table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", FewClustersWarning)
        fit = evalmix.fit(t, slopes=("judge",), seed=1, progress=False)
    assert fit.divergences == 0 and "retried" not in fit.provenance
    assert fit.diagnostics["r_hat"].max() <= 1.01
    assert fit.diagnostics["ess_bulk"].min() >= 400
    assert "integrated out" in fit.provenance["parameterization"]["1|judge"]
    sd = fit.variance.set_index("factor")
    assert sd.loc["judge", "sd_lo"] > 0.01 and sd.loc["author", "sd_hi"] < 2.5
    # the reported R-hat and ESS are those of the check that stopped the sampling:
    # the same as computed again from the returned draws
    from evalmix.models.bayes._posterior import idata_diagnostics

    again = idata_diagnostics(fit.idata, list(dict.fromkeys(
        p.split("[")[0] for p in fit.diagnostics["parameter"])))
    pd.testing.assert_frame_equal(fit.diagnostics, again, check_exact=True)


def test_which_factors_have_their_sd_integrated_out():
    """Up to 50 levels (judges, authors, personas, categories): SD integrated out; more
    (scenarios, items): the centred/non-centred rule. Every SD has the Rayleigh prior."""
    t = pairwise_judges(60, 6, 3, 3, seed=5, tie_threshold=0).table()
    spec = build_spec(t, slopes=("judge",))
    terms = {x.name: x for x in choose_parameterization(spec, collapse(spec))}
    assert not terms["1|scenario"].marginal and terms["1|scenario"].centred
    assert all(x.marginal for n, x in terms.items() if n != "1|scenario")
    assert {x.sd_prior for x in terms.values()} == {"rayleigh"}
    t2 = pairwise_judges(51, 2, 2, 2, seed=5, tie_threshold=0).table()
    s2 = build_spec(t2)
    assert not {x.factor: x for x in choose_parameterization(s2, collapse(s2))}[
        "scenario"].marginal
    t3 = pairwise_judges(50, 2, 2, 2, seed=5, tie_threshold=0).table()
    s3 = build_spec(t3)
    # the prior-based rule; with the pilot the scenario's condition slope (the last
    # scenario term: information 3.4 per level, estimated SD 0.22, ratio 0.16) is
    # non-centred with its SD sampled
    assert {x.factor: x for x in choose_parameterization(s3, collapse(s3), pilot=False)}[
        "scenario"].marginal
    scen = {x.factor: x for x in choose_parameterization(s3, collapse(s3))}["scenario"]
    assert scen.pilot and not scen.marginal and not scen.centred


def test_convergence_warning_on_too_short_chains(tmp_path):
    t = pairwise_judges(6, 3, 3, 3, seed=4, tie_threshold=0).table()
    with pytest.warns(ConvergenceWarning, match="bulk ESS < 400"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            fit = evalmix.fit(t, seed=1, slopes=(), draws=60, tune=60, chains=2, progress=False)
    assert any("ESS" in w for w in fit.warnings)
    assert set(fit.diagnostics.columns) >= {"parameter", "r_hat", "ess_bulk", "ess_tail"}
    # the posterior saves and reloads with its provenance (attrs must be plain scalars)
    import arviz as az

    path = tmp_path / "fit.nc"
    fit.idata.to_netcdf(path)
    back = az.from_netcdf(path)
    assert back.posterior.attrs["formula"] == fit.formula
    assert back.posterior.attrs["seed"] == 1


def test_prior_sensitivity_table_moves_the_three_level_sd_not_the_effect():
    """``sensitivity=2.5`` refits at Rayleigh(0.8 x 2.5): the 3-level judge SD's upper
    bound grows with the prior (the data cannot pin it), the population condition
    effect and the 20-level scenario SD barely move."""
    t = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=1003).table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewClustersWarning)
        fit = evalmix.fit(t, seed=2, slopes=(), draws=600, sensitivity=2.5, progress=False)
    s = fit.prior_sensitivity.set_index("term")
    assert {"estimate@1", "lo@1", "hi@1", "estimate@2.5", "lo@2.5", "hi@2.5"} <= set(s)
    assert s.loc["sd[judge]", "hi@2.5"] > 1.3 * s.loc["sd[judge]", "hi@1"]
    assert abs(s.loc["sd[scenario]", "estimate@2.5"] - s.loc["sd[scenario]", "estimate@1"]) \
        < 0.1
    assert abs(s.loc["position", "estimate@2.5"] - s.loc["position", "estimate@1"]) < 0.15
    assert evalmix.fit(t, seed=2, slopes=(), draws=100, tune=100, progress=False).prior_sensitivity is None


def test_ordinal_scores_match_clmm():
    """family='ordinal' on a 1-6 score table (750 rows, 50 items x 5 judges x 3 models)
    against R ordinal::clmm (tests/reference/models/fit_ordinal.R): condition effects
    and cut points within 0.25 posterior SD, 90% SD intervals contain clmm's SDs."""
    ref = pd.read_csv(REF / "reference_ordinal.csv").set_index("term")
    t = evalmix.read(REF / "ordinal_scores.csv", outcome="score", condition="model",
                     clusters={"item": "item", "judge": "judge"})
    fit = _fit_quiet(t, family="ordinal", seed=1, level=VC_LEVEL, slopes=(), **SHORT)
    assert fit.family == "cumulative" and fit.divergences == 0
    fx = fit.fixed_effects[fit.fixed_effects["scale"] == "log-odds"].set_index("term")
    pairs = {"condition[m1]": "modelm1", "condition[m2]": "modelm2",
             **{f"cutpoint[{k}]": f"{k}|{k + 1}" for k in range(1, 6)}}
    for mine, theirs in pairs.items():
        gap = abs(fx.loc[mine, "estimate"] - ref.loc[theirs, "estimate"]) / fx.loc[mine, "se"]
        assert gap <= MEDIAN_TOL_SD, (mine, gap)
    v = fit.variance.set_index("factor")
    for g in ("item", "judge"):
        assert v.loc[g, "sd_lo"] <= ref.loc[g, "estimate"] <= v.loc[g, "sd_hi"], g
    # population-averaged expected scores against the generating model's (cut points
    # -2..2, effects 0/0.5/1, latent random-effect variance 1 + 0.25, 80-point
    # Gauss-Hermite): 3.5, 3.8877, 4.2618
    truth = {"m0": 3.5, "m1": 3.8876875, "m2": 4.2618044}
    pop = fit.fixed_effects[fit.fixed_effects["label"].str.startswith("population")]
    pop = pop[pop["scale"] == "score"].set_index("term")
    observed = t.data.groupby("condition")["y"].mean()
    for m, tr in truth.items():
        assert pop.loc[f"E[score | {m}]", "lo"] <= tr <= pop.loc[f"E[score | {m}]", "hi"]
    for m in ("m1", "m2"):
        row = pop.loc[f"E[score | {m}] - E[score | m0]"]
        assert row["lo"] <= truth[m] - truth["m0"] <= row["hi"]
        # the balanced design's raw mean difference is a consistent estimate of it too
        assert abs(row["estimate"] - (observed[m] - observed["m0"])) < 0.1
    # clear errors where no ordinal model exists
    with pytest.raises(evalmix.EvalmixError, match="numeric score tables"):
        evalmix.fit(pairwise_judges(4, 2, 2, 2, seed=1, tie_threshold=0).table(),
                    family="ordinal")
    with pytest.raises(evalmix.EvalmixError, match="no ordinal"):
        evalmix.fit(t, family="ordinal", backend="statsmodels")


@pytest.mark.parametrize("lam,a,b", [(0.0, 1 / 0.64, 0.05), (-0.5, 1.5, 2.0),
                                     (0.5, 1.5, 1e-3), (-24.0, 1.5, 40.0),
                                     (-1.0, 1.5, 1e-6)])
def test_gig_rejection_sampler_matches_scipy(lam, a, b):
    """The vectorised log-concave rejection sampler against scipy's geninvgauss
    (t = sqrt(b/a) x, x ~ GIG(lam, sqrt(ab))), KS; and not a neighbouring law."""
    from scipy import stats

    from evalmix.models.bayes.pymc_model import _gig_draws

    d = _gig_draws(lam, a, np.full(20_000, b), np.random.default_rng(3))
    ref = stats.geninvgauss(lam, np.sqrt(a * b), scale=np.sqrt(b / a))
    assert stats.kstest(d, ref.cdf).pvalue > 0.001
    off = stats.geninvgauss(lam, np.sqrt(a * b), scale=1.1 * np.sqrt(b / a))
    assert stats.kstest(d, off.cdf).pvalue < 1e-6


def test_fixed_effect_priors_are_scaled_by_the_column_sd():
    """Normal(0, 2.5 / sd(x)) per column (rstanarm's autoscaling), 2.5 for the
    intercept; closed forms for a balanced design: condition dummy p = 1/2 and
    position +-1/2 both have sd 1/2 -> 5."""
    from evalmix.models.bayes.pymc_model import fixed_prior_sd

    t = pairwise_judges(8, 3, 3, 3, seed=2, tie_threshold=0).table()
    spec = build_spec(t)
    sd = dict(zip(spec.fixed_names, fixed_prior_sd(spec, collapse(spec)), strict=True))
    assert sd["Intercept"] == 2.5
    X = np.asarray(spec.X)
    for j, name in enumerate(spec.fixed_names[1:], start=1):
        assert sd[name] == pytest.approx(2.5 / X[:, j].std(), rel=1e-12)
    assert sd["condition[treatment]"] == pytest.approx(5.0, rel=1e-12)
    assert sd["position"] == pytest.approx(5.0, rel=1e-12)


@pytest.mark.parametrize("seed", [2026, 1, 2])
def test_demo_model_passes_its_checks_across_seeds(seed):
    """Issue 11 item 8: the demo's Bayesian fit (the report's default model on the
    simulated demo design, with the prior-sensitivity step the report runs for its
    3-level factors) ends with 0 divergences, every R-hat <= 1.01 and bulk and tail ESS
    >= 400 (fixed 2 x 1,000 draws gave R-hat 1.013 on seed 2026)."""
    from evalmix.compare.model_rows import SENSITIVITY_SCALE
    from evalmix.report.demo import DEMO_DESIGN

    t = pairwise_judges(**DEMO_DESIGN, seed=seed).table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", FewClustersWarning)
        fit = evalmix.fit(t, seed=seed, slopes=(), sensitivity=SENSITIVITY_SCALE, progress=False)
    d = fit.diagnostics
    assert fit.divergences == 0
    assert d["r_hat"].max() <= 1.01
    assert min(d["ess_bulk"].min(), d["ess_tail"].min()) >= 400
    assert fit.prior_sensitivity is not None
    assert fit.provenance["prior_sensitivity_method"]["method"] in ("psis", "refit")


def _sensitivity_pair(table, scale, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewClustersWarning)
        fp = evalmix.fit(table, seed=2, slopes=(), sensitivity=scale, sensitivity_method="psis",
                         progress=False, **kw)
        fr = evalmix.fit(table, seed=3, slopes=(), sensitivity=scale, sensitivity_method="refit",
                         progress=False, **kw)
    return fp, fr


def test_psis_equals_arviz_psislw():
    """evalmix's PSIS (no ArviZ import) gives ``arviz.psislw``'s smoothed log weights and
    Pareto k: light and heavy tails, a tail of <= 4 draws (k = inf), constant weights."""
    import arviz as az

    from evalmix.models.bayes._psis import psis

    rng = np.random.default_rng(1)
    cases = [rng.normal(size=4000), 2 * rng.standard_t(2, size=4000),
             3 * rng.exponential(size=3000), rng.normal(size=50) * 0.3,
             rng.standard_cauchy(size=1000), np.r_[np.zeros(95), rng.normal(size=5)],
             np.zeros(100)]
    ks = []
    for lw in cases:
        ref, k_ref = az.psislw(lw.copy())
        mine, k = psis(lw)
        np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-12)
        assert k == k_ref or (np.isinf(k) and np.isinf(k_ref))
        ks.append(k)
    assert 0 < ks[0] < 0.7 < ks[1] < np.inf and np.isinf(ks).any()   # the cases differ


@pytest.mark.parametrize("design,scale", [("three_judges", 1.25), ("three_judges", 2.5),
                                          ("cbpp", 2.5)])
def test_psis_prior_sensitivity_agrees_with_a_refit(design, scale, cbpp_table):
    """The PSIS-reweighted posterior under wider SD priors equals a refit within Monte
    Carlo error, on the 4,320-row 3-judge design (3-level factors, SDs integrated out
    while sampling: Rao-Blackwellised weights on the level effects; scale 2.5 is the
    report's, where the joint weights on (u, sd) had Pareto k > 0.7) and on cbpp (15
    herds; scale 2.5), and the reweighting moves the SDs as the refit does. Measured
    (3-judge design): estimates within 0.03 and endpoints within 0.1 of the interval
    width; SD estimates move up 2-6% of it. At 2.5x the 3-level SDs' upper tails are
    wide, so both fits take 2 x 1,500 draws (with the checks' ~850 the two interval ends
    differed by up to 0.34 of the width, Monte Carlo error of both; measured with 1,500:
    estimates within 0.02, ends within 0.1). At 1.25x the shift of the 20-level
    scenario SD is ~0.01 of its width, below the Monte Carlo error of the checks'
    draws: with 400 / 500 / 513 draws per chain it came out -0.007 / -0.009 / -0.002,
    with 600-1,300 +0.008 to +0.021 (seed 2), so where the stopping rule lands decided
    the test; both take 2 x 1,500 draws too (at 1,000 and 1,200 a u_scenario R-hat was
    1.012-1.013)."""
    kw = {}
    if design == "three_judges":
        table = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=1003).table()
        kw = {"draws": 1500}
    else:
        table = cbpp_table
    fp, fr = _sensitivity_pair(table, scale, **kw)
    info = fp.provenance["prior_sensitivity_method"]
    assert info["method"] == "psis" and info["pareto_k"] < info["k_max"], info
    assert fr.provenance["prior_sensitivity_method"]["method"] == "refit"
    a = fp.prior_sensitivity.set_index("term")
    b = fr.prior_sensitivity.set_index("term").loc[a.index]
    ok = a["hi@1"].notna()
    width = (a["hi@1"] - a["lo@1"])[ok]
    s = f"@{scale:g}"
    gap = ((a["estimate" + s] - b["estimate" + s]) / width)[ok]
    assert gap.abs().max() <= 0.06, gap
    for c in ("lo", "hi"):
        assert (((a[c + s] - b[c + s]) / width)[ok]).abs().max() <= 0.3, c
    # wider SD priors move every SD up; the reweighted draws show it (uniform weights
    # would leave the draws, and so the table, exactly as they were), by about as much
    # as the refit
    sd_rows = [t for t in a.index[ok] if t.startswith("sd[") and t != "sd[Residual]"]
    psis_shift = ((a["estimate" + s] - a["estimate@1"]) / width)[sd_rows]
    refit_shift = ((b["estimate" + s] - b["estimate@1"]) / width)[sd_rows].mean()
    assert (psis_shift > 0).all(), psis_shift
    assert 0.3 * refit_shift < psis_shift.mean() < 3 * refit_shift, (psis_shift,
                                                                      refit_shift)


def test_sampling_stops_at_its_step_budget_with_a_warning(monkeypatch):
    """``draws=None`` sampling stops once a chain has taken ``STEPS_MAX`` leapfrog steps
    after warm-up (here 2,000, with checks that cannot pass): well before ``DRAWS_MAX``
    draws, the kept draws a prefix of what was sampled (at most that many steps in every
    chain), provenance records it and the convergence warning says the budget stopped
    it."""
    from evalmix.models import bayes
    from evalmix.models.bayes import _posterior, _sampling

    monkeypatch.setattr(_sampling, "STEPS_MAX", 2000)
    monkeypatch.setattr(_sampling, "ESS_MIN", 10 ** 9)
    monkeypatch.setattr(_posterior, "ESS_MIN", 10 ** 9)
    t = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=4).table()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = evalmix.fit(t, seed=1, slopes=(), tune=100, progress=False, retry_divergent=False)
    steps = fit.idata.sample_stats["n_steps"].sum("draw").to_numpy()
    assert fit.provenance["stopped_at_steps"] >= 2000
    assert steps.max() <= fit.provenance["stopped_at_steps"]
    assert fit.provenance["draws"] < bayes.DRAWS_MAX / 2
    msg = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert msg and "stopped at its budget" in msg[0], msg


def test_many_fixed_columns_sample_with_the_low_rank_mass_matrix():
    """A model with >= 8 fixed columns (here 7 scenario dummies) is sampled with nutpie's
    low-rank mass matrix (recorded in provenance) and passes the checks; 3 columns
    keep the diagonal one."""
    t = pairwise_judges(8, 4, 3, 3, tie_threshold=0, seed=5).table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", FewClustersWarning)
        fit = evalmix.fit(t, seed=1, slopes=(), fixed=("scenario",), progress=False)
    small = _fit_quiet(t, seed=1, slopes=(), draws=100, tune=100, progress=False)
    assert fit.provenance["mass_matrix"] == "low-rank"
    assert small.provenance["mass_matrix"] == "diagonal"
    d = fit.diagnostics
    assert fit.divergences == 0 and d["r_hat"].max() <= 1.01
    assert min(d["ess_bulk"].min(), d["ess_tail"].min()) >= 400


def test_many_coordinates_with_a_diagonal_mass_matrix_cap_the_trees_at_depth_3():
    """200 scenarios (212 coordinates, 3 fixed columns): the trees stop at depth 3 (at
    most 7 leapfrog steps per draw, recorded in provenance) and the fit passes the
    checks; the 20-scenario design (33 coordinates) and the low-rank one are not
    capped."""
    from evalmix.models import bayes

    t = pairwise_judges(200, 2, 2, 2, tie_threshold=0, seed=3).table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", FewClustersWarning)
        fit = evalmix.fit(t, seed=1, slopes=(), progress=False)
    assert fit.provenance["max_tree_depth"] == 3 and fit.provenance["mass_matrix"] == "diagonal"
    assert int(fit.draws.sample_stats["n_steps"].max()) <= 7
    d = fit.diagnostics
    assert fit.divergences == 0 and d["r_hat"].max() <= 1.01
    assert min(d["ess_bulk"].min(), d["ess_tail"].min()) >= 400

    def depth(spec, ndim):
        data = collapse(spec)
        return bayes.tree_depth(spec, choose_parameterization(spec, data), data, ndim)

    table = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=3).table()
    spec = build_spec(table, slopes=())
    assert depth(spec, 33) is None and depth(spec, 212) == 3
    # the maximal default: the pilot makes the scenario's condition slope (no true
    # slopes here) non-centred, and a weakly identified SD is not capped
    assert depth(build_spec(table), 212) is None
    many = build_spec(pairwise_judges(8, 4, 3, 3, tie_threshold=0, seed=5).table(),
                      fixed=("scenario",))
    assert bayes.mass_matrix(many) == "low-rank" and depth(many, 500) is None
    # passages nested in items: not capped
    nested = crossed_scores([Factor("item", 60, 1.0), Factor("passage", 5, 0.5,
                                                              parent="item")], seed=3)
    assert depth(build_spec(nested.table()), 362) is None


def test_a_capped_run_that_fails_its_checks_is_run_again_without_the_cap(monkeypatch):
    """Trees capped at depth 1 (one leapfrog step per draw: a random walk) do not pass
    the checks in 1,500 draws; the fit then samples again with NUTS's own trajectory
    lengths, records it, and passes."""
    from evalmix.models.bayes import _sampling

    monkeypatch.setattr(_sampling, "SHORT_TREE_DEPTH", 1)
    monkeypatch.setattr(_sampling, "SHORT_TREE_MIN_DIM", 1)
    monkeypatch.setattr(_sampling, "DRAWS_MAX", 1500)
    t = pairwise_judges(20, 6, 3, 3, tie_threshold=0, seed=3).table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", FewClustersWarning)
        fit = evalmix.fit(t, seed=1, slopes=(), progress=False)
    assert fit.provenance["uncapped_rerun"] == {"max_tree_depth": 1, "draws_first_run": 1500}
    assert "max_tree_depth" not in fit.provenance
    assert int(fit.draws.sample_stats["n_steps"].max()) > 1
    d = fit.diagnostics
    assert d["r_hat"].max() <= 1.01 and min(d["ess_bulk"].min(), d["ess_tail"].min()) >= 400


@pytest.mark.parametrize(("n", "scale"), [(2, 0.5), (3, 1.25), (7, 2.0)])
def test_log_marginal_prior_is_the_integral_over_the_sd(n, scale):
    """pymc_model.log_marginal_prior (the PSIS weights' prior of a marginal term's level
    effects) equals int N(u | 0, sd^2 I_n) Rayleigh(sd | scale) dsd by quadrature."""
    from scipy import integrate, stats

    from evalmix.models.bayes.pymc_model import log_marginal_prior

    rng = np.random.default_rng(n)
    for u in (rng.normal(0, 0.3, n), rng.normal(0, 2.0, n)):
        def f(sd, u=u):
            return (np.prod(stats.norm.pdf(u, 0, sd)) * stats.rayleigh.pdf(sd, scale=scale))

        val = integrate.quad(f, 0, np.inf, limit=400, epsabs=0, epsrel=1e-12)[0]
        assert log_marginal_prior(u, n, scale) == pytest.approx(np.log(val), rel=1e-9)
