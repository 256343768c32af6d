"""Leaderboard simulators with known abilities, win rates and ranks.

:func:`baseline_leaderboard` has the shape of an AlpacaEval-style log: every model
answers the same instructions once, and its answer is compared with the baseline's
answer by one or more judges, each judging a random subset of the models. On the
log-odds that the model's answer wins::

    eta = theta_model + b_judge + u_item + w_(item, model)

``u_item ~ N(0, sd_item^2)`` (how hard the instruction is for any model against the
baseline: shared by every model), ``w ~ N(0, sd_output^2)`` (the quality of this answer:
shared by every judge who judges it), ``b_judge ~ N(0, sd_judge^2)`` (judge leniency).
Verdicts follow a cumulative logit with cut points ``-tau, tau`` (no ties when
``tau = 0``). The latent item ICC of a model's verdicts is
``sd_item^2 / (sd_item^2 + sd_output^2 + pi^2 / 3)``.

The true win rate of a model is the population average over instructions (``u`` and
``w`` integrated out by Gauss-Hermite quadrature) and over the judges that judged it,
equally weighted as in the design: exactly the expectation of the model's row mean, the
estimand of :func:`evalmix.inference.leaderboard.leaderboard`.

:func:`round_robin` has every pair of models compared on every item (Bradley-Terry
designs); the true ranks are those of the abilities. :func:`arena_battles` draws
Chatbot Arena-style battles: random pairs on prompts holding a few battles each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix.errors import InvalidOptionError, check_number
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.sim._common import SimResult

__all__ = ["arena_battles", "baseline_leaderboard", "round_robin"]

#: Gauss-Hermite nodes for the population-average win rates (error < 1e-12 here).
QUADRATURE_NODES = 80


def _names(prefix: str, n: int) -> np.ndarray:
    width = len(str(n - 1))
    return np.array([f"{prefix}{k:0{width}d}" for k in range(n)], dtype=object)


def _verdicts(eta: np.ndarray, tau: float, rng: np.random.Generator) -> np.ndarray:
    p_b, p_a = expit(eta - tau), expit(-eta - tau)
    r = rng.random(eta.size)
    return np.where(r < p_b, "b", np.where(r < p_b + p_a, "a", "tie"))


def _average_score(eta: np.ndarray, sd: float, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """E[score] and E[P(win)] over ``N(eta, sd^2)`` (ties count 1/2) by quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
    w = w / w.sum()
    e = np.asarray(eta, dtype=float)[..., None] + sd * x
    p_b, p_a = expit(e - tau), expit(-e - tau)
    return (p_b + 0.5 * (1 - p_b - p_a)) @ w, p_b @ w


def _check(**values: float) -> None:
    for name, v in values.items():
        check_number(name, v, low=0)


