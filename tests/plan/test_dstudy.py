"""D studies (issue 30): projections against simulation, the design searches against
brute force, sample-or-repeat, the CLI-facing pieces.

The projection check: with known components the projected SE of a score equals the
root mean square error of simulated object means (an identity of the model, checked
here within Monte Carlo error), and pilots projected to a larger design land on the
SE observed there (quick version of docs/gtheory.md's study, whose slow test writes the
table).
"""

from __future__ import annotations

import itertools
import os
import re

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE, ROOT

import evalmix
from evalmix.design.gtheory import GDesign, coefficients
from evalmix.errors import InvalidOptionError
from evalmix.plan.dstudy import design_cost
from evalmix.plan.dstudy_coverage import projection_study, simulate_scores

REF = REFERENCE / "gtheory"
DOCS = ROOT / "docs" / "gtheory.md"
MARK = ("<!-- dstudy-coverage:start -->", "<!-- dstudy-coverage:end -->")

#: An LLM-eval-like truth: models x items x judges, runs nested in every cell (scores on
#: a 0-1 scale; item and run noise dominate).
DESIGN = GDesign("model", ("item", "judge", "run"), {"run": ("model", "item", "judge")})
TRUTH = np.array([0.04, 0.03, 0.005, 0.02, 0.004, 0.006, 0.01, 0.05])


@pytest.fixture(scope="module")
def g3():
    data = pd.read_csv(REF / "brennan_synthetic3.csv")
    return evalmix.gstudy(data, "person", ["item", "occasion"], outcome="score", seed=1)


def test_projected_se_is_the_simulated_se_with_known_components():
    """sqrt(var Delta) and sqrt(2 var delta) are the RMS errors of an object's mean and
    of a difference, for any design (simulated 600 times x 6 objects)."""
    rng = np.random.default_rng(7)
    sizes = {"model": 6, "item": 15, "judge": 3, "run": 2}
    y, uni = simulate_scores(DESIGN, TRUTH, sizes, reps=600, rng=rng)
    err = y.reshape(600, 6, -1).mean(axis=2) - uni
    diff = err[:, 1:] - err[:, :-1]
    want = coefficients(TRUTH, DESIGN, {"item": 15, "judge": 3, "run": 2})
    for got, se in ((err, want["se_score"][0]), (diff, want["se_diff"][0])):
        rms = np.sqrt(np.mean(got**2))
        mcse = np.std(got**2) / np.sqrt(got.size) / (2 * rms)
        # objects share facet levels, so the 3,600 errors are not independent: 6 MC SEs
        assert abs(rms - se) < 6 * mcse, (rms, se, mcse)


def test_pilot_projections_land_on_the_observed_se():
    res = projection_study(DESIGN, TRUTH, n_objects=6,
                           pilots=[{"item": 20, "judge": 3, "run": 2}],
                           targets=[{"item": 60, "judge": 4, "run": 1}], n_pilots=40,
                           sims=300, seed=3, progress=False)
    r = res.table.iloc[0]
    assert abs(r["observed_se_score"] / r["true_se_score"] - 1) < 0.08
    assert r["projected_se_score_q10"] < r["observed_se_score"] < r["projected_se_score_q90"]
    # the G-theory SE keeps its promise where the naive one breaks (Messing 2026)
    assert r["coverage_gtheory"] > 0.9 and r["coverage_naive"] < 0.75
    t = res.tidy()
    assert set(t["estimand"]) == {"se_score", "se_diff", "coverage"}


def _brute(g, costs, *, budget=None, target=None, criterion="erho2", top=30):
    best = None
    for ni, no in itertools.product(range(1, top + 1), range(1, 9)):
        n = {"item": float(ni), "occasion": float(no)}
        c = float(design_cost(g, n, costs))
        q = float(coefficients(np.clip(g.variances, 0, None), g.design, n)[criterion][0])
        better = q if criterion in ("erho2", "phi") else -q
        if budget is not None and c > budget + 1e-9:
            continue
        if target is not None:
            ok = q >= target if criterion in ("erho2", "phi") else q <= target
            if ok and (best is None or (c, -better) < best[0]):
                best = ((c, -better), n)
        elif best is None or (-better, c) < best[0]:
            best = ((-better, c), n)
    return best[1] if best else None


