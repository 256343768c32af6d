"""Validate a loaded frame against its roles, in named steps, into an :class:`EvalTable`.

:func:`validate` is the second half of :func:`evalmix.read`: the roles are resolved and the
file is loaded; what is left is a sequence of steps, each reading the frame and appending
what it finds to one list of problems, so that the user sees every problem at once:

1. :func:`_columns`: the role columns exist, once each, with one value per cell;
2. :func:`_id_labels`: the id columns (clusters, condition, models, replicate) have no
   missing or mixed-type ids and more than one level, as NFC-normalised text;
3. :func:`_duplicate_rows`: repeated rows (an error only for pairwise verdicts);
4. :func:`_pairwise_outcome` or :func:`_scores_outcome`: the outcome parsed, the rows to
   keep and why the others go (an immutable :class:`_Outcome`);
5. :func:`_role_columns`: the condition, position, cluster and replicate columns of the
   table;
6. assembly: one :class:`InvalidTableError` with every problem, or the table with the
   dropped rows counted and said once (:class:`DroppedRowsWarning`).

The options are one frozen :class:`ReadOptions`, decided by :func:`evalmix.read` and
carried down unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.labels import Labels, text_labels
from evalmix.data.pairs import _match_pairs, _order_design
from evalmix.data.parse import (
    _examples,
    _is_missing_label,
    _mixed_types,
    _parse_first_shown,
    _parse_pairwise,
    _parse_scores,
    _rows,
)
from evalmix.data.table import RESERVED_NAMES, EvalTable, ReadCodes, Roles
from evalmix.errors import DroppedRowsWarning, InvalidTableError

__all__ = ["ReadOptions", "validate"]


@dataclass(frozen=True)
class ReadOptions:
    """The options of :func:`evalmix.read` that validation uses (checked before)."""

    ties: str = "half"
    outcome_type: str = "auto"
    unmatched: str = "error"
    order_design: str = "auto"
    on_unparsed: str = "auto"
    outcome_kind: str = "auto"


@dataclass(frozen=True)
class _Columns:
    """The frame's columns by their string names (the roles name columns as strings)."""

    frame: pd.DataFrame
    by_name: Mapping[str, Any]
    used: tuple[str, ...]

    def get(self, name: str | None) -> pd.Series | None:
        if name is None or name not in self.by_name:
            return None
        return self.frame[self.by_name[name]]


@dataclass(frozen=True)
class _Outcome:
    """The parsed outcome: the columns it gives the table and which rows it keeps."""

    kind: str
    outcome_type: str = "numeric"
    columns: Mapping[str, np.ndarray | Labels] = field(default_factory=dict)
    keep: np.ndarray | None = None
    unparsed: np.ndarray | None = None
    n_na: int = 0
    n_unparsed: int = 0
    n_tie_excluded: int = 0
    n_unmatched: int = 0
    n_ties: int = 0
    pairs_read: Mapping[str, int] = field(default_factory=dict)


