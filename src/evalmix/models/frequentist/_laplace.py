"""Maximum-likelihood logit GLMM by the Laplace approximation (``"laplace"``).

The random effects are integrated out by the Laplace approximation: ``lme4::glmer``'s
default (nAGQ = 1), implemented here (statsmodels has no Laplace GLMM) as lme4 does it:
sparse ``Z``, penalised IRLS for the conditional modes with a sparse factor of
``Lambda Z'WZ Lambda + I`` (:mod:`evalmix.models.frequentist._pls`), an nAGQ = 0 start (SDs alone,
fixed effects inside PIRLS), then L-BFGS-B over (SDs, fixed effects) with the exact
gradient of the Laplace deviance. Matches glmer/glmmTMB on the frozen references. Wald
intervals (``t`` with containment df for fixed effects; log scale for SDs) from the
Hessian of the approximate deviance (differences of the exact gradient). All-0/all-1
outcomes and separated fixed effects raise :class:`~evalmix.errors.EvalmixError`.

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

from evalmix._blas import one_blas_thread
from evalmix.errors import EvalmixError
from evalmix.models.frequentist._crossed import (
    LOGIT_RESIDUAL_VAR,
    SINGULAR_TOL,
    CrossedFit,
    _check_arrays,
    _z,
    polish,
)
from evalmix.models.frequentist._laplace_corr import fit_correlated
from evalmix.models.frequentist._pls import CrossedDesign
from evalmix.models.frequentist._reml import joint_cov, slope_levels
from evalmix.models.frequentist._theta import ThetaMap
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


#: A fixed effect beyond this on the log-odds scale (or with an SE beyond
#: :data:`_SEPARATION_SE`) means the likelihood has no finite maximum (separation):
#: exp(15) is an odds ratio of 3 million.
_SEPARATION_BETA = 15.0
_SEPARATION_SE = 50.0
#: lme4's ``check.conv.grad`` tolerance on the relative gradient (Newton step).
_REL_GRAD_TOL = 2e-3
#: X is kept sparse when less than this share of its entries are nonzero.
_SPARSE_X = 0.25
#: Largest SD (log-odds scale) of a penalised fit: a level's effect of 20 SDs is an odds
#: ratio beyond e^40, i.e. separation, which the separation check then reports.
_PENALISED_MAX_SD = 20.0
#: Up to this many fixed effects the whole Hessian is taken by differences of the exact
#: gradient (2 (K + p) gradient evaluations); beyond, see the comment in the fit.
_FULL_HESSIAN_MAX_FIXED = 20


def _check_not_degenerate(y: np.ndarray, m: np.ndarray) -> None:
    """All-0 or all-1 outcomes: the logit likelihood has no finite maximum."""
    k = y * m
    if np.all(k <= 0) or np.all(k >= m):
        value = "0" if np.all(k <= 0) else "1"
        raise EvalmixError(
            f"every outcome is {value} ({y.size} rows): a logit model has no finite "
            "estimate (its intercept runs to infinity) and no SD can be estimated. Report "
            "the proportion with a design-based interval instead, e.g. "
            "evalmix.interval(table, 'mean', method='wilson' or 'CR2')")


def _check_separation(fe_names: Sequence[str], beta: np.ndarray, se: np.ndarray,
                      eigenvalues: np.ndarray) -> None:
    """Refuse a fit whose fixed effects run off to infinity (complete or quasi-complete
    separation) instead of reporting where the optimiser happened to stop."""
    # name the effects that run off first; an SE blown up by them comes second
    bad = [n for n, b in zip(fe_names, beta, strict=True) if abs(b) > _SEPARATION_BETA] or [
        n for n, s in zip(fe_names, se, strict=True)
        if not np.isfinite(s) or s > _SEPARATION_SE]
    if bad or not np.all(eigenvalues > 0):
        which = ", ".join(bad) if bad else "the fixed effects"
        raise EvalmixError(
            f"the outcome is (quasi-)separated by {which}: the Laplace likelihood has no "
            "finite maximum there (e.g. one condition wins every comparison), so no "
            "estimate or standard error can be reported. Drop or merge the level, or use "
            "the Bayesian back end (its priors keep the estimate finite) or a design-based "
            "interval (evalmix.interval)")


class _LaplaceDeviance:
    """Laplace-approximated deviance of a logit GLMM, lme4's nAGQ = 1 (PIRLS inside).

    ``deviance(theta, beta)`` maximises the penalised log-likelihood over the spherical
    random effects ``u`` (``b = Lambda u``) by Newton steps with step halving, then
    returns ``-2 log p(y | eta_hat) + |u_hat|^2 + log|L|^2``; ``gradient`` adds its exact
    gradient in (theta, beta). The last ``u_hat`` warm-starts the next call. ``Z`` is
    sparse and ``Lambda Z'WZ Lambda + I`` is factored by :class:`~evalmix.models.frequentist._pls.
    CrossedDesign` (largest term's diagonal block eliminated), so no N x N or N x q
    matrix is formed.
    """

    #: weight of the boundary-avoiding SD penalty (:meth:`penalty_terms`; 0: glmer's fit)
    sd_penalty = 0.0

    def __init__(self, y: np.ndarray, trials: np.ndarray, X: np.ndarray,
                 terms: Sequence[RandomTerm], deadline: float | None = None):
        from scipy.special import gammaln

        self.y, self.m, self.X = y, trials, X
        # correlated terms: theta is lme4's (Cholesky entries), Z Lambda is set into the
        # design's covariates and the factor is taken with unit scaling (_theta.py)
        self.tmap = ThetaMap(terms)
        self._theta_set: np.ndarray | None = None
        # indicator columns (e.g. 99 model effects) make X mostly zeros: keep it sparse
        self.Xop = (sparse.csr_array(X) if np.count_nonzero(X) < _SPARSE_X * X.size
                    else X)
        self.design = CrossedDesign(terms, y.size, deadline=deadline)
        self.comp = self.design.comp
        self.q = self.design.q
        self.u = np.zeros(self.q)
        k = trials * y
        self.const = float(np.sum(gammaln(trials + 1) - gammaln(k + 1)
                                  - gammaln(trials - k + 1)))
        self.last: tuple | None = None
        self.offsets = np.concatenate([[0], np.cumsum([t.n_levels for t in terms])]
                                      ).astype(np.int64)
        self.codes = [np.asarray(t.codes, dtype=np.int64) for t in terms]

    def lam(self, theta: np.ndarray) -> np.ndarray:
        """Per-column scaling of ``Z``: ``theta`` per column for independent terms; ones
        when terms are correlated (then ``Z Lambda(theta)`` is set into the design)."""
        if self.tmap.diagonal:
            return theta[self.comp]
        if self._theta_set is None or not np.array_equal(theta, self._theta_set):
            self.xs = self.tmap.covariates(theta)
            self.design.set_covariates(self.xs)
            self._theta_set = np.array(theta, dtype=float)
        return np.ones(self.q)

    def _eval(self, eta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Log-likelihood, ``mu`` and IRLS weights ``m mu (1 - mu)`` from one ``exp``
        (transcendentals dominate a PIRLS step at 100,000 rows)."""
        e = np.exp(-np.abs(eta))
        ll = float(np.sum(self.m * (self.y * eta - np.maximum(eta, 0.0) - np.log1p(e))))
        inv = 1.0 / (1.0 + e)
        mu = np.where(eta >= 0, inv, e * inv)
        return ll, mu, self.m * mu * (1 - mu)

    def xtwx(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``X'WX`` (p x p) and ``Z'WX`` (q x p, natural order), dense."""
        if sparse.issparse(self.Xop):
            WX = sparse.csr_array(sparse.diags_array(w) @ self.Xop)
            return ((self.Xop.T @ WX).toarray(),
                    np.asarray((self.design.Zt @ WX).toarray()))
        WX = w[:, None] * self.X
        return self.X.T @ WX, self.design.zt(WX)

    def pirls(self, theta: np.ndarray, beta: np.ndarray, *, joint: bool = False,
              tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
        """Conditional modes ``u`` (and ``beta`` when ``joint``, lme4's nAGQ = 0) by
        penalised IRLS: Newton steps on ``log p(y | eta) - |u|^2 / 2`` with step halving.
        Leaves the factor at the optimum in ``self.last``; returns ``(u, beta)``."""
        des = self.design
        lam = self.lam(theta)
        u, beta = self.u.copy(), np.asarray(beta, dtype=float).copy()
        X = self.Xop

        def eta_of(u_: np.ndarray, b_: np.ndarray) -> np.ndarray:
            return X @ b_ + des.zu(lam * u_)

        eta = eta_of(u, beta)
        ll, mu, w = self._eval(eta)
        for _ in range(200):
            pl = float(ll - 0.5 * u @ u)
            F = des.factor(lam, w)
            r = self.m * (self.y - mu)
            g_u = lam * des.zt(r) - u
            du = F.solve(g_u)
            if joint:
                xwx, ztwx = self.xtwx(w)
                R = lam[:, None] * ztwx
                Y = F.solve(R)
                M = xwx - R.T @ Y
                try:
                    db = np.linalg.solve(M, X.T @ r - R.T @ du)
                except np.linalg.LinAlgError:  # weights at 0: separation, checked later
                    db = np.linalg.lstsq(M, X.T @ r - R.T @ du, rcond=None)[0]
                du = du - Y @ db
            else:
                db = np.zeros_like(beta)
            if max(np.max(np.abs(du), initial=0.0), np.max(np.abs(db), initial=0.0)) < tol:
                break
            t = 1.0
            while True:
                u_new, b_new = u + t * du, beta + t * db
                eta_new = eta_of(u_new, b_new)
                ll_new, mu_new, w_new = self._eval(eta_new)
                pl_new = float(ll_new - 0.5 * u_new @ u_new)
                if pl_new >= pl - 1e-12 * max(1.0, abs(pl)) or t < 1e-8:
                    break
                t /= 2
            u, beta, eta, ll, mu, w = u_new, b_new, eta_new, ll_new, mu_new, w_new
        self.u = u
        self.last = (theta, lam, u, beta, eta, F, ll, mu, w)
        return u, beta

    def _value(self) -> float:
        assert self.last is not None
        _, _, u, _, _, F, ll, _, _ = self.last
        return float(-2 * (ll + self.const) + u @ u + F.logdet)

    def __call__(self, theta: np.ndarray, beta: np.ndarray) -> float:
        self.pirls(np.asarray(theta, dtype=float), beta)
        return self._value()

    def profiled(self, theta: np.ndarray, beta: np.ndarray) -> tuple[float, np.ndarray]:
        """lme4's nAGQ = 0 deviance: ``beta`` and ``u`` jointly by PIRLS at ``theta``
        (plus the SD penalty, :meth:`penalty_terms`)."""
        _, b = self.pirls(np.asarray(theta, dtype=float), beta, joint=True, tol=1e-8)
        return self._value() + self.penalty_terms(theta)[0], b

    def penalty_terms(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``(value, gradient in theta)`` of the boundary-avoiding penalty
        ``-sd_penalty * sum log theta_ii`` (0 when ``sd_penalty`` is 0): with 2, minus
        twice the log density of Chung et al.'s Wishart(d + 2, infinite scale) prior on
        each block's covariance (gamma(2, 0) on a lone SD), blme's device against
        variance estimates at 0."""
        g = np.zeros(self.tmap.n_theta)
        if not self.sd_penalty:
            return 0.0, g
        d = self.tmap.is_diag_entry
        th = np.maximum(np.asarray(theta, dtype=float)[d], 1e-150)
        g[d] = -self.sd_penalty / th
        return float(-self.sd_penalty * np.sum(np.log(th))), g

    def theta_bounds(self) -> list[tuple[float | None, float | None]]:
        """lme4's bounds on theta; with the SD penalty the diagonal entries also stay below
        :data:`_PENALISED_MAX_SD`: the penalty rewards large SDs a little, so on separated
        data (an item always right) they would otherwise run off until the factor breaks
        down, instead of stopping for the separation check."""
        if not self.sd_penalty:
            return list(self.tmap.bounds)
        return [(0.0, _PENALISED_MAX_SD) if d else (None, None)
                for d in self.tmap.is_diag_entry]

    def gradient(self, theta: np.ndarray, beta: np.ndarray) -> tuple[float, np.ndarray]:
        """The penalised deviance (:meth:`penalty_terms`) and its exact gradient in
        (theta, beta) (:meth:`deviance_gradient`)."""
        f, g = self.deviance_gradient(theta, beta)
        if self.sd_penalty:
            pv, pg = self.penalty_terms(theta)
            f += pv
            g = g.copy()
            g[:pg.size] += pg
        return f, g

    def deviance_gradient(self, theta: np.ndarray, beta: np.ndarray
                          ) -> tuple[float, np.ndarray]:
        """Deviance and its exact gradient in (theta, beta).

        With ``r = m (y - mu)``, ``w = m mu (1 - mu)``, ``w' = w (1 - 2 mu)``, leverages
        ``h_i = z_i' Lambda A^-1 Lambda z_i``, ``g = h w'``, ``v = A^-1 Lambda Z' g`` and
        ``s = Z Lambda v``: ``d/dbeta = -2 X'r + X'(g - w s)`` and, per column j of term
        k, ``-2 (Z'r)_j u_j + 2 (1 - (A^-1)_jj) / theta_k + u_j (Z'(g - w s))_j +
        v_j (Z'r)_j`` summed over the term (envelope theorem at ``u_hat`` plus the
        derivative of ``log|A|`` through ``Lambda`` and through ``W(eta_hat)``).
        """
        theta = np.asarray(theta, dtype=float)
        f = self(theta, beta)
        assert self.last is not None
        if not self.tmap.diagonal:
            return f, self._gradient_blocks()
        _, lam, u, _, _, F, _, mu, w = self.last
        des = self.design
        r = self.m * (self.y - mu)
        h, diag = F.leverages(lam)
        g = h * w * (1 - 2 * mu)
        v = F.solve(lam * des.zt(g))
        gs = g - w * des.zu(lam * v)
        ztr = des.zt(r)
        per_col = -2 * ztr * u + u * des.zt(gs) + v * ztr
        th = theta[self.comp]
        with np.errstate(divide="ignore", invalid="ignore"):
            per_col += np.where(th > 0, 2 * (1 - diag) / th, 0.0)
        g_theta = np.bincount(self.comp, weights=per_col, minlength=theta.size)
        g_beta = self.Xop.T @ (gs - 2 * r)
        return f, np.concatenate([g_theta, g_beta])


    def _gradient_blocks(self) -> np.ndarray:
        """The gradient of :meth:`gradient` when terms are correlated, in lme4's theta:
        ``dD/dL_ab = sum_i z_ia Q_ib`` with, per row and term, ``Q = -2 r u + 2 w m +
        (g - w s) u + r v`` (``m = A^-1 z~_i`` at the term's column, ``z~`` the rows of
        ``Z Lambda``; ``u``, ``v`` at the row's level; the rest as in :meth:`gradient`)."""
        assert self.last is not None
        _, _, u, _, _, F, _, mu, w = self.last
        des = self.design
        r = self.m * (self.y - mu)
        ms = F.row_solves()
        h = sum(x * mt for x, mt in zip(self.xs, ms, strict=True))
        g = h * w * (1 - 2 * mu)
        v = F.solve(des.zt(g))
        gs = g - w * des.zu(v)
        q = []
        for j, mt in enumerate(ms):
            idx = self.offsets[j] + self.codes[j]
            q.append(-2 * r * u[idx] + 2 * w * mt + gs * u[idx] + r * v[idx])
        g_theta = self.tmap.gradient(q)
        g_beta = self.Xop.T @ (gs - 2 * r)
        return np.concatenate([g_theta, g_beta])


def fit_laplace_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, trials: np.ndarray | None = None,
                       level: float = 0.95, maxiter: int = 500,
                       binomial_constant: bool = True, sd_penalty: float = 0.0,
                       deadline: float | None = None) -> CrossedFit:
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
        Fixed-effects design (include the intercept column).
    fe_names : sequence of str
        Names of the columns of ``X``.
    terms : sequence of RandomTerm
        The random terms (crossed or nested factors, intercepts or slopes).
    trials : (n,) array, optional
        Binomial trials per row (default 1).
    level : float
        Level of the Wald intervals.
    maxiter : int
        Maximum optimiser iterations.
    binomial_constant : bool
        Include ``log C(trials, successes)`` in the log-likelihood (as glmer does for
        counts); False gives the log-likelihood of the underlying 0/1 rows.
    sd_penalty : float
        0 (default): maximum likelihood, glmer's fit. 2: the penalised likelihood of
        Chung et al. (2013, 2015) -- minus twice the log density of a Wishart(d + 2,
        infinite scale) prior on each term's covariance (a gamma(2, 0) prior on a lone
        SD) is added to the deviance, ``-2 sum log theta_ii`` -- whose mode is never on
        the boundary (an SD at 0, a correlation at +-1); blme's ``bglmer`` device. The
        standard errors and intervals come from the Hessian of the penalised objective;
        the reported log-likelihood is the unpenalised one at its optimum.
    deadline : float, optional
        A :func:`time.monotonic` instant; past it the fit raises
        :class:`~evalmix.models._deadline.StoppedAtLimit` (checked at every PIRLS step).

    Returns
    -------
    CrossedFit
        ``results`` is a :class:`LaplaceResults`.

    Examples
    --------
    >>> import numpy as np
    >>> from evalmix.models.frequentist._crossed import intercept_term
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
    Chung, Y., Rabe-Hesketh, S., Dorie, V., Gelman, A., Liu, J. (2013). A nondegenerate
    penalized likelihood estimator for variance parameters in multilevel models.
    Psychometrika 78(4), 685-709. doi:10.1007/s11336-013-9328-2
    Chung, Y., Gelman, A., Rabe-Hesketh, S., Liu, J., Dorie, V. (2015). Weakly
    informative prior for point estimation of covariance matrices in hierarchical
    models. Journal of Educational and Behavioral Statistics 40(2), 136-157.
    doi:10.3102/1076998615570945
    """
    with one_blas_thread():
        try:
            return _fit_laplace_arrays(y, X, fe_names, terms, trials=trials, level=level,
                                       maxiter=maxiter, binomial_constant=binomial_constant,
                                       sd_penalty=sd_penalty, deadline=deadline)
        except np.linalg.LinAlgError as e:  # the factor broke down: effects at infinity
            raise EvalmixError(
                f"the Laplace fit broke down numerically ({e}): the outcome is "
                "(quasi-)separated (e.g. a level or condition always right), so the "
                "likelihood has no finite maximum. Report a design-based interval "
                "(evalmix.interval) or use the Bayesian back end") from e


def _fit_laplace_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, trials: np.ndarray | None = None,
                       level: float = 0.95, maxiter: int = 500,
                       binomial_constant: bool = True, sd_penalty: float = 0.0,
                       deadline: float | None = None) -> CrossedFit:
    y, X = _check_arrays(y, X, fe_names, terms)
    if np.any((y < 0) | (y > 1)):
        raise EvalmixError("method='laplace' fits a logit model and needs a 0/1 (or "
                           "fractional 0..1) outcome; use method='mixedlm' for numeric scores")
    m = np.ones(y.size) if trials is None else np.asarray(trials, dtype=float)
    if m.shape != y.shape or np.any(m <= 0):
        raise EvalmixError("trials must be positive, one per row")
    _check_not_degenerate(y, m)
    k, p = len(terms), X.shape[1]
    z = _z(level)
    dev = _LaplaceDeviance(y, m, X, terms, deadline)
    dev.sd_penalty = float(sd_penalty)
    if not binomial_constant:
        dev.const = 0.0
    if not dev.tmap.diagonal:
        dev.tmap.check_levels()
        return fit_correlated(dev, fe_names, terms, level=level, z=z, maxiter=maxiter,
                              check_separation=_check_separation,
                              results_cls=LaplaceResults)

    # stage 1 (lme4's nAGQ = 0): theta alone, beta and u jointly by PIRLS; only a start
    # for stage 2, so a loose tolerance (it was 2/3 of the work at 1e-10)
    beta = np.zeros(p)
    state = {"beta": beta}

    def f0(theta: np.ndarray) -> float:
        val, b = dev.profiled(theta, state["beta"])
        state["beta"] = b
        return val

    dev.u = np.zeros(dev.q)
    out0 = optimize.minimize(f0, np.ones(k), method="L-BFGS-B", bounds=dev.theta_bounds(),
                             options={"ftol": 1e-4, "maxiter": maxiter})
    f0(out0.x)

    # stage 2 (nAGQ = 1): (theta, beta) jointly with the exact gradient
    def fg(x: np.ndarray) -> tuple[float, np.ndarray]:
        return dev.gradient(x[:k], x[k:])

    x = np.concatenate([np.maximum(out0.x, 1e-3), state["beta"]])
    bounds = dev.theta_bounds() + [(None, None)] * p
    x, out = polish(fg, x, bounds, maxiter)
    _, g = fg(x)
    g[:k] = np.where((x[:k] <= 0) & (g[:k] > 0), 0.0, g[:k])
    grad = float(np.max(np.abs(g)))
    g_at_opt = g.copy()
    sd = x[:k].copy()
    singular = sd < SINGULAR_TOL * np.sqrt(LOGIT_RESIDUAL_VAR)
    sd[singular] = 0.0
    keep = np.flatnonzero(~singular)

    # Hessian in (log SD kept, beta) by central differences of the exact gradient; with
    # many fixed effects the beta-beta block is 2 (X'WX - X'WZL A^-1 LZ'WX), the exact
    # Hessian of the penalised deviance with u profiled out, which leaves out only the
    # second derivative of log|A| in beta (lme4's use.hessian = FALSE block; O(1) against
    # O(rows)), and saves 2p gradient evaluations
    def grad_v(v: np.ndarray) -> np.ndarray:
        th = sd.copy()
        th[keep] = np.exp(v[:keep.size])
        _, gg = dev.gradient(th, v[keep.size:])
        return np.concatenate([gg[keep] * th[keep], gg[k:]])

    v0 = np.concatenate([np.log(sd[keep]), x[k:]])
    full = p <= _FULL_HESSIAN_MAX_FIXED
    u_opt = dev.u.copy()
    hess = np.empty((v0.size, v0.size))
    for j in range(v0.size if full else keep.size):
        step = 1e-4 * max(1.0, abs(v0[j]))
        up, dn = v0.copy(), v0.copy()
        up[j] += step
        dn[j] -= step
        dev.u = u_opt.copy()
        g_up = grad_v(up)
        dev.u = u_opt.copy()
        hess[:, j] = (g_up - grad_v(dn)) / (2 * step)
    dev.u = u_opt
    fval = dev(sd, x[k:])  # conditional modes and factor at the optimum
    if not full:
        assert dev.last is not None
        _, lam_o, _, _, _, F_o, _, _, w_o = dev.last
        xwx, ztwx = dev.xtwx(w_o)
        R = lam_o[:, None] * ztwx
        hess[keep.size:, keep.size:] = 2 * (xwx - R.T @ F_o.solve(R))
        hess[:keep.size, keep.size:] = hess[keep.size:, :keep.size].T
    hess = (hess + hess.T) / 2
    try:
        cov = 2 * np.linalg.inv(hess)
        se = np.sqrt(np.diag(cov))
    except np.linalg.LinAlgError:
        cov = np.full(hess.shape, np.nan)
        se = np.full(v0.size, np.nan)
    _check_separation(fe_names, x[k:], se[keep.size:], np.linalg.eigvalsh(hess))
    # lme4's relative-gradient check: the Newton step H^-1 g (in log SD, beta) is small;
    # an absolute gradient bound alone fails at 1M rows, where the deviance is ~1e6
    g_v = np.concatenate([g_at_opt[keep] * sd[keep], g_at_opt[k:]])
    with np.errstate(invalid="ignore"):
        rel = float(np.max(np.abs(np.linalg.solve(hess, g_v)), initial=0.0)) \
            if np.all(np.isfinite(hess)) else np.inf
    converged = grad < 1e-3 or rel < _REL_GRAD_TOL
    lo, hi = np.zeros(k), np.full(k, np.nan)
    lo[keep] = sd[keep] * np.exp(-z * se[:keep.size])
    hi[keep] = sd[keep] * np.exp(z * se[:keep.size])
    fe_cov = cov[keep.size:, keep.size:]
    assert dev.last is not None
    _, lam, u, _, _, F, _, _, w = dev.last
    slopes = slope_levels(terms)
    fe_re_cov, fe_re_index = (
        joint_cov(F, lam, *dev.xtwx(w), slopes, 1.0)
        if slopes.size else (None, None))
    # lme4's condVar: conditional SDs given beta and the SDs
    re_sd = lam * np.sqrt(np.clip(F.inverse_pieces()[0], 0.0, None))
    modes = u * lam
    results = LaplaceResults(params=np.concatenate([sd, x[k:]]), cov=fe_cov, deviance=fval,
                             llf=-fval / 2, modes=modes, converged=converged)
    return CrossedFit(
        method="laplace", fe_names=tuple(fe_names), fe_est=x[k:].copy(),
        fe_se=np.sqrt(np.diag(fe_cov)), vc_names=tuple(t.name for t in terms), vc_sd=sd,
        vc_lo=lo, vc_hi=hi, resid_sd=float(np.sqrt(LOGIT_RESIDUAL_VAR)), resid_lo=np.nan,
        resid_hi=np.nan, level=level, converged=converged, grad_norm=grad, results=results,
        singular=tuple(np.asarray([t.name for t in terms])[singular].tolist()),
        re_est=modes, re_sd=re_sd, fe_re_cov=fe_re_cov, fe_re_index=fe_re_index,
        details={"deviance": fval, "loglik": -fval / 2,
                 "optimizer": "nAGQ=0 start (L-BFGS-B over SDs, PIRLS over fixed and random "
                              "effects), then L-BFGS-B over (SD, beta) with the exact "
                              "gradient of the Laplace deviance (PIRLS inside)",
                 "optimizer_message": str(out.message),
                 "interval": "Wald z (fixed effects); Wald on log-SD (variance components), "
                             "from the Hessian of the Laplace deviance (central differences "
                             "of its exact gradient)"},
    )

