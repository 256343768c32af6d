"""Plots for planning: power curves by number of clusters, coverage by design."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["plot_power_curves", "plot_coverage"]


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
