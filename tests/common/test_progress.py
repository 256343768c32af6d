"""The one progress display (issue 14): counts with an ETA, stages whose timer stops when
they end, nothing with progress=False; used by analyze and the coverage study."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from evalmix._progress import Progress


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=False, width=110), buf


def _line(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


def test_a_count_shows_done_of_total_and_an_eta():
    console, buf = _console()
    clock = _Clock()
    with Progress(console=console, get_time=clock) as bar:
        task = bar.task("intervals", 10, done=2)
        for _ in range(3):
            clock.t += 2.0
            bar.advance(task)
    line = _line(buf.getvalue(), "intervals")
    assert "5/10" in line
    # elapsed 0:00:06, and 5 left at one per 2 s: ETA 0:00:10 (rich's speed estimate)
    assert re.search(r"0:00:06\s+0:00:10", line), line


def test_a_finished_stage_stops_its_timer_and_shows_no_count():
    console, buf = _console()
    clock = _Clock()
    with Progress(console=console, get_time=clock) as bar:
        with bar.stage("Laplace GLMM: optimising"):
            clock.t += 7.0
        clock.t += 500.0  # the rest of the run
        with pytest.raises(RuntimeError), bar.stage("MCMC: sampling"):
            clock.t += 3.0
            raise RuntimeError("fit failed")
        clock.t += 100.0
    text = buf.getvalue()
    laplace, mcmc = _line(text, "Laplace GLMM"), _line(text, "MCMC")
    assert "0:00:07" in laplace and "0:00:03" in mcmc  # not 0:10:10 / 0:01:43
    for line in (laplace, mcmc):
        assert "✓" in line and "/?" not in line and "0/" not in line


def test_disabled_progress_draws_nothing():
    console, buf = _console()
    with Progress(False, console=console) as bar:
        bar.advance(bar.task("cells", 3))
        with bar.stage("x"):
            pass
    assert buf.getvalue() == ""


def test_analyze_shows_counts_and_model_stages(monkeypatch):
    """analyze() counts its intervals and shows the model fit as a named stage."""
    import evalmix
    import evalmix.report.analyze as analyze_mod
    from evalmix.sim import pairwise_judges

    console, buf = _console()
    monkeypatch.setattr(analyze_mod, "Progress",
                        lambda enabled: Progress(enabled, console=console))
    table = pairwise_judges(8, 3, 2, 2, tie_threshold=0, seed=1).table()
    rep = evalmix.analyze(table, methods=["naive", "CR2", "glmm_laplace"], reps=19, seed=1)
    text = buf.getvalue()
    n_design = int((rep.intervals["source"] == "design").sum())
    assert f"{n_design}/{n_design}" in _line(text, "intervals")
    assert "✓" in _line(text, "Laplace GLMM: optimising")
    quiet, qbuf = _console()
    monkeypatch.setattr(analyze_mod, "Progress",
                        lambda enabled: Progress(enabled, console=quiet))
    evalmix.analyze(table, methods=["naive", "CR2"], reps=19, seed=1, progress=False)
    assert qbuf.getvalue() == ""


def test_the_coverage_study_counts_cells(monkeypatch):
    import evalmix.plan.study as study

    console, buf = _console()
    monkeypatch.setattr(study, "Progress", lambda enabled: Progress(enabled, console=console))
    study.coverage(["naive"], {"n_clusters": [10, 20], "cluster_size": [5], "icc": [0.1]},
                   reps=20, progress=True)
    assert "2/2" in _line(buf.getvalue(), "coverage grid")
