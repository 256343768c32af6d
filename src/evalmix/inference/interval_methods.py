"""What each method of :func:`evalmix.interval` computes on a :class:`~evalmix.inference.estimands.LinearProblem`.

``naive`` and the proportion intervals (``wilson``, ``clopper_pearson``) on independent
rows; the sandwich (one-way with CR2's Satterthwaite df, or multiway with its fall-back
to the largest one-way variance); the pairs cluster bootstrap and the wild cluster
bootstrap-t (:func:`_resampling`). The interval is on the estimand's own scale; bounds and
refusals come after (:mod:`evalmix.inference.interval_edges`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from evalmix.errors import (
    EvalmixWarning,
    FewClustersWarning,
    InvalidOptionError,
    TooFewClustersError,
    check_count,
    check_option,
)
from evalmix.inference.bootstrap import CI_TYPES, MIN_REPS
from evalmix.inference.estimands import (
    LinearProblem,
    fit_problem,
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
from evalmix.inference.scale import t_pvalue, t_quantile

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable


#: rows independent: no cluster argument
_INDEPENDENT = ("naive", "wilson", "clopper_pearson")


#: intervals for a proportion from the estimate and n alone (defined at 0 and 1)
_PROPORTION_CI = {"wilson": (wilson_interval, wilson_pvalue),
                  "clopper_pearson": (clopper_pearson_interval, binomial_pvalue)}


DEFAULT_REPS = {"bootstrap": 2000, "wild": 9999}


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
