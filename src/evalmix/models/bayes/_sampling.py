"""Running nutpie (or PyMC's NUTS) for :func:`~evalmix.models.bayes.fit_bayes`: one run of
fixed length, or one that samples until its convergence checks pass (``draws=None``),
with the kernel's tree-depth cap, the mass matrix and the draws' bookkeeping.

The checks follow Vehtari et al. (2021): rank-normalised split R-hat and bulk and tail
ESS of every stored parameter (:mod:`evalmix.models.bayes._mcmc_diagnostics`).

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Buerkner, P.-C. (2021).
Rank-normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC. Bayesian Analysis 16(2): 667-718. doi:10.1214/20-BA1221
"""

from __future__ import annotations

import importlib.util
import time
from typing import Literal

import numpy as np

from evalmix.models.bayes._mcmc_diagnostics import rhat_ess
from evalmix.models.bayes._nutpie import Run, in_notebook, start
from evalmix.models.bayes._posterior import ESS_MIN, stack_draws
from evalmix.models.bayes._watch import SamplingProgress, projected_draws
from evalmix.models.bayes.pymc_model import (
    RAYLEIGH_SCALE,
    build_model,
    draw_marginal_sd,
    has_nested_factors,
)
from evalmix.models.result import PosteriorDraws
from evalmix.models.spec import ModelSpec

__all__ = ["DRAWS_MAX", "RETRY_TARGET_ACCEPT", "RHAT_STOP", "mass_matrix", "sample",
           "tree_depth"]


#: NUTS target acceptance of the re-run after divergences (smaller steps).
RETRY_TARGET_ACCEPT = 0.95
#: No re-run after divergences when the run takes at least this many leapfrog steps per
#: draw: the smaller step size multiplies them (MT-Bench with 90 judge x condition
#: slopes: 28 -> 124 steps per draw, 25 -> 117 in warm-up; the re-run took 20 of the
#: fit's 23 minutes); the divergences are then reported in the checks' warning. The
#: kernel's capped trees (:func:`tree_depth`) take at most 7 steps per draw, and its
#: re-run at most 4x as many (:data:`RETRY_DEPTH_EXTRA`).
RETRY_MAX_STEPS_PER_DRAW = 20.0


def _has(mod: str) -> bool:
    return importlib.util.find_spec(mod) is not None


def _stack(a: np.ndarray) -> np.ndarray:
    """(chain, draw, ...) -> (chain x draw, ...)."""
    return a.reshape((-1, *a.shape[2:]))


def sample(spec: ModelSpec, data, terms, *, engine: str, sampler: str, draws: int | None,
            tune: int, chains: int, seed: int, prior_scale: float, progress: bool,
            target_accept: float | None, stop_on_divergence: bool = False,
            retry: bool = False, capped: bool = True):
    """Return (draws, engine, sampler, coordinates, budget, checked): ``draws`` the
    :class:`~evalmix.models.result.PosteriorDraws` after warm-up (``attrs``: the
    ``max_tree_depth`` the kernel's trees were capped at, else None); ``coordinates``
    says which terms the kernel sampled in other coordinates (empty for the PyMC
    engine); ``budget``, the post-warm-up leapfrog steps per chain when sampling stopped
    at :data:`STEPS_MAX` (else None). ``draws=None``: sample until the checks pass
    (:func:`_sample_to_target`; ``checked``: the R-hat and ESS of its last check, else
    None). ``capped``: the kernel's trees capped at :func:`tree_depth`
    (:data:`RETRY_DEPTH_EXTRA` levels deeper when ``retry``, the re-run after
    divergences)."""
    kw: dict = {"target_accept": target_accept} if target_accept else {}
    depth = None
    if engine == "kernel":
        from evalmix.models.bayes.kernel import DensityKernel

        kern = DensityKernel(spec, data, terms, prior_scale=prior_scale)
        model, labels, dims = kern.nutpie_model()
        coords = kern.coordinates()
        depth = tree_depth(spec, terms, data, kern.ndim) if capped else None
        if depth is not None:
            depth += RETRY_DEPTH_EXTRA if retry else 0
            kw["maxdepth"] = depth
    else:
        pm_model, _ = build_model(spec, data, prior_scale=prior_scale, terms=terms)
        coords = {}
        if sampler != "nutpie":
            import pymc as pm

            with pm_model:
                idata = pm.sample(draws=draws or DRAWS_MAX // 2, tune=tune, chains=chains,
                                  cores=1, random_seed=seed, progressbar=progress,
                                  target_accept=target_accept or 0.8,
                                  compute_convergence_checks=False)
            return PosteriorDraws.from_inference_data(idata), "pymc", sampler, coords, \
                None, None
        import nutpie

        compiled = nutpie.compile_pymc_model(pm_model)
        model, labels, dims = compiled._make_model(None), compiled.coords, compiled.dims
    # draws=None: evalmix's own lines (draws projected from the checks, with an ETA)
    # instead of nutpie's bar up to DRAWS_MAX, except in a notebook (nutpie's HTML bar)
    run = start(model, draws=draws or DRAWS_MAX, tune=tune, chains=chains, seed=seed,
                progress=progress and (draws is not None or in_notebook()), low_rank=mass_matrix(spec) == "low-rank", **kw)
    budget = checked = None
    if draws is not None:
        post, stats = _fixed_draws(run, draws)
    else:
        post, stats, budget, checked = _sample_to_target(
            run, spec, terms, chains=chains, seed=seed, prior_scale=prior_scale,
            stop_on_divergence=stop_on_divergence, tune=tune,
            progress=progress and not in_notebook())
    stats = {k: v for k, v in stats.items() if v.ndim == 2}
    return (PosteriorDraws(post, stats, coords=labels, dims=dims or {},
                           attrs={"max_tree_depth": depth}),
            engine, "nutpie", coords, budget, checked)


