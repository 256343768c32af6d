"""The command line as a user runs it: ``evalmix --help`` and ``evalmix demo``.

Run in a subprocess so the console script, ``python -m evalmix.cli`` and the exit codes
are what a user gets. The demo is checked only for the design summary (design.json, and
its Markdown in design.md or in the report's report.md); the report package adds more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
#: generous: the demo simulates 6,480 judgments and (with --fast) skips MCMC
DEMO_TIMEOUT_S = 300


def run(args: list[str], cwd: Path | None = None, timeout: float = 120):
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MPLBACKEND": "Agg"}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env)


def evalmix_cmd() -> list[str]:
    script = BIN / "evalmix"
    return [str(script)] if script.exists() else [sys.executable, "-m", "evalmix.cli"]


def demo_flags() -> set[str]:
    """Option strings of the ``demo`` subcommand (whichever package registered it)."""
    import argparse

    from evalmix.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {o for action in sub.choices["demo"]._actions for o in action.option_strings}


def test_help_lists_demo():
    res = run([*evalmix_cmd(), "--help"])
    assert res.returncode == 0, res.stderr
    assert "usage: evalmix" in res.stdout and "demo" in res.stdout


def test_version():
    res = run([sys.executable, "-m", "evalmix.cli", "--version"])
    assert res.returncode == 0 and res.stdout.startswith("evalmix ")


def test_demo_writes_design_summary(tmp_path: Path):
    flags = demo_flags()
    extra = [flag for flag in ("--fast", "--quiet") if flag in flags]
    if "--reps" in flags:
        extra += ["--reps", "200"]
    out = tmp_path / "demo-report"
    res = run([sys.executable, "-m", "evalmix.cli", "demo", "--out", str(out), *extra],
              cwd=tmp_path, timeout=DEMO_TIMEOUT_S)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (out / "design.json").exists()
    summary = json.loads((out / "design.json").read_text())
    assert summary["rows_raw"] == 6_480 and summary["kind"] == "pairwise"
    assert {f["factor"] for f in summary["factors"]} >= {"scenario", "persona", "judge"}
    # the Markdown design summary (issue 2: Markdown + JSON)
    md = (out / "design.md").read_text()
    assert "Design summary" in md and "6,480" in md
    assert "| scenario | scenario | 30 |" in md and "crossed" in md


@pytest.mark.skipif(not (BIN / "evalmix").exists(), reason="console script not installed")
def test_console_script_reports_bad_input_in_one_line(tmp_path: Path):
    res = run([str(BIN / "evalmix"), "report", str(tmp_path / "missing.csv"),
               "--outcome", "y", "--out", str(tmp_path / "r")])
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("evalmix: error:") and "missing.csv" in lines[-1]
