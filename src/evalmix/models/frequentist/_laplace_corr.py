"""The Laplace GLMM with correlated random effects ``(1 + x | g)`` (lme4's theta).

:func:`fit_correlated` runs the fit of :func:`evalmix.models.frequentist._laplace.fit_laplace_arrays`
when some terms are correlated: the same two stages (nAGQ = 0 start over theta, then
(theta, beta) with the exact gradient of the Laplace deviance), with theta the entries of
each block's Cholesky factor (:class:`~evalmix.models.frequentist._theta.ThetaMap`), bounded at 0 on
the diagonal as in lme4. Standard errors: the Hessian of the deviance in (theta, beta) by
central differences of the exact gradient; SD and correlation intervals by the delta
method on log SD and on atanh(correlation) (glmmTMB's Wald intervals, on the same
scales). The conditional SDs of the random effects ``b = Lambda u`` use the within-level
blocks of ``A^-1`` (lme4's ``condVar``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import optimize

from evalmix.models.frequentist._crossed import LOGIT_RESIDUAL_VAR, SINGULAR_TOL, CrossedFit, polish
from evalmix.models.frequentist._pls import BlockFactor
from evalmix.models.frequentist._theta import ThetaMap
from evalmix.models.spec._spec_types import RandomTerm

__all__ = ["fit_correlated", "pair_inverse", "condvar"]


def pair_inverse(F: BlockFactor, ta: int, tb: int) -> np.ndarray:
    """``(A^-1)`` between row ``i``'s columns of terms ``ta`` and ``tb`` (natural order),
    for every row: entries on the factor's sparsity pattern only."""
    des = F.design
    n = des.n
    diag, alpha, p_at_b, s_at_c = F.inverse_pieces()
    rest = {j: r for r, j in enumerate(des.rest_terms)}
    if ta == tb:
        if ta == des.big:
            return 1.0 / F.d[des.a] + alpha[des.a]
        r = rest[ta]
        j = des.c_pairs.index((r, r))
        return s_at_c[des.c_inv[j * n:(j + 1) * n]]
    if des.big in (ta, tb):
        r = rest[tb if ta == des.big else ta]
        return -p_at_b[des.b_inv[r * n:(r + 1) * n]]
    r, s = sorted((rest[ta], rest[tb]))
    j = des.c_pairs.index((r, s))
    return s_at_c[des.c_inv[j * n:(j + 1) * n]]


def condvar(F: BlockFactor, tmap: ThetaMap, theta: np.ndarray, terms: Sequence[RandomTerm],
            scale: float = 1.0) -> np.ndarray:
    """Conditional SDs of ``b = Lambda u`` given beta and theta (every level of every
    term, natural order): ``var(b_j) = scale^2 sum_ab L_ja L_jb (A^-1)_(g,a),(g,b)``."""
    out = []
    for L, blk in zip(tmap.factors(theta), tmap.blocks, strict=True):
        codes = terms[blk[0]].codes
        g = terms[blk[0]].n_levels
        _, first = np.unique(codes, return_index=True)
        E = np.empty((len(blk), len(blk), g))
        for a in range(len(blk)):
            for b in range(a, len(blk)):
                E[a, b] = E[b, a] = pair_inverse(F, blk[a], blk[b])[first]
        var = np.einsum("ja,jb,abg->jg", L, L, E)
        out.append((blk, scale * np.sqrt(np.clip(var, 0.0, None))))
    res: list[np.ndarray] = [np.empty(0)] * len(terms)
    for blk, sd in out:
        for row, j in enumerate(blk):
            res[j] = sd[row]
    return np.concatenate(res)


def _sd_cor(tmap: ThetaMap, theta: np.ndarray) -> np.ndarray:
    """(log SD of every term, atanh of every within-block correlation)."""
    sd = tmap.sds(theta)
    rho = np.array([c for _, _, c in tmap.correlations(theta)])
    with np.errstate(divide="ignore"):
        return np.concatenate([np.log(sd), np.arctanh(np.clip(rho, -1 + 1e-12,
                                                                1 - 1e-12))])


