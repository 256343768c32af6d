"""REML fit of a linear mixed model with crossed variance components (``"mixedlm"``).

:class:`statsmodels.regression.mixed_linear_model.MixedLM`, REML, one group holding
every row and one variance component per term (``exog_vc``). Exact REML for continuous
outcomes; on a 0/1 outcome it is a *linear probability* model (an approximation:
variances are on the probability scale and shrink towards 0/1 bounds).

The optimum is found on lme4's profiled REML criterion computed from the model's
cross-products by sparse penalised least squares (cost per evaluation in the levels,
not the rows; bounded at SD = 0), then statsmodels is fitted
from it (statsmodels' own L-BFGS from its default start stops far from the optimum on
crossed designs; see ``shared/PERF_NOTES.md``). Intervals: Wald ``t`` with containment df
for fixed effects; Wald on log-SD for the variance components (glmmTMB's default), from
a numerical Hessian of the full REML log-likelihood in (log SD_k, log sigma).

The sparse factor of ``Lambda Z'Z Lambda + I`` (:mod:`evalmix.models._pls`) and the
joint covariance of (fixed, random) effects (:func:`joint_cov`) are shared with
:mod:`evalmix.models._laplace`.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.linalg import cho_solve, cholesky

from evalmix._blas import one_blas_thread
from evalmix.errors import EvalmixError
from evalmix.models._crossed import (
    SINGULAR_TOL,
    CrossedFit,
    _check_arrays,
    _term_matrix,
    _z,
)
from evalmix.models._deadline import check_deadline
from evalmix.models._pls import BlockFactor, CrossedDesign
from evalmix.models.spec import RandomTerm

__all__ = ["fit_mixedlm_arrays", "reml_deviance", "reml_scoring_step",
           "SCORING_MAX_LEVELS"]

#: statsmodels' MixedLM results object is built only up to this many levels in all.
_SM_MAX_LEVELS = 500


@dataclass(frozen=True, eq=False)
class _CrossProducts:
    """Sufficient statistics of a linear mixed model: the REML criterion needs only
    these cross-products (``Z'Z`` as sparse blocks, ``Z'X``, ``Z'y``, ``X'X``, ...), so one
    evaluation costs nothing in the rows."""

    design: CrossedDesign
    blocks: tuple
    ZtX: np.ndarray
    Zty: np.ndarray
    XtX: np.ndarray
    Xty: np.ndarray
    yty: float
    n: int
    p: int

    @property
    def comp(self) -> np.ndarray:
        return self.design.comp


def _cross_products(y: np.ndarray, X: np.ndarray, design: CrossedDesign) -> _CrossProducts:
    return _CrossProducts(design=design, blocks=design.blocks(), ZtX=design.zt(X),
                          Zty=design.zt(y), XtX=X.T @ X, Xty=X.T @ y, yty=float(y @ y),
                          n=y.size, p=X.shape[1])


def _reml_pieces(theta: np.ndarray, cp: _CrossProducts
                 ) -> tuple[float, float, float, np.ndarray, np.ndarray, BlockFactor]:
    """lme4's penalised least squares at relative SDs ``theta`` (SD_k / sigma).

    Returns log|L|^2, log|R_X|^2, the penalised RSS r^2, beta-hat, R_X' R_X and the
    factor of L L' = Lambda Z'Z Lambda + I (Bates et al. 2015, section 3).
    """
    lam = theta[cp.comp]
    F = cp.design.factor(lam, blocks=cp.blocks)
    R = lam[:, None] * np.column_stack([cp.ZtX, cp.Zty])
    Y = F.solve(R)
    Q = R.T @ Y
    p = cp.p
    M = cp.XtX - Q[:p, :p]
    RX = cholesky(M, lower=True)
    rhs = cp.Xty - Q[:p, p]
    beta = cho_solve((RX, True), rhs)
    r2 = cp.yty - Q[p, p] - rhs @ beta
    return (F.logdet, 2 * np.log(np.diag(RX)).sum(), float(r2), beta, M, F)


def reml_deviance(theta: np.ndarray, cp: _CrossProducts) -> float:
    """Profiled REML criterion -2 l_R(theta) (lme4's ``REMLcrit``).

    References
    ----------
    Bates, D. et al. (2015), eq. (41)-(42). doi:10.18637/jss.v067.i01
    """
    ld_l, ld_rx, r2, _, _, _ = _reml_pieces(np.asarray(theta, dtype=float), cp)
    big_n = cp.n - cp.p
    return float(ld_l + ld_rx + big_n * (1 + np.log(2 * np.pi * r2 / big_n)))


def _reml_loglik(phi: np.ndarray, cp: _CrossProducts) -> float:
    """Full REML log-likelihood at (log SD_1..K, log sigma); sigma not profiled out."""
    sigma2 = np.exp(2 * phi[-1])
    ld_l, ld_rx, r2, _, _, _ = _reml_pieces(np.exp(phi[:-1] - phi[-1]), cp)
    big_n = cp.n - cp.p
    return float(-0.5 * (ld_l + ld_rx + big_n * np.log(2 * np.pi * sigma2) + r2 / sigma2))


def _deviance_gradient(theta: np.ndarray, cp: _CrossProducts) -> np.ndarray:
    """Central-difference gradient of the REML criterion (forward at the zero bound).

    The criterion costs O(levels) per evaluation (not O(rows)) and has one parameter per
    term, so 2K evaluations per gradient are cheap; lme4 itself is derivative-free
    (BOBYQA) on the same criterion.
    """
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
    L-BFGS-B from theta = 1 (lme4's start), restarted from its end point until it stops
    moving; a second start at theta = 0.1 only when the first ends on the zero bound or
    short of a stationary point (a local optimum there is the known failure)."""
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
        interior = bool(np.all(best.x > SINGULAR_TOL))
        if interior and _projected_gradient(best.x, cp) < 1e-6 * max(1.0, abs(best.fun)):
            break
    assert best is not None
    return best


def _projected_gradient(theta: np.ndarray, cp: _CrossProducts) -> float:
    g = _deviance_gradient(theta, cp)
    g = np.where((theta <= 0) & (g > 0), 0.0, g)  # at the bound a positive slope is fine
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
    balanced data whatever ``s`` (tests/test_gstudy.py checks it), and a fixed point at
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


def fit_mixedlm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, level: float = 0.95,
                       maxiter: int = 1000, deadline: float | None = None,
                       results: bool = True) -> CrossedFit:
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
    >>> from evalmix.models._crossed import intercept_term
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


