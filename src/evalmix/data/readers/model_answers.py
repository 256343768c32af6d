"""Model answer files of FastChat MT-Bench and arena-hard-auto, for the judgment readers.

The judgment files of both benchmarks name the question and the two models but hold no
answer; the answers are in ``model_answer/<model>.jsonl`` beside them, one record per
question:

- FastChat (``gen_model_answer.py``): ``question_id``, ``model_id``, ``choices[0].turns``
  a list of answer texts, one per turn;
- arena-hard-auto v0.1: the same with each turn ``{"content": ..., "token_len": ...}``;
- arena-hard-auto v2: ``uid``, ``model``, ``messages`` (the assistant's ``content`` a text or
  ``{"answer": ...}``), and ``metadata.token_len`` when present.

:func:`model_answers` reads them into one row per (model, question, turn) with the answer
features of :mod:`evalmix.data.answers` (``length`` in characters, ``headers``, ``lists``,
``bold``; ``tokens`` where the file counts them); :func:`with_model_answers` adds
``<feature>_a`` / ``<feature>_b`` to a judgment frame, matching each row's turn when it has
one (MT-Bench) and summing the turns otherwise (arena-hard's single-turn questions). The
readers take them as ``answers=`` (``--read-option answers=DIR``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.answers import ANSWER_FEATURES, answer_features
from evalmix.data.readers._common import Source, as_paths, load_records
from evalmix.errors import EvalmixError

__all__ = ["model_answers", "with_model_answers", "FEATURES"]

#: the features :func:`model_answers` gives
FEATURES: tuple[str, ...] = (*ANSWER_FEATURES, "tokens")


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        for key in ("answer", "content", "text"):
            if isinstance(content.get(key), str):
                return str(content[key])
    return None


def _turns(record: dict[str, Any]) -> list[tuple[str | None, float]]:
    """(text, tokens) of each answered turn of one answer record."""
    choices = record.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        out = []
        for turn in choices[0].get("turns") or []:
            tokens = turn.get("token_len") if isinstance(turn, dict) else None
            out.append((_text(turn), float(tokens) if isinstance(tokens, int | float)
                        else np.nan))
        return out
    messages = record.get("messages")
    if isinstance(messages, list):
        said = [_text(m.get("content")) for m in messages
                if isinstance(m, dict) and m.get("role") == "assistant"]
        meta = record.get("metadata")
        tokens = meta.get("token_len") if isinstance(meta, dict) else None
        total = float(tokens) if isinstance(tokens, int | float) else np.nan
        # the file counts the whole conversation's tokens: kept on a single turn only
        return [(t, total if len(said) == 1 else np.nan) for t in said]
    return []


def model_answers(source: Source) -> pd.DataFrame:
    """The answers of FastChat / arena-hard model answer files, one row per turn.

    Parameters
    ----------
    source : path, folder or list of them
        ``<model>.jsonl`` answer files or a ``model_answer`` folder (searched
        recursively).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``question_id`` (text), ``turn`` (from 1) and the :data:`FEATURES`.

    Raises
    ------
    EvalmixError
        A file with no answer record (neither ``choices`` nor ``messages``).
    """
    rows = []
    for path in as_paths(source, ("*.jsonl",), "model answer files"):
        found = 0
        for rec in load_records(path):
            question = rec.get("question_id", rec.get("uid"))
            turns = _turns(rec)
            if question is None or not turns:
                continue
            model = str(rec.get("model_id") or rec.get("model") or path.stem)
            found += 1
            for i, (text, tokens) in enumerate(turns, start=1):
                rows.append((model, str(question), i, text, tokens))
        if not found:
            raise EvalmixError(
                f"{str(path)!r} holds no model answers (records with question_id or uid "
                "and choices[0].turns or messages, as FastChat and arena-hard write them)")
    frame = pd.DataFrame(rows, columns=["model", "question_id", "turn", "text", "tokens"])
    feats = answer_features(frame["text"])
    out = pd.concat([frame.drop(columns="text"), feats], axis=1)
    return out[["model", "question_id", "turn", *FEATURES]]


def with_model_answers(frame: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (``model_a``, ``model_b``, ``question_id`` and maybe ``turn``) with the
    columns ``<feature>_a`` / ``<feature>_b`` of both answers; NaN where a model has no
    answer to the question (the turn's answer when the frame has turns, else the sum over
    the answer's turns)."""
    by_turn = "turn" in frame.columns and frame["turn"].notna().all()
    keys = ["model", "question_id", "turn"] if by_turn else ["model", "question_id"]
    table = (answers if by_turn else
             answers.groupby(["model", "question_id"], as_index=False)[list(FEATURES)]
             .sum(min_count=1))
    if by_turn:
        table = table.assign(turn=table["turn"].astype(int))
    out = frame.copy()
    left = pd.DataFrame({"question_id": out["question_id"].astype(str).to_numpy()})
    if by_turn:
        left["turn"] = out["turn"].astype(int).to_numpy()
    for side in ("a", "b"):
        part = left.assign(model=out[f"model_{side}"].astype(str).to_numpy())
        got = part.merge(table, on=keys, how="left", validate="many_to_one")
        for name in FEATURES:
            out[f"{name}_{side}"] = got[name].to_numpy(dtype=float)
    return out
