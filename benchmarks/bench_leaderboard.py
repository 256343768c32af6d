"""Benchmark: a 100-model leaderboard (issue 14 shape) -- all pairwise differences, Holm,
max-t simultaneous intervals, rank intervals and tier letters.

Data: :func:`evalmix.sim.boards.baseline_leaderboard` defaults (100 models vs one
baseline on 805 items, 5 judges each judging a random subset, about 100,000 rows).
Timed in the same run on the same table:

* ``leaderboard(table, cluster="item")`` end to end (CR2 with Satterthwaite df, 10,000
  max-t draws, Holm, rank ranges, tier letters) and the same with CR0;
* its core alone: the one K x K clustered covariance and the SEs of all 4,950
  differences (CR0);
* the obvious baseline for that core: a plain numpy loop over the 4,950 pairs, each pair
  its own two-group cell-means regression clustered by item (CR0 variance of the
  difference; rows pre-split by model so a pair touches only its two models' rows). It
  gives the per-pair SEs only (no joint max-t, ranks or letters); its SEs are checked
  against the leaderboard's;
* :func:`evalmix.inference.compare_all.compare_all` (the earlier all-pairs function: CR2 df
  one contrast at a time, max-t by a pairs cluster bootstrap) with ``COMPARE_REPS``
  resamples, measured once (not scaled).

The *report* part (``--report-only`` runs it alone and keeps the other keys of the JSON
from their own run) times, in one run on the same table written as CSV:

* ``evalmix report --fast`` (design-based methods at every cluster level, the
  judge-stratified rows of the sparse judge x model cells, the 100-model leaderboard and
  the files; target ``REPORT_FAST_TARGET_S``);
* the full report with the Laplace GLMM (``--backend statsmodels``: the fast report plus
  the crossed logit GLMM; target ``REPORT_FULL_TARGET_S``);
* the plain baseline: each model's win rate with a naive binomial SE (a pandas
  groupby), and ``leaderboard(table, cluster="item")`` alone.

The machine is shared, so each timing records the load average (``uptime``) before and
after it, and the process CPU seconds it used (``time.process_time``: every thread of
this process) beside the wall time.

Usage: ``python benchmarks/bench_leaderboard.py [--report-only]``; writes
``benchmarks/results/leaderboard.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evalmix.inference.compare_all import _cells, cell_means_vcov, compare_all
from evalmix.inference.leaderboard import leaderboard
from evalmix.inference.ranking import all_pairs, pair_se
from evalmix.sim.boards import baseline_leaderboard

TARGET_SECONDS = 5.0
#: issue 14: ``evalmix report --fast`` and the full report with the Laplace model
REPORT_FAST_TARGET_S = 60.0
REPORT_FULL_TARGET_S = 300.0
COMPARE_REPS = 100
OUT = Path(__file__).resolve().parent / "results" / "leaderboard.json"


def best_of(fn, n=3):
    times, out = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def pair_loop(y: np.ndarray, model: np.ndarray, item: np.ndarray, k: int, g: int
              ) -> np.ndarray:
    """CR0 SE of every difference of two win rates, one small regression per pair."""
    rows = [np.flatnonzero(model == m) for m in range(k)]
    se = np.empty(k * (k - 1) // 2)
    p = 0
    for a in range(k):
        for b in range(a + 1, k):
            s = np.zeros(g)
            for m, sign in ((a, 1.0), (b, -1.0)):
                r = rows[m]
                e = y[r] - y[r].mean()
                s += sign * np.bincount(item[r], weights=e, minlength=g) / r.size
            se[p] = np.sqrt(s @ s)
            p += 1
    return se


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(fn) -> tuple[dict, object]:
    """Wall and process CPU seconds of ``fn()``, with the load before and after."""
    before = _uptime()
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "uptime_before": before,
            "uptime_after": _uptime()}, out


def report_part(sim) -> dict:
    """The report timings and their ratios to the plain baseline, in one run."""
    from evalmix.cli import main as cli

    table = sim.table()
    folder = Path(tempfile.mkdtemp(prefix="bench-leaderboard-"))
    data = folder / "leaderboard.csv"
    sim.data.to_csv(data, index=False)
    base_args = [str(data), "--outcome", "outcome", "--model-a", "model_a", "--model-b",
                 "model_b", "--cluster", "item=item", "--cluster", "judge=judge",
                 "--seed", "1", "--quiet"]

    def run(*extra: str, out: str):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli(["report", *base_args, *extra, "--out", str(folder / out)])
        if code != 0:
            raise RuntimeError(f"evalmix report failed: {err.getvalue()}")
        return json.loads((folder / out / "summary.json").read_text())

    def plain():
        y = 1.0 - table.y  # the model's score (model_a is the baseline)
        g = pd.Series(y).groupby(table.data["model_b"].to_numpy())
        p, n = g.mean(), g.size()
        return pd.DataFrame({"win_rate": p, "se": np.sqrt(p * (1 - p) / n)})

    t_plain, _ = timed(plain)
    t_board, _ = timed(lambda: leaderboard(table, cluster="item", seed=1))
    t_fast, fast = timed(lambda: run("--fast", out="fast"))
    t_full, full = timed(lambda: run("--backend", "statsmodels", out="full"))
    laplace = full.get("models", {}).get("glmm_laplace", {})
    return {
        "rows": table.n_obs, "models": int(table.data["model_b"].nunique()),
        "plain_win_rates": t_plain, "leaderboard_item_cr2": t_board,
        "report_fast": t_fast, "report_full_laplace": t_full,
        "laplace_fit_wall_s": laplace.get("wall_s"),
        "laplace_fit": {k: laplace.get(k) for k in ("backend", "formula", "stopped",
                                                    "error") if laplace.get(k)},
        "fast_rows": None if fast is None else fast.get("n_obs"),
        "ratio_report_fast_to_plain": round(t_fast["wall_s"] / max(t_plain["wall_s"], 1e-3), 1),
        "ratio_report_fast_to_leaderboard": round(t_fast["wall_s"] / t_board["wall_s"], 1),
        "ratio_report_full_to_report_fast": round(t_full["wall_s"] / t_fast["wall_s"], 2),
        "report_fast_target_s": REPORT_FAST_TARGET_S,
        "report_full_target_s": REPORT_FULL_TARGET_S,
        "report_fast_meets_target": bool(t_fast["wall_s"] <= REPORT_FAST_TARGET_S),
        "report_full_meets_target": bool(t_full["wall_s"] <= REPORT_FULL_TARGET_S),
    }


def main(argv: list[str]) -> int:
    sim = baseline_leaderboard(seed=1)
    if "--report-only" in argv:
        result = json.loads(OUT.read_text()) if OUT.exists() else {}
        result["report"] = report_part(sim)
        OUT.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result["report"], indent=2))
        return 0
    table = sim.table()
    n = table.n_obs
    t_cr2, board = best_of(lambda: leaderboard(table, cluster="item", seed=1))
    t_cr0, board0 = best_of(lambda: leaderboard(table, cluster="item", method="CR0",
                                                seed=1))
    d = table.data
    model, labels = pd.factorize(d["model_b"], sort=True)
    item = np.asarray(table.codes("item"))
    y = 1.0 - table.y
    k, g = len(labels), int(item.max()) + 1
    t_loop, se_loop = best_of(lambda: pair_loop(y, model, item, k, g), n=1)

    def core():
        count, total = _cells(y, model, item, k, g)
        _, vcov, _ = cell_means_vcov(count, total, method="CR0")
        return pair_se(vcov, *all_pairs(k))

    t_core, se_core = best_of(core)
    pairs = board0.tidy_pairs()
    index = {m: i for i, m in enumerate(labels)}
    lo = np.minimum(pairs["model_a"].map(index), pairs["model_b"].map(index)).to_numpy()
    hi = np.maximum(pairs["model_a"].map(index), pairs["model_b"].map(index)).to_numpy()
    i, j = np.triu_indices(k, 1)
    order = np.lexsort((hi, lo))
    agree = float(np.max(np.abs(pairs["se"].to_numpy()[order] / se_loop
                                [np.lexsort((j, i))] - 1)))
    agree_core = float(np.max(np.abs(se_core / se_loop - 1)))
    t_cmp, _ = best_of(lambda: compare_all(table, cluster="item", reps=COMPARE_REPS,
                                           seed=1), n=1)
    m = board.tidy()
    result = {
        "rows": n, "models": k, "items": g, "pairs": k * (k - 1) // 2,
        "leaderboard_cr2_s": round(t_cr2, 3), "leaderboard_cr0_s": round(t_cr0, 3),
        "covariance_and_all_se_cr0_s": round(t_core, 4),
        "pair_loop_cr0_s": round(t_loop, 3),
        "ratio_pair_loop_to_covariance_and_all_se": round(t_loop / t_core, 1),
        "ratio_pair_loop_to_leaderboard_cr0": round(t_loop / t_cr0, 2),
        "pair_loop_se_max_rel_diff": max(agree, agree_core),
        f"compare_all_cr2_{COMPARE_REPS}_reps_s": round(t_cmp, 1),
        "ratio_compare_all_to_leaderboard_cr2": round(t_cmp / t_cr2, 1),
        "target_s": TARGET_SECONDS, "meets_target": bool(t_cr2 <= TARGET_SECONDS),
        "max_t_crit": float(m["crit"].iloc[0]),
        "mean_rank_range_width": float((m["rank_hi"] - m["rank_lo"]).mean()),
        "load_average": os.getloadavg(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "numpy": np.__version__,
        "report": report_part(sim),
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if max(agree, agree_core) < 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
