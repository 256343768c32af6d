"""Leaderboard tables and figure from the tidy frames of
:func:`evalmix.inference.leaderboard.leaderboard` (no fitting here).

- :func:`leaderboard_frame` -- the display table: rank, model, estimate, interval, rank
  range (simultaneous, and the model's own), tie group, tier letters.
- :func:`leaderboard_markdown` / :func:`leaderboard_html` -- that table (and the
  closest pairs) as Markdown or HTML.
- :func:`leaderboard_plot` -- one row per model, best at the top: estimate with its
  interval on the left, the simultaneous (and own) rank range on the right, tie groups
  ruled off, tier letters beside.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix._escape import html_text, literal_text, md_text
from evalmix.report.figures import _plt
from evalmix.report.render import _table_html, _table_md, fmt

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["leaderboard_frame", "pairs_frame", "leaderboard_markdown", "leaderboard_html",
           "leaderboard_plot"]

_LABELS = {"win_rate": "win rate vs baseline", "mean": "mean score",
           "bradley_terry": "Bradley-Terry ability (logit)"}
#: Inches per model row in the figure (100 models: a 15-inch-tall figure).
ROW_HEIGHT = 0.15


def _board(models: pd.DataFrame, stratum: str) -> pd.DataFrame:
    board = models[models["stratum"] == stratum]
    if board.empty:
        have = ", ".join(repr(s) for s in pd.unique(models["stratum"]))
        raise ValueError(f"no board for stratum {stratum!r}; the frame has {have}")
    return board.sort_values(["rank", "model"], kind="stable")


def leaderboard_frame(models: pd.DataFrame, *, stratum: str = "") -> pd.DataFrame:
    """Display table of one board (one row per model, best first)."""
    b = _board(models, stratum)
    level = float(b["level"].iloc[0])
    frame = pd.DataFrame({
        "rank": b["rank"].to_numpy(),
        "model": b["model"].to_numpy(),
        "estimate": b["estimate"].to_numpy(),
        f"{level:.0%} interval (per model)": [f"[{fmt(lo)}, {fmt(hi)}]"
                                  for lo, hi in zip(b["lo"], b["hi"], strict=True)],
        "rank range": [f"{int(lo)}-{int(hi)}"
                       for lo, hi in zip(b["rank_lo"], b["rank_hi"], strict=True)],
        "own rank range": [f"{int(lo)}-{int(hi)}" for lo, hi in zip(
            b["rank_lo_marginal"], b["rank_hi_marginal"], strict=True)],
        "tie group": b["tie_group"].to_numpy(),
        "tier": b["tier"].to_numpy(),
        "rows": b["n_obs"].to_numpy(),
    })
    return frame if _has_letters(b) else frame.drop(columns="tier")


def _has_letters(board: pd.DataFrame) -> bool:
    """False when the board has no tier letters (skipped, or above the letter cap)."""
    return bool((board["tier"].fillna("").astype(str) != "").any())


def pairs_frame(pairs: pd.DataFrame, *, stratum: str = "", max_rows: int = 20
                ) -> pd.DataFrame:
    """The closest pairs of one board (smallest |t| first): the calls a reader doubts."""
    p = pairs[pairs["stratum"] == stratum]
    p = p.iloc[np.argsort(np.abs(p["t"].to_numpy()), kind="stable")].head(max_rows)
    return pd.DataFrame({
        "contrast": [f"{a} - {b}" for a, b in zip(p["model_a"], p["model_b"], strict=True)],
        "difference": p["estimate"].to_numpy(),
        f"simultaneous interval ({p['adjust'].iloc[0] if len(p) else 'max-t'})": [
            f"[{fmt(lo)}, {fmt(hi)}]"
            for lo, hi in zip(p["sim_lo"], p["sim_hi"], strict=True)],
        "p (Holm)": p["p_holm"].to_numpy(), "p (adjusted)": p["p_adjusted"].to_numpy(),
        "significant": p["significant"].to_numpy(),
    })


def _caption(models: pd.DataFrame, stratum: str) -> str:
    b = _board(models, stratum)
    r = b.iloc[0]
    what = _LABELS.get(str(r["estimand"]), str(r["estimand"]))
    scale = "; logit scale" if str(r.get("scale", "")) == "logit" else ""
    crit = (f", critical value {float(r['crit']):.2f}" if np.isfinite(float(r["crit"]))
            else "")
    return (f"{len(b)} models, {what}; {r['method']} clustered by {r['cluster'] or 'row'} "
            f"({int(r['n_clusters'])} clusters). Each model's {r['level']:.0%} interval is "
            f"its own (t{scale}: the same interval as in the headline). Rank ranges, tiers "
            f"and the pairs' simultaneous intervals come from {r['level']:.0%} simultaneous "
            f"comparisons of all pairs ({r['adjust']}{crit})"
            + (": two models share a tier letter when their difference is not significant."
               if _has_letters(b) else " (no tier letters on this board).")
            + _rank_caption(b))


def _rank_caption(b: pd.DataFrame) -> str:
    """What the rank columns mean, and the set for the best model."""
    r = b.iloc[0]
    how = (" stepped down (Mogstad et al. 2024)" if r["adjust"] == "max-t" else "")
    best = ("" if r["adjust"] == "none" else
            f" {r['level']:.0%} set for the best model: "
            + ", ".join(str(m) for m in b.loc[b["rank_lo"] <= 1, "model"]) + ".")
    return (f" The rank range covers all true ranks jointly{how}; the own rank range covers "
            "this model's rank alone. A tie group is a block of models that cannot be "
            "ordered against their neighbours: each is significantly better than every "
            f"model of a later group ({int(b['tie_group'].max())} groups)." + best)


def leaderboard_markdown(models: pd.DataFrame, pairs: pd.DataFrame | None = None, *,
                         stratum: str = "", max_pairs: int = 20) -> str:
    """Markdown: caption, the leaderboard table, and (optionally) the closest pairs."""
    out = [md_text(_caption(models, stratum)), "", _table_md(leaderboard_frame(models, stratum=stratum))]
    if pairs is not None:
        out += ["", f"Closest pairs (smallest |t|, first {max_pairs}):", "",
                _table_md(pairs_frame(pairs, stratum=stratum, max_rows=max_pairs))]
    return "\n".join(out)


def leaderboard_html(models: pd.DataFrame, pairs: pd.DataFrame | None = None, *,
                     stratum: str = "", max_pairs: int = 20) -> str:
    """HTML fragment: caption, the leaderboard table, and (optionally) the closest pairs."""
    out = [f"<p>{html_text(_caption(models, stratum))}</p>",
           _table_html(leaderboard_frame(models, stratum=stratum))]
    if pairs is not None:
        out += [f"<p>Closest pairs (smallest |t|, first {max_pairs}):</p>",
                _table_html(pairs_frame(pairs, stratum=stratum, max_rows=max_pairs))]
    return "\n".join(out)


@literal_text
def leaderboard_plot(models: pd.DataFrame, *, stratum: str = "") -> Figure:
    """Estimate with interval (left) and simultaneous rank range (right) per model.

    Rows are the models, best at the top; alternate rows are shaded so a row can be
    followed across both panels; the tier letters are printed at the right edge.
    """
    plt = _plt()
    b = _board(models, stratum)
    k = len(b)
    y = np.arange(k)[::-1]
    fig, (ax1, ax2) = plt.subplots(
        1, 2, sharey=True, figsize=(10, max(2.5, 0.8 + ROW_HEIGHT * k)),
        gridspec_kw={"width_ratios": [3, 2], "wspace": 0.04})
    font = 8 if k <= 40 else 6
    for ax in (ax1, ax2):
        for row in y[::2]:
            ax.axhspan(row - 0.5, row + 0.5, color="#f2f2f2", lw=0, zorder=0)
    est, lo, hi = (b[c].to_numpy(float) for c in ("estimate", "lo", "hi"))
    ax1.hlines(y, lo, hi, color="#1f4e9c", lw=1.4, zorder=2)
    ax1.plot(est, y, "o", color="#1f4e9c", ms=3, zorder=3)
    r = b.iloc[0]
    ax1.set_xlabel(f"{_LABELS.get(str(r['estimand']), r['estimand'])} "
                   f"({r['level']:.0%} interval per model, {r['method']})")
    if r["estimand"] == "win_rate":
        ax1.axvline(0.5, color="#8c8c8c", lw=0.8, ls="--")
    rlo, rhi, rank = (b[c].to_numpy(float) for c in ("rank_lo", "rank_hi", "rank"))
    ax2.hlines(y, rlo - 0.4, rhi + 0.4, color="#2e8b57", lw=3.2, alpha=0.55, zorder=2)
    ax2.hlines(y, b["rank_lo_marginal"].to_numpy(float) - 0.4,
               b["rank_hi_marginal"].to_numpy(float) + 0.4, color="#14532d", lw=0.9,
               zorder=3)
    ax2.plot(rank, y, "|", color="#14532d", ms=6, zorder=3)
    group = b["tie_group"].to_numpy()
    for row in y[1:][np.diff(group) != 0]:  # rule off the tie groups in both panels
        for ax in (ax1, ax2):
            ax.axhline(row + 0.5, color="#8c2d04", lw=0.9, zorder=1)
    ax2.set_xlim(0.3, k + 0.7)
    ax2.set_xlabel(f"rank range ({r['level']:.0%} joint, "
                   f"{'step-down' if r['adjust'] == 'max-t' else r['adjust']}; thin: own)")
    ax1.set_yticks(y, [f"{int(a)}. {m}" for a, m in zip(rank, b["model"], strict=True)],
                   fontsize=font)
    ax1.set_ylim(-0.6, k - 0.4)
    for row, tier in zip(y, b["tier"], strict=True):
        ax2.annotate(str(tier), (1.01, row), xycoords=("axes fraction", "data"),
                     fontsize=font, va="center", family="monospace")
    ax1.set_title(stratum or "leaderboard", loc="left", fontsize=10)
    if group.max() > 1:
        ax2.set_title("red lines: tie groups", loc="right", fontsize=8)
    return fig
