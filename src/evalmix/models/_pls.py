"""Sparse penalised least squares for crossed random-effects designs (lme4's algebra).

lme4 writes ``b = Lambda(theta) u`` and factors ``A = Lambda Z'WZ Lambda + I`` by a sparse
Cholesky (CHOLMOD) with a fill-reducing ordering (Bates et al. 2015, section 3). Here the
factor is built for *crossed* designs, where every row has exactly one level of each
random term: each term's own block of ``Z'WZ`` is then **diagonal**. Ordering the
largest term first and eliminating its diagonal block leaves the Schur complement
``S = C - B' D^-1 B`` of the size of the other terms (e.g. 5 judges instead of 1,000,000
items); ``S`` is factored densely (LAPACK) when it has at most :data:`DENSE_MAX` rows,
else by SuperLU with a minimum-degree ordering. No dense ``N x N``, ``N x q`` or
``q x q`` matrix is formed.

:class:`CrossedDesign` holds ``Z`` (scipy.sparse) and the sparsity pattern of the blocks
``B`` (largest term x others) and ``C`` (others x others); :meth:`CrossedDesign.blocks`
refills their values for new weights in O(rows). :class:`BlockFactor` is the factor of
``A`` and gives solves, ``log|A|``, ``diag(A^-1)`` and the row leverages
``h_i = z_i' Lambda A^-1 Lambda z_i`` that the Laplace gradient needs.

Why not CHOLMOD: scikit-sparse has no wheels on PyPI and needs SuiteSparse built from
source or from the system; the block elimination above is what CHOLMOD's ordering does
for these designs, at no new dependency.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.linalg import cho_solve, cholesky
from scipy.sparse.linalg import splu

from evalmix.models._deadline import check_deadline
from evalmix.models.spec import RandomTerm

__all__ = ["DENSE_MAX", "BlockFactor", "CrossedDesign"]

#: The Schur complement of the other terms is factored densely up to this many rows.
DENSE_MAX = 3000
#: Columns per chunk when a dense block of S^-1 applied to many vectors is needed.
_CHUNK_ENTRIES = 4_000_000


def _pattern(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys (sorted) and the index of every key into them."""
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, inv.ravel().astype(np.int64)


