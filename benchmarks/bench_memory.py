"""Benchmark: peak memory of ``analyze(fast=True)`` on large pairwise tables (issue 36).

For each size (1M and 5M rows by default) a fresh process builds a pairwise table -- 8
models, 16 rows per item (4 judges x 4 model pairs; n / 16 items, the cluster factor),
0 / 0.5 / 1 verdicts -- as a pandas DataFrame (model names as strings, integer item and
judge ids, float outcome; every row distinct), reads it with
:func:`evalmix.read`, then resets the process's peak resident set size (Linux
``/proc/self/clear_refs``) and runs ``analyze(fast=True, methods=["naive", "CR2"])``.
Recorded per size: the DataFrame's own size (``memory_usage(deep=True)``) and the read
table's (``table.data``, the canonical frame evalmix keeps), the resident
memory before the analysis, the peak during it, the peak above the start (what the
analysis itself allocated at its worst) as a multiple of the frame and of the table, and
the wall time. The obvious baseline is the frame itself: a groupby of the win rates
needs about one frame's worth of memory.

Usage: ``python benchmarks/bench_memory.py [rows ...]``; writes
``benchmarks/results/memory.json``. Linux only (``/proc``).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The same benchmark before the Bradley-Terry leaderboard used (pair, outcome, cluster)
#: patterns and analyze dropped its per-contrast subset tables after their last job
#: (main at ad7c058; 5M rows from issue 36, not rerun: it needs 8.5 GB).
BEFORE = [
    {"rows": 1_000_000, "frame_mb": 51.5, "analysis_peak_mb": 790.5,
     "analysis_peak_x_frame": 15.35, "wall_s": 144.2, "load_before": 17.3,
     "when": "2026-12-07 17:40 UTC"},
    {"rows": 5_000_000, "frame_mb": 307.0, "analysis_peak_mb": 8500.0,
     "analysis_peak_x_frame": 27.7, "wall_s": 206.0, "source": "issue 36"},
]

CHILD = r"""
import json, sys, time, warnings
import numpy as np, pandas as pd
import evalmix

n = int(sys.argv[1])
rng = np.random.default_rng(1)
models = np.array([f"model-{i}" for i in range(8)])
i = np.arange(n)
k = (i // 4) % 4                      # 16 rows per item: 4 judges x 4 model pairs
a = (2 * k + i // 16) % 8
b = (a + 1 + k) % 8
frame = pd.DataFrame({       # plain columns, as a log read with pandas gives them
    "model_a": models[a], "model_b": models[b],
    "item": i // 16, "judge": i % 4,
    "outcome": rng.choice([0.0, 0.5, 1.0], n, p=[0.45, 0.1, 0.45]),
})
frame_mb = frame.memory_usage(deep=True).sum() / 2**20

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    raise KeyError(key)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    table = evalmix.read(frame, outcome="outcome", model_a="model_a", model_b="model_b",
                         clusters={"item": "item", "judge": "judge"})
    table_mb = table.data.memory_usage(deep=True).sum() / 2**20
    start = status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")          # reset the peak (VmHWM) to the current RSS
    t0 = time.perf_counter()
    evalmix.analyze(table, fast=True, methods=["naive", "CR2"], progress=False, seed=1)
    wall = time.perf_counter() - t0
peak = status("VmHWM:")
print(json.dumps({"rows": n, "frame_mb": round(frame_mb, 1), "table_mb": round(table_mb, 1),
                  "rss_before_mb": round(start, 1),
                  "peak_mb": round(peak, 1), "analysis_peak_mb": round(peak - start, 1),
                  "analysis_peak_x_frame": round((peak - start) / frame_mb, 2),
                  "analysis_peak_x_table": round((peak - start) / table_mb, 2),
                  "wall_s": round(wall, 1)}))
"""


def main(argv: list[str]) -> int:
    sizes = [int(float(a)) for a in argv] or [1_000_000, 5_000_000]
    rows = []
    for n in sizes:
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, "-c", CHILD, str(n)], capture_output=True,
                             text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["load_before"] = round(load, 2)
        rows.append(row)
        print(f"{n:>10,} rows: frame {row['frame_mb']} MB, analysis peak "
              f"{row['analysis_peak_mb']} MB = {row['analysis_peak_x_frame']}x the frame, "
              f"{row['wall_s']} s", flush=True)
    result = {"benchmark": "analyze(fast=True) peak memory", "python": sys.version.split()[0],
              "machine": platform.machine(), "cpus": os.cpu_count(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows,
              "before": BEFORE}
    (HERE / "results" / "memory.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
