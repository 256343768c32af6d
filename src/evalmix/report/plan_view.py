"""The analysis plan's block in the report (it opens report.md and report.html).

A writer of the report (a layer below :mod:`evalmix.report.report`): it takes the plan
as applied (``Report.plan``, the mapping :func:`evalmix.report.planned.apply_plan`
records), not the report.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix._markdown import markdown_table

__all__ = ["plan_markdown", "plan_html"]


def _primary_view(plan: dict[str, Any]) -> pd.DataFrame:
    p = plan.get("primary")
    if p is None or len(p) == 0:
        return pd.DataFrame()
    p = pd.DataFrame(p)
    level = float(p["level"].iloc[0]) if "level" in p else 0.95

    def iv(lo: float, hi: float) -> str:
        return "not estimable" if not (np.isfinite(lo) and np.isfinite(hi)) \
            else f"[{lo:.3f}, {hi:.3f}]"

    view = pd.DataFrame({
        **({"judge": p["judge"]} if "judge" in p else {}),
        "contrast": p["contrast"], "estimand": p["estimand"],
        "estimate": [f"{v:.3f}" if np.isfinite(v) else "" for v in p["estimate"]],
        f"{level:.0%} interval": [iv(a, b) for a, b in zip(p["lo"].astype(float),
                                                         p["hi"].astype(float), strict=True)],
        "method | cluster": [f"{m} | {c or 'none'}" for m, c in zip(p["method"], p["cluster"],
                                                                    strict=True)],
        "deviation": ["yes" if d else "" for d in p.get("deviation", [""] * len(p))],
    })
    return view


def _sentences(plan: dict[str, Any]) -> list[str]:
    used = plan["used"]
    title = f" ({plan['title']})" if plan.get("title") else ""
    out = [f"Pre-declared primary result: analysis plan {plan['path']}{title}, sha256 "
           f"{plan['sha256'][:16]}; {used['method']} clustered by '{used['cluster']}'."]
    devs = plan.get("deviations") or []
    out += [f"Deviation forced by the data: {d}." for d in devs]
    if not devs:
        out.append("No deviation: the plan ran as written.")
    out.append("Every other number in this report is exploratory (not in the plan): "
               "tables label each row primary, sensitivity (pre-declared) or exploratory.")
    return out


def plan_markdown(plan: dict[str, Any]) -> list[str]:
    """The plan block of report.md (it opens the report)."""
    lines = ["## Pre-declared primary result", ""]
    s = _sentences(plan)
    lines += [md_text(s[0]), ""]
    lines += [f"> **{md_text(t)}**" if t.startswith("Deviation") else md_text(t)
              for t in s[1:-1]] + [""]
    view = _primary_view(plan)
    if not view.empty:
        lines += [markdown_table(view, cell=str), ""]
    return lines + [md_text(s[-1]), ""]


def plan_html(plan: dict[str, Any]) -> str:
    """The plan block of report.html (it opens the report)."""
    esc = html_text
    s = _sentences(plan)
    parts = ["<h2 id='plan'>Pre-declared primary result</h2>", f"<p>{esc(s[0])}</p>"]
    parts += [f"<div class='{'finding' if t.startswith('Deviation') else 'ok'}'>{esc(t)}"
              "</div>" for t in s[1:-1]]
    view = _primary_view(plan)
    if not view.empty:
        head = "".join(f"<th>{esc(str(c))}</th>" for c in view.columns)
        body = "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in r) + "</tr>"
                       for r in view.itertuples(index=False))
        parts.append(f"<table id='primary'><thead><tr>{head}</tr></thead><tbody>{body}"
                     "</tbody></table>")
    parts.append(f"<p class='muted'>{esc(s[-1])}</p>")
    return "\n".join(parts)
