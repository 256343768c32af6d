"""Upstream reproduction and results-folder hygiene on the tools' own files.

tests/fixtures/upstream/ holds upstream files (tests/reference/upstream/make_fixtures.py
names the repositories and commits); upstream_reference.json holds the numbers the
upstream code itself computes on them (tests/reference/upstream/upstream_reference.py,
the tools' functions copied verbatim).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from conftest import TESTS

from evalmix.data.readers import detect_format, read_arena_hard, read_log
from evalmix.data.readers.upstream import upstream, upstream_line
from evalmix.errors import EvalmixError, InvalidTableError
from evalmix.inference.estimands import build_problem, fit_problem

HERE = TESTS
UP = HERE / "fixtures" / "upstream"
REF = json.loads((HERE / "reference" / "upstream" / "upstream_reference.json").read_text())
AE = UP / "alpaca_eval"
BATTLES = UP / "arena_hard" / "data" / "arena_hard_battles.jsonl"
JUDGMENTS = UP / "arena_hard" / "model_judgment"
PAIR = UP / "fastchat" / "gpt-4_pair.jsonl"


def win_rate(table, model) -> float:
    problem = build_problem(table, "win_rate", model=model)
    return float(fit_problem(problem).beta[problem.target])


def caught(fn, *args, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(*args, **kw)
    return out, [str(x.message) for x in w]


# --------------------------------------------------------------------------- AlpacaEval
def test_alpaca_eval_folder_defaults_give_the_leaderboard():
    t, msgs = caught(read_log, AE / "results")
    dup = [m for m in msgs if "has the same content as" in m]
    assert len(dup) == 2
    assert "falcon-7b-instruct" in dup[0] and "falcon-40b-instruct" in dup[0]
    # the shallower copy is kept, the nested one named as the copy
    nested = "phi-2/alpaca_eval_gpt4/alpaca_eval_gpt4/annotations.json"
    assert any(nested in m and m.index(nested) < m.index("same content") for m in dup)
    assert any("skipped" in m and "gpt4_1106_preview" in m and "itself" in m for m in msgs)
    assert any("dropped 16 of 2415 rows" in m for m in msgs)   # 10 + 6 judge failures
    board = pd.read_csv(AE / "alpaca_eval_gpt4_leaderboard.csv", index_col=0)
    models = sorted(t.data["model_b"].unique())
    assert models == ["falcon-40b-instruct", "ghost-7b-alpha", "phi-2"]
    for m in models:
        assert 100 * win_rate(t, m) == pytest.approx(board.loc[m, "win_rate"], abs=1e-10)
    # the recommended cluster is the instruction (the subsets are a stratum); its CR2
    # SE is the leaderboard's within 1.0-1.3x
    assert t.sampled == ("item",) and t.roles.strata == ("item_group",)
    import evalmix

    for m in models:
        se = evalmix.interval(t, "win_rate", model=m, cluster="item").se
        assert 1.0 - 1e-9 <= 100 * se / board.loc[m, "standard_error"] <= 1.3
    # scoring failures as draws (evalmix's old default) misses the leaderboard
    tied, _ = caught(read_log, AE / "results", failures="tie")
    assert abs(100 * win_rate(tied, "ghost-7b-alpha") - board.loc["ghost-7b-alpha",
                                                                  "win_rate"]) > 0.1


def test_alpaca_eval_upstream_equals_alpaca_evals_own_code_and_board():
    up, _ = caught(upstream, AE / "results")
    rows = up.rows.set_index("model")
    ref = {Path(r["file"]).parts[2]: r for r in REF["alpaca_eval"]}
    board = pd.read_csv(AE / "alpaca_eval_gpt4_leaderboard.csv", index_col=0)
    for m in rows.index:
        for col in ("win_rate", "standard_error", "n_wins", "n_wins_base", "n_total"):
            assert rows.loc[m, col] == pytest.approx(ref[m][col], abs=1e-12), (m, col)
            assert rows.loc[m, col] == pytest.approx(board.loc[m, col], abs=1e-10), (m, col)
        assert rows.loc[m, "se"] == pytest.approx(ref[m]["standard_error"] / 100, abs=1e-14)
    line = upstream_line(AE / "results")
    assert line.startswith("Upstream (AlpacaEval") and "ghost-7b-alpha 70.4 (SE 1.6)" in line
    # from the table: its source names the folder read (not the first file's folder)
    t, _ = caught(read_log, AE / "results")
    assert t.source == f"{AE / 'results'} (4 files)"  # 6 less 2 copies
    assert caught(upstream_line, t)[0] == line
    assert caught(upstream_line, t.source)[0] == line   # a report's design["source"]
    assert upstream_line(UP / "no such folder (3 files)") is None


def test_alpaca_eval_self_files_and_errors_name_the_file(tmp_path):
    src = AE / "results" / "gpt4_1106_preview"
    shutil.copytree(src, tmp_path / "self")
    with pytest.raises(EvalmixError, match="only files comparing the baseline with itself"):
        caught(read_log, tmp_path / "self", format="alpaca_eval")
    recs = json.loads((AE / "results/phi-2/alpaca_eval_gpt4/annotations.json").read_text())
    bad = tmp_path / "bad" / "m" / "annotations.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps(recs[:5] + [{**recs[5], "preference": 7}]))
    with pytest.raises(EvalmixError, match=r"bad/m/annotations.json.*1 preferences are not"):
        read_log(tmp_path / "bad")
    # a validation error of the merged frame names the source too
    twice = tmp_path / "twice" / "m" / "annotations.json"
    twice.parent.mkdir(parents=True)
    twice.write_text(json.dumps(recs[:4] + recs[:1]))
    with pytest.raises(InvalidTableError, match=r"twice/m/annotations.json: .*duplicates"):
        read_log(twice)
    mixed = tmp_path / "mixed" / "annotations.json"
    mixed.parent.mkdir(parents=True)
    mixed.write_text(json.dumps(recs[:4] + [{**recs[4], "generator_2": "text_davinci_003"}]))
    t, msgs = caught(read_log, mixed)
    assert t.n_obs == 4 and any("left out 1 of 5 records" in m for m in msgs)


# --------------------------------------------------------------------------- FastChat
def test_fastchat_pair_file_reads_and_reproduces_show_result():
    assert detect_format(PAIR) == "battles"
    t, msgs = caught(read_log, PAIR)
    assert t.has_order and t.pairs_read["comparisons"] == 75
    assert any("dropped 3 of 150 rows" in m for m in msgs)   # g1/g2 'error'
    up = upstream(PAIR)
    rows = up.rows.set_index("model")
    for rec in REF["fastchat"]["pairwise-all"]:
        for col in ("win", "loss", "tie", "win_rate", "loss_rate", "win_rate_adjusted"):
            assert rows.loc[rec["model"], col] == pytest.approx(rec[col], abs=1e-15)
    base = upstream(PAIR, baseline="phi-3").rows
    assert base["model"].tolist() == ["phi-3-dpo"]
    ref = REF["fastchat"]["pairwise-baseline"][0]
    assert base.iloc[0]["win_rate_adjusted"] == pytest.approx(ref["win_rate_adjusted"])
    assert "phi-3-dpo 51.4" in upstream_line(PAIR)
    assert upstream_line(t) == upstream_line(PAIR)


# --------------------------------------------------------------------------- arena-hard
def test_arena_hard_battles_file_reads_as_matched_games():
    assert detect_format(BATTLES) == "battles"
    t = read_log(BATTLES)   # no "exact duplicates" refusal
    raw = pd.read_json(BATTLES, lines=True)
    assert t.n_obs == 600 and t.pairs_read == {"comparisons": 300, "both_orders": 300,
                                               "one_order_only": 0}
    # each game once: model_b's share of games vs the x3-weighted share of rows
    d = t.data
    assert (d["verdict"] == "b").sum() + (d["verdict"] == "a").sum() + \
        (d["verdict"] == "tie").sum() == 600
    share = raw["winner"].map({"model_b": 1, "model_a": 0, "tie": .5}).mean()
    assert 1 - d["y"].mean() != pytest.approx(share, abs=1e-3)
    # the judgment files rebuilt from it read to the same games
    j = read_log(JUDGMENTS)
    assert detect_format(JUDGMENTS) == "arena_hard"
    key = ["item", "model_b", "a_first"]
    a = d.sort_values(key)[key + ["y"]].reset_index(drop=True)
    b = j.data.sort_values(key)[key + ["y"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("source, which", [(BATTLES, "battles"), (JUDGMENTS, "judgments")])
def test_arena_hard_upstream_equals_show_result(source, which):
    up = upstream(source, seed=REF["arena_hard"]["seed"], version="v2")
    rows = up.rows.set_index("model")
    for rec in REF["arena_hard"][which]:
        m = rec["model"]
        assert rows.loc[m, "estimate"] == pytest.approx(rec["scores"], abs=1e-12)
        assert rows.loc[m, "lower"] == pytest.approx(rec["lower"], abs=1e-12)
        assert rows.loc[m, "upper"] == pytest.approx(rec["upper"], abs=1e-12)
    assert set(rows["level"]) == {0.9}
    assert "gpt-4o 91.2 [88.9, 93.2]" in upstream_line(JUDGMENTS)


def test_arena_hard_battles_upstream_is_v01s_show_result():
    # the code that wrote the file: Bradley-Terry, joint row bootstrap, 95%, seed 42;
    # upstream_reference.json holds its output (sklearn's LogisticRegression), which
    # rounds the win rates to 2 decimals
    up = upstream(BATTLES)
    assert up.tool.startswith("arena-hard-auto v0.1") and set(up.rows["level"]) == {0.95}
    rows = up.rows.set_index("model")
    ref = [r for r in REF["arena_hard_v01"] if r["model"] in rows.index]
    assert len(ref) == 3
    for r in ref:
        assert rows.loc[r["model"], "score"] == r["score"]
        assert rows.loc[r["model"], "rating_q025"] == r["lower"]
        assert rows.loc[r["model"], "rating_q975"] == r["upper"]
    assert "gpt-4o 91.0 [90.4, 92.3]" in upstream_line(BATTLES)


def test_arena_hard_judgments_nulls_baseline_and_labels(tmp_path):
    rec = {"question_id": "q1", "model": "m", "judge": "j",
           "games": [{"score": "A>>B"}, {"score": None}]}
    ok = {"question_id": "q2", "model": "m", "judge": "j",
          "games": [{"score": "B>A"}, {"score": "A=B"}]}
    f = tmp_path / "j" / "m.jsonl"
    f.parent.mkdir()
    f.write_text(json.dumps(rec) + "\n" + json.dumps(ok) + "\n")
    with pytest.raises(EvalmixError, match=r"m.jsonl.*do not name the baseline"):
        read_arena_hard(f)
    t, msgs = caught(read_arena_hard, f, baseline="base")
    # q1 game 1: A (the baseline) much better -> 'a', game 2 null (dropped, counted);
    # q2 game 1: B>A -> 'b' (the model), game 2 a tie
    assert sorted(t.data["verdict"]) == ["a", "b", "tie"] and t.dropped["na_outcome"] == 1
    up = upstream(f, baseline="base", rounds=5).rows
    assert up.iloc[0]["n_rows"] == 2 and up.iloc[0]["sample_mean"] == 0.75  # q1 dropped
    # the baseline judged against itself: skipped with a note naming the file
    base = tmp_path / "j" / "base.jsonl"
    base.write_text(json.dumps({**ok, "model": "base"}) + "\n")
    t, msgs = caught(read_arena_hard, f.parent, baseline="base")
    assert t.n_obs == 3 and any("base.jsonl" in m and "with itself" in m for m in msgs)
    base.unlink()
    f.write_text(json.dumps({**ok, "games": [{"score": "A>?B"}, {"score": "A=B"}]}) + "\n")
    with pytest.raises(EvalmixError, match=r"m.jsonl.*game 1 of question 'q2' has score"):
        read_arena_hard(f, baseline="base")


def test_arena_hard_battles_that_do_not_split_into_games(tmp_path):
    f = tmp_path / "arena_hard_battles.jsonl"
    row = {"question_id": 1, "model_a": "x", "model_b": "y", "winner": "model_b"}
    f.write_text("".join(json.dumps(r) + "\n" for r in [row] * 5 + [
        {**row, "question_id": 2}] * 2))
    with pytest.raises(EvalmixError, match=r"arena_hard_battles.jsonl.*question '1'"):
        read_log(f)


def test_upstream_is_none_for_formats_without_a_headline():
    assert upstream(HERE / "fixtures" / "logs" / "lm_eval") is None
    assert upstream_line(HERE / "fixtures" / "logs" / "battles" / "arena_battles.json") is None


def test_cli_reads_arena_hard_battles_and_fastchat_in_one_command(tmp_path):
    from evalmix.cli import main

    for src in (BATTLES, PAIR):
        out = tmp_path / src.stem
        assert main(["report", str(src), "--fast", "--reps", "20", "--seed", "1",
                     "--quiet", "--out", str(out)]) == 0
        design = json.loads((out / "design.json").read_text())
        assert design["roles"]["first_shown"] == "first_shown"
        # the report's opening quotes the tool's own numbers, then how evalmix differs
        line = upstream_line(src)
        assert "How evalmix differs:" in line
        md = (out / "report.md").read_text()
        head = md.split("## ")[0]
        assert line.split(" How evalmix")[0].replace("[", "\\[") in head or \
            line.split(" How evalmix")[0] in head
        assert json.loads((out / "summary.json").read_text())["upstream"] == line


def test_battle_files_errors_name_the_file_and_mt_bench_categories(tmp_path):
    from evalmix.data.readers.battles import battles_frame, mt_bench_category

    other = tmp_path / "z_arena.jsonl"
    other.write_text(json.dumps({"model_a": "x", "model_b": "y", "winner": "model_a"}) + "\n")
    with pytest.raises(EvalmixError, match=r"z_arena.jsonl' holds battles records"):
        read_log([PAIR, other], format="battles")
    bad = tmp_path / "bad_pair.jsonl"
    rec = json.loads(PAIR.read_text().splitlines()[0])
    bad.write_text(json.dumps({**rec, "g2_winner": "left"}) + "\n")
    with pytest.raises(EvalmixError, match=r"bad_pair.jsonl': g2_winner is 'left'"):
        read_log(bad)
    frame, _ = battles_frame([PAIR])
    cats = mt_bench_category(frame["question_id"])
    # question.jsonl: 81-90 writing ... 111-120 math, 151-160 humanities
    assert dict(zip(frame["question_id"], cats, strict=True))[81] == "writing"
    assert dict(zip(frame["question_id"], cats, strict=True))[111] == "math"
    assert set(cats) <= {"writing", "roleplay", "reasoning", "math", "coding", "extraction",
                         "stem", "humanities"}
    assert mt_bench_category(pd.Series([1, 81])) is None
