"""The validated, immutable eval table every other module trusts.

An :class:`EvalTable` is produced only by :func:`evalmix.read` (validation happens once,
there). It holds a canonical long-format frame plus integer codes for every cluster
factor, so downstream array code never re-parses labels.

Canonical columns of ``EvalTable.data``
---------------------------------------
``row``
    Position of the row in the source table (0-based), so results can be traced back.
``y``
    The outcome as float. Scores: the score (0/1, proportion or numeric).
    Pairwise: 1 if ``model_a`` won, 0 if ``model_b`` won; ties are 0.5 under
    ``ties="half"``, removed under ``"exclude"``, and 0 under ``"separate"`` (where ``y``
    is the strict-win indicator of ``model_a`` and ``verdict`` keeps the tie).
``verdict`` (pairwise)
    ``"a"``, ``"b"`` or ``"tie"``.
``model_a``, ``model_b`` (pairwise)
    The two compared models or conditions, as strings.
``a_first`` (pairwise)
    1.0 if model_a's answer was shown first, 0.0 if model_b's was, NaN if unknown.
``pair_id`` (pairwise)
    Integer id shared by the records of one comparison (the unordered model pair plus
    condition, cluster and replicate labels): its AB and BA records, or all of its
    records when it has several per order (then a warning names the fix:
    ``replicate=``); -1 when no order column was given. In a single-order design
    (each comparison judged in one randomised order) every record is its own
    comparison. Pairs are matched before NA rows are dropped, so a pair whose
    partner had an NA outcome keeps a single record.
``condition``
    Condition / model label (string) when a condition column was given.
``position``
    A position covariate for score tables (as given).
``replicate``
    Replicate label (repeated runs of the same item and condition: Inspect epochs,
    repeated judge runs), as strings, when a replicate column was given. Replicates
    are nested within the item or comparison; they are never a cluster factor.
one column per cluster role
    Named by the role (``scenario``, ``judge``, ...), holding the labels as strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, get_args

import numpy as np
import pandas as pd

from evalmix.data.summary import DesignSummary, summarize
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.vocabulary import Kind, OutcomeType, TiePolicy

TIE_POLICIES: tuple[str, ...] = get_args(TiePolicy)
OUTCOME_TYPES: tuple[str, ...] = ("auto", "binary", "proportion", "numeric")
#: Column names the canonical frame uses itself; cluster roles may not take them.
RESERVED_NAMES: frozenset[str] = frozenset(
    {"row", "y", "verdict", "model_a", "model_b", "a_first", "pair_id", "condition",
     "position", "outcome", "first_shown", "weight", "replicate"}
)

__all__ = ["EvalTable", "Roles", "Kind", "OutcomeType", "TiePolicy", "TIE_POLICIES",
           "default_sampled", "is_judge_role", "is_replicate_role", "INTERACTION_SEP",
           "add_interactions", "cluster_codes", "dense_codes", "intersect_codes",
           "check_table"]


@dataclass(frozen=True)
class Roles:
    """Which source column plays which role (column names as in the source)."""

    outcome: str
    condition: str | None = None
    model_a: str | None = None
    model_b: str | None = None
    first_shown: str | None = None
    position: str | None = None
    clusters: Mapping[str, str] = field(default_factory=dict)
    replicate: str | None = None
    #: Cluster roles the claim generalises over (``None``: :func:`default_sampled`).
    sampled: tuple[str, ...] | None = None
    #: Cluster roles that are strata: groupings chosen, not sampled (benchmark subsets,
    #: categories). Held fixed, never sampled by default, never the recommended cluster.
    strata: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "clusters", MappingProxyType(dict(self.clusters)))
        if self.sampled is not None:
            object.__setattr__(self, "sampled", tuple(self.sampled))
        object.__setattr__(self, "strata", tuple(self.strata or ()))

    def __reduce__(self) -> tuple[Any, ...]:  # mappingproxy cannot be pickled
        return (Roles, (self.outcome, self.condition, self.model_a, self.model_b,
                        self.first_shown, self.position, dict(self.clusters),
                        self.replicate, self.sampled, self.strata))

    def __hash__(self) -> int:
        return hash((self.outcome, self.condition, self.model_a, self.model_b,
                     self.first_shown, self.position, tuple(self.clusters.items()),
                     self.replicate, self.sampled, self.strata))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            k: getattr(self, k)
            for k in ("outcome", "condition", "model_a", "model_b", "first_shown", "position")
            if getattr(self, k) is not None
        }
        out["clusters"] = dict(self.clusters)
        if self.replicate is not None:
            out["replicate"] = self.replicate
        if self.sampled is not None:
            out["sampled"] = list(self.sampled)
        if self.strata:
            out["strata"] = list(self.strata)
        return out


#: Words in a role name that mark a judge (chosen, so fixed by default).
JUDGE_WORDS: tuple[str, ...] = ("judge", "rater", "annotator", "grader", "evaluator")
#: Words in a role name that mark a replicate (repeated runs: fixed, never a sampling unit).
REPLICATE_WORDS: tuple[str, ...] = ("rep", "replicate", "epoch", "run", "repeat", "seed",
                                    "attempt", "trial")
#: Separator of an interaction cell's roles (``"persona:scenario:author"``).
INTERACTION_SEP = ":"


def is_judge_role(role: str) -> bool:
    """True for a role named like a judge (``judge``, ``rater``, ``annotator``, ...)."""
    low = role.lower()
    return any(w in low for w in JUDGE_WORDS)


def is_replicate_role(role: str) -> bool:
    """True for a role named like a replicate (``rep``, ``epoch``, ``run``, ...)."""
    words = [w for w in re.split(r"[^a-z]+", role.lower()) if w]
    return any(w in REPLICATE_WORDS or w.rstrip("s") in REPLICATE_WORDS for w in words)


def dense_codes(labels: np.ndarray | Sequence[Any]) -> np.ndarray:
    """Codes ``0..G-1`` of the distinct values of ``labels``, in sorted order (-1 missing).

    The one implementation of dense cluster codes (``EvalTable.codes``, the sandwich and
    the bootstraps all use it). Non-negative integers with a small range are numbered
    with a presence table instead of hashing (same codes as ``pd.factorize(sort=True)``,
    faster; tests/common/test_primitives.py checks the two agree). Text held by pandas (a
    ``str``/``string`` Series or array, the table's label columns) is factorized as it
    is, without a detour through Python objects (the same codes: both sort by code point).

    Examples
    --------
    >>> dense_codes(np.array(["b", "a", "b"])).tolist()
    [1, 0, 1]
    """
    if isinstance(getattr(labels, "dtype", None), pd.StringDtype):
        return pd.factorize(labels, sort=True)[0].astype(np.int64)  # type: ignore[call-overload]
    a = np.asarray(labels)
    if a.dtype.kind in "iu" and a.size and a.min() >= 0:
        top = int(a.max()) + 1
        if top <= 4 * a.size + 16:
            present = np.zeros(top, dtype=bool)
            present[a] = True
            lookup = np.cumsum(present, dtype=np.int32 if top < 2**31 else np.int64)
            del present
            np.subtract(lookup, 1, out=lookup)
            return lookup[a].astype(np.int64)
    return pd.factorize(a, sort=True)[0].astype(np.int64)


def cluster_codes(clusters: np.ndarray | Sequence[Any]) -> tuple[np.ndarray, int]:
    """Dense codes ``0..G-1`` of a one-dimensional label array (:func:`dense_codes`) and
    ``G``; a missing label is an error (array functions take any labels through this).

    Examples
    --------
    >>> cluster_codes(["b", "a", "b"])
    (array([1, 0, 1]), 2)
    """
    c = np.asarray(clusters)
    if c.ndim != 1:
        raise EvalmixError(f"clusters must be one-dimensional, got shape {c.shape}")
    codes = dense_codes(c)
    if (codes < 0).any():
        raise EvalmixError("cluster codes contain missing values; drop those rows or give "
                           "them a cluster label")
    return codes, int(codes.max()) + 1 if codes.size else 0


def intersect_codes(*codes: np.ndarray) -> np.ndarray:
    """Dense codes of the intersection of several cluster factors given as codes: one
    code per combination that occurs, in lexicographic order of the combinations.

    Examples
    --------
    >>> intersect_codes(np.array([0, 0, 1, 1]), np.array([1, 0, 1, 1])).tolist()
    [1, 0, 2, 2]
    """
    key = np.zeros(np.shape(codes[0])[0], dtype=np.int64)
    for c in codes:
        c = np.asarray(c, dtype=np.int64)
        lo = int(c.min(initial=0))  # -1 (missing) sorts first, as groupby sorts it
        key = dense_codes(key * (int(c.max(initial=0)) - lo + 1) + (c - lo))
    return key


def default_sampled(roles: Sequence[str], strata: Sequence[str] = ()) -> tuple[str, ...]:
    """The roles a claim generalises over by default: all but judges, replicates and
    strata.

    Judges are the ones you chose and replicates repeat one unit, so both are *fixed*;
    ``strata`` are groupings chosen, not sampled (a benchmark's subsets or categories,
    declared by the log readers or with ``strata=``), so they are fixed too; scenarios,
    personas, items, passages, templates and authors are taken as samples from a
    population of such units. Override with ``sampled=`` / ``strata=`` (read, analyze)
    or ``--sampled`` / ``--strata`` (CLI). Interaction cells (``"a:b"``) are sampled
    when all their parts are.

    Examples
    --------
    >>> default_sampled(["item", "item_group", "judge"], strata=["item_group"])
    ('item',)
    """
    base = [r for r in roles if INTERACTION_SEP not in r]
    keep = {r for r in base if not (is_judge_role(r) or is_replicate_role(r)
                                    or r in strata)}
    out = []
    for r in roles:
        parts = r.split(INTERACTION_SEP) if INTERACTION_SEP in r else [r]
        if all(p in keep for p in parts):
            out.append(r)
    return tuple(out)


class ReadCodes(dict):  # type: ignore[type-arg]
    """Cluster codes that :func:`evalmix.read` computed from the distinct labels it built
    the frame's columns from, handed to :class:`EvalTable` as ``_codes`` so it need not
    factorize a million-row text column again. Any other ``_codes`` (what ``replace``
    passes on) is ignored and the codes are recomputed from the frame."""


@dataclass(frozen=True, eq=False)
class EvalTable:
    """A validated long-format eval table (one row per score or judgment).

    Do not build one by hand: use :func:`evalmix.read`, which validates once and
    reports every problem it finds.

    Attributes
    ----------
    data : pandas.DataFrame
        The canonical frame (see the module docstring). Each access returns a new
        shallow copy (pandas copy-on-write), so changing it never changes the table;
        its numeric arrays are read-only views. :meth:`frame` gives a deep copy.
    kind : {"scores", "pairwise"}
    outcome_type : {"binary", "proportion", "numeric"}
        For pairwise tables ``"binary"`` (ties "exclude"/"separate") or ``"proportion"``
        (ties "half", where a tie scores 0.5).
    roles : Roles
        Source column of every role.
    ties : {"exclude", "half", "separate"}
        Tie policy applied at read time (pairwise tables).
    n_raw : int
        Rows in the source before any were dropped.
    dropped : Mapping[str, int]
        Rows dropped, by reason (``na_outcome``, ``unparsed_outcome``, ``tie_excluded``,
        ``unmatched_pair``; ``not_selected`` for rows a :meth:`subset` left out).
    n_ties : int
        Tie verdicts among the rows read (before the tie policy; pairwise tables).
    source : str
        Where the table came from (path or ``"DataFrame"``).
    pairs_read : Mapping[str, int]
        Pairwise tables with an order column: AB/BA matching as read, before rows were
        dropped (``comparisons``, ``both_orders``, ``one_order_only``; ``single_order``
        is 1 in a single-order design, ``multi_record_comparisons`` counts comparisons
        with several records per order).
    n_duplicates : int
        Scores tables: rows read that exactly repeat another row over all columns (kept:
        repeated 0/1 scores within a cluster are ordinary data). Pairwise tables refuse
        such rows, so it is 0 there.
    outcome_notes : tuple of str
        How the outcome was typed when rounding or a few values decided it (values
        snapped to 0 or 1; the first value that made a column numeric or a proportion).
    """

    data: pd.DataFrame
    kind: Kind
    outcome_type: OutcomeType
    roles: Roles
    ties: TiePolicy = "half"
    n_raw: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    n_ties: int = 0
    source: str = "DataFrame"
    pairs_read: Mapping[str, int] = field(default_factory=dict)
    n_duplicates: int = 0
    outcome_notes: tuple[str, ...] = ()
    _codes: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dropped", MappingProxyType(dict(self.dropped)))
        object.__setattr__(self, "pairs_read", MappingProxyType(dict(self.pairs_read)))
        if not isinstance(self.roles, Roles):
            raise EvalmixError("EvalTable needs a Roles instance; build tables with evalmix.read")
        missing = [r for r in ("row", "y", *self.roles.clusters) if r not in self._frame]
        if missing:
            raise EvalmixError(
                f"EvalTable data lacks the canonical columns {missing}; build tables with "
                "evalmix.read"
            )
        given = self._codes if isinstance(self._codes, ReadCodes) else {}
        codes = {}
        for role in self.roles.clusters:
            c = given.get(role)
            if c is None or len(c) != len(self._frame):
                c = dense_codes(self._frame[role].array)
            c.flags.writeable = False
            codes[role] = c
        object.__setattr__(self, "_codes", MappingProxyType(codes))

    @property
    def _frame(self) -> pd.DataFrame:
        """The stored frame itself (internal use; never hand it out)."""
        return self.__dict__["_data"]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (joblib, dask, deepcopy) by rebuilding from the constructor fields."""
        return (_rebuild_table, ({
            "data": self._frame, "kind": self.kind, "outcome_type": self.outcome_type,
            "roles": self.roles, "ties": self.ties, "n_raw": self.n_raw,
            "dropped": dict(self.dropped), "n_ties": self.n_ties, "source": self.source,
            "pairs_read": dict(self.pairs_read), "n_duplicates": self.n_duplicates,
            "outcome_notes": self.outcome_notes},))

    # ------------------------------------------------------------------ basics
    @property
    def n_obs(self) -> int:
        """Rows kept after dropping."""
        return len(self._frame)

    @property
    def y(self) -> np.ndarray:
        """The outcome as a read-only float array."""
        y = self._frame["y"].to_numpy(dtype=float)
        if y.flags.writeable:  # pragma: no cover - copy-on-write gives read-only views
            y = y.copy()
            y.flags.writeable = False
        return y

    @property
    def clusters(self) -> tuple[str, ...]:
        """Cluster factor role names, in the order given."""
        return tuple(self.roles.clusters)

    @property
    def has_condition(self) -> bool:
        return "condition" in self._frame.columns

    @property
    def has_order(self) -> bool:
        """True for pairwise tables that know which answer was shown first."""
        return self.kind == "pairwise" and self.roles.first_shown is not None

    @property
    def sampled(self) -> tuple[str, ...]:
        """Cluster roles the claim generalises over (see :func:`default_sampled`)."""
        if self.roles.sampled is not None:
            return tuple(r for r in self.roles.sampled if r in self.roles.clusters)
        base = default_sampled(self.clusters, self.strata)
        return tuple(r for r in base if all(p in base for p in self._parts(r)))

    def _parts(self, role: str) -> tuple[str, ...]:
        """The roles an interaction cell joins (``cell = "persona:scenario"``); ``()``
        for a plain role."""
        parts = tuple(self.roles.clusters[role].split(INTERACTION_SEP))
        plain = len(parts) >= 2 and all(p in self.roles.clusters and p != role
                                        for p in parts)
        return parts if plain else ()

    @property
    def strata(self) -> tuple[str, ...]:
        """Cluster roles that are strata: chosen groupings (benchmark subsets,
        categories) held fixed; intervals cluster within them, never by them."""
        return tuple(r for r in self.roles.strata if r in self.roles.clusters)

    @property
    def fixed(self) -> tuple[str, ...]:
        """Cluster roles held fixed (chosen judges, replicates, strata, or as declared)."""
        return tuple(r for r in self.clusters if r not in self.sampled)

    def with_sampled(self, sampled: str | Sequence[str] | None = None, *,
                     strata: str | Sequence[str] | None = None) -> EvalTable:
        """The same table with ``sampled`` roles and/or ``strata`` declared.

        ``None`` keeps what the table has (for ``sampled``: the default rule, every role
        but judges, replicates and strata). ``strata`` replaces the declared strata (a
        log reader declares its format's, e.g. AlpacaEval's ``dataset``), so
        ``strata=[]`` makes them ordinary roles again; a role named in ``sampled`` stops
        being a stratum.

        Raises
        ------
        EvalmixError
            If a name is not a cluster role of the table, or is named both sampled and
            a stratum.
        """
        if sampled is None and strata is None:
            return self
        roles = self.roles
        if strata is not None:
            names = _role_names(strata)
            self.check_cluster(names)
            kept = None if roles.sampled is None else tuple(
                r for r in roles.sampled if r not in names)
            roles = replace(roles, strata=names, sampled=kept)
        if sampled is not None:
            names = _role_names(sampled)
            self.check_cluster(names)
            both = [r for r in names if strata is not None and r in roles.strata]
            if both:
                raise EvalmixError(
                    f"{', '.join(repr(r) for r in both)} is named both sampled and a "
                    "stratum; a role is one or the other: a stratum was chosen (its levels "
                    "are all the ones you care about), a sampled role's levels stand for "
                    "new ones. Drop it from one of sampled= (--sampled) and strata= "
                    "(--strata)")
            roles = replace(roles, sampled=names,
                            strata=tuple(r for r in roles.strata if r not in names))
        return replace(self, roles=roles, _codes={})

    @property
    def single_order(self) -> bool:
        """True for a pairwise table whose comparisons were each judged in one
        randomised order (no AB/BA pairs): position effects are then estimated as a
        covariate and position-adjusted win rates by standardisation."""
        return self.has_order and bool(self.pairs_read.get("single_order", 0))

    @property
    def replicate(self) -> str | None:
        """Source column of the replicate role (repeated runs nested within the item or
        comparison, held in the canonical ``replicate`` column), or None. Replicates
        are fixed repetitions, never a sampled cluster level."""
        return self.roles.replicate

    def codes(self, role: str) -> np.ndarray:
        """Integer codes 0..G-1 of cluster factor ``role`` (labels sorted).

        ``role`` may be an interaction cell of roles, ``"persona:scenario"``: one code per
        combination of their levels that occurs.
        """
        role = self.check_cluster(role)[0]
        if role in self._codes:
            return self._codes[role]
        parts = role.split(INTERACTION_SEP)
        c = intersect_codes(*(self._codes[p] for p in parts))
        c.flags.writeable = False
        return c

    def levels(self, role: str) -> np.ndarray:
        """Sorted level labels of cluster factor ``role`` (``"a:b"`` joins labels by ':')."""
        role = self.check_cluster(role)[0]
        if role in self._codes:
            return np.sort(pd.unique(self._frame[role].to_numpy()))
        parts = role.split(INTERACTION_SEP)
        joined = self._frame[parts].astype(str).agg(INTERACTION_SEP.join, axis=1)
        return np.sort(pd.unique(joined.to_numpy()))

    def n_levels(self, role: str) -> int:
        return int(self.codes(role).max()) + 1 if self.n_obs else 0

    def check_cluster(self, cluster: str | Sequence[str] | None) -> tuple[str, ...]:
        """Validate a cluster argument and return it as a tuple of role names.

        Raises
        ------
        EvalmixError
            If a role is not one of the table's cluster factors.
        """
        if cluster is None:
            return ()
        roles = (cluster,) if isinstance(cluster, str) else tuple(cluster)
        roles = tuple(self._interaction_name(r) for r in roles)
        unknown = [p for r in roles for p in r.split(INTERACTION_SEP)
                   if p not in self.roles.clusters]
        if unknown:
            known = ", ".join(repr(r) for r in self.roles.clusters) or "none"
            raise InvalidOptionError(
                f"cluster {', '.join(repr(u) for u in unknown)} is not a cluster factor of "
                f"this table; its cluster factors are: {known}. Name one of them, or pass "
                "the column at read time, e.g. evalmix.read(..., clusters={'item': 'item_id'})"
            )
        return roles

    def _interaction_name(self, role: object) -> str:
        """``role`` as given, or an interaction ``"a:b"`` (also ``("a", "b")``) checked."""
        if isinstance(role, tuple | list):
            role = INTERACTION_SEP.join(str(r) for r in role)
        role = str(role)
        if INTERACTION_SEP not in role or role in self.roles.clusters:
            return role
        parts = [p.strip() for p in role.split(INTERACTION_SEP)]
        if len(set(parts)) != len(parts) or not all(parts):
            raise InvalidOptionError(
                f"interaction cell {role!r} must name two or more different cluster roles "
                "separated by ':', e.g. 'persona:scenario:author'"
            )
        return INTERACTION_SEP.join(parts)

    def pair_codes(self) -> np.ndarray:
        """Codes 0..P-1 of matched AB/BA pairs (each unpaired row is its own pair)."""
        if self.kind != "pairwise":
            raise EvalmixError("pair_codes() needs a pairwise table")
        pid = self._frame["pair_id"].to_numpy()
        if (pid < 0).all():
            return np.arange(self.n_obs, dtype=np.int64)
        return dense_codes(pid)

    def check_pairs_within(self, cluster: str | Sequence[str] | None) -> None:
        """Raise if a cluster factor splits the AB and BA records of one comparison.

        Resampling or clustering by such a factor would treat two halves of one
        comparison as independent.
        """
        roles = self.check_cluster(cluster)
        if self.kind != "pairwise" or not self.has_order or not roles:
            return
        for role in roles:
            bad = self._split_pairs(role)
            if bad:
                raise EvalmixError(
                    f"cluster factor {role!r} (column {self.roles.clusters.get(role, role)!r}) splits "
                    f"{bad} matched AB/BA pairs across clusters; the two orders of one "
                    "comparison must share a cluster. Cluster by a factor that is constant "
                    "within a comparison (e.g. item or scenario)."
                )

    def _split_pairs(self, role: str) -> int:
        """How many matched AB/BA pairs cluster factor ``role`` splits (memoised: the
        report asks once per interval)."""
        memo = self.__dict__.setdefault("_split_memo", {})
        if role not in memo:
            pid = dense_codes(self._frame["pair_id"].to_numpy())
            codes = self.codes(role)
            g = int(codes.max(initial=0)) + 1
            # one entry per distinct (pair, cluster) combination; a pair in two clusters
            # appears twice
            pairs_of = np.unique(pid.astype(np.int64) * g + codes) // g
            memo[role] = int((np.bincount(pairs_of) > 1).sum())
        return int(memo[role])

    # ------------------------------------------------------------------ views
    def frame(self) -> pd.DataFrame:
        """A writable copy of the canonical frame."""
        return self._frame.copy(deep=True)

    def subset(self, mask: np.ndarray | pd.Series | Iterable[bool]) -> EvalTable:
        """A new table with the rows where ``mask`` is true (for stratified analyses).

        Cluster codes are recomputed; ``n_raw`` is carried over and the rows left out
        are counted in ``dropped["not_selected"]``, so ``n_raw == n_obs +
        sum(dropped.values())`` still holds.
        """
        m = np.asarray(mask, dtype=bool)
        if m.shape != (self.n_obs,):
            raise EvalmixError(f"mask has shape {m.shape}; expected ({self.n_obs},)")
        if not m.any():
            raise EvalmixError("subset() selected no rows")
        data = self._frame.loc[m].reset_index(drop=True)
        dropped = dict(self.dropped)
        n_out = int((~m).sum())
        if n_out:
            dropped["not_selected"] = dropped.get("not_selected", 0) + n_out
        return replace(self, data=data, dropped=dropped, _codes={})

    def describe(self) -> DesignSummary:
        """The design summary: rows, levels per factor, cluster sizes, crossing, AB/BA."""
        return summarize(self)

    def __repr__(self) -> str:
        factors = ", ".join(f"{r}={self.n_levels(r)}" for r in self.clusters) or "none"
        dropped = sum(self.dropped.values())
        return (
            f"EvalTable(kind={self.kind!r}, outcome_type={self.outcome_type!r}, "
            f"n_obs={self.n_obs}, dropped={dropped}, clusters: {factors})"
        )

    __str__ = __repr__


def _role_names(names: Sequence[str] | str) -> tuple[str, ...]:
    """Role names as a tuple, stripped, each once (a string is one name)."""
    items = (names,) if isinstance(names, str) else tuple(names)
    return tuple(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))


