"""Design summary of an :class:`~evalmix.data.table.EvalTable`.

Rows, levels per factor, cluster sizes, which factors are crossed or nested, AB/BA
balance and dropped rows, as a frozen result with ``.tidy()``-style frames, a dict for
JSON and a Markdown rendering.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol

import numpy as np
import pandas as pd

from evalmix._escape import md_code, md_text
from evalmix._markdown import markdown_table

__all__ = ["DesignSummary", "DesignView", "summarize", "factor_relation",
           "replicate_agreement"]


class DesignView(Protocol):
    """What the design summary reads of a table.

    :class:`~evalmix.data.table.EvalTable` is one; this module does not import it (the
    table imports this module for :meth:`~evalmix.data.table.EvalTable.describe`, so the
    summary is a layer below the table, not beside it in a cycle).
    """

    @property
    def data(self) -> pd.DataFrame: ...
    @property
    def kind(self) -> str: ...
    @property
    def outcome_type(self) -> str: ...
    @property
    def ties(self) -> str: ...
    @property
    def roles(self) -> Any: ...
    @property
    def n_raw(self) -> int: ...
    @property
    def n_obs(self) -> int: ...
    @property
    def dropped(self) -> Mapping[str, int]: ...
    @property
    def n_ties(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def pairs_read(self) -> Mapping[str, int]: ...
    @property
    def n_duplicates(self) -> int: ...
    @property
    def outcome_notes(self) -> tuple[str, ...]: ...
    @property
    def y(self) -> np.ndarray: ...
    @property
    def clusters(self) -> tuple[str, ...]: ...
    @property
    def has_condition(self) -> bool: ...
    @property
    def has_order(self) -> bool: ...
    @property
    def single_order(self) -> bool: ...
    @property
    def replicate(self) -> str | None: ...
    def codes(self, role: str) -> np.ndarray: ...


def factor_relation(a: np.ndarray, b: np.ndarray) -> tuple[str, float]:
    """How two factors (integer codes) relate, and the share of level pairs observed.

    Returns ``("equivalent", s)`` if the two factors group the rows identically,
    ``("nested", s)`` if every level of ``a`` occurs with one level of ``b`` (``a``
    nested in ``b``), ``("contains", s)`` for the reverse, ``("crossed", 1.0)`` if every
    combination occurs, ``("partially crossed", s)`` otherwise. ``s`` is the share of
    the ``levels(a) x levels(b)`` combinations that occur.

    Examples
    --------
    >>> import numpy as np
    >>> factor_relation(np.array([0, 1, 2, 3]), np.array([0, 0, 1, 1]))
    ('nested', 0.5)
    >>> factor_relation(np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]))
    ('crossed', 1.0)
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.size == 0:
        return "crossed", 1.0
    na, nb = int(a.max()) + 1, int(b.max()) + 1
    combos = np.unique(a * nb + b)
    share = combos.size / (na * nb)
    if combos.size == na == nb and na > 1:
        return "equivalent", share
    if combos.size == na and nb > 1 and na >= nb:
        return "nested", share
    if combos.size == nb and na > 1 and nb >= na:
        return "contains", share
    if combos.size == na * nb:
        return "crossed", 1.0
    return "partially crossed", share


