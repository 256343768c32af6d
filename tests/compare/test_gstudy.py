"""G studies (issue 30): published values, GeneralizIT, lme4, identities.

References: tests/reference/gtheory/ (README.md: Brennan's Synthetic Data Sets No. 3 and
No. 4 with their published components and coefficients; ``reml_jtj.R``: lmer on the
Judging the Judges repetition file). Tolerances are in that README.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.compare.gstudy import _terms
from evalmix.data.table import dense_codes
from evalmix.design.anova import balanced_anova
from evalmix.design.gtheory import GDesign, coefficients
from evalmix.errors import DroppedRowsWarning, EvalmixError, InvalidOptionError
from evalmix.models.frequentist._reml_scoring import reml_scoring_step

REF = REFERENCE / "gtheory"
#: the JTJ repetition file under ../shared/data (conftest's ``shared_data`` writes it
#: from the bundled copy, which tests/datasets/test_datasets.py checks equals the shared CSV)
JTJ = "judging_the_judges/jtj_MTBench_repetition.csv"

#: Brennan prints components to 4 decimals and coefficients to 2.
COMPONENT_TOL, COEFFICIENT_TOL = 5e-5, 5e-3
#: REML path vs lmer on the same optimum (measured agreement 4e-6), or within a millionth
#: of the total variance for a component near 0 (flat in the REML criterion).
LMER_RTOL, LMER_ATOL = 1e-4, 1e-6


@pytest.fixture(scope="module")
def no3():
    return pd.read_csv(REF / "brennan_synthetic3.csv")


@pytest.fixture(scope="module")
def no4():
    return pd.read_csv(REF / "brennan_synthetic4.csv")


@pytest.fixture(scope="module")
def g3(no3):
    return evalmix.gstudy(no3, "person", ["item", "occasion"], outcome="score", seed=1)


def _variances(g) -> dict[str, float]:
    return dict(zip(g.components()["effect"], g.variances, strict=True))


# ---------------------------------------------------------------- published values
def test_brennan_synthetic_3_reproduced_to_the_published_digits(g3):
    published = {"person": .5528, "item": .4417, "occasion": .0074, "person x item": .5750,
                 "person x occasion": .1009, "item x occasion": .1565,
                 "person x item x occasion": .9352}
    got = _variances(g3)
    for effect, value in published.items():
        assert abs(got[effect] - value) < COMPONENT_TOL, (effect, got[effect])
    now = g3.project()
    assert abs(now["erho2"][0] - .64) < COEFFICIENT_TOL
    assert abs(now["phi"][0] - .55) < COEFFICIENT_TOL
    assert g3.method == "anova" and dict(g3.n_observed) == {"item": 4.0, "occasion": 2.0}
    table = g3.details["anova"].set_index("effect")
    # Brennan's (and GeneralizIT's fixture's) T terms, sums of squares, df
    np.testing.assert_allclose(table.loc[["person", "item", "occasion", "person x item",
                                          "person x occasion", "item x occasion",
                                          "person x item x occasion"], "t"],
                               [2288.25, 2263.50, 2229.25, 2382.00, 2303.50, 2274.20, 2430.00])
    np.testing.assert_allclose(table["ss"], [62.20, 37.45, 3.20, 56.30, 12.05, 7.50, 25.25],
                               atol=1e-9)
    assert table["df"].tolist() == [9, 3, 1, 27, 9, 3, 27]


def test_brennan_synthetic_4_nested_raters(no4):
    g = evalmix.gstudy(no4, "person", ["task", "rater"], outcome="score", seed=1)
    assert dict(g.design.nesting) == {"rater": ("task",)}   # found from the labels
    assert any("nested within task" in n for n in g.notes)
    published = {"person": .4731, "task": .3252, "person x task": .5596,
                 "rater:task": .6475, "person x rater:task": 2.3802}
    got = _variances(g)
    assert set(got) == set(published)
    for effect, value in published.items():
        assert abs(got[effect] - value) < COMPONENT_TOL, (effect, got[effect])
    now = g.project()
    assert abs(now["erho2"][0] - .55) < COEFFICIENT_TOL
    assert abs(now["phi"][0] - .46) < COEFFICIENT_TOL
    assert dict(g.n_observed) == {"task": 3.0, "rater": 4.0}


def test_fixed_facet_follows_brennans_rules(no3):
    """Occasions fixed: tau = p + po/n_o, delta = pi/n_i + pio/(n_i n_o), Delta adds
    i/n_i + io/(n_i n_o); the occasion main effect drops out (Brennan 2001, 4.4)."""
    g = evalmix.gstudy(no3, "person", ["item", "occasion"], outcome="score",
                       fixed=["occasion"], seed=1)
    v = _variances(g)
    tau = v["person"] + v["person x occasion"] / 2
    rel = v["person x item"] / 4 + v["person x item x occasion"] / 8
    ab = rel + v["item"] / 4 + v["item x occasion"] / 8
    now = g.project()
    np.testing.assert_allclose([now["universe_var"][0], now["relative_var"][0],
                                now["absolute_var"][0]], [tau, rel, ab], rtol=1e-12)
    assert g.design.random_facets == ("item",)
    with pytest.raises(InvalidOptionError, match="fixed"):
        evalmix.dstudy(g, {"occasion": [3]})


# ---------------------------------------------------------------- GeneralizIT
@pytest.fixture(scope="module")
def generalizit3(no3):
    """GeneralizIT 0.1.2 (dev extra) on Synthetic Data No. 3: ANOVA, G coefficients for
    every object of measurement, and a D study at 8 items and 1 occasion."""
    generalizit = pytest.importorskip("generalizit")
    frame = no3.rename(columns={"item": "i", "occasion": "o", "score": "Response"})
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        gt = generalizit.GeneralizIT(data=frame, design_str="person x i x o",
                                     response="Response")
        gt.calculate_anova()
        gt.calculate_g_coefficients()
        gt.calculate_d_study(d_study_design={"person": [10], "i": [8], "o": [1]})
    return frame, gt.design


def test_generalizit_gives_the_same_components_and_coefficients(generalizit3, g3):
    frame, theirs = generalizit3
    for effect, value in _variances(g3).items():
        key = effect.replace("item", "i").replace("occasion", "o")
        # GeneralizIT rounds its ANOVA table to 4 decimals
        assert abs(value - theirs.anova_table.loc[key, "Variance"]) < 5e-5, effect
    # every factor as the object of measurement (GeneralizIT reports each)
    for obj in ("person", "i", "o"):
        rest = [f for f in ("person", "i", "o") if f != obj]
        g = evalmix.gstudy(frame, obj, rest, outcome="Response", seed=1)
        # GeneralizIT computes its coefficients from the rounded components
        now = coefficients(np.round(g.variances, 4), g.design, g.n_observed)
        np.testing.assert_allclose(
            [now["erho2"][0], now["phi"][0]],
            theirs.g_coeffs_table.loc[obj, ["rho^2", "phi^2"]].astype(float),
            atol=5e-5, err_msg=obj)


def test_generalizit_d_study_matches(generalizit3, g3):
    _, theirs = generalizit3
    want = theirs.d_study_dict["person: 10, i: 8, o: 1"].loc["person", ["rho^2", "phi^2"]]
    # GeneralizIT projects its components rounded to 4 decimals
    ours = coefficients(np.round(g3.variances, 4), g3.design, {"item": 8, "occasion": 1})
    np.testing.assert_allclose([ours["erho2"][0], ours["phi"][0]], want.astype(float),
                               atol=5e-5)
    d = evalmix.dstudy(g3, {"item": [8], "occasion": [1]})
    row = d.table[d.table["design"] == "grid"].iloc[0]
    np.testing.assert_allclose([row["erho2"], row["phi"]], want.astype(float), atol=2e-4)


# ---------------------------------------------------------------- identities
def test_scoring_step_equals_anova_on_balanced_data(no4):
    """MINQUE (one REML scoring step) equals the ANOVA estimates on balanced data
    whatever the prior: the REML path's bootstrap is then the ANOVA bootstrap."""
    design = GDesign("person", ("task", "rater"), {"rater": ("task",)})
    codes = {f: dense_codes(no4[f].to_numpy()) for f in design.factors}
    terms = _terms(design, codes)
    rng = np.random.default_rng(4)
    Y = no4["score"].to_numpy(float)[:, None] + rng.normal(0, 1, (len(no4), 3))
    want = np.array([balanced_anova(Y[:, j], codes, design).variances for j in range(3)])
    for prior in ([1, 1, 1, 1, 1], [0.01, 3.0, 0.2, 0.0, 0.7]):
        got = reml_scoring_step(Y, np.ones((len(no4), 1)), terms, np.array(prior, float))
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_reml_equals_anova_when_every_component_is_positive(no3, g3):
    g = evalmix.gstudy(no3, "person", ["item", "occasion"], outcome="score",
                       method="reml", reps=200, seed=1, progress=False)
    # the occasion component (0.0074 of 2.8 in all) is flat in the REML criterion
    np.testing.assert_allclose(g.variances, g3.variances, rtol=1e-4)
    assert "scoring step" in g.interval
    # the two bootstraps are the same distribution: medians within Monte Carlo error
    med_reml = np.median(g.draws, axis=0)
    med_anova = np.median(g3.draws, axis=0)
    sd = g3.draws.std(axis=0)
    assert np.all(np.abs(med_reml - med_anova) < 0.25 * sd)


