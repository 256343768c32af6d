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
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast, get_args

import numpy as np
import pandas as pd

from evalmix.data.table import dense_codes, intersect_codes
from evalmix.errors import (
    ConvergenceWarning,
    DroppedRowsWarning,
    EvalmixError,
    EvalmixWarning,
    InvalidOptionError,
    check_keywords,
    check_option,
)
from evalmix.families import REGRESSION_FAMILIES, Regression, family_name
from evalmix.vocabulary import IntervalEstimand, Paired

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = [
    "ESTIMANDS", "LinearProblem", "Fit", "ProblemOptions", "PROBLEM_DEFAULTS", "USED_OPTIONS",
    "given_options", "build_problem", "check_used",
    "fit_problem", "fit_ols", "fit_logit", "mean_null",
]

ESTIMANDS: tuple[str, ...] = get_args(IntervalEstimand)
AUTO = "auto"
PAIRED: tuple[object, ...] = (AUTO, True, False)
#: ``paired="auto"`` pairs when at least this share of units has both conditions (the
#: rest are left out, with a DroppedRowsWarning).
PAIRED_MIN_SHARE = 0.9
#: IRLS stops when the largest Newton step is below this.
LOGIT_TOL = 1e-12
LOGIT_MAXIT = 100


@dataclass(frozen=True)
class LinearProblem:
    """An estimand as coefficient ``target`` of a regression of ``y`` on ``X``.

    Attributes
    ----------
    X : (n, k) float array
    y : (n,) float array
    target : int
        Column of ``X`` whose coefficient is the estimand.
    names : tuple of str
        Column names of ``X``.
    family : {"gaussian", "binomial"}
        Least squares or logistic (quasi-binomial) regression.
    cluster_codes : Mapping[str, ndarray]
        Dense int codes (0..G-1) of every cluster factor, for the rows of ``X``.
    pair_codes : ndarray or None
        Codes of matched AB/BA pairs (pairwise tables with order), the smallest unit that
        must be resampled or clustered together.
    estimand, contrast : str
    paired : bool or None
        For ``difference``: whether per-unit differences were used.
    null : float
        Null value of the estimand (0.5 win rates and 0/1 means, 0 differences and
        coefficients, NaN for means of numeric scores).
    n_obs : int
        Rows of ``X``.
    details : Mapping
        Extras (rows used, pairs dropped, who is scored, ...).
    """

    X: np.ndarray
    y: np.ndarray
    target: int
    names: tuple[str, ...]
    family: str
    cluster_codes: Mapping[str, np.ndarray]
    pair_codes: np.ndarray | None
    estimand: str
    contrast: str
    paired: bool | None
    null: float
    n_obs: int
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cluster_codes", MappingProxyType(dict(self.cluster_codes)))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def term(self) -> str:
        return self.names[self.target]

    def codes(self, role: str) -> np.ndarray:
        """Dense codes of cluster role ``role`` or of an interaction cell ``"a:b"``."""
        if role in self.cluster_codes:
            return self.cluster_codes[role]
        return intersect_codes(*(self.cluster_codes[p] for p in role.split(":")))


# --------------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class Fit:
    """OLS or logit fit: coefficients, fitted values, response residuals, weights."""

    beta: np.ndarray
    fitted: np.ndarray
    resid: np.ndarray
    working_weights: np.ndarray | None
    converged: bool = True
    iterations: int = 0


def fit_ols(X: np.ndarray, y: np.ndarray) -> Fit:
    """Least squares; raises on a rank-deficient design."""
    X = np.asarray(X, dtype=float)
    beta, _, rank, _ = np.linalg.lstsq(X, y, rcond=None)
    if rank < X.shape[1]:
        raise EvalmixError(
            f"the design has {X.shape[1]} columns but rank {rank}: a covariate is constant "
            "or collinear in the selected rows; drop it"
        )
    fitted = X @ beta
    return Fit(beta, fitted, y - fitted, None)


