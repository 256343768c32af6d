"""Power and minimum detectable effect by simulation from a pilot study.

Two routes:

(a) :func:`bootstrap_power` / :func:`pilot_power`: resample whole clusters of a pilot
    table (pairs cluster bootstrap) at new numbers of clusters ``K`` and run the CR1 t
    test, t(K - 1), in every resample. The pilot's clusters stand in for the population,
    so the answer inherits the pilot's own sampling error (not part of the Monte Carlo SE
    reported here). Vectorised: resampling counts (reps x G) times per-cluster
    ``X'X``/``X'y`` sums; no loop over replications.
(b) :func:`parametric_power`: draw new crossed data (scenarios x personas x authors x
    judges x conditions) from variance components, from a fitted model
    (:class:`evalmix.models.result.ModelFit`, its ``variance`` frame) or a dict of SDs,
    varying the number of levels of each factor separately, and run a cluster-robust
    t test (one-way CR1, or Cameron-Gelbach-Miller multiway over several factors).

Both report power and the minimum detectable effect with Monte Carlo SEs, per plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from evalmix.errors import EvalmixError, InvalidOptionError, check_option, renamed_option
from evalmix.families import REGRESSION_FAMILIES, Regression, family_name
from evalmix.inference.estimands import build_problem
from evalmix.inference.sandwich import cluster_codes, intersect_codes
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import PilotDifference, PilotEstimand

__all__ = ["PilotPowerResult", "bootstrap_power", "pilot_power", "parametric_power",
           "components_from_fit"]

PILOT_COLUMNS: tuple[str, ...] = (
    "plan", "factor", "n_clusters", "power", "power_mcse", "mde", "mde_mcse", "se_rms",
    "sd_estimate", "mean_estimate", "null", "effect", "df", "reps", "level", "target_power",
    "method", "seed",
)


@dataclass(frozen=True, eq=False)
class PilotPowerResult:
    """Simulated power and minimum detectable effect per plan.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per plan, columns :data:`PILOT_COLUMNS` plus one ``n_levels_<factor>``
        column per factor for parametric plans. ``power`` is the share of replications
        whose CR1 t test rejects ``null`` at ``level``, ``power_mcse`` its Monte Carlo SE;
        ``mde = (t_{1-a/2, df} + t_{power, df}) * se_rms`` with ``se_rms`` the root mean
        square of the replications' standard errors, ``mde_mcse`` its Monte Carlo SE
        (delta method); ``sd_estimate`` is the empirical SD of the estimates.
    method : str
        ``"cluster bootstrap"`` or ``"parametric"``.
    reps, seed, level : as requested
    notes : tuple of str
    """

    table: pd.DataFrame
    method: str
    reps: int
    seed: int | str | None
    level: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def tidy(self) -> pd.DataFrame:
        """One row per plan in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand="power"``, ``contrast`` the plan, ``cluster`` the factor varied,
        ``estimate`` the power and ``se`` its Monte Carlo SE (``scale="power"``); then
        the :attr:`table`'s columns."""
        t = self.table
        core = pd.DataFrame({"contrast": t["plan"].astype(str),
                             "cluster": t["factor"].astype(str), "estimate": t["power"],
                             "se": t["power_mcse"]})
        return tidy_rows(pd.concat([core, t.drop(columns=[c for c in core if c in t])],
                                   axis=1),
                         estimand="power", scale="power", note="")

    def __str__(self) -> str:
        cols = [c for c in ("plan", "n_clusters", "power", "power_mcse", "mde", "mde_mcse")
                if c in self.table]
        return (f"PilotPowerResult({self.method}, reps={self.reps}, seed={self.seed})\n"
                + self.table[cols].to_string(index=False, float_format="{:.4g}".format))


