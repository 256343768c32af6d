"""The report's controlled estimands asked for by name: analyze(controlled=...), the
``evalmix report --controlled / --baseline / --style-features`` flags, the figures of
raw vs controlled with intervals, and the HTML / Markdown / JSON outputs.

Data: the small AlpacaEval results folder and Arena battles of docs/controlled.md
(tests/docs_data_controlled.py: real AlpacaEval preferences and answer lengths, synthetic
battles with answer features), read by the readers.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import docs_data_controlled
import matplotlib
import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.cli import main
from evalmix.data.readers import read_alpaca_eval, read_battles
from evalmix.errors import InvalidOptionError
from evalmix.inference.length_control import length_controlled_win_rate
from evalmix.inference.style_control import style_controlled_bt
from evalmix.report.controlled import choose_controlled
from evalmix.report.controlled_plots import length_control_plot, style_control_plot

matplotlib.use("Agg")
FAST = {"fast": True, "reps": 50, "seed": 1, "progress": False, "methods": ["naive", "CR2"]}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("controlled")
    docs_data_controlled.write(root)
    return root


@pytest.fixture(scope="module")
def alpaca(data):
    return read_alpaca_eval(data / "results")


@pytest.fixture(scope="module")
def battles(data):
    return read_battles(data / "arena_battles.json")


def test_auto_chooses_by_the_table(alpaca, battles):
    assert choose_controlled(alpaca) == ("length", [])
    assert choose_controlled(battles) == ("style", ["length", "headers", "lists", "bold"])
    scores = evalmix.read(pd.DataFrame({"item": np.arange(20) % 10, "model": ["x", "y"] * 10,
                                        "correct": np.arange(20) % 3 == 0}),
                          outcome="correct", condition="model", clusters={"item": "item"})
    assert choose_controlled(scores) == ("none", [])
    bare = replace(alpaca, data=alpaca.frame().drop(columns=["length_a", "length_b"]))
    assert choose_controlled(bare) == ("none", [])
    # a baseline or features given ask for their estimand
    assert choose_controlled(alpaca, baseline="gpt4_1106_preview")[0] == "length"
    assert choose_controlled(alpaca, style_features=["length"]) == ("style", ["length"])
    assert choose_controlled(battles, "none") == ("none", [])


def test_asked_for_but_not_possible_says_what_is_missing(alpaca, battles):
    with pytest.raises(InvalidOptionError, match="no model is in every row"):
        choose_controlled(battles, "length")
    bare = replace(alpaca, data=alpaca.frame().drop(columns=["length_a", "length_b"]))
    with pytest.raises(InvalidOptionError, match="length_a and length_b"):
        choose_controlled(bare, "length")
    with pytest.raises(InvalidOptionError, match="needs answer features"):
        choose_controlled(bare, "style")
    with pytest.raises(InvalidOptionError, match="'tokens' needs the columns tokens_a"):
        choose_controlled(battles, style_features=["tokens"])
    with pytest.raises(InvalidOptionError, match="give one of them"):
        choose_controlled(alpaca, baseline="x", style_features=["length"])
    with pytest.raises(InvalidOptionError, match="baseline= does not apply"):
        choose_controlled(alpaca, "none", baseline="x")
    with pytest.raises(InvalidOptionError, match="choose one of 'auto', 'length'"):
        choose_controlled(alpaca, "lenght")  # type: ignore[arg-type]


def test_columns_of_a_table_file_give_the_features(alpaca):
    """A table read with evalmix.read keeps only its roles: the answer lengths come from
    the source frame (``columns=``), as the CLI passes a table file's columns."""
    src = alpaca.frame()[["model_a", "model_b", "y", "item", "length_a", "length_b"]].copy()
    src["verdict"] = np.where(src["y"] > 0.5, "a", np.where(src["y"] < 0.5, "b", "tie"))
    table = evalmix.read(src, outcome="verdict", model_a="model_a", model_b="model_b",
                         clusters={"item": "item"})
    assert "length_a" not in table.data.columns
    assert choose_controlled(table) == ("none", [])
    assert choose_controlled(table, columns=src) == ("length", [])


