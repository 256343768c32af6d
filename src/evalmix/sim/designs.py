"""Crossed and nested binary-score designs with known population-average truth.

:func:`crossed_scores` draws 0/1 scores from a logistic model with any mix of crossed
and nested random factors, two conditions (with random condition slopes per factor),
fixed judges and replicates::

    logit P(y = 1) = alpha + beta * treat + judge_j
                     + sum over factors f of (u_f[level] + v_f[level] * treat)

``u_f ~ N(0, sd_f^2)``, ``v_f ~ N(0, slope_sd_f^2)``. A nested factor (``"question"``
inside ``"passage"``) has its own levels within each level of its parent, with the
sizes given. Judges are *fixed* (their effects are set, not drawn), so the truth is the
score over new levels of every random factor for these judges: for condition ``c``,
``mean_j E[expit(alpha + beta c + judge_j + Z)]`` with ``Z ~ N(0, sum_f sd_f^2 +
c sum_f slope_sd_f^2)``, a one-dimensional Gauss-Hermite integral. These are the
designs of the coverage study in ``docs/coverage.md`` (crossed sampled factors, few
outer clusters, few levels, degenerate outcomes).

:func:`stratified_scores` draws items *within fixed strata* (a benchmark's chosen
subsets or categories, with set effects and set numbers of items): the truth is the
score over new items of these strata, in these proportions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix.errors import InvalidOptionError
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.sim._common import SimResult

__all__ = ["Factor", "crossed_scores", "population_scores", "stratified_scores",
           "unique_rows"]

@dataclass(frozen=True)
class Factor:
    """One random factor of :func:`crossed_scores`.

    Attributes
    ----------
    name : str
        Column name (and cluster role) of the factor.
    levels : int or sequence of int
        Number of levels; for a nested factor, the number of levels inside each level
        of ``parent`` (one int for all, or one per parent level).
    sd : float
        SD of its random intercepts (logit scale).
    slope_sd : float
        SD of its random condition effects (treatment minus control, logit scale).
    parent : str, optional
        Name of the factor this one is nested in.
    """

    name: str
    levels: int | Sequence[int]
    sd: float = 0.0
    slope_sd: float = 0.0
    parent: str | None = None


#: Gauss-Hermite nodes for the population-average truth (exact to ~1e-12 here).
_GH_NODES = 80


def population_scores(intercept: float, condition_effect: float,
                      judges: Sequence[float], var0: float, var1: float) -> dict[str, float]:
    """True population-average score per condition and their difference.

    ``var0`` / ``var1``: total random-effect variance of the log-odds under control /
    treatment. Averaged over the fixed ``judges`` effects.
    """
    x, w = np.polynomial.hermite_e.hermegauss(_GH_NODES)
    w = w / w.sum()
    j = np.asarray(judges, dtype=float)[:, None]
    p0 = float(np.mean(expit(intercept + j + np.sqrt(var0) * x) @ w))
    p1 = float(np.mean(expit(intercept + condition_effect + j + np.sqrt(var1) * x) @ w))
    return {"control": p0, "treatment": p1, "difference": p1 - p0}


def crossed_scores(
    factors: Sequence[Factor],
    *,
    intercept: float = 0.0,
    condition_effect: float = 0.3,
    judges: Mapping[str, float] | None = None,
    replicates: int = 1,
    conditions: tuple[str, str] = ("control", "treatment"),
    seed: SeedLike = None,
) -> SimResult:
    """Binary scores over crossed and nested random factors, two conditions, fixed judges.

    Every combination of the top-level (non-nested) factors' levels, with the nested
    levels expanded inside their parents, is scored under both conditions by every
    judge ``replicates`` times.

    Parameters
    ----------
    factors : sequence of Factor
        Random factors; parents before their nested factors.
    intercept, condition_effect : float
        Log-odds of control and the treatment effect at a typical level.
    judges : mapping of str to float, optional
        Fixed judge effects (default one judge with effect 0).
    replicates : int
        Repeated scores of the same unit (a ``rep`` column when > 1).
    conditions : (str, str)
        Control and treatment condition labels.
    seed : int or numpy.random.Generator
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data`` columns: one per factor, ``condition``, ``judge``, (``rep``), ``y``;
        ``truth``: :func:`population_scores` for this design (``control``,
        ``treatment``, ``difference``) and the drawn effects.

    Examples
    --------
    >>> from evalmix.sim.designs import Factor, crossed_scores
    >>> res = crossed_scores([Factor("scenario", 20, 0.8), Factor("persona", 5, 0.5)],
    ...                      seed=1)
    >>> len(res.data), round(res.truth["treatment"], 3)
    (200, 0.563)
    """
    judges = dict(judges) if judges is not None else {"judge1": 0.0}
    if not factors:
        raise InvalidOptionError("crossed_scores needs at least one Factor")
    if replicates < 1:
        raise InvalidOptionError(f"replicates must be at least 1, got {replicates}")
    rng, seed = seeded_rng(seed)
    names = [f.name for f in factors]
    if len(set(names)) != len(names):
        raise InvalidOptionError(f"factor names must be distinct, got {names}")
    # grid of top-level factors, nested factors expanded within their parent
    grid = pd.DataFrame({"_": [0]})
    effects: dict[str, Any] = {}
    for f in factors:
        if f.sd < 0 or f.slope_sd < 0:
            raise InvalidOptionError(f"factor {f.name!r}: sd and slope_sd must be >= 0")
        if f.parent is None:
            k = int(np.asarray(f.levels).item())
            lev = pd.DataFrame({f.name: np.arange(k)})
            grid = grid.merge(lev, how="cross")
            n_total = k
        else:
            if f.parent not in grid.columns:
                raise InvalidOptionError(f"factor {f.name!r}: parent {f.parent!r} must come first")
            n_parent = int(grid[f.parent].max()) + 1
            sizes = np.broadcast_to(np.asarray(f.levels, dtype=np.int64), (n_parent,))
            if (sizes < 1).any():
                raise InvalidOptionError(f"factor {f.name!r}: every parent needs >= 1 level")
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            nested = pd.DataFrame({
                f.parent: np.repeat(np.arange(n_parent), sizes),
                f.name: np.concatenate([s + np.arange(m) for s, m in zip(starts, sizes,
                                                                         strict=True)]),
            })
            grid = grid.merge(nested, on=f.parent)
            n_total = int(sizes.sum())
        effects[f.name] = (rng.normal(0, f.sd, n_total), rng.normal(0, f.slope_sd, n_total))
    grid = grid.drop(columns="_")
    cond = pd.DataFrame({"_c": [0, 1]})
    jd = pd.DataFrame({"_j": np.arange(len(judges))})
    rep = pd.DataFrame({"_r": np.arange(replicates)})
    full = grid.merge(cond, how="cross").merge(jd, how="cross").merge(rep, how="cross")
    treat = full["_c"].to_numpy(dtype=float)
    jeff = np.asarray(list(judges.values()), dtype=float)
    eta = intercept + condition_effect * treat + jeff[full["_j"].to_numpy()]
    for f in factors:
        u, v = effects[f.name]
        idx = full[f.name].to_numpy()
        eta = eta + u[idx] + v[idx] * treat
    y = (rng.random(eta.size) < expit(eta)).astype(np.int64)
    width = {f.name: len(str(len(effects[f.name][0]))) for f in factors}
    data = pd.DataFrame({f.name: [f"{f.name[:1]}{k:0{width[f.name]}d}" for k in
                                  full[f.name].to_numpy()] for f in factors})
    data["condition"] = np.asarray(conditions, dtype=object)[full["_c"].to_numpy()]
    data["judge"] = np.asarray(list(judges), dtype=object)[full["_j"].to_numpy()]
    if replicates > 1:
        data["rep"] = full["_r"].to_numpy() + 1
    data["y"] = y
    var0 = sum(f.sd**2 for f in factors)
    var1 = var0 + sum(f.slope_sd**2 for f in factors)
    truth: dict[str, Any] = population_scores(intercept, condition_effect,
                                              list(judges.values()), var0, var1)
    truth["effects"] = {k: {"intercept": u, "slope": v} for k, (u, v) in effects.items()}
    clusters = {f.name: f.name for f in factors}
    if len(judges) > 1:
        clusters["judge"] = "judge"
    if replicates > 1:
        clusters["rep"] = "rep"
    return SimResult(data=data, truth=truth,
                     read_kwargs={"outcome": "y", "condition": "condition",
                                  "clusters": clusters},
                     seed=seed)


def stratified_scores(
    strata: Mapping[str, float],
    items: int | Sequence[int],
    *,
    item_sd: float = 0.8,
    slope_sd: float = 0.3,
    intercept: float = 0.0,
    condition_effect: float = 0.3,
    replicates: int = 1,
    conditions: tuple[str, str] = ("control", "treatment"),
    seed: SeedLike = None,
) -> SimResult:
    """Binary scores of items sampled within fixed strata, two conditions.

    The model is::

        logit P(y = 1) = alpha + beta * treat + s_k + u_i + v_i * treat

    with stratum effects ``s_k`` set (the strata were chosen, like AlpacaEval's subsets
    or MT-Bench's categories), ``items[k]`` items drawn in stratum ``k`` (``u_i ~ N(0,
    item_sd^2)``, ``v_i ~ N(0, slope_sd^2)``), each scored ``replicates`` times per
    condition. The truth for condition ``c`` is the score over new items of the same
    strata in the same proportions: ``sum_k w_k E[expit(alpha + beta c + s_k + Z)]``,
    ``w_k = items[k] / sum(items)``, ``Z ~ N(0, item_sd^2 + c slope_sd^2)``.

    Parameters
    ----------
    strata : mapping of str to float
        Stratum labels and their fixed effects (logit scale).
    items : int or sequence of int
        Items per stratum (one int for all, or one per stratum).
    item_sd, slope_sd : float
        SD of the items' random intercepts and condition slopes.
    intercept, condition_effect : float
        Log-odds of control and the treatment effect.
    replicates : int
        Repeated scores of an item per condition (a ``rep`` column when > 1).
    conditions : (str, str)
        Control and treatment condition labels.
    seed : int or numpy.random.Generator
        Seeds the random draws.

    Returns
    -------
    SimResult
        ``data`` columns ``subset``, ``item``, ``condition``, (``rep``), ``y``; the
        table has ``subset`` declared a stratum; ``truth`` holds ``control``,
        ``treatment``, ``difference`` and the weights.

    Examples
    --------
    >>> res = stratified_scores({"a": -0.5, "b": 0.5}, [10, 30], seed=1)
    >>> t = res.table()
    >>> t.strata, t.sampled, len(res.data)
    (('subset',), ('item',), 80)
    """
    if not strata:
        raise InvalidOptionError("stratified_scores needs at least one stratum")
    if replicates < 1 or item_sd < 0 or slope_sd < 0:
        raise InvalidOptionError("replicates must be >= 1 and the SDs >= 0")
    rng, seed = seeded_rng(seed)
    effects = np.asarray(list(strata.values()), dtype=float)
    sizes = np.broadcast_to(np.asarray(items, dtype=np.int64), effects.shape)
    if (sizes < 1).any():
        raise InvalidOptionError(f"every stratum needs at least one item, got {list(sizes)}")
    stratum = np.repeat(np.arange(effects.size), sizes)
    n = stratum.size
    u, v = rng.normal(0, item_sd, n), rng.normal(0, slope_sd, n)
    item = np.repeat(np.arange(n), 2 * replicates)
    treat = np.tile(np.repeat([0.0, 1.0], replicates), n)
    eta = (intercept + condition_effect * treat + effects[stratum[item]] + u[item]
           + v[item] * treat)
    width = len(str(n))
    data = pd.DataFrame({
        "subset": np.asarray(list(strata), dtype=object)[stratum[item]],
        "item": [f"i{k:0{width}d}" for k in item],
        "condition": np.asarray(conditions, dtype=object)[treat.astype(np.int64)],
    })
    if replicates > 1:
        data["rep"] = np.tile(np.arange(replicates) + 1, 2 * n)
    data["y"] = (rng.random(eta.size) < expit(eta)).astype(np.int64)
    w = sizes / sizes.sum()
    x, gw = np.polynomial.hermite_e.hermegauss(_GH_NODES)
    gw = gw / gw.sum()
    sd0, sd1 = item_sd, np.sqrt(item_sd**2 + slope_sd**2)
    p0 = float(w @ (expit(intercept + effects[:, None] + sd0 * x) @ gw))
    p1 = float(w @ (expit(intercept + condition_effect + effects[:, None] + sd1 * x) @ gw))
    clusters = {"item": "item", "subset": "subset"}
    if replicates > 1:
        clusters["rep"] = "rep"
    return SimResult(data=data, truth={"control": p0, "treatment": p1,
                                       "difference": p1 - p0, "weights": w.tolist()},
                     read_kwargs={"outcome": "y", "condition": "condition",
                                  "clusters": clusters, "strata": ["subset"]},
                     seed=seed)


def unique_rows(n: int, n_scenarios: int, *, n_personas: int = 12,
                seed: SeedLike = None) -> Any:
    """An EvalTable of ``n`` 0/1 rows drawn at random from scenario x persona x author (3)
    x judge (3) x condition x a randomised +-1 position: most rows are their own
    covariate pattern (issue 35's design: the Bayesian kernel's hardest case).

    ``logit P(y = 1) = 0.3 treat + 0.2 position + sum_f u_f``, ``u_f ~ N(0, sd_f^2)`` with
    SDs 0.8 (scenario), 0.5 (persona), 0.3 (author), 0.4 (judge); no condition slopes.
    """
    from evalmix.data import read

    rng, _ = seeded_rng(seed)
    levels = {"scenario": n_scenarios, "persona": n_personas, "author": 3, "judge": 3}
    sds = {"scenario": 0.8, "persona": 0.5, "author": 0.3, "judge": 0.4}
    cond = rng.integers(0, 2, n)
    pos = rng.choice([-1.0, 1.0], n)
    eta = 0.3 * cond + 0.2 * pos
    cols = {}
    for f, k in levels.items():
        code = rng.integers(0, k, n)
        eta = eta + rng.normal(0, sds[f], k)[code]
        cols[f] = np.array([f"{f[0]}{i:04d}" for i in range(k)])[code]
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    df = pd.DataFrame({**cols, "condition": np.array(["control", "treatment"])[cond],
                       "position": pos, "y": y})
    return read(df, outcome="y", condition="condition", position="position",
                clusters={f: f for f in levels})
