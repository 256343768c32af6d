"""Read a long-format eval table from a file or DataFrame and validate it once.

:func:`read` is the only way to build an :class:`~evalmix.data.table.EvalTable`. It
collects *every* problem it finds and raises them together in one
:class:`~evalmix.errors.InvalidTableError`, each naming the column and a fix. The
caller's DataFrame is never modified.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.load import _load_roles, load_frame, resolve_column
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
    InvalidOptionError,
    InvalidTableError,
    check_option,
)
from evalmix.vocabulary import (
    OnUnparsed,
    OrderDesign,
    OutcomeKind,
    ReadOutcomeType,
    TiePolicy,
    Unmatched,
)

ORDER_DESIGNS: tuple[str, ...] = ("auto", "matched", "single")
OUTCOME_KINDS: tuple[str, ...] = ("auto", "verdict", "winner")
UNPARSED_POLICIES: tuple[str, ...] = ("auto", "error", "drop")



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
    ties: TiePolicy | None = None,
    roles: str | os.PathLike[str] | None = None,
    outcome_type: ReadOutcomeType = "auto",
    unmatched: Unmatched = "error",
    replicate: str | None = None,
    order_design: OrderDesign = "auto",
    sampled: Sequence[str] | None = None,
    strata: Sequence[str] | None = None,
    on_unparsed: OnUnparsed = "auto",
    outcome_kind: OutcomeKind | None = None,
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
    strata : sequence of str, optional
        Cluster roles that are *strata*: groupings that were chosen, not sampled (a
        benchmark's subsets or categories). They are held fixed (intervals cluster
        within them) and never taken as sampled by default; a role named in
        ``sampled`` is not a stratum. Also a roles-file key: ``strata = ["subset"]``.
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
            raise InvalidOptionError(
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
    if strata is not None:
        spec["strata"] = [strata] if isinstance(strata, str) else list(strata)
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
    return table.with_sampled(spec.get("sampled"), strata=spec.get("strata"))


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
            raise InvalidOptionError(
                f"cluster role {role!r} = {value!r} looks like an interaction cell, but "
                f"{', '.join(repr(m) for m in missing) or 'a part'} is not a cluster role "
                "(or names a role twice); an interaction joins two or more other roles "
                "with ':', e.g. clusters={'persona': 'persona_id', 'scenario': "
                "'scenario_id', 'cell': 'persona:scenario'}"
            )
    return out


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

    nested = [p for c in dict.fromkeys(used) if (p := _non_scalar(col(c), c, source))]
    if nested:
        raise InvalidTableError(problems + nested)

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
    outcome_notes: list[str] = []

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
                raw_outcome, roles.outcome, outcome_type, on_unparsed, problems,
                outcome_notes)
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
        outcome_notes=tuple(outcome_notes),
    )
