"""Example files for docs/controlled.md (used by tests/package/test_docs_examples.py's CONTEXT).

``write(dest)`` puts in ``dest``: ``results/<model>/weighted_alpaca_eval_gpt4_turbo/
annotations.json`` for three AlpacaEval models on 100 instructions (the real preferences
and answer lengths of tests/fixtures/upstream/alpaca_eval/lc/, each output a filler of its
length), and ``arena_battles.json``: 1,500 of the synthetic battles of
tests/reference/arena_rank/ with assistant answers rebuilt from their feature counts
(headers, list items, bold spans, then filler up to the length).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
BASELINE = "gpt4_1106_preview"


def _answer(length: float, headers: float, lists: float, bold: float) -> str:
    text = "# Part\n" * int(headers) + "- item\n" * int(lists) + "**key** " * int(bold)
    return text + "x" * max(0, int(length) - len(text))


def write(dest: str | Path) -> None:
    dest = Path(dest)
    ann = pd.read_csv(HERE / "fixtures" / "upstream" / "alpaca_eval" / "lc" / "annotations.csv.gz")
    ann = ann[ann["model"].isin(["phi-2", "vicuna-13b", "claude-2"]) & (ann["index"] < 100)]
    for model, part in ann.groupby("model"):
        recs = [{"instruction": f"instruction {r.index}", "output_1": "x" * int(r.length_a),
                 "generator_1": BASELINE, "output_2": "y" * int(r.length_b),
                 "generator_2": model, "annotator": "weighted_alpaca_eval_gpt4_turbo",
                 "preference": r.preference} for r in part.itertuples()]
        folder = dest / "results" / str(model) / "weighted_alpaca_eval_gpt4_turbo"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "annotations.json").write_text(json.dumps(recs))
    bat = pd.read_csv(HERE / "reference" / "arena_rank" / "battles.csv.gz").head(1500)
    recs = []
    for r in bat.itertuples():
        recs.append({"question_id": r.prompt, "model_a": r.model_a, "model_b": r.model_b,
                     "winner": r.winner, "judge": "arena_user",
                     "conversation_a": [{"role": "user", "content": "q"}, {
                         "role": "assistant", "content": _answer(r.length_a, r.headers_a,
                                                                 r.lists_a, r.bold_a)}],
                     "conversation_b": [{"role": "user", "content": "q"}, {
                         "role": "assistant", "content": _answer(r.length_b, r.headers_b,
                                                                 r.lists_b, r.bold_b)}]})
    (dest / "arena_battles.json").write_text(json.dumps(recs))
