"""The runs of :func:`evalmix.compare.runs.paired_runs`, read from their sources.

Each source (an Inspect log, an lm-eval output folder, a long table; read by
:func:`~evalmix.data.readers.read_log`) becomes one run per task, with its label, its
samples' ids and epochs, and lm-eval's ``doc_hash`` where the log has it (a sample whose
content differs between runs is left out of their comparison).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.readers import detect_format, read_log
from evalmix.data.readers.inspect_logs import task_names as inspect_task_names
from evalmix.data.readers.lm_eval import doc_hashes
from evalmix.data.readers.lm_eval import task_names as lm_eval_task_names
from evalmix.data.table import EvalTable
from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
)


@dataclass(frozen=True)
class _Run:
    label: str
    source: str
    frame: pd.DataFrame   # task, sample, epoch, y, group (cluster value), hash


def _with_hashes(frame: pd.DataFrame, hashes: pd.DataFrame) -> pd.DataFrame:
    """The run's rows with lm-eval's ``doc_hash`` as column ``hash``."""
    out = frame.merge(hashes.rename(columns={"doc_hash": "hash"}), on=["task", "sample"],
                      how="left")
    return out


def _task_label(source: Any, kind: str) -> str:
    """The task of a single-task log (its rows have no task column); ``""`` if unknown."""
    names = (inspect_task_names(source) if kind == "inspect" else
             lm_eval_task_names(source) if kind == "lm_eval" else [])
    return names[0] if len(names) == 1 else ""


def _runs_of(table: EvalTable, cluster: str, source: str, task: str = "") -> list[_Run]:
    """The runs of one table: one per condition (model), or the whole table; ``task``
    labels a table without a task role."""
    if table.kind != "scores":
        raise EvalmixError(f"{source}: compare_runs compares scored runs (one score per "
                           "sample), not pairwise judgments")
    d = table.data
    if cluster != "item" and cluster not in table.clusters:
        raise InvalidOptionError(
            f"cluster={cluster!r} is not a cluster role of {source} (roles: "
            f"{', '.join(table.clusters) or 'none'}); add it when reading, e.g. "
            f"clusters={{'{cluster}': 'metadata.{cluster}'}} (--cluster {cluster}=COLUMN)")
    if "item" not in table.clusters:
        raise EvalmixError(f"{source} has no sample id (item role); read it with "
                           "clusters={'item': 'ID_COLUMN'} (--cluster item=COLUMN)")
    frame = pd.DataFrame({
        "task": d["task"].astype(str) if "task" in table.clusters else task,
        "sample": d["item"].astype(str).to_numpy(),
        "epoch": (d["replicate"].astype(str).to_numpy() if table.replicate else "1"),
        "y": table.y,
        "group": d[cluster].astype(str).to_numpy(),
    })
    if "task" in table.clusters:  # the reader's "task/id": show the id
        prefix = frame["task"] + "/"
        starts = [s.startswith(p) for s, p in zip(frame["sample"], prefix, strict=True)]
        frame.loc[starts, "sample"] = [s[len(p):] for s, p, ok in
                                       zip(frame["sample"], prefix, starts, strict=True) if ok]
    conds = (d["condition"].astype(str).to_numpy() if table.has_condition
             else np.full(len(d), ""))
    out = []
    for cond in pd.unique(conds):
        part = frame[conds == cond].reset_index(drop=True)
        dup = part.duplicated(["task", "sample", "epoch"])
        if dup.any():
            first = part.loc[dup].iloc[0]
            raise EvalmixError(
                f"{source}: run {cond or source!r} scores sample {first['sample']!r} "
                f"(epoch {first['epoch']}) {int(dup.sum()) + 1} or more times; a run holds "
                "one score per sample and epoch (several runs of one model go in separate "
                "files, or name the replicate column)")
        out.append(_Run(label=str(cond) or source, source=source, frame=part))
    return out


def _read_runs(sources: Sequence[Any], labels: Sequence[str] | None, cluster: str,
               read_kwargs: dict[str, Any]) -> list[_Run]:
    runs: list[_Run] = []
    for src in sources:
        if isinstance(src, EvalTable):
            table, name, task = src, src.source, ""
        else:
            table, name = read_log(src, **read_kwargs), str(src)
            kind = read_kwargs.get("format", "auto")
            kind = detect_format(src) if kind == "auto" else kind
            task = _task_label(src, kind)
        new = _runs_of(table, cluster, name, task)
        if not isinstance(src, EvalTable) and kind == "lm_eval":
            hashes = doc_hashes(src)
            if len(hashes):
                new = [_Run(label=r.label, source=r.source, frame=_with_hashes(r.frame, hashes))
                       for r in new]
        runs += new
    if labels is not None:
        labels = [str(x) for x in labels]
        if len(labels) != len(runs):
            raise InvalidOptionError(
                f"labels= gives {len(labels)} names for {len(runs)} runs "
                f"({', '.join(repr(r.label) for r in runs)}); give one per run")
        runs = [_Run(label=lab, source=r.source, frame=r.frame) for lab, r in
                zip(labels, runs, strict=True)]
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    if any(v > 1 for v in seen.values()):   # same model in two files: name them by file
        runs = [_Run(label=f"{r.label} ({os.path.basename(r.source.rstrip('/'))})"
                     if seen[r.label] > 1 else r.label, source=r.source, frame=r.frame)
                for r in runs]
        dup = [lab for lab, n in pd.Series([r.label for r in runs]).value_counts().items()
               if n > 1]
        if dup:
            raise InvalidOptionError(f"two runs are both called {dup[0]!r}; name them with "
                                     "labels= (--label)")
    if len(runs) < 2:
        raise EvalmixError(f"compare_runs needs two or more runs; found {len(runs)} "
                           f"({', '.join(repr(r.label) for r in runs)})")
    return runs
