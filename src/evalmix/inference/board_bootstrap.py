"""The leaderboard over cluster-bootstrap replicates, here, on joblib workers or on a Dask
cluster (issue 32: Arena scale and beyond).

Chatbot Arena reports its ratings with bootstrap intervals: the battles are resampled,
the Bradley-Terry model refitted on each resample, and each model's interval and rank
range read off the replicates. :func:`leaderboard_bootstrap` does that for the
estimates of :func:`~evalmix.inference.leaderboard.leaderboard` (Bradley-Terry
abilities, means or win rates), resampling whole clusters (prompts, items; the pairs
cluster bootstrap of :mod:`evalmix.inference.bootstrap`) rather than rows, so battles on
one prompt stay together.

Each replicate weights the table's clusters by how often they were drawn. Nothing is
copied per replicate: the Bradley-Terry fit runs on the distinct (pair, outcome)
patterns with the replicate's weights (:func:`evalmix.inference.bt_fit.fit_bt`; a
million battles of 200 models collapse to at most 3 x 19,900 weighted patterns), the
means on the (cluster x model) sums. Replicate ``r`` draws its clusters from
``default_rng(child_seed(seed, r))``, so its numbers do not depend on which process or
Dask worker computes it: local, joblib and Dask runs with one seed agree exactly.

References
----------
Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application.
Cambridge University Press. doi:10.1017/CBO9780511802843
Field, C. A. & Welsh, A. H. (2007). Bootstrapping clustered data. JRSS B 69, 369-390.
doi:10.1111/j.1467-9868.2007.00593.x
Chiang, W.-L. et al. (2024). Chatbot Arena: An Open Platform for Evaluating LLMs by
Human Preference. ICML. arXiv:2403.04132
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np
import pandas as pd
from scipy import stats

from evalmix._blas import one_blas_thread
from evalmix._progress import Progress
from evalmix._tasks import run_tasks
from evalmix.data.table import EvalTable, check_table, dense_codes
from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
)
from evalmix.inference.bootstrap import MIN_REPS, cluster_weights, percentile_interval
from evalmix.inference.bt_fit import Battles, fit_bt
from evalmix.inference.leaderboard import _cluster_codes, _rows
from evalmix.seeding import SeedLike, child_seed, resolve_seed
from evalmix.tidy import RESULT_COLUMNS
from evalmix.vocabulary import LeaderboardEstimand

__all__ = ["leaderboard_bootstrap", "LeaderboardBootstrap", "BOOTSTRAP_BOARD_COLUMNS"]

ESTIMANDS: tuple[str, ...] = get_args(LeaderboardEstimand)
#: The board's columns: the result contract's, then the model, its rank on the full
#: table, the rank range of the replicates and the share of replicates it ranks first.
BOOTSTRAP_BOARD_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "model", "rank", "rank_lo", "rank_hi", "p_best", "n_obs")
#: Replicates per task (local progress advances by a task; a Dask task is this many fits)
TASK_REPS = 10


@dataclass(frozen=True, eq=False)
class _Problem:
    """What a replicate needs, as arrays (pickled once to each worker).

    Bradley-Terry: per distinct (pair, outcome, cluster) pattern, its model pair, score,
    count, cluster and (pair, outcome) code. Means and win rates: per non-empty
    (cluster x model) cell, its model, cluster, row count and sum of the outcome.
    """

    estimand: str
    n_models: int
    n_clusters: int
    cluster: np.ndarray
    count: np.ndarray
    model: np.ndarray  # model a (patterns) or the cell's model
    total: np.ndarray | None = None  # cells: sum of y
    pattern: np.ndarray | None = None  # patterns: (pair, outcome) code
    a: np.ndarray | None = None  # per (pair, outcome) code: model a, model b, score
    b: np.ndarray | None = None
    y: np.ndarray | None = None


def _problem(table: EvalTable, cluster: str | Sequence[str] | None, estimand: str
             ) -> tuple[_Problem, np.ndarray, str, str]:
    """The table as arrays; the model names, the estimand and the cluster label."""
    codes, label = _cluster_codes(table, cluster)
    if len(codes) > 1:
        raise InvalidOptionError(
            f"cluster={cluster!r}: the bootstrap leaderboard resamples one cluster factor "
            "(or one interaction, 'item:judge'); multiway clustering is the sandwich's "
            "(leaderboard(cluster=[...]))")
    rows = _rows(table, estimand)
    g_codes = dense_codes(codes[0])
    n_clusters = int(g_codes.max()) + 1
    present = rows.models()  # a win-rate board leaves its baseline out
    names, k = rows.names[present], present.size
    recode = np.zeros(rows.names.size, dtype=np.int64)
    recode[present] = np.arange(k)
    first = recode[rows.first]
    if rows.estimand == "bradley_terry":
        b_codes = recode[np.asarray(rows.second)]
        lo, hi = np.minimum(first, b_codes), np.maximum(first, b_codes)
        y = np.where(first > b_codes, 1.0 - rows.y, rows.y)
        outcome = dense_codes(y)
        levels = np.unique(y)
        pattern = dense_codes((lo * k + hi) * levels.size + outcome)
        key = dense_codes(pattern.astype(np.int64) * n_clusters + g_codes)
        at = _first_rows(key)
        one = _first_rows(pattern)
        problem = _Problem("bradley_terry", k, n_clusters, g_codes[at],
                           np.bincount(key).astype(float), lo[at], pattern=pattern[at],
                           a=lo[one], b=hi[one], y=y[one])
    else:
        cell = g_codes * k + first
        key, cells = pd.factorize(cell)
        count = np.bincount(key).astype(float)
        total = np.bincount(key, weights=rows.y)
        problem = _Problem(rows.estimand, k, n_clusters, cells // k, count, cells % k,
                           total=total)
    return problem, names, rows.estimand, label


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The first row of each code ``0..max``."""
    at = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    at[codes[::-1]] = np.arange(codes.size - 1, -1, -1)
    return at


