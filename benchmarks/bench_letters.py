"""Benchmark: tier letters (compact letter display) at 50, 200 and 2,000 models (issue 37).

Two kinds of board, each at K = 50, 200 and 2,000 models:

* ``issue``: issue 37's table, 0/1 scores of K models (true rates uniform on [0.2, 0.9])
  on 20 items. Few pairs are significant and significance does not follow the estimates
  (tied 0/1 totals, one SE per model), so the letters are many: the board that took the
  old insert-and-absorb 341 s and 7.6 GB at 199 models;
* ``ordered``: estimates N(0, 1) with SEs uniform on [0.05, 0.2]; a pair differs when
  ``|d| > 3.5 sqrt(se_a^2 + se_b^2)``: significance follows the estimates, as on a board
  with many items.

The significance matrix of an ``issue`` board is the leaderboard's own (CR2 covariance of
the cell means clustered by item, single-step max-t with 1,000 draws and G - 1 df), built
from :mod:`evalmix.inference.ranking` without the pairs table (2 million rows at 2,000
models). Timed, each in the same run:

* :func:`evalmix.inference.letters.compact_letters` with the leaderboard's default cap (no
  more letters than models) and with the largest cap
  (:data:`~evalmix.inference.letters.MAX_LETTERS`, 2,756): wall seconds (best of
  ``REPEAT``; one run at 2,000) and the peak traced memory (``tracemalloc``, a separate run: tracing slows
  Python code several times);
* the obvious baseline, the old implementation (insert-and-absorb on letters x models
  boolean arrays, ``tests/inference/test_letters.py::insert_absorb``), in a child process limited
  to ``OLD_LIMIT_S`` seconds and ``OLD_LIMIT_GB`` of address space; where it finishes,
  the ratio and whether the letters are the same sets of models.

Usage: ``python benchmarks/bench_letters.py``; writes ``benchmarks/results/letters.json``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from evalmix.inference.compare_all import _cells, cell_means_vcov
from evalmix.inference.letters import MAX_LETTERS, compact_letters
from evalmix.inference.ranking import all_pairs, maxt_critical, pair_se

SIZES = (50, 200, 2000)
ITEMS = 20
REPEAT = 3
OLD_LIMIT_S = 300.0
OLD_LIMIT_GB = 3.0
OUT = Path(__file__).resolve().parent / "results" / "letters.json"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def issue_board(k: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Order (best first) and significance of the 0/1-on-20-items board."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.2, 0.9, k)
    y = (rng.random((k, ITEMS)) < p[:, None]).astype(float).ravel()
    model = np.repeat(np.arange(k), ITEMS)
    item = np.tile(np.arange(ITEMS), k)
    count, total = _cells(y, model, item, k, ITEMS)
    est, vcov, _ = cell_means_vcov(count, total, method="CR2")
    i, j = all_pairs(k)
    crit = maxt_critical(vcov, i, j, df=ITEMS - 1.0, draws=1000,
                         rng=np.random.default_rng(seed)).crit
    diff = np.zeros((k, k), dtype=bool)
    sig = np.abs(est[i] - est[j]) > crit * pair_se(vcov, i, j)
    diff[i[sig], j[sig]] = diff[j[sig], i[sig]] = True
    return np.lexsort((np.arange(k), -est)), diff


def ordered_board(k: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    est = rng.normal(size=k)
    se = rng.uniform(0.05, 0.2, k)
    diff = np.abs(est[:, None] - est[None, :]) > 3.5 * np.hypot(se[:, None], se[None, :])
    return np.argsort(-est), diff


def n_letters(letters: list[str] | None) -> int | None:
    if letters is None:
        return None
    dotted = any("." in s for s in letters)
    return len({x for s in letters for x in (s.split(".") if dotted else s) if x})


def measure(fn, repeat: int) -> dict:  # noqa: ANN001
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"wall_s": round(min(times), 4), "peak_traced_mb": round(peak / 1e6, 2),
            "letters": n_letters(out), "_out": out}


def _old_child(order: np.ndarray, diff: np.ndarray, queue: mp.Queue) -> None:
    limit = int(OLD_LIMIT_GB * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from test_letters import insert_absorb

    try:
        t0 = time.perf_counter()
        out = insert_absorb(order, diff)
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        queue.put({"wall_s": round(wall, 3), "peak_rss_mb": round(peak_kb / 1e3, 1),
                   "_out": out})
    except MemoryError:
        queue.put({"error": f"MemoryError above {OLD_LIMIT_GB} GB"})


def old(order: np.ndarray, diff: np.ndarray) -> dict:
    """The old insert-and-absorb in a child limited in time and memory."""
    ctx = mp.get_context("fork")
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_old_child, args=(order, diff, queue))
    proc.start()
    proc.join(OLD_LIMIT_S)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return {"error": f"not finished in {OLD_LIMIT_S:.0f} s"}
    return queue.get() if not queue.empty() else {"error": f"exit {proc.exitcode}"}


def groups(letters: list[str]) -> set[frozenset[int]]:
    out: dict[str, set[int]] = {}
    dotted = any("." in s for s in letters)
    for m, s in enumerate(letters):
        for name in (s.split(".") if dotted else list(s)):
            out.setdefault(name, set()).add(m)
    return {frozenset(v) for v in out.values()}


def main() -> int:
    result: dict = {"boards": {}}
    ok = True
    for kind, make in (("issue", issue_board), ("ordered", ordered_board)):
        for k in SIZES:
            t0 = time.perf_counter()
            order, diff = make(k)
            row: dict = {"models": k, "significant_share": round(
                float(diff.sum()) / max(k * (k - 1), 1), 4),
                "setup_s": round(time.perf_counter() - t0, 2)}
            repeat = REPEAT if k <= 200 else 1
            row["default_cap"] = measure(lambda o=order, d=diff, k=k: compact_letters(
                o, d, max_letters=min(k, MAX_LETTERS)), repeat)
            row["max_cap"] = measure(lambda o=order, d=diff: compact_letters(o, d), repeat)
            if k <= 200:
                row["old"] = old(order, diff)
                new = row["max_cap"]["_out"]
                if "_out" in row["old"]:
                    same = new is not None and groups(row["old"]["_out"]) == groups(new)
                    row["old"]["same_letters"] = same
                    ok &= same
                    row["ratio_old_to_new_max_cap"] = round(
                        row["old"]["wall_s"] / max(row["max_cap"]["wall_s"], 1e-4), 1)
            else:
                row["old"] = {"error": "not run (the issue measured 341 s and 7.6 GB at 199 "
                                       "models; 2,000 exhaust the machine)"}
            for part in ("default_cap", "max_cap", "old"):
                row[part].pop("_out", None)
            result["boards"][f"{kind}_{k}"] = row
            print(kind, k, json.dumps(row), flush=True)
    result.update({
        "load_average": os.getloadavg(), "cpus": os.cpu_count(),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "python": platform.python_version(), "numpy": np.__version__})
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