def fit_logit(X: np.ndarray, y: np.ndarray) -> Fit:
    """Logistic regression (quasi-binomial for y in [0, 1]) by Newton-IRLS."""
    X = np.asarray(X, dtype=float)
    if np.any((y < 0) | (y > 1)):
        raise EvalmixError("family='binomial' (logistic) needs outcomes in [0, 1]")
    p0 = np.clip(y.mean(), 1e-6, 1 - 1e-6)
    beta = np.zeros(X.shape[1])
    beta[0] = np.log(p0 / (1 - p0)) if np.allclose(X[:, 0], 1) else 0.0
    converged = False
    it = 0
    for it in range(1, LOGIT_MAXIT + 1):  # noqa: B007 (used after the loop)
        eta = X @ beta
        mu = 1 / (1 + np.exp(-eta))
        w = mu * (1 - mu)
        try:
            step = np.linalg.solve((X * w[:, None]).T @ X, X.T @ (y - mu))
        except np.linalg.LinAlgError:
            raise EvalmixError(
                "the logistic fit broke down (singular information matrix after "
                f"{it} Newton steps, largest |coef| {np.max(np.abs(beta)):.3g}): the outcome "
                "is perfectly separated by a condition or covariate (e.g. one condition "
                "scores all 1s or all 0s), so its log-odds coefficient is infinite. Use "
                "family='gaussian' (difference in proportions) instead"
            ) from None
        beta = beta + step
        if np.max(np.abs(step)) < LOGIT_TOL * (1 + np.max(np.abs(beta))):
            converged = True
            break
    mu = 1 / (1 + np.exp(-(X @ beta)))
    w = mu * (1 - mu)
    if not converged or np.min(w) < 1e-12:
        warnings.warn(
            f"logistic fit did not converge in {it} iterations (largest |coef| "
            f"{np.max(np.abs(beta)):.3g}); the outcome may be separated by a covariate. "
            "Use family='gaussian' (linear probability) instead",
            ConvergenceWarning, stacklevel=3,
        )
        w = np.maximum(w, 1e-300)
    return Fit(beta, mu, y - mu, w, converged, it)


def fit_problem(problem: LinearProblem) -> Fit:
    """Fit the problem's regression (OLS or logit)."""
    if problem.family == "binomial":
        return fit_logit(problem.X, problem.y)
    return fit_ols(problem.X, problem.y)


# --------------------------------------------------------------------------- helpers
def _codes_for(table: EvalTable, mask: np.ndarray) -> dict[str, np.ndarray]:
    return {r: dense_codes(table.codes(r)[mask]) for r in table.clusters}


def _pairs_for(table: EvalTable, mask: np.ndarray) -> np.ndarray | None:
    if table.kind != "pairwise" or not table.has_order:
        return None
    return dense_codes(table.pair_codes()[mask])


def mean_null(table: EvalTable) -> float:
    """The null of a mean: 0.5 for 0/1 and proportion scores (chance for a binary choice);
    a numeric score has no natural null, so its means get none (NaN), only differences."""
    return 0.5 if table.outcome_type in ("binary", "proportion") else float("nan")


def _label_column(table: EvalTable, labels: Sequence[str], what: str) -> str:
    """The canonical column whose values hold ``labels`` (condition or model_b)."""
    d = table.data
    candidates = ["condition"] if table.kind == "scores" else ["condition", "model_b", "model_a"]
    candidates = [c for c in candidates if c in d.columns]
    for col in candidates:
        vals = set(d[col].astype(str).unique())
        if all(str(lab) in vals for lab in labels):
            return col
    if not candidates:
        raise EvalmixError(
            f"{what} needs a condition column; read the table with condition=... "
            "(score tables) or model_a/model_b (pairwise tables)"
        )
    avail = sorted(set(d[candidates[0]].astype(str).unique()))
    raise InvalidOptionError(
        f"{what}: {', '.join(repr(str(x)) for x in labels)} not found in column "
        f"{candidates[0]!r}; its values are: {', '.join(repr(a) for a in avail[:30])}"
    )