def _estimate(problem: _Problem, weight: np.ndarray) -> np.ndarray:
    """The board's estimates with cluster ``c`` counted ``weight[c]`` times: centred
    Bradley-Terry abilities, or each model's mean (win rate); NaN where undefined."""
    k = problem.n_models
    w = weight[problem.cluster] * problem.count
    if problem.estimand != "bradley_terry":
        n = np.bincount(problem.model, w, minlength=k)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.bincount(problem.model, weight[problem.cluster] * problem.total,
                               minlength=k) / n
    assert problem.pattern is not None and problem.a is not None
    assert problem.b is not None and problem.y is not None
    per = np.bincount(problem.pattern, w, minlength=problem.a.size)
    used = per > 0
    battles = Battles(problem.a[used], problem.b[used], problem.y[used], per[used], (),
                      k, int(round(per.sum())))
    present = np.bincount(battles.a, minlength=k) + np.bincount(battles.b, minlength=k)
    if (present == 0).any():
        return np.full(k, np.nan)  # a model without battles in this resample
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a separated resample (infinite ability): NaN
        try:
            theta = fit_bt(battles).theta
        except (EvalmixError, Warning):
            return np.full(k, np.nan)
    return theta - theta.mean()


def _replicates(problem: _Problem, seed: int, start: int, stop: int
                ) -> tuple[int, np.ndarray]:
    """Replicates ``start .. stop - 1``: ``(start, estimates)`` of shape (stop - start, k)."""
    out = np.empty((stop - start, problem.n_models))
    with one_blas_thread():
        for r in range(start, stop):
            rng = np.random.default_rng(child_seed(seed, r))
            out[r - start] = _estimate(problem, cluster_weights(problem.n_clusters, 1, rng)[0])
    return start, out


