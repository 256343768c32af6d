"""One error root and one warning root for evalmix.

Every exception evalmix raises on purpose derives from :class:`EvalmixError`; every
warning derives from :class:`EvalmixWarning`. An argument a function cannot take is an
:class:`InvalidOptionError` (also a :class:`ValueError`); the bare root is for problems
with the data and for fits that fail. Messages say what was found, what was expected,
and what to do next.
"""

from __future__ import annotations

import math
import operator
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "EvalmixError",
    "InvalidTableError",
    "InvalidOptionError",
    "TooFewClustersError",
    "EvalmixWarning",
    "FewClustersWarning",
    "ConvergenceWarning",
    "DroppedRowsWarning",
    "SingularFitWarning",
    "NotEstimableWarning",
    "NameWarning",
    "check_option",
    "check_keywords",
    "check_level",
    "check_count",
    "check_number",
    "check_out_dir",
    "renamed_option",
]

T = TypeVar("T")


class EvalmixError(Exception):
    """Root of every error evalmix raises on purpose."""


class InvalidTableError(EvalmixError, ValueError):
    """The input table failed validation.

    ``problems`` lists every problem found (validation reports all of them at once).
    """

    def __init__(self, problems: Sequence[str]):
        self.problems = tuple(problems)
        n = len(self.problems)
        head = f"the eval table has {n} problem{'s' if n != 1 else ''}:"
        super().__init__("\n".join([head, *(f"  - {p}" for p in self.problems)]))


class InvalidOptionError(EvalmixError, ValueError):
    """An argument of an evalmix function is outside its allowed set or range.

    Raised before any work starts, by the shared checks of this module
    (:func:`check_option`, :func:`check_level`, :func:`check_count`,
    :func:`check_keywords`, :func:`renamed_option`) or by a function's own argument
    checks. It is a :class:`ValueError`, so ``except ValueError`` catches
    ``analyze(reps=0)`` as it catches ``analyze(level=95)``. Problems with the data and
    fits that fail raise :class:`EvalmixError` itself (or :class:`InvalidTableError`).
    """


class TooFewClustersError(EvalmixError, ValueError):
    """A method cannot give a trustworthy answer with this few clusters."""


class EvalmixWarning(UserWarning):
    """Root of every warning evalmix emits."""


class FewClustersWarning(EvalmixWarning):
    """Few clusters: sandwich and bootstrap intervals may under-cover."""


class ConvergenceWarning(EvalmixWarning):
    """MCMC or an optimiser did not converge (R-hat, ESS, divergences, gradients)."""


class DroppedRowsWarning(EvalmixWarning):
    """Rows were dropped while reading (NA or unparsed outcomes, excluded ties)."""


class SingularFitWarning(EvalmixWarning):
    """A variance component was estimated at (or near) zero."""


class NotEstimableWarning(EvalmixWarning):
    """No trustworthy interval at this cluster level (zero SE, a one-cluster arm, ...)."""


class NameWarning(EvalmixWarning):
    """A model, judge, condition or column name holds control or bidirectional-text
    characters, or looks the same as another name (equal after Unicode NFKC
    normalisation); it is shown escaped (``evalmix._escape``)."""


