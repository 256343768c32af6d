"""AlpacaEval annotations (``annotations.json``) as a pairwise table.

AlpacaEval writes ``results/<model>/<annotator>/annotations.json``: a JSON array with
one record per instruction: ``instruction``, ``dataset`` (the AlpacaEval subset:
helpful_base, koala, oasst, selfinstruct, vicuna), ``output_1`` by ``generator_1`` (the
baseline), ``output_2`` by ``generator_2`` (the evaluated model), ``annotator`` and
``preference``: 1 = output_1 preferred, 2 = output_2 preferred, 1.5 (or the legacy 0) a
draw; weighted annotators give the probability-weighted preference ``1 + P(output_2
preferred)``; a judge failure leaves it null.

Layout of the table: ``model_a`` = ``generator_1`` (baseline), ``model_b`` =
``generator_2``, the instruction is the item, the dataset the ``item_group`` cluster,
the annotator the ``judge`` cluster (when there are several). Outcome ``y`` is
``2 - preference`` = the probability that model_a (the baseline) was preferred, so
model_b's win rate is ``1 - mean(y)`` = ``mean(preference - 1)``, AlpacaEval's win rate
(divided by 100). With probability verdicts only ``ties="half"`` applies (a
probability is not a tie).

``failures``: ``"tie"`` scores a judge failure as a draw (1.5), which reproduces the
published leaderboard; ``"drop"`` leaves failures out (counted in ``table.dropped``),
which is the statistician's choice when failures are not random. The random order in
which AlpacaEval showed the two outputs is not in the annotations, so the table has
no ``first_shown``.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from evalmix.data.readers._common import Source, as_paths, finish, label, load_records
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, EvalmixWarning, check_option

__all__ = ["read_alpaca_eval", "FAILURES"]

FAILURES: tuple[str, ...] = ("tie", "drop")
_NEEDED = ("instruction", "generator_1", "generator_2", "preference")


def read_alpaca_eval(source: Source, *, failures: Literal["tie", "drop"] = "tie",
                     **read_kwargs: Any) -> EvalTable:
    """Read AlpacaEval ``annotations.json`` files (one per model and annotator).

    Parameters
    ----------
    source : path, folder or list of them
        ``annotations.json`` files or a results folder (searched recursively for
        ``annotations.json``).
    failures : {"tie", "drop"}
        Judge failures (null preference): a draw, as the leaderboard counts them, or
        left out and counted (see the module docstring).
    **read_kwargs
        Passed to :func:`evalmix.read` (``clusters=`` are added to the reader's).

    Returns
    -------
    EvalTable
        A pairwise table: ``model_a`` the baseline, outcome the probability that it was
        preferred, clusters ``item`` (instruction), ``item_group`` (dataset) and
        ``judge`` (annotator) when they have two or more levels.
    """
    check_option("failures", failures, FAILURES)
    paths = as_paths(source, ("annotations.json",), "AlpacaEval annotations")
    parts = []
    for path in paths:
        records = load_records(path)
        missing = [k for k in _NEEDED if records and k not in records[0]]
        if missing:
            raise EvalmixError(
                f"{str(path)!r} lacks the fields {missing} of AlpacaEval annotations "
                f"(instruction, generator_1, generator_2, preference)"
            )
        part = pd.DataFrame.from_records(records).drop(
            columns=["output_1", "output_2", "raw_completion"], errors="ignore")
        part["file"] = str(path)
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    pref = pd.to_numeric(frame["preference"], errors="coerce").to_numpy(dtype=float)
    bad = frame["preference"].notna().to_numpy() & np.isnan(pref)
    pref = np.where(pref == 0.0, 1.5, pref)  # AlpacaEval's legacy code for a draw
    bad |= ~np.isnan(pref) & ((pref < 1) | (pref > 2))
    if bad.any():
        raise EvalmixError(
            f"{int(bad.sum())} preferences are not in [1, 2] (e.g. "
            f"{frame['preference'][bad].iloc[0]!r}); AlpacaEval codes 1 = output_1, "
            "2 = output_2, 1.5 = draw"
        )
    failed = np.isnan(pref)
    if failed.any() and failures == "tie":
        warnings.warn(
            f"{int(failed.sum())} of {len(pref)} annotations are judge failures (null "
            "preference), scored as draws as the AlpacaEval leaderboard does; "
            "failures='drop' leaves them out", EvalmixWarning, stacklevel=2,
        )
        pref = np.where(failed, 1.5, pref)
    p_a = 2.0 - pref
    frame["y_a"] = p_a
    p = np.asarray(p_a, dtype=float)
    verdict = np.full(p.shape, None, dtype=object)  # None: no preference recorded
    verdict[p > 0.5], verdict[p < 0.5], verdict[p == 0.5] = "a", "b", "tie"
    frame["verdict"] = verdict
    clusters = {"item": "instruction"}
    for role, col in (("item_group", "dataset"), ("judge", "annotator")):
        if col in frame.columns and frame[col].nunique() > 1:
            clusters[role] = col
    roles = {"outcome": "verdict", "model_a": "generator_1", "model_b": "generator_2",
             "clusters": clusters}
    table = finish(frame, label(paths), roles, read_kwargs)
    probabilistic = bool(np.isin(p_a[~np.isnan(p_a)], (0.0, 0.5, 1.0), invert=True).any())
    if not probabilistic:
        return table
    if table.ties != "half":
        raise EvalmixError(
            f"ties={table.ties!r} does not apply to probability verdicts (weighted "
            "annotators give P(output_2 preferred)); use ties='half'"
        )
    data = table.frame()
    data["y"] = p_a[data["row"].to_numpy()]
    return replace(table, data=data, outcome_type="proportion")
