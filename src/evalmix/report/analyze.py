"""One call, every interval: estimands x methods x cluster levels, side by side.

:func:`analyze` runs every design-based method at every cluster level on every
contrast of a table, adds model-based rows from :func:`evalmix.fit`, judge-stratified
estimates, per-judge position bias and variance components, and returns a
:class:`~evalmix.report.report.Report`. A method that fails yields a row with a note
and a warning, never a crashed report.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix._escape import check_names
from evalmix._progress import Progress
from evalmix._version import package_versions
from evalmix.compare._calls import guarded
from evalmix.compare.decide import (
    INTERVAL_COLUMNS,
    NON_VOTING_METHODS,
    add_decisions,
    headline,
)
from evalmix.compare.model_rows import fits_to_run, model_rows
from evalmix.compare.position import position_bias, position_classes
from evalmix.compare.recommend import (
    ALL_METHODS,
    MAX_DIFFERENCE_LEVELS,
    MODEL_METHODS,
    Contrast,
    Recommendation,
    RowSelector,
    check_methods,
    contrasts,
    judge_role,
    level_label,
    levels_to_run,
    recommend_cluster,
)
from evalmix.data.table import check_table, is_judge_role
from evalmix.design.effect import design_effect
from evalmix.errors import (
    FewClustersWarning,
    InvalidOptionError,
    check_count,
    check_level,
    check_option,
    renamed_option,
)
from evalmix.inference.api import interval
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.inference.estimands import build_problem
from evalmix.inference.sandwich import FEW_CLUSTERS
from evalmix.report.controlled import (
    choose_controlled,
    length_control_rows,
    style_control_rows,
)
from evalmix.report.custom_statistics import custom_rows
from evalmix.report.reliability import reliability
from evalmix.seeding import SeedLike, child_seed, resolve_seed
from evalmix.vocabulary import Backend, ControlledEstimand

if TYPE_CHECKING:
    from evalmix.data.analysis_plan import AnalysisPlan
    from evalmix.data.table import EvalTable
    from evalmix.inference.custom import Statistic
    from evalmix.report.report import Report

__all__ = ["analyze"]

#: Methods with an interval for proportions only.
_PROPORTION_ONLY = {"wilson"}
#: Methods that take one cluster factor only (multiway is CR1 only).
_ONEWAY = {"CR2", "CR3", "bootstrap", "wild"}
#: Fewest clusters for a cluster bootstrap (the inference package refuses fewer).
_MIN_BOOT_CLUSTERS = 5


@dataclass(frozen=True)
class _Job:
    contrast: Contrast
    method: str
    level: tuple[str, ...]
    judge: str | None = None  # judge-stratified job: the judge's label


#: Methods that take several cluster factors at once (multiway).
_MULTIWAY = {"CR1", "CR2"}


def _applicable(table: EvalTable, c: Contrast, method: str, level: tuple[str, ...]
                ) -> bool:
    if method in ("naive", "wilson"):
        if level:
            return False
        if method == "wilson":
            return c.estimand in ("win_rate", "mean") and table.outcome_type in (
                "binary", "proportion")
        return True
    if not level:
        return False
    if len(level) > 1 and method not in _MULTIWAY:
        return False
    return True


def _row_from(res: Any, job: _Job, n_obs: int) -> dict[str, Any]:
    row = res.row()
    if res.details.get("pairing_note") and not row.get("note"):
        row["note"] = res.details["pairing_note"]
    row["estimand"] = job.contrast.estimand
    row["contrast"] = job.contrast.contrast
    row["method"] = job.method
    row["cluster"] = level_label(job.level)
    row.setdefault("n_obs", n_obs)
    row["null"] = job.contrast.null
    row["source"] = "design"
    row.setdefault("note", "")
    return row


def _empty_row(job: _Job, n_obs: int, level_value: float, note: str) -> dict[str, Any]:
    return {
        "estimand": job.contrast.estimand, "contrast": job.contrast.contrast,
        "method": job.method, "cluster": level_label(job.level), "estimate": np.nan,
        "se": np.nan, "lo": np.nan, "hi": np.nan, "level": level_value, "df": np.nan,
        "n_clusters": np.nan, "n_obs": n_obs, "null": job.contrast.null,
        "p_value": np.nan, "reps": 0, "seed": None, "ci_type": "", "paired": None,
        "source": "design", "note": note,
    }


def _problem_for(sub: EvalTable, c: Contrast) -> tuple[Any, list[tuple[str, str]], str | None]:
    """The contrast's LinearProblem on its rows (built once, reused by every job)."""
    kwargs: dict[str, Any] = {}
    if c.estimand == "difference":
        kwargs["conditions"] = c.levels
    if c.model is not None:
        kwargs["model"] = c.model
    out = guarded(build_problem, sub, c.estimand, **kwargs)
    return out.value, out.warnings, out.error


