"""The report's words: the introduction, the findings, the prior-sensitivity text and the
demo's truth check, each a list of (class, text) lines that :mod:`evalmix.report.render`
writes as HTML or Markdown, and the headline and sensitivity tables they quote.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix.report.table_format import fmt

if TYPE_CHECKING:
    from evalmix.report.report_data import ReportData


def _headline_view(rep: ReportData) -> pd.DataFrame:
    h = rep.headline
    if h.empty:
        return h
    common = rep.common_reference
    contrast = [str(c).rpartition(" vs ")[0] if common else c for c in h["contrast"]]
    return pd.DataFrame({
        "contrast": contrast, "estimand": h["estimand"], "estimate": h["estimate"],
        "naive interval": [f"[{fmt(a)}, {fmt(b)}]" for a, b in zip(h["naive_lo"],
                                                                   h["naive_hi"], strict=True)],
        "recommended": [f"{m} | {c or 'none'}" for m, c in zip(h["method"], h["cluster"],
                                                                strict=True)],
        "recommended interval": [f"[{fmt(a)}, {fmt(b)}]" for a, b in zip(h["lo"], h["hi"],
                                                                         strict=True)],
        "width ratio": h["width_ratio"],
        "fragile": h["fragile"].astype(bool),
        "what it means": [m.replace("your error bar was ", "") for m in h["message"]],
        "rows that disagree with the recommended decision": h["disagreeing"],
        **({"analysis": h["analysis"]} if "analysis" in h else {}),
    })


#: Prior-sensitivity rows shown in the report (every row is in prior_sensitivity.csv):
#: the effects a reader acts on and every SD.
_SENSITIVITY_TERMS = re.compile(r"^(?:Intercept$|condition|model\[|position|sd\[)")


def _sensitivity_view(rep: ReportData) -> pd.DataFrame:
    """The prior-sensitivity rows worth reading: intercept, condition/model, position and
    SD rows, less the pairwise differences between conditions (435 rows for MT-Bench's
    30 models) and rows that are the same number everywhere (the logistic residual SD)."""
    s = rep.prior_sensitivity
    if s is None or s.empty:
        return pd.DataFrame()
    term = s["term"].astype(str)
    keep = term.str.match(_SENSITIVITY_TERMS) & ~term.str.contains(" - ", regex=False)
    view = s[keep] if keep.any() else s
    numbers = view.drop(columns="term").apply(pd.to_numeric, errors="coerce")
    return view[numbers.nunique(axis=1) > 1].reset_index(drop=True)


def _sensitivity_text(rep: ReportData) -> str:
    """What the prior-sensitivity table is and how to read it."""
    s = rep.prior_sensitivity
    scales = [str(c).partition("@")[2] for c in (s.columns if s is not None else ())
              if str(c).startswith("estimate@")]
    try:
        wider = f"{float(scales[1]) / float(scales[0]):g}x"
    except (IndexError, ValueError, ZeroDivisionError):
        wider = "more"
    models = rep.summary.get("models", {})
    bayes = models.get("bayes", {}) if isinstance(models, dict) else {}
    few = (bayes.get("prior_sensitivity") or {}).get("few_level_factors") or {}
    why = (" because " + ", ".join(f"{f} ({n} levels)" for f, n in few.items())
           + (" has" if len(few) == 1 else " have") + " fewer than 5 levels") if few else ""
    terms = set(s["term"].astype(str)) if s is not None else set()
    per_judge = any(t.startswith("position[") for t in terms)
    steady = "the condition effects" + (" and the judge-specific position biases"
                                        if per_judge else "")
    averages = "The intercept" + (" and the overall position term average"
                                  if "position" in terms else " averages")
    how = ("reweighted by Pareto-smoothed importance sampling to"
           if (bayes.get("prior_sensitivity") or {}).get("method") == "psis"
           else "refitted with")
    return (f"The Bayesian model was {how} SD priors {wider} wider{why}. The SDs "
            "of factors with few levels are barely identified and are expected to move "
            f"with the prior; {steady} should not (if they do, that conclusion leans on "
            f"the prior). {averages} over the few levels and widen with their SDs. "
            "Columns: estimate and interval at each SD-prior scale (@scale); the first "
            "scale is the fit reported above. Every term, differences between conditions "
            "included, is in prior_sensitivity.csv.")


def _intro(rep: ReportData) -> list[tuple[str, str]]:
    """(kind, text) lines for the top of the report."""
    s, rec = rep.summary, rep.recommendation
    lines = []
    src = s.get("source", "")
    lines.append(("p", f"Data: {src} -- {s.get('n_obs', 0):,} rows used, "
                       f"{s.get('kind', '')} table"
                       + (f", ties: {s['ties']}" if s.get("ties") else "") + "."))
    if s.get("orientation") and s.get("kind") == "pairwise":
        lines.append(("p", "Orientation: " + s["orientation"] + "."))
    if rec:
        multi = "+" in str(rec.get("cluster") or "")
        lines.append(("rec", f"Recommended interval: {rec.get('method')} clustered by "
                             f"'{rec.get('cluster') or 'none'}' "
                             + (f"(multiway; fewest levels {rec.get('n_clusters')})"
                                if multi else f"({rec.get('n_clusters')} clusters)")
                             + f". Why: {rec.get('reason', '')}"))
        if rec.get("estimable") is False:
            lines.append(("finding", "No interval can be trusted for this design at the "
                                     "recommended level: the headline prints none."))
    lines += _findings(rep)
    h = rep.headline
    if not h.empty:
        r = h["width_ratio"].astype(float)
        n_frag = int(h["fragile"].astype(bool).sum())
        n_na = int(r.isna().sum())
        if r.notna().any():
            lines.append(("big", f"Across {int(r.notna().sum())} contrasts the recommended "
                                 f"error bars are {np.nanmedian(r):.1f}x the naive width "
                                 f"(median; range {np.nanmin(r):.1f}-{np.nanmax(r):.1f}x)."
                                 + (f" {n_na} contrast(s) are not estimable at this "
                                    "cluster level." if n_na else "")))
        lines.append(("p", f"{n_frag} contrast(s) are fragile: plausible cluster choices "
                           "disagree on whether the null is excluded. Rows that vote: the "
                           "cluster-robust and bootstrap rows clustered by the sampled "
                           "top-level factors (one-way by each, or multiway) and the model "
                           "rows; naive and Wilson rows (the transparency baseline), rows "
                           "clustered by fixed factors or by levels nested inside a "
                           "sampled factor, and rows with no interval do not vote."))
    return lines


def _findings(rep: ReportData) -> list[tuple[str, str]]:
    """Position-bias findings worth a line at the top of the report: the rows of the
    position table (per judge, and the pooled row when it is the only one or shows a
    bias no single judge does), so the line never contradicts the table."""
    p = rep.position
    if p is None or p.empty:
        return []
    pooled = p["judge"] == "(all judges)"
    judges = p[~pooled] if (~pooled).any() else p
    lo, hi = p["first_shown_lo"].astype(float), p["first_shown_hi"].astype(float)
    biased = p[(lo > 0.5) | (hi < 0.5)]
    if biased.empty:
        if not (lo.notna() & hi.notna()).any():
            return [("p", "Position bias: no first-shown win rate has an interval (too "
                          "few decisive verdicts or clusters).")]
        if len(judges) == 1:
            r = judges.iloc[0]
            return [("p", f"Position bias: the first-shown win rate "
                          f"{r['first_shown_win_rate']:.3f} [{r['first_shown_lo']:.3f}, "
                          f"{r['first_shown_hi']:.3f}] does not differ from 0.5 beyond its "
                          "interval.")]
        return [("p", "Position bias: no judge's first-shown win rate differs from 0.5 "
                      "beyond its interval, nor does the pooled one.")]
    out = []
    for _, r in biased.iterrows():
        side = "first" if r["first_shown_win_rate"] > 0.5 else "second"
        who = ("the judges pooled prefer" if r["judge"] == "(all judges)" and len(p) > 1
               else "the judge prefers" if r["judge"] == "(all judges)"
               else f"{r['judge']} prefers")
        flips = (f"; its verdict flips with the order in {r['flip_rate']:.0%} of AB/BA pairs "
                 f"(consistency {r['consistency']:.0%})" if np.isfinite(r["flip_rate"])
                 else "")
        out.append(("finding",
                    f"Position bias: {who} the answer shown {side}: first-shown win rate "
                    f"{r['first_shown_win_rate']:.3f} [{r['first_shown_lo']:.3f}, "
                    f"{r['first_shown_hi']:.3f}] among decisive verdicts{flips}."))
    return out


def _truth_lines(rep: ReportData) -> list[tuple[str, str]]:
    if rep.truth is None or rep.truth.empty:
        return []
    t = rep.truth
    rec = t[t["recommended"].astype(bool)] if "recommended" in t else t
    n_in = int(rec["contains_truth"].astype(bool).sum())
    kind = "ok" if n_in == len(rec) else "bad"
    n_all = int(t["contains_truth"].astype(bool).sum())
    text = (f"The simulator's true values are known: {n_in} of {len(rec)} recommended "
            f"intervals contain them ({n_all} of {len(t)} rows checked, naive and "
            "model-based included).")
    if rep.summary.get("truth_note"):
        text += " " + str(rep.summary["truth_note"])
    return [(kind, text)]