def _labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def test_length_control_plot_draws_both_intervals_per_model(alpaca):
    rows = length_controlled_win_rate(alpaca, reps=30, seed=2).tidy()
    rows.loc[rows["model"] == "phi-2", "model"] = "$phi$-2"  # drawn as written
    fig = length_control_plot(rows)
    ax = fig.axes[0]
    lc = rows[rows["estimand"] == "lc_win_rate"].sort_values("estimate", ascending=False)
    assert _labels(ax) == list(lc["model"])  # best LC at the top
    # two intervals and two points per model: raw and controlled, in percent
    segs = np.concatenate([c.get_segments() for c in ax.collections if hasattr(c, "get_segments")
                           and len(c.get_segments()) == len(lc)])
    ends = np.sort(np.round(segs[:, :, 0].ravel(), 6))
    want = np.sort(np.round(100 * rows[["lo", "hi"]].to_numpy().ravel(), 6))
    assert np.array_equal(ends, want)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["raw win rate", "length-controlled win rate (AlpacaEval 2)"]
    assert "gpt4_1106_preview" in ax.get_xlabel() and "95%" in ax.get_xlabel()
    assert all(not t.get_text().startswith("$") or "$phi$" in t.get_text()
               for t in ax.get_yticklabels())


def test_style_control_plot_draws_abilities_and_coefficients(battles):
    rows = style_controlled_bt(battles, ["length", "bold"]).tidy()
    fig = style_control_plot(rows)
    ab, co = fig.axes
    ctl = rows[rows["estimand"] == "bt_style_controlled"].sort_values("estimate",
                                                                     ascending=False)
    assert _labels(ab) == [f"{int(r)}. {m}" for r, m in zip(ctl["rank"], ctl["model"],
                                                            strict=True)]
    assert _labels(co) == ["length", "bold"]  # the first at the top
    assert [t.get_text() for t in ab.get_legend().get_texts()] == ["raw Bradley-Terry",
                                                                   "style-controlled"]
    assert "clustered by item" in ab.get_xlabel()


def test_report_outputs_carry_the_controlled_estimand(alpaca, tmp_path):
    """controlled="length" with a baseline: the section, its CSV, its plot in the HTML
    and Markdown pages, its rows and the choice in the JSON; "none" leaves it out."""
    rep = evalmix.analyze(alpaca, controlled="length", baseline="gpt4_1106_preview", **FAST)
    assert rep.summary["controlled"] == "length"
    out = rep.write(tmp_path / "r")
    assert (tmp_path / "r" / "plots" / "length_control.png").is_file()
    assert "length_control.csv" in {p.name for p in out.values()}
    md = (tmp_path / "r" / "report.md").read_text()
    assert "![length_control](plots/length_control.png)" in md
    html = (tmp_path / "r" / "report.html").read_text()
    assert "alt='length_control' src='data:image/png;base64," in html
    js = json.loads(rep.to_json())
    assert js["summary"]["controlled"] == "length"
    lc = [r for r in js["length_control"] if r["estimand"] == "lc_win_rate"]
    assert {r["model"] for r in lc} == {"phi-2", "vicuna-13b", "claude-2"}
    assert all(r["lo"] <= r["estimate"] <= r["hi"] and r["baseline"] == "gpt4_1106_preview"
               for r in lc)
    none = evalmix.analyze(alpaca, controlled="none", **FAST)
    assert none.length_control is None and none.summary["controlled"] == "none"
    assert "length_control" not in [n for n, _ in none._extra_figures()]


def test_report_style_section_with_chosen_features(battles, tmp_path):
    rep = evalmix.analyze(battles, style_features=["length"], **FAST)
    assert rep.summary["controlled"] == "style"
    coef = rep.style_control[rep.style_control["estimand"] == "style_coef"]
    assert list(coef["contrast"]) == ["length"]
    assert np.all(coef["lo"] < coef["estimate"]) and np.all(coef["estimate"] < coef["hi"])
    md = rep.to_markdown(plots_dir="plots")
    assert "![style_control](plots/style_control.png)" in md