def _call_interval(sub: EvalTable, job: _Job, *, level: float, reps: int,
                   seed: int, problem: Any = None
                   ) -> tuple[dict[str, Any], list[tuple[str, str]], str | None]:
    c = job.contrast
    kwargs: dict[str, Any] = {"method": job.method, "level": level, "problem": problem}
    if job.level:
        kwargs["cluster"] = job.level[0] if len(job.level) == 1 else list(job.level)
    if job.method in ("bootstrap", "wild"):
        kwargs["reps"] = reps
        kwargs["seed"] = seed
    if job.method == "bootstrap":
        # the plain percentile interval under-covers with 20-50 clusters (0.93 at 20);
        # the expanded percentile holds 94-96% from 20 (docs/planning.md, docs/coverage.md)
        kwargs["ci"] = "expanded"
    if problem is None:  # else the problem already carries the estimand's options
        if c.estimand == "difference":
            kwargs["conditions"] = c.levels
        if c.model is not None:
            kwargs["model"] = c.model
    out = guarded(interval, sub, c.estimand, **kwargs)
    if out.ok:
        return _row_from(out.value, job, sub.n_obs), out.warnings, None
    return _empty_row(job, sub.n_obs, level, out.error or ""), out.warnings, out.error


def _summarise_warnings(raw: list[tuple[str, str]], errors: list[tuple[str, str, str]]
                        ) -> list[str]:
    """Collapse repeated callee warnings and failures into a few plain lines."""
    out: list[str] = []
    counts = Counter(raw)
    by_cat: dict[str, list[tuple[str, int]]] = {}
    for (cat, msg), n in counts.items():
        by_cat.setdefault(cat, []).append((msg, n))
    for cat, items in by_cat.items():
        items.sort(key=lambda t: -t[1])
        total = sum(n for _, n in items)
        head = items[0][0]
        more = f" (and {len(items) - 1} similar messages)" if len(items) > 1 else ""
        out.append(f"{cat} x{total}: {head}{more}")
    fails = Counter((m, e.split(":")[0]) for m, _, e in errors)
    for (method, kind), n in fails.items():
        example = next(e for m, _, e in errors if m == method and e.startswith(kind))
        out.append(f"method {method} failed on {n} interval(s); those rows are empty "
                   f"(first error: {example})")
    return out


