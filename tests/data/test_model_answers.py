"""Answer features for judgment logs whose answers sit in model_answer files
(evalmix.data.readers.model_answers): arena-hard-auto (v0.1 and v2 answer records) and
FastChat MT-Bench pairwise judgments, matched by question (and turn).

Judgments: tests/fixtures/upstream/arena_hard/model_judgment/ (3 models against
claude-3-haiku-20240307, 100 questions); the answers are written here in each upstream
shape with known texts, so every matched length is known.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

import evalmix
from evalmix.data.readers import read_arena_hard, read_battles, read_log
from evalmix.data.readers.model_answers import model_answers
from evalmix.errors import EvalmixError
from evalmix.report.controlled import choose_controlled

ARENA = FIXTURES / "upstream" / "arena_hard" / "model_judgment"
BASE = "claude-3-haiku-20240307"
MODELS = ["claude-3-5-sonnet-20240620", "gpt-4o", "claude-3-opus-20240229"]


def _text(model: str, q: int, turn: int = 1) -> str:
    """A known answer: (50 + 7 q + 100 m) characters, with m's headers, a list, bold."""
    m = ([BASE, *MODELS].index(model) if model in [BASE, *MODELS] else 0) + turn - 1
    body = "# Title\n" * m + "- item\n" + "**b** " * (q % 3)
    return body + "x" * (50 + 7 * q + 100 * m)


def _uids() -> list[int]:
    return sorted({int(json.loads(line)["uid"]) for f in ARENA.rglob("*.jsonl")
                   for line in f.read_text().splitlines() if line.strip()})


def _write_arena_answers(folder: Path) -> Path:
    """v0.1 records (choices[0].turns[] with content and token_len) for the baseline and
    two models, a v2 record (messages, metadata.token_len) for the third."""
    folder.mkdir()
    for model in [BASE, *MODELS]:
        lines = []
        for q in _uids():
            text = _text(model, q)
            if model == MODELS[2]:
                rec = {"uid": str(q), "model": model, "messages": [
                    {"role": "user", "content": "question"},
                    {"role": "assistant", "content": {"answer": text}}],
                    "metadata": {"token_len": len(text) // 4}}
            else:
                rec = {"question_id": str(q), "model_id": model, "choices": [
                    {"index": 0, "turns": [{"content": text, "token_len": len(text) // 4}]}]}
            lines.append(json.dumps(rec))
        (folder / f"{model}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_arena_hard_judgments_get_both_answers(tmp_path):
    answers = _write_arena_answers(tmp_path / "model_answer")
    table = read_arena_hard(ARENA, answers=answers)
    d = table.data
    q = d["item"].astype(int).to_numpy()
    want_a = np.array([len(_text(BASE, i)) for i in q], dtype=float)
    want_b = np.array([len(_text(m, i)) for m, i in zip(d["model_b"], q, strict=True)],
                      dtype=float)
    assert np.array_equal(d["length_a"].to_numpy(), want_a)
    assert np.array_equal(d["length_b"].to_numpy(), want_b)
    assert np.array_equal(d["tokens_b"].to_numpy(), want_b // 4)
    assert np.array_equal(d["headers_b"].to_numpy(),
                          [[BASE, *MODELS].index(m) for m in d["model_b"]])
    assert np.array_equal(d["bold_a"].to_numpy(), q % 3)
    # the baseline is in every row: the report's controlled estimand is the LC win rate
    assert choose_controlled(table) == ("length", [])
    # the same through read_log (evalmix report --read-option answers=DIR)
    again = read_log(ARENA, format="arena_hard", answers=str(answers))
    assert np.array_equal(again.data["length_b"].to_numpy(), want_b)


def test_fastchat_pairwise_judgments_match_the_turn(tmp_path):
    """MT-Bench judges each turn separately: a turn-2 row gets the turn-2 answers."""
    recs = [{"question_id": 81 + i, "model_1": "m1", "model_2": "m2", "g1_winner": "model_1",
             "g2_winner": "model_2", "judge": ["gpt-4", "pair-v2"], "turn": t}
            for i in range(6) for t in (1, 2)]
    judged = tmp_path / "gpt-4_pair.jsonl"
    judged.write_text("\n".join(json.dumps(r) for r in recs))
    folder = tmp_path / "model_answer"
    folder.mkdir()
    for model, extra in (("m1", 0), ("m2", 1000)):
        (folder / f"{model}.jsonl").write_text("\n".join(json.dumps({
            "question_id": 81 + i, "model_id": model, "choices": [{"index": 0, "turns": [
                "a" * (10 * i + extra + 1), "b" * (10 * i + extra + 2)]}]})
            for i in range(6)))
    table = read_battles(judged, answers=folder)
    d = table.frame()
    turn = d["item"].str.split("/").str[1].astype(int).to_numpy()  # item: question/turn
    assert set(turn) == {1, 2} and len(d) == 24  # both orders of each judgment
    qi = d["question"].astype(int).to_numpy() - 81
    assert np.array_equal(d["length_a"].to_numpy(), 10 * qi + turn)
    assert np.array_equal(d["length_b"].to_numpy(), 10 * qi + 1000 + turn)
    assert "tokens_a" not in d.columns  # FastChat's answer files count no tokens
    rows = evalmix.style_controlled_bt(table, ["length"]).tidy()
    assert set(rows["estimand"]) == {"bt_style_controlled", "bradley_terry", "style_coef"}


def test_missing_answers_and_bad_files(tmp_path):
    folder = _write_arena_answers(tmp_path / "model_answer")
    (folder / "gpt-4o.jsonl").unlink()
    table = read_arena_hard(ARENA, answers=folder)
    gone = table.data["model_b"] == "gpt-4o"
    assert table.data.loc[gone, "length_b"].isna().all()
    assert table.data.loc[~gone, "length_b"].notna().all()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.jsonl").write_text(json.dumps({"question_id": 1, "text": "no turns"}))
    with pytest.raises(EvalmixError, match="holds no model answers"):
        model_answers(bad)
