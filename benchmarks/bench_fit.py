"""Benchmark: Bayesian fits (`evalmix.fit`) and the MT-Bench report, against Bambi.

Targets (issue 15), each at the same quality bars: every parameter's bulk and tail ESS
>= 400, R-hat <= 1.01, 0 divergences.

| case | target |
| --- | --- |
| default fit, 4,320 simulated rows (20 scenarios x 6 personas x 3 authors x 3 judges) | <= 3 s |
| 20k rows, 4 crossed factors + judge position + judge x condition slope | <= 6 s |
| 100k rows, 4 crossed factors | <= 15 s |
| MT-Bench README `evalmix report` command with MCMC (prior sensitivity included) | <= 30 s |
| MT-Bench fit with `slopes=("judge",)` | <= 30 s |
| `ties="separate"` (cumulative logit), 4,320 rows | <= 10 s |
| `family="ordinal"`, 4,050 rows of 1-6 scores | <= 10 s |

The ratio baseline is Bambi's default sampler (PyMC NUTS) on the 20k case: effective
samples per second (smallest bulk ESS / fit seconds), evalmix over Bambi.

Every case runs in a fresh subprocess (imports and any compile included in the process
time; "fit seconds" is the `evalmix.fit` call, or the whole command for the report);
memory is the peak sum of RSS over the child and its descendants (psutil, polled every
50 ms). The MT-Bench cases need ``../shared/data`` and are skipped without it.

Usage: ``python benchmarks/bench_fit.py [--no-bambi] [--bambi-draws 300] [--only CASE]``;
writes ``benchmarks/results/fit.json`` (with ``--only`` or ``--no-bambi``, the other cases
are kept from the file, each with the date and load it was measured at).
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

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "fit.json"
MTBENCH = ROOT.parent / "shared" / "data" / "judging_the_judges" / \
    "jtj_MTBench_position_bias.csv"
QUALITY = {"ess_min": 400, "r_hat_max": 1.01, "divergences": 0}
#: case -> seconds target
TARGETS = {"default_4k": 3.0, "slope_20k": 6.0, "crossed_100k": 15.0,
           "mtbench_report": 30.0, "mtbench_slopes": 30.0, "ties_separate_4k": 10.0,
           "ordinal_4k": 10.0, "bambi_20k_slope": None}
#: run order: the small fits and the ratio first, the long cases last
ORDER = ("default_4k", "ties_separate_4k", "ordinal_4k", "slope_20k", "bambi_20k_slope",
         "crossed_100k", "mtbench_report", "mtbench_slopes")
SEED = 20261130
REPORT_ARGS = ["report", str(MTBENCH), "--outcome", "outcome", "--model-a", "model_a",
               "--model-b", "model_b", "--first-shown", "first_shown", "--ties", "half",
               "--cluster", "item=item_id", "--cluster", "item_group=item_group",
               "--cluster", "judge=judge", "--seed", "1"]


def _ordinal_table():
    """1-6 scores: 270 items x 5 judges x 3 models (cut points -2..2, model effects
    0 / 0.5 / 1, item SD 1, judge SD 0.5), the generator of tests/reference ordinal data
    at 5.4 times the size."""
    import numpy as np
    import pandas as pd

    import evalmix

    rng = np.random.default_rng(SEED)
    items, judges, models = 270, 5, 3
    a = rng.normal(0, 1.0, items)
    j = rng.normal(0, 0.5, judges)
    eta = (a[:, None, None] + j[None, :, None] + np.array([0.0, 0.5, 1.0])[None, None, :])
    cut = np.linspace(-2, 2, 5)
    u = rng.logistic(size=eta.shape) + eta
    score = 1 + (u[..., None] > cut).sum(axis=-1)
    ii, jj, mm = np.meshgrid(range(items), range(judges), range(models), indexing="ij")
    df = pd.DataFrame({"item": [f"q{i:03d}" for i in ii.ravel()],
                       "judge": [f"j{x}" for x in jj.ravel()],
                       "model": [f"m{x}" for x in mm.ravel()], "score": score.ravel()})
    return evalmix.read(df, outcome="score", condition="model",
                        clusters={"item": "item", "judge": "judge"})


def _table(case: str):
    import warnings

    import evalmix
    from evalmix.sim import pairwise_judges

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case == "default_4k":
            return pairwise_judges(20, 6, 3, 3, tie_threshold=0.0, seed=SEED).table(), {}
        if case in ("slope_20k", "bambi_20k_slope"):
            t = pairwise_judges(93, 6, 3, 3, tie_threshold=0.0, sd_judge_condition=0.3,
                                seed=SEED).table()
            return t, {"slopes": ("judge",)}
        if case == "crossed_100k":
            return pairwise_judges(463, 6, 3, 3, tie_threshold=0.0,
                                   sd_judge_condition=0.0, seed=SEED).table(), {}
        if case == "ties_separate_4k":
            return pairwise_judges(20, 6, 3, 3, tie_threshold=0.3, seed=SEED).table(
                ties="separate"), {}
        if case == "ordinal_4k":
            return _ordinal_table(), {"family": "ordinal"}
        if case == "mtbench_slopes":
            t = evalmix.read(MTBENCH, outcome="outcome", model_a="model_a",
                             model_b="model_b", first_shown="first_shown",
                             clusters={"item": "item_id", "category": "item_group",
                                       "judge": "judge"})
            return t, {"slopes": ("judge",)}
    raise ValueError(case)


def child(case: str, out: str, draws: int | None, tune: int | None) -> None:
    import warnings

    if case == "mtbench_report":
        from evalmix.cli import main

        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            rc = main([*REPORT_ARGS, "--out", d])
            wall = time.perf_counter() - t0
            summary = json.loads((Path(d) / "summary.json").read_text())
        fits = summary.get("models") or {}
        Path(out).write_text(json.dumps({"case": case, "rc": rc, "fit_seconds": round(
            wall, 2), "fits": fits}, default=str))
        return
    table, kw = _table(case)
    sampling = {"engine": "bambi" if case.startswith("bambi") else "auto"}
    if draws:
        sampling["draws"] = draws
    if tune is not None:
        sampling["tune"] = tune
    import evalmix

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = evalmix.fit(table, backend=evalmix.Bayes(**sampling), seed=1, progress=False,
                          **kw)
    wall = time.perf_counter() - t0
    d = fit.diagnostics
    res = {
        "case": case, "rows": table.n_obs, "fit_seconds": round(wall, 2),
        "min_ess_bulk": float(d["ess_bulk"].min()),
        "min_ess_parameter": str(d.loc[d["ess_bulk"].idxmin(), "parameter"]),
        "min_ess_tail": float(d["ess_tail"].min()),
        "max_r_hat": float(d["r_hat"].max()), "divergences": int(fit.divergences),
        "n_parameters": int(len(d)),
        **{k: fit.provenance.get(k) for k in ("draws", "tune", "chains", "engine",
                                              "sampler", "sampling_seconds", "retried")},
    }
    res["ess_per_second"] = res["min_ess_bulk"] / wall
    Path(out).write_text(json.dumps(res, default=str))


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


def _passes(case: str, r: dict) -> bool:
    target = TARGETS[case]
    if case == "mtbench_report":
        fits = [f for f in r.get("fits", {}).values() if isinstance(f, dict)]
        quiet = all(not any("did not pass" in w for w in f.get("warnings", []))
                    for f in fits)
        return r["rc"] == 0 and quiet and r["fit_seconds"] <= target
    return (r["min_ess_bulk"] >= QUALITY["ess_min"] and r["min_ess_tail"] >= QUALITY["ess_min"]
            and r["divergences"] == 0 and r["max_r_hat"] <= QUALITY["r_hat_max"]
            and (target is None or r["fit_seconds"] <= target))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--draws", type=int)
    ap.add_argument("--tune", type=int)
    ap.add_argument("--no-bambi", action="store_true")
    ap.add_argument("--bambi-draws", type=int, default=300)
    ap.add_argument("--only", action="append")
    a = ap.parse_args()
    if a.child:
        child(a.child, a.out, a.draws, a.tune)
        return
    load0 = os.getloadavg()
    cases = [c for c in ORDER if c != "bambi_20k_slope" or not a.no_bambi]
    if not MTBENCH.exists():
        cases = [c for c in cases if not c.startswith("mtbench")]
    if a.only:
        cases = [c for c in cases if c in a.only]
    # the cases not run this time (--only, --no-bambi) are kept from the last file, each
    # with its own date and load (a ratio between cases of different runs says so in
    # "measured")
    last = json.loads(OUT.read_text()).get("results", {}) if OUT.exists() else {}
    results: dict[str, dict] = {c: r for c, r in last.items() if c not in cases}
    for case in cases:
        bambi = case == "bambi_20k_slope"
        load = os.getloadavg()
        results[case] = run_case(case, draws=a.bambi_draws if bambi else None,
                                 tune=a.bambi_draws if bambi else None)
        results[case]["measured"] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                     "loadavg_start": load}
        print(json.dumps(results[case]), flush=True)
        _write(results, load0)   # after every case: a long run keeps what it measured


def _write(results: dict[str, dict], load0) -> None:
    summary: dict[str, object] = {f"pass_{c}": _passes(c, r) for c, r in results.items()
                                  if TARGETS[c] is not None}
    if "bambi_20k_slope" in results and "slope_20k" in results:
        ratio = (results["slope_20k"]["ess_per_second"]
                 / results["bambi_20k_slope"]["ess_per_second"])
        summary["ess_per_second_ratio_vs_bambi"] = round(ratio, 1)
    doc = {"benchmark": "bench_fit", "targets_seconds": TARGETS, "quality": QUALITY,
           "results": results, "summary": summary,
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                       "note": "2 cores shared with other developers; timings vary"},
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
