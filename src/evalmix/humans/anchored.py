"""Human-anchored estimates: prediction-powered inference on a long table of ratings.

:func:`ppi` estimates what humans would say (a model's mean score, a model's win rate,
the paired difference between two models) from an LLM judge's ratings of every unit and
human ratings of a subset, with the PPI++ estimator of
:mod:`evalmix.humans.ppi_core`: cluster-robust when units sit in clusters (CR2 with
Satterthwaite degrees of freedom by default, or CR1 with ``t(G-1)``), stratified when
the labels were sampled within strata (``by=``). It reports beside it the human-only
estimate (the labelled units alone) and the judge-only one, which ignores the judge's
errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import get_args

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError, InvalidOptionError, check_level, check_option
from evalmix.humans.ppi_core import PPI_METHODS, Estimate, ppi_arrays
from evalmix.humans.ratings import Ratings, read_ratings
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import PPIEstimand, PPIMethod

__all__ = ["ppi", "PPIResult", "unit_values", "PPI_ESTIMANDS"]

PPI_ESTIMANDS: tuple[str, ...] = get_args(PPIEstimand)
_LABELS = {"ppi": "ppi++", "human": "human-only", "judge": "judge-only"}


@dataclass(frozen=True)
class PPIResult:
    """A prediction-powered estimate beside the human-only and judge-only ones.

    Attributes
    ----------
    estimand : str
        ``mean``, ``win_rate`` or ``difference``.
    contrast : str
        What is estimated (``"A"``, ``"gpt-4 vs all"``, ``"A - B"``, ``""``).
    judge : str
    estimates : Mapping[str, Estimate]
        ``"ppi"``, ``"human"`` (labelled units only) and ``"judge"`` (judge alone).
    lam : tuple of float
        The power-tuning lambda of each stratum.
    n_units, n_labelled, n_clusters : int
    method : str
        ``naive`` (no clusters: ``ppi_py``'s interval), ``CR1`` or ``CR2``.
    cluster : str
    level : float
    strata : tuple of str
    """

    estimand: str
    contrast: str
    judge: str
    estimates: Mapping[str, Estimate] = field(repr=False)
    lam: tuple[float, ...]
    n_units: int
    n_labelled: int
    n_clusters: int
    method: str
    cluster: str
    level: float
    strata: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "estimates", MappingProxyType(dict(self.estimates)))

    def __reduce__(self):  # noqa: ANN204 - mappingproxy cannot be pickled
        return (PPIResult, (self.estimand, self.contrast, self.judge, dict(self.estimates),
                            self.lam, self.n_units, self.n_labelled, self.n_clusters,
                            self.method, self.cluster, self.level, self.strata))

    @property
    def effective_labels(self) -> float:
        """Human labels the human-only estimate would need for the PPI standard error:
        ``n_labelled (se_human / se_ppi)^2``."""
        h, p = self.estimates["human"].se, self.estimates["ppi"].se
        return float(self.n_labelled * (h / p) ** 2) if p > 0 else float("nan")

    def tidy(self) -> pd.DataFrame:
        """Three rows in the result contract: ``method`` ``ppi++``, ``human-only`` and
        ``judge-only``; then ``variance`` (naive / CR1 / CR2), ``judge``, ``n_units``,
        ``n_labelled``, ``lam`` (first stratum)."""
        rows = []
        for key, e in self.estimates.items():
            rows.append({"estimand": self.estimand, "contrast": self.contrast,
                         "method": _LABELS[key], "cluster": self.cluster,
                         "scale": "identity", "estimate": e.estimate, "se": e.se,
                         "lo": e.lo, "hi": e.hi, "level": self.level, "df": e.df,
                         "n_clusters": self.n_clusters or np.nan, "reps": 0,
                         "note": ("ignores the judge's errors" if key == "judge" else ""),
                         "variance": self.method, "judge": self.judge,
                         "n_units": self.n_units if key != "human" else self.n_labelled,
                         "n_labelled": self.n_labelled,
                         "lam": self.lam[0] if self.lam else np.nan})
        return tidy_rows(rows)

    def __str__(self) -> str:
        what = f"{self.estimand}" + (f" ({self.contrast})" if self.contrast else "")
        where = (f"{self.method}, {self.n_clusters} clusters of {self.cluster!r}"
                 if self.cluster else "no clusters")

        def fmt(e: Estimate) -> str:
            return f"{e.estimate:.4f} [{e.lo:.4f}, {e.hi:.4f}]"

        e = self.estimates
        lam = ", ".join(f"{v:.2f}" for v in self.lam)
        return "\n".join([
            f"Human-anchored {what}, judge {self.judge!r}: PPI++ {fmt(e['ppi'])} "
            f"({self.level:.0%}, {where})",
            f"  human labels only (n={self.n_labelled}): {fmt(e['human'])}",
            f"  judge only (n={self.n_units}, ignores the judge's errors): {fmt(e['judge'])}",
            f"  lambda = {lam}; the judge's ratings are worth {self.effective_labels:.0f} "
            f"human labels ({self.n_labelled} collected)"])


def _pick_judge(r: Ratings, judge: str | None) -> str:
    if judge is None:
        if len(r.llms) != 1:
            raise InvalidOptionError(f"name the judge with judge=: the LLM raters are "
                                     f"{list(r.llms)[:10]}")
        return r.llms[0]
    if judge not in r.llms:
        raise InvalidOptionError(f"judge={judge!r} is not an LLM rater; the LLM raters are "
                                 f"{list(r.llms)[:10]}")
    return judge


def unit_values(r: Ratings, judge: str) -> pd.DataFrame:
    """Per unit: ``f`` (the judge's rating), ``y`` (the mean human rating, NaN when no
    human rated it), ``stratum``, ``cluster`` and the kept columns; units the judge did
    not rate are left out."""
    frame = r.frame
    f = frame[frame["rater"] == judge].set_index("unit")["value"]
    y = frame[frame["kind"] == "human"].groupby("unit")["value"].mean()
    out = r.units.loc[f.index].copy()
    out["f"] = f
    out["y"] = y.reindex(f.index)
    return out


def _estimand_values(u: pd.DataFrame, estimand: str, model: str | None,
                     opponent: str | None, models: Sequence[str] | None,
                     condition: str, model_a: str, model_b: str, pair_by: str | None
                     ) -> tuple[pd.DataFrame, str]:
    if estimand == "mean":
        if model is None:
            return u, ""
        sel = u[u[condition].astype(str) == str(model)]
        if sel.empty:
            raise EvalmixError(f"no unit has {condition} == {model!r}")
        return sel, str(model)
    if estimand == "win_rate":
        if model is None:
            raise InvalidOptionError("estimand='win_rate' needs model= (whose wins to count)")
        a, b = u[model_a].astype(str), u[model_b].astype(str)
        sel = (a == model) | (b == model)
        if opponent is not None:
            sel &= (a == opponent) | (b == opponent)
        w = u[sel].copy()
        flip = (w[model_b].astype(str) == model).to_numpy()
        w["f"] = np.where(flip, 1 - w["f"], w["f"])
        w["y"] = np.where(flip, 1 - w["y"], w["y"])
        if w.empty:
            raise EvalmixError(f"no comparison involves model {model!r}")
        return w, f"{model} vs {opponent or 'all'}"
    if models is None or len(models) != 2 or pair_by is None:
        raise InvalidOptionError("estimand='difference' needs models=(A, B) and pair_by= (the "
                                 "column pairing A's and B's units, e.g. the prompt)")
    first, second = (str(m) for m in models)
    key = ["stratum", pair_by]
    a = u[u[condition].astype(str) == first].groupby(key).first()
    b = u[u[condition].astype(str) == second].groupby(key).first()
    both = a.index.intersection(b.index)
    if both.empty:
        raise EvalmixError(f"no {pair_by!r} has units of both {first!r} and {second!r}")
    d = a.loc[both, ["cluster", "f", "y"]].copy()
    d["f"] = a.loc[both, "f"] - b.loc[both, "f"]
    d["y"] = a.loc[both, "y"] - b.loc[both, "y"]
    d = d.reset_index()
    return d, f"{first} - {second}"


def ppi(
    data: Ratings | str | os.PathLike[str] | pd.DataFrame,
    *,
    judge: str | None = None,
    estimand: PPIEstimand = "mean",
    model: str | None = None,
    opponent: str | None = None,
    models: Sequence[str] | None = None,
    condition: str = "model",
    pair_by: str | None = None,
    cluster: str | None = None,
    by: str | Sequence[str] | None = None,
    lam: float | None = None,
    method: PPIMethod | None = None,
    level: float = 0.95,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
    model_a: str = "model_a",
    model_b: str = "model_b",
) -> PPIResult:
    """Prediction-powered estimate of what humans would say, from a judge and a few labels.

    Parameters
    ----------
    data : path, DataFrame or Ratings
        A long table of ratings (:func:`evalmix.humans.read_ratings`): the judge rated
        every unit, humans a subset (several humans on a unit are averaged). Verdicts
        count 1 / 0.5 / 0 for ``a`` / ``tie`` / ``b``.
    judge : str, optional
        The LLM rater (needed when there are several).
    estimand : {"mean", "win_rate", "difference"}
        ``mean``: the mean rating (of the units with ``condition == model`` when
        ``model`` is given); ``win_rate``: ``model``'s win rate over its comparisons
        (against ``opponent`` if given; ties count half); ``difference``: the paired
        difference ``models[0] - models[1]`` over units matched by ``pair_by``.
    model, opponent, models : str, optional
        See ``estimand``.
    condition : str
        Column naming the model of a rated unit (``mean`` and ``difference``).
    pair_by : str, optional
        Column pairing the two models' units (``difference``).
    cluster : str, optional
        A cluster above the units; its clusters may be partially labelled.
    by : str or list of str, optional
        Strata the human labels were sampled within (weights: each stratum's share of
        units).
    lam : float, optional
        Fixed power-tuning lambda (1: PPI, 0: human-only); default tuned (PPI++).
    method : {"naive", "CR1", "CR2"}, optional
        Default ``CR2`` (Satterthwaite df) with a cluster, ``naive`` without (then the
        estimate and interval equal ``ppi_py.ppi_mean_ci``).
    level : float
        Confidence level.
    item, rater, rating, rater_kind, humans, model_a, model_b
        How to read ``data`` (:func:`evalmix.humans.read_ratings`).

    Returns
    -------
    PPIResult

    Examples
    --------
    >>> import evalmix
    >>> res = evalmix.sim.judge_labels(20, 10, n_labelled=120, seed=3)
    >>> est = evalmix.ppi(res.data, model="A", cluster="cluster", rating="score")
    >>> lo, hi = est.estimates["ppi"].lo, est.estimates["ppi"].hi
    >>> bool(lo < res.truth["mean"]["A"] < hi)
    True

    References
    ----------
    Angelopoulos et al. (2023), doi:10.1126/science.adi6000; Angelopoulos, Duchi &
    Zrnic (2023), arXiv:2311.01453.
    """
    check_option("estimand", estimand, PPI_ESTIMANDS)
    if method is not None:
        check_option("method", method, PPI_METHODS)
    level = check_level(level)
    keep = {"mean": [condition] if model is not None else [],
            "win_rate": [model_a, model_b],
            "difference": [condition, pair_by] if pair_by else [condition]}[estimand]
    if isinstance(data, Ratings):
        r = data
        missing = [c for c in keep if c not in r.units.columns]
        if missing:
            raise EvalmixError(f"the Ratings were read without the columns {missing}; pass "
                               "keep= to read_ratings")
    else:
        r = read_ratings(data, item=item, rater=rater, rating=rating, rater_kind=rater_kind,
                         humans=humans, cluster=cluster, by=by, keep=keep)
    if not r.humans:
        raise EvalmixError("no human ratings: mark the human raters (rater_kind or humans=)")
    name = _pick_judge(r, judge)
    u, contrast = _estimand_values(unit_values(r, name), estimand, model, opponent, models,
                                   condition, model_a, model_b, pair_by)
    how = method or ("CR2" if r.cluster else "naive")
    clusters = u["cluster"].to_numpy() if r.cluster else None
    strata = u["stratum"].to_numpy() if len(r.strata) > 1 else None
    est = ppi_arrays(u["y"].to_numpy(dtype=float), u["f"].to_numpy(dtype=float),
                     clusters=clusters, strata=strata, lam=lam, method=how, level=level)
    n_clusters = int(pd.unique(clusters).size) if clusters is not None else 0
    return PPIResult(estimand, contrast, name, est, est["ppi"].lam, len(u),
                     int(np.isfinite(u["y"].to_numpy(dtype=float)).sum()), n_clusters, how,
                     r.cluster or "", level, tuple(pd.unique(u["stratum"])) if strata is not None
                     else ())
