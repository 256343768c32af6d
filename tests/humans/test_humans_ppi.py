"""evalmix.ppi against ppi_py, clubSandwich and a coverage study with known truth.

Tolerances: 1e-8 against ``ppi_py.ppi_mean_ci`` (the same sums; the issue's bound),
1e-10 against clubSandwich's CR2 contrast (tests/reference/humans/ppi_cr2.R).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE, ROOT, SHARED_DATA, mc_band
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

import evalmix
from evalmix.errors import DroppedRowsWarning, EvalmixError
from evalmix.humans.ppi_core import linear_estimate, ppi_arrays
from evalmix.inference.sandwich import vcov_cluster
from evalmix.sim.judges import JUDGE_DESIGN, _true_rate, draw

HUMANS = SHARED_DATA / "humans"
needs_shared = pytest.mark.skipif(not HUMANS.exists(), reason="../shared/data/humans absent")
TOL = 1e-8


def ppi_py(y, f, lab, lam=None, level=0.95):
    Y, Yh, Yu = y[lab], f[lab], f[~lab]
    lo, hi = ppi_mean_ci(Y, Yh, Yu, alpha=1 - level, lam=lam)
    est = np.ravel(ppi_mean_pointestimate(Y, Yh, Yu, lam=lam))[0]
    return float(est), float(np.ravel(lo)[0]), float(np.ravel(hi)[0])


@pytest.fixture(scope="module")
def cje():
    if not HUMANS.exists():
        pytest.skip("../shared/data/humans absent")
    return pd.read_csv(HUMANS / "cje_arena" / "cje_arena_scores.csv")


@needs_shared
@pytest.mark.parametrize("lam", [None, 1.0, 0.0])
def test_unclustered_ppi_equals_ppi_py_on_cje(cje, lam):
    """CJE Arena sample: judge gpt-4.1-nano on all 1,000 base responses, the GPT-5 oracle
    (here the "human") on 480 of them."""
    base = cje[cje["system"] == "base"]
    res = evalmix.ppi(base, humans=["gpt-5"], judge="gpt-4.1-nano", lam=lam)
    w = base.pivot(index="item_id", columns="rater", values="score")
    y, f = w["gpt-5"].to_numpy(), w["gpt-4.1-nano"].to_numpy()
    est, lo, hi = ppi_py(np.nan_to_num(y), f, np.isfinite(y), lam=lam)
    e = res.estimates["ppi"]
    assert res.method == "naive" and res.n_labelled == 480 and res.n_units == 1000
    assert abs(e.estimate - est) < TOL and abs(e.lo - lo) < TOL and abs(e.hi - hi) < TOL


@needs_shared
def test_stratified_ppi_is_the_weighted_sum_of_ppi_py(cje):
    res = evalmix.ppi(cje, item=["item_id", "system"], by="system", humans=["gpt-5"])
    est, var = 0.0, 0.0
    from scipy import stats
    z = stats.norm.ppf(0.975)
    for _, g in cje.groupby("system"):
        w = g.pivot(index="item_id", columns="rater", values="score")
        y, f = w["gpt-5"].to_numpy(), w["gpt-4.1-nano"].to_numpy()
        e, lo, hi = ppi_py(np.nan_to_num(y), f, np.isfinite(y))
        est += e / 4
        var += ((hi - lo) / (2 * z)) ** 2 / 16
    p = res.estimates["ppi"]
    assert abs(p.estimate - est) < TOL and abs(p.se - np.sqrt(var)) < TOL
    assert len(res.lam) == 4 and res.strata


@needs_shared
def test_arena_win_rate_equals_ppi_py_and_covers_the_full_human_answer():
    d = pd.read_csv(HUMANS / "ppr_arena" / "ppr_arena_judgments.csv.gz")
    rng = np.random.default_rng(7)
    battles = d["item_id"].unique()
    keep = set(rng.choice(battles, size=len(battles) // 10, replace=False))
    sub = d[(d["rater_kind"] == "llm") | d["item_id"].isin(keep)]
    model = "gpt-4"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        res = evalmix.ppi(sub, estimand="win_rate", model=model, judge="gpt-4-0125-preview")
    rows = d[(d["model_a"] == model) | (d["model_b"] == model)]
    val = rows["outcome"].map({"a": 1.0, "tie": 0.5, "b": 0.0})
    val = np.where(rows["model_b"] == model, 1 - val, val)
    rows = rows.assign(v=val)
    w = rows.pivot(index="item_id", columns="rater", values="v")
    lab = w.index.isin(list(keep))
    est, lo, hi = ppi_py(w["human"].to_numpy(), w["gpt-4-0125-preview"].to_numpy(), lab)
    e = res.estimates["ppi"]
    assert res.contrast == f"{model} vs all"
    assert abs(e.estimate - est) < TOL and abs(e.lo - lo) < TOL and abs(e.hi - hi) < TOL
    truth = float(w["human"].mean())  # every battle's crowd vote
    assert e.lo < truth < e.hi
    judge = res.estimates["judge"]
    assert not judge.lo < truth < judge.hi  # the judge alone misses the crowd's answer


def test_clustered_ppi_equals_club_sandwich():
    ref = json.loads((REFERENCE / "humans" / "ppi_cr2.json").read_text())
    d = pd.read_csv(REFERENCE / "humans" / "ppi_cr2_data.csv")
    y = np.where(d["labelled"] == 1, d["y"], np.nan)
    e = ppi_arrays(y, d["f"].to_numpy(dtype=float), clusters=d["cluster"].to_numpy(),
                   lam=0.6, method="CR2")["ppi"]
    assert abs(e.estimate - ref["estimate"]) < 1e-10
    assert abs(e.se - ref["se"]) < 1e-10 and abs(e.df - ref["df"]) < 1e-8


def test_reparametrised_contrast_equals_c_v_c():
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 4, 300)
    z = rng.normal(size=300) + groups
    clusters = rng.integers(0, 25, 300)
    c = np.array([0.3, 0.3, 0.2, 0.2])
    X = np.eye(4)[groups]
    means = np.array([z[groups == k].mean() for k in range(4)])
    V = vcov_cluster(X, z - means[groups], clusters, type="CR2")
    e = linear_estimate(z, groups, c, clusters, "CR2", 0.95)
    assert abs(e.estimate - c @ means) < 1e-12
    assert abs(e.se - np.sqrt(c @ V @ c)) < 1e-12


def test_ppi_errors_and_tidy():
    res = evalmix.sim.judge_labels(10, 10, n_labelled=40, seed=1)
    out = evalmix.ppi(res.data, model="A", cluster="cluster", rating="score")
    tidy = out.tidy()
    assert list(tidy["method"]) == ["ppi++", "human-only", "judge-only"]
    assert (tidy["variance"] == "CR2").all() and "worth" in str(out)
    two = pd.concat([res.data, res.data[res.data.rater == "judge"].assign(rater="j2")])
    with pytest.raises(EvalmixError, match="name the judge"):
        evalmix.ppi(two, rating="score")
    with pytest.raises(EvalmixError, match="at least 2 human-labelled"):
        ppi_arrays(np.r_[1.0, np.full(9, np.nan)], np.ones(10))


# ------------------------------------------------------------------ coverage
def coverage(reps, *, n_clusters=40, cluster_size=25, n_labelled=400, seed=1):
    """Coverage of the 95% intervals for model A's true pass rate (sim.judge_labels)."""
    rng = np.random.default_rng(seed)
    truth = _true_rate(JUDGE_DESIGN["A"]["mu"], np.hypot(1.0, 1.0))
    hits = {"clustered PPI (CR2)": 0, "unclustered PPI": 0, "judge only": 0,
            "human only (CR2)": 0}
    for _ in range(reps):
        d = draw(rng, n_clusters, cluster_size, n_labelled, JUDGE_DESIGN, 1.0, 1.0, 1.0)
        a = d["model"] == 0
        y = np.where(d["labelled"], d["y"], np.nan)[a]
        f, cl = d["f"][a], d["cluster"][a]
        clustered = ppi_arrays(y, f, clusters=cl, method="CR2")
        plain = ppi_arrays(y, f, method="naive")["ppi"]
        for key, e in (("clustered PPI (CR2)", clustered["ppi"]), ("unclustered PPI", plain),
                       ("judge only", clustered["judge"]),
                       ("human only (CR2)", clustered["human"])):
            hits[key] += e.lo <= truth <= e.hi
    return {k: v / reps for k, v in hits.items()}


