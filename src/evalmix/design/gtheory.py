"""Generalizability theory: the facets of a design, its G coefficients and error variances.

A G study splits the variance of one score into components, one per *effect* of the
design: the object of measurement (the evaluated models, systems or conditions; or the
items), every facet the score was observed over (items, judges, prompt templates, runs,
orders, ...) and their interactions. A D study asks what those components imply for a
design with ``n'`` levels of each facet. Everything here is arithmetic on the
components, vectorised over draws (posterior or bootstrap) and designs; the components
themselves come from :mod:`evalmix.design.anova` (balanced data) or from a fitted model
(:func:`evalmix.compare.gstudy.gstudy`).

Rules (Brennan 2001, sections 4.1-4.4). Let ``D`` be the object of measurement and the
factors it is nested within (the facets of differentiation), ``F`` the fixed facets and
``R`` the random facets of generalisation. An effect ``a`` (a set of factors) is

- *universe score* when ``a`` holds a factor of ``D`` and otherwise only fixed facets:
  ``tau = sum var(a) / prod_{f in a & F} n'_f``;
- *relative error* when it holds a factor of ``D`` and a random facet:
  ``var(delta) = sum var(a) / prod_{f in a - D} n'_f``;
- *absolute error only* when it holds a random facet and no factor of ``D``:
  ``var(Delta) = var(delta) + sum var(a) / prod_{f in a} n'_f``;
- left out when it holds only fixed facets (a constant shift of every score).

Then ``E rho^2 = tau / (tau + var(delta))``, ``Phi = tau / (tau + var(Delta))``, the
standard error of one object's mean score (its distance from its universe score over
new samples of the random facets) is ``sqrt(var(Delta))`` and that of a difference
between two objects crossed with the same facet levels ``sqrt(2 var(delta))``.
``n'_f`` of a nested facet is its number of levels *within each* level of its parents
(runs per judge). Negative variance estimates (ANOVA) count as 0 in all of these
(Brennan's convention, section 3.4).

References
----------
Brennan, R. L. (2001). Generalizability Theory. Springer. doi:10.1007/978-1-4757-3456-0
Cronbach, L. J., Gleser, G. C., Nanda, H. & Rajaratnam, N. (1972). The Dependability of
Behavioral Measurements. Wiley.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import numpy as np

from evalmix.errors import InvalidOptionError
from evalmix.tidy import PicklableProxies
from evalmix.vocabulary import FacetRole

__all__ = ["Effect", "GDesign", "FacetRole", "ROLES", "QUANTITIES", "coefficients"]

#: An effect of a design: the set of factors it involves (``{"model", "item"}``).
Effect = frozenset[str]
#: Where an effect's variance goes (see the module docstring).
ROLES: tuple[str, ...] = ("universe", "relative", "absolute", "excluded")
#: What :func:`coefficients` returns, in order.
QUANTITIES: tuple[str, ...] = ("erho2", "phi", "universe_var", "relative_var",
                               "absolute_var", "se_score", "se_relative", "se_diff")


@dataclass(frozen=True)
class GDesign(PicklableProxies):
    """The factors of a G study: the object of measurement, the facets, their nesting.

    Parameters
    ----------
    object : str
        The object of measurement (e.g. ``"model"``).
    facets : sequence of str
        The facets the scores were observed over (e.g. ``("item", "judge", "run")``).
    nesting : mapping of str to sequence of str
        Factor -> the factors it is nested within (``{"run": ("judge",)}``: each judge's
        runs are its own). Nesting is transitive. Factors not named are crossed.
    fixed : sequence of str
        Facets held fixed (the universe of generalisation has exactly these levels,
        e.g. both presentation orders): their interactions with the object are part of
        the universe score and their levels are never varied in a D study.

    Examples
    --------
    >>> d = GDesign("p", ("i", "o"))
    >>> [d.label(e) for e in d.effects]
    ['p', 'i', 'o', 'p x i', 'p x o', 'i x o', 'p x i x o']
    >>> nested = GDesign("p", ("r", "j"), {"r": ("j",)})
    >>> [nested.label(e) for e in nested.effects]
    ['p', 'j', 'p x j', 'r:j', 'p x r:j']
    """

    object: str
    facets: tuple[str, ...]
    nesting: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fixed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        facets = (self.facets,) if isinstance(self.facets, str) else tuple(self.facets)
        fixed = (self.fixed,) if isinstance(self.fixed, str) else tuple(self.fixed)
        nesting = {str(k): ((v,) if isinstance(v, str) else tuple(v))
                   for k, v in dict(self.nesting).items()}
        object.__setattr__(self, "facets", facets)
        object.__setattr__(self, "fixed", fixed)
        object.__setattr__(self, "nesting", MappingProxyType(nesting))
        factors = (self.object, *facets)
        if not facets:
            raise InvalidOptionError("a G study needs at least one facet besides the object of "
                                     f"measurement {self.object!r} (e.g. the items)")
        if len(set(factors)) != len(factors):
            raise InvalidOptionError(f"the object and facets must be distinct, got {factors}")
        for k, parents in nesting.items():
            for f in (k, *parents):
                if f not in factors:
                    raise InvalidOptionError(f"nesting names {f!r}, which is not a factor of the "
                                             f"design ({', '.join(factors)})")
        for f in fixed:
            if f not in facets:
                raise InvalidOptionError(f"fixed facet {f!r} is not one of the facets "
                                         f"({', '.join(facets)})")
        for f in factors:
            if f in self.ancestors(f):
                raise InvalidOptionError(f"the nesting is circular: {f!r} is nested within itself")
        for f in fixed:
            if f in self.differentiation:
                raise InvalidOptionError(f"facet {f!r} contains the object of measurement; it "
                                         "cannot also be fixed")

    # ------------------------------------------------------------------ structure
    @property
    def factors(self) -> tuple[str, ...]:
        """The object of measurement, then the facets."""
        return (self.object, *self.facets)

    def ancestors(self, factor: str) -> frozenset[str]:
        """Every factor ``factor`` is nested within (directly or through another)."""
        seen: set[str] = set()
        todo = list(self.nesting.get(factor, ()))
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            if f != factor:  # a cycle back to ``factor`` is reported by __post_init__
                todo.extend(self.nesting.get(f, ()))
        return frozenset(seen)

    @cached_property
    def effects(self) -> tuple[Effect, ...]:
        """Every effect: the sets of factors closed under nesting (an effect holding a
        nested factor holds its parents), by size, then in the order of the factors."""
        order = {f: i for i, f in enumerate(self.factors)}
        out = []
        for k in range(1, len(self.factors) + 1):
            for combo in itertools.combinations(self.factors, k):
                s = frozenset(combo)
                if all(self.ancestors(f) <= s for f in s):
                    out.append(s)
        return tuple(sorted(out, key=lambda e: (len(e), sorted(order[f] for f in e))))

    @cached_property
    def differentiation(self) -> frozenset[str]:
        """The object of measurement and the factors it is nested within."""
        return frozenset({self.object}) | self.ancestors(self.object)

    @property
    def random_facets(self) -> tuple[str, ...]:
        """Facets of generalisation sampled at random (the ones a D study varies)."""
        return tuple(f for f in self.facets
                     if f not in self.fixed and f not in self.differentiation)

    def nesting_indices(self, effect: Effect) -> frozenset[str]:
        """The factors of ``effect`` that others in it are nested within."""
        return frozenset().union(*(self.ancestors(f) for f in effect)) & effect

    def label(self, effect: Effect) -> str:
        """Brennan's name of an effect with the factor names: ``"model x run:judge"``."""
        order = {f: i for i, f in enumerate(self.factors)}
        nest = self.nesting_indices(effect)
        primary = sorted(effect - nest, key=order.__getitem__)
        text = " x ".join(primary)
        if nest:
            text += ":" + " x ".join(sorted(nest, key=order.__getitem__))
        return text

    def effect(self, label: str | Effect | Sequence[str]) -> Effect:
        """The effect named by ``label`` (a label, or its factors)."""
        if isinstance(label, frozenset):
            found = label
        elif isinstance(label, str):
            names = {self.label(e): e for e in self.effects}
            if label not in names:
                raise InvalidOptionError(f"{label!r} is not an effect of this design; its effects "
                                         f"are {', '.join(names)}")
            found = names[label]
        else:
            found = frozenset(label)
        if found not in self.effects:
            raise InvalidOptionError(f"{sorted(found)} is not an effect of this design")
        return found

    def role(self, effect: Effect) -> FacetRole:
        """Where the variance of ``effect`` goes (module docstring)."""
        has_d = bool(effect & self.differentiation)
        has_random = bool(effect & set(self.random_facets))
        if has_d and not has_random:
            return "universe"
        if has_d:
            return "relative"
        return "absolute" if has_random else "excluded"

    # ------------------------------------------------------------------ weights
    def weights(self, n: Mapping[str, np.ndarray | Sequence[float] | float]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Weights of each effect's variance in the universe score, relative and
        absolute error variances, for one or many designs.

        Parameters
        ----------
        n : mapping of str to float or 1-d array
            ``n'`` of every facet outside the differentiation set (levels within each
            parent for a nested facet); arrays give one design per entry (same length).

        Returns
        -------
        (universe, relative, absolute) : three arrays of shape (n_effects, n_designs)
        """
        facets = [f for f in self.facets if f not in self.differentiation]
        missing = [f for f in facets if f not in n]
        if missing:
            raise InvalidOptionError(f"give n' for every facet; missing: {', '.join(missing)}")
        cols = {f: np.atleast_1d(np.asarray(n[f], dtype=float)) for f in facets}
        m = max(c.size for c in cols.values())
        for f, c in cols.items():
            if c.size not in (1, m):
                raise InvalidOptionError("the facet sizes of a set of designs must have one length")
            if not np.all(np.isfinite(c)) or np.any(c <= 0):
                raise InvalidOptionError(f"n' of facet {f!r} must be positive, got {c.tolist()}")
        ones = np.ones(m)
        k = len(self.effects)
        uni, rel, ab = np.zeros((k, m)), np.zeros((k, m)), np.zeros((k, m))
        for j, e in enumerate(self.effects):
            role = self.role(e)
            if role == "excluded":
                continue
            div = ones.copy()
            for f in e - self.differentiation:
                div = div * cols[f]
            if role == "universe":
                uni[j] = 1.0 / div
            elif role == "relative":
                rel[j] = ab[j] = 1.0 / div
            else:
                ab[j] = 1.0 / div
        return uni, rel, ab


def coefficients(variances: np.ndarray, design: GDesign,
                 n: Mapping[str, np.ndarray | Sequence[float] | float]
                 ) -> dict[str, np.ndarray]:
    """G coefficients and error variances for designs ``n`` from variance components.

    Parameters
    ----------
    variances : array (..., n_effects)
        One variance per effect of ``design`` (in :attr:`GDesign.effects` order); leading
        dimensions are draws. Negative values count as 0.
    design : GDesign
        The facets the variances belong to.
    n : mapping
        ``n'`` per facet (see :meth:`GDesign.weights`).

    Returns
    -------
    dict of str to array (..., n_designs)
        :data:`QUANTITIES`: ``erho2`` (E rho^2), ``phi``, ``universe_var`` (tau),
        ``relative_var`` (var delta), ``absolute_var`` (var Delta), ``se_score``
        (sqrt var Delta), ``se_relative`` (sqrt var delta), ``se_diff`` (sqrt 2 var delta).

    Examples
    --------
    Brennan (2001) Synthetic Data No. 3 (p x I x O with 4 items and 2 occasions; he
    reports E rho^2 = .64 and Phi = .55):

    >>> d = GDesign("p", ("i", "o"))
    >>> v = np.array([.5528, .4417, .0074, .5750, .1009, .1565, .9352])
    >>> out = coefficients(v, d, {"i": 4, "o": 2})
    >>> round(float(out["erho2"][0]), 2), round(float(out["phi"][0]), 2)
    (0.64, 0.55)

    References
    ----------
    Brennan (2001), sections 4.1-4.4. doi:10.1007/978-1-4757-3456-0
    """
    v = np.clip(np.asarray(variances, dtype=float), 0.0, None)
    if v.shape[-1] != len(design.effects):
        raise InvalidOptionError(f"expected {len(design.effects)} variances (one per effect), "
                                 f"got {v.shape[-1]}")
    uni, rel, ab = design.weights(n)
    tau, d_rel, d_abs = v @ uni, v @ rel, v @ ab
    with np.errstate(divide="ignore", invalid="ignore"):
        erho2 = np.where(tau + d_rel > 0, tau / (tau + d_rel), np.nan)
        phi = np.where(tau + d_abs > 0, tau / (tau + d_abs), np.nan)
    return {"erho2": erho2, "phi": phi, "universe_var": tau, "relative_var": d_rel,
            "absolute_var": d_abs, "se_score": np.sqrt(d_abs), "se_relative": np.sqrt(d_rel),
            "se_diff": np.sqrt(2.0 * d_rel)}
