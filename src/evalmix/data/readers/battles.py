"""Pairwise battle logs: Chatbot Arena / MT-Bench human judgments, FastChat judge files.

Two upstream shapes (JSON array or JSON Lines), told apart by their fields:

**Battles** (Chatbot Arena ``clean_battle`` exports, ``lmsys/mt_bench_human_judgments``,
``lmsys/chatbot_arena_conversations``): one record per judgment with ``model_a``,
``model_b``, ``winner`` (``"model_a"``, ``"model_b"``, ``"tie"``, ``"tie (bothbad)"``),
``judge``, and where present ``question_id`` and ``turn``. The records do not say which
answer was shown first. In Chatbot Arena model_a is the answer shown on the left
(position A) and models are assigned to the sides at random: ``model_a_first=True``
records that, and the table is then a single-randomised-order design whose position
(left-side) effect is estimated as a covariate.

**FastChat MT-Bench pairwise judgments** (``data/mt_bench/model_judgment/*_pair.jsonl``
written by ``gen_judgment.py --mode pairwise-*``): one record per comparison judged in
both orders, ``question_id``, ``model_1``, ``model_2``, ``g1_winner`` (model_1 shown
first) and ``g2_winner`` (model_2 shown first), each ``"model_1"``, ``"model_2"``,
``"tie"`` or ``"error"`` (an unparsed judgment: NA), ``judge`` = ``[judge model,
prompt name]``, ``turn``. Each record becomes an AB and a BA row (matched pairs).

**Arena-hard battles** (``data/arena_hard_battles.jsonl``: ``question_id``,
``model_a``, ``model_b``, ``winner`` only, a strong verdict on 3 identical rows) are
recognised and read as games by :mod:`evalmix.data.readers.arena_hard`.

Battles with ``conversation_a`` / ``conversation_b`` (Chatbot Arena conversations) give
each answer's length and markdown counts as ``length_a``/``length_b``, ``headers_*``,
``lists_*``, ``bold_*`` (:mod:`evalmix.data.answers`), for style-controlled
Bradley-Terry; battles with FastChat's ``conv_metadata`` give ``tokens_a``/``tokens_b`` and
the markdown counts Arena's own style control uses (they take precedence).

Clusters: ``item`` = question (question x turn when there are several turns, with
``question`` above it), ``judge`` when there are several judges. FastChat rows keep
``winner`` (the raw g1/g2 verdict), from which
:func:`evalmix.data.readers.upstream.fastchat_pairwise` reproduces ``show_result.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from evalmix.data.answers import (
    ANSWER_FEATURES,
    METADATA_FEATURES,
    attach,
    conversation_text,
    metadata_features,
    with_answer_columns,
)
from evalmix.data.readers._common import (
    Source,
    add_category_stratum,
    as_paths,
    finish,
    flatten,
    label,
    load_records,
)
from evalmix.data.readers.arena_hard import is_arena_hard_battles, read_arena_hard_battles
from evalmix.data.readers.model_answers import FEATURES, model_answers, with_model_answers
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, InvalidOptionError

__all__ = ["read_battles", "battles_frame"]

_WINNER = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "tie",
           "bothbad": "tie"}
_G_WINNER = {"model_1": "a", "model_2": "b", "tie": "tie", "error": None}
#: MT-Bench's 80 questions (ids 81-160), ten per category in this order
#: (FastChat ``llm_judge/data/mt_bench/question.jsonl``)
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction",
                       "stem", "humanities")


def mt_bench_category(question_id: pd.Series) -> pd.Series | None:
    """Each MT-Bench question's category, or None when the ids are not all MT-Bench's."""
    ids = pd.to_numeric(question_id, errors="coerce")
    if ids.isna().any() or not ids.between(81, 160).all() or (ids % 1 != 0).any():
        return None
    return ((ids - 81) // 10).astype(int).map(dict(enumerate(MT_BENCH_CATEGORIES)))


def _fastchat_pairs(records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for i, r in enumerate(records):
        judge = r.get("judge")
        judge_model, prompt = (judge[0], judge[1]) if isinstance(judge, list | tuple) and \
            len(judge) == 2 else (judge, None)
        base = {"question_id": r.get("question_id", r.get("id")), "model_a": r["model_1"],
                "model_b": r["model_2"], "judge": judge_model, "judge_prompt": prompt,
                "turn": r.get("turn", 1), "record": i}
        for first, key in (("a", "g1_winner"), ("b", "g2_winner")):
            raw = r.get(key)
            if raw not in _G_WINNER:
                raise EvalmixError(
                    f"{key} is {raw!r} in the record of question {base['question_id']!r}; "
                    "FastChat writes model_1, model_2, tie or error"
                )
            rows.append({**base, "first_shown": first, "winner": raw,
                         "outcome": _G_WINNER[raw]})
    return pd.DataFrame(rows)


def _battles(records: list[dict[str, Any]]) -> pd.DataFrame:
    frame = flatten(records, drop=("conversation_a", "conversation_b"))
    if any("conversation_a" in r for r in records[:1]):
        frame = with_answer_columns(
            frame, [conversation_text(r.get("conversation_a")) for r in records],
            [conversation_text(r.get("conversation_b")) for r in records])
    if any(isinstance(r.get("conv_metadata"), dict) for r in records):
        meta = metadata_features(r.get("conv_metadata") for r in records)
        for col in meta.columns:
            frame[col] = meta[col].to_numpy()
    raw = frame["winner"].astype("string").str.strip().str.lower()
    unknown = raw.notna() & ~raw.isin(list(_WINNER))
    if unknown.any():
        raise EvalmixError(
            f"winner has {int(unknown.sum())} values that are not model_a, model_b, tie or "
            f"'tie (bothbad)' (e.g. {frame['winner'][unknown].iloc[0]!r})"
        )
    frame["outcome"] = raw.map(_WINNER)
    return frame


def _shape(path: Path, first: dict[str, Any]) -> str:
    if {"g1_winner", "g2_winner", "model_1", "model_2"} <= set(first):
        return "fastchat"
    if {"model_a", "model_b", "winner"} <= set(first):
        return "battles"
    raise EvalmixError(
        f"{str(path)!r}: records with fields {sorted(first)[:12]} are neither battles "
        "(model_a, model_b, winner) nor FastChat pairwise judgments (model_1, model_2, "
        "g1_winner, g2_winner)"
    )


def battles_frame(paths: list[Path], *, model_a_first: bool = False
                  ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The records of battle or FastChat pairwise files as one frame (a ``file``
    column; FastChat rows numbered by ``record``), and the reader's roles; errors name
    the file."""
    parts, kinds, offset = [], set(), 0
    for path in paths:
        records = load_records(path)
        if not records:
            continue
        kind = _shape(path, records[0])
        kinds.add(kind)
        if len(kinds) > 1:
            raise EvalmixError(
                f"{str(path)!r} holds {kind} records but the files before it the other "
                "shape (battles vs FastChat pairwise judgments); read them separately"
            )
        try:
            part = _fastchat_pairs(records) if kind == "fastchat" else _battles(records)
        except (EvalmixError, KeyError) as exc:
            raise EvalmixError(f"{str(path)!r}: {exc}") from exc
        if kind == "fastchat":
            part["record"] += offset
            offset += len(records)
        part["file"] = str(path)
        parts.append(part)
    if not parts:
        raise EvalmixError(f"the battle logs {label(paths)} hold no records")
    frame = pd.concat(parts, ignore_index=True)
    if "fastchat" in kinds:
        if model_a_first:
            raise InvalidOptionError(
                "model_a_first applies to battle records (model_a/model_b/winner); FastChat "
                "pairwise judgments already say which answer was shown first (g1/g2)"
            )
        roles: dict[str, Any] = {"outcome": "outcome", "model_a": "model_a",
                                 "model_b": "model_b", "first_shown": "first_shown",
                                 "order_design": "matched"}
    else:
        roles = {"outcome": "outcome", "model_a": "model_a", "model_b": "model_b"}
        if model_a_first:
            frame["first_shown"] = "a"
            roles.update(first_shown="first_shown", order_design="single")
    return frame, roles


