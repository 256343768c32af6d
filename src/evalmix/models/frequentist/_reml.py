"""REML fit of a linear mixed model with crossed variance components (``"mixedlm"``).

:class:`statsmodels.regression.mixed_linear_model.MixedLM`, REML, one group holding
every row and one variance component per term (``exog_vc``). Exact REML for continuous
outcomes; on a 0/1 outcome it is a *linear probability* model (an approximation:
variances are on the probability scale and shrink towards 0/1 bounds).

The optimum is found on lme4's profiled REML criterion by sparse penalised least squares
(:class:`_RemlCriterion`: for independent terms from the model's cross-products, so one
evaluation costs nothing in the rows) with its exact gradient (one selected inverse of
the sparse factor per gradient, instead of 2K evaluations of central differences: on
WildBench's scores 98 evaluations instead of 2,600), by L-BFGS-B bounded at SD = 0.
Correlated terms ``(1 + x|g)`` use lme4's theta (:mod:`evalmix.models.frequentist._theta`). Where
statsmodels can hold the model (independent terms, at most 500 levels) its ``MixedLM``
is fitted from the optimum for its results object (statsmodels' own L-BFGS from its
default start stops far from the optimum on crossed designs; see
``shared/PERF_NOTES.md``). Intervals: Wald ``t`` with containment df for fixed effects;
Wald on log-SD for the variance components and on atanh for correlations (glmmTMB's
default), from the Hessian of the full REML log-likelihood in (log SD_k, atanh rho,
log sigma) by central differences of its exact score.

The sparse factor of ``Lambda Z'Z Lambda + I`` (:mod:`evalmix.models.frequentist._pls`) and the
joint covariance of (fixed, random) effects (:func:`joint_cov`) are shared with
:mod:`evalmix.models.frequentist._laplace`.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy.linalg import cho_solve, cholesky

from evalmix._blas import one_blas_thread
from evalmix.models._deadline import check_deadline
from evalmix.models.frequentist._crossed import (
    SINGULAR_TOL,
    CrossedFit,
    _check_arrays,
    _term_matrix,
    _z,
)
from evalmix.models.frequentist._laplace_corr import condvar
from evalmix.models.frequentist._pls import BlockFactor, CrossedDesign
from evalmix.models.frequentist._theta import ThetaMap
from evalmix.models.spec import RandomTerm

__all__ = ["fit_mixedlm_arrays", "reml_deviance"]

#: statsmodels' MixedLM results object is built only up to this many levels in all.
_SM_MAX_LEVELS = 500


@dataclass(frozen=True, eq=False)
class _Pieces:
    """lme4's penalised least squares at one ``theta``: log|L|^2 (``logdet``), log|R_X|^2,
    the penalised RSS ``r2``, beta-hat, ``M = R_X' R_X``, the factor ``F`` of ``L L' =
    Lambda'Z'Z Lambda + I``, ``Y = A^-1 Lambda'Z'[X y]``, the spherical modes ``u`` and the
    per-column scaling ``lam`` of ``Z`` (ones when ``Z Lambda`` is set into the design)."""

    theta: np.ndarray
    logdet: float
    logdet_rx: float
    r2: float
    beta: np.ndarray
    M: np.ndarray
    F: BlockFactor
    Y: np.ndarray
    u: np.ndarray
    lam: np.ndarray


class _RemlCriterion:
    """lme4's profiled REML criterion ``-2 l_R(theta)`` and its exact gradient.

    Independent terms scale ``Z``'s columns by ``theta`` and reuse the cross-products
    ``Z'Z``, ``Z'X``, ``Z'y`` (one evaluation costs nothing in the rows); correlated terms
    ``(1 + x|g)`` set ``Z Lambda(theta)`` into the design (:mod:`evalmix.models.frequentist._theta`)
    and recompute them (O(rows) per evaluation). The last evaluation is kept, so the value
    and the gradient at one ``theta`` share one factorisation.

    The gradient (``H = I + Z Lambda Lambda'Z'``, ``P`` the REML projection, ``T = Z
    Lambda``): ``d/dL_ab = 2 sum_i z_ia Q_ib`` with, at row ``i``'s column of term ``b``,
    ``Q = (T A^-1)_i - (X - T W)_i M^-1 W_col' - (n - p) / r^2 e_i u_col`` (``W = A^-1 T'X``,
    ``e`` the penalised residual): the derivative of ``log|H| + log|X'H^-1X|`` is ``tr(P
    dH)``, that of ``y'Py = r^2`` is ``-y'P dH P y``, and ``H^-1 T = T A^-1``,
    ``T'P y = u``.
    """

    def __init__(self, y: np.ndarray, X: np.ndarray, terms: Sequence[RandomTerm],
                 design: CrossedDesign):
        self.y, self.X, self.design = y, X, design
        self.n, self.p = X.shape
        self.tmap = ThetaMap(terms)
        self.tmap.check_levels()
        self.offsets = np.concatenate([[0], np.cumsum([t.n_levels for t in terms])]
                                      ).astype(np.int64)
        self.codes = [np.asarray(t.codes, dtype=np.int64) for t in terms]
        self.XtX, self.Xty, self.yty = X.T @ X, X.T @ y, float(y @ y)
        if self.tmap.diagonal:
            self.blocks = design.blocks()
            self.ZtXy = design.zt(np.column_stack([X, y]))
        self.last: _Pieces | None = None
        self.evaluations = 0

    def pieces(self, theta: np.ndarray) -> _Pieces:
        theta = np.asarray(theta, dtype=float)
        if self.last is not None and np.array_equal(theta, self.last.theta):
            return self.last
        self.evaluations += 1
        des, p = self.design, self.p
        if self.tmap.diagonal:
            lam = theta[des.comp]
            blocks = self.blocks
            R = lam[:, None] * self.ZtXy
        else:
            lam = np.ones(des.q)
            des.set_covariates(self.tmap.covariates(theta))
            blocks = des.blocks()
            R = des.zt(np.column_stack([self.X, self.y]))
        F = des.factor(lam, blocks=blocks)
        Y = F.solve(R)
        Q = R.T @ Y
        M = self.XtX - Q[:p, :p]
        RX = cholesky(M, lower=True)
        rhs = self.Xty - Q[:p, p]
        beta = cho_solve((RX, True), rhs)
        r2 = float(self.yty - Q[p, p] - rhs @ beta)
        self.last = _Pieces(theta.copy(), F.logdet, 2 * float(np.log(np.diag(RX)).sum()),
                            r2, beta, M, F, Y, Y[:, p] - Y[:, :p] @ beta, lam)
        return self.last

    def __call__(self, theta: np.ndarray) -> float:
        pc = self.pieces(theta)
        big_n = self.n - self.p
        return float(pc.logdet + pc.logdet_rx
                     + big_n * (1 + np.log(2 * np.pi * pc.r2 / big_n)))

    def loglik(self, theta: np.ndarray, sigma2: float) -> float:
        """Full REML log-likelihood at relative factors ``theta`` and residual variance
        ``sigma2`` (sigma not profiled out)."""
        pc = self.pieces(theta)
        big_n = self.n - self.p
        return float(-0.5 * (pc.logdet + pc.logdet_rx + big_n * np.log(2 * np.pi * sigma2)
                             + pc.r2 / sigma2))

    def _gradient_parts(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``d(log|A| + log|M|)/dtheta`` and ``d r^2 / dtheta``."""
        pc = self.pieces(theta)
        des, p = self.design, self.p
        lam = pc.lam
        ms = pc.F.row_solves(lam if self.tmap.diagonal else None)
        W = pc.Y[:, :p]
        G = (self.X - des.zu(lam[:, None] * W)) @ np.linalg.inv(pc.M)
        e = self.y - self.X @ pc.beta - des.zu(lam * pc.u)
        q_det, q_r2 = [], []
        for j, mt in enumerate(ms):
            idx = self.offsets[j] + self.codes[j]
            q_det.append(2 * (mt - np.einsum("ij,ij->i", G, W[idx])))
            q_r2.append(-2 * e * pc.u[idx])
        return self.tmap.gradient(q_det), self.tmap.gradient(q_r2)

    def value_and_gradient(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        f = self(theta)
        g_det, g_r2 = self._gradient_parts(theta)
        return f, g_det + (self.n - self.p) / self.last.r2 * g_r2  # type: ignore[union-attr]

    def loglik_gradient(self, theta: np.ndarray, sigma2: float) -> tuple[np.ndarray, float]:
        """Gradient of :meth:`loglik` in ``theta`` and in ``sigma2``."""
        g_det, g_r2 = self._gradient_parts(theta)
        r2 = self.pieces(theta).r2
        return (-0.5 * (g_det + g_r2 / sigma2),
                -0.5 * ((self.n - self.p) / sigma2 - r2 / sigma2**2))


def reml_deviance(theta: np.ndarray, crit: _RemlCriterion) -> float:
    """Profiled REML criterion -2 l_R(theta) (lme4's ``REMLcrit``).

    References
    ----------
    Bates, D. et al. (2015), eq. (41)-(42). doi:10.18637/jss.v067.i01
    """
    return crit(np.asarray(theta, dtype=float))


def _optimise_theta(crit: _RemlCriterion, maxiter: int) -> optimize.OptimizeResult:
    """Minimise the REML criterion over theta (diagonal entries >= 0, like lme4) by
    L-BFGS-B with its exact gradient from lme4's start (theta = 1 on the diagonal),
    restarted from its end point until it stops moving; a second start at 0.1 only when
    the first ends on the zero bound or short of a stationary point (a local optimum
    there is the known failure: at 0 the gradient in that entry vanishes)."""
    tm = crit.tmap
    best = None
    for start in (tm.start(1.0), tm.start(0.1)):
        x = start
        for _ in range(4):
            out = optimize.minimize(crit.value_and_gradient, x, jac=True, method="L-BFGS-B",
                                    bounds=tm.bounds,
                                    options={"maxiter": maxiter, "ftol": 1e-12,
                                             "gtol": 1e-9})
            moved = not np.allclose(out.x, x, rtol=1e-7, atol=1e-9)
            x = out.x
            if not moved:
                break
        if best is None or out.fun < best.fun:
            best = out
        interior = bool(np.all(best.x[tm.is_diag_entry] > SINGULAR_TOL))
        if interior and _projected_gradient(best.x, crit) < 1e-6 * max(1.0, abs(best.fun)):
            break
    assert best is not None
    return best


def _projected_gradient(theta: np.ndarray, crit: _RemlCriterion) -> float:
    g = crit.value_and_gradient(theta)[1]
    at_bound = crit.tmap.is_diag_entry & (theta <= 0)
    g = np.where(at_bound & (g > 0), 0.0, g)  # at the bound a positive slope is fine
    return float(np.max(np.abs(g))) if g.size else 0.0


def slope_levels(terms: Sequence[RandomTerm]) -> np.ndarray:
    """Natural-order columns of ``Z`` that belong to random slopes (not intercepts)."""
    out, start = [], 0
    for t in terms:
        if not t.is_intercept:
            out.append(np.arange(start, start + t.n_levels))
        start += t.n_levels
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def joint_cov(F: BlockFactor, lam: np.ndarray, xwx: np.ndarray, ztwx: np.ndarray,
              idx: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Covariance of (beta, b[idx]) given the SDs, ``b = Lambda u``: ``scale`` times the
    inverse of the penalised least-squares Hessian [[X'WX, X'WZL], [LZ'WX, A]] restricted
    to the fixed effects and the random-effect columns ``idx`` (natural order), by the
    block inverse (no q x q matrix). Returns the matrix and its index into (beta, b).
    """
    p = xwx.shape[0]
    R = lam[:, None] * ztwx
    Y = F.solve(R)
    Minv = np.linalg.inv(xwx - R.T @ Y)
    Yi = Y[idx]
    cov = np.block([[Minv, -Minv @ Yi.T],
                    [-Yi @ Minv, F.submatrix_inverse(idx) + Yi @ Minv @ Yi.T]])
    dscale = np.concatenate([np.ones(p), lam[idx]])
    return scale * dscale[:, None] * cov * dscale[None, :], np.concatenate(
        [np.arange(p), p + idx])


def fit_mixedlm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, level: float = 0.95,
                       maxiter: int = 1000, deadline: float | None = None,
                       results: bool = True) -> CrossedFit:
    """REML fit of a linear mixed model with crossed variance components.

    The REML criterion is minimised over lme4's ``theta`` (relative SDs, or the entries
    of each correlated term's relative Cholesky factor) with its exact gradient; the
    estimates are lme4's (``sigma^2 = r^2 / (n - p)``, ``vcov = sigma^2 M^-1``).
    statsmodels ``MixedLM`` (one group spanning all rows, one variance component per
    term) is fitted from that optimum for ``results`` when the terms are independent
    and at most 500 levels. Components at zero are flagged as singular.

    Parameters
    ----------
    y : (n,) array
        Outcome (continuous, or 0/1 for a linear probability model).
    X : (n, k) array
        Fixed-effects design (include the intercept column).
    fe_names : sequence of str
        Names of the columns of ``X``.
    terms : sequence of RandomTerm
        Crossed random effects: intercepts, independent slopes, or correlated terms
        (the terms of one factor marked ``correlated``, lme4's ``(1 + x|g)``).
    level : float
        Confidence level of the Wald intervals (fixed effects; log-SD for components).
    maxiter : int
        Iteration limit of the optimiser.
    deadline : float, optional
        A :func:`time.monotonic` instant; past it the fit raises
        :class:`~evalmix.models._deadline.StoppedAtLimit` (checked at every evaluation).
    results : bool
        Build statsmodels' ``MixedLM`` results object from the optimum (up to 500
        levels in all; its refit can cost more than the fit). False: the estimates only.

    Returns
    -------
    CrossedFit

    Examples
    --------
    >>> import numpy as np
    >>> from evalmix.models.frequentist._crossed import intercept_term
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
    with one_blas_thread():
        return _fit_mixedlm_arrays(y, X, fe_names, terms, level=level, maxiter=maxiter,
                                   deadline=deadline, build_results=results)


def _zero_singular(tm: ThetaMap, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Theta with the rows of ``L`` of terms whose relative SD is below
    :data:`SINGULAR_TOL` set to 0, and the mask of those terms."""
    singular = tm.sds(theta) < SINGULAR_TOL
    factors = tm.factors(theta)
    for L, blk in zip(factors, tm.blocks, strict=True):
        for row, j in enumerate(blk):
            if singular[j]:
                L[row, :] = 0.0
    return tm.from_factors(factors), singular


def _theta_from(tm: ThetaMap, sd: np.ndarray, rho: dict[tuple[int, int], float],
                sigma: float) -> np.ndarray:
    """lme4's theta from the SDs of the terms, the within-block correlations and the
    residual SD: each block's ``L = diag(SD) chol(R) / sigma`` (a valid factor when an SD
    is 0)."""
    factors = []
    for blk in tm.blocks:
        R = np.eye(len(blk))
        for a in range(len(blk)):
            for b in range(a + 1, len(blk)):
                R[a, b] = R[b, a] = rho[(blk[a], blk[b])]
        factors.append(sd[blk][:, None] * _semidefinite_cholesky(R) / sigma)
    return tm.from_factors(factors)


def _semidefinite_cholesky(R: np.ndarray) -> np.ndarray:
    """Lower factor ``L`` with ``L L' = R`` for a correlation matrix that may be only
    semidefinite (a correlation held at +-1, where ``numpy.linalg.cholesky`` refuses):
    a pivot that is 0 (or negative by rounding) gives a zero column.

    Examples
    --------
    >>> _semidefinite_cholesky(np.array([[1.0, 1.0], [1.0, 1.0]]))
    array([[1., 0.],
           [1., 0.]])
    """
    n = len(R)
    L = np.zeros_like(R, dtype=float)
    for j in range(n):
        pivot = R[j, j] - L[j, :j] @ L[j, :j]
        L[j, j] = np.sqrt(pivot) if pivot > 1e-12 else 0.0
        if L[j, j] > 0:
            L[j + 1:, j] = (R[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


def _fit_mixedlm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                        terms: Sequence[RandomTerm], *, level: float = 0.95,
                        maxiter: int = 1000, deadline: float | None = None,
                        build_results: bool = True) -> CrossedFit:
    y, X = _check_arrays(y, X, fe_names, terms)
    n, k, p = y.size, len(terms), X.shape[1]
    z = _z(level)
    names = tuple(t.name for t in terms)
    design = CrossedDesign(terms, n, deadline=deadline)
    crit = _RemlCriterion(y, X, terms, design)
    tm = crit.tmap
    opt = _optimise_theta(crit, maxiter)
    theta = np.asarray(opt.x, dtype=float)
    grad = _projected_gradient(theta, crit)
    theta_hat, singular = _zero_singular(tm, theta)
    keep = np.flatnonzero(~singular)

    # estimates at the optimum (lme4: sigma^2 = r^2 / (n - p), vcov = sigma^2 M^-1)
    pc = crit.pieces(theta_hat)
    sigma = float(np.sqrt(pc.r2 / (n - p)))
    sd = tm.sds(theta_hat) * sigma
    beta, F = pc.beta, pc.F
    fe_cov = sigma**2 * np.linalg.inv(pc.M)
    # with the exact gradient the criterion is flat to rounding at the optimum
    converged = grad < 1e-6 * max(1.0, abs(float(opt.fun)))

    # conditional modes b = Lambda u of every level and their conditional SDs
    re_est = tm.lambda_blocks(theta_hat, pc.u, [t.n_levels for t in terms])
    fe_re_cov = fe_re_index = None
    if tm.diagonal:
        lam = pc.lam
        re_sd = sigma * lam * np.sqrt(np.clip(F.inverse_pieces()[0], 0.0, None))
        slopes = slope_levels(terms)
        if slopes.size:
            fe_re_cov, fe_re_index = joint_cov(F, lam, crit.XtX, crit.ZtXy[:, :p], slopes,
                                               sigma**2)
    else:
        re_sd = condvar(F, tm, theta_hat, terms, scale=sigma)

    # statsmodels MixedLM from the optimum (independent terms, without zero components);
    # its fit recomputes a Hessian that costs O(q^3) with sparse LU, so beyond a few
    # hundred levels only our (identical) numbers are returned
    results = None
    kept = [int(j) for j in keep]
    if build_results and tm.diagonal and keep.size and design.q <= _SM_MAX_LEVELS:
        check_deadline(deadline)
        from statsmodels.regression.mixed_linear_model import MixedLM, VCSpec

        mats = [_term_matrix(t, n) for t in terms]
        vc = VCSpec([names[j] for j in kept],
                    [[[f"{names[j]}[{i}]" for i in range(terms[j].n_levels)]] for j in kept],
                    [[mats[j]] for j in kept])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MixedLM(y, X, groups=np.zeros(n), exog_vc=vc)
            results = model.fit(reml=True, method="lbfgs", start_params=theta[keep])

    # Wald intervals on (log SD, atanh correlation, log sigma) from the Hessian of the
    # full REML log-likelihood; zero SDs and correlations at +-1 held fixed
    cors = tm.correlations(theta_hat)
    rho = {(i, j): r for i, j, r in cors}
    free_rho = [(i, j) for i, j, r in cors
                if not (singular[i] or singular[j]) and abs(r) < 0.999]

    def unpack(psi: np.ndarray) -> tuple[np.ndarray, float]:
        s = sd.copy()
        s[keep] = np.exp(psi[:keep.size])
        rr = dict(rho)
        for c, key in enumerate(free_rho):
            rr[key] = float(np.tanh(psi[keep.size + c]))
        sig = float(np.exp(psi[-1]))
        return _theta_from(tm, s, rr, sig), sig

    def score(psi: np.ndarray) -> np.ndarray:
        # d loglik / d psi through theta(psi) (Jacobian by differences of a cheap map)
        th, sig = unpack(psi)
        g_th, g_s2 = crit.loglik_gradient(th, sig**2)
        J = np.empty((th.size, psi.size))
        for c in range(psi.size):
            h = 1e-7
            up, dn = psi.copy(), psi.copy()
            up[c] += h
            dn[c] -= h
            J[:, c] = (unpack(up)[0] - unpack(dn)[0]) / (2 * h)
        out = J.T @ g_th
        out[-1] += g_s2 * 2 * sig**2
        return out

    psi0 = np.concatenate([np.log(sd[keep]), np.arctanh([rho[c] for c in free_rho]),
                           [np.log(sigma)]])
    # central differences of the exact score (step 1e-4 on the log / atanh scale):
    # 2 x dim gradient evaluations instead of ~2.5 dim^2 evaluations of the likelihood
    hess = np.empty((psi0.size, psi0.size))
    try:
        for c in range(psi0.size):
            up, dn = psi0.copy(), psi0.copy()
            up[c] += 1e-4
            dn[c] -= 1e-4
            # a block of 3+ correlated terms on the edge of the positive-definite cone:
            # a step in one correlation can leave it (LinAlgError): no Wald intervals
            hess[:, c] = (score(up) - score(dn)) / 2e-4
        hess = (hess + hess.T) / 2
        cov = np.linalg.inv(-hess)
        se = np.sqrt(np.diag(cov))
    except (np.linalg.LinAlgError, FloatingPointError):
        cov = np.full((psi0.size, psi0.size), np.nan)
        se = np.full(psi0.size, np.nan)
    lo, hi = np.zeros(k), np.full(k, np.nan)
    lo[keep] = sd[keep] * np.exp(-z * se[:keep.size])
    hi[keep] = sd[keep] * np.exp(z * se[:keep.size])
    correlations: list[dict[str, Any]] = []
    for i, j, r in cors:
        c_lo = c_hi = np.nan
        if (i, j) in free_rho:
            s_r = se[keep.size + free_rho.index((i, j))]
            c_lo, c_hi = np.tanh(np.arctanh(r) - z * s_r), np.tanh(np.arctanh(r) + z * s_r)
        correlations.append({"factor": terms[i].factor, "term_1": terms[i].term,
                             "term_2": terms[j].term, "correlation": r,
                             "lo": float(c_lo), "hi": float(c_hi)})
    boundary = tuple(f"cor({c['term_1']}, {c['term_2']})|{c['factor']}"
                     for c in correlations
                     if not np.isfinite(float(c["correlation"]))
                     or abs(float(c["correlation"])) > 0.999)
    sd_rows = np.r_[np.arange(keep.size), psi0.size - 1]
    return CrossedFit(
        method="mixedlm", fe_names=tuple(fe_names), fe_est=np.asarray(beta, dtype=float),
        fe_se=np.sqrt(np.diag(fe_cov)), fe_cov=fe_cov,
        vc_names=names, vc_sd=sd, vc_lo=lo, vc_hi=hi, resid_sd=sigma,
        resid_lo=float(sigma * np.exp(-z * se[-1])),
        resid_hi=float(sigma * np.exp(z * se[-1])), level=level, converged=converged,
        grad_norm=grad, results=results, singular=tuple(np.asarray(names)[singular].tolist()),
        re_est=re_est, re_sd=re_sd, fe_re_cov=fe_re_cov, fe_re_index=fe_re_index,
        details={"reml_criterion": float(crit(theta_hat)), "theta": theta_hat.tolist(),
                 "evaluations": crit.evaluations,
                 "correlations": correlations, "singular_correlations": boundary,
                 "blocks": [list(b) for b in tm.blocks],
                 "optimizer": "L-BFGS-B with the exact gradient of lme4's profiled REML "
                              "criterion"
                              + (", then statsmodels MixedLM (lbfgs) from that optimum"
                                 if results is not None else
                                 " (statsmodels MixedLM skipped: not asked for, more than "
                                 f"{_SM_MAX_LEVELS} levels, correlated terms or no nonzero "
                                 "component)"),
                 "optimizer_message": str(opt.message),
                 "interval": "Wald z (fixed effects); Wald on log-SD (variance components) "
                             "and atanh(correlation)",
                 # joint covariance of (log SD of the nonzero components, log sigma)
                 "logsd_cov": cov[np.ix_(sd_rows, sd_rows)], "logsd_terms": tuple(kept)},
    )
