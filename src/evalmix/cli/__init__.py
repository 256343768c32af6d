"""Command line: parse arguments -> public API -> write files.

Each subcommand module (:mod:`evalmix.cli.report`: ``report``, ``demo``;
:mod:`evalmix.cli.plan`: ``power``, ``coverage``; :mod:`evalmix.cli.agreement`:
``agreement``; :mod:`evalmix.cli.dstudy`: ``plan dstudy``) provides
``add_parser(subparsers)`` and sets a ``func`` default taking the parsed arguments and returning an exit code. A bad input
ends with a one-line reason on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from evalmix._escape import terminal
from evalmix._version import __version__
from evalmix.cli import agreement, compare, dstudy, plan, report
from evalmix.cli._common import _Interrupt, _Parser, parse_cluster, stop_if_interrupted
from evalmix.errors import EvalmixError

__all__ = ["main", "build_parser", "parse_cluster", "stop_if_interrupted"]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="evalmix",
        description="Honest uncertainty for LLM-evaluation results.",
    )
    parser.add_argument("--version", action="version", version=f"evalmix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in (report, plan, agreement, dstudy, compare):
        module.add_parser(sub)
    return parser


def _os_error(exc: OSError) -> str:
    where = f" {exc.filename!r}" if exc.filename else ""
    return f"{exc.strerror or type(exc).__name__}:{where} ({' '.join(str(exc).split())})"


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: object = None, line: str | None = None) -> None:
    """A warning as one line, ``evalmix: warning: ...``: no file name, line number or
    source line of evalmix's own code (Python's default shows all three)."""
    print(terminal(f"evalmix: warning: {' '.join(str(message).split())}"), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; user and OS errors end in one line on stderr (exit 2),
    Ctrl-C in ``evalmix: interrupted; ...`` (exit 130) and SIGTERM in ``evalmix:
    terminated (SIGTERM); ...`` (exit 143), never in a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _Interrupt.seen = _Interrupt.done = False
    _Interrupt.signum = 0
    shown, warnings.showwarning = warnings.showwarning, _show_warning
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (kill, a job scheduler's timeout) stops a command as Ctrl-C does
        previous = {s: signal.signal(s, _Interrupt()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        _Interrupt.finish()
        what = "terminated (SIGTERM)" if _Interrupt.signum == signal.SIGTERM else "interrupted"
        print(terminal(f"evalmix: {what}; {str(exc) or 'nothing written'}"), file=sys.stderr)
        return 128 + (_Interrupt.signum or signal.SIGINT)
    except EvalmixError as exc:
        message = " ".join(str(exc).split())
        print(terminal(f"evalmix: error: {message}"), file=sys.stderr)
        return 2
    except OSError as exc:
        print(terminal(f"evalmix: error: {_os_error(exc)}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line too, the traceback on request
        if os.environ.get("EVALMIX_TRACEBACK"):
            raise
        print(terminal(f"evalmix: internal error: {type(exc).__name__}: "
                       f"{' '.join(str(exc).split())}; this is a bug in evalmix, please "
                       "report it with the command line (EVALMIX_TRACEBACK=1 shows the "
                       "traceback)"), file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = shown
        _Interrupt.finish()
        for s, handler in previous.items():
            signal.signal(s, handler)
