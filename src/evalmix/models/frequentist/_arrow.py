"""The "arrow" Schur complement of a crossed design (:mod:`evalmix.models.frequentist._pls`).

When a term is nested in the largest one (WildBench's items beside item:model), the
Schur complement ``S = C + I - B' D^-1 B`` of the other terms has a diagonal block on that
term's columns (the *lead*): :class:`ArrowFactor` eliminates it and factors the small
dense remainder, and :class:`ArrowPlan` fills ``S`` on its fixed sparsity pattern from
the values of ``B`` and ``C`` by index maps built once per design (issue 28: the sparse
products and conversions it replaces cost 28 matrix constructions per REML evaluation).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.linalg import cho_solve, cholesky

__all__ = ["ArrowFactor", "ArrowPlan"]


class ArrowPlan:
    """Where every contribution to an "arrow" ``S = C + I - B' D^-1 B`` lands on its fixed
    sparsity pattern (``C``'s upper and lower triangle, the identity, every pair of
    entries in a row of ``B``), and where the pieces of :class:`ArrowFactor` (the lead's
    diagonal, ``E = S[lead, rest]``, ``S[rest, rest]``) and the entries of ``S^-1`` that
    :class:`~evalmix.models.frequentist._pls.BlockFactor` asks for sit on it. Built once per design: a factor then costs a
    bincount and a few gathers instead of some twenty sparse-matrix constructions."""

    def __init__(self, b_rows: np.ndarray, b_cols: np.ndarray, c_rows: np.ndarray,
                 c_cols: np.ndarray, n: int, lead: np.ndarray, rest: np.ndarray,
                 pairs: tuple[np.ndarray, np.ndarray]):
        """``B``'s pattern (``b_rows``, ``b_cols``), the upper triangle of ``C``'s
        (``c_rows``, ``c_cols``), ``S``'s size ``n``, the lead and rest columns and the
        pairs ``(e, f)`` of entries of ``B`` in the same row."""
        q2 = np.int64(n)
        e, f = pairs
        self.e, self.f, self.pair_row = e, f, b_rows[e]
        self.off = c_rows != c_cols
        ar = np.arange(n, dtype=np.int64)
        bc = b_cols.astype(np.int64)
        cr, cc = c_rows.astype(np.int64), c_cols.astype(np.int64)
        keys, src = np.unique(np.concatenate([
            cr * q2 + cc, cc[self.off] * q2 + cr[self.off], ar * q2 + ar,
            bc[e] * q2 + bc[f]]), return_inverse=True)
        self.src = src.ravel()
        self.nnz = keys.size
        self.rows, self.cols = keys // q2, keys % q2

        def pos(r: np.ndarray, c: np.ndarray) -> np.ndarray:
            k = r.astype(np.int64) * q2 + c
            i = np.searchsorted(keys, k)
            assert np.array_equal(keys[i], k)
            return i

        self.lead, self.rest = lead, rest
        lpos = np.full(n, -1)
        lpos[lead] = np.arange(lead.size)
        rpos = np.full(n, -1)
        rpos[rest] = np.arange(rest.size)
        self.lead_diag = pos(lead, lead)
        in_e = (lpos[self.rows] >= 0) & (rpos[self.cols] >= 0)
        self.e_pos = np.flatnonzero(in_e)
        self.e_rows, self.e_cols = lpos[self.rows[in_e]], rpos[self.cols[in_e]]
        self.e_indptr = np.searchsorted(self.e_rows, np.arange(lead.size + 1))
        in_t = (rpos[self.rows] >= 0) & (rpos[self.cols] >= 0)
        self.t_pos = np.flatnonzero(in_t)
        self.t_flat = rpos[self.rows[in_t]] * rest.size + rpos[self.cols[in_t]]
        # the entries of S^-1 that BlockFactor.inverse_pieces asks for
        self.at_pairs = pos(bc[f], bc[e])
        self.at_c = pos(cr, cc)
        self.at_diag = pos(ar, ar)

    def factor(self, d: np.ndarray, bv: np.ndarray, uv: np.ndarray) -> ArrowFactor:
        """The factor of ``S`` for the big block's diagonal ``d`` and the values of ``B``
        and of ``C``'s upper triangle (``C - I``)."""
        w = np.concatenate([uv, uv[self.off], np.ones(self.lead.size + self.rest.size),
                            -bv[self.e] * (bv[self.f] / d[self.pair_row])])
        sv = np.bincount(self.src, weights=w, minlength=self.nnz)
        dl = sv[self.lead_diag]
        ev = sv[self.e_pos]
        nl, nr = self.lead.size, self.rest.size
        E = sparse.csr_array((ev, self.e_cols, self.e_indptr), shape=(nl, nr))
        V = np.zeros((nl, nr))
        V[self.e_rows, self.e_cols] = ev * (1.0 / dl)[self.e_rows]
        T0 = np.zeros(nr * nr)
        T0[self.t_flat] = sv[self.t_pos]
        return ArrowFactor(dl, E, V, T0.reshape(nr, nr), self.lead, self.rest)


