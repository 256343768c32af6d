"""Decisions, fragility and the headline table: pure functions over tidy interval frames."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

__all__ = ["INTERVAL_COLUMNS", "NON_VOTING_METHODS", "add_decisions", "headline"]

#: Methods that treat rows as independent: the transparency baseline, never a vote.
NON_VOTING_METHODS: frozenset[str] = frozenset({"naive", "wilson"})

#: Columns of ``Report.intervals`` (the first 14 are the file contract of intervals.csv).
INTERVAL_COLUMNS: tuple[str, ...] = (
    "estimand", "contrast", "method", "cluster", "estimate", "se", "lo", "hi", "level",
    "df", "n_clusters", "n_obs", "decision", "fragile",
    "null", "p_value", "reps", "seed", "ci_type", "paired", "source", "votes", "note",
)


def add_decisions(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``decision`` (interval excludes ``null``) and ``fragile`` columns.

    ``decision`` is True/False, or missing when the row has no interval (NaN bounds:
    not estimable, failed, or zero width). ``fragile`` is True for every row of an
    (estimand, contrast) whose *voting* rows do not all reach the same decision. Rows
    vote when ``votes`` is true (default: every row whose method is not naive or Wilson
    -- those treat rows as independent and are the baseline the report compares
    against, not a plausible choice); unbounded intervals, which carry no evidence
    either way, never vote.
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
    if "votes" not in out.columns:
        out["votes"] = ~out["method"].isin(NON_VOTING_METHODS)
    out["votes"] = out["votes"].fillna(False).astype(bool)
    if out.empty:
        out["fragile"] = pd.array([], dtype="boolean")
        return out
    bounded = pd.Series(np.isfinite(lo) & np.isfinite(hi), index=out.index)
    votes = out["decision"].where(bounded & out["votes"])
    n_dec = votes.groupby([out["estimand"], out["contrast"]], sort=False).transform(
        lambda s: s.dropna().nunique())
    out["fragile"] = (n_dec > 1).astype(bool)
    return out


def _float(v: object) -> float:
    return float("nan") if v is None or v is pd.NA else float(v)  # type: ignore[arg-type]


def _known(v: object) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and np.isnan(v))


def _disagreeing(rows: list[dict], decision: object) -> str:
    """Rows whose decision differs from ``decision`` (method | cluster), for the reader."""
    if not _known(decision):
        return ""
    d = [r for r in rows
         if _known(r["decision"])
         and (bool(r["votes"]) if "votes" in r else r["method"] not in NON_VOTING_METHODS)
         and np.isfinite(_float(r["lo"])) and np.isfinite(_float(r["hi"]))]
    off = [r for r in d if bool(r["decision"]) != bool(decision)]
    if not off:
        return ""
    labels = [f"{r['method']} | {r['cluster'] or 'none'}" for r in off]
    head = ", ".join(labels[:5])
    more = f" and {len(labels) - 5} more" if len(labels) > 5 else ""
    return f"{len(labels)} of {len(d)} voting rows disagree: {head}{more}"


#: Standard errors within this relative distance count as the same (the "x too narrow"
#: ratio then reflects z against t only, and is not stated).
SAME_SE_RTOL = 0.02


def _same_se(rec: dict | None, naive: dict | None) -> bool:
    """True when the recommended and naive rows have (nearly) the same standard error."""
    if rec is None or naive is None:
        return False
    a, b = float(rec.get("se", np.nan)), float(naive.get("se", np.nan))
    return bool(np.isfinite(a) and np.isfinite(b) and b > 0 and abs(a / b - 1) < SAME_SE_RTOL)


def _pick(rows: list[dict], method: str, cluster: str) -> dict | None:
    return next((r for r in rows if r["method"] == method and r["cluster"] == cluster),
                None)


def headline(frame: pd.DataFrame, *, cluster: str, method: str = "CR2",
             primary: set[tuple[str, str]] | None = None, few_levels: str = "",
             n_levels: int | None = None) -> pd.DataFrame:
    """Each contrast's naive interval next to the recommended one, and their width ratio.

    The recommended row is ``method`` at ``cluster`` (:func:`evalmix.compare.recommend.
    recommend_cluster`); there is no fallback to another method or level. When that row
    has no interval (degenerate: zero SE, a one-cluster arm, all outcomes equal; or the
    method failed) the headline says "not estimable at this cluster level" and makes no
    decision. ``width_ratio`` = recommended width / naive width: above 1, the naive error
    bar was that many times too narrow (said only when the standard errors differ by
    :data:`SAME_SE_RTOL` or more: equal SEs with a t critical value are not "too narrow"). ``few_levels`` names sampled factors with few
    levels; their contrasts say the interval is wide for that reason.
    """
    cols = ["estimand", "contrast", "estimate", "naive_lo", "naive_hi", "method", "cluster",
            "lo", "hi", "n_clusters", "width_ratio", "naive_decision", "decision",
            "fragile", "message", "disagreeing"]
    rows = []
    # plain records grouped in order of appearance: per-group pandas filtering cost
    # seconds for a 100-model leaderboard (100 contrasts x 14 rows)
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in frame.to_dict("records"):
        groups.setdefault((r["estimand"], r["contrast"]), []).append(r)
    for (est, con), part in groups.items():
        if primary is not None and (est, con) not in primary:
            continue
        naive = _pick(part, "naive", "")
        rec = _pick(part, method, cluster)
        if rec is None and naive is None:
            continue
        lo = float(rec["lo"]) if rec is not None else float("nan")
        hi = float(rec["hi"]) if rec is not None else float("nan")
        nlo = float(naive["lo"]) if naive is not None else float("nan")
        nhi = float(naive["hi"]) if naive is not None else float("nan")
        wn, wr = nhi - nlo, hi - lo
        ratio = wr / wn if (np.isfinite(wn) and wn > 0 and np.isfinite(wr)) else float("nan")
        estimable = rec is not None and np.isfinite(lo) and np.isfinite(hi) and hi > lo
        if not estimable:
            why = str(rec["note"]) if rec is not None and str(rec.get("note", "")) else (
                "the recommended interval could not be computed")
            msg = f"not estimable at this cluster level: {why}"
        elif not cluster:
            msg = "no sampled cluster factor: rows treated as independent"
        elif not np.isfinite(ratio):
            msg = "no naive width to compare"
        elif _same_se(rec, naive):
            msg = ("naive and clustered standard errors agree (the clustered interval "
                   "differs only by its t critical value)")
        elif ratio >= 1.05:
            msg = f"your error bar was {ratio:.1f}x too narrow"
        elif ratio <= 0.95:
            msg = f"the clustered error bar is {1 / ratio:.1f}x narrower than the naive one"
        else:
            msg = "naive and clustered error bars agree"
        if estimable and few_levels and ratio >= 1.05:
            msg += (f"; wide because the design has few independent levels of "
                    f"{few_levels}: add levels of it to narrow the interval")
        shown = cast(dict, rec if rec is not None else naive)  # one of them is a row
        estimate = shown["estimate"]
        rows.append({
            "estimand": est, "contrast": con, "estimate": float(estimate),
            "naive_lo": nlo, "naive_hi": nhi,
            "method": method, "cluster": cluster, "lo": lo if estimable else float("nan"),
            "hi": hi if estimable else float("nan"),
            "n_clusters": rec["n_clusters"] if rec is not None else n_levels,
            "width_ratio": ratio if estimable else float("nan"),
            "naive_decision": naive["decision"] if naive is not None else pd.NA,
            "decision": shown["decision"] if estimable else pd.NA,
            "fragile": any(_known(r["fragile"]) and bool(r["fragile"]) for r in part),
            "message": msg,
            "disagreeing": _disagreeing(part, shown["decision"]) if estimable else "",
        })
    return pd.DataFrame(rows, columns=cols)