def test_quick_coverage_clustered_ppi_covers_and_the_others_miss():
    """300 draws (Monte Carlo SE ~1.3 points): the full study is the slow test below."""
    cov = coverage(300)
    assert cov["clustered PPI (CR2)"] >= 0.90
    assert cov["unclustered PPI"] <= 0.88
    assert cov["judge only"] <= 0.70


@pytest.mark.slow
def test_coverage_study_writes_docs_table():
    """docs/humans_coverage.csv: 2,000 draws per design (MC SE ~0.5 points), written by
    ``make docs-tables`` (``EVALMIX_WRITE_DOCS=1``), else checked to reproduce."""
    import os
    rows = []
    for k, m, n in ((20, 25, 250), (40, 25, 400), (100, 10, 400)):
        cov = coverage(2000, n_clusters=k, cluster_size=m, n_labelled=n, seed=k)
        rows += [{"n_clusters": k, "cluster_size": m, "n_labelled": n, "interval": key,
                  "coverage": v} for key, v in cov.items()]
    frame = pd.DataFrame(rows)
    docs = ROOT / "docs" / "humans_coverage.csv"
    if os.environ.get("EVALMIX_WRITE_DOCS") == "1":
        frame.to_csv(docs, index=False, float_format="%.4f")
    ours = frame[frame["interval"] == "clustered PPI (CR2)"]["coverage"]
    lo, hi = mc_band(0.95, 2000, len(ours))
    assert ours.between(lo, hi).all()
    assert (frame[frame["interval"] == "unclustered PPI"]["coverage"] < 0.92).all()
    assert (frame[frame["interval"] == "judge only"]["coverage"] < 0.80).all()
    frozen = pd.read_csv(docs)
    assert frozen[["n_clusters", "interval"]].equals(frame[["n_clusters", "interval"]])
    assert np.allclose(frozen["coverage"], frame["coverage"], atol=5e-5), \
        "docs/humans_coverage.csv is not what this code and seed give: run make docs-tables"


