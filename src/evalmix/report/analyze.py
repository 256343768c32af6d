"""One call, every interval: estimands x methods x cluster levels, side by side.

:func:`analyze` runs every design-based method at every cluster level on every
contrast of a table, adds model-based rows from :func:`evalmix.fit`, judge-stratified
estimates, per-judge position bias and variance components, and returns a
:class:`~evalmix.report.report.Report`. A method that fails yields a row with a note
and a warning, never a crashed report.

It is four named steps: check the options and decide once what to run
(:mod:`evalmix.report.run_plan`: a frozen :class:`~evalmix.report.run_plan.RunPlan`
with the sampled factors and the recommendation), run the design jobs
(:mod:`evalmix.report.design_jobs`) and the other parts
(:mod:`evalmix.report.design_parts`), fit the models
(:mod:`evalmix.compare.model_rows`), and assemble the report
(:mod:`evalmix.report.assemble`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalmix._progress import Progress
from evalmix.compare.model_rows import fits_to_run, model_rows
from evalmix.data.table import check_table
from evalmix.errors import renamed_option
from evalmix.inference.sandwich import FEW_CLUSTERS
from evalmix.report.assemble import (
    assemble,
    design_summary,
    judges_frame,
    plain_warnings,
    run_summary,
    upstream,
)
from evalmix.report.design_jobs import run_design_jobs, summarise_warnings
from evalmix.report.design_parts import custom_parts, design_parts
from evalmix.report.run_plan import RunPlan, check_options, plan_run
from evalmix.seeding import SeedLike, resolve_seed
from evalmix.vocabulary import Backend, ControlledEstimand

if TYPE_CHECKING:
    from evalmix.data.analysis_plan import AnalysisPlan
    from evalmix.data.table import EvalTable
    from evalmix.inference.custom import Statistic
    from evalmix.report.report import Report

__all__ = ["analyze"]


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
    sampled: str | Sequence[str] | None = None,
    strata: str | Sequence[str] | None = None,
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
    sampled : str or sequence of str, optional
        Cluster roles the claim generalises over (default ``table.sampled``: all but
        judges and replicates). The recommended interval accounts for every one of them
        (:func:`evalmix.compare.recommend.recommend_cluster`).
    strata : str or sequence of str, optional
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
    from evalmix.report.report import Report

    level, reps = check_options(out=out, backend=backend, level=level,
                                model_timeout=model_timeout, reps=reps)
    cluster_levels = renamed_option(
        "analyze", "levels", "cluster_levels", levels, cluster_levels)
    run = plan_run(table, cluster_levels=cluster_levels, methods=methods, sampled=sampled,
                   strata=strata, level=level, reps=reps, seed=resolve_seed(seed),
                   plan=plan, controlled=controlled, baseline=baseline,
                   style_features=style_features, columns=columns)
    table, rec, level = run.table, run.recommendation, run.level
    notes = list(run.notes)

    def summary(fits: dict[str, Any]) -> dict[str, Any]:
        return {**run_summary(table, seed=run.seed, reps=run.reps, level=level, fast=fast,
                              backend=backend, methods=list(run.design_methods),
                              levels=list(run.levels), command=command, fits=fits),
                "model_timeout": model_timeout, "upstream": up, "controlled": run.controlled}

    with Progress(progress) as bar:
        done = run_design_jobs(run, bar)
        notes += done.notes
        parts, part_notes = design_parts(run, bar, letters=letters, baseline=baseline,
                                         columns=columns, fast=fast,
                                         model_timeout=model_timeout)
        notes += part_notes
        design = design_summary(table, list(run.levels), rec, run.judge, min_clusters,
                                list(run.design_methods))
        notes = [*plain_warnings(table, design, rec, min_clusters), *notes]
        callee = summarise_warnings(done.raw_warnings, done.errors)
        up = upstream(table)
        extra = custom_parts(run, bar, done.rows, statistics=statistics,
                             randomized=randomized, columns=columns, humans=humans,
                             notes=notes)
        base = Report(intervals=pd.DataFrame(), variance=pd.DataFrame(),
                      judges=judges_frame(done.judge_rows, extra.position, level),
                      design=design, headline=pd.DataFrame(), warnings=(),
                      position=extra.position, position_classes=extra.position_classes,
                      summary=summary({}), leaderboard=parts.leaderboard,
                      leaderboard_pairs=parts.leaderboard_pairs, humans=extra.humans,
                      reliability=parts.reliability, custom=extra.custom,
                      length_control=parts.length_control,
                      style_control=parts.style_control)
        if out is not None and fits_to_run(table, backend=backend, fast=fast,
                                           methods=run.model_methods):
            # the design-based results are on disk before any model fit starts
            with bar.stage("writing the design-based results"):
                _planned(assemble(base, done.rows, table, rec, run.contrasts, notes, callee,
                                  incomplete="model fits running"), run).write(out)
        fits, mrows, variance, mnotes, prior_sensitivity = model_rows(
            table, run.contrasts, backend=backend, fast=fast, methods=run.model_methods,
            level=level, seed=run.seed, draws=draws, fit_options=dict(fit_options or {}),
            model_timeout=model_timeout, bar=bar)
    base = replace(base, variance=variance, prior_sensitivity=prior_sensitivity,
                   summary=summary(fits))
    return _planned(assemble(base, done.rows + mrows, table, rec, run.contrasts,
                             [*notes, *mnotes], callee), run)


def _planned(rep: Report, run: RunPlan) -> Report:
    """The report labelled against the analysis plan (unchanged without one)."""
    if run.planned is None:
        return rep
    from evalmix.report.planned import apply_plan

    return apply_plan(rep, run.planned)
