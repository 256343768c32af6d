"""The :class:`LinearProblem` every variance method consumes, and its OLS / logit fits.

An estimand is coefficient ``target`` of a regression of ``y`` on ``X``
(:mod:`evalmix.inference.estimands` builds it from a table); the naive, sandwich and
bootstrap methods fit it with :func:`fit_problem`. The helpers here turn a row mask of an
:class:`~evalmix.data.table.EvalTable` into a problem (the cluster and pair codes of
those rows) and find the column a label lives in.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix.data.table import dense_codes, intersect_codes
from evalmix.errors import ConvergenceWarning, EvalmixError, InvalidOptionError

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["LinearProblem", "Fit", "fit_problem", "fit_ols", "fit_logit", "mean_null",
           "LOGIT_TOL", "LOGIT_MAXIT"]

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