def test_paired_difference_equals_ppi_py_on_the_differences():
    """estimand="difference": units paired by item; a pair is labelled when both models'
    units are; the estimate equals ppi_py on the per-item differences; CR1 takes t(G-1)."""
    d = evalmix.sim.judge_labels(30, 10, n_labelled=400, seed=8).data
    d = d.assign(item=d["item_id"].str.split("/").str[0])
    res = evalmix.ppi(d, estimand="difference", models=("A", "B"), pair_by="item",
                      rating="score")
    w = d.pivot_table(index=["item", "model"], columns="rater", values="score").unstack()
    f = (w["judge"]["A"] - w["judge"]["B"]).to_numpy()
    y = (w["human"]["A"] - w["human"]["B"]).to_numpy()
    lab = np.isfinite(y)
    est, lo, hi = ppi_py(np.nan_to_num(y), f, lab)
    e = res.estimates["ppi"]
    assert res.contrast == "A - B" and res.n_labelled == int(lab.sum())
    assert abs(e.estimate - est) < TOL and abs(e.lo - lo) < TOL and abs(e.hi - hi) < TOL
    clustered = evalmix.ppi(d, estimand="difference", models=("A", "B"), pair_by="item",
                            rating="score", cluster="cluster", method="CR1")
    assert clustered.estimates["ppi"].df == 29 and clustered.n_clusters == 30