def validate(frame: pd.DataFrame, roles: Roles, options: ReadOptions,
             source: str) -> EvalTable:
    """Every check of the frame against its roles; the table, or one error with all."""
    pairwise = roles.model_a is not None or roles.model_b is not None
    problems = _role_problems(roles, pairwise)
    cols = _columns(frame, roles, source, problems)
    n = len(frame)
    labels = _id_labels(cols, roles, problems)
    n_duplicates = _duplicate_rows(frame, pairwise, problems)
    before = len(problems)
    notes: list[str] = []
    outcome = (_pairwise_outcome(cols, labels, roles, options, problems) if pairwise
               else _scores_outcome(cols, roles, options, problems, notes))
    keep = outcome.keep if outcome.keep is not None else np.ones(n, dtype=bool)
    outcome_ok = not any(roles.outcome in p for p in problems[before:])
    if "y" in outcome.columns and not keep.any() and outcome_ok:
        reasons = {"NA": outcome.n_na, "unparsed": outcome.n_unparsed,
                   "tie (excluded)": outcome.n_tie_excluded, "unmatched": outcome.n_unmatched}
        why = ", ".join(f"{v} {k}" for k, v in reasons.items() if v)
        problems.append(
            f"no usable outcome in column {roles.outcome!r}: all {n} rows would be "
            f"dropped ({why}); check the column and the tie policy"
        )
    out = {"row": np.arange(n, dtype=np.int64), **outcome.columns,
           **_role_columns(cols, labels, roles, problems)}
    if problems:
        raise InvalidTableError(problems)

    rows = None if keep.all() else np.flatnonzero(keep)
    # text columns are built from their distinct labels (one take each), not row by row
    data = pd.DataFrame({k: v.column(rows) if isinstance(v, Labels)
                         else (v if rows is None else v[rows]) for k, v in out.items()})
    # a factor can collapse to one level after rows are dropped
    collapsed = [r for r in roles.clusters if labels[r].n_levels(rows) < 2]
    if collapsed:
        raise InvalidTableError([
            f"cluster factor {r!r} (column {roles.clusters[r]!r}) has one level left after "
            "dropping NA/unparsed/excluded rows; drop it from clusters=" for r in collapsed
        ])
    dropped = {k: v for k, v in {
        "na_outcome": outcome.n_na, "unparsed_outcome": outcome.n_unparsed,
        "tie_excluded": outcome.n_tie_excluded, "unmatched_pair": outcome.n_unmatched}.items()
        if v}
    if dropped:
        raw = cols.get(roles.outcome)
        parts = ", ".join(
            f"{v} {k.replace('_', ' ')}"
            + (f" (e.g. {_examples(raw[outcome.unparsed])})"
               if k == "unparsed_outcome" and raw is not None and outcome.unparsed is not None
               else "")
            for k, v in dropped.items())
        warnings.warn(
            f"dropped {sum(dropped.values())} of {n} rows ({parts}); they are counted in "
            "table.dropped and in the design summary",
            DroppedRowsWarning,
            stacklevel=3,
        )
    return EvalTable(
        data=data,
        kind=outcome.kind,  # type: ignore[arg-type]
        outcome_type=outcome.outcome_type,  # type: ignore[arg-type]
        roles=roles,
        ties=options.ties,  # type: ignore[arg-type]
        n_raw=n,
        dropped=dropped,
        n_ties=outcome.n_ties,
        source=source,
        pairs_read=dict(outcome.pairs_read),
        n_duplicates=0 if pairwise else n_duplicates,
        outcome_notes=tuple(notes),
        _codes=ReadCodes({r: labels[r].dense(rows) for r in roles.clusters}),
    )


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


#: what pandas' type inference says about columns of one value per cell
_SCALAR_KINDS = frozenset({"string", "integer", "floating", "boolean", "empty", "decimal",
                           "mixed-integer-float", "categorical", "datetime", "date",
                           "timedelta", "time", "period", "complex", "integer-na"})


def _non_scalar(values: pd.Series | None, column: str, source: str) -> str:
    """A problem when a role column holds lists, arrays or records (a Parquet list or
    struct column, nested JSON) instead of one value per cell; "" otherwise."""
    if values is None or values.dtype != object or \
            pd.api.types.infer_dtype(values, skipna=True) in _SCALAR_KINDS:
        return ""
    bad = values.map(lambda v: isinstance(v, list | tuple | dict | set | np.ndarray))
    if not bad.any():
        return ""
    row = int(np.flatnonzero(bad.to_numpy())[0])
    v = values.iloc[row]
    what = "records (structs)" if isinstance(v, dict) else "lists"
    fix = (f"df[{column!r}] = df[{column!r}].str[{next(iter(v), 'KEY')!r}]"
           if isinstance(v, dict) else f"df[{column!r}] = df[{column!r}].str[0]")
    return (f"column {column!r} of {source} holds {what}, not one value per cell "
            f"({int(bad.sum())} rows; row {row}: {repr(v)[:60]}); evalmix needs one label "
            f"or number per cell. Fix: pick one part, e.g. {fix}, or flatten the column "
            "with pandas.json_normalize, and pass the DataFrame")


def _columns(frame: pd.DataFrame, roles: Roles, source: str,
             problems: list[str]) -> _Columns:
    """Step 1: every role column exists, once, with scalar cells; stops when not."""
    by_name: dict[str, Any] = {}
    dup_names: set[str] = set()
    for c in frame.columns:
        key = str(c)
        if key in by_name:
            dup_names.add(key)
        by_name[key] = c
    used = tuple(dict.fromkeys(
        c for c in (roles.outcome, roles.condition, roles.model_a, roles.model_b,
                    roles.first_shown, roles.position, roles.replicate,
                    *roles.clusters.values())
        if c is not None))
    for c in sorted(dup_names & set(used)):
        problems.append(
            f"column name {c!r} occurs more than once in the table; rename the copies "
            "so each column has a unique name"
        )
    avail = ", ".join(repr(str(x)) for x in list(frame.columns)[:15])
    more = ", ..." if frame.shape[1] > 15 else ""
    for c in (c for c in used if c not in by_name):
        problems.append(
            f"column {c!r} is not in the table (available columns: {avail or 'none'}"
            f"{more}); fix the column name in read(...) or in the roles file"
        )
    if len(frame) == 0:
        problems.append("the table is empty (0 rows); check the file or the filter that made it")
    if len(frame) == 0 or dup_names & set(used):
        raise InvalidTableError(problems)
    cols = _Columns(frame, by_name, used)
    nested = [p for c in used if (p := _non_scalar(cols.get(c), c, source))]
    if nested:
        raise InvalidTableError(problems + nested)
    return cols


