"""The long frame a G study reads: the object of measurement, the facets, the score.

From an :class:`~evalmix.data.table.EvalTable` (its condition or evaluated model, cluster
roles, order and replicates) or a DataFrame (named columns); and the nesting of the
facets, declared or found from the labels. Used by :func:`evalmix.compare.gstudy.gstudy`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from evalmix.data.table import EvalTable, is_replicate_role
from evalmix.errors import DroppedRowsWarning, EvalmixError, InvalidOptionError

__all__ = ["Y", "REPLICATE", "table_frame", "data_frame", "find_nesting"]

#: The column holding the outcome in the frame.
Y = "__y"
#: Name of the facet numbering unlabelled repeats of a cell.
REPLICATE = "replicate"


def _order_labels(a_first: pd.Series) -> pd.Series:
    return a_first.map({1.0: "a first", 0.0: "b first"})


def table_frame(table: EvalTable, obj: str | None, facets: Sequence[str] | None
                 ) -> tuple[pd.DataFrame, str, list[str], list[str]]:
    d = table.data
    cols: dict[str, pd.Series] = {}
    notes: list[str] = []
    default_obj: str | None
    if table.kind == "pairwise":
        if d["model_a"].nunique() > 1:
            raise EvalmixError(
                "this pairwise table compares models with each other (a Bradley-Terry "
                "design); a G study needs one score per object: use a table where "
                "model_a is one fixed baseline, or give a score table")
        cols["model"] = d["model_b"].astype(str)
        if table.ties == "separate":
            y = d["verdict"].map({"b": 1.0, "tie": 0.5, "a": 0.0})
        else:
            y = 1.0 - d["y"].astype(float)
        notes.append(f"score: model_b (the evaluated model) beats {d['model_a'].iloc[0]!r} "
                     "(1), ties 1/2")
        if table.has_order:
            cols["order"] = _order_labels(d["a_first"])
        default_obj = "model"
    else:
        y = d["y"].astype(float)
        if table.has_condition:
            cols["condition"] = d["condition"].astype(str)
        default_obj = "condition" if table.has_condition else None
    roles = [r for r in table.clusters if ":" not in r]
    for r in roles:
        cols[r] = d[r].astype(str)
    if table.replicate is not None:
        cols[REPLICATE] = d["replicate"].astype(str)
    obj = obj or default_obj
    if obj is None:
        raise InvalidOptionError("name the object of measurement (object=...): this table has no "
                                 f"condition column; its factors are {', '.join(cols)}")
    if obj not in cols:
        raise InvalidOptionError(f"object {obj!r} is not a factor of this table; its factors "
                                 f"are {', '.join(cols)}")
    if facets is None:
        facets = [c for c in cols if c != obj and c not in ("condition", "model")]
    frame = pd.DataFrame({c: cols[c] for c in dict.fromkeys([obj, *facets]) if c in cols})
    missing = [f for f in facets if f not in cols]
    if missing:
        raise InvalidOptionError(f"facet {', '.join(map(repr, missing))} is not a factor of this "
                                 f"table; its factors are {', '.join(cols)}")
    frame[Y] = np.asarray(y, dtype=float)
    return frame, obj, list(facets), notes


def data_frame(data: pd.DataFrame, obj: str | None, facets: Sequence[str] | None,
                outcome: str | None) -> tuple[pd.DataFrame, str, list[str], list[str]]:
    if obj is None or facets is None or outcome is None:
        need = [n for n, v in (("object", obj), ("facets", facets), ("outcome", outcome))
                if v is None]
        raise InvalidOptionError(f"a DataFrame needs {', '.join(need)}=...: e.g. gstudy(df, "
                                 "object='model', facets=['item', 'judge'], outcome='score')")
    used = [obj, *facets, outcome]
    absent = [c for c in used if c not in data.columns]
    if absent:
        raise EvalmixError(f"column {', '.join(map(repr, absent))} is not in the data; its "
                           f"columns are {', '.join(map(str, data.columns))}")
    y = pd.to_numeric(data[outcome], errors="coerce")
    bad = data[outcome].notna() & y.isna()
    if bad.any():
        raise EvalmixError(f"column {outcome!r} holds non-numeric values (e.g. "
                           f"{data.loc[bad, outcome].iloc[0]!r} in row {int(np.argmax(bad))}); "
                           "give a numeric score (0/1, a fraction or a rating)")
    keep = y.notna() & data[[obj, *facets]].notna().all(axis=1)
    notes = []
    if not keep.all():
        counts = {c: int(data[c].isna().sum()) for c in used if data[c].isna().any()}
        text = ", ".join(f"{v} missing in {k!r}" for k, v in counts.items())
        notes.append(f"{int((~keep).sum())} rows dropped ({text})")
        warnings.warn(f"gstudy: {notes[-1]}", DroppedRowsWarning, stacklevel=4)
    frame = pd.DataFrame({c: data.loc[keep, c].astype(str).to_numpy()
                          for c in dict.fromkeys([obj, *facets])})
    frame[Y] = y[keep].to_numpy(dtype=float)
    return frame, obj, list(facets), notes


def _nested_by_data(frame: pd.DataFrame, f: str, g: str) -> bool:
    """Every level of ``f`` occurs within one level of ``g`` and ``g`` has fewer levels."""
    pairs = frame[[f, g]].drop_duplicates()
    n_f, n_g = frame[f].nunique(), frame[g].nunique()
    return len(pairs) == n_f and 2 <= n_g < n_f


def find_nesting(frame: pd.DataFrame, obj: str, facets: list[str],
             nested: Mapping[str, str | Sequence[str]] | None
             ) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    given = {str(k): ((v,) if isinstance(v, str) else tuple(v))
             for k, v in dict(nested or {}).items()}
    factors = [obj, *facets]
    out = dict(given)
    notes = []
    for f in facets:
        if f in given:
            continue
        if is_replicate_role(f):
            out[f] = tuple(g for g in factors if g != f)
            notes.append(f"{f!r} read as repeats of a cell: nested within "
                         f"{' x '.join(out[f])} (pass nested={{{f!r}: ()}} if its levels "
                         "are shared)")
            continue
        parents = tuple(g for g in facets if g != f and _nested_by_data(frame, f, g))
        if parents:
            out[f] = parents
            notes.append(f"{f!r} is nested within {', '.join(parents)} in the data (each "
                         f"{f} occurs with one {parents[0]})")
    return {k: v for k, v in out.items() if v}, notes
