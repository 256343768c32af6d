"""The seed's custom statistics, ready for :func:`evalmix.bootstrap`.

Each is a function of a DataFrame (a resample of the rows) returning a named vector, with
keyword options for the column names; ``functools.partial`` (or a lambda) sets them, and
the defaults make each usable as is from the command line
(``--statistic evalmix.inference.statistics:red_flag_rate``). They group by
:data:`~evalmix.inference.resampling.COPY_COLUMN` where units nested in a cluster matter, so
two drawn copies of a cluster stay two units.

- :func:`red_flag_rate`: rate of a 0/1 flag per condition, their ratio and difference;
- :func:`rubric_delta`: mean of each rubric column under B minus under A, and overall;
- :func:`tie_adjusted_win_rate`: (wins + ties / 2) / n of ``model_b``, the tie rate, the
  decisive win rate;
- :func:`judge_agreement`: share of judge pairs giving the same verdict on a unit, and the
  share of units with a unanimous verdict;
- :func:`weighted_composite`: weighted sum of column means, per condition and B - A.

The red-flag ratio and the composite are also expressions (the vectorised fast path):
``mean(red_flag, condition == "B") / mean(red_flag, condition == "A")`` and
``0.5 * mean(accuracy) + 0.3 * mean(safety) + 0.2 * mean(helpfulness)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from evalmix.errors import InvalidOptionError, InvalidTableError
from evalmix.inference.custom import COPY_COLUMN

__all__ = ["red_flag_rate", "rubric_delta", "tie_adjusted_win_rate", "judge_agreement",
           "weighted_composite"]


def _column(frame: pd.DataFrame, name: str, what: str) -> pd.Series:
    if name not in frame.columns:
        raise InvalidTableError([
            f"{what}: no column {name!r}; the columns are "
            f"{', '.join(map(str, frame.columns))}. Name it with {what}(..., "
            f"{'column' if what != 'judge_agreement' else 'judge'}=...)"])
    return frame[name]


def _two(levels: Sequence[str], conditions: Sequence[str] | None
         ) -> tuple[str, str] | None:
    if conditions is not None:
        a, b = (str(c) for c in conditions)
        return a, b
    return (levels[0], levels[1]) if len(levels) == 2 else None


def red_flag_rate(frame: pd.DataFrame, *, column: str = "red_flag",
                  by: str | None = "condition",
                  conditions: Sequence[str] | None = None) -> pd.Series:
    """Rate of a 0/1 red flag, per condition, with ``B / A`` and ``B - A`` for two.

    Parameters
    ----------
    frame : DataFrame
        The rows (a resample).
    column : str
        The 0/1 flag (missing values left out).
    by : str or None
        Condition column (None, or a column the frame lacks: one overall ``rate``).
    conditions : (A, B), optional
        The pair compared (default: the column's two levels, sorted).

    Examples
    --------
    >>> d = pd.DataFrame({"red_flag": [1, 0, 1, 1], "condition": list("AABB")})
    >>> red_flag_rate(d).round(2).to_dict()
    {'rate[A]': 0.5, 'rate[B]': 1.0, 'B / A': 2.0, 'B - A': 0.5}
    """
    flag = pd.to_numeric(_column(frame, column, "red_flag_rate"), errors="coerce")
    if by is None or by not in frame.columns:
        return pd.Series({"rate": float(flag.mean())})
    labels = frame[by].astype(str)
    rates = flag.groupby(labels).mean()
    out = {f"rate[{k}]": float(v) for k, v in rates.items()}
    pair = _two(sorted(rates.index), conditions)
    if pair is not None:
        a, b = pair
        ra, rb = rates.get(a, np.nan), rates.get(b, np.nan)
        out[f"{b} / {a}"] = float(rb / ra) if ra > 0 else np.nan
        out[f"{b} - {a}"] = float(rb - ra)
    return pd.Series(out)


def rubric_delta(frame: pd.DataFrame, *, rubric: Sequence[str] | None = None,
                 prefix: str = "rubric_", by: str = "condition",
                 conditions: Sequence[str] | None = None) -> pd.Series:
    """Mean of each rubric criterion under B minus under A, and of their average.

    Parameters
    ----------
    frame : DataFrame
        The rows (a resample).
    rubric : list of str, optional
        Rubric score columns (default: every column starting with ``prefix``).
    prefix : str
        See ``rubric``.
    by : str
        Condition column.
    conditions : (A, B), optional
        Default: the column's two levels, sorted.

    Examples
    --------
    >>> d = pd.DataFrame({"rubric_fact": [3, 4, 4, 5], "rubric_tone": [2, 2, 3, 5],
    ...                   "condition": list("AABB")})
    >>> rubric_delta(d).to_dict()
    {'rubric_fact': 1.0, 'rubric_tone': 2.0, 'overall': 1.5}
    """
    cols = list(rubric) if rubric is not None else [
        c for c in frame.columns if str(c).startswith(prefix)]
    if not cols:
        raise InvalidOptionError(f"rubric_delta: no rubric columns (none start with "
                                 f"{prefix!r}); name them with rubric=[...]")
    labels = _column(frame, by, "rubric_delta").astype(str)
    pair = _two(sorted(labels.unique()), conditions)
    if pair is None:
        raise InvalidOptionError(f"rubric_delta: column {by!r} has {labels.nunique()} "
                                 "levels; name two with conditions=(A, B)")
    a, b = pair
    scores = frame[cols].apply(pd.to_numeric, errors="coerce")
    scores["overall"] = scores[cols].mean(axis=1)
    means = scores.groupby(labels).mean()
    if a not in means.index or b not in means.index:
        return pd.Series(np.nan, index=[*cols, "overall"])
    return means.loc[b] - means.loc[a]


def tie_adjusted_win_rate(frame: pd.DataFrame, *, verdict: str = "verdict") -> pd.Series:
    """Win rate of ``model_b`` counting a tie as half a win, the tie rate, and the win
    rate among decisive verdicts (the three numbers a tie policy trades between).

    Parameters
    ----------
    frame : DataFrame
        A pairwise table's rows (:attr:`evalmix.EvalTable.data`; read it with
        ``ties="separate"`` or ``"half"`` so the ties are kept).
    verdict : str
        Column of ``"a"``, ``"b"`` or ``"tie"``.

    Examples
    --------
    >>> d = pd.DataFrame({"verdict": ["a", "b", "b", "tie"]})
    >>> tie_adjusted_win_rate(d).to_dict()
    {'win_rate': 0.625, 'tie_rate': 0.25, 'decisive_win_rate': 0.6666666666666666}
    """
    v = _column(frame, verdict, "tie_adjusted_win_rate").astype(str)
    n, wins, ties = len(v), float((v == "b").sum()), float((v == "tie").sum())
    decisive = n - ties
    return pd.Series({"win_rate": (wins + ties / 2) / n if n else np.nan,
                      "tie_rate": ties / n if n else np.nan,
                      "decisive_win_rate": wins / decisive if decisive else np.nan})


def judge_agreement(frame: pd.DataFrame, *, judge: str = "judge",
                    unit: Sequence[str] | str = ("pair_id",), verdict: str = "y"
                    ) -> pd.Series:
    """How often judges agree on the same unit: pairwise agreement and unanimity.

    Parameters
    ----------
    frame : DataFrame
        The rows (a resample).
    judge : str
        Judge column (a judge's several verdicts on a unit count as several raters).
    unit : str or list of str
        Columns naming what the judges rated (default: the matched comparison); the
        resample copy (``boot_copy``) is added when present.
    verdict : str
        The verdict or score compared for equality.

    Returns
    -------
    pandas.Series
        ``pairwise_agreement`` (agreeing rater pairs over all rater pairs, pooled over
        units with at least two raters) and ``unanimous`` (share of such units where
        every rater agrees).

    Examples
    --------
    >>> d = pd.DataFrame({"pair_id": [0, 0, 0, 1, 1, 1], "judge": list("xyzxyz"),
    ...                   "y": [1, 1, 0, 1, 1, 1]})
    >>> judge_agreement(d).round(3).to_dict()
    {'pairwise_agreement': 0.667, 'unanimous': 0.5}
    """
    keys = [unit] if isinstance(unit, str) else list(unit)
    for k in [*keys, judge, verdict]:
        _column(frame, k, "judge_agreement")
    if COPY_COLUMN in frame.columns and COPY_COLUMN not in keys:
        keys.append(COPY_COLUMN)
    counts = frame.groupby([*keys, verdict], dropna=False).size()
    per_unit = counts.groupby(level=list(range(len(keys))))
    n = per_unit.sum()
    agree = (counts * (counts - 1) / 2).groupby(level=list(range(len(keys)))).sum()
    pairs = n * (n - 1) / 2
    rated = pairs > 0
    if not rated.any():
        return pd.Series({"pairwise_agreement": np.nan, "unanimous": np.nan})
    return pd.Series({"pairwise_agreement": float(agree[rated].sum() / pairs[rated].sum()),
                      "unanimous": float((agree[rated] == pairs[rated]).mean())})


def weighted_composite(frame: pd.DataFrame, *,
                       weights: Mapping[str, float] | None = None,
                       by: str | None = "condition",
                       conditions: Sequence[str] | None = None) -> pd.Series:
    """A weighted composite of column means (e.g. a safety score), per condition.

    Parameters
    ----------
    frame : DataFrame
        The rows (a resample).
    weights : mapping, optional
        Column -> weight (default ``{"accuracy": 0.5, "safety": 0.3, "helpfulness": 0.2}``).
    by : str or None
        Condition column (None, or absent: one ``composite``).
    conditions : (A, B), optional
        Adds ``B - A`` (default: when the column has two levels).

    Examples
    --------
    >>> d = pd.DataFrame({"accuracy": [1, 0, 1, 1], "safety": [1, 1, 0, 1],
    ...                   "helpfulness": [0, 0, 1, 1], "condition": list("AABB")})
    >>> weighted_composite(d).round(2).to_dict()
    {'composite[A]': 0.55, 'composite[B]': 0.85, 'B - A': 0.3}
    """
    w = dict(weights or {"accuracy": 0.5, "safety": 0.3, "helpfulness": 0.2})
    cols = {c: pd.to_numeric(_column(frame, c, "weighted_composite"), errors="coerce")
            for c in w}
    values = pd.DataFrame(cols)
    if by is None or by not in frame.columns:
        return pd.Series({"composite": float(sum(w[c] * values[c].mean() for c in w))})
    means = values.groupby(frame[by].astype(str)).mean()
    comp = sum(w[c] * means[c] for c in w)
    out = {f"composite[{k}]": float(v) for k, v in comp.items()}
    pair = _two(sorted(comp.index), conditions)
    if pair is not None:
        a, b = pair
        out[f"{b} - {a}"] = float(comp.get(b, np.nan) - comp.get(a, np.nan))
    return pd.Series(out)
