"""Coverage of the report's headline interval on designs with known truth.

:func:`headline_coverage` simulates each named design (:data:`DESIGNS`: one-way clusters,
nested passages with few outer clusters, crossed sampled scenarios x personas at two
persona SDs and with few persona levels, near-degenerate accuracies, and pairwise AB/BA
judgments), computes the report's rows on every replication (the same calls
:func:`evalmix.analyze` makes), and records for each contrast whether each interval contains the true
population value: naive, CR2 one-way by each sampled factor, multiway CR2 over the
crossed sampled factors, the output-generating cell, and **the headline** -- the very
row the report recommends. A replication whose headline is "not estimable" counts as a
refusal (its share is reported), not as a miss or a hit. ``docs/coverage.md`` records
a run (``tests/plan/test_headline_coverage.py``, marked slow).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from evalmix._progress import Progress
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.sim.designs import Factor, crossed_scores
from evalmix.tidy import tidy_rows
from evalmix.vocabulary import IntervalEstimand, WildWeights

__all__ = ["DESIGNS", "StudyDesign", "HeadlineCoverage", "headline_coverage",
           "HEADLINE_COLUMNS"]

#: Judges of the simulated designs: fixed (chosen), with known effects.
_JUDGES = {"j1": 0.0, "j2": 0.3, "j3": -0.3}


@dataclass(frozen=True)
class StudyDesign:
    """A design of the headline coverage study.

    Attributes
    ----------
    name, description : str
    simulate : callable
        ``simulate(seed) -> (table, truth)``: an EvalTable (sampled roles declared) and
        the true value of each report contrast, keyed ``(estimand, contrast)``.
    """

    name: str
    description: str
    simulate: Callable[[np.random.Generator], tuple[Any, dict[tuple[str, str], float]]]
    #: Also compute the wild cluster bootstrap at the recommended one-way level (weights
    #: as the report chooses them, and Rademacher beside them): few-cluster designs.
    wild: bool = False


def _scores_design(name: str, description: str, factors: Sequence[Factor], *,
                   judges: Mapping[str, float] | None = None, intercept: float = 0.5,
                   effect: float = 0.3, replicates: int = 1, wild: bool = False
                   ) -> StudyDesign:
    def simulate(rng: np.random.Generator):
        sim = crossed_scores(factors, judges=judges, intercept=intercept,
                             condition_effect=effect, replicates=replicates, seed=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = sim.table()
        t = sim.truth
        truth = {("mean", "control"): t["control"], ("mean", "treatment"): t["treatment"],
                 ("difference", "treatment - control"): t["difference"]}
        return table, truth
    return StudyDesign(name, description, simulate, wild)


def _stratified_design(name: str, description: str, strata: Mapping[str, float],
                       items: Sequence[int], *, replicates: int = 1, intercept: float = 0.5
                       ) -> StudyDesign:
    """Items sampled within fixed strata (:func:`~evalmix.sim.designs.stratified_scores`);
    the table declares the stratum, so the headline clusters by item within it."""
    from evalmix.sim.designs import stratified_scores

    def simulate(rng: np.random.Generator):
        sim = stratified_scores(strata, items, intercept=intercept, replicates=replicates,
                                seed=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = sim.table()
        t = sim.truth
        return table, {("mean", "control"): t["control"],
                       ("mean", "treatment"): t["treatment"],
                       ("difference", "treatment - control"): t["difference"]}
    return StudyDesign(name, description, simulate)


def _pairwise_design(name: str, description: str, n_scenarios: int, n_personas: int,
                     sd_persona: float) -> StudyDesign:
    from evalmix.sim.pairwise import pairwise_judges

    def simulate(rng: np.random.Generator):
        sim = pairwise_judges(n_scenarios, n_personas, 1, 3, sds={"persona": sd_persona,
                                                                  "author": 0.0},
                              seed=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = sim.table(clusters={"scenario": "scenario", "persona": "persona",
                                        "judge": "judge"})
        t = sim.truth["given_authors_judges"]
        truth = {("win_rate", "control vs reference"): t["control"]["score"],
                 ("win_rate", "treatment vs reference"): t["treatment"]["score"],
                 ("difference", "treatment - control"): t["difference_score"]}
        return table, truth
    return StudyDesign(name, description, simulate)


def _grid_design(m: int, icc: float) -> StudyDesign:
    """A cell of the one-way grid of docs/coverage.md (N = 1,000 beta-binomial scores)."""
    from evalmix.sim.scores import clustered_scores

    def simulate(rng: np.random.Generator):
        sim = clustered_scores(1000 // m, m, p=0.7, icc=icc, seed=rng)
        return sim.table(), {("mean", "overall"): 0.7}
    return StudyDesign(f"one-way grid m={m}, ICC {icc}",
                       f"{1000 // m} clusters of {m} beta-binomial 0/1 scores, accuracy 0.7",
                       simulate)


_PASSAGES = [10, 20, 30, 40, 50, 60, 70, 90]
#: AlpacaEval's five subsets at half size (helpful_base 129, koala 156, oasst 188,
#: selfinstruct 252, vicuna 80 instructions), with set effects.
_ALPACA_SUBSETS = {"helpful_base": 0.3, "koala": 0.0, "oasst": -0.2, "selfinstruct": -0.6,
                   "vicuna": 0.6}
_ALPACA_ITEMS = [65, 78, 94, 126, 40]
#: MT-Bench's eight categories (10 questions each), set effects from -1 to 1.
_MT_BENCH_CATEGORIES = {c: float(e) for c, e in zip(
    ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem",
     "humanities"), (0.8, 0.6, -0.4, -1.0, -0.7, 0.0, 0.4, 1.0), strict=True)}

#: The designs of docs/coverage.md.
DESIGNS: dict[str, StudyDesign] = {d.name: d for d in (
    *(_grid_design(m, icc) for m in (1, 5, 10, 20, 50) for icc in (0.1, 0.2)),
    _scores_design("one-way 40 items", "40 items x 10 repeated 0/1 scores per condition "
                   "(item SD 0.8, slope SD 0.3)", [Factor("item", 40, 0.8, 0.3)],
                   replicates=10),
    _scores_design("one-way 12 items", "12 items x 10 repeated scores (few clusters)",
                   [Factor("item", 12, 0.8, 0.3)], replicates=10),
    _scores_design("nested 8 passages", "questions (SD 0.8) nested in 8 passages of 10-90 "
                   "questions (SD 0.6), question ids declared",
                   [Factor("passage", 8, 0.6, 0.3),
                    Factor("question", _PASSAGES, 0.8, 0.3, parent="passage")]),
    _scores_design("nested 5 groups", "questions (SD 0.8) nested in 5 *sampled* groups of "
                   "40-126 questions (SD 0.5): the wild bootstrap with 5 clusters",
                   [Factor("group", 5, 0.5, 0.2),
                    Factor("question", _ALPACA_ITEMS, 0.8, 0.3, parent="group")],
                   wild=True),
    _stratified_design("stratified 5 subsets", "AlpacaEval-like: 403 instructions in 5 "
                       "fixed subsets of 40-126 (set effects -0.6 to 0.6, item SD 0.8), one "
                       "score per instruction and condition; subset declared a stratum",
                       _ALPACA_SUBSETS, _ALPACA_ITEMS),
    _stratified_design("stratified 8 categories", "MT-Bench-like: 8 fixed categories x 10 "
                       "questions (set effects -1 to 1, item SD 0.8), 2 scores per question "
                       "and condition; category declared a stratum", _MT_BENCH_CATEGORIES,
                       [10] * 8, replicates=2),
    _scores_design("nested 8 passages, p~0.85", "as above, accuracy about 0.85",
                   [Factor("passage", 8, 0.6, 0.3),
                    Factor("question", _PASSAGES, 0.8, 0.3, parent="passage")],
                   intercept=2.0),
    _scores_design("crossed 40x8, persona SD 0.5", "40 scenarios x 8 personas, both "
                   "sampled, 3 fixed judges", [Factor("scenario", 40, 0.8, 0.3),
                                               Factor("persona", 8, 0.5, 0.3)],
                   judges=_JUDGES),
    _scores_design("crossed 40x8, persona SD 0.2", "as above, persona SD 0.2 (slope 0.1)",
                   [Factor("scenario", 40, 0.8, 0.3), Factor("persona", 8, 0.2, 0.1)],
                   judges=_JUDGES),
    _scores_design("crossed 40x5", "40 scenarios x 5 personas (few levels)",
                   [Factor("scenario", 40, 0.8, 0.3), Factor("persona", 5, 0.5, 0.3)],
                   judges=_JUDGES),
    _scores_design("crossed 40x8, p~0.85", "crossed 40 x 8, accuracy about 0.85",
                   [Factor("scenario", 40, 0.8, 0.3), Factor("persona", 8, 0.5, 0.3)],
                   judges=_JUDGES, intercept=2.0),
    _scores_design("degenerate p~0.99", "30 items x 5 scores, accuracy about 0.99: many "
                   "replications have all-correct conditions",
                   [Factor("item", 30, 0.5)], intercept=5.0, effect=0.5, replicates=5),
    _pairwise_design("pairwise crossed 30x6", "AB/BA pairwise judgments: 30 scenarios x 6 "
                     "personas (both sampled) x 3 fixed judges, ties", 30, 6, 0.5),
)}

#: Wild bootstrap draws per interval in the study (Webb's weights are enumerated up to 5
#: clusters, Rademacher's up to 13, whatever this is).
_WILD_REPS = 999

#: Columns of :attr:`HeadlineCoverage.table`.
HEADLINE_COLUMNS: tuple[str, ...] = (
    "design", "estimand", "contrast", "interval", "method", "cluster", "coverage", "mcse",
    "mean_width", "refused", "reps", "truth", "seed")


@dataclass(frozen=True, eq=False)
class HeadlineCoverage:
    """Coverage of each interval of each design (one row per design x contrast x interval).

    ``interval`` is ``"headline"`` for the report's recommended row and otherwise names
    the row (``"naive"``, ``"CR2 | scenario"``, ``"CR2 | scenario+persona"``, ...);
    ``coverage`` is among replications with an interval, ``refused`` the share without
    (not estimable), ``mcse`` the Monte Carlo SE of ``coverage``.
    """

    table: pd.DataFrame
    reps: int
    seed: int
    level: float
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def tidy(self) -> pd.DataFrame:
        """One row per design x contrast x interval in the result contract
        (:data:`evalmix.tidy.RESULT_COLUMNS`): ``contrast`` is ``"<design>: <contrast>
        (<interval>)"`` (the key: the headline row repeats another row's method and
        cluster), ``estimate`` the coverage and ``se`` its Monte Carlo SE
        (``scale="coverage"``); then the :attr:`table`'s columns."""
        t = self.table
        key = (t["design"].astype(str) + ": " + t["contrast"].astype(str) + " ("
               + t["interval"].astype(str) + ")")
        frame = t.drop(columns=["contrast"]).assign(
            contrast=key, estimate=t["coverage"], se=t["mcse"], level=self.level)
        return tidy_rows(frame, scale="coverage", note="")

    def __str__(self) -> str:
        h = self.table[self.table["interval"] == "headline"]
        return (f"HeadlineCoverage({len(self.table)} rows, reps={self.reps}, "
                f"{self.seconds:.0f} s)\n"
                + h[["design", "contrast", "method", "cluster", "coverage", "refused"]]
                .to_string(index=False, float_format="{:.3f}".format))


