"""An interval at the edges: bounds that respect the estimand's range, and refusals.

Proportions go on the logit scale where asked (:func:`_bounded`) or are clipped to
[0, 1]; a difference of proportions to [-1, 1]; an interval with nothing to estimate from
(one arm in one cluster, no variation, an underflowing outcome, a wild bootstrap that
cannot reach the level) is refused with the reason (:func:`_not_estimable`); a win rate
that names no model on a one-baseline table is refused (:func:`_check_scored_model`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from evalmix.errors import (
    InvalidOptionError,
    NotEstimableWarning,
)
from evalmix.inference.estimands import (
    LinearProblem,
)
from evalmix.inference.interval_methods import _PROPORTION_CI
from evalmix.inference.result import IntervalResult
from evalmix.inference.scale import bounded_interval

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable


#: A standard error at or below this share of max(|estimate|, range of the outcome)
#: counts as zero.
SE_REL_TOL = 1e-8


#: An outcome whose range is below this (about the square root of the smallest normal
#: double, 2.2e-308) has squared residuals that underflow: its zero SE says so.
UNDERFLOW_SPREAD = 1e-150


#: Estimands that are proportions when the outcome lies in [0, 1].
_PROPORTIONS = ("mean", "win_rate", "controlled_win_rate")


def _check_scored_model(table: EvalTable, estimand: str, model: str | None,
                        contrast: str | None) -> None:
    """Refuse a win rate that names no model on a one-baseline table.

    There the unnamed win rate (the table's own scoring, ``model_a``'s) is the
    baseline's against everyone else, while the report and the upstream leaderboards
    (AlpacaEval, MT-Bench) show each evaluated model's: an easy number to misread.
    """
    if (estimand not in ("win_rate", "controlled_win_rate") or model is not None
            or contrast is not None or table.kind != "pairwise"):
        return
    d = table.data
    base = np.unique(d["model_a"].astype(str).to_numpy())
    if len(base) != 1:
        return
    others = sorted(set(d["model_b"].astype(str)) - {str(base[0])})
    example = others[0] if others else "NAME"
    raise InvalidOptionError(
        f"{estimand} without model=: {base[0]!r} is model_a in every row (the baseline), "
        f"so the unnamed win rate would be the baseline's against "
        f"{'the ' + str(len(others)) + ' others' if len(others) > 1 else repr(example)}, "
        "not an evaluated model's as in the report. Name the model whose wins to count: "
        f"model={example!r} is its win rate against {base[0]!r} (the report's "
        f"'{example} vs {base[0]}'); model={str(base[0])!r} is the baseline's")


def _bounded(table: EvalTable, problem: LinearProblem, scale: str) -> bool:
    """Whether t-based intervals go on the logit scale (see :mod:`~evalmix.inference.scale`)."""
    unit = table.outcome_type in ("binary", "proportion")
    if scale == "logit" and not (unit and problem.estimand in _PROPORTIONS):
        raise InvalidOptionError(
            f"scale='logit' is for proportions (win rates, means of 0/1 or [0, 1] "
            f"scores); {problem.estimand!r} of a {table.outcome_type} outcome is not one. "
            "Use scale='identity'"
        )
    return scale == "logit" or (scale == "auto" and unit
                                and problem.estimand in _PROPORTIONS)


def _not_estimable(res: IntervalResult, problem: LinearProblem,
                   codes_list: list[np.ndarray], roles: tuple[str, ...]) -> str:
    """Why no interval can be trusted at this cluster level ("" when one can)."""
    if res.method in ("CR0", "CR1", "CR2", "CR3", "bootstrap", "wild"):
        unpaired = problem.estimand == "difference" and not problem.paired
        if unpaired:
            arm = problem.X[:, problem.target] > 0.5
            a, b = problem.details.get("conditions", ("A", "B"))
            for role, codes in zip(roles or ("row",), codes_list, strict=True):
                for name, rows in ((b, arm), (a, ~arm)):
                    g = np.unique(codes[rows]).size
                    if g < 2:
                        return (f"{name!r} is seen in {g} {role} cluster"
                                f"{'' if g == 1 else 's'}; a difference needs each arm in "
                                "at least 2 clusters")
    floor = float(res.details.get("min_p_value", 0.0)) if res.method == "wild" else 0.0
    if floor > 1 - res.level:
        return (f"the wild bootstrap with {res.n_clusters} clusters and "
                f"{res.details.get('weights')} weights cannot reach the {res.level:.0%} "
                f"level: its smallest attainable p-value is {floor:.3g}, above "
                f"{1 - res.level:.3g}, so no null value could be rejected (read the CR2 "
                "row)")
    if problem.estimand in _PROPORTIONS and problem.family == "gaussian" and (
            np.all(problem.y == problem.y[0])):
        return (f"every outcome is {problem.y[0]:g}: there is no variation to estimate "
                "from (method='wilson' and 'clopper_pearson' give the interval of a "
                "proportion of 0 or 1 from independent rows)")
    # zero relative to the outcome's own scale (scores of size 1e-9 have SEs of that size)
    spread = float(np.ptp(problem.y)) if problem.y.size else 0.0
    if np.isfinite(res.se) and res.se <= SE_REL_TOL * max(abs(res.estimate), spread):
        if 0.0 < spread < UNDERFLOW_SPREAD:
            k = int(np.ceil(-np.log10(spread)))
            return (f"the outcome varies, but by at most {spread:.3g}: its squares underflow "
                    "in double precision, so the standard error computes as 0. Multiply "
                    f"the outcome by 1e{k} and divide the interval by the same")
        return ("zero standard error: the outcome does not vary between clusters (e.g. all "
                "ties, or every cluster has the same mean)")
    return ""


def _finalise(res: IntervalResult, problem: LinearProblem, codes_list: list[np.ndarray],
              roles: tuple[str, ...], *, bounded: bool) -> IntervalResult:
    """Bounds that respect the estimand's range, and refusal of degenerate intervals."""
    if res.ci_type in _PROPORTION_CI:
        y = problem.y
        if y.size and np.all(y == y[0]) and y[0] in (0, 1):
            what = {"wilson": "Wilson", "clopper_pearson": "Clopper-Pearson"}[res.ci_type]
            return replace(res, note=(
                f"every outcome is {y[0]:g} ({problem.n_obs} of {problem.n_obs}): the "
                f"{what} interval is defined there and is the honest answer for independent "
                "rows; the cluster-robust rows are not estimable"))
    note = _not_estimable(res, problem, codes_list, roles)
    if note:
        warnings.warn(
            f"{res.estimand} [{res.contrast}] by {res.method} (cluster: "
            f"{res.cluster or 'none'}): not estimable at this cluster level: {note}",
            NotEstimableWarning, stacklevel=3)
        return replace(res, lo=float("nan"), hi=float("nan"), p_value=float("nan"),
                       note=note)
    unit_y = bool(np.all((problem.y >= 0) & (problem.y <= 1)))
    if bounded and res.ci_type in ("t", "normal"):
        lo, hi, p = bounded_interval(res.estimate, res.se, res.df, res.level, res.null)
        return replace(res, lo=lo, hi=hi, p_value=p, scale="logit")
    if unit_y and problem.estimand in _PROPORTIONS and problem.family == "gaussian":
        return replace(res, lo=max(res.lo, 0.0), hi=min(res.hi, 1.0))
    if problem.estimand == "difference" and bool(np.all(np.abs(problem.y) <= 1)):
        # a difference of proportions lies in [-1, 1]
        return replace(res, lo=max(res.lo, -1.0), hi=min(res.hi, 1.0))
    return res
