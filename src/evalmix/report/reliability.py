"""The report's "Reliability and budget" section: a G study of the table's facets.

When a table has two or more facets (cluster roles, the presentation order, the
replicates) around one object of measurement (the condition, or the evaluated model of a
one-baseline pairwise table), :func:`reliability` runs :func:`evalmix.gstudy` (via
``compare``: the report never fits a model itself) and keeps plain tables: the
coefficients and SEs of the design as run next to the naive SE, the facets (what to
sample, what to repeat, what doubling each buys) and the variance components, with
seed 003's advice. :func:`reliability_markdown` and :func:`reliability_html` render them;
``evalmix plan dstudy`` plans other designs from the same data.

Kept in its own module with small hooks into :mod:`evalmix.report.analyze` and
:mod:`evalmix.report.report`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix._markdown import markdown_table
from evalmix.compare._calls import guarded
from evalmix.compare.gstudy import gstudy

__all__ = ["RELIABILITY_TITLE", "reliability", "reliability_markdown", "reliability_html"]

RELIABILITY_TITLE = "Reliability and budget"


def _facets(table: Any) -> list[str]:
    roles = [r for r in table.clusters if ":" not in r]
    extra = (["order"] if table.kind == "pairwise" and table.has_order else []) + (
        ["replicate"] if table.replicate is not None else [])
    return roles + extra


def reliability(table: Any, *, level: float, seed: int, fast: bool,
                model_timeout: float | None) -> tuple[dict[str, Any] | None, str | None]:
    """The section's tables, or None and a note saying why there is none.

    Balanced designs use ANOVA (instant); unbalanced ones REML, skipped with ``fast``
    and stopped at ``model_timeout`` seconds. Comparisons judged in both orders hold the
    order fixed (every comparison is always run in both).
    """
    if table.kind == "pairwise" and table.data["model_a"].nunique() > 1:
        return None, None          # Bradley-Terry: no score per model
    if table.kind == "scores" and not table.has_condition:
        return None, None
    facets = _facets(table)
    if len(facets) < 2:
        return None, None
    fixed = (["order"] if "order" in facets and not table.single_order else [])
    deadline = (time.monotonic() + model_timeout) if model_timeout else None
    out = guarded(gstudy, table, facets=facets, fixed=fixed, method="anova", level=level,
                  seed=seed, progress=False)
    if out.error and "balanced" in out.error:
        if fast:
            return None, ("the G study (Reliability and budget) needs REML on this "
                          "unbalanced design: run without --fast, or `evalmix plan dstudy`")
        out = guarded(gstudy, table, facets=facets, fixed=fixed, method="reml",
                      level=level, seed=seed, progress=False, deadline=deadline)
    if out.error:
        return None, f"the G study (Reliability and budget) failed: {out.error}"
    g = out.value
    now = g.project()
    row = {q + end: float(now[q + end][0]) for q in ("erho2", "phi", "se_score", "se_diff")
           for end in ("", "_lo", "_hi")}
    facet_view = g.facets()[["facet", "kind", "n_observed", "error_share", "se_diff",
                             "se_diff_doubled", "gain"]]
    comp = g.components()[["effect", "role", "variance", "lo", "hi", "share"]]
    summary = {"object": g.design.object, "facets": list(g.design.facets),
               "fixed": list(g.design.fixed), "method": g.method, "scale": g.scale,
               "interval": g.interval, "level": g.level, **row,
               "df_score": float(now["df_score"][0]), "df_diff": float(now["df_diff"][0]),
               "naive_se_score": g.naive_se_score, "naive_se_diff": g.naive_se_diff,
               "advice": g.advice, "notes": list(g.notes),
               "n_observed": dict(g.n_observed)}
    return {"summary": summary, "facets": facet_view, "components": comp}, None


#: Variance components shown in the section (the largest shares; all in the CSV).
SHOWN = 12


def _largest(components: pd.DataFrame) -> pd.DataFrame:
    return components.sort_values("share", ascending=False, kind="stable").head(SHOWN)


#: the last line of the section (its Markdown code span is the report's own)
_DSTUDY = ("Other numbers of judges, prompts, runs and items, the cheapest design for a "
           "target and the best for a budget: `evalmix plan dstudy` (docs: G and D studies).")


def _lines(rel: dict[str, Any]) -> list[str]:
    s = rel["summary"]
    pct = f"{s['level']:.0%}"
    ratio = s["se_score"] / s["naive_se_score"] if s["naive_se_score"] > 0 else np.nan
    design = ", ".join(f"{k} {v:g}" for k, v in s["n_observed"].items())
    fixed = f"; held fixed: {', '.join(s['fixed'])}" if s["fixed"] else ""
    return [
        f"G study of {s['object']} over {', '.join(s['facets'])} ({s['method']}; "
        f"{design} per {s['object']}{fixed}).",
        f"E rho^2 (do the {s['object']}s keep their order under new facet levels?) = "
        f"{s['erho2']:.3f} [{s['erho2_lo']:.3f}, {s['erho2_hi']:.3f}]; Phi (do their "
        f"scores keep their values?) = {s['phi']:.3f} [{s['phi_lo']:.3f}, "
        f"{s['phi_hi']:.3f}] ({pct}, {s['interval']}).",
        f"SE of one {s['object']}'s score over new items, judges, runs ...: "
        f"{s['se_score']:.4g} ({ratio:.1f}x the naive {s['naive_se_score']:.4g} that treats "
        f"rows as independent); SE of a difference of two: {s['se_diff']:.4g} (naive "
        f"{s['naive_se_diff']:.4g}; t with {s['df_diff']:.0f} df for an interval).",
        f"Where to spend: {s['advice']}.",
        _DSTUDY,
    ]


def reliability_markdown(rel: dict[str, Any]) -> str:
    """The section as Markdown (its tables through :func:`evalmix._markdown.markdown_table`)."""
    from evalmix.report.render import fmt

    lines = [md_text(x) if x != _DSTUDY else x for x in _lines(rel)]
    out = [lines[0], ""] + [f"- {x}" for x in lines[1:]] + [""]
    out += ["Facets (error share: part of the relative error in effects holding the "
            "facet; gain: share removed by doubling it):", "",
            markdown_table(rel["facets"], cell=fmt), "",
            f"Variance components (the largest {SHOWN}; all in `reliability.csv`):", "",
            markdown_table(_largest(rel["components"]), cell=fmt)]
    return "\n".join(out)


def reliability_html(rel: dict[str, Any]) -> str:
    """The section as an HTML fragment (text escaped)."""
    from evalmix.report.render import _table_html

    esc = html_text
    lines = _lines(rel)
    parts = [f"<p>{esc(lines[0])}</p>", "<ul>"]
    parts += [f"<li>{esc(x)}</li>" for x in lines[1:]]
    parts += ["</ul>", "<p class='muted'>Facets (error share: part of the relative error "
              "in effects holding the facet; gain: share removed by doubling it)</p>",
              _table_html(rel["facets"]),
              f"<p class='muted'>Variance components (the largest {SHOWN}; all in "
              "reliability.csv)</p>", _table_html(_largest(rel["components"]))]
    return "\n".join(parts)


def reliability_frame(rel: dict[str, Any]) -> pd.DataFrame:
    """The section's tables stacked for ``reliability.csv`` (``table`` says which)."""
    return pd.concat([rel["components"].assign(table="components"),
                      rel["facets"].assign(table="facets")], ignore_index=True)
