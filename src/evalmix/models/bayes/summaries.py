"""Tidy summaries of posterior draws in the :class:`~evalmix.models.result.ModelFit` contract.

Pure array functions: inputs are plain dicts of draws (chains stacked along axis 0).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix.models.bayes.pymc_model import TermInfo
from evalmix.models.result import (
    FIXED_COLUMNS,
    POPULATION,
    PROBABILITY,
    PROBABILITY_TYPICAL,
    SCORE,
    SCORE_TYPICAL,
    TYPICAL,
    VARIANCE_COLUMNS,
    probability_term,
)
from evalmix.models.spec import ModelSpec

__all__ = ["fixed_table", "variance_table", "LOGIT_RESIDUAL_VARIANCE"]

#: Variance of the standard logistic distribution (latent residual of a logit model).
LOGIT_RESIDUAL_VARIANCE = float(np.pi ** 2 / 3)
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(40)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()



def _row(term, draws, level, scale, label, transform=None):
    d = np.asarray(draws, dtype=float)
    a = (1 - level) / 2
    lo, med, hi = np.quantile(d, [a, 0.5, 1 - a])
    se = float(np.std(d, ddof=1))
    if transform is not None:
        lo, med, hi = transform(lo), transform(med), transform(hi)
        se = float(np.std(transform(d), ddof=1))
    return {"term": term, "estimate": float(med), "se": se, "lo": float(lo),
            "hi": float(hi), "level": level, "scale": scale, "label": label}


def _latent_variance(spec: ModelSpec, terms: list[TermInfo], sd: dict[str, np.ndarray],
                     x_of: dict[str, float]) -> np.ndarray:
    """Draws of the random-effect variance at a covariate setting ``x_of`` (term -> x)."""
    v: float | np.ndarray = 0.0
    for t in terms:
        x = 1.0 if t.term == "1" else x_of.get(t.term, 0.0)
        v = v + (x * sd[t.sd_var]) ** 2
    return np.asarray(v, dtype=float)


def _p_balanced(eta: np.ndarray, pos: np.ndarray | None, var: np.ndarray | None,
                balance: bool) -> np.ndarray:
    """P(success): order-balanced over x_pos = +-1/2 when ``balance``; integrated over
    N(0, var) random effects (Gauss-Hermite) when ``var`` is given."""
    shifts = [(0.5, 0.5), (-0.5, 0.5)] if (balance and pos is not None) else [(0.0, 1.0)]
    out: float | np.ndarray = 0.0
    for xp, w in shifts:
        e = eta + (pos * xp if pos is not None else 0.0)
        if var is None:
            out = out + w * expit(e)
        else:
            # var is a scalar 0 in a model without random effects
            sd = np.broadcast_to(np.sqrt(np.asarray(var, dtype=float)), e.shape)
            z = e[:, None] + sd[:, None] * _GH_NODES[None, :]
            out = out + w * (expit(z) @ _GH_WEIGHTS)
    return cast(np.ndarray, out)  # eta is an array, so every sum above is one


def _numeric_categories(spec: ModelSpec) -> np.ndarray | None:
    """Score values of an ordinal score model (None for verdict categories)."""
    try:
        return np.array([float(c) for c in spec.categories])
    except ValueError:
        return None


def _mean_score(eta: np.ndarray, cut: np.ndarray, values: np.ndarray,
                var: np.ndarray | None) -> np.ndarray:
    """E[score] under the cumulative logit ``P(y <= k) = expit(c_k - eta)``, per draw;
    integrated over N(0, var) random effects (Gauss-Hermite) when ``var`` is given."""
    def mean_at(e):                      # e: (draws, nodes)
        cdf = expit(cut[:, None, :] - e[:, :, None])            # (draws, nodes, K-1)
        cdf = np.concatenate([cdf, np.ones(cdf.shape[:2] + (1,))], axis=2)
        pk = np.diff(cdf, axis=2, prepend=0.0)
        return pk @ values                                       # (draws, nodes)

    if var is None:
        return mean_at(eta[:, None])[:, 0]
    z = eta[:, None] + np.sqrt(var)[:, None] * _GH_NODES[None, :]
    return mean_at(z) @ _GH_WEIGHTS


def fixed_table(spec: ModelSpec, terms: list[TermInfo], b: np.ndarray,
                u: dict[str, np.ndarray], sd: dict[str, np.ndarray],
                cut: np.ndarray | None, *, level: float) -> pd.DataFrame:
    """Fixed effects (link scale, odds ratios), contrasts, probability-scale contrasts,
    and per-judge position / condition effects."""
    logit = spec.link == "logit"
    scale = "log-odds" if logit else "identity"
    rows = []
    names = list(spec.fixed_names)
    for j, n in enumerate(names):
        rows.append(_row(n, b[:, j], level, scale, "fixed effect (typical cluster)"))
    for cname, w in spec.contrasts:
        rows.append(_row(cname, b @ np.asarray(w), level, scale, "contrast of fixed effects"))
    if logit:
        for j, n in enumerate(names):
            if n != "Intercept":
                rows.append(_row(n, b[:, j], level, "odds-ratio",
                                 "odds ratio (typical cluster)", np.exp))
    if cut is not None:
        for j in range(cut.shape[1]):
            rows.append(_row(f"cutpoint[{j + 1}]", cut[:, j], level, scale,
                             f"cut point between '{spec.categories[j]}' and "
                             f"'{spec.categories[j + 1]}'"))
    # probability scale: each condition level and its difference from the reference
    if logit and spec.family != "cumulative" and "Intercept" in names and spec.condition_terms:
        ib = names.index("Intercept")
        pos = b[:, names.index("position")] if "position" in names else None
        balance = True  # average over the two presentation orders (x_pos = +-1/2)
        for label, use_var, pscale in ((TYPICAL, False, PROBABILITY_TYPICAL),
                                       (POPULATION, True, PROBABILITY)):
            var0 = _latent_variance(spec, terms, sd, {}) if use_var else None
            eta0 = b[:, ib]
            p0 = _p_balanced(eta0, pos, var0, balance)
            ref = str(spec.reference)
            rows.append(_row(probability_term(ref), p0, level, pscale, label))
            for c in spec.condition_terms:
                j = names.index(c)
                var1 = _latent_variance(spec, terms, sd, {c: 1.0}) if use_var else None
                p1 = _p_balanced(eta0 + b[:, j], pos, var1, balance)
                lev = c[c.index("[") + 1:-1] if "[" in c else c
                rows.append(_row(probability_term(lev), p1, level, pscale, label))
                rows.append(_row(probability_term(lev, ref), p1 - p0, level, pscale, label))
    # ordinal scores: expected score per condition and its difference from the reference
    values = _numeric_categories(spec) if spec.family == "cumulative" else None
    if (values is not None and cut is not None and spec.condition_terms
            and "position" not in names):
        for label, use_var, sscale in ((TYPICAL, False, SCORE_TYPICAL),
                                       (POPULATION, True, SCORE)):
            var0 = _latent_variance(spec, terms, sd, {}) if use_var else None
            zero = np.zeros(cut.shape[0])
            m0 = _mean_score(zero, cut, values, var0)
            rows.append(_row(f"E[score | {spec.reference}]", m0, level, sscale, label))
            for c in spec.condition_terms:
                j = names.index(c)
                var1 = _latent_variance(spec, terms, sd, {c: 1.0}) if use_var else None
                m1 = _mean_score(b[:, j], cut, values, var1)
                lev = c[c.index("[") + 1:-1] if "[" in c else c
                rows.append(_row(f"E[score | {lev}]", m1, level, sscale, label))
                rows.append(_row(f"E[score | {lev}] - E[score | {spec.reference}]",
                                 m1 - m0, level, sscale, label))
    # per-level slopes: realised judge-specific effects = fixed + level deviation
    for t in terms:
        if t.term == "1" or t.term not in names:
            continue
        j = names.index(t.term)
        levels = spec.random[[tt.var for tt in terms].index(t.var)].levels
        for g, lev in enumerate(levels):
            rows.append(_row(f"{t.term}[{t.factor}={lev}]", b[:, j] + u[t.var][:, g], level,
                             scale, f"{t.factor}-specific (realised level: fixed + deviation)"))
    return pd.DataFrame(rows, columns=list(FIXED_COLUMNS))


def _bounds(sd_lo: float, sd_hi: float) -> dict[str, float]:
    """SD bounds and the variance bounds they imply (quantiles of a monotone map)."""
    return {"sd_lo": float(sd_lo), "sd_hi": float(sd_hi), "var_lo": float(sd_lo) ** 2,
            "var_hi": float(sd_hi) ** 2}


def variance_table(spec: ModelSpec, terms: list[TermInfo], sd: dict[str, np.ndarray],
                   sigma: np.ndarray | None, *, level: float, backend: str = "bayes"
                   ) -> pd.DataFrame:
    """SD, variance, share of latent variance and latent ICC per random term.

    ``share``: the term's variance contribution (times the mean of its covariate squared
    for slopes) over the total latent variance including the residual (pi^2/3 for logit
    links). ``icc``: for random intercepts, variance over (all intercept variances +
    residual), the latent correlation of two rows sharing only that level at covariates
    0; NaN for slopes.
    """
    a = (1 - level) / 2
    n_draws = len(next(iter(sd.values()))) if sd else (len(sigma) if sigma is not None else 1)
    if spec.family == "gaussian":
        resid = np.asarray(sigma, dtype=float) ** 2
    else:
        resid = np.full(n_draws, LOGIT_RESIDUAL_VARIANCE)
    contrib, icc_den = {}, resid.copy()
    for t, r in zip(terms, spec.random, strict=True):
        w = 1.0 if t.term == "1" else float(np.mean(np.asarray(r.x) ** 2))
        contrib[t.var] = w * sd[t.sd_var] ** 2
        if t.term == "1":
            icc_den = icc_den + sd[t.sd_var] ** 2
    total = resid + sum(contrib.values()) if contrib else resid
    rows = []
    for t in terms:
        s = np.asarray(sd[t.sd_var], dtype=float)
        lo, hi = np.quantile(s, [a, 1 - a])
        factor = t.factor if t.term == "1" else f"{t.term}|{t.factor}"
        rows.append({"factor": factor, "sd": float(np.median(s)),
                     "variance": float(np.median(s ** 2)),
                     "share": float(np.median(contrib[t.var] / total)),
                     "icc": float(np.median(s ** 2 / icc_den)) if t.term == "1" else np.nan,
                     **_bounds(lo, hi), "level": level, "backend": backend})
    rs = np.sqrt(resid)
    lo, hi = np.quantile(rs, [a, 1 - a])
    rows.append({"factor": "Residual", "sd": float(np.median(rs)),
                 "variance": float(np.median(resid)), "share": float(np.median(resid / total)),
                 "icc": np.nan, **_bounds(lo, hi), "level": level, "backend": backend})
    return pd.DataFrame(rows, columns=list(VARIANCE_COLUMNS))