def add_interactions(table: EvalTable, interactions: Mapping[str, Sequence[str]]
                     ) -> EvalTable:
    """``table`` with interaction-cell roles added (``{"cell": ("persona", "scenario")}``).

    Each new role gets a canonical column of its parts' labels joined by ``:`` and is
    recorded in ``roles.clusters`` as ``"persona:scenario"``.
    """
    data = table.frame()
    clusters = dict(table.roles.clusters)
    for role, parts in interactions.items():
        table.check_cluster(list(parts))
        if role in clusters or role in RESERVED_NAMES or not role.isidentifier():
            raise InvalidOptionError(
                f"interaction role name {role!r} is taken or not a valid name; choose a "
                "new name of letters, digits and _, e.g. cell='persona:scenario'"
            )
        data[role] = data[list(parts)].astype(str).agg(INTERACTION_SEP.join, axis=1)
        clusters[role] = INTERACTION_SEP.join(parts)
    return replace(table, data=data, roles=replace(table.roles, clusters=clusters),
                   _codes={})


def _rebuild_table(fields: dict[str, Any]) -> EvalTable:
    return EvalTable(**fields)


def _get_data(self: EvalTable) -> pd.DataFrame:
    return self.__dict__["_data"].copy(deep=False)


def _set_data(self: EvalTable, value: pd.DataFrame) -> None:
    # only reachable from the dataclass __init__ (the frozen __setattr__ blocks users)
    if not isinstance(value, pd.DataFrame):
        raise EvalmixError(f"EvalTable data must be a DataFrame, got {type(value).__name__}")
    self.__dict__["_data"] = value.copy(deep=False)


