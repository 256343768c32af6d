"""``evalmix.bootstrap``: the pairs cluster bootstrap of any statistic of a table.

A red-flag rate, a rubric delta, a tie-adjusted win rate, a judge-agreement summary or a
weighted composite has no closed-form variance; the cluster bootstrap wraps around any
of them. :func:`bootstrap` resamples the table's clusters (a cluster role, an interaction
cell ``"persona:scenario"``, or by default the matched AB/BA pair or the row), holds
strata fixed (each stratum's clusters are drawn among themselves), and with two crossed
sampled factors combines three one-way bootstraps into the multiway variance (Cameron,
Gelbach & Miller 2011) or draws both factors independently (the pigeonhole bootstrap of
Owen 2007: a row is repeated as often as its two levels were drawn; conservative). The statistic sees each resample as
a DataFrame; the column ``boot_copy`` numbers the drawn copies of the clusters, so a
statistic that groups by an item nested in the cluster can group by ``boot_copy`` too
and two draws of one cluster stay two units.

The random draws are those of the built-in bootstrap
(:func:`evalmix.inference.bootstrap.index_chunks`), so a custom statistic equal to a
built-in estimand reproduces its bootstrap distribution with the same seed, and the
intervals are the same functions (R ``boot``'s percentile, BCa, studentized).

A statistic given as :class:`~evalmix.inference.sums.Sums` (or an expression such as
``mean(red_flag, condition == "B") / mean(red_flag, condition == "A")``) is a function of
column totals: every replicate is then a product of resampling counts and per-cluster
sums, with no loop over replicates, and the studentized interval uses the delta-method
standard error from the resampled cluster sums.

References
----------
Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application.
Cambridge University Press. doi:10.1017/CBO9780511802843
Owen, A. B. (2007). The pigeonhole bootstrap. Annals of Applied Statistics 1, 386-411.
doi:10.1214/07-AOAS122
Cameron, A. C., Gelbach, J. B. & Miller, D. L. (2011). Robust inference with multiway
clustering. JBES 29, 238-249. doi:10.1198/jbes.2010.07136
Field, C. A. & Welsh, A. H. (2007). Bootstrapping clustered data. JRSS B 69, 369-390.
doi:10.1111/j.1467-9868.2007.00593.x

How a statistic is evaluated on the resamples is in :mod:`evalmix.inference.custom_engines`,
the result in :mod:`evalmix.inference.custom_result` (re-exported here); the entry point and
the multiway combination here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, get_args

import numpy as np
import pandas as pd
from scipy import stats

from evalmix._progress import Progress
from evalmix.data.table import EvalTable, intersect_codes
from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
)
from evalmix.inference.boot_intervals import (
    bca_interval,
    expanded_interval,
    percentile_interval,
    studentized_interval,
)
from evalmix.inference.bootstrap import CI_TYPES, MIN_REPS
from evalmix.inference.custom_engines import _draw, _engine
from evalmix.inference.custom_result import StatisticBootstrap
from evalmix.inference.resampling import (
    COPY_COLUMN,
    Design,
    check_few_clusters,
    one_factor,
    resampling_design,
    statistic_name,
)
from evalmix.inference.sums import Sums, expression
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.vocabulary import CIType, Crossed

__all__ = ["bootstrap", "StatisticBootstrap", "COPY_COLUMN", "Statistic"]

Statistic = Callable[[pd.DataFrame], Any] | Sums | str
CROSSED: tuple[str, ...] = get_args(Crossed)


# --------------------------------------------------------------------------- entry point
def bootstrap(
    table: EvalTable | pd.DataFrame,
    statistic: Statistic,
    *,
    cluster: str | Sequence[str] | None = None,
    strata: str | Sequence[str] | None = None,
    reps: int = 2000,
    level: float = 0.95,
    ci: CIType = "percentile",
    seed: SeedLike = None,
    progress: bool = True,
    name: str | None = None,
    columns: pd.DataFrame | None = None,
    crossed: Crossed = "multiway",
) -> StatisticBootstrap:
    """Pairs cluster bootstrap of any statistic of the table.

    Parameters
    ----------
    table : EvalTable or pandas.DataFrame
        An eval table (:func:`evalmix.read`; the statistic sees ``table.data``, the
        canonical columns) or any DataFrame (cluster and strata then name columns).
    statistic : callable, Sums or str
        ``statistic(frame)`` returning a number, a dict or a pandas Series (a named
        vector), where ``frame`` is a resample of the rows with a ``boot_copy`` column;
        or :class:`~evalmix.inference.sums.Sums`, or an expression of column rates
        (:func:`~evalmix.inference.sums.expression`): the vectorised fast path.
    cluster : str, or a list of two, optional
        What is resampled: a cluster role (a column of a DataFrame), an interaction cell
        ``"a:b"``, or crossed factors ``["scenario", "judge"]`` (see ``crossed``).
        Default: the matched AB/BA pair on a pairwise table with order (its two records
        stay together), else the row. A factor that splits matched AB/BA pairs is
        refused.
    strata : str or list, optional
        Held fixed: the clusters of each stratum are drawn among themselves. Default: the
        table's declared strata (``table.strata``; none for a DataFrame); ``[]`` for none.
    reps : int
        Replicates (>= 2).
    level : float
        Confidence level.
    ci : {"percentile", "expanded", "bca", "studentized"}
        As in :func:`evalmix.inference.bootstrap.cluster_bootstrap` (R ``boot``'s
        conventions). BCa takes its acceleration from the leave-one-cluster-out
        jackknife; studentized needs a :class:`Sums` statistic (delta-method SE from the
        resampled cluster sums). Two crossed factors: see ``crossed``.
    seed : int or numpy.random.Generator, optional
        Seeds the draws; the result records the int that reproduces them.
    progress : bool
        Show replicates done, elapsed time and ETA on stderr.
    name : str, optional
        The statistic's name in results (default: the function's or expression's).
    crossed : {"multiway", "pigeonhole"}
        Crossed factors. ``"multiway"``: one-way bootstraps of each factor and of every
        intersection of them, combined by inclusion-exclusion (two factors:
        ``V = V_a + V_b - V_ab``; the multiway variance of Cameron, Gelbach & Miller
        2011, never below the largest one-way variance) and the interval
        ``estimate -+ t(min G - 1) sqrt(V)``; two factors take three bootstraps, three
        take seven. ``"pigeonhole"``: both factors
        drawn independently, a row repeated ``n_a * n_b`` times (Owen 2007), percentile
        or expanded intervals; conservative (see the docs); two factors only.
    columns : DataFrame, optional
        With an EvalTable: the frame it was read from, whose other columns (a red flag,
        rubric scores) the statistic may then use; rows are matched on the table's
        ``row`` (:func:`~evalmix.inference.resampling.with_columns`).

    Returns
    -------
    StatisticBootstrap

    Raises
    ------
    TooFewClustersError
        Fewer than 5 clusters for a percentile, expanded or BCa interval.
    EvalmixError
        If the statistic raises (its error is kept as the cause).

    Warns
    -----
    FewClustersWarning
        Fewer than 20 clusters, or a stratum with a single cluster.

    Examples
    --------
    >>> import evalmix
    >>> t = evalmix.sim.clustered_scores(30, 6, p=0.3, icc=0.2, seed=1).table()
    >>> r = evalmix.bootstrap(t, "mean(y)", cluster="cluster", reps=499, seed=2,
    ...                       progress=False)
    >>> bool(r.lo[0] < r.estimate[0] < r.hi[0]), r.n_clusters
    (True, 30)

    References
    ----------
    Davison & Hinkley (1997), doi:10.1017/CBO9780511802843, sections 3.8 and 5.3;
    Owen (2007), doi:10.1214/07-AOAS122; Cameron, Gelbach & Miller (2011),
    doi:10.1198/jbes.2010.07136.
    """
    check_option("ci", ci, CI_TYPES)
    level = check_level(level)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    if isinstance(statistic, str):
        statistic = expression(statistic)
    if not (isinstance(statistic, Sums) or callable(statistic)):
        raise InvalidOptionError(
            f"statistic must be a function of a DataFrame, a Sums or an expression string; "
            f"got {type(statistic).__name__}")
    label = statistic_name(statistic, name)
    check_option("crossed", crossed, CROSSED)
    design = resampling_design(table, cluster, strata, columns)
    two = len(design.factors) >= 2
    if len(design.factors) > 2 and crossed == "pigeonhole":
        raise InvalidOptionError(
            f"cluster={cluster!r}: the pigeonhole bootstrap takes two crossed factors; "
            "use crossed='multiway' (any number) or join factors into one cell with ':'")
    if two and crossed == "multiway" and ci != "percentile":
        raise InvalidOptionError(
            f"ci={ci!r}: with two crossed factors and crossed='multiway' the interval is "
            "estimate -+ t(min G - 1) x the multiway bootstrap SE; leave ci='percentile', "
            "or use crossed='pigeonhole' for percentile or expanded intervals")
    if two and ci in ("bca", "studentized"):
        raise InvalidOptionError(
            f"ci={ci!r} is not available for two crossed factors (no jackknife or "
            "standard error over two crossed samples); use ci='percentile' or 'expanded'")
    fast = isinstance(statistic, Sums)
    if ci == "studentized" and not fast:
        raise InvalidOptionError(
            "ci='studentized' needs a standard error in every resample: give the "
            "statistic as an expression or a Sums (delta-method SE from the cluster sums), "
            "or use ci='bca' or 'percentile'")
    check_few_clusters(design, ci)
    rng, recorded = seeded_rng(seed)
    sizes = [int(c.max()) + 1 for c in design.factors]
    if two and crossed == "multiway":
        return _multiway(design, statistic, label, reps, level, rng, recorded, progress)
    engine = _engine(design, statistic, label)
    estimate = engine.full()
    k = estimate.size
    with Progress(progress) as bar:
        task = bar.task(f"bootstrap {label}", reps)
        draws, var = _draw(design, engine, reps, rng, ci == "studentized", bar, task)
    notes: dict[str, str] = {}
    lo, hi = np.full(k, np.nan), np.full(k, np.nan)
    se, bias = np.full(k, np.nan), np.full(k, np.nan)
    z0, acc = np.full(k, np.nan), np.full(k, np.nan)
    finite = np.isfinite(draws) if var is None else np.isfinite(draws) & (var > 0)
    jack = engine.jackknife() if ci == "bca" else None
    se0 = engine.se(np.ones((1, sizes[0]))) if var is not None else None
    for j in range(k):
        good = draws[finite[:, j], j]
        if good.size < 2 or not np.isfinite(estimate[j]):
            notes[engine.names[j]] = ("fewer than 2 replicates gave a finite value"
                                      if np.isfinite(estimate[j]) else
                                      "undefined on the full table")
            continue
        se[j], bias[j] = good.std(ddof=1), good.mean() - estimate[j]
        try:
            if ci == "percentile":
                lo[j], hi[j] = percentile_interval(good, level)
            elif ci == "expanded":
                lo[j], hi[j] = expanded_interval(good, min(sizes), level)
            elif ci == "bca":
                assert jack is not None
                (lo[j], hi[j]), z0[j], acc[j] = bca_interval(
                    good, estimate[j], jack[:, j], level, strata=design.stratum)
            else:
                assert var is not None and se0 is not None
                t = (good - estimate[j]) / np.sqrt(var[finite[:, j], j])
                lo[j], hi[j] = studentized_interval(estimate[j], se0[0, j], t, level)
        except EvalmixError as exc:
            notes[engine.names[j]] = str(exc)
    details: dict[str, Any] = {
        "unit": design.unit, "resampling": "pigeonhole" if two else "pairs",
        "strata": design.strata, "n_clusters_by_factor": dict(zip(
            design.unit.split("+"), sizes, strict=True)),
        "fast_path": fast, "bias": bias, "notes": notes, "design_notes": design.notes}
    if ci == "bca":
        details.update(z0=z0, acceleration=acc)
    if se0 is not None:
        details["se_delta"] = se0[0]
    return StatisticBootstrap(
        statistic=label, names=engine.names, estimate=estimate, se=se, lo=lo, hi=hi,
        draws=draws, reps=reps, seed=recorded, ci_type=ci, level=level,
        cluster=design.label, n_clusters=min(sizes), n_failed=(~finite).sum(axis=0),
        details=details)


def _multiway(design: Design, statistic: Any, label: str, reps: int, level: float,
              rng: np.random.Generator, recorded: int, progress: bool
              ) -> StatisticBootstrap:
    """Crossed factors: the inclusion-exclusion of one-way bootstrap variances over every
    intersection of the factors (two: ``V = V_a + V_b - V_ab``), never below the largest
    one-way variance, and the interval ``estimate -+ t(min G - 1) sqrt(V)``."""
    names = design.unit.split("+")
    subsets = [c for r in range(1, len(names) + 1)
               for c in itertools.combinations(range(len(names)), r)]
    parts = [one_factor(design, intersect_codes(*(design.factors[i] for i in c)),
                        ":".join(names[i] for i in c)) for c in subsets]
    variances, draws_by, estimate = [], {}, np.empty(0)
    with Progress(progress) as bar:
        for part in parts:
            task = bar.task(f"bootstrap {label} by {part.unit}", reps)
            engine = _engine(part, statistic, label)
            estimate = engine.full()
            d, _ = _draw(part, engine, reps, rng, False, bar, task)
            draws_by[part.unit] = d
            variances.append(np.nanvar(d, axis=0, ddof=1))
    var = sum((-1) ** (len(c) + 1) * v for c, v in zip(subsets, variances, strict=True))
    one_way = np.max(variances[:len(names)], axis=0)
    fixed = ~(var >= one_way)  # never below a one-way variance
    var = np.where(fixed, one_way, var)
    se = np.sqrt(var)
    sizes = [int(f.max()) + 1 for f in design.factors]
    g = min(sizes)
    q = stats.t.ppf(0.5 + level / 2, g - 1)
    finite = np.isfinite(draws_by[names[0]])
    return StatisticBootstrap(
        statistic=label, names=engine.names, estimate=estimate, se=se,
        lo=estimate - q * se, hi=estimate + q * se, draws=draws_by[names[0]], reps=reps,
        seed=recorded, ci_type="multiway-t", level=level, cluster=design.label,
        n_clusters=g, n_failed=(~finite).sum(axis=0), details={
            "unit": design.unit, "resampling": "multiway", "strata": design.strata,
            "n_clusters_by_factor": dict(zip(names, sizes, strict=True)),
            "fast_path": isinstance(statistic, Sums), "df": g - 1,
            "variance_by_factor": {p.unit: v for p, v in zip(parts, variances, strict=True)},
            "draws_by_factor": draws_by, "fallback_to_one_way": fixed,
            "design_notes": design.notes, "notes": {}})
