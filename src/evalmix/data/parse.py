"""Parse outcome columns (0/1, scores, pairwise verdicts or winners, first-shown flags) into
numbers, naming every value that cannot be parsed and where it is."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from evalmix.data.labels import Labels, distinct_text, nfc, per_text, text_labels, value_kinds
from evalmix.errors import EvalmixWarning

_TRUE = {"true", "t", "yes", "y", "correct", "pass", "passed"}
_FALSE = {"false", "f", "no", "n", "incorrect", "fail", "failed"}
_A = {"a", "model_a", "1", "1.0"}
_B = {"b", "model_b", "0", "0.0"}
_TIE = {"tie", "draw", "equal", "0.5", "=", "tie (equal)"}
#: outcome text read as missing (compared lower-cased and stripped)
_NA_TEXT = {"", "na", "n/a", "nan", "none", "null"}
#: above this share of unreadable outcomes ``on_unparsed="auto"`` refuses the table
UNPARSED_SHARE = 0.05
#: larger outcomes are refused: their squares (sums of squares) overflow float64
MAX_ABS_OUTCOME = 1e100
#: outcomes this close to 0 or 1 are floating-point rounding of 0 or 1 (e.g.
#: ``0.1 * 3 / 0.3 = 1.0000000000000002``): snapped to it when that keeps the column in
#: [0, 1], so one rounding error does not turn a proportion into a numeric outcome
SNAP_TOL = 1e-9
#: with ``outcome_type="auto"``, a type decided by at most this share of the values
#: (e.g. one 1.5 among proportions makes the column numeric) is named in a warning
CONTRADICTED_SHARE = 0.05
#: ... in a column of at least this many values
CONTRADICTED_MIN = 10


def _is_missing_label(values: pd.Series) -> np.ndarray:
    miss = values.isna().to_numpy()
    as_str = values.astype("string")
    empty = (as_str.str.strip() == "").fillna(False).to_numpy(dtype=bool)
    return miss | empty


def _mixed_types(values: pd.Series) -> list[str]:
    if values.dtype != object:
        return []
    kinds = value_kinds(values)
    return sorted(kinds) if len(kinds) > 1 else []


def _examples(values: pd.Series | np.ndarray, n: int = 3) -> str:
    vals = pd.unique(np.asarray(values, dtype=object))[:n]
    return ", ".join(repr(v) for v in vals)


def _rows(mask: np.ndarray, n: int = 5) -> str:
    idx = np.flatnonzero(mask)[:n]
    more = "" if mask.sum() <= n else ", ..."
    return ", ".join(str(i) for i in idx) + more


def _parse_scores(
    raw: pd.Series, column: str, outcome_type: str, on_unparsed: str, problems: list[str],
    notes: list[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Return (y, na_mask, unparsed_mask, outcome_type).

    Outcomes within :data:`SNAP_TOL` of 0 or 1 are snapped to it where that keeps a
    column in [0, 1] (:func:`_snap`); with ``outcome_type="auto"`` a column whose type a
    few values decide against the rest is named (:func:`_contradicted`). Both append a
    sentence to ``notes`` (and warn).
    """
    notes = [] if notes is None else notes
    na = raw.isna().to_numpy()
    if pd.api.types.is_bool_dtype(raw.dtype):
        y = raw.astype(float).to_numpy()
        unparsed = np.zeros(len(raw), dtype=bool)
    elif pd.api.types.is_numeric_dtype(raw.dtype):
        y = raw.to_numpy(dtype=float, na_value=np.nan)
        unparsed = np.zeros(len(raw), dtype=bool)
    else:
        text = raw.astype("string").str.strip().str.lower()
        y = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        y = np.where(text.isin(_TRUE).fillna(False).to_numpy(dtype=bool), 1.0, y)
        y = np.where(text.isin(_FALSE).fillna(False).to_numpy(dtype=bool), 0.0, y)
        na = na | text.isin(_NA_TEXT).fillna(False).to_numpy(dtype=bool)
        unparsed = ~na & np.isnan(y)
        if unparsed.any() and unparsed.sum() == (~na).sum():
            problems.append(
                f"outcome column {column!r} is not numeric (values such as "
                f"{_examples(raw[unparsed])}); fix: pass a 0/1, proportion or numeric "
                "score column, or for pairwise judgments also pass model_a=, model_b="
            )
            return y, na, np.zeros(len(raw), dtype=bool), "numeric"
        _unparsed_problem(raw, unparsed, na, column, on_unparsed,
                          "numbers, 0/1 or true/false", problems)
    infinite = ~na & ~unparsed & np.isinf(y)
    if infinite.any():
        problems.append(
            f"outcome column {column!r} has {int(infinite.sum())} infinite values (rows "
            f"{_rows(infinite)}); fix: replace them with NaN to drop them, or correct them"
        )
    huge = ~na & ~unparsed & np.isfinite(y) & (np.abs(y) > MAX_ABS_OUTCOME)
    if huge.any():
        problems.append(
            f"outcome column {column!r} has {int(huge.sum())} values larger than "
            f"{MAX_ABS_OUTCOME:.0e} in absolute value (e.g. {_examples(raw[huge])}, rows "
            f"{_rows(huge)}): their squares overflow, so no variance or interval can be "
            "computed. Fix: rescale the column (e.g. to log units) or correct the values"
        )
    ok = ~na & ~unparsed & np.isfinite(y)
    if outcome_type != "numeric":
        y = _snap(raw, y, ok, column, outcome_type, notes)
    vals = y[ok]
    if outcome_type == "auto":
        if vals.size and np.isin(vals, (0.0, 1.0)).all():
            outcome_type = "binary"
        elif vals.size and (vals >= 0).all() and (vals <= 1).all():
            outcome_type = "proportion"
        else:
            outcome_type = "numeric"
        _contradicted(raw, y, ok, column, outcome_type, notes)
    elif outcome_type == "binary":
        bad = ok & ~np.isin(y, (0.0, 1.0))
        if bad.any():
            problems.append(
                f"outcome column {column!r} must be binary (0/1 or True/False) but has "
                f"{int(bad.sum())} other values (e.g. {_examples(raw[bad])}); fix: recode "
                "it to 0/1, or use outcome_type='proportion' or 'numeric'"
            )
    elif outcome_type == "proportion":
        bad = ok & ((y < 0) | (y > 1))
        if bad.any():
            problems.append(
                f"outcome column {column!r} must be a proportion in [0, 1] but has "
                f"{int(bad.sum())} values outside it (e.g. {_examples(raw[bad])}); fix: "
                "rescale it, or use outcome_type='numeric'"
            )
    return y, na, unparsed, outcome_type


