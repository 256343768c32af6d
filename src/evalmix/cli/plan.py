"""``evalmix power`` and ``evalmix coverage``: plan a benchmark in clusters, check methods.

``evalmix power`` writes ``power.csv`` (one row per design and number of clusters),
``sample_size.csv`` (clusters needed and MDE per line) and ``power.png`` (power curves by
number of clusters, one line per factor added). With ``--components`` it simulates from
variance components instead (one line per factor varied). ``evalmix coverage`` runs
:func:`evalmix.plan.coverage` and writes ``coverage.csv``, ``coverage.jsonl`` (streamed,
resumable) and ``coverage.png``. ``evalmix plan check PLAN DATA`` checks an analysis plan
(:mod:`evalmix.data.analysis_plan`) against a table and says what the data will force.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmix.cli._common import (
    add_command,
    finite_float,
    jobs_count,
    nonnegative_float,
    nonnegative_int,
    positive_int,
)
from evalmix.errors import InvalidOptionError
from evalmix.vocabulary import PilotDifference

__all__ = ["add_parser", "add_check", "run_power", "run_coverage", "run_check",
           "parse_numbers"]


def parse_numbers(text: str, *, integer: bool = False) -> list[Any]:
    """``"10,20,40"`` or ``"5:100:5"`` (start:stop:step, stop included) -> list."""
    out: list[float] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ":" in part:
                bits = [float(b) for b in part.split(":")]
                if len(bits) != 3 or not np.all(np.isfinite(bits)) or bits[2] <= 0:
                    raise ValueError
                out += list(np.arange(bits[0], bits[1] + bits[2] / 2, bits[2]))
            else:
                value = float(part)
                if not np.isfinite(value):
                    raise ValueError
                out.append(value)
        except ValueError as exc:
            raise InvalidOptionError(f"cannot read {text!r} as finite numbers; use 10,20,40 or "
                                     "start:stop:step") from exc
    if not out:
        raise InvalidOptionError(f"no numbers in {text!r}")
    return [int(round(v)) for v in out] if integer else out


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InvalidOptionError(f"{what} expects NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def add_parser(subparsers: Any) -> list[str]:
    """Register ``power`` and ``coverage`` on the top-level CLI."""
    pw = add_command(subparsers, "power")
    pw.add_argument("--estimand", choices=("mean", "win_rate", "difference"), default="mean")
    pw.add_argument("--effect", default="0.05",
                    help="effect(s): mean minus null, win rate minus 0.5, or the difference")
    pw.add_argument("--sd", type=nonnegative_float, default=None,
                    help="SD of one score / one per-item difference (win rates: sqrt(p(1-p)))")
    pw.add_argument("--icc", default="0.1", help="ICC(s) (difference ICC for differences)")
    pw.add_argument("--cluster-size", dest="cluster_size", default="10",
                    help="items per cluster, e.g. 10 or 5,10,20")
    pw.add_argument("--size-cv", dest="size_cv", type=nonnegative_float, default=0.0,
                    help="coefficient of variation of cluster sizes")
    pw.add_argument("--clusters", default="5:100:5",
                    help="numbers of clusters K: 10,20,40 or start:stop:step")
    pw.add_argument("--crossed", action="append", default=[], metavar="NAME=ICC:LEVELS",
                    help="crossed factor with few levels, repeatable, added one line at a "
                         "time (e.g. --crossed judge=0.03:3)")
    pw.add_argument("--level", type=finite_float, default=0.95)
    pw.add_argument("--power", dest="target", type=finite_float, default=0.8,
                    help="target power")
    pw.add_argument("--components", action="append", default=[], metavar="FACTOR=SD",
                    help="simulate from latent SDs instead (repeatable), e.g. scenario=0.8")
    pw.add_argument("--n-levels", "--levels", dest="n_levels", action="append", default=[],
                    metavar="FACTOR=N",
                    help="pilot number of levels per factor (with --components; --levels is "
                         "the old name)")
    pw.add_argument("--vary", action="append", default=[], metavar="FACTOR=N1,N2",
                    help="levels to try per factor (with --components)")
    pw.add_argument("--intercept", type=finite_float, default=0.0,
                    help="latent intercept (with --components)")
    pw.add_argument("--reps", type=positive_int, default=500,
                    help="replications (with --components)")
    pw.add_argument("--seed", type=nonnegative_int, default=None,
                    help="seed (default: one drawn and printed)")
    pw.add_argument("--out", default="power", help="output folder")
    pw.set_defaults(func=run_power)

    cv = add_command(subparsers, "coverage")
    cv.add_argument("--methods", default="naive,CR1,CR2,bootstrap,bootstrap-t,bootstrap-expanded")
    cv.add_argument("--estimand", default="mean", help="mean and/or difference (comma list)")
    cv.add_argument("--clusters", default=None, help="numbers of clusters K (comma list)")
    cv.add_argument("--n-obs", dest="n_obs", default=None,
                    help="total items instead of --clusters (K = n_obs / cluster size)")
    cv.add_argument("--cluster-size", dest="cluster_size", default="1,5,10,20,50")
    cv.add_argument("--icc", default="0.1,0.2")
    cv.add_argument("--size-cv", dest="size_cv", default="0")
    cv.add_argument("--p", default="0.7", help="true accuracy (mean)")
    cv.add_argument("--reps", type=positive_int, default=2000)
    cv.add_argument("--boot-reps", dest="boot_reps", type=positive_int, default=999)
    cv.add_argument("--level", type=finite_float, default=0.95)
    cv.add_argument("--seed", type=nonnegative_int, default=None,
                    help="study seed (default: one drawn and printed; --resume keeps the run's)")
    cv.add_argument("--jobs", type=jobs_count, default=1, help="joblib workers (-1: all cores)")
    cv.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    cv.add_argument("--resume", action="store_true", help="continue a run in --out")
    cv.add_argument("--quiet", action="store_true", help="no progress bar")
    cv.add_argument("--out", required=True, help="output folder")
    cv.set_defaults(func=run_coverage)
    return ["power", "coverage"]


# ------------------------------------------------------------------------- power
def _analytic_lines(args) -> tuple[pd.DataFrame, pd.DataFrame]:
    from evalmix.plan.power import mde, n_clusters_for_power, power

    ks = np.array(parse_numbers(args.clusters, integer=True))
    crossed_all: list[tuple[str, tuple[float, int]]] = []
    for name, value in _pairs(args.crossed, "--crossed").items():
        icc_s, _, lv = value.partition(":")
        try:
            crossed_all.append((name, (float(icc_s), int(lv))))
        except ValueError as exc:
            raise InvalidOptionError(f"--crossed expects NAME=ICC:LEVELS, got {name}={value}") from exc
    curves, sizes = [], []
    for effect in parse_numbers(args.effect):
        for icc in parse_numbers(args.icc):
            for m in parse_numbers(args.cluster_size):
                for n_added in range(len(crossed_all) + 1):
                    crossed = dict(crossed_all[:n_added])
                    label = f"clusters (ICC {icc:g}, m {m:g})"
                    if crossed:
                        label += " + " + " + ".join(crossed)
                    common = dict(cluster_size=m, icc=icc, sd=args.sd, level=args.level,
                                  estimand=args.estimand, size_cv=args.size_cv,
                                  crossed=crossed)
                    frame = power(effect, n_clusters=ks, **common).tidy()
                    frame["line"] = label
                    curves.append(frame)
                    need = n_clusters_for_power(args.target, effect=effect, **common)
                    kmid = int(ks[len(ks) // 2])
                    sizes.append({"line": label, "effect": effect, "icc": icc,
                                  "cluster_size": m, "target_power": args.target,
                                  "n_clusters_needed": float(need.n_clusters),
                                  "items_needed": float(need.n_clusters) * m,
                                  "mde_at_K": kmid,
                                  "mde": float(mde(args.target, n_clusters=kmid,
                                                   **common).mde)})
    return pd.concat(curves, ignore_index=True), pd.DataFrame(sizes)


def _parametric_lines(args) -> tuple[pd.DataFrame, pd.DataFrame]:
    from evalmix.plan.pilot import parametric_power

    comps = {k: parse_numbers(v)[0] for k, v in _pairs(args.components, "--components").items()}
    n_levels = {k: parse_numbers(v, integer=True)[0]
                for k, v in _pairs(args.n_levels, "--n-levels").items()}
    vary = {k: parse_numbers(v, integer=True) for k, v in _pairs(args.vary, "--vary").items()}
    if not n_levels:
        raise InvalidOptionError("--components needs --n-levels FACTOR=N for every factor")
    estimand: PilotDifference = (
        "mean" if args.estimand in ("mean", "win_rate") else "difference")
    effects = parse_numbers(args.effect)
    res = parametric_power(comps, n_levels=n_levels, vary=vary, estimand=estimand,
                           intercept=args.intercept, effect=effects[0], reps=args.reps,
                           level=args.level, power=args.target, seed=args.seed)
    table = res.table
    base = table[table.plan == "base"]
    rows = []
    for factor in vary:
        part = pd.concat([base, table[table.factor == factor]])
        part = part.assign(line=f"vary {factor}", n_levels=part[f"n_levels_{factor}"])
        rows.append(part)
    curves = pd.concat(rows, ignore_index=True) if rows else table.assign(line="base",
                                                                        n_levels=0)
    return curves, table


def run_power(args: argparse.Namespace) -> int:
    from evalmix.errors import check_out_dir
    from evalmix.plan.plots import plot_power_curves

    out = check_out_dir(args.out)
    if args.components:
        from evalmix.seeding import resolve_seed

        args.seed = resolve_seed(args.seed)   # drawn when not given, and printed below
        curves, table = _parametric_lines(args)
        out.mkdir(parents=True, exist_ok=True)
        curves.to_csv(out / "power.csv", index=False)
        table.to_csv(out / "plans.csv", index=False)
        plot_power_curves(curves, out / "power.png", x="n_levels", target=args.target,
                          title="Simulated power by number of levels (one line per factor "
                                "varied)")
        print(table[["plan", "power", "power_mcse", "mde", "mde_mcse"]].to_string(index=False))
        print(f"evalmix power: simulated with seed {args.seed}")
    else:
        curves, sizes = _analytic_lines(args)
        out.mkdir(parents=True, exist_ok=True)
        curves.to_csv(out / "power.csv", index=False)
        sizes.to_csv(out / "sample_size.csv", index=False)
        plot_power_curves(curves, out / "power.png", target=args.target,
                          title=f"Power of the cluster-robust t test ({args.estimand})")
        print(sizes.to_string(index=False, float_format="{:.4g}".format))
    print(f"evalmix power: wrote {out / 'power.csv'} and {out / 'power.png'}")
    return 0


# ---------------------------------------------------------------------- coverage
def run_coverage(args: argparse.Namespace) -> int:
    from evalmix.errors import check_out_dir
    from evalmix.plan.plots import plot_coverage
    from evalmix.plan.study import coverage

    check_out_dir(args.out)

    grid: dict[str, list[Any]] = {
        "estimand": [e.strip() for e in args.estimand.split(",") if e.strip()],
        "cluster_size": parse_numbers(args.cluster_size),
        "icc": parse_numbers(args.icc),
        "size_cv": parse_numbers(args.size_cv),
        "p": parse_numbers(args.p),
    }
    if args.clusters is not None and args.n_obs is not None:
        raise InvalidOptionError("give --clusters or --n-obs, not both")
    if args.clusters is not None:
        grid["n_clusters"] = parse_numbers(args.clusters, integer=True)
    else:
        grid["n_obs"] = parse_numbers(args.n_obs or "1000", integer=True)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    res = coverage(methods, grid, reps=args.reps, seed=args.seed, level=args.level,
                   boot_reps=args.boot_reps, jobs=args.jobs, client=args.scheduler,
                   out=args.out, resume=args.resume, progress=not args.quiet)
    plot_coverage(res.table, Path(args.out) / "coverage.png")
    show = ["n_clusters", "cluster_size", "icc", "method", "coverage", "mcse", "mean_width"]
    print(res.table[show].to_string(index=False, float_format="{:.4g}".format))
    print(f"evalmix coverage: {len(res.table)} rows in {res.seconds:.1f} s "
          f"({res.n_resumed} cells resumed), seed {res.seed}; wrote "
          f"{Path(args.out) / 'coverage.csv'} and "
          f"{Path(args.out) / 'coverage.png'}")
    return 0


# ------------------------------------------------------------------------- check
def add_check(sub: Any) -> None:
    """Register ``check`` in the ``evalmix plan`` group."""
    from evalmix.cli.report import add_read_arguments

    ck = sub.add_parser(
        "check", help="check an analysis plan (plan.toml) against a table before the report",
        description="Read an analysis plan declared in advance (the eight items: primary "
                    "estimand, primary cluster unit, fallback if clusters are too few, "
                    "sensitivity cluster levels, interval method, bootstrap replicates, tie "
                    "handling, judge pooling rule; docs/plans.md) and check it against DATA "
                    "read with the same options as evalmix report: roles, contrasts, "
                    "methods, ties. Prints each item as it will run and the deviations the "
                    "data force (the fallback); exit 2 when the plan does not fit.")
    ck.add_argument("plan", metavar="PLAN", help="analysis plan (TOML)")
    add_read_arguments(ck)
    ck.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from evalmix._escape import terminal
    from evalmix.cli.report import read_plan_for, read_table
    from evalmix.compare.recommend import level_label
    from evalmix.report.planned import resolve_plan

    plan = read_plan_for(args)
    table = read_table(args, plan)
    use = resolve_plan(plan, table)
    t = use.table

    def levels(level: tuple[str, ...]) -> str:
        if not level:
            return "none (rows independent)"
        return f"{level_label(level)} ({min(t.n_levels(r) for r in level)} levels)"

    n = len(use.keys)
    shown = ", ".join(c for _, c in use.keys[:3]) + (" ..." if n > 3 else "")
    fb = plan.fallback_method or plan.method
    lines = [
        f"evalmix plan check: {plan.path} (sha256 {plan.sha256[:16]}) fits {args.data} "
        f"({t.n_obs:,} rows, {t.kind})",
        f"  1. primary estimand: {plan.estimand}, {n} contrast(s): {shown}",
        f"  2. primary cluster: {levels(use.declared)}",
        f"  3. fallback below {plan.min_clusters} levels: {fb} by {levels(use.fallback)}",
        "  4. sensitivity clusters: "
        + ("; ".join(levels(lv) for lv in use.sensitivity) or "none"),
        f"  5. interval method: {plan.method}",
        f"  6. bootstrap replicates: {plan.reps}",
        f"  7. ties: {plan.ties}" + (f" ({t.n_ties:,} tie verdicts read)"
                                     if t.kind == "pairwise" else " (scores table: none)"),
        f"  8. judges: {plan.judges}",
    ]
    lines += [f"deviation the data force: {d}" for d in use.deviations] or [
        f"no deviation: the primary result will be {use.method} by "
        f"{level_label(use.cluster) or 'none'}"]
    print(terminal("\n".join(lines)))
    return 0