@dataclass(frozen=True, eq=False)
class LeaderboardBootstrap:
    """The leaderboard's estimates over cluster-bootstrap replicates.

    Attributes
    ----------
    models : pandas.DataFrame
        One row per model, best first, columns :data:`BOOTSTRAP_BOARD_COLUMNS`:
        ``estimate`` on the full table, ``se`` the replicates' standard deviation,
        ``lo``/``hi`` the percentile interval (R ``boot``'s ``perc``), ``rank`` on the
        full table (1 + the number of models estimated higher), ``rank_lo``/``rank_hi``
        the central ``level`` range of the replicates' ranks, ``p_best`` the share of
        replicates where the model ranks first.
    draws : numpy.ndarray
        (reps, models) replicate estimates, columns in ``names`` order; a row of NaN is
        a replicate that left a model without comparisons or with only wins (losses).
    names : numpy.ndarray
        The models, in the columns' order (sorted).
    estimand, cluster : str
    level : float
    reps : int
    n_failed : int
        Replicates without a finite estimate for every model (left out).
    seed : int
    backend : str
        Where the replicates ran: ``"sequential"``, ``"joblib"`` or ``"dask"``.
    """

    models: pd.DataFrame
    draws: np.ndarray
    names: np.ndarray
    estimand: str
    cluster: str
    level: float
    reps: int
    n_failed: int
    seed: int
    backend: str

    def tidy(self) -> pd.DataFrame:
        """One row per model (columns :data:`BOOTSTRAP_BOARD_COLUMNS`), best first."""
        return self.models.copy()

    def __str__(self) -> str:
        what = {"mean": "mean score", "bradley_terry": "Bradley-Terry ability (logit)",
                "win_rate": "win rate"}[self.estimand]
        lines = [f"Bootstrap leaderboard: {what}; {len(self.names)} models, {self.reps} "
                 f"replicates resampling {self.cluster or 'rows'} "
                 f"({int(self.models['n_clusters'].iloc[0])} clusters), {self.level:.0%} "
                 "percentile intervals and rank ranges"
                 + (f"; {self.n_failed} replicates left out" if self.n_failed else "")]
        for _, r in self.models.iterrows():
            lines.append(f"{int(r['rank']):>4}  {str(r['model'])[:28]:<28} "
                         f"{r['estimate']:>9.3f}  [{r['lo']:.3f}, {r['hi']:.3f}]  "
                         f"ranks {int(r['rank_lo'])}-{int(r['rank_hi'])}  "
                         f"P(best) {r['p_best']:.2f}")
        return "\n".join(lines)


def leaderboard_bootstrap(
    table: EvalTable,
    *,
    cluster: str | Sequence[str] | None = None,
    estimand: LeaderboardEstimand = "auto",
    reps: int = 1000,
    level: float = 0.95,
    seed: SeedLike = None,
    jobs: int = 1,
    client: Any = None,
    progress: bool = True,
) -> LeaderboardBootstrap:
    """The leaderboard's estimates and ranks over cluster-bootstrap replicates.

    Parameters
    ----------
    table : EvalTable
        A scores or pairwise eval table (from :func:`evalmix.read`).
    cluster : str or None
        The cluster factor resampled (``"prompt"``), or an interaction
        (``"item:judge"``). ``None``: rows (or the AB/BA pairs of a matched table).
    estimand : {"auto", "mean", "win_rate", "bradley_terry"}
        As :func:`~evalmix.inference.leaderboard.leaderboard` chooses it.
    reps : int
        Bootstrap replicates.
    level : float
        Level of the percentile intervals and rank ranges.
    seed : int or numpy.random.Generator
        Replicate ``r`` draws with ``child_seed(seed, r)``: the same numbers wherever
        it runs.
    jobs : int
        joblib worker processes (``-1``: all cores); 1 runs in this process.
    client : dask.distributed.Client or str, optional
        A Dask client, or a scheduler address (``"tcp://host:8786"``): blocks of
        :data:`TASK_REPS` replicates run as Dask tasks (the table's arrays are sent to
        each worker once). Needs the ``dask`` extra.
    progress : bool
        Show the replicates done, elapsed time and ETA.

    Returns
    -------
    LeaderboardBootstrap
        ``tidy()``: per model the full-table estimate, the bootstrap SE, percentile
        interval, rank range and ``p_best``; ``draws``: the replicates.

    Examples
    --------
    >>> from evalmix.sim.boards import round_robin
    >>> sim = round_robin(n_models=4, n_items=60, seed=1)
    >>> boot = leaderboard_bootstrap(sim.table(), cluster="item", reps=50, seed=1,
    ...                              progress=False)
    >>> boot.tidy()[["model", "rank", "rank_lo", "rank_hi"]].shape
    (4, 4)

    References
    ----------
    Davison & Hinkley (1997), doi:10.1017/CBO9780511802843; Field & Welsh (2007),
    doi:10.1111/j.1467-9868.2007.00593.x; Chiang et al. (2024), arXiv:2403.04132.
    """
    table = check_table(table, "leaderboard_bootstrap")
    check_option("estimand", estimand, ESTIMANDS)
    level = check_level(level)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    if isinstance(jobs, bool) or not isinstance(jobs, int | np.integer) or jobs == 0:
        raise InvalidOptionError(f"jobs={jobs!r}: give the number of worker processes (1 = "
                                 "in this process, -1 = all cores)")
    seed = resolve_seed(seed)
    problem, names, kind, label = _problem(table, cluster, estimand)
    full = _estimate(problem, np.ones(problem.n_clusters))
    if not np.isfinite(full).all():
        raise EvalmixError("the leaderboard's estimates are not finite on the full table "
                           "(see leaderboard() for why); nothing to bootstrap")
    draws = np.empty((reps, names.size))
    blocks = [(seed, a, min(reps, a + TASK_REPS)) for a in range(0, reps, TASK_REPS)]
    with Progress(progress) as bar:
        task = bar.task("bootstrap leaderboard: replicates", reps)

        def collect(result: tuple[int, np.ndarray]) -> None:
            start, values = result
            draws[start:start + len(values)] = values
            bar.advance(task, len(values))

        backend = run_tasks(_replicates, blocks, collect, jobs=int(jobs), client=client,
                            shared=problem)
    return _summary(full, draws, names, kind, label, level, seed, backend,
                    problem.n_clusters, _n_obs(problem))


