"""Model-based rows for a report: fit the crossed model(s), keep probability-scale contrasts.

Each back end's fixed-effect rows on the probability scale (population-averaged where
the back end gives both) become interval rows with ``method`` = the back end
(``bayes``, ``mixedlm``, ``glmm_vb``); variance components are stacked by back end.
When a cluster factor has fewer than 5 levels, the Bayesian back end also gives its
posterior under SD priors ``SENSITIVITY_SCALE`` times wider (reweighted draws, or a
refit when the weights are unreliable) and its prior-sensitivity table is returned.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix.compare._calls import guarded
from evalmix.models.result import PROBABILITY, VARIANCE_COLUMNS, probability_term

if TYPE_CHECKING:
    from evalmix._progress import Progress
    from evalmix.compare.recommend import Contrast
    from evalmix.data.table import EvalTable

__all__ = ["model_rows", "fits_to_run", "VARIANCE_REPORT_COLUMNS", "SENSITIVITY_SCALE",
           "REPORT_FIT_OPTIONS", "report_backend"]

#: The report's variance table: a fit's :data:`~evalmix.models.result.VARIANCE_COLUMNS`
#: plus the share interval.
VARIANCE_REPORT_COLUMNS = (*VARIANCE_COLUMNS, "share_lo", "share_hi")


#: SD-prior scale of the Bayesian refit when a factor has few levels: the Rayleigh(0.8)
#: SD prior becomes Rayleigh(0.8 x 2.5), whose 95% quantile is 4.9 instead of 1.96 on the
#: logit scale, so what moves between the two fits is what the prior was deciding.
SENSITIVITY_SCALE = 2.5

#: the report's model methods: each the name of a back end of ``fit``
#: (:func:`evalmix.models.backends.backend_from_name`)
_FITS = ("mixedlm", "glmm_laplace", "glmm_vb", "glmm_map", "bayes")


#: Options the report's model rows give a back end (``fit_options`` override them): the
#: Laplace GLMM is penalised away from the boundary (``Laplace(sd_penalty=2)``; Chung et
#: al. 2013/2015, blme's ``bglmer``). By maximum likelihood, 5 personas often put the
#: persona condition slope's SD at 0, the step-down drops it, and the population-averaged
#: difference covers 91.0% in docs/coverage.md's crossed 40 x 5 design (83-87% in the
#: fits that dropped it); penalised, 96.0% (docs/models.md).
REPORT_FIT_OPTIONS: dict[str, dict[str, Any]] = {"glmm_laplace": {"sd_penalty": 2.0}}


def report_backend(name: str, options: dict[str, Any] | None = None) -> Any:
    """The back-end object the report fits for method ``name``: its
    :data:`REPORT_FIT_OPTIONS`, then those of ``options`` (``fit_options``) it takes.

    Examples
    --------
    >>> report_backend("glmm_laplace").sd_penalty
    2.0
    >>> report_backend("glmm_laplace", {"sd_penalty": 0.0}).sd_penalty
    0.0
    """
    from evalmix.models.backends import backend_from_name

    return backend_from_name(name, {**REPORT_FIT_OPTIONS.get(name, {}), **(options or {})})


#: report method name -> the progress stage shown while it is fitted
_STAGES = {"mixedlm": "REML mixed model: optimising",
           "glmm_laplace": "Laplace GLMM: optimising",
           "glmm_vb": "VB GLMM: optimising", "glmm_map": "MAP GLMM: optimising",
           "bayes": "MCMC: sampling"}


def _backends(table: EvalTable, backend: str | None, fast: bool,
              methods: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """Model methods to run, in order, and notes on what was skipped.

    Default: one statsmodels fit -- the Laplace logit GLMM (``lme4::glmer``'s method) for
    0/1 and tie-scored outcomes, REML ``mixedlm`` for numeric scores -- plus the Bayesian
    fit. ``fast`` runs design-based methods only unless a model is asked for (``backend``
    or model names in ``methods``; MCMC never runs with ``fast``). ``methods`` with no
    model name fits no model.
    """
    notes: list[str] = []
    numeric = table.outcome_type == "numeric"
    default_sm = ["mixedlm"] if numeric else ["glmm_laplace"]
    asked = [m for m in (methods or ()) if m in _FITS]
    if methods is not None and not asked:
        return [], notes
    if methods is None and fast and backend is None:
        notes.append("fast: design-based methods only (ask for a model with backend= or "
                     "methods=[..., 'glmm_laplace'])")
        return [], notes
    sm = [m for m in asked if m != "bayes"] or (default_sm if methods is None else [])
    if numeric:
        sm = ["mixedlm"] if sm else []
    want_bayes = backend in (None, "bayes") and (methods is None or "bayes" in asked)
    run: list[str] = []
    if backend in (None, "statsmodels"):
        run += sm
    if want_bayes:
        if fast:
            notes.append("fast skips MCMC, so the Bayesian back end was not run")
        else:
            run.append("bayes")
    return run, notes


def fits_to_run(table: EvalTable, *, backend: str | None, fast: bool,
                methods: Sequence[str] | None) -> list[str]:
    """The model methods :func:`model_rows` will fit, in order (none without clusters)."""
    return _backends(table, backend, fast, methods)[0] if table.clusters else []


def _few_level_factors(table: EvalTable, fit_options: dict[str, Any]) -> dict[str, int]:
    """Random factors of the default model with too few levels to identify their SD.

    Cluster roles with fewer than ``FEW_LEVELS`` (5) levels, less those the caller enters
    as fixed effects (``fit_options["fixed"]``).
    """
    from evalmix.models.bayes.pymc_model import FEW_LEVELS

    given = fit_options.get("fixed", ()) or ()
    fixed = {given} if isinstance(given, str) else set(given)
    counts = {role: table.n_levels(role) for role in table.clusters if role not in fixed}
    return {role: n for role, n in counts.items() if n < FEW_LEVELS}


def _method_name(fit: Any, requested: str) -> str:
    b = str(getattr(fit, "backend", requested))
    if b.startswith("glmm") or b in ("mixedlm", "bayes"):
        return b
    return "bayes" if requested == "bayes" else "mixedlm"


def _terms(plan: Sequence[Contrast]) -> dict[str, Contrast]:
    """The probability-scale term each contrast of the plan is reported from.

    Every back end spells them with :func:`~evalmix.models.result.probability_term`:
    ``P[level]`` (win rate of ``model_b`` = level, or mean of a condition) and
    ``P[b] - P[a]`` (difference); the first contrast naming a term keeps it. Other terms
    (e.g. Bradley-Terry abilities) are not contrasts of the report.
    """
    out: dict[str, Contrast] = {}
    for c in plan:
        if c.estimand == "difference":
            out.setdefault(probability_term(c.levels[1], c.levels[0]), c)
        elif c.estimand in ("win_rate", "mean"):
            out.setdefault(probability_term(c.levels[0]), c)
    return out


def _identity_rows(fe: pd.DataFrame, plan: Sequence[Contrast]) -> pd.DataFrame:
    """Linear (identity-scale) fits: ``condition[B]`` is the difference B - reference
    (reported for the first difference contrast of B)."""
    out = []
    for _, r in fe[fe["scale"] == "identity"].iterrows():
        for c in plan:
            if (c.estimand == "difference" and c.column == "condition"
                    and r["term"] == f"condition[{c.levels[1]}]"):
                rr = r.copy()
                rr["term"] = probability_term(c.levels[1], c.levels[0])
                out.append(rr)
                break
    return pd.DataFrame(out)


def _rows_from_fit(fit: Any, method: str, plan: Sequence[Contrast], level: float,
                   n_obs: int) -> list[dict[str, Any]]:
    fe = getattr(fit, "fixed_effects", None)
    if fe is None or fe.empty or "scale" not in fe.columns:
        return []
    # population-averaged probabilities (what design-based intervals estimate)
    prob = fe[fe["scale"] == PROBABILITY]
    if prob.empty:
        prob = _identity_rows(fe, plan)
    if prob.empty:
        return []
    terms = _terms(plan)
    out = []
    for _, r in prob.iterrows():
        c = terms.pop(str(r["term"]), None)
        if c is None:
            continue
        row = {
            "estimand": c.estimand, "contrast": c.contrast, "method": method,
            "cluster": "model", "estimate": float(r["estimate"]),
            "se": float(r.get("se", np.nan)), "lo": float(r["lo"]), "hi": float(r["hi"]),
            "level": float(r.get("level", level)), "df": np.nan, "n_clusters": np.nan,
            "n_obs": n_obs, "null": c.null, "p_value": np.nan, "reps": 0, "seed": None,
            "ci_type": "posterior" if method == "bayes" else "model",
            "paired": None, "source": "model",
            "note": f"{r['term']} ({r.get('label', '')})",
        }
        out.append(row)
    # controlled win rates: a model with a position term estimates the order-balanced
    # rate, so the same number also serves the controlled_win_rate row
    for row in list(out):
        if row["estimand"] == "win_rate":
            twin = dict(row)
            twin["estimand"] = "controlled_win_rate"
            if any(c.key == ("controlled_win_rate", row["contrast"]) for c in plan):
                out.append(twin)
    return out


def _stopped_row(c: Contrast, method: str, level: float, n_obs: int, note: str
                 ) -> dict[str, Any]:
    """The empty row of a contrast whose model fit was stopped at the time limit."""
    return {"estimand": c.estimand, "contrast": c.contrast, "method": method,
            "cluster": "model", "estimate": np.nan, "se": np.nan, "lo": np.nan,
            "hi": np.nan, "level": level, "df": np.nan, "n_clusters": np.nan,
            "n_obs": n_obs, "null": c.null, "p_value": np.nan, "reps": 0, "seed": None,
            "ci_type": "", "paired": None, "source": "model", "note": note}


def _variance_rows(fit: Any, method: str) -> pd.DataFrame:
    v = getattr(fit, "variance", None)
    if v is None or v.empty:
        return pd.DataFrame(columns=list(VARIANCE_REPORT_COLUMNS))
    v = v.copy()
    v["backend"] = method
    var = pd.to_numeric(v.get("variance"), errors="coerce")
    if var is None or var.isna().all():
        var = pd.to_numeric(v["sd"], errors="coerce") ** 2
        v["variance"] = var
    total = float(var.sum())
    if "share" not in v.columns or v["share"].isna().all():
        v["share"] = var / total if total > 0 else np.nan
    share = pd.to_numeric(v["share"], errors="coerce")
    implied = (var / share)[(share > 0) & np.isfinite(share)]
    if len(implied):
        total = float(implied.median())  # the back end's own denominator (slopes excluded)
    # share interval from the variance interval with the other components at their
    # estimates
    lo = pd.to_numeric(v["var_lo"], errors="coerce")
    hi = pd.to_numeric(v["var_hi"], errors="coerce")
    others = total - var
    v["share_lo"] = (lo / (lo + others)).where(share.notna())
    v["share_hi"] = (hi / (hi + others)).where(share.notna())
    for c in VARIANCE_REPORT_COLUMNS:
        if c not in v.columns:
            v[c] = np.nan
    return v[list(VARIANCE_REPORT_COLUMNS)]


class _ChildFit:
    """``fit(table, **kwargs)`` running in a forked child process since :meth:`start`,
    so that the parent can fit the other back ends meanwhile (the two cores).

    This is how the Bayesian fit is bounded: MCMC run time is hard to predict and the
    sampler has no deadline check, so the child is terminated at the limit."""

    def __init__(self, pool: Any, job: Any, timeout: float) -> None:
        self.pool, self.job, self.timeout = pool, job, timeout
        self.started = time.perf_counter()

    @classmethod
    def start(cls, fit: Any, table: EvalTable, timeout: float | None,
              kwargs: dict[str, Any]) -> _ChildFit | None:
        """The running child, or None without a limit or where processes cannot fork
        (then the caller fits in this process)."""
        if not timeout or timeout <= 0:
            return None
        from evalmix._children import fork_pool

        try:  # the child ends with this process, even when it is killed
            pool = fork_pool(1)
        except ValueError:  # pragma: no cover - no fork on this platform
            return None
        return cls(pool, pool.apply_async(_call_fit, (fit, table, kwargs)), timeout)

    def result(self) -> Any:
        """The child's fit; ``StoppedAtLimit`` once ``timeout`` seconds have passed since
        the start. The child is ended either way."""
        import multiprocessing as mp

        from evalmix.models._deadline import StoppedAtLimit

        left = self.timeout - (time.perf_counter() - self.started)
        try:
            return self.job.get(timeout=max(left, 0.0))
        except mp.TimeoutError:
            raise StoppedAtLimit from None
        finally:
            self.stop()

    def stop(self) -> None:
        self.pool.terminate()
        self.pool.join()


def _call_fit(fit: Any, table: Any, kwargs: dict[str, Any]) -> Any:
    # Ctrl-C is the parent's: it stops this child (evalmix._children.worker_init)
    f = fit(table, **kwargs)
    # the draws and statsmodels results may not pickle cheaply; the report needs only
    # the tidy tables
    from dataclasses import replace

    return replace(f, draws=None, results=None)


def _run_fit(fit: Any, table: EvalTable, b: str, kwargs: dict[str, Any],
             model_timeout: float | None, child: _ChildFit | None,
             bar: Progress | None) -> tuple[Any, float]:
    """(guarded outcome, wall seconds) of back end ``b``; the outcome's value is None when
    the fit was stopped at ``model_timeout``.

    A statsmodels fit runs here with a cooperative ``deadline`` (checked at every
    evaluation, :mod:`evalmix.models._deadline`); the Bayesian fit is its running
    ``child``, or runs here without a limit when none could be started (no limit, or a
    platform that does not fork)."""
    from evalmix.models._deadline import StoppedAtLimit, deadline_after

    def collect() -> Any:
        try:
            if child is not None:
                return child.result()
            if b == "bayes":
                return fit(table, **kwargs)
            return fit(table, deadline=deadline_after(model_timeout), **kwargs)
        except StoppedAtLimit:
            return None

    t0 = child.started if child is not None else time.perf_counter()
    with bar.stage(_STAGES[b]) if bar is not None else nullcontext():
        out = guarded(collect)
    return out, time.perf_counter() - t0


def model_rows(table: EvalTable, plan: Sequence[Contrast], *, backend: str | None,
               fast: bool, methods: Sequence[str] | None, level: float, seed: int,
               draws: int | None, fit_options: dict[str, Any] | None = None,
               model_timeout: float | None = None, bar: Progress | None = None
               ) -> tuple[dict[str, Any], list[dict[str, Any]], pd.DataFrame, list[str],
                          pd.DataFrame | None]:
    """Fit the model back ends.

    Returns (fit summaries, rows, variance, notes, prior sensitivity). The last is the
    Bayesian fit's :attr:`~evalmix.models.result.ModelFit.prior_sensitivity` table: when
    a cluster factor has fewer than 5 levels and ``fit_options`` does not set
    ``sensitivity`` (``{"sensitivity": None}`` switches it off), the Bayesian back end's
    posterior under SD priors ``SENSITIVITY_SCALE`` times wider (see
    :func:`~evalmix.models.bayes.psis_sensitivity`); None when there is none. Every fit stops after ``model_timeout`` seconds (None or 0: no
    limit); a stopped fit leaves one empty row per contrast saying so.
    """
    from evalmix.models.api import fit
    from evalmix.models.backends import LEGACY_OPTIONS

    backends, notes = _backends(table, backend, fast, methods)
    options = dict(fit_options or {})
    sensitivity: pd.DataFrame | None = None
    fits: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    var_parts: list[pd.DataFrame] = []
    if backends and not table.clusters:
        notes.append("no cluster factors, so no mixed model was fitted")
        backends = []
    if not backends:
        return (fits, rows, pd.DataFrame(columns=list(VARIANCE_REPORT_COLUMNS)), notes,
                sensitivity)
    runs: list[tuple[str, dict[str, Any], dict[str, int]]] = []
    legacy = {k for names in LEGACY_OPTIONS.values() for k in names}
    preset = {k for opts in REPORT_FIT_OPTIONS.values() for k in opts}
    model_options = {k: v for k, v in options.items() if k not in legacy | preset}
    for b in backends:
        # fit_options serve every back end: each gets the ones it takes
        given = {k: v for k, v in options.items() if k in legacy | preset}
        few: dict[str, int] = {}
        kwargs: dict[str, Any] = {"seed": seed, "level": level, **model_options}
        if b == "bayes":
            kwargs["progress"] = False
            if draws is not None:
                given["draws"] = draws
            few = _few_level_factors(table, options)
            if "sensitivity" not in options and few:
                given["sensitivity"] = SENSITIVITY_SCALE
        kwargs["backend"] = report_backend(b, given)
        runs.append((b, kwargs, few))
    # the Bayesian fit starts first, in its child process, and samples while this process
    # fits the statsmodels back ends (statsmodels first in ``backends``, so by the time
    # the loop waits for the child they are done)
    children: dict[str, _ChildFit] = {}
    try:
        for b, kwargs, _ in runs:
            if b == "bayes":
                child = _ChildFit.start(fit, table, model_timeout, kwargs)
                if child is not None:
                    children[b] = child
        outcomes = [_run_fit(fit, table, b, kwargs, model_timeout, children.get(b), bar)
                    for b, kwargs, _ in runs]
    finally:
        for child in children.values():
            child.stop()
    for (b, kwargs, few), (out, wall) in zip(runs, outcomes, strict=True):
        if out.ok and out.value is None:
            stopped = f"stopped at the limit ({model_timeout:g} s)"
            notes.append(f"the {b} model fit was {stopped} and its rows are empty; rerun "
                         "with a longer --model-timeout (model_timeout=; 0 = no limit)"
                         + (", fewer --draws" if b == "bayes" else "") + " or --fast")
            fits[b] = {"stopped": stopped, "wall_s": round(wall, 2)}
            rows += [_stopped_row(c, b, level, table.n_obs, stopped) for c in plan]
            continue
        if not out.ok:
            notes.append(f"the {b} model could not be fitted ({out.error}); its rows are "
                         "missing")
            fits[b] = {"error": out.error}
            continue
        f = out.value
        method = _method_name(f, b)
        fits[method] = {"backend": getattr(f, "backend", b), "formula": getattr(f, "formula", ""),
                        "family": getattr(f, "family", ""),
                        "approximate": bool(getattr(f, "approximate", False)),
                        "divergences": int(getattr(f, "divergences", 0) or 0),
                        "wall_s": round(wall, 2), "warnings": list(getattr(f, "warnings", ()))}
        table_s = getattr(f, "prior_sensitivity", None)
        if isinstance(table_s, pd.DataFrame) and not table_s.empty:
            sensitivity = table_s
            how = dict(getattr(f, "provenance", {}) or {}).get("prior_sensitivity_method", {})
            fits[method]["prior_sensitivity"] = {
                "scale": kwargs["backend"].sensitivity, "few_level_factors": few,
                "method": how.get("method", "refit")}
            verb = ("reweighted (PSIS) to" if how.get("method") == "psis" else "refitted with")
            notes.append(f"{method}: {verb} the SD priors at scale "
                         f"{kwargs['backend'].sensitivity} to check how much the few-level "
                         "factors' SDs lean on the prior; see the section 'Prior "
                         "sensitivity (Bayesian model)' and prior_sensitivity.csv")
        new = _rows_from_fit(f, method, plan, level, table.n_obs)
        if not new and plan:
            # a fit that answers none of the report's contrasts (e.g. a linear-probability
            # mixedlm on win rates, which reports only condition differences) says so
            notes.append(f"the {method} fit answers none of this report's contrasts "
                         f"({', '.join(sorted({c.estimand for c in plan}))}), so it adds "
                         "no rows; only its variance components are shown"
                         + (" (for 0/1 outcomes use glmm_laplace)"
                            if method == "mixedlm" and table.outcome_type != "numeric"
                            else ""))
        rows += new
        var_parts.append(_variance_rows(f, method))
        div = int(getattr(f, "divergences", 0) or 0)
        own = tuple(getattr(f, "warnings", ()))
        if div and not own:
            notes.append(f"the Bayesian fit had {div} divergent transitions: its intervals "
                         "may be off; refit with more tuning or a higher target_accept")
        if getattr(f, "approximate", False):
            notes.append(f"the {method} back end is an approximation "
                         "(variational/Laplace or linear probability); read its intervals "
                         "as rough")
        for w in getattr(f, "warnings", ()):
            notes.append(f"{method}: {w}")
        diag = getattr(f, "diagnostics", None)
        if not own and diag is not None and not diag.empty and "r_hat" in diag.columns:
            bad = diag[pd.to_numeric(diag["r_hat"], errors="coerce") > 1.01]
            if len(bad):
                notes.append(f"{method}: {len(bad)} parameter(s) with R-hat > 1.01 "
                             f"({', '.join(map(str, bad['parameter'][:4]))}); the chains "
                             "have not mixed, so those numbers are not reliable")
    variance = (pd.concat(var_parts, ignore_index=True) if var_parts
                else pd.DataFrame(columns=list(VARIANCE_REPORT_COLUMNS)))
    return fits, rows, variance, notes, sensitivity