def baseline_leaderboard(
    n_models: int = 100,
    n_items: int = 805,
    n_judges: int = 5,
    *,
    ability_sd: float = 1.0,
    sd_item: float = 1.0,
    sd_output: float = 0.7,
    sd_judge: float = 0.3,
    extra_judge_prob: float = 0.06,
    tie_threshold: float = 0.0,
    baseline: str = "baseline",
    seed: SeedLike = None,
) -> SimResult:
    """Many models, each compared with one baseline on the same items by some judges.

    Parameters
    ----------
    n_models, n_items, n_judges : int
        Models besides the baseline, items, and judges.
    ability_sd : float
        SD of the true abilities ``theta`` (log-odds against the baseline).
    sd_item, sd_output, sd_judge : float
        SDs of the item, answer (item x model) and judge effects (defaults: latent item
        ICC 1 / (1 + 0.49 + pi^2/3) = 0.21).
    extra_judge_prob : float
        Every model has one judge drawn at random; every other judge also judges it with
        this probability (default: about 1.24 judges per model, so 100 models x 805
        items give about 100,000 rows).
    tie_threshold : float
        Cut point ``tau`` of the cumulative logit (0: no ties).
    baseline : str
        Name of the baseline model every model is compared with.
    seed : int or numpy.random.Generator
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data`` columns ``item, judge, model_a`` (the baseline), ``model_b`` (the
        model), ``outcome`` (``"a"``, ``"b"``, ``"tie"``). ``truth``: ``abilities``,
        ``win_rate`` (population-average score, ties 1/2, over the model's judges),
        ``p_win``, ``rank`` (1 = best), ``judges`` (who judged each model),
        ``cell_win_rate`` (judge x model frame of the judged cells), ``judge_effects``,
        ``icc_item``.

    Examples
    --------
    >>> sim = baseline_leaderboard(n_models=10, n_items=50, seed=1)
    >>> sorted(sim.truth["rank"].values()) == list(range(1, 11))
    True
    """
    for name, k in (("n_models", n_models), ("n_items", n_items), ("n_judges", n_judges)):
        if k < 1:
            raise InvalidOptionError(f"{name} must be at least 1, got {k}")
    _check(ability_sd=ability_sd, sd_item=sd_item, sd_output=sd_output, sd_judge=sd_judge,
           tie_threshold=tie_threshold)
    extra_judge_prob = check_number("extra_judge_prob", extra_judge_prob, low=0, high=1)
    rng, seed = seeded_rng(seed)
    models, items, judges = _names("model", n_models), _names("item", n_items), _names(
        "judge", n_judges)
    if baseline in set(models):
        raise InvalidOptionError(f"baseline={baseline!r} clashes with a model name; rename it")
    theta = rng.normal(0.0, ability_sd, n_models)
    b = rng.normal(0.0, sd_judge, n_judges)
    u = rng.normal(0.0, sd_item, n_items)
    w = rng.normal(0.0, sd_output, (n_items, n_models))
    judged = rng.random((n_judges, n_models)) < extra_judge_prob
    judged[rng.integers(0, n_judges, n_models), np.arange(n_models)] = True
    jj, mm = np.nonzero(judged)  # one (judge, model) cell per pair
    cell = np.repeat(np.arange(jj.size), n_items)
    item = np.tile(np.arange(n_items), jj.size)
    j, m = jj[cell], mm[cell]
    eta = theta[m] + b[j] + u[item] + w[item, m]
    data = pd.DataFrame({
        "item": items[item], "judge": judges[j], "model_a": baseline,
        "model_b": models[m], "outcome": _verdicts(eta, tie_threshold, rng),
    })
    sd = float(np.hypot(sd_item, sd_output))
    score, p_win = _average_score(theta[mm] + b[jj], sd, tie_threshold)
    cells = pd.DataFrame({"judge": judges[jj], "model": models[mm], "win_rate": score,
                          "p_win": p_win})
    pooled = cells.groupby("model")[["win_rate", "p_win"]].mean()
    rate = pooled["win_rate"].to_numpy()
    rank = 1 + (rate[None, :] > rate[:, None]).sum(axis=1)
    truth = {
        "abilities": dict(zip(models, theta.tolist(), strict=True)),
        "win_rate": dict(zip(pooled.index, rate.tolist(), strict=True)),
        "p_win": dict(zip(pooled.index, pooled["p_win"].tolist(), strict=True)),
        "rank": dict(zip(pooled.index, rank.tolist(), strict=True)),
        "judges": {str(mod): list(g["judge"]) for mod, g in cells.groupby("model")},
        "cell_win_rate": cells,
        "judge_effects": dict(zip(judges, b.tolist(), strict=True)),
        "icc_item": sd_item**2 / (sd_item**2 + sd_output**2 + np.pi**2 / 3),
        "baseline": baseline,
    }
    read_kwargs = {"outcome": "outcome", "model_a": "model_a", "model_b": "model_b",
                   "clusters": {"item": "item", "judge": "judge"}, "ties": "half"}
    return SimResult(data=data, truth=truth, read_kwargs=read_kwargs, seed=seed)


def round_robin(
    n_models: int,
    n_items: int,
    *,
    ability_sd: float = 1.0,
    sd_output: float = 0.7,
    tie_threshold: float = 0.0,
    seed: SeedLike = None,
) -> SimResult:
    """Every pair of models compared once on every item (a Bradley-Terry design).

    ``eta = theta_a - theta_b + w_(item, a) - w_(item, b)`` with answer effects
    ``w ~ N(0, sd_output^2)`` shared by all comparisons of one answer; the true ranks are
    those of ``theta`` (``P(a beats b) > 1/2`` exactly when ``theta_a > theta_b``).

    Parameters
    ----------
    n_models : int
        Number of models (at least 2); every pair is compared on every item.
    n_items : int
        Number of items (at least 1).
    ability_sd : float
        SD of the true abilities ``theta`` (log-odds; centred to mean 0).
    sd_output : float
        SD of the answer effects ``w`` (item x model).
    tie_threshold : float
        Cut point ``tau`` of the cumulative logit (0: no ties).
    seed : int or numpy.random.Generator
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data`` columns ``item, model_a, model_b, outcome``; ``truth``: ``abilities``
        (centred to mean 0), ``rank``.

    Examples
    --------
    >>> sim = round_robin(n_models=4, n_items=10, seed=1)
    >>> len(sim.data)
    60
    """
    if n_models < 2 or n_items < 1:
        raise InvalidOptionError(f"round_robin needs n_models >= 2 and n_items >= 1, got "
                                 f"{n_models} and {n_items}")
    _check(ability_sd=ability_sd, sd_output=sd_output, tie_threshold=tie_threshold)
    rng, seed = seeded_rng(seed)
    models, items = _names("model", n_models), _names("item", n_items)
    theta = rng.normal(0.0, ability_sd, n_models)
    theta -= theta.mean()
    w = rng.normal(0.0, sd_output, (n_items, n_models))
    a, bb = np.triu_indices(n_models, 1)
    flip = rng.random((n_items, a.size)) < 0.5  # which model is listed first
    ma = np.where(flip, bb[None, :], a[None, :]).ravel()
    mb = np.where(flip, a[None, :], bb[None, :]).ravel()
    item = np.repeat(np.arange(n_items), a.size)
    # P(model_a wins) = expit(eta): "a" verdicts from eta, as _verdicts scores "b" wins
    eta = theta[ma] - theta[mb] + w[item, ma] - w[item, mb]
    outcome = _verdicts(-eta, tie_threshold, rng)
    data = pd.DataFrame({"item": items[item], "model_a": models[ma], "model_b": models[mb],
                         "outcome": outcome})
    rank = 1 + (theta[None, :] > theta[:, None]).sum(axis=1)
    truth = {"abilities": dict(zip(models, theta.tolist(), strict=True)),
             "rank": dict(zip(models, rank.tolist(), strict=True))}
    read_kwargs = {"outcome": "outcome", "model_a": "model_a", "model_b": "model_b",
                   "clusters": {"item": "item"}, "ties": "half"}
    return SimResult(data=data, truth=truth, read_kwargs=read_kwargs, seed=seed)


