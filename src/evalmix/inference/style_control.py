"""Style-controlled Bradley-Terry: abilities with answer length and markdown held fixed.

Chatbot Arena's "style control" (FastChat ``compute_style_control``; LMArena
``arena-rank`` ``ContextualBradleyTerry``) fits a contextual Bradley-Terry model::

    logit P(a beats b) = theta_a - theta_b + z_ab' gamma

where ``z_ab`` holds, for each per-answer feature ``f`` (answer length, markdown
headers, list items, bold spans, or any column), the normalised difference of the two
answers, ``(f_a - f_b) / (f_a + f_b + 1)`` (FastChat's ``apply_ratio`` with
``add_one``), standardised over the battles (mean 0, population SD, as both upstreams
do). ``theta`` are the abilities with the style effect removed (centred, logit scale;
Arena's scale is ``1000 + theta * 400 / ln 10``) and ``gamma`` the style coefficients:
the change in the log-odds of winning per SD of the feature difference.

Ties count one half (quasi-binomial), as ``arena-rank`` scores them. ``reg`` is
arena-rank's ridge on the style coefficients (``0.5 * reg * |gamma|^2`` added to the
mean negative log-likelihood; arena-rank's default 1.0, FastChat's 0.5 on a doubled
table); evalmix's default is no ridge, so the coefficients are the maximum-likelihood
ones and their sandwich intervals have their usual meaning.

Intervals: the cluster-robust sandwich (CR2 by default; CR0/CR1 with a ridge, whose
Hessian is then the penalised one), clustered by prompt (``item``) when the table has
one. Neither upstream clusters: arena-rank's sandwich sums scores per battle and
FastChat resamples battles; battles that share a prompt are not independent. The
raw Bradley-Terry abilities (no style terms) are fitted the same way and reported
beside the controlled ones.

References
----------
Li, T., Chiang, W.-L., et al. (2024). Does style matter? Disentangling style and
substance in Chatbot Arena. LMSYS blog, 2024-08-29.
Bradley, R. A. & Terry, M. E. (1952). Biometrika 39, 324-345. doi:10.2307/2334029
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd
from scipy import stats

from evalmix._blas import one_blas_thread
from evalmix._escape import visible
from evalmix.data.answers import answer_columns
from evalmix.data.table import check_table, dense_codes
from evalmix.errors import EvalmixError, InvalidOptionError, check_level, check_number, check_option
from evalmix.inference.glm_fits import weighted_logit
from evalmix.inference.sandwich import CR_TYPES, CRType, cr1_factor, vcov_cluster
from evalmix.tidy import tidy_rows

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["style_controlled_bt", "StyleControlResult", "style_features", "TRANSFORMS"]

TRANSFORMS: tuple[str, ...] = ("ratio", "difference")
#: Arena's display scale: ``1000 + theta * 400 / ln(10)``.
ARENA_SCALE = 400.0 / math.log(10.0)


def style_features(a: np.ndarray, b: np.ndarray, transform: str = "ratio",
                   normalize: bool = True) -> np.ndarray:
    """The style covariates of each battle from the two answers' features.

    Parameters
    ----------
    a, b : (n, p) arrays
        Features of model_a's and model_b's answers.
    transform : {"ratio", "difference"}
        ``(a - b) / (a + b + 1)`` (FastChat's, for non-negative counts) or ``a - b``.
    normalize : bool
        Standardise each column (mean 0, population SD; a constant column is left
        centred), as FastChat and arena-rank do.

    Returns
    -------
    (n, p) ndarray
    """
    check_option("transform", transform, TRANSFORMS)
    z = a - b
    if transform == "ratio":
        if np.any(a < 0) or np.any(b < 0):
            raise InvalidOptionError("transform='ratio' needs non-negative features "
                                     "(counts, lengths); use transform='difference'")
        z = z / (a + b + 1.0)
    if normalize:
        sd = z.std(axis=0)
        z = (z - z.mean(axis=0)) / np.where(sd == 0, 1.0, sd)
    return z


@dataclass(frozen=True, eq=False)
class StyleControlResult:
    """Style-controlled and raw Bradley-Terry abilities and the style coefficients.

    Attributes
    ----------
    models : pandas.DataFrame
        One row per model and estimand (``bt_style_controlled``, ``bradley_terry``) in
        the result contract, log-odds scale, abilities centred to mean zero; with
        ``model``, ``rank`` (within the estimand) and ``arena_rating`` (``1000 +
        estimate * 400 / ln 10``).
    coefficients : pandas.DataFrame
        One row per feature (estimand ``style_coef``): the change in log-odds of winning
        per SD of the normalised feature difference.
    features : tuple of str
    transform : str
    reg : float
    method, cluster : str
    level : float
    """

    models: pd.DataFrame
    coefficients: pd.DataFrame
    features: tuple[str, ...]
    transform: str
    reg: float
    method: str
    cluster: str
    level: float

    def tidy(self) -> pd.DataFrame:
        """Models (controlled, then raw), then the style coefficients."""
        return pd.concat([self.models, self.coefficients], ignore_index=True)

    def __str__(self) -> str:
        ctl = self.models[self.models["estimand"] == "bt_style_controlled"].set_index("model")
        raw = self.models[self.models["estimand"] == "bradley_terry"].set_index("model")
        first = ctl.iloc[0]
        lines = [
            f"Style-controlled Bradley-Terry ({', '.join(self.features)}; {self.transform} "
            f"differences, standardised{f'; ridge {self.reg:g}' if self.reg else ''}): "
            f"{self.method} clustered by {self.cluster or 'row'} "
            f"({int(first['n_clusters'])} clusters), {self.level:.0%} intervals, logit scale",
            f"{'model':<32} {'controlled':>10}  {'interval':<17} {'rank':>4}   "
            f"{'raw':>7}  {'interval':<17} {'rank':>4}",
        ]
        for m in ctl.sort_values("rank").index:
            c, r = ctl.loc[m], raw.loc[m]
            lines.append(f"{visible(m)[:32]:<32} {c['estimate']:>10.3f}  [{c['lo']:6.3f}, "
                         f"{c['hi']:6.3f}] {int(c['rank']):>4}   {r['estimate']:>7.3f}  "
                         f"[{r['lo']:6.3f}, {r['hi']:6.3f}] {int(r['rank']):>4}")
        lines.append("style coefficients (log-odds per SD of the feature difference):")
        for _, c in self.coefficients.iterrows():
            lines.append(f"  {visible(c['contrast']):<12} {c['estimate']:>8.3f}  [{c['lo']:.3f}, "
                         f"{c['hi']:.3f}]")
        return "\n".join(lines)


def _clusters(table: EvalTable, cluster: str | None) -> tuple[np.ndarray, str]:
    if cluster == "auto":
        cluster = "item" if "item" in table.clusters else None
    if cluster is None:
        return np.asarray(table.pair_codes()), ""
    role = table.check_cluster(cluster)
    table.check_pairs_within(role)
    return dense_codes(np.asarray(table.codes(cluster))), str(cluster)


def _fit(y: np.ndarray, ia: np.ndarray, ib: np.ndarray, k: int, z: np.ndarray,
         clusters: np.ndarray, method: str, reg: float
         ) -> tuple[np.ndarray, np.ndarray]:
    """Centred abilities and coefficients, and their covariance."""
    n, p = z.shape
    X = np.zeros((n, k - 1 + p))
    rows = np.arange(n)
    # ability of model 0 fixed at 0 (re-centred below)
    for idx, sign in ((ia, 1.0), (ib, -1.0)):
        hit = idx > 0
        X[rows[hit], idx[hit] - 1] += sign
    X[:, k - 1:] = z
    penalty = np.r_[np.zeros(k - 1), np.full(p, reg * n)]
    beta = weighted_logit(X, y, np.ones(n), penalty if reg else None)
    mu = 1.0 / (1.0 + np.exp(-(X @ beta)))
    w = mu * (1 - mu)
    if reg:
        bread = np.linalg.inv((X * w[:, None]).T @ X + np.diag(penalty))
        g = int(clusters.max()) + 1
        scores = np.zeros((g, X.shape[1]))
        np.add.at(scores, clusters, X * (y - mu)[:, None])
        V = bread @ scores.T @ scores @ bread
        if method == "CR1":
            V *= cr1_factor(g, n, X.shape[1])
    else:
        V = vcov_cluster(X, y - mu, clusters, type=cast(CRType, method), working_weights=w)
    # full parameter vector (theta_0 = 0) and the centring map
    m = k + p
    T = np.zeros((m, m - 1))
    T[1:k, :k - 1] = np.eye(k - 1)
    T[k:, k - 1:] = np.eye(p)
    A = np.eye(m)
    A[:k, :k] -= 1.0 / k
    L = A @ T
    return L @ beta, L @ V @ L.T


def style_controlled_bt(
    table: EvalTable, features: Sequence[str] = ("length",), *,
    columns: pd.DataFrame | None = None, transform: Literal["ratio", "difference"] = "ratio",
    normalize: bool = True, reg: float = 0.0, cluster: str | None = "auto",
    method: str = "CR2", level: float = 0.95,
) -> StyleControlResult:
    """Bradley-Terry abilities with per-answer style covariates held fixed.

    Parameters
    ----------
    table : EvalTable
        A pairwise table (battles; ties count one half).
    features : sequence of str
        Per-answer features, each the columns ``<f>_a`` / ``<f>_b`` of the table (the
        battles reader gives ``length``, ``headers``, ``lists``, ``bold`` where the logs
        hold the conversations) or of ``columns``.
    columns : pandas.DataFrame, optional
        The DataFrame the table was read from, holding the feature columns.
    transform : {"ratio", "difference"}
        How the two answers' features make the covariate (see :func:`style_features`).
    normalize : bool
        Standardise the covariates (FastChat, arena-rank).
    reg : float
        arena-rank's ridge on the style coefficients (0: none, the default).
    cluster : "auto", str or None
        Cluster role of the sandwich: ``"auto"`` the prompt (``item``) when the table
        has one, else rows (AB/BA pairs together); None: rows.
    method : {"CR0", "CR1", "CR2", "CR3"}
        Sandwich type (CR0 or CR1 with ``reg > 0``).
    level : float
        Interval level (t with G - 1 degrees of freedom).

    Returns
    -------
    StyleControlResult

    Examples
    --------
    >>> from evalmix.data.readers import read_battles
    >>> table = read_battles("arena_battles.json")  # doctest: +SKIP
    >>> print(style_controlled_bt(table, ["length", "headers", "lists", "bold"]))  # doctest: +SKIP
    """
    table = check_table(table, "style_controlled_bt")
    if table.kind != "pairwise":
        raise EvalmixError("style-controlled Bradley-Terry needs a pairwise table (battles)")
    if table.ties == "separate":
        raise InvalidOptionError("ties='separate' scores a tie 0 for both models; read the "
                                 "battles with ties='half' (a tie counts one half, as "
                                 "arena-rank scores it) or 'exclude'")
    check_option("method", method, CR_TYPES)
    level = check_level(level)
    reg = check_number("reg", reg, low=0.0)
    if reg and method not in ("CR0", "CR1"):
        raise InvalidOptionError(f"method={method!r} with reg={reg:g}: the penalised fit's "
                                 "sandwich is CR0 or CR1; pass method='CR1' or reg=0")
    feats = [features] if isinstance(features, str) else list(features)
    fa, fb = answer_columns(table, feats, columns)
    z = style_features(fa, fb, transform, normalize)
    d = table.data
    a = d["model_a"].astype(str).to_numpy()
    b = d["model_b"].astype(str).to_numpy()
    labels, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    ia, ib = codes[: a.size], codes[a.size:]
    k = labels.size
    if k < 2:
        raise EvalmixError("style-controlled Bradley-Terry needs at least two models")
    y = d["y"].to_numpy(dtype=float)
    clusters, cname = _clusters(table, cluster)
    g = int(clusters.max()) + 1
    if g < 2:
        raise EvalmixError("the sandwich needs at least two clusters")
    crit = stats.t.ppf(0.5 + level / 2, g - 1)
    with one_blas_thread():
        est_c, V_c = _fit(y, ia, ib, k, z, clusters, method, reg)
        est_r, V_r = _fit(y, ia, ib, k, np.zeros((y.size, 0)), clusters, method, 0.0)
    n_model = np.bincount(ia, minlength=k) + np.bincount(ib, minlength=k)
    rows: list[dict[str, Any]] = []
    for estimand, est, V in (("bt_style_controlled", est_c, V_c), ("bradley_terry", est_r, V_r)):
        se = np.sqrt(np.clip(np.diag(V)[:k], 0, None))
        rank = stats.rankdata(-est[:k], method="min").astype(int)
        for j in range(k):
            rows.append({"estimand": estimand, "contrast": str(labels[j]),
                         "estimate": est[j], "se": se[j], "lo": est[j] - crit * se[j],
                         "hi": est[j] + crit * se[j], "model": str(labels[j]),
                         "rank": int(rank[j]), "n_obs": int(n_model[j]),
                         "arena_rating": 1000 + ARENA_SCALE * est[j]})
    const = {"method": method, "cluster": cname, "scale": "log-odds", "level": level,
             "df": float(g - 1), "n_clusters": g, "reps": 0}
    se_g = np.sqrt(np.clip(np.diag(V_c)[k:], 0, None))
    coef = [{"estimand": "style_coef", "contrast": f, "estimate": est_c[k + i],
             "se": se_g[i], "lo": est_c[k + i] - crit * se_g[i],
             "hi": est_c[k + i] + crit * se_g[i], "feature": f}
            for i, f in enumerate(feats)]
    return StyleControlResult(tidy_rows(rows, **const), tidy_rows(coef, **const),
                              tuple(feats), transform, reg, method, cname, level)
