"""The answer a report opens with: which model is better, by how much, how sure.

A report's first screen (report.html at 1280 x 900, the top of report.md) holds one
plain sentence and a ranked table of the headline contrasts -- the estimate, the
recommended interval, the naive interval beside it and the decision -- before any
word on methods. The numbers are the headline's own (:attr:`Report.headline`), so the
answer, the headline table and ``intervals.csv`` show one interval per quantity.

- :func:`answer_frame` -- the ranked rows (tidy: numbers and plain-words decisions).
- :func:`answer_sentence` -- the one-sentence answer.
- :func:`roles_sentence` -- which roles were treated as sampled and which as fixed or
  strata, and how to change that.
- :func:`answer_html` / :func:`answer_markdown` -- the opening block of each page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix._markdown import markdown_table
from evalmix.report.plan_view import plan_html, plan_markdown

if TYPE_CHECKING:
    from evalmix.report.report_data import ReportData

__all__ = ["answer_frame", "answer_sentence", "roles_sentence", "answer_html",
           "answer_markdown", "MAX_ANSWER_ROWS"]

#: Rows of the answer table (the rest are in the headline table further down): 30 rows
#: keep the table inside the first screen of report.html at 1280 x 900.
MAX_ANSWER_ROWS = 30
#: The decision of an estimate without a null (the mean of a numeric score).
NO_NULL = "no null to test (a score has no natural zero)"
#: Estimand blocks in reading order (win rates and means ranked first, then differences).
_BLOCK = {"win_rate": 0, "mean": 0, "controlled_win_rate": 1, "difference": 2}


def _reference(rep: ReportData) -> str | None:
    """The one model every headline win rate is against (``"B vs A"`` rows all ending
    in the same ``A``; difference rows aside), or None."""
    h = rep.headline
    if h is None or h.empty:
        return None
    wins = [str(c) for e, c in zip(h["estimand"], h["contrast"], strict=True)
            if e in ("win_rate", "controlled_win_rate")]
    refs = {c.rpartition(" vs ")[2] for c in wins}
    return refs.pop() if len(refs) == 1 and all(" vs " in c for c in wins) else None


def _null_of(rep: ReportData) -> dict[tuple[str, str], float]:
    iv = rep.intervals
    if iv is None or iv.empty or "null" not in iv:
        return {}
    first = iv.groupby(["estimand", "contrast"], sort=False)["null"].first()
    return {(str(e), str(c)): float(v) for (e, c), v in first.items()}


def _interval(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) or np.isfinite(hi)) or np.isnan(lo) or np.isnan(hi):
        return "not estimable"
    return f"[{lo:.3f}, {hi:.3f}]"


def _decision(estimand: str, contrast: str, estimate: float, decision: Any, null: float,
              fragile: bool, reference: str | None) -> str:
    """The decision in words, from the recommended interval (``decision``: it excludes
    the null) and the side of the null the estimate is on."""
    if not np.isfinite(null):
        words = NO_NULL
    elif decision is None or decision is pd.NA or (isinstance(decision, float)
                                                   and np.isnan(decision)):
        words = "not estimable at the recommended level"
    elif not bool(decision):
        words = ("no clear difference" if estimand != "mean"
                 else f"no clear difference from {null:g}")
    else:
        above = estimate > null
        if estimand == "difference":
            b, _, a = contrast.partition(" - ")
            words = f"{b} ahead of {a}" if above else f"{a} ahead of {b}"
        elif estimand in ("win_rate", "controlled_win_rate"):
            who, _, opp = contrast.partition(" vs ")
            opp = opp or reference or "its opponent"
            words = f"beats {opp}" if above else f"loses to {opp}"
        else:
            words = f"above {null:g}" if above else f"below {null:g}"
    return words + (" (fragile)" if fragile else "")


def answer_frame(rep: ReportData) -> pd.DataFrame:
    """The headline contrasts ranked: estimand block (win rates or means, then controlled
    win rates, then differences), then estimate, largest first.

    Columns: ``rank, estimand, contrast, estimate, lo, hi, naive_lo, naive_hi, decision,
    fragile, verdict`` -- ``lo, hi`` the recommended interval and ``naive_lo, naive_hi``
    the naive one, exactly the headline's numbers; ``verdict`` the decision in words.
    """
    h = rep.headline
    cols = ["rank", "estimand", "contrast", "estimate", "lo", "hi", "naive_lo", "naive_hi",
            "decision", "fragile", "verdict"]
    if h is None or h.empty:
        return pd.DataFrame(columns=cols)
    nulls = _null_of(rep)
    ref = _reference(rep)
    f = h.assign(_b=h["estimand"].map(_BLOCK).fillna(3),
                 _e=-pd.to_numeric(h["estimate"], errors="coerce"))
    f = f.sort_values(["_b", "_e", "contrast"], kind="stable").reset_index(drop=True)
    verdicts = []
    for r in f.itertuples(index=False):
        null = nulls.get((str(r.estimand), str(r.contrast)), float("nan"))
        verdicts.append(_decision(str(r.estimand), str(r.contrast), float(r.estimate),
                                  r.decision, null, bool(r.fragile), ref))
    rank = f.groupby("_b", sort=False).cumcount() + 1
    return pd.DataFrame({
        "rank": rank.to_numpy(), "estimand": f["estimand"], "contrast": f["contrast"],
        "estimate": f["estimate"].astype(float), "lo": f["lo"].astype(float),
        "hi": f["hi"].astype(float), "naive_lo": f["naive_lo"].astype(float),
        "naive_hi": f["naive_hi"].astype(float), "decision": f["decision"],
        "fragile": f["fragile"].astype(bool), "verdict": verdicts}, columns=cols)


def _how(rep: ReportData) -> str:
    """"95% intervals, CR2 clustered by item_group (8 clusters)"."""
    rec = rep.recommendation
    level = float(rep.summary.get("level", 0.95) or 0.95)
    cluster = rec.get("cluster") or ""
    n = rec.get("n_clusters")
    if not cluster:
        where = "rows treated as independent"
    elif "+" in str(cluster):
        where = f"clustered multiway by {cluster}" + (f", fewest levels {int(n)}" if n else "")
    else:
        where = f"clustered by {cluster}" + (f", {int(n)} clusters" if n else "")
    many = len(rep.headline) > 1
    return f"{level:.0%} interval{'s' if many else ''}, {rec.get('method', 'CR2')} {where}"


def _n(k: int, word: str, plural: str | None = None) -> str:
    return f"{k} {word if k == 1 else (plural or word + 's')}"


def _counts(rep: ReportData, rows: pd.DataFrame, reference: str | None) -> str:
    """How many of ``rows`` (one estimand block) lie above, below or around the null."""
    nulls = _first_null(rep, rows)
    tested = rows["decision"].notna() & np.isfinite(nulls.to_numpy(float))
    dec = rows["decision"].fillna(False).astype(bool) & tested
    up = int((dec & (rows["estimate"] > nulls)).sum())
    down = int(dec.sum()) - up
    same = int((tested & ~dec).sum())
    na = int((rows["decision"].isna() & np.isfinite(nulls.to_numpy(float))).sum())
    est, n = str(rows["estimand"].iloc[0]), len(rows)
    if est in ("win_rate", "controlled_win_rate") and reference:
        wins = ("wins more often than it loses" if up == 1
                else "win more often than they lose")
        out = (f"Against {reference}, {up} of {n} models {wins}, {down} "
               f"{'loses' if down == 1 else 'lose'} more often and {same} cannot be told "
               "apart from it")
    elif est in ("win_rate", "controlled_win_rate"):
        out = (f"Of {n} pairings, {up} favour the first-named model, {down} its opponent "
               f"and {same} are too close to call")
    elif est == "difference":
        out = (f"Of {n} differences, {up} lie above 0, {down} below and {same} are too "
               "close to call")
    else:
        out = (f"Of {n} means, {up} lie above {float(nulls.iloc[0]):g}, {down} below and "
               f"{same} are too close to call")
    return out + (f" ({na} not estimable)" if na else "")


def answer_sentence(rep: ReportData) -> str:
    """One plain sentence: how many contrasts exclude the null on which side, the
    leader and its interval, how the intervals were made, and how many calls are
    fragile.

    The counts are of the first block with a null (win rates, or means of 0/1 scores;
    the differences between conditions when the means are of numeric scores, which have
    no null); the leader is the first row of the first block.
    """
    a = answer_frame(rep)
    if a.empty:
        return "This table gives no contrast to compare (see the design summary below)."
    block = a["estimand"].map(_BLOCK).fillna(3)
    main = a[block == block.min()]
    est = str(main["estimand"].iloc[0])
    ref = _reference(rep)
    top = main.iloc[0]
    name = str(top["contrast"])
    if ref and est != "difference":
        name = name.rpartition(" vs ")[0]
    what = {"win_rate": "win rate", "controlled_win_rate": "order-controlled win rate",
            "mean": "mean", "difference": "difference"}.get(est, "estimate")
    value = f"{top['estimate']:.3f} {_interval(top['lo'], top['hi'])}"
    if len(a) == 1:
        against = f" against {ref}" if ref and est != "difference" else ""
        verdict = "" if top["verdict"] == NO_NULL else f", {top['verdict']}"
        return f"{name}{against}: {what} {value}{verdict} ({_how(rep)})."
    counted = None
    for b in sorted(block.unique()):
        rows = a[block == b]
        if np.isfinite(_first_null(rep, rows).to_numpy(float)).any():
            counted = rows
            break
    counts = _counts(rep, counted, ref) + "; " if counted is not None else ""
    lead = (f"{name} leads with a {what} of {value}" if len(main) > 1
            else f"{name}: {what} {value}")
    n_frag = int(a["fragile"].sum())
    frag = (f" {_n(n_frag, 'call is', 'calls are')} fragile (plausible methods "
            "disagree)." if n_frag else "")
    return f"{counts}{lead} ({_how(rep)}).{frag}"


def _first_null(rep: ReportData, rows: pd.DataFrame) -> pd.Series:
    nulls = _null_of(rep)
    return pd.Series([nulls.get((str(e), str(c)), np.nan)
                      for e, c in zip(rows["estimand"], rows["contrast"], strict=True)],
                     index=rows.index)


def roles_sentence(rep: ReportData) -> str:
    """Which roles the claim generalises over (sampled), which are held fixed or are
    strata, and how to change it (``--sampled`` / ``--strata``): the recommendation's
    own sentence (:meth:`~evalmix.compare.recommend.Recommendation.sentence`), or one
    built from its role lists for a report that has none."""
    rec = rep.recommendation
    if rec.get("statement"):
        return str(rec["statement"])
    sampled = [str(r) for r in rec.get("sampled", ()) or ()]
    strata = [str(r) for r in rec.get("strata", ()) or ()]
    fixed = [str(r) for r in rec.get("fixed", ()) or () if str(r) not in strata]
    parts = []
    parts.append("Treated as sampled (the claim covers new ones): "
                 + (", ".join(sampled) if sampled else "none"))
    if strata:
        parts.append("as strata (chosen, not sampled): " + ", ".join(strata))
    if fixed:
        parts.append("held fixed: " + ", ".join(fixed))
    change = ("Change this with --sampled ROLES" + (" or --strata ROLES" if strata else "")
              + " (Python: sampled=[...])")
    return "; ".join(parts) + f". {change}."


def _display(rep: ReportData, a: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The answer table as shown, and a note on the rows left out."""
    ref = _reference(rep)
    level = float(rep.summary.get("level", 0.95) or 0.95)
    rec = rep.recommendation
    how = f"{rec.get('method', 'CR2')} by {rec.get('cluster') or 'none'}"
    shown = a.head(MAX_ANSWER_ROWS)
    multi = shown["estimand"].nunique() > 1
    contrast = [(str(c).rpartition(" vs ")[0] if ref and e != "difference" else str(c))
                + (f" ({e.replace('_', ' ')})" if multi and e != "win_rate" else "")
                for e, c in zip(shown["estimand"], shown["contrast"], strict=True)]
    head = (f"model (win rate vs {ref})" if ref else "contrast")
    view = pd.DataFrame({
        "#": shown["rank"].to_numpy(),
        head: contrast,
        "estimate": [f"{v:.3f}" if np.isfinite(v) else "" for v in shown["estimate"]],
        f"{level:.0%} interval ({how})": [_interval(lo, hi) for lo, hi in
                                          zip(shown["lo"], shown["hi"], strict=True)],
        "naive interval": [_interval(lo, hi) for lo, hi in
                           zip(shown["naive_lo"], shown["naive_hi"], strict=True)],
        "decision": shown["verdict"].to_numpy(),
    })
    more = len(a) - len(shown)
    note = (f"{more} more contrast{'s' if more != 1 else ''}: see the headline table below."
            if more > 0 else "")
    return view, note


