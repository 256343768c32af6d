"""Read a long-format eval table from a file or DataFrame and validate it once.

:func:`read` is the only way to build an :class:`~evalmix.data.table.EvalTable`. It
collects *every* problem it finds and raises them together in one
:class:`~evalmix.errors.InvalidTableError`, each naming the column and a fix. The
caller's DataFrame is never modified.
"""

from __future__ import annotations

import codecs
import json
import os
import tomllib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES

from evalmix.data.table import (
    INTERACTION_SEP,
    OUTCOME_TYPES,
    RESERVED_NAMES,
    TIE_POLICIES,
    EvalTable,
    Roles,
    add_interactions,
)
from evalmix.errors import (
    DroppedRowsWarning,
    EvalmixError,
    EvalmixWarning,
    InvalidOptionError,
    InvalidTableError,
    check_option,
)

__all__ = ["read", "load_frame"]

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
_ROLE_KEYS = ("outcome", "condition", "model_a", "model_b", "first_shown", "position",
              "clusters", "ties", "replicate", "sampled", "outcome_kind")
ORDER_DESIGNS: tuple[str, ...] = ("auto", "matched", "single")
OUTCOME_KINDS: tuple[str, ...] = ("auto", "verdict", "winner")
UNPARSED_POLICIES: tuple[str, ...] = ("auto", "error", "drop")


def load_frame(
    source: str | os.PathLike[str] | pd.DataFrame,
    *,
    text_columns: Iterable[str] = (),
    encoding: str | None = None,
) -> tuple[pd.DataFrame, str]:
    """Load ``source`` (CSV/TSV, Parquet, JSONL or a DataFrame) without modifying it.

    ``text_columns`` (id columns) are read from CSV files as text, with no NA markers,
    so ids such as ``"007"`` and ``"7"`` stay distinct and ``"NA"``, ``"nan"`` or
    ``"null"`` (a language code, a model name) stay ids, as they do in JSONL and Parquet
    files; other CSV columns keep pandas' NA markers. JSON values keep their JSON types
    (no coercion of numeric-looking strings or dates). A column name that occurs twice
    in a CSV header or a JSON record, a malformed JSON line (named by its line number),
    a CSV whose header shows another separator and text that is not in ``encoding``
    (default UTF-8) are errors. A DataFrame is returned as is.
    """
    if isinstance(source, pd.DataFrame):
        return source, "DataFrame"
    if not isinstance(source, str | os.PathLike):
        raise EvalmixError(
            f"source must be a file path or a pandas DataFrame, got {type(source).__name__}; "
            "pass a path to a .csv/.tsv/.parquet/.jsonl file or a DataFrame"
        )
    path = Path(source)
    if not path.exists():
        raise EvalmixError(f"no such file: {str(path)!r}; check the path")
    if path.is_dir():
        raise EvalmixError(f"{str(path)!r} is a folder; pass the path of one table file")
    if encoding is not None:
        try:
            codecs.lookup(encoding)
        except LookupError as exc:
            raise InvalidOptionError(
                f"encoding={encoding!r} is not a known text encoding; use e.g. 'utf-8', "
                "'latin-1' or 'cp1252'") from exc
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    try:
        if name.endswith((".csv", ".txt")):
            frame = _read_delimited(path, ",", tuple(text_columns), encoding)
        elif name.endswith(".tsv"):
            frame = _read_delimited(path, "\t", tuple(text_columns), encoding)
        elif name.endswith((".parquet", ".pq")):
            frame = pd.read_parquet(path)
        elif name.endswith((".jsonl", ".ndjson")):
            frame = _read_json_lines(path, encoding)
        elif name.endswith(".json"):
            if _first_char(path, encoding) == "[":  # a JSON array of records
                frame = _read_json_array(path, encoding)
            else:
                try:
                    frame = _read_json_lines(path, encoding)
                except _BadJsonLine:
                    frame = pd.read_json(path, dtype=False, encoding=encoding)
        else:
            raise EvalmixError(
                f"cannot read {str(path)!r}: unknown file type {path.suffix!r}; use .csv, "
                ".tsv, .parquet, .jsonl, or load it yourself and pass the DataFrame"
            )
    except EvalmixError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise InvalidTableError([
            f"the file {str(path)!r} is empty (no header, 0 rows); check the file"
        ]) from exc
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start:exc.start + 1].hex()
        raise EvalmixError(
            f"could not read {str(path)!r} as {encoding or 'utf-8'}: byte 0x{bad} at "
            f"position {exc.start} is not valid there. The file is probably latin-1 or "
            "cp1252 (common for spreadsheet exports): pass encoding='latin-1' "
            "(CLI: --encoding latin-1), or save the file as UTF-8"
        ) from exc
    except (ValueError, OSError, pd.errors.ParserError, ImportError) as exc:
        raise EvalmixError(
            f"could not read {str(path)!r} ({type(exc).__name__}: {exc}); check that the "
            "file is a valid table of its type, or load it yourself and pass the DataFrame"
        ) from exc
    return frame, str(path)


