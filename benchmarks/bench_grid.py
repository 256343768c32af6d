"""Benchmark: a 10,000-replication coverage grid of 10 cells in under 2 minutes.

Target (issue 6): ``evalmix.plan.coverage`` over issue 3's design (N = 1,000 scores,
m in {1, 5, 10, 20, 50}, rho in {0.1, 0.2}; 10 cells) with 10,000 replications per cell
and naive, CR1, CR2, percentile and studentized cluster bootstrap (999 resamples each)
in under 120 s on this 2-core machine. For scale, a per-replication loop (build each
replication's rows, call ``evalmix.inference.bootstrap.cluster_bootstrap`` and a CR1
fit) is timed on a few replications and extrapolated.

Usage: ``python benchmarks/bench_grid.py [--jobs 2] [--reps 10000]``; writes
``benchmarks/results/grid.json`` and ``benchmarks/results/grid_coverage.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from evalmix.plan._cells import check_cell, simulate_cell
from evalmix.plan.study import coverage

TARGET_SECONDS = 120.0
METHODS = ("naive", "CR1", "CR2", "bootstrap", "bootstrap-t")
RESULTS = Path(__file__).resolve().parent / "results"


def loop_baseline(n_reps: int = 20) -> float:
    """Seconds per replication of the cell with 20 clusters of 50, one rep at a time."""
    from evalmix.inference.bootstrap import cluster_bootstrap

    cell = check_cell({"n_clusters": 20, "cluster_size": 50, "icc": 0.1})
    s, n, _ = simulate_cell(cell, n_reps, np.random.default_rng(1))
    t0 = time.perf_counter()
    for i in range(n_reps):
        sizes = n[i].astype(int)
        cl = np.repeat(np.arange(sizes.size), sizes)
        pos = np.arange(cl.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        y = (pos < np.repeat(s[i], sizes)).astype(float)
        X = np.ones((y.size, 1))
        for ci in ("percentile", "studentized"):
            cluster_bootstrap(X, y, cl, reps=999, seed=i, ci=ci)
    return (time.perf_counter() - t0) / n_reps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = coverage(METHODS, None, reps=args.reps, seed=args.seed, jobs=args.jobs,
                   progress=False)
    wall = time.perf_counter() - t0
    cells = res.table["cell"].nunique()
    print(f"coverage grid: {cells} cells x {args.reps:,} reps x {len(METHODS)} methods, "
          f"jobs={args.jobs}: {wall:.1f} s (target < {TARGET_SECONDS:.0f} s)")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_rep = loop_baseline()
    loop_total = per_rep * args.reps * cells
    print(f"per-replication loop (cluster_bootstrap percentile + studentized): "
          f"{per_rep * 1e3:.1f} ms per replication -> about {loop_total / 60:.0f} min for "
          f"the grid on one core ({loop_total / wall:.0f}x slower)")
    RESULTS.mkdir(exist_ok=True)
    res.table.to_csv(RESULTS / "grid_coverage.csv", index=False)
    record = {
        "benchmark": "coverage grid", "cells": int(cells), "reps": args.reps,
        "methods": list(METHODS), "boot_reps": res.boot_reps, "jobs": args.jobs,
        "seconds": round(wall, 2), "target_seconds": TARGET_SECONDS,
        "passed": wall < TARGET_SECONDS, "loop_seconds_per_rep": round(per_rep, 4),
        "loop_extrapolated_seconds": round(loop_total, 1),
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "numpy": np.__version__, "machine": platform.machine(),
    }
    (RESULTS / "grid.json").write_text(json.dumps(record, indent=1))
    return 0 if wall < TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
