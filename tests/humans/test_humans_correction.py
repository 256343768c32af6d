"""Rogan-Gladen (Lee et al. 2025), the transport check and the label budget.

Rogan-Gladen: the closed form of Lee et al. written out here, and their package's values
frozen by tests/reference/humans/upstream_values.py (1e-12: the same formulas). The
transport check and the budget are checked by simulation with known truth
(evalmix.sim.judge_labels).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import REFERENCE
from scipy import stats

import evalmix
from evalmix.errors import EvalmixError
from evalmix.humans import allocate_calibration, rogan_gladen_interval
from evalmix.humans.budget import label_budget, plan_labels
from evalmix.humans.ppi_core import ppi_arrays
from evalmix.humans.transport import transport_check
from evalmix.sim.judges import draw

UPSTREAM = json.loads((REFERENCE / "humans" / "upstream_values.json").read_text())


def lee_closed_form(p, q0, q1, n, m0, m1, level):
    """Lee et al. (2025), Sec. 3: the adjusted plug-in interval, written from the paper."""
    z = stats.norm.ppf(1 - (1 - level) / 2)
    pt = (n * p + z**2 / 2) / (n + z**2)
    q0t, q1t = (m0 * q0 + 1) / (m0 + 2), (m1 * q1 + 1) / (m1 + 2)
    nt, m0t, m1t = n + z**2, m0 + 2, m1 + 2
    th = (pt + q0t - 1) / (q0t + q1t - 1)
    bias = 2 * z**2 * (th * q1t * (1 - q1t) / m1t - (1 - th) * q0t * (1 - q0t) / m0t)
    var = (pt * (1 - pt) / nt + (1 - th) ** 2 * q0t * (1 - q0t) / m0t
           + th**2 * q1t * (1 - q1t) / m1t) / (q0t + q1t - 1) ** 2
    centre = th + bias
    return float(np.clip(centre - z * np.sqrt(var), 0, 1)), float(
        np.clip(centre + z * np.sqrt(var), 0, 1))


def test_rogan_gladen_equals_lee_et_al():
    for ref in UPSTREAM["rogan_gladen"]:
        args = [ref[k] for k in ("p", "q0", "q1", "n", "m0", "m1")]
        theta, lo, hi, _ = rogan_gladen_interval(*args, level=ref["level"])
        want = np.clip((ref["p"] + ref["q0"] - 1) / (ref["q0"] + ref["q1"] - 1), 0, 1)
        assert abs(theta - want) < 1e-12 and abs(theta - ref["theta"]) < 1e-12
        assert abs(lo - ref["lo"]) < 1e-12 and abs(hi - ref["hi"]) < 1e-12
        c_lo, c_hi = lee_closed_form(*args, ref["level"])
        assert abs(lo - c_lo) < 1e-12 and abs(hi - c_hi) < 1e-12
        alloc = allocate_calibration(ref["m"], ref["p"], ref["q0"], ref["q1"],
                                     m_pilot=ref["m_pilot"])
        assert list(alloc) == ref["allocation"]


def test_rogan_gladen_from_a_table_counts_as_by_hand():
    res = evalmix.sim.judge_labels(20, 20, n_labelled=300, seed=2)
    d = res.data[res.data["model"] == "A"]
    rg = evalmix.rogan_gladen(d, rating="score")
    w = d.pivot(index="item_id", columns="rater", values="score")
    lab = w["human"].notna()
    y, f = w.loc[lab, "human"], w.loc[lab, "judge"]
    assert rg.m1 == int(y.sum()) and rg.m0 == int((1 - y).sum())
    assert abs(rg.q1 - f[y == 1].mean()) < 1e-12 and abs(rg.q0 - (1 - f[y == 0]).mean()) < 1e-12
    assert abs(rg.p - w.loc[~lab, "judge"].mean()) < 1e-12 and rg.n == int((~lab).sum())
    assert rg.tidy()["method"].tolist() == ["rogan-gladen", "judge-only"]
    with pytest.raises(EvalmixError, match="no better than chance"):
        rogan_gladen_interval(0.5, 0.4, 0.5, 100, 10, 10)


def test_rogan_gladen_refuses_ties_and_scores():
    d = evalmix.datasets.mtbench_human()
    with pytest.raises(EvalmixError, match="binary"):
        evalmix.rogan_gladen(d)


def test_transport_check_flags_model_dependent_errors():
    res = evalmix.sim.judge_labels(30, 20, n_labelled=600, seed=4)
    t = transport_check(res.data, by="model", cluster="cluster", rating="score")
    assert not t.transports and t.groups["flagged"].all()
    assert "DIFFER" in str(t) and set(t.tidy()["contrast"]) == {"A", "B"}


@pytest.mark.slow
def test_transport_check_keeps_its_level():
    """Two models the judge treats alike (same pass rate and error rates): about 5% of
    200 designs are flagged."""
    same = {"A": {"mu": 0.2, "fp": -1.5, "fn": -2.0}, "B": {"mu": 0.2, "fp": -1.5, "fn": -2.0}}
    rejections = 0
    for seed in range(200):
        s = evalmix.sim.judge_labels(30, 10, n_labelled=300, models=same, seed=100 + seed)
        rejections += not transport_check(s.data, by="model", cluster="cluster",
                                          rating="score").transports
    assert rejections / 200 <= 0.09


def test_label_budget_reaches_its_target_in_simulation():
    """Plan from a pilot, then draw designs with the planned labels: the realised PPI SE
    is the target (mean over 40 draws, within 15%)."""
    pilot = evalmix.sim.judge_labels(40, 25, n_labelled=300, seed=5)
    target = 0.05
    plan = label_budget(pilot.data[pilot.data["model"] == "A"], target_se=target,
                        cluster="cluster", rating="score")
    assert plan.n_ppi < plan.n_human and np.isfinite(plan.n_ppi)
    rng = np.random.default_rng(9)
    from evalmix.sim.judges import JUDGE_DESIGN
    models = {"A": JUDGE_DESIGN["A"]}
    ses, ses_h = [], []
    for _ in range(40):
        d = draw(rng, 40, 25, int(plan.n_ppi), models, 1.0, 1.0, 1.0)
        e = ppi_arrays(np.where(d["labelled"], d["y"], np.nan), d["f"], clusters=d["cluster"])
        ses.append(e["ppi"].se)
        d = draw(rng, 40, 25, int(plan.n_human), models, 1.0, 1.0, 1.0)
        e = ppi_arrays(np.where(d["labelled"], d["y"], np.nan), d["f"], clusters=d["cluster"])
        ses_h.append(e["human"].se)
    assert abs(np.mean(ses) / target - 1) < 0.15
    assert abs(np.mean(ses_h) / target - 1) < 0.15


def test_budget_floor_and_dorner_bound():
    far = label_budget(evalmix.sim.judge_labels(10, 25, n_labelled=100, seed=6).data,
                       target_se=0.01, cluster="cluster", rating="score")
    assert not np.isfinite(far.n_ppi) and "add clusters" in far.note
    weak = plan_labels(0.02, pass_rate=0.9, sensitivity=0.9, specificity=0.8, n_units=5000)
    assert weak.dorner_applies and weak.factor <= 2 + 1e-9
    good = plan_labels(0.02, pass_rate=0.6, sensitivity=0.97, specificity=0.97,
                       n_units=5000)
    assert not good.dorner_applies and good.factor > 2
    # the binary planner's rectifier variance is that of y - lambda f by simulation
    rng = np.random.default_rng(0)
    y = (rng.random(200_000) < 0.7).astype(float)
    f = np.where(y == 1, rng.random(y.size) < 0.9, rng.random(y.size) < 0.2).astype(float)
    plan = plan_labels(0.02, pass_rate=0.7, sensitivity=0.9, specificity=0.8, n_units=10**9)
    lam = float(plan.groups["lam"].iloc[0])
    want = np.var(y - lam * f) / 0.02**2
    assert abs(plan.n_ppi / want - 1) < 0.02
