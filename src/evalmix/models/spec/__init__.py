"""Model specifications built from an :class:`~evalmix.data.table.EvalTable`'s roles.

A :class:`ModelSpec` is a frozen, back-end-neutral description of a crossed
random-effects model: the response, a fixed-effect design matrix with column names, the
family, and the random terms (integer codes of a grouping factor times a covariate).
Back ends (:mod:`evalmix.models.bayes`, :mod:`evalmix.models.frequentist`) only read it.

Pairwise tables
---------------
*Baseline design* (``model_a`` is the same model on every row, the shared-data
convention: a fixed reference answer against the evaluated outputs in ``model_b``). The
spec models the log-odds that the **evaluated output (model_b) wins**::

    eta = Intercept + condition[m] (treatment-coded model_b, first level = reference)
          + position * x_pos + crossed random intercepts
          + (0 + position | judge) + optional (0 + condition | judge)

with ``x_pos = +1/2`` if model_b's answer was shown first and ``-1/2`` otherwise (0 when
the order is unknown), so ``position`` is the log-odds ratio of being shown first. This
is exactly the parameterisation of :func:`evalmix.sim.pairwise_judges` and of the frozen
``glmer`` references. The response is ``1 - table.y`` (``table.y`` is "model_a wins").

*Bradley-Terry design* (``model_a`` varies). The response is "model_a wins"; each model
other than the reference level gets an ability column ``+1`` if it is ``model_a``, ``-1``
if it is ``model_b``; ``position`` is ``a_first - 1/2`` (again: log-odds ratio of being
shown first). There is no intercept. Random intercepts ``(1|f)`` are then oriented
"model_a vs model_b" (only meaningful when the orientation is consistent); the judge x
model interaction is ``(0 + model | judge)``.

Formulas
--------
lme4 syntax, the supported subset: ``y ~ 1 + condition + position + judge +
condition:position + (1|scenario) + (0 + condition|judge) + (1|judge:scenario)``.
Fixed terms: ``1``/``0``/``-1``, ``condition`` (alias ``model``), ``position``, any cluster
role (fixed treatment-coded dummies, e.g. for a 3-level judge factor) and ``a:b``
interactions of those. Random terms: ``(1|g)``, ``(0 + x|g)``, ``(1 + x||g)`` (uncorrelated,
as lme4's ``||``), ``(1 + x|g)`` (correlated intercept and slopes, lme4's
parameterisation: fitted as such by the Laplace back end, with independent terms by the
others, which say so), with ``g`` a cluster role or ``a:b`` of roles. A second correlated
term for one factor, nesting ``a/b``, ``*``, functions and offsets are not supported and
raise.

The default model is *maximal* for sampled factors (:mod:`evalmix.models.spec._maximal`):
``(1 + condition|f)`` for a logit model, ``(1|f) + (0 + condition|f)`` otherwise.

Layout
------
This module is the public import surface. The dataclasses :class:`ModelSpec` and
:class:`RandomTerm` live in :mod:`evalmix.models.spec._spec_types`, the formula parser in
:mod:`evalmix.models.spec._formula`, :func:`build_spec` in :mod:`evalmix.models.spec._build`;
row collapsing (:func:`collapse`) is here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalmix.families import FAMILIES
from evalmix.families import Family as Family
from evalmix.models.spec._build import build_spec
from evalmix.models.spec._formula import ParsedFormula as ParsedFormula
from evalmix.models.spec._formula import parse_formula
from evalmix.models.spec._spec_types import ModelSpec, RandomTerm, _readonly

__all__ = [
    "ModelSpec",
    "RandomTerm",
    "Collapsed",
    "build_spec",
    "parse_formula",
    "collapse",
    "FAMILIES",
]


@dataclass(frozen=True, eq=False)
class Collapsed:
    """Rows with identical covariate patterns aggregated (sufficient statistics).

    Attributes
    ----------
    X : ndarray (m, k)
    codes : tuple of ndarray (m,)
        One per random term of the spec, same order.
    x : tuple of ndarray (m,)
    trials : ndarray (m,)
        Rows in the pattern.
    successes : ndarray (m,)
        Sum of ``y`` (binomial families; may be fractional under ties="half").
    sum_y, sum_y2 : ndarray (m,)
        Gaussian sufficient statistics.
    counts : ndarray (m, K)
        Cumulative family: rows per category.
    pattern : ndarray (n,)
        Pattern index of every original row.
    """

    X: np.ndarray
    codes: tuple[np.ndarray, ...]
    x: tuple[np.ndarray, ...]
    trials: np.ndarray
    successes: np.ndarray
    sum_y: np.ndarray
    sum_y2: np.ndarray
    counts: np.ndarray
    pattern: np.ndarray

    @property
    def n_patterns(self) -> int:
        return int(self.trials.shape[0])

    @property
    def n_rows(self) -> int:
        return int(self.pattern.shape[0])


def parent_levels(inner: np.ndarray, outer: np.ndarray, n_inner: int) -> np.ndarray | None:
    """The outer level of each of the ``n_inner`` inner levels when every inner level
    lies in one outer level (row codes ``inner`` and ``outer``), else None (not nested,
    or an inner level without rows)."""
    parent = np.full(n_inner, -1, dtype=np.int64)
    parent[inner] = outer
    if np.any(parent < 0) or np.any(parent[inner] != outer):
        return None
    return parent


def unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_index=True, return_inverse=True)[1:]`` (the first
    row of each distinct row, in the same lexicographic order, and each row's index
    among them) for a 2-D float array: each column is coded by a 1-D ``np.unique`` and
    the codes are combined into one integer key (mixed radix, first column most
    significant), whose 1-D ``np.unique`` is ~10x faster than ``axis=0``'s structured
    comparisons (100k rows x 7 columns: 0.35 s). Falls back to ``axis=0`` when the
    combined key would not fit in 62 bits."""
    m, w = key.shape
    code = np.zeros(m, dtype=np.int64)
    radix = 1
    for j in range(w):
        _, c = np.unique(key[:, j], return_inverse=True)
        size = int(c.max(initial=0)) + 1
        radix *= size
        if radix >= 2 ** 62:
            _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
            return first, inv.ravel().astype(np.int64)
        code = code * size + c.ravel()
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return first, inv.ravel().astype(np.int64)


