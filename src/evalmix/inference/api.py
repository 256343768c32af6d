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
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast, get_args

import numpy as np

from evalmix.data.table import check_table
from evalmix.errors import (
    EvalmixWarning,
    FewClustersWarning,
    InvalidOptionError,
    NotEstimableWarning,
    TooFewClustersError,
    check_count,
    check_level,
    check_option,
)
from evalmix.families import Regression
from evalmix.inference.bootstrap import CI_TYPES, MIN_REPS
from evalmix.inference.estimands import (
    ESTIMANDS,
    LinearProblem,
    build_problem,
    fit_problem,
    given_options,
)
from evalmix.inference.naive import (
    binomial_pvalue,
    clopper_pearson_interval,
    naive_se,
    wilson_interval,
    wilson_pvalue,
)
from evalmix.inference.result import IntervalResult
from evalmix.inference.sandwich import (
    FEW_CLUSTERS,
    MIN_BOOTSTRAP_CLUSTERS,
    intersect_codes,
    multiway_df,
    satterthwaite_df,
    vcov_cluster,
    vcov_multiway,
)
from evalmix.inference.scale import SCALES, Scale, bounded_interval, t_pvalue, t_quantile
from evalmix.seeding import SeedLike
from evalmix.vocabulary import CIType, IntervalMethod, Paired, WildWeights

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["interval", "METHODS", "METHOD_OPTIONS", "FEW_CLUSTERS", "MIN_BOOTSTRAP_CLUSTERS"]

#: rows independent: no cluster argument
_INDEPENDENT = ("naive", "wilson", "clopper_pearson")
#: intervals for a proportion from the estimate and n alone (defined at 0 and 1)
_PROPORTION_CI = {"wilson": (wilson_interval, wilson_pvalue),
                  "clopper_pearson": (clopper_pearson_interval, binomial_pvalue)}
METHODS: tuple[str, ...] = get_args(IntervalMethod)
DEFAULT_REPS = {"bootstrap": 2000, "wild": 9999}


def _units(table: EvalTable, problem: LinearProblem, roles: tuple[str, ...]
           ) -> tuple[list[np.ndarray], str, str]:
    """Cluster codes per role, the reported cluster label and the unit's name."""
    if roles:
        return [problem.codes(r) for r in roles], "+".join(roles), "+".join(roles)
    if problem.pair_codes is not None:
        return [problem.pair_codes], "", "pair"
    return [np.arange(problem.n_obs)], "", "row"


def _few_clusters(G: int, method: str, unit: str) -> None:
    if G < FEW_CLUSTERS and method not in ("CR2", "wild"):
        warnings.warn(
            f"only {G} clusters ({unit}): {method} intervals under-cover with fewer than "
            f"{FEW_CLUSTERS} clusters. CR2 (Satterthwaite df) or the wild cluster "
            "bootstrap (method='wild') is the trustworthy choice here",
            FewClustersWarning, stacklevel=3,
        )


def _t_result(problem: LinearProblem, est: float, se: float, df: float, level: float,
              null: float, **kw: Any) -> dict[str, Any]:
    q = t_quantile(level, df)
    p = t_pvalue((est - null) / se, df) if np.isfinite(null) and se > 0 else float("nan")
    return dict(estimate=est, se=se, lo=est - q * se, hi=est + q * se, df=float(df),
                p_value=p, **kw)


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