def test_anova_bootstrap_is_unbiased_for_the_components(g3):
    """Mean squares drawn as E MS chi^2/df give unbiased ANOVA components at the
    (truncated) estimates."""
    v = np.clip(g3.variances, 0, None)
    mean, se = g3.draws.mean(axis=0), g3.draws.std(axis=0) / np.sqrt(g3.draws.shape[0])
    assert np.all(np.abs(mean - v) < 4 * se)


THREE_JUDGES = ("claude-3-sonnet-20240229", "gpt-3.5-turbo-0125", "gpt-4-0613")
LMER_NAMES = {"model_b": "model", "item_id": "item", "judge": "judge",
              "model_b x item_id": "model:item", "model_b x judge": "model:judge",
              "item_id x judge": "item:judge", "model_b x item_id x judge": "model:item:judge",
              "replicate:model_b x item_id x judge": "Residual"}


def _check_against_lmer(path: Path, subset: str, judges: tuple[str, ...] | None,
                        dropped: int):
    d = pd.read_csv(path)
    if judges is not None:
        d = d[d["judge"].isin(judges)]
    d["y"] = d["outcome"].map({"b": 1.0, "a": 0.0, "tie": 0.5})
    with pytest.warns(DroppedRowsWarning, match=f"{dropped} rows dropped"):
        g = evalmix.gstudy(d, "model_b", ["item_id", "judge"], outcome="y", reps=50,
                           seed=1, progress=False)
    ref = pd.read_csv(REF / "reference_reml_jtj.csv")
    ref = ref[ref["subset"] == subset]
    want = ref[ref["kind"] == "variance"].set_index("term")["value"]
    fit = ref[ref["kind"] == "fit"].set_index("term")["value"]
    assert g.method == "reml" and g.n_obs == fit["nobs"]
    got = _variances(g)
    for ours, theirs in LMER_NAMES.items():
        np.testing.assert_allclose(got[ours], want[theirs], rtol=LMER_RTOL,
                                   atol=LMER_ATOL * want.sum(), err_msg=ours)
    assert g.details["fit"].details["reml_criterion"] <= fit["REMLcrit"] + 1e-6
    return g


