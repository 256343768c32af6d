"""Figures of the report's controlled sections: each controlled estimand beside the raw.

- :func:`length_control_plot` -- per model, the raw win rate and AlpacaEval's
  length-controlled win rate against the baseline, each with its interval.
- :func:`style_control_plot` -- per model, the raw and the style-controlled Bradley-Terry
  ability with intervals (left), and the style coefficients with intervals (right).

Both take the section's tidy rows (:meth:`LengthControlResult.tidy`,
:meth:`StyleControlResult.tidy`), draw every text literally (a ``$`` in a model name is
drawn as written) and shade alternate rows so that a model's two intervals read together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix._escape import literal_text, visible
from evalmix.report.figures import _plt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["length_control_plot", "style_control_plot"]

_RAW = "#8c8c8c"
_CONTROLLED = "#1f4e9c"
#: inches per model row (two intervals each)
_ROW = 0.26


def _font(k: int) -> float:
    return 8.0 if k <= 40 else 6.0 if k <= 100 else 4.5


def _pairs(ax: Axes, raw: pd.DataFrame, ctl: pd.DataFrame, scale: float) -> np.ndarray:
    """Raw (above, grey) and controlled (below, blue) intervals, one row per model of
    ``ctl``'s order, best at the top; returns the rows' y positions."""
    k = len(ctl)
    y = np.arange(k)[::-1].astype(float)
    for row in y[::2]:
        ax.axhspan(row - 0.5, row + 0.5, color="#f2f2f2", lw=0, zorder=0)
    for frame, off, color in ((raw, 0.17, _RAW), (ctl, -0.17, _CONTROLLED)):
        est, lo, hi = (scale * frame[c].to_numpy(float) for c in ("estimate", "lo", "hi"))
        ax.hlines(y + off, lo, hi, color=color, lw=2.0, zorder=2)
        ax.plot(est, y + off, "o", color=color, ms=3.5, zorder=3)
    ax.set_ylim(-0.6, k - 0.4)
    ax.grid(axis="x", alpha=0.3)
    return y


@literal_text
def length_control_plot(rows: pd.DataFrame) -> Figure:
    """Raw and length-controlled win rate per model, each with its interval.

    Parameters
    ----------
    rows : pandas.DataFrame
        The report's ``length_control`` rows (estimands ``lc_win_rate`` and ``win_rate``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    lc = rows[rows["estimand"] == "lc_win_rate"].set_index("model")
    lc = lc.sort_values("estimate", ascending=False)
    raw = rows[rows["estimand"] == "win_rate"].set_index("model").loc[lc.index]
    k = len(lc)
    fig, ax = plt.subplots(figsize=(8, max(2.4, 1.3 + _ROW * k)))
    y = _pairs(ax, raw, lc, 100.0)
    ax.axvline(50, color="black", ls="--", lw=0.9)
    ax.annotate("as good as the baseline", (50, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -10), textcoords="offset points", fontsize=7, color="#555555")
    ax.set_yticks(y, [visible(str(m)) for m in lc.index], fontsize=_font(k))
    r = lc.iloc[0]
    base = str(r["baseline"]) if "baseline" in lc.columns else "the baseline"
    ax.set_xlabel(f"win rate against {visible(base)} (%), {r['level']:.0%} intervals: "
                  f"cluster bootstrap over instructions ({int(r['reps'])} replicates)",
                  fontsize=8)
    ax.plot([], [], color=_RAW, lw=2, marker="o", ms=3.5, label="raw win rate")
    ax.plot([], [], color=_CONTROLLED, lw=2, marker="o", ms=3.5,
            label="length-controlled win rate (AlpacaEval 2)")
    ax.legend(fontsize=7.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
              frameon=False)
    fig.set_layout_engine("tight")  # laid out once, while saving
    return fig


@literal_text
def style_control_plot(rows: pd.DataFrame) -> Figure:
    """Raw and style-controlled Bradley-Terry abilities (left) and the style
    coefficients (right), each with its interval.

    Parameters
    ----------
    rows : pandas.DataFrame
        The report's ``style_control`` rows (estimands ``bt_style_controlled``,
        ``bradley_terry`` and ``style_coef``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    ctl = rows[rows["estimand"] == "bt_style_controlled"].set_index("model")
    ctl = ctl.sort_values("estimate", ascending=False)
    raw = rows[rows["estimand"] == "bradley_terry"].set_index("model").loc[ctl.index]
    coef = rows[rows["estimand"] == "style_coef"]
    k = len(ctl)
    fig, (ax1, ax2) = plt.subplots(
        1, 2, figsize=(10, max(2.8, 1.5 + _ROW * k)), layout="constrained",
        gridspec_kw={"width_ratios": [3, 1.3]})
    y = _pairs(ax1, raw, ctl, 1.0)
    ax1.axvline(0, color="black", ls="--", lw=0.9)
    ax1.set_yticks(y, [f"{int(a)}. {visible(str(m))}" for a, m in
                       zip(ctl["rank"], ctl.index, strict=True)], fontsize=_font(k))
    r = ctl.iloc[0]
    by = r["cluster"] or "battle"
    ax1.set_xlabel(f"ability (log-odds, centred); {r['level']:.0%} intervals, {r['method']} "
                   f"clustered by {visible(str(by))}", fontsize=8)
    ax1.plot([], [], color=_RAW, lw=2, marker="o", ms=3.5, label="raw Bradley-Terry")
    ax1.plot([], [], color=_CONTROLLED, lw=2, marker="o", ms=3.5, label="style-controlled")
    ax1.legend(fontsize=7.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
               frameon=False)
    yc = np.arange(len(coef))[::-1]
    ax2.hlines(yc, coef["lo"].to_numpy(float), coef["hi"].to_numpy(float),
               color=_CONTROLLED, lw=2.0)
    ax2.plot(coef["estimate"].to_numpy(float), yc, "o", color=_CONTROLLED, ms=4)
    ax2.axvline(0, color="black", ls="--", lw=0.9)
    ax2.set_yticks(yc, [visible(str(c)) for c in coef["contrast"]], fontsize=8)
    ax2.set_ylim(-0.7, len(coef) - 0.3)
    ax2.set_xlabel("log-odds per SD of the\nfeature difference", fontsize=8)
    ax2.set_title("style coefficients", loc="left", fontsize=9)
    ax2.grid(axis="x", alpha=0.3)
    return fig