# --------------------------------------------------------------------- shared summary
def _summarise(est, se, df, *, null, level, target_power, reps) -> dict[str, float]:
    ok = np.isfinite(est) & np.isfinite(se) & (se > 0)
    est, se = est[ok], se[ok]
    n = est.size
    if n < 2:
        raise EvalmixError("fewer than 2 usable replications; increase reps or clusters")
    tcrit = stats.t.ppf(1 - (1 - level) / 2, df)
    reject = np.abs(est - null) / se > tcrit
    p = float(reject.mean())
    mult = tcrit + stats.t.ppf(target_power, df)
    v = se**2
    rms = float(np.sqrt(v.mean()))
    return {"power": p, "power_mcse": float(np.sqrt(p * (1 - p) / n)),
            "mde": float(mult * rms),
            "mde_mcse": float(mult * v.std(ddof=1) / np.sqrt(n) / (2 * rms)),
            "se_rms": rms, "sd_estimate": float(est.std(ddof=1)),
            "mean_estimate": float(est.mean()), "df": float(df), "reps": int(n)}


# --------------------------------------------------------------- (a) cluster bootstrap
def _resample_counts(n_groups: int, k: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n_groups) counts of ``k`` clusters drawn with replacement from ``n_groups``."""
    idx = rng.integers(0, n_groups, size=(reps, k))
    flat = (idx + (np.arange(reps) * n_groups)[:, None]).ravel()
    return np.bincount(flat, minlength=reps * n_groups).reshape(reps, n_groups).astype(float)


def bootstrap_power(
    X: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    *,
    target: int = 0,
    n_clusters: Sequence[int] | int,
    null: float = 0.0,
    effect: float | None = None,
    reps: int = 1000,
    level: float = 0.95,
    power: float = 0.8,
    seed: SeedLike = None,
) -> PilotPowerResult:
    """Power of the CR1 t test of one OLS coefficient at new numbers of clusters.

    Pure array function: ``X`` (n, k), ``y`` (n,), ``clusters`` (n,) codes of the pilot's
    resampling unit. Each replication draws ``K`` pilot clusters with replacement and
    refits; the CR1 variance (G/(G-1) and (N-1)/(N-k) factors, ``G = K`` drawn copies)
    and t(K - 1) give the test of ``coef[target] = null``.

    Parameters
    ----------
    X : (n, k) array
        The pilot's design matrix (a column of ones for a mean).
    y : (n,) array
        The pilot's outcome.
    clusters : (n,) array
        Codes (or labels) of the pilot's resampling unit.
    target : int
        Column of ``X`` whose coefficient is tested.
    n_clusters : int or sequence of int
        Numbers of clusters ``K`` of the planned studies (each >= 2).
    null : float
        Null value of the coefficient.
    effect : float, optional
        Impose ``coef[target] - null = effect`` by shifting ``y`` along
        ``X[:, target]`` (the pilot's own estimate is used when None).
    reps : int
        Replications per planned ``K`` (Monte Carlo SEs are reported).
    level : float
        Confidence level of the test (two-sided, ``1 - level``).
    power : float
        Target power of the minimum detectable effect (``mde``).
    seed : int or numpy.random.Generator, optional
        Seeds the resampling.

    References
    ----------
    Field, C. A., & Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B*, 69(3),
    369-390. https://doi.org/10.1111/j.1467-9868.2007.00593.x
    Cameron, A. C., & Miller, D. L. (2015). A practitioner's guide to cluster-robust
    inference. *Journal of Human Resources*, 50(2), 317-372.
    https://doi.org/10.3368/jhr.50.2.317
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],) or np.shape(clusters) != y.shape:
        raise EvalmixError(f"X must be (n, k) with y and clusters of length n; got X "
                           f"{X.shape}, y {y.shape}, clusters {np.shape(clusters)}")
    codes, g = cluster_codes(np.asarray(clusters))
    k = X.shape[1]
    beta_hat = np.linalg.lstsq(X, y, rcond=None)[0]
    if effect is not None:
        y = y + X[:, target] * (null + effect - beta_hat[target])
    xtx = np.zeros((g, k, k))
    np.add.at(xtx, codes, X[:, :, None] * X[:, None, :])
    xty = np.zeros((g, k))
    np.add.at(xty, codes, X * y[:, None])
    n_g = np.bincount(codes, minlength=g).astype(float)
    rng, seed = seeded_rng(seed)
    ks = np.atleast_1d(np.asarray(n_clusters, dtype=int))
    if (ks < 2).any():
        raise InvalidOptionError(f"n_clusters must be at least 2, got {ks.tolist()}")
    rows = []
    for kk in ks:
        w = _resample_counts(g, int(kk), reps, rng)
        a = (w @ xtx.reshape(g, k * k)).reshape(reps, k, k)
        b = w @ xty
        n_b = w @ n_g
        ok = np.linalg.matrix_rank(a) == k
        a_safe = np.where(ok[:, None, None], a, np.eye(k))
        beta = np.linalg.solve(a_safe, b[..., None])[..., 0]
        scores = xty[None] - np.einsum("gij,rj->rgi", xtx, beta)
        meat = np.einsum("rg,rgi,rgj->rij", w, scores, scores)
        bread = np.linalg.inv(a_safe)
        vc = bread @ meat @ bread * (kk / (kk - 1) * (n_b - 1) / (n_b - k))[:, None, None]
        se = np.sqrt(np.where(ok, vc[:, target, target], np.nan))
        est = np.where(ok, beta[:, target], np.nan)
        rows.append({"plan": f"K={kk}", "factor": "clusters", "n_clusters": int(kk),
                     **_summarise(est, se, kk - 1, null=null, level=level,
                                  target_power=power, reps=reps)})
    table = pd.DataFrame(rows)
    table["null"] = null
    table["effect"] = beta_hat[target] - null if effect is None else effect
    table["level"], table["target_power"] = level, power
    table["method"], table["seed"] = "cluster bootstrap", seed
    notes: tuple[str, ...] = ()
    if g < 10:
        notes = (f"the pilot has only {g} clusters: its between-cluster spread is itself very "
                 "uncertain, which these Monte Carlo SEs do not include",)
    return PilotPowerResult(table=table[list(PILOT_COLUMNS)], method="cluster bootstrap",
                            reps=reps, seed=seed, level=level, notes=notes)


