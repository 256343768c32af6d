"""One coverage-study cell: draw stacked replications, run interval methods on all at once.

A design cell (clusters ``K``, mean size ``m``, ICC, size CV, estimand) is simulated by
its per-cluster sufficient statistics: sums ``S`` (reps x K), sizes ``n`` and sums of
squares ``Q``. Every intercept-only interval method needs only these, so the methods
below are array functions over all replications of a cell at once (no Python loop over
replications or bootstrap draws):

- ``naive``: normal interval treating items as independent;
- ``CR1``: Liang-Zeger with the G/(G-1) factor (the (N-1)/(N-k) factor is 1 for an
  intercept), t(G - 1);
- ``CR2``: Bell-McCaffrey with the Satterthwaite degrees of freedom of
  Pustejovsky & Tipton (2018) under the working independence model (clubSandwich's
  ``coef_test(test="Satterthwaite")`` for an intercept-only OLS fit);
- ``bootstrap``: pairs cluster bootstrap, percentile interval (boot's ``perc``);
- ``bootstrap-t``: the same resamples studentized by the replicate's CR1 SE;
- ``bootstrap-expanded``: the same resamples, expanded percentile interval (Hesterberg
  2015; :func:`evalmix.inference.bootstrap.expanded_interval`), which corrects the
  percentile interval's under-coverage with few clusters.

Any other method name runs :func:`evalmix.interval` on each replication's table (slow,
but it checks the real entry point).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats

from evalmix.errors import InvalidOptionError
from evalmix.inference.bootstrap import cluster_weights, expanded_interval, norm_inter
from evalmix.inference.sandwich import cr1_factor

__all__ = ["FAST_METHODS", "CELL_DEFAULTS", "simulate_cell", "run_cell", "cell_truth"]

FAST_METHODS: tuple[str, ...] = ("naive", "CR1", "CR2", "bootstrap", "bootstrap-t",
                                 "bootstrap-expanded")
_BOOT_METHODS: tuple[str, ...] = ("bootstrap", "bootstrap-t", "bootstrap-expanded")
ESTIMANDS: tuple[str, ...] = ("mean", "difference")

#: Defaults of a design cell (keys a grid may set).
CELL_DEFAULTS: dict[str, Any] = {
    "estimand": "mean",      # "mean": beta-binomial 0/1 scores; "difference": normal paired diffs
    "n_clusters": 50,
    "cluster_size": 10,
    "icc": 0.1,              # ICC of the scores ("mean") or of the differences ("difference")
    "size_cv": 0.0,
    "p": 0.7,                # true accuracy for "mean"
    "effect": 0.2,           # true paired difference for "difference"
    "sd": 1.0,               # SD of one per-item difference for "difference"
}

#: replications per chunk (fixed so that seeds -> numbers never depend on the backend)
CHUNK_REPS = 1000
#: replications sharing one bootstrap weight matrix
WEIGHT_BLOCK = 100


# ------------------------------------------------------------------------- the design
def cell_truth(cell: Mapping[str, Any]) -> float:
    return float(cell["p"] if cell["estimand"] == "mean" else cell["effect"])


def expected_deff(cell: Mapping[str, Any]) -> float:
    """Design effect of the cell: 1 + ((1 + CV^2) m - 1) rho (Kish; Eldridge et al.)."""
    m, rho, cv = float(cell["cluster_size"]), float(cell["icc"]), float(cell["size_cv"])
    return 1 + ((1 + cv**2) * m - 1) * rho


def check_cell(cell: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(cell) - set(CELL_DEFAULTS)
    if unknown:
        raise InvalidOptionError(f"unknown grid keys {sorted(unknown)}; allowed: {sorted(CELL_DEFAULTS)}")
    full = {**CELL_DEFAULTS, **cell}
    if full["estimand"] not in ESTIMANDS:
        raise InvalidOptionError(f"grid estimand={full['estimand']!r}; allowed: {ESTIMANDS}")
    if not (float(full["n_clusters"]) >= 2 and float(full["cluster_size"]) >= 1):
        raise InvalidOptionError(f"a cell needs n_clusters >= 2 and cluster_size >= 1, got {cell}")
    if not 0 <= float(full["icc"]) < 1 or not 0 < float(full["p"]) < 1:
        raise InvalidOptionError(f"a cell needs icc in [0, 1) and p in (0, 1), got {cell}")
    # "not (inside)" so that NaN, which fails every comparison, is refused too
    if not (0 <= float(full["size_cv"]) < np.inf and float(full["sd"]) > 0
            and np.isfinite([float(full["effect"]), float(full["sd"])]).all()):
        raise InvalidOptionError(f"a cell needs size_cv >= 0, sd > 0 and a finite effect, got {cell}")
    full["n_clusters"] = int(full["n_clusters"])
    for key in ("cluster_size", "icc", "size_cv", "p", "effect", "sd"):
        full[key] = float(full[key])
    return full


def simulate_cell(cell: Mapping[str, Any], reps: int, rng: np.random.Generator):
    """Per-cluster sums ``S``, sizes ``n`` and sums of squares ``Q``, each (reps, K)."""
    k, m, rho, cv = cell["n_clusters"], cell["cluster_size"], cell["icc"], cell["size_cv"]
    if cv > 0:
        shape = 1 / cv**2
        n = np.maximum(1.0, np.round(rng.gamma(shape, m / shape, (reps, k))))
    else:
        n = np.full((reps, k), float(round(m)))
    if cell["estimand"] == "mean":
        p = cell["p"]
        if rho > 0:
            scale = (1 - rho) / rho
            pk = rng.beta(p * scale, (1 - p) * scale, (reps, k))
        else:
            pk = np.full((reps, k), p)
        s = rng.binomial(n.astype(np.int64), pk).astype(float)
        return s, n, s.copy()  # 0/1 scores: sum of squares = sum
    sd, delta = cell["sd"], cell["effect"]
    a = rng.normal(0.0, np.sqrt(rho) * sd, (reps, k))
    e_bar = rng.normal(0.0, 1.0, (reps, k)) * np.sqrt((1 - rho) / n) * sd
    within = (1 - rho) * sd**2 * rng.chisquare(np.maximum(n - 1, 1e-12))
    within = np.where(n > 1, within, 0.0)
    mean_k = delta + a + e_bar
    return n * mean_k, n, n * mean_k**2 + within


# ------------------------------------------------------------------------- the methods
def _tq(level: float, df: np.ndarray) -> np.ndarray:
    return stats.t.ppf(1 - (1 - level) / 2, df)


def stacked_intervals(methods, s, n, q, *, level, boot_reps, rng):
    """Intervals of every fast method for every replication: {method: (est, lo, hi, se)}."""
    reps, g = s.shape
    n_tot = n.sum(axis=1)
    est = s.sum(axis=1) / n_tot
    r = s - n * est[:, None]
    out: dict[str, tuple[np.ndarray, ...]] = {}
    se_cr1 = np.sqrt(cr1_factor(g, n_tot, 1) * (r**2).sum(axis=1)) / n_tot
    if "naive" in methods:
        var_item = (q.sum(axis=1) - n_tot * est**2) / (n_tot - 1)
        se = np.sqrt(np.maximum(var_item, 0) / n_tot)
        z = stats.norm.ppf(1 - (1 - level) / 2)
        out["naive"] = (est, est - z * se, est + z * se, se)
    if "CR1" in methods:
        half = _tq(level, g - 1) * se_cr1
        out["CR1"] = (est, est - half, est + half, se_cr1)
    if "CR2" in methods:
        frac = n / n_tot[:, None]
        c = 1 / (1 - frac)  # squared CR2 adjustment of an intercept-only cluster block
        se = np.sqrt((c * r**2).sum(axis=1)) / n_tot
        tr_b = (c * n * (1 - frac)).sum(axis=1)
        tr_b2 = ((c * n) ** 2).sum(axis=1) - 2 * (c**2 * n**3).sum(axis=1) / n_tot \
            + ((c * n**2).sum(axis=1) / n_tot) ** 2
        df = tr_b**2 / tr_b2
        half = _tq(level, df) * se
        out["CR2"] = (est, est - half, est + half, se)
    if any(m in methods for m in _BOOT_METHODS):
        # fresh resampling weights for every block of WEIGHT_BLOCK replications, so that
        # replications share bootstrap noise only within a block (and memory stays at
        # one G x B weight matrix)
        parts = []
        for b0 in range(0, reps, WEIGHT_BLOCK):
            rows = slice(b0, b0 + WEIGHT_BLOCK)
            w = np.ascontiguousarray(cluster_weights(g, boot_reps, rng).T)  # (G, B)
            parts.append(_bootstrap_block(methods, s[rows], n[rows], est[rows],
                                          se_cr1[rows], w, level))
        for name in _BOOT_METHODS:
            if name in methods:
                lo, hi, se_b = (np.concatenate([p[name][i] for p in parts]) for i in range(3))
                out[name] = (est, lo, hi, se_b)
    return out


def _bootstrap_block(methods, s, n, est, se_cr1, w, level):
    """Percentile and bootstrap-t bounds for a block of replications sharing weights ``w``."""
    g = s.shape[1]
    n_b = n @ w
    theta = (s @ w) / n_b  # (rows, B) bootstrap means
    out = {}
    if "bootstrap" in methods:
        ci = norm_inter(theta, (1 + np.array([-level, level])) / 2)
        out["bootstrap"] = (ci[:, 0], ci[:, 1], theta.std(axis=1, ddof=1))
    if "bootstrap-expanded" in methods:
        ci = expanded_interval(theta, g, level)
        out["bootstrap-expanded"] = (ci[:, 0], ci[:, 1], theta.std(axis=1, ddof=1))
    if "bootstrap-t" in methods:
        s2 = (s * s) @ w
        ss = s2 - 2 * theta * ((s * n) @ w) + theta**2 * ((n * n) @ w)
        # the expansion cancels to rounding error when every drawn cluster has the same
        # mean: that resample's se is 0
        ss = np.where(ss > 1e-10 * s2, ss, 0.0)
        se_b = np.sqrt(cr1_factor(g, n_b, 1) * ss) / n_b
        with np.errstate(divide="ignore", invalid="ignore"):
            t_b = (theta - est[:, None]) / se_b
        alpha_t = (1 + np.array([level, -level])) / 2
        # a resample of identical clusters has se 0 and t = 0/0 or +-inf; like boot, drop
        # those draws (row by row: rare, so a short loop)
        bad = ~np.isfinite(t_b).all(axis=1)
        qt = np.empty((s.shape[0], 2))
        if (~bad).any():
            qt[~bad] = norm_inter(t_b[~bad], alpha_t)
        for i in np.flatnonzero(bad):
            finite = t_b[i][np.isfinite(t_b[i])]
            qt[i] = norm_inter(finite, alpha_t) if finite.size >= 2 else np.nan
        out["bootstrap-t"] = (est - se_cr1 * qt[:, 0], est - se_cr1 * qt[:, 1], se_cr1)
    return out


def _items_table(cell, s_row, n_row, q_row):
    """A table of one replication for :func:`evalmix.interval` (generic methods)."""
    import pandas as pd

    from evalmix.data import read

    sizes = n_row.astype(int)
    cluster = np.repeat(np.arange(sizes.size), sizes)
    if cell["estimand"] == "mean":
        pos = np.arange(cluster.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        y = (pos < np.repeat(s_row, sizes)).astype(float)
        frame = pd.DataFrame({"cluster": cluster.astype(str),
                              "item": np.arange(cluster.size).astype(str), "y": y})
        return read(frame, outcome="y", clusters={"cluster": "cluster", "item": "item"})
    # per-item differences with the replication's cluster sums and within-cluster SS
    mean_k = s_row / n_row
    ss_w = np.maximum(q_row - n_row * mean_k**2, 0)
    z = np.zeros(cluster.size)
    start = np.cumsum(sizes) - sizes
    for j, (st, nj) in enumerate(zip(start, sizes, strict=True)):
        if nj > 1:
            v = np.arange(nj) - (nj - 1) / 2
            z[st:st + nj] = v * np.sqrt(ss_w[j] / (v**2).sum())
    d = np.repeat(mean_k, sizes) + z
    item = np.arange(cluster.size).astype(str)
    frame = pd.DataFrame({
        "cluster": np.tile(cluster.astype(str), 2), "item": np.tile(item, 2),
        "condition": np.repeat(["control", "treatment"], cluster.size),
        "y": np.concatenate([np.zeros(cluster.size), d]),
    })
    return read(frame, outcome="y", condition="condition",
                clusters={"cluster": "cluster", "item": "item"})


def _generic(method, cell, s, n, q, *, level, boot_reps, seeds, interval_kwargs):
    from evalmix.inference.api import interval

    est, lo, hi, se = (np.full(s.shape[0], np.nan) for _ in range(4))
    for i in range(s.shape[0]):
        table = _items_table(cell, s[i], n[i], q[i])
        boot = ({"reps": boot_reps, "seed": int(seeds[i])}
                if method in ("bootstrap", "wild") else {})
        res = interval(table, cell["estimand"], method=method, cluster="cluster",
                       level=level, **boot, **dict(interval_kwargs or {}))
        est[i], lo[i], hi[i], se[i] = res.estimate, res.lo, res.hi, res.se
    return est, lo, hi, se


def run_cell(cell: Mapping[str, Any], methods, *, reps: int, level: float, boot_reps: int,
             seed_seq: np.random.SeedSequence, interval_kwargs=None) -> list[dict[str, Any]]:
    """Coverage of each method in one cell; rows ready for the tidy table."""
    t0 = time.perf_counter()
    cell = check_cell(cell)
    truth = cell_truth(cell)
    fast = [m for m in methods if m in FAST_METHODS]
    slow = [m for m in methods if m not in FAST_METHODS]
    n_chunks = -(-reps // CHUNK_REPS)
    acc: dict[str, list[tuple[np.ndarray, ...]]] = {m: [] for m in methods}
    for c, child in enumerate(seed_seq.spawn(n_chunks)):
        size = min(CHUNK_REPS, reps - c * CHUNK_REPS)
        data_rng, boot_rng, generic_ss = (np.random.default_rng(s) for s in child.spawn(3))
        s, n, q = simulate_cell(cell, size, data_rng)
        res = stacked_intervals(fast, s, n, q, level=level, boot_reps=boot_reps, rng=boot_rng)
        for m in fast:
            acc[m].append(res[m])
        for m in slow:
            seeds = generic_ss.integers(0, 2**31 - 1, size)
            acc[m].append(_generic(m, cell, s, n, q, level=level, boot_reps=boot_reps,
                                   seeds=seeds, interval_kwargs=interval_kwargs))
    deff = expected_deff(cell)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    rows = []
    for m in methods:
        est, lo, hi, se = (np.concatenate(parts) for parts in zip(*acc[m], strict=True))
        ok = np.isfinite(lo) & np.isfinite(hi)
        cov = (lo <= truth) & (truth <= hi)
        n_ok = int(ok.sum())
        rate = float(cov[ok].mean()) if n_ok else float("nan")
        rows.append({
            **cell, "method": m, "level": level, "coverage": rate,
            "mcse": float(np.sqrt(rate * (1 - rate) / n_ok)) if n_ok else float("nan"),
            "mean_width": float(np.mean((hi - lo)[ok])) if n_ok else float("nan"),
            "miss_below": float(np.mean(hi[ok] < truth)) if n_ok else float("nan"),
            "miss_above": float(np.mean(lo[ok] > truth)) if n_ok else float("nan"),
            "mean_se": float(np.nanmean(se)), "sd_estimate": float(np.nanstd(est, ddof=1)),
            "reps": reps, "n_failed": reps - n_ok, "boot_reps": boot_reps, "deff": deff,
            "naive_analytic": float(2 * stats.norm.cdf(z / np.sqrt(deff)) - 1),
            "seconds": time.perf_counter() - t0,
        })
    return rows
