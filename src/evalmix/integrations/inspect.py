"""evalmix inside Inspect AI: a metric and an end-of-eval-set hook.

:func:`cluster_ci` is an Inspect ``@metric`` that reports the mean score with
cluster-robust intervals by a sample-metadata field, as a dict (like Inspect's ``ci()``):
CR2 with clubSandwich's Satterthwaite degrees of freedom, which hold their level with few
clusters, and CR1 with ``G - 1`` df, whose standard error ``se_cr1`` is exactly
Inspect's ``stderr(cluster=...)``::

    from inspect_ai.scorer import accuracy, scorer
    from evalmix.integrations.inspect import cluster_ci

    @scorer(metrics=[accuracy(), cluster_ci("subject")])
    def my_scorer(): ...

Inspect lists the dict's keys among the scorer's metrics (``estimate``, ``se_cr2``,
``df_cr2``, ``lower_cr2``, ``upper_cr2``, ``se_cr1``, ``lower_cr1``, ``upper_cr1``,
``clusters``), as it lists ``ci()``'s ``lower`` and ``upper``.

:class:`EvalmixHooks` is registered with Inspect through the ``inspect_ai`` entry point
(``pyproject.toml``), so installing evalmix makes it available; it does nothing unless
``EVALMIX_INSPECT_REPORT`` names an output folder. At the end of an ``eval_set()`` it
writes there an evalmix comparison of the eval set's models (``evalmix compare``), or,
with ``EVALMIX_INSPECT_BASELINE`` naming an earlier eval set's log folder, the paired
comparison of this run with that one; with one model and no baseline, the evalmix
report (``evalmix report --fast``). ``EVALMIX_INSPECT_SCORER`` picks the scorer when the
logs have several, ``EVALMIX_INSPECT_CLUSTER`` a sample-metadata field to cluster by.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from inspect_ai.hooks import EvalSetEnd, Hooks, hooks
from inspect_ai.scorer import Metric, SampleScore, metric, value_to_float

from evalmix.errors import check_level

# Inspect imports this module at start-up (the entry point) in every Inspect process:
# evalmix's estimators and report are imported when used, not here.

__all__ = ["cluster_ci", "EvalmixHooks", "write_eval_set_report", "ENV_REPORT",
           "ENV_BASELINE", "ENV_SCORER", "ENV_CLUSTER"]

#: output folder of the end-of-eval-set report; the hook is off when unset
ENV_REPORT = "EVALMIX_INSPECT_REPORT"
#: an earlier eval set's log folder: compare this run with it, sample by sample
ENV_BASELINE = "EVALMIX_INSPECT_BASELINE"
#: the scorer to read when the logs have several
ENV_SCORER = "EVALMIX_INSPECT_SCORER"
#: a sample-metadata field to cluster by (default: the sample)
ENV_CLUSTER = "EVALMIX_INSPECT_CLUSTER"


@metric
def cluster_ci(cluster: str | None = None, level: float = 0.95,
               to_float: Callable[[Any], float] | None = None) -> Metric:
    """Mean score with CR2 (Satterthwaite df) and CR1 intervals by a metadata cluster.

    Parameters
    ----------
    cluster : str, optional
        Sample-metadata key of the cluster (e.g. ``"subject"``, a passage or scenario
        id); ``None``: each sample is its own cluster (after Inspect reduced its epochs).
    level : float
        Confidence level of the intervals.
    to_float : callable, optional
        Score value to number (default Inspect's ``value_to_float()``: C 1, I 0, P 0.5,
        N 0).

    Returns
    -------
    Metric
        A dict: ``estimate`` (the mean), ``se_cr2``, ``df_cr2``, ``lower_cr2``, ``upper_cr2``,
        ``se_cr1`` (equal to ``stderr(cluster=cluster)``), ``lower_cr1``, ``upper_cr1``
        (``t(G - 1)`` as ``ci(cluster=)``) and ``clusters``.
    """
    level = check_level(level)
    convert = to_float or value_to_float()

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        from evalmix.inference.paired import paired_se
        from evalmix.inference.scale import t_quantile

        values = np.array([convert(s.score.value) for s in scores], dtype=float)
        ids = []
        for s in scores:
            if cluster is None:
                ids.append(f"{s.sample_id}")
                continue
            value = (s.sample_metadata or {}).get(cluster)
            if value is None or (isinstance(value, float) and np.isnan(value)):
                raise ValueError(f"sample {s.sample_id!r} has no metadata {cluster!r}: "
                                 f"cluster_ci({cluster!r}) needs it on every sample")
            ids.append(repr(value))   # 1 and "1" are different clusters, as in Inspect
        mean = float(values.mean()) if values.size else 0.0
        groups = len(set(ids))
        out = {"estimate": mean, "clusters": float(groups)}
        if groups < 2:   # no variance between clusters can be estimated (Inspect: 0)
            return {**out, "se_cr2": 0.0, "df_cr2": 0.0, "lower_cr2": mean,
                    "upper_cr2": mean, "se_cr1": 0.0, "lower_cr1": mean, "upper_cr1": mean}
        for name in ("CR2", "CR1"):
            r = paired_se(values, np.asarray(ids, dtype=object), type=name)
            q = t_quantile(level, r.df)
            key = name.lower()
            out.update({f"se_{key}": r.se, f"lower_{key}": mean - q * r.se,
                        f"upper_{key}": mean + q * r.se})
            if name == "CR2":
                out["df_cr2"] = r.df
        return out

    return compute


def write_eval_set_report(log_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
                          baseline: str | os.PathLike[str] | None = None,
                          scorer: str | None = None, cluster: str | None = None) -> str:
    """Write evalmix's view of an eval set's logs to ``out``; what was written.

    With ``baseline`` (an earlier eval set's log folder): every model of ``log_dir``
    compared with its own run in ``baseline``, sample by sample
    (:func:`evalmix.compare_runs`, runs labelled ``MODEL (baseline)`` and ``MODEL``).
    Without, two or more models: each compared with the first by name. One model: the evalmix
    report (:func:`evalmix.analyze`, ``fast=True``). ``cluster`` is a sample-metadata
    field to cluster by (default the sample).
    """
    from evalmix.data.readers import read_inspect
    from evalmix.errors import EvalmixError
    from evalmix.report.analyze import analyze
    from evalmix.report.compare_runs import compare_runs

    read: dict[str, Any] = {"scorer": scorer} if scorer else {}
    by = "item"
    if cluster:
        read["clusters"] = {cluster: f"metadata.{cluster}"}
        by = cluster
    current = read_inspect(log_dir, **read)
    models = _models(current)
    if baseline:
        before = read_inspect(baseline, **read)
        common = [m for m in models if m in _models(before)]
        if not common:
            raise EvalmixError(f"no model of the eval set in {str(log_dir)!r} "
                               f"({', '.join(models)}) has a run in the baseline "
                               f"{str(baseline)!r}; check {ENV_BASELINE}")
        labels = [f"{m} (baseline)" for m in _models(before)] + models
        pairs = [(f"{m} (baseline)", m) for m in common]
        compare_runs([before, current], out=out, labels=labels, pairs=pairs, cluster=by)
        return f"evalmix comparison with the baseline in {out}"
    if len(models) > 1:
        # the eval set's logs are read in the order they finished, which varies from run
        # to run: the reference is the first model by name, so the report is reproducible
        compare_runs([current], out=out, cluster=by, baseline=min(models))
        return f"evalmix comparison in {out}"
    analyze(current, fast=True, progress=False).write(Path(out))
    return f"evalmix report in {out}"


def _models(table: Any) -> list[str]:
    """The models of a table in the order its runs are read (first appearance)."""
    import pandas as pd

    return [str(m) for m in pd.unique(table.data["condition"].astype(str))]


@hooks(name="evalmix_report", description="evalmix report or paired comparison of the "
       f"eval set's logs, written to ${ENV_REPORT} at the end of an eval set")
class EvalmixHooks(Hooks):
    """Writes :func:`write_eval_set_report` at the end of every eval set, into the folder
    named by ``EVALMIX_INSPECT_REPORT`` (off when unset)."""

    def enabled(self) -> bool:
        return bool(os.environ.get(ENV_REPORT))

    async def on_eval_set_end(self, data: EvalSetEnd) -> None:
        out = Path(os.environ[ENV_REPORT]).expanduser()
        write_eval_set_report(data.log_dir, out,
                              baseline=os.environ.get(ENV_BASELINE) or None,
                              scorer=os.environ.get(ENV_SCORER) or None,
                              cluster=os.environ.get(ENV_CLUSTER) or None)