@pytest.fixture(scope="module")
def jtj3(shared_data):
    return _check_against_lmer(shared_data / JTJ, "three_judges", THREE_JUDGES, 23)


def test_reml_path_equals_lmer_on_an_unbalanced_real_file(jtj3):
    """Three judges of the JTJ repetition file, 23 unparsed verdicts dropped (the whole
    file, 9 judges: the slow test below)."""
    assert jtj3.details["converged"] and jtj3.method == "reml"
    assert "scoring step" in jtj3.interval


def test_reml_estimate_is_a_fixed_point_of_the_scoring_step(jtj3, shared_data):
    """One scoring step from the REML estimates returns them (every component > 0)."""
    fit = jtj3.details["fit"]
    d = pd.read_csv(shared_data / JTJ)
    d = d[d["judge"].isin(THREE_JUDGES) & d["outcome"].notna()]
    d = d.assign(y=d["outcome"].map({"b": 1.0, "a": 0.0, "tie": 0.5}),
                 replicate=d.groupby(["model_b", "item_id", "judge"]).cumcount())
    codes = {f: dense_codes(d[f].astype(str).to_numpy()) for f in jtj3.design.factors}
    v = jtj3.variances
    assert v.min() > 0 and not fit.singular
    step = reml_scoring_step(d["y"].to_numpy(float)[:, None], np.ones((len(d), 1)),
                             _terms(jtj3.design, codes), v)[0]
    np.testing.assert_allclose(step, v, rtol=1e-4, atol=LMER_ATOL * v.sum())


