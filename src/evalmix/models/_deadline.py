"""A cooperative time limit for model fits.

A report bounds every model fit by one wall-clock limit (``analyze(model_timeout=...)``,
``--model-timeout``). The frequentist fits check it where they do their work -- each
factorisation of ``Lambda Z'WZ Lambda + I`` (:meth:`~evalmix.models.frequentist._pls.CrossedDesign.
factor`: every REML or Laplace evaluation, every PIRLS step, every Hessian column) and
each gradient of the statsmodels VB/MAP objectives -- and raise :class:`StoppedAtLimit`,
which the caller catches; no thread or child process is needed.

``deadline`` is a point on :func:`time.monotonic`'s clock, or None for no limit.
"""

from __future__ import annotations

import time

__all__ = ["StoppedAtLimit", "check_deadline", "deadline_after"]


class StoppedAtLimit(Exception):
    """A fit passed its deadline (not an error of the data: the caller reports it)."""


def deadline_after(seconds: float | None) -> float | None:
    """The deadline ``seconds`` from now; None (no limit) for None or 0."""
    return time.monotonic() + seconds if seconds and seconds > 0 else None


def check_deadline(deadline: float | None) -> None:
    """Raise :class:`StoppedAtLimit` once ``deadline`` has passed."""
    if deadline is not None and time.monotonic() > deadline:
        raise StoppedAtLimit
