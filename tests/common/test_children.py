"""Issue 36 item 1: child processes end with their parent, and SIGTERM stops a command
as Ctrl-C does (one line, exit 143, no traceback).

The CLI is killed while the Bayesian fit samples in its forked child (``--model-timeout``
> 0); every process below the CLI at that moment must be gone shortly after, whether the
CLI was ended with SIGTERM (it terminates its pool) or SIGKILL (it cannot: the kernel's
parent-death signal, or the watchdog thread, ends the child).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import evalmix

psutil = pytest.importorskip("psutil")

SRC = str(Path(evalmix.__file__).resolve().parents[1])
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _gone(procs: list, within: float = 15.0) -> list:
    """The processes of ``procs`` still alive (zombies count as ended) after ``within``."""
    deadline = time.monotonic() + within
    alive = procs
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
    return alive


def _cli_in_the_fit(tmp_path: Path) -> tuple[subprocess.Popen, list]:
    """An ``evalmix report`` sampling in its forked child, and the processes below it."""
    from evalmix.sim import pairwise_judges

    data = tmp_path / "judgments.csv"
    pairwise_judges(30, 4, 2, 2, seed=3).data.to_csv(data, index=False)
    out = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalmix.cli", "report", str(data), "--outcome", "outcome",
         "--model-a", "model_a", "--model-b", "model_b", "--cluster", "scenario=scenario",
         "--cluster", "judge=judge", "--backend", "bayes", "--reps", "19", "--draws",
         "100000", "--quiet", "--model-timeout", "600", "--out", str(out)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    kids: list = []
    while time.monotonic() < deadline and proc.poll() is None and not kids:
        time.sleep(0.2)
        kids = psutil.Process(proc.pid).children(recursive=True)
    time.sleep(2.0)  # into the fit (model build, compilation or sampling)
    assert proc.poll() is None and kids, proc.communicate()
    return proc, psutil.Process(proc.pid).children(recursive=True)


@pytest.mark.mcmc
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_killing_the_cli_during_the_bayesian_fit_leaves_no_process(tmp_path, how):
    proc, kids = _cli_in_the_fit(tmp_path)
    proc.send_signal(getattr(signal, how))
    stdout, stderr = proc.communicate(timeout=120)
    assert _gone(kids) == []
    if how == "SIGTERM":
        assert proc.returncode == 143, stderr
        assert "Traceback" not in stderr and "Traceback" not in stdout
        lines = stderr.strip().splitlines()
        assert lines[-1].startswith("evalmix: terminated (SIGTERM); "), stderr
    else:
        assert proc.returncode == -signal.SIGKILL


def test_a_worker_ends_when_its_parent_is_killed():
    """The mechanism alone: a forked pool worker busy for minutes, its parent SIGKILLed."""
    script = textwrap.dedent("""
        import os, time
        from evalmix._children import fork_pool
        pool = fork_pool(1)
        pool.apply_async(time.sleep, (600,))
        time.sleep(1.0)
        print(" ".join(str(p.pid) for p in pool._pool), flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=ENV, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    pids = [int(x) for x in proc.stdout.readline().split()]
    workers = [psutil.Process(pid) for pid in pids]
    assert workers and all(w.is_running() for w in workers)
    proc.kill()
    proc.wait(timeout=30)
    assert _gone(workers) == []


def test_the_watchdog_without_a_parent_death_signal(monkeypatch):
    """Where there is no parent-death signal (macOS), the watchdog thread ends the child
    once it is re-parented."""
    script = textwrap.dedent("""
        import os, sys, time
        import evalmix._children as ch
        ch._parent_death_signal = lambda: False
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            ch.worker_init(parent)
            time.sleep(600)
            os._exit(0)
        print(pid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=ENV, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    child = psutil.Process(int(proc.stdout.readline()))
    time.sleep(0.5)
    assert child.is_running()
    proc.kill()
    proc.wait(timeout=30)
    assert _gone([child]) == []


def test_sigterm_during_a_coverage_grid_is_one_line_and_exit_143(tmp_path):
    """SIGTERM (kill, a scheduler's time limit) stops a command as Ctrl-C does, without
    MCMC: the finished cells are kept and said, exit 128 + 15."""
    out = tmp_path / "grid"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalmix.cli", "coverage", "--clusters", "10,20,40,80,160,320",
         "--cluster-size", "5,10", "--icc", "0.1", "--methods", "naive,CR1,bootstrap",
         "--reps", "2000", "--boot-reps", "999", "--quiet", "--out", str(out)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jsonl = out / "coverage.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and jsonl.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the grid finished before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalmix: terminated (SIGTERM); kept "), stderr