def _interval(table: EvalTable, problem: LinearProblem, *, method: str,
              roles: tuple[str, ...], codes_list: list[np.ndarray], label: str, unit: str,
              level: float, reps: int | None, seed: Any, ci: str, weights: Any,
              nested: str | None, null: float | None) -> IntervalResult:
    """The interval on the estimand's own scale (before bounds and degeneracy checks)."""
    null_value = problem.null if null is None else float(null)
    common: dict[str, Any] = dict(estimand=problem.estimand, contrast=problem.contrast, method=method,
                  level=float(level), n_obs=problem.n_obs, null=null_value,
                  paired=problem.paired)
    details: dict[str, Any] = dict(problem.details)
    details["term"] = problem.term
    details["family"] = problem.family
    n_clusters = [int(c.max()) + 1 for c in codes_list]
    G = min(n_clusters)
    details["unit"] = unit

    if method in ("bootstrap", "wild"):
        return _resampling(problem, method, codes_list[0], label, unit, G, level, reps, seed,
                           ci, weights, nested, null_value, common, details, table)

    f = fit_problem(problem)
    est = float(f.beta[problem.target])
    k = problem.target
    if method == "naive":
        se = naive_se(problem.X, f.resid, target=k, working_weights=f.working_weights)
        r = _t_result(problem, est, se, np.inf, level, null_value, ci_type="normal")
        return IntervalResult(cluster="", n_clusters=problem.n_obs, details=details,
                              **common, **r)
    if method in _PROPORTION_CI:
        if problem.estimand not in ("mean", "win_rate", "controlled_win_rate"):
            raise InvalidOptionError(
                f"method={method!r} is an interval for a proportion (mean or win rate); "
                f"{problem.estimand!r} is not one. Use 'naive' or a cluster method"
            )
        if np.any((problem.y < 0) | (problem.y > 1)):
            raise InvalidOptionError(f"method={method!r} needs outcomes in [0, 1]")
        bounds, pvalue = _PROPORTION_CI[method]
        lo, hi = bounds(est, problem.n_obs, level)
        se = naive_se(problem.X, f.resid, target=k)
        r = _t_result(problem, est, se, np.inf, level, null_value, ci_type=method)
        r.update(lo=lo, hi=hi, p_value=pvalue(est, problem.n_obs, null_value))
        return IntervalResult(cluster="", n_clusters=problem.n_obs, details=details,
                              **common, **r)

    # sandwich
    _few_clusters(G, method, unit)
    if len(codes_list) > 1:
        mw = vcov_multiway(problem.X, f.resid, codes_list, type=cast(Any, method),
                           working_weights=f.working_weights)
        V = mw.vcov
        df: float = G - 1
        if method == "CR2":
            df, by = multiway_df(problem.X, f.resid, codes_list, target=k,
                                 working_weights=f.working_weights, multiway=mw)
            details["df_by_factor"] = dict(zip(roles, by, strict=True))
        details.update(n_clusters_by_factor=dict(zip(roles, mw.n_clusters, strict=True)),
                       eigenvalue_fix=mw.fixed)
        if mw.fixed:
            # The eigenvalue fix can leave the target's variance at (or near) zero: a
            # zero-width interval. Fall back, conservatively, to the largest one-way
            # variance of the same type (Cameron & Miller 2015, sec. VII.C).
            one_way = [mw.one_way(i)[k, k] for i in range(len(codes_list))]
            if V[k, k] < max(one_way):
                worst = int(np.argmax(one_way))
                V = V.copy()
                V[k, k] = one_way[worst]
                details["fallback"] = f"largest one-way variance ({roles[worst]})"
                warnings.warn(
                    f"the {'+'.join(roles)} multiway variance was not positive definite and "
                    f"the eigenvalue fix shrank the standard error below the one-way "
                    f"{roles[worst]!r} value; using that one-way variance instead "
                    "(conservative). Consider reporting one-way intervals per factor.",
                    FewClustersWarning if G < FEW_CLUSTERS else EvalmixWarning,
                    stacklevel=2,
                )
        G_report = G
    else:
        if G < 2:
            raise TooFewClustersError(
                f"cluster {label or unit!r} has a single level in the selected rows; a "
                "cluster-robust variance needs at least 2 clusters (report the estimate "
                "stratified, or choose a finer cluster factor)"
            )
        V = vcov_cluster(problem.X, f.resid, codes_list[0], type=cast(Any, method),
                         working_weights=f.working_weights)
        if method == "CR2":
            df = float(satterthwaite_df(problem.X, codes_list[0], type="CR2",
                                        working_weights=f.working_weights)[k])
        else:
            df = G - 1
        G_report = G
    se = float(np.sqrt(max(V[k, k], 0.0)))
    r = _t_result(problem, est, se, df, level, null_value, ci_type="t")
    return IntervalResult(cluster=label, n_clusters=G_report, details=details, **common, **r)


#: A standard error at or below this share of max(|estimate|, range of the outcome)
#: counts as zero.
SE_REL_TOL = 1e-8
#: An outcome whose range is below this (about the square root of the smallest normal
#: double, 2.2e-308) has squared residuals that underflow: its zero SE says so.
UNDERFLOW_SPREAD = 1e-150
#: Estimands that are proportions when the outcome lies in [0, 1].
_PROPORTIONS = ("mean", "win_rate", "controlled_win_rate")


def _check_scored_model(table: EvalTable, estimand: str, model: str | None,
                        contrast: str | None) -> None:
    """Refuse a win rate that names no model on a one-baseline table.

    There the unnamed win rate (the table's own scoring, ``model_a``'s) is the
    baseline's against everyone else, while the report and the upstream leaderboards
    (AlpacaEval, MT-Bench) show each evaluated model's: an easy number to misread.
    """
    if (estimand not in ("win_rate", "controlled_win_rate") or model is not None
            or contrast is not None or table.kind != "pairwise"):
        return
    d = table.data
    base = np.unique(d["model_a"].astype(str).to_numpy())
    if len(base) != 1:
        return
    others = sorted(set(d["model_b"].astype(str)) - {str(base[0])})
    example = others[0] if others else "NAME"
    raise InvalidOptionError(
        f"{estimand} without model=: {base[0]!r} is model_a in every row (the baseline), "
        f"so the unnamed win rate would be the baseline's against "
        f"{'the ' + str(len(others)) + ' others' if len(others) > 1 else repr(example)}, "
        "not an evaluated model's as in the report. Name the model whose wins to count: "
        f"model={example!r} is its win rate against {base[0]!r} (the report's "
        f"'{example} vs {base[0]}'); model={str(base[0])!r} is the baseline's")


