"""The alternative annotator test: whether an LLM judge can replace a human annotator.

Calderon, Reichart & Dror (2025). Leave one human annotator out at a time; on each item
the excluded human and the judge are scored against the remaining humans (accuracy for
labels and verdicts, negative RMSE for scores). The judge "wins" against human ``h`` when
the one-sided t test of ``mean(1[h scores >= judge] - 1[judge scores >= h]) < epsilon``
rejects after the Benjamini-Yekutieli correction over the humans; ``epsilon`` is the
cost-benefit allowance (0.2 for experts, 0.15 skilled annotators, 0.1 crowd workers).
The winning rate ``omega`` is the share of humans the judge wins against (it passes
when ``omega >= 0.5``) and the advantage probability ``rho`` is the mean over humans
of ``P(judge scores >= h)``, a measure to compare judges.

evalmix reproduces the authors' ``alt_test`` (github.com/nitaytech/AltTest, notebook
``alt_test_example.ipynb``) exactly when ``cluster`` is None. With ``cluster=`` the t
test becomes a cluster-robust one (CR2 standard error of the mean difference with
Satterthwaite degrees of freedom, :mod:`evalmix.inference.sandwich`), because items
from one scenario or prompt are not independent. :attr:`AltTestResult.n_items_needed`
is the number of items at which the test would pass with 80% power given the observed
differences (see :func:`_items_needed`).

References
----------
Calderon, N., Reichart, R. & Dror, R. (2025). The alternative annotator test for
LLM-as-a-judge: how to statistically justify replacing human annotators with LLMs.
Proceedings of ACL 2025, 16051-16081. doi:10.18653/v1/2025.acl-long.782
Benjamini, Y. & Yekutieli, D. (2001). The control of the false discovery rate in
multiple testing under dependency. Annals of Statistics 29, 1165-1188.
doi:10.1214/aos/1013699998
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.data.table import dense_codes
from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    check_count,
    check_level,
    check_number,
    check_option,
)
from evalmix.humans.ratings import Ratings, read_ratings
from evalmix.inference.sandwich import satterthwaite_df, vcov_cluster
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import Scoring

__all__ = ["alt_test", "AltTestResult", "benjamini_yekutieli"]



@dataclass(frozen=True)
class AltTestResult:
    """The alternative annotator test of each judge (see :func:`alt_test`).

    Attributes
    ----------
    judges : pandas.DataFrame
        One row per judge: ``judge``, ``winning_rate`` (omega), ``advantage`` (rho),
        ``passed``, ``n_humans`` (humans tested), ``n_items`` (items per human,
        median), ``n_items_needed`` (for 80% power), ``verdict`` (plain words).
    humans : pandas.DataFrame
        One row per (judge, human): ``n_items``, ``mean_difference``, ``se``, ``df``,
        ``p_value``, ``rejected`` (after Benjamini-Yekutieli), ``advantage``.
    epsilon, fdr : float
    scoring : str
    cluster : str
        ``""``: the authors' one-sample t test over items.
    n_skipped : int
        (judge, human) pairs with fewer than ``min_items`` items.
    """

    judges: pd.DataFrame = field(repr=False)
    humans: pd.DataFrame = field(repr=False)
    epsilon: float
    fdr: float
    scoring: str
    cluster: str = ""
    n_skipped: int = 0

    def passed(self, judge: str) -> bool:
        return bool(self.judges.set_index("judge").loc[judge, "passed"])

    def tidy(self) -> pd.DataFrame:
        """Two rows per judge in the result contract: ``estimand`` ``winning_rate`` and
        ``advantage_probability``, ``contrast`` the judge, ``method`` ``alt-test``; the
        verdict in ``note``."""
        rows = []
        for _, j in self.judges.iterrows():
            for est, col in (("winning_rate", "winning_rate"),
                             ("advantage_probability", "advantage")):
                rows.append({"estimand": est, "contrast": j["judge"], "method": "alt-test",
                             "cluster": self.cluster, "scale": "probability",
                             "estimate": j[col], "n_clusters": np.nan,
                             "note": j["verdict"], "epsilon": self.epsilon,
                             "fdr": self.fdr, "passed": j["passed"],
                             "n_humans": j["n_humans"], "n_items_needed": j["n_items_needed"]})
        return tidy_rows(rows, reps=0)

    def __str__(self) -> str:
        head = (f"Alternative annotator test (Calderon et al. 2025): epsilon={self.epsilon}, "
                f"BY-corrected at q={self.fdr}, scoring={self.scoring}"
                + (f", cluster-robust t over {self.cluster!r}" if self.cluster else ""))
        return "\n".join([head, *(f"  {v}" for v in self.judges["verdict"])])


def benjamini_yekutieli(p_values: np.ndarray, q: float) -> np.ndarray:
    """Indices rejected by the Benjamini-Yekutieli step-up procedure at FDR ``q``.

    The largest ``i`` with ``p_(i) <= i q / (m H_m)``, ``H_m = sum_{k<=m} 1/k``, and all
    smaller p-values (NaN p-values are never rejected), as the alt-test authors' code.

    Examples
    --------
    >>> benjamini_yekutieli(np.array([0.001, 0.04, 0.2]), 0.05).tolist()
    [0]
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return np.zeros(0, dtype=int)
    order = np.argsort(p)
    h_m = np.sum(1.0 / np.arange(1, m + 1))
    thresholds = np.arange(1, m + 1) / m * (q / h_m)
    below = np.flatnonzero(p[order] <= thresholds)
    return order[:below.max() + 1] if below.size else np.zeros(0, dtype=int)


