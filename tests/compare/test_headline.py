"""The honest headline: what generalises, the recommended level, refusals, bounds, signs.

References: closed forms (the logit-scale interval is expit(logit(p) -+ t se / (p (1 - p)))
with the clustered SE of the Wald row; a difference of two model_b win rates equals the
difference of the two win rates computed one at a time), hand-built tables whose
degeneracy is known by construction, and the CLI / roles file giving the same table as
the API.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit, logit

import evalmix
from evalmix.compare.recommend import output_cell, recommend_cluster
from evalmix.errors import EvalmixError, EvalmixWarning, NotEstimableWarning
from evalmix.sim.designs import Factor, crossed_scores

#: Closed forms are exact up to floating point.
EXACT_TOL = 1e-9


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def judged():
    """Pairwise judgments: scenarios x personas x authors, 3 judges, both orders."""
    return evalmix.sim.pairwise_judges(12, 4, 3, 3, seed=4)


@pytest.fixture(scope="module")
def crossed():
    """0/1 scores over 20 scenarios x 6 personas, 2 fixed judges."""
    return crossed_scores([Factor("scenario", 20, 0.8, 0.3), Factor("persona", 6, 0.5, 0.3)],
                          judges={"j1": 0.0, "j2": 0.4}, seed=3)


# ---------------------------------------------------------------- what generalises
def test_default_sampled_roles_fix_judges_and_replicates(judged):
    t = judged.table()
    assert t.sampled == ("scenario", "persona", "author") and t.fixed == ("judge",)
    reps = crossed_scores([Factor("item", 10, 0.5)], judges={"a": 0, "b": 0.2},
                          replicates=3, seed=1).table()
    assert reps.fixed == ("judge", "rep") and reps.sampled == ("item",)


def test_sampled_from_read_roles_file_and_analyze(judged, tmp_path):
    t = judged.table(sampled=["scenario", "persona"])
    assert t.sampled == ("scenario", "persona") and t.fixed == ("author", "judge")
    roles = tmp_path / "roles.toml"
    roles.write_text('outcome = "outcome"\nmodel_a = "model_a"\nmodel_b = "model_b"\n'
                     'first_shown = "first_shown"\nsampled = ["scenario"]\n'
                     '[clusters]\nscenario = "scenario"\npersona = "persona"\n')
    t2 = evalmix.read(judged.data, roles=roles)
    assert t2.sampled == ("scenario",)
    with pytest.raises(EvalmixError, match="not a cluster factor"):
        judged.table(sampled=["scenery"])
    rep = _quiet(evalmix.analyze, judged.table(), sampled=["scenario"], fast=True,
                 methods=["naive", "CR2"], progress=False, seed=1)
    assert rep.recommendation["cluster"] == "scenario"
    assert "new levels of scenario" in rep.recommendation["statement"]
    assert "author, judge are held fixed" in rep.recommendation["statement"]


# ---------------------------------------------------------------- interaction cells
def test_interaction_cells_from_api_and_read(judged):
    t = judged.table()
    cell = evalmix.interval(t, "win_rate", model="reference", method="CR2",
                            cluster="persona:scenario:author")
    by_tuple = evalmix.interval(t, "win_rate", model="reference", method="CR2",
                                cluster=[("persona", "scenario", "author")])
    assert cell.n_clusters == 12 * 4 * 3 == by_tuple.n_clusters
    assert cell.se == pytest.approx(by_tuple.se, rel=EXACT_TOL)
    # the same cells declared as a role at read time, and as a column built by hand
    t2 = judged.table(clusters={"scenario": "scenario", "persona": "persona",
                                "author": "author", "judge": "judge",
                                "cell": "persona:scenario:author"})
    frame = judged.data.assign(cell_col=lambda d: d["persona"] + d["scenario"] + d["author"])
    t3 = evalmix.read(frame, **{**judged.read_kwargs,
                                "clusters": {**judged.read_kwargs["clusters"],
                                             "cell": "cell_col"}})
    a = evalmix.interval(t2, "win_rate", model="reference", method="CR2", cluster="cell")
    b = evalmix.interval(t3, "win_rate", model="reference", method="CR2", cluster="cell")
    assert (a.se, a.n_clusters, a.df) == pytest.approx((b.se, b.n_clusters, b.df),
                                                       rel=EXACT_TOL)
    assert a.se == pytest.approx(cell.se, rel=EXACT_TOL)
    assert t2.roles.clusters["cell"] == "persona:scenario:author"
    with pytest.raises(EvalmixError, match="interaction cell"):
        judged.table(clusters={"scenario": "scenario", "cell": "scenario:personaX"})


def test_report_includes_the_output_generating_cell(judged):
    t = judged.table()
    assert output_cell(t) == "scenario:persona:author"
    assert output_cell(t.with_sampled(["scenario"])) is None


def test_interaction_cell_from_the_cli(judged, tmp_path):
    csv = tmp_path / "j.csv"
    judged.data.to_csv(csv, index=False)
    out = tmp_path / "rep"
    res = subprocess.run(
        [sys.executable, "-m", "evalmix.cli", "report", str(csv), "--outcome", "outcome",
         "--model-a", "model_a", "--model-b", "model_b", "--first-shown", "first_shown",
         "--cluster", "scenario=scenario", "--cluster", "persona=persona",
         "--cluster", "cell=scenario:persona", "--sampled", "scenario,persona",
         "--fast", "--reps", "99", "--seed", "1", "--quiet", "--cluster-levels", "cell", "none",
         "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    iv = pd.read_csv(out / "intervals.csv", keep_default_na=False)
    assert "cell" in set(iv["cluster"]) and "scenario+persona" in set(iv["cluster"])
    cell = iv[(iv["cluster"] == "cell") & (iv["method"] == "CR2")
              & (iv["estimand"] == "win_rate")]
    assert set(cell["n_clusters"].astype(float)) == {12 * 4}


# ---------------------------------------------------------------- the recommendation
def test_crossed_sampled_factors_get_multiway(crossed):
    t = crossed.table()
    rec = recommend_cluster(t)
    assert rec.cluster == ("scenario", "persona") and rec.method == "CR2"
    assert rec.n_clusters == 6 and rec.few_levels == ("persona",)
    r = evalmix.interval(t, "mean", contrast="treatment", method="CR2",
                         cluster=list(rec.cluster))
    by = r.details["df_by_factor"]
    assert set(by) == {"scenario", "persona"} and by["persona"] == pytest.approx(5)
    assert min(by.values()) <= r.df <= max(by.values())


def test_nested_factor_is_covered_by_its_parent():
    sim = crossed_scores([Factor("passage", 8, 0.6), Factor("question", [10, 30, 50, 90, 20,
                                                                          40, 60, 70],
                                                            0.8, parent="passage")], seed=2)
    rec = recommend_cluster(sim.table())
    assert rec.cluster == ("passage",) and rec.n_clusters == 8


def test_no_sampled_factor_treats_rows_as_independent(judged):
    rec = recommend_cluster(judged.table(), sampled=[])
    assert rec.cluster == () and rec.method == "naive"
    assert "independent" in rec.reason


def test_headline_says_few_levels_and_which_factor_to_add(crossed):
    rep = _quiet(evalmix.analyze, crossed.table(), fast=True, methods=["naive", "CR2"],
                 progress=False, seed=1, backend="statsmodels")
    h = rep.headline
    assert set(h["cluster"]) == {"scenario+persona"}
    assert h["message"].str.contains("few independent levels of persona").all()


# ---------------------------------------------------------------- refusals
def _ties_table(all_ties: bool):
    rows = []
    for i in range(20):
        for first in ("a", "b"):
            out = "tie" if all_ties or i % 3 else ("a" if i % 2 else "b")
            rows.append({"item": f"i{i}", "model_a": "base", "model_b": "new",
                         "first_shown": first, "outcome": out})
    return evalmix.read(pd.DataFrame(rows), outcome="outcome", model_a="model_a",
                        model_b="model_b", first_shown="first_shown",
                        clusters={"item": "item"}, ties="half")


def test_all_ties_are_not_estimable_and_make_no_decision():
    t = _ties_table(all_ties=True)
    with pytest.warns(NotEstimableWarning, match="every outcome is 0.5: there is no variation"):
        r = evalmix.interval(t, "win_rate", model="new", method="CR2", cluster="item")
    assert r.estimate == 0.5 and np.isnan(r.lo) and np.isnan(r.hi) and np.isnan(r.p_value)
    assert "not estimable" in str(r)
    rep = _quiet(evalmix.analyze, t, fast=True, methods=["naive", "CR2", "wild"],
                 progress=False, seed=1, backend="statsmodels")
    h = rep.headline.iloc[0]
    assert h["message"].startswith("not estimable at this cluster level")
    assert pd.isna(h["decision"]) and np.isnan(h["width_ratio"])
    assert rep.intervals["decision"].isna().all()
    assert not rep.intervals["fragile"].any()


def test_equal_cluster_means_give_zero_se_and_no_decision():
    df = pd.DataFrame({"c": np.repeat([f"c{i}" for i in range(6)], 10),
                       "q": [f"q{i}" for i in range(60)], "y": np.tile([1] * 8 + [0] * 2, 6)})
    t = evalmix.read(df, outcome="y", clusters={"c": "c"})
    with pytest.warns(NotEstimableWarning, match="zero standard error"):
        r = evalmix.interval(t, "mean", method="CR2", cluster="c")
    assert r.estimate == pytest.approx(0.8) and np.isnan(r.lo)


def test_a_condition_seen_in_one_cluster_gets_no_difference():
    rng = np.random.default_rng(1)
    rows = [{"g": f"g{g}", "item": f"g{g}i{i}", "cond": cond,
             "y": int(rng.random() < (0.9 if cond == "new" else 0.5))}
            for g in range(8) for i in range(10) for cond in ("old", "new")
            if cond == "old" or g == 0]
    t = evalmix.read(pd.DataFrame(rows), outcome="y", condition="cond",
                     clusters={"g": "g"})
    with pytest.warns(NotEstimableWarning, match="'new' is seen in 1 g cluster"):
        r = evalmix.interval(t, "difference", conditions=("old", "new"), method="CR2",
                             cluster="g", paired=False)
    assert np.isnan(r.lo) and "at least 2 clusters" in r.note


def test_all_wins_is_not_a_zero_width_interval():
    df = pd.DataFrame({"item": [f"i{i}" for i in range(224)], "model_a": "x",
                       "model_b": "y", "outcome": "b"})
    t = evalmix.read(df, outcome="outcome", model_a="model_a", model_b="model_b",
                     clusters={"item": "item"})
    with pytest.warns(NotEstimableWarning):
        r = evalmix.interval(t, "win_rate", model="y", method="CR2", cluster="item")
    assert r.estimate == pytest.approx(1.0) and np.isnan(r.lo)


# ---------------------------------------------------------------- bounds
def test_proportion_intervals_are_logit_scale_and_stay_in_bounds():
    sim = evalmix.sim.clustered_scores(30, 20, p=0.97, icc=0.3, seed=2)
    t = sim.table()
    wald = evalmix.interval(t, "mean", method="CR2", cluster="cluster", scale="identity")
    r = evalmix.interval(t, "mean", method="CR2", cluster="cluster")
    assert r.scale == "logit" and wald.scale == "identity"
    assert (r.se, r.df) == (wald.se, wald.df)
    q = stats.t.ppf(0.975, r.df)
    s = r.se / (r.estimate * (1 - r.estimate))
    assert (r.lo, r.hi) == pytest.approx((expit(logit(r.estimate) - q * s),
                                          expit(logit(r.estimate) + q * s)), rel=EXACT_TOL)
    assert 0 < r.lo < r.estimate < r.hi < 1
    t_stat = abs(logit(r.estimate) - logit(0.5)) / s
    assert r.p_value == pytest.approx(2 * stats.t.sf(t_stat, r.df), rel=EXACT_TOL)
    numeric = evalmix.read(sim.data.assign(y=sim.data["y"] * 7.0), outcome="y",
                           clusters={"cluster": "cluster"})
    with pytest.raises(EvalmixError, match="scale='logit' is for proportions"):
        evalmix.interval(numeric, "mean", method="CR2", cluster="cluster", scale="logit")


# ---------------------------------------------------------------- one sign convention
def test_pairwise_difference_is_b_minus_a_win_rates_everywhere(judged):
    t = judged.table()
    d = evalmix.interval(t, "difference", conditions=("control", "treatment"), method="CR2",
                         cluster="scenario")
    wins = {m: evalmix.interval(t, "win_rate", model=m, method="naive").estimate
            for m in ("control", "treatment")}
    assert d.contrast == "treatment - control"
    assert d.estimate == pytest.approx(wins["treatment"] - wins["control"], rel=EXACT_TOL)
    c = evalmix.interval(t, "win_rate", contrast="treatment", method="naive")
    assert c.contrast == "treatment vs reference"
    assert c.estimate == pytest.approx(wins["treatment"], rel=EXACT_TOL)
    rep = _quiet(evalmix.analyze, t, fast=True, methods=["naive", "CR2"], progress=False,
                 seed=1, backend="statsmodels", sampled=["scenario"])
    iv = rep.intervals.set_index(["estimand", "contrast", "method", "cluster"])
    assert iv.loc[("difference", "treatment - control", "CR2", "scenario"),
                  "estimate"] == pytest.approx(d.estimate, rel=EXACT_TOL)
    assert iv.loc[("win_rate", "treatment vs reference", "naive", ""),
                  "estimate"] == pytest.approx(wins["treatment"], rel=EXACT_TOL)


def test_named_conditions_state_the_named_models_difference():
    rng = np.random.default_rng(3)
    rows = []
    for i in range(60):
        for m, p in (("gpt4", 0.55), ("claude", 0.45)):
            rows.append({"item": f"q{i}", "model_a": "base", "model_b": m,
                         "outcome": "b" if rng.random() < p else "a"})
    t = evalmix.read(pd.DataFrame(rows), outcome="outcome", model_a="model_a",
                     model_b="model_b", clusters={"item": "item"})
    r = evalmix.interval(t, "difference", conditions=("gpt4", "claude"), method="CR2",
                         cluster="item")
    g = evalmix.interval(t, "win_rate", model="gpt4", method="naive").estimate
    c = evalmix.interval(t, "win_rate", model="claude", method="naive").estimate
    assert r.contrast == "claude - gpt4" and c < g
    assert r.estimate == pytest.approx(c - g, rel=EXACT_TOL) and r.estimate < 0


def test_separate_ties_score_the_named_model_strictly():
    sim = evalmix.sim.pairwise_judges(8, 3, 2, 2, seed=8)
    t = sim.table(ties="separate")
    d = t.data
    rep = _quiet(evalmix.analyze, t, fast=True, methods=["naive"], progress=False, seed=1,
                 backend="statsmodels")
    iv = rep.intervals.set_index(["estimand", "contrast", "method"])
    strict = (d.loc[d["model_b"] == "treatment", "verdict"] == "b").mean()
    assert iv.loc[("win_rate", "treatment vs reference", "naive"),
                  "estimate"] == pytest.approx(strict, rel=EXACT_TOL)


def test_paired_auto_warns_when_pairing_on_groups():
    rng = np.random.default_rng(2)
    df = pd.DataFrame([{"grp": f"g{g}", "cond": c, "q": f"g{g}{c}{k}",
                        "y": int(rng.random() < 0.6)}
                       for g in range(10) for c in ("a", "b") for k in range(3 + 5 * g)])
    t = evalmix.read(df, outcome="y", condition="cond", clusters={"grp": "grp"})
    with pytest.warns(EvalmixWarning, match="equal-weight mean of per-unit differences"):
        r = evalmix.interval(t, "difference", method="CR2", cluster="grp")
    assert r.paired and "rows per condition" in r.details["pairing_note"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvalmixWarning)
        evalmix.interval(t, "difference", method="CR2", cluster="grp", paired=True)


def test_analyze_refuses_a_negative_seed_and_records_a_generator_seed(judged):
    t = judged.table()
    with pytest.raises(EvalmixError, match="negative"):
        evalmix.analyze(t, seed=-1, fast=True, methods=["naive"], progress=False)
    rep = _quiet(evalmix.analyze, t, seed=np.random.default_rng(5), fast=True,
                 methods=["naive"], progress=False)
    assert rep.summary["seed"] == int(np.random.default_rng(5).integers(2**31))