def collapse(spec: ModelSpec) -> Collapsed:
    """Aggregate rows with identical fixed covariates and random-effect levels.

    The binomial (and Gaussian, and multinomial) log-likelihood depends on the rows only
    through per-pattern sums, so the model fitted to the collapsed data has the same
    posterior and a gradient that costs in proportion to the number of patterns.

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(6, 2, 2, 2, seed=1, tie_threshold=0).table()
    >>> c = collapse(build_spec(t))
    >>> int(c.trials.sum()) == t.n_obs
    True
    """
    n = spec.n_obs
    parts = [spec.X] + [r.codes[:, None].astype(float) for r in spec.random] + [
        r.x[:, None] for r in spec.random if not r.is_intercept]
    key = np.column_stack(parts) if parts else np.zeros((n, 1))
    if key.shape[1] == 0:
        key = np.zeros((n, 1))
    first, inv = unique_rows(key)
    m = first.shape[0]
    trials = np.bincount(inv, minlength=m).astype(float)
    y = spec.y
    successes = np.bincount(inv, weights=y, minlength=m) if spec.family != "cumulative" \
        else np.zeros(m)
    sum_y = successes if spec.family == "gaussian" else np.zeros(m)
    sum_y2 = (np.bincount(inv, weights=y * y, minlength=m) if spec.family == "gaussian"
              else np.zeros(m))
    if spec.family == "cumulative":
        k = len(spec.categories)
        counts = np.zeros((m, k))
        np.add.at(counts, (inv, y.astype(np.int64)), 1.0)
    else:
        counts = np.zeros((m, 0))
    return Collapsed(
        X=_readonly(spec.X[first]),
        codes=tuple(_readonly(r.codes[first]) for r in spec.random),
        x=tuple(_readonly(r.x[first]) for r in spec.random),
        trials=_readonly(trials), successes=_readonly(successes), sum_y=_readonly(sum_y),
        sum_y2=_readonly(sum_y2), counts=_readonly(counts), pattern=_readonly(inv),
    )