def _unique_label(values: pd.Series, fallback: str) -> str:
    u = values.astype(str).unique()
    return str(u[0]) if len(u) == 1 else fallback


def _oriented(table: EvalTable, frame: pd.DataFrame, model: str | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, str]:
    """(mask, y scored for ``model``, 'scored model shown first' indicator, who, opponent)."""
    ma = frame["model_a"].astype(str).to_numpy()
    mb = frame["model_b"].astype(str).to_numpy()
    y = frame["y"].to_numpy(dtype=float)
    a_first = frame["a_first"].to_numpy(dtype=float)
    if model is None:
        mask = np.ones(len(frame), dtype=bool)
        who = _unique_label(frame["model_a"], "model_a")
        opp = _unique_label(frame["model_b"], "others")
        return mask, y, a_first, who, opp
    model = str(model)
    is_a, is_b = ma == model, mb == model
    mask = is_a | is_b
    if not mask.any():
        models = sorted(set(ma) | set(mb))
        raise InvalidOptionError(
            f"model {model!r} plays in no comparison; models: "
            f"{', '.join(repr(m) for m in models[:30])}"
        )
    if table.ties == "separate":
        won_b = (frame["verdict"].astype(str).to_numpy() == "b").astype(float)
    else:
        won_b = 1.0 - y
    ys = np.where(is_a, y, won_b)
    first = np.where(is_a, a_first, 1.0 - a_first)
    opp_vals = np.where(is_a, mb, ma)[mask]
    opp = str(opp_vals[0]) if len(set(opp_vals)) == 1 else "others"
    return mask, ys, first, model, opp


def _scored_for_labels(table: EvalTable, conditions: Sequence[str] | None,
                       contrast: str | None) -> EvalTable:
    """A pairwise table re-scored so that ``y`` is the score of the models being compared.

    A difference ``B - A`` of two ``model_b`` labels (one-baseline designs) is the
    difference of *their* win rates: ``y`` becomes ``model_b``'s score (``1 - y``, or the
    strict ``"b"`` verdict under ``ties="separate"``). Labels of ``model_a`` (or a
    ``condition`` column) keep the table's own scoring, ``model_a``'s.
    """
    labels: list[str] = []
    if conditions is not None and not isinstance(conditions, str):
        labels = [str(c) for c in conditions]
    elif contrast is not None:
        labels = [x.strip() for x in str(contrast).split(" - ")]
    d = table.data
    if "condition" in d.columns:
        return table
    if labels:
        in_b = set(d["model_b"].astype(str).unique())
        if not all(lab in in_b for lab in labels):
            return table
    elif d["model_b"].nunique() < 2:
        return table
    frame = table.frame()
    if table.ties == "separate":
        frame["y"] = (frame["verdict"].astype(str) == "b").astype(float)
    else:
        frame["y"] = 1.0 - frame["y"].to_numpy(dtype=float)
    return replace(table, data=frame, _codes={})


def _problem(X, y, target, names, table, mask, *, estimand, contrast, null, family="gaussian",
             paired=None, details=None, cluster_codes=None, pair_codes="auto") -> LinearProblem:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[0] == 0:
        raise EvalmixError(f"{estimand} [{contrast}]: no rows to analyse")
    cc = _codes_for(table, mask) if cluster_codes is None else cluster_codes
    pc = _pairs_for(table, mask) if isinstance(pair_codes, str) else pair_codes
    return LinearProblem(
        X=X, y=np.asarray(y, dtype=float), target=target, names=tuple(names), family=family,
        cluster_codes=cc, pair_codes=pc, estimand=estimand, contrast=contrast,
        paired=paired, null=null, n_obs=X.shape[0], details=details or {},
    )


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


def _require_pairwise(table: EvalTable, estimand: str) -> None:
    if table.kind != "pairwise":
        raise EvalmixError(
            f"{estimand} needs a pairwise table (model_a/model_b columns); this is a "
            "score table: use estimand='mean' or 'difference'"
        )


