"""One time limit for every model fit of a report (issue 14): the frequentist fits stop
cooperatively at their deadline, the Bayesian fit in a forked child; the report is
written without the stopped fit and its rows say so."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.models._deadline import StoppedAtLimit, deadline_after
from evalmix.models.frequentist import fit_statsmodels
from evalmix.sim import pairwise_judges

#: A report whose only fit is stopped at once must finish well within this (it does in
#: ~2 s); a hang would run into the pytest timeout instead.
FINISH_S = 120


def _binary():
    return pairwise_judges(12, 3, 2, 2, tie_threshold=0, seed=3).table()


def _numeric():
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"item": np.repeat(np.arange(30), 4),
                       "cond": np.tile(["A", "A", "B", "B"], 30)})
    df["score"] = (5 + np.repeat(rng.normal(0, 1, 30), 4) + 0.4 * (df["cond"] == "B")
                   + rng.normal(0, 1, len(df)))
    return evalmix.read(df, outcome="score", condition="cond", clusters={"item": "item"})


@pytest.mark.parametrize("method", ["mixedlm", "laplace", "vb", "map"])
def test_a_passed_deadline_stops_every_frequentist_fit(method):
    table = _numeric() if method == "mixedlm" else _binary()
    with pytest.raises(StoppedAtLimit):
        fit_statsmodels(table, method=method, seed=1, deadline=time.monotonic() - 1)


@pytest.mark.parametrize("method", ["mixedlm", "laplace"])
def test_the_deadline_is_checked_inside_the_optimiser(method, monkeypatch):
    """A clock that ticks once per check: the fit stops after a few evaluations, i.e.
    inside the optimisation, not only before it starts."""
    import evalmix.models._deadline as dl

    table = _numeric() if method == "mixedlm" else _binary()
    ticks = itertools.count()
    monkeypatch.setattr(dl.time, "monotonic", lambda: float(next(ticks)))
    with pytest.raises(StoppedAtLimit):
        fit_statsmodels(table, method=method, seed=1, deadline=dl.time.monotonic() + 6)
    assert 6 <= next(ticks) <= 9


def test_a_distant_deadline_changes_nothing():
    table = _binary()
    a = fit_statsmodels(table, method="laplace", seed=1)
    b = fit_statsmodels(table, method="laplace", seed=1, deadline=deadline_after(3600))
    pd.testing.assert_frame_equal(a.fixed_effects, b.fixed_effects)
    assert deadline_after(0) is None and deadline_after(None) is None


@pytest.mark.parametrize("table_of, methods, backend, method", [
    (_binary, ["naive", "CR2", "glmm_laplace"], None, "glmm_laplace"),
    (_numeric, ["naive", "CR2", "mixedlm"], None, "mixedlm"),
    (_binary, ["naive", "CR2", "glmm_vb"], None, "glmm_vb"),
    pytest.param(_binary, ["naive", "CR2", "bayes"], "bayes", "bayes", marks=pytest.mark.mcmc),
])
def test_a_report_with_a_stopped_fit_finishes_and_marks_its_rows(tmp_path, table_of, methods,
                                                                 backend, method):
    table = table_of()
    t0 = time.perf_counter()
    rep = evalmix.analyze(table, methods=methods, backend=backend, reps=99, seed=1,
                          progress=False, model_timeout=1e-6)
    assert time.perf_counter() - t0 < FINISH_S
    iv = rep.intervals
    rows = iv[iv["method"] == method]
    design = iv[iv["source"] == "design"]
    assert len(rows) == len(design.groupby(["estimand", "contrast"])) > 0
    assert rows["note"].eq("stopped at the limit (1e-06 s)").all()
    assert rows[["estimate", "lo", "hi"]].isna().all().all()
    assert rows["decision"].isna().all()
    assert rep.summary["models"][method]["stopped"] == "stopped at the limit (1e-06 s)"
    assert any("stopped at the limit" in w and "--model-timeout" in w for w in rep.warnings)
    # the design-based rows are there and the report writes
    assert iv.loc[iv["method"] == "CR2", "lo"].notna().any()
    paths = rep.write(tmp_path / "out")
    assert "stopped at the limit" in paths["report.md"].read_text()


def test_model_timeout_option_and_its_old_name():
    from evalmix.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["report", "d.csv", "--out", "o"]).model_timeout == 300
    for name in ("--model-timeout", "--mcmc-timeout"):
        args = parser.parse_args(["report", "d.csv", "--out", "o", name, "7"])
        assert args.model_timeout == 7


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "300", True])
def test_a_bad_model_timeout_is_refused_before_any_work(bad):
    table = _binary()
    before = table.data.copy()
    with pytest.raises(evalmix.InvalidOptionError, match="model_timeout="):
        evalmix.analyze(table, methods=["naive"], progress=False, model_timeout=bad)
    pd.testing.assert_frame_equal(table.data, before)


@pytest.mark.parametrize("bad", ["60", float("nan"), True, [1.0]])
def test_fit_refuses_a_deadline_that_is_not_an_instant(bad):
    from evalmix.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match=r"deadline=.*time\.monotonic\(\)"):
        evalmix.fit(_binary(), backend=evalmix.Laplace(), deadline=bad)
    with pytest.raises(StoppedAtLimit):   # an instant in the past is valid: it stops
        evalmix.fit(_binary(), backend=evalmix.Laplace(),
                    deadline=time.monotonic() - 1)
