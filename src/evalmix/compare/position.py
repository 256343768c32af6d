"""Per-judge position bias from matched AB/BA pairs or single-order judgments.

Three numbers per judge (and overall), all computed from the canonical pairwise frame.
The first-shown win rate needs only which answer was shown first, so it is also
estimated on a single-order table (each comparison judged once, in a randomised order:
Chatbot Arena, AlpacaEval-style logs); the flip rate and consistency need matched pairs
and are NaN there (``n_pairs`` 0).

``first_shown_win_rate``
    Among decisive verdicts (ties left out), the share won by the answer shown first.
    0.5 means no position preference.
``flip_rate``
    Among complete AB/BA pairs, the share whose two verdicts name *different* winners
    (a decisive verdict that reverses when the order is swapped).
``consistency``
    Among complete AB/BA pairs, the share whose two verdicts agree (same winner, or a tie
    both times) -- the "position consistency" of Shi et al. (2024).

The first-shown win rate gets a cluster-robust (CR1) interval over the comparison's
cluster (``cluster`` role, by default each matched pair, or each record of a
single-order table), so a judge's bias is judged against item-to-item variation, not
against row counts.

:func:`position_classes` sorts the matched AB/BA cells (the two verdicts of one
comparison -- same item, judge and models -- in both orders) into four classes, with
cluster bootstrap intervals (see its docstring): stable condition wins, stable slot
(position) wins, stable ties and flips; the first-shown win rate and the AB/BA-controlled
win rate are sums over these classes.

References
----------
Shi, L. et al. (2024). Judging the Judges: A Systematic Study of Position Bias in
LLM-as-a-Judge. arXiv:2406.07791. https://doi.org/10.48550/arXiv.2406.07791
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.compare.position_classes import CLASS_COLUMNS as CLASS_COLUMNS
from evalmix.compare.position_classes import CLASS_QUANTITIES as CLASS_QUANTITIES
from evalmix.compare.position_classes import classes_wide, position_classes
from evalmix.inference.sandwich import cluster_codes, cr1_factor
from evalmix.inference.scale import bounded_interval

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["mean_cr1", "pair_agreement", "position_bias", "position_classes",
           "classes_wide", "CLASS_QUANTITIES", "CLASS_COLUMNS"]

POSITION_COLUMNS = (
    "judge", "n_decisive", "first_shown_win_rate", "first_shown_lo", "first_shown_hi",
    "first_shown_cluster", "n_clusters", "n_pairs", "flip_rate", "consistency",
    "tie_rate",
)


def mean_cr1(y: np.ndarray, clusters: np.ndarray, *, level: float = 0.95
             ) -> tuple[float, float, float, float, int]:
    """Mean of ``y`` with a CR1 standard error and a t(G-1) interval.

    For an intercept-only model the CR1 variance is
    ``G/(G-1) * sum_g (sum_{i in g} (y_i - ybar))^2 / n^2`` (Stata's small-sample factor
    ``G/(G-1) * (N-1)/(N-k)`` with k = 1).

    Returns
    -------
    (estimate, se, lo, hi, n_clusters)
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    if n == 0:
        return (np.nan, np.nan, np.nan, np.nan, 0)
    codes, g = cluster_codes(np.asarray(clusters))
    m = float(y.mean())
    if g < 2 or n < 2:
        return (m, np.nan, np.nan, np.nan, g)
    sums = np.bincount(codes, weights=y - m, minlength=g)
    var = cr1_factor(g, n, 1) * float(np.sum(sums**2)) / n**2
    se = float(np.sqrt(var))
    t = float(stats.t.ppf(0.5 + level / 2, g - 1))
    return (m, se, m - t * se, m + t * se, g)


def pair_agreement(frame: pd.DataFrame) -> dict[str, float]:
    """Flip rate, consistency and tie rate over complete AB/BA pairs of ``frame``.

    ``frame`` holds canonical pairwise rows (``pair_id``, ``verdict``, ``a_first``).
    """
    sub = frame[frame["pair_id"] >= 0]
    if sub.empty:
        return {"n_pairs": 0, "flip_rate": np.nan, "consistency": np.nan}
    wide = sub.groupby("pair_id")["verdict"].agg(["first", "last", "size"])
    wide = wide[wide["size"] == 2]
    n = len(wide)
    if n == 0:
        return {"n_pairs": 0, "flip_rate": np.nan, "consistency": np.nan}
    v1, v2 = wide["first"].to_numpy(), wide["last"].to_numpy()
    decisive = np.isin(v1, ["a", "b"]) & np.isin(v2, ["a", "b"])
    flips = decisive & (v1 != v2)
    return {"n_pairs": int(n), "flip_rate": float(flips.mean()),
            "consistency": float((v1 == v2).mean())}


def _one(frame: pd.DataFrame, name: str, cluster: str | None, level: float) -> dict:
    known = frame["a_first"].notna().to_numpy()
    dec = frame[known & frame["verdict"].isin(["a", "b"]).to_numpy()]
    first_won = ((dec["verdict"] == "a") == (dec["a_first"] == 1.0)).to_numpy(dtype=float)
    if cluster is not None and cluster in dec.columns:
        cl = dec[cluster].to_numpy()
        cl_name = cluster
    else:
        cl = dec["pair_id"].to_numpy() if "pair_id" in dec.columns else np.arange(len(dec))
        cl_name = "pair"
    est, se, lo, hi, g = mean_cr1(first_won, cl, level=level)
    if g >= 2:
        # a proportion: the interval is set on the logit scale (inference/scale.py) so it
        # stays inside (0, 1); not estimable (NaN) when every verdict went one way
        lo, hi, _p = bounded_interval(est, se, g - 1, level, 0.5)
    agree = pair_agreement(frame)
    return {
        "judge": name,
        "n_decisive": int(len(dec)),
        "first_shown_win_rate": est,
        "first_shown_lo": lo,
        "first_shown_hi": hi,
        "first_shown_cluster": cl_name,
        "n_clusters": g,
        "n_pairs": agree["n_pairs"],
        "flip_rate": agree["flip_rate"],
        "consistency": agree["consistency"],
        "tie_rate": float((frame["verdict"] == "tie").mean()),
    }


def position_bias(table: EvalTable, *, judge: str | None, cluster: str | None = None,
                  level: float = 0.95) -> pd.DataFrame:
    """Per-judge position bias (one row per judge plus an ``(all judges)`` row).

    Parameters
    ----------
    table : EvalTable
        A pairwise table with a first-shown column.
    judge : str or None
        Cluster role holding the judge; ``None`` gives the overall row only.
    cluster : str, optional
        Cluster role for the first-shown win rate's CR1 interval (e.g. ``"item"``);
        by default each matched AB/BA pair is its own cluster.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`POSITION_COLUMNS`; empty when the table has no order column.
    """
    if table.kind != "pairwise" or not table.has_order:
        return pd.DataFrame(columns=list(POSITION_COLUMNS))
    d = table.data
    rows = []
    if judge is not None:
        for name, part in d.groupby(judge, sort=True):
            rows.append(_one(part, str(name), cluster, level))
    rows.append(_one(d, "(all judges)", cluster, level))
    return pd.DataFrame(rows, columns=list(POSITION_COLUMNS))
