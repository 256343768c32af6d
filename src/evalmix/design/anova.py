"""Variance components of a balanced design by ANOVA (expected mean squares).

On a balanced design (one score in every cell of the factors, every nested facet with
the same number of levels within each parent) the mean squares of the effects are
independent, and their expectations are linear in the variance components (Brennan
2001, section 3.1; Cornfield & Tukey 1956): for a random model,

``E MS(b) = sum_{a containing b} pi(a-bar) var(a)``,

``pi(a-bar)`` the product of the numbers of levels of the factors *not* in ``a``.
Solving that triangular system gives the ANOVA (method-of-moments) estimates, unbiased
and possibly negative. The sums of squares come from the ``T`` terms of the cell means
(Brennan's notation): ``T(a) = pi(a-bar) sum_cells mean_a^2`` and ``SS(a) = sum_b
(-1)^(|a| - |b|) T(b)`` over the ``b`` between the nesting indices of ``a`` and ``a``.

Under normal random effects ``MS(b) ~ E MS(b) chi^2_df / df`` independently, so the
parametric bootstrap of the components needs no simulated data: draw the mean squares
and solve (:meth:`AnovaComponents.draws`).

References
----------
Brennan, R. L. (2001). Generalizability Theory. Springer, sections 3.1-3.4 and 6.1.
doi:10.1007/978-1-4757-3456-0
Cornfield, J. & Tukey, J. W. (1956). Average values of mean squares in factorials.
Annals of Mathematical Statistics 27, 907-949. doi:10.1214/aoms/1177728067
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import pandas as pd

from evalmix.data.table import dense_codes, intersect_codes
from evalmix.design.gtheory import GDesign
from evalmix.errors import EvalmixError

__all__ = ["AnovaComponents", "balanced_anova", "is_balanced", "level_positions"]


def level_positions(codes: Mapping[str, np.ndarray], design: GDesign
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each row's position along every factor and each factor's levels per parent.

    A crossed factor's position is its level code; a nested factor's is the rank of its
    level among the levels found within the row's parent cell (so runs labelled 1, 2, 3
    within every judge, or labelled uniquely, both give 0, 1, 2).

    Returns
    -------
    positions : dict of str to int array (n,)
    counts : dict of str to int array
        Levels of the factor within each parent cell (one entry for a crossed factor).
    """
    pos: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    for f in design.factors:
        own = dense_codes(np.asarray(codes[f]))
        parents = sorted(design.ancestors(f), key=design.factors.index)
        if not parents:
            pos[f] = own
            counts[f] = np.array([int(own.max()) + 1])
            continue
        cell = intersect_codes(*(dense_codes(np.asarray(codes[p])) for p in parents))
        joint = intersect_codes(cell, own)   # sorted by parent cell first
        first = np.full(int(cell.max()) + 1, np.iinfo(np.int64).max)
        np.minimum.at(first, cell, joint)
        pos[f] = joint - first[cell]
        top = np.zeros(first.size, dtype=np.int64)
        np.maximum.at(top, cell, pos[f])
        counts[f] = top + 1
    return pos, counts


@dataclass(frozen=True, eq=False)
class AnovaComponents:
    """The ANOVA table of a balanced design and its variance-component estimates.

    Attributes
    ----------
    design : GDesign
    n : Mapping of str to int
        Levels of every factor (within each parent for a nested factor).
    t_values, ss, df, ms : ndarray (n_effects,)
        Brennan's ``T`` terms, sums of squares, degrees of freedom and mean squares, in
        :attr:`GDesign.effects` order.
    ems : ndarray (n_effects, n_effects)
        ``E MS = ems @ variances``.
    variances : ndarray (n_effects,)
        The ANOVA estimates (unbiased; may be negative).
    grand_mean : float
    """

    design: GDesign
    n: Mapping[str, int]
    t_values: np.ndarray
    ss: np.ndarray
    df: np.ndarray
    ms: np.ndarray
    ems: np.ndarray
    variances: np.ndarray
    grand_mean: float

    def draws(self, reps: int, rng: np.random.Generator) -> np.ndarray:
        """Parametric bootstrap of the components, shape (reps, n_effects).

        Mean squares are drawn as ``E MS chi^2_df / df`` with ``E MS`` from the
        estimates (negative ones at 0) and solved for the components, which is exactly
        what refitting simulated normal data of this design would give.
        """
        ems_hat = self.ems @ np.clip(self.variances, 0.0, None)
        chi = rng.chisquare(self.df, size=(reps, self.df.size)) / self.df
        return np.linalg.solve(self.ems, (chi * ems_hat).T).T

    def table(self) -> pd.DataFrame:
        """``effect, df, t, ss, ms, variance`` (Brennan's Table 3.x layout)."""
        return pd.DataFrame({
            "effect": [self.design.label(e) for e in self.design.effects],
            "df": self.df.astype(int), "t": self.t_values, "ss": self.ss, "ms": self.ms,
            "variance": self.variances})


