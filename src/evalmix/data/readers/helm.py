"""HELM run folders as a score table.

``helm-run --suite SUITE`` writes one folder per run,
``benchmark_output/runs/SUITE/<run name>/``, e.g.
``bbq:subject=all,method=multiple_choice_joint,model=openai_gpt-4o-2024-05-13/``, with

- ``run_spec.json``: the run's ``name``, ``scenario_spec`` and ``adapter_spec`` (its
  ``model``, ``num_train_trials``, ...);
- ``per_instance_stats.json``: per evaluation instance and train trial
  (``instance_id``, ``train_trial_index``, optionally ``perturbation``), the list of
  ``stats``, each ``{"name": {"name", "split", ...}, "count", "sum", "mean", ...}``;
- ``scenario_state.json``: the ``request_states`` (``instance`` with ``id`` and
  ``split``, ``train_trial_index``, the request and the result);
- ``stats.json``: HELM's aggregates over the instances.

Layout of the table: one row per model x scenario x instance x train trial. The
**model** (``adapter_spec.model``) is the condition, the instance is the item (cluster
``item``; ``<scenario>/<instance_id>`` with several scenarios, the scenario then a
stratum: HELM's scenarios are chosen, not sampled), the chosen stat's per-instance
``mean`` is the outcome, and train trials (HELM's repeated runs with other in-context
examples, ``--num-train-trials``; the seeds of a run) are replicates. The scenario is
the run name without its ``model=`` argument. Instances under a perturbation
(robustness / fairness augmentations) are left out and counted.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from evalmix.data.readers._common import Source, as_paths, choose, finish, label
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, EvalmixWarning

__all__ = ["read_helm"]

STATS_NAME = "per_instance_stats.json"
_MODEL_ARG = re.compile(r"(^|,)model=[^,]*")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EvalmixError(f"{str(path)!r} is not valid JSON ({exc}); check the file") from exc


def _run_spec(folder: Path) -> tuple[str, str]:
    """``(model, scenario)`` of a run folder, from ``run_spec.json`` (else its name)."""
    path = folder / "run_spec.json"
    spec = _json(path) if path.is_file() else {}
    name = str(spec.get("name") or folder.name)
    model = (spec.get("adapter_spec") or {}).get("model")
    if not model:
        found = re.search(r"(?:^|,)model=([^,]*)", name)
        if not found:
            raise EvalmixError(f"{str(folder)!r}: no run_spec.json with adapter_spec.model "
                               "and no model= in the folder name; not a HELM run folder")
        model = found.group(1)
    scenario = _MODEL_ARG.sub("", name).replace(":,", ":").rstrip(":,")
    return str(model), scenario


def _eval_ids(folder: Path, split: str) -> set[tuple[str, int]] | None:
    """``(instance id, train trial)`` of the requests in ``scenario_state.json`` on
    ``split`` (None when the run has no scenario state)."""
    path = folder / "scenario_state.json"
    if not path.is_file():
        return None
    states = _json(path).get("request_states")
    if not isinstance(states, list):
        raise EvalmixError(f"{str(path)!r} has no request_states list; check the file")
    return {(str(s["instance"]["id"]), int(s.get("train_trial_index", 0)))
            for s in states if s.get("instance", {}).get("split") == split}


def _rows(path: Path, split: str) -> tuple[pd.DataFrame, int]:
    """Per instance x trial x stat name: the stat's mean (unperturbed rows of ``split``)."""
    records = _json(path)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise EvalmixError(f"{str(path)!r} does not hold a list of per-instance records")
    out, perturbed = [], 0
    for rec in records:
        if "instance_id" not in rec or "stats" not in rec:
            raise EvalmixError(f"{str(path)!r}: a record without instance_id or stats; not "
                               "a HELM per_instance_stats.json")
        if rec.get("perturbation"):
            perturbed += 1
            continue
        for st in rec["stats"]:
            name = st.get("name") or {}
            if (name.get("split") != split or name.get("perturbation")
                    or name.get("sub_split") or not st.get("count")):
                continue
            mean = st.get("mean", st["sum"] / st["count"])
            out.append((str(rec["instance_id"]), int(rec.get("train_trial_index", 0)),
                        str(name.get("name")), float(mean)))
    frame = pd.DataFrame(out, columns=["instance_id", "train_trial", "stat", "value"])
    return frame, perturbed


