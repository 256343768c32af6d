"""lm-evaluation-harness ``--log_samples`` output as a score table.

``lm_eval --log_samples --output_path OUT`` writes, per model, a folder
``OUT/<model_name_sanitized>/`` with ``samples_<task>_<date>.jsonl`` (one JSON record
per document and filter: ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``,
``filtered_resps``, ``filter``, ``metrics``, the hashes, and one key per metric, e.g.
``"acc": 1.0``) and ``results_<date>.json`` (``model_name`` and the aggregate scores).

Layout of the table: one row per model x task x document (x run). The **model** is the
condition (from ``model=``, a field of the records; else ``model_name`` in the
``results_<date>.json`` written with the samples; else the folder name), ``doc_id`` is
the item (``task/doc_id`` with several tasks, the **task** then a stratum: chosen), the
chosen metric is the outcome, and repeated runs of one model and task (several dates)
are replicates. Nested fields are dotted columns, so ``clusters={"subject":
"doc.subject"}`` (``--cluster subject=doc.subject``) clusters by a field of ``doc``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.readers._common import (
    Source,
    as_paths,
    choose,
    finish,
    flatten,
    label,
    load_records,
)
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, InvalidOptionError

__all__ = ["read_lm_eval", "task_names", "doc_hashes"]

#: ``samples_<task>_<date>.jsonl`` (the date is ISO format with ``:`` replaced by ``-``)
SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")
#: record fields that are not metrics (bulky ones are left out of the table)
_BOOKKEEPING = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter",
                "metrics", "doc_hash", "prompt_hash", "target_hash"}
_DROP = ("arguments", "resps", "filtered_resps")


def _model_from_results(path: Path, date: str | None) -> str:
    """``model_name`` of the run that wrote ``path``, else its folder name."""
    candidates = ([path.parent / f"results_{date}.json"] if date else []) + sorted(
        path.parent.glob("results_*.json"))
    for res in candidates:
        if res.is_file():
            try:
                meta = json.loads(res.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            name = meta.get("model_name")
            if not name:
                args = str((meta.get("config") or {}).get("model_args") or "")
                m = re.search(r"(?:pretrained|model)=([^,]+)", args)
                name = m.group(1) if m else None
            if name:
                return str(name)
    return path.parent.name


def _metric_value(v: Any, metric: str, path: Path) -> float:
    if v is None:
        return np.nan
    if isinstance(v, bool | int | float):
        return float(v)
    raise EvalmixError(
        f"metric {metric!r} in {str(path)!r} holds {type(v).__name__} values (e.g. {v!r}), "
        "not one number per document (corpus-level metrics such as bleu are computed "
        "from all documents together); choose a per-document metric with metric=..."
    )


def read_lm_eval(source: Source, *, metric: str | None = None, filter: str | None = None,
                 model: str | None = None, **read_kwargs: Any) -> EvalTable:
    """Read lm-evaluation-harness ``samples_*.jsonl`` files (one per model and task).

    Parameters
    ----------
    source : path, folder or list of them
        ``samples_<task>_<date>.jsonl`` files, or the ``--output_path`` folder (searched
        recursively).
    metric : str, optional
        The per-document metric that is the outcome (e.g. ``"acc"``,
        ``"exact_match"``); required when the records carry several.
    filter : str, optional
        The filter whose rows to keep (e.g. ``"strict-match"``); required when a task
        logs several (gsm8k logs ``strict-match`` and ``flexible-extract``).
    model : str, optional
        A (dotted) field of the records naming the model; by default the model comes
        from the run's ``results_<date>.json`` (``model_name``) or the folder name.
    **read_kwargs
        Passed to :func:`evalmix.read` (``clusters=`` are added to the reader's;
        dotted names reach nested fields, e.g. ``{"subject": "doc.subject"}``).

    Returns
    -------
    EvalTable
        A score table: outcome the metric, condition ``model``, cluster ``item``
        (``doc_id``; and ``task`` with several tasks), replicate ``run`` when a model
        ran a task more than once.
    """
    paths = as_paths(source, ("samples_*.jsonl",), "lm-eval samples files")
    parts = []
    for path in paths:
        m = SAMPLES_NAME.match(path.name)
        task = m.group("task") if m else path.stem.removeprefix("samples_")
        date = m.group("date") if m else None
        records = load_records(path)
        if not records:
            continue
        if "doc_id" not in records[0]:
            raise EvalmixError(
                f"{str(path)!r} has no doc_id field: not an lm-eval --log_samples file"
            )
        frame = flatten(records, drop=_DROP)
        frame["task"] = task
        frame["run"] = date or path.name
        frame["_file"] = str(path)
        if model is None:
            frame["model"] = _model_from_results(path, date)
        elif model not in frame.columns:
            raise InvalidOptionError(
                f"model={model!r} is not a field of the records in {str(path)!r}; give a "
                "(dotted) field name, or leave model= out to take it from results_*.json"
            )
        listed = {str(x) for r in records for x in (r.get("metrics") or [])}
        frame.attrs["metrics"] = listed or {c for c in frame.columns if c not in
                                            _BOOKKEEPING and "." not in c
                                            and pd.api.types.is_numeric_dtype(frame[c])
                                            and c not in ("task", "run", "model")}
        parts.append(frame)
    if not parts:
        raise EvalmixError(f"the lm-eval samples files {label(paths)} hold no records")
    metrics = sorted(set().union(*(p.attrs["metrics"] for p in parts)))
    metric = choose(metric, metrics, "metric", "metric")
    frame = pd.concat(parts, ignore_index=True)
    if "filter" in frame.columns:
        filters = sorted(frame["filter"].dropna().astype(str).unique())
        if len(filters) > 1 or filter is not None:
            frame = frame[frame["filter"].astype(str) == choose(filter, filters, "filter",
                                                                "filter")]
    if metric not in frame.columns:
        raise EvalmixError(f"metric {metric!r} is listed but has no values in the records")
    frame[metric] = np.array([_metric_value(v, metric, Path(str(f)))
                              for v, f in zip(frame[metric], frame["_file"], strict=True)],
                             dtype=float)
    frame = frame.drop(columns="_file").reset_index(drop=True)
    model_col = model or "model"
    frame["doc_id"] = frame["doc_id"].astype(str)
    roles: dict[str, Any] = {"outcome": metric, "condition": model_col,
                             "clusters": {"item": "doc_id"}}
    if frame["task"].nunique() > 1:
        frame["doc_id"] = frame["task"].astype(str) + "/" + frame["doc_id"]
        roles["clusters"] = {"item": "doc_id", "task": "task"}
        roles["strata"] = ("task",)  # the tasks (MMLU subjects, ...) were chosen
    runs = frame.groupby([model_col, "task"])["run"].nunique()
    if (runs > 1).any():
        roles["replicate"] = "run"
    return finish(frame, label(paths), roles, read_kwargs)


def task_names(source: Source) -> list[str]:
    """The tasks of lm-eval samples files, from their names (``samples_<task>_<date>``):
    the label of a single-task table, whose rows carry no task column."""
    out = set()
    for path in as_paths(source, ("samples_*.jsonl",), "lm-eval samples files"):
        m = SAMPLES_NAME.match(path.name)
        out.add(m.group("task") if m else path.stem.removeprefix("samples_"))
    return sorted(out)


def doc_hashes(source: Source) -> pd.DataFrame:
    """``task``, ``sample`` (the doc_id as text) and ``doc_hash`` of every document in
    lm-eval samples files: two runs whose hashes differ for one doc_id scored different
    documents there (a changed dataset or prompt), which a paired comparison leaves out."""
    parts = []
    for path in as_paths(source, ("samples_*.jsonl",), "lm-eval samples files"):
        m = SAMPLES_NAME.match(path.name)
        task = m.group("task") if m else path.stem.removeprefix("samples_")
        recs = [(task, str(r.get("doc_id")), r.get("doc_hash")) for r in load_records(path)]
        parts.append(pd.DataFrame(recs, columns=["task", "sample", "doc_hash"]))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["task", "sample", "doc_hash"])
    return frame.dropna().drop_duplicates(["task", "sample"]).reset_index(drop=True)
