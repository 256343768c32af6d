"""Cluster-level randomization tests of a condition effect (when the assignment is known).

When the conditions were assigned at random -- each scenario run under both prompts with
the order counterbalanced, or whole scenarios assigned to one prompt -- the assignment
itself is the reference distribution (Fisher's randomization test): under the sharp null
that the condition changes no outcome, every assignment the design could have produced
was equally likely and gives the statistic it gives. The test relabels whole clusters,
never rows, so it keeps the clustering:

``"within"`` (every cluster has rows of both conditions)
    each cluster's two conditions are swapped or not, independently: ``2^G`` assignments;
``"between"`` (every cluster has one condition)
    the conditions are permuted among the clusters (within strata), keeping how many
    clusters had each: ``C(G, G_B)`` assignments.

With at most :data:`EXACT_LIMIT` assignments every one is enumerated (the exact p-value);
otherwise ``reps`` are drawn at random and ``p = (1 + #{as extreme}) / (1 + reps)``
(Phipson & Smyth 2010), which never reports 0. A statistic given as
:class:`~evalmix.inference.sums.Sums` (the default difference of means is one) is
evaluated for a whole block of assignments at once: per-cluster sums under each label,
mixed by the assignment matrix.

References
----------
Fisher, R. A. (1935). The Design of Experiments. Oliver & Boyd.
Good, P. (2005). Permutation, Parametric, and Bootstrap Tests of Hypotheses, 3rd ed.
Springer. doi:10.1007/b138696
Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero.
Statistical Applications in Genetics and Molecular Biology 9(1).
doi:10.2202/1544-6115.1585
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, get_args

import numpy as np
import pandas as pd

from evalmix._progress import Progress
from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError, InvalidOptionError, check_count, check_option
from evalmix.inference.resampling import call_statistic, resampling_design, statistic_name
from evalmix.inference.sandwich import cluster_sums
from evalmix.inference.sums import Sums, expression
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import PicklableProxies, tidy_rows
from evalmix.vocabulary import Alternative

__all__ = ["permutation_test", "PermutationResult", "EXACT_LIMIT"]

#: Enumerate every assignment when there are at most this many (2^16: 16 paired clusters).
EXACT_LIMIT = 2**16
ALTERNATIVES: tuple[str, ...] = get_args(Alternative)
#: Relative tolerance for "as extreme as observed" (the observed assignment must count
#: itself although its statistic is recomputed through another summation order).
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class PermutationResult(PicklableProxies):
    """A cluster-level randomization test.

    Attributes
    ----------
    statistic : str
        Its name (default ``"difference"``: mean of B minus mean of A).
    contrast : str
        ``"B - A"``.
    estimate : float
        The statistic on the data as assigned.
    p_value : float
        Share of assignments at least as extreme (``alternative``); exact when
        ``exact``, else the Monte Carlo estimate ``(1 + hits) / (1 + reps)``.
    exact : bool
    design : {"within", "between"}
    n_assignments : int
        Assignments the design allows (may be huge).
    reps : int
        Assignments evaluated (all of them when exact).
    null_draws : numpy.ndarray
        The statistic under each evaluated assignment.
    cluster : str
    n_clusters : int
    seed : int or None
    alternative : str
    details : Mapping
    """

    statistic: str
    contrast: str
    estimate: float
    p_value: float
    exact: bool
    design: str
    n_assignments: int
    reps: int
    null_draws: np.ndarray = field(repr=False)
    cluster: str
    n_clusters: int
    seed: int | None
    alternative: str = "two-sided"
    details: Any = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    def tidy(self) -> pd.DataFrame:
        """One row: ``method="permutation"``, ``p_value``, ``exact``, ``design``,
        ``alternative`` after the contract columns (no interval: ``lo``/``hi`` NaN)."""
        how = "exact" if self.exact else f"Monte Carlo, {self.reps} assignments"
        return tidy_rows([{
            "estimand": self.statistic, "contrast": self.contrast, "method": "permutation",
            "cluster": self.cluster, "scale": "identity", "estimate": self.estimate,
            "n_clusters": self.n_clusters, "reps": self.reps, "seed": self.seed,
            "note": f"randomization test {self.design} clusters ({how})",
            "p_value": self.p_value, "exact": self.exact, "design": self.design,
            "alternative": self.alternative}])

    def __str__(self) -> str:
        how = "exact" if self.exact else f"Monte Carlo ({self.reps} assignments)"
        return (f"randomization test of {self.statistic} [{self.contrast}] over "
                f"{self.n_clusters} {self.cluster or 'row'} clusters ({self.design}, {how}): "
                f"{self.estimate:.4g}, p={self.p_value:.4g} ({self.alternative})")


def _labels(frame: pd.DataFrame, column: str | None, conditions: Sequence[str] | None
            ) -> tuple[str, str, str]:
    col = column or ("condition" if "condition" in frame.columns else
                     "model_b" if "model_b" in frame.columns else None)
    if col is None or col not in frame.columns:
        raise InvalidOptionError(
            "permutation_test needs the condition column: read the table with condition=..."
            f" (or name it with column=); columns: {', '.join(map(str, frame.columns))}")
    if conditions is not None:
        if isinstance(conditions, str) or len(conditions) != 2:
            raise InvalidOptionError(
                f"conditions={conditions!r}: give two labels (A, B); the effect is B - A")
        a, b = (str(c) for c in conditions)
    else:
        levels = sorted(frame[col].astype(str).unique())
        if len(levels) != 2:
            raise InvalidOptionError(
                f"column {col!r} has {len(levels)} levels; name two with conditions=(A, B)")
        a, b = levels
    return a, b, col


def _difference(outcome: str, col: str, a: str, b: str, flip: bool) -> Sums:
    """Mean outcome under ``b`` minus under ``a`` (``flip``: score ``1 - y``, model_b's
    score on a pairwise table, as the built-in difference re-scores it)."""
    def columns(d: pd.DataFrame) -> np.ndarray:
        lab = d[col].astype(str).to_numpy()
        y = pd.to_numeric(d[outcome], errors="coerce").to_numpy(dtype=float)
        if flip:
            y = 1.0 - y
        ok = ~np.isnan(y)
        is_a, is_b = (lab == a) & ok, (lab == b) & ok
        y0 = np.where(ok, y, 0.0)
        return np.column_stack([y0 * is_b, is_b, y0 * is_a, is_a])

    return Sums(columns, lambda t: t[..., 0] / t[..., 1] - t[..., 2] / t[..., 3],
                names=("difference",), name="difference")


def _assignments(design: str, members: list[np.ndarray], treated: list[int], g: int,
                 reps: int, rng: np.random.Generator, exact: bool, chunk: int
                 ) -> Any:
    """Blocks of 0/1 assignment matrices (rows: assignments, columns: clusters)."""
    if design == "within":
        if exact:
            for start in range(0, 2**g, chunk):
                num = np.arange(start, min(2**g, start + chunk), dtype=np.int64)
                yield ((num[:, None] >> np.arange(g)) & 1).astype(float)
        else:
            for start in range(0, reps, chunk):
                yield rng.integers(0, 2, size=(min(reps, start + chunk) - start, g)
                                   ).astype(float)
        return
    if exact:
        per = [list(itertools.combinations(m.tolist(), k)) for m, k in
               zip(members, treated, strict=True)]
        block: list[np.ndarray] = []
        for combo in itertools.product(*per):
            z = np.zeros(g)
            for chosen in combo:
                z[list(chosen)] = 1.0
            block.append(z)
            if len(block) == chunk:
                yield np.array(block)
                block = []
        if block:
            yield np.array(block)
        return
    for start in range(0, reps, chunk):
        n = min(reps, start + chunk) - start
        z = np.zeros((n, g))
        for m, k in zip(members, treated, strict=True):
            pick = np.argsort(rng.random((n, m.size)), axis=1)[:, :k]
            z[np.arange(n)[:, None], m[pick]] = 1.0
        yield z


def permutation_test(
    table: EvalTable | pd.DataFrame,
    statistic: Callable[[pd.DataFrame], Any] | Sums | str | None = None,
    *,
    cluster: str | None = None,
    strata: str | Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    column: str | None = None,
    outcome: str = "y",
    alternative: Alternative = "two-sided",
    reps: int = 9999,
    seed: SeedLike = None,
    progress: bool = True,
    name: str | None = None,
    columns: pd.DataFrame | None = None,
) -> PermutationResult:
    """Randomization test of the condition effect, relabelling whole clusters.

    Parameters
    ----------
    table : EvalTable or pandas.DataFrame
        The eval table (its ``condition`` column, or ``model_b`` on a pairwise table
        with one baseline) or a DataFrame (``column`` and ``outcome`` name columns).
    statistic : callable, Sums or str, optional
        The test statistic, a function of the relabelled frame (as in
        :func:`evalmix.bootstrap`). Default: mean outcome under B minus under A (rows
        pooled; on a pairwise table whose conditions are ``model_b``, the conditions'
        own scores ``1 - y``, as :func:`evalmix.interval`'s difference scores them).
    cluster : str, optional
        The unit of randomization (a cluster role or column; ``"a:b"`` for a cell).
        Default: the matched AB/BA pair, else the row.
    strata : str or list, optional
        Assignments are permuted within strata (``"between"`` design; default the
        table's strata).
    conditions : (A, B), optional
        The two labels compared (default: the column's two levels).
    column, outcome : str
        Condition and outcome columns (defaults: ``condition``/``model_b`` and ``y``).
    alternative : {"two-sided", "larger", "smaller"}
        One-sided: the share of assignments with ``T >= t`` (or ``T <= t``); two-sided:
        twice the smaller of the two, capped at 1 (as ``scipy.stats.permutation_test``;
        it needs no centre, so a discrete statistic's ties count on both sides).
    reps : int
        Random assignments when the design allows more than :data:`EXACT_LIMIT`.
    seed : int or numpy.random.Generator, optional
        Seeds the Monte Carlo assignments (unused, and not recorded, when exact).
    progress : bool
        Counts and ETA on stderr.
    name : str, optional
        The statistic's name in the result.
    columns : DataFrame, optional
        With an EvalTable: the source frame, for a statistic of its other columns (as in
        :func:`evalmix.bootstrap`).

    Returns
    -------
    PermutationResult

    Raises
    ------
    EvalmixError
        When clusters mix the two designs (some with both conditions, some with one).

    Examples
    --------
    >>> import pandas as pd
    >>> d = pd.DataFrame({"s": [0, 0, 1, 1, 2, 2], "condition": ["A", "B"] * 3,
    ...                   "y": [0.1, 0.5, 0.2, 0.4, 0.3, 0.9]})
    >>> r = permutation_test(d, cluster="s", progress=False)
    >>> r.design, r.exact, r.p_value
    ('within', True, 0.25)

    References
    ----------
    Good (2005), doi:10.1007/b138696; Phipson & Smyth (2010), doi:10.2202/1544-6115.1585.
    """
    check_option("alternative", alternative, ALTERNATIVES)
    reps = check_count("reps", reps, minimum=1)
    design = resampling_design(table, cluster, strata, columns)
    if len(design.factors) != 1:
        raise InvalidOptionError("permutation_test randomizes one cluster factor; name one")
    frame, codes = design.frame, design.factors[0]
    a, b, col = _labels(frame, column, conditions)
    if statistic is None:
        pairwise = isinstance(table, EvalTable) and table.kind == "pairwise"
        statistic = _difference(outcome, col, a, b, pairwise and col == "model_b")
    elif isinstance(statistic, str):
        statistic = expression(statistic)
    label = statistic_name(statistic, name)
    lab = frame[col].astype(str).to_numpy()
    keep = (lab == a) | (lab == b)
    g = int(codes.max()) + 1
    has_a = np.bincount(codes[lab == a], minlength=g) > 0
    has_b = np.bincount(codes[lab == b], minlength=g) > 0
    if np.all(has_a & has_b):
        kind = "within"
    elif not np.any(has_a & has_b):
        kind = "between"
    else:
        raise EvalmixError(
            f"{int(np.sum(has_a & has_b))} of {g} clusters have rows of both {a!r} and "
            f"{b!r} and the others one: the assignment is neither within nor between "
            "clusters. Randomize at the level the conditions were assigned (cluster=)")
    members = design.groups[0]
    treated = [int(has_b[m].sum()) for m in members]
    total = 2**g if kind == "within" else math.prod(
        math.comb(m.size, k) for m, k in zip(members, treated, strict=True))
    exact = total <= EXACT_LIMIT
    rng, recorded = seeded_rng(seed)

    swapped = np.where(lab == a, b, np.where(lab == b, a, lab))
    state0 = frame.copy()
    state1 = frame.copy()
    if kind == "within":
        state1[col] = swapped
    else:
        state0[col] = np.where(keep, a, lab)
        state1[col] = np.where(keep, b, lab)
    if isinstance(statistic, Sums):
        s0 = cluster_sums(statistic.values(state0), codes, g)
        s1 = cluster_sums(statistic.values(state1), codes, g)

        def evaluate(z: np.ndarray) -> np.ndarray:
            return statistic.apply(s0.sum(axis=0) + z @ (s1 - s0))[:, 0]
        chunk = max(1, 2_000_000 // max(g * s0.shape[1], 1))
        observed = float(statistic.evaluate(frame)[0])
    else:
        fn = statistic

        def evaluate(z: np.ndarray) -> np.ndarray:
            out = np.empty(z.shape[0])
            for r in range(z.shape[0]):
                on = z[r][codes] > 0.5
                f = state0.copy()
                f[col] = np.where(on, state1[col], state0[col])
                out[r] = call_statistic(fn, f, None, f"statistic {label!r} on an assignment")[0][0]
            return out
        chunk = 256
        observed = float(call_statistic(fn, frame, None, f"statistic {label!r}")[0][0])
    n_eval = total if exact else reps
    draws = np.empty(n_eval)
    with Progress(progress) as bar:
        task = bar.task(f"permutation {label}", n_eval)
        at = 0
        for z in _assignments(kind, members, treated, g, reps, rng, exact, chunk):
            draws[at:at + z.shape[0]] = evaluate(z)
            at += z.shape[0]
            bar.advance(task, z.shape[0])
    if not np.isfinite(observed):
        raise EvalmixError(f"the statistic {label!r} is not finite on the data as assigned")
    ok = np.isfinite(draws)
    null = draws[ok]
    tol = TIE_RTOL * max(abs(observed), float(np.abs(null).max(initial=0.0)), 1e-300)
    hits = {"larger": int(np.sum(null >= observed - tol)),
            "smaller": int(np.sum(null <= observed + tol))}
    one = {k: h / null.size if exact else (1 + h) / (1 + null.size) for k, h in hits.items()}
    p = min(1.0, 2 * min(one.values())) if alternative == "two-sided" else one[alternative]
    return PermutationResult(
        statistic=label, contrast=f"{b} - {a}", estimate=observed, p_value=float(p),
        exact=exact, design=kind, n_assignments=int(total), reps=int(n_eval),
        null_draws=draws, cluster=design.label, n_clusters=g,
        seed=None if exact else recorded, alternative=alternative,
        details={"unit": design.unit, "n_undefined": int((~ok).sum()),
                 "strata": design.strata, "column": col, "conditions": (a, b)})
