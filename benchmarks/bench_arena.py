"""Benchmark: Arena scale -- the clustered Bradley-Terry leaderboard against LMArena's
``arena-rank`` on the same battles (issue 32, item 3).

Battles: :func:`evalmix.sim.arena_battles` with 200 models, 4 battles per prompt on
average (the prompt is the cluster: 250,000 prompts per million battles), answer
effects shared within a prompt, ties. For each size (1M and 3M battles by default) every
tool runs in its own fresh process on the same battles (same seed), built as a pandas
DataFrame first; each process then resets its peak resident set size (Linux
``/proc/self/clear_refs``) before each timed step, so a step's peak is what it allocated
above what the process already held (the DataFrame, the imports):

* ``arena_rank``: ``PairDataset.from_pandas`` (its aggregation of identical (pair,
  outcome) rows) and ``BradleyTerry.compute_ratings_and_cis(ci_method="sandwich")`` (L-BFGS
  fit in JAX, then its sandwich over (pair, outcome) buckets: not clustered by prompt).
* ``evalmix`` ``read``: :func:`evalmix.read` of the DataFrame (validation, canonical
  table); ``read_parquet``: :func:`evalmix.read` of the same battles written to a Parquet
  file (``load_parquet``: pandas' ``read_parquet`` of that file alone, the part of it
  that is file reading); ``fit_cr1`` / ``fit_cr2``: the clustered fit alone on the read table
  (:mod:`evalmix.inference.bt_fit`: patterns, Newton fit, CR1 or CR2 covariance
  clustered by prompt); ``leaderboard``: :func:`evalmix.inference.leaderboard.leaderboard`
  with CR2 by prompt end to end (fit, covariance, all 19,900 pairwise differences with
  max-t simultaneous intervals and Holm, rank ranges, marginal and simultaneous rank sets,
  tier letters).

Checked in the same run: the abilities agree (arena-rank's ratings on the logit scale,
``(rating - 1000) ln(10) / 400``, against evalmix's centred abilities; max absolute
difference) and the SE ratios (evalmix CR1 and CR2 clustered by prompt over
arena-rank's unclustered sandwich; median over models).

Usage: ``python benchmarks/bench_arena.py [battles ...]`` (needs the ``arena-ref`` extra,
``pip install -e ".[arena-ref]"``); writes ``benchmarks/results/arena.json``. Linux only.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
N_MODELS = 200
SEED = 7

COMMON = r"""
import json, sys, time, warnings
import numpy as np
from evalmix.sim import arena_battles

n, out = int(sys.argv[1]), sys.argv[2]
sim = arena_battles(N_MODELS, n, seed=SEED)
frame = sim.data

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    raise KeyError(key)

def step(fn):
    start = status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")          # reset the peak (VmHWM) to the current RSS
    t0 = time.perf_counter()
    value = fn()
    wall = time.perf_counter() - t0
    return value, {"wall_s": round(wall, 2),
                   "peak_above_start_mb": round(status("VmHWM:") - start, 1)}
""".replace("N_MODELS", str(N_MODELS)).replace("SEED", str(SEED))

ARENA = COMMON + r"""
import jax
from arena_rank.models.bradley_terry import BradleyTerry
from arena_rank.utils.data_utils import PairDataset

frame = frame.rename(columns={"outcome": "winner"})
scores = {"a": 1.0, "b": 0.0, "tie": 0.5}

def run():
    ds = PairDataset.from_pandas(frame, outcome_col="winner", outcome_map=scores.get)
    model = BradleyTerry(n_competitors=len(ds.competitors))
    res = model.compute_ratings_and_cis(ds, ci_method="sandwich")
    return ds, res

(ds, res), stats = step(run)
alpha = 400 / np.log(10)
est = (np.asarray(res["ratings"]) - 1000) / alpha
se = np.sqrt(np.asarray(res["variances"])) / alpha
np.savez(out, models=np.asarray(res["competitors"]), est=est, se=se)
print(json.dumps({"total": stats, "patterns": int(ds.n_pairs)}))
"""

EVALMIX = COMMON + r"""
import evalmix
from evalmix.data.table import cluster_codes
from evalmix.inference.bt_fit import aggregate, fit_bt, vcov_bt
from evalmix.inference.leaderboard import leaderboard

import pandas as pd

path = out + ".parquet"
frame.to_parquet(path)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    table, read_stats = step(lambda: evalmix.read(frame, **sim.read_kwargs))
del frame
d = table.data
names = np.unique(np.concatenate([d["model_a"].unique(), d["model_b"].unique()]).astype(str))
a = np.searchsorted(names, d["model_a"].astype(str).to_numpy())
b = np.searchsorted(names, d["model_b"].astype(str).to_numpy())
y = table.y
codes = cluster_codes(table.codes("prompt"))[0]
del d

