"""One list of figures (issue 16): report.md links exactly the PNGs Report.write saved
(it once linked plots/controlled.png when the controlled rows were missing), and the
Markdown table writer is shared with the design summary."""

from __future__ import annotations

import re
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix._markdown import markdown_table
from evalmix.report.figures import figure_list
from evalmix.sim import pairwise_judges

_LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")


@pytest.fixture(scope="module")
def report():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = pairwise_judges(10, 3, 2, 2, seed=4).table()
        return evalmix.analyze(table, fast=True, reps=49, seed=1, progress=False,
                               methods=["naive", "CR2"])


def _links_and_files(rep, out):
    rep.write(out)
    links = set(_LINK.findall((out / "report.md").read_text()))
    files = {f"plots/{p.name}" for p in (out / "plots").iterdir()}
    return links, files


def test_every_linked_image_exists_and_every_image_is_linked(report, tmp_path):
    assert report.intervals["estimand"].eq("controlled_win_rate").any()
    links, files = _links_and_files(report, tmp_path / "a")
    assert "plots/controlled.png" in links
    assert links == files


def test_no_controlled_link_when_its_rows_have_no_estimate(report, tmp_path):
    iv = report.intervals.copy()
    iv.loc[iv["estimand"] == "controlled_win_rate", ["estimate", "lo", "hi"]] = np.nan
    rep = replace(report, intervals=iv)
    assert "controlled" not in [n for n, _ in figure_list(rep)]
    links, files = _links_and_files(rep, tmp_path / "b")
    assert links == files and "plots/controlled.png" not in links


def test_one_markdown_table_writer():
    df = pd.DataFrame({"term": ["sd[position|judge]"], "value": [0.123456]})
    assert markdown_table(df, cell=lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
                          ) == ("| term | value |\n| --- | --- |\n"
                                "| sd[position\\|judge] | 0.1235 |")
    assert markdown_table(pd.DataFrame()) == "_none_"
    long = markdown_table(pd.DataFrame({"a": range(5)}), max_rows=2)
    assert "| 1 |" in long and "| 2 |" not in long and "_first 2 of 5 rows" in long


def test_figures_drawn_on_two_processes_are_those_drawn_here(report, monkeypatch):
    """The report's figures drawn by two forked workers are, byte for byte and in reading
    order, the figures drawn in this process."""
    from evalmix.report import figures as plots

    names = [name for name, _ in plots.figure_list(report)]
    assert len(names) >= plots.PARALLEL_MIN_FIGURES   # this report takes the parallel path
    parallel = plots.draw_figures(report).pngs
    monkeypatch.setattr(plots, "PARALLEL_MIN_FIGURES", 10**6)
    here = plots.draw_figures(report).pngs
    assert list(parallel) == names == list(here)
    assert parallel == here
