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
Route (b) is in :mod:`evalmix.plan.pilot_parametric` and the result in
:mod:`evalmix.plan.pilot_result` (both re-exported here); route (a) here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError, InvalidOptionError, check_option
from evalmix.inference.estimands import build_problem
from evalmix.inference.sandwich import cluster_codes
from evalmix.plan.pilot_parametric import components_from_fit, parametric_power
from evalmix.plan.pilot_result import PILOT_COLUMNS, PilotPowerResult, _summarise
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.vocabulary import PilotEstimand

__all__ = ["PilotPowerResult", "bootstrap_power", "pilot_power", "parametric_power",
           "components_from_fit"]


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