EvalTable.data = property(  # type: ignore[assignment,method-assign]
    _get_data, _set_data, doc="The canonical frame (a fresh shallow copy on each access)."
)


def check_table(table: object, caller: str) -> EvalTable:
    """``table`` if it is an :class:`EvalTable`; else an :class:`~evalmix.errors.
    EvalmixError` that says how to make one.

    A pandas DataFrame is not read with guessed roles: which column is the outcome and
    which are the clusters changes every interval, so the message names
    :func:`evalmix.read` with the columns the frame has (pandas and statsmodels likewise
    refuse an object of the wrong kind with a ``TypeError`` at the call).
    """
    if isinstance(table, EvalTable):
        return table
    if isinstance(table, pd.DataFrame):
        cols = ", ".join(repr(str(c)) for c in list(table.columns)[:8])
        more = ", ..." if table.shape[1] > 8 else ""
        raise EvalmixError(
            f"{caller}() takes an EvalTable, not a pandas DataFrame (columns {cols}{more}): "
            "read it first with evalmix.read(df, outcome=..., clusters={...}) (plus "
            "condition= or model_a=/model_b=), which checks the columns and says which "
            f"rows it drops, then pass the table to {caller}()")
    raise EvalmixError(f"{caller}() takes an EvalTable from evalmix.read(...); got "
                       f"{type(table).__name__}")