# ------------------------------------------------------------------ the CLI
def _verdicts_csv(path: Path, seed: int = 3) -> Path:
    """A table file of verdicts against one baseline on 150 instructions, with answer
    lengths, drawn from a length-biased logistic model (longer answers win more)."""
    rng = np.random.default_rng(seed)
    rows = []
    for m, (skill, verbose) in {"m1": (-0.5, 400.0), "m2": (0.0, 0.0), "m3": (0.4, -300.0)}.items():
        for i in range(150):
            la, lb = rng.normal(1500, 300), rng.normal(1500 + verbose, 300)
            p_b = 1 / (1 + np.exp(-(skill + 1.2 * np.tanh((lb - la) / 400))))
            rows.append({"instruction": f"q{i}", "baseline": "base", "model": m,
                         "verdict": "b" if rng.random() < p_b else "a",
                         "length_a": round(la), "length_b": round(lb)})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_cli_asks_for_length_control_on_a_table_file(tmp_path, capsys):
    """A CSV table with length_a / length_b: --controlled length finds them through the
    file's columns, and the section, CSV, figure and JSON choice are written."""
    path = _verdicts_csv(tmp_path / "verdicts.csv")
    code = main(["report", str(path), "--outcome", "verdict", "--model-a", "baseline",
                 "--model-b", "model", "--cluster", "item=instruction", "--baseline", "base",
                 "--fast", "--reps", "50", "--seed", "1", "--quiet",
                 "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "length-controlled win rate beside the raw for 3 models" in out
    assert (tmp_path / "o" / "plots" / "length_control.png").is_file()
    rows = pd.read_csv(tmp_path / "o" / "length_control.csv")
    assert set(rows["estimand"]) == {"lc_win_rate", "win_rate"}
    assert set(rows["model"]) == {"m1", "m2", "m3"} and set(rows["baseline"]) == {"base"}
    lc = rows[rows["estimand"] == "lc_win_rate"].set_index("model")["estimate"]
    raw = rows[rows["estimand"] == "win_rate"].set_index("model")["estimate"]
    assert lc["m1"] < raw["m1"] and lc["m3"] > raw["m3"]  # the verbose one loses its edge
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["controlled"] == "length"
    assert "![length_control](plots/length_control.png)" in (tmp_path / "o" / "report.md"
                                                            ).read_text()


@pytest.mark.parametrize(("extra", "message"), [
    (["--controlled", "length"], "no model is in every row"),
    (["--baseline", "m1"], "no model is in every row"),
    (["--style-features", "tokens"], "'tokens' needs the columns tokens_a and tokens_b"),
    (["--style-features", ","], "--style-features expects feature names"),
    (["--controlled", "style", "--baseline", "m1"], "baseline= does not apply"),
])
def test_cli_errors_are_one_line(data, tmp_path, capsys, extra, message):
    code = main(["report", str(data / "arena_battles.json"), *extra, "--fast", "--quiet",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert message in lines[0]
    assert not (tmp_path / "o" / "intervals.csv").exists()  # refused before any work


def test_cli_auto_reads_a_table_file_once(tmp_path, capsys, monkeypatch):
    """--controlled auto alone does not read a table file a second time (its answer
    columns are read when an option asks for a controlled estimand)."""
    import evalmix.data.load as load

    calls = []
    real = load.load_frame

    def counting(*args, **kwargs):
        calls.append(args[0] if args else kwargs.get("source"))
        return real(*args, **kwargs)

    monkeypatch.setattr(load, "load_frame", counting)
    path = _verdicts_csv(tmp_path / "verdicts.csv")
    argv = ["report", str(path), "--outcome", "verdict", "--model-a", "baseline",
            "--model-b", "model", "--cluster", "item=instruction", "--fast", "--reps", "50",
            "--seed", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "auto")]) == 0
    assert calls == []
    summary = json.loads((tmp_path / "auto" / "summary.json").read_text())
    assert summary["controlled"] == "none"
    assert main([*argv, "--controlled", "length", "--out", str(tmp_path / "asked")]) == 0
    assert len(calls) == 1
    capsys.readouterr()
