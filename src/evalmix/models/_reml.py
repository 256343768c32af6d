"""REML fit of a linear mixed model with crossed variance components (``"mixedlm"``).

:class:`statsmodels.regression.mixed_linear_model.MixedLM`, REML, one group holding
every row and one variance component per term (``exog_vc``). Exact REML for continuous
outcomes; on a 0/1 outcome it is a *linear probability* model (an approximation:
variances are on the probability scale and shrink towards 0/1 bounds).

The optimum is found on lme4's profiled REML criterion computed from the model's
cross-products (O(q^3) per evaluation, bounded at SD = 0), then statsmodels is fitted
from it (statsmodels' own L-BFGS from its default start stops far from the optimum on
crossed designs; see ``shared/PERF_NOTES.md``). Intervals: Wald ``t`` with containment df
for fixed effects; Wald on log-SD for the variance components (glmmTMB's default), from
a numerical Hessian of the full REML log-likelihood in (log SD_k, log sigma).

The block solve (:func:`_block_solve`), the largest-term-first ordering and the joint
covariance of (fixed, random) effects are shared with :mod:`evalmix.models._laplace`.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse

from evalmix.models._crossed import (
    SINGULAR_TOL,
    CrossedFit,
    _check_arrays,
    _term_matrix,
    _z,
    intercept_term,  # noqa: F401  (used by the docstring examples)
)
from evalmix.models.spec import RandomTerm

__all__ = ["fit_mixedlm_arrays", "reml_deviance"]

#: statsmodels' MixedLM results object is built only up to this many levels in all.
_SM_MAX_LEVELS = 500


def _block_solve(d: np.ndarray, B: np.ndarray, C: np.ndarray, R: np.ndarray
                 ) -> tuple[np.ndarray, float]:
    """Solve ``A Y = R`` and return ``log|A|`` for ``A = [[diag(d), B], [B', C]]``.

    In a crossed design every row has one level of each term, so a term's own block of
    ``Z'WZ`` is diagonal; eliminating the largest term's block leaves a Schur complement
    ``C - B' D^-1 B`` of the size of the *other* terms (e.g. 3 judges + 6 personas
    instead of 2,000 items), which is what makes lme4's sparse Cholesky fast.
    """
    from scipy.linalg import cho_solve, cholesky

    q1 = d.size
    dinv = (1.0 / d).reshape(-1, *([1] * (R.ndim - 1)))
    R1, R2 = R[:q1], R[q1:]
    logdet = float(np.log(d).sum())
    if B.shape[1] == 0:
        return dinv * R1, logdet
    DB = B / d[:, None]
    Ls = cholesky(C - B.T @ DB, lower=True)
    Y2 = cho_solve((Ls, True), R2 - DB.T @ R1)
    Y1 = dinv * R1 - DB @ Y2
    return np.concatenate([Y1, Y2]), logdet + 2 * float(np.log(np.diag(Ls)).sum())


@dataclass(frozen=True)
class _CrossProducts:
    """Sufficient statistics of a linear mixed model: the REML criterion needs only
    these cross-products, so one evaluation costs O(q2^3 + q1 q2^2), whatever the number
    of rows (q1 levels of the largest term, q2 of all others).

    ``perm`` orders the columns of Z with the largest term first; ``d0``, ``B0``, ``C0``
    are the blocks of Z'Z in that order.
    """

    ZtZ: np.ndarray
    ZtX: np.ndarray
    Zty: np.ndarray
    XtX: np.ndarray
    Xty: np.ndarray
    yty: float
    comp: np.ndarray  # variance component of each column of Z
    n: int
    p: int
    perm: np.ndarray
    q1: int
    d0: np.ndarray
    B0: np.ndarray
    C0: np.ndarray


def _largest_first(comp: np.ndarray) -> tuple[np.ndarray, int]:
    counts = np.bincount(comp)
    big = int(np.argmax(counts))
    perm = np.concatenate([np.flatnonzero(comp == big), np.flatnonzero(comp != big)])
    return perm, int(counts[big])


def _cross_products(y: np.ndarray, X: np.ndarray, Z: sparse.csr_array,
                    comp: np.ndarray) -> _CrossProducts:
    Zt = Z.T.tocsr()
    ZtZ = np.asarray((Zt @ Z).toarray())
    perm, q1 = _largest_first(comp)
    P = ZtZ[np.ix_(perm, perm)]
    return _CrossProducts(
        ZtZ=ZtZ, ZtX=np.asarray(Zt @ X), Zty=np.asarray(Zt @ y),
        XtX=X.T @ X, Xty=X.T @ y, yty=float(y @ y), comp=comp, n=y.size, p=X.shape[1],
        perm=perm, q1=q1, d0=np.diag(P)[:q1].copy(), B0=P[:q1, q1:], C0=P[q1:, q1:])


def _reml_pieces(theta: np.ndarray, cp: _CrossProducts
                 ) -> tuple[float, float, float, np.ndarray, np.ndarray]:
    """lme4's penalised least squares at relative SDs ``theta`` (SD_k / sigma).

    Returns log|L|^2, log|R_X|^2, the penalised RSS r^2, beta-hat and R_X' R_X, where
    L L' = Lambda Z'Z Lambda + I (Bates et al. 2015, section 3).
    """
    from scipy.linalg import cho_solve, cholesky

    lam = theta[cp.comp[cp.perm]]
    l1, l2 = lam[:cp.q1], lam[cp.q1:]
    d = l1**2 * cp.d0 + 1.0
    B = l1[:, None] * cp.B0 * l2[None, :]
    C = l2[:, None] * cp.C0 * l2[None, :] + np.eye(l2.size)
    R = lam[:, None] * np.column_stack([cp.ZtX[cp.perm], cp.Zty[cp.perm]])
    Y, ld_l = _block_solve(d, B, C, R)
    Q = R.T @ Y
    p = cp.p
    M = cp.XtX - Q[:p, :p]
    RX = cholesky(M, lower=True)
    rhs = cp.Xty - Q[:p, p]
    beta = cho_solve((RX, True), rhs)
    r2 = cp.yty - Q[p, p] - rhs @ beta
    return (ld_l, 2 * np.log(np.diag(RX)).sum(), float(r2), beta, M)


def reml_deviance(theta: np.ndarray, cp: _CrossProducts) -> float:
    """Profiled REML criterion -2 l_R(theta) (lme4's ``REMLcrit``).

    References
    ----------
    Bates, D. et al. (2015), eq. (41)-(42). doi:10.18637/jss.v067.i01
    """
    ld_l, ld_rx, r2, _, _ = _reml_pieces(np.asarray(theta, dtype=float), cp)
    big_n = cp.n - cp.p
    return float(ld_l + ld_rx + big_n * (1 + np.log(2 * np.pi * r2 / big_n)))


def _reml_loglik(phi: np.ndarray, cp: _CrossProducts) -> float:
    """Full REML log-likelihood at (log SD_1..K, log sigma); sigma not profiled out."""
    sigma2 = np.exp(2 * phi[-1])
    ld_l, ld_rx, r2, _, _ = _reml_pieces(np.exp(phi[:-1] - phi[-1]), cp)
    big_n = cp.n - cp.p
    return float(-0.5 * (ld_l + ld_rx + big_n * np.log(2 * np.pi * sigma2) + r2 / sigma2))


def _deviance_gradient(theta: np.ndarray, cp: _CrossProducts) -> np.ndarray:
    """Central-difference gradient of the REML criterion (forward at the zero bound)."""
    g = np.empty_like(theta)
    for j in range(theta.size):
        h = 1e-6 * max(theta[j], 1e-2)
        up, dn = theta.copy(), theta.copy()
        up[j] += h
        if theta[j] > h:
            dn[j] -= h
            g[j] = (reml_deviance(up, cp) - reml_deviance(dn, cp)) / (2 * h)
        else:
            g[j] = (reml_deviance(up, cp) - reml_deviance(theta, cp)) / h
    return g


def _optimise_theta(cp: _CrossProducts, k: int, maxiter: int) -> optimize.OptimizeResult:
    """Minimise the REML criterion over theta >= 0 (bounded at zero, like lme4), by
    L-BFGS-B from two starts, each restarted from its end point until it stops moving."""
    best = None
    for start in (np.ones(k), np.full(k, 0.1)):
        x = start
        for _ in range(4):
            out = optimize.minimize(reml_deviance, x, args=(cp,), jac=_deviance_gradient,
                                    method="L-BFGS-B", bounds=[(0.0, None)] * k,
                                    options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-9})
            moved = not np.allclose(out.x, x, rtol=1e-7, atol=1e-9)
            x = out.x
            if not moved:
                break
        if best is None or out.fun < best.fun:
            best = out
    assert best is not None
    return best


def _projected_gradient(theta: np.ndarray, cp: _CrossProducts) -> float:
    g = _deviance_gradient(theta, cp)
    g = np.where((theta <= 0) & (g > 0), 0.0, g)  # at the bound a positive slope is fine
    return float(np.max(np.abs(g))) if g.size else 0.0


def _joint_cov(xwx: np.ndarray, lzwx: np.ndarray, A: np.ndarray, lam: np.ndarray,
               scale: float) -> np.ndarray:
    """Covariance of (beta, b = Lambda u) given the SDs: ``scale`` times the inverse of the
    penalised least-squares Hessian [[X'WX, X'WZL], [LZ'WX, LZ'WZL + I]], mapped to b."""
    p = xwx.shape[0]
    H = np.block([[xwx, lzwx.T], [lzwx, A]])
    cov = scale * np.linalg.inv(H)
    d = np.concatenate([np.ones(p), lam])
    return d[:, None] * cov * d[None, :]

def fit_mixedlm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, level: float = 0.95,
                       maxiter: int = 1000) -> CrossedFit:
    """REML fit of a linear mixed model with crossed variance components.

    The REML criterion is minimised over the relative SDs (lme4's ``theta``) from the
    model's cross-products, then statsmodels ``MixedLM`` (one group spanning all rows,
    one variance component per term) is fitted from that optimum; the estimates and
    fixed-effect SEs reported are statsmodels'. Components at zero are dropped from the
    statsmodels model (their SD is 0) and flagged as singular.

    Parameters
    ----------
    y : (n,) array
        Outcome (continuous, or 0/1 for a linear probability model).
    X : (n, k) array
        Fixed-effects design (include the intercept column).
    fe_names : sequence of str
        Names of the columns of ``X``.
    terms : sequence of RandomTerm
        Crossed variance components (random intercepts or uncorrelated slopes).
    level : float
        Confidence level of the Wald intervals (fixed effects; log-SD for components).
    maxiter : int
        Iteration limit of the optimiser.

    Returns
    -------
    CrossedFit

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> a, b = np.repeat(np.arange(10), 20), np.tile(np.arange(20), 10)
    >>> y = rng.normal(0, 1, 10)[a] + rng.normal(0, 0.5, 20)[b] + rng.normal(0, 1, 200)
    >>> fit = fit_mixedlm_arrays(y, np.ones((200, 1)), ["Intercept"],
    ...                          [intercept_term("a", a), intercept_term("b", b)])
    >>> fit.vc_names
    ('1|a', '1|b')

    References
    ----------
    Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
    models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
    """
    from statsmodels.regression.mixed_linear_model import MixedLM, VCSpec
    from statsmodels.tools.numdiff import approx_hess3

    y, X = _check_arrays(y, X, fe_names, terms)
    n, k = y.size, len(terms)
    z = _z(level)
    names = tuple(t.name for t in terms)
    blocks = [_term_matrix(t, n) for t in terms]
    comp = np.concatenate([np.full(t.n_levels, j) for j, t in enumerate(terms)])
    cp = _cross_products(y, X, sparse.hstack(blocks).tocsr(), comp)
    opt = _optimise_theta(cp, k, maxiter)
    theta = np.asarray(opt.x, dtype=float)
    grad = _projected_gradient(theta, cp)
    singular = theta < SINGULAR_TOL
    keep = np.flatnonzero(~singular)

    # estimates at the optimum (lme4: sigma^2 = r^2 / (n - p), vcov = sigma^2 M^-1)
    theta_hat = np.where(singular, 0.0, theta)
    _, _, r2, beta, M = _reml_pieces(theta_hat, cp)
    sigma = float(np.sqrt(r2 / (n - X.shape[1])))
    sd = theta_hat * sigma
    fe_cov = sigma**2 * np.linalg.inv(M)
    # the criterion is flat to rounding at the optimum: gradient noise ~1e-8 |deviance|
    converged = grad < 1e-6 * max(1.0, abs(float(opt.fun)))

    # statsmodels MixedLM from the optimum (the model without zero components); its fit
    # recomputes a Hessian that costs O(q^3) with sparse LU, so beyond a few hundred
    # levels only our (identical) numbers are returned
    results = None
    kept = [int(j) for j in keep]
    if keep.size and comp.size <= _SM_MAX_LEVELS:
        vc = VCSpec([names[j] for j in kept],
                    [[[f"{names[j]}[{i}]" for i in range(terms[j].n_levels)]] for j in kept],
                    [[blocks[j]] for j in kept])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MixedLM(y, X, groups=np.zeros(n), exog_vc=vc)
            results = model.fit(reml=True, method="lbfgs", start_params=theta[keep])

    # conditional modes b = Lambda u of every level and their conditional SDs
    lam = theta_hat[cp.comp]
    A = lam[:, None] * cp.ZtZ * lam[None, :] + np.eye(lam.size)
    resid_z = cp.Zty - cp.ZtX @ beta
    A_inv = np.linalg.inv(A)
    re_est = lam * (A_inv @ (lam * resid_z))
    re_sd = sigma * lam * np.sqrt(np.clip(np.diag(A_inv), 0.0, None))
    has_slopes = any(not t.is_intercept for t in terms)
    fe_re_cov = (_joint_cov(cp.XtX, lam[:, None] * cp.ZtX, A, lam, sigma**2)
                 if has_slopes else None)

    # Wald intervals on log SD from the Hessian of the full REML log-likelihood
    def loglik_kept(sub: np.ndarray) -> float:
        phi = np.append(np.log(np.maximum(sd, 1e-300)), sub[-1])
        phi[keep] = sub[:-1]
        phi_theta = np.where(singular, -np.inf, phi[:-1] - phi[-1])
        return _reml_loglik(np.append(phi_theta + phi[-1], phi[-1]), cp)

    phi0 = np.log(np.append(sd[keep], sigma))
    # step 1e-3 on the log scale: truncation error ~1e-6, rounding noise negligible
    hess = approx_hess3(phi0, loglik_kept, epsilon=1e-3)
    try:
        cov = np.linalg.inv(-hess)
        se_log = np.sqrt(np.diag(cov))
    except (np.linalg.LinAlgError, FloatingPointError):
        se_log = np.full(phi0.size, np.nan)
    lo, hi = np.zeros(k), np.full(k, np.nan)
    lo[keep] = sd[keep] * np.exp(-z * se_log[:-1])
    hi[keep] = sd[keep] * np.exp(z * se_log[:-1])
    return CrossedFit(
        method="mixedlm", fe_names=tuple(fe_names), fe_est=np.asarray(beta, dtype=float),
        fe_se=np.sqrt(np.diag(fe_cov)), fe_cov=fe_cov,
        vc_names=names, vc_sd=sd, vc_lo=lo, vc_hi=hi, resid_sd=sigma,
        resid_lo=float(sigma * np.exp(-z * se_log[-1])),
        resid_hi=float(sigma * np.exp(z * se_log[-1])), level=level, converged=converged,
        grad_norm=grad, results=results, singular=tuple(np.asarray(names)[singular].tolist()),
        re_est=re_est, re_sd=re_sd, fe_re_cov=fe_re_cov,
        details={"reml_criterion": float(opt.fun), "theta": theta.tolist(),
                 "optimizer": "L-BFGS-B on lme4's profiled REML criterion, then "
                              "statsmodels MixedLM (lbfgs) from that optimum"
                              + ("" if results is not None else
                                 " (skipped: more than "
                                 f"{_SM_MAX_LEVELS} levels or no nonzero component)"),
                 "optimizer_message": str(opt.message),
                 "interval": "Wald z (fixed effects); Wald on log-SD (variance components)"},
    )
