"""Read a long-format eval table from a file or DataFrame and validate it once.

:func:`read` is the only way to build an :class:`~evalmix.data.table.EvalTable`. It
collects *every* problem it finds and raises them together in one
:class:`~evalmix.errors.InvalidTableError`, each naming the column and a fix. The
caller's DataFrame is never modified.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args

import pandas as pd

from evalmix.data.load import _load_roles, load_frame, resolve_column
from evalmix.data.table import (
    INTERACTION_SEP,
    OUTCOME_TYPES,
    TIE_POLICIES,
    EvalTable,
    Roles,
    add_interactions,
)
from evalmix.data.validate import ReadOptions, validate
from evalmix.errors import (
    InvalidOptionError,
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

ORDER_DESIGNS: tuple[str, ...] = get_args(OrderDesign)
OUTCOME_KINDS: tuple[str, ...] = get_args(OutcomeKind)
UNPARSED_POLICIES: tuple[str, ...] = get_args(OnUnparsed)



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
    sampled: str | Sequence[str] | None = None,
    strata: str | Sequence[str] | None = None,
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
    sampled : str or sequence of str, optional
        The cluster roles the claim generalises over (new scenarios, personas,
        items...). Default: every role except judge-like (``judge``, ``rater``, ...)
        and replicate-like (``rep``, ``epoch``, ``run``, ...) ones, which are fixed. The
        report's recommended interval accounts for every sampled role. Also a roles-file
        key: ``sampled = ["scenario", "persona"]``.
    strata : str or sequence of str, optional
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
    options = ReadOptions(ties=ties_policy, outcome_type=outcome_type, unmatched=unmatched,
                          order_design=order_design, on_unparsed=on_unparsed,
                          outcome_kind=kind_of_outcome)
    table = validate(frame, role_map, options, source_name)
    if interactions:
        table = add_interactions(table, interactions)
    return table.with_sampled(spec.get("sampled"), strata=spec.get("strata"))


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
