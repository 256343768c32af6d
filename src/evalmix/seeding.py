"""Seeds: the one home of seed validation, Generators, recorded seeds and child seeds.

Every random function in evalmix takes ``seed`` (an int >= 0, a
``numpy.random.Generator`` or None) and records in its result the *int* that reproduces
it: an int is recorded as given; None draws a fresh int from the operating system's
entropy and a Generator contributes one int drawn from it. The random stream is then
``numpy.random.default_rng(recorded)``, so rerunning with the recorded int gives the same
numbers whatever the original seed was.

This module depends only on numpy and :mod:`evalmix.errors`, so every layer may use it.
"""

from __future__ import annotations

import hashlib

import numpy as np

from evalmix.errors import InvalidOptionError

__all__ = [
    "SeedLike",
    "SEED_BOUND",
    "check_seed",
    "as_generator",
    "resolve_seed",
    "seeded_rng",
    "child_seed",
    "keyed_seed_sequence",
]

SeedLike = int | np.integer | np.random.Generator | None
#: Recorded seeds drawn from entropy or a Generator lie in ``[0, SEED_BOUND)``: they fit
#: a signed 32-bit integer, which every back end (PyMC, numba, JSON readers) accepts.
SEED_BOUND = 2**31


def check_seed(seed: object) -> None:
    """Raise :class:`~evalmix.errors.InvalidOptionError` unless ``seed`` is None, a
    non-negative int or a ``numpy.random.Generator`` (numpy seeds are non-negative).

    Examples
    --------
    >>> check_seed(2026)
    """
    if seed is None or isinstance(seed, np.random.Generator):
        return
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InvalidOptionError(
            f"seed must be an int >= 0 or a numpy.random.Generator, got {seed!r}")
    if seed < 0:
        raise InvalidOptionError(
            f"seed={int(seed)} is negative; numpy seeds are non-negative integers "
            "(e.g. seed=1)")


def as_generator(seed: SeedLike) -> np.random.Generator:
    """A stream for a helper that records nothing: a Generator is used (and advanced) as
    is, an int or None seeds ``default_rng``. Functions whose result records its seed use
    :func:`seeded_rng` instead."""
    check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def resolve_seed(seed: SeedLike) -> int:
    """The int to record for ``seed``: an int as given, else one drawn in [0, SEED_BOUND).

    None draws from fresh operating-system entropy; a Generator contributes one draw
    (advancing it), so two calls with the same Generator get different seeds.

    Examples
    --------
    >>> resolve_seed(7)
    7
    >>> resolve_seed(np.random.default_rng(0)) == resolve_seed(np.random.default_rng(0))
    True
    """
    check_seed(seed)
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1)[0] % SEED_BOUND)
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(SEED_BOUND))
    return int(seed)


def seeded_rng(seed: SeedLike) -> tuple[np.random.Generator, int]:
    """``(default_rng(s), s)`` with ``s = resolve_seed(seed)``: the stream and its record.

    Examples
    --------
    >>> rng, recorded = seeded_rng(None)
    >>> bool(rng.random() == seeded_rng(recorded)[0].random())
    True
    """
    recorded = resolve_seed(seed)
    return np.random.default_rng(recorded), recorded


def child_seed(base: int, *keys: int) -> int:
    """An int seed for job ``keys`` of a run seeded with ``base`` (independent streams).

    ``SeedSequence([base, *keys])``'s first 32-bit word: jobs get the same seed whatever
    order or process they run in.

    Examples
    --------
    >>> child_seed(1, 0) == child_seed(1, 0) != child_seed(1, 1)
    True
    """
    return int(np.random.SeedSequence([int(base), *map(int, keys)]).generate_state(1)[0])


def keyed_seed_sequence(seed: int, key: str) -> np.random.SeedSequence:
    """SeedSequence of the job named ``key`` (e.g. a JSON of a grid cell's parameters).

    ``SeedSequence(entropy=seed, spawn_key=4 words of sha256(key))``: the stream depends
    only on the run's seed and the job's name, not on the order jobs run in.
    """
    digest = hashlib.sha256(key.encode()).digest()
    words = tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))
    return np.random.SeedSequence(entropy=int(seed), spawn_key=words)
