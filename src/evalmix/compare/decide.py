"""Decisions, fragility and the headline table: pure functions over tidy interval frames."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["INTERVAL_COLUMNS", "add_decisions", "headline", "orient"]

#: Columns of ``Report.intervals`` (the first 14 are the file contract of intervals.csv).
INTERVAL_COLUMNS: tuple[str, ...] = (
    "estimand", "contrast", "method", "cluster", "estimate", "se", "lo", "hi", "level",
    "df", "n_clusters", "n_obs", "decision", "fragile",
    "null", "p_value", "reps", "seed", "ci_type", "paired", "source", "note",
)


def orient(row: dict, *, flip: bool, estimand: str) -> dict:
    """Re-express a row scored for ``model_a`` as one for ``model_b``.

    Win rates become ``1 - x``, differences ``-x``; bounds swap; SE and df are unchanged.
    """
    if not flip:
        return row
    out = dict(row)
    if estimand in ("difference", "coef"):
        f = (lambda v: -v)  # noqa: E731
    else:
        f = (lambda v: 1.0 - v)  # noqa: E731
    out["estimate"] = f(row["estimate"])
    lo, hi = row["lo"], row["hi"]
    out["lo"], out["hi"] = f(hi), f(lo)
    return out


def add_decisions(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``decision`` (interval excludes ``null``) and ``fragile`` columns.

    ``decision`` is True/False, or missing when the row has no interval. ``fragile`` is
    True for every row of an (estimand, contrast) whose rows -- across methods and
    cluster levels -- do not all reach the same decision (unbounded intervals, which
    carry no evidence, do not vote).
    """
    out = frame.copy()
    lo = pd.to_numeric(out["lo"], errors="coerce").to_numpy(dtype=float)
    hi = pd.to_numeric(out["hi"], errors="coerce").to_numpy(dtype=float)
    null = pd.to_numeric(out["null"], errors="coerce").to_numpy(dtype=float)
    # infinite bounds are real answers (e.g. a wild bootstrap with 3 clusters cannot
    # reject anything: (-inf, inf) contains the null); zero-width intervals are not
    known = ~np.isnan(lo) & ~np.isnan(hi) & np.isfinite(null) & (hi > lo)
    excl = (lo > null) | (hi < null)
    out["decision"] = pd.array(np.where(known, excl, False), dtype="boolean")
    out.loc[~known, "decision"] = pd.NA
    if out.empty:
        out["fragile"] = pd.array([], dtype="boolean")
        return out
    # an unbounded interval (e.g. a wild bootstrap on 3 clusters) carries no evidence
    # either way: it gets a decision (it contains the null) but does not make a
    # contrast fragile
    bounded = pd.Series(np.isfinite(lo) & np.isfinite(hi), index=out.index)
    votes = out["decision"].where(bounded)
    n_dec = votes.groupby([out["estimand"], out["contrast"]], sort=False).transform(
        lambda s: s.dropna().nunique())
    out["fragile"] = (n_dec > 1).astype(bool)
    return out


def _disagreeing(rows: pd.DataFrame, decision: object) -> str:
    """Rows whose decision differs from ``decision`` (method | cluster), for the reader."""
    if decision is None or decision is pd.NA:
        return ""
    d = rows[rows["decision"].notna() & np.isfinite(rows["lo"].astype(float))
             & np.isfinite(rows["hi"].astype(float))]
    off = d[d["decision"].astype(bool) != bool(decision)]
    if off.empty:
        return ""
    labels = [f"{m} | {c or 'none'}" for m, c in zip(off["method"], off["cluster"],
                                                     strict=True)]
    head = ", ".join(labels[:5])
    more = f" and {len(labels) - 5} more" if len(labels) > 5 else ""
    return f"{len(labels)} of {len(d)} rows disagree: {head}{more}"


def _pick(rows: pd.DataFrame, method: str, cluster: str) -> pd.Series | None:
    hit = rows[(rows["method"] == method) & (rows["cluster"] == cluster)
               & np.isfinite(rows["lo"].astype(float)) & np.isfinite(rows["hi"].astype(float))]
    return None if hit.empty else hit.iloc[0]


def headline(frame: pd.DataFrame, *, cluster: str, method: str = "CR2",
             primary: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Each contrast's naive interval next to the recommended one, and their width ratio.

    The recommended row is ``method`` at ``cluster``; when that row is missing the first
    available of CR1, bootstrap and CR3 at the same level is used (and named).
    ``width_ratio`` = recommended width / naive width: above 1, the naive error bar was
    that many times too narrow.
    """
    cols = ["estimand", "contrast", "estimate", "naive_lo", "naive_hi", "method", "cluster",
            "lo", "hi", "n_clusters", "width_ratio", "naive_decision", "decision",
            "fragile", "message", "disagreeing"]
    rows = []
    for (est, con), part in frame.groupby(["estimand", "contrast"], sort=False):
        if primary is not None and (est, con) not in primary:
            continue
        naive = _pick(part, "naive", "")
        rec = None
        for m in (method, "CR1", "bootstrap", "CR3"):
            rec = _pick(part, m, cluster)
            if rec is not None:
                break
        if naive is None or rec is None:
            continue
        wn = float(naive["hi"] - naive["lo"])
        wr = float(rec["hi"] - rec["lo"])
        ratio = wr / wn if wn > 0 else float("nan")
        if not cluster:
            msg = "no cluster factor given: rows treated as independent"
        elif not np.isfinite(ratio):
            msg = "no naive width to compare"
        elif ratio >= 1.05:
            msg = f"your error bar was {ratio:.1f}x too narrow"
        elif ratio <= 0.95:
            msg = f"the clustered error bar is {1 / ratio:.1f}x narrower than the naive one"
        else:
            msg = "naive and clustered error bars agree"
        rows.append({
            "estimand": est, "contrast": con, "estimate": float(rec["estimate"]),
            "naive_lo": float(naive["lo"]), "naive_hi": float(naive["hi"]),
            "method": rec["method"], "cluster": rec["cluster"],
            "lo": float(rec["lo"]), "hi": float(rec["hi"]),
            "n_clusters": rec["n_clusters"], "width_ratio": ratio,
            "naive_decision": naive["decision"], "decision": rec["decision"],
            "fragile": bool(part["fragile"].any()), "message": msg,
            "disagreeing": _disagreeing(part, rec["decision"]),
        })
    return pd.DataFrame(rows, columns=cols)