def _first(raw: pd.Series, mask: np.ndarray) -> str:
    """The first value under ``mask`` and its row (0-based, as in ``_rows``)."""
    i = int(np.flatnonzero(mask)[0])
    value = raw.iloc[i]
    return f"{value.item() if isinstance(value, np.generic) else value!r} in row {i}"


def _snap(raw: pd.Series, y: np.ndarray, ok: np.ndarray, column: str, outcome_type: str,
          notes: list[str]) -> np.ndarray:
    """``y`` with the values within :data:`SNAP_TOL` of 0 or 1 set to it, when every
    value is then in [0, 1] and the type needs it: the column is otherwise binary (or
    ``outcome_type`` is ``"binary"``) or a value lies outside [0, 1]. A column whose
    every value is that near 0 or 1 is left as it is (tiny scores, not rounding)."""
    target = np.where(y < 0.5, 0.0, 1.0)
    near = ok & (np.abs(y - target) <= SNAP_TOL) & (y != target)
    if not near.any() or near[ok].all():
        # every value near 0 or 1 is not rounding but a scale (scores of size 1e-12)
        return y
    snapped = np.where(near, target, y)
    v = snapped[ok]
    in_unit = bool(((v >= 0) & (v <= 1)).all())
    binary = bool(np.isin(v, (0.0, 1.0)).all())
    outside = bool((near & ((y < 0) | (y > 1))).any())
    if not in_unit or not (binary or outside or outcome_type == "binary"):
        return y
    msg = (f"outcome column {column!r}: {int(near.sum())} value(s) within {SNAP_TOL:g} of "
           f"0 or 1 read as 0 or 1 (floating-point rounding; first {_first(raw, near)})")
    notes.append(msg)
    warnings.warn(msg, EvalmixWarning, stacklevel=5)
    return snapped


def _contradicted(raw: pd.Series, y: np.ndarray, ok: np.ndarray, column: str,
                  outcome_type: str, notes: list[str]) -> None:
    """Warn, naming the first of them, when at most :data:`CONTRADICTED_SHARE` of the
    values (or one) of a column of at least :data:`CONTRADICTED_MIN` decided
    ``outcome_type`` against the rest (all 0/1, or all in [0, 1])."""
    n = int(ok.sum())
    if outcome_type == "numeric":
        off, rest, other = ok & ((y < 0) | (y > 1)), "in [0, 1]", "proportion"
    elif outcome_type == "proportion":
        off, rest, other = ok & (y != 0) & (y != 1), "0 or 1", "binary"
    else:
        return
    k = int(off.sum())
    if k == 0 or n < CONTRADICTED_MIN or k > max(1.0, CONTRADICTED_SHARE * n):
        return
    msg = (f"outcome column {column!r} read as {outcome_type} because of {k} of {n} values "
           f"(first {_first(raw, off)}); the others are all {rest}. If those are errors, "
           f"correct them (outcome_type='{other}' refuses and lists them); if the column is "
           f"{outcome_type}, pass outcome_type='{outcome_type}' to say so")
    notes.append(msg)
    warnings.warn(msg, EvalmixWarning, stacklevel=5)


