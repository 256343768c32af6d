"""Results as they come (issue 14): the design-based intervals and a report marked
incomplete are on disk before any model fit starts; the full report replaces them
atomically at the end, and an interrupted fit leaves them in place."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import evalmix
import evalmix.models.api as model_api
from evalmix.report.report import REPORT_MARKER, check_report_dir
from evalmix.sim import pairwise_judges

BANNER = "incomplete: model fits running"


@pytest.fixture(scope="module")
def table():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pairwise_judges(10, 3, 2, 2, tie_threshold=0, seed=5).table()


def _options():
    return {"methods": ["naive", "CR2", "glmm_laplace"], "reps": 99, "seed": 2,
            "progress": False}


def test_design_rows_are_on_disk_while_the_fit_runs_and_after_an_interrupt(
        table, tmp_path, monkeypatch):
    out = tmp_path / "report"
    seen = {}

    def interrupted_fit(*args, **kwargs):
        # what a reader finds in the folder while the model is being fitted
        seen["intervals"] = pd.read_csv(out / "intervals.csv")
        seen["files"] = sorted(p.name for p in out.iterdir())
        seen["md"] = (out / "report.md").read_text()
        raise KeyboardInterrupt

    monkeypatch.setattr(model_api, "fit", interrupted_fit)
    with pytest.raises(KeyboardInterrupt):
        evalmix.analyze(table, out=out, **_options())
    assert REPORT_MARKER not in seen["files"] and "report.html" not in seen["files"]
    assert BANNER in seen["md"]
    # still there after the interrupt, unchanged
    on_disk = pd.read_csv(out / "intervals.csv")
    pd.testing.assert_frame_equal(on_disk, seen["intervals"])
    assert set(on_disk["source"]) == {"design"}
    # the same numbers as a report without the model
    monkeypatch.undo()
    design_only = evalmix.analyze(table, **{**_options(), "methods": ["naive", "CR2"]})
    expect = design_only.intervals
    pd.testing.assert_series_equal(on_disk["lo"], expect["lo"].astype(float),
                                   check_names=False)
    assert on_disk["contrast"].tolist() == expect["contrast"].tolist()
    # a partial folder is a report folder: the next run may replace it
    assert check_report_dir(out) == out


def test_the_full_report_replaces_the_partial_one(table, tmp_path):
    out = tmp_path / "report"
    rep = evalmix.analyze(table, out=out, **_options())
    assert BANNER in (out / "report.md").read_text()  # written before the fit
    assert "incomplete" not in rep.summary
    rep.write(out)
    assert (out / REPORT_MARKER).exists() and (out / "report.html").exists()
    assert BANNER not in (out / "report.md").read_text()
    iv = pd.read_csv(out / "intervals.csv")
    assert "glmm_laplace" in set(iv["method"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no temp folders


def test_cli_interrupt_names_the_partial_report(table, tmp_path, monkeypatch, capsys):
    from evalmix.cli import main

    data = tmp_path / "judgments.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairwise_judges(10, 3, 2, 2, tie_threshold=0, seed=5).data.to_csv(data, index=False)
    out = tmp_path / "report"

    def interrupted_fit(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model_api, "fit", interrupted_fit)
    code = main(["report", str(data), "--outcome", "outcome", "--model-a", "model_a",
                 "--model-b", "model_b", "--first-shown", "first_shown",
                 "--cluster", "scenario=scenario", "--cluster", "judge=judge",
                 "--backend", "statsmodels", "--reps", "19", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 130
    assert err == (f"evalmix: interrupted; the design-based intervals are in "
                   f"{out / 'intervals.csv'} ({out / 'report.md'} is marked incomplete)")
    assert (out / "intervals.csv").is_file() and not (out / REPORT_MARKER).exists()


def test_no_partial_report_when_no_model_is_fitted(table, tmp_path):
    out = tmp_path / "report"
    evalmix.analyze(table, out=out, fast=True, reps=19, seed=2, progress=False)
    assert not out.exists()  # nothing to wait for: the caller writes the full report