def read_battles(source: Source, *, model_a_first: bool = False,
                 answers: Source | None = None, **read_kwargs: Any) -> EvalTable:
    """Read pairwise battle or judgment logs (see the module docstring for the shapes).

    Parameters
    ----------
    source : path, folder or list of them
        ``.json``/``.jsonl`` files (a folder is searched for both).
    model_a_first : bool
        Battles shape only: model_a's answer was shown first (Chatbot Arena's left
        side). Makes a single-randomised-order table with ``first_shown``.
    answers : path, folder or list of them, optional
        FastChat ``model_answer`` files (MT-Bench): adds each answer's ``length``,
        ``headers``, ``lists``, ``bold`` (of the judged turn) as ``<feature>_a`` /
        ``<feature>_b`` (:mod:`evalmix.data.readers.model_answers`).
    **read_kwargs
        Passed to :func:`evalmix.read` (``clusters=`` are added to the reader's).

    Returns
    -------
    EvalTable
        A pairwise table (ties as ``tie``; ``tie (bothbad)`` is kept in the ``winner``
        column of the source frame).
    """
    paths = as_paths(source, ("*.jsonl", "*.json"), "battle logs")
    if len(paths) == 1:
        records = load_records(paths[0])
        if records and not model_a_first and is_arena_hard_battles(records):
            return read_arena_hard_battles(paths[0], records, dict(read_kwargs))
    frame, roles = battles_frame(paths, model_a_first=model_a_first)
    if answers is not None:
        if "question_id" not in frame.columns:
            raise InvalidOptionError("answers= matches answers by question_id, which these "
                                     "records lack")
        frame = with_model_answers(frame, model_answers(answers))
    clusters: dict[str, str] = {}
    if "question_id" in frame.columns and frame["question_id"].notna().all():
        category = mt_bench_category(frame["question_id"])
        if category is not None and "category" not in frame.columns:
            frame["category"] = category
        frame["question_id"] = frame["question_id"].astype(str)
        if "turn" in frame.columns and frame["turn"].nunique() > 1:
            frame["question_turn"] = frame["question_id"] + "/" + frame["turn"].astype(str)
            clusters.update(item="question_turn", question="question_id")
        else:
            clusters["item"] = "question_id"
    if "judge" in frame.columns and frame["judge"].nunique() > 1:
        frame["judge"] = frame["judge"].astype(str)
        clusters["judge"] = "judge"
    add_category_stratum(frame, clusters, roles)
    roles["clusters"] = clusters
    frame["model_a"] = frame["model_a"].astype(str)
    frame["model_b"] = frame["model_b"].astype(str)
    return attach(finish(frame, label(paths), roles, read_kwargs), frame,
                  [f"{f}_{s}" for f in dict.fromkeys((*ANSWER_FEATURES, *METADATA_FEATURES,
                                                      *FEATURES)) for s in ("a", "b")])
