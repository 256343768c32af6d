"""The report's "Custom statistics and randomization tests" section.

Custom statistics (a function or an expression, :func:`evalmix.bootstrap`) are
bootstrapped at the report's recommended cluster level (two crossed factors: the
pigeonhole bootstrap); when the conditions were assigned at random
(``analyze(randomized=True)``, ``evalmix report --randomized``), the cluster
randomization test of each condition difference (:func:`evalmix.permutation_test`) is
shown beside the design-based p-value of the same contrast (the recommended method's).
A statistic that fails becomes a note, never a failed report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix._markdown import markdown_table
from evalmix.compare._calls import guarded
from evalmix.data.table import EvalTable
from evalmix.inference.custom import Statistic, bootstrap
from evalmix.inference.permutation import permutation_test
from evalmix.seeding import child_seed

__all__ = ["CUSTOM_TITLE", "custom_rows", "custom_markdown", "custom_html"]

CUSTOM_TITLE = "Custom statistics and randomization tests"
#: Columns of the section's table (``custom.csv`` has every tidy column).
SHOWN = ("estimand", "contrast", "method", "cluster", "estimate", "lo", "hi", "p_value",
         "design_p_value", "n_clusters", "reps", "note")
#: child_seed offset of the section's draws (apart from the interval jobs' seeds)
_SEED_OFFSET = 1_000_003


def _design_p(intervals: pd.DataFrame, contrast: str, method: str, cluster: str) -> float:
    """The design-based p-value of the difference ``contrast`` (recommended method and
    cluster level), NaN when the report has no such row."""
    if intervals.empty or "p_value" not in intervals:
        return float("nan")
    hit = intervals[(intervals["estimand"] == "difference")
                    & (intervals["contrast"] == contrast) & (intervals["method"] == method)
                    & (intervals["cluster"] == cluster)]
    return float(hit["p_value"].iloc[0]) if len(hit) else float("nan")


def custom_rows(table: EvalTable, *, statistics: Mapping[str, Statistic],
                cluster: Sequence[str], randomized: bool, intervals: pd.DataFrame,
                method: str, columns: pd.DataFrame | None = None, reps: int = 2000,
                seed: int = 0, level: float = 0.95) -> tuple[pd.DataFrame | None, list[str]]:
    """The section's rows (tidy contract, plus ``p_value`` and ``design_p_value``) and
    notes; ``(None, [])`` when there is nothing to show."""
    rows: list[pd.DataFrame] = []
    notes: list[str] = []
    roles: list[str] = list(cluster)
    for k, (name, stat) in enumerate(statistics.items()):
        out = guarded(bootstrap, table, stat, cluster=roles or None, reps=reps, level=level,
                      seed=child_seed(seed, _SEED_OFFSET + k), progress=False, name=name,
                      columns=columns)
        if out.error:
            notes.append(f"custom statistic {name!r}: not computed ({out.error})")
        else:
            rows.append(out.value.tidy())
    if randomized:
        label = "+".join(roles)
        if len(roles) > 1:
            notes.append(f"randomization test: the recommended level {label!r} crosses "
                         f"{len(roles)} factors; randomized by {roles[0]!r}")
        test = guarded(permutation_test, table, cluster=roles[0] if roles else None,
                       seed=child_seed(seed, _SEED_OFFSET - 1), progress=False,
                       columns=columns)
        if test.error:
            notes.append(f"randomization test: not computed ({test.error})")
        else:
            row = test.value.tidy()
            row["design_p_value"] = _design_p(intervals, test.value.contrast, method,
                                              roles[0] if roles else "")
            rows.append(row)
    if not rows:
        return None, notes
    return pd.concat(rows, ignore_index=True), notes


def _view(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[[c for c in SHOWN if c in frame.columns]]


def _intro() -> str:
    return ("Custom statistics: pairs cluster bootstrap at the recommended cluster level "
            "(percentile intervals; for two crossed factors the multiway bootstrap SE with "
            "t(min G - 1)). Randomization test: the condition labels swapped or "
            "permuted over whole clusters, exact when the design allows at most 65,536 "
            "assignments; its p-value (p_value) stands beside the design-based p-value of "
            "the same difference (design_p_value). Every column is in custom.csv.")


def custom_markdown(frame: pd.DataFrame) -> str:
    """The section as Markdown."""
    from evalmix.report.render import fmt

    return "\n".join([md_text(_intro()), "", markdown_table(_view(frame), cell=fmt)])


def custom_html(frame: pd.DataFrame) -> str:
    """The section as an HTML fragment (text escaped)."""
    from evalmix.report.render import _table_html

    return f"<p class='muted'>{html_text(_intro())}</p>\n{_table_html(_view(frame))}"
