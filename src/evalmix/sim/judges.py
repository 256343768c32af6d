"""A judge that errs by model and by item cluster, and a human-labelled subset.

The design behind the coverage study of :func:`evalmix.ppi` (docs/humans.md). Items
``i`` sit in clusters ``g`` (scenarios); each model ``M`` answers every item and passes
(``Y = 1``) with probability ``expit(mu_M + u_g + e_gi)``, ``u_g ~ N(0, sd_cluster^2)``,
``e_gi ~ N(0, sd_item^2)``. The LLM judge flips a pass with probability
``expit(fn_M + w_g)`` and a fail with ``expit(fp_M + v_g)``, ``v_g, w_g ~ N(0,
sd_judge^2)``: its error rates depend on the model and on the cluster. Humans label a
simple random sample of ``n_labelled`` (item, model) units; their label is ``Y``.

The true pass rate of model ``M`` over new clusters and items is ``E[expit(mu_M + s Z)]``
with ``s^2 = sd_cluster^2 + sd_item^2`` (Gauss-Hermite quadrature, 80 nodes).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix.errors import InvalidOptionError
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.sim._common import SimResult

__all__ = ["judge_labels", "JUDGE_DESIGN"]

#: The default design: two models, a judge too lenient on model "A" and harsh on "B".
JUDGE_DESIGN: Mapping[str, Mapping[str, float]] = {
    "A": {"mu": 0.4, "fp": -1.2, "fn": -2.5},
    "B": {"mu": 0.0, "fp": -2.5, "fn": -1.2},
}


def _true_rate(mu: float, sd: float) -> float:
    z, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w * expit(mu + sd * z)) / np.sum(w))


def draw(rng: np.random.Generator, n_clusters: int, cluster_size: int, n_labelled: int,
         models: Mapping[str, Mapping[str, float]], sd_cluster: float, sd_item: float,
         sd_judge: float) -> dict[str, np.ndarray]:
    """Arrays of one draw: ``cluster``, ``item``, ``model`` (index), ``y`` (all units),
    ``f`` (judge), ``labelled`` (bool)."""
    n_items = n_clusters * cluster_size
    k = len(models)
    cluster = np.repeat(np.arange(n_clusters), cluster_size)
    u = rng.normal(0, sd_cluster, n_clusters)
    v = rng.normal(0, sd_judge, n_clusters)
    w = rng.normal(0, sd_judge, n_clusters)
    pars = np.array([[m["mu"], m["fp"], m["fn"]] for m in models.values()])
    model = np.repeat(np.arange(k), n_items)
    cl = np.tile(cluster, k)
    eta = pars[model, 0] + u[cl] + rng.normal(0, sd_item, n_items * k)
    y = (rng.random(n_items * k) < expit(eta)).astype(float)
    flip = np.where(y == 1, expit(pars[model, 2] + w[cl]), expit(pars[model, 1] + v[cl]))
    f = np.where(rng.random(y.size) < flip, 1 - y, y)
    labelled = np.zeros(y.size, dtype=bool)
    labelled[rng.choice(y.size, size=n_labelled, replace=False)] = True
    return {"cluster": cl, "item": np.tile(np.arange(n_items), k), "model": model, "y": y,
            "f": f, "labelled": labelled}


def judge_labels(
    n_clusters: int = 40,
    cluster_size: int = 25,
    *,
    n_labelled: int = 400,
    models: Mapping[str, Mapping[str, float]] = JUDGE_DESIGN,
    sd_cluster: float = 1.0,
    sd_item: float = 1.0,
    sd_judge: float = 1.0,
    seed: SeedLike = None,
) -> SimResult:
    """A long table of LLM-judge verdicts on every unit and human labels on a subset.

    Parameters
    ----------
    n_clusters, cluster_size : int
        Clusters and items per cluster; every model answers every item.
    n_labelled : int
        (item, model) units labelled by a human, a simple random sample.
    models : mapping
        Per model: ``mu`` (logit pass rate), ``fp``, ``fn`` (logits of the judge's
        false-pass and false-fail rates).
    sd_cluster, sd_item, sd_judge : float
        SDs of the cluster and item effects on passing and of the cluster effects on
        the judge's error logits.
    seed : int, Generator or None
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data``: ``item_id``, ``cluster``, ``model``, ``rater`` (``judge`` /
        ``human``), ``rater_kind``, ``score`` (0/1); ``truth``: ``mean`` (true pass
        rate per model) and ``judge_mean`` (the judge's expected pass rate, what a
        judge-only estimate converges to).

    Examples
    --------
    >>> res = judge_labels(10, 5, n_labelled=30, seed=1)
    >>> res.data["rater"].value_counts().to_dict()
    {'judge': 100, 'human': 30}
    """
    if n_labelled < 2 or n_labelled > n_clusters * cluster_size * len(models):
        raise InvalidOptionError("n_labelled must be between 2 and the number of units")
    rng, recorded = seeded_rng(seed)
    d = draw(rng, n_clusters, cluster_size, n_labelled, models, sd_cluster, sd_item,
             sd_judge)
    names = np.array(list(models))
    item = np.char.add("i", d["item"].astype(str))
    base = pd.DataFrame({"item_id": np.char.add(np.char.add(item, "/"), names[d["model"]]),
                         "cluster": np.char.add("c", d["cluster"].astype(str)),
                         "model": names[d["model"]]})
    judge = base.assign(rater="judge", rater_kind="llm", score=d["f"])
    human = base[d["labelled"]].assign(rater="human", rater_kind="human",
                                       score=d["y"][d["labelled"]])
    s = float(np.hypot(sd_cluster, sd_item))
    truth = {"mean": {m: _true_rate(p["mu"], s) for m, p in models.items()},
             "judge_mean": {m: _judge_rate(p, s, sd_judge) for m, p in models.items()}}
    return SimResult(pd.concat([judge, human], ignore_index=True), truth,
                     {"item": "item_id", "rater": "rater", "rating": "score",
                      "cluster": "cluster"}, recorded)


def _judge_rate(p: Mapping[str, float], s: float, sd_judge: float) -> float:
    z, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / w.sum()
    pass_rate = _true_rate(p["mu"], s)
    fn = float(np.sum(w * expit(p["fn"] + sd_judge * z)))
    fp = float(np.sum(w * expit(p["fp"] + sd_judge * z)))
    return pass_rate * (1 - fn) + (1 - pass_rate) * fp
