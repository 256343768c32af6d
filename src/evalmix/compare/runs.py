"""Two or more runs of one benchmark, compared sample by sample.

:func:`paired_runs` aligns runs (Inspect logs, lm-eval output folders, long tables,
each read by :func:`~evalmix.data.readers.read_log`) by task, sample id and epoch,
and compares every run with the baseline (the first run) per task:

- the mean paired difference with a cluster-robust interval by sample (epochs are
  replicates inside it) or by a grouping field (``cluster=``): CR2 with Satterthwaite
  df (the headline), and CR1, which equals Inspect's ``stderr(cluster=)``;
- the paired cluster bootstrap (percentile interval, achieved significance level);
- for binary scores with one epoch per sample, McNemar's exact test, and the unpaired
  z test lm-eval's ``model_comparator.py`` applies (for contrast: it ignores the
  pairing, lm-eval #3831);
- Holm and Benjamini-Hochberg adjusted p-values over the tasks x runs compared (per
  method), and the minimum detectable difference of each comparison (the difference
  its CR2 test detects with ``power``, e.g. 80%).

Samples present in one run and not the other, and samples whose content differs
(lm-eval's ``doc_hash``), are left out of that comparison, counted in the rows and named
in :attr:`RunComparison.missing`.

Reading the runs from their sources is in :mod:`evalmix.compare.run_sources`; the result,
the alignment and the comparisons here.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from evalmix.compare.run_sources import _read_runs
from evalmix.data.table import EvalTable
from evalmix.errors import (
    FewClustersWarning,
    InvalidOptionError,
    check_count,
    check_level,
    check_number,
    check_option,
)
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.inference.compare_all import benjamini_hochberg, holm
from evalmix.inference.paired import (
    detectable_difference,
    mcnemar_pvalue,
    paired_bootstrap,
    paired_se,
    unpaired_z,
)
from evalmix.inference.sandwich import FEW_CLUSTERS, MIN_BOOTSTRAP_CLUSTERS, CRType
from evalmix.inference.scale import t_pvalue, t_quantile
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import RESULT_COLUMNS

__all__ = ["paired_runs", "RunComparison", "COLUMNS", "MISSING_COLUMNS", "ALL_TASKS"]

#: Columns of :meth:`RunComparison.tidy`: the result contract's, then the comparison's.
COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "task", "run_a", "run_b", "estimate_a", "estimate_b", "t", "p_value", "p_holm", "p_bh",
    "mde", "power", "n_pairs", "n_only_a", "n_only_b", "n_mismatched", "n_a_only_right",
    "n_b_only_right",
)
#: Columns of :attr:`RunComparison.missing`: one row per sample left out of a comparison.
MISSING_COLUMNS: tuple[str, ...] = ("task", "run_a", "run_b", "sample", "epoch", "reason")
#: the ``task`` of the rows pooling every task (with two or more tasks)
ALL_TASKS = "(all tasks)"
#: methods of the rows, in order (``method=`` picks the headline sandwich)
_SANDWICH = ("CR2", "CR1")


@dataclass(frozen=True, eq=False)
class RunComparison:
    """Paired comparisons of runs with a baseline, per task (:func:`paired_runs`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per task x run x method, columns :data:`COLUMNS` (method ``CR2``,
        ``CR1``, ``bootstrap``, ``mcnemar``, ``unpaired_z``).
    missing : pandas.DataFrame
        Every sample x epoch left out of a comparison, columns :data:`MISSING_COLUMNS`
        (``reason``: ``only in <run>`` or ``content differs (doc_hash)``).
    runs : pandas.DataFrame
        The runs read: ``run``, ``source``, ``task``, ``n_samples``, ``n_epochs``, ``mean``.
    baseline, cluster, method : str
    level, power : float
    reps : int
    seed : int
    """

    table: pd.DataFrame
    missing: pd.DataFrame
    runs: pd.DataFrame
    baseline: str
    cluster: str
    method: str
    level: float
    power: float
    reps: int
    seed: int

    def tidy(self) -> pd.DataFrame:
        """The comparison rows (a copy), columns :data:`COLUMNS`."""
        return self.table.copy()

    def headline(self) -> pd.DataFrame:
        """The headline rows: the ``method`` (CR2) row of every task x run."""
        return self.table[self.table["method"] == self.method].reset_index(drop=True)

    def answer(self) -> list[str]:
        """One plain sentence per task x run: the difference, its interval, the tests."""
        out = []
        rows = self.table.set_index(["task", "run_a", "run_b", "method"])
        for _, r in self.headline().iterrows():
            key = (r["task"], r["run_a"], r["run_b"])
            where = f" on {r['task']}" if r["task"] else ""
            text = (f"{r['run_b']} - {r['run_a']}{where}: {r['estimate']:+.4f} "
                    f"({self.level:.0%} CI {r['lo']:+.4f} to {r['hi']:+.4f}, {self.method} "
                    f"by {self.cluster}, {r['n_clusters']} clusters, {r['n_pairs']} pairs); "
                    f"p = {r['p_value']:.3g}")
            if (*key, "mcnemar") in rows.index and np.isfinite(rows.loc[(*key, "mcnemar"),
                                                                         "p_value"]):
                text += f", McNemar p = {rows.loc[(*key, 'mcnemar'), 'p_value']:.3g}"
            if np.isfinite(r["mde"]):
                text += (f"; the smallest difference this comparison detects with "
                         f"{self.power:.0%} power is {r['mde']:.4f}")
            lost = int(r["n_only_a"] + r["n_only_b"] + r["n_mismatched"])
            if lost:
                text += f"; {lost} sample(s) not in both runs left out (see missing)"
            out.append(text)
        return out

    def __str__(self) -> str:
        show = self.headline()[["task", "run_b", "estimate", "lo", "hi", "p_value", "p_holm",
                                "mde", "n_pairs"]]
        return (f"paired comparison ({self.method} by {self.cluster}, "
                f"{self.level:.0%})\n" + "\n".join(self.answer()) + "\n"
                + show.to_string(index=False, float_format="{:.4g}".format))


# --------------------------------------------------------------------------- aligning
def _align(a: pd.DataFrame, b: pd.DataFrame, name_a: str, name_b: str
           ) -> tuple[pd.DataFrame, list[dict[str, Any]], int, int, int]:
    """Inner join on (sample, epoch) of one task; the left-out samples, named."""
    keys = ["sample", "epoch"]
    m = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    lost: list[dict[str, Any]] = []
    for side, run in (("left_only", name_a), ("right_only", name_b)):
        for _, r in m[m["_merge"] == side].iterrows():
            lost.append({"sample": r["sample"], "epoch": r["epoch"], "reason": f"only in {run}"})
    both = m[m["_merge"] == "both"]
    n_mismatch = 0
    if "hash_a" in both.columns and "hash_b" in both.columns:
        bad = both["hash_a"].notna() & both["hash_b"].notna() & (both["hash_a"] != both["hash_b"])
        for _, r in both[bad].iterrows():
            lost.append({"sample": r["sample"], "epoch": r["epoch"],
                         "reason": "content differs (doc_hash)"})
        n_mismatch = int(bad.sum())
        both = both[~bad]
    n_only_a = int((m["_merge"] == "left_only").sum())
    n_only_b = int((m["_merge"] == "right_only").sum())
    return both.reset_index(drop=True), lost, n_only_a, n_only_b, n_mismatch


def _is_binary(y: np.ndarray) -> bool:
    return bool(np.isin(y, (0.0, 1.0)).all())


def _rows(both: pd.DataFrame, *, method: str, level: float, power: float, reps: int,
          rng: np.random.Generator) -> list[dict[str, Any]]:
    """The rows of one comparison (one task, one run against the baseline)."""
    ya, yb = both["y_a"].to_numpy(float), both["y_b"].to_numpy(float)
    d = yb - ya
    groups = both["group_a"].to_numpy()
    base: dict[str, Any] = {"estimate": float(d.mean()) if d.size else np.nan,
                            "estimate_a": float(ya.mean()) if ya.size else np.nan,
                            "estimate_b": float(yb.mean()) if yb.size else np.nan,
                            "n_pairs": int(d.size), "reps": 0, "note": ""}
    binary = d.size > 0 and _is_binary(ya) and _is_binary(yb)
    if binary:
        base["n_a_only_right"] = int(((ya == 1) & (yb == 0)).sum())
        base["n_b_only_right"] = int(((ya == 0) & (yb == 1)).sum())
    n_groups = len(pd.unique(groups))
    rows = []
    for m in (method, *[x for x in _SANDWICH if x != method]):
        row = {**base, "method": m, "n_clusters": n_groups}
        if n_groups < 2:
            row["note"] = "fewer than 2 clusters aligned: no standard error"
        else:
            ps = paired_se(d, groups, type=cast(CRType, m))
            q = t_quantile(level, ps.df)
            t = ps.estimate / ps.se if ps.se > 0 else np.nan
            row.update(se=ps.se, df=ps.df, lo=ps.estimate - q * ps.se,
                       hi=ps.estimate + q * ps.se, t=t,
                       p_value=t_pvalue(t, ps.df) if np.isfinite(t) else np.nan)
            if m == method:
                row.update(mde=detectable_difference(ps.se, ps.df, level=level, power=power),
                           power=power)
            if not ps.se > 0:
                row["note"] = "the two runs agree on every sample: no standard error"
        rows.append(row)
    row = {**base, "method": "bootstrap", "n_clusters": n_groups, "reps": reps}
    if n_groups < MIN_BOOTSTRAP_CLUSTERS:
        row["note"] = (f"{n_groups} clusters: the bootstrap needs at least "
                       f"{MIN_BOOTSTRAP_CLUSTERS}")
    else:
        lo, hi, p, se = paired_bootstrap(d, groups, reps=reps, level=level, rng=rng)
        row.update(lo=lo, hi=hi, p_value=p, se=se)
    rows.append(row)
    if binary:
        one_per_cluster = n_groups == d.size
        row = {**base, "method": "mcnemar", "n_clusters": n_groups}
        if one_per_cluster:
            row["p_value"] = mcnemar_pvalue(base["n_a_only_right"], base["n_b_only_right"])
            row["note"] = "exact (binomial) McNemar test on the discordant samples"
        else:
            row["note"] = ("not computed: McNemar needs independent pairs, and the pairs "
                           "share clusters (epochs or a grouping field); use the "
                           f"{method} row or the bootstrap")
        rows.append(row)
    if d.size >= 2:
        se, p = unpaired_z(ya, yb)
        z = t_quantile(level, np.inf)
        rows.append({**base, "method": "unpaired_z", "se": se, "df": np.inf, "p_value": p,
                     "lo": base["estimate"] - z * se, "hi": base["estimate"] + z * se,
                     "n_clusters": int(d.size),
                     "note": "ignores the pairing (lm-eval model_comparator.py); for contrast"})
    return rows


def paired_runs(
    sources: Sequence[Any],
    *,
    labels: Sequence[str] | None = None,
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    cluster: str = "item",
    method: str = "CR2",
    level: float = 0.95,
    power: float = 0.8,
    reps: int = 2000,
    seed: SeedLike = None,
    **read_kwargs: Any,
) -> RunComparison:
    """Compare runs of one benchmark with a baseline, sample by sample, per task.

    Parameters
    ----------
    sources : list of paths or EvalTables
        Runs: Inspect logs (files or folders; a file with several models gives several
        runs), lm-eval ``--output_path`` folders, long tables, or tables already read.
    labels : list of str, optional
        A name per run (in order); default the model name (with the file when two runs
        share one).
    baseline : str, optional
        The run every other is compared with (default the first).
    pairs : list of (str, str), optional
        Instead of a baseline: the comparisons to make, each ``(A, B)`` giving ``B - A``
        (e.g. every model with its own earlier run).
    cluster : str
        Cluster role of the intervals: ``"item"`` (the sample; its epochs are replicates
        within it) or a grouping role added when reading (``clusters={"subject":
        "metadata.subject"}``).
    method : {"CR2", "CR1"}
        The headline standard error (CR2 with Satterthwaite df; CR1 with ``G - 1``).
    level : float
        Confidence level (and ``1 - level`` is the test size of the MDE).
    power : float
        Power at which the minimum detectable difference (``mde``) is given.
    reps : int
        Paired bootstrap resamples.
    seed : int, optional
        Seeds the bootstrap.
    **read_kwargs
        Passed to :func:`~evalmix.data.readers.read_log` for every path (``format=``,
        ``scorer=``, ``metric=``, ``filter=``, ``clusters=``, ...).

    Returns
    -------
    RunComparison
    """
    check_option("method", method, _SANDWICH)
    if not isinstance(cluster, str) or not cluster:
        raise InvalidOptionError(f"cluster={cluster!r}: give one cluster role, e.g. 'item'")
    level = check_level(level)
    power = check_number("power", power, low=0.0, high=1.0)
    if not 1 - level < power < 1:
        raise InvalidOptionError(f"power={power} must be between the test size "
                                 f"{1 - level:.3g} and 1")
    reps = check_count("reps", reps, minimum=MIN_REPS)
    if isinstance(sources, str | os.PathLike | EvalTable):
        sources = [sources]
    if read_kwargs and all(isinstance(s, EvalTable) for s in sources):
        raise InvalidOptionError(
            f"reader options ({', '.join(sorted(read_kwargs))}) apply to files, and every "
            "source is a table already read; pass them to evalmix.read instead")
    runs = _read_runs(list(sources), labels, cluster, read_kwargs)
    names = [r.label for r in runs]
    by_name = dict(zip(names, runs, strict=True))
    if pairs is not None:
        if baseline is not None:
            raise InvalidOptionError("give baseline= or pairs=, not both")
        pairs = [(str(a), str(b)) for a, b in pairs]
        for name in (x for pair in pairs for x in pair):
            if name not in by_name:
                raise InvalidOptionError(f"pairs= names {name!r}, which is not a run; the "
                                         f"runs are {', '.join(map(repr, names))}")
        if not pairs:
            raise InvalidOptionError("pairs= is empty; give (A, B) run names, B - A compared")
    elif baseline is None:
        pairs = [(names[0], n) for n in names[1:]]
    elif baseline in names:
        pairs = [(baseline, n) for n in names if n != baseline]
    else:
        raise InvalidOptionError(f"baseline={baseline!r} is not a run; the runs are "
                                 f"{', '.join(map(repr, names))}")
    rng, recorded = seeded_rng(seed)
    rows: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    tasks = sorted(set().union(*(set(r.frame["task"]) for r in runs)))
    few = []
    for base, other in ((by_name[a], by_name[b]) for a, b in pairs):
        per_task = []
        for task in tasks:
            a = base.frame[base.frame["task"] == task].drop(columns="task")
            b = other.frame[other.frame["task"] == task].drop(columns="task")
            both, lost, only_a, only_b, mism = _align(a, b, base.label, other.label)
            missing += [{"task": task, "run_a": base.label, "run_b": other.label, **x}
                        for x in lost]
            counts = {"task": task, "run_a": base.label, "run_b": other.label,
                      "n_only_a": only_a, "n_only_b": only_b, "n_mismatched": mism}
            if both.empty:
                rows.append({**counts, "method": method, "n_pairs": 0,
                             "note": "no sample is in both runs"})
                continue
            both["task"] = task
            per_task.append(both)
            new = _rows(both, method=method, level=level, power=power, reps=reps, rng=rng)
            if new[0]["n_clusters"] < FEW_CLUSTERS:
                few.append(f"{task or 'the task'} ({other.label}): {new[0]['n_clusters']}")
            rows += [{**counts, **x} for x in new]
        if len(tasks) > 1 and per_task:
            pooled = pd.concat(per_task, ignore_index=True)
            pooled["group_a"] = pooled["task"] + "/" + pooled["group_a"].astype(str)
            counts = {"task": ALL_TASKS, "run_a": base.label, "run_b": other.label,
                      **{k: int(sum(r[k] for r in rows if r.get("run_b") == other.label
                                    and r.get("run_a") == base.label
                                    and r.get("method") == method and r["task"] != ALL_TASKS))
                         for k in ("n_only_a", "n_only_b", "n_mismatched")}}
            rows += [{**counts, **x} for x in _rows(pooled, method=method, level=level,
                                                     power=power, reps=reps, rng=rng)]
    if few:
        warnings.warn(f"few clusters in the comparison ({'; '.join(few[:5])}): the CR2 "
                      "interval with Satterthwaite df is the one to read", FewClustersWarning,
                      stacklevel=2)
    table = pd.DataFrame(rows)
    table = table.reindex(columns=list(COLUMNS))
    table["estimand"] = "difference"
    # the task is part of the key: the same pair on two tasks is two rows
    table["contrast"] = (table["run_b"] + " - " + table["run_a"]).where(
        table["task"] == "", table["run_b"] + " - " + table["run_a"] + " on " + table["task"])
    table["cluster"] = np.where(table["method"] == "unpaired_z", "", cluster)
    table["scale"] = "identity"
    table["level"] = level
    table["seed"] = recorded
    table["reps"] = table["reps"].fillna(0).astype(int)
    table["note"] = table["note"].fillna("")
    for col in ("n_pairs", "n_only_a", "n_only_b", "n_mismatched", "n_clusters"):
        table[col] = table[col].fillna(0).astype(int)
    per = table["task"] != ALL_TASKS
    for m, idx in table[per].groupby("method").groups.items():
        p = table.loc[idx, "p_value"].to_numpy(float)
        ok = np.isfinite(p)
        h = np.full(p.shape, np.nan)
        h[ok] = holm(p[ok])
        table.loc[idx, "p_holm"] = h
        table.loc[idx, "p_bh"] = benjamini_hochberg(p)
        del m
    order = {m: i for i, m in enumerate((method, *_SANDWICH, "bootstrap", "mcnemar",
                                         "unpaired_z"))}
    pair_no = {pair: i for i, pair in enumerate(pairs)}
    table = table.assign(
        _p=[pair_no[(a, b)] for a, b in zip(table["run_a"], table["run_b"], strict=True)],
        _t=(table["task"] == ALL_TASKS).astype(int), _o=table["method"].map(order),
    ).sort_values(["_p", "_t", "task", "_o"], kind="stable").drop(
        columns=["_p", "_t", "_o"]).reset_index(drop=True)
    miss = pd.DataFrame(missing, columns=list(MISSING_COLUMNS))
    info = pd.DataFrame([{"run": r.label, "source": r.source, "task": task,
                          "n_samples": int(f["sample"].nunique()),
                          "n_epochs": int(f["epoch"].nunique()), "mean": float(f["y"].mean())}
                         for r in runs for task, f in r.frame.groupby("task", sort=True)])
    return RunComparison(table=table, missing=miss, runs=info, baseline=pairs[0][0],
                         cluster=cluster, method=method, level=level, power=power, reps=reps,
                         seed=recorded)
