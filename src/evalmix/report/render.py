"""Render a :class:`~evalmix.report.report.Report` as self-contained HTML or Markdown."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_code, md_text
from evalmix._markdown import markdown_table
from evalmix.compare.position import classes_wide
from evalmix.report.answer import answer_html, answer_markdown
from evalmix.report.figures import draw_figures, figure_list

if TYPE_CHECKING:
    from evalmix.report.report_data import ReportData

__all__ = ["html", "markdown", "fmt"]

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;
margin:24px auto;padding:0 18px;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:1.6em} table{border-collapse:collapse;font-size:.82em;margin:.6em 0}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left} th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums} .warn{background:#fff6e5;border-left:4px
solid #e08e0b;padding:6px 12px;margin:4px 0} .ok{background:#eaf6ee;border-left:4px solid
#2e8b57;padding:6px 12px} .bad{background:#fdecea;border-left:4px solid #c0392b;
padding:6px 12px} .rec{background:#eef3fb;border-left:4px solid #1f4e9c;padding:8px 12px}
tr.fragile td{background:#fdecea} img{max-width:100%;margin:8px 0} .muted{color:#666;
font-size:.85em} code{background:#f4f4f4;padding:1px 4px}
details summary{cursor:pointer;font-weight:600;margin:.6em 0}
td{white-space:nowrap} td.wrap{white-space:normal;min-width:260px}
.grid{display:flex;flex-wrap:wrap;gap:6px} .grid img.forest{max-width:49%}
.finding{background:#fdecea;border-left:4px solid #c0392b;padding:6px 12px;margin:4px 0}
.big{font-size:1.05em;font-weight:600}
table{display:block;max-width:100%;overflow-x:auto} table.answer{font-size:.85em;
line-height:1.2;margin:.4em 0} table.answer td{white-space:normal;padding:2px 7px}
table.answer td.iv,table.answer td.num{white-space:nowrap}
p.answer{font-size:1.1em;margin:.3em 0}
p.roles{color:#444;font-size:.9em;margin:.3em 0}
"""


#: What the AB/BA class table says.
_CLASSES = (
    "Each matched AB/BA cell (one comparison judged in both orders) by its two verdicts: "
    "a stable condition win (the same model wins in both orders), a stable slot win (the "
    "answer in the same position wins both times: the order decided), a stable tie, or a "
    "flip (a tie in one order, a win in the other); share [interval] (count) of the "
    "matched cells, cluster bootstrap (expanded percentile) over the clusters named. The "
    "controlled win rate is model_b's win rate averaged over both orders, summed from "
    "the classes; the stable slot share is the flip rate above. Every cell is in "
    "position_classes.csv.")


def fmt(v: Any, digits: int = 3) -> str:
    """Format a cell: floats to ``digits`` decimals, missing as empty."""
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, float | np.floating):
        if not np.isfinite(v):
            return "" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        # abs() of a float / numpy-float union types as object; it is a real number here
        if float(v).is_integer() and cast(float, abs(v)) >= 10:
            return f"{int(v):,}"
        return f"{v:.{digits}f}"
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    return str(v)


def _num(v: Any) -> str:
    numeric = isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_)
    return " class='num'" if numeric else ""


def _wrap(column: Any, value: Any) -> str:
    return " class='wrap'" if isinstance(value, str) and len(value) > 40 else ""


