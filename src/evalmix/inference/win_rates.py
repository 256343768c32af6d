"""Win rates as regression problems: ``win_rate`` and ``controlled_win_rate``.

A pairwise table's rows scored for one model (:func:`_oriented`), the win rate as the
intercept of ``y ~ 1``, and the position-controlled win rate as the intercept of
``y ~ 1 + (s - 1/2)`` within matched AB/BA pairs or, on a single randomised order, by
standardisation over both orders (the cases are described in
:mod:`evalmix.inference.estimands`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix.errors import DroppedRowsWarning, EvalmixError, InvalidOptionError
from evalmix.inference.linear_problem import LinearProblem, _label_column, _problem, _unique_label

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

def _oriented(table: EvalTable, frame: pd.DataFrame, model: str | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, str]:
    """(mask, y scored for ``model``, 'scored model shown first' indicator, who, opponent)."""
    ma = frame["model_a"].astype(str).to_numpy()
    mb = frame["model_b"].astype(str).to_numpy()
    y = frame["y"].to_numpy(dtype=float)
    a_first = frame["a_first"].to_numpy(dtype=float)
    if model is None:
        mask = np.ones(len(frame), dtype=bool)
        who = _unique_label(frame["model_a"], "model_a")
        opp = _unique_label(frame["model_b"], "others")
        return mask, y, a_first, who, opp
    model = str(model)
    is_a, is_b = ma == model, mb == model
    mask = is_a | is_b
    if not mask.any():
        models = sorted(set(ma) | set(mb))
        raise InvalidOptionError(
            f"model {model!r} plays in no comparison; models: "
            f"{', '.join(repr(m) for m in models[:30])}"
        )
    if table.ties == "separate":
        won_b = (frame["verdict"].astype(str).to_numpy() == "b").astype(float)
    else:
        won_b = 1.0 - y
    ys = np.where(is_a, y, won_b)
    first = np.where(is_a, a_first, 1.0 - a_first)
    opp_vals = np.where(is_a, mb, ma)[mask]
    opp = str(opp_vals[0]) if len(set(opp_vals)) == 1 else "others"
    return mask, ys, first, model, opp


def _scored_for_labels(table: EvalTable, conditions: Sequence[str] | None,
                       contrast: str | None) -> EvalTable:
    """A pairwise table re-scored so that ``y`` is the score of the models being compared.

    A difference ``B - A`` of two ``model_b`` labels (one-baseline designs) is the
    difference of *their* win rates: ``y`` becomes ``model_b``'s score (``1 - y``, or the
    strict ``"b"`` verdict under ``ties="separate"``). Labels of ``model_a`` (or a
    ``condition`` column) keep the table's own scoring, ``model_a``'s.
    """
    labels: list[str] = []
    if conditions is not None and not isinstance(conditions, str):
        labels = [str(c) for c in conditions]
    elif contrast is not None:
        labels = [x.strip() for x in str(contrast).split(" - ")]
    d = table.data
    if "condition" in d.columns:
        return table
    if labels:
        in_b = set(d["model_b"].astype(str).unique())
        if not all(lab in in_b for lab in labels):
            return table
    elif d["model_b"].nunique() < 2:
        return table
    frame = table.frame()
    if table.ties == "separate":
        frame["y"] = (frame["verdict"].astype(str) == "b").astype(float)
    else:
        frame["y"] = 1.0 - frame["y"].to_numpy(dtype=float)
    return replace(table, data=frame, _codes={})


def _require_pairwise(table: EvalTable, estimand: str) -> None:
    if table.kind != "pairwise":
        raise EvalmixError(
            f"{estimand} needs a pairwise table (model_a/model_b columns); this is a "
            "score table: use estimand='mean' or 'difference'"
        )


def _win_rate(table: EvalTable, contrast: str | None, model: str | None,
              controlled: bool) -> LinearProblem:
    estimand = "controlled_win_rate" if controlled else "win_rate"
    _require_pairwise(table, estimand)
    d = table.data
    base = np.ones(table.n_obs, dtype=bool)
    if contrast is not None:
        col = _label_column(table, [contrast], estimand)
        if model is None and col in ("model_a", "model_b"):
            # the win rate of the model the contrast names, on every row it plays
            model = str(contrast)
        else:
            base = d[col].astype(str).to_numpy() == str(contrast)
    sel, ys, first, who, opp = _oriented(table, d, model)
    mask = base & sel
    details: dict[str, Any] = {"scored_for": who, "ties": table.ties}
    label = f"{who} vs {opp}"
    if not controlled:
        return _problem(np.ones((mask.sum(), 1)), ys[mask], 0, ("(Intercept)",), table, mask,
                        estimand=estimand, contrast=label, null=0.5, details=details)
    if not table.has_order:
        raise EvalmixError(
            "controlled_win_rate needs to know which answer was shown first; read the "
            "table with first_shown=..."
        )
    if table.single_order:
        return _standardised_win_rate(table, mask, ys, first, label, details)
    pid = d["pair_id"].to_numpy()
    known = mask & np.isfinite(first) & (pid >= 0)
    f = pd.DataFrame({"pid": pid[known], "first": first[known]})
    g = f.groupby("pid")["first"].agg(["min", "max"])
    complete_ids = g.index[(g["min"] == 0) & (g["max"] == 1)]
    complete = known & np.isin(pid, complete_ids.to_numpy())
    n_drop = int(mask.sum() - complete.sum())
    if not complete.any():
        raise EvalmixError(
            "controlled_win_rate found no complete AB/BA pair (both orders of one "
            "comparison); use estimand='win_rate'"
        )
    if n_drop:
        warnings.warn(
            f"controlled_win_rate uses complete AB/BA pairs only: {n_drop} of "
            f"{int(mask.sum())} rows without their other-order partner were left out",
            DroppedRowsWarning, stacklevel=4,
        )
    details.update(n_pairs=len(complete_ids), rows_without_partner=n_drop,
                   method="within matched AB/BA pairs")
    X = np.column_stack([np.ones(complete.sum()), first[complete] - 0.5])
    return _problem(X, ys[complete], 0, ("(Intercept)", "position"), table, complete,
                    estimand=estimand, contrast=label, null=0.5, details=details)


def _standardised_win_rate(table: EvalTable, mask: np.ndarray, ys: np.ndarray,
                           first: np.ndarray, label: str, details: dict[str, Any]
                           ) -> LinearProblem:
    """Single randomised order: ``y ~ 1 + (s - 1/2)`` over every row of the comparison.

    The intercept is ``(mean(y | first) + mean(y | second)) / 2``, the fitted model
    averaged over both orders (standardisation to a balanced order).

    References
    ----------
    Hernan, M. A. and Robins, J. M. (2006). Estimating causal effects from
    epidemiological data. J Epidemiol Community Health 60, 578-586 (standardisation).
    https://doi.org/10.1136/jech.2004.029496
    """
    known = mask & np.isfinite(first)
    s = first[known]
    n_first = int((s == 1).sum())
    if n_first in (0, s.size):
        raise EvalmixError(
            f"controlled_win_rate [{label}]: the scored model was shown "
            f"{'first' if n_first else 'second'} in all {s.size} of its rows, so the win "
            "rate cannot be adjusted for position; use estimand='win_rate'"
        )
    details.update(method="standardisation over both orders (single randomised order)",
                   n_first=n_first, n_second=int(s.size - n_first))
    X = np.column_stack([np.ones(s.size), s - 0.5])
    return _problem(X, ys[known], 0, ("(Intercept)", "position"), table, known,
                    estimand="controlled_win_rate", contrast=label, null=0.5,
                    details=details)