def _bounded(table: EvalTable, problem: LinearProblem, scale: str) -> bool:
    """Whether t-based intervals go on the logit scale (see :mod:`~evalmix.inference.scale`)."""
    unit = table.outcome_type in ("binary", "proportion")
    if scale == "logit" and not (unit and problem.estimand in _PROPORTIONS):
        raise InvalidOptionError(
            f"scale='logit' is for proportions (win rates, means of 0/1 or [0, 1] "
            f"scores); {problem.estimand!r} of a {table.outcome_type} outcome is not one. "
            "Use scale='identity'"
        )
    return scale == "logit" or (scale == "auto" and unit
                                and problem.estimand in _PROPORTIONS)


def _not_estimable(res: IntervalResult, problem: LinearProblem,
                   codes_list: list[np.ndarray], roles: tuple[str, ...]) -> str:
    """Why no interval can be trusted at this cluster level ("" when one can)."""
    if res.method in ("CR0", "CR1", "CR2", "CR3", "bootstrap", "wild"):
        unpaired = problem.estimand == "difference" and not problem.paired
        if unpaired:
            arm = problem.X[:, problem.target] > 0.5
            a, b = problem.details.get("conditions", ("A", "B"))
            for role, codes in zip(roles or ("row",), codes_list, strict=True):
                for name, rows in ((b, arm), (a, ~arm)):
                    g = np.unique(codes[rows]).size
                    if g < 2:
                        return (f"{name!r} is seen in {g} {role} cluster"
                                f"{'' if g == 1 else 's'}; a difference needs each arm in "
                                "at least 2 clusters")
    floor = float(res.details.get("min_p_value", 0.0)) if res.method == "wild" else 0.0
    if floor > 1 - res.level:
        return (f"the wild bootstrap with {res.n_clusters} clusters and "
                f"{res.details.get('weights')} weights cannot reach the {res.level:.0%} "
                f"level: its smallest attainable p-value is {floor:.3g}, above "
                f"{1 - res.level:.3g}, so no null value could be rejected (read the CR2 "
                "row)")
    if problem.estimand in _PROPORTIONS and problem.family == "gaussian" and (
            np.all(problem.y == problem.y[0])):
        return (f"every outcome is {problem.y[0]:g}: there is no variation to estimate "
                "from (method='wilson' and 'clopper_pearson' give the interval of a "
                "proportion of 0 or 1 from independent rows)")
    # zero relative to the outcome's own scale (scores of size 1e-9 have SEs of that size)
    spread = float(np.ptp(problem.y)) if problem.y.size else 0.0
    if np.isfinite(res.se) and res.se <= SE_REL_TOL * max(abs(res.estimate), spread):
        if 0.0 < spread < UNDERFLOW_SPREAD:
            k = int(np.ceil(-np.log10(spread)))
            return (f"the outcome varies, but by at most {spread:.3g}: its squares underflow "
                    "in double precision, so the standard error computes as 0. Multiply "
                    f"the outcome by 1e{k} and divide the interval by the same")
        return ("zero standard error: the outcome does not vary between clusters (e.g. all "
                "ties, or every cluster has the same mean)")
    return ""


def _finalise(res: IntervalResult, problem: LinearProblem, codes_list: list[np.ndarray],
              roles: tuple[str, ...], *, bounded: bool) -> IntervalResult:
    """Bounds that respect the estimand's range, and refusal of degenerate intervals."""
    if res.ci_type in _PROPORTION_CI:
        y = problem.y
        if y.size and np.all(y == y[0]) and y[0] in (0, 1):
            what = {"wilson": "Wilson", "clopper_pearson": "Clopper-Pearson"}[res.ci_type]
            return replace(res, note=(
                f"every outcome is {y[0]:g} ({problem.n_obs} of {problem.n_obs}): the "
                f"{what} interval is defined there and is the honest answer for independent "
                "rows; the cluster-robust rows are not estimable"))
    note = _not_estimable(res, problem, codes_list, roles)
    if note:
        warnings.warn(
            f"{res.estimand} [{res.contrast}] by {res.method} (cluster: "
            f"{res.cluster or 'none'}): not estimable at this cluster level: {note}",
            NotEstimableWarning, stacklevel=3)
        return replace(res, lo=float("nan"), hi=float("nan"), p_value=float("nan"),
                       note=note)
    unit_y = bool(np.all((problem.y >= 0) & (problem.y <= 1)))
    if bounded and res.ci_type in ("t", "normal"):
        lo, hi, p = bounded_interval(res.estimate, res.se, res.df, res.level, res.null)
        return replace(res, lo=lo, hi=hi, p_value=p, scale="logit")
    if unit_y and problem.estimand in _PROPORTIONS and problem.family == "gaussian":
        return replace(res, lo=max(res.lo, 0.0), hi=min(res.hi, 1.0))
    if problem.estimand == "difference" and bool(np.all(np.abs(problem.y) <= 1)):
        # a difference of proportions lies in [-1, 1]
        return replace(res, lo=max(res.lo, -1.0), hi=min(res.hi, 1.0))
    return res