def _table_html(df: pd.DataFrame, *, highlight: str | None = None, max_rows: int = 400
                ) -> str:
    if df is None or df.empty:
        return "<p class='muted'>none</p>"
    d = df.head(max_rows)
    columns = list(d.columns)
    head = "".join(f"<th>{html_text(str(c))}</th>" for c in columns)
    mark = columns.index(highlight) if highlight in columns else None
    body = []
    for _, r in d.iterrows():
        values = tuple(r)   # one pass over the row (a lookup per cell cost 3x as much)
        cls = " class='fragile'" if mark is not None and bool(values[mark] is True
                                                              or values[mark] == 1) else ""
        cells = "".join(f"<td{_num(v) or _wrap(c, v)}>{html_text(fmt(v))}</td>"
                        for c, v in zip(columns, values, strict=True))
        body.append(f"<tr{cls}>{cells}</tr>")
    more = (f"<p class='muted'>first {max_rows} of {len(df)} rows; all rows are in the "
            "CSV files</p>" if len(df) > max_rows else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _table_md(df: pd.DataFrame, max_rows: int = 400) -> str:
    return markdown_table(df, cell=fmt, max_rows=max_rows)


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


def _img(figs: dict[str, str], key: str, alt: str, cls: str | None = None) -> str:
    c = f" class='{cls}'" if cls else ""
    return f"<img{c} alt='{alt}' src='data:image/png;base64,{figs[key]}'>"


def html(rep: ReportData, sections: Sequence[tuple[str, str]] = (),
         figures: Mapping[str, str] | None = None) -> str:
    """The report as one self-contained HTML page (``sections``: extra (title, HTML
    fragment) pairs placed after the headline table; ``figures``: base64 PNGs of
    :func:`~evalmix.report.figures.figure_list` by name, already drawn, else drawn here)."""
    figs = (dict(figures) if figures is not None
            else {name: base64.b64encode(png).decode("ascii")
                  for name, png in draw_figures(rep).pngs.items()})
    esc = html_text
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<title>evalmix report</title>", f"<style>{_CSS}</style></head><body>",
             answer_html(rep), "<h2>How these intervals were made</h2>"]
    cmd = rep.summary.get("command")
    if cmd:
        parts.append(f"<p class='muted'>Command: <code>{esc(str(cmd))}</code></p>")
    for kind, text in _intro(rep):
        tag = {"p": "p", "rec": "div class='rec'", "big": "p class='big'",
               "finding": "div class='finding'"}[kind]
        parts.append(f"<{tag}>{esc(text)}</{tag.split()[0]}>")
    for kind, text in _truth_lines(rep):
        parts.append(f"<div class='{kind}'>{esc(text)}</div>")
    parts.append("<h2>Headline: naive vs recommended intervals</h2>")
    if "headline" in figs:
        parts.append(_img(figs, "headline", "headline intervals"))
    if not rep.position.empty:
        parts.append("<h2>Position bias by judge</h2>")
        parts.append("<p class='muted'>First-shown win rate among decisive verdicts (0.5 "
                     "= no preference for either position; interval CR1 over the recommended "
                     "cluster), flip rate (the winner reverses when the order is swapped) "
                     "and consistency (same verdict in both orders), from matched AB/BA "
                     "pairs.</p>")
        if "position" in figs:
            parts.append(_img(figs, "position", "position bias"))
        parts.append(_table_html(rep.position))
        classes = classes_wide(rep.position_classes)
        if not classes.empty:
            parts.append(f"<h3>AB/BA classes</h3><p class='muted'>{html_text(_CLASSES)}</p>")
            parts.append(_table_html(classes))
    parts.append("<h2>Headline table</h2>")
    common = rep.common_reference
    if common:
        parts.append(f"<p class='muted'>Every contrast is a win rate against "
                     f"{esc(common)}.</p>")
    parts.append(_table_html(_headline_view(rep), highlight="fragile"))
    for title, body in sections:
        parts += [f"<h2>{esc(title)}</h2>", body]
    if rep.truth is not None and not rep.truth.empty:
        parts.append("<h2>Truth check (simulated data)</h2>")
        parts.append(_table_html(rep.truth))
    parts.append("<h2>Warnings</h2>")
    if rep.warnings:
        parts += [f"<div class='warn'>{esc(w)}</div>" for w in rep.warnings]
    else:
        parts.append("<p>none</p>")
    forests = [k for k in figs if k.startswith("forest_")]
    parts.append("<h2>Forest plots: every method and cluster level</h2>")
    parts.append("<p class='muted'>One panel per contrast. Rows are method | cluster level, "
                 "grouped by level; the dashed line is the null (0.5 for win rates, 0 for "
                 "differences); blue intervals exclude it, grey ones contain it, green are "
                 "model-based; the starred row is the recommended one; a red title marks a "
                 "fragile contrast (the rows disagree). Fragile and most-widened contrasts "
                 "come first.</p>")
    parts.append("<div class='grid'>")
    for k in forests:
        parts.append(_img(figs, k, "forest plot", cls="forest"))
    parts.append("</div>")
    if "controlled" in figs:
        parts.append("<h2>AB/BA-controlled vs uncontrolled win rates</h2>")
        parts.append(_img(figs, "controlled", "controlled win rates"))
    parts.append("<h2>Variance components</h2>")
    if "variance" in figs:
        parts.append(_img(figs, "variance", "variance shares"))
    parts.append(_table_html(rep.variance))
    sens = _sensitivity_view(rep)
    if not sens.empty:
        parts.append("<h2>Prior sensitivity (Bayesian model)</h2>")
        parts.append(f"<p class='muted'>{esc(_sensitivity_text(rep))}</p>")
        parts.append(_table_html(sens))
    jt = rep.judges
    if jt is not None and not jt.empty:
        parts.append("<h2>Judge-stratified estimates</h2>")
        parts.append(_table_html(jt[~jt["estimand"].isin(
            ["first_shown_win_rate", "flip_rate", "consistency"])]))
    parts.append("<h2>Design</h2>")
    parts.append(_design_html(rep))
    parts.append("<details><summary>All intervals (also in intervals.csv)</summary>")
    parts.append(_table_html(rep.intervals.drop(columns=["seed", "note"], errors="ignore"),
                             highlight="fragile", max_rows=2000))
    parts.append("</details>")
    parts.append(f"<p class='muted'>versions: {esc(str(rep.summary.get('versions', {})))}; "
                 f"seed {esc(str(rep.summary.get('seed')))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _design_frames(rep: ReportData) -> list[tuple[str, pd.DataFrame]]:
    d = rep.design
    out = []
    for key, title in (("factors", "Cluster factors"), ("relations", "How factors relate"),
                       ("design_effects", "ICC and design effect per factor")):
        if d.get(key):
            out.append((title, pd.DataFrame(d[key])))
    return out


def _design_html(rep: ReportData) -> str:
    parts = []
    d = rep.design
    dropped = d.get("dropped") or {}
    parts.append(f"<p>Rows read {fmt(d.get('rows_raw'))}, used {fmt(d.get('rows_used'))}; "
                 f"dropped: {html_text(str(dict(dropped)) if dropped else 'none')}. "
                 f"Cluster levels run: {html_text(', '.join(d.get('cluster_levels', [])))}"
                 ".</p>")
    for title, frame in _design_frames(rep):
        parts.append(f"<h3>{html_text(title)}</h3>{_table_html(frame)}")
    return "\n".join(parts)


def markdown(rep: ReportData, *, plots_dir: str | None = None,
             sections: Sequence[tuple[str, str]] = ()) -> str:
    """The report as Markdown (figures linked from ``plots_dir`` when given;
    ``sections``: extra (title, Markdown) pairs placed after the headline)."""
    failed = rep.summary.get("figures_not_drawn", {})
    names = [name for name, _ in figure_list(rep) if name not in failed] if plots_dir else []
    out = answer_markdown(rep)
    if rep.summary.get("incomplete"):
        out[2:2] = [f"> **incomplete: {md_text(rep.summary['incomplete'])}.** This page holds the "
                    "design-based intervals only; the full report replaces it when the "
                    "run ends.", ""]
    out += ["## How these intervals were made", ""]
    cmd = rep.summary.get("command")
    if cmd:
        out += [f"Command: {md_code(cmd)}", ""]
    for kind, text in _intro(rep) + _truth_lines(rep):
        out += [("> " if kind != "p" else "") + md_text(text), ""]
    out += ["## Headline: naive vs recommended intervals", "",
            _table_md(_headline_view(rep)), ""]
    if "headline" in names:
        out += [f"![headline]({plots_dir}/headline.png)", ""]
    for title, body in sections:
        out += [f"## {title}", "", body, ""]
    if rep.truth is not None and not rep.truth.empty:
        out += ["## Truth check (simulated data)", "", _table_md(rep.truth), ""]
    out += ["## Warnings", ""]
    out += [f"- {md_text(w)}" for w in rep.warnings] or ["none"]
    out.append("")
    forests = [n for n in names if n.startswith("forest_")]
    if forests:
        out += ["## Forest plots", "",
                "Rows: method | cluster level; dashed line: the null; blue excludes it, grey "
                "contains it, green model-based; * recommended; red title: fragile.", ""]
        out += [f"![{n}]({plots_dir}/{n}.png)" for n in forests] + [""]
    if not rep.position.empty:
        out += ["## Position bias by judge", "", _table_md(rep.position), ""]
        if "position" in names:
            out += [f"![position]({plots_dir}/position.png)", ""]
        classes = classes_wide(rep.position_classes)
        if not classes.empty:
            out += ["### AB/BA classes", "", md_text(_CLASSES), "", _table_md(classes), ""]
    if "controlled" in names:
        out += ["## AB/BA-controlled vs uncontrolled win rates", "",
                f"![controlled]({plots_dir}/controlled.png)", ""]
    out += ["## Variance components", "", _table_md(rep.variance), ""]
    if "variance" in names:
        out += [f"![variance]({plots_dir}/variance.png)", ""]
    sens = _sensitivity_view(rep)
    if not sens.empty:
        out += ["## Prior sensitivity (Bayesian model)", "", _sensitivity_text(rep), "",
                _table_md(sens), ""]
    jt = rep.judges
    if jt is not None and not jt.empty:
        out += ["## Judge-stratified estimates", "",
                _table_md(jt[~jt["estimand"].isin(
                    ["first_shown_win_rate", "flip_rate", "consistency"])]), ""]
    out += [design_markdown(rep), "All intervals: `intervals.csv`.", ""]
    return "\n".join(out)


def design_markdown(rep: ReportData) -> str:
    """The design section alone (also written as ``design.md``)."""
    d = rep.design
    dropped = d.get("dropped") or {}
    dropped_text = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in dropped.items())
    out = ["## Design summary", "",
           f"- Source: {md_code(d.get('source', ''))} ({d.get('kind', '')}, "
           f"{d.get('outcome_type', '')} outcome)",
           *(f"- Outcome type: {note}" for note in d.get("outcome_notes") or ()),
           f"- Rows: {int(d.get('rows_raw', 0)):,} read, {int(d.get('rows_used', 0)):,} used; "
           f"dropped: {dropped_text or 'none'}"]
    pairs = d.get("pairs") or {}
    if pairs.get("order_known"):
        out.append(f"- AB/BA as read: {pairs.get('comparisons')} comparisons, "
                   f"{pairs.get('both_orders')} in both orders, "
                   f"{pairs.get('one_order_only')} in one order only")
    if d.get("ties_count") is not None and d.get("kind") == "pairwise":
        out.append(f"- Ties: {d.get('ties_count')} (policy: {d.get('ties')})")
    out.append("")
    for title, frame in _design_frames(rep):
        out += [f"### {title}", "", _table_md(frame), ""]
    return "\n".join(out)
