"""Child processes that end with their parent.

evalmix forks worker processes in two places: the Bayesian fit of a report runs in a
child so that it can be stopped at ``--model-timeout`` (:mod:`evalmix.compare.model_rows`),
and a report's figures are drawn by two workers (:mod:`evalmix.report.figures`). A worker
must never outlive the process that wanted its result: killed with SIGKILL or SIGTERM,
the parent gets no chance to terminate its pool, and an orphaned sampler would go on
burning CPU for minutes with nobody to receive its draws.

:func:`worker_init`, run first in every such child, arranges that:

- On Linux the kernel sends the child SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, called through :mod:`ctypes`; the standard library has no
  wrapper). If the parent died between the fork and that call, the child ends at once.
- Elsewhere (macOS has no parent-death signal) a daemon thread in the child watches the
  parent: once the child has been re-parented (``os.getppid()`` changes), it exits.
- Ctrl-C is the parent's to handle (SIGINT ignored in the child: no second traceback) and
  SIGTERM has its default action, so ``Pool.terminate()`` ends the child quietly.

This is what ``multiprocessing`` itself lacks (its pools clean up only when the parent
exits normally) and what ``loky`` does for joblib with a similar watchdog.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

__all__ = ["worker_init", "fork_pool"]

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``
_PR_SET_PDEATHSIG = 1
#: How often the fallback watchdog looks at the parent (seconds).
WATCH_INTERVAL = 0.5


def _parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL)
    os._exit(1)


def worker_init(parent: int) -> None:
    """Make this (forked) process end when process ``parent`` does.

    Parameters
    ----------
    parent : int
        The parent's pid, taken before the fork (``os.getpid()`` in the parent), so that
        a parent that died in between is noticed.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not _parent_death_signal():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True,
                         name="evalmix-parent-watch").start()
    if os.getppid() != parent:  # the parent is already gone
        os._exit(1)


def fork_pool(processes: int, initializer: Callable[..., object] | None = None,
              initargs: tuple[Any, ...] = ()) -> Pool:
    """A ``multiprocessing`` pool of forked workers that end with this process.

    ``initializer(*initargs)`` runs in each worker after :func:`worker_init`; with the
    fork start method ``initargs`` are inherited, not pickled (closures are fine).
    Raises ``ValueError`` where the platform cannot fork.
    """
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    return ctx.Pool(processes, initializer=_init, initargs=(os.getpid(), initializer,
                                                             initargs))


def _init(parent: int, initializer: Callable[..., object] | None,
          initargs: tuple[Any, ...]) -> None:
    worker_init(parent)
    if initializer is not None:
        initializer(*initargs)
