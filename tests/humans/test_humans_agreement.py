"""evalmix.agreement against sklearn, krippendorff, statsmodels, scipy and Zheng et al.

Real files from ../shared/data/humans (skipped when absent) and the bundled MT-Bench
human judgments. Tolerances: 1e-10 for coefficients (the same sums in another order),
1e-12 for FastChat's vote counting (exact).
"""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa, fleiss_kappa

import evalmix
import evalmix.datasets
from evalmix.errors import DroppedRowsWarning, EvalmixError, FewClustersWarning
from evalmix.humans import read_ratings
from evalmix.humans.coefficients import table_stat

HUMANS = SHARED_DATA / "humans"
TOL = 1e-10
needs_shared = pytest.mark.skipif(not HUMANS.exists(), reason="../shared/data/humans absent")


def quiet(f, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        return f(*a, **k)


def row(res, r1, r2, stat, method="delta", stratum=""):
    t = res.table
    sel = t[(t.rater_1 == r1) & (t.rater_2 == r2) & (t.statistic == stat)
            & (t.method == method) & (t.stratum == stratum)]
    assert len(sel) == 1, (r1, r2, stat, method)
    return sel.iloc[0]


@pytest.fixture(scope="module")
def hanna():
    if not HUMANS.exists():
        pytest.skip("../shared/data/humans absent")
    d = pd.read_csv(HUMANS / "hanna" / "hanna_ratings.csv.gz")
    return d[d["dimension"].isin(["relevance", "coherence"])]


@pytest.fixture(scope="module")
def hanna_humans(hanna):
    h = hanna[hanna["rater_kind"] == "human"]
    return h, quiet(evalmix.agreement, h, by="dimension", cluster="item_group",
                    method="delta")


# ------------------------------------------------------------------ coefficients
def test_kappas_equal_sklearn_on_hanna_humans(hanna_humans):
    h, res = hanna_humans
    assert res.scale == "ordered"
    for dim in ("relevance", "coherence"):
        wide = h[h.dimension == dim].pivot(index="item_id", columns="rater", values="score")
        for stat, w in (("cohen_kappa", None), ("kappa_linear", "linear"),
                        ("kappa_quadratic", "quadratic")):
            got = row(res, "human_1", "human_2", stat, stratum=dim)["estimate"]
            want = cohen_kappa_score(wide["human_1"], wide["human_2"], weights=w)
            assert abs(got - want) < TOL


def test_alpha_equals_krippendorff_on_hanna(hanna_humans, hanna):
    h, res = hanna_humans
    for dim in ("relevance", "coherence"):
        wide = h[h.dimension == dim].pivot(index="item_id", columns="rater", values="score")
        for metric in ("nominal", "ordinal", "interval"):
            got = res.ceiling(f"alpha_{metric}").set_index("stratum").loc[dim, "estimate"]
            want = krippendorff.alpha(reliability_data=wide.T.to_numpy(),
                                      level_of_measurement=metric)
            assert abs(got - want) < TOL
    # all 23 raters (LLM scores are 3-try means: continuous, interval alpha by moments)
    d = hanna[hanna.dimension == "coherence"].copy()
    prompt = d["eval_prompt"].fillna(0).astype(int).astype(str)
    d["who"] = np.where(d["rater_kind"] == "human", d["rater"], d["rater"] + " " + prompt)
    full = quiet(evalmix.agreement, d, rater="who", method="delta", pairs="humans")
    assert full.scale == "continuous"
    wide = d.pivot(index="item_id", columns="who", values="score")
    got = row(full, "all", "", "alpha_interval")["estimate"]
    want = krippendorff.alpha(reliability_data=wide.T.to_numpy(),
                              level_of_measurement="interval")
    assert abs(got - want) < TOL
    x, y = wide["ChatGPT 1"], wide["human_1"]
    for stat, f in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        assert abs(row(full, "ChatGPT 1", "human_1", stat)["estimate"]
                   - f(x, y).statistic) < TOL


def test_nominal_alpha_with_missing_ratings_equals_krippendorff_on_mtbench():
    d = evalmix.datasets.mtbench_human()
    res = evalmix.agreement(d, method="delta", min_items=2)
    codes = d["outcome"].map({"b": 0, "tie": 1, "a": 2})
    wide = d.assign(code=codes).pivot(index="item_id", columns="rater", values="code")
    want = krippendorff.alpha(reliability_data=wide.T.to_numpy(dtype=float),
                              level_of_measurement="nominal")
    assert abs(row(res, "all", "", "alpha_nominal")["estimate"] - want) < TOL


def test_fleiss_kappa_and_delta_se_equal_statsmodels(hanna_humans):
    h, res = hanna_humans
    wide = h[h.dimension == "relevance"].pivot(index="item_id", columns="rater",
                                               values="score").astype(int)
    counts = np.stack([(wide.to_numpy() == c).sum(axis=1) for c in range(1, 6)], axis=1)
    got = res.ceiling("fleiss_kappa").set_index("stratum").loc["relevance", "estimate"]
    assert abs(got - fleiss_kappa(counts, method="fleiss")) < TOL
    # the delta SE of kappa without clusters is Fleiss, Cohen & Everitt's (statsmodels)
    plain = quiet(evalmix.agreement, h[h.dimension == "relevance"], method="delta")
    table = pd.crosstab(wide["human_1"], wide["human_3"]).to_numpy()
    for stat, wt in (("cohen_kappa", None), ("kappa_linear", "linear"),
                     ("kappa_quadratic", "quadratic")):
        sm = cohens_kappa(table, wt=wt) if wt else cohens_kappa(table)
        r = row(plain, "human_1", "human_3", stat)
        assert abs(r["estimate"] - sm.kappa) < TOL and abs(r["se"] - sm.std_kappa) < TOL


def test_gwet_ac1_closed_form():
    """Gwet (2008): p_e = sum_k pi_k (1 - pi_k) / (q - 1) with pi_k the mean margin."""
    C = np.array([[40., 6, 2], [5, 25, 4], [1, 3, 14]])
    n = C.sum()
    po = np.trace(C) / n
    pi = (C.sum(0) + C.sum(1)) / (2 * n)
    pe = np.sum(pi * (1 - pi)) / 2
    got = table_stat("gwet_ac1", np.arange(3.0), 3)(C.reshape(1, -1))[0]
    assert abs(got - (po - pe) / (1 - pe)) < TOL


# ------------------------------------------------------------------ Zheng et al.
def fastchat_agreement(d: pd.DataFrame, ban: set[str]) -> float:
    """FastChat's compute_agreement.py (gpt4-pair vs human): every human vote against
    GPT-4's vote on the same comparison, skipping votes in ``ban``."""
    agree = total = 0
    for _, g in d.groupby("item_id"):
        gpt = g[g.rater_kind == "llm"]["outcome"].tolist()
        if not gpt or gpt[0] in ban:
            continue
        for v in g[g.rater_kind == "human"]["outcome"]:
            if v in ban:
                continue
            total += 1
            agree += v == gpt[0]
    return agree / total


def test_mtbench_gpt4_vs_human_reproduces_the_paper():
    """Zheng et al. (2023) Table: GPT-4 vs humans 66% with ties, 85% without (turn 1);
    the shared file gives 66.8% / 85.8% (../shared/data/humans/README.md)."""
    d = evalmix.datasets.mtbench_human()
    t1 = d[d["turn"] == 1]
    with pytest.warns(FewClustersWarning, match="8 clusters"):
        with_ties = evalmix.agreement(t1, cluster="item_group", method="delta")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewClustersWarning)
        without = quiet(evalmix.agreement, t1, ties="exclude", cluster="item_group",
                        method="delta")
    a = with_ties.vs_humans().set_index("rater_1").loc["gpt-4"]
    b = without.vs_humans().set_index("rater_1").loc["gpt-4"]
    assert round(a["estimate"], 3) == 0.668 and round(b["estimate"], 3) == 0.858
    assert abs(a["estimate"] - fastchat_agreement(t1, set())) < 1e-12
    assert abs(b["estimate"] - fastchat_agreement(t1, {"tie"})) < 1e-12
    assert a["lo"] < a["estimate"] < a["hi"] and a["n_clusters"] == 8
    assert abs(a["human_ceiling"] - 0.647) < 5e-4


