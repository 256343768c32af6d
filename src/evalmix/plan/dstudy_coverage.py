"""Whether a D study's projected SE matches the SE of the design it projects to.

:func:`projection_study` simulates scores with known variance components (normal
random effects on a balanced design, :func:`simulate_scores`), runs
:func:`evalmix.gstudy` on *pilot* data sets, projects the SE of an object's score and of
a difference of two objects to larger *target* designs, and simulates those targets
to observe the SEs there. It also covers the object means of the target designs with
the projected SE and with the naive SE (rows independent), as Messing (2026) does
for LLM pipelines. ``tests/plan/test_dstudy.py`` runs a quick version; the slow test writes
the table of docs/gtheory.md.

References
----------
Brennan, R. L. (2001). Generalizability Theory. Springer, chapter 4.
doi:10.1007/978-1-4757-3456-0
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from evalmix._progress import Progress
from evalmix.compare.gstudy import gstudy
from evalmix.design.gtheory import GDesign, coefficients
from evalmix.errors import InvalidOptionError, check_count, check_level
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import tidy_rows

__all__ = ["simulate_scores", "projection_study", "ProjectionStudy"]

#: Simulated cells per block (memory bound of the target simulations).
_BLOCK_CELLS = 4_000_000


def _check_design(design: GDesign, sizes: Mapping[str, int]) -> tuple[int, ...]:
    if design.differentiation != {design.object}:
        raise InvalidOptionError("the simulator needs an object of measurement nested in nothing")
    missing = [f for f in design.factors if f not in sizes]
    if missing:
        raise InvalidOptionError(f"give the size of every factor; missing {', '.join(missing)}")
    return tuple(int(sizes[f]) for f in design.factors)


def simulate_scores(design: GDesign, variances: np.ndarray, sizes: Mapping[str, int], *,
                    reps: int, rng: np.random.Generator, mean: float = 0.0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Balanced scores with normal random effects of the given variances.

    Parameters
    ----------
    design : GDesign
        The facets (object, crossed and nested facets).
    variances : array (n_effects,)
        One per effect of ``design`` (the last is the residual).
    sizes : mapping of str to int
        Levels of every factor (within each parent for a nested one).
    reps : int
        Simulated data sets.
    rng : numpy.random.Generator
        Source of the draws.
    mean : float
        Grand mean of the scores.

    Returns
    -------
    scores : ndarray (reps, *sizes)
        Axes in :attr:`GDesign.factors` order.
    universe : ndarray (reps, n_objects)
        Each object's universe score: the mean plus its effects that are not error
        (averaged over the fixed facets' levels).
    """
    shape = _check_design(design, sizes)
    y = np.full((reps, *shape), float(mean))
    universe = np.full((reps, shape[0]), float(mean))
    for e, v in zip(design.effects, np.asarray(variances, dtype=float), strict=True):
        eshape = tuple(n if f in e else 1 for f, n in zip(design.factors, shape, strict=True))
        draw = rng.normal(0.0, np.sqrt(max(v, 0.0)), (reps, *eshape))
        y += draw
        if design.role(e) == "universe":
            universe += draw.mean(axis=tuple(range(2, draw.ndim)))
    return y, universe


def _frame(cube: np.ndarray, design: GDesign) -> pd.DataFrame:
    idx = np.indices(cube.shape).reshape(cube.ndim, -1)
    return pd.DataFrame({**{f: idx[i] for i, f in enumerate(design.factors)},
                         "score": cube.ravel()})


