"""``evalmix compare``: two or more runs of one benchmark, compared sample by sample.

Reads each RUN (an Inspect log or log folder, an lm-eval ``--output_path`` folder, or a
long table) with its format's reader, compares every run with the first (or
``--baseline``) by :func:`evalmix.compare_runs`, writes the report folder ``--out`` and
prints the answer, one line per task x run.
"""

from __future__ import annotations

import argparse
from typing import Any

from evalmix._escape import terminal
from evalmix.cli._common import (
    add_command,
    finite_float,
    nonnegative_int,
    parse_cluster,
    positive_int,
)
from evalmix.data.readers import FORMATS
from evalmix.errors import InvalidOptionError

__all__ = ["add_parser", "run_compare"]


def add_parser(subparsers: Any) -> list[str]:
    p = add_command(subparsers, "compare")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="an Inspect log (file or folder), an lm-eval output folder or a long "
                        "table; two or more runs (a folder or log with several models gives "
                        "one run per model)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--format", default="auto", choices=FORMATS,
                   help="log format of every RUN (default: detected)")
    p.add_argument("--read-option", dest="read_options", action="append", default=[],
                   metavar="KEY=VALUE",
                   help="reader option, repeatable: scorer=match (Inspect), metric=acc, "
                        "filter=strict-match (lm-eval), outcome=/condition= (tables)")
    p.add_argument("--cluster", action="append", default=[], metavar="ROLE=COL",
                   help="a grouping field as a role, e.g. subject=metadata.subject "
                        "(Inspect) or subject=doc.subject (lm-eval); item=COL names the "
                        "sample id of a table")
    p.add_argument("--by", default="item", metavar="ROLE",
                   help="cluster of the intervals: item (the sample, default) or a role "
                        "given with --cluster")
    p.add_argument("--label", action="append", default=None, metavar="NAME",
                   help="a name per run, in order (repeat)")
    p.add_argument("--baseline", default=None, metavar="NAME",
                   help="the run the others are compared with (default the first)")
    p.add_argument("--method", choices=("CR2", "CR1"), default="CR2",
                   help="headline standard error (default CR2, Satterthwaite df)")
    p.add_argument("--level", type=finite_float, default=0.95)
    p.add_argument("--power", type=finite_float, default=0.8,
                   help="power of the minimum detectable difference (default 0.8)")
    p.add_argument("--reps", type=positive_int, default=2000, metavar="B",
                   help="paired bootstrap resamples")
    p.add_argument("--seed", type=nonnegative_int, default=None, metavar="S")
    p.add_argument("--no-csv-escape", dest="escape_csv", action="store_false",
                   help="write CSV cells as they are (no leading ' before =, +, -, @)")
    p.set_defaults(func=run_compare)
    return ["compare"]


def _read_options(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--read-option expects KEY=VALUE (e.g. scorer=match), "
                                     f"got {item!r}")
        low = value.strip().lower()
        out[key.strip()] = {"true": True, "false": False}.get(low, value.strip())
    return out


def run_compare(args: argparse.Namespace) -> int:
    from evalmix.report.compare_runs import compare_runs

    kwargs = _read_options(args.read_options)
    clusters = parse_cluster(args.cluster)
    if clusters:
        kwargs["clusters"] = clusters
    result = compare_runs(args.runs, out=args.out, labels=args.label, baseline=args.baseline,
                          cluster=args.by, method=args.method, level=args.level,
                          power=args.power, reps=args.reps, seed=args.seed,
                          escape_csv=args.escape_csv, format=args.format, **kwargs)
    for line in result.answer():
        print(terminal(f"evalmix: {line}"))
    print(terminal(f"evalmix: wrote {args.out}/ (report.html, report.md, comparison.csv, "
                   f"missing.csv: {len(result.missing)} sample(s) left out)"))
    return 0
