"""The report's controlled sections: length- or style-controlled estimands beside the raw.

- **Length-controlled win rate** (AlpacaEval): made when the table is pairwise, one
  baseline is in every row, the instruction is the ``item`` cluster and the rows carry
  the answer lengths (``length_a`` / ``length_b``, as
  :func:`evalmix.data.readers.read_alpaca_eval` gives them); numbers from
  :func:`evalmix.inference.length_control.length_controlled_win_rate`.
- **Style-controlled Bradley-Terry** (Arena battles): made when no model is in every
  row and the rows carry answer features (``length``, ``headers``, ``lists``, ``bold``
  as the battles reader gives them); numbers from
  :func:`evalmix.inference.style_control.style_controlled_bt`.

No fitting here.
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

__all__ = ["CONTROLLED_TITLE", "STYLE_TITLE", "applies", "length_control_rows",
           "style_control_rows", "style_markdown", "style_html", "controlled_markdown",
           "controlled_html"]

CONTROLLED_TITLE = "Length-controlled win rate"
STYLE_TITLE = "Style-controlled Bradley-Terry"
#: Largest design (rows x parameters) the report fits style control on (a dense matrix).
MAX_STYLE_CELLS = 50_000_000
#: Bootstrap replicates of the report's LC intervals (each refits every model).
REPORT_REPS = 200


def _baseline(table: EvalTable) -> bool:
    d = table.data
    a, b = d["model_a"].astype(str).to_numpy(), d["model_b"].astype(str).to_numpy()
    return any(np.all((a == m) | (b == m)) for m in {a[0], b[0]}) if a.size else False


def applies(table: EvalTable) -> bool:
    """Whether the table has what the LC win rate needs (see the module docstring)."""
    if table.kind != "pairwise" or "item" not in table.clusters:
        return False
    if not {"length_a", "length_b"} <= set(table.data.columns):
        return False
    return _baseline(table)


def _style_features(table: EvalTable) -> list[str]:
    """The answer features a style section uses (empty: no section)."""
    from evalmix.data.answers import ANSWER_FEATURES

    if table.kind != "pairwise" or table.ties == "separate" or _baseline(table):
        return []
    cols = set(table.data.columns)
    return [f for f in ANSWER_FEATURES if {f"{f}_a", f"{f}_b"} <= cols]


def style_control_rows(table: EvalTable, *, level: float) -> tuple[pd.DataFrame | None, str]:
    """Style-controlled and raw abilities and the style coefficients
    (:meth:`StyleControlResult.tidy`) and a note; (None, "") when the table has no answer
    features or has a common baseline (then the LC win rate is the controlled estimand)."""
    from evalmix.inference.style_control import style_controlled_bt

    feats = _style_features(table)
    if not feats:
        return None, ""
    d = table.data
    k = len(set(d["model_a"].astype(str)) | set(d["model_b"].astype(str)))
    if table.n_obs * (k + len(feats)) > MAX_STYLE_CELLS:
        return None, (f"style control was not fitted: {table.n_obs} battles x {k} models is "
                      "too large for its dense design; call evalmix.style_controlled_bt on "
                      "a sample")
    out = guarded(style_controlled_bt, table, feats, level=level)
    if not out.ok:
        return None, f"style-controlled Bradley-Terry could not be computed ({out.error})"
    return out.value.tidy(), ""


def _style_frame(rows: pd.DataFrame) -> pd.DataFrame:
    ctl = rows[rows["estimand"] == "bt_style_controlled"].set_index("model").sort_values("rank")
    raw = rows[rows["estimand"] == "bradley_terry"].set_index("model").loc[ctl.index]
    level = float(ctl["level"].iloc[0])
    return pd.DataFrame({
        "model": ctl.index.to_numpy(),
        "rank (controlled)": ctl["rank"].to_numpy(),
        "controlled": ctl["estimate"].to_numpy(),
        f"{level:.0%} interval": [f"[{fmt(lo)}, {fmt(hi)}]" for lo, hi in
                                  zip(ctl["lo"], ctl["hi"], strict=True)],
        "rank (raw)": raw["rank"].to_numpy(),
        "raw": raw["estimate"].to_numpy(),
        f"{level:.0%} interval (raw)": [f"[{fmt(lo)}, {fmt(hi)}]" for lo, hi in
                                        zip(raw["lo"], raw["hi"], strict=True)],
    })


def _coef_frame(rows: pd.DataFrame) -> pd.DataFrame:
    c = rows[rows["estimand"] == "style_coef"]
    return pd.DataFrame({"feature": c["contrast"].to_numpy(), "coefficient": c["estimate"].to_numpy(),
                         "interval": [f"[{fmt(lo)}, {fmt(hi)}]" for lo, hi in
                                      zip(c["lo"], c["hi"], strict=True)]})


def _style_caption(rows: pd.DataFrame) -> str:
    r = rows.iloc[0]
    return (f"Bradley-Terry abilities (log-odds, centred) with the answers' style held fixed "
            f"(FastChat / arena-rank style control) beside the raw abilities; "
            f"{r['method']} clustered by {r['cluster'] or 'battle'} "
            f"({int(r['n_clusters'])} clusters), {r['level']:.0%} intervals. The style "
            "coefficients are the change in log-odds of winning per SD of the normalised "
            "feature difference (a - b) / (a + b + 1).")


def style_markdown(rows: pd.DataFrame) -> str:
    """Markdown: caption, the abilities table and the coefficients."""
    return "\n".join([md_text(_style_caption(rows)), "", _table_md(_style_frame(rows)), "",
                      _table_md(_coef_frame(rows))])


def style_html(rows: pd.DataFrame) -> str:
    """HTML fragment: caption, the abilities table and the coefficients."""
    return "\n".join([f"<p>{html_text(_style_caption(rows))}</p>",
                      _table_html(_style_frame(rows)), _table_html(_coef_frame(rows))])


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
