"""AB/BA matching: pair each pairwise judgment with its order-swapped twin, or say the design
shows each pair in one order only."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.labels import Labels
from evalmix.data.parse import _rows
from evalmix.data.table import (
    Roles,
)
from evalmix.errors import (
    EvalmixWarning,
)


def _match_pairs(
    a_names: Labels, b_names: Labels, others: list[Labels], a_first: np.ndarray
) -> dict[str, Any]:
    """Group the records of each comparison and say which orders it was judged in.

    A comparison is the unordered pair of models plus every other key (condition,
    cluster and replicate labels), so ``(X, Y, X shown first)`` pairs with ``(Y, X, Y
    shown first)`` as well as with ``(X, Y, Y shown first)``. All records of a
    comparison share its id: with one record per order that is the AB/BA pair; with
    several per order (repeated runs without a replicate column) they are kept
    together rather than paired in file order.

    Returns a dict with ``comparison`` (id per record, numbered in order of first
    appearance), ``n_orders`` (orders judged in the record's comparison), ``multi``
    (the record shares its comparison and order with another record), ``swapped`` (the
    record lists the models the other way round from the first record of its
    comparison) and ``pair_orders`` (orders in which the record's unordered model pair
    was judged, over all comparisons). Everything is computed on integer codes: the
    models' in one sorted list of both columns' names (a missing name reads "None"),
    so ``a <= b`` compares names as text does.
    """
    a_text, b_text = (np.append(m.labels, "None").astype(object) for m in (a_names, b_names))
    names = np.array(sorted(set(a_text) | set(b_text)), dtype=object)
    index = pd.Index(names)
    a = index.get_indexer(a_text)[a_names.codes]
    b = index.get_indexer(b_text)[b_names.codes]
    a_is_lo = a <= b
    lo = np.where(a_is_lo, a, b)
    hi = np.where(a_is_lo, b, a)
    key = lo * names.size + hi
    for other in others:  # missing labels (-1) are a group of their own
        key = pd.factorize(key * (len(other.labels) + 1) + (other.codes + 1))[0]
    key_id = pd.factorize(key)[0].astype(np.int64)  # numbered by first appearance
    # which model of the unordered pair was shown first: 1 = the alphabetically first
    lo_first = np.where(a_first == 1.0, a_is_lo, ~a_is_lo).astype(np.int64)
    order = np.where(np.isnan(a_first), -1, lo_first)
    n_orders = _orders_seen(key_id, order)
    per_order = key_id * 3 + (order + 1)
    multi = (np.bincount(per_order)[per_order] > 1) & (order >= 0)
    pair_orders = _orders_seen(pd.factorize(lo * names.size + hi)[0], order)
    first = np.zeros(int(key_id.max()) + 1 if key_id.size else 0, dtype=np.int64)
    first[key_id[::-1]] = np.arange(key_id.size - 1, -1, -1)
    return {"comparison": key_id, "n_orders": n_orders, "multi": multi,
            "swapped": a[first[key_id]] != a, "pair_orders": pair_orders}


def _orders_seen(group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per record, how many of the two orders (0, 1; -1 unknown) its group has."""
    size = int(group.max()) + 1 if group.size else 0
    seen = sum((np.bincount(group[order == o], minlength=size) > 0).astype(np.int64)
               for o in (0, 1))
    return np.asarray(seen)[group]


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