def _fixed_draws(run: Run, draws: int) -> tuple[dict, dict]:
    """The posterior and statistics of a run of ``draws`` draws per chain after
    warm-up; after Ctrl-C, the draws so far (:meth:`Run.results`)."""
    draw_b, stat_b = run.results().get_arrow_trace()
    n_tune = _n_tune(stat_b)
    n = min([min(draws, s.num_rows - t) for s, t in zip(stat_b, n_tune, strict=True)]
            or [0])
    if n < 1:   # Ctrl-C before the first draw after warm-up
        raise KeyboardInterrupt
    return _arrow_arrays(draw_b, n_tune, n), _arrow_arrays(stat_b, n_tune, n)


def _n_tune(stat_batches) -> list[int]:
    """Warm-up draws in each chain's statistics (nutpie's ``tuning`` flag)."""
    return [int(np.asarray(s.column("tuning")).sum()) for s in stat_batches]


#: Models with at least this many fixed columns are sampled with nutpie's low-rank
#: modified mass matrix (:func:`mass_matrix`).
LOW_RANK_MIN_FIXED = 8


def mass_matrix(spec: ModelSpec) -> Literal["diagonal", "low-rank"]:
    """The nutpie mass-matrix adaptation for ``spec``: ``"low-rank"`` (a diagonal plus the
    leading eigenvectors of the draws' and gradients' covariance, fitted by minimising
    a Fisher divergence; Seyboldt, Carlson and Carpenter, nutpie's
    ``low_rank_modified_mass_matrix``) when the model has at least
    :data:`LOW_RANK_MIN_FIXED` fixed columns, else ``"diagonal"``.

    Why: K treatment-coded conditions share their reference level's rows, so their K - 1
    contrasts are correlated with each other (about 1/2 each when balanced), a direction
    a diagonal mass matrix cannot follow. Measured (2 x 500 draws after 400 warm-up,
    same seed, load ~3): MT-Bench (31 fixed columns) 23.1 -> 7.8 leapfrog steps per draw,
    max R-hat 1.028 -> 1.007, min bulk ESS 137 -> 453; the 4,320-row simulated design
    (3 columns) gained nothing (7.0 steps per draw either way, warm-up 8.4 -> 12.3)."""
    return "low-rank" if len(spec.fixed_names) >= LOW_RANK_MIN_FIXED else "diagonal"


#: With a diagonal mass matrix and at least :data:`SHORT_TREE_MIN_DIM` unconstrained
#: coordinates, the kernel's NUTS trees stop at this depth: at most ``2**depth - 1``
#: leapfrog steps per draw (nutpie's default depth is 10; :func:`tree_depth`).
SHORT_TREE_DEPTH = 3
SHORT_TREE_MIN_DIM = 200
#: The re-run after divergences (smaller steps) may take trees this many levels deeper.
RETRY_DEPTH_EXTRA = 2


