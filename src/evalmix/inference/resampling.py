"""Resampling units of a table, and calling a user's statistic on a resample.

Shared by :func:`evalmix.bootstrap` (:mod:`evalmix.inference.custom`) and the
randomization test (:mod:`evalmix.inference.permutation`): which factor is resampled (a
cluster role, an interaction cell ``"a:b"``, two crossed factors, or by default the
matched AB/BA pair or the row), which strata its clusters are drawn within, the few-cluster
checks, and a resample as a DataFrame with the copy column :data:`COPY_COLUMN`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.table import EvalTable, dense_codes, intersect_codes
from evalmix.errors import (
    EvalmixError,
    FewClustersWarning,
    InvalidOptionError,
    InvalidTableError,
    TooFewClustersError,
)
from evalmix.inference.sandwich import FEW_CLUSTERS, MIN_BOOTSTRAP_CLUSTERS
from evalmix.inference.sums import Sums

__all__ = ["COPY_COLUMN", "Design", "resampling_design", "one_factor", "with_columns",
           "check_few_clusters", "expand", "resample", "call_statistic", "statistic_name"]

#: Column of every resample numbering the drawn copy of its cluster (0..G-1).
COPY_COLUMN = "boot_copy"


@dataclass(frozen=True)
class Design:
    frame: pd.DataFrame
    factors: tuple[np.ndarray, ...]  # per resampled factor: codes of the rows
    groups: tuple[list[np.ndarray], ...]  # per factor: its clusters in each stratum
    stratum: np.ndarray  # stratum of each cluster of factor 0
    label: str
    unit: str
    strata: tuple[str, ...]
    notes: tuple[str, ...]
    row_strata: np.ndarray  # stratum code of every row (zeros without strata)


def _column_codes(frame: pd.DataFrame, name: str, what: str) -> np.ndarray:
    """Codes of a DataFrame column (or ``"a:b"``, the cell of several columns)."""
    parts = [p.strip() for p in name.split(":")]
    missing = [p for p in parts if p not in frame.columns]
    if missing:
        raise InvalidOptionError(
            f"{what} {name!r}: no column {missing[0]!r}; the columns are "
            f"{', '.join(map(str, frame.columns))}")
    codes = []
    for p in parts:
        col = frame[p]
        if col.isna().any():
            row = int(np.flatnonzero(col.isna().to_numpy())[0])
            raise InvalidTableError([
                f"{what} column {p!r} is missing in row {row}: every row needs a label "
                "to be resampled with its cluster; fill it or drop those rows"])
        codes.append(dense_codes(col.to_numpy()))
    return intersect_codes(*codes)


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


def with_columns(table: EvalTable, columns: pd.DataFrame) -> pd.DataFrame:
    """``table.data`` with the other columns of the source it was read from.

    ``columns`` holds one row per source row, in source order (the frame or file given to
    :func:`evalmix.read`); rows are matched on the table's ``row``. Names the canonical
    frame already has keep the canonical values.
    """
    frame = table.data
    extra = columns.reset_index(drop=True)
    rows = frame["row"].to_numpy()
    if rows.size and int(rows.max()) >= len(extra):
        raise InvalidOptionError(
            f"columns= has {len(extra)} rows but the table was read from at least "
            f"{int(rows.max()) + 1}: pass the frame (or file) the table was read from")
    extra = extra.drop(columns=[c for c in extra.columns if c in frame.columns])
    return pd.concat([frame, extra.iloc[rows].reset_index(drop=True)], axis=1)


def resampling_design(table: EvalTable | pd.DataFrame, cluster: str | Sequence[str] | None,
            strata: str | Sequence[str] | None, columns: pd.DataFrame | None = None
            ) -> Design:
    """The rows, the resampled factors, and the strata they are drawn within."""
    if isinstance(table, EvalTable):
        frame = table.data if columns is None else with_columns(table, columns)
        roles = table.check_cluster(cluster)
        table.check_pairs_within(roles)
        if roles:
            factors = [np.asarray(table.codes(r)) for r in roles]
            unit = "+".join(roles)
        elif table.has_order:
            factors, unit = [table.pair_codes()], "pair"
        else:
            factors, unit = [np.arange(table.n_obs)], "row"
        given = strata is not None
        strata_names = tuple(table.check_cluster(_names(strata))) if given else tuple(
            s for s in table.strata if s not in roles)
        strata_codes = [np.asarray(table.codes(s)) for s in strata_names]
    elif isinstance(table, pd.DataFrame):
        if columns is not None:
            raise InvalidOptionError("columns= joins source columns to an EvalTable; a "
                                     "DataFrame already has its columns")
        frame = table.reset_index(drop=True)
        roles = _names(cluster)
        factors = [_column_codes(frame, r, "cluster") for r in roles] or \
            [np.arange(len(frame))]
        unit = "+".join(roles) or "row"
        strata_names, given = _names(strata), True
        strata_codes = [_column_codes(frame, s, "stratum") for s in strata_names]
    else:
        raise InvalidOptionError(
            f"bootstrap() needs an EvalTable (evalmix.read) or a pandas DataFrame; got "
            f"{type(table).__name__}")
    if COPY_COLUMN in frame.columns:
        raise InvalidTableError([
            f"the table has a column {COPY_COLUMN!r}, which the bootstrap adds to every "
            "resample; rename it"])
    if len(frame) == 0:
        raise InvalidTableError(["bootstrap() got a table without rows"])
    s_codes = intersect_codes(*strata_codes) if strata_codes else np.zeros(len(frame),
                                                                           dtype=np.int64)
    groups, notes = [], []
    stratum = np.zeros(int(factors[0].max()) + 1, dtype=np.int64)
    for i, codes in enumerate(factors):
        nested = _within_strata(codes, s_codes)
        if strata_codes and nested is None:
            name = unit.split("+")[i]
            msg = (f"cluster {name!r} is not nested in the strata "
                   f"({', '.join(strata_names)}): a cluster spans several strata")
            if given:
                raise InvalidOptionError(
                    f"{msg}, so the strata cannot be held fixed while it is resampled. "
                    "Cluster by a factor nested in them, or pass strata=[]")
            notes.append(f"{msg}; resampled across strata")
            nested = ([np.arange(int(codes.max()) + 1)],
                      np.zeros(int(codes.max()) + 1, dtype=np.int64))
        assert nested is not None  # no strata: every factor is nested in the one stratum
        groups.append(nested[0])
        if i == 0:
            stratum = nested[1]
    return Design(frame=frame, factors=tuple(factors), groups=tuple(groups),
                  stratum=stratum, label="+".join(roles),
                  unit=unit, strata=strata_names if strata_codes else (),
                  notes=tuple(notes), row_strata=s_codes)


def _within_strata(codes: np.ndarray, s_codes: np.ndarray
                   ) -> tuple[list[np.ndarray], np.ndarray] | None:
    """The clusters of each stratum and the stratum of each cluster; None when a cluster
    spans strata."""
    g, h = int(codes.max()) + 1, int(s_codes.max()) + 1
    pairs = np.unique(codes * h + s_codes)
    if pairs.size != g:
        return None
    s_of = dense_codes(pairs % h)
    return [np.flatnonzero(s_of == k) for k in np.unique(s_of)], s_of


def one_factor(design: Design, codes: np.ndarray, unit: str) -> Design:
    """``design`` resampling the one factor ``codes`` (within the strata when it is
    nested in them, else across them)."""
    nested = _within_strata(codes, design.row_strata)
    if nested is None:
        g = int(codes.max()) + 1
        nested = ([np.arange(g)], np.zeros(g, dtype=np.int64))
    return Design(frame=design.frame, factors=(codes,), groups=(nested[0],),
                  stratum=nested[1], label=unit, unit=unit, strata=design.strata,
                  notes=design.notes, row_strata=design.row_strata)


def check_few_clusters(design: Design, ci: str) -> None:
    for codes, groups, name in zip(design.factors, design.groups,
                                   design.unit.split("+"), strict=True):
        g = int(codes.max()) + 1
        if g < MIN_BOOTSTRAP_CLUSTERS and ci in ("percentile", "expanded", "bca"):
            raise TooFewClustersError(
                f"only {g} clusters ({name}): a {ci} bootstrap interval cannot be trusted "
                f"with fewer than {MIN_BOOTSTRAP_CLUSTERS}. Report the statistic per "
                "cluster, or cluster by a finer factor")
        if g < FEW_CLUSTERS:
            warnings.warn(
                f"only {g} clusters ({name}): cluster bootstrap intervals under-cover with "
                f"fewer than {FEW_CLUSTERS} clusters; ci='bca' or 'expanded' help, and a "
                "design-based CR2 interval or a permutation test is the safer reading",
                FewClustersWarning, stacklevel=3)
        lonely = sum(int(m.size == 1) for m in groups)
        if lonely:
            warnings.warn(
                f"{lonely} stratum(s) hold a single {name} cluster: they add no resampling "
                "variance, so the interval leaves out their uncertainty",
                FewClustersWarning, stacklevel=3)


def expand(level_of_row: np.ndarray, idx: np.ndarray, n_levels: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Rows repeated once per drawn copy of their level: (row positions, copy numbers)."""
    order = np.argsort(idx, kind="stable")
    cnt = np.bincount(idx, minlength=n_levels)
    first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    m = cnt[level_of_row]
    rows = np.repeat(np.arange(level_of_row.size), m)
    within = np.arange(rows.size) - np.repeat(np.cumsum(m) - m, m)
    return rows, order[np.repeat(first[level_of_row], m) + within]