def analyze(
    table: EvalTable,
    *,
    cluster_levels: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    backend: Backend | None = None,
    fast: bool = False,
    reps: int = 2000,
    seed: SeedLike = None,
    level: float = 0.95,
    progress: bool = True,
    min_clusters: int = FEW_CLUSTERS,
    draws: int | None = None,
    fit_options: dict[str, Any] | None = None,
    model_timeout: float | None = 300,
    command: str | None = None,
    out: str | Path | None = None,
    sampled: Sequence[str] | None = None,
    strata: Sequence[str] | None = None,
    levels: Sequence[str] | None = None,
    humans: Sequence[str] | None = None,
    letters: bool = True,
    plan: AnalysisPlan | None = None,
    statistics: Mapping[str, Statistic] | None = None,
    columns: pd.DataFrame | None = None,
    randomized: bool = False,
    controlled: ControlledEstimand = "auto",
    baseline: str | None = None,
    style_features: Sequence[str] | None = None,
) -> Report:
    """Every estimand x method x cluster level of ``table``, in one report.

    Parameters
    ----------
    table : EvalTable
        From :func:`evalmix.read`.
    cluster_levels : sequence of str, optional
        Cluster levels to run (role names, ``"a:b"`` for an interaction cell, ``"a+b"``
        for multiway, ``"none"``); default: none, every role, two-way combinations of
        crossed roles, the output-generating cell (all sampled roles) and the
        recommended level.
    methods : sequence of str, optional
        Subset of ``naive, wilson, CR1, CR2, CR3, bootstrap, wild`` (default all) plus
        model methods ``mixedlm, glmm_laplace, glmm_vb, glmm_map, bayes`` (default: the
        Laplace GLMM for 0/1 and tie-scored outcomes or ``mixedlm`` for numeric scores,
        and ``bayes``, unless ``fast``). A list without model names fits no model.
    backend : {"bayes", "statsmodels"} or None
        Restrict the model rows to one back end. ``None`` runs statsmodels, and the
        Bayesian back end unless ``fast``.
    fast : bool
        Design-based methods only: no model is fitted unless one is asked for
        (``backend=`` or model names in ``methods``), and never MCMC.
    reps : int
        Bootstrap replicates (cluster and wild bootstrap).
    seed : int or numpy.random.Generator, optional
        Master seed (an int >= 0; a Generator contributes one drawn int); each bootstrap
        gets its own seed derived from it (recorded per row). ``None`` draws one and
        records it in ``summary``.
    level : float
        Confidence / credible level.
    progress : bool
        Show rich progress bars on stderr.
    min_clusters : int
        Below this many clusters (default 20) the report warns that CR1 and bootstrap
        rows under-cover (the recommended CR2 rows are used at any number of levels).
    sampled : sequence of str, optional
        Cluster roles the claim generalises over (default ``table.sampled``: all but
        judges and replicates). The recommended interval accounts for every one of them
        (:func:`evalmix.compare.recommend.recommend_cluster`).
    strata : sequence of str, optional
        Cluster roles that are strata (chosen, not sampled: a benchmark's subsets or
        categories), replacing the table's (a log reader declares its format's): held
        fixed, the recommended interval clusters within them and never by them.
    draws : int, optional
        Posterior draws per chain for the Bayesian back end (default: the back end's).
    fit_options : dict, optional
        Extra keyword arguments for :func:`evalmix.fit` (e.g. ``{"slopes": ("judge",)}``).
        When a cluster factor has fewer than 5 levels the Bayesian fit is also given under
        SD priors 2.5x wider (``sensitivity=2.5``; the report's ``prior_sensitivity``);
        ``{"sensitivity": None}`` switches that off, another number sets the scale.
    model_timeout : float, optional
        Stop every model fit after this many seconds (default 300) and report without
        it: its rows say "stopped at the limit". The statsmodels fits check the limit at
        every evaluation; the Bayesian fit then runs in a forked child process that is
        terminated. ``None`` or 0: no limit.
    command : str, optional
        The command line, recorded in ``summary``.
    out : str or Path, optional
        A report folder (see :meth:`Report.write`): when a model is to be fitted, the
        design-based results (``intervals.csv``, ``report.md`` with an "incomplete"
        banner, ...) are written there before the first fit starts, without the
        completion marker, so that an interrupted or stopped run keeps them; the caller
        writes the full report over it.
    levels : sequence of str, optional
        Deprecated: the old name of ``cluster_levels`` (``level`` is the confidence
        level); it still works, with a :class:`FutureWarning`.
    humans : sequence of str, optional
        The values of the judge role that are people (the others are LLM judges): the
        report gets a "Judges against humans" section (:mod:`evalmix.report.judges_vs_humans`).
    letters : bool
        Tier letters on the leaderboard (tables with more than 6 models); False leaves
        its ``tier`` column empty (:func:`evalmix.inference.leaderboard.leaderboard`).
    plan : AnalysisPlan, optional
        A pre-declared analysis plan (:func:`evalmix.read_plan`): checked against the
        table (a mismatch raises :class:`~evalmix.errors.InvalidTableError` naming the
        plan file); its ``reps`` and ``level`` replace the arguments, its cluster levels
        and methods are run, and the report opens with the primary result, marks the
        deviations the data forced (the fallback) and labels every other row
        exploratory (:mod:`evalmix.report.planned`).
    statistics : mapping, optional
        Name -> custom statistic (a function of the rows, or an expression;
        :func:`evalmix.bootstrap`), bootstrapped at the recommended cluster level into the
        report's ``custom`` section (``custom.csv``).
    columns : DataFrame, optional
        The source frame, whose other columns the custom statistics may use
        (:func:`~evalmix.inference.resampling.with_columns`).
    randomized : bool
        The conditions were assigned at random (within or between clusters of the
        recommended level): adds the cluster randomization test of the condition
        difference (:func:`evalmix.permutation_test`) beside its design-based p-value.
    controlled : {"auto", "length", "style", "none"}
        The length- or style-controlled estimand reported beside the raw one
        (:mod:`evalmix.report.controlled`): ``"auto"`` makes AlpacaEval's length-controlled
        win rate when one baseline is in every row and the answer lengths are known, and
        style-controlled Bradley-Terry for battles with answer features; ``"length"`` or
        ``"style"`` asks for one (an error names what the table lacks); ``"none"`` skips
        both.
    baseline : str, optional
        The length-controlled win rate's baseline (default: the model in every row);
        implies ``controlled="length"``.
    style_features : sequence of str, optional
        Style control's answer features (default: those of ``length`` (or Arena's
        ``tokens`` when the battles carry FastChat's ``conv_metadata``), ``headers``,
        ``lists``, ``bold`` the table has; any column pair ``<f>_a`` / ``<f>_b`` of the
        table or ``columns``); implies ``controlled="style"``.

    Returns
    -------
    Report

    Examples
    --------
    >>> import evalmix
    >>> from evalmix.sim import pairwise_judges
    >>> table = pairwise_judges(10, 3, 2, 2, seed=1).table()
    >>> rep = evalmix.analyze(table, fast=True, reps=199, seed=1, progress=False)
    >>> rep.headline[["contrast", "width_ratio"]]  # doctest: +SKIP

    References
    ----------
    Cameron, A. C. & Miller, D. L. (2015). A practitioner's guide to cluster-robust
    inference. J. Human Resources 50(2). https://doi.org/10.3368/jhr.50.2.317
    """
    table = check_table(table, "analyze")
    from evalmix.report.report import Report, check_report_dir

    if out is not None:
        check_report_dir(out)
    if backend is not None:
        check_option("backend", backend, ("bayes", "statsmodels"))
    level = check_level(level)
    if model_timeout is not None and (
            isinstance(model_timeout, bool) or not isinstance(model_timeout, int | float)
            or not math.isfinite(model_timeout) or model_timeout < 0):
        raise InvalidOptionError(
            f"model_timeout={model_timeout!r}: give seconds >= 0 (0 or None = no limit)")
    reps = check_count("reps", reps, minimum=MIN_REPS)
    cluster_levels = renamed_option(
        "analyze", "levels", "cluster_levels", levels, cluster_levels)
    seed = resolve_seed(seed)
    chosen = check_methods(methods)
    design_methods = [m for m in ALL_METHODS if m in chosen]
    model_methods = [m for m in MODEL_METHODS if m in chosen] if methods is not None \
        else None
    table = table.with_sampled(sampled, strata=strata)
    controlled, style_feats = choose_controlled(table, controlled, baseline=baseline,
                                                style_features=style_features, columns=columns)
    use = None
    if plan is not None:
        from evalmix.report.planned import resolve_plan

        use = resolve_plan(plan, table)
        table, reps, level = use.table, plan.reps, check_level(plan.level)
    levels_run = levels_to_run(table, cluster_levels)
    judge = judge_role(table)
    rec = recommend_cluster(table)
    todo = contrasts(table)
    notes: list[str] = list(table.outcome_notes)
    rec_level = rec.cluster
    if rec_level not in levels_run:
        levels_run.append(rec_level)
        if cluster_levels is not None:
            notes.append(f"the recommended cluster level '{rec.label}' was added to the "
                         "levels you asked for, so the headline can compare against it")
    if "naive" not in design_methods or rec.method not in design_methods:
        design_methods = list(dict.fromkeys(["naive", *design_methods, rec.method]))
    if use is not None:  # every level and method the plan names is run
        levels_run += [lv for lv in use.levels if lv not in levels_run]
        design_methods = list(dict.fromkeys([*design_methods, *use.methods]))

    # ---------------------------------------------------------------- design jobs
    jobs = [_Job(c, m, lv) for c in todo for m in design_methods for lv in levels_run
            if _applicable(table, c, m, lv)]
    judge_jobs: list[_Job] = []
    if judge is not None and table.n_levels(judge) > 1:
        for jl in table.levels(judge):
            for c in todo:
                planned = ((use.method, use.cluster),) if use and use.judge else ()
                for m, lv in dict.fromkeys((("naive", ()), (rec.method, rec_level),
                                            *planned)):
                    if lv or m == "naive":
                        judge_jobs.append(_Job(c, m, lv, judge=str(jl)))
    rows: list[dict[str, Any]] = []
    jrows: list[dict[str, Any]] = []
    raw_warn: list[tuple[str, str]] = []
    errors: list[tuple[str, str, str]] = []
    subsets: dict[tuple, EvalTable | None] = {}
    problems: dict[tuple, tuple[Any, list[tuple[str, str]], str | None]] = {}
    empty_cells: set[tuple[str, str]] = set()

    # each cached subset table and problem is dropped after its last job (jobs of one
    # contrast are adjacent): holding them all kept several copies of the table
    last_subset = {(j.contrast.column, j.contrast.levels, j.judge): i
                   for i, j in enumerate(jobs + judge_jobs)}
    last_problem = {(j.contrast.key, j.judge): i for i, j in enumerate(jobs + judge_jobs)}

    rows_of = RowSelector(table)
    judge_codes = table.codes(judge) if judge is not None else None
    judge_code = ({str(lv): i for i, lv in enumerate(table.levels(judge))}
                  if judge is not None else {})

    def subset(c: Contrast, judge_label: str | None) -> EvalTable | None:
        """The rows of a contrast (and judge); None when that cell has no rows."""
        key = (c.column, c.levels, judge_label)
        if key not in subsets:
            mask = rows_of(c)
            if judge_label is not None:
                mask = mask & (judge_codes == judge_code[judge_label])
            subsets[key] = (table if mask.all() else table.subset(mask)) if mask.any() \
                else None
        return subsets[key]

    with Progress(progress) as bar:
        t_main = bar.task("intervals", len(jobs))
        t_judge = None  # counted from its first job: its timer then times its own jobs
        row: dict[str, Any]
        w: list[tuple[str, str]]
        err: str | None
        for i, job in enumerate(jobs + judge_jobs):
            sub = subset(job.contrast, job.judge)
            if sub is None:
                empty_cells.add((str(job.judge), job.contrast.contrast))
                row, w, err = _empty_row(job, 0, level, "no rows: this judge did not judge "
                                         "this contrast (empty cell)"), [], None
            elif any(sub.n_levels(r) < 2 for r in job.level):
                row, w, err = _empty_row(job, sub.n_obs, level,
                                         "fewer than 2 clusters in these rows"), [], None
            elif job.method == "bootstrap" and any(
                    sub.n_levels(r) < _MIN_BOOT_CLUSTERS for r in job.level):
                row, w, err = _empty_row(
                    job, sub.n_obs, level,
                    f"not run: fewer than {_MIN_BOOT_CLUSTERS} clusters for a cluster "
                    "bootstrap (read the wild bootstrap row)"), [], None
            else:
                pkey = (job.contrast.key, job.judge)
                if pkey not in problems:
                    problems[pkey] = _problem_for(sub, job.contrast)
                    raw_warn += problems[pkey][1]
                problem, _, perr = problems[pkey]
                if perr is not None:
                    row, w, err = _empty_row(job, sub.n_obs, level, perr), [], perr
                else:
                    row, w, err = _call_interval(sub, job, level=level, reps=reps,
                                                 seed=child_seed(seed, i), problem=problem)
            raw_warn += w
            if last_subset[(job.contrast.column, job.contrast.levels, job.judge)] == i:
                subsets.pop((job.contrast.column, job.contrast.levels, job.judge), None)
            if last_problem[(job.contrast.key, job.judge)] == i:
                problems.pop((job.contrast.key, job.judge), None)
            if err:
                errors.append((job.method, job.contrast.contrast, err))
            if job.judge is None:
                rows.append(row)
                bar.advance(t_main)
            else:
                row["judge"] = job.judge
                jrows.append(row)
                if t_judge is None:
                    t_judge = bar.task("judge-stratified", len(judge_jobs))
                bar.advance(t_judge)
        if empty_cells:
            judges_empty = sorted({j for j, _ in empty_cells})
            notes.append(f"{len(empty_cells)} judge x contrast cell(s) have no rows (judges "
                         f"{', '.join(judges_empty[:5])}{' ...' if len(judges_empty) > 5 else ''}"
                         " did not judge every contrast); judge-stratified rows are shown "
                         "only where the cell exists")

        # ------------------------------------------------------------ design-only parts
        with bar.stage("leaderboard: every model pair") if _n_models(table) > \
                MAX_DIFFERENCE_LEVELS + 1 else nullcontext():
            board, board_pairs, board_note = _leaderboard(table, rec, level=level,
                                                          seed=seed, letters=letters)
        if board_note:
            notes.append(board_note)
        lc_rows = sc_rows = None
        if controlled == "length":
            with bar.stage("length-controlled win rate"):
                lc_rows, lc_note = length_control_rows(table, level=level, seed=seed,
                                                       reps=reps, baseline=baseline,
                                                       columns=columns)
            notes += [lc_note] if lc_note else []
        elif controlled == "style":
            sc_rows, sc_note = style_control_rows(table, style_feats, level=level,
                                                  columns=columns)
            notes += [sc_note] if sc_note else []
        with bar.stage("G study: reliability and budget"):
            rel, rel_note = reliability(table, level=level, seed=seed, fast=fast,
                                        model_timeout=model_timeout)
        if rel_note:
            notes.append(rel_note)
        one_way = rec.cluster[0] if len(rec.cluster) == 1 else None
        design = _design(table, levels_run, rec, judge, min_clusters, design_methods)
        notes = [*_plain_warnings(table, design, rec, min_clusters), *notes]
        callee = _summarise_warnings(raw_warn, errors)

        upstream = _upstream(table)

        def summary(fits: dict[str, Any]) -> dict[str, Any]:
            return {**_summary(table, seed=seed, reps=reps, level=level, fast=fast,
                               backend=backend, methods=design_methods, levels=levels_run,
                               command=command, fits=fits),
                    "model_timeout": model_timeout, "upstream": upstream,
                    "controlled": controlled}

        custom: pd.DataFrame | None = None
        custom_notes: list[str] = []
        if statistics or randomized:
            with bar.stage("custom statistics and randomization test"):
                custom, custom_notes = custom_rows(
                    table, statistics=dict(statistics or {}), cluster=rec.cluster,
                    randomized=randomized, intervals=pd.DataFrame(rows), method=rec.method,
                    columns=columns, reps=reps, seed=seed, level=level)
            notes += custom_notes
        position = position_bias(table, judge=judge, cluster=one_way, level=level)
        with warnings.catch_warnings():  # few clusters: the report's warnings say so
            warnings.simplefilter("ignore", FewClustersWarning)
            classes = position_classes(table, judge=judge, cluster=one_way, level=level,
                                       reps=reps,
                                       seed=child_seed(seed, len(jobs) + len(judge_jobs)))
        section = None
        if humans is not None:
            with bar.stage("judges against humans"):
                section = _humans_section(table, humans, level, notes)
        base = Report(intervals=pd.DataFrame(), variance=pd.DataFrame(),
                      judges=_judges_frame(jrows, position, level),
                      design=design, headline=pd.DataFrame(), warnings=(),
                      position=position,
                      position_classes=None if classes.empty else classes,
                      summary=summary({}), leaderboard=board, leaderboard_pairs=board_pairs,
                      humans=section, reliability=rel, custom=custom,
                      length_control=lc_rows, style_control=sc_rows)
        if out is not None and fits_to_run(table, backend=backend, fast=fast,
                                           methods=model_methods):
            # the design-based results are on disk before any model fit starts
            with bar.stage("writing the design-based results"):
                _planned(_assemble(base, rows, table, rec, todo, notes, callee,
                                   incomplete="model fits running"), use).write(out)

        # ------------------------------------------------------------ model rows
        fits, mrows, variance, mnotes, prior_sensitivity = model_rows(
            table, todo, backend=backend, fast=fast, methods=model_methods, level=level,
            seed=seed, draws=draws, fit_options=dict(fit_options or {}),
            model_timeout=model_timeout, bar=bar)
    base = replace(base, variance=variance, prior_sensitivity=prior_sensitivity,
                   summary=summary(fits))
    return _planned(_assemble(base, rows + mrows, table, rec, todo, [*notes, *mnotes],
                              callee), use)


