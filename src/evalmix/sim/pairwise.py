"""PsycheEval-style pairwise-judge simulator with known truth.

Design: scenarios x personas x author models x conditions. Every output (one per
scenario, persona, author and condition) is compared with a fixed reference answer by
every judge, in both orders (AB and BA). The table follows the shared-data convention:
``model_a`` is the baseline (``"reference"``) and ``model_b`` names the condition of the
evaluated output.

Latent model, on the log-odds that the evaluated output (``model_b``) is preferred::

    eta = alpha + beta * treat
          + u_scenario + u_persona + u_author + u_judge
          + v_judge * treat                      (judge x condition interaction)
          + pi_judge * x_pos                     (position bias, judge-specific)

with ``treat`` = 1 for the treatment condition, ``x_pos`` = +1/2 if the evaluated
output was shown first and -1/2 otherwise (so ``pi`` is the log-odds ratio of being
shown first rather than second), ``u ~ N(0, sd^2)`` crossed, ``v_judge ~ N(0,
sd_judge_condition^2)`` and ``pi_judge ~ N(position_bias, sd_position_judge^2)``.
Verdicts follow a cumulative logit with cut points ``-tau, tau``::

    P(b wins) = logistic(eta - tau),  P(a wins) = logistic(-eta - tau),  tie otherwise.

With ``tie_threshold=0`` there are no ties and ``eta`` is the exact binary log-odds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix.errors import InvalidOptionError
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.sim._common import SimResult

__all__ = ["pairwise_judges", "DEFAULT_SDS"]

#: Default latent standard deviations (those measured in shared/PERF_NOTES.md).
DEFAULT_SDS: Mapping[str, float] = {
    "scenario": 0.8,
    "persona": 0.5,
    "author": 0.3,
    "judge": 0.4,
}


def _probabilities(eta: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    p_b = expit(eta - tau)
    p_a = expit(-eta - tau)
    return p_b, p_a


def _marginal_truth(
    *,
    alpha: float,
    beta: float,
    tau: float,
    sds: Mapping[str, float],
    sd_judge_condition: float,
    pos_mean: float,
    pos_sd: float,
    fixed: Mapping[str, np.ndarray] | None,
    conditions: tuple[str, str],
    n_draws: int = 400_000,
) -> dict[str, Any]:
    """Order-balanced population-averaged win probabilities by Monte Carlo.

    ``fixed`` holds realised effects to condition on (``judge`` intercepts,
    ``judge_condition`` slopes, ``judge_position``, ``author``); other factors are
    integrated over their normal distributions. A fixed internal seed keeps the truth
    identical across calls.
    """
    rng = np.random.default_rng(20261130)
    z = {k: rng.standard_normal(n_draws) for k in ("scenario", "persona", "author", "judge",
                                                   "jc", "pos")}
    base = sds["scenario"] * z["scenario"] + sds["persona"] * z["persona"]
    if fixed is not None:
        # average over the realised authors and judges (each equally often in the design)
        ia = rng.integers(0, fixed["author"].size, n_draws)
        ij = rng.integers(0, fixed["judge"].size, n_draws)
        base = base + fixed["author"][ia] + fixed["judge"][ij]
        slope = fixed["judge_condition"][ij]
        pos = fixed["judge_position"][ij]
    else:
        base = base + sds["author"] * z["author"] + sds["judge"] * z["judge"]
        slope = sd_judge_condition * z["jc"]
        pos = pos_mean + pos_sd * z["pos"]
    out: dict[str, Any] = {}
    for cond, treat in zip(conditions, (0.0, 1.0), strict=True):
        eta = alpha + beta * treat + base + slope * treat
        win = tie = 0.0
        for xpos in (0.5, -0.5):
            p_b, p_a = _probabilities(eta + pos * xpos, tau)
            win += 0.5 * p_b.mean()
            tie += 0.5 * (1 - p_b - p_a).mean()
        out[cond] = {"p_win": float(win), "p_tie": float(tie),
                     "score": float(win + 0.5 * tie),
                     "score_excluding_ties": float(win / (1 - tie))}
    c0, c1 = conditions
    out["difference_score"] = out[c1]["score"] - out[c0]["score"]
    out["difference_p_win"] = out[c1]["p_win"] - out[c0]["p_win"]
    return out


def pairwise_judges(
    n_scenarios: int = 30,
    n_personas: int = 6,
    n_authors: int = 3,
    n_judges: int = 3,
    *,
    conditions: tuple[str, str] = ("control", "treatment"),
    intercept: float = 0.0,
    condition_effect: float = 0.3,
    position_bias: float = 0.2,
    sds: Mapping[str, float] | None = None,
    sd_judge_condition: float = 0.3,
    sd_position_judge: float = 0.3,
    tie_threshold: float = 0.2,
    judges: Mapping[str, float] | None = None,
    seed: SeedLike = None,
) -> SimResult:
    """Simulate pairwise judgments with crossed random effects and position bias.

    Parameters
    ----------
    n_scenarios, n_personas, n_authors, n_judges : int
        Levels of each crossed factor. Rows = product x 2 conditions x 2 orders.
    conditions : (str, str)
        Control and treatment condition labels (``model_b`` values).
    intercept : float
        Log-odds that a control output beats the reference (order-balanced, typical
        cluster).
    condition_effect : float
        Log-odds ratio treatment vs control (typical cluster, ``beta``).
    position_bias : float
        Mean log-odds ratio of being shown first rather than second (``pi``).
    sds : mapping
        Latent SDs of the random intercepts; keys ``scenario``, ``persona``, ``author``,
        ``judge`` (defaults in :data:`DEFAULT_SDS`).
    sd_judge_condition : float
        SD of judge-specific condition effects (judge x condition interaction).
    sd_position_judge : float
        SD of judge-specific position bias around ``position_bias``.
    tie_threshold : float
        Cut point ``tau`` of the cumulative logit; 0 gives no ties.
    judges : mapping, optional
        Judge names to fixed extra position bias (overrides the random draw), e.g.
        ``{"gpt-4": 0.0, "weak-judge": 1.5}``; its length sets ``n_judges``.
    seed : int or numpy.random.Generator
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data`` columns: ``scenario, persona, author, judge, output_id, condition,
        model_a, model_b, first_shown, outcome`` (``'a'``/``'b'``/``'tie'``).
        ``truth`` holds the parameters, the realised effects, ``judge_position`` (true
        per-judge position bias), and two sets of true probability-scale estimands:
        ``marginal`` (all random effects integrated out) and ``given_authors_judges``
        (the realised authors and judges, scenarios and personas integrated out), each
        with per-condition ``p_win``, ``p_tie``, ``score`` (ties 1/2) and the
        treatment-minus-control ``difference_score``.

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> res = pairwise_judges(10, 4, 3, 3, seed=1)
    >>> len(res.data)
    1440
    >>> table = res.table()
    """
    conditions = tuple(conditions)  # type: ignore[assignment]
    if (len(conditions) != 2 or len(set(map(str, conditions))) != 2
            or "reference" in map(str, conditions)):
        raise InvalidOptionError(
            f"conditions must be two distinct labels other than 'reference' (the baseline "
            f"model_a), e.g. ('control', 'treatment'); got {conditions!r}"
        )
    sd = {**DEFAULT_SDS, **(sds or {})}
    unknown = set(sd) - set(DEFAULT_SDS)
    if unknown:
        raise InvalidOptionError(
            f"unknown keys in sds: {sorted(unknown)}; allowed: {sorted(DEFAULT_SDS)}")
    if judges is not None:
        n_judges = len(judges)
    for name, k in (("n_scenarios", n_scenarios), ("n_personas", n_personas),
                    ("n_authors", n_authors), ("n_judges", n_judges)):
        if k < 1:
            raise InvalidOptionError(f"{name} must be at least 1, got {k}")
    bad_sd = {k: v for k, v in sd.items() if not v >= 0}
    if bad_sd or not sd_judge_condition >= 0 or not sd_position_judge >= 0:
        raise InvalidOptionError(
            f"standard deviations must be >= 0; got sds={sd}, sd_judge_condition="
            f"{sd_judge_condition}, sd_position_judge={sd_position_judge}"
        )
    if tie_threshold < 0:
        raise InvalidOptionError(f"tie_threshold must be >= 0, got {tie_threshold}")
    rng, seed = seeded_rng(seed)
    u = {
        "scenario": rng.normal(0, sd["scenario"], n_scenarios),
        "persona": rng.normal(0, sd["persona"], n_personas),
        "author": rng.normal(0, sd["author"], n_authors),
        "judge": rng.normal(0, sd["judge"], n_judges),
    }
    v_jc = rng.normal(0, sd_judge_condition, n_judges)
    pi_j = position_bias + rng.normal(0, sd_position_judge, n_judges)
    judge_names = list(judges) if judges is not None else [f"judge{j + 1}" for j in range(n_judges)]
    if judges is not None:
        pi_j = np.asarray([position_bias + float(judges[j]) for j in judge_names])

    # full factorial grid: scenario, persona, author, condition, judge, order
    shape = (n_scenarios, n_personas, n_authors, 2, n_judges, 2)
    idx = np.indices(shape).reshape(len(shape), -1)
    s, p, a, c, j, o = idx
    b_first = o == 0  # order 0: the evaluated output (model_b) shown first
    x_pos = np.where(b_first, 0.5, -0.5)
    treat = c.astype(float)
    eta = (intercept + condition_effect * treat + u["scenario"][s] + u["persona"][p]
           + u["author"][a] + u["judge"][j] + v_jc[j] * treat + pi_j[j] * x_pos)
    p_b, p_a = _probabilities(eta, tie_threshold)
    r = rng.random(eta.size)
    outcome = np.where(r < p_b, "b", np.where(r < p_b + p_a, "a", "tie"))
    cond = np.asarray(conditions, dtype=object)[c]
    output_id = (((s * n_personas + p) * n_authors + a) * 2 + c)
    data = pd.DataFrame({
        "scenario": [f"s{k:03d}" for k in s],
        "persona": [f"p{k:02d}" for k in p],
        "author": [f"author{k + 1}" for k in a],
        "judge": np.asarray(judge_names, dtype=object)[j],
        "output_id": [f"o{k:06d}" for k in output_id],
        "condition": cond,
        "model_a": "reference",
        "model_b": cond,
        "first_shown": np.where(b_first, "b", "a"),
        "outcome": outcome,
    })
    fixed = {"author": u["author"], "judge": u["judge"], "judge_condition": v_jc,
             "judge_position": pi_j}
    common: dict[str, Any] = dict(alpha=intercept, beta=condition_effect, tau=tie_threshold, sds=sd,
                  sd_judge_condition=sd_judge_condition, conditions=tuple(conditions),
                  pos_mean=position_bias, pos_sd=sd_position_judge)
    truth = {
        "intercept": intercept,
        "condition_effect": condition_effect,
        "position_bias": position_bias,
        "sds": dict(sd),
        "sd_judge_condition": sd_judge_condition,
        "sd_position_judge": sd_position_judge,
        "tie_threshold": tie_threshold,
        "effects": {k: v.copy() for k, v in u.items()},
        "judge_condition": dict(zip(judge_names, v_jc.tolist(), strict=True)),
        "judge_position": dict(zip(judge_names, pi_j.tolist(), strict=True)),
        "marginal": _marginal_truth(**common, fixed=None),
        "given_authors_judges": _marginal_truth(**common, fixed=fixed),
    }
    read_kwargs = {
        "outcome": "outcome",
        "model_a": "model_a",
        "model_b": "model_b",
        "first_shown": "first_shown",
        "clusters": {"scenario": "scenario", "persona": "persona", "author": "author",
                     "judge": "judge"},
        "ties": "half",
    }
    return SimResult(data=data, truth=truth, read_kwargs=read_kwargs, seed=seed)