def _observed(design: GDesign, variances: np.ndarray, sizes: Mapping[str, int], *,
              sims: int, rng: np.random.Generator, level: float,
              projected: np.ndarray, df: np.ndarray) -> dict[str, float]:
    """Observed SEs of object means and differences at ``sizes``, and the coverage of
    ``mean +- t(df) SE`` with the projected SEs and their df (one per simulation,
    recycled) and of ``mean +- z SE`` with the naive SE of each simulation's rows."""
    shape = _check_design(design, sizes)
    per = max(1, _BLOCK_CELLS // int(np.prod(shape)))
    z = stats.norm.ppf(0.5 + level / 2)
    err, diff, cover_g, cover_n = [], [], [], []
    done = 0
    while done < sims:
        m = min(per, sims - done)
        y, uni = simulate_scores(design, variances, sizes, reps=m, rng=rng)
        flat = y.reshape(m, shape[0], -1)
        means = flat.mean(axis=2)
        e = means - uni
        err.append(e.ravel())
        diff.append((e[:, 1:] - e[:, :-1]).ravel())
        pick = (done + np.arange(m)) % projected.size
        se_g = projected[pick][:, None]
        t_g = stats.t.ppf(0.5 + level / 2, df[pick])[:, None]
        cover_g.append((np.abs(e) <= t_g * se_g).ravel())
        naive = flat.std(axis=2, ddof=1) / np.sqrt(flat.shape[2])
        cover_n.append((np.abs(e) <= z * naive).ravel())
        done += m
    e_all, d_all = np.concatenate(err), np.concatenate(diff)
    return {"observed_se_score": float(np.sqrt(np.mean(e_all**2))),
            "observed_se_diff": float(np.sqrt(np.mean(d_all**2))),
            "mcse_se_score": float(np.std(e_all**2) / np.sqrt(e_all.size)
                                   / (2 * np.sqrt(np.mean(e_all**2)))),
            "coverage_gtheory": float(np.mean(np.concatenate(cover_g))),
            "coverage_naive": float(np.mean(np.concatenate(cover_n)))}


@dataclass(frozen=True, eq=False)
class ProjectionStudy:
    """Projected against observed SEs, one row per (pilot, target) design.

    Attributes
    ----------
    table : pandas.DataFrame
        ``pilot``, ``target`` (sizes as text), ``method`` (the G study's), ``true_se_score``,
        ``true_se_diff`` (from the true components), ``projected_se_score`` and
        ``projected_se_diff`` (medians over the pilots; ``*_q10``/``*_q90`` their 10th
        and 90th percentiles), ``projected_var_score_mean`` (the mean of the projected
        squared SEs: unbiased with ANOVA but for the zero floor), ``observed_se_score`` / ``observed_se_diff`` (root mean
        square error of the target simulations' object means and differences),
        ``mcse_se_score``, ``interval_coverage_se_score`` / ``_se_diff`` (share of
        pilots whose interval for the SE holds the true SE), ``coverage_gtheory`` (object
        means of the target simulations +- t(df) times a pilot's projected SE and df,
        against their universe scores), ``median_df_score`` and ``coverage_naive`` (+- z times each simulation's naive
        SE), ``pilots``, ``sims``.
    level : float
    seed : int
    seconds : float
    """

    table: pd.DataFrame
    level: float
    seed: int
    seconds: float

    def tidy(self) -> pd.DataFrame:
        """Rows in the result contract: ``estimand`` ``se_score``/``se_diff`` (projected,
        with the observed and true SEs as extra columns) and ``coverage`` (G theory and
        naive), ``contrast`` ``"pilot -> target"``."""
        rows = []
        for r in self.table.itertuples(index=False):
            c = f"{r.pilot} -> {r.target}"
            for q in ("se_score", "se_diff"):
                rows.append({"estimand": q, "contrast": c, "method": r.method,
                             "estimate": getattr(r, f"projected_{q}"),
                             "observed": getattr(r, f"observed_{q}"),
                             "true": getattr(r, f"true_{q}"), "reps": r.pilots})
            for kind in ("gtheory", "naive"):
                rows.append({"estimand": "coverage", "contrast": c,
                             "method": r.method if kind == "gtheory" else "naive",
                             "estimate": getattr(r, f"coverage_{kind}"), "reps": r.sims})
        return tidy_rows(rows, cluster="", scale="identity", level=self.level,
                         seed=self.seed, note="")

    def __str__(self) -> str:
        show = ["pilot", "target", "method", "true_se_score", "projected_se_score",
                "observed_se_score", "coverage_gtheory", "coverage_naive"]
        return (f"projected vs observed SEs (nominal {self.level:.0%}, seed {self.seed}, "
                f"{self.seconds:.0f} s)\n"
                + self.table[show].to_string(index=False, float_format="{:.4g}".format))


def _text(sizes: Mapping[str, int], design: GDesign) -> str:
    return ", ".join(f"{f}={sizes[f]}" for f in design.facets)


def projection_study(design: GDesign, variances: Sequence[float], *, n_objects: int,
                     pilots: Sequence[Mapping[str, int]],
                     targets: Sequence[Mapping[str, int]], n_pilots: int = 200,
                     sims: int = 2000, drop: float = 0.0, level: float = 0.95,
                     seed: SeedLike = None, progress: bool = True) -> ProjectionStudy:
    """Simulate pilots, project their G studies to targets, simulate the targets.

    Parameters
    ----------
    design : GDesign
        Object not nested; every facet random or fixed.
    variances : sequence of float
        True variance per effect of ``design``.
    n_objects : int
        Objects (models) in every simulated data set.
    pilots, targets : sequences of mappings
        Facet sizes of the pilot designs (G studies) and of the designs projected to.
    n_pilots, sims : int
        Pilot data sets per pilot design; simulated data sets per target.
    drop : float
        Share of each pilot's rows dropped at random (unbalanced pilots: REML).
    level : float
        Level of the intervals.
    seed : int or numpy.random.Generator, optional
        Study seed (every pilot and target data set is drawn from it).
    progress : bool
        Show a progress bar.

    Returns
    -------
    ProjectionStudy
    """
    level = check_level(level)
    n_pilots = check_count("n_pilots", n_pilots)
    sims = check_count("sims", sims)
    rng, recorded = seeded_rng(seed)
    v = np.asarray(variances, dtype=float)
    t0 = time.perf_counter()
    rows = []
    with Progress(progress) as bar:
        task = bar.task("projection study: pilot G studies", len(pilots) * n_pilots)
        for pilot in pilots:
            sizes = {design.object: n_objects, **pilot}
            fits = []
            for _ in range(n_pilots):
                y, _ = simulate_scores(design, v, sizes, reps=1, rng=rng)
                frame = _frame(y[0], design)
                if drop > 0:
                    frame = frame[rng.random(len(frame)) >= drop]
                fits.append(gstudy(frame, design.object, list(design.facets),
                                   outcome="score", nested=dict(design.nesting),
                                   fixed=design.fixed, level=level, reps=400,
                                   seed=int(rng.integers(2**31)), progress=False))
                bar.advance(task)
            for target in targets:
                tsizes = {f: float(target[f]) for f in design.facets
                          if f not in design.fixed}
                proj = [f.project(tsizes) for f in fits]
                true = coefficients(v, design, {**{f: float(target[f])
                                                   for f in design.facets}})
                se = np.array([p["se_score"][0] for p in proj])
                dfs = np.array([p["df_score"][0] for p in proj])
                sd = np.array([p["se_diff"][0] for p in proj])
                row = {"pilot": _text(pilot, design), "target": _text(target, design),
                       "method": fits[0].method,
                       "true_se_score": float(true["se_score"][0]),
                       "true_se_diff": float(true["se_diff"][0]),
                       "projected_se_score": float(np.median(se)),
                       "projected_se_score_q10": float(np.quantile(se, 0.1)),
                       "projected_se_score_q90": float(np.quantile(se, 0.9)),
                       "projected_se_diff": float(np.median(sd)),
                       "projected_var_score_mean": float(np.mean(se**2)),
                       "interval_coverage_se_score": float(np.mean(
                           [p["se_score_lo"][0] <= true["se_score"][0] <= p["se_score_hi"][0]
                            for p in proj])),
                       "interval_coverage_se_diff": float(np.mean(
                           [p["se_diff_lo"][0] <= true["se_diff"][0] <= p["se_diff_hi"][0]
                            for p in proj]))}
                row.update(_observed(design, v, {design.object: n_objects, **target},
                                     sims=sims, rng=rng, level=level, projected=se,
                                     df=dfs))
                row["median_df_score"] = float(np.median(dfs))
                row.update(pilots=n_pilots, sims=sims)
                rows.append(row)
    return ProjectionStudy(table=pd.DataFrame(rows), level=level, seed=recorded,
                           seconds=time.perf_counter() - t0)
