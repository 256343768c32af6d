"""Readers for the logs evaluation harnesses write, each returning a validated
:class:`~evalmix.data.table.EvalTable` with its roles set.

=================  ===========================================  ======================
format             files                                        reader
=================  ===========================================  ======================
``inspect``        Inspect AI ``.eval`` / ``.json`` logs         :func:`read_inspect`
``lm_eval``        lm-evaluation-harness ``samples_*.jsonl``     :func:`read_lm_eval`
``alpaca_eval``    AlpacaEval ``annotations.json``               :func:`read_alpaca_eval`
``battles``        Chatbot Arena / FastChat MT-Bench judgments,  :func:`read_battles`
                   arena-hard ``arena_hard_battles.jsonl``
``arena_hard``     arena-hard ``model_judgment/<judge>/*.jsonl``  :func:`read_arena_hard`
``helm``           HELM run folders (``per_instance_stats.json``) :func:`read_helm`
``table``          a long table (CSV, TSV, Parquet, JSONL)       :func:`evalmix.read`
=================  ===========================================  ======================

:func:`detect_format` tells them apart by file type and content; :func:`read_log`
reads any of them (``evalmix report FILE --format NAME`` on the command line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from evalmix.data.read import read
from evalmix.data.readers.alpaca_eval import read_alpaca_eval
from evalmix.data.readers.arena_hard import read_arena_hard
from evalmix.data.readers.battles import read_battles
from evalmix.data.readers.helm import STATS_NAME as HELM_STATS
from evalmix.data.readers.helm import read_helm
from evalmix.data.readers.inspect_logs import read_inspect
from evalmix.data.readers.lm_eval import SAMPLES_NAME, read_lm_eval
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, check_option
from evalmix.vocabulary import LogFormat

__all__ = ["FORMATS", "detect_format", "read_log", "read_inspect", "read_lm_eval",
           "read_alpaca_eval", "read_battles", "read_arena_hard", "read_helm"]

FORMATS: tuple[str, ...] = get_args(LogFormat)
_READERS: dict[str, Callable[..., EvalTable]] = {"inspect": read_inspect, "lm_eval": read_lm_eval,
            "alpaca_eval": read_alpaca_eval, "battles": read_battles,
            "arena_hard": read_arena_hard, "helm": read_helm}


def _first_record(path: Path) -> dict[str, Any] | None:
    """The first JSON object of a JSON (array or object) or JSON Lines file, read
    without loading the whole file when it is JSON Lines."""
    # utf-8-sig: a byte-order mark is not part of the first record
    with path.open("r", encoding="utf-8-sig", errors="replace") as fh:
        head = fh.read(1 << 16)
    text = head.lstrip()
    if not text:
        return None
    if text[0] == "{":
        line = text.split("\n", 1)[0]
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            try:
                obj = json.loads(path.read_text(encoding="utf-8-sig"))
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return None
        except RecursionError:
            return None
        return obj if isinstance(obj, dict) else None
    if text[0] == "[":
        try:
            obj = json.loads(path.read_text(encoding="utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            return None
        return obj[0] if isinstance(obj, list) and obj and isinstance(obj[0], dict) else None
    return None


def _kind_of_record(rec: dict[str, Any]) -> str | None:
    keys = set(rec)
    if {"eval", "samples"} & keys and "version" in keys:
        return "inspect"
    if "doc_id" in keys and ({"doc", "filtered_resps", "resps"} & keys):
        return "lm_eval"
    if {"instruction", "generator_1", "generator_2", "preference"} <= keys:
        return "alpaca_eval"
    if {"g1_winner", "g2_winner"} <= keys or {"model_a", "model_b", "winner"} <= keys:
        return "battles"
    if {"games", "model"} <= keys and ({"question_id", "uid"} & keys):
        return "arena_hard"
    return None


def detect_format(source: str | os.PathLike[str]) -> str:
    """The format of a file or folder: one of :data:`FORMATS` other than ``"auto"``.

    Folders: Inspect logs (``.eval``), lm-eval ``samples_*.jsonl``, AlpacaEval
    ``annotations.json``, HELM runs (``per_instance_stats.json``). Files: ``.eval`` is Inspect; ``.json``/``.jsonl`` by the
    fields of the first record; anything else is a long table.
    """
    path = Path(source)
    if path.is_dir():
        if any(path.rglob("*.eval")):
            return "inspect"
        if any(path.rglob("samples_*.jsonl")):
            return "lm_eval"
        if any(path.rglob("annotations.json")):
            return "alpaca_eval"
        if any(path.rglob(HELM_STATS)):
            return "helm"
        candidates = sorted([*path.rglob("*.json"), *path.rglob("*.jsonl")])
        for f in candidates[:20]:
            rec = _first_record(f)
            kind = _kind_of_record(rec) if rec else None
            if kind:
                return kind
        raise EvalmixError(
            f"folder {str(path)!r} holds no Inspect, lm-eval, AlpacaEval, battle or "
            "arena-hard logs; pass a file, or name the format with --format"
        )
    if not path.is_file():
        raise EvalmixError(f"no such file or folder: {str(path)!r}; check the path")
    name = path.name.lower()
    if name.endswith(".eval"):
        return "inspect"
    if SAMPLES_NAME.match(path.name):
        return "lm_eval"
    if path.name == HELM_STATS:
        return "helm"
    if name.endswith((".json", ".jsonl", ".ndjson")):
        rec = _first_record(path)
        kind = _kind_of_record(rec) if rec else None
        if kind:
            return kind
    return "table"


def read_log(source: str | os.PathLike[str], *, format: LogFormat = "auto",
             **kwargs: Any) -> EvalTable:
    """Read ``source`` with the reader of its format (``format="auto"``: detected).

    ``kwargs`` go to the reader (``scorer=``, ``metric=``, ``failures=``, ...) and from
    it to :func:`evalmix.read` (``clusters=``, ``ties=``, ``replicate=``, ...); for
    ``"table"`` they are :func:`evalmix.read`'s own.
    """
    check_option("format", format, FORMATS)
    kind = detect_format(source) if format == "auto" else format
    if kind == "table":
        return read(source, **kwargs)
    try:
        return _READERS[kind](source, **kwargs)
    except RecursionError:
        raise EvalmixError(
            f"{str(source)!r} holds JSON nested too deeply to read as a {kind} log; check "
            "that it is one, or name the format with --format") from None
