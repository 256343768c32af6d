"""evalmix.alt_test against the authors' code (nitaytech/AltTest @ 18428b1).

tests/reference/humans/upstream_values.py ran the authors' ``alt_test`` on shared files
(HANNA coherence, PRD Vicuna80) and froze its winning rates and advantage probabilities;
evalmix must give the same numbers (1e-12: the same arithmetic). With
``EVALMIX_ALTTEST_DATA`` pointing at the authors' ``data/`` folder the notebook's printed
table for their nine datasets is reproduced as well.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE, SHARED_DATA
from statsmodels.stats.multitest import multipletests

import evalmix
from evalmix.errors import DroppedRowsWarning, EvalmixError
from evalmix.humans.alternative import benjamini_yekutieli

UPSTREAM = json.loads((REFERENCE / "humans" / "upstream_values.json").read_text())
HUMANS = SHARED_DATA / "humans"
needs_shared = pytest.mark.skipif(not HUMANS.exists(), reason="../shared/data/humans absent")


def quiet(f, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        return f(*a, **k)


@needs_shared
def test_hanna_equals_the_authors_code():
    d = pd.read_csv(HUMANS / "hanna" / "hanna_ratings.csv.gz")
    d = d[d["dimension"] == "coherence"]
    ref = UPSTREAM["alt_test"]["hanna_coherence"]
    prompt = d["eval_prompt"].fillna(0).astype(int).astype(str)
    d = d.assign(who=np.where(d["rater_kind"] == "llm", d["rater"] + " / " + prompt,
                              d["rater"]))
    res = evalmix.alt_test(d, rater="who", epsilon=ref["epsilon"])
    assert res.scoring == "neg_rmse"
    got = res.judges.set_index("judge")
    assert len(got) == len(ref["judges"]) == 20
    for judge, v in ref["judges"].items():
        assert abs(got.loc[judge, "winning_rate"] - v["winning_rate"]) < 1e-12
        assert abs(got.loc[judge, "advantage"] - v["advantage"]) < 1e-12


@needs_shared
def test_prd_equals_the_authors_code():
    d = pd.read_csv(HUMANS / "prd_vicuna80" / "prd_vicuna80_judgments.csv.gz")
    d = d[(d["rater_kind"] == "human") | ((d["first_shown"] == "a") & (d["run"] == 1))]
    d = d.assign(who=np.where(d["rater_kind"] == "human", "human / " + d["vote"].astype(str),
                              d["rater"]))
    ref = UPSTREAM["alt_test"]["prd_vicuna80"]
    res = evalmix.alt_test(d, rater="who", epsilon=ref["epsilon"])
    got = res.judges.set_index("judge")
    for judge, v in ref["judges"].items():
        assert abs(got.loc[judge, "winning_rate"] - v["winning_rate"]) < 1e-12
        assert abs(got.loc[judge, "advantage"] - v["advantage"]) < 1e-12
    assert res.passed("gpt4") and not res.passed("bard")
    assert "gpt4 passes" in str(res)


ALTTEST = os.environ.get("EVALMIX_ALTTEST_DATA")
#: the notebook's printed table (alt_test_example.ipynb, cell 4): dataset -> judge ->
#: (winning rate, advantage probability) to 2 decimals, with the notebook's epsilons
PRINTED = {
    "wax": (0.1, "accuracy", {"gemini_pro": (0.50, 0.74), "llama-31": (0.00, 0.57)}),
    "lgbteen": (0.2, "accuracy", {"gpt-4o": (0.75, 0.77), "gpt-4o-mini": (0.75, 0.76)}),
    "mtbench": (0.2, "accuracy", {"gpt-4o": (0.00, 0.77)}),
    "framing": (0.15, "accuracy", {"llama-31": (0.50, 0.80), "mistral-v03": (0.25, 0.80)}),
    "cebab_aspects": (0.1, "accuracy", {"gemini_flash": (0.70, 0.91)}),
    "summeval": (0.2, "neg_rmse", {"mistral-v03": (0.00, 0.62)}),
    "10k_prompts": (0.15, "neg_rmse", {"gpt-4o": (0.69, 0.76), "gpt-4o-mini": (0.92, 0.80)}),
    "cebab_stars": (0.1, "neg_rmse", {"mistral-v03": (0.50, 0.83)}),
    "lesion": (0.15, "neg_rmse", {"gemini_pro": (1.00, 0.81), "gpt-4o": (0.00, 0.62)}),
}


@pytest.mark.skipif(ALTTEST is None, reason="set EVALMIX_ALTTEST_DATA to AltTest's data/")
@pytest.mark.parametrize("name", list(PRINTED))
def test_the_authors_datasets_reproduce_their_notebook(name):
    eps, scoring, expected = PRINTED[name]
    folder = Path(str(ALTTEST)) / name
    humans = json.loads((folder / "human_annotations.json").read_text())
    llms = json.loads((folder / "llm_annotations.json").read_text())
    rows = [(i, h, "human", v) for h, a in humans.items() for i, v in a.items()]
    rows += [(i, m, "llm", v) for m, a in llms.items() for i, v in a.items()]
    df = pd.DataFrame(rows, columns=["item_id", "rater", "rater_kind", "rating"])
    res = quiet(evalmix.alt_test, df.astype({"rating": object}), epsilon=eps, scoring=scoring)
    got = res.judges.set_index("judge")
    for judge, (wr, ap) in expected.items():
        assert round(got.loc[judge, "winning_rate"], 2) == wr
        assert round(got.loc[judge, "advantage"], 2) == ap


def test_benjamini_yekutieli_equals_statsmodels():
    rng = np.random.default_rng(1)
    for m in (1, 2, 5, 13, 40):
        for _ in range(20):
            p = rng.beta(0.3, 2, m)
            ours = np.zeros(m, dtype=bool)
            ours[benjamini_yekutieli(p, 0.05)] = True
            assert (ours == multipletests(p, 0.05, method="fdr_by")[0]).all()


def simulated(n_items=80, accuracy_llm=0.95, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n_items)
    raters = {"h1": .75, "h2": .75, "h3": .75, "gpt": accuracy_llm}
    rows = []
    for r, acc in raters.items():
        noisy = np.where(rng.random(n_items) < acc, truth, rng.integers(0, 3, n_items))
        rows += [(i, f"g{i // 8}", r, "llm" if r == "gpt" else "human", int(v))
                 for i, v in enumerate(noisy)]
    return pd.DataFrame(rows, columns=["item_id", "group", "rater", "rater_kind", "label"])


def test_singleton_clusters_give_the_authors_t_test():
    """CR2 of a mean with one item per cluster is s / sqrt(n) with n - 1 df: the
    cluster-robust variant equals the authors' t test."""
    d = simulated()
    d["single"] = d["item_id"].astype(str)
    plain = evalmix.alt_test(d, rating="label", scoring="accuracy")
    robust = evalmix.alt_test(d, rating="label", scoring="accuracy", cluster="single")
    a, b = plain.humans, robust.humans
    assert np.allclose(a["p_value"], b["p_value"], rtol=1e-9)
    assert np.allclose(a["df"], b["df"]) and np.allclose(a["se"], b["se"], rtol=1e-12)
    grouped = evalmix.alt_test(d, rating="label", scoring="accuracy", cluster="group")
    assert grouped.cluster == "group" and (grouped.humans["df"] < a["df"]).all()