def _plan_block(rep: ReportData, *, html: bool) -> list[str]:
    """With an analysis plan, the pre-declared primary result (it comes first)."""
    if rep.plan is None:
        return []
    return [plan_html(dict(rep.plan))] if html else plan_markdown(dict(rep.plan))


def _exploratory(rep: ReportData) -> str:
    """The answer's label under an analysis plan: evalmix's own recommendation is
    exploratory unless the plan declared the same interval."""
    if rep.plan is None:
        return ""
    h = rep.headline
    if not h.empty and "analysis" in h and h["analysis"].eq("primary").all():
        return "The plan's primary interval: "
    used, rec = rep.plan.get("used", {}), rep.recommendation
    if (used.get("method"), used.get("cluster")) == (rec.get("method"),
                                                     rec.get("cluster") or "none"):
        return ("Exploratory beyond the primary contrast (the same method and cluster as "
                "the plan): ")
    return "Exploratory (evalmix's recommended interval, not the plan's): "


def _title(rep: ReportData) -> str:
    return "evalmix report"


def _cell_class(column: str) -> str:
    if column in ("#", "estimate"):
        return " class='num'"
    return " class='iv'" if "interval" in column else ""


def answer_html(rep: ReportData) -> str:
    """The page's opening: title, the answer sentence, the roles sentence, the ranked
    table (``id='answer'``)."""
    esc = html_text
    a = answer_frame(rep)
    view, note = _display(rep, a)
    parts = [f"<h1>{esc(_title(rep))}</h1>", *_plan_block(rep, html=True),
             f"<p class='answer'>{esc(_exploratory(rep) + answer_sentence(rep))}</p>",
             f"<p class='roles'>{esc(roles_sentence(rep))}</p>"]
    if not view.empty:
        head = "".join(f"<th>{esc(str(c))}</th>" for c in view.columns)
        rows = []
        for (_, r), frag in zip(view.iterrows(), a["fragile"].head(len(view)), strict=True):
            cls = " class='fragile'" if frag else ""
            cells = "".join(f"<td{_cell_class(str(c))}>{esc(str(v))}</td>"
                            for c, v in r.items())
            rows.append(f"<tr{cls}>{cells}</tr>")
        parts.append(f"<table id='answer' class='answer'><thead><tr>{head}</tr></thead>"
                     f"<tbody>{''.join(rows)}</tbody></table>")
    if note:
        parts.append(f"<p class='muted'>{esc(note)}</p>")
    if rep.summary.get("upstream"):  # the tool's own numbers, reproduced, after the answer
        parts.append(f"<p class='upstream'>{esc(str(rep.summary['upstream']))}</p>")
    return "\n".join(parts)


def answer_markdown(rep: ReportData) -> list[str]:
    """The opening lines of report.md: title, the two sentences, the ranked table."""
    a = answer_frame(rep)
    view, note = _display(rep, a)
    out = [f"# {_title(rep)}", "", *_plan_block(rep, html=False),
           md_text(_exploratory(rep) + answer_sentence(rep)), "",
           md_text(roles_sentence(rep)), ""]
    if not view.empty:
        out += [markdown_table(view, cell=str), ""]
    if note:
        out += [md_text(note), ""]
    if rep.summary.get("upstream"):  # the tool's own numbers, reproduced, after the answer
        out += [md_text(str(rep.summary["upstream"])), ""]
    return out
