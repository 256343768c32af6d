"""How many human labels? The labelled size a target standard error needs, with clustering.

The variance of the PPI++ estimate of a group's mean (:mod:`evalmix.humans.ppi_core`)
with ``n`` labels spread over the group's ``K`` clusters and ``N`` units is about

    V_ppi(n) = s2_b(y) / K + lambda^2 s2_w(f) / (N - n) + s2_w(y - lambda f) / n

and that of the human-only mean ``V_h(n) = s2_b(y) / K + s2_w(y) / n``: ``s2_b`` and
``s2_w`` are the between- and within-cluster variances (one-way ANOVA,
:func:`evalmix.design.effect.icc_anova`) of the human ratings ``y``, the judge's ``f`` and
the rectifier ``y - lambda f``. The first term is a floor: with ``K`` clusters no number
of labels takes the SE below ``s_b(y) / sqrt(K)`` (the estimate generalises over
clusters, and only more clusters lower it). Over groups ``s`` (models, strata) with
weights ``w_s = N_s / N`` the total ``n`` for a target ``se`` is split as
``n_s ∝ w_s s_w,s`` (Neyman allocation of the ``1/n`` terms), so
``n = (sum_s w_s s_w,s)^2 / (se^2 - sum_s w_s^2 floor_s)``.

The saving is ``n_human / n_ppi``. Dorner, Nastl & Hardt (2025) prove that when the
judge agrees with the truth no more often than the evaluated model is correct, no
debiasing method saves more than a factor of 2 of the human labels; where the bound
applies and the pilot promises more, the plan keeps ``n_ppi >= n_human / 2`` and says
so.

References
----------
Dorner, F. E., Nastl, V. Y. & Hardt, M. (2025). Limits to scalable evaluation at the
frontier: LLM as judge won't beat twice the data. ICLR 2025. arXiv:2410.13341
Angelopoulos, Duchi & Zrnic (2023). PPI++. arXiv:2311.01453
Cochran, W. G. (1977). Sampling Techniques, 3rd ed., ch. 5 (Neyman allocation). Wiley.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evalmix.data.table import dense_codes
from evalmix.design.effect import icc_anova
from evalmix.errors import EvalmixError, InvalidOptionError, check_number
from evalmix.humans.anchored import _pick_judge, unit_values
from evalmix.humans.ppi_core import _lambda
from evalmix.humans.ratings import Ratings, read_ratings
from evalmix.tidy import tidy_rows

__all__ = ["label_budget", "plan_labels", "LabelBudget"]


@dataclass(frozen=True)
class LabelBudget:
    """Human labels needed for a target standard error (see :func:`label_budget`).

    Attributes
    ----------
    target_se : float
    n_ppi, n_human : float
        Labels the PPI++ estimate and the human-only estimate need (inf: not reachable).
    n_units : int
        Units to label for "label everything".
    se_all : float
        The SE of labelling every unit (the best reachable with these clusters).
    factor : float
        ``n_human / n_ppi``.
    dorner_applies : bool
        The judge is no more accurate than the evaluated model is correct (binary
        ratings): Dorner et al.'s factor-2 bound holds.
    capped : bool
        The pilot promised a saving above 2 where the bound holds; ``n_ppi`` was raised
        to ``n_human / 2``.
    groups : pandas.DataFrame
        Per group: ``group``, ``weight``, ``n_units``, ``n_clusters``, ``lam``,
        ``floor_se``, ``n_ppi``, ``n_human`` (the split of the totals).
    note : str
    """

    target_se: float
    n_ppi: float
    n_human: float
    n_units: int
    se_all: float
    factor: float
    dorner_applies: bool
    capped: bool
    groups: pd.DataFrame = field(repr=False)
    note: str = ""

    def tidy(self) -> pd.DataFrame:
        """Rows in the result contract: ``estimand`` ``labels_needed``, ``method``
        ``ppi++`` and ``human-only`` (the label count in ``estimate``)."""
        return tidy_rows([
            {"method": "ppi++", "estimate": self.n_ppi, "factor": self.factor},
            {"method": "human-only", "estimate": self.n_human, "factor": 1.0}],
            estimand="labels_needed", scale="count", reps=0, note=self.note,
            target_se=self.target_se, n_units=self.n_units, se_all=self.se_all,
            dorner_applies=self.dorner_applies)

    def __str__(self) -> str:
        def n(v: float) -> str:
            return f"{v:,.0f}" if np.isfinite(v) else "not reachable"

        lines = [f"Human labels for SE {self.target_se:g}: {n(self.n_ppi)} with the judge "
                 f"(PPI++), {n(self.n_human)} without it (factor {self.factor:.2f}); "
                 f"labelling all {self.n_units:,} units gives SE {self.se_all:.4f}"]
        if self.dorner_applies:
            lines.append("  Dorner, Nastl & Hardt (2025): this judge is no more accurate than "
                         "the model is correct, so no debiasing saves more than a factor 2"
                         + (" (the pilot promised more: plan capped at 2)" if self.capped
                            else ""))
        if len(self.groups) > 1:
            for _, g in self.groups.iterrows():
                lines.append(f"  {str(g['group']):<20} {n(g['n_ppi'])} labels "
                             f"({n(g['n_human'])} without the judge)")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Components:
    group: str
    weight: float
    n_units: int
    n_clusters: int
    lam: float
    between_y: float
    within_y: float
    within_f: float
    within_r: float


def _solve(comps: list[_Components], target: float) -> tuple[float, float, np.ndarray,
                                                              np.ndarray, float]:
    """Totals and splits (PPI, human) for ``target``; the SE of labelling everything."""
    w = np.array([c.weight for c in comps])
    floor_h = np.array([c.between_y / max(c.n_clusters, 1) for c in comps])
    floor_p = floor_h + np.array([c.lam**2 * c.within_f / max(c.n_units, 1) for c in comps])
    out = []
    for floor, spread in ((floor_p, np.array([c.within_r for c in comps])),
                          (floor_h, np.array([c.within_y for c in comps]))):
        s = np.sqrt(np.maximum(spread, 0.0))
        room = target**2 - np.sum(w**2 * floor)
        if room <= 0:
            out.append((np.inf, np.full(len(comps), np.inf)))
            continue
        total = float(np.sum(w * s) ** 2 / room)
        share = w * s / np.sum(w * s) if np.sum(w * s) > 0 else w
        out.append((max(total, 2.0), np.maximum(total * share, 2.0)))
    n_units = np.array([c.n_units for c in comps], dtype=float)
    se_all = float(np.sqrt(np.sum(w**2 * (floor_h + np.array([c.within_y for c in comps])
                                         / n_units))))
    return out[0][0], out[1][0], out[0][1], out[1][1], se_all


def _budget(comps: list[_Components], target: float, dorner: bool, note: str
            ) -> LabelBudget:
    target = check_number("target_se", target, low=0, low_open=True)
    n_ppi, n_h, split_p, split_h, se_all = _solve(comps, target)
    n_units = int(sum(c.n_units for c in comps))
    capped = False
    if dorner and np.isfinite(n_h) and n_h / n_ppi > 2:
        capped = True
        split_p = split_p * (n_h / 2) / n_ppi
        n_ppi = n_h / 2
    if not np.isfinite(n_h):
        note = (note + " " if note else "") + (
            f"Not reachable with these clusters: labelling all {n_units} units gives SE "
            f"{se_all:.4f}; add clusters (scenarios, prompts), not labels")
    elif n_h > n_units:
        note = (note + " " if note else "") + (
            f"the human-only estimate would need more labels than there are units "
            f"({n_units})")
    factor = n_h / n_ppi if np.isfinite(n_ppi) and n_ppi > 0 else float("nan")
    groups = pd.DataFrame({
        "group": [c.group for c in comps], "weight": [c.weight for c in comps],
        "n_units": [c.n_units for c in comps], "n_clusters": [c.n_clusters for c in comps],
        "lam": [c.lam for c in comps],
        "floor_se": [np.sqrt(c.between_y / max(c.n_clusters, 1)) for c in comps],
        "n_ppi": np.ceil(split_p), "n_human": np.ceil(split_h)})
    return LabelBudget(float(target), float(np.ceil(n_ppi)), float(np.ceil(n_h)), n_units,
                       se_all, float(factor), dorner, capped, groups, note)


def _variances(values: np.ndarray, clusters: np.ndarray | None) -> tuple[float, float]:
    """(between, within) variance: one-way ANOVA with clusters, else (0, var)."""
    v = np.asarray(values, dtype=float)
    if clusters is None or np.unique(clusters).size < 2 or v.size <= np.unique(clusters).size:
        return 0.0, float(np.var(v, ddof=1)) if v.size > 1 else 0.0
    a = icc_anova(v, clusters)
    return float(max((a.msb - a.msw) / a.n0, 0.0)), float(a.msw)


def label_budget(
    data: Ratings | str | os.PathLike[str] | pd.DataFrame,
    *,
    target_se: float,
    judge: str | None = None,
    by: str | None = None,
    cluster: str | None = None,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
) -> LabelBudget:
    """Human labels a target standard error needs, planned from a pilot.

    Parameters
    ----------
    data : path, DataFrame or Ratings
        The pilot: the judge rated every unit, humans a subset (at least 3 per group).
    target_se : float
        The standard error wanted for the (stratified) mean.
    judge : str, optional
        The LLM rater (needed when there are several).
    by : str, optional
        A column to split the labels across (models, strata; constant within a unit):
        the estimate is the ``N_s``-weighted mean and the labels are Neyman-allocated.
    cluster : str, optional
        A cluster above the units (its between-cluster variance is a floor no number of
        labels removes).
    item, rater, rating, rater_kind, humans
        How to read ``data``.

    Returns
    -------
    LabelBudget

    Examples
    --------
    >>> import evalmix
    >>> from evalmix.humans.budget import label_budget
    >>> pilot = evalmix.sim.judge_labels(40, 25, n_labelled=200, seed=5)
    >>> plan = label_budget(pilot.data, target_se=0.04, by="model", cluster="cluster",
    ...                     rating="score")
    >>> plan.n_ppi < plan.n_human
    True

    References
    ----------
    Dorner, Nastl & Hardt (2025), arXiv:2410.13341.
    """
    r = data if isinstance(data, Ratings) else read_ratings(
        data, item=item, rater=rater, rating=rating, rater_kind=rater_kind, humans=humans,
        cluster=cluster, keep=[by] if by else [])
    name = _pick_judge(r, judge)
    u = unit_values(r, name)
    groups = u[by].astype(str) if by else pd.Series("", index=u.index)
    comps = []
    agree, score = [], []
    for gname in sorted(pd.unique(groups)):
        g = u[groups == gname]
        y, f = g["y"].to_numpy(dtype=float), g["f"].to_numpy(dtype=float)
        lab = np.isfinite(y)
        if lab.sum() < 3:
            raise EvalmixError(f"group {gname or '(all)'} has {int(lab.sum())} human-labelled "
                               "units in the pilot; label at least 3")
        cl = dense_codes(g["cluster"].to_numpy()) if r.cluster else None
        lam = _lambda(np.where(lab, y, 0.0), f, lab)
        cl_l = None if cl is None else cl[lab]
        b_y, w_y = _variances(y[lab], cl_l)
        _, w_r = _variances(y[lab] - lam * f[lab], cl_l)
        _, w_f = _variances(f, cl)
        comps.append(_Components(gname, len(g) / len(u), len(g),
                                 int(np.unique(cl).size) if cl is not None else len(g), lam,
                                 b_y, w_y, w_f, w_r))
        agree.append(float(np.mean(np.abs(f[lab] - y[lab]) < 1e-9)))
        score.append(float(np.mean(y[lab])))
    binary = len(r.categories) > 0 and set(r.values.tolist()) <= {0.0, 1.0}
    dorner = binary and all(a <= max(s, 1 - s) for a, s in zip(agree, score, strict=True))
    return _budget(comps, float(target_se), dorner, "")


def plan_labels(
    target_se: float,
    *,
    pass_rate: float,
    sensitivity: float,
    specificity: float,
    n_units: int,
    n_clusters: int | None = None,
    icc: float = 0.0,
) -> LabelBudget:
    """Human labels a target SE needs, planned from a binary judge's pilot agreement.

    With pass rate ``theta``, sensitivity ``q1`` and specificity ``q0`` the judge passes
    ``p = theta q1 + (1 - theta)(1 - q0)``; ``var(y) = theta (1 - theta)``, ``var(f) =
    p (1 - p)``, ``cov(y, f) = theta (q1 - p)``, ``lambda = cov / var(f)`` and the
    rectifier variance ``var(y) - cov^2 / var(f)``. The intra-cluster correlation ``icc``
    of the human ratings puts ``icc var(y)`` between clusters (the floor) and takes it
    from the within-cluster variances.

    Examples
    --------
    >>> plan = plan_labels(0.02, pass_rate=0.7, sensitivity=0.9, specificity=0.8,
    ...                    n_units=5000)
    >>> int(plan.n_human), int(plan.n_ppi)
    (526, 287)
    """
    theta, q1, q0 = float(pass_rate), float(sensitivity), float(specificity)
    if not (0 < theta < 1 and 0 <= q0 <= 1 and 0 <= q1 <= 1):
        raise InvalidOptionError("pass_rate must be in (0, 1), sensitivity and specificity in [0, 1]")
    p = theta * q1 + (1 - theta) * (1 - q0)
    var_y, var_f = theta * (1 - theta), p * (1 - p)
    cov = theta * (q1 - p)
    lam = float(np.clip(cov / var_f, 0, 1)) if var_f > 0 else 0.0
    var_r = var_y - 2 * lam * cov + lam**2 * var_f
    k = int(n_clusters) if n_clusters else int(n_units)
    between = icc * var_y if n_clusters else 0.0
    comp = _Components("", 1.0, int(n_units), k, lam, between, var_y - between,
                       var_f * (1 - icc), max(var_r - between, 0.0))
    accuracy = theta * q1 + (1 - theta) * q0
    return _budget([comp], float(target_se), accuracy <= max(theta, 1 - theta), "")