@pytest.mark.parametrize("costs", [{"call": 1.0}, {"call": 0.2, "item": 3.0},
                                   {"call": 1.0, "occasion": 25.0}])
def test_smallest_and_optimal_designs_equal_brute_force(g3, costs):
    d = evalmix.dstudy(g3, target=0.8, budget=400, costs=costs, max_levels=8)
    for label, kw in (("smallest", {"target": 0.8}), ("optimal", {"budget": 400})):
        row = d.row(label)
        want = _brute(g3, d.costs, **kw)
        assert row is not None and want is not None
        got = {"item": row["n_item"], "occasion": row["n_occasion"]}
        if label == "smallest":   # the same (least) cost
            assert row["cost"] == pytest.approx(design_cost(g3, want, d.costs))
            assert row["erho2"] >= 0.8
        else:                     # the same (best) coefficient within the budget
            best = coefficients(g3.variances.clip(0), g3.design, want)["erho2"][0]
            assert row["erho2"] == pytest.approx(best) and row["cost"] <= 400
        assert got == want or label == "smallest"


def test_se_targets_and_unreachable_targets(g3):
    d = evalmix.dstudy(g3, target=0.5, criterion="se_diff")
    row = d.row("smallest")
    assert row["se_diff"] <= 0.5
    want = _brute(g3, {"call": 1.0}, target=0.5, criterion="se_diff")
    assert row["cost"] == pytest.approx(design_cost(g3, want, {"call": 1.0}))
    # the universe score cannot be measured better than the occasions allow
    none = evalmix.dstudy(g3, target=0.999, max_levels=3)
    assert none.row("smallest") is None and "no design" in none.notes[0]


def test_dstudy_table_plot_and_tidy(g3, tmp_path):
    d = evalmix.dstudy(g3)
    assert set(d.table["design"]) == {"observed", "vary item", "vary occasion"}
    obs = d.row("observed")
    assert obs["erho2"] == pytest.approx(g3.project()["erho2"][0])
    assert (d.table["erho2_lo"] <= d.table["erho2"]).all()
    fig = d.plot(tmp_path / "d.png")
    assert (tmp_path / "d.png").stat().st_size > 10_000
    labels = [t for ax in fig.axes for t in ax.get_legend_handles_labels()[1]]
    assert "E rho^2 (relative)" in labels
    t = d.tidy()
    assert not t.duplicated(["estimand", "contrast", "method", "cluster", "scale"]).any()
    assert t.loc[t["estimand"] == "se_score", "df"].notna().all()
    assert "sample new levels of: item, occasion" in str(d)


def test_sample_repeat_and_counterbalance():
    from evalmix.design.gresult import facet_kind

    d = GDesign("model", ("item", "judge", "order", "run"),
                {"run": ("model", "item", "judge", "order")})
    assert [facet_kind(d, f) for f in d.facets] == ["sample", "judge", "counterbalance",
                                                    "repeat"]
    rng = np.random.default_rng(1)
    y, _ = simulate_scores(DESIGN, [0.04, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.3],
                           {"model": 5, "item": 10, "judge": 2, "run": 2}, reps=1, rng=rng)
    idx = np.indices(y[0].shape).reshape(4, -1)
    frame = pd.DataFrame({"model": idx[0], "item": idx[1], "judge": idx[2], "run": idx[3],
                          "score": y[0].ravel()})
    g = evalmix.gstudy(frame, "model", ["item", "judge", "run"], outcome="score", seed=1)
    facets = g.facets().set_index("facet")
    assert facets.loc["run", "kind"] == "repeat"
    # run noise dominates the error; doubling the items still removes the most (they
    # divide every error term, the residual included)
    assert g.dominant()[1:] == ("repeat", ("run",))
    assert "output randomness" in g.advice and facets.loc["run", "advice"]
    assert facets["gain"].idxmax() == "item"


