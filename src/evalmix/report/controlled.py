"""The report's length-controlled section: AlpacaEval's LC win rate beside the raw one.

Made when the table is pairwise, one baseline is in every row, the instruction is the
``item`` cluster and the rows carry the answer lengths (``length_a`` / ``length_b``, as
:func:`evalmix.data.readers.read_alpaca_eval` gives them); the numbers come from
:func:`evalmix.inference.length_control.length_controlled_win_rate` (no fitting here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix.compare._calls import guarded
from evalmix.report.render import _table_html, _table_md, fmt

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["CONTROLLED_TITLE", "applies", "length_control_rows", "controlled_markdown",
           "controlled_html"]

CONTROLLED_TITLE = "Length-controlled win rate"
#: Bootstrap replicates of the report's LC intervals (each refits every model).
REPORT_REPS = 200


def applies(table: EvalTable) -> bool:
    """Whether the table has what the LC win rate needs (see the module docstring)."""
    d = table.data
    if table.kind != "pairwise" or "item" not in table.clusters:
        return False
    if not {"length_a", "length_b"} <= set(d.columns):
        return False
    a, b = d["model_a"].astype(str).to_numpy(), d["model_b"].astype(str).to_numpy()
    return any(np.all((a == m) | (b == m)) for m in {a[0], b[0]}) if a.size else False


def length_control_rows(table: EvalTable, *, level: float, seed: int,
                        reps: int = REPORT_REPS) -> tuple[pd.DataFrame | None, str]:
    """The LC rows (:meth:`LengthControlResult.tidy`) and a note, or (None, "") when the
    table has no answer lengths or no common baseline."""
    from evalmix.inference.length_control import length_controlled_win_rate

    if not applies(table):
        return None, ""
    out = guarded(length_controlled_win_rate, table, level=level, seed=seed,
                  reps=min(reps, REPORT_REPS))
    if not out.ok:
        return None, f"the length-controlled win rate could not be computed ({out.error})"
    return out.value.tidy(), ""


def _frame(rows: pd.DataFrame) -> pd.DataFrame:
    lc = rows[rows["estimand"] == "lc_win_rate"].set_index("model")
    raw = rows[rows["estimand"] == "win_rate"].set_index("model")
    lc = lc.sort_values("estimate", ascending=False)
    level = float(lc["level"].iloc[0])
    return pd.DataFrame({
        "model": lc.index.to_numpy(),
        "LC win rate": lc["estimate"].to_numpy(),
        f"{level:.0%} interval": [f"[{fmt(lo)}, {fmt(hi)}]" for lo, hi in
                                  zip(lc["lo"], lc["hi"], strict=True)],
        "raw win rate": raw.loc[lc.index, "estimate"].to_numpy(),
        f"{level:.0%} interval (raw)": [f"[{fmt(lo)}, {fmt(hi)}]" for lo, hi in
                                        zip(raw.loc[lc.index, "lo"], raw.loc[lc.index, "hi"],
                                            strict=True)],
        "length coefficient": lc["coef_length"].to_numpy(),
        "rows": lc["n_obs"].to_numpy(),
    })


def _caption(rows: pd.DataFrame) -> str:
    r = rows.iloc[0]
    return (f"AlpacaEval 2's length-controlled win rate (the GLM's prediction at no length "
            f"difference, instruction difficulty estimated from these models) beside the raw "
            f"win rate; {r['level']:.0%} intervals from a cluster bootstrap over "
            f"instructions ({int(r['n_clusters'])} instructions, {int(r['reps'])} replicates, "
            "every fit redone). The length coefficient is the GLM's slope on "
            "tanh(standardised baseline-minus-model length): negative when longer answers "
            "win.")


def controlled_markdown(rows: pd.DataFrame) -> str:
    """Markdown: caption and the table, best LC win rate first."""
    return "\n".join([md_text(_caption(rows)), "", _table_md(_frame(rows))])


def controlled_html(rows: pd.DataFrame) -> str:
    """HTML fragment: caption and the table."""
    return "\n".join([f"<p>{html_text(_caption(rows))}</p>", _table_html(_frame(rows))])