@pytest.mark.slow
def test_reml_path_equals_lmer_on_the_whole_file(shared_data):
    g = _check_against_lmer(shared_data / JTJ, "all", None, 28)
    # Messing's point: the naive SE is several times too small here
    assert g.project()["se_score"][0] > 3 * g.naive_se_score


# ---------------------------------------------------------------- inputs
def test_eval_table_roles_become_facets():
    from evalmix.sim import pairwise_judges

    t = pairwise_judges(6, 2, 2, 3, seed=2, tie_threshold=0).table()
    g = evalmix.gstudy(t, seed=1, progress=False)
    assert g.design.object == "model" and "order" in g.design.facets
    assert set(t.clusters) <= set(g.design.facets)
    assert any("model_b (the evaluated model) beats" in n for n in g.notes)
    d = t.data
    df = pd.DataFrame({c: d[c] for c in t.clusters}).assign(
        model=d["model_b"], order=d["a_first"], y=1 - d["y"])
    h = evalmix.gstudy(df, "model", [*t.clusters, "order"], outcome="y", seed=1,
                       progress=False)
    ours = dict(zip(h.design.effects, h.variances, strict=True))
    theirs = dict(zip(g.design.effects, g.variances, strict=True))
    assert set(ours) == set(theirs)
    np.testing.assert_allclose([ours[k] for k in theirs], list(theirs.values()), rtol=1e-10)


def test_unlabelled_repeats_become_a_nested_replicate_facet(no3):
    twice = pd.concat([no3, no3.assign(score=no3["score"] + 1)])
    g = evalmix.gstudy(twice, "person", ["item", "occasion"], outcome="score", seed=1)
    assert g.design.facets[-1] == "replicate" and g.method == "anova"
    assert g.design.nesting["replicate"] == ("person", "item", "occasion")
    assert g.n_observed["replicate"] == 2.0
    assert any("numbered as facet 'replicate'" in n for n in g.notes)


def test_run_facets_are_nested_within_every_cell_unless_told(no3):
    runs = pd.concat([no3.assign(run=1), no3.assign(run=2, score=no3["score"] * 0.5)])
    g = evalmix.gstudy(runs, "person", ["item", "occasion", "run"], outcome="score", seed=1)
    assert set(g.design.ancestors("run")) == {"person", "item", "occasion"}
    crossed = evalmix.gstudy(runs, "person", ["item", "occasion", "run"], outcome="score",
                             nested={"run": ()}, seed=1)
    assert crossed.design.ancestors("run") == frozenset()
    assert len(crossed.design.effects) == 15


def test_results_pickle_and_read_only(g3):
    back = pickle.loads(pickle.dumps(g3))
    np.testing.assert_array_equal(back.variances, g3.variances)
    with pytest.raises(TypeError):
        g3.n_observed["item"] = 3   # type: ignore[index]