def _win_rate(table: EvalTable, contrast: str | None, model: str | None,
              controlled: bool) -> LinearProblem:
    estimand = "controlled_win_rate" if controlled else "win_rate"
    _require_pairwise(table, estimand)
    d = table.data
    base = np.ones(table.n_obs, dtype=bool)
    if contrast is not None:
        col = _label_column(table, [contrast], estimand)
        if model is None and col in ("model_a", "model_b"):
            # the win rate of the model the contrast names, on every row it plays
            model = str(contrast)
        else:
            base = d[col].astype(str).to_numpy() == str(contrast)
    sel, ys, first, who, opp = _oriented(table, d, model)
    mask = base & sel
    details: dict[str, Any] = {"scored_for": who, "ties": table.ties}
    label = f"{who} vs {opp}"
    if not controlled:
        return _problem(np.ones((mask.sum(), 1)), ys[mask], 0, ("(Intercept)",), table, mask,
                        estimand=estimand, contrast=label, null=0.5, details=details)
    if not table.has_order:
        raise EvalmixError(
            "controlled_win_rate needs to know which answer was shown first; read the "
            "table with first_shown=..."
        )
    if table.single_order:
        return _standardised_win_rate(table, mask, ys, first, label, details)
    pid = d["pair_id"].to_numpy()
    known = mask & np.isfinite(first) & (pid >= 0)
    f = pd.DataFrame({"pid": pid[known], "first": first[known]})
    g = f.groupby("pid")["first"].agg(["min", "max"])
    complete_ids = g.index[(g["min"] == 0) & (g["max"] == 1)]
    complete = known & np.isin(pid, complete_ids.to_numpy())
    n_drop = int(mask.sum() - complete.sum())
    if not complete.any():
        raise EvalmixError(
            "controlled_win_rate found no complete AB/BA pair (both orders of one "
            "comparison); use estimand='win_rate'"
        )
    if n_drop:
        warnings.warn(
            f"controlled_win_rate uses complete AB/BA pairs only: {n_drop} of "
            f"{int(mask.sum())} rows without their other-order partner were left out",
            DroppedRowsWarning, stacklevel=4,
        )
    details.update(n_pairs=len(complete_ids), rows_without_partner=n_drop,
                   method="within matched AB/BA pairs")
    X = np.column_stack([np.ones(complete.sum()), first[complete] - 0.5])
    return _problem(X, ys[complete], 0, ("(Intercept)", "position"), table, complete,
                    estimand=estimand, contrast=label, null=0.5, details=details)


def _standardised_win_rate(table: EvalTable, mask: np.ndarray, ys: np.ndarray,
                           first: np.ndarray, label: str, details: dict[str, Any]
                           ) -> LinearProblem:
    """Single randomised order: ``y ~ 1 + (s - 1/2)`` over every row of the comparison.

    The intercept is ``(mean(y | first) + mean(y | second)) / 2``, the fitted model
    averaged over both orders (standardisation to a balanced order).

    References
    ----------
    Hernan, M. A. and Robins, J. M. (2006). Estimating causal effects from
    epidemiological data. J Epidemiol Community Health 60, 578-586 (standardisation).
    https://doi.org/10.1136/jech.2004.029496
    """
    known = mask & np.isfinite(first)
    s = first[known]
    n_first = int((s == 1).sum())
    if n_first in (0, s.size):
        raise EvalmixError(
            f"controlled_win_rate [{label}]: the scored model was shown "
            f"{'first' if n_first else 'second'} in all {s.size} of its rows, so the win "
            "rate cannot be adjusted for position; use estimand='win_rate'"
        )
    details.update(method="standardisation over both orders (single randomised order)",
                   n_first=n_first, n_second=int(s.size - n_first))
    X = np.column_stack([np.ones(s.size), s - 0.5])
    return _problem(X, ys[known], 0, ("(Intercept)", "position"), table, known,
                    estimand="controlled_win_rate", contrast=label, null=0.5,
                    details=details)


