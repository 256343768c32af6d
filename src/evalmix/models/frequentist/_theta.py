"""lme4's ``theta``: the covariance parameters of the random effects, and ``Z Lambda``.

lme4 writes ``b = Lambda(theta) u`` with ``u ~ N(0, I)``: an independent term has one
``theta`` (its SD, relative to the residual SD for a linear model); a correlated term
``(1 + x | g)`` with ``r`` columns has the ``r (r + 1) / 2`` entries of the lower
Cholesky factor ``L`` of its ``r x r`` covariance, column by column (lme4's order;
diagonal entries bounded at 0, the others free).

In a crossed design each row has one level of each factor, so ``Z Lambda`` is again a
crossed design: row ``i``'s entry in column ``b`` of factor ``g``'s level is
``sum_a z_ia L_ab`` (``z_ia`` the row's covariate of term ``a``). :class:`ThetaMap` gives
these transformed covariates (:meth:`ThetaMap.covariates`), so the sparse machinery of
:mod:`evalmix.models.frequentist._pls` factors ``Lambda'Z'WZ Lambda + I`` with unit scaling, and the
gradient in ``theta`` from per-row, per-term quantities ``Q_ib`` (``dD/dL_ab =
sum_i z_ia Q_ib``, :meth:`ThetaMap.gradient`).

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1), section 2.2 (relative
covariance factor). doi:10.18637/jss.v067.i01
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalmix.errors import EvalmixError
from evalmix.models.spec._spec_types import RandomTerm

__all__ = ["ThetaMap"]


class ThetaMap:
    """The blocks of ``Lambda`` for a list of random terms.

    ``blocks`` lists, for each block, the indices of its terms (one for an independent
    term; the terms of one factor marked ``correlated`` form one block, in order).
    ``entries`` lists ``(block, a, b)`` for every theta (``L[a, b]`` of that block,
    column-major lower triangle).
    """

    def __init__(self, terms: Sequence[RandomTerm]):
        self.terms = list(terms)
        blocks: list[list[int]] = []
        seen: dict[str, int] = {}
        for j, t in enumerate(terms):
            if getattr(t, "correlated", False):
                if t.factor in seen:
                    blocks[seen[t.factor]].append(j)
                    continue
                seen[t.factor] = len(blocks)
            blocks.append([j])
        self.blocks = blocks
        self.entries: list[tuple[int, int, int]] = []
        for k, b in enumerate(blocks):
            r = len(b)
            for col in range(r):
                for row in range(col, r):
                    self.entries.append((k, row, col))
        self.n_theta = len(self.entries)
        self.diagonal = all(len(b) == 1 for b in blocks)
        self.is_diag_entry = np.array([a == b for _, a, b in self.entries])

    @property
    def bounds(self) -> list[tuple[float | None, float | None]]:
        """lme4's bounds: 0 below on diagonal entries, none on the others."""
        return [(0.0, None) if d else (None, None) for d in self.is_diag_entry]

    def start(self, value: float = 1.0) -> np.ndarray:
        """lme4's start: ``value`` on the diagonal, 0 off it."""
        return np.where(self.is_diag_entry, value, 0.0)

    def factors(self, theta: np.ndarray) -> list[np.ndarray]:
        """The lower-triangular ``L`` of every block."""
        out = [np.zeros((len(b), len(b))) for b in self.blocks]
        for (k, a, b), v in zip(self.entries, theta, strict=True):
            out[k][a, b] = v
        return out

    def from_factors(self, factors: Sequence[np.ndarray]) -> np.ndarray:
        return np.array([factors[k][a, b] for k, a, b in self.entries])

    def covariates(self, theta: np.ndarray) -> list[np.ndarray]:
        """Row covariates of ``Z Lambda``, one array per term (natural order)."""
        out: list[np.ndarray] = [np.empty(0)] * len(self.terms)
        for L, b in zip(self.factors(theta), self.blocks, strict=True):
            for col, j in enumerate(b):
                x = np.zeros(self.terms[j].x.shape[0])
                for row in range(col, len(b)):
                    if L[row, col] != 0.0:
                        x = x + L[row, col] * self.terms[b[row]].x
                out[j] = x
        return out

    def gradient(self, q: Sequence[np.ndarray]) -> np.ndarray:
        """``dD/dtheta`` from per-row ``Q_ib`` (one array per term): ``dD/dL_ab =
        sum_i z_ia Q_ib`` with ``z_ia`` the raw covariate of the block's term ``a``."""
        g = np.empty(self.n_theta)
        for e, (k, a, b) in enumerate(self.entries):
            blk = self.blocks[k]
            g[e] = float(self.terms[blk[a]].x @ q[blk[b]])
        return g

    def covariances(self, theta: np.ndarray) -> list[np.ndarray]:
        """``L L'`` of every block."""
        return [L @ L.T for L in self.factors(theta)]

    def sds(self, theta: np.ndarray) -> np.ndarray:
        """The SD of every term (natural order)."""
        sd = np.empty(len(self.terms))
        for C, b in zip(self.covariances(theta), self.blocks, strict=True):
            sd[b] = np.sqrt(np.clip(np.diag(C), 0.0, None))
        return sd

    def correlations(self, theta: np.ndarray) -> list[tuple[int, int, float]]:
        """``(term i, term j, correlation)`` within every correlated block (NaN when an
        SD is 0)."""
        out = []
        for C, b in zip(self.covariances(theta), self.blocks, strict=True):
            s = np.sqrt(np.clip(np.diag(C), 0.0, None))
            for i in range(len(b)):
                for j in range(i + 1, len(b)):
                    rho = C[i, j] / (s[i] * s[j]) if s[i] > 0 and s[j] > 0 else np.nan
                    out.append((b[i], b[j], float(rho)))
        return out

    def lambda_blocks(self, theta: np.ndarray, re_u: np.ndarray, sizes: Sequence[int]
                      ) -> np.ndarray:
        """``b = Lambda u`` for spherical effects ``u`` (terms concatenated, natural
        order, each term's levels in order; the terms of a block share their levels)."""
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        out = np.empty_like(re_u)
        for L, b in zip(self.factors(theta), self.blocks, strict=True):
            U = np.stack([re_u[off[j]:off[j + 1]] for j in b])      # r x G
            B = L @ U
            for row, j in enumerate(b):
                out[off[j]:off[j + 1]] = B[row]
        return out

    def check_levels(self) -> None:
        """The terms of a correlated block share one factor's codes."""
        for b in self.blocks:
            first = self.terms[b[0]]
            for j in b[1:]:
                if not np.array_equal(self.terms[j].codes, first.codes):
                    raise EvalmixError(f"correlated terms {first.name} and "
                                       f"{self.terms[j].name} do not share their levels")