#: separators a delimited file may really use, by name (for the error message)
_SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _read_delimited(path: Path, sep: str, text_columns: tuple[str, ...],
                    encoding: str | None) -> pd.DataFrame:
    """CSV/TSV with id columns as NA-free text and duplicated header names refused."""
    header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str,
                         keep_default_na=False, encoding=encoding)
    names = [str(v) for v in header.iloc[0]] if len(header) else []
    for other, label in _SEPARATORS.items():
        if other != sep and len(names) == 1 and other in names[0]:
            expect = _SEPARATORS[sep]
            fix = {"\t": "rename it to .tsv", ",": "rename it to .csv"}.get(
                other, f"load it with pandas.read_csv(path, sep={other!r}) and pass the "
                "DataFrame to evalmix.read")
            raise EvalmixError(
                f"{str(path)!r} looks {label}-separated, not {expect}-separated: its header "
                f"line reads {names[0][:80]!r}. Fix: {fix}, or save it {expect}-separated")
    seen: set[str] = set()
    dups = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dups:
        raise InvalidTableError([
            f"column name {d!r} occurs {names.count(d)} times in the header of "
            f"{str(path)!r}; rename the copies so each column has a unique name"
            for d in dups])
    columns = pd.read_csv(path, sep=sep, nrows=0, encoding=encoding).columns
    text = {resolve_column(c, columns) for c in text_columns}
    return pd.read_csv(
        path, sep=sep, encoding=encoding, dtype={c: str for c in columns if c in text},
        keep_default_na=False,
        na_values={c: sorted(STR_NA_VALUES) for c in columns if c not in text})


class _BadJsonLine(EvalmixError):
    """A line of a JSON Lines file that is not one JSON object."""


class _RepeatedKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def _open_text(path: Path, encoding: str | None):
    import gzip

    # utf-8-sig: UTF-8 that skips a byte-order mark (as pandas does for CSV)
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding=encoding or "utf-8-sig")
    return path.open(encoding=encoding or "utf-8-sig")