def _two_conditions(table: EvalTable, conditions: Sequence[str] | None
                    ) -> tuple[str, str, str]:
    d = table.data
    if conditions is not None:
        if isinstance(conditions, str) or len(conditions) != 2:
            raise InvalidOptionError(
                f"conditions={conditions!r}: give two labels (A, B); the difference is B - A"
            )
        a, b = (str(c) for c in conditions)
        return a, b, _label_column(table, [a, b], "difference")
    col = "condition" if "condition" in d.columns else (
        "model_b" if table.kind == "pairwise" else None)
    if col is None:
        raise EvalmixError("difference needs a condition column (read with condition=...)")
    levels = sorted(d[col].astype(str).unique())
    if len(levels) != 2:
        raise EvalmixError(
            f"difference: column {col!r} has {len(levels)} levels "
            f"({', '.join(repr(v) for v in levels[:10])}); name two with conditions=(A, B)"
        )
    return levels[0], levels[1], col


def _difference(table: EvalTable, conditions: Sequence[str] | None,
                paired: object) -> LinearProblem:
    check_option("paired", paired, PAIRED)
    a, b, col = _two_conditions(table, conditions)
    d = table.data
    lab = d[col].astype(str).to_numpy()
    mask = (lab == a) | (lab == b)
    label = f"{b} - {a}"
    keys = list(table.clusters)
    if table.kind == "pairwise" and table.has_order and keys:
        keys = keys + ["a_first"]
    details: dict[str, Any] = {"conditions": (a, b), "column": col}
    use_paired = False
    if keys and paired is not False:
        units = _paired_units(table, d, mask, lab[mask] == b, keys)
        both = units.both
        n_match = int(both.sum())
        if paired is True and n_match == 0:
            raise EvalmixError(
                f"paired=True but no unit (combination of {', '.join(keys)}) has rows of both "
                f"{a!r} and {b!r}; use paired=False"
            )
        share = n_match / max(both.size, 1)
        use_paired = n_match > 0 and (paired is True or (
            share >= PAIRED_MIN_SHARE and n_match >= 2))
        details["units_matched"] = n_match
        details["units_total"] = int(both.size)
    if not use_paired:
        X = np.column_stack([np.ones(mask.sum()), (lab[mask] == b).astype(float)])
        return _problem(X, table.y[mask], 1, ("(Intercept)", f"{col}[{b}]"), table, mask,
                        estimand="difference", contrast=label, null=0.0, paired=False,
                        details=details)
    if not both.all():
        warnings.warn(
            f"paired difference: {int((~both).sum())} of {len(both)} units lack one of the "
            "two conditions and were left out (paired=False keeps every row and uses the "
            "unpaired estimator)", DroppedRowsWarning, stacklevel=4,
        )
    diffs = units.mean_b[both] - units.mean_a[both]
    first = units.first_row[both]  # a row of each matched unit, in unit order
    codes = {r: _unit_codes(table, d, r, mask, first) for r in table.clusters}
    pair_codes = None
    if "a_first" in keys:
        # numbered in order of first appearance
        pair_codes = pd.factorize(intersect_codes(*codes.values()), sort=False)[0]
        pair_codes = pair_codes.astype(np.int64)
    details.update(pairing_unit=tuple(keys), rows_used=int(mask.sum()))
    return _problem(np.ones((len(diffs), 1)), diffs, 0, ("(Intercept)",), table, mask,
                    estimand="difference", contrast=label, null=0.0, paired=True,
                    details=details, cluster_codes=codes, pair_codes=pair_codes)


@dataclass(frozen=True)
class _Units:
    """Per pairing unit (in the sorted order of its key columns): the mean outcome under
    each condition (NaN when absent), whether both are present, and one row of it."""

    mean_a: np.ndarray
    mean_b: np.ndarray
    both: np.ndarray
    first_row: np.ndarray