def _planned(rep: Report, use: Any) -> Report:
    """The report labelled against the analysis plan (unchanged without one)."""
    if use is None:
        return rep
    from evalmix.report.planned import apply_plan

    return apply_plan(rep, use)


def _humans_section(table: EvalTable, humans: Sequence[str], level: float,
                    notes: list[str]) -> Any:
    """The "Judges against humans" section; a failure becomes a warning, not a crash."""
    from evalmix.report.judges_vs_humans import humans_section

    out = guarded(humans_section, table, list(humans), level=level)
    if out.error:
        notes.append(f"judges against humans: not computed ({out.error})")
    return out.value


def _assemble(base: Report, rows: list[dict[str, Any]], table: EvalTable,
              rec: Recommendation, plan: Sequence[Contrast], notes: list[str],
              callee: list[str], *, incomplete: str | None = None) -> Report:
    """``base`` with the interval table, its decisions and the headline from ``rows``,
    and the warnings (``notes``, then the count of intervals not estimable, then the
    summarised callee warnings); ``incomplete`` (the partial report written before the
    model fits) says what is still running."""
    frame = pd.DataFrame(rows)
    for col in INTERVAL_COLUMNS:
        if col not in frame.columns:
            frame[col] = np.nan if col not in ("decision", "fragile") else pd.NA
    frame["votes"] = _votes(frame, table, rec)
    missing = frame["lo"].isna() & frame["estimate"].notna()
    warns = list(notes)
    if missing.any():
        warns.append(f"{int(missing.sum())} interval(s) are not estimable at their cluster "
                     "level (see each row's note); they carry no decision and do not vote")
    warns += callee
    frame = add_decisions(frame)[list(INTERVAL_COLUMNS)]
    primary = {c.key for c in plan if c.primary}
    head = headline(frame, cluster=rec.label, method=rec.method, primary=primary,
                    few_levels=", ".join(rec.few_levels), n_levels=rec.n_clusters)
    summary = dict(base.summary)
    if incomplete:
        summary["incomplete"] = incomplete
    return replace(base, intervals=frame, headline=head, summary=summary,
                   warnings=tuple(dict.fromkeys(warns)))


