"""``evalmix compare`` / :func:`compare_runs`: runs of one benchmark compared sample by
sample (:mod:`evalmix.compare.runs`), written as a report folder.

The folder (the report's format, :mod:`evalmix.report.folder`: atomic, a user's other
files kept) holds ``report.md`` and ``report.html`` (the answer first: one sentence per
task x run, then the headline table, every method, the samples left out, the runs
read), ``summary.json``, ``comparison.csv`` (:data:`~evalmix.compare.runs.COLUMNS`) and
``missing.csv`` (:data:`~evalmix.compare.runs.MISSING_COLUMNS`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from evalmix._escape import csv_frame, html_text, md_text
from evalmix.compare.runs import RunComparison, paired_runs
from evalmix.report.folder import REPORT_MARKER, check_report_dir, swap_in, write_manifest
from evalmix.report.render import _CSS, _table_html, _table_md
from evalmix.seeding import SeedLike

__all__ = ["compare_runs", "write_comparison", "COMPARISON_FILES"]

#: the files :func:`write_comparison` puts in its folder (besides the manifest)
COMPARISON_FILES = ("report.md", "report.html", "summary.json", "comparison.csv",
                    "missing.csv")
_HEADLINE = ["task", "run_a", "run_b", "estimate_a", "estimate_b", "estimate", "se", "lo", "hi", "df",
             "p_value", "p_holm", "p_bh", "mde", "n_pairs", "n_clusters", "n_only_a",
             "n_only_b", "n_mismatched"]
_METHODS = ["task", "run_a", "run_b", "method", "estimate", "se", "lo", "hi", "df", "p_value",
            "p_holm", "p_bh", "n_clusters", "n_a_only_right", "n_b_only_right", "note"]


def compare_runs(
    sources: Sequence[Any],
    *,
    out: str | os.PathLike[str] | None = None,
    labels: Sequence[str] | None = None,
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    cluster: str = "item",
    method: str = "CR2",
    level: float = 0.95,
    power: float = 0.8,
    reps: int = 2000,
    seed: SeedLike = None,
    escape_csv: bool = True,
    **read_kwargs: Any,
) -> RunComparison:
    """Compare two or more runs of one benchmark sample by sample, per task.

    The runs are aligned by task, sample id and epoch; each run is compared with the
    baseline (the first run) by the mean paired difference with a cluster-robust
    interval (CR2 by sample, epochs as replicates, or by ``cluster=``), the paired
    bootstrap, McNemar's exact test (binary scores, one epoch), Holm and
    Benjamini-Hochberg adjusted p-values over the tasks x runs, and the minimum
    detectable difference at ``power``. Samples not in both runs are counted and named.
    See :func:`evalmix.compare.runs.paired_runs` for the parameters; this adds:

    Parameters
    ----------
    sources : list of paths or EvalTables
        The runs (Inspect logs, lm-eval output folders, long tables).
    out : path, optional
        Write the report folder there (``report.md``, ``report.html``,
        ``summary.json``, ``comparison.csv``, ``missing.csv``).
    labels, baseline, pairs, cluster, method, level, power, reps, seed, **read_kwargs
        As :func:`~evalmix.compare.runs.paired_runs`.
    escape_csv : bool
        Escape CSV cells a spreadsheet would run as formulas (see
        :meth:`evalmix.Report.write`).

    Returns
    -------
    RunComparison
        ``.tidy()`` (one row per task x run x method), ``.missing``, ``.answer()``.

    Examples
    --------
    >>> import evalmix
    >>> cmp = evalmix.compare_runs(["logs/base.eval", "logs/new.eval"],
    ...                            out="cmp")  # doctest: +SKIP
    """
    if out is not None:
        check_report_dir(out)   # before the work: a bad out fails at once
    result = paired_runs(sources, labels=labels, baseline=baseline, pairs=pairs,
                         cluster=cluster,
                         method=method, level=level, power=power, reps=reps, seed=seed,
                         **read_kwargs)
    if out is not None:
        write_comparison(result, out, escape_csv=escape_csv)
    return result


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return _json_safe(v.item())
    return v


def _summary(r: RunComparison) -> dict[str, Any]:
    head = r.headline()
    return {
        "answer": r.answer(), "baseline": r.baseline, "cluster": r.cluster,
        "method": r.method, "level": r.level, "power": r.power, "reps": r.reps,
        "seed": r.seed, "n_missing": len(r.missing),
        "comparisons": [{k: _json_safe(v) for k, v in row.items()}
                        for row in head[_HEADLINE].to_dict("records")],
        "runs": [{k: _json_safe(v) for k, v in row.items()}
                 for row in r.runs.to_dict("records")],
    }


def _missing_view(r: RunComparison, most: int = 200) -> pd.DataFrame:
    return r.missing.head(most)


def comparison_markdown(r: RunComparison) -> str:
    """The comparison as Markdown: the answer first, then the tables."""
    lines = ["# Paired comparison of runs", ""]
    lines += [f"- {md_text(a)}" for a in r.answer()]
    lines += ["", f"_{r.method} by {md_text(r.cluster)} at {r.level:.0%}; p_holm and p_bh "
              "adjust over the tasks x runs compared; mde is the smallest true difference the "
              f"{r.method} test detects with {r.power:.0%} power._", "",
              "## Headline", "", _table_md(r.headline()[_HEADLINE]), "",
              "## Every method", "", _table_md(r.table[_METHODS]), "",
              f"## Samples left out ({len(r.missing)})", "", _table_md(_missing_view(r)), "",
              "## Runs read", "", _table_md(r.runs), ""]
    return "\n".join(lines)


def comparison_html(r: RunComparison) -> str:
    """The comparison as one self-contained HTML page."""
    answer = "".join(f"<li>{html_text(a)}</li>" for a in r.answer())
    body = ("<h1>Paired comparison of runs</h1>"
            f"<ul class='rec'>{answer}</ul>"
            f"<p class='muted'>{html_text(r.method)} by {html_text(r.cluster)} at "
            f"{r.level:.0%}; p_holm and p_bh adjust over the tasks x runs compared; mde is "
            f"the smallest true difference the {html_text(r.method)} test detects with "
            f"{r.power:.0%} power.</p>"
            f"<h2>Headline</h2>{_table_html(r.headline()[_HEADLINE])}"
            f"<h2>Every method</h2>{_table_html(r.table[_METHODS])}"
            f"<h2>Samples left out ({len(r.missing)})</h2>{_table_html(_missing_view(r))}"
            f"<h2>Runs read</h2>{_table_html(r.runs)}")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>evalmix comparison"
            f"</title><style>{_CSS}</style></head><body>{body}</body></html>")


def write_comparison(r: RunComparison, out: str | os.PathLike[str], *,
                     escape_csv: bool = True) -> dict[str, Path]:
    """Write the comparison's folder at ``out`` atomically (as
    :meth:`evalmix.Report.write`: an earlier evalmix folder there is replaced, a user's
    other files kept); the paths written, by name."""
    d = check_report_dir(out)
    tmp = Path(tempfile.mkdtemp(dir=d.parent, prefix=f".{d.name}.tmp-"))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)
        (tmp / "report.md").write_text(comparison_markdown(r), encoding="utf-8")
        (tmp / "report.html").write_text(comparison_html(r), encoding="utf-8")
        (tmp / "summary.json").write_text(json.dumps(_summary(r), indent=2), encoding="utf-8")
        csv_frame(r.table, escape=escape_csv).to_csv(tmp / "comparison.csv", index=False)
        csv_frame(r.missing, escape=escape_csv).to_csv(tmp / "missing.csv", index=False)
        write_manifest(tmp, REPORT_MARKER)
        swap_in(tmp, d, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {name: Path(out) / name for name in COMPARISON_FILES}