def _id_labels(cols: _Columns, roles: Roles, problems: list[str]) -> dict[str, Labels]:
    """Step 2: the id columns as NFC-normalised text, checked for gaps, types, levels
    (on their distinct values: :class:`~evalmix.data.parse.Labels`)."""
    labels: dict[str, Labels] = {}
    id_cols = [(f"cluster factor {r!r}", r, c) for r, c in roles.clusters.items()]
    id_cols += [(role, role, getattr(roles, role)) for role in
                ("condition", "model_a", "model_b", "replicate")
                if getattr(roles, role) is not None]
    for what, key, c in id_cols:
        values = cols.get(c)
        if values is None:
            continue
        # NFC: a label typed on one system and copied from another is one label
        lab = text_labels(values)
        miss = (lab.codes < 0) | np.append(lab.labels == "", False)[lab.codes]
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
        labels[key] = lab
    for role, c in roles.clusters.items():
        if role in labels and labels[role].n_levels() == 1:
            level = labels[role].labels[labels[role].codes.max()]
            problems.append(
                f"cluster factor {role!r} (column {c!r}) has a single level ({level!r}); "
                "one cluster carries no clustering information. Fix: drop it from clusters="
            )
    return labels


def _duplicate_rows(frame: pd.DataFrame, pairwise: bool, problems: list[str]) -> int:
    """Step 3: rows repeated exactly. In a scores table repeated scores within a cluster
    are ordinary data (kept, counted); two pairwise records cannot claim one comparison."""
    if frame.shape[1] < 2:
        return 0
    try:
        dup = _duplicated(frame)
    except TypeError:  # unhashable cells: compare their text
        dup = frame.astype(str).duplicated(keep=False).to_numpy()
    if dup.any() and pairwise:
        problems.append(
            f"{int(dup.sum())} rows are exact duplicates of another row (rows {_rows(dup)}); "
            "if they are repeated runs, add a column numbering them and pass it as "
            "replicate= (e.g. replicate='epoch'); otherwise df.drop_duplicates()"
        )
    return int(dup.sum())


def _duplicated(frame: pd.DataFrame) -> np.ndarray:
    """``frame.duplicated(keep=False)``, narrowed column by column: rows equal on every
    column are equal on each, so only the rows that still share a key with another row
    are compared on the next column, and a column of distinct values (a battle or
    question id) ends the search at once. Numeric columns (cheap to hash) go first."""
    n = len(frame)
    rows = np.arange(n)
    key = np.zeros(n, dtype=np.int64)
    order = sorted(range(frame.shape[1]),
                   key=lambda j: not pd.api.types.is_numeric_dtype(frame.dtypes.iloc[j]))
    for j in order:
        column = frame.iloc[:, j] if rows.size == n else frame.iloc[rows, j]
        codes, uniques = pd.factorize(column)
        codes = codes.astype(np.int64) + 1  # 0: missing (pandas' duplicated: NA == NA)
        key = codes if j == order[0] else pd.factorize(key * (len(uniques) + 1) + codes)[0]
        shared = np.bincount(key)[key] > 1
        if not shared.any():
            return np.zeros(n, dtype=bool)
        if shared.mean() < 0.5:  # narrowing pays when it halves the rows
            rows, key = rows[shared], pd.factorize(key[shared])[0]
    dup = np.zeros(n, dtype=bool)
    dup[rows[np.bincount(key)[key] > 1]] = True
    return dup