def tree_depth(spec: ModelSpec, terms, data, ndim: int) -> int | None:
    """The kernel's cap on NUTS's tree depth for ``spec`` (random ``terms``, collapsed
    ``data``) with ``ndim`` unconstrained coordinates: :data:`SHORT_TREE_DEPTH` with a
    diagonal mass matrix (:func:`mass_matrix`), at least :data:`SHORT_TREE_MIN_DIM`
    coordinates and no nested random factors
    (:func:`~evalmix.models.bayes.pymc_model.has_nested_factors`), else None (nutpie's
    default). A run with capped trees that does not pass its checks is run again
    without the cap (``provenance["uncapped_rerun"]``).

    Why: NUTS extends a trajectory until it turns back, about half a period of the
    posterior's widest direction. On a near-Gaussian posterior that is the best length
    for the means (draws are antithetic: bulk ESS above the number of draws) and the
    worst for squared deviations, which the folded R-hat and the tail ESS of the checks
    measure: their autocorrelation over a trajectory of angle ``t`` is ``cos(t)**2``,
    ~1 at half a period and 0 at a quarter. Many well-identified levels (a large
    ``ndim``) make the step size small and the turn come at 8-15 steps; a tree of depth
    3 stops at 7, about a quarter period, at half the gradients per draw, and the
    checks pass after fewer draws. Measured (fresh processes, draws set by the checks;
    docs/models.md, *Latency*): 100k rows 15-17 -> 5.5-8.7 s over 8 seeds; 108k rows
    with 1,500 scenarios 27.5 -> 19.2 s; ordinal 4,050 rows 6.5 -> 4.2-5.2 s.

    Not with the low-rank mass matrix (correlated fixed effects): there the conditions'
    bulk ESS binds and shorter trees need more draws (12 models x 200 items, depth 3:
    4.1 -> 5.3 s; MT-Bench with judge slopes at depth 4: 13.5-16.6 s on 5 of 8 seeds,
    but on 2 the category SD had not mixed after ~3,000 draws). Nor with nested
    factors: an outer level trades off against the mean of its inner levels, another
    direction the diagonal mass matrix cannot follow (60 items x 5 passages, 600 rows:
    depth 3 did not pass in 4,000 draws, 3.2 s without the cap; 400 items in 5 groups:
    about the same). Designs whose trees stop at depth 3 anyway (most of a few thousand
    rows) are unchanged. Nor when the pilot made a term non-centred that the prior-based
    rule would not have (:func:`~evalmix.models.bayes.pymc_model.choose_parameterization`,
    ``TermInfo.pilot``): a weakly identified SD of many levels is then the slowest
    direction, and short trees random-walk along it (issue 35's 100k design: the capped
    run did not pass in 4,000 draws, the uncapped one passed after 1,967 at 15 steps
    per draw)."""
    if (mass_matrix(spec) == "diagonal" and ndim >= SHORT_TREE_MIN_DIM
            and not has_nested_factors(terms, data) and not any(t.pilot for t in terms)):
        return SHORT_TREE_DEPTH
    return None


#: ``draws=None``: the first convergence check after this many draws per chain, then
#: after at least ``DRAWS_GROWTH`` times as many (more when a check is slow next to the
#: sampling, see :func:`_sample_to_target`), up to ``DRAWS_MAX`` per chain.
DRAWS_FIRST = 200
DRAWS_GROWTH = 1.1
DRAWS_MAX = 4000
#: ``draws=None``: sampling also stops once a chain has taken this many leapfrog steps
#: (gradient evaluations) after warm-up (2,000 draws at 25 steps per draw; fits that
#: pass their checks here take 3,000-15,000): a bound on the run time of slowly mixing
#: models (MT-Bench with 90 judge x condition slopes: ~28 steps per draw at ~3 ms per
#: step), which then get the checks' warning.
STEPS_MAX = 50_000
#: sampling time between two checks, at least this many times the last check's time
CHECK_SPACING = 5.0
#: ``draws=None`` stops only when every R-hat is at most this, a margin below the
#: reported check's ``RHAT_MAX`` (1.01): a fit that stops exactly at the threshold
#: reports an R-hat at its edge, which a rerun with another seed fails half the time.
RHAT_STOP = 1.008