@dataclass(frozen=True)
class DesignSummary:
    """What the table looks like as a design (see :meth:`EvalTable.describe`)."""

    kind: str
    outcome_type: str
    ties: str
    n_raw: int
    n_obs: int
    dropped: Mapping[str, int]
    n_ties: int
    outcome_mean: float
    factors: pd.DataFrame
    relations: pd.DataFrame
    conditions: pd.DataFrame
    pairs: Mapping[str, Any] = field(default_factory=dict)
    roles: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    replicates: Mapping[str, Any] = field(default_factory=dict)
    n_duplicates: int = 0
    outcome_notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        def records(df: pd.DataFrame) -> list[dict[str, Any]]:
            return json.loads(df.to_json(orient="records"))

        return {
            "source": self.source,
            "kind": self.kind,
            "outcome_type": self.outcome_type,
            "outcome_notes": list(self.outcome_notes),
            "ties": self.ties if self.kind == "pairwise" else None,
            "rows_raw": self.n_raw,
            "rows_used": self.n_obs,
            "dropped": dict(self.dropped),
            "dropped_total": int(sum(self.dropped.values())),
            "ties_count": self.n_ties,
            "duplicate_rows": self.n_duplicates,
            "outcome_mean": self.outcome_mean,
            "roles": dict(self.roles),
            "factors": records(self.factors),
            "relations": records(self.relations),
            "conditions": records(self.conditions),
            "pairs": dict(self.pairs),
            "replicates": dict(self.replicates),
        }

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_markdown(self) -> str:
        lines = ["## Design summary", ""]
        lines.append(f"- Source: {md_code(self.source)}")
        lines.append(f"- Kind: {self.kind} ({self.outcome_type} outcome"
                     + (f", ties: {self.ties}" if self.kind == "pairwise" else "") + ")")
        lines += [f"- Outcome type: {md_text(note)}" for note in self.outcome_notes]
        lines.append(f"- Rows: {self.n_raw:,} read, {self.n_obs:,} used")
        if self.dropped:
            parts = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in self.dropped.items())
            lines.append(f"- Dropped: {sum(self.dropped.values()):,} ({parts})")
        else:
            lines.append("- Dropped: none")
        if self.n_duplicates:
            lines.append(f"- Rows that exactly repeat another row (kept): "
                         f"{self.n_duplicates:,}")
        if self.kind == "pairwise":
            lines.append(f"- Ties among rows read: {self.n_ties:,}")
        lines.append(f"- Mean outcome: {self.outcome_mean:.4f}")
        if self.pairs:
            p = self.pairs
            if p.get("single_order"):
                lines.append(
                    f"- Order: one randomised order per comparison ({p['comparisons']:,} "
                    f"judgments, no AB/BA pairs); model_a shown first in "
                    f"{p['share_a_first']:.1%} of rows: position is a covariate"
                )
            elif p.get("order_known"):
                lines.append(
                    f"- AB/BA as read: {p['comparisons']:,} comparisons, {p['both_orders']:,} "
                    f"in both orders, {p['one_order_only']:,} in one order only"
                )
                lines.append(
                    f"- AB/BA as used: {p['used_both_orders']:,} complete pairs, "
                    f"{p['used_one_order_only']:,} with one record left after dropping; "
                    f"model_a shown first in {p['share_a_first']:.1%} of rows"
                )
            else:
                lines.append("- AB/BA: presentation order not given")
        r = self.replicates
        if r:
            lines.append(
                f"- Replicates ({md_code(r['column'])}, nested within the item): {r['levels']} "
                f"runs; {r['cells_with_replicates']:,} of {r['cells']:,} cells repeated, "
                f"all runs agree in {r['agreement']:.1%} of them (within-cell SD "
                f"{r['within_sd']:.3g})"
            )
        lines += ["", "### Cluster factors", ""]
        lines.append(_md_table(self.factors))
        if len(self.relations):
            lines += ["", "### How the factors relate", "", _md_table(self.relations)]
        if len(self.conditions):
            lines += ["", "### Conditions / models", "", _md_table(self.conditions)]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_markdown()


def _md_table(df: pd.DataFrame) -> str:
    return markdown_table(df, cell=lambda v: f"{v:.4g}" if isinstance(v, float) else str(v))


def replicate_agreement(table: DesignView) -> dict[str, Any]:
    """How repeated runs agree within their cell (empty without a replicate role).

    A cell is everything that identifies a judgment or score except the replicate: the
    condition (pairwise: the two models and which was shown first) and every cluster
    label. ``agreement`` is the share of cells with two or more runs whose outcomes
    are all equal; ``within_sd`` the mean standard deviation of the outcome within
    those cells.
    """
    if table.replicate is None:
        return {}
    d = table.data
    keys = [c for c in ("condition", "model_a", "model_b", "a_first", "position",
                        *table.clusters) if c in d.columns]
    y = d["y"]
    if keys:
        g = y.groupby([d[k] for k in keys], dropna=False, sort=False)
        size, nun, sd = g.size(), g.nunique(), g.std(ddof=1)
    else:  # pragma: no cover - a replicate needs something to repeat within
        size, nun, sd = (pd.Series([len(y)]), pd.Series([y.nunique()]),
                         pd.Series([y.std(ddof=1)]))
    rep = size >= 2
    return {
        "column": table.replicate,
        "levels": int(d["replicate"].nunique()),
        "cells": int(size.size),
        "cells_with_replicates": int(rep.sum()),
        "runs_per_cell_median": float(np.median(size)) if size.size else 0.0,
        "agreement": float((nun[rep] == 1).mean()) if rep.any() else float("nan"),
        "within_sd": float(sd[rep].mean()) if rep.any() else float("nan"),
    }


