"""The last step of :func:`~evalmix.report.analyze.analyze`: assemble the report.

The interval rows become the interval table with its decisions, votes and headline
(:func:`assemble`); the design summary, the per-judge table, the plain-language
warnings and the run summary are built here from the
:class:`~evalmix.report.run_plan.RunPlan` and the steps' results.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix._escape import check_names
from evalmix._version import package_versions
from evalmix.compare._calls import guarded
from evalmix.compare.decide import INTERVAL_COLUMNS, NON_VOTING_METHODS, add_decisions, headline
from evalmix.compare.recommend import Contrast, Recommendation, level_label
from evalmix.data.table import is_judge_role
from evalmix.design.effect import design_effect

if TYPE_CHECKING:
    from collections.abc import Sequence

    from evalmix.data.table import EvalTable
    from evalmix.report.report import Report

__all__ = ["assemble", "judges_frame", "design_summary", "plain_warnings", "upstream",
           "run_summary"]


def assemble(base: Report, rows: list[dict[str, Any]], table: EvalTable,
              rec: Recommendation, plan: Sequence[Contrast], notes: list[str],
              callee: list[str], *, incomplete: str | None = None) -> Report:
    """``base`` with the interval table, its decisions and the headline from ``rows``,
    and the warnings (``notes``, then the count of intervals not estimable, then the
    summarised callee warnings); ``incomplete`` (the partial report written before the
    model fits) says what is still running."""
    frame = pd.DataFrame(rows)
    for col in INTERVAL_COLUMNS:
        if col not in frame.columns:
            frame[col] = np.nan if col not in ("decision", "fragile") else pd.NA
    frame["votes"] = _votes(frame, table, rec)
    missing = frame["lo"].isna() & frame["estimate"].notna()
    warns = list(notes)
    if missing.any():
        warns.append(f"{int(missing.sum())} interval(s) are not estimable at their cluster "
                     "level (see each row's note); they carry no decision and do not vote")
    warns += callee
    frame = add_decisions(frame)[list(INTERVAL_COLUMNS)]
    primary = {c.key for c in plan if c.primary}
    head = headline(frame, cluster=rec.label, method=rec.method, primary=primary,
                    few_levels=", ".join(rec.few_levels), n_levels=rec.n_clusters)
    summary = dict(base.summary)
    if incomplete:
        summary["incomplete"] = incomplete
    return replace(base, intervals=frame, headline=head, summary=summary,
                   warnings=tuple(dict.fromkeys(warns)))


def _votes(frame: pd.DataFrame, table: EvalTable, rec: Recommendation) -> pd.Series:
    """Which rows vote on fragility: plausible cluster choices for the sampled design.

    Model rows vote (they model every random factor); design rows vote when their method
    is not naive/Wilson and their cluster level is made of the recommendation's sampled
    top-level factors (one-way by each, or multiway) -- the sensitivity set for crossed
    designs. Rows clustered by a fixed factor (judge) or by a level nested inside a
    sampled one (questions inside sampled passages) do not vote.
    """
    top = set(rec.cluster)
    def plausible(level: str) -> bool:
        roles = [r for r in str(level).split("+") if r]
        return bool(roles) and all(r in top for r in roles)
    design = frame["source"].eq("design")
    ok = ~frame["method"].isin(NON_VOTING_METHODS) & frame["cluster"].map(plausible)
    if not rec.cluster:
        ok = ~frame["method"].isin(NON_VOTING_METHODS) & frame["cluster"].eq("")
    return (~design | ok) & frame["lo"].notna()


def judges_frame(jrows: list[dict[str, Any]], pos: pd.DataFrame, level: float
                  ) -> pd.DataFrame:
    """Per-judge rows: the judge-stratified intervals and each judge's first-shown win
    rate from ``pos`` (:func:`~evalmix.compare.position.position_bias`)."""
    cols = ["judge", "estimand", "contrast", "method", "cluster", "estimate", "se", "lo",
            "hi", "level", "df", "n_clusters", "n_obs", "decision", "note"]
    parts = []
    if jrows:
        f = pd.DataFrame(jrows)
        f = add_decisions(f)
        parts.append(f[[c for c in cols if c in f.columns]])
    for _, r in pos.iterrows():
        base = {"judge": r["judge"], "contrast": "all comparisons", "level": level,
                "n_obs": r["n_decisive"], "note": ""}
        parts.append(pd.DataFrame([
            {**base, "estimand": "first_shown_win_rate", "method": "CR1",
             "cluster": r["first_shown_cluster"], "estimate": r["first_shown_win_rate"],
             "lo": r["first_shown_lo"], "hi": r["first_shown_hi"],
             "n_clusters": r["n_clusters"],
             "decision": bool(r["first_shown_lo"] > 0.5 or r["first_shown_hi"] < 0.5)
             if np.isfinite(r["first_shown_lo"]) else pd.NA},
            {**base, "estimand": "flip_rate", "method": "pairs", "cluster": "",
             "estimate": r["flip_rate"], "n_obs": r["n_pairs"]},
            {**base, "estimand": "consistency", "method": "pairs", "cluster": "",
             "estimate": r["consistency"], "n_obs": r["n_pairs"]},
        ]))
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    for c in cols:
        if c not in out.columns:
            out[c] = np.nan
    return out[cols]


def design_summary(table: EvalTable, levels_run: list[tuple[str, ...]], rec: Any,
            judge: str | None, min_clusters: int, methods: list[str]) -> dict[str, Any]:
    summary = table.describe().to_dict()
    deff_rows = []
    for role in table.clusters:
        row: dict[str, Any] = {"factor": role, "n_clusters": table.n_levels(role)}
        out = guarded(design_effect, table, cluster=role)
        if out.ok:
            row.update(_flatten_deff(out.value))
        else:
            row["note"] = out.error
        deff_rows.append(row)
    summary["design_effects"] = deff_rows
    summary["cluster_levels"] = [level_label(lv) or "none" for lv in levels_run]
    summary["methods"] = list(methods)
    summary["judge_role"] = judge
    summary["min_clusters"] = min_clusters
    summary["recommendation"] = {"cluster": rec.label, "method": rec.method,
                                 "n_clusters": rec.n_clusters, "reason": rec.reason,
                                 "sampled": list(rec.sampled), "fixed": list(rec.fixed),
                                 "strata": list(rec.strata),
                                 "few_levels": list(rec.few_levels),
                                 "estimable": rec.estimable, "statement": rec.sentence()}
    return summary


def _flatten_deff(value: Any) -> dict[str, Any]:
    """Whatever design_effect returned, as a flat JSON-ready dict."""
    if hasattr(value, "tidy"):
        t = value.tidy()
        if isinstance(t, pd.DataFrame) and len(t) >= 1:
            return {k: v for k, v in t.iloc[0].to_dict().items() if k != "factor"}
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return {k: v for k, v in asdict(value).items()
                if np.isscalar(v) or v is None}
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if np.isscalar(v) or v is None}
    return {"value": str(value)}


def plain_warnings(table: EvalTable, design: dict[str, Any], rec: Recommendation,
                    min_clusters: int) -> list[str]:
    out: list[str] = []
    dropped = dict(table.dropped)
    if dropped:
        parts = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in dropped.items())
        out.append(f"{sum(dropped.values()):,} of {table.n_raw:,} rows were dropped while "
                   f"reading ({parts}); every number here uses the {table.n_obs:,} rows left.")
    if not rec.estimable:
        out.append(f"No interval can be trusted for this design: {rec.reason}")
    for role in rec.cluster:
        g = table.n_levels(role)
        if 2 <= g < min_clusters:
            out.append(f"'{role}' has only {g} levels (fewer than {min_clusters}): the "
                       f"recommended CR2 rows stay close to nominal, but CR1 and bootstrap "
                       f"rows clustered by {role} under-cover; "
                       + ("the interval is wide because the design has few independent "
                          f"levels of {role}: add levels to narrow it."
                          if role in rec.few_levels else "read CR2 and wild rows."))
    if not rec.cluster:
        out.append("No sampled cluster factor: every interval treats rows as independent, "
                   "which is only right if they are.")
    return out + _name_warnings(table)


def _name_warnings(table: EvalTable) -> list[str]:
    """NameWarning for model, condition and judge names and role names that hold control
    or bidirectional characters or look like another name (``evalmix._escape.check_names``)."""
    frame = table.data
    names = [v for c in ("condition", "model_a", "model_b") if c in frame.columns
             for v in pd.unique(frame[c])]
    out = check_names(names, "model", stacklevel=4)
    for role in table.clusters:
        if is_judge_role(role):
            out += check_names(table.levels(role), role, stacklevel=4)
    return out + check_names(table.clusters, "role", stacklevel=4)


def upstream(table: EvalTable) -> str | None:
    """The tool's own numbers for a table read from its logs (reading them again; the
    reader's warnings were given already), or None."""
    from evalmix.data.readers.upstream import upstream_line

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return upstream_line(table)


def run_summary(table: EvalTable, **kw: Any) -> dict[str, Any]:
    versions = package_versions("numpy", "pandas", "scipy", "statsmodels", "pymc", "arviz",
                                "nutpie", "matplotlib", loaded_only=True)
    fits = kw.pop("fits")
    return {
        "versions": versions,
        "seed": kw["seed"],
        "reps": kw["reps"],
        "level": kw["level"],
        "fast": kw["fast"],
        "backend": kw["backend"],
        "methods": kw["methods"],
        "cluster_levels": [level_label(lv) or "none" for lv in kw["levels"]],
        "roles": table.roles.to_dict(),
        "kind": table.kind,
        "outcome_type": table.outcome_type,
        "ties": table.ties if table.kind == "pairwise" else None,
        "source": table.source,
        "n_obs": table.n_obs,
        "command": kw["command"],
        "models": fits,
        "orientation": ("'X vs Y' is X's win rate against Y; 'B - A' is B's win rate "
                        "minus A's (against the same opponent); the same convention as "
                        "evalmix.interval") if table.kind == "pairwise" else "as scored",
    }