def _one_rep(design: StudyDesign, seed: np.random.SeedSequence, level: float,
             glmm: bool = False) -> list[dict[str, Any]]:
    """Every interval of one replication: the report's rows for each true contrast.

    The rows are computed by the calls :func:`evalmix.analyze` makes (the contrast's
    rows, the recommendation of :func:`~evalmix.compare.recommend.recommend_cluster`, one
    :func:`~evalmix.inference.estimands.build_problem` reused by every method and level);
    ``tests/plan/test_headline_coverage.py`` checks that the headline equals the report's.
    """
    from evalmix.compare.recommend import contrasts, output_cell, recommend_cluster, select_rows
    from evalmix.inference.api import interval
    from evalmix.inference.estimands import build_problem

    table, truth = design.simulate(np.random.default_rng(seed))
    rec = recommend_cluster(table)
    # the sampled factors, and the strata (what clustering by a chosen grouping gives)
    levels: list[tuple[str, ...]] = [(r,) for r in (*table.sampled, *table.strata)]
    cell = output_cell(table)
    if cell is not None:
        levels.append((cell,))
    if rec.cluster and rec.cluster not in levels:
        levels.append(rec.cluster)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in contrasts(table):
            if c.key not in truth:
                continue
            mask = select_rows(table, c)
            sub = table if mask.all() else table.subset(mask)
            kw: dict[str, Any] = {"level": level}
            if c.estimand == "difference":
                kw["conditions"] = c.levels
            if c.model is not None:
                kw["model"] = c.model
            problem = build_problem(sub, cast(IntervalEstimand, c.estimand), **{k: v for k, v in kw.items()
                                                        if k != "level"})
            value = truth[c.key]
            res: dict[tuple[str, tuple[str, ...]], Any] = {("naive", ()): interval(
                sub, c.estimand, method="naive", problem=problem, level=level)}
            for lv in levels:
                res[("CR2", lv)] = interval(sub, c.estimand, method="CR2", problem=problem,
                                            cluster=list(lv) if len(lv) > 1 else lv[0],
                                            level=level)
            if design.wild and len(rec.cluster) == 1:
                wseed = int(seed.generate_state(1)[0])
                for m, w in (("wild", "auto"), ("wild (Rademacher)", "rademacher")):
                    w = cast(WildWeights, w)
                    res[(m, rec.cluster)] = interval(
                        sub, c.estimand, method="wild", problem=problem, reps=_WILD_REPS,
                        seed=wseed, weights=w, cluster=rec.cluster[0], level=level)
            for (m, lv), r in res.items():
                name = "naive" if m == "naive" else f"{m} | {'+'.join(lv)}"
                out.append(_hit(design.name, c.estimand, c.contrast, name, r, value))
            head = res[(rec.method, rec.cluster)]
            out.append(_hit(design.name, c.estimand, c.contrast, "headline", head, value))
        if glmm:
            out += _glmm_rows(design.name, table, truth, level)
    return out


