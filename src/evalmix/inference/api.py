"""``evalmix.interval``: one estimand, one method, one cluster level -> IntervalResult.

Every estimand is a coefficient of a regression (:mod:`evalmix.inference.estimands`),
so every method is one function of ``(X, y, clusters)``:

* ``naive`` / ``wilson`` / ``clopper_pearson``: rows independent (HC1 SE, normal critical
  value / Wilson score / Clopper-Pearson exact); the last two are defined at a proportion
  of 0 or 1, where no standard error can be estimated.
* ``CR0``, ``CR1``, ``CR3``: sandwich with ``t(G - 1)`` critical values; ``CR2``: with
  clubSandwich's Satterthwaite degrees of freedom. A list of cluster roles gives the
  multiway (Cameron-Gelbach-Miller) CR0/CR1 variance with ``t(min G - 1)``.
* ``bootstrap``: pairs cluster bootstrap; ``wild``: wild cluster bootstrap-t (WCR).

``cluster=None`` means: the smallest independent unit, which is the row, except on
pairwise tables that know the presentation order, where it is the matched AB/BA pair
(the two records of one comparison are always kept together, in the sandwich and in
every resample).

What each method computes is in :mod:`evalmix.inference.interval_methods`, the bounds and
refusals at the edges in :mod:`evalmix.inference.interval_edges`; the checks of the options
and :func:`interval` here.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast, get_args

import numpy as np

from evalmix.data.table import check_table
from evalmix.errors import (
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
)
from evalmix.families import Regression
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.inference.estimands import (
    ESTIMANDS,
    LinearProblem,
    build_problem,
    given_options,
)
from evalmix.inference.interval_edges import _bounded, _check_scored_model, _finalise
from evalmix.inference.interval_methods import _INDEPENDENT, _interval
from evalmix.inference.result import IntervalResult
from evalmix.inference.sandwich import (
    FEW_CLUSTERS,
    MIN_BOOTSTRAP_CLUSTERS,
)
from evalmix.inference.scale import SCALES, Scale
from evalmix.seeding import SeedLike
from evalmix.vocabulary import CIType, IntervalMethod, Paired, WildWeights

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["interval", "METHODS", "METHOD_OPTIONS", "FEW_CLUSTERS", "MIN_BOOTSTRAP_CLUSTERS"]

METHODS: tuple[str, ...] = get_args(IntervalMethod)


def _units(table: EvalTable, problem: LinearProblem, roles: tuple[str, ...]
           ) -> tuple[list[np.ndarray], str, str]:
    """Cluster codes per role, the reported cluster label and the unit's name."""
    if roles:
        return [problem.codes(r) for r in roles], "+".join(roles), "+".join(roles)
    if problem.pair_codes is not None:
        return [problem.pair_codes], "", "pair"
    return [np.arange(problem.n_obs)], "", "row"