def _scores(pred: np.ndarray, H: np.ndarray, h: int, scoring: Any) -> np.ndarray:
    """Score of ``pred`` (n,) against the humans other than ``h`` on each item."""
    others = np.isfinite(H)
    others[:, h] = False
    if callable(scoring):
        return np.array([scoring(p, list(row[ok])) for p, row, ok in zip(pred, H, others,
                                                                          strict=True)])
    k = others.sum(axis=1)
    if scoring == "accuracy":
        return np.where(others, H == pred[:, None], False).sum(axis=1) / k
    sq = np.where(others, (pred[:, None] - np.where(others, H, 0.0)) ** 2, 0.0)
    return -np.sqrt(sq.sum(axis=1) / k)


def _t_test(diff: np.ndarray, epsilon: float, clusters: np.ndarray | None
            ) -> tuple[float, float, float]:
    """(se, df, one-sided p) of ``mean(diff) < epsilon``."""
    n = diff.size
    if clusters is None:
        p = float(stats.ttest_1samp(diff, epsilon, alternative="less").pvalue)
        return float(np.std(diff, ddof=1) / np.sqrt(n)), float(n - 1), p
    codes = dense_codes(clusters)
    if codes.max() < 1:
        return float("nan"), float("nan"), float("nan")
    X = np.ones((n, 1))
    se = float(np.sqrt(vcov_cluster(X, diff - diff.mean(), codes, type="CR2")[0, 0]))
    df = float(satterthwaite_df(X, codes, type="CR2")[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        p = float(stats.t.cdf((diff.mean() - epsilon) / se, df)) if se > 0 else float("nan")
    return se, df, p


def _items_needed(rows: pd.DataFrame, epsilon: float, q: float, power: float = 0.8
                  ) -> float:
    """Items per human at which the judge passes with probability ``power``.

    To pass, the ``k = ceil(m/2)`` humans with the smallest p-values must be rejected,
    which the BY step-up guarantees when each has ``p <= k q / (m H_m)``. For human
    ``h`` with mean difference ``d`` and SD ``s`` (per item, times the observed design
    effect when clustered) that takes ``n = ((z_a + z_b) s / (epsilon - d))^2`` items
    (normal approximation) with ``b = power^(1/k)``, so that ``k`` independent tests all
    reject with probability ``power``; the answer is the ``k``-th smallest ``n`` (inf
    when fewer than ``k`` humans have ``d < epsilon``). With the observed ``d`` and ``s``
    as the truth; a pilot's noise in them carries into the plan.
    """
    m = len(rows)
    if m == 0:
        return float("nan")
    k = int(np.ceil(m / 2))
    alpha = k * q / (m * np.sum(1.0 / np.arange(1, m + 1)))
    # all k humans must reject: each with power power**(1/k) (independent tests)
    z = stats.norm.ppf(1 - alpha) + stats.norm.ppf(power ** (1 / k))
    sd = rows["se"].to_numpy() * np.sqrt(rows["n_items"].to_numpy())
    gap = epsilon - rows["mean_difference"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(gap > 0, np.ceil((z * sd / gap) ** 2), np.inf)
    n = np.where(np.isfinite(n), np.maximum(n, 2), n)
    return float(np.sort(n)[k - 1])


def alt_test(
    data: Ratings | str | os.PathLike[str] | pd.DataFrame,
    *,
    judges: Sequence[str] | None = None,
    epsilon: float = 0.2,
    fdr: float = 0.05,
    scoring: Scoring | Callable[[Any, list[Any]], float] = "auto",
    cluster: str | None = None,
    min_humans: int = 2,
    min_items: int = 30,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
    by: str | Sequence[str] | None = None,
) -> AltTestResult:
    """The alternative annotator test (Calderon, Reichart & Dror 2025) of each LLM judge.

    Parameters
    ----------
    data : path, DataFrame or Ratings
        A long table of ratings (:func:`evalmix.humans.read_ratings`) with at least two
        human raters per item and the judges' ratings of the same items.
    judges : list of str, optional
        The LLM raters to test (default: all).
    epsilon : float
        Cost-benefit allowance in [0, 1): 0.2 experts, 0.15 skilled, 0.1 crowd workers.
    fdr : float
        The Benjamini-Yekutieli false discovery rate ``q``.
    scoring : {"auto", "accuracy", "neg_rmse"} or callable
        Alignment score of a rating with the remaining humans' ratings; ``"auto"``:
        accuracy for verdicts and labels, negative RMSE for scores. A callable takes
        ``(rating, list of human ratings)`` (values as read: verdicts 0 / 0.5 / 1).
    cluster : str, optional
        Items in clusters: a cluster-robust t test instead of the authors' t test.
    min_humans : int
        Items need at least this many human ratings (the authors' default 2).
    min_items : int
        Humans with fewer items are not tested (the authors' default 30).
    item, rater, rating, rater_kind, humans, by
        How to read ``data`` (:func:`evalmix.humans.read_ratings`); ``by`` must be
        None (test each stratum on its own subset).

    Returns
    -------
    AltTestResult

    Examples
    --------
    >>> import pandas as pd, numpy as np, evalmix
    >>> rng = np.random.default_rng(0); truth = rng.integers(0, 2, 60)
    >>> noisy = lambda p: np.where(rng.random(60) < p, 1 - truth, truth)
    >>> raters = {"h1": noisy(.2), "h2": noisy(.2), "h3": noisy(.2), "gpt": noisy(.05)}
    >>> df = pd.DataFrame([(i, r, v[i]) for r, v in raters.items() for i in range(60)],
    ...                   columns=["item_id", "rater", "score"])
    >>> res = evalmix.alt_test(df, humans=["h1", "h2", "h3"])
    >>> bool(res.passed("gpt"))
    True

    References
    ----------
    Calderon, Reichart & Dror (2025), doi:10.18653/v1/2025.acl-long.782.
    """
    epsilon = check_number("epsilon", epsilon, low=0, high=1, high_open=True)
    fdr = check_level(fdr)
    min_humans = check_count("min_humans", min_humans, minimum=2)
    min_items = check_count("min_items", min_items, minimum=2)
    if not callable(scoring):
        check_option("scoring", scoring, ("auto", "accuracy", "neg_rmse"))
    if isinstance(data, Ratings):
        r = data
    else:
        r = read_ratings(data, item=item, rater=rater, rating=rating, rater_kind=rater_kind,
                         humans=humans, cluster=cluster, by=by)
    if len(r.strata) > 1:
        raise InvalidOptionError("alt_test tests one set of items: run it per stratum (subset the "
                                 "table) instead of by=")
    if cluster is not None and r.cluster is None:
        raise InvalidOptionError(f"cluster={cluster!r} was given but the ratings were read without "
                                 "a cluster; pass cluster= to read_ratings")
    if len(r.humans) < 2:
        raise EvalmixError(f"the alt-test needs at least 2 human raters; found "
                           f"{len(r.humans)} ({list(r.humans)}). With one expert, see the "
                           "authors' single-expert variant")
    chosen = list(r.llms) if judges is None else [str(j) for j in judges]
    missing = [j for j in chosen if j not in r.llms]
    if missing or not chosen:
        raise InvalidOptionError(f"judges {missing or chosen} are not LLM raters; the LLM raters "
                                 f"are {list(r.llms)[:10]}")
    how = scoring if callable(scoring) else (
        ("accuracy" if r.kind != "score" else "neg_rmse") if scoring == "auto" else scoring)
    stratum = r.strata[0]
    idx, H = r.matrix(stratum, list(r.humans))
    keep = np.isfinite(H).sum(axis=1) >= min_humans
    clusters = r.units.loc[idx, "cluster"].to_numpy() if r.cluster else None
    judge_rows, human_rows, skipped = [], [], 0
    for judge in chosen:
        _, L = r.matrix(stratum, [judge])
        pred = L[:, 0]
        rows = []
        for h, human in enumerate(r.humans):
            items = np.flatnonzero(keep & np.isfinite(H[:, h]) & np.isfinite(pred))
            if items.size < min_items:
                skipped += 1
                continue
            Hi = H[items]
            llm_score = _scores(pred[items], Hi, h, how)
            human_score = _scores(Hi[:, h], Hi, h, how)
            llm_ind = (llm_score >= human_score).astype(float)
            diff = (human_score >= llm_score).astype(float) - llm_ind
            se, df, p = _t_test(diff, float(epsilon),
                                None if clusters is None else clusters[items])
            rows.append({"judge": judge, "human": human, "n_items": int(items.size),
                         "mean_difference": float(diff.mean()), "se": se, "df": df,
                         "p_value": p, "advantage": float(llm_ind.mean())})
        frame = pd.DataFrame(rows, columns=["judge", "human", "n_items", "mean_difference",
                                            "se", "df", "p_value", "advantage"])
        rejected = np.zeros(len(frame), dtype=bool)
        rejected[benjamini_yekutieli(frame["p_value"].to_numpy(), fdr)] = True
        frame["rejected"] = rejected
        human_rows.append(frame)
        judge_rows.append(_verdict(judge, frame, float(epsilon), fdr))
    judges_frame = pd.DataFrame(judge_rows)
    humans_frame = pd.concat(human_rows, ignore_index=True)
    return AltTestResult(judges_frame, humans_frame, float(epsilon), fdr,
                         how if isinstance(how, str) else getattr(how, "__name__", "custom"),
                         r.cluster or "", skipped)


def _verdict(judge: str, frame: pd.DataFrame, epsilon: float, q: float) -> dict[str, Any]:
    m = len(frame)
    if m == 0:
        return {"judge": judge, "winning_rate": np.nan, "advantage": np.nan, "passed": False,
                "n_humans": 0, "n_items": 0, "n_items_needed": np.nan,
                "verdict": f"{judge}: not tested (no human with enough items)"}
    omega = float(frame["rejected"].sum() / m)
    rho = float(frame["advantage"].mean())
    passed = omega >= 0.5
    need = _items_needed(frame, epsilon, q)
    n_items = int(frame["n_items"].median())
    words = (f"{judge} {'passes' if passed else 'fails'}: it wins against "
             f"{int(frame['rejected'].sum())} of {m} human annotators (omega={omega:.2f}"
             f"{' >= ' if passed else ' < '}0.5), advantage probability rho={rho:.2f}")
    if not passed:
        words += (f"; about {need:.0f} items per annotator would let it pass with 80% power"
                  if np.isfinite(need) else
                  "; it does not beat enough annotators by epsilon at any number of items")
    if m < 3:
        words += "; the authors recommend at least 3 human annotators"
    return {"judge": judge, "winning_rate": omega, "advantage": rho, "passed": passed,
            "n_humans": m, "n_items": n_items, "n_items_needed": need, "verdict": words}
