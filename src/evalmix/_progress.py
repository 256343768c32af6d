"""Progress on stderr for long runs: counted tasks with an ETA, stages with a spinner.

One rich display serves every long-running call (:func:`evalmix.analyze`, the coverage
and headline studies). Two kinds of line:

- a *count* (:meth:`Progress.task`): ``description  bar  done/total  elapsed  ETA``, for
  cells, intervals, contrasts;
- a *stage* (:meth:`Progress.stage`): ``spinner description  elapsed``, for one step of
  unknown length (``"Laplace GLMM: optimising"``); when the stage ends the spinner becomes
  a tick and the timer stops.

``Progress(False)`` shows nothing and costs nothing; every method is then a no-op.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Progress"]


def _columns() -> list[Any]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class ByKind(ProgressColumn):
        """A count's column on count lines, a stage's on stage lines (blank if None)."""

        def __init__(self, count: Any, stage: Any = None):
            super().__init__()
            self.count, self.stage = count, stage

        def render(self, task: Any) -> Any:
            column = self.stage if task.fields.get("stage") else self.count
            return column.render(task) if column is not None else Text("")

    spinner = SpinnerColumn(finished_text="[green]✓")
    return [ByKind(None, spinner), TextColumn("[bold]{task.description}"),
            ByKind(BarColumn()), ByKind(MofNCompleteColumn()), TimeElapsedColumn(),
            ByKind(TimeRemainingColumn())]


class Progress:
    """Counted tasks and named stages on one live display (or nothing).

    Parameters
    ----------
    enabled : bool
        False: no display.
    console : rich.console.Console, optional
        Where to draw (default: stderr).
    get_time : callable, optional
        Clock for the timers (default rich's monotonic clock; a test passes its own).

    Examples
    --------
    >>> with Progress(False) as bar:
    ...     t = bar.task("cells", 3)
    ...     bar.advance(t)
    ...     with bar.stage("Laplace GLMM: optimising"):
    ...         pass
    """

    def __init__(self, enabled: bool = True, *, console: Any = None,
                 get_time: Callable[[], float] | None = None):
        self._p: Any = None
        if not enabled or (console is None and sys.stderr is None):
            return
        from rich.console import Console
        from rich.progress import Progress as RichProgress

        self._p = RichProgress(*_columns(), console=console or Console(stderr=True),
                               transient=False, get_time=get_time)

    def __enter__(self) -> Progress:
        if self._p is not None:
            self._p.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()

    def task(self, description: str, total: int, *, done: int = 0) -> Any:
        """A counted task of ``total`` steps (``done`` already finished); its handle."""
        if self._p is None:
            return None
        return self._p.add_task(description, total=total, completed=done)

    def advance(self, task: Any, n: int = 1) -> None:
        if self._p is not None and task is not None:
            self._p.advance(task, n)

    def update(self, task: Any, *, done: int | None = None, total: int | None = None,
               description: str | None = None) -> None:
        """Set a counted task's steps done, its total or its description (a count whose
        total is only estimated as it runs, e.g. the draws an MCMC fit needs)."""
        if self._p is None or task is None:
            return
        fields = {"completed": done, "total": total, "description": description}
        self._p.update(task, **{k: v for k, v in fields.items() if v is not None})

    @contextmanager
    def stage(self, description: str) -> Iterator[None]:
        """A spinner and a timer for the ``with`` block; both stop when it ends (also on
        an error, which propagates)."""
        if self._p is None:
            yield
            return
        task = self._p.add_task(description, total=None, stage=True)
        try:
            yield
        finally:
            self._p.update(task, total=1, completed=1)
