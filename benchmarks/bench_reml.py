"""Benchmark: REML (``fit_mixedlm_arrays``) against ``lme4::lmer`` on the same data, one run.

Issue 28, item 5: REML on WildBench's scores took 18.6x lmer's time (81 s against
4.3 s) and 44-126 s on a 6,000-row design with 3,000 item:model levels where lmer needs
about half a second. Cases (both ``y ~ model + (1|item) + (1|item:model) + (1|judge)``):

* ``wildbench``: the bundled ``evalmix.datasets.wildbench()`` scores, 29,653 rows, 1,024
  items, 15,339 item:model levels, 3 judge runs (the judge and template version);
* ``interaction_6k``: seeded, 1,000 items x 3 models x 2 judges (6,000 rows, 3,000
  item:model levels).

Each fit runs in a fresh subprocess (imports and a small warm-up fit excluded on both
sides), Python and R one after the other on the same CSV, timed as wall and CPU seconds (the shared machine's load inflates wall
times; CPU seconds of one process are the fairer comparison: both sides use one BLAS
thread). R is needed to run this script, not to run the tests.

Usage: ``python benchmarks/bench_reml.py [case ...]``; writes
``benchmarks/results/reml.json``.
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

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "reml.json"
SEED = 20261208
CASES = ("wildbench", "interaction_6k")

R_CODE = r"""
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
d <- read.csv(commandArgs(TRUE)[1])
d$model <- factor(d$model, levels = sort(unique(d$model), method = "radix"))
for (c in c("item", "item_model", "judge")) d[[c]] <- factor(d[[c]])
invisible(lmer(Reaction ~ Days + (1 | Subject), sleepstudy))  # warm-up
t <- system.time(f <- lmer(y ~ model + (1 | item) + (1 | item_model) + (1 | judge), d,
                           REML = TRUE))
vc <- as.data.frame(VarCorr(f))
cat(toJSON(list(wall = unname(t["elapsed"]), cpu = unname(t["user.self"] + t["sys.self"]),
                reml_criterion = unname(REMLcrit(f)), sd = setNames(as.list(vc$sdcor), vc$grp),
                intercept = unname(fixef(f)[1]), feval = f@optinfo$feval,
                lme4 = as.character(packageVersion("lme4"))), auto_unbox = TRUE, digits = NA))
"""


def make_case(case: str) -> pd.DataFrame:
    """The case's data: y, model, item, item_model, judge."""
    if case == "wildbench":
        from evalmix.datasets import wildbench

        w = wildbench().dropna(subset=["score"])
        return pd.DataFrame({"y": w.score.to_numpy(float), "model": w.model.to_numpy(),
                             "item": w.item_id.to_numpy(),
                             "item_model": (w.item_id + ":" + w.model).to_numpy(),
                             "judge": w.judge_run.to_numpy()})
    if case == "interaction_6k":
        rng = np.random.default_rng(SEED)
        n_item, n_model, n_judge = 1000, 3, 2
        item = np.repeat(np.arange(n_item), n_model * n_judge)
        model = np.tile(np.repeat(np.arange(n_model), n_judge), n_item)
        judge = np.tile(np.arange(n_judge), n_item * n_model)
        im = item * n_model + model
        y = (0.2 * model + rng.normal(0, 1, n_item)[item]
             + rng.normal(0, 0.5, n_item * n_model)[im] + rng.normal(0, 0.3, n_judge)[judge]
             + rng.normal(0, 1, item.size))
        return pd.DataFrame({"y": y, "model": [f"m{m}" for m in model],
                             "item": [f"i{i}" for i in item],
                             "item_model": [f"i{i}:m{m}" for i, m in zip(item, model, strict=True)],
                             "judge": [f"j{j}" for j in judge]})
    raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}")


def child(path: str) -> dict:
    from evalmix.models.frequentist import fit_mixedlm_arrays, intercept_term
    from evalmix.models.frequentist._pls import CrossedDesign

    # warm-up on a small fit (first-call costs of scipy's optimiser and sparse code), as
    # the R side warms up on sleepstudy
    rng = np.random.default_rng(1)
    a, b = np.repeat(np.arange(10), 20), np.tile(np.arange(20), 10)
    fit_mixedlm_arrays(rng.normal(0, 1, 200), np.ones((200, 1)), ["(Intercept)"],
                       [intercept_term("a", a), intercept_term("b", b)])
    d = pd.read_csv(path)
    models = sorted(d.model.unique())
    X = np.column_stack([np.ones(len(d))] + [(d.model == m).to_numpy(float)
                                             for m in models[1:]])
    names = ["(Intercept)"] + [f"model{m}" for m in models[1:]]
    terms = [intercept_term(f, d[f]) for f in ("item", "item_model", "judge")]
    t0, c0 = time.perf_counter(), time.process_time()
    fit = fit_mixedlm_arrays(d.y.to_numpy(float), X, names, terms)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    des = CrossedDesign(terms, len(d))
    return {"wall": wall, "cpu": cpu, "rows": len(d),
            "levels": {t.factor: t.n_levels for t in terms},
            "schur": ("arrow" if des.s_lead is not None else
                      "superlu" if des.s_sparse else "dense"),
            "reml_criterion": float(fit.details["reml_criterion"]),
            "evaluations": int(fit.details["evaluations"]),
            "sd": dict(zip([t.factor for t in terms], map(float, fit.vc_sd), strict=True)),
            "resid_sd": float(fit.resid_sd), "intercept": float(fit.fe_est[0]),
            "converged": bool(fit.converged)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=list(CASES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child)))
        return 0
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    results: dict = {"machine": platform.platform(), "cpus": os.cpu_count(), "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for case in a.cases:
            path = Path(tmp) / f"{case}.csv"
            make_case(case).to_csv(path, index=False)
            load = os.getloadavg()
            py = json.loads(subprocess.run([sys.executable, __file__, "--child", str(path)],
                                           env=env, check=True, capture_output=True,
                                           text=True).stdout)
            r = json.loads(subprocess.run(["Rscript", "-e", R_CODE, str(path)], env=env,
                                          check=True, capture_output=True,
                                          text=True).stdout)
            results["cases"][case] = {
                "evalmix": py, "lmer": r, "load_before": load,
                "ratio_wall": py["wall"] / r["wall"], "ratio_cpu": py["cpu"] / r["cpu"],
                "criterion_minus_lmer": py["reml_criterion"] - r["reml_criterion"]}
            print(case, json.dumps(results["cases"][case], indent=1), flush=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
