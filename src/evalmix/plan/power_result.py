"""The result of :func:`evalmix.plan.power`, :func:`~evalmix.plan.mde` and
:func:`~evalmix.plan.n_clusters_for_power`: one design or a broadcast grid of designs, its
variance, noncentrality and power, and its tidy rows (:data:`TIDY_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evalmix.tidy import RESULT_COLUMNS, tidy_rows

#: Columns of :meth:`PowerResult.tidy`: the result contract's
#: :data:`~evalmix.tidy.RESULT_COLUMNS` (``contrast`` names the design, ``estimate`` is
#: the effect and ``se`` its standard error under the design), then the design's own.
TIDY_COLUMNS: tuple[str, ...] = RESULT_COLUMNS + (
    "effect", "cluster_size", "size_cv", "icc", "sd", "alternative", "distribution", "deff",
    "n_eff", "ncp", "power", "target_power", "solved_for",
)


#: The design columns that name a row (``contrast``).
_DESIGN = ("n_clusters", "cluster_size", "size_cv", "icc", "sd", "effect", "level",
           "target_power")


@dataclass(frozen=True, eq=False)
class PowerResult:
    """Power of the cluster-robust t test for one design or a broadcast grid of designs.

    Every numeric attribute is a numpy array of the common broadcast shape (0-d for a
    single design). ``solved_for`` says which quantity was solved for: ``"power"``
    (:func:`power`), ``"effect"`` (:func:`mde`) or ``"n_clusters"``
    (:func:`n_clusters_for_power`).

    Attributes
    ----------
    effect : array
        Effect on the estimand's scale (mean minus null; win rate minus 0.5; paired
        difference).
    n_clusters, cluster_size, size_cv, icc, sd, level : array
        The design (``cluster_size`` is the mean size when sizes vary).
    deff : array
        Design effect ``Var(estimate) / (sd^2 / N)``.
    n_eff : array
        Effective number of independent items, ``N / deff``.
    se, df, ncp : array
        Standard error of the estimate, degrees of freedom (``K - 1``; inf for the
        normal reference) and noncentrality ``effect / se``.
    power : array
        Probability of rejecting the null at ``level``.
    target_power : array
        The requested power (NaN when power was computed, not solved for).
    crossed : mapping
        Crossed factors ``{name: (icc, n_levels)}`` included in the variance.
    """

    estimand: str
    alternative: str
    distribution: str
    solved_for: str
    effect: np.ndarray
    n_clusters: np.ndarray
    cluster_size: np.ndarray
    size_cv: np.ndarray
    icc: np.ndarray
    sd: np.ndarray
    level: np.ndarray
    deff: np.ndarray
    n_eff: np.ndarray
    se: np.ndarray
    df: np.ndarray
    ncp: np.ndarray
    power: np.ndarray
    target_power: np.ndarray
    crossed: Mapping[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def mde(self) -> np.ndarray:
        """The minimum detectable effect (``effect`` of a result from :func:`mde`)."""
        return self.effect

    def tidy(self) -> pd.DataFrame:
        """One row per design in the broadcast grid, columns :data:`TIDY_COLUMNS`.

        In the result contract a row is the estimator under one design: ``estimate`` the
        effect, ``se``/``df`` its standard error and degrees of freedom, ``method``
        ``"analytic"``; ``contrast`` names the design (``"n_clusters=20, cluster_size=5,
        ..."``), so it is the row's key within the grid.
        """
        names = [k for k in TIDY_COLUMNS if k not in (
            "estimand", "contrast", "method", "cluster", "scale", "estimate", "lo", "hi",
            "n_clusters", "reps", "seed", "note", "alternative", "distribution",
            "solved_for")] + ["n_clusters"]
        arrays = {k: np.ravel(getattr(self, k)) for k in names}
        n = max(a.size for a in arrays.values())
        frame = pd.DataFrame({k: np.broadcast_to(a, (n,)) if a.size == 1 else a
                              for k, a in arrays.items()})
        frame["estimate"] = frame["effect"]
        frame["contrast"] = [", ".join(f"{k}={v:.6g}" for k, v in zip(_DESIGN, r, strict=True))
                             for r in frame[list(_DESIGN)].itertuples(index=False)]
        frame["alternative"] = self.alternative
        frame["distribution"] = self.distribution
        frame["solved_for"] = self.solved_for
        for name, (icc_f, levels_f) in self.crossed.items():
            frame[f"icc_{name}"] = icc_f
            frame[f"n_levels_{name}"] = levels_f
        frame = tidy_rows(frame, estimand=self.estimand, method="analytic", cluster="",
                          scale="identity", reps=0, seed=None, note="")
        return frame[list(TIDY_COLUMNS) + [c for c in frame.columns if c not in TIDY_COLUMNS]]

    def __str__(self) -> str:
        head = (f"PowerResult({self.estimand}, {self.alternative}, {self.distribution}"
                f" reference, solved for {self.solved_for})")
        frame = self.tidy()
        show = ["effect", "n_clusters", "cluster_size", "icc", "deff", "se", "df", "power"]
        return head + "\n" + frame[show].to_string(index=False, float_format="{:.4g}".format)
