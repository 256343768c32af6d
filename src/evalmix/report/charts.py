"""The report's charts (matplotlib, Agg). Each function takes tidy frames and returns a Figure.

- :func:`forest` -- the signature picture: one contrast's intervals by method and
  cluster level, the null marked, rows coloured by their decision, the recommended row
  starred, and a fragile contrast flagged in red.
- :func:`headline_plot` -- every contrast's naive vs recommended interval.
- :func:`variance_plot` -- each factor's share of latent variance, with intervals, by
  back end.
- :func:`position_plot` -- per-judge first-shown win rate (with CI), flip rate and
  consistency.
- :func:`controlled_plot` -- AB/BA-controlled vs uncontrolled win rates.

Every text of these figures is literal (``evalmix._escape.literal_text``): a ``$`` in
a name is drawn as written, never parsed as TeX.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix._escape import literal_text, plot_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure



#: Forest plots drawn per report (fragile and most-widened contrasts first).
MAX_FOREST = 12


_EXCLUDES = "#1f4e9c"  # interval excludes the null


_INCLUDES = "#8c8c8c"  # interval contains the null


_FRAGILE = "#c0392b"


_MODEL = "#2e8b57"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _label(r: pd.Series) -> str:
    cl = r["cluster"]
    if r.get("source") == "model" or cl == "model":
        return f"{r['method']} (model)"
    return f"{r['method']} | {cl or 'none'}"


_METHOD_ORDER = {m: i for i, m in enumerate(
    ("naive", "wilson", "CR1", "CR2", "CR3", "bootstrap", "wild", "mixedlm", "glmm_vb",
     "bayes"))}


def _level_order(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows grouped by cluster level (none, one factor, multiway, model), then method."""
    cl = rows["cluster"].fillna("").astype(str)
    first_seen = {c: i for i, c in enumerate(dict.fromkeys(cl))}
    rank = [(0 if c == "" else 3 if c == "model" else 2 if "+" in c else 1, first_seen[c])
            for c in cl]
    out = rows.assign(_g=[a for a, _ in rank], _s=[b for _, b in rank],
                      _m=rows["method"].map(_METHOD_ORDER).fillna(99))
    return out.sort_values(["_g", "_s", "_m"], kind="stable").drop(
        columns=["_g", "_s", "_m"]).reset_index(drop=True)


@literal_text
def forest(rows: pd.DataFrame, *, title: str, recommended: tuple[str, str] | None = None,
           null: float | None = None) -> Figure:
    """Forest plot of one (estimand, contrast): every method x cluster level."""
    plt = _plt()
    lo_all, hi_all = rows["lo"].astype(float), rows["hi"].astype(float)
    r = _level_order(rows[~np.isnan(lo_all) & ~np.isnan(hi_all)])
    fin = np.concatenate([r["lo"].astype(float), r["hi"].astype(float),
                          r["estimate"].astype(float)])
    fin = fin[np.isfinite(fin)]
    if null is None and len(rows):
        null = float(rows["null"].iloc[0])
    if null is not None and np.isfinite(null):
        fin = np.append(fin, null)
    span = (fin.max() - fin.min()) if fin.size else 1.0
    xmin, xmax = (fin.min() - 0.05 * span, fin.max() + 0.05 * span) if fin.size else (0, 1)
    r = r.assign(unbounded=~np.isfinite(r["lo"].astype(float))
                 | ~np.isfinite(r["hi"].astype(float)))
    r["lo"] = r["lo"].astype(float).clip(lower=xmin)
    r["hi"] = r["hi"].astype(float).clip(upper=xmax)
    n = max(len(r), 1)
    fig, ax = plt.subplots(figsize=(7.2, 0.32 * n + 1.3))
    fragile = bool(rows["fragile"].fillna(False).any()) if "fragile" in rows else False
    ys = np.arange(len(r))[::-1]
    for y, (_, row) in zip(ys, r.iterrows(), strict=True):
        dec = row["decision"]
        model = row.get("source") == "model" or row["cluster"] == "model"
        color = _MODEL if model else (_EXCLUDES if dec is True else _INCLUDES)
        is_rec = recommended is not None and (row["method"], row["cluster"]) == recommended
        lw = 3.2 if is_rec else 1.8
        ax.plot([row["lo"], row["hi"]], [y, y], color=color, lw=lw, solid_capstyle="butt",
                ls=":" if row["unbounded"] else "-")
        ax.plot([row["estimate"]], [y], "o", color=color, ms=5 if not is_rec else 7)
        if row["method"] == "naive":
            ax.axhspan(y - 0.45, y + 0.45, color="#f2f2f2", zorder=0)
    labels = [("* " if recommended is not None
               and (row["method"], row["cluster"]) == recommended else "") + _label(row)
              + (" (unbounded)" if row["unbounded"] else "")
              + (" (zero width)" if row["hi"] == row["lo"] else "")
              for _, row in r.iterrows()]
    prev = None
    for y, (_, row) in zip(ys, r.iterrows(), strict=True):
        if prev is not None and row["cluster"] != prev:
            ax.axhline(y + 0.5, color="#cccccc", lw=0.8)
        prev = row["cluster"]
    ax.set_yticks(ys, labels, fontsize=8)
    if null is not None:
        ax.axvline(null, color="black", ls="--", lw=1)
    ax.set_ylim(-0.7, len(r) - 0.3)
    ax.set_xlim(xmin, xmax)
    # wrapped at the figure's edge, the flag on a line of its own: a long contrast name
    # ran off the image ("[FRAGILE: methods disagre")
    # a name with no space in it is cut at 60 characters (wrap only breaks at spaces)
    lines = textwrap.wrap(title, 60, break_long_words=True, break_on_hyphens=False)
    head = "\n".join(lines or [title]) + ("\n[FRAGILE: methods disagree]" if fragile else "")
    # wrapping measures a line as TeX when it holds two '$' whatever parse_math says:
    # the title keeps mathtext on with every '$' escaped, so it is literal either way
    ax.set_title(plot_text(head), fontsize=10, color=_FRAGILE if fragile else "black",
                 loc="left", wrap=True, parse_math=True)
    ax.set_xlabel("dashed: null   * recommended   blue: excludes the null   grey: "
                  "contains it   green: model-based", fontsize=7.5)
    if fragile:
        for side in ax.spines.values():
            side.set_edgecolor(_FRAGILE)
            side.set_linewidth(1.5)
    ax.grid(axis="x", alpha=0.3)
    fig.set_layout_engine("tight")   # laid out once, while saving
    return fig