def read_helm(source: Source, *, metric: str | None = None, split: str = "test",
              **read_kwargs: Any) -> EvalTable:
    """Read HELM run folders (``benchmark_output/runs/<suite>/<run>/``).

    Parameters
    ----------
    source : path, folder or list of them
        A suite folder (searched recursively for run folders), run folders, or their
        ``per_instance_stats.json`` files.
    metric : str, optional
        The per-instance stat that is the outcome (e.g. ``"exact_match"``,
        ``"quasi_exact_match"``, ``"f1_score"``); required unless the runs have one
        stat only. The error lists the stats the runs share.
    split : str
        The evaluation split whose instances to read (``"test"``; ``"valid"``).
    **read_kwargs
        Passed to :func:`evalmix.read` (``clusters=`` are added to the reader's).

    Returns
    -------
    EvalTable
        A score table: outcome the stat's per-instance mean, condition ``model``,
        cluster ``item`` (and ``scenario`` with several scenarios, a stratum), replicate
        ``train_trial`` when a run has several train trials.
    """
    paths = as_paths(source, (STATS_NAME,), "HELM run folders")
    paths = [p / STATS_NAME if p.is_dir() else p for p in paths]
    parts, dropped = [], {"perturbed": 0, "not in scenario_state": 0}
    for path in paths:
        if path.name != STATS_NAME:
            raise EvalmixError(f"{str(path)!r} is not a HELM {STATS_NAME}; pass run "
                               "folders or the suite folder")
        model, scenario = _run_spec(path.parent)
        frame, perturbed = _rows(path, split)
        dropped["perturbed"] += perturbed
        known = _eval_ids(path.parent, split)
        if known is not None and len(frame):
            keep = pd.Series([(i, t) in known for i, t in zip(
                frame["instance_id"], frame["train_trial"], strict=True)], index=frame.index)
            dropped["not in scenario_state"] += int(
                frame.loc[~keep, ["instance_id", "train_trial"]].drop_duplicates().shape[0])
            frame = frame[keep]
        frame = frame.assign(model=model, scenario=scenario)
        frame.attrs["stats"] = set(frame["stat"])
        parts.append(frame)
    shared = sorted(set.intersection(*(p.attrs["stats"] for p in parts)) if parts else set())
    if not shared:
        raise EvalmixError(f"the HELM runs {label(paths)} share no per-instance stat on "
                           f"split {split!r}; check split= (e.g. 'valid')")
    metric = choose(metric, shared, "per-instance stat", "metric")
    frame = pd.concat([p[p["stat"] == metric] for p in parts], ignore_index=True)
    frame = frame.drop(columns="stat").rename(columns={"value": metric})
    lost = {k: v for k, v in dropped.items() if v}
    if lost:
        warnings.warn(f"{label(paths)}: left out " + ", ".join(
            f"{v} {k} instance(s)" for k, v in lost.items()) + f" (split {split!r}, "
            "unperturbed instances only)", EvalmixWarning, stacklevel=2)
    roles: dict[str, Any] = {"outcome": metric, "condition": "model",
                             "clusters": {"item": "instance_id"}}
    if frame["scenario"].nunique() > 1:
        frame["instance_id"] = frame["scenario"] + "/" + frame["instance_id"]
        roles["clusters"] = {"item": "instance_id", "scenario": "scenario"}
        roles["strata"] = ("scenario",)
    if frame.groupby(["model", "scenario"])["train_trial"].nunique().gt(1).any():
        roles["replicate"] = "train_trial"
    return finish(frame, label(paths), roles, read_kwargs)