def _read_json_lines(path: Path, encoding: str | None) -> pd.DataFrame:
    records: list[dict[str, Any]] = []
    with _open_text(path, encoding) as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            try:
                rec = json.loads(text, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as exc:
                raise _BadJsonLine(
                    f"line {lineno} of {str(path)!r} is not valid JSON ({exc.msg} at "
                    f"character {exc.colno}): {text[:60]!r}; fix or remove that line"
                ) from exc
            except _RepeatedKey as exc:
                raise InvalidTableError([
                    f"line {lineno} of {str(path)!r} gives the key {exc.key!r} twice; "
                    "rename the copies so each column has a unique name"]) from None
            if not isinstance(rec, dict):
                raise _BadJsonLine(
                    f"line {lineno} of {str(path)!r} is a JSON {type(rec).__name__}, not an "
                    "object; each line must be one record like {\"item\": \"q1\", ...}")
            records.append(rec)
    return pd.DataFrame.from_records(records) if records else pd.DataFrame()


def _read_json_array(path: Path, encoding: str | None) -> pd.DataFrame:
    with _open_text(path, encoding) as fh:
        try:
            data = json.load(fh, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise EvalmixError(
                f"{str(path)!r} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                f"character {exc.colno}); fix the file") from exc
        except _RepeatedKey as exc:
            raise InvalidTableError([
                f"a record of {str(path)!r} gives the key {exc.key!r} twice; rename the "
                "copies so each column has a unique name"]) from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise EvalmixError(f"{str(path)!r} must be a JSON array of records (objects)")
    return pd.DataFrame.from_records(data) if data else pd.DataFrame()


def _first_char(path: Path, encoding: str | None = None) -> str:
    """First non-blank character of a (possibly gzipped) text file."""
    with _open_text(path, encoding) as fh:
        for line in fh:
            if line.strip():
                return line.strip()[0]
    return ""


_ROLE_STR_KEYS = ("outcome", "condition", "model_a", "model_b", "first_shown", "position",
                  "ties", "replicate", "outcome_kind")


def _load_roles(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise EvalmixError(f"roles file {str(p)!r} does not exist; check the path")
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not TOML syntax
        spec = tomllib.loads(p.read_bytes().decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EvalmixError(
            f"roles file {str(p)!r} is not valid TOML: {exc}; see docs/examples/roles.toml"
        ) from exc
    problems = []
    unknown = sorted(set(spec) - set(_ROLE_KEYS))
    if unknown:
        problems.append(
            f"unknown keys {unknown}; allowed keys: {', '.join(_ROLE_KEYS)} (clusters is "
            'a table: [clusters] judge = "judge")'
        )
    for key in _ROLE_STR_KEYS:
        if key in spec and not isinstance(spec[key], str):
            problems.append(
                f"{key} must be a column name in quotes, e.g. {key} = \"{key}\"; got "
                f"{spec[key]!r}"
            )
    if "clusters" in spec:
        cl = spec["clusters"]
        if not isinstance(cl, dict) or not all(isinstance(v, str) for v in cl.values()):
            problems.append(
                "clusters must be a table mapping role names to column names, e.g. "
                f'[clusters] item = "item_id"; got {cl!r}'
            )
    if "sampled" in spec and not (isinstance(spec["sampled"], list)
                                  and all(isinstance(v, str) for v in spec["sampled"])):
        problems.append(
            "sampled must be a list of cluster role names, e.g. sampled = [\"scenario\", "
            f"\"persona\"]; got {spec['sampled']!r}"
        )
    if problems:
        raise EvalmixError(f"roles file {str(p)!r}: " + "; ".join(problems))
    return spec


def _is_missing_label(values: pd.Series) -> np.ndarray:
    miss = values.isna().to_numpy()
    as_str = values.astype("string")
    empty = (as_str.str.strip() == "").fillna(False).to_numpy(dtype=bool)
    return miss | empty


def _mixed_types(values: pd.Series) -> list[str]:
    if values.dtype != object:
        return []
    kinds = {type(v).__name__ for v in values.dropna().to_numpy()}
    kinds = {"int" if k.startswith(("int", "uint")) else "float" if k.startswith("float")
             else k.rstrip("_") for k in kinds}
    return sorted(kinds) if len(kinds) > 1 else []


def _examples(values: pd.Series | np.ndarray, n: int = 3) -> str:
    vals = pd.unique(np.asarray(values, dtype=object))[:n]
    return ", ".join(repr(v) for v in vals)


def _rows(mask: np.ndarray, n: int = 5) -> str:
    idx = np.flatnonzero(mask)[:n]
    more = "" if mask.sum() <= n else ", ..."
    return ", ".join(str(i) for i in idx) + more


def _parse_scores(
    raw: pd.Series, column: str, outcome_type: str, on_unparsed: str, problems: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Return (y, na_mask, unparsed_mask, outcome_type)."""
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
    vals = y[ok]
    if outcome_type == "auto":
        if vals.size and np.isin(vals, (0.0, 1.0)).all():
            outcome_type = "binary"
        elif vals.size and (vals >= 0).all() and (vals <= 1).all():
            outcome_type = "proportion"
        else:
            outcome_type = "numeric"
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


def _fold(values: pd.Series | np.ndarray) -> np.ndarray:
    """Labels as matching keys: NFC, stripped, case-folded; numbers in one spelling
    (``"1"``, ``"1.0"`` and ``1`` give one key). Missing values give None."""
    text = pd.Series(values, dtype=object).astype("string").str.normalize("NFC")
    text = text.str.strip().str.casefold()
    number = pd.to_numeric(text, errors="coerce")
    keys = text.to_numpy(dtype=object, na_value=None)
    is_num = number.notna().to_numpy(dtype=bool)
    keys[is_num] = [repr(float(v)) for v in number[is_num]]
    return keys


def _isin(keys: np.ndarray, words: Iterable[str]) -> np.ndarray:
    return pd.Series(keys, dtype=object).isin(set(words)).to_numpy(dtype=bool)


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
    raw: pd.Series, a_names: np.ndarray, b_names: np.ndarray, column: str,
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
    key = _fold(raw)
    na = na | _isin(key, _NA_TEXT)
    # reading 1: a verdict
    verdict = np.full(n, np.nan)
    if numeric:
        v = raw.to_numpy(dtype=float, na_value=np.nan)
        ok = np.isin(v, (0.0, 0.5, 1.0))
        verdict[ok] = v[ok]
    else:
        verdict[_isin(key, _A)] = 1.0
        verdict[_isin(key, _B)] = 0.0
        verdict[_isin(key, _TIE)] = 0.5
    # reading 2: the winner's name (or a tie word that is no model's name)
    a_key, b_key = _fold(a_names), _fold(b_names)
    is_a = (key == a_key) & ~na
    is_b = (key == b_key) & ~na
    both = is_a & is_b  # model names that differ only in case: the exact spelling decides
    if both.any():
        exact = raw.astype("string").str.normalize("NFC").str.strip().to_numpy(
            dtype=object, na_value=None)
        is_a[both] = exact[both] == a_names[both]
        is_b[both] = exact[both] == b_names[both]
    winner = np.where(is_a, 1.0, np.where(is_b, 0.0, np.nan))
    tie_word = _isin(key, _TIE) & ~is_a & ~is_b
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
                            if _fold([x])[0] in set(key[clash])})
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
        as_number = pd.to_numeric(pd.Series(key[unparsed], dtype=object), errors="coerce")
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
    raw: pd.Series, a_names: np.ndarray, b_names: np.ndarray, column: str, problems: list[str]
) -> np.ndarray:
    text = raw.astype("string").str.strip()
    low = text.str.lower()
    out = np.full(len(raw), np.nan)
    out[low.isin({"a", "model_a", "ab"}).fillna(False).to_numpy(dtype=bool)] = 1.0
    out[low.isin({"b", "model_b", "ba"}).fillna(False).to_numpy(dtype=bool)] = 0.0
    t = text.to_numpy(dtype=object, na_value=None)
    out[(t == a_names) & np.isnan(out)] = 1.0
    out[(t == b_names) & np.isnan(out)] = 0.0
    bad = np.isnan(out)
    if bad.any():
        problems.append(
            f"first_shown column {column!r} must say which answer was shown first ('a' or "
            f"'b', or the model's name) but {int(bad.sum())} rows do not (e.g. "
            f"{_examples(raw[bad])}, rows {_rows(bad)}); fix: recode them to 'a'/'b'"
        )
    return out


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


def read(
    source: str | os.PathLike[str] | pd.DataFrame,
    *,
    outcome: str | None = None,
    condition: str | None = None,
    model_a: str | None = None,
    model_b: str | None = None,
    first_shown: str | None = None,
    position: str | None = None,
    clusters: Mapping[str, str] | None = None,
    ties: Literal["exclude", "half", "separate"] | None = None,
    roles: str | os.PathLike[str] | None = None,
    outcome_type: Literal["auto", "binary", "proportion", "numeric"] = "auto",
    unmatched: Literal["error", "drop"] = "error",
    replicate: str | None = None,
    order_design: Literal["auto", "matched", "single"] = "auto",
    sampled: Sequence[str] | None = None,
    on_unparsed: Literal["auto", "error", "drop"] = "auto",
    outcome_kind: Literal["auto", "verdict", "winner"] | None = None,
    encoding: str | None = None,
) -> EvalTable:
    """Read and validate a long-format eval table.

    Parameters
    ----------
    source : path or pandas.DataFrame
        CSV/TSV, Parquet, JSONL file, or a DataFrame (never modified).
    outcome : str
        Column with the score (scores tables) or the verdict (pairwise tables:
        ``'a'``/``'b'``/``'tie'``/NA, 1/0/0.5, or the winning model's name).
    condition : str, optional
        Column with the condition or model being scored.
    model_a, model_b : str, optional
        Columns naming the two compared models; giving them makes the table pairwise.
    first_shown : str, optional
        Pairwise: column saying whose answer was shown first (``'a'``/``'b'``); enables
        AB/BA matching and position-bias terms.
    position : str, optional
        Scores tables: a position covariate column. Refused on pairwise tables (their
        position is ``first_shown=``).
    clusters : mapping of role name to column, optional
        Cluster factors, e.g. ``{"scenario": "scenario_id", "judge": "judge"}``. Role
        names are free (scenario, persona, author, judge, item, passage, template,
        epoch, ...) but may not be one of the canonical column names. A value that
        joins other roles with ``:`` (``{"cell": "persona:scenario:author"}``) defines an
        *interaction cell*: one cluster per combination of their levels (e.g. the unit
        that generated one output).
    ties : {"exclude", "half", "separate"}, default "half"
        Pairwise tie policy: drop ties (counted), score them 0.5, or keep them as a third
        outcome.
    roles : path, optional
        TOML file with the same keys (``outcome``, ``condition``, ..., ``ties`` and a
        ``[clusters]`` table; see ``docs/examples/roles.toml``). Keyword arguments
        override it; ``clusters=`` entries are merged into its ``[clusters]`` table.
    outcome_type : {"auto", "binary", "proportion", "numeric"}
        Scores tables: force the outcome type ("binary" makes non-0/1 values an error).
        Pairwise tables: "binary" makes ties under ``ties="half"`` an error.
    sampled : sequence of str, optional
        The cluster roles the claim generalises over (new scenarios, personas,
        items...). Default: every role except judge-like (``judge``, ``rater``, ...)
        and replicate-like (``rep``, ``epoch``, ``run``, ...) ones, which are fixed. The
        report's recommended interval accounts for every sampled role. Also a roles-file
        key: ``sampled = ["scenario", "persona"]``.
    unmatched : {"error", "drop"}
        Pairwise with ``first_shown`` in a matched design: what to do with AB records
        lacking a BA record (or vice versa). The records of one comparison (same
        unordered model pair, condition, cluster and replicate labels) share a
        ``pair_id``, also when the BA record lists the two models the other way round.
    replicate : str, optional
        Column numbering repeated runs of the same item and condition (Inspect epochs,
        repeated judge runs). Replicates are nested within the item or comparison:
        AB/BA records are matched within a replicate, and the replicate is never a
        cluster factor. Without it, several records per comparison and order are kept
        together as one comparison and a warning gives their count.
    order_design : {"auto", "matched", "single"}
        Pairwise with ``first_shown``. ``"matched"``: each comparison is judged in both
        orders (AB/BA pairs; records without a partner are an error or dropped, see
        ``unmatched``). ``"single"``: each record is a comparison judged in one
        randomised order (AlpacaEval, Chatbot Arena); position bias is then estimated
        as a covariate. ``"auto"`` (default): single when no comparison has both
        orders, matched otherwise. A single-order table must show each model pair in
        both orders somewhere, or position could not be told from the models.
    on_unparsed : {"auto", "error", "drop"}
        Outcomes that cannot be read (neither NA nor a score or verdict): ``"auto"``
        drops them (counted) when they are at most 5% of the non-missing outcomes and
        refuses the table otherwise (a share that large is a coding problem, e.g.
        ``"100%"`` strings or misspelt model names); ``"error"`` refuses any;
        ``"drop"`` drops all.
    outcome_kind : {"auto", "verdict", "winner"}, default "auto"
        Pairwise: what the outcome holds. ``"verdict"``: ``a``/``b``/``tie`` or
        1/0/0.5; ``"winner"``: the winning model's name (or a tie word); ``"auto"``:
        either, which is an error where a model is named like a verdict word (``a``,
        ``b``, ``0``, ``1``, ``tie``) and the two readings disagree.
    encoding : str, optional
        Text encoding of a CSV/TSV/JSON file (default UTF-8), e.g. ``"latin-1"``.

    Notes
    -----
    Id columns (clusters, condition, models, first_shown) are read from CSV files as
    text and compared as stripped strings, so CSV, Parquet, JSONL and DataFrame inputs
    give identical tables. Rows with an NA or unparsed outcome, excluded ties and
    dropped unmatched records are counted in ``table.dropped`` and announced by one
    :class:`~evalmix.errors.DroppedRowsWarning`. See ``docs/data.md``.

    Returns
    -------
    EvalTable

    Raises
    ------
    InvalidTableError
        Listing every problem found, each with the column and a fix.

    Examples
    --------
    >>> import pandas as pd, evalmix
    >>> df = pd.DataFrame({"q": ["q1", "q1", "q2", "q2"], "model": ["x", "y", "x", "y"],
    ...                    "correct": [1, 0, 1, 1]})
    >>> t = evalmix.read(df, outcome="correct", condition="model", clusters={"item": "q"})
    >>> t.n_obs, t.outcome_type
    (4, 'binary')
    """
    spec: dict[str, Any] = _load_roles(roles) if roles is not None else {}
    given = {"outcome": outcome, "condition": condition, "model_a": model_a,
             "model_b": model_b, "first_shown": first_shown, "position": position,
             "ties": ties, "replicate": replicate}
    for key, value in given.items():
        if value is not None:
            spec[key] = value
    if clusters is not None:
        if not isinstance(clusters, Mapping):
            raise EvalmixError(
                "clusters must map role names to columns, e.g. "
                f"{{'item': 'item_id'}}; got {type(clusters).__name__}"
            )
        spec["clusters"] = {**spec.get("clusters", {}), **dict(clusters)}
    if outcome_kind is not None:
        spec["outcome_kind"] = outcome_kind
    ties_policy = spec.get("ties", "half")
    kind_of_outcome = spec.get("outcome_kind", "auto")
    check_option("ties", ties_policy, TIE_POLICIES)
    check_option("outcome_type", outcome_type, OUTCOME_TYPES)
    check_option("unmatched", unmatched, ("error", "drop"))
    check_option("order_design", order_design, ORDER_DESIGNS)
    check_option("on_unparsed", on_unparsed, UNPARSED_POLICIES)
    check_option("outcome_kind", kind_of_outcome, OUTCOME_KINDS)
    if spec.get("outcome") is None:
        raise InvalidOptionError(
            "outcome= is required: name the column that holds the score or verdict, "
            "e.g. evalmix.read(df, outcome='correct')"
        )
    if sampled is not None:
        spec["sampled"] = [sampled] if isinstance(sampled, str) else list(sampled)
    all_clusters = {str(k): str(v) for k, v in dict(spec.get("clusters", {})).items()}
    interactions = _interaction_roles(all_clusters)
    role_map = Roles(
        outcome=str(spec["outcome"]),
        condition=_name(spec.get("condition")),
        model_a=_name(spec.get("model_a")),
        model_b=_name(spec.get("model_b")),
        first_shown=_name(spec.get("first_shown")),
        position=_name(spec.get("position")),
        clusters={k: v for k, v in all_clusters.items() if k not in interactions},
        replicate=_name(spec.get("replicate")),
    )
    text_columns = [c for c in (role_map.condition, role_map.model_a, role_map.model_b,
                                role_map.first_shown, role_map.replicate,
                                *role_map.clusters.values())
                    if c is not None]
    frame, source_name = load_frame(source, text_columns=text_columns, encoding=encoding)
    role_map = _resolve_roles(role_map, frame.columns)
    table = _validate(frame, role_map, ties_policy, outcome_type, unmatched, source_name,
                      order_design, on_unparsed=on_unparsed, outcome_kind=kind_of_outcome)
    if interactions:
        table = add_interactions(table, interactions)
    return table.with_sampled(spec.get("sampled"))


def _interaction_roles(clusters: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Roles whose value joins other roles with ':' (interaction cells) -> their parts."""
    out: dict[str, tuple[str, ...]] = {}
    for role, value in clusters.items():
        if INTERACTION_SEP not in value:
            continue
        parts = tuple(p.strip() for p in value.split(INTERACTION_SEP))
        plain = [p for p in parts if p in clusters and INTERACTION_SEP not in clusters[p]]
        if len(plain) == len(parts) and len(set(parts)) == len(parts) >= 2:
            out[role] = parts
        elif any(p in clusters for p in parts):
            missing = [p for p in parts if p not in clusters]
            raise EvalmixError(
                f"cluster role {role!r} = {value!r} looks like an interaction cell, but "
                f"{', '.join(repr(m) for m in missing) or 'a part'} is not a cluster role "
                "(or names a role twice); an interaction joins two or more other roles "
                "with ':', e.g. clusters={'persona': 'persona_id', 'scenario': "
                "'scenario_id', 'cell': 'persona:scenario'}"
            )
    return out


def resolve_column(name: str, columns: Iterable[Any]) -> str:
    """``name`` if it is a column; else the one column equal to it up to surrounding
    spaces (``" judge "`` finds ``judge``, and ``" item id "`` itself when it exists)."""
    names = [str(c) for c in columns]
    if name in names:
        return name
    near = [c for c in names if c.strip() == name.strip()]
    return near[0] if len(near) == 1 else name


def _resolve_roles(roles: Roles, columns: Iterable[Any]) -> Roles:
    cols = list(columns)

    def res(name: str | None) -> str | None:
        return None if name is None else resolve_column(name, cols)

    return Roles(
        outcome=resolve_column(roles.outcome, cols), condition=res(roles.condition),
        model_a=res(roles.model_a), model_b=res(roles.model_b),
        first_shown=res(roles.first_shown), position=res(roles.position),
        clusters={k: resolve_column(v, cols) for k, v in roles.clusters.items()},
        replicate=res(roles.replicate), sampled=roles.sampled)


def _name(value: object) -> str | None:
    return None if value is None else str(value)


def _role_problems(roles: Roles, pairwise: bool) -> list[str]:
    """Problems with the role mapping itself (before looking at the data)."""
    problems: list[str] = []
    if pairwise and (roles.model_a is None or roles.model_b is None):
        given, missing = (("model_a", "model_b") if roles.model_b is None
                          else ("model_b", "model_a"))
        problems.append(
            f"{given}={getattr(roles, given)!r} was given without {missing}=: a pairwise "
            "table needs both model_a= and model_b= columns (or neither, for a scores table)"
        )
    if roles.first_shown is not None and not pairwise:
        problems.append(
            f"first_shown={roles.first_shown!r} was given without model_a=/model_b=; "
            "first_shown only applies to pairwise tables (use position= for scores tables)"
        )
    if roles.position is not None and pairwise:
        problems.append(
            f"position={roles.position!r} was given for a pairwise table; the position "
            "of a pairwise judgment is which answer was shown first: pass that column as "
            "first_shown= (values 'a'/'b') instead"
        )
    for role, col in roles.clusters.items():
        if role in RESERVED_NAMES:
            problems.append(
                f"cluster role name {role!r} (column {col!r}) is reserved for a canonical "
                f"column of the eval table; rename the role, e.g. clusters={{'item': {col!r}}}"
            )
        elif not role.isidentifier():
            problems.append(
                f"cluster role name {role!r} (column {col!r}) is not a valid name (use "
                f"letters, digits and _), e.g. clusters={{'item': {col!r}}}"
            )
    used = [roles.outcome, roles.condition, roles.model_a, roles.model_b,
            roles.first_shown, roles.position, roles.replicate, *roles.clusters.values()]
    counts: dict[str, int] = {}
    for c in used:
        if c is not None:
            counts[c] = counts.get(c, 0) + 1
    for c, k in counts.items():
        if k > 1:
            problems.append(
                f"column {c!r} is given {k} roles; each column may play one role "
                "(copy the column under a new name if you really need it twice)"
            )
    return problems


def _validate(
    frame: pd.DataFrame,
    roles: Roles,
    ties: str,
    outcome_type: str,
    unmatched: str,
    source: str,
    order_design: str = "auto",
    *,
    on_unparsed: str = "auto",
    outcome_kind: str = "auto",
) -> EvalTable:
    pairwise = roles.model_a is not None or roles.model_b is not None
    problems = _role_problems(roles, pairwise)

    # ---- columns exist (matched by their string name)
    colmap: dict[str, Any] = {}
    dup_names: set[str] = set()
    for c in frame.columns:
        key = str(c)
        if key in colmap:
            dup_names.add(key)
        colmap[key] = c
    used = [c for c in (roles.outcome, roles.condition, roles.model_a, roles.model_b,
                        roles.first_shown, roles.position, roles.replicate,
                        *roles.clusters.values())
            if c is not None]
    for c in sorted(dup_names & set(used)):
        problems.append(
            f"column name {c!r} occurs more than once in the table; rename the copies "
            "so each column has a unique name"
        )
    missing_cols = [c for c in dict.fromkeys(used) if c not in colmap]
    if missing_cols:
        avail = ", ".join(repr(str(x)) for x in list(frame.columns)[:15])
        more = ", ..." if frame.shape[1] > 15 else ""
        for c in missing_cols:
            problems.append(
                f"column {c!r} is not in the table (available columns: {avail or 'none'}"
                f"{more}); fix the column name in read(...) or in the roles file"
            )
    n = len(frame)
    if n == 0:
        problems.append("the table is empty (0 rows); check the file or the filter that made it")
    if n == 0 or dup_names & set(used):
        raise InvalidTableError(problems)

    def col(name: str | None) -> pd.Series | None:
        if name is None or name not in colmap:
            return None
        return frame[colmap[name]]

    # ---- id columns: NaN/empty, mixed types, single level
    labels: dict[str, np.ndarray] = {}
    id_cols = [(f"cluster factor {r!r}", r, c) for r, c in roles.clusters.items()]
    id_cols += [(role, role, getattr(roles, role)) for role in
                ("condition", "model_a", "model_b", "replicate")
                if getattr(roles, role) is not None]
    for what, key, c in id_cols:
        values = col(c)
        if values is None:
            continue
        miss = _is_missing_label(values)
        if miss.any():
            problems.append(
                f"{what} (column {c!r}) has {int(miss.sum())} missing or empty ids (rows "
                f"{_rows(miss)}); fix: give those rows their ids, or drop them. If the ids "
                "are real text that pandas read as NA ('NA', 'nan', 'null', e.g. a "
                "language code), pass the file path to evalmix.read (it reads CSV ids as "
                "text) or read it with pandas.read_csv(..., keep_default_na=False)"
            )
        mixed = _mixed_types(values)
        if mixed:
            problems.append(
                f"{what} (column {c!r}) mixes value types ({', '.join(mixed)}), so equal-"
                f"looking ids may differ; fix: df[{c!r}] = df[{c!r}].astype(str)"
            )
        # NFC: a label typed on one system and copied from another is one label
        labels[key] = values.astype("string").str.normalize("NFC").str.strip().to_numpy(
            dtype=object, na_value=None)
    for role, c in roles.clusters.items():
        if role not in labels:
            continue
        lev = pd.unique(labels[role][pd.notna(labels[role])])
        if lev.size == 1:
            problems.append(
                f"cluster factor {role!r} (column {c!r}) has a single level ({lev[0]!r}); "
                "one cluster carries no clustering information. Fix: drop it from clusters="
            )

    # ---- duplicated rows: in a scores table repeated scores within a cluster are
    # ordinary data (kept, counted); two pairwise records cannot claim one comparison
    if frame.shape[1] < 2:
        dup = np.zeros(n, dtype=bool)
    else:
        try:
            dup = frame.duplicated(keep=False).to_numpy()
        except TypeError:  # unhashable cells: compare their text
            dup = frame.astype(str).duplicated(keep=False).to_numpy()
    n_duplicates = int(dup.sum())
    if dup.any() and pairwise:
        problems.append(
            f"{int(dup.sum())} rows are exact duplicates of another row (rows {_rows(dup)}); "
            "if they are repeated runs, add a column numbering them and pass it as "
            "replicate= (e.g. replicate='epoch'); otherwise df.drop_duplicates()"
        )

    out: dict[str, Any] = {"row": np.arange(n, dtype=np.int64)}
    n_na = n_unparsed = n_tie_excluded = n_unmatched = n_ties = 0
    pairs_read: dict[str, int] = {}
    raw_outcome = col(roles.outcome)
    keep = np.ones(n, dtype=bool)
    kind_type = "numeric"
    n_problems_before_outcome = len(problems)

    if pairwise:
        kind = "pairwise"
        a_names, b_names = labels.get("model_a"), labels.get("model_b")
        if outcome_type == "numeric":
            problems.append(
                "outcome_type='numeric' does not apply to pairwise tables (their outcome is "
                "a verdict); leave it 'auto'"
            )
        if a_names is not None and b_names is not None:
            same = (a_names == b_names) & pd.notna(a_names)
            if same.any():
                problems.append(
                    f"{int(same.sum())} rows compare a model with itself ({roles.model_a!r} "
                    f"equals {roles.model_b!r}, rows {_rows(same)}); fix: drop those rows"
                )
        if a_names is not None and b_names is not None and raw_outcome is not None:
            verdict, na, unparsed = _parse_pairwise(
                raw_outcome, a_names, b_names, roles.outcome, outcome_kind, on_unparsed,
                problems)
            if roles.first_shown is not None and col(roles.first_shown) is not None:
                a_first = _parse_first_shown(
                    col(roles.first_shown), a_names, b_names, roles.first_shown, problems)
                others = [labels[k] for k in ("condition", *roles.clusters, "replicate")
                          if k in labels]
                pair, lone, pairs_read = _order_design(
                    a_first, _match_pairs(a_names, b_names, others, a_first), roles,
                    order_design, unmatched, problems)
            else:
                a_first = np.full(n, np.nan)
                pair = np.full(n, -1, dtype=np.int64)
                lone = np.zeros(n, dtype=bool)
            out.update(model_a=a_names, model_b=b_names, a_first=a_first, pair_id=pair)
            keep = ~na & ~unparsed
            n_na, n_unparsed = int(na.sum()), int(unparsed.sum())
            if unmatched == "drop":
                n_unmatched = int((lone & keep).sum())
                keep &= ~lone
            is_tie = keep & (verdict == 0.5)
            n_ties = int(is_tie.sum())
            verdict_label = np.where(verdict == 1.0, "a",
                                     np.where(verdict == 0.0, "b", "tie")).astype(object)
            if ties == "exclude":
                n_tie_excluded = n_ties
                keep &= ~is_tie
                y = verdict
                kind_type = "binary"
            elif ties == "half":
                y = verdict
                kind_type = "binary" if n_ties == 0 else "proportion"
                if outcome_type == "binary" and n_ties:
                    problems.append(
                        f"outcome_type='binary' but the pairwise outcome column "
                        f"{roles.outcome!r} has {n_ties} ties, which ties='half' scores 0.5; "
                        "fix: pass ties='exclude' or ties='separate' (or drop outcome_type)"
                    )
            else:  # separate
                y = np.where(verdict == 1.0, 1.0, 0.0)
                kind_type = "binary"
            out.update(y=y, verdict=verdict_label)
    else:
        kind = "scores"
        if raw_outcome is not None:
            y, na, unparsed, kind_type = _parse_scores(
                raw_outcome, roles.outcome, outcome_type, on_unparsed, problems)
            out["y"] = y
            keep = ~na & ~unparsed
            n_na, n_unparsed = int(na.sum()), int(unparsed.sum())

    outcome_ok = not any(roles.outcome in p for p in problems[n_problems_before_outcome:])
    if raw_outcome is not None and "y" in out and not keep.any() and outcome_ok:
        reasons = {"NA": n_na, "unparsed": n_unparsed, "tie (excluded)": n_tie_excluded,
                   "unmatched": n_unmatched}
        why = ", ".join(f"{v} {k}" for k, v in reasons.items() if v)
        problems.append(
            f"no usable outcome in column {roles.outcome!r}: all {n} rows would be "
            f"dropped ({why}); check the column and the tie policy"
        )
    if "condition" in labels:
        out["condition"] = labels["condition"]
    pos = col(roles.position)
    if pos is not None:
        bad_pos = _is_missing_label(pos)
        if bad_pos.any():
            problems.append(
                f"position column {roles.position!r} has {int(bad_pos.sum())} missing "
                f"values (rows {_rows(bad_pos)}); fix: fill or drop them"
            )
        out["position"] = pos.to_numpy()
    for role in roles.clusters:
        if role in labels:
            out[role] = labels[role]
    if "replicate" in labels:
        out["replicate"] = labels["replicate"]

    if problems:
        raise InvalidTableError(problems)

    data = pd.DataFrame(out).loc[keep].reset_index(drop=True)
    for name in ("condition", "model_a", "model_b", "verdict", "replicate", *roles.clusters):
        if name in data.columns:
            data[name] = data[name].astype(str)
    # a factor can collapse to one level after rows are dropped
    collapsed = [r for r in roles.clusters if data[r].nunique() < 2]
    if collapsed:
        raise InvalidTableError([
            f"cluster factor {r!r} (column {roles.clusters[r]!r}) has one level left after "
            "dropping NA/unparsed/excluded rows; drop it from clusters=" for r in collapsed
        ])
    dropped = {k: v for k, v in {
        "na_outcome": n_na, "unparsed_outcome": n_unparsed,
        "tie_excluded": n_tie_excluded, "unmatched_pair": n_unmatched}.items() if v}
    if dropped:
        parts = ", ".join(
            f"{v} {k.replace('_', ' ')}"
            + (f" (e.g. {_examples(raw_outcome[unparsed])})"
               if k == "unparsed_outcome" and raw_outcome is not None else "")
            for k, v in dropped.items())
        warnings.warn(
            f"dropped {sum(dropped.values())} of {n} rows ({parts}); they are counted in "
            "table.dropped and in the design summary",
            DroppedRowsWarning,
            stacklevel=3,
        )
    return EvalTable(
        data=data,
        kind=kind,  # type: ignore[arg-type]
        outcome_type=kind_type,  # type: ignore[arg-type]
        roles=roles,
        ties=ties,  # type: ignore[arg-type]
        n_raw=n,
        dropped=dropped,
        n_ties=n_ties,
        source=source,
        pairs_read=pairs_read,
        n_duplicates=0 if pairwise else n_duplicates,
    )
