"""Issue 36 item 2 and issue 27 item 2: reports are independent objects, and a figure
that fails costs that figure only.

Two reports written at once from two threads of one process (each with enough figures
for the forked plot workers) hold exactly the files each writes alone; a figure whose
drawing raises is left out with a warning, recorded in ``summary.json`` and the report's
warnings, and every other file and figure is written.
"""

from __future__ import annotations

import json
import re
import threading
import warnings

import pytest

import evalmix
from evalmix.errors import EvalmixWarning
from evalmix.report import figures as plots
from evalmix.sim import pairwise_judges

_LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")


def _report(n_scenarios: int, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = pairwise_judges(n_scenarios, 3, 2, 2, seed=seed).table()
        return evalmix.analyze(table, fast=True, reps=19, seed=seed, progress=False,
                               methods=["naive", "CR2"])


@pytest.fixture(scope="module")
def two_reports():
    return _report(10, 1), _report(12, 2)


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_reports_written_at_once_from_threads_are_each_written_alone(two_reports,
                                                                         tmp_path):
    a, b = two_reports
    for rep in (a, b):
        assert len(plots.figure_list(rep)) >= plots.PARALLEL_MIN_FIGURES  # forked workers
    alone = []
    for i, rep in enumerate((a, b)):
        rep.write(tmp_path / f"alone{i}")
        alone.append(_files(tmp_path / f"alone{i}"))
    assert alone[0]["plots/forest_00.png"] != alone[1]["plots/forest_00.png"]
    errors: list[BaseException] = []

    def write(rep, out):
        try:
            rep.write(out)
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    for trial in range(3):

        outs = [tmp_path / f"t{trial}_{i}" for i in range(2)]
        threads = [threading.Thread(target=write, args=(rep, out))
                   for rep, out in zip((a, b), outs, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert errors == []
        assert [_files(o) for o in outs] == alone, f"trial {trial}: the reports crossed"


@pytest.mark.parametrize("parallel", [True, False])
def test_a_figure_that_fails_costs_that_figure_only(two_reports, tmp_path, monkeypatch,
                                                    parallel):
    rep = two_reports[0]
    if not parallel:
        monkeypatch.setattr(plots, "PARALLEL_MIN_FIGURES", 10**6)
    real = plots.forest
    est, con = plots.forest_order(rep)[1]

    def forest(rows, *, title, recommended):
        if title == f"{con} - {est}":
            raise ValueError("Unknown symbol: \\foo, found '\\'  (at char 0)")
        return real(rows, title=title, recommended=recommended)

    monkeypatch.setattr(plots, "forest", forest)
    names = [n for n, _ in plots.figure_list(rep)]
    out = tmp_path / "rep"
    with pytest.warns(EvalmixWarning, match="could not be drawn") as caught:
        paths = rep.write(out)
    failed = [n for n in names if f"'{n}'" in " ".join(str(w.message) for w in caught)]
    assert failed == ["forest_01"]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["figures_not_drawn"]) == failed
    assert "ValueError: Unknown symbol" in summary["figures_not_drawn"][failed[0]]
    assert any(failed[0] in w and "could not be drawn" in w for w in summary["warnings"])
    drawn = {p.stem for p in (out / "plots").iterdir()}
    assert drawn == set(names) - set(failed)
    md = (out / "report.md").read_text()
    assert set(_LINK.findall(md)) == {f"plots/{n}.png" for n in drawn}
    assert "could not be drawn" in md and "could not be drawn" in paths["report.html"].read_text()
    assert (out / ".evalmix-report").exists()   # a complete report
    assert (out / "intervals.csv").read_bytes() == rep.intervals.to_csv(index=False).encode()


def test_a_failed_figure_in_to_html_alone_is_a_warning(two_reports, monkeypatch):
    rep = two_reports[0]
    monkeypatch.setattr(plots, "PARALLEL_MIN_FIGURES", 10**6)

    def broken(*args, **kwargs):
        raise RuntimeError("no display")

    monkeypatch.setattr(plots, "headline_plot", broken)
    with pytest.warns(EvalmixWarning, match="'headline' could not be drawn"):
        page = rep.to_html()
    assert "alt='headline intervals'" not in page and "alt='forest plot'" in page