# ------------------------------------------------------------------ intervals
def test_bootstrap_is_seeded_and_brackets_the_delta_interval():
    d = evalmix.datasets.mtbench_human()
    d = d.assign(question=d["question_id"].astype(str))
    a = evalmix.agreement(d, cluster="question", seed=3, reps=199, pairs="humans")
    b = evalmix.agreement(d, cluster="question", seed=3, reps=199, pairs="humans")
    pd.testing.assert_frame_equal(a.table, b.table)
    boot = row(a, "gpt-4", "humans", "percent_agreement", "bootstrap")
    delta = row(a, "gpt-4", "humans", "percent_agreement", "delta")
    assert boot["estimate"] == delta["estimate"]
    assert 0.5 < boot["se"] / delta["se"] < 2.0
    tidy = a.tidy()
    assert not tidy.duplicated(["estimand", "contrast", "method", "cluster", "scale"]).any()


def test_unclustered_bootstrap_of_patterns_matches_the_multinomial_delta():
    """Units are pooled by rating pattern (an exact multinomial bootstrap of units): its
    SD agrees with the delta SE on 900 units."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 900)
    rows = [(i, r, k, int(truth[i] if rng.random() < acc else 1 - truth[i]))
            for i in range(900) for r, k, acc in (("h1", "human", .85), ("h2", "human", .8),
                                                  ("llm", "llm", .9))]
    df = pd.DataFrame(rows, columns=["item_id", "rater", "rater_kind", "score"])
    res = evalmix.agreement(df, seed=2, reps=999)
    for stat in ("percent_agreement", "cohen_kappa", "alpha_nominal"):
        b, d = row(res, "llm", "h1", stat, "bootstrap"), row(res, "llm", "h1", stat)
        assert abs(b["se"] / d["se"] - 1) < 0.12


@needs_shared
def test_order_split_consistency_equals_a_direct_count():
    d = pd.read_csv(HUMANS / "llmbar" / "llmbar_judgments.csv.gz")
    d = d[(d["item_group"].str.startswith("LLMBar")) & d["rater"].isin(["GPT-4", "gold"])
          & d["strategy"].isin(["Vanilla"]) | (d["rater"] == "gold")]
    d = d[d["item_group"].str.startswith("LLMBar")]
    res = quiet(evalmix.agreement, d, cluster="item_group", method="delta")
    r = row(res, "GPT-4 [AB]", "GPT-4 [BA]", "percent_agreement")
    assert r["kind"] == "order"
    g = d[d.rater == "GPT-4"].dropna(subset=["outcome"])
    wide = g.pivot(index="item_id", columns="first_shown", values="outcome").dropna()
    assert r["n_units"] == len(wide)
    assert abs(r["estimate"] - (wide["a"] == wide["b"]).mean()) < 1e-12
    gold = d[d.rater == "gold"].set_index("item_id")["outcome"]
    ab = row(res, "GPT-4 [AB]", "gold", "percent_agreement")["estimate"]
    direct = (g[g.first_shown == "a"].set_index("item_id")["outcome"]
              == gold.reindex(g[g.first_shown == "a"]["item_id"])).mean()
    assert abs(ab - direct) < 1e-12


# ------------------------------------------------------------------ errors
def test_errors_name_the_column_and_the_fix():
    df = pd.DataFrame({"item_id": [1, 1, 1], "rater": ["a", "a", "b"],
                       "rater_kind": ["human", "human", "llm"], "score": [1, 2, 3]})
    with pytest.raises(EvalmixError, match="rater=\\['rater', 'vote'\\]"):
        read_ratings(df)
    with pytest.raises(EvalmixError, match="no column 'who'"):
        read_ratings(df, rater="who")
    bad = df.assign(rater=["a", "b", "c"], rater_kind=["human", "robot", "llm"])
    with pytest.raises(EvalmixError, match="'human' or 'llm'"):
        read_ratings(bad)
    with pytest.raises(EvalmixError, match="several values within unit"):
        read_ratings(bad.assign(rater_kind="human", g=[1, 2, 1]), cluster="g")
