"""One Fisher-scoring step of REML for many responses at once (the G study's bootstrap).

Split from :mod:`evalmix.models.frequentist._reml`: a MINQUE step forms ``Z'PZ`` densely and serves
the parametric bootstrap of :mod:`evalmix.compare.gstudy`, not the fit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from evalmix._blas import one_blas_thread
from evalmix.errors import EvalmixError
from evalmix.models.frequentist._pls import CrossedDesign
from evalmix.models.spec import RandomTerm

__all__ = ["SCORING_MAX_LEVELS", "reml_scoring_step"]


#: :func:`reml_scoring_step` forms ``Z'PZ`` densely (O(q^3) work): up to this many levels
#: in all (2,000: about 10 s on one core).
SCORING_MAX_LEVELS = 2000


def reml_scoring_step(Y: np.ndarray | Iterable[np.ndarray], X: np.ndarray,
                      terms: Sequence[RandomTerm], variances: np.ndarray, *,
                      step: Callable[[int], None] | None = None) -> np.ndarray:
    """One Fisher-scoring step of REML from ``variances``, for every column of ``Y``.

    ``s* = I(s)^-1 q(y)`` with ``q_k = y'P V_k P y / 2`` and the expected information
    ``I_kl = tr(P V_k P V_l) / 2`` (``V_k = Z_k Z_k'``, ``V_0 = I``, ``P`` the REML
    projection at ``s``): the step from ``s`` lands there whatever the score, because
    ``I s = tr(P V_k) / 2`` (so ``s + I^-1 score = I^-1 q``). This is Rao's MINQUE with
    prior ``s``: a quadratic form in ``y``, unbiased, equal to the ANOVA estimates on
    balanced data whatever ``s`` (tests/compare/test_gstudy.py checks it), and a fixed point at
    the REML estimate. Applied to data simulated at ``s = `` the REML estimates it is
    a parametric bootstrap that costs one factorisation for all replicates.

    Parameters
    ----------
    Y : array (n, m), or an iterable of such arrays
        The responses; blocks of columns (e.g. simulated a few hundred at a time) are
        handled one after another with one factorisation.
    X : array (n, p)
        Fixed-effects design (include the intercept column).
    terms : sequence of RandomTerm
        Random intercepts (``x`` all ones).
    variances : array (k + 1,)
        The terms' variances, then the residual variance (> 0).
    step : callable, optional
        Called with the number of columns done after each block (a progress bar).

    Returns
    -------
    ndarray (m, k + 1)
        One step's variances per column (may be negative, as ANOVA estimates can be).

    References
    ----------
    Rao, C. R. (1971). Estimation of variance and covariance components: MINQUE theory.
    Journal of Multivariate Analysis 1, 257-275. doi:10.1016/0047-259X(71)90001-7
    Searle, S. R., Casella, G. & McCulloch, C. E. (1992). Variance Components. Wiley,
    sections 6.3 and 11.3. doi:10.1002/9780470316856
    """
    blocks = [Y] if isinstance(Y, np.ndarray) else Y
    X = np.asarray(X, dtype=float)
    s = np.asarray(variances, dtype=float)
    n, p, k = X.shape[0], X.shape[1], len(terms)
    with one_blas_thread():
        design = CrossedDesign(terms, n)
        if design.q > SCORING_MAX_LEVELS:
            raise EvalmixError(f"the scoring step forms a {design.q} x {design.q} matrix; "
                               f"it is limited to {SCORING_MAX_LEVELS} levels in all")
        comp, s0 = design.comp, s[-1]
        lam = np.sqrt(np.clip(s[:k], 0.0, None) / s0)[comp]
        F = design.factor(lam)
        G = (design.Zt @ design.Z).toarray()

        def vinv(B: np.ndarray) -> np.ndarray:        # V^-1 B (Woodbury)
            ztb = design.zt(B)
            return (B - design.zu(lam[:, None] * F.solve(lam[:, None] * ztb))) / s0

        vx = vinv(X)
        xvx = X.T @ vx
        zvx = design.zt(vx)
        # Z'PZ = Z'V^-1 Z - Z'V^-1 X (X'V^-1 X)^-1 X'V^-1 Z
        C = ((G - G @ (lam[:, None] * F.solve(lam[:, None] * G))) / s0
             - zvx @ np.linalg.solve(xvx, zvx.T))
        trace = np.bincount(comp, weights=np.diag(C), minlength=k)  # tr(P V_k)
        pair = (comp[:, None] * k + comp[None, :]).ravel()
        info = np.zeros((k + 1, k + 1))
        info[:k, :k] = 0.5 * np.bincount(pair, weights=(C * C).ravel(),
                                         minlength=k * k).reshape(k, k)
        # I s = tr(P V_k) / 2 gives the residual's row; tr(PV) = n - p gives tr(P)
        info[:k, k] = info[k, :k] = (0.5 * trace - info[:k, :k] @ s[:k]) / s0
        tr_p = (n - p - s[:k] @ trace) / s0
        info[k, k] = (0.5 * tr_p - info[k, :k] @ s[:k]) / s0
        out, done = [], 0
        for Yc in blocks:
            Yc = np.asarray(Yc, dtype=float).reshape(n, -1)
            vy = vinv(Yc)
            py = vy - vx @ np.linalg.solve(xvx, vx.T @ Yc)
            zpy = design.zt(py)
            q = np.empty((k + 1, Yc.shape[1]))
            for j in range(k):
                q[j] = 0.5 * np.sum(zpy[comp == j] ** 2, axis=0)
            q[k] = 0.5 * np.sum(py**2, axis=0)
            out.append(np.linalg.solve(info, q).T)
            done += Yc.shape[1]
            if step is not None:
                step(done)
    return np.concatenate(out) if out else np.zeros((0, k + 1))