def _unit_codes(table: EvalTable, d: pd.DataFrame, role: str, mask: np.ndarray,
                first: np.ndarray) -> np.ndarray:
    """Cluster codes of the matched units, numbered in the sorted order of the label
    text (as ``dense_codes(labels.astype(str))``). The table's codes are sorted by label, which
    is the text order when the labels are strings with none missing."""
    codes = table.codes(role)[mask][first]
    if pd.api.types.is_string_dtype(d[role].dtype) and codes.min(initial=0) >= 0:
        return dense_codes(codes)
    return dense_codes(d[role].to_numpy()[mask][first].astype(str))


def _paired_units(table: EvalTable, d: pd.DataFrame, mask: np.ndarray, is_b: np.ndarray,
                  keys: list[str]) -> _Units:
    """Units of a paired difference from the table's integer cluster codes.

    Equals ``groupby(keys + [condition], sort=True, dropna=False).mean().unstack()`` on
    the label columns (the earlier code, 13x slower than the mean at 1M rows): the codes
    are sorted like the labels (missing labels last, as groupby puts NaN), and the means
    are pandas' own (one groupby on a single integer key).
    """
    parts = []
    for k in keys:
        if k == "a_first":
            c = pd.factorize(d["a_first"].to_numpy()[mask], sort=True)[0]
        else:
            c = table.codes(k)[mask]
        c = np.asarray(c, dtype=np.int64)
        parts.append(np.where(c < 0, c.max(initial=0) + 1, c))  # NaN last, as groupby
    unit = intersect_codes(*parts)
    n_units = int(unit.max(initial=-1)) + 1
    y = np.asarray(table.y[mask], dtype=float)
    cell = unit * 2 + is_b.astype(np.int64)
    means = pd.Series(y).groupby(cell, sort=True).mean()
    mean_a = np.full(n_units, np.nan)
    mean_b = np.full(n_units, np.nan)
    cells = means.index.to_numpy()
    vals = means.to_numpy()
    mean_a[cells[cells % 2 == 0] // 2] = vals[cells % 2 == 0]
    mean_b[cells[cells % 2 == 1] // 2] = vals[cells % 2 == 1]
    first_row = np.zeros(n_units, dtype=np.int64)
    first_row[unit[::-1]] = np.arange(unit.size - 1, -1, -1)
    return _Units(mean_a=mean_a, mean_b=mean_b,
                  both=~np.isnan(mean_a) & ~np.isnan(mean_b), first_row=first_row)


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


#: ``paired="auto"`` warns when a pairing unit holds more than this many rows per arm.
COARSE_UNIT_ROWS = 1.5


def _check_pairing_unit(problem: LinearProblem, paired: object) -> None:
    """Warn when ``paired="auto"`` paired on a unit coarser than one item.

    Pairing on the combination of the cluster factors is the per-item difference when
    each unit holds one row per condition; when units hold many rows (only a group
    factor was declared) the estimate becomes an equal-weight mean of *group*
    differences, a different estimand from the row-weighted difference.
    """
    if not problem.paired or paired != AUTO:
        return
    d = problem.details
    per_arm = d.get("rows_used", 0) / max(2 * int(d.get("units_matched", 1)), 1)
    if per_arm <= COARSE_UNIT_ROWS:
        return
    unit = " x ".join(str(k) for k in d.get("pairing_unit", ()))
    note = (f"paired on {unit} units holding {per_arm:.1f} rows per condition on average: "
            "the estimate is an equal-weight mean of per-unit differences, not the row "
            "mean difference")
    object.__setattr__(problem, "details", MappingProxyType({**d, "pairing_note": note}))
    warnings.warn(
        f"paired='auto' {note}. Declare the item column as a cluster role (clusters="
        "{'item': ...}) to pair on items, or pass paired=False for the unpaired difference "
        "(paired=True keeps this estimator without the warning)",
        EvalmixWarning, stacklevel=4)
