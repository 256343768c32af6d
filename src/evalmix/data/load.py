"""Load a table file (CSV/TSV/Parquet/JSON/JSONL) or a roles TOML into a DataFrame, without
interpreting it: what the columns mean is :mod:`evalmix.data.read`'s business."""

from __future__ import annotations

import codecs
import gzip
import json
import os
import sys
import tomllib
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES

from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    InvalidTableError,
)

_ROLE_KEYS = ("outcome", "condition", "model_a", "model_b", "first_shown", "position",
              "clusters", "ties", "replicate", "sampled", "strata", "outcome_kind")


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
        raise InvalidOptionError(
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
        # readers decode in chunks: exc.start is within a chunk, so find the byte again
        offset, line, bad = _bad_byte(path, encoding or "utf-8")
        where = (f"byte 0x{bad} at byte offset {offset:,} (line {line:,})"
                 if offset >= 0 else f"byte 0x{exc.object[exc.start:exc.start + 1].hex()}")
        raise EvalmixError(
            f"could not read {str(path)!r} as {encoding or 'utf-8'}: {where} is not valid "
            "there. The file is probably latin-1 or cp1252 (common for spreadsheet "
            "exports): pass encoding='latin-1' (CLI: --encoding latin-1), or save the file "
            "as UTF-8"
        ) from exc
    except RecursionError:
        raise EvalmixError(
            f"{str(path)!r} holds JSON nested too deeply to read (more than "
            f"{sys.getrecursionlimit():,} levels); a table needs one record per row: "
            "flatten it, or load it yourself and pass the DataFrame") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise EvalmixError(
            f"{str(path)!r} is a truncated or damaged compressed file ({exc}); download or "
            "compress it again") from None
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


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else path.open("rb")


def _bad_byte(path: Path, encoding: str) -> tuple[int, int, str]:
    """Byte offset, line number and hex of the first byte of ``path`` (decompressed) that
    is not valid ``encoding``; offset -1 when none is found."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    fed = lines = 0
    try:
        with _open_binary(path) as fh:
            while chunk := fh.read(1 << 20):
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    offset = fed - pending + exc.start
                    seen = chunk[: max(offset - fed, 0)]
                    return offset, lines + seen.count(b"\n") + 1, \
                        exc.object[exc.start:exc.start + 1].hex()
                fed += len(chunk)
                lines += chunk.count(b"\n")
    except (OSError, EOFError, zlib.error):
        pass
    return -1, 0, ""


def _open_text(path: Path, encoding: str | None):
    # utf-8-sig: UTF-8 that skips a byte-order mark (as pandas does for CSV)
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding=encoding or "utf-8-sig")
    return path.open(encoding=encoding or "utf-8-sig")


#: the longest line of a JSON Lines file read (characters): one record, however long its
#: transcript, is far shorter; a longer line is a file of another kind
MAX_LINE = 256 * 2**20


def _read_json_lines(path: Path, encoding: str | None) -> pd.DataFrame:
    records: list[dict[str, Any]] = []
    with _open_text(path, encoding) as fh:
        for lineno, line in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), ""), start=1):
            if len(line) > MAX_LINE:
                raise EvalmixError(
                    f"line {lineno} of {str(path)!r} is longer than {MAX_LINE:,} characters "
                    "(one JSON record per line is expected); check that the file is JSON "
                    "Lines, or load it yourself and pass the DataFrame")
            text = line.strip()
            if not text:
                continue
            try:
                rec = json.loads(text, object_pairs_hook=_unique_keys)
            except RecursionError:
                raise EvalmixError(
                    f"line {lineno} of {str(path)!r} holds JSON nested too deeply to read "
                    f"(more than {sys.getrecursionlimit():,} levels); a table needs one "
                    "flat record per line: fix or remove that line") from None
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
    for key, example in (("sampled", '["scenario", "persona"]'), ("strata", '["subset"]')):
        if key in spec and not (isinstance(spec[key], list)
                                and all(isinstance(v, str) for v in spec[key])):
            problems.append(f"{key} must be a list of cluster role names, e.g. {key} = "
                            f"{example}; got {spec[key]!r}")
    if problems:
        raise EvalmixError(f"roles file {str(p)!r}: " + "; ".join(problems))
    return spec


def resolve_column(name: str, columns: Iterable[Any]) -> str:
    """``name`` if it is a column; else the one column equal to it up to surrounding
    spaces (``" judge "`` finds ``judge``, and ``" item id "`` itself when it exists)."""
    names = [str(c) for c in columns]
    if name in names:
        return name
    near = [c for c in names if c.strip() == name.strip()]
    return near[0] if len(near) == 1 else name