@literal_text
def headline_plot(head: pd.DataFrame, *, null_of: dict[str, float],
                  reference: str | None = None) -> Figure:
    """Naive (thin, grey) vs recommended (thick) interval for every headline contrast."""
    plt = _plt()
    # leaderboard order: estimand blocks, then by estimate
    head = head.assign(_o=head["estimand"].map({"win_rate": 0, "mean": 0}).fillna(1))
    head = head.sort_values(["_o", "estimand", "estimate"], ascending=[True, True, False],
                            kind="stable")
    n = max(len(head), 1)
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * n + 1.4))
    ys = np.arange(len(head))[::-1]
    for y, (_, h) in zip(ys, head.iterrows(), strict=True):
        color = _FRAGILE if h["fragile"] else _EXCLUDES
        ax.plot([h["naive_lo"], h["naive_hi"]], [y + 0.17, y + 0.17], color=_INCLUDES, lw=2)
        ax.plot([h["lo"], h["hi"]], [y - 0.12, y - 0.12], color=color, lw=3.2)
        ax.plot([h["estimate"]], [y - 0.12], "o", color=color, ms=4)
    suffix = f" vs {reference}" if reference else None
    labels = [f"{h['contrast']} ({h['estimand']})" if h["estimand"] == "difference"
              else (str(h["contrast"])[: -len(suffix)] if suffix
                    and str(h["contrast"]).endswith(suffix) else str(h["contrast"]))
              for _, h in head.iterrows()]
    ax.set_yticks(ys, labels, fontsize=7.5)
    nulls = sorted({null_of.get(e, np.nan) for e in head["estimand"]})
    for v in nulls:
        if np.isfinite(v):
            ax.axvline(v, color="black", ls="--", lw=1)
    ax.set_title("Naive (grey) vs recommended (blue; red = fragile) intervals"
                 + (f"\nwin rate of each model against {reference}" if reference else ""),
                 fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.set_layout_engine("tight")   # laid out once, while saving
    return fig


@literal_text
def variance_plot(variance: pd.DataFrame) -> Figure:
    """Share of latent variance per factor with intervals, one bar group per back end."""
    plt = _plt()
    v = variance.copy()
    factors = list(dict.fromkeys(v["factor"].astype(str)))
    backends = list(dict.fromkeys(v["backend"].astype(str)))
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(10.5, 0.45 * len(factors) * max(len(backends), 1) + 1.6),
        sharey=True, gridspec_kw={"width_ratios": [1.2, 1]})
    h = 0.8 / max(len(backends), 1)
    colors = ["#1f4e9c", "#e08e0b", "#2e8b57", "#7b3294"]
    for k, b in enumerate(backends):
        part = v[v["backend"].astype(str) == b].set_index("factor")
        y = np.arange(len(factors))[::-1] + (k - (len(backends) - 1) / 2) * h
        share = np.array([float(part["share"].get(f, np.nan)) for f in factors])
        lo = np.array([float(part["share_lo"].get(f, np.nan)) for f in factors])
        hi = np.array([float(part["share_hi"].get(f, np.nan)) for f in factors])
        ax.barh(y, share, height=h * 0.9, color=colors[k % len(colors)], alpha=0.8,
                label=b)
        ok = np.isfinite(lo) & np.isfinite(hi)
        err = np.vstack([np.clip(share - lo, 0, None), np.clip(hi - share, 0, None)])
        ax.errorbar(share[ok], y[ok], xerr=err[:, ok], fmt="none", ecolor="black",
                    capsize=3, lw=1)
        sd = np.array([float(part["sd"].get(f, np.nan)) for f in factors])
        slo = np.array([float(part["sd_lo"].get(f, np.nan)) for f in factors])
        shi = np.array([float(part["sd_hi"].get(f, np.nan)) for f in factors])
        okk = np.isfinite(sd)
        ax2.plot(sd[okk], y[okk], "o", color=colors[k % len(colors)], label=b)
        both = okk & np.isfinite(slo) & np.isfinite(shi)
        for yy, a, bb in zip(y[both], slo[both], shi[both], strict=True):
            ax2.plot([a, bb], [yy, yy], color=colors[k % len(colors)], lw=2)
    ax.set_yticks(np.arange(len(factors))[::-1], factors)
    ax.set_xlabel("share of latent variance (interval from the SD interval, other "
                  "components at their estimates)", fontsize=8)
    ax.set_xlim(0, 1)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Variance decomposition", fontsize=10, loc="left")
    ax2.set_xlabel("SD on the latent scale, with interval", fontsize=8)
    ax2.set_xlim(left=0)
    ax2.grid(axis="x", alpha=0.3)
    fig.set_layout_engine("tight")   # laid out once, while saving
    return fig


