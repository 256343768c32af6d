"""`evalmix report` / `evalmix demo` as real subprocesses on small data."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

FILE_COLUMNS = ["estimand", "contrast", "method", "cluster", "estimate", "se", "lo", "hi",
                "level", "df", "n_clusters", "n_obs", "decision", "fragile"]
FILES = ["intervals.csv", "variance.csv", "judges.csv", "design.json", "report.html",
         "report.md", "summary.json"]


def _evalmix(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalmix.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.tables = 0
        self.h2: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))
        elif tag == "table":
            self.tables += 1
        elif tag == "h2":
            self._in_h2 = True
            self.h2.append("")

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.h2[-1] += data


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory) -> Path:
    from evalmix.sim import pairwise_judges

    path = tmp_path_factory.mktemp("data") / "judgments.csv"
    pairwise_judges(10, 3, 2, 2, seed=7).data.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def report_dir(small_csv, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("report")
    proc = _evalmix("report", str(small_csv), "--outcome", "outcome", "--model-a", "model_a",
                    "--model-b", "model_b", "--first-shown", "first_shown", "--ties", "half",
                    "--cluster", "scenario=scenario", "--cluster", "persona=persona",
                    "--cluster", "judge=judge", "--fast", "--reps", "199", "--seed", "5",
                    "--backend", "statsmodels", "--quiet", "--out", str(out))
    return out, proc


def test_report_writes_every_file(report_dir):
    out, proc = report_dir
    assert proc.returncode == 0, proc.stderr
    for name in FILES:
        assert (out / name).is_file(), name
    iv = pd.read_csv(out / "intervals.csv", keep_default_na=False, na_values=[""])
    assert list(iv.columns[:14]) == FILE_COLUMNS
    assert {"naive", "CR2", "bootstrap"} <= set(iv["method"])
    assert set(iv["estimand"]) >= {"win_rate", "controlled_win_rate", "difference"}
    judges = pd.read_csv(out / "judges.csv")
    assert {"judge", "estimand", "estimate", "lo", "hi"} <= set(judges.columns)
    assert {"first_shown_win_rate", "flip_rate", "consistency"} <= set(judges["estimand"])
    variance = pd.read_csv(out / "variance.csv")
    assert {"factor", "sd", "share", "backend"} <= set(variance.columns)
    design = json.loads((out / "design.json").read_text())
    # scenario and persona are sampled and crossed, the judge is fixed
    assert design["recommendation"]["cluster"] == "scenario+persona"
    assert design["recommendation"]["fixed"] == ["judge"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 5 and "versions" in summary and "report" in summary["command"]
    assert summary["roles"]["clusters"]["judge"] == "judge"


def test_report_html_has_forest_plots_and_tables(report_dir):
    out, _ = report_dir
    page = _Page()
    page.feed((out / "report.html").read_text())
    forests = [i for i in page.images if i.get("alt") == "forest plot"]
    assert len(forests) == 5  # 2 win rates, 2 controlled win rates, 1 difference
    assert all(i["src"].startswith("data:image/png;base64,") for i in page.images)
    assert page.tables >= 4
    assert any("Headline" in h for h in page.h2)
    assert any("Position bias" in h for h in page.h2)
    md = (out / "report.md").read_text()
    assert "(plots/forest_00.png)" in md and (out / "plots" / "forest_00.png").is_file()


@pytest.mark.parametrize("args, needle", [
    (["--outcome", "no_such_column"], "no_such_column"),
    (["--outcome", "outcome", "--cluster", "scenario"], "ROLE=COLUMN"),
])
def test_bad_input_exits_with_one_line(small_csv, tmp_path, args, needle):
    proc = _evalmix("report", str(small_csv), *args, "--fast", "--quiet",
                    "--out", str(tmp_path / "x"), timeout=60)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0]


def test_missing_file_exits_with_one_line(tmp_path):
    proc = _evalmix("report", str(tmp_path / "nope.csv"), "--outcome", "y", "--quiet",
                    "--out", str(tmp_path / "x"), timeout=60)
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_demo_end_to_end_reports_truth(tmp_path):
    """`evalmix demo` with MCMC: every recommended interval contains the simulator's
    truth for the default seed, and the report says so."""
    proc = _evalmix("demo", "--out", str(tmp_path / "demo"), "--quiet", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "truth check:" in proc.stdout
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    truth = pd.DataFrame(summary["truth"])
    rec = truth[truth["recommended"]]
    assert len(rec) == 5 and rec["contains_truth"].all()
    html = (tmp_path / "demo" / "report.html").read_text()
    assert "true values are known" in html


def test_no_sensitivity_flag_switches_the_refit_off(small_csv, tmp_path, monkeypatch):
    """``--no-sensitivity`` reaches analyze as ``fit_options={"sensitivity": None}``;
    without it analyze gets no fit options (it decides from the level counts)."""
    import evalmix
    import evalmix.report.analyze
    from evalmix.cli import build_parser

    seen: list[dict] = []

    class _Stop(Exception):
        pass

    def fake_analyze(table, **kwargs):
        seen.append(kwargs)
        raise _Stop

    monkeypatch.setattr(evalmix.report.analyze, "analyze", fake_analyze)
    base = ["report", str(small_csv), "--outcome", "outcome", "--model-a", "model_a",
            "--model-b", "model_b", "--cluster", "judge=judge", "--quiet",
            "--out", str(tmp_path / "x")]
    for extra in (["--no-sensitivity"], []):
        args = build_parser().parse_args(base + extra)
        with pytest.raises(_Stop):
            args.func(args)
    assert seen[0]["fit_options"] == {"sensitivity": None}
    assert seen[1]["fit_options"] is None
