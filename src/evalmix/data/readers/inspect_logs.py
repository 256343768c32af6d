"""Inspect AI evaluation logs (``.eval`` and ``.json``) as a score table.

Read through ``inspect_ai``'s own log reader (an optional dependency:
``pip install 'evalmix[inspect]'``), so every log format version Inspect can read is
read the same way.

Layout of the table: one row per sample x epoch x log. The **model** is the condition,
the **sample** the item (``item`` cluster; with several tasks the item is
``task/sample id`` and the **task** is a stratum above it: chosen, not sampled), and
the **epoch** is a replicate within the item (never a cluster level). The chosen scorer's value is the
outcome:

================  ==========================================================
value             outcome
================  ==========================================================
``"C"``           1 (correct)
``"I"``           0 (incorrect)
``"P"``           0.5 (partial credit)
``"N"``           0 (no answer)
``True/False``    1 / 0
number            the number (so the outcome is binary, a proportion or numeric)
numeric string    its number; ``"yes"``/``"no"``, ``"true"``/``"false"`` as 1/0
dict              ``scorer="name.key"`` takes one key of it
================  ==========================================================

This is the mapping of Inspect's ``value_to_float()``, which its ``accuracy()`` and
``mean()`` metrics use, so a model's mean outcome equals the accuracy Inspect reports.
Samples without a score (errors, cancelled runs) are NA outcomes, dropped and counted.
Sample metadata are columns ``metadata.<key>`` (usable as clusters, e.g.
``clusters={"subject": "metadata.subject"}``).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.readers._common import Source, as_paths, choose, finish, label
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError

__all__ = ["read_inspect", "task_names", "VALUE_MAP"]

#: Inspect's value constants (CORRECT, INCORRECT, PARTIAL, NOANSWER) as outcomes.
VALUE_MAP: dict[str, float] = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
#: bulky sample fields not needed for scores (skipped when reading .eval logs)
_UNUSED = {"messages", "events", "store", "attachments"}


def _inspect_log():
    try:
        from inspect_ai import log
    except ImportError as exc:
        raise EvalmixError(
            "reading Inspect AI logs needs the inspect_ai package, which evalmix does not "
            "install by default: pip install 'evalmix[inspect]'"
        ) from exc
    return log


def _value(v: Any, scorer: str, path: Path) -> float:
    """A score value as Inspect's ``value_to_float`` maps it; errors name ``path``."""
    if v is None:
        return np.nan
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        if v in VALUE_MAP:
            return VALUE_MAP[v]
        low = v.strip().lower()
        if low in _WORDS:
            return _WORDS[low]
        try:
            return float(low)
        except ValueError:
            raise EvalmixError(
                f"{str(path)!r}: scorer {scorer!r} gives the value {v!r}, which is not "
                "C/I/P/N, a number or yes/no; choose another scorer (scorer=...) or recode "
                "the log"
            ) from None
    kind = "dict" if isinstance(v, dict) else type(v).__name__
    keys = f" (keys {', '.join(map(repr, v))}: pass scorer='{scorer}.KEY')" \
        if isinstance(v, dict) else ""
    raise EvalmixError(f"{str(path)!r}: scorer {scorer!r} gives {kind} values{keys}; "
                       "evalmix needs one number per sample")


def _read_eval_zip(log: Any, path: Path) -> Any:
    """A zipped ``.eval`` log: its header through inspect_ai, then each sample member
    parsed whole with the standard JSON parser, the bulky fields dropped, and validated as
    inspect_ai's ``EvalSample``, one member at a time.

    inspect_ai's own ``exclude_fields`` reader streams each member through a pure-Python
    event parser: with members much larger than the zip (long transcripts compress well)
    it ran at about 1 MB/s, 92 s for a log inspect_ai reads whole in 5.7 s
    (``benchmarks/inspect_eval_read.py``)."""
    try:
        from inspect_ai._util.constants import get_deserializing_context
        context: dict[str, Any] | None = get_deserializing_context()
    except ImportError:  # an inspect_ai without it
        context = None
    header = log.read_eval_log(str(path), header_only=True)
    samples = []
    with zipfile.ZipFile(path) as z:
        # a re-logged sample appends a second member of the same name: the last one counts
        for member in dict.fromkeys(n for n in z.namelist()
                                    if n.startswith("samples/") and n.endswith(".json")):
            data = json.loads(z.read(member))
            for field in _UNUSED:
                data.pop(field, None)
            samples.append(log.EvalSample.model_validate(data, context=context))
    samples.sort(key=lambda s: (s.epoch, s.id if isinstance(s.id, str)
                                else str(s.id).zfill(20)))   # as inspect_ai sorts them
    header.samples = samples
    return header