class CrossedDesign:
    """``Z`` of a crossed design and the sparsity pattern of ``Z'WZ`` (largest term first).

    Columns are kept in two orders: *natural* (terms in the order given, levels within)
    and *internal* (the largest term first); ``perm`` maps internal positions to natural
    ones (``natural[perm] == internal``). :meth:`factor` checks ``deadline``
    (:mod:`evalmix.models._deadline`): every fit evaluation factors once.
    """

    def __init__(self, terms: Sequence[RandomTerm], n: int, *,
                 deadline: float | None = None):
        self.n = n
        self.deadline = deadline
        sizes = np.array([t.n_levels for t in terms])
        self.k = len(terms)
        self.comp = np.repeat(np.arange(self.k), sizes)  # natural order
        self.q = int(sizes.sum())
        self.big = big = int(np.argmax(sizes))
        order = [big] + [j for j in range(self.k) if j != big]
        nat_off = np.concatenate([[0], np.cumsum(sizes)])
        self.perm = np.concatenate([np.arange(nat_off[j], nat_off[j + 1]) for j in order])
        self.comp_int = self.comp[self.perm]
        self.q1 = int(sizes[big])
        self.q2 = self.q - self.q1
        tb = terms[big]
        self.a = np.asarray(tb.codes, dtype=np.int64)  # big level of every row
        self.xa = np.asarray(tb.x, dtype=float)
        rest = [terms[j] for j in order[1:]]
        self.rest_terms = order[1:]
        off = np.concatenate([[0], np.cumsum([t.n_levels for t in rest])]).astype(np.int64)
        # column (in the q2 block) and covariate of every row for every other term
        self.c = [off[r] + np.asarray(t.codes, dtype=np.int64) for r, t in enumerate(rest)]
        self.xc = [np.asarray(t.x, dtype=float) for t in rest]
        m = len(rest)
        q2 = max(self.q2, 1)
        self.c_pairs: list[tuple[int, int]] = []
        # B pattern: (big level, other column) pairs that occur in some row
        if m:
            keys = np.concatenate([self.a * q2 + c for c in self.c])
            ub, self.b_inv = _pattern(keys)
            self.b_rows, self.b_cols = ub // q2, ub % q2
            self.b_x = np.concatenate([self.xa * x for x in self.xc])
            # C pattern: pairs (c_r, c_s), r <= s, of other columns that share a row
            ck, cx = [], []
            for r in range(m):
                for s in range(r, m):
                    lo = np.minimum(self.c[r], self.c[s])
                    hi = np.maximum(self.c[r], self.c[s])
                    ck.append(lo * q2 + hi)
                    cx.append(self.xc[r] * self.xc[s])
            uc, self.c_inv = _pattern(np.concatenate(ck))
            self.c_rows, self.c_cols = uc // q2, uc % q2
            self.c_x = np.concatenate(cx)
            self.c_pairs = [(r, s) for r in range(m) for s in range(r, m)]
        self.m = m
        self._codes = [(np.asarray(t.codes, dtype=np.int64), t.n_levels) for t in terms]
        self._set_z([np.asarray(t.x, dtype=float) for t in terms])

    def _set_z(self, xs: Sequence[np.ndarray]) -> None:
        """``Z`` (and ``Z'``) with row covariates ``xs``: one entry per row and term, on
        a pattern built once (new covariates only refill the values)."""
        n, k = self.n, len(self._codes)
        data = np.column_stack(xs).ravel() if k else np.zeros(0)
        if getattr(self, "_zt_perm", None) is None:
            off = np.concatenate([[0], np.cumsum([g for _, g in self._codes])])
            cols = np.column_stack([o + c for o, (c, _) in zip(off, self._codes, strict=False)]).ravel()
            ptr = np.arange(0, n * k + 1, k)
            self.Z = sparse.csr_array((np.arange(1.0, n * k + 1), cols, ptr),
                                      shape=(n, int(off[-1])))
            self.Zt = self.Z.T.tocsr()
            self._zt_perm = self.Zt.data.astype(np.int64) - 1
        self.Z.data = data
        self.Zt.data = data[self._zt_perm]

    def set_covariates(self, xs: Sequence[np.ndarray]) -> None:
        """Replace every term's row covariate (natural order), keeping the sparsity
        patterns: ``Z Lambda`` of a model with correlated terms
        (:mod:`evalmix.models._theta`), factored with unit scaling."""
        xs = [np.asarray(x, dtype=float) for x in xs]
        self.xa = xs[self.big]
        self.xc = [xs[j] for j in self.rest_terms]
        if self.m:
            self.b_x = np.concatenate([self.xa * x for x in self.xc])
            self.c_x = np.concatenate([self.xc[r] * self.xc[s] for r, s in self.c_pairs])
        self._set_z(xs)

    # ------------------------------------------------------------ products with Z
    def zt(self, v: np.ndarray) -> np.ndarray:
        """``Z' v`` in the natural column order (``v`` of length n or (n, p))."""
        return np.asarray(self.Zt @ v)

    def zu(self, u: np.ndarray) -> np.ndarray:
        """``Z u`` for ``u`` in the natural column order."""
        return np.asarray(self.Z @ u)

    # ------------------------------------------------------------ blocks of Z'WZ
    def blocks(self, w: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unscaled blocks of ``Z'WZ`` in the internal order: the diagonal ``d`` of the
        largest term's block and the values of ``B`` (q1 x q2) and of the upper triangle
        of ``C`` (q2 x q2) on their fixed sparsity patterns; ``w`` defaults to ones."""
        w = np.ones(self.n) if w is None else w
        d = np.bincount(self.a, weights=w * self.xa**2, minlength=self.q1)
        if not self.m:
            return d, np.zeros(0), np.zeros(0)
        wt = np.tile(w, self.m)
        bv = np.bincount(self.b_inv, weights=wt * self.b_x, minlength=self.b_rows.size)
        wc = np.tile(w, len(self.c_pairs))
        cv = np.bincount(self.c_inv, weights=wc * self.c_x, minlength=self.c_rows.size)
        return d, bv, cv

    def _csr(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_rows: int,
             n_cols: int) -> sparse.csr_array:
        """CSR array from row-major sorted unique (rows, cols), without a conversion."""
        indptr = np.searchsorted(rows, np.arange(n_rows + 1))
        return sparse.csr_array((vals, cols, indptr), shape=(n_rows, n_cols))

    def factor(self, lam: np.ndarray, w: np.ndarray | None = None,
               blocks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
               ) -> BlockFactor:
        """Factor of ``A = Lambda Z'WZ Lambda + I`` for relative SDs ``lam`` (natural
        order, one per column); ``blocks`` reuses precomputed unscaled blocks."""
        check_deadline(self.deadline)
        d0, bv, cv = self.blocks(w) if blocks is None else blocks
        li = lam[self.perm]
        l1, l2 = li[:self.q1], li[self.q1:]
        d = l1**2 * d0 + 1.0
        if not self.q2:
            return BlockFactor(d, None, None, self)
        B = self._csr(self.b_rows, self.b_cols, bv * l1[self.b_rows] * l2[self.b_cols],
                      self.q1, self.q2)
        U = self._csr(self.c_rows, self.c_cols, cv * l2[self.c_rows] * l2[self.c_cols],
                      self.q2, self.q2)
        return BlockFactor(d, B, U, self)


class BlockFactor:
    """Factor of ``A = [[diag(d), B], [B', C]]`` (internal order) by eliminating the
    diagonal block: ``S = C - B' D^-1 B`` is factored densely or by SuperLU."""

    def __init__(self, d: np.ndarray, B: sparse.csr_array | None,
                 U: sparse.csr_array | None, design: CrossedDesign):
        """``U`` is the upper triangle (diagonal included) of ``C - I``."""
        self.d, self.B, self.design = d, B, design
        self.q1, self.q2 = d.size, design.q2
        logdet = float(np.log(d).sum())
        self._L: np.ndarray | None = None
        self._lu = None
        self._sinv: np.ndarray | None = None
        if self.q2:
            assert B is not None and U is not None
            self.DB = sparse.csr_array((B.data / d[design.b_rows], B.indices, B.indptr),
                                       shape=B.shape)
            if self.q2 <= DENSE_MAX:
                S = U.toarray()
                S = S + S.T
                S[np.diag_indices_from(S)] = S.diagonal() / 2 + 1.0
                if B.nnz < self.q1 * self.q2 / 4:  # few other levels per big level
                    S -= (B.T @ self.DB).toarray()
                else:
                    S -= self._btdb_dense()
                self._L = cholesky(S, lower=True, overwrite_a=True, check_finite=False)
                logdet += 2 * float(np.log(np.diag(self._L)).sum())
            else:
                S = sparse.csc_array(U + U.T - sparse.diags_array(U.diagonal())
                                     + sparse.eye_array(self.q2) - B.T @ self.DB)
                self._lu = splu(S, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                options={"SymmetricMode": True})
                logdet += float(np.log(np.abs(self._lu.U.diagonal())).sum())
        self.logdet = logdet

    def _btdb_dense(self) -> np.ndarray:
        """``B' D^-1 B`` as a dense q2 x q2 array: dense products over chunks of big
        levels (B is usually nearly dense in the other terms; a sparse product of the
        same matrices was 15x slower)."""
        assert self.B is not None
        out = np.zeros((self.q2, self.q2))
        step = max(1, _CHUNK_ENTRIES // self.q2)
        for a0 in range(0, self.q1, step):
            a1 = min(self.q1, a0 + step)
            Bc = self.B[a0:a1].toarray()
            out += Bc.T @ (Bc / self.d[a0:a1, None])
        return out

    # ------------------------------------------------------------ solves
    def s_solve(self, R: np.ndarray) -> np.ndarray:
        """``S^-1 R`` for the Schur complement of the other terms."""
        if self._L is not None:
            return cho_solve((self._L, True), R, check_finite=False)
        assert self._lu is not None
        return self._lu.solve(np.asarray(R, dtype=float))

    def solve_internal(self, R: np.ndarray) -> np.ndarray:
        """``A^-1 R`` with ``R`` (q,) or (q, m) in the internal order."""
        dinv = (1.0 / self.d).reshape(-1, *([1] * (R.ndim - 1)))
        R1, R2 = R[:self.q1], R[self.q1:]
        if not self.q2:
            return dinv * R1
        Y2 = self.s_solve(R2 - self.DB.T @ R1)
        Y1 = dinv * R1 - self.DB @ Y2
        return np.concatenate([Y1, Y2])

    def solve(self, R: np.ndarray) -> np.ndarray:
        """``A^-1 R`` with ``R`` in the natural order."""
        perm = self.design.perm
        Y = self.solve_internal(R[perm])
        out = np.empty_like(Y)
        out[perm] = Y
        return out

    # ------------------------------------------------------------ selected inverse
    def _chunks(self):
        """Big levels in chunks, with ``P = S^-1 (D^-1 B)'`` for each chunk (q2 x chunk)."""
        step = max(1, _CHUNK_ENTRIES // max(self.q2, 1))
        for a0 in range(0, self.q1, step):
            a1 = min(self.q1, a0 + step)
            DBc = self.DB[a0:a1]
            yield a0, a1, DBc, self.s_solve(DBc.T.toarray())

    def _sinv_entries(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Entries ``(S^-1)[rows, cols]``."""
        if self._L is not None:
            if self._sinv is None:
                self._sinv = cho_solve((self._L, True), np.eye(self.q2))
            return self._sinv[rows, cols]
        out = np.empty(rows.size)
        step = max(1, _CHUNK_ENTRIES // self.q2)
        for c0 in range(0, self.q2, step):
            c1 = min(self.q2, c0 + step)
            sel = (cols >= c0) & (cols < c1)
            if sel.any():
                E = np.zeros((self.q2, c1 - c0))
                E[np.arange(c0, c1), np.arange(c1 - c0)] = 1.0
                block = self.s_solve(E)
                out[sel] = block[rows[sel], cols[sel] - c0]
        return out

    def inverse_pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``diag(A^-1)`` (natural order) and, for the leverages, ``D^-1 B S^-1 B' D^-1``'s
        diagonal per big level, ``(S^-1 B' D^-1)`` at B's pattern and ``S^-1`` at C's."""
        des = self.design
        alpha = np.zeros(self.q1)  # (D^-1 B S^-1 B' D^-1)_aa
        p_at_b = np.zeros(des.b_rows.size) if des.m else np.zeros(0)
        if self.q2:
            starts = np.searchsorted(des.b_rows, np.arange(self.q1 + 1))
            for a0, a1, DBc, P in self._chunks():
                alpha[a0:a1] = np.asarray((DBc.T.toarray() * P).sum(axis=0)).ravel()
                s0, s1 = starts[a0], starts[a1]
                p_at_b[s0:s1] = P[des.b_cols[s0:s1], des.b_rows[s0:s1] - a0]
            s_at_c = self._sinv_entries(des.c_rows, des.c_cols)
            diag_s = self._sinv_entries(np.arange(self.q2), np.arange(self.q2))
        else:
            s_at_c, diag_s = np.zeros(0), np.zeros(0)
        diag_int = np.concatenate([1.0 / self.d + alpha, diag_s])
        diag = np.empty(self.d.size + self.q2)
        diag[des.perm] = diag_int
        return diag, alpha, p_at_b, s_at_c

    def leverages(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``h_i = z_i' Lambda A^-1 Lambda z_i`` for every row, and ``diag(A^-1)``.

        With ``t_i = zeta_i - (v_i / d_a) B_a'`` (``v_i`` the row's scaled entry in the big
        term, ``zeta_i`` in the others), ``h_i = v_i^2 / d_a + t_i' S^-1 t_i``.
        """
        des = self.design
        diag, alpha, p_at_b, s_at_c = self.inverse_pieces()
        li = lam[des.perm]
        va = li[des.a] * des.xa
        da = self.d[des.a]
        h = va**2 / da + va**2 * alpha[des.a]
        n = des.n
        for r in range(des.m):
            zr = li[self.q1 + des.c[r]] * des.xc[r]
            # cross term -2 (v/d_a) zeta' S^-1 B_a' = -2 v zeta' (S^-1 B' D^-1)[:, a]
            h -= 2 * va * zr * p_at_b[des.b_inv[r * n:(r + 1) * n]]
        for j, (r, s) in enumerate(des.c_pairs):
            zr = li[self.q1 + des.c[r]] * des.xc[r]
            zs = li[self.q1 + des.c[s]] * des.xc[s]
            h += (1 if r == s else 2) * zr * zs * s_at_c[des.c_inv[j * n:(j + 1) * n]]
        return h, diag

    def row_solves(self) -> list[np.ndarray]:
        """``m_it = (A^-1 z_i)`` at row ``i``'s column of term ``t``, one array per term
        (natural order), for unit scaling (``Lambda = I``; the design's covariates are
        ``Z Lambda``): ``h_i = sum_t z_it m_it`` are the leverages, and
        ``sum_i w_i z'_ia m_ib`` the derivative of ``log|A|`` through ``Lambda``."""
        des = self.design
        n = des.n
        diag, alpha, p_at_b, s_at_c = self.inverse_pieces()
        va = des.xa
        m_big = (1.0 / self.d[des.a] + alpha[des.a]) * va
        m_rest = [np.zeros(n) for _ in range(des.m)]
        p_rows = [p_at_b[des.b_inv[r * n:(r + 1) * n]] for r in range(des.m)]
        for r in range(des.m):
            m_big = m_big - p_rows[r] * des.xc[r]
            m_rest[r] -= p_rows[r] * va
        for j, (r, s) in enumerate(des.c_pairs):
            sv = s_at_c[des.c_inv[j * n:(j + 1) * n]]
            m_rest[r] += sv * des.xc[s]
            if r != s:
                m_rest[s] += sv * des.xc[r]
        out: list[np.ndarray] = [np.empty(0)] * (des.m + 1)
        out[des.big] = m_big
        for r, j in enumerate(des.rest_terms):
            out[j] = m_rest[r]
        return out

    def submatrix_inverse(self, idx: np.ndarray) -> np.ndarray:
        """``(A^-1)[idx, idx]`` for a few natural-order columns ``idx``."""
        E = np.zeros((self.d.size + self.q2, idx.size))
        E[idx, np.arange(idx.size)] = 1.0
        return self.solve(E)[idx]
