"""Guarded calls into the inference, design and model packages.

A report must survive one method failing: each call here returns its result *or* a
plain-words message, and collects the warnings the callee emitted, instead of raising.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outcome", "guarded"]


@dataclass
class Outcome:
    """What a guarded call returned: ``value`` or ``error``, plus emitted warnings."""

    value: Any = None
    error: str | None = None
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (category, message)

    @property
    def ok(self) -> bool:
        return self.error is None


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def guarded(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Outcome:
    """Call ``func``; never raise (except KeyboardInterrupt), record warnings."""
    out = Outcome()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out.value = func(*args, **kwargs)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing method becomes a warning row
            out.error = f"{type(exc).__name__}: {_one_line(exc)}"
    for w in caught:
        cat = w.category.__name__
        if cat in ("DeprecationWarning", "PendingDeprecationWarning", "FutureWarning"):
            continue
        out.warnings.append((cat, _one_line(w.message)))
    return out