def core(method):
    bt = aggregate(a, b, y, [codes], names.size)
    fit = fit_bt(bt)
    V = vcov_bt(bt, fit, bt.clusters[0], type=method)
    A = np.eye(names.size) - 1 / names.size
    return A @ fit.theta, np.sqrt(np.diag(A @ V @ A.T)), bt.a.size

(est, se1, q), cr1 = step(lambda: core("CR1"))
(_, se2, _), cr2 = step(lambda: core("CR2"))
del a, b
board, lb = step(lambda: leaderboard(table, cluster="prompt", method="CR2", seed=1))
m = board.tidy().set_index("model").loc[names]
del board
# last, so that the memory these free is not what the steps above reuse
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _, load_stats = step(lambda: pd.read_parquet(path))
    _, parquet_stats = step(lambda: evalmix.read(path, **sim.read_kwargs))
assert np.allclose(m["estimate"], est, atol=1e-10) and np.allclose(m["se"], se2, rtol=1e-8)
np.savez(out, models=names, est=est, se_cr1=se1, se_cr2=se2)
print(json.dumps({"read": read_stats, "read_parquet": parquet_stats,
                  "load_parquet": load_stats, "fit_cr1": cr1, "fit_cr2": cr2, "leaderboard": lb,
                  "patterns": int(q), "prompts": int(codes.max()) + 1}))
"""


def child(script: str, n: int, out: str) -> dict:
    load = os.getloadavg()[0]
    run = subprocess.run([sys.executable, "-c", script, str(n), out], capture_output=True,
                         text=True)
    if run.returncode:
        raise RuntimeError(run.stderr[-3000:])
    row = json.loads(run.stdout.strip().splitlines()[-1])
    row["load_before"] = round(load, 2)
    return row


def main(argv: list[str]) -> int:
    sizes = [int(float(a)) for a in argv] or [1_000_000, 3_000_000]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            ar = child(ARENA, n, f"{tmp}/arena.npz")
            em = child(EVALMIX, n, f"{tmp}/evalmix.npz")
            ra, re_ = np.load(f"{tmp}/arena.npz"), np.load(f"{tmp}/evalmix.npz")
            assert list(ra["models"]) == list(re_["models"])
            t_ar, m_ar = ar["total"]["wall_s"], ar["total"]["peak_above_start_mb"]
            row = {
                "battles": n, "models": N_MODELS, "prompts": em["prompts"],
                "arena_rank": ar, "evalmix": em,
                "max_abs_estimate_diff": float(np.max(np.abs(ra["est"] - re_["est"]))),
                "median_se_ratio_cr1_vs_arena": float(np.median(re_["se_cr1"] / ra["se"])),
                "median_se_ratio_cr2_vs_arena": float(np.median(re_["se_cr2"] / ra["se"])),
            }
            for step in ("fit_cr1", "fit_cr2", "leaderboard"):
                row[f"time_ratio_{step}"] = round(em[step]["wall_s"] / t_ar, 2)
                row[f"memory_ratio_{step}"] = round(
                    em[step]["peak_above_start_mb"] / m_ar, 2)
            row["time_ratio_read_plus_leaderboard"] = round(
                (em["read"]["wall_s"] + em["leaderboard"]["wall_s"]) / t_ar, 2)
            rows.append(row)
            print(f"{n:>10,} battles: arena-rank {t_ar} s / {m_ar} MB; evalmix CR1 fit "
                  f"{em['fit_cr1']['wall_s']} s / {em['fit_cr1']['peak_above_start_mb']} MB, "
                  f"CR2 fit {em['fit_cr2']['wall_s']} s / "
                  f"{em['fit_cr2']['peak_above_start_mb']} MB, leaderboard "
                  f"{em['leaderboard']['wall_s']} s / "
                  f"{em['leaderboard']['peak_above_start_mb']} MB, read "
                  f"{em['read']['wall_s']} s (Parquet file {em['read_parquet']['wall_s']} s)"
                  f"; max |diff| {row['max_abs_estimate_diff']:.2g}, "
                  f"SE ratio CR1 {row['median_se_ratio_cr1_vs_arena']:.3f}", flush=True)
    result = {"benchmark": "Arena-scale Bradley-Terry: evalmix vs arena-rank",
              "python": sys.version.split()[0], "machine": platform.machine(),
              "cpus": os.cpu_count(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}
    (HERE / "results" / "arena.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