def interval(
    table: EvalTable,
    estimand: str,
    *,
    method: IntervalMethod = "CR2",
    cluster: str | Sequence[str] | None = None,
    level: float = 0.95,
    reps: int | None = None,
    seed: SeedLike = None,
    contrast: str | None = None,
    model: str | None = None,
    conditions: Sequence[str] | None = None,
    term: str | None = None,
    family: Regression = "gaussian",
    paired: Paired = "auto",
    ci: CIType = "percentile",
    weights: WildWeights = "auto",
    nested: str | None = None,
    null: float | None = None,
    scale: Scale = "auto",
    problem: LinearProblem | None = None,
) -> IntervalResult:
    """Confidence interval for one estimand by one method at one cluster level.

    Parameters
    ----------
    table : EvalTable
        The eval table (from :func:`evalmix.read`).
    estimand : {"mean", "win_rate", "controlled_win_rate", "difference", "coef"}
        See :mod:`evalmix.inference.estimands` (pairwise tables are scored for
        ``model_a`` unless ``model=`` names the model to score). A win rate on a table
        with one ``model_a`` in every row (a baseline, as AlpacaEval and MT-Bench files
        have) must name the model with ``model=`` (or ``contrast=``): unnamed, it would
        be the baseline's, where the report shows each evaluated model's.
    method : {"naive", "wilson", "clopper_pearson", "CR0", "CR1", "CR2", "CR3", "bootstrap", "wild"}
        Interval method: normal, Wilson score, Clopper-Pearson exact, cluster-robust
        sandwich with t reference, pairs cluster bootstrap, or wild cluster bootstrap.
    cluster : None, a role, or a list of roles
        Cluster factor(s) by role name (see ``table.clusters``); a list gives multiway
        clustering (CR0/CR1 only), reported as ``"a+b"``.
    level : float
        Confidence level.
    reps : int, optional
        Bootstrap replicates, an integer >= 2 (default 2000 for ``bootstrap``, 9999 for
        ``wild``). Like ``seed``, ``ci``, ``weights`` and ``nested``, it is refused by a
        method that does not read it (:data:`METHOD_OPTIONS`), never silently dropped.
    seed : int or numpy.random.Generator, optional
        Seeds the bootstrap draws (``bootstrap`` and ``wild`` only).
    contrast, model, conditions, term, family, paired
        Estimand options (:func:`evalmix.inference.estimands.build_problem`). An option
        the estimand does not read is refused with the way to say what was meant
        (:data:`~evalmix.inference.estimands.USED_OPTIONS`): the mean of model ``m1`` is
        ``contrast="m1"``, not ``conditions=["m1"]`` or ``model="m1"``.
    ci : {"percentile", "expanded", "bca", "studentized"}
        Bootstrap interval type.
    weights : {"auto", "rademacher", "webb"}
        Wild bootstrap weights; ``"auto"``: Webb's six-point weights below 12 clusters
        (:data:`~evalmix.inference.wild.WEBB_BELOW`), Rademacher from 12. With too few
        clusters for any weights to reach ``level`` (smallest attainable p-value above
        ``1 - level``: 5 clusters with Rademacher, 2 with Webb) the interval is not
        estimable (NaN bounds, the reason in ``note``).
    nested : str, optional
        Bootstrap: a second-stage unit resampled within clusters (a role, or ``"pair"``).
    null : float, optional
        Null value for ``p_value`` (default: 0.5 for win rates and 0/1 means, 0 for
        differences and coefficients).
    scale : {"auto", "identity", "logit"}
        Scale of t-based intervals (naive, CR0-CR3, multiway). ``"auto"``: proportions
        (win rates, means of 0/1 or [0, 1] scores) on the logit scale, so intervals stay
        in [0, 1] (:mod:`evalmix.inference.scale`); everything else as is.
        ``"identity"``: the plain Wald interval ``estimate -+ t se``. The SE is the same.
    problem : LinearProblem, optional
        The estimand already built by :func:`~evalmix.inference.estimands.build_problem`
        for this table (the estimand options are then taken from it and may not be given
        again): a report reuses one problem across methods and cluster levels.

    Notes
    -----
    An interval that cannot be trusted at this cluster level -- a standard error of
    zero (or below a relative tolerance), a proportion of exactly 0 or 1, or a
    difference whose arm is seen in fewer than 2 clusters -- is returned with NaN
    bounds and p-value, the reason in ``note``, and a
    :class:`~evalmix.errors.NotEstimableWarning`.

    Returns
    -------
    IntervalResult

    Raises
    ------
    EvalmixError
        Unknown cluster role, or a cluster factor that splits matched AB/BA pairs.
    TooFewClustersError
        Percentile/BCa bootstrap with fewer than 5 clusters.

    Warns
    -----
    FewClustersWarning
        Fewer than 20 clusters with CR0/CR1/CR3/bootstrap.

    Examples
    --------
    >>> import evalmix
    >>> t = evalmix.sim.clustered_scores(40, 10, p=0.7, icc=0.2, seed=1).table()
    >>> r = evalmix.interval(t, "mean", method="CR2", cluster="cluster")
    >>> r.n_clusters, r.method
    (40, 'CR2')

    References
    ----------
    Cameron, A. C. & Miller, D. L. (2015). A practitioner's guide to cluster-robust
    inference. Journal of Human Resources 50, 317-372. doi:10.3368/jhr.50.2.317
    Pustejovsky, J. E. & Tipton, E. (2018). doi:10.1080/07350015.2016.1247004
    """
    table = check_table(table, "interval")
    check_option("estimand", estimand, ESTIMANDS)
    check_option("method", method, METHODS)
    level = check_level(level)
    roles = table.check_cluster(cluster)
    if len(set(roles)) != len(roles):
        raise InvalidOptionError(f"cluster={cluster!r} names a role twice")
    table.check_pairs_within(roles)
    if method in _INDEPENDENT and roles:
        raise InvalidOptionError(
            f"method={method!r} treats rows as independent; leave cluster=None, or use "
            "'CR2', 'CR1', 'bootstrap' or 'wild' to account for clustering"
        )
    if len(roles) > 1 and method not in ("CR0", "CR1", "CR2"):
        raise InvalidOptionError(
            f"multiway clustering ({'+'.join(roles)}) is available for methods 'CR0', "
            f"'CR1' and 'CR2'; got {method!r}. Cluster by one factor for {method}"
        )
    check_option("scale", scale, SCALES)
    _check_method_options(method, reps=reps, seed=seed, ci=ci, weights=weights,
                          nested=nested)
    options = {"contrast": contrast, "model": model, "conditions": conditions, "term": term,
               "family": family, "paired": paired}
    if problem is None:
        _check_scored_model(table, estimand, model, contrast)
        problem = build_problem(table, cast(Any, estimand), **cast(Any, options))
    elif problem.estimand != estimand:
        raise InvalidOptionError(
            f"problem is a {problem.estimand!r} problem; asked for {estimand!r}")
    elif given := given_options(options):
        raise InvalidOptionError(
            f"problem= already fixes the estimand (it was built with its own options); "
            f"drop {', '.join(f'{k}=' for k in given)} or drop problem=")
    codes_list, label, unit = _units(table, problem, roles)
    res = _interval(table, problem, method=method, roles=roles, codes_list=codes_list,
                    label=label, unit=unit, level=float(level), reps=reps, seed=seed,
                    ci=ci, weights=weights, nested=nested, null=null)
    bounded = _bounded(table, problem, scale)
    return _finalise(res, problem, codes_list, roles, bounded=bounded)


#: The options of :func:`interval` each resampling method reads (reps and seed: any
#: resampling method); analytic methods read none of them.
METHOD_OPTIONS: dict[str, tuple[str, ...]] = {
    "bootstrap": ("reps", "seed", "ci", "nested"),
    "wild": ("reps", "seed", "weights"),
}


def _check_method_options(method: str, **given: Any) -> None:
    """Refuse a resampling option the method does not read; check ``reps`` as a count
    of at least the method's minimum (:data:`MIN_REPS`, with
    :func:`~evalmix.errors.check_count`)."""
    used = METHOD_OPTIONS.get(method, ())
    defaults = inspect.signature(interval).parameters
    for name, value in given.items():
        default = defaults[name].default
        if name in used or value is default or (
                isinstance(value, str) and value == default):
            continue
        readers = [m for m, opts in METHOD_OPTIONS.items() if name in opts]
        raise InvalidOptionError(
            f"method={method!r} does not use {name}={value!r}: it is an option of "
            f"{' and '.join(repr(m) for m in readers)}. Drop it, or choose "
            f"method={readers[0]!r}")
    if given.get("reps") is not None:
        check_count("reps", given["reps"], minimum=MIN_REPS)