def _fold_distinct(text: pd.Series) -> np.ndarray:
    text = nfc(text).str.strip().str.casefold()
    number = pd.to_numeric(text, errors="coerce")
    keys = text.to_numpy(dtype=object, na_value=None)
    is_num = number.notna().to_numpy(dtype=bool)
    keys[is_num] = [repr(float(v)) for v in number[is_num]]
    return keys


def nfc_labels(text: pd.Series) -> np.ndarray:
    """Labels NFC-normalised and stripped (a label typed on one system and copied from
    another is one label), as an object array; missing values give None."""
    return text_labels(text).values()


def _fold(values: pd.Series | np.ndarray | Labels) -> np.ndarray:
    """Labels as matching keys: NFC, stripped, case-folded; numbers in one spelling
    (``"1"``, ``"1.0"`` and ``1`` give one key). Missing values give None."""
    if isinstance(values, Labels):
        return values.map(_fold_distinct)
    if not isinstance(values, pd.Series):
        values = pd.Series(values, dtype=object)
    return per_text(values, _fold_distinct)


def _unparsed_problem(raw: pd.Series, unparsed: np.ndarray, na: np.ndarray, column: str,
                      on_unparsed: str, expected: str, problems: list[str]) -> None:
    """Refuse unreadable outcomes unless they are a small share (or ``on_unparsed``
    says otherwise)."""
    k, m = int(unparsed.sum()), int((~na).sum())
    if k == 0 or on_unparsed == "drop":
        return
    if on_unparsed == "auto" and k <= UNPARSED_SHARE * m:
        return
    limit = ("any" if on_unparsed == "error"
             else f"more than {UNPARSED_SHARE:.0%} of the outcomes")
    problems.append(
        f"{k} of {m} non-missing outcomes in column {column!r} cannot be read (e.g. "
        f"{_examples(raw[unparsed])}); expected {expected}. With on_unparsed="
        f"{on_unparsed!r}, {limit} unreadable is an error, since it usually means a coding "
        "problem rather than stray values. Fix: recode them, or pass on_unparsed='drop' "
        "(CLI: --on-unparsed drop) to drop them (counted in table.dropped)"
    )


