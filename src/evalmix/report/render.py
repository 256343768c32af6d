"""Render a :class:`~evalmix.report.report.Report` as self-contained HTML or Markdown.

The number and table formats are in :mod:`evalmix.report.table_format` and the report's
words in :mod:`evalmix.report.narrative` (both re-exported here); the pages here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from evalmix._escape import html_text, md_code, md_text
from evalmix.compare.position import classes_wide
from evalmix.report.answer import answer_html, answer_markdown
from evalmix.report.figures import draw_figures, figure_list
from evalmix.report.narrative import _findings as _findings
from evalmix.report.narrative import (
    _headline_view,
    _intro,
    _sensitivity_text,
    _sensitivity_view,
    _truth_lines,
)
from evalmix.report.table_format import _CLASSES, _CSS, fmt
from evalmix.report.table_format import _table_html as _table_html
from evalmix.report.table_format import _table_md as _table_md

if TYPE_CHECKING:
    from evalmix.report.report_data import ReportData

__all__ = ["html", "markdown", "fmt"]


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
