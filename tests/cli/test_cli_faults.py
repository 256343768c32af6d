"""Issue 12, faults: Ctrl-C, concurrent writers, stale files, interrupted writes, workers.

Real subprocesses where the fault needs one: SIGINT during a coverage grid and during
MCMC (one line, exit 130, no traceback), two processes writing reports into one folder
(the folder ends as exactly one writer's report), and a joblib coverage run that must not
leave loky workers behind.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import evalmix
from evalmix.report.report import REPORT_MARKER

SRC = str(Path(evalmix.__file__).resolve().parents[1])
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evalmix.cli", *args], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _no_figures(monkeypatch) -> None:
    """Report.write without drawing plots (the write path is what is tested)."""
    import evalmix.report.figures as plots
    import evalmix.report.render as render

    monkeypatch.setattr(plots, "figure_list", lambda rep: [])
    monkeypatch.setattr(render, "figure_list", lambda rep: [])


@pytest.fixture(scope="module")
def small_report():
    df = pd.DataFrame({"item": [f"q{i // 2}" for i in range(40)], "model": ["x", "y"] * 20,
                       "correct": [int((i * 7) % 3 > 0) for i in range(40)]})
    table = evalmix.read(df, outcome="correct", condition="model", clusters={"item": "item"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.analyze(table, fast=True, reps=19, seed=3, progress=False,
                               methods=["naive", "CR2"])


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ atomic writes
def test_stale_files_of_an_older_report_do_not_survive(small_report, tmp_path, monkeypatch):
    _no_figures(monkeypatch)
    out = tmp_path / "report"
    small_report.write(out)
    (out / "plots").mkdir(exist_ok=True)
    (out / "plots" / "forest_old_contrast.png").write_bytes(b"old")
    (out / "prior_sensitivity.csv").write_text("term\nold\n")
    # an older report that wrote these: they are in its manifest (a user's file is kept,
    # tests/report/test_report_folder.py)
    marker = json.loads((out / REPORT_MARKER).read_text())
    marker["files"] += ["plots/forest_old_contrast.png", "prior_sensitivity.csv"]
    (out / REPORT_MARKER).write_text(json.dumps(marker))
    small_report.write(out)
    assert not (out / "plots" / "forest_old_contrast.png").exists()
    assert not (out / "prior_sensitivity.csv").exists()
    assert (out / REPORT_MARKER).exists()
    assert oct(out.stat().st_mode & 0o777) != oct(0o700)  # not mkdtemp's private mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no temp folders


def test_an_interrupted_write_leaves_the_old_report(small_report, tmp_path, monkeypatch):
    _no_figures(monkeypatch)
    out = tmp_path / "report"
    small_report.write(out)
    before = _files(out)
    newer = replace(small_report, intervals=small_report.intervals.assign(note="newer"))

    def half_then_ctrl_c(self, d, **options):
        self.intervals.to_csv(d / "intervals.csv", index=False)
        raise KeyboardInterrupt

    monkeypatch.setattr(type(small_report), "_write_files", half_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        newer.write(out)
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


WRITER = textwrap.dedent("""
    import pickle, sys
    import evalmix.report.figures as plots, evalmix.report.render as render
    plots.figure_list = render.figure_list = lambda rep: []
    report = pickle.load(open(sys.argv[1], "rb"))
    for _ in range(int(sys.argv[3])):
        report.write(sys.argv[2])
