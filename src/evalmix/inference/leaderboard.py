"""Leaderboards for many models: every pairwise difference, simultaneous intervals, ranks.

:func:`leaderboard` puts K models (any number) on one board:

``mean`` (scores tables)
    Each condition's mean score.
``win_rate`` (pairwise tables where one baseline model appears in every row)
    Each model's win rate against the baseline. Model ``j`` minus model ``k`` is the
    difference of their win rates, paired on the items they share through the
    clustered covariance.
``bradley_terry`` (pairwise tables without a common baseline, e.g. round robin)
    Abilities of the logit Bradley-Terry model ``P(a beats b) = expit(b_a - b_b)``
    (quasi-binomial, so a tie scored 1/2 counts half), centred to mean zero, with the
    cluster-robust sandwich covariance of the logit fit.

For the cell means the K x K covariance is formed once from the (cluster x model) sums
of residuals, with the CR1/CR2/CR3 closed form of
:func:`evalmix.inference.compare_all.cell_means_vcov`; for Bradley-Terry it is the
sandwich of :func:`evalmix.inference.sandwich.vcov_cluster`, computed on the distinct
(pair, outcome, cluster) patterns with counts (:mod:`evalmix.inference.bt_fit`). All ``K (K - 1) / 2`` differences, their
Holm-adjusted p-values, simultaneous max-t intervals, rank intervals and tier letters
follow from that one matrix (:mod:`evalmix.inference.ranking`).

References
----------
The max-t, rank-interval and letter methods are referenced in full in
:mod:`evalmix.inference.ranking`: Hothorn, Bretz & Westfall (2008),
doi:10.1002/bimj.200810425; Klein, Wright & Wieczorek (2020), doi:10.1111/rssc.12402;
Mogstad, Romano, Shaikh & Wilhelm (2024), doi:10.1093/restud/rdad006; Piepho (2004),
doi:10.1198/1061860043515.
Bradley, R. A. & Terry, M. E. (1952). Rank analysis of incomplete block designs I.
Biometrika 39, 324-345. doi:10.2307/2334029
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian
Journal of Statistics 6, 65-70.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast, get_args

import numpy as np
import pandas as pd
from scipy import stats
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from evalmix._blas import one_blas_thread
from evalmix.data.table import check_table
from evalmix.errors import (
    EvalmixError,
    FewClustersWarning,
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
    renamed_option,
)
from evalmix.inference.bt_fit import aggregate, fit_bt, vcov_bt, vcov_bt_multiway
from evalmix.inference.compare_all import _cells, cell_means_vcov, holm
from evalmix.inference.letters import MAX_LETTERS, check_max_letters, compact_letters
from evalmix.inference.ranking import (
    all_pairs,
    maxt_adjusted_p,
    maxt_critical,
    pair_se,
    pairwise_satterthwaite,
    rank_intervals,
    rank_sets,
    tie_groups,
)
from evalmix.inference.sandwich import (
    CR_TYPES,
    FEW_CLUSTERS,
    CRType,
    MultiwayTerm,
    _inclusion_exclusion,
    _psd,
    cluster_codes,
    intersect_codes,
)
from evalmix.inference.scale import bounded_interval
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import RESULT_COLUMNS
from evalmix.vocabulary import Adjust, LeaderboardEstimand

if TYPE_CHECKING:
    from collections.abc import Callable

    from evalmix.data.table import EvalTable

__all__ = ["leaderboard", "LeaderboardResult", "MODEL_COLUMNS", "PAIR_COLUMNS"]

#: Monte Carlo draws of the max-t critical value (``leaderboard(reps=)``).
MAXT_REPS = 10_000

Method = CRType
METHODS: tuple[str, ...] = CR_TYPES
#: Methods with a multiway form (CR3 has none; as for evalmix.interval).
MULTIWAY_METHODS: tuple[str, ...] = ("CR0", "CR1", "CR2")
ADJUSTS: tuple[str, ...] = get_args(Adjust)
ESTIMANDS: tuple[str, ...] = get_args(LeaderboardEstimand)

#: The board's columns: the result contract's :data:`~evalmix.tidy.RESULT_COLUMNS`
#: (``contrast`` is the model, prefixed ``"<stratum>: "`` on a stratum's board), then
#: the board's own.
MODEL_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "stratum", "model", "rank", "rank_lo", "rank_hi", "tier", "n_obs", "adjust", "crit",
    "rank_lo_marginal", "rank_hi_marginal", "tie_group",
)
#: The pairs' columns: :data:`~evalmix.tidy.RESULT_COLUMNS` (``contrast`` is ``"a - b"``,
#: prefixed ``"<stratum>: "`` on a stratum's board, so keys are unique across boards),
#: then the comparisons' own.
PAIR_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "stratum", "model_a", "model_b", "t", "p_value", "p_holm", "p_adjusted", "sim_lo",
    "sim_hi", "significant", "adjust", "crit",
)


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class LeaderboardResult:
    """A leaderboard: per-model estimates, ranks and tiers, and all pairwise differences.

    Attributes
    ----------
    estimand : {"mean", "win_rate", "bradley_terry"}
    method : str
        CR type of the covariance.
    cluster : str
        Cluster level (``""``: rows, or AB/BA pairs, independent; ``"a:b"`` the
        interaction of two factors).
    level : float
    adjust : {"max-t", "bonferroni", "none"}
        How the simultaneous intervals (and so ranks and tiers) were formed.
    baseline : str or None
        The common opponent of a ``win_rate`` board.
    by : str or None
        Factor the boards were stratified by (pooled board has stratum ``""``).
    empty_cells : pandas.DataFrame
        ``by`` level x model cells with no rows (columns ``by``, ``model``).
    skipped_strata : tuple of str
        Strata with fewer than two models or clusters (no board).
    seed : int or None
    notes : tuple of str
        What the board leaves out (tier letters skipped, or above
        :data:`~evalmix.inference.letters.MAX_LETTERS` letters).
    """

    models: pd.DataFrame
    pairs: pd.DataFrame
    estimand: str
    method: str
    cluster: str
    level: float
    adjust: str
    baseline: str | None
    by: str | None
    empty_cells: pd.DataFrame
    skipped_strata: tuple[str, ...]
    seed: int | str | None
    notes: tuple[str, ...] = ()

    def tidy(self) -> pd.DataFrame:
        """One row per stratum x model (columns :data:`MODEL_COLUMNS`), best first."""
        return self.models.copy()

    def tidy_pairs(self) -> pd.DataFrame:
        """One row per stratum x pair (columns :data:`PAIR_COLUMNS`, which start with the
        result contract's; keys are unique)."""
        return self.pairs.copy()

    def top_set(self, k: int = 1, *, stratum: str = "") -> list[str]:
        """Confidence set for the ``k`` best models (``k = 1``: the best), best first.

        The models whose simultaneous rank range starts at ``k`` or better
        (``rank_lo <= k``): with probability at least ``level`` it contains every model
        truly among the ``k`` best (csranks' ``cstaubest``;
        :func:`~evalmix.inference.ranking.tau_best`).
        """
        board = self.models[self.models["stratum"] == stratum]
        if board.empty:
            raise InvalidOptionError(f"no board for stratum {stratum!r}")
        if self.adjust == "none":
            raise InvalidOptionError("adjust='none' gives per-comparison rank ranges; a set "
                                     "for the best models needs adjust='max-t'")
        if not isinstance(k, (int, np.integer)) or not 1 <= k <= len(board):
            raise InvalidOptionError(f"k must be an integer from 1 to {len(board)}, got {k!r}")
        return [str(m) for m in board.loc[board["rank_lo"] <= k, "model"]]

    def __str__(self) -> str:
        board = self.models[self.models["stratum"] == ""]
        if board.empty:
            board = self.models
        first = board.iloc[0]
        what = {"mean": "mean score", "bradley_terry": "Bradley-Terry ability (logit)",
                "win_rate": f"win rate vs {self.baseline!r}"}[self.estimand]
        head = [
            f"Leaderboard: {what}; {len(board)} models, {self.method} clustered by "
            f"{self.cluster or 'row'} ({int(first['n_clusters'])} clusters)",
            f"each model's {self.level:.0%} interval is its own (t, Satterthwaite or "
            f"G - 1 df{'; logit scale' if first['scale'] == 'logit' else ''}); the "
            f"differences between models use {self.level:.0%} simultaneous intervals "
            f"({self.adjust}, critical value {first['crit']:.3f}); the rank ranges and "
            "tie groups step those down (Mogstad et al. 2024)" if self.adjust == "max-t"
            else f"({self.adjust}, critical value {first['crit']:.3f}) and the rank ranges "
            "invert those",
        ]
        lines = [f"{'rank':>4}  {'model':<28} {'estimate':>9}  {'interval':<19} "
                 f"{'rank range':<10} group tier"]
        for _, r in board.iterrows():
            lines.append(
                f"{int(r['rank']):>4}  {str(r['model'])[:28]:<28} {r['estimate']:>9.3f}  "
                f"[{r['lo']:.3f}, {r['hi']:.3f}]".ljust(66)
                + f" {int(r['rank_lo'])}-{int(r['rank_hi'])}".ljust(11)
                + f" {int(r['tie_group']):>5} {r['tier']}")
        tail = []
        if self.by is not None:
            strata = [s for s in pd.unique(self.models["stratum"]) if s]
            tail.append(f"{len(strata)} boards by {self.by}: " + ", ".join(
                f"{s} ({int((self.models['stratum'] == s).sum())} models)" for s in strata))
            tail.append(f"{len(self.empty_cells)} {self.by} x model cells are empty (no "
                        "rows); strata boards list only the models present")
        if self.skipped_strata:
            tail.append("no board (fewer than 2 models or clusters): "
                        + ", ".join(self.skipped_strata))
        tail += list(self.notes)
        return "\n".join(head + lines + tail)


# --------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class _Rows:
    """Per-row arrays of one board type (aligned with the table's rows); models are
    integer codes into ``names`` (sorted), never per-row strings."""

    estimand: str
    y: np.ndarray
    first: np.ndarray  # code of the model scored (cells) or model_a (Bradley-Terry)
    second: np.ndarray | None  # code of model_b (Bradley-Terry)
    baseline: str | None
    names: np.ndarray

    def subset(self, mask: np.ndarray) -> _Rows:
        return _Rows(self.estimand, self.y[mask], self.first[mask],
                     None if self.second is None else self.second[mask], self.baseline,
                     self.names)

    def models(self) -> np.ndarray:
        """Codes of the models present, sorted."""
        both = [self.first] if self.second is None else [self.first, self.second]
        return np.flatnonzero(sum(np.bincount(c, minlength=self.names.size) for c in both))


def _model_codes(*columns: pd.Series) -> tuple[list[np.ndarray], np.ndarray]:
    """Codes of each column's model names into their sorted union, and that union."""
    coded = [pd.factorize(c.astype(str)) for c in columns]
    names = np.unique(np.concatenate([np.asarray(u, dtype=object) for _, u in coded]))
    return [np.searchsorted(names, np.asarray(u, dtype=object))[c] for c, u in coded], names


def _cluster_codes(table: EvalTable, cluster: str | Sequence[str] | None
                   ) -> tuple[list[np.ndarray], str]:
    """Codes of each cluster factor (several: multiway) and the level's label."""
    if cluster is None:
        if table.kind == "pairwise":
            return [np.asarray(table.pair_codes())], ""
        return [np.arange(table.n_obs, dtype=np.int64)], ""
    factors = [cluster] if isinstance(cluster, str) else list(cluster)
    if not factors or not all(isinstance(f, str) for f in factors):
        raise InvalidOptionError(
            f"cluster={cluster!r}: a leaderboard clusters by one factor, one interaction "
            "or several factors (multiway); pass a role name such as 'item', 'item:judge' "
            "for the interaction, or ['item', 'judge'] for multiway")
    out = []
    for factor in factors:
        roles = table.check_cluster(factor.split(":"))
        for role in roles:
            table.check_pairs_within(role)
        codes = [np.asarray(table.codes(r)) for r in roles]
        out.append(codes[0] if len(codes) == 1 else intersect_codes(*codes))
    return out, "+".join(factors)


def _rows(table: EvalTable, estimand: str) -> _Rows:
    d = table.data
    if table.kind == "scores":
        if estimand not in ("auto", "mean"):
            raise InvalidOptionError(f"estimand={estimand!r} needs a pairwise table; a scores "
                                     "table ranks condition means (estimand='mean')")
        if not table.has_condition:
            raise EvalmixError("a leaderboard of a scores table needs a condition column "
                               "(evalmix.read(..., condition='model'))")
        (cond,), names = _model_codes(d["condition"])
        return _Rows("mean", table.y, cond, None, None, names)
    if estimand == "mean":
        raise InvalidOptionError("estimand='mean' needs a scores table; use 'win_rate' or "
                                 "'bradley_terry' for a pairwise table")
    (a, b), names = _model_codes(d["model_a"], d["model_b"])
    # a baseline is in every row, so it is one of the first row's two models
    in_every = [m for m in sorted({a[0], b[0]}) if np.all((a == m) | (b == m))]
    if estimand == "bradley_terry" or (estimand == "auto" and not in_every):
        return _Rows("bradley_terry", table.y, a, b, None, names)
    if not in_every:
        raise EvalmixError(
            "estimand='win_rate' needs a baseline model that appears in every row (each "
            "model compared with the same baseline); no model does. Use "
            "estimand='bradley_terry' for round-robin or mixed designs")
    base = in_every[0]
    y_a = table.y
    y_b = ((d["verdict"] == "b").to_numpy(dtype=float) if table.ties == "separate"
           else 1.0 - y_a)
    scored = np.where(a == base, b, a)
    return _Rows("win_rate", np.where(a == base, y_b, y_a), scored, None, str(names[base]),
                 names)


# --------------------------------------------------------------------------- boards
def _estimates_cells(rows: _Rows, codes: list[np.ndarray], method: str):  # noqa: ANN202
    group, present = pd.factorize(rows.first, sort=True)
    labels = rows.names[present]
    if len(codes) > 1:
        return _estimates_cells_multiway(rows, group, np.asarray(labels), codes, method)
    cl, g = cluster_codes(codes[0])
    k = len(labels)
    count, total = _cells(rows.y, group, cl, k, g)
    means, vcov, factor = cell_means_vcov(count, total, method=cast(Method, method))
    if method == "CR2":
        def df_of(i, j):  # noqa: ANN001, ANN202
            return pairwise_satterthwaite(count, factor, i, j)
        df_models = pairwise_satterthwaite(count, factor)
    else:
        def df_of(i, j):  # noqa: ANN001, ANN202
            return np.full(len(i), g - 1.0)
        df_models = np.full(k, g - 1.0)
    return np.asarray(labels), means, vcov, df_models, df_of, count.sum(axis=0), g


def _estimates_cells_multiway(rows: _Rows, group: np.ndarray, labels: np.ndarray,
                              codes: list[np.ndarray], method: str):  # noqa: ANN202
    """Cell means with the multiway (Cameron-Gelbach-Miller) covariance: the
    inclusion-exclusion sum of the one-way covariances of :func:`cell_means_vcov` over
    every set of factors (clustered on their intersection), negative eigenvalues set to
    zero, as :func:`~evalmix.inference.sandwich.vcov_multiway` does for the same model
    ``y ~ 0 + model``. CR2 df: the Welch-Satterthwaite combination of the terms' df,
    kept between the smallest and largest single-factor df
    (:func:`~evalmix.inference.sandwich.multiway_df`); CR0/CR1: ``G_min - 1``."""
    if method not in MULTIWAY_METHODS:
        raise InvalidOptionError(f"multiway clustering takes method in {MULTIWAY_METHODS}, got "
                                 f"{method!r}")
    k = labels.size
    dense = [cluster_codes(c)[0] for c in codes]
    terms = []  # (sign, single factor?, G, count, factor, vcov)
    summed = []  # the same terms for the eigenvalue-clipped sum
    for sign, combo, cc, G in _inclusion_exclusion(dense):
        count, total = _cells(rows.y, group, cc, k, G)
        means, V, factor = cell_means_vcov(count, total, method=cast(Method, method))
        terms.append((sign, len(combo) == 1, G, count, factor, V))
        summed.append(MultiwayTerm(sign, tuple(combo), G, V, None))
    V = _psd(summed, [t[2] for t in terms if t[1]], method).vcov
    g = min(t[2] for t in terms if t[1])

    def combined_df(i, j):  # noqa: ANN001, ANN202
        if method != "CR2":
            return np.full(k if i is None else len(i), g - 1.0)
        by, total, denom = [], 0.0, 0.0
        for sign, single, G, count, factor, Vs in terms:
            v = np.diag(Vs) if i is None else pair_se(Vs, i, j) ** 2
            nu = pairwise_satterthwaite(count, factor, i, j) if single else G - 1.0
            if single:
                by.append(nu)
            total = total + sign * v
            denom = denom + v * v / np.maximum(nu, 1e-12)
        with np.errstate(divide="ignore", invalid="ignore"):
            satt = np.where((denom > 0) & (total > 0), total**2 / denom, 0.0)
        lo, hi = np.nanmin(np.vstack(by), axis=0), np.nanmax(np.vstack(by), axis=0)
        return np.minimum(np.maximum(satt, lo), hi)

    n_model = terms[0][3].sum(axis=0)
    return (labels, means, V, combined_df(None, None), combined_df, n_model, g)


def _estimates_bt(rows: _Rows, codes: list[np.ndarray], method: str):  # noqa: ANN202
    """Bradley-Terry abilities and their clustered covariance, fitted on the distinct
    (pair, outcome, cluster) patterns with counts (:mod:`evalmix.inference.bt_fit`):
    no (rows x models) design and no per-cluster (models x models) block is formed."""
    present = rows.models()
    labels = rows.names[present]
    k = labels.size
    if k == rows.names.size:  # every model on this board
        ia, ib = rows.first, np.asarray(rows.second)
    else:
        recode = np.zeros(rows.names.size, dtype=np.int64)
        recode[present] = np.arange(k)
        ia, ib = recode[rows.first], recode[np.asarray(rows.second)]
    if len(codes) > 1 and method not in MULTIWAY_METHODS:
        raise InvalidOptionError(f"multiway clustering takes method in {MULTIWAY_METHODS}, got "
                                 f"{method!r}")
    battles = aggregate(ia, ib, rows.y, [cluster_codes(c)[0] for c in codes], k)
    del ia, ib
    pairs = np.unique(battles.a * k + battles.b)
    adj = coo_matrix((np.ones(pairs.size), (pairs // k, pairs % k)), shape=(k, k))
    n_comp, comp = connected_components(adj, directed=False)
    if n_comp > 1:
        alone = labels[comp != np.bincount(comp).argmax()]
        raise EvalmixError(
            f"the comparisons form {n_comp} disconnected groups, so Bradley-Terry "
            f"abilities are not comparable across them (e.g. {list(alone[:5])} are never "
            "compared, directly or through others, with the largest group); add "
            "comparisons that link them or rank each group separately")
    fit = fit_bt(battles)
    g = min(int(c.max()) + 1 for c in battles.clusters)
    V = (vcov_bt(battles, fit, battles.clusters[0], type=cast(Method, method))
         if len(codes) == 1 else vcov_bt_multiway(battles, fit, type=cast(Method, method)))
    A = np.eye(k) - 1.0 / k  # centre the abilities (contrasts are unchanged)
    n_model = np.rint(np.bincount(battles.a, battles.count, minlength=k)
                      + np.bincount(battles.b, battles.count, minlength=k)).astype(np.int64)

    def df_of(i, j):  # noqa: ANN001, ANN202
        return np.full(len(i), g - 1.0)
    return labels, A @ fit.theta, A @ V @ A.T, np.full(k, g - 1.0), df_of, n_model, g


def _family(est, V, i, j, df, g, adjust, level, draws, rng):  # noqa: ANN001, ANN202
    """Differences est[i] - est[j]: tests, Holm, simultaneous intervals."""
    diff = est[i] - est[j]
    se = pair_se(V, i, j)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
    p = 2 * stats.t.sf(np.abs(t), df)
    q = stats.t.ppf(0.5 + level / 2, df)
    if adjust == "max-t":
        mt = maxt_critical(V, i, j, level=level, df=g - 1.0, draws=draws, rng=rng)
        crit = np.full(len(i), mt.crit)
        p_adj = maxt_adjusted_p(mt, t)
    elif adjust == "bonferroni":
        crit = stats.t.ppf(1 - (1 - level) / (2 * len(i)), df)
        p_adj = np.minimum(1.0, p * len(i))
    else:
        crit, p_adj = q, p
    lo_s, hi_s = diff - crit * se, diff + crit * se
    return {"estimate": diff, "se": se, "df": df, "t": t, "p_value": p, "p_holm": holm(p),
            "p_adjusted": p_adj, "lo": diff - q * se, "hi": diff + q * se,
            "sim_lo": lo_s, "sim_hi": hi_s, "significant": (lo_s > 0) | (hi_s < 0),
            "crit": crit}


def _board(rows: _Rows, codes: list[np.ndarray], stratum: str, pairs, opts: dict, rng
           ) -> tuple[pd.DataFrame, pd.DataFrame, str]:  # noqa: ANN001
    estimates: Callable = _estimates_bt if rows.estimand == "bradley_terry" else _estimates_cells
    labels, est, V, df_m, df_of, n_model, g = estimates(rows, codes, opts["method"])
    k = labels.size
    level = opts["level"]
    if g < FEW_CLUSTERS:
        warnings.warn(f"{stratum or 'leaderboard'}: only {g} clusters "
                      f"({opts['cluster'] or 'rows'}); cluster-robust intervals and rank "
                      "ranges may under-cover. Cluster by a factor with more levels if the "
                      "design allows", FewClustersWarning, stacklevel=3)
    common = {"estimand": rows.estimand, "method": opts["method"], "cluster": opts["cluster"],
              "level": level, "adjust": opts["adjust"], "n_clusters": g,
              "reps": opts["draws"] if opts["adjust"] == "max-t" else 0,
              "seed": opts["seed"]}
    i, j = all_pairs(k)
    fam = _family(est, V, i, j, df_of(i, j), g, opts["adjust"], level, opts["draws"], rng)
    better = np.zeros((k, k), dtype=bool)
    better[i, j] = fam["sim_lo"] > 0
    better[j, i] = fam["sim_hi"] < 0
    # ranks and tie groups: step-down from the single-step max-t rejections (Mogstad et
    # al. 2024; never wider); the letters stay with the pairs' single-step intervals
    sets = dict(level=level, df=g - 1.0, draws=opts["draws"], rng=rng)
    ranked = (cast(np.ndarray, rank_sets(est, V, rejected=better, **sets).better)
              if opts["adjust"] == "max-t" else better)
    rank, rank_lo, rank_hi = rank_intervals(est, ranked)
    marginal = rank_sets(est, V, simultaneous=False, **sets)
    order = np.lexsort((labels, -est))
    cap = opts["max_letters"] or min(k, MAX_LETTERS)
    tier = (compact_letters(order, better | better.T, max_letters=cap)
            if opts["letters"] else None)
    note = ""
    if tier is None:
        tier = [""] * k
        if opts["letters"]:
            note = (f"{stratum or 'leaderboard'}: no tier letters (the {k} models need more "
                    f"than {cap} letters); the rank ranges give the comparisons")
    se_m = np.sqrt(np.maximum(np.diag(V), 0.0))
    q = stats.t.ppf(0.5 + level / 2, df_m)
    lo_m, hi_m = est - q * se_m, est + q * se_m
    scale = "log-odds" if rows.estimand == "bradley_terry" else "identity"
    if opts.get("bounded"):
        df_b = np.broadcast_to(np.asarray(df_m, dtype=float), est.shape)
        bounds = np.array([bounded_interval(float(e), float(s), float(d), level, 0.5)[:2]
                           for e, s, d in zip(est, se_m, df_b, strict=True)])
        lo_m, hi_m = bounds[:, 0], bounds[:, 1]
        scale = "logit"
    models = pd.DataFrame({
        "contrast": [f"{stratum}: {m}" if stratum else m for m in labels],
        "scale": scale, "note": "",
        "stratum": stratum, "model": labels, "estimate": est, "se": se_m,
        "lo": lo_m, "hi": hi_m, "df": df_m, "rank": rank,
        "rank_lo": rank_lo, "rank_hi": rank_hi, "tier": tier, "n_obs": n_model,
        "rank_lo_marginal": marginal.lo, "rank_hi_marginal": marginal.hi,
        "tie_group": tie_groups(est, ranked),
        "crit": fam["crit"][0] if len(i) else np.nan, **common,
    }).iloc[order]
    if pairs is None:
        swap = est[i] < est[j]
        pi, pj = np.where(swap, j, i), np.where(swap, i, j)
        fam = {key: (np.where(swap, -v, v) if key in ("estimate", "t") else v)
               for key, v in fam.items()}
        fam["lo"], fam["hi"] = np.where(swap, -fam["hi"], fam["lo"]), np.where(
            swap, -fam["lo"], fam["hi"])
        fam["sim_lo"], fam["sim_hi"] = (fam["estimate"] - fam["crit"] * fam["se"],
                                        fam["estimate"] + fam["crit"] * fam["se"])
        keep = np.lexsort((rank[pj], rank[pi]))
    else:
        index = {m: n for n, m in enumerate(labels)}
        chosen = [(a, b) for a, b in pairs if a in index and b in index]
        pi = np.array([index[a] for a, _ in chosen], dtype=np.int64)
        pj = np.array([index[b] for _, b in chosen], dtype=np.int64)
        fam = (_family(est, V, pi, pj, df_of(pi, pj), g, opts["adjust"], level,
                       opts["draws"], rng) if len(chosen) else {})
        keep = np.arange(len(chosen))
    # the pairs in their final order, text columns joined in Arrow (2 million pairs at
    # K = 2,000: no per-pair Python string, no reordering of the built frame)
    pi, pj = pi[keep], pj[keep]
    names = pd.array(np.asarray(labels, dtype=object), dtype="str")
    first, second = names.take(pi), names.take(pj)
    contrast = pd.Series(first) + " - " + pd.Series(second)
    out = pd.DataFrame({
        "stratum": stratum,
        "contrast": (stratum + ": " + contrast) if stratum else contrast,
        "scale": "log-odds" if rows.estimand == "bradley_terry" else "identity", "note": "",
        "model_a": first, "model_b": second,
        **{key: fam[key][keep] for key in fam}, **common}, columns=list(PAIR_COLUMNS))
    return models[list(MODEL_COLUMNS)].reset_index(drop=True), out, note


# --------------------------------------------------------------------------- public
def leaderboard(
    table: EvalTable,
    *,
    cluster: str | Sequence[str] | None = None,
    method: Method = "CR2",
    level: float = 0.95,
    adjust: Adjust = "max-t",
    estimand: LeaderboardEstimand = "auto",
    pairs: Sequence[tuple[str, str]] | None = None,
    by: str | None = None,
    reps: int = MAXT_REPS,
    seed: SeedLike = None,
    letters: bool = True,
    max_letters: int | None = None,
    draws: int | None = None,
) -> LeaderboardResult:
    """Rank K models with pairwise differences, simultaneous intervals and rank ranges.

    Parameters
    ----------
    table : EvalTable
        A scores or pairwise eval table (from :func:`evalmix.read`).
    cluster : str, sequence of str, or None
        One cluster factor (``"item"``), the interaction of factors (``"item:judge"``),
        or several factors for multiway (Cameron-Gelbach-Miller) clustering
        (``["item", "judge"]``; CR0, CR1 or CR2, each term's small-sample correction
        applied to it as in :func:`~evalmix.inference.sandwich.vcov_multiway`; max-t and
        rank ranges then use ``G_min - 1`` df).
        ``None``: rows are independent (on pairwise tables with an order column, the AB
        and BA records of one comparison form a cluster).
    method : {"CR0", "CR1", "CR2", "CR3"}
        Cluster-robust covariance. Per-comparison intervals use t with Satterthwaite df
        (CR2 on means and win rates) or ``G - 1`` df.
    level : float
        Confidence level of the intervals, rank ranges and tiers.
    adjust : {"max-t", "bonferroni", "none"}
        Simultaneous intervals of all pairs: single-step max-t from the joint
        multivariate t (``G - 1`` df) of the studentized differences (Hothorn, Bretz &
        Westfall 2008), Bonferroni, or none (per-comparison: ranks and tiers then lose
        their simultaneous guarantee). Holm p-values are always reported.
    estimand : {"auto", "mean", "win_rate", "bradley_terry"}
        ``auto``: ``mean`` for scores tables, ``win_rate`` when one baseline model is in
        every row of a pairwise table, ``bradley_terry`` otherwise.
    pairs : sequence of (model_a, model_b), optional
        Report only these differences (``model_a - model_b``), adjusted as one family.
        Ranks and tiers always use all pairs.
    by : str, optional
        A cluster role (e.g. ``"judge"``) to stratify by: the pooled board plus one board
        per level, each with only the models that level has rows for; the empty
        ``by`` x model cells are listed in ``empty_cells``.
    reps : int
        Monte Carlo draws for the max-t critical value (recorded in the ``reps`` column,
        as every Monte Carlo count of evalmix is).
    seed : int or numpy.random.Generator
        Seeds the Monte Carlo draws of the max-t critical value.
    letters : bool
        Tier letters (:func:`~evalmix.inference.letters.compact_letters`); False leaves
        the ``tier`` column empty.
    max_letters : int, optional
        A board that needs more letters than this gets none either, and ``notes`` says
        so: the rank ranges still give its comparisons. Default: the number of models
        on the board (more letters than models is no longer a compact display; it
        happens when significance does not follow the estimates, e.g. 1,049 letters for
        199 models scored 0/1 on 20 items), at most
        :data:`~evalmix.inference.letters.MAX_LETTERS` (every one- and two-character
        name).
    draws : int, optional
        Deprecated: the old name of ``reps``; it still works, with a
        :class:`FutureWarning`.

    Returns
    -------
    LeaderboardResult
        ``tidy()``: per model (estimate, se, lo, hi, rank, rank_lo, rank_hi, tier,
        rank_lo_marginal, rank_hi_marginal, tie_group); ``tidy_pairs()``: per pair
        (estimate, se, p_value, p_holm, p_adjusted, lo, hi, sim_lo, sim_hi). Rank ranges:
        ``rank_lo = 1 + #models significantly better``, ``rank_hi = K - #models
        significantly worse`` (Klein, Wright & Wieczorek 2020); with max-t the
        comparisons are the step-down of the pairs' single-step max-t (Mogstad, Romano,
        Shaikh & Wilhelm 2024; :func:`~evalmix.inference.ranking.rank_sets`), never
        wider; with max-t or Bonferroni they hold jointly for all models with
        probability at least ``level``. ``rank_*_marginal``: each model's own rank set
        (covers that model's rank with probability ``level``). ``tie_group``: blocks of
        models in estimate order; every model of a group is significantly better than
        every model of a later group (:func:`~evalmix.inference.ranking.tie_groups`).
        ``top_set(k)``: the confidence set for the ``k`` best.

    Examples
    --------
    >>> from evalmix.sim.boards import baseline_leaderboard
    >>> sim = baseline_leaderboard(n_models=8, n_items=100, seed=1)
    >>> board = leaderboard(sim.table(), cluster="item", seed=1)
    >>> board.tidy()[["model", "rank", "rank_lo", "rank_hi"]].shape
    (8, 4)

    References
    ----------
    Hothorn, Bretz & Westfall (2008), doi:10.1002/bimj.200810425; Klein, Wright &
    Wieczorek (2020), doi:10.1111/rssc.12402; Mogstad, Romano, Shaikh & Wilhelm (2024),
    doi:10.1093/restud/rdad006; Piepho (2004), doi:10.1198/1061860043515.
    """
    table = check_table(table, "leaderboard")
    check_option("method", method, METHODS)
    check_option("adjust", adjust, ADJUSTS)
    check_option("estimand", estimand, ESTIMANDS)
    level = check_level(level)
    if draws is not None:   # the old name: a changed reps beside it is refused
        given = renamed_option("leaderboard", "draws", "reps", draws,
                               None if reps == MAXT_REPS else reps)
        reps = draws if given is None else given
    draws = check_count("reps", reps, minimum=100)   # the max-t quantile needs 100
    if max_letters is not None:
        max_letters = check_max_letters(max_letters)
    codes, label = _cluster_codes(table, cluster)
    rows = _rows(table, estimand)
    if pairs is not None:
        known = set(rows.names[rows.models()])
        pairs = [(str(a), str(b)) for a, b in pairs]
        unknown = sorted({m for pair in pairs for m in pair} - known)
        if unknown:
            raise InvalidOptionError(
                f"pairs name models that are not on the board: {unknown[:5]}; the models "
                f"are e.g. {sorted(known)[:5]} (a win-rate board does not rank its "
                f"baseline {rows.baseline!r})")
    rng, seed = seeded_rng(seed)
    # per-model intervals of proportions on the logit scale, as evalmix.interval's
    # scale="auto" makes them: one interval per quantity wherever it is shown
    bounded = rows.estimand in ("win_rate", "mean") and table.outcome_type in (
        "binary", "proportion")
    opts = {"method": method, "cluster": label, "level": level, "adjust": adjust,
            "draws": int(draws), "seed": seed, "letters": bool(letters),
            "max_letters": max_letters, "bounded": bounded}
    strata: list[tuple[str, np.ndarray | None]] = [("", None)]  # None: every row
    empty = pd.DataFrame({"by": pd.Series(dtype=str), "model": pd.Series(dtype=str)})
    if by is not None:
        if cluster is not None and by in label.replace("+", ":").split(":"):
            raise InvalidOptionError(f"by={by!r} is also the cluster factor; within one {by} "
                                     "there is one cluster. Cluster by another factor (e.g. item)")
        table.check_cluster(by)
        level_of = table.data[by].astype(str).to_numpy()
        strata += [(f"{by}={lev}", level_of == lev) for lev in np.unique(level_of)]
        present = pd.crosstab(level_of, rows.first)
        if rows.second is not None:
            present = present.add(pd.crosstab(level_of, rows.second), fill_value=0)
        present = present.reindex(columns=rows.models(), fill_value=0)
        present.columns = rows.names[present.columns.to_numpy()]
        cells = present.stack()
        cells = cells[cells == 0]
        empty = pd.DataFrame({"by": cells.index.get_level_values(0).astype(str),
                              "model": cells.index.get_level_values(1).astype(str)})
    boards, pair_frames, skipped, notes = [], [], [], []
    for name, mask in strata:
        sub = rows if mask is None else rows.subset(mask)
        sub_codes = codes if mask is None else [c[mask] for c in codes]
        n_models = sub.models().size
        if n_models < 2 or any(c.min() == c.max() for c in sub_codes):
            if not name:
                raise EvalmixError(f"a leaderboard needs at least 2 models and 2 clusters; "
                                   f"found {n_models} models")
            skipped.append(name)
            continue
        # one BLAS thread: threaded gemm on tall (G x K) matrices stalls on a busy
        # machine (sandwich.py measured 30x; here 6.5 s against 0.01 s at G = 20,000)
        with one_blas_thread():
            m, p, note = _board(sub, sub_codes, name, pairs, opts, rng)
        boards.append(m)
        pair_frames.append(p)
        if note:
            notes.append(note)
    return LeaderboardResult(
        models=pd.concat(boards, ignore_index=True),
        pairs=pd.concat(pair_frames, ignore_index=True),
        estimand=rows.estimand, method=method, cluster=label, level=level, adjust=adjust,
        baseline=rows.baseline, by=by, empty_cells=empty, skipped_strata=tuple(skipped),
        seed=seed, notes=tuple(notes))