def test_bad_inputs_name_the_fix(no3):
    with pytest.raises(EvalmixError, match="outcome="):
        evalmix.gstudy(no3, "person", ["item"])
    with pytest.raises(EvalmixError, match="'judge' is not in the data"):
        evalmix.gstudy(no3, "person", ["judge"], outcome="score")
    with pytest.raises(EvalmixError, match="non-numeric"):
        evalmix.gstudy(no3.assign(score="high"), "person", ["item"], outcome="score")
    with pytest.raises(EvalmixError, match="single level"):
        evalmix.gstudy(no3[no3["occasion"] == 1], "person", ["item", "occasion"],
                       outcome="score")
    with pytest.raises(EvalmixError, match="balanced"):
        evalmix.gstudy(no3.iloc[1:], "person", ["item", "occasion"], outcome="score",
                       method="anova")
    with pytest.raises(InvalidOptionError, match="method"):
        evalmix.gstudy(no3, "person", ["item"], outcome="score", method="glm")
    with pytest.raises(EvalmixError, match="circular"):
        GDesign("p", ("a", "b"), {"a": ("b",), "b": ("a",)})
    from evalmix.sim import pairwise_judges

    bt = pairwise_judges(4, 2, 2, 2, seed=1, tie_threshold=0).table()
    if bt.data["model_a"].nunique() > 1:
        with pytest.raises(EvalmixError, match="Bradley-Terry"):
            evalmix.gstudy(bt)


def test_coefficients_are_vectorised_over_draws_and_designs():
    d = GDesign("p", ("i",))
    v = np.array([[1.0, 0.5, 2.0], [2.0, 0.0, 1.0]])
    out = coefficients(v, d, {"i": np.array([1.0, 4.0])})
    assert out["erho2"].shape == (2, 2)
    np.testing.assert_allclose(out["erho2"][0], [1 / 3, 1 / (1 + 0.5)])
    np.testing.assert_allclose(out["phi"][1], [2 / 3, 2 / 2.25])


@pytest.mark.mcmc
def test_bayesian_g_study_on_the_latent_logit_scale():
    """Binary scores from a latent logistic model with known components: the posterior
    intervals of the components of factors with 6+ levels hold the truth, and the
    residual is the logistic pi^2/3 (the scale is stated)."""
    from evalmix.plan.dstudy_coverage import simulate_scores

    design = GDesign("model", ("item", "judge"))
    truth = np.array([0.8, 1.0, 0.05, 0.3, 0.05, 0.1, 0.0])
    rng = np.random.default_rng(11)
    eta, _ = simulate_scores(design, truth, {"model": 6, "item": 40, "judge": 3}, reps=1,
                             rng=rng)
    y = (eta[0] + rng.logistic(size=eta[0].shape) > 0).astype(float)
    idx = np.indices(y.shape).reshape(3, -1)
    frame = pd.DataFrame({"model": idx[0], "item": idx[1], "judge": idx[2], "y": y.ravel()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = evalmix.gstudy(frame, "model", ["item", "judge"], outcome="y", method="bayes",
                           draws=200, seed=2, progress=False)
    assert g.scale == "latent logit" and g.interval == "posterior draws"
    np.testing.assert_allclose(g.draws[:, -1], np.pi**2 / 3)
    comp = g.components().set_index("effect")
    for effect, value in (("model", 0.8), ("item", 1.0), ("model x item", 0.3)):
        assert comp.loc[effect, "lo"] <= value <= comp.loc[effect, "hi"], effect
    now = g.project()
    assert now["erho2_lo"][0] < now["erho2"][0] < now["erho2_hi"][0]
    assert g.reps == g.draws.shape[0]


def test_reml_stops_at_its_deadline(no3):
    import time

    from evalmix.models._deadline import StoppedAtLimit

    with pytest.raises(StoppedAtLimit):
        evalmix.gstudy(no3.iloc[1:], "person", ["item", "occasion"], outcome="score",
                       deadline=time.monotonic() - 1, progress=False)
