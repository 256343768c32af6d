"""Known-truth data-generating processes (same schema as real data).

Every simulator takes ``seed`` and returns a :class:`SimResult` whose ``data`` is a
table :func:`evalmix.read` accepts (``result.table()`` reads it) and whose ``truth``
holds the parameters and true estimands. ``evalmix.sim.coverage`` runs coverage studies
(defined in :mod:`evalmix.sim.study`, imported lazily).
"""

from __future__ import annotations

import importlib
from typing import Any

from evalmix.sim._common import SimResult
from evalmix.sim.leaderboard import baseline_leaderboard, round_robin
from evalmix.sim.pairwise import DEFAULT_SDS, pairwise_judges
from evalmix.sim.scores import cluster_sizes, clustered_scores

__all__ = ["SimResult", "clustered_scores", "cluster_sizes", "pairwise_judges", "DEFAULT_SDS",
           "baseline_leaderboard", "round_robin", "coverage"]

_LAZY = {"coverage": "evalmix.sim.study"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evalmix.sim' has no attribute {name!r}")