def fit_correlated(dev: Any, fe_names: Sequence[str], terms: Sequence[RandomTerm], *,
                   level: float, z: float, maxiter: int, check_separation: Any,
                   results_cls: Any) -> CrossedFit:
    """The fit of :func:`~evalmix.models.frequentist._laplace.fit_laplace_arrays` with correlated
    terms (``dev`` its :class:`~evalmix.models.frequentist._laplace._LaplaceDeviance`,
    ``check_separation`` and ``results_cls`` (``LaplaceResults``) its own)."""
    tm: ThetaMap = dev.tmap
    k, p = tm.n_theta, dev.X.shape[1]
    state = {"beta": np.zeros(p)}

    def f0(theta: np.ndarray) -> tuple[float, np.ndarray]:
        # the nAGQ = 0 deviance (beta inside PIRLS) and, as its gradient, the Laplace
        # gradient's theta part at (theta, beta-hat): it leaves out log|A|'s dependence
        # through beta-hat only; this stage is a start, so it need not be exact
        val, b = dev.profiled(theta, state["beta"])
        state["beta"] = b
        return val, dev._gradient_blocks()[:k] + dev.penalty_terms(theta)[1]

    dev.u = np.zeros(dev.q)
    out0 = optimize.minimize(f0, tm.start(1.0), jac=True, method="L-BFGS-B",
                             bounds=dev.theta_bounds(),
                             options={"ftol": 1e-4, "maxiter": maxiter})
    f0(out0.x)

    def fg(x: np.ndarray) -> tuple[float, np.ndarray]:
        return dev.gradient(x[:k], x[k:])

    th0 = np.where(tm.is_diag_entry, np.maximum(out0.x, 1e-3), out0.x)
    x = np.concatenate([th0, state["beta"]])
    bounds = dev.theta_bounds() + [(None, None)] * p
    x, out = polish(fg, x, bounds, maxiter)
    _, g = fg(x)
    at_bound = tm.is_diag_entry & (x[:k] <= SINGULAR_TOL * np.sqrt(LOGIT_RESIDUAL_VAR))
    g[:k] = np.where(at_bound & (g[:k] > 0), 0.0, g[:k])
    grad = float(np.max(np.abs(g)))
    theta = x[:k].copy()
    theta[at_bound] = 0.0
    free = np.flatnonzero(~at_bound)
    # a column of L whose diagonal is 0 has no free entries below it either (lme4
    # reports the fit singular): fix them too
    for e, (blk, a, b) in enumerate(tm.entries):
        if a != b and any(at_bound[f] for f, (bk, aa, bb) in enumerate(tm.entries)
                          if bk == blk and aa == bb == b):
            free = free[free != e]
    idx = np.concatenate([free, k + np.arange(p)])
    v0 = np.concatenate([theta, x[k:]])
    u_opt = dev.u.copy()
    hess = np.empty((idx.size, idx.size))
    for c, j in enumerate(idx):
        step = 1e-4 * max(1.0, abs(v0[j]))
        up, dn = v0.copy(), v0.copy()
        up[j] += step
        dn[j] -= step
        dev.u = u_opt.copy()
        g_up = dev.gradient(up[:k], up[k:])[1][idx]
        dev.u = u_opt.copy()
        g_dn = dev.gradient(dn[:k], dn[k:])[1][idx]
        hess[:, c] = (g_up - g_dn) / (2 * step)
    dev.u = u_opt
    fval = dev(theta, x[k:])
    hess = (hess + hess.T) / 2
    try:
        cov = 2 * np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        cov = np.full(hess.shape, np.nan)
    nf = free.size
    se_beta = np.sqrt(np.clip(np.diag(cov)[nf:], 0.0, None))
    check_separation(fe_names, x[k:], se_beta, np.linalg.eigvalsh(hess))
    g_v = np.concatenate([g[free], g[k:]])
    with np.errstate(invalid="ignore"):
        rel = float(np.max(np.abs(np.linalg.solve(hess, g_v)), initial=0.0)) \
            if np.all(np.isfinite(hess)) else np.inf
    converged = grad < 1e-3 or rel < 2e-3

    # delta method: (log SD, atanh rho) from theta
    t_cov = cov[:nf, :nf]
    base = _sd_cor(tm, theta)
    J = np.zeros((base.size, nf))
    for c, e in enumerate(free.tolist()):
        h = 1e-6 * max(1.0, abs(theta[e]))
        tp, tn = theta.copy(), theta.copy()
        tp[e] += h
        tn[e] -= h
        J[:, c] = (_sd_cor(tm, tp) - _sd_cor(tm, tn)) / (2 * h)
    with np.errstate(invalid="ignore"):
        se_v = np.sqrt(np.clip(np.diag(J @ t_cov @ J.T), 0.0, None))
    nt = len(terms)
    sd = tm.sds(theta)
    singular_sd = sd < SINGULAR_TOL * np.sqrt(LOGIT_RESIDUAL_VAR)
    sd[singular_sd] = 0.0
    lo, hi = np.zeros(nt), np.full(nt, np.nan)
    ok = ~singular_sd & np.isfinite(se_v[:nt])
    lo[ok] = sd[ok] * np.exp(-z * se_v[:nt][ok])
    hi[ok] = sd[ok] * np.exp(z * se_v[:nt][ok])
    cors: list[dict[str, Any]] = []
    for c, (i, j, rho) in enumerate(tm.correlations(theta)):
        s = se_v[nt + c]
        r_lo, r_hi = ((np.tanh(np.arctanh(rho) - z * s), np.tanh(np.arctanh(rho) + z * s))
                      if np.isfinite(rho) and abs(rho) < 1 - 1e-6 and np.isfinite(s)
                      else (np.nan, np.nan))
        cors.append({"factor": terms[i].factor, "term_1": terms[i].term,
                     "term_2": terms[j].term, "correlation": rho, "lo": float(r_lo),
                     "hi": float(r_hi)})
    boundary = [f"cor({c['term_1']}, {c['term_2']})|{c['factor']}" for c in cors
                if not np.isfinite(float(c["correlation"]))
                or abs(float(c["correlation"])) > 0.999]
    fe_cov = cov[nf:, nf:]
    assert dev.last is not None
    _, _, u, _, _, F, _, _, _ = dev.last
    sizes = [t.n_levels for t in terms]
    modes = tm.lambda_blocks(theta, u, sizes)
    re_sd = condvar(F, tm, theta, terms)
    results = results_cls(params=np.concatenate([sd, x[k:]]), cov=fe_cov, deviance=fval,
                             llf=-fval / 2, modes=modes, converged=converged)
    names = [t.name for t in terms]
    return CrossedFit(
        method="laplace", fe_names=tuple(fe_names), fe_est=x[k:].copy(), fe_se=se_beta,
        fe_cov=fe_cov, vc_names=tuple(names), vc_sd=sd, vc_lo=lo, vc_hi=hi,
        resid_sd=float(np.sqrt(LOGIT_RESIDUAL_VAR)), resid_lo=np.nan, resid_hi=np.nan,
        level=level, converged=converged, grad_norm=grad, results=results,
        singular=tuple(n for n, s in zip(names, singular_sd, strict=True) if s),
        re_est=modes, re_sd=re_sd,
        details={"deviance": fval, "loglik": -fval / 2, "theta": theta.tolist(),
                 "correlations": cors, "singular_correlations": tuple(boundary),
                 "blocks": [list(b) for b in tm.blocks],
                 "optimizer": "nAGQ=0 start (L-BFGS-B over theta), then L-BFGS-B over "
                              "(theta, beta) with the exact gradient of the Laplace "
                              "deviance; theta = Cholesky factors of correlated terms",
                 "optimizer_message": str(out.message),
                 "interval": "Wald z (fixed effects); Wald on log-SD and atanh(correlation) "
                             "(delta method from the Hessian in theta)"},
    )
