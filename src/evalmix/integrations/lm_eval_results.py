"""evalmix numbers in lm-evaluation-harness's own results layout.

lm-eval keeps a run's numbers in ``results_<date>.json`` as ``{"results": {task:
{"acc,none": 0.75, "acc_stderr,none": 0.25, ...}}, "versions": ..., "n-shot": ...}`` and
prints them with ``lm_eval.utils.make_table``, which shows a metric ``m`` as ``value ±
stderr`` when ``m_stderr`` sits beside it. Both functions here return such a dict, so
lm-eval's printer (and anything else that reads its results files) shows evalmix's
numbers:

- :func:`with_evalmix`: a run's results with, beside each task's ``acc``, a metric
  ``acc_cr2`` (the same mean) whose ``acc_cr2_stderr`` is evalmix's cluster-robust
  standard error (by document, or by a grouping field such as ``doc.subject``);
- :func:`comparison_results`: a paired comparison of runs
  (:func:`evalmix.compare_runs`), one entry per task x pair: the paired difference
  ``<metric>_diff`` ± its CR2 standard error, McNemar's p, the Holm and BH adjusted p
  and the minimum detectable difference.

Nothing here imports lm_eval: the layout is plain JSON.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evalmix.compare.runs import ALL_TASKS, RunComparison
from evalmix.data.readers import read_lm_eval
from evalmix.data.readers.lm_eval import task_names
from evalmix.errors import EvalmixError, InvalidOptionError, check_option
from evalmix.inference.api import interval
from evalmix.inference.sandwich import CRType

__all__ = ["with_evalmix", "comparison_results"]


def _results_dict(results: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    if isinstance(results, Mapping):
        return copy.deepcopy(dict(results))
    path = Path(results)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalmixError(f"{str(path)!r} is not an lm-eval results file ({exc}); pass "
                           "the results_<date>.json lm-eval wrote") from exc
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise EvalmixError(f"{str(path)!r} has no 'results' mapping: not an lm-eval results "
                           "file")
    return data


def _filter_of(entry: Mapping[str, Any], metric: str, task: str) -> str:
    keys = [k for k in entry if k.partition(",")[0] == metric]
    if not keys:
        raise EvalmixError(f"the results of task {task!r} have no metric {metric!r} (they "
                           f"have {', '.join(sorted(entry)) or 'nothing'}); choose metric=")
    return keys[0].partition(",")[2]


def with_evalmix(results: Mapping[str, Any] | str | os.PathLike[str],
                 samples: str | os.PathLike[str], *, metric: str = "acc",
                 cluster: str = "item", method: CRType = "CR2", **read_kwargs: Any
                 ) -> dict[str, Any]:
    """lm-eval's results of one run, with evalmix's standard error beside each metric.

    Parameters
    ----------
    results : dict or path
        The run's ``results_<date>.json`` (or the dict lm-eval returns).
    samples : path
        Its ``--log_samples`` output (the folder or ``samples_*.jsonl`` files).
    metric : str
        The per-document metric (``acc``, ``exact_match``, ...).
    cluster : str
        ``"item"`` (the document; CR2 then equals lm-eval's own ``acc_stderr``) or a
        grouping role given in ``clusters=`` (e.g. ``clusters={"subject":
        "doc.subject"}``).
    method : {"CR2", "CR1", "CR0", "CR3"}
        The cluster-robust standard error (CR2: Satterthwaite df).
    **read_kwargs
        Passed to :func:`~evalmix.data.readers.read_lm_eval` (``filter=``,
        ``clusters=``).

    Returns
    -------
    dict
        A copy of ``results`` where each task has ``<metric>_<method>,<filter>`` (the
        mean, equal to lm-eval's) and ``<metric>_<method>_stderr,<filter>``; lm-eval's
        ``make_table`` prints it as one more row ``value ± stderr``.
    """
    check_option("method", method, ("CR0", "CR1", "CR2", "CR3"))
    out = _results_dict(results)
    table = read_lm_eval(samples, metric=metric, **read_kwargs)
    if table.has_condition and table.data["condition"].nunique() > 1:
        raise InvalidOptionError(f"{str(samples)!r} holds the samples of several models; "
                                 "give the samples of the run the results belong to")
    if "task" in table.clusters:
        tasks = {t: table.data["task"].astype(str).to_numpy() == t
                 for t in sorted(table.data["task"].astype(str).unique())}
    else:
        (only,) = task_names(samples)
        tasks = {only: np.ones(table.n_obs, dtype=bool)}
    name = f"{metric}_{method.lower()}"
    for task, mask in tasks.items():
        entry = out["results"].get(task)
        if entry is None:
            raise EvalmixError(f"the results have no task {task!r} (they have "
                               f"{', '.join(out['results'])}); pass the results of the run "
                               "that wrote these samples")
        flt = _filter_of(entry, metric, task)
        r = interval(table.subset(mask), "mean", method=method, cluster=cluster,
                     scale="identity")
        entry[f"{name},{flt}"] = float(r.estimate)
        entry[f"{name}_stderr,{flt}"] = float(r.se)
    out.setdefault("versions", {})
    out.setdefault("evalmix", {})["stderr"] = (
        f"{name}_stderr: evalmix {method} standard error clustered by {cluster}")
    return out


def comparison_results(cmp: RunComparison, *, metric: str = "acc",
                       filter: str = "none") -> dict[str, Any]:
    """A paired comparison (:func:`evalmix.compare_runs`) in lm-eval's results layout.

    One entry per task x pair, named ``"<task>: <B> - <A>"``, with ``<metric>_diff`` and
    its ``_stderr`` (the comparison's headline method, CR2 by default),
    ``<metric>_diff_lo`` / ``_hi`` (its interval), ``p_value``, ``p_holm``, ``p_bh``,
    ``mcnemar_p`` (binary scores, one epoch), ``unpaired_p`` (lm-eval
    ``model_comparator.py``'s z test), ``mde`` and ``n_pairs``; lm-eval's ``make_table``
    prints it.
    """
    rows = cmp.tidy().set_index(["task", "run_a", "run_b", "method"])
    results: dict[str, dict[str, Any]] = {}
    for _, r in cmp.headline().iterrows():
        key = (r["task"], r["run_a"], r["run_b"])
        task = "all tasks" if r["task"] == ALL_TASKS else (r["task"] or "task")
        name = f"{task}: {r['run_b']} - {r['run_a']}"

        def extra(method: str, column: str = "p_value", key: tuple = key) -> float | str:
            if (*key, method) not in rows.index:
                return "N/A"
            v = rows.loc[(*key, method), column]
            return float(v) if np.isfinite(v) else "N/A"

        results[name] = {
            "alias": name,
            f"{metric}_diff,{filter}": float(r["estimate"]),
            f"{metric}_diff_stderr,{filter}": float(r["se"]) if np.isfinite(r["se"])
            else "N/A",
            f"{metric}_diff_lo,{filter}": float(r["lo"]),
            f"{metric}_diff_hi,{filter}": float(r["hi"]),
            f"p_value,{filter}": float(r["p_value"]),
            f"p_holm,{filter}": float(r["p_holm"]) if np.isfinite(r["p_holm"]) else "N/A",
            f"p_bh,{filter}": float(r["p_bh"]) if np.isfinite(r["p_bh"]) else "N/A",
            f"mcnemar_p,{filter}": extra("mcnemar"),
            f"unpaired_p,{filter}": extra("unpaired_z"),
            f"mde,{filter}": float(r["mde"]) if np.isfinite(r["mde"]) else "N/A",
            f"n_pairs,{filter}": int(r["n_pairs"]),
        }
    return {"results": results, "versions": dict.fromkeys(results, "evalmix"),
            "n-shot": {}, "higher_is_better": {},
            "evalmix": {"method": cmp.method, "cluster": cmp.cluster, "level": cmp.level,
                        "power": cmp.power}}