def _resampling(problem: LinearProblem, method: str, codes: np.ndarray, label: str,
                unit: str, G: int, level: float, reps: int | None, seed: Any, ci: str,
                weights: Any, nested: str | None, null_value: float,
                common: dict[str, Any], details: dict[str, Any], table: EvalTable
                ) -> IntervalResult:
    n_reps = check_count("reps", reps, minimum=MIN_REPS) if reps is not None else \
        DEFAULT_REPS[method]
    if method == "bootstrap":
        check_option("ci", ci, CI_TYPES)
        if G < MIN_BOOTSTRAP_CLUSTERS and ci in ("percentile", "expanded", "bca"):
            raise TooFewClustersError(
                f"only {G} clusters ({unit}): a {ci} bootstrap interval cannot be trusted "
                f"with fewer than {MIN_BOOTSTRAP_CLUSTERS}. Report the estimate stratified "
                "by this factor, or use method='wild' (wild cluster bootstrap-t)"
            )
        _few_clusters(G, method, unit)
        from evalmix.inference.bootstrap import cluster_bootstrap

        nested_codes = None
        if nested is not None:
            if nested == "pair":
                if problem.pair_codes is None:
                    raise InvalidOptionError("nested='pair' needs a pairwise table with order")
                nested_codes = problem.pair_codes
            else:
                table.check_cluster(nested)
                nested_codes = intersect_codes(codes, problem.codes(nested))
            details["nested"] = nested
        with warnings.catch_warnings():
            # the API has already said so (once) in _few_clusters
            warnings.simplefilter("ignore", FewClustersWarning)
            res = cluster_bootstrap(problem.X, problem.y, codes, target=problem.target,
                                    family=cast(Any, problem.family), reps=n_reps,
                                    level=level, ci=cast(Any, ci),
                                    seed=seed, nested=nested_codes)
        draws = np.asarray(res.draws, dtype=float)
        good = draws[np.isfinite(draws)]
        p = float("nan")
        if np.isfinite(null_value) and good.size:
            # share of centred replicates at least as far from the estimate as the null
            p = float(np.mean(np.abs(good - res.estimate) >= abs(res.estimate - null_value)))
            details["p_value_method"] = "centred bootstrap distribution"
        details.update(n_failed=int(res.n_failed), bias=res.details.get("bias"))
        df = float("nan")  # bootstrap intervals have no t reference
        return IntervalResult(cluster=label, estimate=float(res.estimate), se=float(res.se),
                              lo=float(res.lo), hi=float(res.hi), df=df,
                              n_clusters=int(res.n_clusters), reps=int(res.reps),
                              seed=res.seed, p_value=p, ci_type=ci, details=details,
                              **common)
    # wild
    if problem.family != "gaussian":
        raise InvalidOptionError(
            "method='wild' is for least-squares estimands; use family='gaussian' (linear "
            "probability) or method='CR2'/'bootstrap' for a logit coefficient"
        )
    if G < 2:
        raise TooFewClustersError(f"the wild bootstrap needs at least 2 clusters; found {G}")
    from evalmix.inference.wild import wild_cluster_bootstrap

    test_null = null_value if np.isfinite(null_value) else 0.0
    wres = wild_cluster_bootstrap(problem.X, problem.y, codes, target=problem.target,
                                 reps=n_reps, level=level, weights=weights, null=test_null,
                                 seed=seed)
    details.update(weights=wres.weights, t_obs=float(wres.t_obs),
                   enumerated=bool(wres.enumerated), min_p_value=float(wres.min_p_value))
    p = float(wres.p_value) if np.isfinite(null_value) else float("nan")
    return IntervalResult(cluster=label, estimate=float(wres.estimate),
                          se=float(getattr(wres, "se_cr1", np.nan)), lo=float(wres.lo),
                          hi=float(wres.hi), df=float("nan"), n_clusters=int(wres.n_clusters),
                          reps=int(wres.reps), seed=wres.seed, p_value=p,
                          ci_type="test-inversion", details=details, **common)
