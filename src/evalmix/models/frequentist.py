"""Frequentist (statsmodels) back ends for crossed random-effects models.

Four methods, all with *crossed* factors (every factor spans all rows); ``"auto"`` picks
``"mixedlm"`` for numeric outcomes and ``"laplace"`` for binary / tie-scored ones:

``"mixedlm"``
    :class:`statsmodels.regression.mixed_linear_model.MixedLM`, REML, one group holding
    every row and one variance component per term (``exog_vc``). Exact REML for
    continuous outcomes; on a 0/1 outcome it is a *linear probability* model (an
    approximation: variances are on the probability scale and shrink towards 0/1 bounds).
    The optimum is found on lme4's profiled REML criterion computed from the model's
    cross-products (O(q^3) per evaluation, bounded at SD = 0), then statsmodels is fitted
    from it (statsmodels' own L-BFGS from its default start stops far from the optimum
    on crossed designs; see ``shared/PERF_NOTES.md``). Intervals: Wald ``t`` with
    containment df for fixed effects; Wald on log-SD for the variance components
    (glmmTMB's default), from a numerical Hessian of the full REML log-likelihood in
    (log SD_k, log sigma).
``"laplace"``
    Maximum-likelihood logit GLMM with the random effects integrated out by the Laplace
    approximation: ``lme4::glmer``'s default (nAGQ = 1), implemented here (statsmodels
    has no Laplace GLMM) with penalised IRLS for the conditional modes and L-BFGS-B over
    (SDs, fixed effects). Matches glmer/glmmTMB on the frozen references. Wald intervals
    (``t`` with containment df for fixed effects; log scale for SDs) from the Hessian of
    the approximate deviance.
``"vb"``
    :class:`statsmodels.genmod.bayes_mixed_glm.BinomialBayesMixedGLM` ``fit_vb``:
    mean-field variational Bayes for a logit GLMM (binary outcomes). Approximate:
    mean-field VB understates the posterior SD of fixed effects correlated with the
    random effects (the intercept most of all).
``"map"``
    The same model's ``fit_map``: the joint posterior mode over fixed effects, log-SDs
    *and random effects*, with a Laplace (Hessian) covariance. Approximate: unlike
    ``lme4::glmer``'s Laplace, it does not integrate the random effects out, so the
    variance components are those of a joint mode (pulled towards the log-SD prior).

Both Bayesian GLMM methods put independent priors ``N(0, fe_prior_sd^2)`` on the fixed
effects and ``N(0, vc_prior_sd^2)`` on each log-SD (statsmodels' ``fe_p`` and ``vcp_p``).

The array-level functions (:func:`fit_mixedlm_arrays`, :func:`fit_laplace_arrays`,
:func:`fit_glmm_arrays`) take
the outcome, a fixed-effects design matrix and integer codes per factor, and return a
:class:`CrossedFit`; :func:`fit_statsmodels` builds those from an
:class:`~evalmix.data.table.EvalTable` and packs the tidy :class:`ModelFit`.

References
----------
Bates, D., Maechler, M., Bolker, B., Walker, S. (2015). Fitting linear mixed-effects
models using lme4. Journal of Statistical Software 67(1). doi:10.18637/jss.v067.i01
Blei, D. M., Kucukelbir, A., McAuliffe, J. D. (2017). Variational inference: a review
for statisticians. JASA 112(518), 859-877. doi:10.1080/01621459.2017.1285773
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import optimize, sparse, stats

from evalmix.errors import (
    ConvergenceWarning,
    EvalmixError,
    FewClustersWarning,
    SingularFitWarning,
    check_option,
)
from evalmix.models.result import FIXED_COLUMNS, VARIANCE_COLUMNS, ModelFit
from evalmix.models.spec import ModelSpec, RandomTerm, build_spec, collapse

__all__ = [
    "METHODS",
    "CrossedFit",
    "fit_mixedlm_arrays",
    "reml_deviance",
    "fit_glmm_arrays",
    "fit_laplace_arrays",
    "LaplaceResults",
    "fit_statsmodels",
    "intercept_term",
    "containment_df",
]

Method = Literal["auto", "mixedlm", "laplace", "vb", "map"]
METHODS: tuple[str, ...] = ("auto", "mixedlm", "laplace", "vb", "map")

#: A component is reported as singular when its SD is below this fraction of the
#: residual SD (lme4's ``isSingular`` uses 1e-4 on the same relative scale).
SINGULAR_TOL = 1e-4
#: Factors with fewer levels get a FewClustersWarning (their SD is barely identified).
FEW_LEVELS = 5
#: Latent residual variance of the logistic distribution.
LOGIT_RESIDUAL_VAR = np.pi**2 / 3
#: An SD interval whose upper/lower ratio exceeds this is uninformative (near-zero SD).
_MAX_INTERVAL_RATIO = 1e4
#: statsmodels' MixedLM results object is built only up to this many levels in all.
_SM_MAX_LEVELS = 500
#: Gradient norm (per row, on the optimiser's scale) above which a fit is not converged.
GRAD_TOL = 1e-5


@dataclass(frozen=True)
class CrossedFit:
    """Array-level result of a statsmodels crossed fit (one row per term / component).

    ``vc_sd`` are on the latent (logit) scale for GLMMs; ``resid_sd`` is the residual SD
    (``pi / sqrt(3)`` fixed for logit). ``vc_lo``/``vc_hi`` bound the SDs (NaN when the
    method gives no interval). ``results`` is the statsmodels results object.
    ``re_est``/``re_sd`` hold every level's random effect (all terms concatenated in term
    order): conditional modes and their conditional SDs given the fixed effects and SDs
    (REML/Laplace; lme4's ``ranef(condVar = TRUE)``), posterior means and SDs (VB), or
    the joint mode and its Laplace SD (MAP). ``fe_re_cov`` is the joint covariance of (fixed effects, random
    effects) given the SDs where the method has one (REML/Laplace: the inverse of the
    penalised least-squares Hessian; MAP: its Laplace covariance), else None (VB).
    """

    method: str
    fe_names: tuple[str, ...]
    fe_est: np.ndarray
    fe_se: np.ndarray
    vc_names: tuple[str, ...]
    vc_sd: np.ndarray
    vc_lo: np.ndarray
    vc_hi: np.ndarray
    resid_sd: float
    resid_lo: float
    resid_hi: float
    level: float
    converged: bool
    grad_norm: float
    results: Any = None
    singular: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    re_est: np.ndarray | None = None
    re_sd: np.ndarray | None = None
    fe_re_cov: np.ndarray | None = None
    fe_cov: np.ndarray | None = None


# ---------------------------------------------------------------------------- helpers
def _z(level: float) -> float:
    if not 0 < level < 1:
        raise EvalmixError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}")
    return float(stats.norm.ppf(0.5 + level / 2))


def _term_matrix(term: RandomTerm, n: int) -> sparse.csr_array:
    vals = np.asarray(term.x, dtype=float)
    return sparse.csr_array((vals, (np.arange(n), term.codes)), shape=(n, term.n_levels))


def intercept_term(factor: str, labels: Any) -> RandomTerm:
    """A random intercept ``(1|factor)`` from per-row labels (for the array functions).

    Examples
    --------
    >>> intercept_term("judge", ["j1", "j2", "j1"]).name
    '1|judge'
    """
    codes, levels = pd.factorize(np.asarray(labels), sort=True)
    n = codes.size
    return RandomTerm(factor, "1", codes.astype(np.int64), tuple(str(v) for v in levels),
                      np.ones(n))


def _check_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                  terms: Sequence[RandomTerm]) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n = y.shape[0]
    if X.ndim != 2 or X.shape[0] != n:
        raise EvalmixError(f"X has shape {X.shape}; expected ({n}, k) to match y")
    if X.shape[1] != len(fe_names):
        raise EvalmixError(f"X has {X.shape[1]} columns but {len(fe_names)} names were given")
    if not np.all(np.isfinite(y)) or not np.all(np.isfinite(X)):
        raise EvalmixError("y and X must be finite; drop or impute missing values first")
    if not terms:
        raise EvalmixError("a crossed model needs at least one random term, e.g. (1|item)")
    for t in terms:
        if t.codes.shape != (n,):
            raise EvalmixError(f"codes of {t.name!r} have shape {t.codes.shape}; expected ({n},)")
        if t.x.shape != (n,):
            raise EvalmixError(f"covariate of {t.name!r} has shape {t.x.shape}; expected ({n},)")
        if t.n_levels < 2:
            raise EvalmixError(
                f"factor {t.name!r} has {t.n_levels} level; a variance component needs at "
                "least 2 levels (drop the term or model it as a fixed effect)")
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise EvalmixError(
            f"the fixed-effects design ({', '.join(fe_names)}) is rank deficient; "
            "drop a collinear term")
    return y, X


# ---------------------------------------------------------------------------- MixedLM
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


def _map_joint_cov(results: Any, p: int, k: int) -> np.ndarray:
    cov = np.asarray(results.cov_params(), dtype=float)
    idx = np.concatenate([np.arange(p), np.arange(p + k, cov.shape[0])])
    return cov[np.ix_(idx, idx)]


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


# ---------------------------------------------------------------------------- GLMM
def fit_glmm_arrays(y: np.ndarray, X: np.ndarray, fe_names: Sequence[str],
                    terms: Sequence[RandomTerm], *, method: Literal["vb", "map"] = "vb",
                    level: float = 0.95, vc_prior_sd: float = 1.0,
                    fe_prior_sd: float = 2.0, seed: int = 0) -> CrossedFit:
    """Logit GLMM with crossed factors by statsmodels' BinomialBayesMixedGLM.

    Parameters
    ----------
    y : (n,) array in [0, 1]
        0/1 outcomes; fractions (e.g. ties scored 1/2) give the fractional binomial
        quasi-likelihood.
    X : (n, k) array
        Fixed-effects design (include the intercept column).
    fe_names : sequence of str
    terms : sequence of RandomTerm
    method : {"vb", "map"}
        ``"vb"``: mean-field variational Bayes; ``"map"``: joint posterior mode with a
        Laplace covariance.
    level : float
        Level of the normal intervals (VB: posterior mean +- z SD; for SDs on log-SD).
    vc_prior_sd, fe_prior_sd : float
        Prior SDs of each log-SD (mean 0) and of each fixed effect (statsmodels'
        ``vcp_p``, ``fe_p``).
    seed : int
        Seeds statsmodels' random starting values.

    Returns
    -------
    CrossedFit
        SDs are ``exp(E[log SD])`` (the median of the lognormal VB factor; the mode's
        value for MAP), intervals ``exp(E[log SD] +- z SD[log SD])``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(2)
    >>> g = np.repeat(np.arange(20), 30)
    >>> y = (rng.random(600) < 1 / (1 + np.exp(-rng.normal(0, 1, 20)[g]))).astype(float)
    >>> fit = fit_glmm_arrays(y, np.ones((600, 1)), ["Intercept"], [intercept_term("g", g)],
    ...                       method="vb", seed=1)
    >>> fit.method
    'vb'

    References
    ----------
    Blei, D. M., Kucukelbir, A., McAuliffe, J. D. (2017). Variational inference: a review
    for statisticians. JASA 112(518), 859-877. doi:10.1080/01621459.2017.1285773
    """
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    check_option("method", method, ("vb", "map"))
    y, X = _check_arrays(y, X, fe_names, terms)
    if np.any((y < 0) | (y > 1)):
        bad = np.unique(y[(y < 0) | (y > 1)])[:5]
        raise EvalmixError(
            f"method={method!r} fits a logit model and needs a 0/1 (or fractional 0..1) "
            f"outcome; found values such as {bad.tolist()}. Use method='mixedlm' for "
            "numeric scores")
    z = _z(level)
    n = y.size
    exog_vc = sparse.hstack([_term_matrix(t, n) for t in terms]).tocsr()
    ident = np.concatenate([np.full(t.n_levels, k, dtype=int) for k, t in enumerate(terms)])
    model = BinomialBayesMixedGLM(y, X, exog_vc, ident, vcp_p=vc_prior_sd, fe_p=fe_prior_sd,
                                  fep_names=list(fe_names), vcp_names=[t.name for t in terms])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "vb":
            results = model.fit_vb(rng=np.random.default_rng(seed))
        else:
            results = model.fit_map(rng=np.random.default_rng(seed))
    opt = results.optim_retvals
    grad_norm = float(np.max(np.abs(opt.jac))) / n if opt.jac is not None else np.nan
    converged = bool(opt.success) or grad_norm < GRAD_TOL
    fe = np.asarray(results.fe_mean, dtype=float)
    fe_se = np.asarray(results.fe_sd, dtype=float)
    log_sd = np.asarray(results.vcp_mean, dtype=float)
    log_sd_se = np.asarray(results.vcp_sd, dtype=float)
    sd = np.exp(log_sd)
    resid = float(np.sqrt(LOGIT_RESIDUAL_VAR))
    singular = sd < SINGULAR_TOL * resid
    return CrossedFit(
        method=method, fe_names=tuple(fe_names), fe_est=fe, fe_se=fe_se,
        vc_names=tuple(t.name for t in terms), vc_sd=sd,
        vc_lo=np.exp(log_sd - z * log_sd_se), vc_hi=np.exp(log_sd + z * log_sd_se),
        resid_sd=resid, resid_lo=np.nan, resid_hi=np.nan, level=level,
        converged=converged, grad_norm=grad_norm, results=results,
        singular=tuple(t.name for t, s in zip(terms, singular, strict=True) if s),
        re_est=np.asarray(results.vc_mean, dtype=float),
        re_sd=np.asarray(results.vc_sd, dtype=float),
        fe_re_cov=(None if method == "vb" else _map_joint_cov(results, X.shape[1], len(terms))),
        details={"optimizer": "BFGS", "optimizer_message": str(opt.message),
                 "iterations": int(getattr(opt, "nit", -1)),
                 "vc_prior_sd": vc_prior_sd, "fe_prior_sd": fe_prior_sd, "seed": seed,
                 "interval": ("posterior mean +- z posterior SD (mean-field VB)"
                              if method == "vb" else
                              "mode +- z Laplace SD (joint mode incl. random effects)")},
    )


# ---------------------------------------------------------------------------- Laplace
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


# ---------------------------------------------------------------------------- tidy
_TYPICAL = "typical cluster (random effects at 0)"
_POPULATION = "population-averaged (random effects integrated out)"
_NOTES = {
    "vb": ("approximate: mean-field variational Bayes (statsmodels BinomialBayesMixedGLM."
           "fit_vb). Point estimates are usually close to glmer's, but the posterior SDs of "
           "fixed effects are too small for terms correlated with the random effects (the "
           "intercept most of all) and the SD intervals are too narrow; use the Bayesian "
           "back end for intervals you report."),
    "map": ("approximate: joint posterior mode over fixed effects, log-SDs and random effects "
            "with a Laplace covariance (statsmodels BinomialBayesMixedGLM.fit_map). This is "
            "not glmer's Laplace approximation: the random effects are not integrated out, so "
            "the SDs are pulled towards the log-SD prior and can collapse to 0 when the data "
            "per level are few; use the Bayesian back end for intervals you report."),
    "laplace": ("maximum likelihood with the random effects integrated out by the Laplace "
                "approximation (lme4::glmer's default, nAGQ = 1), the standard frequentist "
                "fit of a logit GLMM. Wald intervals (fixed effects; SDs on the log scale) "
                "from the Hessian of the approximate deviance: too narrow for SDs of "
                "factors with few levels."),
    "lpm": ("approximate: a linear probability model (REML on a 0/1 outcome). Effects are "
            "probability differences, variance components are on the probability scale and "
            "shrink as win rates approach 0 or 1; the residual is not normal. Use "
            "method='vb'/'map' or the Bayesian back end for a logit model."),
}


def _fe_cov(fit: CrossedFit) -> np.ndarray:
    """Covariance of the fixed effects (VB: diagonal, as mean-field VB assumes)."""
    k = len(fit.fe_names)
    if fit.fe_cov is not None:
        return fit.fe_cov
    if fit.method == "vb":
        return np.diag(fit.fe_se**2)
    cov = np.asarray(fit.results.cov_params(), dtype=float)[:k, :k]
    return cov


def containment_df(fe_names: Sequence[str], terms: Sequence[RandomTerm]) -> dict[str, float]:
    """Containment degrees of freedom of each fixed effect (inf when nothing contains it).

    A fixed effect is *contained* by the random terms that vary it across the levels of a
    factor: the intercept by the random intercepts, ``position`` by ``(0 + position|g)``.
    Its uncertainty is then driven by the number of levels ``G`` of those factors, and a
    ``t`` reference with ``min(G) - 1`` degrees of freedom (SAS's ``DDFM=CONTAIN``) keeps
    Wald intervals from being far too narrow with 3 judges or 3 authors (see
    ``docs/models-frequentist.md``: coverage of a 90% interval 0.71 with z, 0.91 with t).

    References
    ----------
    Li, P., Redden, D. T. (2015). Comparing denominator degrees of freedom approximations
    for the generalized linear mixed model in analyzing binary outcome in small sample
    cluster-randomized trials. BMC Medical Research Methodology 15, 38.
    doi:10.1186/s12874-015-0026-x
    """
    out: dict[str, float] = {}
    for name in fe_names:
        key = "1" if name == "Intercept" else name
        levels = [t.n_levels for t in terms if t.term == key]
        out[name] = float(min(levels) - 1) if levels else float("inf")
    return out


def _quantile(level: float, df: float) -> float:
    return _z(level) if not np.isfinite(df) else float(stats.t.ppf(0.5 + level / 2, df))


def _fixed_rows(fit: CrossedFit, spec: ModelSpec, logit: bool, scale: str, label: str,
                df: Mapping[str, float]) -> list[dict[str, Any]]:
    rows = []
    cov = _fe_cov(fit)
    for name, est, se in zip(fit.fe_names, fit.fe_est, fit.fe_se, strict=True):
        q = _quantile(fit.level, df.get(name, np.inf))
        rows.append(dict(term=name, estimate=est, se=se, lo=est - q * se, hi=est + q * se,
                         scale=scale, label=label))
    for cname, weights in spec.contrasts:
        w = np.asarray(weights, dtype=float)
        est, se = float(w @ fit.fe_est), float(np.sqrt(w @ cov @ w))
        d = min([df.get(n, np.inf) for n, wi in zip(fit.fe_names, w, strict=True) if wi != 0],
                default=np.inf)
        q = _quantile(fit.level, d)
        rows.append(dict(term=cname, estimate=est, se=se, lo=est - q * se, hi=est + q * se,
                         scale=scale, label=label))
    if logit:
        for r in list(rows):
            if r["term"] == "Intercept":
                continue
            e = np.exp(r["estimate"])
            rows.append(dict(term=r["term"], estimate=e, se=e * r["se"], lo=np.exp(r["lo"]),
                             hi=np.exp(r["hi"]), scale="odds-ratio", label=label))
    return rows


def _level_rows(fit: CrossedFit, terms: Sequence[RandomTerm], scale: str
                ) -> list[dict[str, Any]]:
    """Per-level effects of random slopes: ``term + b_level`` (e.g. each judge's position
    bias). The SE uses the joint covariance of the fixed and random effects given the SDs
    (lme4-style, SD uncertainty ignored); for VB, whose factors are independent,
    ``sqrt(se_term^2 + sd_b^2)``."""
    if fit.re_est is None or fit.re_sd is None:
        return []
    z = _z(fit.level)
    names = list(fit.fe_names)
    rows = []
    start = 0
    for t in terms:
        stop = start + t.n_levels
        if not t.is_intercept:
            j = names.index(t.term) if t.term in names else None
            base = fit.fe_est[j] if j is not None else 0.0
            base_se = fit.fe_se[j] if j is not None else 0.0
            p = len(names)
            for i, (lev, b, sb) in enumerate(zip(t.levels, fit.re_est[start:stop],
                                                 fit.re_sd[start:stop], strict=True)):
                est = float(base + b)
                if fit.fe_re_cov is not None:
                    c = np.zeros(fit.fe_re_cov.shape[0])
                    c[p + start + i] = 1.0
                    if j is not None:
                        c[j] = 1.0
                    se = float(np.sqrt(max(c @ fit.fe_re_cov @ c, 0.0)))
                else:
                    se = float(np.hypot(base_se, sb))
                rows.append(dict(term=f"{t.term}[{t.factor}={lev}]", estimate=est, se=se,
                                 lo=est - z * se, hi=est + z * se, scale=scale,
                                 label=f"{t.factor}-specific ({t.term} + conditional mode)"))
        start = stop
    return rows


def _gauss_hermite(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return x, w / w.sum()


def _probability_rows(fit: CrossedFit, spec: ModelSpec, terms: Sequence[RandomTerm],
                      rng: np.random.Generator, n_draws: int) -> list[dict[str, Any]]:
    """Probability-scale condition contrasts (logit fits with an intercept).

    Both versions average over the two presentation orders (x_pos = +-1/2) when the model
    has a ``position`` term. The population-averaged one integrates
    ``eta ~ N(mean, sum of intercept variances + slope variances at the row's
    covariates)`` by Gauss-Hermite quadrature. Uncertainty: ``n_draws`` draws from the
    approximate normal sampling distribution of the fixed effects and of the log-SDs
    (independent blocks), percentile intervals.
    """
    names = list(fit.fe_names)
    if "Intercept" not in names or not spec.condition_terms:
        return []
    z = _z(fit.level)
    cov = _fe_cov(fit)
    beta = rng.multivariate_normal(fit.fe_est, cov, size=n_draws, method="eigh")
    log_sd = np.log(np.maximum(fit.vc_sd, 1e-12))
    se_log = np.where(fit.vc_sd > 0,
                      (np.log(np.maximum(fit.vc_hi, 1e-12)) - np.log(np.maximum(fit.vc_lo,
                                                                                  1e-12)))
                      / (2 * z), 0.0)
    se_log = np.nan_to_num(se_log, nan=0.0)
    sd = np.exp(log_sd + rng.standard_normal((n_draws, log_sd.size)) * se_log)
    sd = np.where(fit.vc_sd > 0, sd, 0.0)
    gx, gw = _gauss_hermite()
    xpos = (0.5, -0.5) if "position" in names else (0.0,)
    ipos = names.index("position") if "position" in names else None

    def prob(cond: str | None, b: np.ndarray, s: np.ndarray, population: bool) -> np.ndarray:
        out = np.zeros(b.shape[0])
        for xp in xpos:
            eta = b[:, names.index("Intercept")].copy()
            covariates = {"1": 1.0, "position": xp}
            if cond is not None:
                eta += b[:, names.index(cond)]
                covariates[cond] = 1.0
            if ipos is not None:
                eta += b[:, ipos] * xp
            if population:
                var = np.zeros(b.shape[0])
                for j, t in enumerate(terms):
                    var += (s[:, j] * covariates.get(t.term, 0.0)) ** 2
                eta_q = eta[:, None] + np.sqrt(var)[:, None] * gx[None, :]
                out += (1 / (1 + np.exp(-eta_q))) @ gw / len(xpos)
            else:
                out += 1 / (1 + np.exp(-eta)) / len(xpos)
        return out

    rows = []
    est_b = fit.fe_est[None, :]
    est_s = np.where(fit.vc_sd > 0, fit.vc_sd, 0.0)[None, :]
    lo_q, hi_q = 100 * (0.5 - fit.level / 2), 100 * (0.5 + fit.level / 2)
    for population, label in ((False, _TYPICAL), (True, _POPULATION)):
        p0_hat = prob(None, est_b, est_s, population)[0]
        p0 = prob(None, beta, sd, population)
        ref = spec.reference or "reference"
        rows.append(dict(term=f"p[{ref}]", estimate=p0_hat, se=float(np.std(p0, ddof=1)),
                         lo=float(np.percentile(p0, lo_q)), hi=float(np.percentile(p0, hi_q)),
                         scale="probability", label=label))
        for c in spec.condition_terms:
            p1_hat = prob(c, est_b, est_s, population)[0]
            p1 = prob(c, beta, sd, population)
            lev = c[c.index("[") + 1:-1] if "[" in c else c
            rows.append(dict(term=f"p[{lev}]", estimate=p1_hat,
                             se=float(np.std(p1, ddof=1)),
                             lo=float(np.percentile(p1, lo_q)),
                             hi=float(np.percentile(p1, hi_q)), scale="probability",
                             label=label))
            d = p1 - p0
            rows.append(dict(term=f"p[{lev}] - p[{ref}]", estimate=p1_hat - p0_hat,
                             se=float(np.std(d, ddof=1)), lo=float(np.percentile(d, lo_q)),
                             hi=float(np.percentile(d, hi_q)), scale="probability",
                             label=label))
    return rows


def _term_label(t: RandomTerm) -> str:
    return t.factor if t.is_intercept else t.name


def _variance_frame(fit: CrossedFit, terms: Sequence[RandomTerm], backend: str,
                    residual_label: str) -> pd.DataFrame:
    """One row per random term plus ``Residual``. ``share``/``icc`` are computed among the
    random intercepts and the residual (covariates at 0); slope rows get NaN."""
    var = fit.vc_sd**2
    intercept = np.array([t.is_intercept for t in terms], dtype=bool)
    total = float(var[intercept].sum() + fit.resid_sd**2)
    rows = []
    for j, t in enumerate(terms):
        share = var[j] / total if intercept[j] else np.nan
        rows.append(dict(factor=_term_label(t), sd=fit.vc_sd[j], variance=var[j], share=share,
                         icc=share, lo=fit.vc_lo[j], hi=fit.vc_hi[j]))
    rows.append(dict(factor=residual_label, sd=fit.resid_sd, variance=fit.resid_sd**2,
                     share=fit.resid_sd**2 / total, icc=np.nan, lo=fit.resid_lo,
                     hi=fit.resid_hi))
    out = pd.DataFrame(rows)
    out["level"] = fit.level
    out["backend"] = backend
    return out[list(VARIANCE_COLUMNS)]


def _seed_int(seed: int | np.random.Generator | None) -> int:
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**32))
    if isinstance(seed, int | np.integer):
        return int(seed)
    raise EvalmixError(f"seed must be an int or numpy.random.Generator, got {seed!r}")


def _versions() -> dict[str, str]:
    import scipy
    import statsmodels

    import evalmix

    return {"statsmodels": statsmodels.__version__, "numpy": np.__version__,
            "scipy": scipy.__version__, "pandas": pd.__version__,
            "evalmix": getattr(evalmix, "__version__", "unknown")}


# ---------------------------------------------------------------------------- public
def fit_statsmodels(
    table: Any,
    spec: ModelSpec | None = None,
    *,
    method: Method = "auto",
    level: float = 0.95,
    formula: str | None = None,
    vc_prior_sd: float = 1.0,
    fe_prior_sd: float = 2.0,
    seed: int | np.random.Generator | None = None,
    n_draws: int = 4000,
    df: Literal["containment", "none"] = "containment",
    **spec_options: Any,
) -> ModelFit:
    """Fit a crossed random-effects model with a statsmodels back end.

    Parameters
    ----------
    table : EvalTable
        The validated table (used to build the spec when ``spec`` is None; may be None
        when a spec is given).
    spec : ModelSpec, optional
        From :func:`evalmix.models.build_spec`; built from ``table`` (with ``formula`` and
        ``spec_options``) when omitted.
    method : {"auto", "mixedlm", "laplace", "vb", "map"}
        ``"mixedlm"``: REML linear mixed model (Gaussian scores; on 0/1 outcomes a linear
        probability model). ``"laplace"``: maximum-likelihood logit GLMM by the Laplace
        approximation (``lme4::glmer``'s default; evalmix's implementation, statsmodels
        has none). ``"vb"``/``"map"``: logit GLMM by variational Bayes or by the joint
        posterior mode (statsmodels ``BinomialBayesMixedGLM``). ``"auto"``: ``"mixedlm"``
        for numeric outcomes, ``"laplace"`` for binary / tie-scored ones. See the module
        docstring for which are approximations.
    level : float
        Interval level.
    formula : str, optional
        lme4-syntax formula passed to :func:`~evalmix.models.spec.build_spec`.
    vc_prior_sd, fe_prior_sd : float
        ``"vb"``/``"map"`` priors: ``log SD ~ N(0, vc_prior_sd^2)``, each fixed effect
        ``~ N(0, fe_prior_sd^2)``.
    seed : int or numpy.random.Generator, optional
        Seeds statsmodels' starting values (vb/map) and the draws behind the
        probability-scale rows; recorded in ``provenance["seed"]``.
    n_draws : int
        Draws from the approximate sampling distribution for probability-scale rows.
    df : {"containment", "none"}
        Reference distribution of the fixed-effect intervals of ``"mixedlm"`` and
        ``"laplace"``: ``t`` with containment degrees of freedom (levels - 1 of the
        factors whose random terms contain the effect; see :func:`containment_df`), or
        the normal (``"none"``). VB/MAP intervals are posterior (normal) intervals.
    **spec_options
        Passed to :func:`~evalmix.models.spec.build_spec` (``slopes``, ``fixed``,
        ``position``, ``judge_position``, ``random``, ``reference``).

    Returns
    -------
    ModelFit
        ``backend`` is ``"mixedlm"``, ``"glmm_laplace"``, ``"glmm_vb"`` or ``"glmm_map"``;
        ``results`` holds the statsmodels results (:class:`LaplaceResults` for
        ``"laplace"``); ``approximate`` is True for VB, MAP and linear probability fits,
        with the reason in ``provenance["note"]`` (always filled).

    Raises
    ------
    InvalidOptionError
        Unknown ``method``.
    EvalmixError
        A numeric or ordinal outcome with ``method="laplace"``/``"vb"``/``"map"``; an ordinal
        (ties="separate") outcome with ``"mixedlm"``; a model without random terms.

    Warns
    -----
    FewClustersWarning
        A random factor has fewer than 5 levels.
    SingularFitWarning
        A variance component is (near) zero.
    ConvergenceWarning
        The optimiser did not reach a stationary point.

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(8, 3, 2, 2, tie_threshold=0, seed=3).table()
    >>> fit = fit_statsmodels(t, method="vb", judge_position=False, seed=1)
    >>> fit.backend, fit.approximate
    ('glmm_vb', True)

    References
    ----------
    Bates, D. et al. (2015). Fitting linear mixed-effects models using lme4. Journal of
    Statistical Software 67(1). doi:10.18637/jss.v067.i01
    Blei, D. M. et al. (2017). Variational inference: a review for statisticians. JASA
    112(518). doi:10.1080/01621459.2017.1285773
    """
    check_option("method", method, METHODS)
    check_option("df", df, ("containment", "none"))
    t0 = time.perf_counter()
    if spec is None:
        if table is None:
            raise EvalmixError("fit_statsmodels needs a table or a spec")
        spec = build_spec(table, formula=formula, **spec_options)
    elif formula is not None or spec_options:
        raise EvalmixError("pass either a spec or formula/spec options, not both")
    if spec.family == "cumulative":
        raise EvalmixError(
            "the statsmodels back end has no ordinal (cumulative) model for ties='separate'; "
            "use backend='bayes', or read the table with ties='half' or 'exclude'")
    if not spec.random:
        raise EvalmixError(
            f"the model {spec.formula!r} has no random terms; add e.g. (1|item), or use "
            "the design-based intervals (evalmix.interval) for a model without them")
    logit = spec.family in ("bernoulli", "binomial")
    if method == "auto":
        method = "laplace" if logit else "mixedlm"
    if method in ("vb", "map", "laplace") and not logit:
        raise EvalmixError(
            f"method={method!r} fits a logit model for binary outcomes, but the outcome is "
            f"{spec.family} ({spec.response}); use method='mixedlm' for numeric scores")
    seed_used = _seed_int(seed)
    rng = np.random.default_rng(seed_used)
    terms = list(spec.random)
    if method == "mixedlm":
        # a linear probability model without an intercept (Bradley-Terry design) must
        # measure win probabilities from 1/2, as the logit model does from log-odds 0
        offset = 0.5 if logit and "Intercept" not in spec.fixed_names else 0.0
        fit = fit_mixedlm_arrays(spec.y - offset, spec.X, spec.fixed_names, terms,
                                 level=level)
        backend, approximate = "mixedlm", logit
        note = (_NOTES["lpm"] + (" The response is y - 1/2 (no intercept: equal abilities "
                                 "mean a 1/2 win rate)." if offset else "")) if logit else (
            "REML estimates; Wald z intervals for fixed effects and on log-SD for variance "
            "components (can be too narrow for factors with few levels)")
        scale = "probability" if logit else "identity"
        label = "linear model: conditional = population-averaged"
        family = "gaussian"
    elif method == "laplace":
        # rows with identical covariates and levels enter as one binomial count (the
        # likelihood is the same up to a constant, which we leave out so that the
        # log-likelihood is that of the individual rows)
        col = collapse(spec)
        if col.n_patterns < spec.n_obs:
            cterms = [RandomTerm(t.factor, t.term, c, t.levels, x)
                      for t, c, x in zip(terms, col.codes, col.x, strict=True)]
            fit = fit_laplace_arrays(col.successes / col.trials, col.X, spec.fixed_names,
                                     cterms, trials=col.trials, level=level,
                                     binomial_constant=False)
        else:
            fit = fit_laplace_arrays(spec.y, spec.X, spec.fixed_names, terms, level=level)
        backend, approximate, note = "glmm_laplace", False, _NOTES["laplace"]
        scale, label, family = "log-odds", _TYPICAL, spec.family
    else:
        fit = fit_glmm_arrays(spec.y, spec.X, spec.fixed_names, terms, method=method,
                              level=level, vc_prior_sd=vc_prior_sd, fe_prior_sd=fe_prior_sd,
                              seed=seed_used)
        backend, approximate, note = f"glmm_{method}", True, _NOTES[method]
        scale, label, family = "log-odds", _TYPICAL, spec.family

    messages: list[str] = []
    few = sorted({t.factor for t in terms if t.n_levels < FEW_LEVELS})
    if few:
        msg = (f"factor(s) {', '.join(few)} have fewer than {FEW_LEVELS} levels: their "
               f"variance is barely identified and {backend}'s Wald intervals for it (and "
               "for effects that vary by it) are too narrow. Report the Bayesian back end's "
               "intervals, or enter the factor as a fixed effect (fixed=[...]) or fit per "
               "level")
        messages.append(msg)
        warnings.warn(msg, FewClustersWarning, stacklevel=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        wide = (fit.vc_sd > 0) & ~(fit.vc_hi / fit.vc_lo < _MAX_INTERVAL_RATIO)
    if wide.any():
        names = [t.name for t, w in zip(terms, wide, strict=True) if w]
        lo, hi = fit.vc_lo.copy(), fit.vc_hi.copy()
        lo[wide], hi[wide] = 0.0, np.nan
        fit = replace(fit, vc_lo=lo, vc_hi=hi)
        msg = (f"variance component(s) {', '.join(names)} near zero: the Wald interval on the "
               "log-SD scale spans several orders of magnitude and is reported as [0, NaN]. "
               "The data barely identify them; use the Bayesian back end for an interval, "
               "or drop the term")
        messages.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=2)
    if fit.singular:
        msg = (f"variance component(s) {', '.join(fit.singular)} estimated at (or near) zero "
               f"by {backend}; the data do not identify them. Consider dropping the term or "
               "entering the factor as a fixed effect (fixed=[...])")
        if method == "map":
            msg += ("; with method='map' this is usually the joint-mode collapse described "
                    "in the note: try method='vb' or the Bayesian back end")
        messages.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=2)
    if not fit.converged:
        msg = (f"{backend}: the optimiser did not reach a stationary point (largest gradient "
               f"{fit.grad_norm:.2g}; {fit.details.get('optimizer_message', '')}). Treat the "
               "estimates as unreliable; simplify the random terms or use the Bayesian back "
               "end")
        messages.append(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)

    dfs = (containment_df(spec.fixed_names, terms)
           if df == "containment" and method in ("mixedlm", "laplace")
           else dict.fromkeys(spec.fixed_names, float("inf")))
    rows = _fixed_rows(fit, spec, logit and method != "mixedlm", scale, label, dfs)
    rows += _level_rows(fit, terms, scale)
    if method != "mixedlm":
        rows += _probability_rows(fit, spec, terms, rng, n_draws)
    fixed = pd.DataFrame(rows)
    fixed["level"] = level
    fixed = fixed[list(FIXED_COLUMNS)]
    variance = _variance_frame(fit, terms, backend,
                               "Residual" if method == "mixedlm" else "Residual")
    provenance = {
        "formula": spec.formula, "method": method, "backend": backend, "family": family,
        "link": "identity" if method == "mixedlm" else "logit", "response": spec.response,
        "design": spec.design, "n_obs": spec.n_obs, "level": level, "seed": seed_used,
        "note": note,
        "intervals": (fit.details.get("interval", "").replace(
            "Wald z (fixed effects)", "Wald t with containment df (fixed effects)")
            if df == "containment" else fit.details.get("interval", "")),
        "optimizer": fit.details.get("optimizer", ""), "converged": fit.converged,
        "df": dfs,
        "versions": _versions(), "wall_s": time.perf_counter() - t0,
        "residual": ("pi^2/3 (logistic latent residual, fixed)" if method != "mixedlm"
                     else "estimated residual SD"),
        "share": "share and icc among random intercepts and the residual, covariates at 0",
    }
    if method in ("vb", "map"):
        provenance["priors"] = {"log_sd": f"Normal(0, {vc_prior_sd})",
                                "fixed": f"Normal(0, {fe_prior_sd})"}
        provenance["probability_draws"] = n_draws
    else:
        provenance["reml_criterion"] = fit.details.get("reml_criterion")
    return ModelFit(backend=backend, family=family, formula=spec.formula,
                    fixed_effects=fixed, variance=variance, results=fit.results,
                    approximate=approximate, provenance=provenance,
                    warnings=tuple(messages))