def _logs(source: Source) -> tuple[list[Any], list[Path]]:
    log = _inspect_log()
    items = [source] if isinstance(source, str | os.PathLike) else list(source)
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = [Path(i.name.removeprefix("file://")) for i in
                     log.list_eval_logs(str(path), formats=["eval", "json"], recursive=True)]
            if not found:
                raise EvalmixError(f"folder {str(path)!r} holds no Inspect logs (.eval, .json)")
            files += sorted(found)
        else:
            files += as_paths(path, ("*.eval", "*.json"), "Inspect logs")
    out = []
    for f in dict.fromkeys(files):
        try:
            out.append(_read_eval_zip(log, f) if f.suffix == ".eval" and zipfile.is_zipfile(f)
                       else log.read_eval_log(str(f), exclude_fields=_UNUSED))
        except Exception as exc:  # inspect raises many types for a file it cannot read
            raise EvalmixError(
                f"inspect_ai could not read {str(f)!r} as an eval log "
                f"({type(exc).__name__}: {exc}); pass Inspect .eval/.json logs"
            ) from exc
    return out, list(dict.fromkeys(files))


def read_inspect(source: Source, *, scorer: str | None = None, **read_kwargs: Any
                 ) -> EvalTable:
    """Read Inspect AI logs: a ``.eval``/``.json`` file, a log folder, or a list.

    Parameters
    ----------
    source : path, folder or list of them
        Logs of one or several models and tasks (``inspect log dump`` output too).
    scorer : str, optional
        The scorer whose value is the outcome; required when the logs have several
        (the error lists them). ``"name.key"`` takes one key of dict-valued scores.
    **read_kwargs
        Passed to :func:`evalmix.read` (``clusters=`` are added to the reader's).

    Returns
    -------
    EvalTable
        A score table: outcome ``score`` (see the module docstring for the mapping),
        condition ``model``, cluster ``item`` (and ``task`` with several tasks),
        replicate ``epoch`` when a sample was run more than once.

    Examples
    --------
    >>> from evalmix.data.readers import read_inspect
    >>> table = read_inspect("logs/", scorer="match")  # doctest: +SKIP
    """
    logs, files = _logs(source)
    base, _, key = (scorer or "").partition(".")
    names = sorted({n for lg in logs for s in (lg.samples or []) for n in (s.scores or {})})
    if not names:
        raise EvalmixError(f"the Inspect logs {label(files)} hold no scored samples")
    name = choose(base or None, names, "scorer", "scorer")
    shown = f"{name}.{key}" if key else name
    rows = []
    for lg, f in zip(logs, files, strict=True):
        for s in lg.samples or []:
            score = (s.scores or {}).get(name)
            value = None if score is None else score.value
            if key:
                if value is not None and not (isinstance(value, dict) and key in value):
                    raise EvalmixError(f"{str(f)!r}: scorer {name!r} has no key {key!r} in "
                                       f"sample {s.id!r}")
                value = None if value is None else value[key]
            row = {"model": lg.eval.model, "task": lg.eval.task, "sample_id": str(s.id),
                   "epoch": int(s.epoch), "score": _value(value, shown, f), "log": f.name}
            for k, v in (s.metadata or {}).items():
                if isinstance(v, str | int | float | bool) or v is None:
                    row[f"metadata.{k}"] = v
            rows.append(row)
    frame = pd.DataFrame(rows)
    several_tasks = frame["task"].nunique() > 1
    roles: dict[str, Any] = {"outcome": "score", "condition": "model",
                             "clusters": {"item": "sample_id"}}
    if several_tasks:
        frame["sample_id"] = frame["task"] + "/" + frame["sample_id"]
        roles["clusters"] = {"item": "sample_id", "task": "task"}
        roles["strata"] = ("task",)  # the tasks were chosen, not sampled
    if frame["epoch"].nunique() > 1:
        roles["replicate"] = "epoch"
    return finish(frame, label(files), roles, read_kwargs)


def task_names(source: Source) -> list[str]:
    """The task names of Inspect logs, from their headers alone (no samples read): the
    label of a single-task table, whose rows carry no task column."""
    log = _inspect_log()
    items = [source] if isinstance(source, str | os.PathLike) else list(source)
    files: list[str] = []
    for item in items:
        path = Path(item)
        files += ([i.name.removeprefix("file://") for i in
                   log.list_eval_logs(str(path), formats=["eval", "json"], recursive=True)]
                  if path.is_dir() else [str(path)])
    try:
        return sorted({log.read_eval_log(f, header_only=True).eval.task for f in files})
    except Exception:  # noqa: BLE001 (unreadable here: read_inspect names the file)
        return []
