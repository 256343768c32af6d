"""Plots for planning: power curves by number of clusters, coverage by design, D studies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmix._escape import plot_text

__all__ = ["plot_power_curves", "plot_coverage", "plot_dstudy"]


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_power_curves(frame: pd.DataFrame, path: str | Path, *, x: str = "n_clusters",
                      line: str = "line", target: float | None = 0.8,
                      title: str = "Power by number of clusters") -> Path:
    """One line per value of ``line`` (e.g. each factor added), power against ``x``.

    Lines with a ``power_mcse`` column get a +-2 Monte Carlo SE band.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    for label, part in frame.groupby(line, sort=False):
        part = part.sort_values(x)
        ax.plot(part[x], part["power"], marker="o", ms=3, lw=2, label=str(label))
        if "power_mcse" in part:
            band = 2 * part["power_mcse"].to_numpy()
            ax.fill_between(part[x], part["power"] - band, part["power"] + band, alpha=0.2)
    if target is not None:
        ax.axhline(target, color="grey", ls="--", lw=1)
        ax.text(ax.get_xlim()[0], target, f" target {target:.0%}", va="bottom", color="grey")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel({"n_clusters": "number of clusters (K)",
                   "n_levels": "number of levels of the varied factor"}.get(x, x))
    ax.set_ylabel("power")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=9, loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_coverage(table: pd.DataFrame, path: str | Path) -> Path:
    """Coverage against clusters, one panel per ICC, one line per method, 95% band.

    Cells without a finite coverage (every replication failed) are left out; the x axis
    is logarithmic when a panel spans more than one positive number of clusters.
    """
    plt = _plt()
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    finite = np.isfinite(table["coverage"].to_numpy(dtype=float))
    iccs = sorted(table["icc"].unique())
    fig, axes = plt.subplots(1, max(len(iccs), 1), figsize=(4.2 * max(len(iccs), 1) + 1, 4.2),
                             dpi=120, sharey=True, squeeze=False)
    level = float(table["level"].iloc[0]) if len(table) else 0.95
    for ax, icc in zip(axes[0], iccs, strict=True):
        part = table[(table["icc"] == icc) & finite]
        for method, rows in part.groupby("method", sort=False):
            rows = rows.groupby("n_clusters", as_index=False)[["coverage", "mcse"]].mean()
            ax.errorbar(rows["n_clusters"], rows["coverage"], yerr=2 * rows["mcse"].fillna(0),
                        marker="o", ms=3, capsize=2, lw=1.5, label=method)
        ax.axhline(level, color="black", lw=1)
        ax.axhspan(level - 0.01, level + 0.01, color="grey", alpha=0.15)
        ks = sorted(k for k in part["n_clusters"].unique() if k > 0)
        if len(ks) > 1:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        if ks:
            ax.set_xticks(ks)
        if part.empty:
            ax.text(0.5, 0.5, "no finite coverage\n(every replication failed)",
                    transform=ax.transAxes, ha="center", va="center", color="grey")
        ax.set_xlabel("number of clusters (K)")
        ax.set_title(f"ICC = {icc:g}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"coverage of nominal {level:.0%} intervals")
    low = float(table["coverage"][finite].min()) if finite.any() else level
    axes[0][0].set_ylim(max(0.0, min(low - 0.02, level - 0.05)), 1.0)
    if finite.any():
        axes[0][-1].legend(frameon=False, fontsize=9, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_dstudy(result: Any, path: str | Path | None = None) -> Any:
    """Coefficients and SEs of a D study against each facet's size (one column per facet).

    Top row: E rho^2 and Phi; bottom row: the SE of a score and of a difference of two
    objects; bands are the intervals of :class:`evalmix.plan.dstudy.DStudyResult`'s
    table, a dotted line marks the observed size. Uses the ``"vary <facet>"`` rows
    (with a grid of your own ``n``, the grid's first facet).
    """
    plt = _plt()
    table = result.table
    g = result.gstudy
    facets = [f for f in g.design.random_facets
              if (table["design"] == f"vary {f}").any()]
    rows_of = {f: table[table["design"] == f"vary {f}"] for f in facets}
    if not facets:
        grid = table[table["design"] == "grid"]
        varied = [f for f in g.design.random_facets if grid[f"n_{f}"].nunique() > 1]
        if varied:
            facets = varied[:1]
            rows_of = {facets[0]: grid.drop_duplicates(f"n_{facets[0]}")}
    ncol = max(len(facets), 1)
    fig, axes = plt.subplots(2, ncol, figsize=(3.6 * ncol + 1.0, 6.4), dpi=120,
                             squeeze=False, sharey="row")
    level = f"{g.level:.0%}"
    for j, f in enumerate(facets):
        part = rows_of[f].sort_values(f"n_{f}")
        x = part[f"n_{f}"].to_numpy(dtype=float)
        for row, pairs in enumerate(((("erho2", "E rho^2 (relative)"),
                                      ("phi", "Phi (absolute)")),
                                     (("se_score", "SE of a score"),
                                      ("se_diff", "SE of a difference")))):
            ax = axes[row][j]
            for q, label in pairs:
                ax.plot(x, part[q], marker="o", ms=3, lw=2, label=label)
                lo, hi = part[q + "_lo"].to_numpy(float), part[q + "_hi"].to_numpy(float)
                if np.isfinite(lo).any():
                    ax.fill_between(x, lo, hi, alpha=0.15)
            ax.axvline(g.n_observed[f], color="grey", ls=":", lw=1)
            ax.grid(alpha=0.3)
            if len(x) > 1 and x.max() / max(x.min(), 1e-9) > 8:
                from matplotlib.ticker import NullFormatter, ScalarFormatter

                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(ScalarFormatter())
                ax.xaxis.set_minor_formatter(NullFormatter())
            if row == 1:
                ax.set_xlabel(plot_text(f"levels of {f} (n')"))
        axes[0][j].set_title(plot_text(f"vary {f}"))
    axes[0][0].set_ylabel(f"coefficient ({level} band)")
    axes[0][0].set_ylim(0, 1.02)
    axes[1][0].set_ylabel(plot_text(f"SE, scale {g.scale} ({level} band)"))
    for row in (0, 1):
        axes[row][-1].legend(frameon=False, fontsize=8, loc="best")
    fig.suptitle(plot_text(f"D study of {g.design.object} ({g.method})"))
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path))
    plt.close(fig)
    return fig
