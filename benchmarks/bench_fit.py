"""Benchmark: the Bayesian crossed GLMM (`evalmix.fit`) against Bambi's default sampler.

Targets (issue 4), simulated pairwise design (`evalmix.sim.pairwise_judges`, no ties):

* 20,000 rows, 4 crossed factors (3 authors, 3 judges), judge-specific position bias and
  a judge-by-condition slope: bulk ESS >= 400 for every parameter (SDs included), 0
  divergences, R-hat <= 1.01, whole `fit` call <= 20 s in a fresh process, and >= 10x
  more effective samples per second than Bambi's default (PyMC NUTS) on the same data;
* 100,000 rows without the slope: same quality in <= 40 s; peak memory < 1.5 GB over
  the process tree.

Every case runs in a fresh subprocess (compile costs included); memory is the peak sum of
RSS over the child and its descendants (psutil, polled every 50 ms). ESS/s = smallest
bulk ESS over all parameters / seconds of the `fit` call.

Usage: ``python benchmarks/bench_fit.py [--no-bambi] [--bambi-draws 300]``; writes
``benchmarks/results/fit.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "fit.json"
TARGETS = {"ess_min": 400, "r_hat_max": 1.01, "divergences": 0, "seconds_20k": 20.0,
           "seconds_100k": 40.0, "memory_mb": 1536.0, "ess_per_s_ratio": 10.0}
CASES = {
    # 93 scenarios x 6 personas x 3 authors x 3 judges x 2 conditions x 2 orders
    "evalmix_20k_slope": dict(n_scenarios=93, slopes=("judge",), engine="auto",
                              sd_judge_condition=0.3),
    "evalmix_100k": dict(n_scenarios=463, slopes=(), engine="auto", sd_judge_condition=0.0),
    "bambi_20k_slope": dict(n_scenarios=93, slopes=("judge",), engine="bambi",
                            sd_judge_condition=0.3),
}
SEED = 20261130


def child(case: str, out: str, draws: int | None, tune: int | None) -> None:
    import warnings

    from evalmix.sim import pairwise_judges

    c = CASES[case]
    sim = pairwise_judges(c["n_scenarios"], 6, 3, 3, tie_threshold=0.0,
                          sd_judge_condition=c["sd_judge_condition"], seed=SEED)
    table = sim.table()
    kw = {}
    if draws:
        kw["draws"] = draws
    if tune is not None:
        kw["tune"] = tune
    t0 = time.perf_counter()
    import evalmix

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = evalmix.fit(table, slopes=c["slopes"], engine=c["engine"], seed=1,
                          progress=False, **kw)
    wall = time.perf_counter() - t0
    d = fit.diagnostics
    fe = fit.fixed_effects
    fx = fe[fe["scale"] == "log-odds"].set_index("term")
    res = {
        "case": case, "rows": table.n_obs, "fit_seconds": round(wall, 2),
        "min_ess_bulk": float(d["ess_bulk"].min()),
        "min_ess_parameter": str(d.loc[d["ess_bulk"].idxmin(), "parameter"]),
        "min_ess_tail": float(d["ess_tail"].min()),
        "max_r_hat": float(d["r_hat"].max()), "divergences": int(fit.divergences),
        "n_parameters": int(len(d)),
        "draws": fit.provenance.get("draws"), "tune": fit.provenance.get("tune"),
        "chains": fit.provenance.get("chains"), "engine": fit.provenance.get("engine"),
        "sampler": fit.provenance.get("sampler"),
        "sampling_seconds": fit.provenance.get("sampling_seconds"),
        "condition_effect": [float(fx.loc["condition[treatment]", k])
                             for k in ("estimate", "lo", "hi")],
        "truth_condition_effect": sim.truth["condition_effect"],
    }
    res["ess_per_second"] = res["min_ess_bulk"] / wall
    Path(out).write_text(json.dumps(res))


def run_case(case: str, draws: int | None = None, tune: int | None = None) -> dict:
    import psutil

    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, __file__, "--child", case, "--out", out]
    if draws:
        cmd += ["--draws", str(draws)]
    if tune is not None:
        cmd += ["--tune", str(tune)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    p = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            procs = [p, *p.children(recursive=True)]
            peak = max(peak, sum(q.memory_info().rss for q in procs if q.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.05)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode:
        raise RuntimeError(f"{case} failed:\n{err[-3000:]}")
    res = json.loads(Path(out).read_text())
    os.unlink(out)
    res["process_seconds"] = round(time.perf_counter() - t0, 2)
    res["peak_rss_mb"] = round(peak / 2**20, 1)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--draws", type=int)
    ap.add_argument("--tune", type=int)
    ap.add_argument("--no-bambi", action="store_true")
    ap.add_argument("--bambi-draws", type=int, default=300)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.out, a.draws, a.tune)
        return
    load0 = os.getloadavg()
    results = {}
    for case in ("evalmix_20k_slope", "evalmix_100k"):
        results[case] = run_case(case)
        print(json.dumps(results[case]), flush=True)
    if not a.no_bambi:
        results["bambi_20k_slope"] = run_case("bambi_20k_slope", draws=a.bambi_draws,
                                              tune=a.bambi_draws)
        print(json.dumps(results["bambi_20k_slope"]), flush=True)
    r20, r100 = results["evalmix_20k_slope"], results["evalmix_100k"]

    def ok(r, seconds):
        return (r["min_ess_bulk"] >= TARGETS["ess_min"] and r["divergences"] == 0
                and r["max_r_hat"] <= TARGETS["r_hat_max"] and r["fit_seconds"] <= seconds)

    summary = {
        "pass_20k": ok(r20, TARGETS["seconds_20k"]),
        "pass_100k": ok(r100, TARGETS["seconds_100k"]),
        "pass_memory_100k": r100["peak_rss_mb"] < TARGETS["memory_mb"],
    }
    if "bambi_20k_slope" in results:
        ratio = r20["ess_per_second"] / results["bambi_20k_slope"]["ess_per_second"]
        summary["ess_per_second_ratio_vs_bambi"] = round(ratio, 1)
        summary["pass_ratio"] = ratio >= TARGETS["ess_per_s_ratio"]
    doc = {"benchmark": "bench_fit", "targets": TARGETS, "results": results,
           "summary": summary,
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                       "note": "2 cores shared with other developers; timings vary"},
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
