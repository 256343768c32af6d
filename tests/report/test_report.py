"""analyze() and the Report: decision/fragile logic, headline ratios, position bias.

References used here: closed forms (the CR1 SE of an intercept-only model with equal
cluster sizes equals the SE of the cluster means; y = 1,4,11,6,13,8 in clusters
1,1,2,2,3,3 gives 2.4037009, the identity from issue 3), hand-built AB/BA pairs whose
position bias is known exactly, and statsmodels OLS with cluster-robust covariance.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.compare.decide import INTERVAL_COLUMNS, add_decisions, headline
from evalmix.compare.position import mean_cr1, position_bias
from evalmix.compare.recommend import contrasts, recommend_cluster

#: Closed-form identities are exact up to floating point.
EXACT_TOL = 1e-9
#: statsmodels computes the same sandwich through a different code path.
STATSMODELS_TOL = 1e-8
FILE_COLUMNS = ["estimand", "contrast", "method", "cluster", "estimate", "se", "lo", "hi",
                "level", "df", "n_clusters", "n_obs", "decision", "fragile"]


def _rows(specs):
    base = {"se": np.nan, "level": 0.95, "df": np.nan, "n_clusters": 10, "n_obs": 100,
            "p_value": np.nan, "reps": 0, "seed": None, "ci_type": "t", "paired": None,
            "source": "design", "note": ""}
    return pd.DataFrame([{**base, "estimand": e, "contrast": c, "method": m, "cluster": cl,
                          "estimate": (lo + hi) / 2, "lo": lo, "hi": hi, "null": null}
                         for e, c, m, cl, lo, hi, null in specs])


# ---------------------------------------------------------------- decisions / fragile
def test_decision_and_fragile_on_constructed_rows():
    f = _rows([
        ("win_rate", "A", "naive", "", 0.55, 0.60, 0.5),        # excludes 0.5
        ("win_rate", "A", "CR2", "item", 0.48, 0.67, 0.5),      # contains 0.5
        ("win_rate", "A", "bootstrap", "item", np.nan, np.nan, 0.5),  # no interval
        ("win_rate", "B", "naive", "", 0.30, 0.40, 0.5),        # excludes (below)
        ("win_rate", "B", "CR2", "item", 0.20, 0.49, 0.5),      # excludes -> not fragile
        ("win_rate", "B", "wild", "judge", -np.inf, np.inf, 0.5),  # unbounded: no vote
        ("difference", "B - A", "naive", "", -0.20, -0.01, 0.0),
        ("difference", "B - A", "CR2", "item", -0.25, 0.02, 0.0),
        ("difference", "C - A", "CR2", "item", -0.25, -0.02, 0.0),   # two plausible
        ("difference", "C - A", "CR2", "group", -0.30, 0.05, 0.0),   # levels disagree
    ])
    out = add_decisions(f)
    assert out["decision"].tolist()[:2] == [True, False]
    assert pd.isna(out["decision"].iloc[2])
    assert out["decision"].tolist()[3:6] == [True, True, False]
    assert out["decision"].tolist()[6:8] == [True, False]
    # naive (and Wilson) rows are the baseline: they never make a contrast fragile
    assert not out["votes"].iloc[0] and not out["votes"].iloc[6]
    assert not out.loc[out["contrast"] == "A", "fragile"].any()
    assert not out.loc[out["contrast"] == "B", "fragile"].any()
    assert not out.loc[out["contrast"] == "B - A", "fragile"].any()
    assert out.loc[out["contrast"] == "C - A", "fragile"].all()
    # rows marked as not voting (e.g. clustered by a fixed factor) do not either
    f2 = f.assign(votes=f["cluster"] != "group")
    assert not add_decisions(f2).loc[lambda d: d["contrast"] == "C - A", "fragile"].any()


def test_headline_ratio_is_width_ratio_and_never_falls_back():
    f = add_decisions(_rows([
        ("win_rate", "A", "naive", "", 0.55, 0.60, 0.5),
        ("win_rate", "A", "CR2", "item", 0.48, 0.65, 0.5),      # contains 0.5
        ("win_rate", "B", "naive", "", 0.40, 0.50, 0.5),
        ("win_rate", "B", "CR1", "item", 0.30, 0.60, 0.5),      # no CR2 row
    ]))
    h = headline(f, cluster="item", method="CR2").set_index("contrast")
    assert h.loc["A", "width_ratio"] == pytest.approx(0.17 / 0.05, rel=EXACT_TOL)
    assert h.loc["A", "message"] == "your error bar was 3.4x too narrow"
    # the recommended row is missing: no other method stands in for it
    assert h.loc["B", "method"] == "CR2" and np.isnan(h.loc["B", "width_ratio"])
    assert h.loc["B", "message"].startswith("not estimable at this cluster level")
    assert pd.isna(h.loc["B", "decision"]) and np.isnan(h.loc["B", "lo"])


# ---------------------------------------------------------------- closed forms
def test_mean_cr1_equals_se_of_cluster_means():
    est, se, lo, hi, g = mean_cr1(np.array([1, 4, 11, 6, 13, 8.0]), np.array([1, 1, 2, 2, 3, 3]))
    assert g == 3
    assert est == pytest.approx(43 / 6, rel=EXACT_TOL)
    assert se == pytest.approx(2.4037009, abs=5e-8)  # 7 significant digits given


def test_mean_cr1_matches_statsmodels():
    import statsmodels.api as sm
    rng = np.random.default_rng(5)
    cl = rng.integers(0, 17, 300)
    y = (rng.random(300) < 0.3 + 0.02 * cl).astype(float)
    _, se, *_ = mean_cr1(y, cl)
    res = sm.OLS(y, np.ones((300, 1))).fit(cov_type="cluster", cov_kwds={"groups": cl})
    # statsmodels' default cluster correction: G/(G-1) * (N-1)/(N-k); k = 1 -> G/(G-1)
    assert se == pytest.approx(float(res.bse[0]), rel=STATSMODELS_TOL)


def _pairs_table(kind: str):
    """Two judges on 40 items, both orders. 'first' always prefers the first-shown
    answer; 'steady' always prefers model_a."""
    rows = []
    for judge in ("first", "steady"):
        for i in range(40):
            for first in ("a", "b"):
                out = first if judge == "first" else "a"
                rows.append({"item": f"i{i}", "judge": judge, "model_a": "base",
                             "model_b": "new", "first_shown": first, "outcome": out})
    df = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.read(df, outcome="outcome", model_a="model_a", model_b="model_b",
                            first_shown="first_shown",
                            clusters={"item": "item", "judge": "judge"}, ties=kind)


def test_position_bias_on_known_pairs():
    pos = position_bias(_pairs_table("half"), judge="judge", cluster="item").set_index("judge")
    assert pos.loc["first", "first_shown_win_rate"] == pytest.approx(1.0)
    assert pos.loc["first", "flip_rate"] == pytest.approx(1.0)
    assert pos.loc["first", "consistency"] == pytest.approx(0.0)
    assert pos.loc["steady", "first_shown_win_rate"] == pytest.approx(0.5)
    assert pos.loc["steady", "flip_rate"] == pytest.approx(0.0)
    assert pos.loc["steady", "consistency"] == pytest.approx(1.0)
    assert pos.loc["(all judges)", "first_shown_win_rate"] == pytest.approx(0.75)
    assert pos.loc["first", "n_pairs"] == 40


# ---------------------------------------------------------------- plan
def test_recommendation_is_the_coarsest_sampled_level_whatever_its_size():
    rows = [{"item": f"q{i}", "group": f"g{i % 8}", "judge": j, "model_a": "base",
             "model_b": "new", "outcome": "a" if (i + k) % 3 else "b"}
            for i in range(80) for k, j in enumerate(("j1", "j2", "j3"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.read(pd.DataFrame(rows), outcome="outcome", model_a="model_a",
                         model_b="model_b",
                         clusters={"item": "item", "group": "group", "judge": "judge"})
    rec = recommend_cluster(t)
    # items are nested in the 8 groups: clustering by item would treat the items of one
    # group as independent, so the 8 groups are the unit even though they are few
    assert rec.cluster == ("group",) and rec.method == "CR2" and rec.n_clusters == 8
    assert rec.sampled == ("item", "group") and rec.fixed == ("judge",)
    assert rec.few_levels == ("group",) and "'item' is nested in it" in rec.reason
    assert "few independent levels" in rec.reason
    # declaring only the items as sampled makes them the unit
    assert recommend_cluster(t, sampled=["item"]).cluster == ("item",)
    keys = [c.key for c in contrasts(t)]
    assert keys == [("win_rate", "new vs base")]  # no order column: no controlled rate


# ---------------------------------------------------------------- analyze end to end
@pytest.fixture(scope="module")
def small_report():
    from evalmix.sim import pairwise_judges

    sim = pairwise_judges(12, 4, 2, 2, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = sim.table()
    return evalmix.analyze(table, fast=True, reps=199, seed=3, progress=False,
                           backend="statsmodels")


def test_analyze_columns_and_rows(small_report):
    iv = small_report.intervals
    assert list(iv.columns[:14]) == FILE_COLUMNS
    assert list(iv.columns) == list(INTERVAL_COLUMNS)
    assert set(iv["estimand"]) == {"win_rate", "controlled_win_rate", "difference"}
    assert {"naive", "CR1", "CR2", "CR3", "bootstrap", "wild"} <= set(iv["method"])
    assert {"", "scenario", "persona", "scenario+persona"} <= set(iv["cluster"])
    ok = iv[np.isfinite(iv["lo"].astype(float))]
    assert len(ok) >= 0.6 * len(iv)
    assert (ok["lo"] <= ok["estimate"] + 1e-12).all() and (ok["estimate"] <= ok["hi"] + 1e-12).all()


def test_analyze_decisions_follow_intervals(small_report):
    iv = small_report.intervals
    lo, hi = iv["lo"].astype(float), iv["hi"].astype(float)
    ok = iv[lo.notna() & hi.notna() & (hi > lo)]  # (-inf, inf) counts: it contains the null
    expect = (ok["lo"] > ok["null"]) | (ok["hi"] < ok["null"])
    assert (ok["decision"].astype(bool) == expect).all()
    assert iv.loc[~iv.index.isin(ok.index), "decision"].isna().all()
    nulls = iv.groupby("estimand")["null"].first()
    assert nulls["win_rate"] == 0.5 and nulls["difference"] == 0.0
    for _, part in iv.groupby(["estimand", "contrast"]):
        bounded = np.isfinite(part["lo"].astype(float)) & np.isfinite(part["hi"].astype(float))
        voters = bounded & part["votes"].astype(bool)
        fragile = part.loc[voters, "decision"].dropna().nunique() > 1
        assert (part["fragile"] == fragile).all()
    # naive and Wilson rows never vote; rows clustered by the fixed judge never vote
    assert not iv.loc[iv["method"].isin(["naive", "wilson"]), "votes"].any()
    assert not iv.loc[iv["cluster"].str.contains("judge"), "votes"].any()


def test_win_rates_are_model_b_side(small_report):
    t = small_report
    iv = t.intervals
    naive = iv[(iv["method"] == "naive") & (iv["estimand"] == "win_rate")].set_index("contrast")
    from evalmix.sim import pairwise_judges

    data = pairwise_judges(12, 4, 2, 2, seed=11).data
    for cond in ("control", "treatment"):
        part = data[data["model_b"] == cond]
        score_b = ((part["outcome"] == "b") + 0.5 * (part["outcome"] == "tie")).mean()
        assert naive.loc[f"{cond} vs reference", "estimate"] == pytest.approx(score_b,
                                                                               rel=EXACT_TOL)


def test_headline_ratio_equals_interval_widths(small_report):
    rep = small_report
    iv, rec = rep.intervals, rep.recommendation
    assert not rep.headline.empty
    for _, h in rep.headline.iterrows():
        part = iv[(iv["estimand"] == h["estimand"]) & (iv["contrast"] == h["contrast"])]
        n = part[part["method"] == "naive"].iloc[0]
        r = part[(part["method"] == h["method"]) & (part["cluster"] == h["cluster"])].iloc[0]
        assert h["cluster"] == rec["cluster"]
        assert h["width_ratio"] == pytest.approx((r["hi"] - r["lo"]) / (n["hi"] - n["lo"]),
                                                 rel=EXACT_TOL)


def test_report_serialises(small_report, tmp_path):
    d = json.loads(small_report.to_json())
    assert {"intervals", "headline", "warnings", "design", "summary"} <= set(d)
    # scenarios, personas and authors are sampled (judges fixed): multiway over all three
    assert d["design"]["recommendation"]["cluster"] == "scenario+persona+author"
    assert d["design"]["recommendation"]["fixed"] == ["judge"]
    assert small_report.summary["seed"] == 3
    md = small_report.to_markdown()
    assert "Headline" in md and "scenario" in md
    assert any("persona" in w and "levels" in w for w in small_report.warnings)


# ---------------------------------------------------------------- model rows
def test_model_rows_take_population_averaged_probabilities():
    from evalmix.compare.model_rows import _rows_from_fit, _variance_rows
    from evalmix.compare.recommend import Contrast
    from evalmix.models.result import ModelFit

    plan = [Contrast("win_rate", "control vs reference", "model_b", ("control",), 0.5, True),
            Contrast("controlled_win_rate", "control vs reference", "model_b", ("control",),
                     0.5, True, primary=False),
            Contrast("difference", "treatment - control", "model_b", ("control", "treatment"),
                     0.0, True)]
    pop, typ = "population-averaged (random effects integrated out)", "typical cluster"
    fe = pd.DataFrame([
        ("P[control]", 0.55, 0.02, 0.51, 0.59, 0.95, "probability-typical", typ),
        ("P[control]", 0.54, 0.03, 0.48, 0.60, 0.95, "probability", pop),
        ("P[treatment] - P[control]", 0.06, 0.02, 0.02, 0.10, 0.95, "probability", pop),
        ("position", 0.4, 0.1, 0.2, 0.6, 0.95, "log-odds", ""),
    ], columns=["term", "estimate", "se", "lo", "hi", "level", "scale", "label"])
    var = pd.DataFrame({"factor": ["scenario", "judge", "Residual"], "sd": [1.0, 0.5, 1.8138],
                        "variance": [1.0, 0.25, 3.29], "share": [1 / 4.54, 0.25 / 4.54,
                                                                 3.29 / 4.54],
                        "icc": np.nan, "sd_lo": [0.5, 0.1, np.nan], "sd_hi": [2.0, 1.0, np.nan],
                        "var_lo": [0.25, 0.01, np.nan], "var_hi": [4.0, 1.0, np.nan],
                        "level": 0.95, "backend": "bayes"})
    f = ModelFit(backend="bayes", family="binomial", formula="y ~ ...", fixed_effects=fe,
                 variance=var)
    rows = pd.DataFrame(_rows_from_fit(f, "bayes", plan, 0.95, 100)).set_index("estimand")
    assert rows.loc["win_rate", "estimate"] == 0.54  # population-averaged, not typical
    assert rows.loc["controlled_win_rate", "hi"] == 0.60
    assert rows.loc["difference", "lo"] == 0.02 and rows.loc["difference", "cluster"] == "model"
    v = _variance_rows(f, "bayes").set_index("factor")
    # share interval: the SD bound squared over itself plus the other components
    assert v.loc["scenario", "share_lo"] == pytest.approx(0.25 / (0.25 + 3.54), rel=1e-12)
    assert v.loc["scenario", "share_hi"] == pytest.approx(4.0 / (4.0 + 3.54), rel=1e-12)


def test_scores_table_means_and_differences():
    rng = np.random.default_rng(4)
    item_effect = np.repeat(rng.normal(0, 1, 30), 4)
    df = pd.DataFrame({"item": np.repeat(np.arange(30), 4),
                       "cond": np.tile(["A", "A", "B", "B"], 30)})
    df["score"] = 5 + item_effect + 0.4 * (df["cond"] == "B") + rng.normal(0, 1, len(df))
    t = evalmix.read(df, outcome="score", condition="cond", clusters={"item": "item"})
    rep = evalmix.analyze(t, fast=True, backend="statsmodels", reps=199, seed=1,
                          progress=False, methods=["naive", "CR2", "mixedlm"],
                          cluster_levels=["none"])
    iv = rep.intervals
    assert set(zip(iv["estimand"], iv["contrast"], strict=True)) == {
        ("mean", "A"), ("mean", "B"), ("difference", "B - A")}
    # the recommended level (item, 30 clusters) is added even when not asked for
    assert rep.recommendation["cluster"] == "item"
    assert set(iv.loc[iv["source"] == "design", "cluster"]) == {"", "item"}
    # a 1-10 style score has no natural null: means carry no decision
    assert iv.loc[iv["estimand"] == "mean", "decision"].isna().all()
    naive = iv[(iv["estimand"] == "mean") & (iv["method"] == "naive")].set_index("contrast")
    assert naive.loc["B", "estimate"] == pytest.approx(df.loc[df["cond"] == "B", "score"].mean(),
                                                       rel=EXACT_TOL)
    assert "mixedlm" in set(iv["method"])


def test_bradley_terry_design_gets_one_contrast_per_pair():
    from evalmix.compare.recommend import select_rows

    rows = [{"item": f"q{i}", "model_a": a, "model_b": b, "outcome": "a" if i % 3 else "b"}
            for i in range(30) for a, b in (("m1", "m2"), ("m1", "m3"), ("m2", "m3"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.read(pd.DataFrame(rows), outcome="outcome", model_a="model_a",
                         model_b="model_b", clusters={"item": "item"})
    cs = contrasts(t)
    assert [c.contrast for c in cs] == ["m2 vs m1", "m3 vs m1", "m3 vs m2"]
    assert all(c.estimand == "win_rate" for c in cs)  # no differences across opponents
    assert [int(select_rows(t, c).sum()) for c in cs] == [30, 30, 30]


# ---------------------------------------------------------------- prior sensitivity
#: Short MCMC: the test checks the table's plumbing, not the posterior.
SENSITIVITY_FIT = {"backend": "bayes", "methods": ["naive", "CR2", "bayes"],
                   "levels": ["none"], "reps": 99, "draws": 300, "seed": 1,
                   "progress": False}


@pytest.fixture(scope="module")
def judges3_table():
    from evalmix.sim import pairwise_judges

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pairwise_judges(12, 4, 3, 3, tie_threshold=0, seed=5).table()


@pytest.fixture(scope="module")
def bayes_report(judges3_table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.analyze(judges3_table, **SENSITIVITY_FIT)


def test_few_level_factors_follow_the_table_and_fixed(judges3_table):
    from evalmix.compare.model_rows import _few_level_factors

    assert _few_level_factors(judges3_table, {}) == {"persona": 4, "author": 3, "judge": 3}
    assert _few_level_factors(judges3_table, {"fixed": ("judge",)}) == {"persona": 4,
                                                                        "author": 3}
    assert _few_level_factors(judges3_table, {"fixed": "judge"}) == {"persona": 4,
                                                                     "author": 3}


@pytest.mark.mcmc
def test_three_judges_get_a_prior_sensitivity_table(bayes_report, tmp_path):
    s = bayes_report.prior_sensitivity
    assert s is not None
    assert {"term", "estimate@1", "lo@1", "hi@1", "estimate@2.5", "lo@2.5", "hi@2.5"} \
        <= set(s.columns)
    assert "sd[judge]" in set(s["term"]) and "condition[treatment]" in set(s["term"])
    models = bayes_report.summary["models"]["bayes"]
    # 2.5x wider priors on 3-level SDs: the joint weights on (u, sd) had Pareto k > 0.7
    # (a refit); the weights on the marginal prior of u (SDs integrated out) do not
    assert models["prior_sensitivity"] == {"scale": 2.5, "few_level_factors": {
        "persona": 4, "author": 3, "judge": 3}, "method": "psis"}
    assert any("prior_sensitivity.csv" in w for w in bayes_report.warnings)
    assert "prior_sensitivity" in json.loads(bayes_report.to_json())

    paths = bayes_report.write(tmp_path)
    on_disk = pd.read_csv(paths["prior_sensitivity.csv"])
    assert list(on_disk.columns) == list(s.columns) and len(on_disk) == len(s)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {r["term"] for r in summary["prior_sensitivity"]} == set(s["term"])
    md = (tmp_path / "report.md").read_text()
    section = md.split("## Prior sensitivity (Bayesian model)", 1)[1].split("\n## ", 1)[0]
    assert "2.5x wider" in section and "judge (3 levels)" in section
    assert "reweighted by Pareto-smoothed importance sampling" in section
    assert "| sd[judge] |" in section and "| condition[treatment] |" in section
    # the logistic residual SD is the same constant in both fits: not shown
    assert "sd[Residual]" not in section
    judge = s.set_index("term").loc["sd[judge]"]
    assert f"| {judge['estimate@2.5']:.3f} |" in section  # rounded to 3 decimals
    assert "<h2>Prior sensitivity (Bayesian model)</h2>" in (tmp_path / "report.html").read_text()


@pytest.mark.mcmc
def test_sensitivity_none_switches_the_refit_off(judges3_table, bayes_report, tmp_path):
    from dataclasses import replace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(judges3_table, fit_options={"sensitivity": None},
                              **SENSITIVITY_FIT)
    assert rep.prior_sensitivity is None
    assert "prior_sensitivity" not in rep.summary["models"]["bayes"]
    assert "prior_sensitivity" not in rep.to_dict()
    assert "Prior sensitivity" not in rep.to_markdown()
    # writing the same report without the table over one with it: no file (the stale
    # one, in the earlier report's manifest, is removed)
    bayes_report.write(tmp_path)
    assert (tmp_path / "prior_sensitivity.csv").is_file()
    paths = replace(bayes_report, prior_sensitivity=None).write(tmp_path)
    assert "prior_sensitivity.csv" not in paths
    assert not (tmp_path / "prior_sensitivity.csv").exists()


def test_markdown_tables_escape_pipes_in_cells():
    """Random-term names such as ``sd[position|judge]`` keep their ``|`` in the Markdown
    report (escaped), and the table keeps its columns (rendered by markdown-it, which
    rich depends on, with GFM tables)."""
    from markdown_it import MarkdownIt

    from evalmix.report.render import _table_md

    df = pd.DataFrame({"factor": ["position|judge", "a\\b"], "sd|x": [0.5, 1.0]})
    html = MarkdownIt("commonmark").enable("table").render(_table_md(df))
    rows = html.split("<tr>")[1:]
    assert len(rows) == 3 and all(r.count("<td>") + r.count("<th>") == 2 for r in rows)
    assert "<th>sd|x</th>" in html and "<td>position|judge</td>" in html
    assert "<td>a\\b</td>" in html


def test_many_models_get_a_leaderboard_at_the_recommended_level(tmp_path):
    from evalmix.inference.leaderboard import leaderboard
    from evalmix.sim.boards import baseline_leaderboard

    t = baseline_leaderboard(n_models=8, n_items=40, n_judges=2, seed=2).table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(t, fast=True, methods=["naive", "CR2"], progress=False, seed=4)
        direct = leaderboard(t, cluster="item", method="CR2", seed=4)
    assert rep.recommendation["cluster"] == "item"
    pd.testing.assert_frame_equal(rep.leaderboard, direct.tidy())
    assert len(rep.leaderboard_pairs) == 8 * 7 // 2
    paths = rep.write(tmp_path / "r")
    assert paths["leaderboard.csv"].is_file() and paths["leaderboard_pairs.csv"].is_file()
    assert "every model pair" in paths["report.md"].read_text()
    assert (tmp_path / "r" / "plots" / "leaderboard.png").is_file()
    # the JSON holds every table the folder holds (one table of parts: report.PARTS)
    from evalmix.report.report import PARTS

    data = json.loads(rep.to_json())
    written = {f for f in paths if f.endswith(".csv")}
    assert written == set(rep.frames()) == {"intervals.csv", "variance.csv", "judges.csv",
                                            "leaderboard.csv", "leaderboard_pairs.csv"}
    for part in PARTS:
        if part.file in written:
            assert len(data[part.attr]) == len(pd.read_csv(paths[part.file])), part
    # few models: no leaderboard (the contrasts list every difference)
    from evalmix.sim import pairwise_judges

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        few = evalmix.analyze(pairwise_judges(6, 3, 2, 2, seed=1).table(), fast=True,
                              methods=["naive", "CR2"], progress=False, seed=1)
    assert few.leaderboard is None


def test_report_md_links_only_the_figures_written(small_report, tmp_path):
    """report.md links plots/controlled.png only when the controlled-rate figure is drawn:
    with the recommended level's controlled rows missing there is none (issue 16: the
    link was kept and pointed at a file never written)."""
    import dataclasses
    import re

    rec, iv = small_report.recommendation, small_report.intervals
    gone = ((iv["estimand"] == "controlled_win_rate") & (iv["method"] == rec["method"])
            & (iv["cluster"] == rec["cluster"]))
    assert gone.any()
    rep = dataclasses.replace(small_report, intervals=iv[~gone].reset_index(drop=True))
    rep.write(tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    linked = re.findall(r"\]\((plots/[^)]+\.png)\)", md)
    assert linked and all((tmp_path / "r" / p).is_file() for p in linked), linked
    assert "plots/controlled.png" not in md
    small_report.write(tmp_path / "full")   # the complete report draws and links it
    assert (tmp_path / "full" / "plots" / "controlled.png").is_file()
    assert "plots/controlled.png" in (tmp_path / "full" / "report.md").read_text()


def test_a_model_fit_without_report_rows_says_so():
    """A linear-probability mixedlm on win rates answers none of the contrasts: the
    report says so instead of silently showing nothing for it."""
    from evalmix.sim import pairwise_judges

    t = pairwise_judges(12, 3, 2, 2, tie_threshold=0, seed=3).table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(t, methods=["naive", "CR2", "mixedlm"], backend="statsmodels",
                              progress=False, seed=1, reps=99)
    assert (rep.intervals["source"] == "model").sum() == 0
    assert not rep.variance.empty
    assert any("mixedlm fit answers none of this report's contrasts" in w
               and "glmm_laplace" in w for w in rep.warnings)
