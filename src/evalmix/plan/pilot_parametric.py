"""Power by simulation from variance components (route (b) of :mod:`evalmix.plan.pilot`).

:func:`parametric_power` draws new crossed data (scenarios x personas x authors x judges
x conditions) from the components of a fitted model (:func:`components_from_fit`) or a
dict of SDs, varying the number of levels of each factor separately, and runs a
cluster-robust t test in every draw (one-way CR1, or Cameron-Gelbach-Miller multiway
over several factors).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix.errors import InvalidOptionError, check_option, renamed_option
from evalmix.families import REGRESSION_FAMILIES, Regression, family_name
from evalmix.inference.sandwich import intersect_codes
from evalmix.plan.pilot_result import PILOT_COLUMNS, PilotPowerResult, _summarise
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.vocabulary import PilotDifference


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
