"""Benchmark: the Bayesian maximal model against its intercept-only version (issue 28, item 5).

A 20,000-row crossed design (``evalmix.sim.crossed_scores``: 200 scenarios x 10 personas,
both sampled with condition-slope SDs 0.3, x 5 fixed judges x 2 conditions, 0/1 scores)
fitted by ``evalmix.fit`` (default Bayesian back end) twice in one run: the default
maximal model (independent condition slopes for both sampled factors, see
docs/models.md) and ``slopes=()``. Target: within about 2x the intercept-only time.
Wall and CPU seconds of the whole fit (compile included), one process each.

Usage: ``python benchmarks/bench_bayes_slopes.py``; writes
``benchmarks/results/bayes_slopes.json``.
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
OUT = HERE / "results" / "bayes_slopes.json"


def child(model: str) -> dict:
    import warnings

    import evalmix
    from evalmix.sim.designs import Factor, crossed_scores

    sim = crossed_scores([Factor("scenario", 200, 0.8, 0.3), Factor("persona", 10, 0.5, 0.3)],
                         judges={f"j{k}": 0.1 * k for k in range(5)}, seed=20261208)
    table = sim.table()
    kw = {} if model == "maximal" else {"slopes": ()}
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = evalmix.fit(table, seed=1, progress=False, **kw)
    d = fit.diagnostics
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "rows": len(table.data), "formula": fit.formula,
            "r_hat_max": float(d["r_hat"].max()), "ess_bulk_min": float(d["ess_bulk"].min())}


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2])))
        return 0
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    res: dict = {"machine": platform.platform(), "load_before": os.getloadavg()}
    for model in ("intercepts", "maximal"):
        out = subprocess.run([sys.executable, __file__, "--child", model], env=env,
                             check=True, capture_output=True, text=True).stdout
        res[model] = json.loads(out.strip().splitlines()[-1])
        print(model, res[model], flush=True)
    res["ratio_wall"] = res["maximal"]["wall"] / res["intercepts"]["wall"]
    res["ratio_cpu"] = res["maximal"]["cpu"] / res["intercepts"]["cpu"]
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(res["ratio_wall"], res["ratio_cpu"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