PILOT_ESTIMANDS: tuple[str, ...] = get_args(PilotEstimand)


def pilot_power(
    table: Any,
    *,
    estimand: PilotEstimand = "mean",
    cluster: str | None = None,
    n_clusters: Sequence[int] | int,
    effect: float | None = None,
    null: float | None = None,
    conditions: tuple[str, str] | None = None,
    problem_kwargs: Mapping[str, Any] | None = None,
    reps: int = 1000,
    level: float = 0.95,
    power: float = 0.8,
    seed: SeedLike = None,
) -> PilotPowerResult:
    """Cluster-bootstrap power from a pilot :class:`~evalmix.data.table.EvalTable`.

    The estimand becomes one OLS coefficient through
    :func:`evalmix.inference.estimands.build_problem` (``mean``, ``win_rate``,
    ``controlled_win_rate``, ``difference`` paired or unpaired as it decides; extra
    arguments in ``problem_kwargs``), so the power is that of the interval
    :func:`evalmix.interval` would report with CR1; the null is the estimand's own
    (0.5 for a win rate) unless given. ``cluster`` names the resampling role (default:
    the table's first cluster role). See :func:`bootstrap_power`.
    """
    check_option("estimand", estimand, PILOT_ESTIMANDS)
    roles = table.check_cluster(cluster if cluster is not None else table.clusters[:1])
    if len(roles) != 1:
        raise InvalidOptionError(f"pilot_power resamples one cluster role, got {roles}")
    common: dict[str, Any] = dict(n_clusters=n_clusters, effect=effect, reps=reps,
                                  level=level, power=power, seed=seed)
    prob = build_problem(table, estimand, conditions=conditions, **dict(problem_kwargs or {}))
    if prob.family != "gaussian":
        raise InvalidOptionError("pilot_power bootstraps least-squares estimands; use "
                                 "family='gaussian'")
    null_value = null if null is not None else (
        float(prob.null) if np.isfinite(prob.null) else 0.0)
    return bootstrap_power(prob.X, prob.y, prob.cluster_codes[roles[0]],
                           target=prob.target, null=null_value, **common)