def _pairwise_outcome(cols: _Columns, labels: Mapping[str, Labels], roles: Roles,
                      options: ReadOptions, problems: list[str]) -> _Outcome:
    """Step 4 (pairwise): verdicts, the order design, the tie policy, the rows kept."""
    n = len(cols.frame)
    a_labels, b_labels = labels.get("model_a"), labels.get("model_b")
    raw = cols.get(roles.outcome)
    if options.outcome_type == "numeric":
        problems.append(
            "outcome_type='numeric' does not apply to pairwise tables (their outcome is "
            "a verdict); leave it 'auto'"
        )
    if a_labels is None or b_labels is None:
        return _Outcome(kind="pairwise")
    b_in_a = b_labels.codes_in(a_labels.labels)
    same = (a_labels.codes == b_in_a) & (b_in_a >= 0)
    if same.any():
        problems.append(
            f"{int(same.sum())} rows compare a model with itself ({roles.model_a!r} "
            f"equals {roles.model_b!r}, rows {_rows(same)}); fix: drop those rows"
        )
    if raw is None:
        return _Outcome(kind="pairwise")
    verdict, na, unparsed = _parse_pairwise(
        raw, a_labels, b_labels, roles.outcome, options.outcome_kind, options.on_unparsed,
        problems)
    pairs_read: dict[str, int] = {}
    first = cols.get(roles.first_shown)
    if first is not None:
        a_first = _parse_first_shown(first, a_labels, b_labels, str(roles.first_shown),
                                     problems)
        others = [labels[k] for k in ("condition", *roles.clusters, "replicate")
                  if k in labels]
        pair, lone, pairs_read = _order_design(
            a_first, _match_pairs(a_labels, b_labels, others, a_first), roles,
            options.order_design, options.unmatched, problems)
    else:
        a_first = np.full(n, np.nan)
        pair = np.full(n, -1, dtype=np.int64)
        lone = np.zeros(n, dtype=bool)
    keep = ~na & ~unparsed
    n_unmatched = 0
    if options.unmatched == "drop":
        n_unmatched = int((lone & keep).sum())
        keep &= ~lone
    is_tie = keep & (verdict == 0.5)
    n_ties = int(is_tie.sum())
    verdict_label = Labels(np.where(verdict == 1.0, 0, np.where(verdict == 0.0, 1, 2)),
                           np.array(["a", "b", "tie"], dtype=object))
    n_tie_excluded = 0
    if options.ties == "exclude":
        n_tie_excluded = n_ties
        keep &= ~is_tie
        y, kind_type = verdict, "binary"
    elif options.ties == "half":
        y = verdict
        kind_type = "binary" if n_ties == 0 else "proportion"
        if options.outcome_type == "binary" and n_ties:
            problems.append(
                f"outcome_type='binary' but the pairwise outcome column "
                f"{roles.outcome!r} has {n_ties} ties, which ties='half' scores 0.5; "
                "fix: pass ties='exclude' or ties='separate' (or drop outcome_type)"
            )
    else:  # separate
        y, kind_type = np.where(verdict == 1.0, 1.0, 0.0), "binary"
    return _Outcome(
        kind="pairwise", outcome_type=kind_type,
        columns={"model_a": a_labels, "model_b": b_labels, "a_first": a_first, "pair_id": pair,
                 "y": y, "verdict": verdict_label},
        keep=keep, unparsed=unparsed, n_na=int(na.sum()), n_unparsed=int(unparsed.sum()),
        n_tie_excluded=n_tie_excluded, n_unmatched=n_unmatched, n_ties=n_ties,
        pairs_read=pairs_read)


def _scores_outcome(cols: _Columns, roles: Roles, options: ReadOptions,
                    problems: list[str], notes: list[str]) -> _Outcome:
    """Step 4 (scores): the outcome parsed to numbers, its type, the rows kept."""
    raw = cols.get(roles.outcome)
    if raw is None:
        return _Outcome(kind="scores")
    y, na, unparsed, kind_type = _parse_scores(
        raw, roles.outcome, options.outcome_type, options.on_unparsed, problems, notes)
    return _Outcome(kind="scores", outcome_type=kind_type, columns={"y": y},
                    keep=~na & ~unparsed, unparsed=unparsed, n_na=int(na.sum()),
                    n_unparsed=int(unparsed.sum()))


def _role_columns(cols: _Columns, labels: Mapping[str, Labels], roles: Roles,
                  problems: list[str]) -> dict[str, Any]:
    """Step 5: the condition, position, cluster and replicate columns of the table."""
    out: dict[str, Any] = {}
    if "condition" in labels:
        out["condition"] = labels["condition"]
    pos = cols.get(roles.position)
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
    return out