def resample(design: Design, idx: Sequence[np.ndarray]) -> pd.DataFrame:
    """The resampled frame of one replicate (one index row per factor)."""
    a = design.factors[0]
    rows, copy = expand(a, idx[0], int(a.max()) + 1)
    if len(idx) == 2:
        b = design.factors[1]
        sub, copy_b = expand(b[rows], idx[1], int(b.max()) + 1)
        rows, copy = rows[sub], copy[sub] * idx[1].size + copy_b
    out = design.frame.iloc[rows].reset_index(drop=True)
    out[COPY_COLUMN] = copy
    return out


def _vector(value: Any, names: tuple[str, ...] | None, what: str
            ) -> tuple[np.ndarray, tuple[str, ...]]:
    """A statistic's value as floats with component names (reindexed to ``names``)."""
    if isinstance(value, pd.DataFrame):
        raise InvalidOptionError(f"{what} returned a DataFrame; return a number, a dict or a "
                                 "pandas Series (a named vector)")
    if isinstance(value, Mapping):
        value = pd.Series(dict(value), dtype=float)
    try:
        if isinstance(value, pd.Series):
            value.index = value.index.map(str)
            if names is not None:
                value = value.reindex(list(names))
            return value.to_numpy(dtype=float), tuple(value.index)
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidOptionError(f"{what} returned {type(value).__name__}, not numbers: "
                                 f"{exc}") from None
    if arr.ndim > 1:
        raise InvalidOptionError(f"{what} returned an array of shape {arr.shape}; return "
                                 "a number or a one-dimensional named vector")
    arr = np.atleast_1d(arr)
    own = tuple(str(i) for i in range(arr.size))
    if names is not None and arr.size != len(names):
        raise InvalidOptionError(f"{what} returned {arr.size} values on a resample and "
                                 f"{len(names)} on the full table; return a named Series "
                                 "so components can be matched")
    return arr, own


def call_statistic(fn: Callable[[pd.DataFrame], Any], frame: pd.DataFrame, names: tuple[str, ...] | None,
          what: str) -> tuple[np.ndarray, tuple[str, ...]]:
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value = fn(frame)
    except EvalmixError:
        raise
    except Exception as exc:  # the user's code: say where it failed, keep the cause
        raise EvalmixError(
            f"{what} raised {type(exc).__name__}: {exc}. A statistic that is undefined on "
            "some resample (e.g. a condition drawn zero times) should return NaN there; "
            "those replicates are counted and left out") from exc
    v, nm = _vector(value, names, what)
    return np.where(np.isfinite(v), v, np.nan), nm


def statistic_name(statistic: Any, name: str | None) -> str:
    if name is not None:
        return str(name)
    if isinstance(statistic, Sums):
        return statistic.name
    own = getattr(statistic, "__name__", "statistic")
    return "statistic" if own == "<lambda>" else str(own)
