"""Benchmark: CR1/CR2 paired difference vs the mean on 1,000,000 rows (issue 14, item 6).

Target: ``evalmix.interval(table, "difference", method=..., cluster="item",
conditions=("A", "B"))`` takes at most 3x the time of ``interval(table, "mean", ...)`` on
the same table (250,000 items x 2 conditions x 2 samples, binary scores). Each call is
timed 3 times after a warm-up; medians are reported with the load average.

Usage: ``python benchmarks/bench_paired.py``; writes ``benchmarks/results/paired.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parent / "results" / "paired.json"
TARGET_RATIO = 3.0


def main() -> int:
    import evalmix

    rng = np.random.default_rng(0)
    n_items = 250_000
    item = np.repeat(np.arange(n_items), 4)
    cond = np.tile(np.repeat(["A", "B"], 2), n_items)
    y = (rng.random(item.size) < 0.5 + 0.05 * (cond == "B")).astype(int)
    d = pd.DataFrame({"item": item.astype(str), "condition": cond, "score": y,
                      "sample": np.tile(np.arange(4), n_items)})
    t = evalmix.read(d, outcome="score", condition="condition", clusters={"item": "item"})
    out: dict = {"rows": int(t.n_obs), "load_before": os.getloadavg(), "methods": {}}
    ok = True
    for method in ("CR1", "CR2"):
        times: dict[str, list[float]] = {"mean": [], "difference": []}
        for rep in range(4):
            for est, kw in (("mean", {}), ("difference", {"conditions": ("A", "B")})):
                t0 = time.perf_counter()
                evalmix.interval(t, est, method=method, cluster="item", **kw)
                if rep:  # the first round is a warm-up
                    times[est].append(time.perf_counter() - t0)
        m, dif = statistics.median(times["mean"]), statistics.median(times["difference"])
        out["methods"][method] = {"mean_s": m, "difference_s": dif, "ratio": dif / m}
        ok &= dif / m <= TARGET_RATIO
        print(f"{method}: mean {m:.2f} s, paired difference {dif:.2f} s, ratio {dif / m:.2f} "
              f"(target <= {TARGET_RATIO})", flush=True)
    out["load_after"] = os.getloadavg()
    print("load average before/after:", out["load_before"], out["load_after"])
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
