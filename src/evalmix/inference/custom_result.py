"""The result of :func:`evalmix.bootstrap`: the statistic's estimate, standard error and
interval per named value, the replicates, and its tidy rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from evalmix.tidy import PicklableProxies, tidy_rows


@dataclass(frozen=True)
class StatisticBootstrap(PicklableProxies):
    """A cluster bootstrap of a custom statistic (one or several named components).

    Attributes
    ----------
    statistic : str
        Its name.
    names : tuple of str
        The components (one for a scalar statistic).
    estimate, se, lo, hi : numpy.ndarray
        Per component: the full-sample value, the SD of the finite draws, the bounds.
    draws : numpy.ndarray
        ``(reps, k)`` replicates (NaN where the statistic was undefined).
    reps, seed, ci_type, level : as requested (``seed`` the int that reproduces it)
    cluster : str
        The resampled factor(s): a role, ``"a:b"`` (an interaction cell), ``"a+b"`` (two
        crossed factors), or ``""`` for rows / matched pairs (see ``details["unit"]``).
    n_clusters : int
        Clusters resampled (the smaller count for two crossed factors).
    n_failed : numpy.ndarray
        Replicates without a finite value, per component.
    details : Mapping
        ``unit``, ``resampling`` (``"pairs"``, ``"pigeonhole"`` or ``"multiway"``),
        ``strata``,
        ``n_clusters_by_factor``, ``fast_path``, ``bias``; for BCa ``z0`` and
        ``acceleration``; ``notes`` per component where no interval could be formed.
    """

    statistic: str
    names: tuple[str, ...]
    estimate: np.ndarray
    se: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    draws: np.ndarray = field(repr=False)
    reps: int
    seed: int | None
    ci_type: str
    level: float
    cluster: str
    n_clusters: int
    n_failed: np.ndarray = field(repr=False)
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    def tidy(self) -> pd.DataFrame:
        """One row per component (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand`` the statistic's name, ``contrast`` the component, ``method``
        ``"bootstrap"``; then ``ci_type, resampling, n_failed, bias``."""
        notes = self.details.get("notes", {})
        bias = self.details.get("bias", [np.nan] * len(self.names))
        rows = [{"contrast": n, "estimate": self.estimate[j], "se": self.se[j],
                 "lo": self.lo[j], "hi": self.hi[j], "note": notes.get(n, ""),
                 "n_failed": int(self.n_failed[j]), "bias": bias[j]}
                for j, n in enumerate(self.names)]
        return tidy_rows(rows, estimand=self.statistic, method="bootstrap",
                         cluster=self.cluster, scale="identity", level=self.level,
                         df=float("nan"), n_clusters=self.n_clusters, reps=self.reps,
                         seed=self.seed, ci_type=self.ci_type,
                         resampling=self.details.get("resampling", "pairs"))

    def __str__(self) -> str:
        unit = self.cluster or self.details.get("unit", "row")
        head = (f"cluster bootstrap of {self.statistic} ({self.ci_type}, {self.reps} reps, "
                f"{self.n_clusters} {unit} clusters, {self.level:.0%} CI)")
        lines = [head] + [f"  {n}: {self.estimate[j]:.4g} [{self.lo[j]:.4g}, "
                          f"{self.hi[j]:.4g}] se={self.se[j]:.3g}"
                          for j, n in enumerate(self.names)]
        return "\n".join(lines)
