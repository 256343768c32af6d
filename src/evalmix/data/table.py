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
    Integer id shared by the AB and BA records of one comparison (-1 when no order
    column was given). Pairs are matched before NA rows are dropped, so a pair whose
    partner had an NA outcome keeps a single record.
``condition``
    Condition / model label (string) when a condition column was given.
``position``
    A position covariate for score tables (as given).
one column per cluster role
    Named by the role (``scenario``, ``judge``, ...), holding the labels as strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError

if TYPE_CHECKING:
    from evalmix.data.summary import DesignSummary

Kind = Literal["scores", "pairwise"]
OutcomeType = Literal["binary", "proportion", "numeric"]
TiePolicy = Literal["exclude", "half", "separate"]

TIE_POLICIES: tuple[str, ...] = ("exclude", "half", "separate")
OUTCOME_TYPES: tuple[str, ...] = ("auto", "binary", "proportion", "numeric")
#: Column names the canonical frame uses itself; cluster roles may not take them.
RESERVED_NAMES: frozenset[str] = frozenset(
    {"row", "y", "verdict", "model_a", "model_b", "a_first", "pair_id", "condition",
     "position", "outcome", "first_shown", "weight"}
)

__all__ = ["EvalTable", "Roles", "Kind", "OutcomeType", "TiePolicy", "TIE_POLICIES"]


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "clusters", MappingProxyType(dict(self.clusters)))

    def __reduce__(self) -> tuple[Any, ...]:  # mappingproxy cannot be pickled
        return (Roles, (self.outcome, self.condition, self.model_a, self.model_b,
                        self.first_shown, self.position, dict(self.clusters)))

    def __hash__(self) -> int:
        return hash((self.outcome, self.condition, self.model_a, self.model_b,
                     self.first_shown, self.position, tuple(self.clusters.items())))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            k: getattr(self, k)
            for k in ("outcome", "condition", "model_a", "model_b", "first_shown", "position")
            if getattr(self, k) is not None
        }
        out["clusters"] = dict(self.clusters)
        return out


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
        dropped (``comparisons``, ``both_orders``, ``one_order_only``).
    n_duplicates : int
        Scores tables: rows read that exactly repeat another row over all columns (kept:
        repeated 0/1 scores within a cluster are ordinary data). Pairwise tables refuse
        such rows, so it is 0 there.
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
        codes = {}
        for role in self.roles.clusters:
            labels = self._frame[role].to_numpy()
            c, _ = pd.factorize(labels, sort=True)
            c = c.astype(np.int64)
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
            "pairs_read": dict(self.pairs_read), "n_duplicates": self.n_duplicates},))

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

    def codes(self, role: str) -> np.ndarray:
        """Integer codes 0..G-1 of cluster factor ``role`` (labels sorted)."""
        self.check_cluster(role)
        return self._codes[role]

    def levels(self, role: str) -> np.ndarray:
        """Sorted level labels of cluster factor ``role``."""
        self.check_cluster(role)
        return np.sort(pd.unique(self._frame[role].to_numpy()))

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
        unknown = [r for r in roles if r not in self.roles.clusters]
        if unknown:
            known = ", ".join(repr(r) for r in self.roles.clusters) or "none"
            raise EvalmixError(
                f"cluster {', '.join(repr(u) for u in unknown)} is not a cluster factor of "
                f"this table; its cluster factors are: {known}. Name one of them, or pass "
                "the column at read time, e.g. evalmix.read(..., clusters={'item': 'item_id'})"
            )
        return roles

    def pair_codes(self) -> np.ndarray:
        """Codes 0..P-1 of matched AB/BA pairs (each unpaired row is its own pair)."""
        if self.kind != "pairwise":
            raise EvalmixError("pair_codes() needs a pairwise table")
        pid = self._frame["pair_id"].to_numpy()
        if (pid < 0).all():
            return np.arange(self.n_obs, dtype=np.int64)
        c, _ = pd.factorize(pid, sort=True)
        return c.astype(np.int64)

    def check_pairs_within(self, cluster: str | Sequence[str] | None) -> None:
        """Raise if a cluster factor splits the AB and BA records of one comparison.

        Resampling or clustering by such a factor would treat two halves of one
        comparison as independent.
        """
        roles = self.check_cluster(cluster)
        if self.kind != "pairwise" or not self.has_order or not roles:
            return
        pid = self._frame["pair_id"].to_numpy()
        for role in roles:
            codes = self._codes[role]
            per_pair = pd.Series(codes).groupby(pid).nunique()
            bad = int((per_pair > 1).sum())
            if bad:
                raise EvalmixError(
                    f"cluster factor {role!r} (column {self.roles.clusters[role]!r}) splits "
                    f"{bad} matched AB/BA pairs across clusters; the two orders of one "
                    "comparison must share a cluster. Cluster by a factor that is constant "
                    "within a comparison (e.g. item or scenario)."
                )

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
        from evalmix.data.summary import summarize

        return summarize(self)

    def __repr__(self) -> str:
        factors = ", ".join(f"{r}={self.n_levels(r)}" for r in self.clusters) or "none"
        dropped = sum(self.dropped.values())
        return (
            f"EvalTable(kind={self.kind!r}, outcome_type={self.outcome_type!r}, "
            f"n_obs={self.n_obs}, dropped={dropped}, clusters: {factors})"
        )

    __str__ = __repr__


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