class _Row:
    """Attribute access to a report row (``lo``, ``hi``, ``method``, ``cluster``)."""

    def __init__(self, row: Mapping[str, Any]):
        self.__dict__.update(row)


def _glmm_rows(design: str, table: Any, truth: Mapping[tuple[str, str], float],
               level: float) -> list[dict[str, Any]]:
    """The Laplace GLMM's population-averaged rows (the report's model rows)."""
    from evalmix.compare.model_rows import _rows_from_fit, report_backend
    from evalmix.compare.recommend import contrasts
    from evalmix.models.api import fit as fit_model

    try:
        fit = fit_model(table, backend=report_backend("glmm_laplace"), level=level,
                        progress=False)
    except EvalmixError:
        return []
    rows = _rows_from_fit(fit, "glmm_laplace", contrasts(table), level, table.n_obs)
    return [_hit(design, r["estimand"], r["contrast"], "GLMM population-average",
                 _Row({**r, "cluster": "model"}), truth[(r["estimand"], r["contrast"])])
            for r in rows if (r["estimand"], r["contrast"]) in truth]


def _hit(design: str, est: str, con: str, name: str, r: Any, truth: float
         ) -> dict[str, Any]:
    lo, hi = float(r.lo), float(r.hi)
    ok = np.isfinite(lo) and np.isfinite(hi)
    return {"design": design, "estimand": est, "contrast": con, "interval": name,
            "method": r.method, "cluster": r.cluster, "truth": truth,
            "covered": (lo <= truth <= hi) if ok else np.nan,
            "width": hi - lo if ok else np.nan}


