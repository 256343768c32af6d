"""Benchmark: cluster-bootstrap intervals of agreement coefficients (issue 29).

Baseline: the obvious bootstrap, one replicate at a time: draw clusters, gather their
items, call ``sklearn.metrics.cohen_kappa_score`` (a rater pair) or
``krippendorff.alpha`` (a panel of 5 raters with 20% missing). evalmix: per-cluster
totals once, then every replicate as one product ``W @ S`` (:mod:`evalmix.inference.totals`).
Both on 5,000 items in 100 clusters, 999 replicates (the baseline timed on 100 replicates
and scaled). Usage: ``python benchmarks/bench_humans.py``; writes
``benchmarks/results/humans.json`` with the load average.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parent / "results" / "humans.json"
REPS = 999


def data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n, k = 5000, 100
    cluster = rng.integers(0, k, n)
    truth = (rng.random(n) < 0.3 + 0.4 * (cluster % 2)).astype(int) + rng.integers(0, 2, n)
    rows = []
    for r, acc in (("h1", .8), ("h2", .75), ("h3", .7), ("h4", .8), ("llm", .85)):
        v = np.where(rng.random(n) < acc, truth, rng.integers(0, 3, n))
        keep = rng.random(n) > (0.2 if r != "llm" else 0.0)
        rows.append(pd.DataFrame({"item_id": np.arange(n)[keep], "g": cluster[keep],
                                  "rater": r, "rater_kind": "llm" if r == "llm" else "human",
                                  "label": v[keep]}))
    return pd.concat(rows, ignore_index=True)


def baseline(d: pd.DataFrame, reps: int) -> dict[str, float]:
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    wide = d.pivot(index="item_id", columns="rater", values="label")
    groups = d.groupby("item_id")["g"].first().reindex(wide.index).to_numpy()
    members = [np.flatnonzero(groups == g) for g in range(groups.max() + 1)]
    rng = np.random.default_rng(1)
    both = wide[["llm", "h1"]].notna().all(axis=1).to_numpy()
    t0 = time.perf_counter()
    for _ in range(reps):
        idx = np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])
        idx = idx[both[idx]]
        cohen_kappa_score(wide["llm"].to_numpy()[idx], wide["h1"].to_numpy()[idx])
    kappa = time.perf_counter() - t0
    panel = wide[["h1", "h2", "h3", "h4", "llm"]].to_numpy(dtype=float)
    t0 = time.perf_counter()
    for _ in range(reps):
        idx = np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])
        krippendorff.alpha(reliability_data=panel[idx].T, level_of_measurement="nominal")
    alpha = time.perf_counter() - t0
    return {"kappa": kappa, "alpha": alpha}


def main() -> int:
    import evalmix
    from evalmix.humans import read_ratings

    d = data()
    r = read_ratings(d, rating="label", cluster="g")
    out: dict = {"items": 5000, "clusters": 100, "reps": REPS,
                 "load_before": os.getloadavg()}
    evalmix.agreement(r, reps=99, seed=0, pairs="all")  # warm-up
    t0 = time.perf_counter()
    res = evalmix.agreement(r, reps=REPS, seed=0, pairs="all", method="bootstrap")
    ours = time.perf_counter() - t0
    n_stats = int((res.table["method"] == "bootstrap").sum())
    base = baseline(d, 100)
    per_stat = ours / n_stats
    out.update({
        "evalmix_all_s": ours, "evalmix_statistics": n_stats,
        "evalmix_per_statistic_s": per_stat,
        "baseline_kappa_s": base["kappa"] * REPS / 100,
        "baseline_alpha_s": base["alpha"] * REPS / 100,
        "ratio_kappa": base["kappa"] * REPS / 100 / per_stat,
        "ratio_alpha": base["alpha"] * REPS / 100 / per_stat,
        "load_after": os.getloadavg()})
    print(f"evalmix: {n_stats} bootstrap intervals ({REPS} reps) in {ours:.2f} s "
          f"({per_stat * 1000:.1f} ms each); replicate-by-replicate sklearn kappa "
          f"{out['baseline_kappa_s']:.1f} s ({out['ratio_kappa']:.0f}x), krippendorff alpha "
          f"{out['baseline_alpha_s']:.1f} s ({out['ratio_alpha']:.0f}x)")
    print("load average before/after:", out["load_before"], out["load_after"])
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
