"""Does the judge's calibration transport? Its errors by model or stratum.

A human-anchored estimate (:func:`evalmix.ppi`, :func:`evalmix.rogan_gladen`) borrows the
judge's errors measured on the labelled units for the unlabelled ones. When those errors
differ between the models judged (a judge lenient with its own family) or between
strata, a correction pooled over groups is wrong for each group, and a leaderboard built
on it is wrong in the differences. :func:`transport_check` estimates on the labelled
units, per group, the judge's bias ``mean(judge - human)`` (with its cluster-robust
interval) and, for binary ratings, its sensitivity and specificity, and tests that the
bias is the same in every group: a cluster-robust Wald test of the group means of
``judge - human`` (CR2 covariance; ``F(k - 1, G - k)`` for ``k`` groups and ``G``
clusters, units when there are none). A group whose bias differs from the others' at the
Holm-adjusted level is flagged.

References
----------
Pustejovsky, J. E. & Tipton, E. (2018), doi:10.1080/07350015.2016.1247004 (CR2 and
its Satterthwaite df).
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian
Journal of Statistics 6, 65-70.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.data.table import dense_codes
from evalmix.errors import EvalmixError, check_count, check_level
from evalmix.humans.anchored import _pick_judge, unit_values
from evalmix.humans.ratings import Ratings, read_ratings
from evalmix.inference.compare_all import holm
from evalmix.inference.sandwich import satterthwaite_df, vcov_cluster
from evalmix.inference.scale import t_quantile
from evalmix.tidy import tidy_rows

__all__ = ["transport_check", "TransportResult"]


@dataclass(frozen=True)
class TransportResult:
    """The judge's errors per group of the labelled units (see :func:`transport_check`).

    Attributes
    ----------
    groups : pandas.DataFrame
        Per group: ``group``, ``n_labelled``, ``bias`` (mean judge - human) with ``se``,
        ``lo``, ``hi``, ``df``; ``sensitivity`` and ``specificity`` for binary ratings;
        ``p_value`` (Holm-adjusted test that the group's bias equals the others') and
        ``flagged``.
    statistic, df1, df2, p_value : float
        The Wald F test of equal bias in every group.
    transports : bool
        False when the test rejects at ``alpha``.
    skipped : tuple of str
        Groups with fewer than ``min_labelled`` labelled units (not tested).
    judge, by, cluster : str
    alpha, level : float
    """

    groups: pd.DataFrame = field(repr=False)
    statistic: float
    df1: float
    df2: float
    p_value: float
    transports: bool
    judge: str
    by: str
    cluster: str
    alpha: float
    level: float
    skipped: tuple[str, ...] = ()

    def tidy(self) -> pd.DataFrame:
        """One row per group in the result contract (``estimand="judge_bias"``,
        ``contrast`` the group, ``method`` CR2 or naive); then ``n_labelled``,
        ``sensitivity``, ``specificity``, ``p_value``, ``flagged``."""
        g = self.groups
        return tidy_rows(pd.DataFrame({
            "estimand": "judge_bias", "contrast": g["group"].astype(str),
            "method": "CR2" if self.cluster else "naive", "cluster": self.cluster,
            "scale": "identity", "estimate": g["bias"], "se": g["se"], "lo": g["lo"],
            "hi": g["hi"], "level": self.level, "df": g["df"], "reps": 0,
            "note": np.where(g["flagged"], "judge errors differ here", ""),
            "n_labelled": g["n_labelled"], "sensitivity": g.get("sensitivity", np.nan),
            "specificity": g.get("specificity", np.nan), "p_value": g["p_value"],
            "flagged": g["flagged"]}))

    def __str__(self) -> str:
        verdict = ("the judge's errors are consistent across groups" if self.transports else
                   "the judge's errors DIFFER between groups: a pooled correction will be "
                   "wrong for some of them; anchor each group on its own labels (by=)")
        lines = [f"Transport check of judge {self.judge!r} by {self.by!r}: F = "
                 f"{self.statistic:.2f} on ({self.df1:.0f}, {self.df2:.1f}) df, p = "
                 f"{self.p_value:.3g}: {verdict}"]
        if self.skipped:
            lines.append(f"  not tested (too few labels): {', '.join(self.skipped)}")
        for _, g in self.groups.iterrows():
            extra = (f", sensitivity {g['sensitivity']:.2f}, specificity "
                     f"{g['specificity']:.2f}" if "sensitivity" in g else "")
            flag = "  <- differs" if g["flagged"] else ""
            lines.append(f"  {str(g['group']):<24} bias {g['bias']:+.3f} [{g['lo']:+.3f}, "
                         f"{g['hi']:+.3f}] n={g['n_labelled']}{extra}{flag}")
        return "\n".join(lines)


def transport_check(
    data: Ratings | str | os.PathLike[str] | pd.DataFrame,
    *,
    by: str,
    judge: str | None = None,
    cluster: str | None = None,
    alpha: float = 0.05,
    level: float = 0.95,
    min_labelled: int = 5,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
) -> TransportResult:
    """Test whether a judge's errors differ between groups (models, strata).

    Parameters
    ----------
    data : path, DataFrame or Ratings
        A long table of ratings (:func:`evalmix.humans.read_ratings`) with the judge's
        and human ratings of the labelled units.
    by : str
        The grouping column (constant within a unit), e.g. the model judged.
    judge : str, optional
        The LLM rater (needed when there are several).
    cluster : str, optional
        A cluster above the units: cluster-robust (CR2) intervals and test.
    alpha : float
        Level of the test (and of the Holm-adjusted flags).
    level : float
        Confidence level of the per-group intervals.
    min_labelled : int
        Groups with fewer labelled units are left out (listed in ``skipped``).
    item, rater, rating, rater_kind, humans
        How to read ``data``.

    Returns
    -------
    TransportResult

    Examples
    --------
    >>> import evalmix
    >>> from evalmix.humans.transport import transport_check
    >>> res = evalmix.sim.judge_labels(30, 20, n_labelled=600, seed=4)
    >>> t = transport_check(res.data, by="model", cluster="cluster", rating="score")
    >>> t.transports, t.groups["flagged"].tolist()
    (False, [True, True])
    """
    level = check_level(level)
    alpha = check_level(alpha)
    min_labelled = check_count("min_labelled", min_labelled, minimum=2)
    r = data if isinstance(data, Ratings) else read_ratings(
        data, item=item, rater=rater, rating=rating, rater_kind=rater_kind, humans=humans,
        cluster=cluster, keep=[by])
    if by not in r.units.columns:
        raise EvalmixError(f"the Ratings were read without the column {by!r}; pass keep=")
    name = _pick_judge(r, judge)
    u = unit_values(r, name)
    u = u[np.isfinite(u["y"].to_numpy(dtype=float))]
    if u.empty:
        raise EvalmixError("no unit has both a human and a judge rating")
    size = u[by].astype(str).value_counts()
    small = sorted(size.index[size < min_labelled])
    u = u[~u[by].astype(str).isin(small)]
    e = (u["f"] - u["y"]).to_numpy(dtype=float)
    g = dense_codes(u[by].astype(str).to_numpy())
    labels = np.sort(pd.unique(u[by].astype(str)))
    k = labels.size
    if k < 2:
        raise EvalmixError(f"{by!r} has fewer than two groups with {min_labelled} labelled "
                           "units; nothing to compare")
    X = np.zeros((e.size, k))
    X[np.arange(e.size), g] = 1.0
    n_g = X.sum(axis=0)
    means = np.bincount(g, weights=e, minlength=k) / n_g
    resid = e - means[g]
    clusters = dense_codes(u["cluster"].to_numpy()) if r.cluster else np.arange(e.size)
    V = vcov_cluster(X, resid, clusters, type="CR2")
    df = satterthwaite_df(X, clusters, type="CR2")
    se = np.sqrt(np.diag(V))
    q = np.array([t_quantile(level, d) for d in df])
    C = np.column_stack([np.ones(k - 1), -np.eye(k - 1)])  # first group minus each other
    diff = C @ means
    with np.errstate(divide="ignore", invalid="ignore"):
        W = float(diff @ np.linalg.pinv(C @ V @ C.T) @ diff)
    # residual df among the clusters (units when unclustered); a group's own
    # Satterthwaite df would let the smallest group set the reference of the whole test
    df1, df2 = float(k - 1), float(max(int(clusters.max()) + 1 - k, 1))
    F = W / df1
    p = float(stats.f.sf(F, df1, df2))
    # each group against the mean of the others (contrast vector, CR2 variance)
    p_each = []
    for j in range(k):
        c = -np.ones(k) / (k - 1)
        c[j] = 1.0
        t = float(c @ means / np.sqrt(c @ V @ c))
        p_each.append(2 * stats.t.sf(abs(t), df2))
    p_adj = holm(np.array(p_each))
    frame = pd.DataFrame({"group": labels, "n_labelled": n_g.astype(int), "bias": means,
                          "se": se, "lo": means - q * se, "hi": means + q * se, "df": df,
                          "p_value": p_adj, "flagged": p_adj < alpha})
    if len(r.categories) and set(r.values.tolist()) <= {0.0, 0.5, 1.0}:
        y, f = u["y"].to_numpy(dtype=float), u["f"].to_numpy(dtype=float)
        pos, neg = y > 0.5, y < 0.5
        with np.errstate(divide="ignore", invalid="ignore"):
            frame["sensitivity"] = [float((f[pos & (g == j)] > 0.5).mean()) for j in range(k)]
            frame["specificity"] = [float((f[neg & (g == j)] < 0.5).mean()) for j in range(k)]
    return TransportResult(frame, F, df1, df2, p, not p < alpha, name, by,
                           r.cluster or "", alpha, level, tuple(small))
