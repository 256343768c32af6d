"""``evalmix agreement``: judges against humans on a CSV of ratings.

Reads a long table (one row per rating), computes :func:`evalmix.agreement` (and, with
``--alt-test EPSILON``, :func:`evalmix.alt_test`), and writes ``agreement.csv`` (the tidy
rows), ``alt_test.csv`` and ``summary.txt`` into ``--out``, atomically (a temporary
folder renamed into place). One line goes to stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from evalmix._escape import csv_frame, terminal
from evalmix.cli._common import (
    add_command,
    finite_float,
    nonnegative_int,
    positive_int,
    stop_if_interrupted,
)
from evalmix.errors import EvalmixWarning

__all__ = ["add_parser", "run_agreement"]



def add_parser(subparsers: Any) -> list[str]:
    p = add_command(subparsers, "agreement")
    p.add_argument("path", help="CSV/TSV/Parquet/JSONL file, one row per rating")
    p.add_argument("--item", action="append", default=None, metavar="COL",
                   help="unit column (repeatable; default item_id)")
    p.add_argument("--rater", action="append", default=None, metavar="COL",
                   help="rater column (repeatable, e.g. --rater rater --rater eval_prompt)")
    p.add_argument("--rating", default=None, metavar="COL",
                   help="rating column (default: rating, score or outcome)")
    p.add_argument("--rater-kind", dest="rater_kind", default="rater_kind", metavar="COL",
                   help="column saying human / llm (default rater_kind)")
    p.add_argument("--human", action="append", default=None, metavar="RATER",
                   help="a human rater (repeatable; overrides --rater-kind)")
    p.add_argument("--cluster", default=None, metavar="COL",
                   help="a cluster above the units: bootstrap and delta over its clusters")
    p.add_argument("--by", default=None, metavar="COL", help="strata analysed separately")
    p.add_argument("--ties", choices=("keep", "exclude"), default="keep")
    p.add_argument("--pairs", choices=("auto", "all", "humans"), default="auto")
    p.add_argument("--min-items", dest="min_items", type=positive_int, default=10)
    p.add_argument("--method", choices=("both", "delta", "bootstrap"), default="both")
    p.add_argument("--reps", type=positive_int, default=999)
    p.add_argument("--level", type=finite_float, default=0.95)
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--alt-test", dest="alt_test", type=finite_float, default=None,
                   metavar="EPSILON",
                   help="also run the alternative annotator test with this epsilon "
                        "(0.2 experts, 0.15 skilled, 0.1 crowd)")
    p.add_argument("--out", default="agreement", help="output folder")
    p.set_defaults(func=run_agreement)
    return ["agreement"]


def _write(frames: dict[str, pd.DataFrame], text: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        for name, frame in frames.items():
            csv_frame(frame).to_csv(tmp / name, index=False)
        (tmp / "summary.txt").write_text(text + "\n", encoding="utf-8")
        stop_if_interrupted()
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
            os.rename(out, old / "previous")
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def run_agreement(args: argparse.Namespace) -> int:
    from evalmix.errors import check_out_dir

    out = check_out_dir(args.out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EvalmixWarning)
        res, ratings, alt = _compute(args)
    for w in caught:
        if issubclass(w.category, EvalmixWarning):
            print(terminal(f"evalmix: warning: {' '.join(str(w.message).split())}"),
                  file=sys.stderr)
    frames = {"agreement.csv": res.tidy()}
    text = str(res)
    if alt is not None:
        frames["alt_test.csv"] = alt.humans.merge(
            alt.judges[["judge", "winning_rate", "advantage", "passed", "n_items_needed"]],
            on="judge")
        text += "\n\n" + str(alt)
    _write(frames, text, out)
    vs = res.vs_humans(method="delta" if args.method != "bootstrap" else "bootstrap")
    llm = vs[vs["rater_1"].map(ratings.kind_of) == "llm"]
    head = ""
    if len(llm):
        best = llm.sort_values("estimate", ascending=False).iloc[0]
        head = (f"; best judge {best['rater_1']} agrees with the humans on "
                f"{best['estimate']:.1%} (human ceiling {best['human_ceiling']:.1%})")
    line = (f"evalmix agreement: {len(res.table)} rows for {len(ratings.raters)} raters "
            f"written to {out}{head}")
    print(terminal(line))
    return 0


def _compute(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from evalmix.humans.alternative import alt_test
    from evalmix.humans.concordance import agreement
    from evalmix.humans.ratings import read_ratings

    ratings = read_ratings(args.path, item=args.item or "item_id", rater=args.rater or "rater",
                           rating=args.rating, rater_kind=args.rater_kind, humans=args.human,
                           cluster=args.cluster, by=args.by, ties=args.ties)
    res = agreement(ratings, pairs=args.pairs, min_items=args.min_items, method=args.method,
                    reps=args.reps, level=args.level, seed=args.seed)
    alt = (alt_test(ratings, epsilon=args.alt_test, cluster=args.cluster)
           if args.alt_test is not None else None)
    return res, ratings, alt
