"""Benchmark (issue 35): Bayesian fits when rows do not collapse.

The design: binary scores, rows drawn at random from 400 scenarios x 12 personas x 3
authors x 3 judges x 2 conditions x a randomised +-1 position (172,800 possible
patterns), so 100,000 rows leave ~76,000 patterns; "1M" draws 1,000,000 rows over
4,000 scenarios (~774,000 patterns). Default model: ``y ~ 1 + condition + position +
(1 + condition|scenario) + (1 + condition|persona) + (1 + condition|author) +
(1|judge)`` (independent terms on the Bayesian back end).

Two parts, both measured in **process CPU time** (the load-independent figure on the
shared 2-core machine; wall times are recorded with the load average next to them):

1. ``gradient``: one log density + gradient of the kernel, per layout (``rows``: the
   row loop; ``auto``: what a fit uses, the pair layout here), ns per collapsed row and
   per original row; and the intercept-only collapsed case (the 100k case of
   ``bench_fit.py``: 463 x 6 x 3 x 3 pairwise, intercepts only, on the grid layout).
2. ``fit``: ``evalmix.fit(table, seed=1)`` with defaults, each in a fresh subprocess:
   wall and process CPU seconds (imports and data included in ``process``), draws,
   leapfrog steps (gradients) per chain, CPU per gradient during sampling, gradients and
   CPU per effective draw (min bulk ESS), the checks (ESS, R-hat, divergences); and the
   ratio to the intercept-only collapsed fit and to Bambi (its ESS per second on the
   20k case, from ``benchmarks/results/fit.json``: a Bambi fit at 100k did not pass
   its checks in ``../shared/PERF_NOTES.md``).

Usage: ``python benchmarks/bench_unique.py [--no-1m] [--no-1m-fit] [--only gradient|fit]``;
writes
``benchmarks/results/unique.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "unique.json"
FIT_JSON = ROOT / "benchmarks" / "results" / "fit.json"
#: case -> (rows, scenarios); "collapsed_100k": bench_fit's intercept-only 100k case
CASES = {"unique_100k": (100_000, 400), "unique_1m": (1_000_000, 4_000),
         "collapsed_100k": (None, None)}
TARGETS = {"unique_100k": 12.0, "unique_1m": 150.0, "collapsed_100k": None}
SEED = 20261207


def unique_table(n: int, n_scenarios: int, seed: int = SEED):
    """The issue's design: ``n`` rows drawn at random from the crossing."""
    from evalmix.sim.designs import unique_rows

    return unique_rows(n, n_scenarios, seed=seed)


