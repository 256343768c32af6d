"""``evalmix plan dstudy``: a G study of a table or an eval log, and its D study.

Reads a long table (``--outcome``, ``--object``, ``--facet``) or an eval log (the
reader's roles: the model, its clusters, the order, the replicates), runs
:func:`evalmix.gstudy` and :func:`evalmix.dstudy`, and writes into ``--out``:
``components.csv`` (variance per effect with intervals), ``facets.csv`` (what to sample
and what to repeat), ``dstudy.csv`` (one row per design), ``dstudy.png`` (coefficients
and SEs against each facet's size) and ``summary.json``. Files are written to a
temporary name and renamed into place.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from evalmix._escape import csv_frame, terminal
from evalmix.cli._common import add_command, finite_float, nonnegative_int, positive_int
from evalmix.errors import InvalidOptionError

__all__ = ["add_parser", "run_dstudy"]

#: Leading characters that make a spreadsheet read a CSV cell as a formula.


def add_parser(subparsers: Any) -> list[str]:
    """Register ``plan`` (with its ``dstudy`` subcommand) on the top-level CLI."""
    from evalmix.cli._common import _Parser
    from evalmix.data.readers import FORMATS

    plan = add_command(subparsers, "plan")
    sub = plan.add_subparsers(dest="plan_command", metavar="PLAN", parser_class=_Parser)
    ds = sub.add_parser(
        "dstudy", help="G study and D study: reliability and SEs for other numbers of "
                       "judges, prompts, runs and items; the cheapest design",
        description="Variance components of a table or an eval log (generalizability "
                    "theory), the G coefficients and SEs they imply for other numbers of "
                    "items, judges, templates and runs, the smallest design reaching a "
                    "target and the best design for a budget.")
    ds.add_argument("data", metavar="DATA",
                    help="CSV/TSV/Parquet/JSONL table, or an eval log file or folder")
    ds.add_argument("--format", default="auto", choices=FORMATS,
                    help="input format (default auto: a table when --outcome is given)")
    ds.add_argument("--read-option", dest="read_options", action="append", default=[],
                    metavar="KEY=VALUE", help="log reader option, repeatable (scorer=NAME...)")
    ds.add_argument("--outcome", help="score column of a table (0/1, fraction, rating)")
    ds.add_argument("--object", help="object of measurement: the models/systems column of a "
                                     "table (a log: default the model)")
    ds.add_argument("--facet", action="append", default=None, metavar="COL",
                    help="facet column, repeatable (items, judges, templates, runs, ...)")
    ds.add_argument("--nested", action="append", default=[], metavar="FACET=PARENT[:PARENT]",
                    help="facet nested within others, e.g. run=judge (repeatable)")
    ds.add_argument("--fixed", action="append", default=[], metavar="FACET",
                    help="facet held fixed (e.g. order), repeatable")
    ds.add_argument("--method", choices=("auto", "anova", "reml", "bayes"), default="auto")
    ds.add_argument("--n", action="append", default=[], metavar="FACET=N1,N2",
                    help="facet sizes to tabulate, repeatable (default: each facet varied)")
    ds.add_argument("--target", type=finite_float, default=None,
                    help="find the cheapest design reaching this criterion")
    ds.add_argument("--criterion", choices=("erho2", "phi", "se_score", "se_diff"),
                    default="erho2")
    ds.add_argument("--cost", action="append", default=[], metavar="NAME=COST",
                    help="cost per call (call=0.01) or per new level of a facet (item=2)")
    ds.add_argument("--budget", type=finite_float, default=None,
                    help="find the best design costing at most this")
    ds.add_argument("--max-levels", dest="max_levels", type=positive_int, default=50)
    ds.add_argument("--level", type=finite_float, default=0.95)
    ds.add_argument("--reps", type=positive_int, default=None,
                    help="parametric-bootstrap replicates (default 2000)")
    ds.add_argument("--draws", type=positive_int, default=None,
                    help="--method bayes: posterior draws per chain")
    ds.add_argument("--seed", type=nonnegative_int, default=None)
    ds.add_argument("--quiet", action="store_true", help="no progress bars")
    ds.add_argument("--out", required=True, metavar="DIR", help="output folder")
    ds.set_defaults(func=run_dstudy)
    from evalmix.cli.plan import add_check

    add_check(sub)
    plan.set_defaults(func=lambda args: _no_subcommand(plan))
    return ["plan"]


def _no_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InvalidOptionError(f"{what} expects NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidOptionError(f"{what}: {text!r} is not a number") from None


def _atomic(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.tmp-",
                               suffix=path.suffix)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes the file private; outputs are not
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(args: argparse.Namespace) -> Any:
    """A DataFrame (a table with --outcome) or an EvalTable (a log)."""
    from evalmix.data.load import load_frame
    from evalmix.data.readers import detect_format, read_log

    fmt = args.format
    if fmt == "auto":
        fmt = "table" if args.outcome else detect_format(args.data)
    if fmt == "table":
        if not args.outcome or not args.object or not args.facet:
            raise InvalidOptionError("a table needs --outcome, --object and --facet (e.g. "
                                     "--outcome score --object model --facet item --facet judge)")
        frame, _ = load_frame(args.data, text_columns=[args.object, *args.facet])
        return frame
    kwargs: dict[str, Any] = {}
    for key, value in _pairs(args.read_options, "--read-option").items():
        kwargs[key] = {"true": True, "false": False}.get(value.lower(), value)
    return read_log(args.data, format=fmt, **kwargs)


def run_dstudy(args: argparse.Namespace) -> int:
    from evalmix.compare.gstudy import gstudy
    from evalmix.errors import check_out_dir
    from evalmix.plan.dstudy import dstudy

    out = check_out_dir(args.out)
    data = _read(args)
    nested = {k: tuple(p for p in v.split(":") if p)
              for k, v in _pairs(args.nested, "--nested").items()}
    sizes = {k: [_number(x, f"--n {k}") for x in v.split(",") if x.strip()]
             for k, v in _pairs(args.n, "--n").items()}
    costs = {k: _number(v, f"--cost {k}") for k, v in _pairs(args.cost, "--cost").items()}
    g = gstudy(data, args.object, args.facet, outcome=args.outcome if args.outcome else None,
               nested=nested or None, fixed=tuple(args.fixed), method=args.method,
               level=args.level, reps=args.reps, draws=args.draws, seed=args.seed,
               progress=not args.quiet)
    d = dstudy(g, sizes or None, target=args.target, criterion=args.criterion,
               costs=costs or None, budget=args.budget, max_levels=args.max_levels)
    out.mkdir(parents=True, exist_ok=True)
    files = {"components.csv": g.components(), "facets.csv": g.facets(),
             "dstudy.csv": d.table}
    for name, frame in files.items():
        _atomic(out / name, lambda p, f=frame: csv_frame(f).to_csv(p, index=False))
    _atomic(out / "dstudy.png", d.plot)
    summary = {"object": g.design.object, "facets": list(g.design.facets),
               "nesting": {k: list(v) for k, v in g.design.nesting.items()},
               "fixed": list(g.design.fixed), "method": g.method, "scale": g.scale,
               "interval": g.interval, "n_observed": dict(g.n_observed), "seed": g.seed,
               "naive_se_score": g.naive_se_score, "naive_se_diff": g.naive_se_diff,
               "advice": g.advice, "notes": list(g.notes) + list(d.notes),
               "costs": dict(d.costs), "target": d.target, "budget": d.budget,
               "criterion": d.criterion}
    _atomic(out / "summary.json",
            lambda p: p.write_text(json.dumps(summary, indent=2, default=str)))
    print(terminal(str(d)))
    print(f"evalmix plan dstudy: wrote {len(files) + 2} files to {out}/ "
          f"(open {out / 'dstudy.png'})")
    return 0
