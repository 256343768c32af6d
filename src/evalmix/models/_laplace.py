"""Maximum-likelihood logit GLMM by the Laplace approximation (``"laplace"``).

The random effects are integrated out by the Laplace approximation: ``lme4::glmer``'s
default (nAGQ = 1), implemented here (statsmodels has no Laplace GLMM) with penalised
IRLS for the conditional modes and L-BFGS-B over (SDs, fixed effects). Matches
glmer/glmmTMB on the frozen references. Wald intervals (``t`` with containment df for
fixed effects; log scale for SDs) from the Hessian of the approximate deviance.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1), section 5 (GLMMs).
doi:10.18637/jss.v067.i01
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse

from evalmix.errors import EvalmixError
from evalmix.models._crossed import (
    LOGIT_RESIDUAL_VAR,
    SINGULAR_TOL,
    CrossedFit,
    _check_arrays,
    _term_matrix,
    _z,
    intercept_term,  # noqa: F401  (used by the docstring examples)
)
from evalmix.models._reml import _block_solve, _joint_cov, _largest_first
from evalmix.models.spec import RandomTerm

__all__ = ["LaplaceResults", "fit_laplace_arrays"]


@dataclass(frozen=True, eq=False)
class LaplaceResults:
    """Results of :func:`fit_laplace_arrays` (statsmodels has no Laplace GLMM).

    ``params`` are ``(SD_1..K, beta)``; ``cov`` the covariance of ``beta`` from the
    Hessian of the Laplace deviance in (log SD, beta) (lme4's ``use.hessian=TRUE``);
    ``modes`` the conditional modes of the random effects (``b = SD * u``).
    """

    params: np.ndarray
    cov: np.ndarray
    deviance: float
    llf: float
    modes: np.ndarray
    converged: bool

    def cov_params(self) -> np.ndarray:
        return self.cov


class _LaplaceDeviance:
    """Laplace-approximated deviance of a logit GLMM, lme4's nAGQ = 1 (PIRLS inside).

    ``deviance(theta, beta)`` maximises the penalised log-likelihood over the spherical
    random effects ``u`` (``b = Lambda u``) by Newton steps with step halving, then
    returns ``-2 log p(y | eta_hat) + |u_hat|^2 + log|L|^2``. The last ``u_hat`` warm-
    starts the next call. The blocks of ``Z'WZ`` are accumulated by ``bincount`` with the
    largest term's (diagonal) block eliminated (:func:`_block_solve`).
    """

    def __init__(self, y: np.ndarray, trials: np.ndarray, X: np.ndarray,
                 terms: Sequence[RandomTerm]):
        from scipy.special import gammaln

        n = y.size
        self.y, self.m, self.X = y, trials, X
        self.Z = sparse.hstack([_term_matrix(t, n) for t in terms]).tocsr()
        self.Zt = self.Z.T.tocsr()
        self.comp = np.concatenate([np.full(t.n_levels, j) for j, t in enumerate(terms)])
        self.q = self.comp.size
        self.u = np.zeros(self.q)
        self.perm, self.q1 = _largest_first(self.comp)
        big = int(self.comp[self.perm[0]])
        tb = terms[big]
        xb = np.asarray(tb.x, dtype=float)
        self.big_codes, self.big_x2 = tb.codes, xb**2
        rest = [t for j, t in enumerate(terms) if j != big]
        offs = np.cumsum([0] + [t.n_levels for t in rest])
        self.q2 = q2 = int(offs[-1])
        fb, xbb, fc, xcc = [], [], [], []
        for a, ta in enumerate(rest):
            xa = np.asarray(ta.x, dtype=float)
            fb.append(tb.codes * q2 + offs[a] + ta.codes)
            xbb.append(xb * xa)
            for b in range(a, len(rest)):
                tc = rest[b]
                fc.append((offs[a] + ta.codes) * q2 + offs[b] + tc.codes)
                xcc.append(xa * np.asarray(tc.x, dtype=float))
        empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
        self.fb = np.concatenate(fb) if fb else empty_i
        self.xb = np.concatenate(xbb) if xbb else empty_f
        self.fc = np.concatenate(fc) if fc else empty_i
        self.xc = np.concatenate(xcc) if xcc else empty_f
        self.nb, self.nc = len(fb), len(fc)
        k = trials * y
        self.const = float(np.sum(gammaln(trials + 1) - gammaln(k + 1)
                                  - gammaln(trials - k + 1)))

    def _loglik(self, eta: np.ndarray) -> float:
        return float(np.sum(self.m * (self.y * eta - np.logaddexp(0.0, eta))))

    def _weights(self, eta: np.ndarray) -> np.ndarray:
        from scipy.special import expit

        mu = expit(eta)
        return self.m * mu * (1 - mu)

    def _blocks(self, lam: np.ndarray, w: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Blocks of H = Lambda Z'WZ Lambda + I (largest term first)."""
        q1, q2 = self.q1, self.q2
        lp = lam[self.perm]
        l1, l2 = lp[:q1], lp[q1:]
        d = np.bincount(self.big_codes, weights=w * self.big_x2, minlength=q1)
        B = np.bincount(self.fb, weights=np.tile(w, self.nb) * self.xb,
                        minlength=q1 * q2).reshape(q1, q2)
        upper = np.bincount(self.fc, weights=np.tile(w, self.nc) * self.xc,
                            minlength=q2 * q2).reshape(q2, q2)
        C = upper + upper.T - np.diag(np.diag(upper))
        return (l1**2 * d + 1.0, l1[:, None] * B * l2[None, :],
                l2[:, None] * C * l2[None, :] + np.eye(q2))

    def _solve(self, lam: np.ndarray, eta: np.ndarray, rhs: np.ndarray
               ) -> tuple[np.ndarray, float]:
        d, B, C = self._blocks(lam, self._weights(eta))
        y_p, logdet = _block_solve(d, B, C, rhs[self.perm])
        out = np.empty_like(y_p)
        out[self.perm] = y_p
        return out, logdet

    def hessian(self, lam: np.ndarray, eta: np.ndarray) -> np.ndarray:
        """The full H = Lambda Z'WZ Lambda + I (natural column order), for covariances."""
        w = self._weights(eta)
        ztwz = np.asarray((self.Zt @ self.Z.multiply(w[:, None])).toarray())
        return lam[:, None] * ztwz * lam[None, :] + np.eye(self.q)

    def __call__(self, theta: np.ndarray, beta: np.ndarray) -> float:
        from scipy.special import expit

        lam = theta[self.comp]
        off = self.X @ beta
        u = self.u.copy()
        eta = off + self.Z @ (lam * u)
        pl = self._loglik(eta) - 0.5 * u @ u
        for _ in range(100):
            g = lam * (self.Zt @ (self.m * (self.y - expit(eta)))) - u
            step, _ = self._solve(lam, eta, g)
            t = 1.0
            while True:
                u_new = u + t * step
                eta_new = off + self.Z @ (lam * u_new)
                pl_new = self._loglik(eta_new) - 0.5 * u_new @ u_new
                if pl_new >= pl - 1e-12 or t < 1e-8:
                    break
                t /= 2
            u, eta, pl = u_new, eta_new, pl_new
            if np.max(np.abs(t * step)) < 1e-11:
                break
        self.u = u
        _, logdet = self._solve(lam, eta, np.zeros(self.q))
        return float(-2 * (self._loglik(eta) + self.const) + u @ u + logdet)


def fit_laplace_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, trials: np.ndarray | None = None,
                       level: float = 0.95, maxiter: int = 500,
                       binomial_constant: bool = True) -> CrossedFit:
    """Maximum likelihood logit GLMM by the Laplace approximation (``glmer``'s default).

    The random effects are integrated out by a Laplace approximation at their
    conditional modes (penalised IRLS), and the approximate deviance is minimised over
    the SDs (bounded at 0) and the fixed effects jointly by L-BFGS-B with
    central-difference gradients, restarted until it stops moving. Standard errors and
    Wald-on-log-SD intervals come from a numerical Hessian of the deviance in
    (log SD, beta) at the optimum (lme4's ``use.hessian = TRUE``; glmmTMB's Wald
    intervals for SDs).

    Parameters
    ----------
    y : (n,) array in [0, 1]
        Success fraction per row (0/1 for Bernoulli rows).
    X : (n, k) array
    fe_names : sequence of str
    terms : sequence of RandomTerm
    trials : (n,) array, optional
        Binomial trials per row (default 1).
    level : float
    maxiter : int
    binomial_constant : bool
        Include ``log C(trials, successes)`` in the log-likelihood (as glmer does for
        counts); False gives the log-likelihood of the underlying 0/1 rows.

    Returns
    -------
    CrossedFit
        ``results`` is a :class:`LaplaceResults`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(2)
    >>> g = np.repeat(np.arange(20), 30)
    >>> y = (rng.random(600) < 1 / (1 + np.exp(-rng.normal(0, 1, 20)[g]))).astype(float)
    >>> fit = fit_laplace_arrays(y, np.ones((600, 1)), ["Intercept"], [intercept_term("g", g)])
    >>> bool(fit.vc_sd[0] > 0)
    True

    References
    ----------
    Bates, D. et al. (2015). Fitting linear mixed-effects models using lme4. Journal of
    Statistical Software 67(1), section 5 (GLMMs). doi:10.18637/jss.v067.i01
    """
    from scipy.special import expit
    from statsmodels.tools.numdiff import approx_hess3

    y, X = _check_arrays(y, X, fe_names, terms)
    if np.any((y < 0) | (y > 1)):
        raise EvalmixError("method='laplace' fits a logit model and needs a 0/1 (or "
                           "fractional 0..1) outcome; use method='mixedlm' for numeric scores")
    m = np.ones(y.size) if trials is None else np.asarray(trials, dtype=float)
    if m.shape != y.shape or np.any(m <= 0):
        raise EvalmixError("trials must be positive, one per row")
    k, p = len(terms), X.shape[1]
    z = _z(level)
    dev = _LaplaceDeviance(y, m, X, terms)
    if not binomial_constant:
        dev.const = 0.0
    beta = np.zeros(p)  # logistic regression without random effects as the start
    for _ in range(30):
        mu = expit(X @ beta)
        step = np.linalg.solve(X.T @ ((m * mu * (1 - mu))[:, None] * X), X.T @ (m * (y - mu)))
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break

    def f(x: np.ndarray) -> float:
        return dev(x[:k], x[k:])

    def jac(x: np.ndarray) -> np.ndarray:
        g = np.empty_like(x)
        for j in range(x.size):
            h = 1e-5 * max(abs(x[j]), 0.1)
            up, dn = x.copy(), x.copy()
            up[j] += h
            if j < k and x[j] <= h:
                g[j] = (f(up) - f(x)) / h
            else:
                dn[j] -= h
                g[j] = (f(up) - f(dn)) / (2 * h)
        return g

    x = np.concatenate([np.ones(k), beta])
    bounds = [(0.0, None)] * k + [(None, None)] * p
    for _ in range(4):
        out = optimize.minimize(f, x, jac=jac, method="L-BFGS-B", bounds=bounds,
                                options={"ftol": 1e-15, "gtol": 1e-7, "maxiter": maxiter})
        moved = not np.allclose(out.x, x, rtol=1e-7, atol=1e-9)
        x = out.x
        if not moved:
            break
    g = jac(x)
    g[:k] = np.where((x[:k] <= 0) & (g[:k] > 0), 0.0, g[:k])
    grad = float(np.max(np.abs(g)))
    converged = grad < 1e-3
    sd = x[:k].copy()
    singular = sd < SINGULAR_TOL * np.sqrt(LOGIT_RESIDUAL_VAR)
    sd[singular] = 0.0
    keep = np.flatnonzero(~singular)

    def dev_phi(v: np.ndarray) -> float:
        th = sd.copy()
        th[keep] = np.exp(v[:keep.size])
        return dev(th, v[keep.size:])

    v0 = np.concatenate([np.log(sd[keep]), x[k:]])
    fval = dev_phi(v0)
    hess = approx_hess3(v0, dev_phi, epsilon=1e-3)
    try:
        cov = 2 * np.linalg.inv(hess)
        se = np.sqrt(np.diag(cov))
    except np.linalg.LinAlgError:
        cov = np.full(hess.shape, np.nan)
        se = np.full(v0.size, np.nan)
    lo, hi = np.zeros(k), np.full(k, np.nan)
    lo[keep] = sd[keep] * np.exp(-z * se[:keep.size])
    hi[keep] = sd[keep] * np.exp(z * se[:keep.size])
    fe_cov = cov[keep.size:, keep.size:]
    dev(sd, x[k:])  # conditional modes at the optimum
    lam = sd[dev.comp]
    eta = X @ x[k:] + dev.Z @ (lam * dev.u)
    H = dev.hessian(lam, eta)
    mu = expit(eta)
    w = m * mu * (1 - mu)
    fe_re_cov = (_joint_cov(X.T @ (w[:, None] * X),
                            lam[:, None] * np.asarray(dev.Zt @ (w[:, None] * X)), H, lam, 1.0)
                 if any(not t.is_intercept for t in terms) else None)
    # lme4's condVar: conditional SDs given beta and the SDs
    re_sd = lam * np.sqrt(np.clip(np.diag(np.linalg.inv(H)), 0.0, None))
    results = LaplaceResults(params=np.concatenate([sd, x[k:]]), cov=fe_cov, deviance=fval,
                             llf=-fval / 2, modes=dev.u * lam, converged=converged)
    return CrossedFit(
        method="laplace", fe_names=tuple(fe_names), fe_est=x[k:].copy(),
        fe_se=np.sqrt(np.diag(fe_cov)), vc_names=tuple(t.name for t in terms), vc_sd=sd,
        vc_lo=lo, vc_hi=hi, resid_sd=float(np.sqrt(LOGIT_RESIDUAL_VAR)), resid_lo=np.nan,
        resid_hi=np.nan, level=level, converged=converged, grad_norm=grad, results=results,
        singular=tuple(np.asarray([t.name for t in terms])[singular].tolist()),
        re_est=dev.u * lam, re_sd=re_sd, fe_re_cov=fe_re_cov,
        details={"deviance": fval, "loglik": -fval / 2,
                 "optimizer": "L-BFGS-B over (SD, beta) on the Laplace deviance (PIRLS inside)",
                 "optimizer_message": str(out.message),
                 "interval": "Wald z (fixed effects); Wald on log-SD (variance components), "
                             "from the Hessian of the Laplace deviance"},
    )