def _n_models(table: EvalTable) -> int:
    d = table.data
    if table.kind == "pairwise":
        return len(set(d["model_a"].astype(str)) | set(d["model_b"].astype(str)))
    return int(d["condition"].nunique()) if table.has_condition else 0


def _leaderboard(table: EvalTable, rec: Recommendation, *, level: float, seed: int,
                 letters: bool = True) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str]:
    """Model-vs-model comparisons for tables with more models than the contrasts list.

    Every pair of models, paired on shared items, clustered at the recommended level,
    with simultaneous (max-t) intervals and rank intervals
    (:func:`evalmix.inference.leaderboard.leaderboard`); a multiway recommendation
    (crossed sampled factors) gives the multiway CR2 covariance.
    """
    from evalmix.inference.leaderboard import leaderboard

    if _n_models(table) <= MAX_DIFFERENCE_LEVELS + 1:
        return None, None, ""
    cluster = (None if not rec.cluster else rec.cluster[0] if len(rec.cluster) == 1
               else list(rec.cluster))
    out = guarded(leaderboard, table, cluster=cluster, method="CR2", level=level, seed=seed,
                  letters=letters)
    if not out.ok:
        return None, None, f"the leaderboard could not be computed ({out.error})"
    return out.value.tidy(), out.value.tidy_pairs(), "; ".join(out.value.notes)