class ArrowFactor:
    """Factor of a symmetric ``S`` whose block on ``lead`` is diagonal (``d``): eliminate
    it, factor the dense Schur complement ``T = S_rr - E' D^-1 E`` of the ``rest`` (``E
    = S[lead, rest]`` sparse, ``V = D^-1 E`` dense: at most 4 million entries, ``S_rr``
    dense). Exact, like the Cholesky factor with that ordering."""

    def __init__(self, d: np.ndarray, E: sparse.csr_array, V: np.ndarray, S_rr: np.ndarray,
                 lead: np.ndarray, rest: np.ndarray):
        self.lead, self.rest = lead, rest
        self.d, self.V = d, V
        T = S_rr - np.asarray(E.T @ V)
        self.L = cholesky(T, lower=True, check_finite=False) if rest.size else T
        self.logdet = float(np.log(self.d).sum()) + 2 * float(np.log(np.diag(self.L)).sum())
        self._cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._g: np.ndarray | None = None
        self._cache_t = np.zeros((0, 0))  # W' (contiguous), set with the cache

    @classmethod
    def from_sparse(cls, S: sparse.csr_array, lead: np.ndarray, rest: np.ndarray
                    ) -> ArrowFactor:
        """The factor of a sparse ``S`` (when the design has no :class:`ArrowPlan`)."""
        d = S.diagonal()[lead]
        E = sparse.csr_array(S[lead][:, rest])
        V = E.multiply(1.0 / d[:, None]).toarray()
        return cls(d, E, V, S[rest][:, rest].toarray(), lead, rest)

    def solve(self, R: np.ndarray) -> np.ndarray:
        dinv = (1.0 / self.d).reshape(-1, *([1] * (R.ndim - 1)))
        R1, R2 = R[self.lead], R[self.rest]
        out = np.empty_like(R)
        Y2 = (cho_solve((self.L, True), R2 - self.V.T @ R1, check_finite=False)
              if self.rest.size else R2)
        out[self.rest] = Y2
        out[self.lead] = dinv * R1 - self.V @ Y2
        return out

    def _wt(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``W = [V; -I]`` by ``S``'s columns, ``T^-1`` and the lead position of every
        column (-1 on the rest), computed once."""
        if self._cache is None:
            n = self.lead.size + self.rest.size
            pos = np.full(n, -1)
            pos[self.lead] = np.arange(self.lead.size)
            Tinv = (cho_solve((self.L, True), np.eye(self.rest.size), check_finite=False)
                    if self.rest.size else np.zeros((0, 0)))
            W = np.zeros((n, self.rest.size))
            W[self.lead] = self.V
            W[self.rest] = -np.eye(self.rest.size)
            self._cache = (W, Tinv, pos)
            self._cache_t = np.ascontiguousarray(W.T)
        return self._cache

    def entries(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Entries ``(S^-1)[rows, cols]`` without forming ``S^-1``: ``W T^-1 W'`` with
        ``W = [V; -I]`` (``V = D^-1 E``), plus ``D^-1`` on the lead's diagonal."""
        W, Tinv, pos = self._wt()
        if Tinv.shape[0] <= 8:  # a few rest columns: column by column (1-D gathers)
            if self._g is None:
                self._g = np.ascontiguousarray((W @ Tinv).T)
            Wt = self._cache_t
            out = np.zeros(rows.size)
            for j in range(Tinv.shape[0]):
                out += self._g[j][rows] * Wt[j][cols]
        else:
            out = np.einsum("ij,ij->i", W[rows] @ Tinv, W[cols])
        same = (rows == cols) & (pos[rows] >= 0)
        out[same] += 1.0 / self.d[pos[rows[same]]]
        return out

    def inverse(self) -> np.ndarray:
        """``S^-1`` as a dense array (``S`` has at most :data:`~evalmix.models.frequentist._pls.DENSE_MAX` rows)."""
        n = self.lead.size + self.rest.size
        out = np.empty((n, n))
        Tinv = (cho_solve((self.L, True), np.eye(self.rest.size), check_finite=False)
                if self.rest.size else np.zeros((0, 0)))
        VT = self.V @ Tinv
        out[np.ix_(self.lead, self.lead)] = VT @ self.V.T
        out[self.lead, self.lead] += 1.0 / self.d
        out[np.ix_(self.lead, self.rest)] = -VT
        out[np.ix_(self.rest, self.lead)] = -VT.T
        out[np.ix_(self.rest, self.rest)] = Tinv
        return out