def _table(case: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case == "collapsed_100k":
            from evalmix.sim import pairwise_judges

            t = pairwise_judges(463, 6, 3, 3, tie_threshold=0.0, sd_judge_condition=0.0,
                                seed=20261130).table()
            return t, {"slopes": ()}
        n, s = CASES[case]
        return unique_table(n, s), {}


def _cpu() -> float:
    """CPU seconds of this process, all threads (the sampler's chains included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def gradient(case: str, reps: int) -> dict:
    """CPU time of one log density + gradient per layout (this thread only)."""
    import numpy as np

    from evalmix.models.bayes.kernel import DensityKernel
    from evalmix.models.bayes.pymc_model import choose_parameterization
    from evalmix.models.spec import build_spec, collapse
    from evalmix.models.spec._maximal import decorrelate

    table, kw = _table(case)
    spec = decorrelate(build_spec(table, **kw), "bench")
    data = collapse(spec)
    terms = choose_parameterization(spec, data)
    out = {"n_rows": table.n_obs, "collapsed_rows": data.n_patterns}
    layouts = ("auto",) if case == "collapsed_100k" else ("rows", "auto")
    for layout in layouts:
        kern = DensityKernel(spec, data, terms, layout=layout)
        x = kern.initial_point(1)
        kern.logp(x)
        best = np.inf
        for _ in range(3):   # best of 3 blocks: the least disturbed by the load
            c0 = time.thread_time()
            for _ in range(reps):
                kern.logp(x)
            best = min(best, (time.thread_time() - c0) / reps)
        name = ("grid" if kern.grid is not None else "pairs" if kern.pairs is not None
                else "rows")
        out[layout] = {"layout": name, "ms_per_gradient": round(best * 1e3, 4),
                       "ns_per_collapsed_row": round(best / data.n_patterns * 1e9, 2),
                       "ns_per_row": round(best / table.n_obs * 1e9, 2),
                       "ndim": kern.ndim}
    return out


def child(case: str, out: str) -> None:
    import numpy as np

    import evalmix

    table, kw = _table(case)
    c0, w0 = _cpu(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = evalmix.fit(table, seed=1, progress=False, **kw)
    cpu, wall = _cpu() - c0, time.perf_counter() - w0
    d, p = fit.diagnostics, fit.provenance
    steps = np.asarray(fit.draws.sample_stats["n_steps"])
    res = {
        "case": case, "rows": table.n_obs, "collapsed_rows": p["collapsed_rows"],
        "fit_seconds": round(wall, 2), "fit_cpu_seconds": round(cpu, 2),
        "process_cpu_seconds": round(_cpu(), 2),
        "draws_per_chain": int(fit.draws.n_draws), "tune": p["tune"],
        "chains": p["chains"], "max_tree_depth": p.get("max_tree_depth"),
        "uncapped_rerun": p.get("uncapped_rerun"), "retried": p.get("retried"),
        "steps_per_draw": round(float(steps.mean()), 2),
        "min_ess_bulk": float(d["ess_bulk"].min()),
        "min_ess_parameter": str(d.loc[d["ess_bulk"].idxmin(), "parameter"]),
        "min_ess_tail": float(d["ess_tail"].min()),
        "max_r_hat": float(d["r_hat"].max()),
        "max_r_hat_parameter": str(d.loc[d["r_hat"].idxmax(), "parameter"]),
        "divergences": int(fit.divergences), "n_parameters": int(len(d)),
        "sampling_seconds": p.get("sampling_seconds"),
        "parameterization": p.get("parameterization"),
        "post_warmup_gradients_per_chain": int(steps.sum(axis=-1).max()),
    }
    res["ess_per_second"] = res["min_ess_bulk"] / wall
    res["cpu_per_effective_draw_ms"] = round(cpu / res["min_ess_bulk"] * 1e3, 2)
    Path(out).write_text(json.dumps(res, default=str))


def run_fit(case: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", case, "--out", out],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{case} failed:\n{proc.stderr[-3000:]}")
    res = json.loads(Path(out).read_text())
    os.unlink(out)
    res["process_seconds"] = round(time.perf_counter() - t0, 2)
    res["load_before"] = [round(x, 2) for x in load]
    res["load_after"] = [round(x, 2) for x in os.getloadavg()]
    res["measured"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    target = TARGETS[case]
    res["passes"] = bool(res["min_ess_bulk"] >= 400 and res["max_r_hat"] <= 1.01
                         and res["divergences"] == 0
                         and (target is None or res["fit_seconds"] <= target))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--no-1m", action="store_true")
    ap.add_argument("--no-1m-fit", action="store_true",
                    help="the 1M case's gradient only (its fit takes minutes)")
    ap.add_argument("--only", choices=("gradient", "fit"))
    a = ap.parse_args()
    if a.child:
        child(a.child, a.out)
        return
    cases = [c for c in CASES if not (a.no_1m and c == "unique_1m")]
    last = json.loads(OUT.read_text()) if OUT.exists() else {}
    res = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "python": platform.python_version()},
           "gradient": last.get("gradient", {}), "fit": last.get("fit", {})}
    if a.only != "fit":
        for case in cases:
            load = os.getloadavg()
            g = gradient(case, reps=20 if case == "unique_1m" else 100)
            g["load"] = [round(x, 2) for x in load]
            res["gradient"][case] = g
            print(case, json.dumps(g), flush=True)
    if a.only != "gradient":
        for case in cases:
            if a.no_1m_fit and case == "unique_1m":
                continue
            res["fit"][case] = run_fit(case)
            print(case, json.dumps(res["fit"][case]), flush=True)
    fits = res["fit"]
    base = fits.get("collapsed_100k")
    bambi = None
    if FIT_JSON.exists():
        bambi = json.loads(FIT_JSON.read_text()).get("results", {}).get("bambi_20k_slope")
    for case, r in fits.items():
        if base and case != "collapsed_100k":
            r["ratio_fit_seconds_vs_collapsed"] = round(r["fit_seconds"] / base["fit_seconds"], 2)
            r["ratio_cpu_vs_collapsed"] = round(r["fit_cpu_seconds"] / base["fit_cpu_seconds"], 2)
        if bambi and bambi.get("ess_per_second"):
            r["ess_per_second_ratio_vs_bambi_20k"] = round(
                r["ess_per_second"] / bambi["ess_per_second"], 1)
    grads = res["gradient"]
    if "collapsed_100k" in grads:
        ref = grads["collapsed_100k"]["auto"]["ms_per_gradient"]
        for case, g in grads.items():
            if case != "collapsed_100k":
                g["ratio_auto_vs_collapsed_gradient"] = round(
                    g["auto"]["ms_per_gradient"] / ref, 2)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1, default=str) + "\n")
    tmp.replace(OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
