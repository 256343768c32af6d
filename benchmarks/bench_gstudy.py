"""Benchmark: the REML path's parametric bootstrap, one scoring step vs full refits.

The REML G study's intervals come from data simulated at the estimates, each estimated
by one REML Fisher-scoring step (MINQUE, :func:`evalmix.models.frequentist._reml_scoring.reml_scoring_step`:
one factorisation for all replicates). The obvious baseline refits REML to every
simulated data set (:func:`evalmix.models.frequentist._reml.fit_mixedlm_arrays`); it is timed on a
few replicates and extrapolated per replicate. Design: an unbalanced 6 models x 30 items
x 3 judges x 2 runs (10% of rows dropped), 8 effects.

Usage: ``python benchmarks/bench_gstudy.py [--refits 3]``; writes
``benchmarks/results/gstudy.json`` (with the machine load, timings are noisy on a shared
machine; the ratio is measured in one run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from evalmix.compare.gstudy import _simulated, _terms
from evalmix.data.table import dense_codes
from evalmix.design.gtheory import GDesign
from evalmix.models.frequentist._reml import fit_mixedlm_arrays
from evalmix.models.frequentist._reml_scoring import reml_scoring_step
from evalmix.plan.dstudy_coverage import simulate_scores

REPS = 2000
OUT = Path(__file__).resolve().parent / "results" / "gstudy.json"
DESIGN = GDesign("model", ("item", "judge", "run"), {"run": ("model", "item", "judge")})
TRUTH = np.array([0.04, 0.03, 0.005, 0.02, 0.004, 0.006, 0.01, 0.05])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--refits", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    y, _ = simulate_scores(DESIGN, TRUTH, {"model": 6, "item": 30, "judge": 3, "run": 2},
                           reps=1, rng=rng)
    idx = np.indices(y[0].shape).reshape(4, -1)
    keep = rng.random(idx.shape[1]) >= 0.1
    codes = {f: dense_codes(idx[i][keep]) for i, f in enumerate(DESIGN.factors)}
    terms = _terms(DESIGN, codes)
    yy = y[0].ravel()[keep]
    X = np.ones((yy.size, 1))
    fit = fit_mixedlm_arrays(yy, X, ["Intercept"], terms, results=False)
    v = np.append(fit.vc_sd**2, fit.resid_sd**2)
    t0 = time.perf_counter()
    step = reml_scoring_step(_simulated(float(fit.fe_est[0]), terms, np.sqrt(v), yy.size,
                                        REPS, rng), X, terms, v)
    t_step = time.perf_counter() - t0
    sims = next(_simulated(float(fit.fe_est[0]), terms, np.sqrt(v), yy.size, args.refits,
                           rng))
    t0 = time.perf_counter()
    for j in range(args.refits):
        fit_mixedlm_arrays(sims[:, j], X, ["Intercept"], terms, results=False)
    t_refit = (time.perf_counter() - t0) / args.refits
    load = os.getloadavg()
    result = {
        "rows": int(yy.size), "effects": len(DESIGN.effects), "reps": REPS,
        "scoring_step_seconds": round(t_step, 3),
        "refit_seconds_each": round(t_refit, 3),
        "refit_seconds_extrapolated": round(t_refit * REPS, 1),
        "speedup": round(t_refit * REPS / t_step, 1),
        "bootstrap_mean_vs_estimate": np.round(step.mean(axis=0) / np.maximum(v, 1e-12),
                                               3).tolist(),
        "load_average": [round(x, 2) for x in load],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