def test_dstudy_options_are_checked(g3):
    with pytest.raises(InvalidOptionError, match="costs names"):
        evalmix.dstudy(g3, costs={"items": 1.0})
    with pytest.raises(InvalidOptionError, match="criterion"):
        evalmix.dstudy(g3, criterion="rho")
    with pytest.raises(InvalidOptionError, match="not a facet"):
        evalmix.dstudy(g3, {"rater": [2]})
    with pytest.raises(InvalidOptionError, match=r"n\['item'\]"):
        evalmix.dstudy(g3, {"item": [0]})
    with pytest.raises(InvalidOptionError, match="coefficient target"):
        evalmix.dstudy(g3, target=1.5)
    with pytest.raises(InvalidOptionError, match="budget"):
        evalmix.dstudy(g3, budget=-1)
    with pytest.raises(InvalidOptionError, match="already decided"):
        evalmix.dstudy(g3, method="reml")
    with pytest.raises(InvalidOptionError, match="unexpected keyword"):
        evalmix.dstudy(pd.read_csv(REF / "brennan_synthetic3.csv"), objekt="person")


def _markdown(res) -> str:
    t = res.table
    lines = [MARK[0], "",
             f"Generated by `tests/plan/test_dstudy.py` (`EVALMIX_WRITE_DOCS=1 pytest -m slow "
             f"tests/plan/test_dstudy.py`): {int(t['pilots'].iloc[0])} pilot data sets per pilot "
             f"design, {int(t['sims'].iloc[0]):,} simulated data sets per target, seed "
             f"{res.seed}, nominal {res.level:.0%}, {res.seconds / 60:.0f} min on the shared "
             "2-core machine.", "",
             "| pilot | target | G study | true SE | projected SE (10-90%) | observed SE | "
             "SE interval covers | score interval (t) covers | naive covers |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in t.itertuples():
        lines.append(
            f"| {r.pilot} | {r.target} | {r.method} | {r.true_se_score:.4f} | "
            f"{r.projected_se_score:.4f} ({r.projected_se_score_q10:.4f}-"
            f"{r.projected_se_score_q90:.4f}) | {r.observed_se_score:.4f} | "
            f"{100 * r.interval_coverage_se_score:.0f}% | {100 * r.coverage_gtheory:.1f}% | "
            f"{100 * r.coverage_naive:.1f}% |")
    lines += ["", MARK[1]]
    return "\n".join(lines)


@pytest.mark.slow
def test_projection_study_table():
    """Pilots (balanced: ANOVA; 10% of rows dropped: REML) projected to larger designs."""
    pilots = [{"item": 20, "judge": 2, "run": 2}, {"item": 40, "judge": 4, "run": 2}]
    targets = [{"item": 40, "judge": 4, "run": 2}, {"item": 200, "judge": 3, "run": 1},
               {"item": 100, "judge": 8, "run": 3}]
    balanced = projection_study(DESIGN, TRUTH, n_objects=6, pilots=pilots, targets=targets,
                                n_pilots=400, sims=2000, seed=20261203, progress=False)
    unbalanced = projection_study(DESIGN, TRUTH, n_objects=6, pilots=pilots[:1],
                                  targets=targets[:2], n_pilots=100, sims=2000, drop=0.1,
                                  seed=20261204, progress=False)
    table = pd.concat([balanced.table, unbalanced.table], ignore_index=True)
    res = type(balanced)(table=table, level=balanced.level, seed=balanced.seed,
                         seconds=balanced.seconds + unbalanced.seconds)
    if os.environ.get("EVALMIX_WRITE_DOCS") == "1":
        text = DOCS.read_text()
        text = re.sub(re.escape(MARK[0]) + ".*?" + re.escape(MARK[1]),
                      lambda _: _markdown(res), text, flags=re.S)
        DOCS.write_text(text)
    # observed SEs are the true ones (the projection formula), within 3%
    assert (np.abs(table["observed_se_score"] / table["true_se_score"] - 1) < 0.03).all()
    # projected error variances are unbiased on average (ANOVA: but for the floor at 0,
    # which pushes them up; the median SE sits below the truth, a skewed square root)
    ratio = table["projected_var_score_mean"] / table["true_se_score"] ** 2
    assert ((ratio > 0.92) & (ratio < 1.15)).all(), ratio
    assert (table["projected_se_score"] < table["true_se_score"] * 1.05).all()
    # the t(df) score interval keeps its promise (nominal minus 2.5 points); naive breaks
    assert (table["coverage_gtheory"] > 0.925).all()
    assert (table["coverage_naive"] < 0.8).all()
