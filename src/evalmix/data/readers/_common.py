"""What every log reader shares: finding files, flattening records, reading the frame."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from evalmix.data.read import read
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, EvalmixWarning, InvalidOptionError, InvalidTableError

Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def as_paths(source: Source, patterns: Sequence[str], what: str) -> list[Path]:
    """Files named by ``source`` (a file, a folder searched recursively for
    ``patterns``, or a list of either), sorted, each once; files with the same content
    are read once (see :func:`distinct_files`)."""
    items = [source] if isinstance(source, str | os.PathLike) else list(source)
    if not items:
        raise EvalmixError(f"no {what} given; pass a file, a folder or a list of files")
    out: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted({p for pat in patterns for p in path.rglob(pat) if p.is_file()})
            if not found:
                raise EvalmixError(
                    f"folder {str(path)!r} holds no {what} ({', '.join(patterns)}); check "
                    "the path"
                )
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise EvalmixError(f"no such file or folder: {str(path)!r}; check the path")
    return distinct_files(list(dict.fromkeys(out)))


def distinct_files(paths: Sequence[Path]) -> list[Path]:
    """``paths`` without the files whose bytes repeat an earlier one's, with a warning
    naming both: a copied results file (a nested copy, the same annotations saved under
    two model names) would otherwise count every judgment twice."""
    seen: dict[str, Path] = {}
    copies: set[Path] = set()
    for path in sorted(paths, key=lambda p: (len(p.parts), str(p))):  # keep the shallowest
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        key = digest.hexdigest()
        if key in seen:
            warnings.warn(
                f"{str(path)!r} has the same content as {str(seen[key])!r}: read once "
                "(duplicate files count every judgment twice); delete or move the copy "
                "to silence this", EvalmixWarning, stacklevel=4)
            copies.add(path)
        else:
            seen[key] = path
    return [p for p in paths if p not in copies]

def load_records(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON array file or a JSON Lines file."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = json.loads(stripped)
        else:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise EvalmixError(
            f"{str(path)!r} is not valid JSON or JSON Lines ({exc}); check the file"
        ) from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise EvalmixError(
            f"{str(path)!r} does not hold a list of records (JSON objects); check the file"
        )
    return records


def flatten(records: Iterable[Mapping[str, Any]], drop: Iterable[str] = ()) -> pd.DataFrame:
    """Records as a frame with nested fields as dotted columns (``doc.subject``);
    list- and dict-valued cells are left out."""
    skip = set(drop)
    frame = pd.json_normalize([{k: v for k, v in r.items() if k not in skip} for r in records],
                              sep=".")
    nested = [c for c in frame.columns
              if frame[c].map(lambda v: isinstance(v, list | dict)).any()]
    return frame.drop(columns=nested)


def add_category_stratum(frame: pd.DataFrame, clusters: dict[str, str],
                         roles: dict[str, Any]) -> None:
    """A ``category`` column with two or more levels (MT-Bench's 8 categories,
    arena-hard's) as the ``category`` cluster role, declared a stratum: the categories
    were chosen, not sampled, so intervals cluster by question within them."""
    if "category" not in frame.columns or "category" in clusters:
        return
    cat = frame["category"]
    if cat.notna().all() and (cat.astype(str) != "").all() and cat.nunique() > 1:
        frame["category"] = cat.astype(str)
        clusters["category"] = "category"
        roles["strata"] = (*roles.get("strata", ()), "category")


def finish(frame: pd.DataFrame, source: str, roles: Mapping[str, Any],
           read_kwargs: Mapping[str, Any]) -> EvalTable:
    """Read ``frame`` with the reader's ``roles``; ``read_kwargs`` override them key by
    key, and their ``clusters`` are added to the reader's.

    ``roles["strata"]`` declares the format's strata (groupings chosen, not sampled:
    a benchmark's subsets or categories); the user's ``sampled=`` and ``strata=`` are
    applied after it (:meth:`~evalmix.data.table.EvalTable.with_sampled`), so they win:
    ``strata=`` replaces the reader's strata and a role named in ``sampled=`` is no
    longer one.
    """
    kwargs = dict(read_kwargs)
    sampled, strata = kwargs.pop("sampled", None), kwargs.pop("strata", None)
    clusters = {**dict(roles.get("clusters", {})), **dict(kwargs.pop("clusters", None) or {})}
    spec = {**dict(roles), **kwargs, "clusters": clusters}
    spec["strata"] = [r for r in spec.get("strata", ()) if r in clusters]
    try:
        table = read(frame, **spec).with_sampled(sampled, strata=strata)
    except InvalidTableError as exc:  # every read error names the file(s)
        raise InvalidTableError([f"{source}: {p}" for p in exc.problems]) from exc
    except EvalmixError as exc:
        raise type(exc)(f"{source}: {exc}") from exc
    return replace(table, source=source)


def label(paths: Sequence[Path]) -> str:
    """The file, or the folder holding all the files and their count ("results (3
    files)"): the table's ``source``, which :func:`~evalmix.data.readers.upstream.upstream_line`
    reads again."""
    if len(paths) == 1:
        return str(paths[0])
    return f"{os.path.commonpath([str(p) for p in paths])} ({len(paths)} files)"


def choose(name: str | None, available: Sequence[str], what: str, option: str) -> str:
    """The one ``available`` value, or ``name`` checked against them."""
    if name is None:
        if len(available) == 1:
            return available[0]
        raise InvalidOptionError(
            f"the logs have {len(available)} {what}s ({', '.join(repr(a) for a in available)}); "
            f"choose one with {option}=..."
        )
    if name not in available:
        raise InvalidOptionError(
            f"{option}={name!r} is not in the logs; their {what}s are: "
            f"{', '.join(repr(a) for a in available)}"
        )
    return name
