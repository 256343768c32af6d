"""Command line: parse arguments -> public API -> write files.

Subcommands are registered by the package that owns them (``evalmix.report.cli``,
``evalmix.plan.cli``); each provides ``add_parser(subparsers)`` and sets a ``func``
default taking the parsed arguments and returning an exit code. A bad input ends with
a one-line reason on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

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
        role = role.strip()
        if not sep or not role or not col.strip():
            raise EvalmixError(f"--cluster expects ROLE=COLUMN (e.g. item=item_id), got {item!r}")
        if role in out:
            raise EvalmixError(f"--cluster gives the role {role!r} twice ({role}={out[role]!r} "
                               f"and {item!r}); give each role once")
        out[role] = col  # as given: a column name may hold spaces
    return out


def _number(kind: type, low: float, *, strict: bool, what: str):
    """An argparse ``type=`` for finite numbers ``>= low`` (``> low`` when strict)."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return convert


#: argparse types for the options of every subcommand
positive_int = _number(int, 0, strict=True, what="a positive integer")
nonnegative_int = _number(int, 0, strict=False, what="an integer >= 0")
nonnegative_float = _number(float, 0.0, strict=False, what="a finite number >= 0")
finite_float = _number(float, -math.inf, strict=True, what="a finite number")


def jobs_count(text: str) -> int:
    """argparse type for ``--jobs``: a positive count, or -1 for all cores."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(
            f"expected a number of worker processes (1, 2, ...; -1 = all cores), got {text!r}")
    return value


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


class _Interrupt:
    """SIGINT handler: remembers the interrupt and raises KeyboardInterrupt, again every
    half second until the command has stopped.

    Samplers (nutpie, PyMC) catch KeyboardInterrupt and return the draws so far; the
    repeat stops the analysis that would go on with them, and the flag lets a subcommand
    refuse to write such a result (:func:`stop_if_interrupted`).
    """

    seen = False
    done = False
    lock = threading.Lock()

    def __call__(self, signum: int, frame: object) -> None:
        if _Interrupt.done:
            return
        if not _Interrupt.seen:
            _Interrupt.seen = True
            threading.Thread(target=_Interrupt.repeat, daemon=True).start()
        raise KeyboardInterrupt

    @staticmethod
    def repeat() -> None:
        while True:
            time.sleep(0.5)
            with _Interrupt.lock:
                if _Interrupt.done:
                    return
                os.kill(os.getpid(), signal.SIGINT)

    @staticmethod
    def finish() -> None:
        with _Interrupt.lock:
            _Interrupt.done = True


def stop_if_interrupted() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed during this command (call it before
    writing results)."""
    if _Interrupt.seen:
        raise KeyboardInterrupt


def _os_error(exc: OSError) -> str:
    where = f" {exc.filename!r}" if exc.filename else ""
    return f"{exc.strerror or type(exc).__name__}:{where} ({' '.join(str(exc).split())})"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; user and OS errors end in one line on stderr (exit 2),
    Ctrl-C in ``evalmix: interrupted; ...`` (exit 130), never in a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _Interrupt.seen = _Interrupt.done = False
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, _Interrupt())
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        _Interrupt.finish()
        print(f"evalmix: interrupted; {str(exc) or 'nothing written'}", file=sys.stderr)
        return 130
    except EvalmixError as exc:
        message = " ".join(str(exc).split())
        print(f"evalmix: error: {message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"evalmix: error: {_os_error(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line too, the traceback on request
        if os.environ.get("EVALMIX_TRACEBACK"):
            raise
        print(f"evalmix: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}"
              "; this is a bug in evalmix, please report it with the command line "
              "(EVALMIX_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 1
    finally:
        _Interrupt.finish()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":  # pragma: no cover
    # run the imported module's main, so that subcommands (which import evalmix.cli)
    # and the SIGINT handler share one module state, not a __main__ copy
    from evalmix.cli import main as _main

    sys.exit(_main())
