"""Every estimand as one coefficient of an OLS (or logit) fit: the :class:`LinearProblem`.

:func:`build_problem` turns ``(table, estimand, options)`` into arrays that every
variance method (naive, sandwich, cluster bootstrap, wild bootstrap) consumes:

``mean``
    Intercept of ``y ~ 1``: all rows, or the rows of one condition (``contrast=``).
``win_rate`` (pairwise)
    Intercept of ``y ~ 1``. Without ``model=`` the table's own scoring is kept: ``y`` is
    the share won by ``model_a`` (ties count 1/2 under ``ties="half"``, are removed under
    ``"exclude"``, count as not-won under ``"separate"``). That is what
    :func:`evalmix.analyze` expects (it re-expresses rows for ``model_b`` itself).
    ``model="name"`` scores the named model on every row where it plays either side
    (``1 - y`` where it is ``model_b``; under ``"separate"`` a strict ``"b"`` verdict).
    ``contrast=`` keeps the rows whose ``model_b`` (or ``condition``) equals it.
``controlled_win_rate`` (pairwise with order)
    Intercept of ``y ~ 1 + (s - 1/2)``, ``s`` = 1 when the scored model was shown first.
    Because ``s - 1/2 = +-1/2``, the intercept is exactly ``(p_first + p_second) / 2``:
    the fitted linear model averaged over both orders with equal weight. On matched
    AB/BA pairs (complete pairs only) position bias cancels within each pair. On a
    single-order table (each comparison judged once, in a randomised order) the same
    regression over every row is the position-adjusted win rate by standardisation:
    the win rate had each comparison been shown in each order half the time
    (``details["method"]`` says which was used).
``difference`` (``conditions=(A, B)``: B minus A)
    Paired when (at least 90% of) the units -- the combination of all cluster factors
    (and, for pairwise tables, which answer was shown first) -- have rows of both
    conditions: the per-unit differences ``mean(y | unit, B) - mean(y | unit, A)``,
    intercept-only, clustered by the unit's factors; units with one condition only are
    left out with a warning. Otherwise unpaired: the coefficient of a ``B``
    indicator in ``y ~ 1 + 1{B}``. ``paired`` in the problem (and the result) says which.
    On pairwise tables both are on the ``y`` scale (``model_a``'s score) of rows whose
    ``model_b`` (or ``condition``) is A or B.
``coef``
    A coefficient of ``y ~ 1 + condition dummies + position`` (linear probability by
    default, ``family="binomial"`` for logistic); ``term=`` selects it. Position is
    ``a_first - 1/2`` on pairwise tables (so its coefficient is the first-shown
    advantage of ``model_a``), the ``position`` column on score tables.

Where the pieces live: the problem and its OLS / logit fits in
:mod:`evalmix.inference.linear_problem` (re-exported here), the win rates in
:mod:`evalmix.inference.win_rates`, the difference in :mod:`evalmix.inference.differences`;
``mean``, ``coef``, the options and :func:`build_problem` here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast, get_args

import numpy as np
import pandas as pd

from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    check_keywords,
    check_option,
)
from evalmix.families import REGRESSION_FAMILIES, Regression, family_name
from evalmix.inference.differences import _check_pairing_unit, _difference
from evalmix.inference.linear_problem import LOGIT_MAXIT as LOGIT_MAXIT
from evalmix.inference.linear_problem import LOGIT_TOL as LOGIT_TOL
from evalmix.inference.linear_problem import (
    Fit,
    LinearProblem,
    _label_column,
    _problem,
    fit_logit,
    fit_ols,
    fit_problem,
    mean_null,
)
from evalmix.inference.win_rates import _scored_for_labels, _win_rate
from evalmix.vocabulary import IntervalEstimand, Paired

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = [
    "ESTIMANDS", "LinearProblem", "Fit", "ProblemOptions", "PROBLEM_DEFAULTS", "USED_OPTIONS",
    "given_options", "build_problem", "check_used",
    "fit_problem", "fit_ols", "fit_logit", "mean_null",
]

ESTIMANDS: tuple[str, ...] = get_args(IntervalEstimand)


# --------------------------------------------------------------------------- estimands
def _mean(table: EvalTable, contrast: str | None) -> LinearProblem:
    d = table.data
    mask = np.ones(table.n_obs, dtype=bool)
    label = "overall"
    if contrast is not None and contrast != "overall":
        col = _label_column(table, [contrast], "mean")
        mask = d[col].astype(str).to_numpy() == str(contrast)
        label = str(contrast)
    y = table.y[mask]
    return _problem(np.ones((mask.sum(), 1)), y, 0, ("(Intercept)",), table, mask,
                    estimand="mean", contrast=label, null=mean_null(table))


def _coef(table: EvalTable, term: str | None, family: str,
          conditions: Sequence[str] | None) -> LinearProblem:
    d = table.data
    n = table.n_obs
    mask = np.ones(n, dtype=bool)
    cols: list[np.ndarray] = [np.ones(n)]
    names: list[str] = ["(Intercept)"]
    cond_col = None
    for c in (["condition"] if table.kind == "scores" else ["condition", "model_b"]):
        if c in d.columns and d[c].astype(str).nunique() >= 2:
            cond_col = c
            break
    if cond_col is not None:
        lab = d[cond_col].astype(str).to_numpy()
        levels = sorted(set(lab))
        ref = str(conditions[0]) if conditions else levels[0]
        if ref not in levels:
            raise InvalidOptionError(f"reference level {ref!r} not in {cond_col!r}: {levels}")
        for lev in levels:
            if lev != ref:
                cols.append((lab == lev).astype(float))
                names.append(f"{cond_col}[{lev}]")
    if table.kind == "pairwise" and table.has_order:
        af = d["a_first"].to_numpy(dtype=float)
        mask &= np.isfinite(af)
        cols.append(np.where(np.isfinite(af), af - 0.5, 0.0))
        names.append("position")
    elif "position" in d.columns:
        pos = d["position"]
        if pd.api.types.is_numeric_dtype(pos):
            v = pos.to_numpy(dtype=float)
            mask &= np.isfinite(v)
            cols.append(np.where(np.isfinite(v), v, 0.0))
            names.append("position")
        else:
            lab = pos.astype(str).to_numpy()
            levels = sorted(set(lab))
            for lev in levels[1:]:
                cols.append((lab == lev).astype(float))
                names.append(f"position[{lev}]")
    if len(names) == 1:
        raise EvalmixError(
            "coef needs a covariate (a condition with 2+ levels, or position); this table "
            "has none: use estimand='mean'"
        )
    if term is None:
        target = 1
    else:
        alias = {n_: n_ for n_ in names}
        for n_ in names[1:]:
            if "[" in n_:
                alias.setdefault(n_.split("[", 1)[1].rstrip("]"), n_)
        if term == "condition" and cond_col is not None and sum(
                x.startswith(cond_col + "[") for x in names) == 1:
            alias["condition"] = names[1]
        if term not in alias:
            raise InvalidOptionError(
                f"term={term!r} is not a coefficient; choose one of "
                f"{', '.join(repr(x) for x in names)}"
            )
        target = names.index(alias[term])
    X = np.column_stack(cols)[mask]
    details = {"scored_for": "model_a"} if table.kind == "pairwise" else {}
    return _problem(X, table.y[mask], target, names, table, mask, estimand="coef",
                    contrast=names[target], null=0.0, family=family, details=details)


@dataclass(frozen=True)
class _ProblemOptions:
    """The options of :func:`build_problem` (typed by :class:`ProblemOptions`) with their
    defaults: the one place they are listed."""

    contrast: str | None = None
    model: str | None = None
    conditions: Sequence[str] | None = None
    term: str | None = None
    family: Regression = "gaussian"
    paired: Paired = "auto"


class ProblemOptions(TypedDict, total=False):
    """The keywords of :func:`build_problem`, typed for static checkers
    (:func:`evalmix.interval` takes the same ones)."""

    contrast: str | None
    model: str | None
    conditions: Sequence[str] | None
    term: str | None
    family: Regression
    paired: Paired


#: The options of :func:`build_problem` and their defaults.
PROBLEM_DEFAULTS: MappingProxyType[str, Any] = MappingProxyType(
    {f.name: f.default for f in fields(_ProblemOptions)})


#: The options of :func:`build_problem` each estimand reads; any other one given (not at
#: its default) is refused, never dropped.
USED_OPTIONS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "mean": ("contrast",),
    "win_rate": ("contrast", "model"),
    "controlled_win_rate": ("contrast", "model"),
    "difference": ("contrast", "conditions", "paired"),
    "coef": ("term", "family", "conditions"),
})


def given_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of :func:`build_problem` in ``options`` set to something other than
    their default (:data:`PROBLEM_DEFAULTS`)."""
    return {k: v for k, v in options.items()
            if k in PROBLEM_DEFAULTS and not _is_default(v, PROBLEM_DEFAULTS[k])}


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    try:
        return bool(value == default) and type(value) is type(default)
    except (TypeError, ValueError):  # arrays and the like are never a default
        return False


