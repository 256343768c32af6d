"""The maximal default model: random condition slopes for every sampled factor.

Barr et al. (2013) ("keep it maximal"): in a confirmatory analysis every within-unit
fixed effect gets a random slope for every sampled factor, or the condition effect's
interval ignores how much that effect varies across the units the claim generalises
over (docs/coverage.md: 64-92% coverage for population-averaged differences in crossed
designs with intercepts only). lme4 writes it ``(1 + condition | scenario)``.

Which factors get one (:func:`maximal_slopes`), in the default model only -- a user who
passes ``slopes=`` or ``formula=`` gets exactly that:

1. the factor is a *sampled* cluster role (:attr:`EvalTable.sampled`: not judges, not
   replicates) with a random intercept;
2. at least half of its levels see more than one condition (pairwise baseline designs:
   more than one evaluated model; Bradley-Terry designs: more than one pair of models);
3. the slope is identified: the median number of rows per (level, condition) cell is at
   least 2 (with one row per cell the slope variance is the residual's; lme4 refuses a
   model with as many random effects as rows);
4. there are at most :data:`MAX_CONDITION_COLUMNS` condition columns (5 conditions):
   a leaderboard of 30 models would add 29 slope variances and 29 random effects per
   level of every sampled factor (MT-Bench's 80 items: 2,566 random effects, a dense
   factor of 5 s per Newton step), far beyond what its levels identify. Pass
   ``slopes=`` to fit them anyway.

A factor left out is named, with its reason, in the spec's notes.

When the fitted maximal model is singular or does not converge, the frequentist back
end steps down (Matuschek et al. 2017) in this order and refits, saying which terms it
dropped and why (:func:`simplify`): first the correlation of a correlated term
(``(1 + condition|f)`` -> ``(1|f) + (0 + condition|f)``), then the slope of the factor
with the smallest slope SD. Only slopes the default added are dropped.

References
----------
Barr, D. J., Levy, R., Scheepers, C., Tily, H. J. (2013). Random effects structure for
confirmatory hypothesis testing: keep it maximal. Journal of Memory and Language 68(3),
255-278. doi:10.1016/j.jml.2012.11.001
Matuschek, H., Kliegl, R., Vasishth, S., Baayen, H., Bates, D. (2017). Balancing Type I
error and power in linear mixed models. Journal of Memory and Language 94, 305-315.
doi:10.1016/j.jml.2017.01.001
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from evalmix.models.spec._spec_types import ModelSpec

__all__ = ["maximal_slopes", "simplify", "decorrelate"]

#: Share of a factor's levels that must see more than one condition.
MIN_SHARE_WITHIN = 0.5
#: Median rows per (level, condition) cell needed to identify a slope variance.
MIN_CELL_ROWS = 2.0
#: Most condition columns (conditions - 1, or models - 1) the default gives slopes.
MAX_CONDITION_COLUMNS = 4


def _conditions(table, design: str) -> np.ndarray | None:
    """The condition of every row (a string), or None when the table has none."""
    d = table.data
    if table.kind == "scores":
        return d["condition"].astype(str).to_numpy() if table.has_condition else None
    if design == "baseline":
        return d["model_b"].astype(str).to_numpy()
    a, b = d["model_a"].astype(str).to_numpy(), d["model_b"].astype(str).to_numpy()
    return np.where(a < b, np.char.add(np.char.add(a, "\x1f"), b),
                    np.char.add(np.char.add(b, "\x1f"), a)).astype(str)


def maximal_slopes(table, factors: Sequence[str], design: str
                   ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The factors of ``factors`` that get a condition slope in the default model, and a
    note for each sampled one that does not (see the module docstring for the rule).

    ``design`` is the spec's design (``"scores"``, ``"baseline"``, ``"bradley-terry"``);
    for a Bradley-Terry table the "condition" of a row is its (unordered) pair of models.
    """
    cond = _conditions(table, design)
    if cond is None:
        return (), ()
    sampled = set(table.sampled)
    keep, notes = [], []
    ccode = pd.factorize(cond)[0]
    n_cond = int(ccode.max()) + 1
    what = "pair of models" if design == "bradley-terry" else "condition"
    if design == "bradley-terry":
        d = table.data
        columns = len(set(d["model_a"].astype(str)) | set(d["model_b"].astype(str))) - 1
    else:
        columns = n_cond - 1
    if columns > MAX_CONDITION_COLUMNS:
        left = [f for f in factors if f in sampled]
        if not left:
            return (), ()
        return (), (f"no condition slopes for {', '.join(left)}: {columns} condition "
                    f"columns (more than {MAX_CONDITION_COLUMNS}) would add {columns} "
                    "random effects per level; pass slopes=(...) to fit them",)
    for f in factors:
        if f not in sampled:
            continue
        if n_cond < 2:
            continue
        lab = table.data[f].astype(str).to_numpy() if ":" not in f else \
            table.data[list(f.split(":"))].astype(str).agg(":".join, axis=1).to_numpy()
        g = pd.factorize(lab)[0].astype(np.int64)
        n_g = int(g.max()) + 1
        cell = g * n_cond + ccode
        cells, rows = np.unique(cell, return_counts=True)
        per_level = np.bincount(cells // n_cond, minlength=n_g)
        share = float(np.mean(per_level >= 2))
        median = float(np.median(rows))
        if share < MIN_SHARE_WITHIN:
            notes.append(f"no condition slope for {f}: {100 * share:.0f}% of its levels see "
                         f"more than one {what} (needs {100 * MIN_SHARE_WITHIN:.0f}%)")
        elif median < MIN_CELL_ROWS:
            notes.append(f"no condition slope for {f}: a median of {median:g} row(s) per "
                         f"{f} and {what}, so its slope variance is not identified apart "
                         "from the residual")
        else:
            keep.append(f)
    return tuple(keep), tuple(notes)


def _slope_groups(spec: ModelSpec) -> dict[str, list[int]]:
    """Indices of the default's condition-slope terms of each factor it added them for."""
    out: dict[str, list[int]] = {}
    for j, r in enumerate(spec.random):
        if r.factor in spec.maximal and r.term in spec.condition_terms:
            out.setdefault(r.factor, []).append(j)
    return out


def decorrelate(spec: ModelSpec, note: str | None = None) -> ModelSpec:
    """``spec`` with every correlated term made independent: ``(1 + x|f)`` becomes
    ``(1|f) + (0 + x|f)`` (lme4's ``(1 + x||f)``), in the terms and in the formula;
    ``note`` (if given) is added to the notes."""
    if not any(r.correlated for r in spec.random):
        return spec
    random = tuple(replace(r, correlated=False) for r in spec.random)
    formula = spec.formula
    for m in re.finditer(r"\(1 \+ ([^|()]+)\|([^|()]+)\)", spec.formula):
        lhs, g = m.group(1).strip(), m.group(2).strip()
        formula = formula.replace(m.group(0), f"(1|{g}) + (0 + {lhs}|{g})")
    notes = spec.notes if note is None else (*spec.notes, note)
    return spec.replace(random=random, formula=formula, notes=notes)


def simplify(spec: ModelSpec, sd: np.ndarray, reason: str) -> ModelSpec | None:
    """The next simpler model after a singular or non-converged fit of ``spec``, or None
    when the default added nothing left to drop.

    ``sd`` are the fitted SDs of ``spec.random`` (in order); ``reason`` is said in the
    note (e.g. ``"singular: SD of condition[b]|persona estimated at 0"``). The step is
    the module docstring's: the slope group (all condition columns of one factor) with
    the smallest largest SD is dropped.
    """
    if any(r.correlated and r.factor in spec.maximal for r in spec.random):
        return decorrelate(spec, f"simplified: dropped the intercept-slope correlations of "
                                 f"the maximal default model ({reason}) and refitted")
    groups = _slope_groups(spec)
    if not groups:
        return None
    factor = min(groups, key=lambda f: (float(np.max(sd[groups[f]])), f))
    drop = set(groups[factor])
    random = tuple(r for j, r in enumerate(spec.random) if j not in drop)
    text = f"(0 + condition|{factor})"
    formula = spec.formula.replace(f" + {text}", "")
    note = (f"simplified: dropped the condition slope {text} of the maximal default model "
            f"({reason}; its largest SD was {float(np.max(sd[list(drop)])):.3g}) and refitted")
    return spec.replace(random=random, formula=formula,
                        maximal=tuple(f for f in spec.maximal if f != factor),
                        notes=(*spec.notes, note))