def _sample_to_target(run: Run, spec, terms, *, chains: int, seed: int, prior_scale: float,
                      stop_on_divergence: bool, tune: int = 0, progress: bool = False):
    """Sample in the background and stop at the first check where every parameter
    passes (bulk and tail ESS >= ``ESS_MIN``, R-hat <= ``RHAT_STOP``, a margin below
    the reported check's ``RHAT_MAX``) or, with
    ``stop_on_divergence`` (the caller re-runs at a higher target_accept), a divergence
    appears while a re-run pays (:func:`_retry_pays`); else at ``DRAWS_MAX`` draws per
    chain or once a chain has taken ``STEPS_MAX`` leapfrog steps after warm-up (and
    every chain has at least 50 draws, the fewest ``fit_bayes`` takes). ``run`` samples
    up to ``DRAWS_MAX`` draws per chain. Returns (posterior, statistics, the post-warm-up
    steps of the longest chain when ``STEPS_MAX`` stopped it, else
    None, and the (R-hat, bulk ESS, tail ESS) of every parameter of :func:`_names` from
    the check that passed, else None: the fit reports these, computed on the same
    draws, instead of computing them again, ~0.7 s at 100k rows).

    The chains keep running while a check is computed on a copy of the trace; the
    posterior kept is exactly the one checked (the first ``n`` draws of every chain),
    so the checks are the ones reported. Checks come after ``DRAWS_FIRST`` draws, then
    every ``DRAWS_GROWTH`` times as many, spaced so that checking takes at most about
    ``1 / CHECK_SPACING`` of the time; between checks the trace is polled at the draw
    rate so far (measured after warm-up), so sampling stops within a few draws of each
    check point. The trace is read as nutpie's raw Arrow batches (converting it to
    ArviZ at every check took ~1 s). A check first recomputes only the parameters that
    failed the previous one (each parameter's R-hat and ESS are its own): while one of
    them still fails, the others are not checked (a full check of 486 parameters x 2 x
    1,000 draws took ~1-2 s of a core next to the two sampler threads); the sampling
    stops only after a check of every parameter. With ``progress``: the warm-up and the
    draws per chain, whose total is re-projected at every check
    (:func:`~evalmix.models.bayes._watch.projected_draws`), with an ETA."""
    with SamplingProgress(progress, chains=chains, tune=tune, draws_first=DRAWS_FIRST) as bar:
        return _sample_watched(run, spec, terms, chains=chains, seed=seed,
                               prior_scale=prior_scale, stop_on_divergence=stop_on_divergence,
                               bar=bar)


def _sample_watched(run: Run, spec, terms, *, chains: int, seed: int, prior_scale: float,
                    stop_on_divergence: bool, bar: SamplingProgress):
    """:func:`_sample_to_target`'s loop, reporting to ``bar``."""
    target = DRAWS_FIRST
    first = None            # (time, draws) at the first snapshot after warm-up
    budget = None
    watch = np.zeros(0, dtype=np.int64)   # parameters that failed the last check
    checked = None
    try:
        while True:
            done = run.finished()
            draw_b, stat_b = run.snapshot().get_arrow_trace()
            now = time.perf_counter()
            n_tune = _n_tune(stat_b)
            n = min([s.num_rows - t for s, t in zip(stat_b, n_tune, strict=True)]
                    + [0] * (chains - len(stat_b)))
            if n > 0 and first is None:
                first = (now, n)
            bar.snapshot(min(n_tune + [0] * (chains - len(n_tune))), n)
            steps = max([int(np.asarray(s.column("n_steps"))[t:].sum())
                         for s, t in zip(stat_b, n_tune, strict=True)] + [0])
            if n >= 50 and steps >= STEPS_MAX and not done:
                budget = steps
                post = _arrow_arrays(draw_b, n_tune, n)
                stats = _arrow_arrays(stat_b, n_tune, n)
                break
            if done or n >= target:
                post = _arrow_arrays(draw_b, n_tune, n)
                stats = _arrow_arrays(stat_b, n_tune, n)
                if done or (stop_on_divergence and bool(stats["diverging"].any())
                            and _retry_pays(stats["n_steps"])):
                    break
                t_check = time.thread_time()
                post.update(_marginal_sds(spec, terms, post, prior_scale=prior_scale,
                                          seed=seed))
                draws = stack_draws(post, _names(spec, terms, post))
                # the parameters that failed the last check first: while one of them
                # still fails, the others need no check (each is checked on its own)
                fail, last = (_failing(draws[watch]) if watch.size
                              else (np.zeros(0, dtype=bool), None))
                if fail.any():
                    watch = watch[fail]
                    t_check = time.thread_time() - t_check
                else:
                    # the spacing follows the check that usually runs: a full check
                    # comes only when the watched parameters pass (2-3 times a fit), and
                    # spacing by its time overshot (20k: 619 -> 1,048 draws)
                    t_sub = time.thread_time() - t_check if watch.size else None
                    fail, full = _failing(draws)
                    last = full
                    if not fail.any():
                        checked = full
                        r_hat, ess_bulk, ess_tail = full
                        bar.checked(n, n, r_hat, ess_bulk, ess_tail, ESS_MIN)
                        break
                    watch = np.flatnonzero(fail)
                    t_check = t_sub if t_sub is not None else time.thread_time() - t_check
                rate = _rate(first, now, n) or 0.0
                target = int(max(n + 50, DRAWS_GROWTH * n, n + CHECK_SPACING * t_check * rate))
                if last is not None:
                    r_hat, ess_bulk, ess_tail = last
                    bar.checked(n, projected_draws(n, r_hat, ess_bulk, ess_tail,
                                                   rhat_max=RHAT_STOP, ess_min=ESS_MIN,
                                                   draws_max=DRAWS_MAX),
                                r_hat, ess_bulk, ess_tail, ESS_MIN)
                continue
            # sleep about as long as the missing draws take (0.1 s during warm-up)
            pace = _rate(first, now, n)
            time.sleep(0.1 if pace is None else min(0.5, max(0.01, (target - n) / pace)))
        if not done:
            run.cancel()
    except BaseException:   # KeyboardInterrupt included: stop the threads
        run.cancel()
        raise
    return post, stats, budget, checked