def _fit_mixedlm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                       terms: Sequence[RandomTerm], *, level: float = 0.95,
                       maxiter: int = 1000, deadline: float | None = None,
                       build_results: bool = True) -> CrossedFit:
    from statsmodels.tools.numdiff import approx_hess3

    y, X = _check_arrays(y, X, fe_names, terms)
    n, k = y.size, len(terms)
    z = _z(level)
    names = tuple(t.name for t in terms)
    design = CrossedDesign(terms, n, deadline=deadline)
    comp = design.comp
    cp = _cross_products(y, X, design)
    opt = _optimise_theta(cp, k, maxiter)
    theta = np.asarray(opt.x, dtype=float)
    grad = _projected_gradient(theta, cp)
    singular = theta < SINGULAR_TOL
    keep = np.flatnonzero(~singular)

    # estimates at the optimum (lme4: sigma^2 = r^2 / (n - p), vcov = sigma^2 M^-1)
    theta_hat = np.where(singular, 0.0, theta)
    _, _, r2, beta, M, F = _reml_pieces(theta_hat, cp)
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
    if build_results and keep.size and comp.size <= _SM_MAX_LEVELS:
        check_deadline(deadline)
        from statsmodels.regression.mixed_linear_model import MixedLM, VCSpec

        blocks = [_term_matrix(t, n) for t in terms]
        vc = VCSpec([names[j] for j in kept],
                    [[[f"{names[j]}[{i}]" for i in range(terms[j].n_levels)]] for j in kept],
                    [[blocks[j]] for j in kept])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MixedLM(y, X, groups=np.zeros(n), exog_vc=vc)
            results = model.fit(reml=True, method="lbfgs", start_params=theta[keep])

    # conditional modes b = Lambda u of every level and their conditional SDs
    lam = theta_hat[comp]
    resid_z = cp.Zty - cp.ZtX @ beta
    re_est = lam * F.solve(lam * resid_z)
    diag_inv = F.inverse_pieces()[0]
    re_sd = sigma * lam * np.sqrt(np.clip(diag_inv, 0.0, None))
    slopes = slope_levels(terms)
    fe_re_cov, fe_re_index = (joint_cov(F, lam, cp.XtX, cp.ZtX, slopes, sigma**2)
                              if slopes.size else (None, None))

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
        cov = np.full((phi0.size, phi0.size), np.nan)
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
        re_est=re_est, re_sd=re_sd, fe_re_cov=fe_re_cov, fe_re_index=fe_re_index,
        details={"reml_criterion": float(opt.fun), "theta": theta.tolist(),
                 "optimizer": "L-BFGS-B on lme4's profiled REML criterion, then "
                              "statsmodels MixedLM (lbfgs) from that optimum"
                              + ("" if results is not None else
                                 " (skipped: not asked for, more than "
                                 f"{_SM_MAX_LEVELS} levels or no nonzero component)"),
                 "optimizer_message": str(opt.message),
                 "interval": "Wald z (fixed effects); Wald on log-SD (variance components)",
                 # joint covariance of (log SD of the nonzero components, log sigma)
                 "logsd_cov": cov, "logsd_terms": tuple(kept)},
    )
