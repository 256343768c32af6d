"""evalmix.inference: design-based intervals (naive, sandwich, bootstrap, wild).

``interval(table, estimand, method=..., cluster=...)`` is the entry point; the array
functions underneath (:mod:`~evalmix.inference.sandwich`,
:mod:`~evalmix.inference.estimands`, :mod:`~evalmix.inference.naive`) take plain arrays.
Submodules are imported lazily so ``import evalmix.inference`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {
    "interval": "evalmix.inference.api",
    "METHODS": "evalmix.inference.api",
    "IntervalResult": "evalmix.inference.result",
    "tidy_frame": "evalmix.inference.result",
    "LinearProblem": "evalmix.inference.estimands",
    "build_problem": "evalmix.inference.estimands",
    "ESTIMANDS": "evalmix.inference.estimands",
    "vcov_cluster": "evalmix.inference.sandwich",
    "vcov_multiway": "evalmix.inference.sandwich",
    "satterthwaite_df": "evalmix.inference.sandwich",
    "naive_se": "evalmix.inference.naive",
    "wilson_interval": "evalmix.inference.naive",
    "cluster_bootstrap": "evalmix.inference.bootstrap",
    "wild_cluster_bootstrap": "evalmix.inference.wild",
    "StatisticBootstrap": "evalmix.inference.custom",
    "Sums": "evalmix.inference.sums",
    "expression": "evalmix.inference.sums",
    "leaderboard": "evalmix.inference.leaderboard",
    "LeaderboardResult": "evalmix.inference.leaderboard",
    "length_controlled_win_rate": "evalmix.inference.length_control",
    "LengthControlResult": "evalmix.inference.length_control",
    "style_controlled_bt": "evalmix.inference.style_control",
    "StyleControlResult": "evalmix.inference.style_control",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evalmix.inference' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
