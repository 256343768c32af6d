"""Benchmark: the frequentist back ends (REML and Laplace) against lme4 / glmmTMB.

Targets (issue 14, item 4), seeded simulated designs built by :func:`make_case`:

* ``reml_interaction``: Gaussian, 200 items x 5 models x 3 judges x 2 replicates (6,000
  rows), ``y ~ model + (1|item) + (1|item:model) + (1|judge)`` (1,000 interaction
  levels): ``fit_mixedlm_arrays`` within 10x ``lmer``'s time;
* ``laplace_crossed`` / ``laplace_fixed_models``: binary, 100,000 rows, 800 items x 100
  models x 5 judges, ``y ~ 1 + (1|item) + (1|model) + (1|judge)`` and
  ``y ~ model + (1|item) + (1|judge)`` (99 fixed model effects): ``fit_laplace_arrays``
  within 10x ``glmer``'s time and under 30 s;
* ``reml_1m`` / ``laplace_1m``: 1,000,000 rows, 500,000 items (two conditions each,
  ``y ~ condition + (1|item) + (1|judge)``) and 10 judges: no MemoryError (time and peak
  memory reported). One row per cluster (1M singleton clusters) does not identify the
  cluster variance, so the identified design with two rows per item is the benchmark.

Each case runs in a fresh subprocess (imports excluded from the time; peak RSS of the
child). R timings were measured once with ``benchmarks/results/fit_frequentist.R`` on the
same data (``--write-data DIR`` writes it) and are frozen in
``benchmarks/results/frequentist_r.json``; CI never needs R.

Usage: ``python benchmarks/bench_frequentist.py [case ...]``; writes
``benchmarks/results/frequentist.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "frequentist.json"
R_TIMES = HERE / "results" / "frequentist_r.json"
SEED = 20261201
#: ratio to lme4 and absolute limits (seconds)
TARGETS = {"reml_interaction": {"ratio": 10.0},
           "laplace_crossed": {"ratio": 10.0, "seconds": 30.0},
           "laplace_fixed_models": {"ratio": 10.0, "seconds": 30.0},
           "reml_1m": {}, "laplace_1m": {}}


def make_case(case: str) -> dict:
    """Seeded data of a case: outcome, fixed design, factor codes."""
    rng = np.random.default_rng(SEED)
    if case == "reml_interaction":
        n_item, n_model = 200, 5
        item = np.repeat(np.arange(n_item), 30)
        model = np.tile(np.repeat(np.arange(n_model), 6), n_item)
        judge = np.tile(np.arange(3), n_item * 10)
        im = item * n_model + model
        y = (0.2 * model + rng.normal(0, 1, n_item)[item]
             + rng.normal(0, 0.5, n_item * n_model)[im] + rng.normal(0, 0.3, 3)[judge]
             + rng.normal(0, 1, item.size))
        return dict(y=y, model=model, factors={"item": item, "item_model": im,
                                               "judge": judge}, fixed_model=True)
    if case in ("laplace_crossed", "laplace_fixed_models"):
        n = 100_000
        item, model = rng.integers(0, 800, n), rng.integers(0, 100, n)
        judge = rng.integers(0, 5, n)
        eta = (-0.3 + rng.normal(0, 1, 800)[item] + rng.normal(0, 0.5, 100)[model]
               + rng.normal(0, 0.3, 5)[judge])
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
        if case == "laplace_crossed":
            return dict(y=y, model=model, factors={"item": item, "model": model,
                                                   "judge": judge}, fixed_model=False)
        return dict(y=y, model=model, factors={"item": item, "judge": judge},
                    fixed_model=True)
    if case in ("reml_1m", "laplace_1m"):
        n = 1_000_000
        item = np.repeat(rng.permutation(n // 2), 2)  # 500,000 items, two rows each
        cond = np.tile([0.0, 1.0], n // 2)
        judge = rng.integers(0, 10, n)
        eta = (0.2 * cond + rng.normal(0, 0.8, n // 2)[item]
               + rng.normal(0, 0.3, 10)[judge])
        y = (eta + rng.normal(0, 1, n) if case == "reml_1m"
             else (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float))
        return dict(y=y, model=cond.astype(int), factors={"item": item, "judge": judge},
                    fixed_model=True)
    raise SystemExit(f"unknown case {case!r}; known: {', '.join(TARGETS)}")


def _design(c: dict) -> tuple[np.ndarray, list[str]]:
    n = c["y"].size
    if not c["fixed_model"]:
        return np.ones((n, 1)), ["Intercept"]
    levels = np.unique(c["model"])
    X = np.column_stack([np.ones(n)] + [(c["model"] == m).astype(float)
                                        for m in levels[1:]])
    return X, ["Intercept"] + [f"model{m}" for m in levels[1:]]


def child(case: str) -> dict:
    from evalmix.models.frequentist import (
        fit_laplace_arrays,
        fit_mixedlm_arrays,
        intercept_term,
    )

    c = make_case(case)
    X, names = _design(c)
    terms = [intercept_term(f, codes) for f, codes in c["factors"].items()]
    fitter = fit_mixedlm_arrays if case.startswith("reml") else fit_laplace_arrays
    t0 = time.perf_counter()
    fit = fitter(c["y"], X, names, terms)
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_rss_mb": peak_mb, "rows": int(c["y"].size),
            "levels": {t.factor: t.n_levels for t in terms}, "n_fixed": len(names),
            "sd": dict(zip(fit.vc_names, map(float, fit.vc_sd), strict=True)),
            "resid_sd": float(fit.resid_sd), "intercept": float(fit.fe_est[0]),
            "intercept_se": float(fit.fe_se[0]), "converged": bool(fit.converged),
            "loglik_or_reml": float(fit.details.get("loglik",
                                                    fit.details.get("reml_criterion", 0)))}


def write_data(folder: Path) -> None:
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    for case in ("reml_interaction", "laplace_crossed"):
        c = make_case(case)
        d = pd.DataFrame({"y": c["y"], **c["factors"], "model": c["model"]})
        d.to_csv(folder / f"{case}.csv", index=False)
        print("wrote", folder / f"{case}.csv", len(d), "rows")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=list(TARGETS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--write-data", type=Path, help="write the R input CSVs here and stop")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child)))
        return 0
    if a.write_data:
        write_data(a.write_data)
        return 0
    r_times = json.loads(R_TIMES.read_text()) if R_TIMES.exists() else {}
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    results: dict = {"machine": platform.platform(), "load_before": os.getloadavg(),
                     "cases": {}}
    ok = True
    for case in a.cases:
        out = subprocess.run([sys.executable, __file__, "--child", case], env=env,
                             capture_output=True, text=True, check=False)
        if out.returncode:
            print(out.stderr[-3000:])
            results["cases"][case] = {"error": out.stderr[-500:]}
            ok = False
            continue
        res = json.loads(out.stdout.strip().splitlines()[-1])
        ref = r_times.get(case, {})
        line = f"{case}: {res['seconds']:.2f} s, peak {res['peak_rss_mb']:.0f} MB"
        for sw in ("lme4", "glmmTMB"):
            if sw in ref:
                res[f"ratio_to_{sw}"] = res["seconds"] / ref[sw]["seconds"]
                line += f"; {sw} {ref[sw]['seconds']:.2f} s (ratio {res[f'ratio_to_{sw}']:.2f})"
        target = TARGETS[case]
        res["target"] = target
        if "ratio" in target and "ratio_to_lme4" in res:
            ok &= res["ratio_to_lme4"] <= target["ratio"]
        if "seconds" in target:
            ok &= res["seconds"] <= target["seconds"]
        results["cases"][case] = res
        print(line, flush=True)
    results["load_after"] = os.getloadavg()
    print("load average before/after:", results["load_before"], results["load_after"])
    if OUT.exists():  # keep the cases not run this time
        old = json.loads(OUT.read_text())
        results["cases"] = {**old.get("cases", {}), **results["cases"]}
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