def _n_obs(problem: _Problem) -> np.ndarray:
    """Rows per model (both sides of a battle)."""
    k = problem.n_models
    if problem.estimand != "bradley_terry":
        return np.rint(np.bincount(problem.model, problem.count, minlength=k)).astype(int)
    assert problem.pattern is not None and problem.b is not None
    return np.rint(np.bincount(problem.model, problem.count, minlength=k)
                   + np.bincount(problem.b[problem.pattern], problem.count, minlength=k)
                   ).astype(int)


def _ranks(values: np.ndarray) -> np.ndarray:
    """1 + the number of models with a larger value (along the last axis)."""
    return stats.rankdata(-values, method="min", axis=-1).astype(np.int64)


def _summary(full: np.ndarray, draws: np.ndarray, names: np.ndarray, kind: str,
             label: str, level: float, seed: int, backend: str, n_clusters: int,
             n_obs: np.ndarray) -> LeaderboardBootstrap:
    good = np.isfinite(draws).all(axis=1)
    n_failed = int((~good).sum())
    kept = draws[good]
    if kept.shape[0] < 2:
        raise EvalmixError(
            f"only {kept.shape[0]} of {len(draws)} bootstrap replicates gave every model a "
            "finite estimate (the others left a model without comparisons, or with only "
            "wins or losses); resample a coarser cluster or more data")
    lo, hi = percentile_interval(kept.T, level).T
    ranks = _ranks(kept)
    tail = (1 - level) / 2
    rank_lo = np.quantile(ranks, tail, axis=0, method="lower")
    rank_hi = np.quantile(ranks, 1 - tail, axis=0, method="higher")
    note = (f"{n_failed} of {len(draws)} replicates left out (a model without comparisons "
            "or with only wins or losses)" if n_failed else "")
    models = pd.DataFrame({
        "estimand": kind, "contrast": names, "method": "bootstrap", "cluster": label,
        "scale": "log-odds" if kind == "bradley_terry" else "identity",
        "estimate": full, "se": kept.std(axis=0, ddof=1), "lo": lo, "hi": hi,
        "level": level, "df": np.nan, "n_clusters": n_clusters, "reps": len(draws),
        "seed": seed, "note": note, "model": names, "rank": _ranks(full),
        "rank_lo": rank_lo.astype(int), "rank_hi": rank_hi.astype(int),
        "p_best": (ranks == 1).mean(axis=0), "n_obs": n_obs,
    }, columns=list(BOOTSTRAP_BOARD_COLUMNS))
    order = np.lexsort((names, -full))
    return LeaderboardBootstrap(models.iloc[order].reset_index(drop=True), draws, names,
                                kind, label, level, len(draws), n_failed, seed, backend)