def check_used(estimand: str, options: Mapping[str, Any]) -> None:
    """Refuse an estimand option the estimand would not read (:data:`USED_OPTIONS`).

    ``interval(t, "mean", conditions=["m1"])`` once returned the pooled mean of every
    condition; it now says how to ask for condition ``m1``'s mean (``contrast="m1"``).
    """
    used = USED_OPTIONS.get(estimand, ())
    for name, value in given_options(options).items():
        if name in used:
            continue
        hint = ""
        if estimand == "mean" and name in ("conditions", "model"):
            one = value[0] if isinstance(value, list | tuple) and len(value) == 1 else value
            hint = (f"; for the mean of one condition write contrast={one!r}"
                    if isinstance(one, str) else
                    "; for the mean of one condition write contrast='<condition>'")
        elif estimand in ("win_rate", "controlled_win_rate") and name == "conditions":
            hint = ("; for the win rate against one model write contrast='<model>', for "
                    "a difference use estimand='difference'")
        elif estimand == "difference" and name == "model":
            hint = "; name the two sides with contrast='B - A' or conditions=(A, B)"
        raise InvalidOptionError(
            f"estimand={estimand!r} does not use {name}={value!r} (it reads "
            f"{', '.join(f'{u}=' for u in used)}){hint}")


def build_problem(table: EvalTable, estimand: IntervalEstimand,
                  **options: Unpack[ProblemOptions]) -> LinearProblem:
    """Turn an estimand on an :class:`~evalmix.data.table.EvalTable` into a LinearProblem.

    Parameters
    ----------
    table : EvalTable
        The eval table (from :func:`evalmix.read`).
    estimand : {"mean", "win_rate", "controlled_win_rate", "difference", "coef"}
        What is estimated (see the module docstring).
    **options
        How the estimand is read off the table: the options below, typed by
        :class:`ProblemOptions`, with their defaults in :data:`PROBLEM_DEFAULTS` (an
        unknown one is an :class:`~evalmix.errors.InvalidOptionError` that lists them).

    Other Parameters
    ----------------
    contrast : str, optional
        ``mean``: a condition label (default: all rows, ``"overall"``). Win rates: keep
        the rows whose ``model_b`` (or ``condition``) is this label. ``difference``:
        ``"B - A"``, the same as ``conditions=(A, B)``.
    model : str, optional
        Win rates: the model whose win share is estimated (default: the table's
        ``y``, i.e. ``model_a``'s).
    conditions : (A, B), optional
        ``difference``: B minus A (default: the two levels, sorted). ``coef``: A is
        the reference level.
    term : str, optional
        ``coef``: the coefficient (e.g. ``"position"``, ``"condition[treatment]"`` or
        just ``"treatment"``); default the first non-intercept term.
    family : {"gaussian", "binomial"}
        ``coef`` only: least squares (linear probability for 0/1 outcomes) or logistic
        (quasi-binomial) regression (see :mod:`evalmix.families`).
    paired : "auto", True or False
        ``difference``: force or forbid the per-unit (paired) estimator.

    Examples
    --------
    >>> import evalmix
    >>> t = evalmix.sim.clustered_scores(10, 5, p=0.7, icc=0.1, seed=1).table()
    >>> build_problem(t, "mean").X.shape
    (50, 1)
    """
    o = _ProblemOptions(**check_keywords("build_problem", options, PROBLEM_DEFAULTS))
    contrast, model, conditions, term, paired = (o.contrast, o.model, o.conditions, o.term,
                                                 o.paired)
    check_option("estimand", estimand, ESTIMANDS)
    check_used(estimand, options)
    family = cast(Regression, family_name(o.family, REGRESSION_FAMILIES))
    if family == "binomial" and estimand != "coef":
        raise InvalidOptionError(
            f"family='binomial' (logistic) is for estimand='coef'; {estimand!r} is a mean or a "
            "difference of means, estimated by least squares"
        )
    if estimand == "mean":
        return _mean(table, contrast)
    if estimand in ("win_rate", "controlled_win_rate"):
        return _win_rate(table, contrast, model, estimand == "controlled_win_rate")
    if estimand == "difference":
        if table.kind == "pairwise":
            table = _scored_for_labels(table, conditions, contrast)
        if conditions is None and contrast is not None:
            parts = [x.strip() for x in str(contrast).split(" - ")]
            if len(parts) != 2:
                raise InvalidOptionError(
                    f"contrast={contrast!r}: for a difference write 'B - A' (with spaces "
                    "around the minus) or pass conditions=(A, B)"
                )
            conditions = (parts[1], parts[0])
        problem = _difference(table, conditions, paired)
        _check_pairing_unit(problem, paired)
        return problem
    return _coef(table, term, family, conditions)
