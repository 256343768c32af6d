"""The report's "Judges against humans" section: built, written, escaped, never a crash."""

from __future__ import annotations

import warnings

import numpy as np

import evalmix
import evalmix.datasets
from evalmix.cli import main
from evalmix.humans import agreement
from evalmix.report.judges_vs_humans import humans_section


def _small():
    """PandaLM's first 60 items (a quick report)."""
    frame = evalmix.datasets.pandalm()
    return frame[frame["item_id"].isin(sorted(frame["item_id"].unique())[:60])]


def _pandalm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.datasets.load_table("pandalm")


def test_section_matches_evalmix_agreement_and_ppi():
    table = _pandalm()
    sec = humans_section(table, ["human_1", "human_2", "human_3"])
    assert sec.cluster == "item_group"
    raw = evalmix.datasets.pandalm()
    raw = raw.assign(rater_kind=np.where(raw["judge_type"] == "human", "human", "llm"),
                     unit=raw["item_id"].astype(str) + raw["model_a"] + raw["model_b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = agreement(raw, item="unit", rater="judge", cluster="item_group",
                           method="delta", min_items=5).vs_humans().set_index("rater_1")
    for _, row in sec.agreement.iterrows():
        assert abs(row["estimate"] - direct.loc[row["judge"], "estimate"]) < 1e-12
        assert abs(row["human_ceiling"] - direct.loc[row["judge"], "human_ceiling"]) < 1e-12
    assert len(sec.alt_test) == 2 and len(sec.anchored) > 0
    # every comparison has human labels: PPI is the human-only mean (lambda 0)
    assert (sec.anchored["n_labelled"] > 0).all()


def test_analyze_writes_the_section_and_escapes_names(tmp_path):
    frame = _small()
    frame.loc[frame["judge"] == "human_3", "judge"] = "<b>human_3</b>"
    frame.loc[frame["judge"] == "PandaLM-7B", "judge"] = "<img src=x>"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = evalmix.read(frame, outcome="outcome", model_a="model_a", model_b="model_b",
                             clusters={"item": "item_id", "item_group": "item_group",
                                       "judge": "judge"})
        rep = evalmix.analyze(table, methods=["naive", "CR2"], reps=99, seed=1,
                              progress=False, humans=["human_1", "human_2", "<b>human_3</b>"])
    md = rep.to_markdown()
    section = md[md.index("## Judges against humans"):]
    section = section[:section.index("\n## ", 5)]
    assert "<img src=x>" not in section and "&lt;img src=x&gt;" in section
    html = rep.humans.html()
    assert "<img src=x>" not in html and "&lt;img src=x&gt;" in html


def test_a_section_that_cannot_be_built_is_a_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(_pandalm(), methods=["naive"], reps=99, seed=1,
                              progress=False, humans=["nobody"])
    assert rep.humans is None
    assert any("judges against humans: not computed" in w for w in rep.warnings)


def test_report_cli_takes_human_raters(tmp_path, capsys):
    """--human / --rater-kind become analyze(humans=...); the full report run with the
    section is test_analyze_writes_the_section_and_escapes_names."""
    import argparse

    from evalmix.cli.report import _humans

    src = tmp_path / "pandalm.csv"
    frame = _small().assign(kind=lambda f: np.where(f["judge_type"] == "human", "Human", "llm"))
    frame.to_csv(src, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = evalmix.read(src, outcome="outcome", model_a="model_a", model_b="model_b",
                             clusters={"judge": "judge"}, on_unparsed="drop")
    args = argparse.Namespace(human=None, rater_kind="kind", data=str(src), encoding=None)
    assert _humans(args, table) == ["human_1", "human_2", "human_3"]
    args.human = ["human_1"]
    args.rater_kind = None
    assert _humans(args, table) == ["human_1"]
    rc = main(["report", str(src), "--outcome", "outcome", "--model-a", "model_a",
               "--model-b", "model_b", "--cluster", "judge=judge", "--fast", "--quiet",
               "--rater-kind", "nope", "--out", str(tmp_path / "out2")])
    assert rc == 2 and "--rater-kind 'nope'" in capsys.readouterr().err
