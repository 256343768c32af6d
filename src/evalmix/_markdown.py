"""The one GitHub-flavoured Markdown table writer (design summaries and reports); every
header and cell goes through ``evalmix._escape.md_cell``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from evalmix._escape import md_cell

__all__ = ["markdown_table", "md_cell"]


def markdown_table(df: pd.DataFrame | None, *, cell: Callable[[Any], str] = str,
                   max_rows: int | None = None) -> str:
    """``df`` as a Markdown table, each value through ``cell``; ``_none_`` when empty.
    Beyond ``max_rows`` rows a line says that all rows are in the CSV files."""
    if df is None or df.empty:
        return "_none_"
    d = df if max_rows is None else df.head(max_rows)
    cols = [md_cell(str(c)) for c in d.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    for row in d.itertuples(index=False):
        out.append("| " + " | ".join(md_cell(cell(v)) for v in row) + " |")
    if max_rows is not None and len(df) > max_rows:
        out.append(f"\n_first {max_rows} of {len(df)} rows; all rows are in the CSV files_")
    return "\n".join(out)
