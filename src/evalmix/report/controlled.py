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

That is ``controlled="auto"``; ``analyze(controlled="length" | "style" | "none")`` (``evalmix
report --controlled``) asks for one by name or for none (:func:`choose_controlled`), and
:mod:`evalmix.report.controlled_plots` draws each beside the raw estimand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, get_args

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix.compare._calls import guarded
from evalmix.errors import InvalidOptionError, check_option
from evalmix.report.render import _table_html, _table_md, fmt
from evalmix.vocabulary import ControlledEstimand

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["CONTROLLED_TITLE", "STYLE_TITLE", "applies", "choose_controlled",
           "length_control_rows",
           "style_control_rows", "style_markdown", "style_html", "controlled_markdown",
           "controlled_html"]

CONTROLLED_TITLE = "Length-controlled win rate"
STYLE_TITLE = "Style-controlled Bradley-Terry"
#: Largest design (rows x parameters) the report fits style control on (a dense matrix).
MAX_STYLE_CELLS = 50_000_000
#: Bootstrap replicates of the report's LC intervals (each refits every model).
REPORT_REPS = 200


def _baseline(table: EvalTable) -> bool:
    if table.kind != "pairwise":
        return False
    d = table.data
    a, b = d["model_a"].astype(str).to_numpy(), d["model_b"].astype(str).to_numpy()
    return any(np.all((a == m) | (b == m)) for m in {a[0], b[0]}) if a.size else False


def _has(table: EvalTable, columns: pd.DataFrame | None, feature: str) -> bool:
    """Whether the answer feature's column pair is in the table or its source frame."""
    pair = {f"{feature}_a", f"{feature}_b"}
    return pair <= set(table.data.columns) or (columns is not None
                                               and pair <= set(columns.columns))


def _why_no_length(table: EvalTable, columns: pd.DataFrame | None = None) -> str:
    """What keeps the table from the LC win rate ("" when nothing)."""
    if table.kind != "pairwise":
        return "it needs a pairwise table (model_a, model_b)"
    if "item" not in table.clusters:
        return "it needs the instruction as the 'item' cluster (--cluster item=COLUMN)"
    if not _has(table, columns, "length"):
        return ("it needs the answer lengths, columns length_a and length_b (the AlpacaEval "
                "reader adds them from output_1 / output_2)")
    if not _baseline(table):
        return "it compares every model with one baseline, but no model is in every row"
    return ""


def _why_no_style(table: EvalTable, features: Sequence[str],
                  columns: pd.DataFrame | None = None) -> str:
    """What keeps the table from style control with ``features`` ("" when nothing)."""
    if table.kind != "pairwise":
        return "it needs a pairwise table (model_a, model_b)"
    if table.ties == "separate":
        return "it counts a tie one half: read the table with ties='half' (--ties half)"
    if not features:
        return ("it needs answer features, column pairs <feature>_a / <feature>_b (the "
                "battles reader adds length, headers, lists and bold from conversation_a / "
                "conversation_b)")
    missing = [f for f in features if not _has(table, columns, f)]
    if missing:
        return (f"feature {missing[0]!r} needs the columns {missing[0]}_a and "
                f"{missing[0]}_b, which the table lacks")
    return ""


def applies(table: EvalTable, columns: pd.DataFrame | None = None) -> bool:
    """Whether the table has what the LC win rate needs (see the module docstring)."""
    return not _why_no_length(table, columns)


def _present_features(table: EvalTable, columns: pd.DataFrame | None) -> list[str]:
    """The default style features: Arena's token length when the table has it (FastChat's
    ``conv_metadata``), else the length in characters, then the markdown counts."""
    from evalmix.data.answers import ANSWER_FEATURES

    names = ["tokens", *(f for f in ANSWER_FEATURES if f != "length")] \
        if _has(table, columns, "tokens") else list(ANSWER_FEATURES)
    return [f for f in names if _has(table, columns, f)]


def choose_controlled(table: EvalTable, controlled: ControlledEstimand = "auto", *,
                      baseline: str | None = None, style_features: Sequence[str] | None = None,
                      columns: pd.DataFrame | None = None
                      ) -> tuple[ControlledEstimand, list[str]]:
    """The controlled estimand the report makes and the style features it uses.

    ``"auto"`` is the length-controlled win rate when the table has what it needs, else
    style control for battles with answer features and no common baseline, else none;
    ``baseline=`` asks for the length-controlled win rate and ``style_features=`` for
    style control. An estimand asked for by name that the table cannot give raises.

    Raises
    ------
    InvalidOptionError
        An unknown ``controlled``, a contradiction (``baseline=`` with style control), or
        an estimand asked for that the table cannot give (the message says what it lacks).
    """
    check_option("controlled", controlled, get_args(ControlledEstimand))
    if style_features is not None:
        style_features = [str(f) for f in ([style_features] if isinstance(style_features, str)
                                           else style_features)]
    if baseline is not None and style_features is not None:
        raise InvalidOptionError("baseline= is the length-controlled win rate's and "
                                 "style_features= style control's: give one of them")
    if controlled == "auto":
        controlled = ("length" if baseline is not None else
                      "style" if style_features is not None else "auto")
    wrong = ("baseline" if baseline is not None and controlled != "length" else
             "style_features" if style_features is not None and controlled != "style" else "")
    if wrong:
        raise InvalidOptionError(f"{wrong}= does not apply with controlled={controlled!r}")
    feats = (list(style_features) if style_features is not None
             else _present_features(table, columns))
    if controlled == "length":
        why = _why_no_length(table, columns)
        if why:
            raise InvalidOptionError(f"the length-controlled win rate cannot be made from "
                                     f"{table.source!r}: {why}")
    elif controlled == "style":
        why = _why_no_style(table, feats, columns)
        if why:
            raise InvalidOptionError(f"style control cannot be made from {table.source!r}: "
                                     f"{why}")
    elif controlled == "auto":
        controlled = ("length" if applies(table, columns) else
                      "style" if not _baseline(table) and not _why_no_style(table, feats, columns)
                      else "none")
    return controlled, feats if controlled == "style" else []


def style_control_rows(table: EvalTable, features: Sequence[str], *, level: float,
                       columns: pd.DataFrame | None = None) -> tuple[pd.DataFrame | None, str]:
    """Style-controlled and raw abilities and the style coefficients
    (:meth:`StyleControlResult.tidy`) and a note; (None, note) when too large or failed."""
    from evalmix.inference.style_control import style_controlled_bt

    d = table.data
    k = len(set(d["model_a"].astype(str)) | set(d["model_b"].astype(str)))
    if table.n_obs * (k + len(features)) > MAX_STYLE_CELLS:
        return None, (f"style control was not fitted: {table.n_obs} battles x {k} models is "
                      "too large for its dense design; call evalmix.style_controlled_bt on "
                      "a sample")
    out = guarded(style_controlled_bt, table, list(features), level=level, columns=columns)
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
                        reps: int = REPORT_REPS, baseline: str | None = None,
                        columns: pd.DataFrame | None = None) -> tuple[pd.DataFrame | None, str]:
    """The LC rows (:meth:`LengthControlResult.tidy`) and a note ((None, note) when the
    fit failed); the caller has checked that the table qualifies."""
    from evalmix.inference.length_control import length_controlled_win_rate

    out = guarded(length_controlled_win_rate, table, level=level, seed=seed,
                  reps=min(reps, REPORT_REPS), baseline=baseline, columns=columns)
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
