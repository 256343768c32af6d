"""Benchmark: the maximal model's Laplace fit (issue 28) against glmer and glmmTMB.

One seeded crossed design (:func:`make_data`: 200 scenarios x 10 personas, both sampled,
intercept SDs 0.8 / 0.5 and condition-slope SDs 0.3 / 0.3, x 3 fixed judges x 2
conditions = 12,000 0/1 scores), three models:

* ``intercepts``: ``y ~ condition + (1|scenario) + (1|persona) + (1|judge)`` (the old
  default);
* ``independent``: ``(1 + condition||scenario) + (1 + condition||persona) + (1|judge)``;
* ``maximal``: ``(1 + condition|scenario) + (1 + condition|persona) + (1|judge)``, the
  new default (``evalmix.fit(table, backend=evalmix.Laplace())``).

Target (issue 28, item 5): the maximal Laplace fit within about 3x glmer's time on the
same model. R timings were measured once with ``benchmarks/results/fit_slopes.R`` on the
data this script writes (``--write-data DIR``) and are frozen in
``benchmarks/results/slopes_r.json``; CI never needs R. Each evalmix fit is timed once
after a warm-up fit of the same model (imports and first-call costs excluded).

Usage: ``python benchmarks/bench_slopes.py``; writes ``benchmarks/results/slopes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "slopes.json"
R_TIMES = HERE / "results" / "slopes_r.json"
SEED = 20261207
TARGET_RATIO = 3.0
MODELS = {
    "intercepts": "y ~ 1 + condition + (1|scenario) + (1|persona) + (1|judge)",
    "independent": ("y ~ 1 + condition + (1 + condition||scenario) + "
                    "(1 + condition||persona) + (1|judge)"),
    "maximal": ("y ~ 1 + condition + (1 + condition|scenario) + (1 + condition|persona) "
                "+ (1|judge)"),
}


def make_data():
    """The seeded table (an EvalTable) of the benchmark."""
    from evalmix.sim.designs import Factor, crossed_scores

    sim = crossed_scores([Factor("scenario", 200, 0.8, 0.3), Factor("persona", 10, 0.5, 0.3)],
                         judges={"j1": 0.0, "j2": 0.3, "j3": -0.3}, intercept=0.5,
                         condition_effect=0.3, seed=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sim, sim.table()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-data", type=Path, help="write slopes.csv there for R and stop")
    args = ap.parse_args()
    sim, table = make_data()
    if args.write_data:
        args.write_data.mkdir(parents=True, exist_ok=True)
        sim.data[["y", "condition", "scenario", "persona", "judge"]].to_csv(
            args.write_data / "slopes.csv", index=False)
        return
    from evalmix.models.frequentist import fit_statsmodels

    r = json.loads(R_TIMES.read_text()) if R_TIMES.exists() else {}
    out: dict = {"machine": platform.machine(), "python": sys.version.split()[0],
                 "load": os.getloadavg()[0], "rows": table.n_obs, "cases": {}}
    for name, formula in MODELS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_statsmodels(table, method="laplace", formula=formula, seed=1, draws=200)
            t0 = time.perf_counter()
            fit = fit_statsmodels(table, method="laplace", formula=formula, seed=1,
                                  draws=200)
            secs = time.perf_counter() - t0
        case = {"seconds": secs, "loglik": fit.results.llf,
                "converged": bool(fit.provenance["converged"])}
        for soft in ("glmer", "glmmTMB"):
            if name in r.get(soft, {}):
                case[f"{soft}_seconds"] = r[soft][name]["seconds"]
                case[f"{soft}_loglik"] = r[soft][name]["loglik"]
                case[f"ratio_{soft}"] = secs / r[soft][name]["seconds"]
        out["cases"][name] = case
        print(name, json.dumps(case))
    m = out["cases"]["maximal"]
    out["target"] = {"maximal_vs_glmer": TARGET_RATIO,
                     "met": bool(m.get("ratio_glmer", 0.0) <= TARGET_RATIO)}
    OUT.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