def _retry_pays(n_steps: np.ndarray) -> bool:
    """Whether a run taking ``n_steps`` leapfrog steps per draw is cheap enough to re-run
    at ``RETRY_TARGET_ACCEPT`` after divergences (:data:`RETRY_MAX_STEPS_PER_DRAW`)."""
    return float(np.mean(n_steps)) < RETRY_MAX_STEPS_PER_DRAW


def _failing(draws: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Per parameter of (parameter, chain, draw): R-hat above ``RHAT_STOP`` or bulk or
    tail ESS below ``ESS_MIN`` (the ESS only when every R-hat passes; NaN values pass,
    as in the reported diagnostics' min / max); and the (R-hat, bulk ESS, tail ESS)."""
    r, eb, et = rhat_ess(draws, rhat_max=RHAT_STOP)
    return (r > RHAT_STOP) | (eb < ESS_MIN) | (et < ESS_MIN), (r, eb, et)


def _rate(first, now: float, n: int) -> float | None:
    """Draws per second per chain since the first post-warm-up snapshot ``first``."""
    if first is None or n <= first[1] or now <= first[0]:
        return None
    return (n - first[1]) / (now - first[0])


def _arrow_arrays(batches, n_tune: list[int], n: int) -> dict[str, np.ndarray]:
    """The first ``n`` post-warm-up rows of every chain: name -> (chains, n, ...)."""
    import pyarrow

    out: dict[str, list[np.ndarray]] = {}
    for b, t in zip(batches, n_tune, strict=True):
        part = b.slice(t, n)
        for name in part.column_names:
            col = part.column(name)
            meta = col.field.metadata or {}
            shape = [int(x) for x in meta.get(b"shape", b"").decode().split(",") if x]
            arr = pyarrow.array(col)
            if hasattr(arr, "flatten"):
                arr = arr.flatten()
            vals = arr.to_numpy(zero_copy_only=False)
            if vals.size != n * int(np.prod(shape)):
                continue   # variable-size statistics (none stored by default)
            out.setdefault(name, []).append(vals.reshape((n, *shape)))
    return {k: np.stack(v) for k, v in out.items() if len(v) == len(batches)}


def _names(spec: ModelSpec, terms, post) -> list[str]:
    """The stored variables that the checks cover (``post``: a posterior mapping)."""
    names = ["b"] * bool(spec.fixed_names) + [v for t in terms for v in (t.sd_var, t.var)]
    return names + [n for n in ("sigma", "cutpoints") if n in post]


def _marginal_sds(spec: ModelSpec, terms, post, *, prior_scale: float, seed: int
                  ) -> dict[str, np.ndarray]:
    """The SDs of ``marginal`` terms (integrated out while sampling) as exact draws from
    ``sd | u``, one per posterior draw: name -> (chain, draw). ``post`` maps names to
    arrays (chain, draw, ...); same draws for the same seed and level effects."""
    ysd = (float(np.std(spec.y)) or 1.0) if spec.family == "gaussian" else 1.0
    rng = np.random.default_rng([seed, 7])
    out = {}
    for t in terms:
        if t.marginal:
            out[t.sd_var] = draw_marginal_sd(np.asarray(post[t.var]), _n_free(t),
                                             RAYLEIGH_SCALE * prior_scale * ysd, rng)
    return out


def _n_free(t) -> int:
    """Free coordinates of a term's level effects (``G - 1`` when zero-sum)."""
    return t.n_levels - 1 if t.zero_sum else t.n_levels
