"""The frozen dataclasses of a model specification: :class:`ModelSpec`, :class:`RandomTerm`.

The family names are :mod:`evalmix.families`. Kept apart from :mod:`evalmix.models.spec`
so that the formula parser and the spec builder can import
them without an import cycle; import them from :mod:`evalmix.models.spec`, whose docstring
describes the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.families import Family


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class RandomTerm:
    """One random effect: a grouping factor times a covariate (1 for an intercept).

    Attributes
    ----------
    factor : str
        Grouping factor (a cluster role, or ``"a:b"`` for an interaction of roles).
    term : str
        ``"1"`` for a random intercept, else the fixed-effect column the slope varies
        (e.g. ``"position"``, ``"condition[treatment]"``).
    codes : ndarray of int64, shape (n,)
        Level of ``factor`` on every row (0..G-1).
    levels : tuple of str
    x : ndarray of float, shape (n,)
        Covariate multiplying the effect (ones for an intercept).
    correlated : bool
        Part of a correlated term ``(1 + x | factor)``: the terms of one factor marked
        so have a free covariance matrix (lme4's parameterisation,
        :mod:`evalmix.models.frequentist._theta`); unmarked terms are independent.
    """

    factor: str
    term: str
    codes: np.ndarray
    levels: tuple[str, ...]
    x: np.ndarray
    correlated: bool = False

    @property
    def name(self) -> str:
        """lme4-style label: ``"1|judge"``, ``"position|judge"``."""
        return f"{self.term}|{self.factor}"

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def is_intercept(self) -> bool:
        return self.term == "1"


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """A back-end-neutral crossed random-effects model (see :mod:`evalmix.models.spec`).

    Attributes
    ----------
    formula : str
        The model in lme4 syntax (user formula, or the default built from roles).
    family : {"bernoulli", "binomial", "gaussian", "cumulative"}
        ``"binomial"`` when the response holds fractions (ties scored 0.5, proportions):
        fitted with the fractional binomial (quasi-)likelihood.
    link : {"logit", "identity"}
    response : str
        Plain words: what ``y`` is (e.g. ``"evaluated output (model_b) wins"``).
    y : ndarray, shape (n,)
        Bernoulli/binomial: success fraction in [0, 1]; gaussian: the score;
        cumulative: ordered category 0..K-1.
    X : ndarray, shape (n, k)
    fixed_names : tuple of str
    random : tuple of RandomTerm
    design : {"scores", "baseline", "bradley-terry"}
    categories : tuple of str
        Cumulative family: category labels in order (lowest first).
    reference : str or None
        Reference level of the condition / model abilities.
    contrasts : tuple of (name, weights)
        Extra linear combinations of fixed effects worth reporting (e.g. Bradley-Terry
        ability differences).
    condition_terms : tuple of str
        Fixed columns that are condition (model) effects.
    maximal : tuple of str
        Factors whose condition slopes the maximal default added (see
        :mod:`evalmix.models.spec._maximal`); only these may be dropped by its simplification.
        Empty for a user's ``slopes=`` or ``formula=``.
    n_obs : int
    ties : str or None
    notes : tuple of str
    """

    formula: str
    family: Family
    link: str
    response: str
    y: np.ndarray
    X: np.ndarray
    fixed_names: tuple[str, ...]
    random: tuple[RandomTerm, ...]
    design: str
    categories: tuple[str, ...] = ()
    reference: str | None = None
    contrasts: tuple[tuple[str, tuple[float, ...]], ...] = ()
    condition_terms: tuple[str, ...] = ()
    maximal: tuple[str, ...] = ()
    ties: str | None = None
    notes: tuple[str, ...] = ()
    n_obs: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_obs", int(self.y.shape[0]))
        if self.X.shape != (self.n_obs, len(self.fixed_names)):
            raise EvalmixError(
                f"ModelSpec: X has shape {self.X.shape}, expected ({self.n_obs}, "
                f"{len(self.fixed_names)}) for fixed terms {self.fixed_names}"
            )

    def replace(self, **changes) -> ModelSpec:
        """A copy with some fields changed (the spec itself is frozen)."""
        return replace(self, **changes)

    @property
    def factors(self) -> tuple[str, ...]:
        """Grouping factors, in order of first appearance."""
        return tuple(dict.fromkeys(r.factor for r in self.random))

    def n_levels(self, factor: str) -> int:
        for r in self.random:
            if r.factor == factor:
                return r.n_levels
        raise InvalidOptionError(f"{factor!r} is not a grouping factor of this model ({self.factors})")

    def frame(self) -> pd.DataFrame:
        """The model frame: response, fixed columns and random-term codes (for back ends
        that want a DataFrame, e.g. statsmodels or Bambi)."""
        out = pd.DataFrame(self.X, columns=list(self.fixed_names))
        out.insert(0, "y", self.y)
        for r in self.random:
            if r.factor not in out.columns:
                out[r.factor] = np.asarray(r.levels, dtype=object)[r.codes]
        return out

    def __str__(self) -> str:
        return (f"ModelSpec({self.family}, {self.design}, n={self.n_obs}): {self.formula}\n"
                f"  response: {self.response}\n  fixed: {', '.join(self.fixed_names)}\n"
                f"  random: {', '.join(r.name for r in self.random) or 'none'}")