def _parse_pairwise(
    raw: pd.Series, a_labels: Labels, b_labels: Labels, column: str,
    outcome_kind: str, on_unparsed: str, problems: list[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (verdict codes: 1 a, 0 b, 0.5 tie, NaN; na_mask; unparsed_mask).

    A value is read as a verdict (``a``/``b``/``tie``, 1/0/0.5) or as the winning
    model's name (compared case-folded, stripped, NFC). ``outcome_kind="auto"`` takes
    the verdict reading and falls back on the name; where a model is called like a
    verdict word and the two readings disagree it is an error.
    """
    n = len(raw)
    na = raw.isna().to_numpy()
    numeric = (pd.api.types.is_numeric_dtype(raw.dtype)
               and not pd.api.types.is_bool_dtype(raw.dtype))
    codes, text = distinct_text(raw)
    keys = Labels.of(codes, _fold_distinct(text))  # matching keys (see _fold)
    na = na | keys.isin(_NA_TEXT)
    # reading 1: a verdict
    verdict = np.full(n, np.nan)
    if numeric:
        v = raw.to_numpy(dtype=float, na_value=np.nan)
        ok = np.isin(v, (0.0, 0.5, 1.0))
        verdict[ok] = v[ok]
    else:
        verdict[keys.isin(_A)] = 1.0
        verdict[keys.isin(_B)] = 0.0
        verdict[keys.isin(_TIE)] = 0.5
    # reading 2: the winner's name (or a tie word that is no model's name)
    # key == the model's key, compared as codes in the keys' distinct labels
    a_key, b_key = (Labels.of(m.codes, _fold_distinct(pd.Series(m.labels, dtype="string")))
                    .codes_in(keys.labels) for m in (a_labels, b_labels))
    is_a = (keys.codes == a_key) & (a_key >= 0) & ~na
    is_b = (keys.codes == b_key) & (b_key >= 0) & ~na
    both = is_a & is_b  # model names that differ only in case: the exact spelling decides
    a_names, b_names = a_labels.values(), b_labels.values()
    if both.any():
        exact = nfc_labels(raw.astype("string"))
        is_a[both] = exact[both] == a_names[both]
        is_b[both] = exact[both] == b_names[both]
    winner = np.where(is_a, 1.0, np.where(is_b, 0.0, np.nan))
    tie_word = keys.isin(_TIE) & ~is_a & ~is_b
    winner[tie_word] = 0.5
    if outcome_kind == "verdict":
        v = verdict
    elif outcome_kind == "winner":
        v = winner
    else:
        v = np.where(np.isnan(verdict), winner, verdict)
        clash = ~np.isnan(verdict) & (is_a | is_b) & (verdict != winner)
        if clash.any():
            names = sorted({str(x) for x in np.concatenate([a_names[clash], b_names[clash]])
                            if _fold([x])[0] in set(keys.values(clash))})
            problems.append(
                f"pairwise outcome column {column!r} is ambiguous: models named "
                f"{', '.join(repr(x) for x in names)} are also verdict words, so "
                f"{_examples(raw[clash])} in {int(clash.sum())} rows (rows {_rows(clash)}) "
                "could mean model_a/model_b/tie or the model of that name. Fix: pass "
                "outcome_kind='winner' if the column holds the winning model's name, or "
                "outcome_kind='verdict' if it holds a/b/tie (or 1/0/0.5)"
            )
    unparsed = ~na & np.isnan(v)
    bad_number = np.zeros(n, dtype=bool)
    if numeric:
        bad_number = unparsed.copy()
    elif unparsed.any():
        as_number = pd.to_numeric(pd.Series(keys.values(unparsed), dtype=object), errors="coerce")
        bad_number[np.flatnonzero(unparsed)] = as_number.notna().to_numpy(dtype=bool)
    if bad_number.any():  # e.g. "2" in a 1/2 coding: an error, not a row to drop
        problems.append(
            f"pairwise outcome column {column!r} must be 'a'/'b'/'tie' or 1/0/0.5 but "
            f"has {int(bad_number.sum())} other "
            f"{'values' if numeric else 'numbers'} (e.g. {_examples(raw[bad_number])}); "
            "fix: recode it (1 = model_a wins, 0 = model_b wins, 0.5 = tie)"
        )
        unparsed = unparsed & ~bad_number
    expected = ("'a', 'b', 'tie' (or 1/0/0.5, or the winning model's name, case and "
                "surrounding spaces ignored)")
    if unparsed.any() and unparsed.sum() == (~na & ~bad_number).sum():
        problems.append(
            f"pairwise outcome column {column!r} has no value evalmix can read (e.g. "
            f"{_examples(raw[unparsed])}); expected {expected}"
        )
        unparsed = np.zeros(n, dtype=bool)
    _unparsed_problem(raw, unparsed, na | bad_number, column, on_unparsed, expected,
                      problems)
    return v, na, unparsed


def _parse_first_shown(
    raw: pd.Series, a_labels: Labels, b_labels: Labels, column: str, problems: list[str]
) -> np.ndarray:
    """1.0 where model a's answer was shown first (``a``/``model_a``/``ab`` or model a's
    name, stripped), 0.0 for model b's, NaN otherwise; worked out on the column's
    distinct values."""
    codes, text = distinct_text(raw)
    text = text.str.strip()
    low = text.str.lower()
    word = np.full(len(text) + 1, np.nan)  # per distinct value; the last: missing
    word[:-1][low.isin({"a", "model_a", "ab"}).to_numpy(dtype=bool)] = 1.0
    word[:-1][low.isin({"b", "model_b", "ba"}).to_numpy(dtype=bool)] = 0.0
    out = word[codes]
    first = Labels.of(codes, text.to_numpy(dtype=object))
    for value, model in ((1.0, a_labels), (0.0, b_labels)):
        # the row's text equals the model's name (both missing counts as equal, as
        # comparing the two as objects does)
        same = first.codes_in(model.labels) == model.codes
        same = np.where(model.codes < 0, first.codes < 0, same & (first.codes >= 0))
        out[same & np.isnan(out)] = value
    bad = np.isnan(out)
    if bad.any():
        problems.append(
            f"first_shown column {column!r} must say which answer was shown first ('a' or "
            f"'b', or the model's name) but {int(bad.sum())} rows do not (e.g. "
            f"{_examples(raw[bad])}, rows {_rows(bad)}); fix: recode them to 'a'/'b'"
        )
    return out


