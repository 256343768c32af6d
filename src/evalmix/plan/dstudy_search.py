"""What a D study buys: the cost of a design and the search for the smallest or the
cost-optimal one (:func:`evalmix.dstudy`'s ``target=`` and ``budget=``).

``cost = c_call * N_objects * prod_f n'_f + sum_f c_f * L_f`` (the cost model of
:mod:`evalmix.plan.dstudy`). The search runs over a grid of facet sizes (at most
:data:`MAX_GRID` designs), solving for the one facet in which the
error is linear where it can.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from evalmix.design.gresult import GStudyResult
from evalmix.errors import InvalidOptionError

#: The largest grid enumerated before the other facets move on a geometric ladder.
MAX_GRID = 1_000_000
#: Sizes tried on the geometric ladder.
LADDER = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200,
          250, 300, 400, 500, 600, 800, 1000)


def _parent_sizes(g: GStudyResult, f: str, n: Mapping[str, Any]) -> Any:
    out: Any = 1.0
    for p in g.design.ancestors(f):
        out = out * (n[p] if p in n else g.n_levels[p])
    return out


def design_cost(g: GStudyResult, n: Mapping[str, Any], costs: Mapping[str, float]) -> Any:
    """The cost of designs ``n`` (arrays broadcast) under ``costs`` (module docstring)."""
    calls: Any = float(g.n_levels[g.design.object])
    for f in n:
        calls = calls * n[f]
    total = costs.get("call", 0.0) * calls
    for f, c in costs.items():
        if f != "call" and c:
            total = total + c * n[f] * _parent_sizes(g, f, n)
    return total


def _check_costs(g: GStudyResult, costs: Mapping[str, float] | None) -> dict[str, float]:
    out = {"call": 1.0} if costs is None else {str(k): v for k, v in costs.items()}
    known = ("call", *g.n_observed)
    for k, v in out.items():
        if k not in known:
            raise InvalidOptionError(f"costs names {k!r}; give 'call' (per score) or a facet "
                                     f"({', '.join(g.n_observed)})")
        if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) \
                or v < 0:
            raise InvalidOptionError(f"costs[{k!r}] must be a finite number >= 0, got {v!r}")
    if not any(out.values()):
        raise InvalidOptionError("costs are all 0: give at least one positive cost")
    return {k: float(v) for k, v in out.items()}


def _err_threshold(g: GStudyResult, criterion: str, target: float) -> tuple[str, float]:
    tau = float(np.clip(g.variances, 0, None) @ g.design.weights(g.n_observed)[0][:, 0])
    if criterion in ("erho2", "phi"):
        if not 0 < target < 1:
            raise InvalidOptionError(f"target={target!r}: a coefficient target lies in (0, 1)")
        kind = "relative_var" if criterion == "erho2" else "absolute_var"
        return kind, tau * (1 - target) / target
    if not target > 0:
        raise InvalidOptionError(f"target={target!r}: an SE target must be positive")
    if criterion == "se_score":
        return "absolute_var", target**2
    return "relative_var", target**2 / 2


def _grid(g: GStudyResult, facets: list[str], caps: dict[str, int]
          ) -> dict[str, np.ndarray]:
    values = {f: np.arange(1, caps[f] + 1) for f in facets}
    if np.prod([v.size for v in values.values()], dtype=float) > MAX_GRID:
        values = {f: np.array([x for x in LADDER if x <= caps[f]] or [1]) for f in facets}
    if not facets:
        return {}
    mesh = np.meshgrid(*values.values(), indexing="ij")
    return {f: m.ravel().astype(float) for f, m in zip(facets, mesh, strict=True)}


def _linear_in(g: GStudyResult, free: str, grid: Mapping[str, np.ndarray], kind: str,
               costs: Mapping[str, float]) -> tuple[Any, Any, Any, Any]:
    """``err = A + B / n_free`` and ``cost = a + b n_free`` over the grid of the others."""
    size = next(iter(grid.values())).size if grid else 1
    base = {**{f: np.full(size, v) for f, v in g.n_observed.items()}, **grid}
    one = {**base, free: np.ones(size)}
    two = {**base, free: np.full(size, 2.0)}
    e1, e2 = (_error(g, n, kind) for n in (one, two))
    c1, c2 = (design_cost(g, n, costs) for n in (one, two))
    big_b = 2 * (e1 - e2)          # e(n) = A + B/n: e1 - e2 = B/2
    return e1 - big_b, big_b, 2 * c1 - c2, c2 - c1


def _error(g: GStudyResult, n: Mapping[str, Any], kind: str) -> np.ndarray:
    _, rel, ab = g.design.weights(n)
    w = rel if kind == "relative_var" else ab
    return np.clip(g.variances, 0, None) @ w


def _search(g: GStudyResult, *, criterion: str, target: float | None, budget: float | None,
            costs: Mapping[str, float], max_levels: int) -> dict[str, float] | None:
    facets = list(g.design.random_facets)
    if not facets:
        return None
    free = max(facets, key=lambda f: g.n_observed[f])
    others = [f for f in facets if f != free]
    kind = "relative_var" if criterion in ("erho2", "se_diff") else "absolute_var"
    bound = _err_threshold(g, criterion, target)[1] if target is not None else np.inf
    caps = {f: max_levels for f in others}
    if budget is not None:    # the most levels affordable with every other facet at 1
        for f in others:
            for m in range(1, max_levels + 1):
                n = {**{h: 1.0 for h in facets}, f: float(m)}
                if design_cost(g, {**g.n_observed, **n}, costs) > budget:
                    break
                caps[f] = m
            else:
                caps[f] = max_levels
    grid = _grid(g, others, caps)
    a_err, b_err, a_cost, b_cost = _linear_in(g, free, grid, kind, costs)
    with np.errstate(divide="ignore", invalid="ignore"):
        if target is not None:
            n_free = np.where(a_err < bound, np.ceil(b_err / (bound - a_err) - 1e-9), np.inf)
            n_free = np.maximum(n_free, 1.0)
            cost = a_cost + b_cost * n_free
            ok = np.isfinite(n_free)
            if budget is not None:
                ok &= cost <= budget * (1 + 1e-12)
            if not ok.any():
                return None
            score = np.where(ok, cost, np.inf)
            tie = np.where(ok, a_err + b_err / n_free, np.inf)
        else:
            assert budget is not None
            n_free = np.floor((budget - a_cost) / b_cost + 1e-9) if np.any(b_cost > 0) \
                else np.full(np.shape(a_cost), np.inf)
            ok = n_free >= 1
            if not ok.any():
                return None
            n_free = np.where(ok, n_free, 1.0)
            score = np.where(ok, a_err + b_err / n_free, np.inf)
            tie = np.where(ok, a_cost + b_cost * n_free, np.inf)
    best = int(np.lexsort((tie, score))[0])
    out = {f: float(grid[f][best]) for f in others}
    out[free] = float(np.asarray(n_free).ravel()[best] if np.ndim(n_free) else n_free)
    return {f: out[f] for f in facets}