def _judges_frame(jrows: list[dict[str, Any]], pos: pd.DataFrame, level: float
                  ) -> pd.DataFrame:
    """Per-judge rows: the judge-stratified intervals and each judge's first-shown win
    rate from ``pos`` (:func:`~evalmix.compare.position.position_bias`)."""
    cols = ["judge", "estimand", "contrast", "method", "cluster", "estimate", "se", "lo",
            "hi", "level", "df", "n_clusters", "n_obs", "decision", "note"]
    parts = []
    if jrows:
        f = pd.DataFrame(jrows)
        f = add_decisions(f)
        parts.append(f[[c for c in cols if c in f.columns]])
    for _, r in pos.iterrows():
        base = {"judge": r["judge"], "contrast": "all comparisons", "level": level,
                "n_obs": r["n_decisive"], "note": ""}
        parts.append(pd.DataFrame([
            {**base, "estimand": "first_shown_win_rate", "method": "CR1",
             "cluster": r["first_shown_cluster"], "estimate": r["first_shown_win_rate"],
             "lo": r["first_shown_lo"], "hi": r["first_shown_hi"],
             "n_clusters": r["n_clusters"],
             "decision": bool(r["first_shown_lo"] > 0.5 or r["first_shown_hi"] < 0.5)
             if np.isfinite(r["first_shown_lo"]) else pd.NA},
            {**base, "estimand": "flip_rate", "method": "pairs", "cluster": "",
             "estimate": r["flip_rate"], "n_obs": r["n_pairs"]},
            {**base, "estimand": "consistency", "method": "pairs", "cluster": "",
             "estimate": r["consistency"], "n_obs": r["n_pairs"]},
        ]))
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    for c in cols:
        if c not in out.columns:
            out[c] = np.nan
    return out[cols]