# ------------------------------------------------------------------ (b) parametric
def components_from_fit(fit: Any) -> tuple[dict[str, float], dict[str, float], str, float]:
    """Intercept SDs, condition-slope SDs, family and residual SD from a fit or a dict.

    A :class:`~evalmix.models.result.ModelFit` contributes its ``variance`` rows
    (``factor``, ``sd``) in the models package's labels: ``"judge"`` (or ``"1|judge"``)
    is a random intercept, ``"scenario:persona"`` an interaction intercept,
    ``"condition[treatment]|judge"`` (or ``"judge:condition"``) a judge-by-condition
    slope, ``Residual`` the residual SD (used for Gaussian families; a logit fit's
    pi^2/3 is implied). Other slopes (e.g. ``"position|judge"``; the simulated designs are
    order-balanced) are left out. A plain dict ``{factor: sd}`` is taken as intercepts of
    a binomial (logit) model.
    """
    if isinstance(fit, Mapping):
        return {str(k): float(v) for k, v in fit.items()}, {}, "binomial", 0.0
    variance = getattr(fit, "variance", None)
    if variance is None or not {"factor", "sd"} <= set(variance.columns):
        raise InvalidOptionError("expected a ModelFit (with a variance frame holding factor and sd "
                                 "columns) or a dict {factor: sd}")
    family = "gaussian" if str(getattr(fit, "family", "")).startswith("gauss") else "binomial"
    intercepts: dict[str, float] = {}
    slopes: dict[str, float] = {}
    residual = 0.0
    for name, sd in zip(variance["factor"].astype(str), variance["sd"].astype(float),
                        strict=True):
        name = name.strip()
        if name.lower() == "residual":
            residual = sd
            continue
        if "|" in name:
            term, factor = (p.strip() for p in name.split("|", 1))
            if term == "1":
                intercepts[factor] = sd
            elif term.startswith("condition"):
                slopes[factor] = sd
            continue  # other slopes: not part of the simulated design
        parts = [p.strip() for p in name.split(":")]
        if len(parts) == 2 and "condition" in parts:
            slopes[parts[1] if parts[0] == "condition" else parts[0]] = sd
        else:
            intercepts[name] = sd
    return intercepts, slopes, family, residual


