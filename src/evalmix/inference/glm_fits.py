"""Weighted logistic fits of the length-controlled win rate (no table handling here).

:func:`weighted_logit` is a weighted, optionally ridge-penalised logistic regression with
probability targets (AlpacaEval's weighted annotators give ``P(output_2 preferred)``);
:func:`estimate_difficulty` the joint fit of upstream's instruction-difficulty notebook.
Both are also used by :mod:`evalmix.inference.style_control` (the ridge of arena-rank).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from evalmix.errors import EvalmixError

__all__ = ["weighted_logit", "estimate_difficulty"]

_TOL = 1e-10
_MAXIT = 100
#: Ridge on the instruction effects of the joint difficulty fit (on the summed
#: log-likelihood): negligible where an instruction has any spread, it keeps the effect
#: of an instruction every model won (or lost) finite.
_RIDGE = 1e-8


# --------------------------------------------------------------------------- fits
def weighted_logit(X: np.ndarray, y: np.ndarray, w: np.ndarray,
                   penalty: np.ndarray | None = None) -> np.ndarray:
    """Weighted logistic regression with probability targets by Newton's method.

    Maximises ``sum_r w_r (y_r eta_r - log(1 + e^eta_r)) - penalty . beta^2 / 2``
    (``penalty``: a ridge per coefficient, on that summed scale; None: none).
    :func:`evalmix.inference.estimands.fit_logit` is the unweighted, unpenalised fit
    with a convergence warning instead of an error.
    """
    beta = np.zeros(X.shape[1])
    pen = np.zeros(X.shape[1]) if penalty is None else np.asarray(penalty, dtype=float)
    for _ in range(_MAXIT):
        mu = expit(X @ beta)
        v = w * mu * (1 - mu)
        try:
            step = np.linalg.solve((X * v[:, None]).T @ X + np.diag(pen),
                                   X.T @ (w * (y - mu)) - pen * beta)
        except np.linalg.LinAlgError:
            raise EvalmixError(
                "the logistic fit is singular (a covariate does not vary, a model is "
                "never compared, or one side won every comparison)") from None
        beta += step
        if np.max(np.abs(step)) < _TOL * (1 + np.max(np.abs(beta))):
            return beta
    raise EvalmixError(f"the logistic fit did not converge in {_MAXIT} Newton steps (a model "
                       "that wins or loses nearly everything has no finite fit)")


def estimate_difficulty(y: np.ndarray, model: np.ndarray, item: np.ndarray, t: np.ndarray,
                        n_items: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Instruction difficulty by the joint fit of upstream's instruction_difficulty notebook.

    ``logit y_r = a_model + s_model * t_r + d_item`` over all rows (a model's rows, ``t``
    its ``tanh(delta_len / sd)``), by Newton's method with the instruction block of the
    Hessian eliminated (it is diagonal), so each step costs one (2K x 2K) solve.

    Returns
    -------
    (n_items,) array
        ``d``, centred to mean zero (a larger ``d``: an instruction the models win more
        often against the baseline).
    """
    w = np.ones(y.size) if weights is None else weights
    k = int(model.max()) + 1
    n_p = 2 * k
    theta = np.zeros(n_p)  # a_0..a_k-1, s_0..s_k-1
    d = np.zeros(n_items)
    for _ in range(_MAXIT):
        eta = theta[model] + theta[k + model] * t + d[item]
        mu = expit(eta)
        r = w * (y - mu)
        v = w * mu * (1 - mu)
        g_p = np.concatenate([np.bincount(model, r, k), np.bincount(model, r * t, k)])
        g_d = np.bincount(item, r, n_items) - _RIDGE * d
        a_blk = np.zeros((n_p, n_p))
        idx = np.arange(k)
        a_blk[idx, idx] = np.bincount(model, v, k)
        a_blk[idx, k + idx] = a_blk[k + idx, idx] = np.bincount(model, v * t, k)
        a_blk[k + idx, k + idx] = np.bincount(model, v * t * t, k)
        dd = np.bincount(item, v, n_items) + _RIDGE
        cell = model * n_items + item
        b_blk = np.concatenate([np.bincount(cell, v, k * n_items),
                                np.bincount(cell, v * t, k * n_items)]).reshape(n_p, n_items)
        bd = b_blk / dd
        schur = a_blk - bd @ b_blk.T
        rhs = g_p - bd @ g_d
        # the intercepts and the instruction effects share one direction (a + c, d - c):
        # the first model's intercept stays 0 (d is centred at the end)
        schur[0, :] = schur[:, 0] = 0.0
        schur[0, 0], rhs[0] = 1.0, 0.0
        try:
            x = np.linalg.solve(schur, rhs)
        except np.linalg.LinAlgError:
            raise EvalmixError("the instruction-difficulty fit is singular (a model's "
                               "length differences do not vary)") from None
        z = (g_d - b_blk.T @ x) / dd
        theta += x
        d += z
        if max(np.max(np.abs(x)), np.max(np.abs(z))) < 1e-8 * (1 + np.max(np.abs(d))):
            break
    else:
        raise EvalmixError(f"the instruction-difficulty fit did not converge in {_MAXIT} "
                           "Newton steps")
    return d - d.mean()