def test_verdict_items_needed_and_errors():
    strong = evalmix.alt_test(simulated(accuracy_llm=0.97), rating="label")
    assert strong.passed("gpt") and "passes" in str(strong)
    weak = evalmix.alt_test(simulated(n_items=40, accuracy_llm=0.6, seed=1), rating="label")
    j = weak.judges.iloc[0]
    assert not j["passed"] and j["n_items_needed"] > 40
    tidy = weak.tidy()
    assert set(tidy["estimand"]) == {"winning_rate", "advantage_probability"}
    one = simulated()[lambda f: f.rater.isin(["h1", "gpt"])]
    with pytest.raises(EvalmixError, match="at least 2 human raters"):
        evalmix.alt_test(one, rating="label")
    with pytest.raises(EvalmixError, match="epsilon"):
        evalmix.alt_test(simulated(), rating="label", epsilon=1.5)


def test_items_needed_gives_the_promised_power():
    """Planned from a large pilot (the truth), the judge passes in about 80% of designs
    with that many items (300 designs: 85%; 60 here, Monte Carlo SE 5 points)."""
    big = evalmix.alt_test(simulated(n_items=4000, accuracy_llm=0.62, seed=1), rating="label")
    n = int(big.judges.iloc[0]["n_items_needed"])
    assert 100 < n < 250
    passed = [evalmix.alt_test(simulated(n_items=n, accuracy_llm=0.62, seed=100 + s),
                               rating="label").passed("gpt") for s in range(60)]
    assert 0.65 <= np.mean(passed) <= 0.98
