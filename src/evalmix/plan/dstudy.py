"""``evalmix.dstudy``: G coefficients and SEs for hypothetical designs, and what to buy.

A D study takes the variance components of a G study (:func:`evalmix.gstudy`) and asks
what they imply with ``n'`` levels of each facet: E rho^2, Phi, the SE of a model's score
and of a difference between two models, each with its interval from the G study's
draws. On top of that table it finds

- the *smallest* design reaching a target coefficient or SE (least cost, by default the
  fewest scores), and
- the *cost-optimal* design for a budget: the best coefficient (or smallest SE) whose
  cost stays within it.

Cost model
----------
``cost = c_call * N_objects * prod_f n'_f + sum_f c_f * L_f``: every score is one call
(``costs["call"]``, e.g. one judge call), and every new level of facet ``f`` costs
``costs[f]`` (writing an item, adding a prompt template or a judge), with ``L_f = n'_f``
levels for a crossed facet and ``n'_f`` times the levels of its parents for a nested
one (each judge's runs are its own). Default: one unit per call.

Search (an exact integer program by enumeration)
------------------------------------------------
The error variance that a coefficient or SE responds to is ``A + B / n'_F`` in any one
facet ``F`` (``A``: the effects without ``F``; ``B``: those with it) and the cost is
``a + b n'_F``, so for given sizes of the other facets the best ``n'_F`` has a closed
form: the largest affordable one (budget), or the smallest one below the error bound
(target). ``F`` is the facet with the most levels observed (usually the items); every
combination of the other facets is enumerated up to ``max_levels`` levels each (a
geometric ladder of sizes when the full grid would exceed a million designs). The
optimum is exact within those ranges.

Sample or repeat
----------------
Each facet is *sampled* (new levels: items, scenarios, personas, templates, judges),
*repeated* (more calls of one configuration: runs, epochs, replicates nested within every
cell), or *counterbalanced* (the presentation order); see
:func:`evalmix.design.gresult.facet_kind` and the ``kind`` column.

References
----------
Brennan, R. L. (2001). Generalizability Theory. Springer, chapter 4 (D studies) and
section 4.5 (optimal sample sizes under a budget). doi:10.1007/978-1-4757-3456-0
Marcoulides, G. A. & Goldstein, Z. (1990). The optimization of generalizability studies
with resource constraints. Educational and Psychological Measurement 50, 761-768.
doi:10.1177/0013164490504004
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack, get_args

import numpy as np
import pandas as pd

from evalmix.compare.gstudy import GSTUDY_DEFAULTS, GStudyOptions, gstudy
from evalmix.design.gresult import GStudyResult, facet_kind
from evalmix.design.gtheory import QUANTITIES
from evalmix.errors import InvalidOptionError, check_count, check_keywords
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import Criterion

__all__ = ["dstudy", "DStudyResult", "Criterion", "CRITERIA", "design_cost"]

CRITERIA: tuple[str, ...] = get_args(Criterion)
#: The largest grid enumerated before the other facets move on a geometric ladder.
MAX_GRID = 1_000_000
#: Sizes tried on the geometric ladder.
LADDER = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200,
          250, 300, 400, 500, 600, 800, 1000)


# ---------------------------------------------------------------------- cost
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


# ---------------------------------------------------------------------- search
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


# ---------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class DStudyResult:
    """Projections of a G study to hypothetical designs.

    Attributes
    ----------
    gstudy : GStudyResult
    table : pandas.DataFrame
        One row per design: ``design`` (its label), ``n_<facet>`` per facet, ``scores``
        (per object and in all: ``calls``), ``cost``, then every quantity of
        :data:`~evalmix.design.gtheory.QUANTITIES` with ``_lo``/``_hi`` bounds, and
        ``df_score``/``df_diff`` (degrees of freedom for a ``t`` interval of a score or a
        difference with that SE).
        ``design`` is ``"observed"``, ``"vary <facet>"`` (that facet varied, the others
        as observed), ``"grid"`` (your ``n``), ``"smallest"`` or ``"optimal"``.
    kinds : pandas.DataFrame
        ``facet, kind, n_observed``: sample (new levels), judge, repeat, counterbalance
        or fixed (see :func:`~evalmix.design.gresult.facet_kind`).
    criterion : str
    target, budget : float or None
    costs : Mapping of str to float
    notes : tuple of str
        Why no design met the target or fitted the budget, when none did.
    """

    gstudy: GStudyResult
    table: pd.DataFrame
    kinds: pd.DataFrame
    criterion: str
    target: float | None = None
    budget: float | None = None
    costs: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def row(self, design: str) -> pd.Series | None:
        """The first row labelled ``design`` (e.g. ``"smallest"``), or None."""
        hit = self.table[self.table["design"] == design]
        return hit.iloc[0] if len(hit) else None

    def tidy(self) -> pd.DataFrame:
        """Rows in the result contract: one per design and quantity (``estimand`` the
        quantity, ``contrast`` the design's sizes ``"item=20, judge=3"`` prefixed by its
        label), with the ``n_<facet>``, ``cost`` and ``design`` columns kept."""
        g = self.gstudy
        sizes = [c for c in self.table.columns if c.startswith("n_")]
        rows = []
        for r in self.table.itertuples(index=False):
            rd = r._asdict()
            label = f"{rd['design']}: " + ", ".join(f"{c[2:]}={rd[c]:g}" for c in sizes)
            for q in QUANTITIES:
                df = {"se_score": rd["df_score"], "se_diff": rd["df_diff"]}.get(q, np.nan)
                rows.append({"estimand": q, "contrast": label, "estimate": rd[q],
                             "lo": rd[q + "_lo"], "hi": rd[q + "_hi"], "df": df,
                             "design": rd["design"], "cost": rd["cost"],
                             **{c: rd[c] for c in sizes}})
        frame = pd.DataFrame(rows).drop_duplicates(subset=["estimand", "contrast"])
        return tidy_rows(frame, method=g.method, cluster=" x ".join(g.design.random_facets),
                         scale=g.scale, level=g.level, reps=g.reps, seed=g.seed,
                         note=g.interval)

    def plot(self, path: str | Path | None = None) -> Any:
        """Coefficients (top) and SEs (bottom) against each facet's size, the others as
        observed; shaded bands are the intervals, the dotted line the observed size.

        Returns the matplotlib Figure (saved to ``path`` when given)."""
        from evalmix.plan.plots import plot_dstudy

        return plot_dstudy(self, path)

    def __str__(self) -> str:
        g = self.gstudy
        show = ["design", *[c for c in self.table.columns if c.startswith("n_")], "cost",
                "erho2", "phi", "se_score", "se_diff"]
        lines = [f"D study of {g.design.object!r} ({g.method}, scale {g.scale}; costs "
                 + ", ".join(f"{k}={v:g}" for k, v in self.costs.items()) + ")",
                 self.table[show].to_string(index=False, float_format="{:.4g}".format)]
        for kind, words in (("sample", "sample new levels of"), ("judge", "sample new judges"),
                            ("repeat", "repeat the calls of"),
                            ("counterbalance", "counterbalance"), ("fixed", "keep fixed")):
            names = self.kinds.loc[self.kinds["kind"] == kind, "facet"].tolist()
            if names:
                lines.append(f"{words}: {', '.join(names)}")
        lines.append(f"advice: {g.advice}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------------- entry point
def _sizes(value: Any, facet: str) -> list[float]:
    vals = [value] if np.isscalar(value) else list(value)
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) \
                or not np.isfinite(v) or v <= 0:
            raise InvalidOptionError(f"n[{facet!r}] must hold positive numbers, got {v!r}")
        out.append(float(v))
    if not out:
        raise InvalidOptionError(f"n[{facet!r}] is empty")
    return out


def _ladder(observed: float) -> list[float]:
    top = max(4.0, 4 * observed)
    vals = sorted({float(x) for x in LADDER if x <= top} | {float(observed)})
    return vals


def dstudy(
    g: GStudyResult | pd.DataFrame | Any,
    n: Mapping[str, float | Sequence[float]] | None = None,
    *,
    target: float | None = None,
    criterion: Criterion = "erho2",
    costs: Mapping[str, float] | None = None,
    budget: float | None = None,
    max_levels: int = 50,
    **gstudy_options: Unpack[GStudyOptions],
) -> DStudyResult:
    """G coefficients and SEs projected to other facet sizes; smallest and optimal designs.

    Parameters
    ----------
    g : GStudyResult, pandas.DataFrame or EvalTable
        A G study (:func:`evalmix.gstudy`), or the data for one (then
        ``**gstudy_options`` are passed to :func:`evalmix.gstudy`).
    n : mapping of str to number or sequence of numbers, optional
        Facet sizes ``n'`` to tabulate: every combination of the values given (facets
        not named stay as observed). Default: each random facet varied alone over 1, 2,
        3, ... up to 4 times its observed size.
    target : float, optional
        Find the cheapest design whose ``criterion`` reaches ``target`` (a coefficient
        at least, or an SE at most).
    criterion : {"erho2", "phi", "se_score", "se_diff"}
        What ``target`` and ``budget`` are about.
    costs : mapping of str to float, optional
        ``"call"``: cost per score (one judge call); a facet name: cost per new level
        of it (module docstring). Default ``{"call": 1}``.
    budget : float, optional
        Find the design with the best ``criterion`` whose cost is at most ``budget``
        (with ``target`` too: the cheapest design reaching the target within it).
    max_levels : int
        Largest size tried for the facets other than the one solved in closed form.
    **gstudy_options
        With data: the options of :func:`evalmix.gstudy` (``object``, ``facets``,
        ``outcome``, ``nested``, ``fixed``, ``method``, ``reps`` ...).

    Returns
    -------
    DStudyResult
        ``.table`` (one row per design, with intervals from the G study's draws),
        ``.row("smallest")``, ``.row("optimal")``, ``.plot()``, ``.tidy()``.

    Notes
    -----
    Projections hold the variance components fixed at the G study's estimates (the
    intervals carry their uncertainty); they assume new levels are drawn from the same
    populations as the observed ones. The SE of a score is that of a model's mean
    score around its mean over the universe of items, judges, runs ...; the SE of a
    difference assumes both models see the same facet levels.

    References
    ----------
    Brennan (2001), chapter 4. doi:10.1007/978-1-4757-3456-0
    Marcoulides & Goldstein (1990). doi:10.1177/0013164490504004

    Examples
    --------
    >>> import pandas as pd, evalmix
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame([(m, i, j) for m in range(4) for i in range(20) for j in range(3)],
    ...                   columns=["model", "item", "judge"])
    >>> df["score"] = rng.normal(size=len(df)) + df["model"] * 0.5
    >>> d = evalmix.dstudy(df, {"item": [10, 40]}, object="model", facets=["item", "judge"],
    ...                    outcome="score", seed=1)
    >>> d.table[["n_item", "n_judge"]].values.tolist()
    [[20.0, 3.0], [10.0, 3.0], [40.0, 3.0]]
    """
    if not isinstance(g, GStudyResult):
        options = check_keywords("dstudy", gstudy_options, [
            k for k in GSTUDY_DEFAULTS if k not in ("data",)])
        g = gstudy(g, **options)
    elif gstudy_options:
        raise InvalidOptionError(
            f"{', '.join(gstudy_options)} set up a G study from data; with a GStudyResult "
            "they are already decided")
    if criterion not in CRITERIA:
        raise InvalidOptionError(f"criterion={criterion!r} is not allowed; choose one of "
                                 f"{', '.join(map(repr, CRITERIA))}")
    max_levels = check_count("max_levels", max_levels)
    cost_map = _check_costs(g, costs)
    varied = list(g.design.random_facets)
    frames: list[tuple[str, dict[str, list[float]]]] = [("observed", {})]
    if n:
        for f in n:
            if f not in g.n_observed:
                raise InvalidOptionError(f"n names {f!r}, which is not a facet of the G study "
                                         f"({', '.join(g.n_observed)})")
            if f not in varied:
                raise InvalidOptionError(f"facet {f!r} is fixed (or contains the object): its "
                                         "size cannot change in a D study")
        frames.append(("grid", {f: _sizes(v, f) for f, v in n.items()}))
    else:
        frames += [(f"vary {f}", {f: _ladder(g.n_observed[f])}) for f in varied]
    notes = []
    if budget is not None and (isinstance(budget, bool) or not np.isfinite(budget)
                               or budget <= 0):
        raise InvalidOptionError(f"budget={budget!r}: give a positive cost")
    if target is not None:
        _err_threshold(g, criterion, float(target))
        best = _search(g, criterion=criterion, target=float(target), budget=budget,
                       costs=cost_map, max_levels=max_levels)
        if best is None:
            notes.append(f"no design with up to {max_levels} levels of "
                         f"{', '.join(varied[:-1]) or 'the other facets'} reaches "
                         f"{criterion} {'>=' if criterion in ('erho2', 'phi') else '<='} "
                         f"{target:g}" + (f" within the budget {budget:g}" if budget else ""))
        else:
            frames.append(("smallest", {f: [v] for f, v in best.items()}))
    if budget is not None:
        best = _search(g, criterion=criterion, target=None, budget=budget, costs=cost_map,
                       max_levels=max_levels)
        if best is None:
            notes.append(f"the budget {budget:g} buys no design with one level of every facet")
        else:
            frames.append(("optimal", {f: [v] for f, v in best.items()}))
    rows = []
    for label, sizes in frames:
        keys = list(sizes)
        for combo in itertools.product(*sizes.values()) if keys else [()]:
            design = {**g.n_observed, **dict(zip(keys, combo, strict=True))}
            rows.append({"design": label, **{f"n_{f}": v for f, v in design.items()}})
    table = pd.DataFrame(rows)
    n_cols = {f: table[f"n_{f}"].to_numpy(dtype=float) for f in g.n_observed}
    proj = g.project(n_cols)
    calls = g.n_levels[g.design.object] * np.prod(np.column_stack(list(n_cols.values())), axis=1)
    table["scores"] = calls / g.n_levels[g.design.object]
    table["calls"] = calls
    table["cost"] = design_cost(g, n_cols, cost_map)
    for q in QUANTITIES:
        for suffix in ("", "_lo", "_hi"):
            table[q + suffix] = proj[q + suffix]
    table["df_score"], table["df_diff"] = proj["df_score"], proj["df_diff"]
    kinds = pd.DataFrame([{"facet": f, "kind": facet_kind(g.design, f),
                           "n_observed": g.n_observed[f]} for f in g.n_observed])
    return DStudyResult(gstudy=g, table=table, kinds=kinds, criterion=criterion,
                        target=None if target is None else float(target), budget=budget,
                        costs=cost_map, notes=tuple(notes))