@literal_text
def position_plot(position: pd.DataFrame) -> Figure:
    """Per-judge first-shown win rate (CI, 0.5 = no bias), flip rate and consistency."""
    plt = _plt()
    p = position.reset_index(drop=True)
    n = max(len(p), 1)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 0.45 * n + 1.6), sharey=True,
                                 gridspec_kw={"width_ratios": [1.3, 1]})
    ys = np.arange(len(p))[::-1]
    for y, (_, r) in zip(ys, p.iterrows(), strict=True):
        biased = np.isfinite(r["first_shown_lo"]) and (
            r["first_shown_lo"] > 0.5 or r["first_shown_hi"] < 0.5)
        c = _FRAGILE if biased else _INCLUDES
        a1.plot([r["first_shown_lo"], r["first_shown_hi"]], [y, y], color=c, lw=3)
        a1.plot([r["first_shown_win_rate"]], [y], "o", color=c)
    a1.axvline(0.5, color="black", ls="--", lw=1)
    a1.set_yticks(ys, p["judge"].astype(str))
    a1.set_xlabel("first-shown win rate among decisive verdicts\n(red: interval excludes "
                  "0.5 = position bias)", fontsize=8)
    a1.set_title("Position bias by judge", fontsize=10, loc="left")
    h = 0.38
    a2.barh(ys + h / 2, p["flip_rate"], height=h, color=_FRAGILE, alpha=0.8,
            label="flip rate (winner reverses)")
    a2.barh(ys - h / 2, p["consistency"], height=h, color=_EXCLUDES, alpha=0.8,
            label="consistency (same verdict)")
    a2.set_xlim(0, 1)
    a2.set_xlabel("share of complete AB/BA pairs", fontsize=8)
    # above the bars: below them it met the x label when there are few judges
    a2.legend(fontsize=7.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
              frameon=False)
    fig.set_layout_engine("tight")   # laid out once, while saving
    return fig


def _controlled_rows(intervals: pd.DataFrame, method: str, cluster: str) -> pd.DataFrame:
    """The rows :func:`controlled_plot` draws; empty when there is nothing to compare."""
    f = intervals[(intervals["method"] == method) & (intervals["cluster"] == cluster)
                  & intervals["estimand"].isin(["win_rate", "controlled_win_rate"])]
    f = f[np.isfinite(f["estimate"].astype(float))]
    return f if f["estimand"].nunique() == 2 else f.iloc[:0]


@literal_text
def controlled_plot(intervals: pd.DataFrame, *, method: str, cluster: str) -> Figure | None:
    """Uncontrolled vs AB/BA-controlled win rate per contrast (recommended method)."""
    f = _controlled_rows(intervals, method, cluster)
    if f.empty:
        return None
    plt = _plt()
    contrasts = list(dict.fromkeys(f["contrast"]))
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(contrasts) + 1.5))
    ys = np.arange(len(contrasts))[::-1]
    for est, off, color in (("win_rate", 0.14, _INCLUDES),
                            ("controlled_win_rate", -0.14, _EXCLUDES)):
        part = f[f["estimand"] == est].set_index("contrast")
        for y, c in zip(ys, contrasts, strict=True):
            if c not in part.index:
                continue
            r = part.loc[c]
            ax.plot([r["lo"], r["hi"]], [y + off, y + off], color=color, lw=2.5)
            ax.plot([r["estimate"]], [y + off], "o", color=color, ms=4)
    ax.plot([], [], color=_INCLUDES, lw=2.5, label="win rate (as judged)")
    ax.plot([], [], color=_EXCLUDES, lw=2.5, label="AB/BA-controlled win rate")
    ax.axvline(0.5, color="black", ls="--", lw=1)
    ax.set_yticks(ys, contrasts, fontsize=7.5)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(f"Controlled vs uncontrolled win rates ({method}, cluster: "
                 f"{cluster or 'none'})", fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.set_layout_engine("tight")   # laid out once, while saving
    return fig