def summarize(table: DesignView) -> DesignSummary:
    """Build the :class:`DesignSummary` of ``table``."""
    rows = []
    for role in table.clusters:
        codes = table.codes(role)
        sizes = np.bincount(codes)
        rows.append({
            "factor": role,
            "column": table.roles.clusters[role],
            "levels": int(sizes.size),
            "size_min": int(sizes.min()),
            "size_median": float(np.median(sizes)),
            "size_max": int(sizes.max()),
        })
    factors = pd.DataFrame(rows, columns=["factor", "column", "levels", "size_min",
                                          "size_median", "size_max"])
    rel_rows = []
    for r1, r2 in combinations(table.clusters, 2):
        relation, share = factor_relation(table.codes(r1), table.codes(r2))
        if relation == "nested":
            text = f"{r1} nested in {r2}"
        elif relation == "contains":
            text = f"{r2} nested in {r1}"
        elif relation == "equivalent":
            text = f"{r1} and {r2} are the same grouping"
        else:
            text = relation
        rel_rows.append({"factor_1": r1, "factor_2": r2, "relation": text,
                         "share_of_combinations": round(share, 4)})
    relations = pd.DataFrame(rel_rows, columns=["factor_1", "factor_2", "relation",
                                                "share_of_combinations"])
    d = table.data
    if table.kind == "pairwise":
        keys = (["condition"] if table.has_condition else []) + ["model_a", "model_b"]
        g = d.groupby(keys, sort=True)
        conditions = g["y"].agg(rows="size", mean_y="mean").reset_index()
        conditions = conditions.rename(columns={"mean_y": "mean_score_a"})
        pairs: dict[str, Any] = {"order_known": table.has_order}
        if table.has_order:
            # comparisons as read (before NA rows were dropped), then as used
            # orders judged per comparison (its records share a pair_id)
            per = d.groupby("pair_id")["a_first"].nunique().to_numpy()
            pairs.update(
                comparisons=int(table.pairs_read.get("comparisons", per.size)),
                both_orders=int(table.pairs_read.get("both_orders", (per == 2).sum())),
                one_order_only=int(table.pairs_read.get("one_order_only", (per == 1).sum())),
                used_both_orders=int((per == 2).sum()),
                used_one_order_only=int((per == 1).sum()),
                share_a_first=float(d["a_first"].mean()),
                single_order=table.single_order,
            )
        vc = d["verdict"].value_counts()
        pairs["verdicts"] = {k: int(vc.get(k, 0)) for k in ("a", "b", "tie")}
    elif table.has_condition:
        conditions = d.groupby("condition", sort=True)["y"].agg(
            rows="size", mean="mean").reset_index()
        pairs = {}
    else:
        conditions = pd.DataFrame()
        pairs = {}
    return DesignSummary(
        kind=table.kind,
        outcome_type=table.outcome_type,
        ties=table.ties,
        n_raw=table.n_raw,
        n_obs=table.n_obs,
        dropped=dict(table.dropped),
        n_ties=table.n_ties,
        outcome_mean=float(np.mean(table.y)) if table.n_obs else float("nan"),
        factors=factors,
        relations=relations,
        conditions=conditions,
        pairs=pairs,
        roles=table.roles.to_dict(),
        source=table.source,
        replicates=replicate_agreement(table),
        n_duplicates=table.n_duplicates,
        outcome_notes=table.outcome_notes,
    )
