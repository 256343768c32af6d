"""Command line: parse arguments -> public API -> write files.

Subcommands are registered by the package that owns them (``evalmix.report.cli``,
``evalmix.plan.cli``); each provides ``add_parser(subparsers)`` and sets a ``func``
default taking the parsed arguments and returning an exit code. A bad input ends with
a one-line reason on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from evalmix import __version__
from evalmix.errors import EvalmixError

#: modules that contribute subcommands (each has ``add_parser(subparsers)``)
_COMMAND_MODULES: tuple[str, ...] = (
    "evalmix.report.cli",
    "evalmix.plan.cli",
)


def parse_cluster(values: Sequence[str] | None) -> dict[str, str]:
    """Parse repeated ``ROLE=COL`` options into a role -> column mapping."""
    out: dict[str, str] = {}
    for item in values or ():
        role, sep, col = item.partition("=")
        if not sep or not role or not col:
            raise EvalmixError(f"--cluster expects ROLE=COLUMN (e.g. item=item_id), got {item!r}")
        out[role.strip()] = col.strip()
    return out


def _demo_fallback(args: argparse.Namespace) -> int:
    """Design-summary-only demo, used until the report package provides ``demo``."""
    from pathlib import Path

    from evalmix.sim import pairwise_judges

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = pairwise_judges(seed=args.seed)
    table = res.table()
    summary = table.describe()
    (out / "design.md").write_text(summary.to_markdown())
    (out / "design.json").write_text(summary.to_json())
    print(f"evalmix demo: wrote {out / 'design.md'} and {out / 'design.json'}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``evalmix: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"evalmix: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="evalmix",
        description="Honest uncertainty for LLM-evaluation results.",
    )
    parser.add_argument("--version", action="version", version=f"evalmix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    registered: set[str] = set()
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        registered |= set(module.add_parser(sub))
    if "demo" not in registered:
        demo = sub.add_parser("demo", help="simulate the pairwise design and write a report")
        demo.add_argument("--out", default="demo-report", help="output folder")
        demo.add_argument("--seed", type=int, default=2026, help="simulation seed")
        demo.set_defaults(func=_demo_fallback)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except EvalmixError as exc:
        message = " ".join(str(exc).split())
        print(f"evalmix: error: {message}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"evalmix: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    with warnings.catch_warnings():
        sys.exit(main())