def _chunk(design: StudyDesign, seeds: list[tuple[int, np.random.SeedSequence]],
           level: float, glmm_reps: int) -> list[dict[str, Any]]:
    return [row for r, s in seeds for row in _one_rep(design, s, level, r < glmm_reps)]


def headline_coverage(designs: Sequence[str] | None = None, *, reps: int = 400,
                      seed: int = 20261201, level: float = 0.95, jobs: int = 1,
                      glmm_reps: int = 0, progress: bool = True) -> HeadlineCoverage:
    """Coverage of the headline and of the other rows of the report on known designs.

    Parameters
    ----------
    designs : sequence of str, optional
        Names in :data:`DESIGNS` (default all).
    reps : int
        Replications per design (Monte Carlo SE of a 95% coverage: 1.1 points at 400).
    seed : int
        Study seed; design ``d`` replication ``r`` uses ``SeedSequence(seed, spawn_key=(d,
        r))``, so a design's numbers do not depend on the others or on ``jobs``.
    level : float
        Nominal level of the intervals.
    jobs : int
        Worker processes (joblib).
    glmm_reps : int
        Also fit the Laplace GLMM (the report's model rows, population-averaged) on the
        first ``glmm_reps`` replications of each design (it is the slow part).
    progress : bool
        A progress bar with counts and ETA.

    Returns
    -------
    HeadlineCoverage
    """
    names = list(DESIGNS) if designs is None else list(designs)
    unknown = [n for n in names if n not in DESIGNS]
    if unknown:
        raise InvalidOptionError(f"unknown design(s) {unknown}; choose from {list(DESIGNS)}")
    if reps < 1 or jobs < 1:
        raise InvalidOptionError(f"reps and jobs must be positive integers, got {reps}, {jobs}")
    t0 = time.perf_counter()
    chunk = max(1, min(25, reps // 4))
    tasks = []
    for d, name in enumerate(names):
        seeds = [(r, np.random.SeedSequence(seed, spawn_key=(d, r))) for r in range(reps)]
        tasks += [(DESIGNS[name], seeds[i:i + chunk]) for i in range(0, reps, chunk)]
    rows: list[dict[str, Any]] = []
    from joblib import Parallel, delayed

    with Progress(progress) as bar, Parallel(n_jobs=jobs, return_as="generator") as par:
        task = bar.task("headline coverage: replication chunks", len(tasks))
        for part in par(delayed(_chunk)(d, s, level, glmm_reps) for d, s in tasks):
            rows += part
            bar.advance(task)
    raw = pd.DataFrame(rows)
    table = _summarise(raw, reps, seed)
    return HeadlineCoverage(table=table, reps=reps, seed=seed, level=level,
                            seconds=time.perf_counter() - t0)


def _summarise(raw: pd.DataFrame, reps: int, seed: int) -> pd.DataFrame:
    keys = ["design", "estimand", "contrast", "interval", "method", "cluster"]
    g = raw.groupby(keys, sort=False)
    out = g.agg(coverage=("covered", "mean"), n_ok=("covered", "count"),
                mean_width=("width", "mean"), truth=("truth", "first")).reset_index()
    n_reps = raw.groupby(keys, sort=False).size().to_numpy()
    out["refused"] = 1 - out["n_ok"] / n_reps
    c = out["coverage"].astype(float)
    out["mcse"] = np.sqrt(c * (1 - c) / out["n_ok"].clip(lower=1))
    out["reps"] = n_reps
    out["seed"] = seed
    return out[list(HEADLINE_COLUMNS)]