""")


def test_two_concurrent_writers_never_mix_runs(small_report, tmp_path, monkeypatch):
    _no_figures(monkeypatch)
    reports = {name: replace(small_report, intervals=small_report.intervals.assign(writer=name),
                             summary={**small_report.summary, "writer": name})
               for name in ("A", "B")}
    refs = {}
    for name, rep in reports.items():
        rep.write(tmp_path / f"ref_{name}")
        refs[name] = _files(tmp_path / f"ref_{name}")
        with open(tmp_path / f"{name}.pkl", "wb") as fh:
            pickle.dump(rep, fh)
    assert refs["A"] != refs["B"]
    (tmp_path / "writer.py").write_text(WRITER)
    out = tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "writer.py"),
                               str(tmp_path / f"{name}.pkl"), str(out), "25"], env=ENV,
                              stderr=subprocess.PIPE, text=True) for name in ("A", "B")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    final = _files(out)
    assert final in (refs["A"], refs["B"])  # one writer's report, whole
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


# ------------------------------------------------------------------ Ctrl-C
def test_sigint_during_a_coverage_grid_keeps_finished_cells(tmp_path):
    out = tmp_path / "grid"
    # long enough (2,000 replications x 999 resamples per cell) that a fast machine is
    # still inside the grid when the signal comes
    proc = _start("coverage", "--clusters", "10,20,40,80,160,320", "--cluster-size", "5,10",
                  "--icc", "0.1", "--methods", "naive,CR1,bootstrap", "--reps", "2000",
                  "--boot-reps", "999", "--quiet", "--out", str(out))
    jsonl = out / "coverage.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and jsonl.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the grid finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    kept = jsonl.read_text().count("\n")
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = stderr.strip().splitlines()
    assert lines == [f"evalmix: interrupted; kept {kept} of 12 cells in {jsonl}; rerun with "
                     "resume=True (CLI: --resume) to continue"]
    assert 1 <= kept < 12


def _wait_for_the_fit(proc: subprocess.Popen, out: Path, *, forked: bool) -> None:
    """Return once the model fit has started: the partial report (written just before the
    first fit) is on disk and, for a fit in a forked child, that child is running. No
    fixed sleep: a fast machine samples 100,000 draws per chain in under 20 s."""
    import psutil

    deadline = time.monotonic() + 300
    md = out / "report.md"
    while time.monotonic() < deadline and proc.poll() is None:
        started = md.is_file() and "incomplete: model fits running" in md.read_text()
        if started and forked:
            started = bool(psutil.Process(proc.pid).children(recursive=True))
        if started:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # inside the fit (model build, compilation or sampling)
    assert proc.poll() is None, proc.communicate()


@pytest.mark.mcmc
@pytest.mark.parametrize("timeout", ["0", "600"])  # in this process / in a forked child
def test_sigint_during_mcmc_keeps_only_the_design_based_report(tmp_path, timeout):
    """The design-based results are written before the fit starts (issue 14); the
    interrupted fit adds nothing to them and the folder carries no completion marker."""
    from evalmix.sim import pairwise_judges

    data = tmp_path / "judgments.csv"
    # large enough that sampling is still running when the signal comes, however fast
    # the machine (100,000 draws per chain on 8,640 rows take minutes)
    pairwise_judges(40, 6, 3, 3, seed=7).data.to_csv(data, index=False)
    out = tmp_path / "report"
    proc = _start("report", str(data), "--outcome", "outcome", "--model-a", "model_a",
                  "--model-b", "model_b", "--first-shown", "first_shown",
                  "--cluster", "scenario=scenario", "--cluster", "judge=judge",
                  "--backend", "bayes", "--reps", "19", "--draws", "100000", "--quiet",
                  "--model-timeout", timeout, "--out", str(out))
    _wait_for_the_fit(proc, out, forked=timeout != "0")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"evalmix: interrupted; the design-based intervals are in {out / 'intervals.csv'} "
        f"({out / 'report.md'} is marked incomplete)")
    assert "Traceback" not in stderr and "Traceback" not in stdout
    assert not (out / REPORT_MARKER).exists() and not (out / "report.html").exists()
    iv = pd.read_csv(out / "intervals.csv")
    assert set(iv["source"]) == {"design"} and iv["lo"].notna().any()
    assert "incomplete: model fits running" in (out / "report.md").read_text()


# ------------------------------------------------------------------ worker processes
def test_coverage_with_jobs_leaves_no_worker_processes(tmp_path):
    script = textwrap.dedent("""
        import psutil
        from evalmix.plan import coverage
        res = coverage(["naive", "CR1"], {"n_clusters": [10, 20, 30], "cluster_size": [5],
                       "icc": [0.1]}, reps=50, jobs=2, progress=False)
        assert res.backend == "joblib", res.backend
        # loky's and multiprocessing's resource trackers end with this process; workers
        # would idle on for minutes
        workers = [c for c in psutil.Process().children(recursive=True)
                   if c.is_running() and "resource_tracker" not in " ".join(c.cmdline())]
        print(len(workers))
    """)
    proc = subprocess.run([sys.executable, "-c", script], env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0"
