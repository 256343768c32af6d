"""Numbers and tables as the report's pages show them: the page style, a number formatted
for a cell, and a tidy frame as an HTML or Markdown table (the report's sections share
these; :mod:`evalmix.report.render` re-exports them).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from evalmix._escape import html_text
from evalmix._markdown import markdown_table

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;
margin:24px auto;padding:0 18px;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:1.6em} table{border-collapse:collapse;font-size:.82em;margin:.6em 0}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left} th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums} .warn{background:#fff6e5;border-left:4px
solid #e08e0b;padding:6px 12px;margin:4px 0} .ok{background:#eaf6ee;border-left:4px solid
#2e8b57;padding:6px 12px} .bad{background:#fdecea;border-left:4px solid #c0392b;
padding:6px 12px} .rec{background:#eef3fb;border-left:4px solid #1f4e9c;padding:8px 12px}
tr.fragile td{background:#fdecea} img{max-width:100%;margin:8px 0} .muted{color:#666;
font-size:.85em} code{background:#f4f4f4;padding:1px 4px}
details summary{cursor:pointer;font-weight:600;margin:.6em 0}
td{white-space:nowrap} td.wrap{white-space:normal;min-width:260px}
.grid{display:flex;flex-wrap:wrap;gap:6px} .grid img.forest{max-width:49%}
.finding{background:#fdecea;border-left:4px solid #c0392b;padding:6px 12px;margin:4px 0}
.big{font-size:1.05em;font-weight:600}
table{display:block;max-width:100%;overflow-x:auto} table.answer{font-size:.85em;
line-height:1.2;margin:.4em 0} table.answer td{white-space:normal;padding:2px 7px}
table.answer td.iv,table.answer td.num{white-space:nowrap}
p.answer{font-size:1.1em;margin:.3em 0}
p.roles{color:#444;font-size:.9em;margin:.3em 0}
"""


#: What the AB/BA class table says.
_CLASSES = (
    "Each matched AB/BA cell (one comparison judged in both orders) by its two verdicts: "
    "a stable condition win (the same model wins in both orders), a stable slot win (the "
    "answer in the same position wins both times: the order decided), a stable tie, or a "
    "flip (a tie in one order, a win in the other); share [interval] (count) of the "
    "matched cells, cluster bootstrap (expanded percentile) over the clusters named. The "
    "controlled win rate is model_b's win rate averaged over both orders, summed from "
    "the classes; the stable slot share is the flip rate above. Every cell is in "
    "position_classes.csv.")


def fmt(v: Any, digits: int = 3) -> str:
    """Format a cell: floats to ``digits`` decimals, missing as empty."""
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, float | np.floating):
        if not np.isfinite(v):
            return "" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        # abs() of a float / numpy-float union types as object; it is a real number here
        if float(v).is_integer() and cast(float, abs(v)) >= 10:
            return f"{int(v):,}"
        return f"{v:.{digits}f}"
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    return str(v)


def _num(v: Any) -> str:
    numeric = isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_)
    return " class='num'" if numeric else ""


def _wrap(column: Any, value: Any) -> str:
    return " class='wrap'" if isinstance(value, str) and len(value) > 40 else ""


def _table_html(df: pd.DataFrame, *, highlight: str | None = None, max_rows: int = 400
                ) -> str:
    if df is None or df.empty:
        return "<p class='muted'>none</p>"
    d = df.head(max_rows)
    columns = list(d.columns)
    head = "".join(f"<th>{html_text(str(c))}</th>" for c in columns)
    mark = columns.index(highlight) if highlight in columns else None
    body = []
    for _, r in d.iterrows():
        values = tuple(r)   # one pass over the row (a lookup per cell cost 3x as much)
        cls = " class='fragile'" if mark is not None and bool(values[mark] is True
                                                              or values[mark] == 1) else ""
        cells = "".join(f"<td{_num(v) or _wrap(c, v)}>{html_text(fmt(v))}</td>"
                        for c, v in zip(columns, values, strict=True))
        body.append(f"<tr{cls}>{cells}</tr>")
    more = (f"<p class='muted'>first {max_rows} of {len(df)} rows; all rows are in the "
            "CSV files</p>" if len(df) > max_rows else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _table_md(df: pd.DataFrame, max_rows: int = 400) -> str:
    return markdown_table(df, cell=fmt, max_rows=max_rows)
