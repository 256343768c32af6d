"""The Rogan-Gladen correction of a judge's pass rate, with the calibration set's uncertainty.

A binary judge (pass / fail, correct / incorrect) with sensitivity ``q1 = P(judge = 1 |
human = 1)`` and specificity ``q0 = P(judge = 0 | human = 0)`` passes a share ``p =
theta q1 + (1 - theta)(1 - q0)`` of a test set whose true pass rate is ``theta``, so

    theta = (p + q0 - 1) / (q0 + q1 - 1)        (Rogan & Gladen 1978),

clipped to [0, 1]. ``q0`` and ``q1`` come from a human-labelled calibration set with
``m0`` failing and ``m1`` passing items. The interval is Lee et al.'s (2025): ``p``,
``q0`` and ``q1`` are shrunk (``(n p + z^2/2) / (n + z^2)``, ``(m0 q0 + 1) / (m0 + 2)``,
``(m1 q1 + 1) / (m1 + 2)``), the estimate is moved by ``2 z^2 (-(1 - theta) q0 (1 - q0) /
m0 + theta q1 (1 - q1) / m1)`` and the delta-method SE

    se = sqrt(p (1 - p) / n + (1 - theta)^2 q0 (1 - q0) / m0 + theta^2 q1 (1 - q1) / m1)
         / (q0 + q1 - 1)

gives ``theta + shift -+ z se``, clipped to [0, 1]; this equals the authors' package
``llm_judge_reporting.confidence_interval`` (github.com/UW-Madison-Lee-Lab/
LLM-judge-reporting). Their allocation of a calibration budget ``m`` between failing and
passing items, ``m1 = m / (1 + (1/p - 1) sqrt(kappa))`` with ``kappa = (1 - q0) / (1 -
q1)`` (smoothed with a pilot), is :func:`allocate_calibration`.

References
----------
Rogan, W. J. & Gladen, B. (1978). Estimating prevalence from the results of a screening
test. American Journal of Epidemiology 107, 71-76.
doi:10.1093/oxfordjournals.aje.a112510
Lee, C., Zeng, T., Jeong, J., Sohn, J. & Lee, K. (2025). How to correctly report
LLM-as-a-judge evaluations. arXiv:2511.21140
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.errors import EvalmixError, InvalidOptionError, check_count, check_level, check_number
from evalmix.humans.anchored import _pick_judge, unit_values
from evalmix.humans.ratings import Ratings, read_ratings
from evalmix.inference.naive import wilson_interval
from evalmix.tidy import tidy_rows

__all__ = ["rogan_gladen", "RoganGladenResult", "rogan_gladen_interval",
           "allocate_calibration"]


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def rogan_gladen_interval(p: float, q0: float, q1: float, n: int, m0: int, m1: int,
                          level: float = 0.95) -> tuple[float, float, float, float]:
    """``(theta, lo, hi, se)``: Rogan-Gladen estimate and Lee et al.'s interval.

    Examples
    --------
    >>> [round(v, 4) for v in rogan_gladen_interval(0.4, 0.7, 0.9, 1000, 200, 200)]
    [0.1667, 0.0564, 0.2627, 0.0526]
    """
    p, q0, q1 = (check_number(k, v, low=0, high=1) for k, v in (("p", p), ("q0", q0),
                                                                  ("q1", q1)))
    n, m0, m1 = (check_count(k, v) for k, v in (("n", n), ("m0", m0), ("m1", m1)))
    if q0 + q1 <= 1:
        raise EvalmixError(f"the judge is no better than chance (specificity {q0:.3f} + "
                           f"sensitivity {q1:.3f} <= 1): its verdicts cannot be corrected")
    theta = _clip((p + q0 - 1) / (q0 + q1 - 1))
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    pa, q0a, q1a = (n * p + z**2 / 2) / (n + z**2), (m0 * q0 + 1) / (m0 + 2), \
        (m1 * q1 + 1) / (m1 + 2)
    na, m0a, m1a = n + z**2, m0 + 2, m1 + 2
    th = (pa + q0a - 1) / (q0a + q1a - 1)
    shift = 2 * z**2 * (-(1 - th) * q0a * (1 - q0a) / m0a + th * q1a * (1 - q1a) / m1a)
    se = float(np.sqrt(pa * (1 - pa) / na + (1 - th) ** 2 * q0a * (1 - q0a) / m0a
                       + th**2 * q1a * (1 - q1a) / m1a) / (q0a + q1a - 1))
    return theta, _clip(th + shift - z * se), _clip(th + shift + z * se), se


def allocate_calibration(m: int, p: float, q0: float, q1: float, *, m_pilot: int = 0,
                         eps: float = 1e-6) -> tuple[int, int]:
    """Lee et al.'s split of a calibration budget ``m`` into ``(m0, m1)`` failing and
    passing items (``m_pilot``: items of a pilot already labelled, per side at least).

    Examples
    --------
    >>> allocate_calibration(200, 0.4, 0.7, 0.9, m_pilot=10)
    (136, 64)
    """
    m = check_count("m", m)
    if p < eps:
        m1 = m - m_pilot
    else:
        kappa = ((m_pilot * (1 - q0) + 1) / (m_pilot * (1 - q1) + 1) if m_pilot
                 else (1 - q0) / (1 - min(q1, 1 - eps)))
        m1 = max(m_pilot, round(min(m - m_pilot, m / (1 + (1 / p - 1) * np.sqrt(kappa)))))
    return int(m - m1), int(m1)


@dataclass(frozen=True)
class RoganGladenResult:
    """A judge's pass rate corrected for its sensitivity and specificity.

    Attributes
    ----------
    estimate, lo, hi, se : float
        Rogan-Gladen estimate, Lee et al.'s interval and its SE.
    p : float
        The judge's raw pass rate on the test units (the judge-only estimate).
    p_lo, p_hi : float
        Wilson interval of ``p`` (it ignores the judge's errors).
    q0, q1 : float
        Specificity and sensitivity on the calibration (human-labelled) units.
    n, m0, m1 : int
        Test units, calibration units failing and passing by the humans.
    allocation : tuple of int
        Lee et al.'s split ``(m0, m1)`` of the same calibration budget.
    judge : str
    level : float
    """

    estimate: float
    lo: float
    hi: float
    se: float
    p: float
    p_lo: float
    p_hi: float
    q0: float
    q1: float
    n: int
    m0: int
    m1: int
    allocation: tuple[int, int]
    judge: str
    level: float

    def tidy(self) -> pd.DataFrame:
        """Two rows in the result contract: ``method`` ``rogan-gladen`` and
        ``judge-only``; then ``q0``, ``q1``, ``n``, ``m0``, ``m1``."""
        extra = {"q0": self.q0, "q1": self.q1, "n": self.n, "m0": self.m0, "m1": self.m1,
                 "judge": self.judge}
        return tidy_rows([
            {"method": "rogan-gladen", "estimate": self.estimate, "se": self.se,
             "lo": self.lo, "hi": self.hi, **extra},
            {"method": "judge-only", "estimate": self.p, "lo": self.p_lo, "hi": self.p_hi,
             "note": "ignores the judge's errors", **extra}],
            estimand="pass_rate", scale="probability", level=self.level, reps=0)

    def __str__(self) -> str:
        return (f"Rogan-Gladen pass rate, judge {self.judge!r}: {self.estimate:.4f} "
                f"[{self.lo:.4f}, {self.hi:.4f}] ({self.level:.0%}, Lee et al. 2025)\n"
                f"  judge only: {self.p:.4f} [{self.p_lo:.4f}, {self.p_hi:.4f}] on "
                f"{self.n} units\n  calibration: specificity {self.q0:.3f} ({self.m0} "
                f"failing), sensitivity {self.q1:.3f} ({self.m1} passing); the same "
                f"budget split as Lee et al. advise: {self.allocation[0]} failing, "
                f"{self.allocation[1]} passing")


def rogan_gladen(
    data: Ratings | str | os.PathLike[str] | pd.DataFrame,
    *,
    judge: str | None = None,
    positive: object = None,
    test: str = "unlabelled",
    level: float = 0.95,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
) -> RoganGladenResult:
    """The judge's pass rate corrected by its sensitivity and specificity (Rogan-Gladen).

    Parameters
    ----------
    data : path, DataFrame or Ratings
        A long table of binary ratings (:func:`evalmix.humans.read_ratings`): the judge
        rated every unit; the units a human also rated are the calibration set (several
        humans: their majority, ties dropped).
    judge : str, optional
        The LLM rater (needed when there are several).
    positive : optional
        The passing value (default ``1`` for 0/1 scores, ``"a"`` for verdicts; needed for
        labels).
    test : {"unlabelled", "all"}
        The test set: the units without a human label (as Lee et al. keep test and
        calibration sets apart) or every unit.
    level : float
        Confidence level.
    item, rater, rating, rater_kind, humans
        How to read ``data``.

    Returns
    -------
    RoganGladenResult

    Examples
    --------
    >>> import evalmix
    >>> res = evalmix.sim.judge_labels(20, 20, n_labelled=300, seed=2)
    >>> rg = evalmix.rogan_gladen(res.data[res.data["model"] == "A"], rating="score")
    >>> round(rg.p, 3), round(rg.estimate, 3)
    (0.574, 0.423)

    References
    ----------
    Rogan & Gladen (1978), doi:10.1093/oxfordjournals.aje.a112510; Lee et al. (2025),
    arXiv:2511.21140.
    """
    level = check_level(level)
    if test not in ("unlabelled", "all"):
        raise InvalidOptionError(f"test={test!r}: choose 'unlabelled' or 'all'")
    r = data if isinstance(data, Ratings) else read_ratings(
        data, item=item, rater=rater, rating=rating, rater_kind=rater_kind, humans=humans)
    name = _pick_judge(r, judge)
    values = set(r.values.tolist()) if len(r.categories) else set()
    if not values or values - {0.0, 1.0}:
        raise EvalmixError(f"Rogan-Gladen needs binary ratings (pass / fail); found "
                           f"{list(r.categories)[:10] or 'continuous scores'}")
    if positive is None:
        if r.kind == "label":
            raise InvalidOptionError(f"name the passing label with positive= (labels: "
                                     f"{list(r.categories)})")
        pos = 1.0
    elif r.kind == "label":
        if str(positive) not in r.categories:
            raise InvalidOptionError(f"positive={positive!r} is not one of {list(r.categories)}")
        pos = float(r.categories.index(str(positive)))
    else:
        given = ({"a": 1.0, "b": 0.0}.get(str(positive)) if r.kind == "verdict"
                 else float(positive))  # type: ignore[arg-type]
        if given not in (0.0, 1.0):
            raise InvalidOptionError(f"positive={positive!r} is not a rating value")
        pos = float(given)  # type: ignore[arg-type]
    u = unit_values(r, name)
    f = u["f"].to_numpy(dtype=float)
    share = u["y"].to_numpy(dtype=float)  # the humans' mean: majority vote, ties dropped
    if pos == 0.0:
        f, share = 1 - f, 1 - share
    lab = np.isfinite(share) & (share != 0.5)
    y = (share[lab] > 0.5).astype(float)
    fl = f[lab]
    m1, m0 = int(y.sum()), int((1 - y).sum())
    if m0 < 1 or m1 < 1:
        raise EvalmixError(f"the calibration set needs human passes and fails; it has "
                           f"{m1} and {m0}")
    q1, q0 = float(fl[y == 1].mean()), float(1 - fl[y == 0].mean())
    ft = f[~lab] if test == "unlabelled" else f
    if ft.size < 1:
        raise EvalmixError("no test units: every unit has a human label; use test='all'")
    p = float(ft.mean())
    theta, lo, hi, se = rogan_gladen_interval(p, q0, q1, ft.size, m0, m1, level)
    p_lo, p_hi = wilson_interval(p, ft.size, level)
    return RoganGladenResult(theta, lo, hi, se, p, float(p_lo), float(p_hi), q0, q1,
                             int(ft.size), m0, m1, allocate_calibration(m0 + m1, p, q0, q1),
                             name, level)
