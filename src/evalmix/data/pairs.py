"""AB/BA matching: pair each pairwise judgment with its order-swapped twin, or say the design
shows each pair in one order only."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.parse import _rows
from evalmix.data.table import (
    Roles,
)
from evalmix.errors import (
    EvalmixWarning,
)


def _match_pairs(
    a_names: np.ndarray, b_names: np.ndarray, others: list[np.ndarray], a_first: np.ndarray
) -> dict[str, Any]:
    """Group the records of each comparison and say which orders it was judged in.

    A comparison is the unordered pair of models plus every other key (condition,
    cluster and replicate labels), so ``(X, Y, X shown first)`` pairs with ``(Y, X, Y
    shown first)`` as well as with ``(X, Y, Y shown first)``. All records of a
    comparison share its id: with one record per order that is the AB/BA pair; with
    several per order (repeated runs without a replicate column) they are kept
    together rather than paired in file order.

    Returns a dict with ``comparison`` (id per record), ``n_orders`` (orders judged in
    the record's comparison), ``multi`` (the record shares its comparison and order
    with another record), ``swapped`` (the record lists the models the other way round
    from the first record of its comparison) and ``pair_orders`` (orders in which the
    record's unordered model pair was judged, over all comparisons).
    """
    a = np.asarray([str(v) for v in a_names], dtype=object)
    b = np.asarray([str(v) for v in b_names], dtype=object)
    a_is_lo = a <= b
    lo = np.where(a_is_lo, a, b)
    hi = np.where(a_is_lo, b, a)
    keys = pd.DataFrame({"lo": lo, "hi": hi,
                         **{f"k{i}": np.asarray(o, dtype=object) for i, o in enumerate(others)}})
    key_id = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    # which model of the unordered pair was shown first: 1 = the alphabetically first
    lo_first = np.where(a_first == 1.0, a_is_lo, ~a_is_lo).astype(np.int64)
    order = pd.Series(np.where(np.isnan(a_first), -1, lo_first))
    known = order.where(order >= 0)
    by_key = pd.DataFrame({"k": key_id, "o": order, "known": known})
    n_orders = by_key.groupby("k")["known"].transform("nunique").to_numpy()
    multi = (by_key.groupby(["k", "o"])["o"].transform("size").to_numpy() > 1) & (order >= 0)
    pair_key = pd.DataFrame({"lo": lo, "hi": hi}).groupby(["lo", "hi"]).ngroup().to_numpy()
    pair_orders = pd.Series(known).groupby(pair_key).transform("nunique").to_numpy()
    first_a = pd.Series(a).groupby(key_id).transform("first").to_numpy()
    return {"comparison": key_id.astype(np.int64), "n_orders": n_orders,
            "multi": np.asarray(multi, dtype=bool), "swapped": first_a != a,
            "pair_orders": pair_orders}


def _order_design(
    a_first: np.ndarray, m: dict[str, Any], roles: Roles, order_design: str, unmatched: str,
    problems: list[str],
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Decide matched AB/BA pairs or a single randomised order; return (pair_id, lone
    records, pairs_read)."""
    known = ~np.isnan(a_first)
    comp = m["comparison"]
    n_comp = int(comp.max()) + 1 if comp.size else 0
    single = order_design == "single" or (order_design == "auto"
                                          and not (m["n_orders"] == 2).any())
    if single:
        if known.any() and (m["pair_orders"][known] < 2).all():
            problems.append(
                f"first_shown column {roles.first_shown!r}: in every model pair the same "
                "model was always shown first, so the presentation order was not "
                "randomised and position bias cannot be told apart from the difference "
                "between the models (the records have no partner in the other order either). "
                "Fix: drop first_shown=, or add the records judged in the other order"
            )
        n = a_first.size
        return (np.arange(n, dtype=np.int64), np.zeros(n, dtype=bool),
                {"comparisons": n, "both_orders": 0, "one_order_only": n, "single_order": 1})
    lone = (m["n_orders"] == 1) & known
    per_comp = pd.Series(m["n_orders"]).groupby(comp).first()
    pairs_read = {"comparisons": n_comp, "both_orders": int((per_comp == 2).sum()),
                  "one_order_only": int((per_comp < 2).sum())}
    if m["swapped"].any():
        pairs_read["swapped_records"] = int(m["swapped"].sum())
    if m["multi"].any():
        n_multi = int(pd.unique(comp[m["multi"]]).size)
        pairs_read["multi_record_comparisons"] = n_multi
        warnings.warn(
            f"{n_multi} comparisons have several records in the same order "
            f"({int(m['multi'].sum())} records); they are kept together as one comparison, "
            "not paired in file order. If they are repeated runs, pass the column that "
            "numbers them as replicate= (e.g. replicate='rep', --replicate rep) so each "
            "run's AB and BA records are paired",
            EvalmixWarning, stacklevel=4,
        )
    if lone.any() and unmatched == "error":
        problems.append(
            f"{int(lone.sum())} records have no partner in the other order (an AB "
            f"record without its BA record or vice versa; rows {_rows(lone)}); "
            f"first_shown is column {roles.first_shown!r}. Fix: add the column that "
            "tells repeated runs apart as replicate=, remove the unmatched records, pass "
            "unmatched='drop', or order_design='single' if each comparison was judged "
            "in one randomised order"
        )
    return comp, lone, pairs_read


