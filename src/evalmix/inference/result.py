"""The frozen result every interval method returns, and its tidy row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from evalmix.tidy import RESULT_COLUMNS, PicklableProxies

__all__ = ["IntervalResult", "TIDY_COLUMNS", "tidy_frame"]

#: Fixed columns of a tidy interval row (one estimand x contrast x method x cluster
#: level x scale): the result contract's :data:`~evalmix.tidy.RESULT_COLUMNS`, then the
#: interval's own columns.
TIDY_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "n_obs", "p_value", "null", "ci_type", "paired",
)


@dataclass(frozen=True)
class IntervalResult(PicklableProxies):
    """One interval: an estimand, by one method, at one cluster level.

    Attributes
    ----------
    estimand : str
        ``mean``, ``win_rate``, ``controlled_win_rate``, ``difference`` or ``coef``.
    contrast : str
        What is estimated, e.g. ``"overall"``, ``"gpt-4"``, ``"treatment - control"``,
        ``"position"``.
    method : str
        ``naive``, ``wilson``, ``CR0``, ``CR1``, ``CR2``, ``CR3``, ``bootstrap``, ``wild``.
    cluster : str
        ``""`` (rows independent), a role name, or roles joined by ``+`` (multiway).
    estimate, se, lo, hi : float
        Point estimate, standard error (NaN where a method has none), interval bounds.
    level : float
    df : float
        Degrees of freedom of the t reference (``inf`` for normal, NaN for bootstrap
        percentile intervals).
    n_clusters, n_obs : int
    reps : int
        Bootstrap replicates (0 for analytic methods).
    seed : int or None
    p_value : float
        Two-sided p-value against ``null`` (NaN where not computed).
    null : float
        The null value used for ``p_value`` and decisions (0 for differences and
        coefficients, 0.5 for win rates).
    ci_type : str
        ``"t"``, ``"normal"``, ``"wilson"``, ``"percentile"``, ``"bca"``,
        ``"studentized"``, ``"test-inversion"``.
    paired : bool or None
        For ``difference``: whether the paired (per-item) estimator was used.
    scale : str
        ``"identity"`` (``estimate -+ t se``) or ``"logit"`` (proportions: the same SE on
        the log-odds scale, so the interval stays in [0, 1]).
    note : str
        Why there is no interval (NaN bounds) when it is not estimable at this level.
    details : Mapping
        Method-specific extras (e.g. bootstrap draws summary, weights type); a read-only
        mapping (a dict passed in is copied).
    """

    estimand: str
    contrast: str
    method: str
    cluster: str
    estimate: float
    se: float
    lo: float
    hi: float
    level: float
    df: float
    n_clusters: int
    n_obs: int
    reps: int = 0
    seed: int | str | None = None
    p_value: float = float("nan")
    null: float = 0.0
    ci_type: str = "t"
    paired: bool | None = None
    scale: str = "identity"
    note: str = ""
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def row(self) -> dict[str, Any]:
        """The tidy row as a dict (keys :data:`TIDY_COLUMNS`)."""
        return {k: getattr(self, k) for k in TIDY_COLUMNS}

    def tidy(self) -> pd.DataFrame:
        """One-row DataFrame with :data:`TIDY_COLUMNS`."""
        return pd.DataFrame([self.row()], columns=list(TIDY_COLUMNS))

    def __str__(self) -> str:
        cl = self.cluster or "none"
        df = "" if not np.isfinite(self.df) else f", df={self.df:.3g}"
        if self.note:
            return (f"{self.estimand} [{self.contrast}] by {self.method} (cluster: {cl}): "
                    f"{self.estimate:.4g}, not estimable at this cluster level: {self.note}")
        return (
            f"{self.estimand} [{self.contrast}] by {self.method} (cluster: {cl}): "
            f"{self.estimate:.4g}, {self.level:.0%} CI [{self.lo:.4g}, {self.hi:.4g}], "
            f"se={self.se:.3g}{df}, clusters={self.n_clusters}, n={self.n_obs}"
        )


def tidy_frame(results: list[IntervalResult]) -> pd.DataFrame:
    """Stack results into one tidy DataFrame."""
    if not results:
        return pd.DataFrame(columns=list(TIDY_COLUMNS))
    return pd.concat([r.tidy() for r in results], ignore_index=True)