def _layout(codes: Mapping[str, np.ndarray], design: GDesign
            ) -> tuple[dict[str, int], np.ndarray]:
    """Levels per factor and each row's cell of a balanced design; EvalmixError if the
    design is not balanced."""
    pos, counts = level_positions(codes, design)
    n: dict[str, int] = {}
    for f in design.factors:
        c = counts[f]
        if np.any(c != c[0]):
            raise EvalmixError(f"not balanced: {f!r} has {int(c.min())} to {int(c.max())} "
                               "levels within its parents; use REML")
        n[f] = int(c[0])
    shape = tuple(n[f] for f in design.factors)
    cells = int(np.prod(shape))
    flat = np.ravel_multi_index(tuple(pos[f] for f in design.factors), shape)
    if flat.size != cells or np.bincount(flat, minlength=cells).max() != 1:
        raise EvalmixError(f"not balanced: {flat.size} scores for {cells} cells of the "
                           "design (ANOVA needs one score per cell; use REML)")
    return n, flat


def is_balanced(codes: Mapping[str, np.ndarray], design: GDesign) -> bool:
    """One score in every cell of ``design``, as many nested levels in every parent.

    Examples
    --------
    >>> d = GDesign("p", ("i",))
    >>> is_balanced({"p": [0, 0, 1, 1], "i": [0, 1, 0, 1]}, d)
    True
    >>> is_balanced({"p": [0, 0, 1], "i": [0, 1, 0]}, d)
    False
    """
    try:
        _layout(codes, design)
    except EvalmixError:
        return False
    return True


def balanced_anova(y: np.ndarray, codes: Mapping[str, np.ndarray], design: GDesign
                   ) -> AnovaComponents:
    """Variance components of a balanced design from its expected mean squares.

    Parameters
    ----------
    y : array (n,)
        One score per cell of the design (every combination of the crossed factors
        and of each nested factor's levels within its parents, exactly once).
    codes : mapping of str to array (n,)
        The level of every factor of ``design`` on every row (any labels).
    design : GDesign
        The crossed and nested facets (see :class:`~evalmix.design.gtheory.GDesign`).

    Returns
    -------
    AnovaComponents

    Raises
    ------
    EvalmixError
        If the design is not balanced (use REML then), or a factor has one level.

    Examples
    --------
    A p x i design, 3 persons x 2 items:

    >>> y = np.array([1.0, 3.0, 2.0, 5.0, 4.0, 6.0])
    >>> fit = balanced_anova(y, {"p": [0, 0, 1, 1, 2, 2], "i": [0, 1] * 3},
    ...                      GDesign("p", ("i",)))
    >>> fit.table()[["effect", "df", "ms"]].round(3).values.tolist()
    [['p', 2, 4.5], ['i', 1, 8.167], ['p x i', 2, 0.167]]

    References
    ----------
    Brennan (2001), section 3.1. doi:10.1007/978-1-4757-3456-0
    """
    y = np.asarray(y, dtype=float)
    n, flat = _layout(codes, design)
    for f in design.factors:
        if n[f] < 2:
            where = " within each parent" if design.ancestors(f) else ""
            raise EvalmixError(f"factor {f!r} has one level{where}: its variance cannot be "
                               "estimated; drop it from the facets")
    shape = tuple(n[f] for f in design.factors)
    cells = int(np.prod(shape))
    if y.size != flat.size:
        raise EvalmixError(f"y has {y.size} values but the codes {flat.size}")
    cube = np.empty(cells)
    cube[flat] = y
    cube = cube.reshape(shape)
    effects = design.effects
    axis = {f: i for i, f in enumerate(design.factors)}

    def t_value(subset: frozenset[str]) -> float:
        other = tuple(axis[f] for f in design.factors if f not in subset)
        means = cube.mean(axis=other) if other else cube
        return float(cells / means.size * np.sum(means**2))

    t_cache: dict[frozenset[str], float] = {}
    k = len(effects)
    t_values, ss, df = np.empty(k), np.empty(k), np.empty(k)
    for j, e in enumerate(effects):
        nest = design.nesting_indices(e)
        primary = sorted(e - nest)
        total = 0.0
        for r in range(len(primary) + 1):
            for drop in itertools.combinations(primary, r):
                b = e - frozenset(drop)
                if b not in t_cache:
                    t_cache[b] = t_value(b)
                total += (-1) ** r * t_cache[b]
        t_values[j] = t_cache[e]
        ss[j] = total
        df[j] = np.prod([n[f] - 1 for f in primary]) * np.prod([n[f] for f in nest])
    ms = ss / df
    ems = np.zeros((k, k))
    for i, b in enumerate(effects):
        for j, a in enumerate(effects):
            if b <= a:
                ems[i, j] = np.prod([n[f] for f in design.factors if f not in a])
    variances = np.linalg.solve(ems, ms)
    return AnovaComponents(design=design, n=MappingProxyType(n), t_values=t_values, ss=ss,
                           df=df, ms=ms, ems=ems, variances=variances,
                           grand_mean=float(cube.mean()))