def _cr1_intercept(resid: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """CR1 variance of a mean for every row of ``resid`` (reps, n), one cluster factor."""
    onehot = np.zeros((codes.size, n_groups))
    onehot[np.arange(codes.size), codes] = 1.0
    sums = resid @ onehot
    n = resid.shape[1]
    return n_groups / (n_groups - 1) * (sums**2).sum(axis=1) / n**2


def _multiway_var(resid: np.ndarray, codes: dict[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """Cameron-Gelbach-Miller multiway CR1 variance of a mean and its df, min G - 1."""
    names = list(codes)
    total = np.zeros(resid.shape[0])
    oneway = []
    for r in range(1, len(names) + 1):
        for subset in itertools.combinations(names, r):
            inter = intersect_codes(*(codes[name] for name in subset))
            g = int(inter.max()) + 1
            v = _cr1_intercept(resid, inter, g) if g > 1 else np.zeros(resid.shape[0])
            total += (-1) ** (r + 1) * v
            if r == 1:
                oneway.append(v)
    # negative multiway variances: fall back to the largest one-way variance
    total = np.where(total > 0, total, np.max(oneway, axis=0))
    df = min(int(c.max()) + 1 for c in codes.values()) - 1
    return total, df


def _simulate_plan(levels, intercepts, slopes, *, family, residual_sd, intercept, effect,
                   estimand, n_per_cell, cluster, reps, null, level, power, rng, chunk):
    names = list(levels)
    grid = np.indices([levels[f] for f in names]).reshape(len(names), -1)
    grid = np.repeat(grid, n_per_cell, axis=1)
    n_rows = grid.shape[1]
    codes = {f: grid[i] for i, f in enumerate(names)}
    # codes of every intercept term, interactions "a:b" included
    term_codes: dict[str, np.ndarray] = {}
    n_levels: dict[str, int] = {}
    for term in intercepts:
        combined = np.zeros(n_rows, dtype=np.int64)
        size = 1
        for f in term.split(":"):
            combined = combined * levels[f] + codes[f]
            size *= levels[f]
        term_codes[term], n_levels[term] = combined, size
    est_all, se_all = [], []
    df = None
    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        eta = np.full((r, n_rows), intercept, dtype=float)
        slope = np.zeros((r, n_rows))
        for f, sd in intercepts.items():
            if sd > 0:
                eta += rng.normal(0, sd, (r, n_levels[f]))[:, term_codes[f]]
        for f in names:
            if slopes.get(f, 0) > 0:
                slope += rng.normal(0, slopes[f], (r, levels[f]))[:, codes[f]]

        def draw(lin: np.ndarray) -> np.ndarray:
            if family == "binomial":
                return (rng.random(lin.shape) < expit(lin)).astype(float)
            return lin + rng.normal(0, residual_sd, lin.shape)

        if estimand == "mean":
            y = draw(eta + effect)
        else:
            y = draw(eta + effect + slope) - draw(eta)
        est = y.mean(axis=1)
        resid = y - est[:, None]
        used = {f: codes[f] for f in cluster}
        if len(used) == 1:
            f = cluster[0]
            var = _cr1_intercept(resid, codes[f], levels[f])
            df = levels[f] - 1
        else:
            var, df = _multiway_var(resid, used)
        est_all.append(est)
        se_all.append(np.sqrt(var))
    est = np.concatenate(est_all)
    se = np.concatenate(se_all)
    return _summarise(est, se, df, null=null, level=level, target_power=power, reps=reps)


def parametric_power(
    components: Any,
    *,
    n_levels: Mapping[str, int] | None = None,
    vary: Mapping[str, Sequence[int]] | None = None,
    estimand: PilotDifference = "difference",
    intercept: float = 0.0,
    effect: float = 0.0,
    null: float | None = None,
    cluster: str | Sequence[str] | None = None,
    n_per_cell: int = 1,
    family: Regression | None = None,
    residual_sd: float | None = None,
    reps: int = 500,
    level: float = 0.95,
    power: float = 0.8,
    seed: SeedLike = None,
    levels: Mapping[str, int] | None = None,
) -> PilotPowerResult:
    """Power per plan by drawing crossed data from variance components.

    The latent model (logit link for ``binomial``, identity plus a residual for
    ``gaussian``) is ``eta = intercept + effect * treat + sum_f u_f + treat * sum_f v_f``
    with crossed random intercepts ``u_f ~ N(0, sd_f^2)`` and condition slopes ``v_f``.
    Every combination of factor levels is observed ``n_per_cell`` times (per condition
    for ``estimand="difference"``, where the estimate is the mean paired
    treatment-minus-control difference; ``"mean"`` tests the mean outcome against
    ``null``, default 0.5 for binomial and 0 for gaussian). The test is CR1 with
    t(G - 1), clustered on ``cluster`` (a factor, default the first in ``levels``, or a
    list of factors: multiway CGM with df = min G - 1, equal to
    :func:`evalmix.inference.sandwich.vcov_multiway`; where the inclusion-exclusion sum is
    negative this uses the largest one-way variance instead of zero, so a replication
    never gets a zero SE).

    Parameters
    ----------
    components : ModelFit or mapping
        Latent SDs; see :func:`components_from_fit`.
    n_levels : mapping
        Pilot (base) number of levels per factor, e.g. ``{"scenario": 30, "persona": 6,
        "author": 3, "judge": 3}``.
    vary : mapping, optional
        Numbers of levels to try per factor, each factor varied with the others held at
        ``n_levels``, e.g. ``{"scenario": [10, 20, 40], "judge": [3, 6]}``. The base plan
        is always included.
    estimand : {"difference", "mean"}
        The mean paired treatment-minus-control difference, or the mean outcome.
    intercept, effect : float
        Latent intercept and treatment effect (logit scale for binomial).
    null : float, optional
        Null value of the test (default 0.5 for a binomial mean, else 0).
    cluster : str, sequence of str, or None
        Cluster factor(s) of the CR1 test (default: the first factor of ``n_levels``); a
        list gives multiway clustering.
    n_per_cell : int
        Observations per combination of factor levels (per condition).
    family : {"binomial", "gaussian"}, optional
        Outcome family (default: the components' own).
    residual_sd : float, optional
        Residual SD of a gaussian outcome (default: the components' ``Residual``).
    reps : int
        Simulated data sets per plan.
    level : float
        Confidence level of the test (two-sided, ``1 - level``).
    power : float
        Target power of the minimum detectable effect (``mde``).
    seed : int or numpy.random.Generator, optional
        Seeds the simulation.
    levels : mapping, optional
        Deprecated: the old name of ``n_levels`` (``level`` is the confidence level); it
        still works, with a :class:`FutureWarning`.

    Returns
    -------
    PilotPowerResult
        One row per plan with ``n_levels_<factor>`` columns.

    References
    ----------
    Cameron, A. C., Gelbach, J. B., & Miller, D. L. (2011). Robust inference with
    multiway clustering. *Journal of Business & Economic Statistics*, 29(2), 238-249.
    https://doi.org/10.1198/jbes.2010.07136
    Baayen, R. H., Davidson, D. J., & Bates, D. M. (2008). Mixed-effects modeling with
    crossed random effects for subjects and items. *Journal of Memory and Language*,
    59(4), 390-412. https://doi.org/10.1016/j.jml.2007.12.005
    """
    check_option("estimand", estimand, ("mean", "difference"))
    intercepts, slopes, fam, resid_sd = components_from_fit(components)
    bad = {k: v for k, v in {**intercepts, **slopes}.items() if not 0 <= v < np.inf}
    if bad:
        raise InvalidOptionError(f"variance components are standard deviations, finite and >= 0; "
                                 f"got {bad}")
    model_family = family_name(family or fam, REGRESSION_FAMILIES)
    if residual_sd is not None:
        resid_sd = residual_sd
    if model_family == "gaussian" and resid_sd <= 0:
        raise InvalidOptionError("a gaussian model needs residual_sd > 0 (or a Residual row)")
    n_levels = renamed_option(
        "parametric_power", "levels", "n_levels", levels, n_levels)
    if not n_levels:
        raise InvalidOptionError("parametric_power needs n_levels={factor: number of "
                                 "levels} for every factor of the components")
    levels = {str(k): int(v) for k, v in n_levels.items()}
    used = {f for term in intercepts for f in term.split(":")}
    unknown = (used | set(slopes) | set(vary or {})) - set(levels)
    if unknown:
        raise InvalidOptionError(f"factors {sorted(unknown)} have no number of levels; n_levels= "
                                 f"has {sorted(levels)}")
    clusters = [next(iter(levels))] if cluster is None else (
        [cluster] if isinstance(cluster, str) else list(cluster))
    if set(clusters) - set(levels):
        raise InvalidOptionError(f"cluster {clusters} must be among the factors {sorted(levels)}")
    null_value = null if null is not None else (
        0.5 if (estimand == "mean" and model_family == "binomial") else 0.0)
    plans = [("base", "base", dict(levels))]
    for f, values in (vary or {}).items():
        for v in values:
            if int(v) != levels[f]:
                plans.append((f"{f}={int(v)}", f, {**levels, f: int(v)}))
    rng, seed = seeded_rng(seed)
    rows = []
    for label, factor, lv in plans:
        if min(lv[c] for c in clusters) < 2:
            raise InvalidOptionError(f"plan {label}: the cluster factor needs at least 2 levels")
        n_rows = int(np.prod(list(lv.values()))) * n_per_cell
        chunk = max(1, min(reps, 4_000_000 // max(n_rows, 1)))
        summary = _simulate_plan(lv, intercepts, slopes, family=model_family,
                                 residual_sd=resid_sd,
                                 intercept=intercept, effect=effect, estimand=estimand,
                                 n_per_cell=n_per_cell, cluster=clusters, reps=reps,
                                 null=null_value, level=level, power=power, rng=rng,
                                 chunk=chunk)
        rows.append({"plan": label, "factor": factor,
                     "n_clusters": min(lv[c] for c in clusters), **summary,
                     **{f"n_levels_{f}": n for f, n in lv.items()}})
    table = pd.DataFrame(rows)
    table["null"], table["effect"] = null_value, effect
    table["level"], table["target_power"] = level, power
    table["method"], table["seed"] = "parametric", seed
    extra = [c for c in table.columns if c.startswith("n_levels_")]
    return PilotPowerResult(table=table[list(PILOT_COLUMNS) + extra], method="parametric",
                            reps=reps, seed=seed, level=level)
