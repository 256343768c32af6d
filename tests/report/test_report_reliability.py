"""The report's "Reliability and budget" section (issue 30): what it holds, when it is
there, and that its numbers are evalmix.gstudy's (tests/compare/test_gstudy.py checks those)."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.report.reliability import RELIABILITY_TITLE, reliability
from evalmix.sim import clustered_scores, pairwise_judges


@pytest.fixture(scope="module")
def judged():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pairwise_judges(10, 3, 2, 3, seed=4, tie_threshold=0).table()


def test_section_numbers_are_the_g_study(judged):
    rel, note = reliability(judged, level=0.95, seed=1, fast=True, model_timeout=None)
    assert note is None and rel is not None
    g = evalmix.gstudy(judged, facets=["scenario", "persona", "author", "judge", "order"],
                       fixed=["order"], seed=1, progress=False)
    s = rel["summary"]
    now = g.project()
    assert s["method"] == "anova" and s["fixed"] == ["order"]
    for q in ("erho2", "phi", "se_score", "se_diff", "erho2_lo", "se_diff_hi"):
        assert s[q] == pytest.approx(float(now[q][0]), rel=1e-12)
    assert s["naive_se_score"] == pytest.approx(g.naive_se_score)
    assert "seed 003" in s["advice"]
    np.testing.assert_allclose(rel["components"]["variance"], g.variances)


def test_report_shows_and_writes_the_section(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = pairwise_judges(6, 2, 2, 2, seed=4, tie_threshold=0).table()
        rep = evalmix.analyze(small, methods=["naive"], fast=True, reps=199, seed=3,
                              progress=False)
    assert rep.reliability is not None
    md, page = rep.to_markdown(), rep.to_html(figures={})   # no plots: fast
    assert f"## {RELIABILITY_TITLE}" in md and "evalmix plan dstudy" in md
    assert f"<h2>{RELIABILITY_TITLE}</h2>" in page
    # written as the partial report is (no plots); the full write adds only figures
    partial = replace(rep, summary={**rep.summary, "incomplete": "test"})
    paths = partial.write(tmp_path / "r")
    frame = pd.read_csv(paths["reliability.csv"])
    assert set(frame["table"]) == {"components", "facets"}
    assert "reliability" in rep.to_dict()


def test_no_section_without_two_facets_or_one_object():
    one_facet = clustered_scores(20, 5, seed=1).table()      # no condition, one role
    assert reliability(one_facet, level=0.95, seed=1, fast=True,
                       model_timeout=None) == (None, None)
    bt = pairwise_judges(6, 2, 2, 2, seed=1, tie_threshold=0).table()
    if bt.data["model_a"].nunique() > 1:
        assert reliability(bt, level=0.95, seed=1, fast=True,
                           model_timeout=None) == (None, None)


def test_unbalanced_fast_report_says_how_to_get_it(judged):
    part = judged.subset(np.arange(judged.n_obs) > 3)
    rel, note = reliability(part, level=0.95, seed=1, fast=True, model_timeout=None)
    assert rel is None and "REML" in note and "evalmix plan dstudy" in note