def _design(table: EvalTable, levels_run: list[tuple[str, ...]], rec: Any,
            judge: str | None, min_clusters: int, methods: list[str]) -> dict[str, Any]:
    summary = table.describe().to_dict()
    deff_rows = []
    for role in table.clusters:
        row: dict[str, Any] = {"factor": role, "n_clusters": table.n_levels(role)}
        out = guarded(design_effect, table, cluster=role)
        if out.ok:
            row.update(_flatten_deff(out.value))
        else:
            row["note"] = out.error
        deff_rows.append(row)
    summary["design_effects"] = deff_rows
    summary["cluster_levels"] = [level_label(lv) or "none" for lv in levels_run]
    summary["methods"] = list(methods)
    summary["judge_role"] = judge
    summary["min_clusters"] = min_clusters
    summary["recommendation"] = {"cluster": rec.label, "method": rec.method,
                                 "n_clusters": rec.n_clusters, "reason": rec.reason,
                                 "sampled": list(rec.sampled), "fixed": list(rec.fixed),
                                 "strata": list(rec.strata),
                                 "few_levels": list(rec.few_levels),
                                 "estimable": rec.estimable, "statement": rec.sentence()}
    return summary


def _flatten_deff(value: Any) -> dict[str, Any]:
    """Whatever design_effect returned, as a flat JSON-ready dict."""
    if hasattr(value, "tidy"):
        t = value.tidy()
        if isinstance(t, pd.DataFrame) and len(t) >= 1:
            return {k: v for k, v in t.iloc[0].to_dict().items() if k != "factor"}
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return {k: v for k, v in asdict(value).items()
                if np.isscalar(v) or v is None}
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if np.isscalar(v) or v is None}
    return {"value": str(value)}


