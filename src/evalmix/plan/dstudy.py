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
one (each judge's runs are its own). Default: one unit per call. The cost and the search
are in :mod:`evalmix.plan.dstudy_search`.

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
from evalmix.plan.dstudy_search import (
    LADDER,
    _check_costs,
    _err_threshold,
    _search,
    design_cost,
)
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import Criterion

__all__ = ["dstudy", "DStudyResult", "Criterion", "CRITERIA", "design_cost"]

CRITERIA: tuple[str, ...] = get_args(Criterion)


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
