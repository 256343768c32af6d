"""`evalmix power` and `evalmix coverage` as real subprocesses on tiny designs.

Reference for the numbers: evalmix.plan.power.power called in-process (the CLI must
write exactly what the API returns), and the CSV/PNG contracts in evalmix.cli.plan.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from evalmix.plan.power import power
from evalmix.plan.study import COVERAGE_COLUMNS

# the installed console script (as users run it), else the module
_SCRIPT = Path(sys.executable).with_name("evalmix")
EVALMIX = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "evalmix.cli"]
#: CSV round trip of float64 (pandas writes repr precision)
CSV_TOL = 1e-12


def _run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*EVALMIX, *args], capture_output=True, text=True, timeout=240)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def _png(path: Path) -> None:
    assert path.exists() and path.stat().st_size > 10_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_power_cli_writes_curves_sizes_and_plot(tmp_path):
    out = tmp_path / "power"
    proc = _run("power", "--effect", "0.05", "--sd", "0.45", "--icc", "0.1",
                "--cluster-size", "10,20", "--clusters", "10:60:10",
                "--crossed", "judge=0.02:3", "--out", str(out))
    assert "wrote" in proc.stdout
    curves = pd.read_csv(out / "power.csv")
    for col in ("estimand", "effect", "n_clusters", "cluster_size", "icc", "deff", "se", "df",
                "power", "line"):
        assert col in curves.columns
    # 2 cluster sizes x (clusters only, + judge) lines x 6 values of K
    assert curves["line"].nunique() == 4 and len(curves) == 24
    base = curves[(curves.cluster_size == 10) & ~curves.line.str.contains("judge")]
    ref = power(0.05, n_clusters=base.n_clusters.to_numpy(), cluster_size=10, icc=0.1, sd=0.45)
    np.testing.assert_allclose(base.power.to_numpy(), ref.power, rtol=CSV_TOL)
    sizes = pd.read_csv(out / "sample_size.csv")
    assert {"line", "n_clusters_needed", "items_needed", "mde"} <= set(sizes.columns)
    assert sizes.loc[sizes.line.str.contains("judge"), "n_clusters_needed"].isna().all()
    _png(out / "power.png")


def test_power_cli_parametric_one_line_per_factor(tmp_path):
    out = tmp_path / "pilot"
    _run("power", "--components", "scenario=0.8", "--components", "judge=0.4",
         "--n-levels", "scenario=12", "--n-levels", "judge=3", "--vary", "scenario=6,24",
         "--vary", "judge=2,6", "--estimand", "mean", "--intercept", "0.4", "--reps", "60",
         "--out", str(out))
    curves = pd.read_csv(out / "power.csv")
    assert set(curves.line) == {"vary scenario", "vary judge"}
    plans = pd.read_csv(out / "plans.csv")
    assert {"plan", "power", "power_mcse", "mde", "mde_mcse", "n_levels_scenario",
            "n_levels_judge"} <= set(plans.columns)
    assert len(plans) == 5
    _png(out / "power.png")


def test_coverage_cli_writes_csv_plot_and_resumes(tmp_path):
    out = tmp_path / "cov"
    args = ("coverage", "--methods", "naive,CR1,bootstrap", "--clusters", "8,20",
            "--cluster-size", "4", "--icc", "0.1,0.3", "--reps", "100", "--boot-reps", "99",
            "--seed", "3", "--quiet", "--out", str(out))
    _run(*args)
    table = pd.read_csv(out / "coverage.csv")
    assert list(table.columns) == list(COVERAGE_COLUMNS)
    assert len(table) == 12 and table.coverage.between(0, 1).all()
    _png(out / "coverage.png")
    # rerunning into the same folder needs --resume; with it nothing is recomputed
    again = _run(*args, ok=False)
    assert again.returncode == 2 and "--resume" in again.stderr
    resumed = _run(*args, "--resume")
    assert "(4 cells resumed)" in resumed.stdout
    pd.testing.assert_frame_equal(pd.read_csv(out / "coverage.csv").drop(columns="seconds"),
                                  table.drop(columns="seconds"))


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    proc = _run("power", "--clusters", "ten", "--sd", "1", "--out", str(tmp_path / "x"),
                ok=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "ten" in proc.stderr