def check_option(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise :class:`InvalidOptionError` if ``value`` is not one of ``allowed``.

    Examples
    --------
    >>> check_option("ties", "half", ("exclude", "half", "separate"))
    """
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise InvalidOptionError(f"{name}={value!r} is not allowed; choose one of {choices}")


def check_keywords(caller: str, given: Mapping[str, Any], allowed: Iterable[str], *,
                   solved: Iterable[str] = ()) -> dict[str, Any]:
    """The keywords ``given`` to ``caller()`` as a dict; :class:`InvalidOptionError` for
    one it does not take, naming it and listing those it does.

    The check behind every ``**options: Unpack[SomeOptions]`` signature (the TypedDict
    types the keywords for static checkers; this refuses a misspelt one at run time).
    ``solved`` names keywords the caller computes itself, so may not be given.

    Examples
    --------
    >>> check_keywords("power", {"icc": 0.1}, ("n_clusters", "icc"))
    {'icc': 0.1}
    """
    allowed, solved = tuple(allowed), tuple(solved)
    for name, value in given.items():
        if name not in allowed or name in solved:
            why = f" ({caller} solves for it)" if name in solved else ""
            names = ", ".join(n for n in allowed if n not in solved)
            raise InvalidOptionError(f"{caller}() got an unexpected keyword {name}={value!r}"
                                     f"{why}; it takes {names}")
    return dict(given)


def check_level(level: object) -> float:
    """The confidence level as a float; :class:`InvalidOptionError` unless in (0, 1).

    The one check of a confidence level (``level=95`` and NaN are refused).

    Examples
    --------
    >>> check_level(0.9)
    0.9
    """
    try:
        value = float(level)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 < value < 1:
        raise InvalidOptionError(
            f"level must be in (0, 1), got {level!r}: give a confidence level such as 0.95")
    return value


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an ``int``; :class:`InvalidOptionError` unless it is an integer
    ``>= minimum``.

    The one check of every count option (``reps``, ``draws``, ``n_clusters``, ...):
    Python and NumPy integers are accepted; ``bool``, floats (even ``99.0``) and strings
    are refused, as :func:`range` refuses them, with the value and the minimum named.

    Examples
    --------
    >>> check_count("reps", 999, minimum=2)
    999
    """
    if isinstance(value, bool) or isinstance(value, (float, str, bytes)):
        index = None
    else:
        try:
            index = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            index = None
    if index is None:
        raise InvalidOptionError(f"{name} must be an integer >= {minimum}, got {value!r} "
                                 f"({type(value).__name__}): give a whole number such as {name}={minimum}")
    if index < minimum:
        raise InvalidOptionError(f"{name} must be at least {minimum}, got {index}")
    return int(index)


def check_number(name: str, value: object, *, low: float | None = None,
                 high: float | None = None, low_open: bool = False,
                 high_open: bool = False) -> float:
    """``value`` as a ``float``; :class:`InvalidOptionError` unless it is a finite number
    in the interval from ``low`` to ``high`` (open at an end when ``low_open`` /
    ``high_open``; ``None``: unbounded).

    The one check of every real-valued option (a probability, an ICC, an SD, a target):
    ``bool``, strings, NaN and infinities are refused, with the value and the allowed
    range named ("p must be in (0, 1), got 1.2").

    Examples
    --------
    >>> check_number("icc", 0.2, low=0, high=1, high_open=True)
    0.2
    """
    lo = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "" if high is None else f"{high:g}" + (")" if high_open else "]")
    where = (f"in {lo}, {hi}" if lo and hi else
             f"{'>' if low_open else '>='} {low:g}" if lo else
             f"{'<' if high_open else '<='} {high:g}" if hi else "")
    number = None
    if not isinstance(value, bool | str | bytes):
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = None
    ok = number is not None and math.isfinite(number) and (
        low is None or (number > low if low_open else number >= low)) and (
        high is None or (number < high if high_open else number <= high))
    if not ok or number is None:
        kind = "" if where and number is not None and math.isfinite(number) else "a finite number"
        raise InvalidOptionError(f"{name} must be {' '.join(filter(None, (kind, where)))}, "
                                 f"got {value!r}")
    return number


def renamed_option(where: str, old: str, new: str, old_value: T | None,
                   new_value: T | None) -> T | None:
    """The value of option ``new`` of ``where()``, given under its old name ``old`` or not.

    The old name still works, with a :class:`FutureWarning`; giving both is an
    :class:`InvalidOptionError`.

    Examples
    --------
    >>> renamed_option("analyze", "levels", "cluster_levels", None, ["none"])
    ['none']
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise InvalidOptionError(f"give {new}= only ({old}= is its old name)")
    warnings.warn(f"{where}({old}=...) is now {where}({new}=...); the old name will be "
                  "removed", FutureWarning, stacklevel=3)
    return old_value


def check_out_dir(path: str | os.PathLike[str], *, what: str = "--out") -> Path:
    """Check, before any work starts, that folder ``path`` can be created or written.

    Raises :class:`EvalmixError` naming the problem (a file in the way, a parent that is
    a file, a folder without write permission or on a read-only file system). Creates
    nothing: it probes with a temporary folder that it removes at once.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise EvalmixError(f"{what} {str(p)!r} is a file, not a folder; remove it or choose "
                           "another output folder")
    ancestor = p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise EvalmixError(f"{what} {str(p)!r} cannot be created: {str(ancestor)!r} is a "
                           "file, not a folder; choose another output folder")
    for where in ([p] if p.exists() else []) + [ancestor]:
        try:
            os.rmdir(tempfile.mkdtemp(dir=where, prefix=".evalmix-probe-"))
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and where is p:
                continue  # another writer is swapping its report into place right now
            raise EvalmixError(
                f"{what} {str(p)!r}: cannot write in {str(where)!r} ({exc.strerror or exc}); "
                "choose a folder you can write to") from None
    return p
