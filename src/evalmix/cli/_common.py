"""What every subcommand shares: option types, the one-line argparse error, the Ctrl-C
handler."""

from __future__ import annotations

import argparse
import math
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from evalmix.errors import InvalidOptionError

#: Each subcommand's one-line help (``evalmix --help``) and description (``evalmix
#: COMMAND --help``), in one table (as pip keeps its commands' summaries).
COMMANDS: dict[str, tuple[str, str]] = {
    "report": ("every interval of every method and cluster level, with plots",
               "Read a long-format eval table and write a sensitivity report: intervals by "
               "method and cluster level, variance components, per-judge position bias, "
               "plots (report.html)."),
    "demo": ("simulate crossed pairwise judgments with known truth and report",
             "Simulate the pairwise-judge design (evalmix.sim.pairwise_judges), run the full "
             "report, and check the intervals against the true values."),
    "power": ("power, MDE and clusters needed for a clustered eval",
              "Analytic power of the cluster-robust t test (t(K-1), noncentral t) for a mean, "
              "win rate or paired difference; or, with --components, power simulated from "
              "variance components."),
    "coverage": ("coverage study of interval methods over a design grid",
                 "Coverage, width and Monte Carlo SE of interval methods over a grid of "
                 "clustered designs; parallel (joblib or Dask), streamed, resumable."),
    "agreement": ("judges against humans: agreement with intervals, the alt-test",
                  "Read a long table of ratings by humans and LLM judges (one row per "
                  "rating) and write their agreement (kappa, Krippendorff's alpha, Gwet's "
                  "AC1, pooled agreement with the human votes and the human ceiling) with "
                  "delta-method and cluster-bootstrap intervals; --alt-test adds the "
                  "alternative annotator test."),
    "plan": ("plan a design (evalmix plan dstudy DATA) or check an analysis plan "
             "(evalmix plan check PLAN DATA)",
             "Planning subcommands. check: an analysis plan declared in advance, checked "
             "against a table. dstudy: variance components of a table or an eval log "
             "(generalizability theory), reliability and SEs for other numbers of items, "
             "judges, templates and runs, the smallest and the cost-optimal design."),
    "compare": ("runs of one benchmark compared sample by sample (paired tests)",
                "Align two or more runs (Inspect logs, lm-eval output folders, long tables) "
                "by sample id and epoch and compare each with the first: the paired "
                "difference with a CR2 interval by sample or a grouping field, the paired "
                "bootstrap, McNemar, Holm/BH over tasks, the minimum detectable difference, "
                "and every sample not in both runs."),
}


def add_command(subparsers: Any, name: str) -> argparse.ArgumentParser:
    """Register subcommand ``name`` with its help and description from :data:`COMMANDS`."""
    help_text, description = COMMANDS[name]
    return subparsers.add_parser(name, help=help_text, description=description)


def parse_cluster(values: Sequence[str] | None) -> dict[str, str]:
    """Parse repeated ``ROLE=COL`` options into a role -> column mapping."""
    out: dict[str, str] = {}
    for item in values or ():
        role, sep, col = item.partition("=")
        role = role.strip()
        if not sep or not role or not col.strip():
            raise InvalidOptionError(f"--cluster expects ROLE=COLUMN (e.g. item=item_id), got {item!r}")
        if role in out:
            raise InvalidOptionError(f"--cluster gives the role {role!r} twice ({role}={out[role]!r} "
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
    """The argparse type for ``--jobs``: a positive count, or -1 for all cores."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(
            f"expected a number of worker processes (1, 2, ...; -1 = all cores), got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``evalmix: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"evalmix: error: {' '.join(message.split())} (see {self.prog} --help)\n")


class _Interrupt:
    """SIGINT and SIGTERM handler: remembers the interrupt and raises KeyboardInterrupt,
    again every half second until the command has stopped.

    Samplers (nutpie, PyMC) catch KeyboardInterrupt and return the draws so far; the
    repeat stops the analysis that would go on with them, and the flag lets a subcommand
    refuse to write such a result (:func:`stop_if_interrupted`).
    """

    seen = False
    done = False
    #: the first signal received (SIGINT or SIGTERM): the exit code is 128 + it
    signum = 0
    lock = threading.Lock()

    def __call__(self, signum: int, frame: object) -> None:
        if _Interrupt.done:
            return
        if not _Interrupt.seen:
            _Interrupt.seen = True
            _Interrupt.signum = signum
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
