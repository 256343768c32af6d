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
the annotator the ``judge`` cluster (when there are several). Roles: ``item`` is
sampled (the claim is about new instructions), ``item_group`` is a *stratum* (the five
subsets were chosen, not sampled: intervals cluster by instruction within them, never
by subset) and ``judge`` is fixed; ``sampled=`` / ``strata=`` change that. Outcome ``y`` is
``2 - preference`` = the probability that model_a (the baseline) was preferred, so
model_b's win rate is ``1 - mean(y)`` = ``mean(preference - 1)``, AlpacaEval's win rate
(divided by 100). With probability verdicts only ``ties="half"`` applies (a
probability is not a tie).

``failures``: ``"drop"`` (default) leaves judge failures out, counted in
``table.dropped``, as AlpacaEval's own ``describe_head2head`` does
(``metrics/helpers.py``), so each model's win rate equals the leaderboard's;
``"tie"`` scores them as draws (1.5). The random order in which AlpacaEval showed the
two outputs is not in the annotations, so the table has no ``first_shown``.

Results folders: a file whose bytes repeat another's is read once, with a warning
naming both (upstream's own folders hold such copies); a file comparing the baseline
with itself (AlpacaEval writes one for the baseline, all draws) is skipped with a note;
every error names its file. Where the annotations hold the outputs, the table has
``length_a`` / ``length_b``: the characters of ``output_1`` and ``output_2``
(:mod:`evalmix.data.answers`), for the length-controlled win rate. :func:`evalmix.data.readers.upstream.alpaca_eval_leaderboard`
gives the leaderboard's own numbers (win rate, SE = sem x 100) from the table.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.answers import attach
from evalmix.data.readers._common import Source, as_paths, finish, label, load_records
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, EvalmixWarning, InvalidOptionError, check_option
from evalmix.vocabulary import AlpacaFailures

__all__ = ["read_alpaca_eval", "alpaca_eval_frame", "FAILURES", "alpaca_eval_difficulty"]

FAILURES: tuple[str, ...] = ("tie", "drop")
#: Default strata: the AlpacaEval subsets were chosen, not sampled (``item`` is sampled,
#: ``judge`` fixed); override with ``sampled=`` / ``strata=``.
STRATA: tuple[str, ...] = ("item_group",)
_NEEDED = ("instruction", "generator_1", "generator_2", "preference")


def alpaca_eval_frame(source: Source) -> tuple[pd.DataFrame, list[Path]]:
    """The annotations of ``source`` as one frame (outputs left out), with
    ``preference_value``: the preference as a float, the legacy 0 read as 1.5 and a
    judge failure as NaN; and the files read. Duplicate files are read once and files
    comparing the baseline with itself skipped (both with a warning)."""
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
        part = pd.DataFrame.from_records(records)
        for col, side in (("output_1", "length_a"), ("output_2", "length_b")):
            if col in part.columns:  # AlpacaEval's GLM counts characters: len(output)
                part[side] = part[col].map(lambda t: len(t) if isinstance(t, str) else np.nan)
        part = part.drop(columns=["output_1", "output_2", "raw_completion"], errors="ignore")
        part["file"] = str(path)
        self_rows = (part["generator_1"] == part["generator_2"]).to_numpy()
        if self_rows.all():
            warnings.warn(
                f"skipped {str(path)!r}: it compares {part['generator_1'].iloc[0]!r} with "
                "itself (AlpacaEval's baseline file, all draws)", EvalmixWarning,
                stacklevel=3)
            continue
        if self_rows.any():
            warnings.warn(
                f"{str(path)!r}: left out {int(self_rows.sum())} of {len(part)} records that "
                "compare a model with itself", EvalmixWarning, stacklevel=3)
            part = part.loc[~self_rows]
        parts.append(part)
    if not parts:
        raise EvalmixError(
            f"{label(paths)} holds only files comparing the baseline with itself; pass "
            "the results of the models to compare"
        )
    frame = pd.concat(parts, ignore_index=True)
    pref = pd.to_numeric(frame["preference"], errors="coerce").to_numpy(dtype=float)
    bad = frame["preference"].notna().to_numpy() & np.isnan(pref)
    pref = np.where(pref == 0.0, 1.5, pref)  # AlpacaEval's legacy code for a draw
    bad |= ~np.isnan(pref) & ((pref < 1) | (pref > 2))
    if bad.any():
        raise EvalmixError(
            f"{frame['file'][bad].iloc[0]!r}: {int(bad.sum())} preferences are not in "
            f"[1, 2] (e.g. {frame['preference'][bad].iloc[0]!r}); AlpacaEval codes 1 = "
            "output_1, 2 = output_2, 1.5 = draw"
        )
    frame["preference_value"] = pref
    return frame, paths


def read_alpaca_eval(source: Source, *, failures: AlpacaFailures = "drop",
                     **read_kwargs: Any) -> EvalTable:
    """Read AlpacaEval ``annotations.json`` files (one per model and annotator).

    Parameters
    ----------
    source : path, folder or list of them
        ``annotations.json`` files or a results folder (searched recursively for
        ``annotations.json``).
    failures : {"drop", "tie"}
        Judge failures (null preference): left out and counted, as the leaderboard
        does (default), or scored as draws (see the module docstring).
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
    frame, paths = alpaca_eval_frame(source)
    pref = frame["preference_value"].to_numpy(dtype=float)
    failed = np.isnan(pref)
    frame["judge_failure"] = failed
    if failed.any() and failures == "tie":
        warnings.warn(
            f"{int(failed.sum())} of {len(pref)} annotations are judge failures (null "
            "preference), scored as draws; the AlpacaEval leaderboard leaves them out "
            "(failures='drop', the default)", EvalmixWarning, stacklevel=2,
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
             "clusters": clusters, "strata": STRATA}
    table = attach(finish(frame, label(paths), roles, read_kwargs), frame,
                   ("length_a", "length_b"))
    probabilistic = bool(np.isin(p_a[~np.isnan(p_a)], (0.0, 0.5, 1.0), invert=True).any())
    if not probabilistic:
        return table
    if table.ties != "half":
        raise InvalidOptionError(
            f"ties={table.ties!r} does not apply to probability verdicts (weighted "
            "annotators give P(output_2 preferred)); use ties='half'"
        )
    data = table.frame()
    data["y"] = p_a[data["row"].to_numpy()]
    return replace(table, data=data, outcome_type="proportion")


#: upstream's weight columns (``metrics/weights/<annotator>/length_controlled_v1/``)
_W_INTERCEPT = "not_gamed_baseline.astype(float)"
_W_DIFFICULTY = "instruction_difficulty"


def alpaca_eval_difficulty(annotations: Source, weights: str | Path | pd.DataFrame
                           ) -> pd.Series:
    """AlpacaEval's instruction difficulty, recovered from annotations that keep the GLM's
    ``glm_preference``.

    Upstream reads the difficulty of its length-controlled GLM from Hugging Face
    (``instruction_difficulty.csv``). An annotation file written after the GLM ran keeps
    ``glm_preference = expit(b + g d_i)`` per instruction (two of the AlpacaEval
    repository's do: ``results/vicuna-13b-v1.5`` and ``vicuna-7b-v1.5/
    weighted_alpaca_eval_gpt4_turbo/weighted_alpaca_eval_gpt4_turbo/``), and with the
    model's fitted weights ``d_i = (logit p_i - b) / g``. Pass the result as
    ``difficulty=`` to :func:`evalmix.length_controlled_win_rate` to use upstream's.

    Parameters
    ----------
    annotations : path, folder or list of them
        ``annotations.json`` files with a ``glm_preference`` field.
    weights : path or DataFrame
        Upstream's weights (``baseline_<baseline>.csv``: one row per model, the columns
        ``instruction_difficulty`` and ``not_gamed_baseline.astype(float)``).

    Returns
    -------
    pandas.Series
        The difficulty by instruction text (the ``item`` labels of
        :func:`read_alpaca_eval`).

    Raises
    ------
    EvalmixError
        No ``glm_preference``, a model without weights, or files whose recoveries disagree
        (by more than 1e-6: their weights are not the ones that wrote them).
    """
    w = weights if isinstance(weights, pd.DataFrame) else pd.read_csv(weights, index_col=0)
    w = w[~w.index.duplicated(keep="last")]
    paths = as_paths(annotations, ("annotations.json",), "AlpacaEval annotation files")
    found: list[pd.Series] = []
    for path in paths:
        recs = [r for r in load_records(path) if r.get("glm_preference") is not None]
        if not recs:
            continue
        model = str(recs[0].get("generator_2"))
        if model not in w.index or not {_W_INTERCEPT, _W_DIFFICULTY} <= set(w.columns):
            raise EvalmixError(f"{str(path)!r}: the weights have no row for {model!r} with "
                               f"the columns {_W_DIFFICULTY} and {_W_INTERCEPT}")
        p = np.array([float(r["glm_preference"]) for r in recs])
        d = (np.log(p) - np.log1p(-p) - float(w.loc[model, _W_INTERCEPT])) \
            / float(w.loc[model, _W_DIFFICULTY])
        found.append(pd.Series(d, index=[str(r["instruction"]) for r in recs]))
    if not found:
        raise EvalmixError(f"no annotation of {label(paths)} keeps glm_preference (upstream "
                           "writes it when the length-controlled GLM ran on the file)")
    out = found[0]
    for other in found[1:]:
        common = out.index.intersection(other.index)
        gap = float(np.max(np.abs(out.loc[common] - other.loc[common]))) if len(common) else 0.0
        if gap > 1e-6:
            raise EvalmixError(f"the files' recovered difficulties differ by {gap:.3g}: their "
                               "weights are not those that wrote glm_preference")
        out = pd.concat([out, other[~other.index.isin(out.index)]])
    return out.rename("difficulty")