def arena_battles(
    n_models: int,
    n_battles: int,
    *,
    battles_per_prompt: float = 4.0,
    ability_sd: float = 1.0,
    sd_output: float = 0.7,
    tie_threshold: float = 0.5,
    seed: SeedLike = None,
) -> SimResult:
    """Chatbot Arena-style battles: random pairs of models on user prompts.

    Each battle picks a prompt (``n_battles / battles_per_prompt`` prompts, uniformly,
    so prompts hold a Poisson number of battles) and two different models (uniformly);
    ``eta = theta_a - theta_b + w_(prompt, a) - w_(prompt, b)`` with answer effects
    ``w ~ N(0, sd_output^2)`` shared by the battles of one prompt that involve the same
    model (drawn only for the (prompt, model) combinations that occur), verdicts by the
    cumulative logit with cut points ``-tau, tau`` (ties). The prompt is the cluster.

    Parameters
    ----------
    n_models : int
        Number of models (at least 2).
    n_battles : int
        Number of battles (rows, at least 1).
    battles_per_prompt : float
        Mean battles per prompt (at least 1).
    ability_sd : float
        SD of the true abilities ``theta`` (log-odds; centred to mean 0).
    sd_output : float
        SD of the answer effects ``w`` (prompt x model).
    tie_threshold : float
        Cut point ``tau`` (0: no ties).
    seed : int or numpy.random.Generator
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data`` columns ``battle`` (row id), ``prompt`` (integer id), ``model_a``,
        ``model_b``, ``outcome`` (``"a"``, ``"b"``, ``"tie"``); ``truth``: ``abilities``
        (centred), ``rank``.

    Examples
    --------
    >>> sim = arena_battles(n_models=5, n_battles=100, seed=1)
    >>> len(sim.data), sim.data["prompt"].nunique() <= 25
    (100, True)
    """
    if n_models < 2 or n_battles < 1 or battles_per_prompt < 1:
        raise InvalidOptionError(
            f"arena_battles needs n_models >= 2, n_battles >= 1 and battles_per_prompt >= "
            f"1, got {n_models}, {n_battles} and {battles_per_prompt}")
    _check(ability_sd=ability_sd, sd_output=sd_output, tie_threshold=tie_threshold)
    rng, seed = seeded_rng(seed)
    models = _names("model", n_models)
    theta = rng.normal(0.0, ability_sd, n_models)
    theta -= theta.mean()
    n_prompts = max(1, round(n_battles / battles_per_prompt))
    prompt = rng.integers(0, n_prompts, n_battles)
    ma = rng.integers(0, n_models, n_battles)
    mb = (ma + rng.integers(1, n_models, n_battles)) % n_models
    # one answer effect per (prompt, model) that occurs
    keys, inverse = np.unique(np.concatenate([prompt * n_models + ma,
                                              prompt * n_models + mb]), return_inverse=True)
    w = rng.normal(0.0, sd_output, keys.size)[inverse]
    eta = theta[ma] - theta[mb] + w[:n_battles] - w[n_battles:]
    del keys, inverse, w
    outcome = _verdicts(-eta, tie_threshold, rng)
    data = pd.DataFrame({"battle": np.arange(n_battles), "prompt": prompt,
                         "model_a": models[ma], "model_b": models[mb], "outcome": outcome})
    rank = 1 + (theta[None, :] > theta[:, None]).sum(axis=1)
    truth = {"abilities": dict(zip(models, theta.tolist(), strict=True)),
             "rank": dict(zip(models, rank.tolist(), strict=True))}
    read_kwargs = {"outcome": "outcome", "model_a": "model_a", "model_b": "model_b",
                   "clusters": {"prompt": "prompt"}, "ties": "half"}
    return SimResult(data=data, truth=truth, read_kwargs=read_kwargs, seed=seed)
