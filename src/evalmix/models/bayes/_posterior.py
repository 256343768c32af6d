"""What every Bayesian engine does with its draws: the per-parameter diagnostics, the
quality checks (R-hat, ESS, divergences, few-level factors) and the tidy tables, shared
by :mod:`evalmix.models.bayes` and :mod:`evalmix.models.bayes.bambi_engine`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalmix.errors import ConvergenceWarning, FewClustersWarning
from evalmix.models.bayes._mcmc_diagnostics import rhat_ess
from evalmix.models.bayes.pymc_model import FEW_LEVELS, population_draws
from evalmix.models.bayes.summaries import fixed_table, variance_table
from evalmix.models.result import DIAGNOSTIC_COLUMNS
from evalmix.models.spec import ModelSpec

__all__ = ["RHAT_MAX", "ESS_MIN", "BAYES_PACKAGES", "diagnostics", "idata_diagnostics",
           "stack_draws", "summarise", "check_quality"]

RHAT_MAX = 1.01
ESS_MIN = 400
#: target_accept of the automatic re-run after divergences.

#: Packages whose versions a Bayesian fit records.
BAYES_PACKAGES = ("numpy", "numba", "nutpie", "pymc", "pytensor", "arviz", "bambi")



def stack_draws(post, names: list[str]) -> np.ndarray:
    """The named variables' draws as one (parameter, chain, draw) array, parameters in
    the order of :func:`diagnostics`'s rows. ``post`` maps names to (chain, draw, ...)."""
    rows = [np.moveaxis(np.asarray(post[n], dtype=float).reshape(
        *np.shape(post[n])[:2], -1), 2, 0) for n in names]
    return np.concatenate(rows, axis=0) if rows else np.zeros((0, 1, 1))


def diagnostics(post, names: list[str], coords, dims, rhat_max: float | None = None,
                stats: tuple[np.ndarray, ...] | None = None) -> pd.DataFrame:
    """Per sampled parameter (ArviZ's labels, e.g. ``u_judge[j1]``): mean, sd, rank
    R-hat, bulk and tail ESS (:func:`~evalmix.models.bayes._mcmc_diagnostics.rhat_ess`; NaN
    ESS when some R-hat exceeds ``rhat_max``; ``stats``: these three already computed
    on the same draws). ``post`` maps names to arrays (chain, draw, ...);
    ``coords``/``dims`` label them."""
    import itertools

    labels = []
    for name in names:
        shape = np.shape(post[name])
        d = list(dims.get(name, ()))
        levels = [list(coords[x]) if x in coords else list(range(n))
                  for x, n in zip(d, shape[2:], strict=False)]
        levels += [list(range(n)) for n in shape[2 + len(levels):]]
        if not levels:
            labels.append(name)
        else:
            labels += [f"{name}[{', '.join(str(v) for v in ix)}]"
                       for ix in itertools.product(*levels)]
    draws = stack_draws(post, names)
    r_hat, ess_bulk, ess_tail = stats if stats is not None else rhat_ess(
        draws, rhat_max=rhat_max)
    flat = draws.reshape(draws.shape[0], -1)
    return pd.DataFrame({"parameter": labels, "mean": flat.mean(axis=1),
                         "sd": flat.std(axis=1, ddof=1), "r_hat": r_hat,
                         "ess_bulk": ess_bulk, "ess_tail": ess_tail},
                        columns=list(DIAGNOSTIC_COLUMNS))


def idata_diagnostics(idata, names: list[str], stats: tuple[np.ndarray, ...] | None = None
                      ) -> pd.DataFrame:
    """:func:`diagnostics` of the named variables of an ArviZ posterior."""
    p = idata.posterior
    return diagnostics({n: p[n].to_numpy() for n in names}, names,
                        {c: p[c].to_numpy() for c in p.coords},
                        {n: p[n].dims[2:] for n in names}, stats=stats)


def summarise(spec: ModelSpec, terms, post: dict[str, np.ndarray], *, level: float,
              seed: int, backend: str = "bayes") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fixed-effects and variance tables from stacked posterior draws."""
    rng = np.random.default_rng(seed + 1)
    pop = population_draws(spec, terms, post, rng=rng)
    sd = {t.sd_var: np.asarray(post[t.sd_var], dtype=float) for t in terms}
    b = pop.get("b", np.zeros((len(next(iter(post.values()))), 0)))
    fixed = fixed_table(spec, terms, b, pop["u"], sd, pop.get("cutpoints"), level=level)
    var = variance_table(spec, terms, sd, post.get("sigma"), level=level, backend=backend)
    return fixed, var


def check_quality(spec: ModelSpec, diag: pd.DataFrame, divergences: int, var: pd.DataFrame
                  ) -> list[tuple[str, type[Warning]]]:
    """The warnings a fit's diagnostics call for: failed convergence checks, and random
    factors with too few levels to identify their variance."""
    msgs: list[tuple[str, type[Warning]]] = []
    bad_r = diag[diag["r_hat"] > RHAT_MAX]
    bad_e = diag[diag["ess_bulk"] < ESS_MIN]
    if divergences or len(bad_r) or len(bad_e):
        parts = []
        if divergences:
            parts.append(f"{divergences} divergent transitions")
        if len(bad_r):
            parts.append(f"R-hat > {RHAT_MAX} for {len(bad_r)} parameters (max "
                         f"{diag['r_hat'].max():.3f}: {bad_r['parameter'].iloc[0]})")
        if len(bad_e):
            parts.append(f"bulk ESS < {ESS_MIN} for {len(bad_e)} parameters (min "
                         f"{diag['ess_bulk'].min():.0f}: "
                         f"{diag.loc[diag['ess_bulk'].idxmin(), 'parameter']})")
        msgs.append(("MCMC did not pass the convergence checks: " + "; ".join(parts)
                     + ". Increase draws/tune (e.g. draws=4000, tune=1000), or simplify "
                     "the random-effect structure; do not report these intervals as is.",
                     ConvergenceWarning))
    seen = set()
    for r in spec.random:
        if r.n_levels < FEW_LEVELS and r.factor not in seen:
            seen.add(r.factor)
            row = var[var["factor"] == r.factor]
            rng = (f" (SD interval {row['sd_lo'].iloc[0]:.2f}-{row['sd_hi'].iloc[0]:.2f})"
                   if len(row) else "")
            msgs.append((
                f"factor {r.factor!r} has only {r.n_levels} levels: its variance is barely "
                f"identified{rng} and leans on the prior. Check the prior sensitivity "
                f"(fit(..., backend=Bayes(sensitivity=2.5))), or treat it as fixed effects "
                f"(fixed=('{r.factor}',)) or fit each level separately "
                f"(by='{r.factor}').", FewClustersWarning))
    return msgs