def _votes(frame: pd.DataFrame, table: EvalTable, rec: Recommendation) -> pd.Series:
    """Which rows vote on fragility: plausible cluster choices for the sampled design.

    Model rows vote (they model every random factor); design rows vote when their method
    is not naive/Wilson and their cluster level is made of the recommendation's sampled
    top-level factors (one-way by each, or multiway) -- the sensitivity set for crossed
    designs. Rows clustered by a fixed factor (judge) or by a level nested inside a
    sampled one (questions inside sampled passages) do not vote.
    """
    top = set(rec.cluster)
    def plausible(level: str) -> bool:
        roles = [r for r in str(level).split("+") if r]
        return bool(roles) and all(r in top for r in roles)
    design = frame["source"].eq("design")
    ok = ~frame["method"].isin(NON_VOTING_METHODS) & frame["cluster"].map(plausible)
    if not rec.cluster:
        ok = ~frame["method"].isin(NON_VOTING_METHODS) & frame["cluster"].eq("")
    return (~design | ok) & frame["lo"].notna()


def _plain_warnings(table: EvalTable, design: dict[str, Any], rec: Recommendation,
                    min_clusters: int) -> list[str]:
    out: list[str] = []
    dropped = dict(table.dropped)
    if dropped:
        parts = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in dropped.items())
        out.append(f"{sum(dropped.values()):,} of {table.n_raw:,} rows were dropped while "
                   f"reading ({parts}); every number here uses the {table.n_obs:,} rows left.")
    if not rec.estimable:
        out.append(f"No interval can be trusted for this design: {rec.reason}")
    for role in rec.cluster:
        g = table.n_levels(role)
        if 2 <= g < min_clusters:
            out.append(f"'{role}' has only {g} levels (fewer than {min_clusters}): the "
                       f"recommended CR2 rows stay close to nominal, but CR1 and bootstrap "
                       f"rows clustered by {role} under-cover; "
                       + ("the interval is wide because the design has few independent "
                          f"levels of {role}: add levels to narrow it."
                          if role in rec.few_levels else "read CR2 and wild rows."))
    if not rec.cluster:
        out.append("No sampled cluster factor: every interval treats rows as independent, "
                   "which is only right if they are.")
    return out + _name_warnings(table)


def _name_warnings(table: EvalTable) -> list[str]:
    """NameWarning for model, condition and judge names and role names that hold control
    or bidirectional characters or look like another name (``evalmix._escape.check_names``)."""
    frame = table.data
    names = [v for c in ("condition", "model_a", "model_b") if c in frame.columns
             for v in pd.unique(frame[c])]
    out = check_names(names, "model", stacklevel=4)
    for role in table.clusters:
        if is_judge_role(role):
            out += check_names(table.levels(role), role, stacklevel=4)
    return out + check_names(table.clusters, "role", stacklevel=4)


def _upstream(table: EvalTable) -> str | None:
    """The tool's own numbers for a table read from its logs (reading them again; the
    reader's warnings were given already), or None."""
    from evalmix.data.readers.upstream import upstream_line

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return upstream_line(table)


def _summary(table: EvalTable, **kw: Any) -> dict[str, Any]:
    versions = package_versions("numpy", "pandas", "scipy", "statsmodels", "pymc", "arviz",
                                "nutpie", "matplotlib", loaded_only=True)
    fits = kw.pop("fits")
    return {
        "versions": versions,
        "seed": kw["seed"],
        "reps": kw["reps"],
        "level": kw["level"],
        "fast": kw["fast"],
        "backend": kw["backend"],
        "methods": kw["methods"],
        "cluster_levels": [level_label(lv) or "none" for lv in kw["levels"]],
        "roles": table.roles.to_dict(),
        "kind": table.kind,
        "outcome_type": table.outcome_type,
        "ties": table.ties if table.kind == "pairwise" else None,
        "source": table.source,
        "n_obs": table.n_obs,
        "command": kw["command"],
        "models": fits,
        "orientation": ("'X vs Y' is X's win rate against Y; 'B - A' is B's win rate "
                        "minus A's (against the same opponent); the same convention as "
                        "evalmix.interval") if table.kind == "pairwise" else "as scored",
    }
