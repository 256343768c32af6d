"""The frozen result of :func:`evalmix.fit`, shared by every back end.

Column contracts (tidy DataFrames):

``fixed_effects``
    ``term, estimate, se, lo, hi, level, scale, label`` -- ``se`` is the posterior SD
    for Bayesian fits; ``scale`` is ``"log-odds"``, ``"odds-ratio"``, ``"probability"``
    or ``"identity"``; ``label`` says e.g. ``"typical cluster (random effects at 0)"`` or
    ``"population-averaged (random effects integrated out)"``. Extra rows carry
    position bias per judge (``term = "position[judge=gpt-4]"``) and per-judge
    condition effects when slopes are in.
``variance``
    ``factor, sd, variance, share, icc, lo, hi, level, backend`` -- one row per factor
    on the latent scale (``lo``/``hi`` bound the SD) plus a ``Residual`` row
    (pi^2/3 for logit links).
``diagnostics``
    ArviZ names: ``parameter, mean, sd, r_hat, ess_bulk, ess_tail`` (empty for
    statsmodels back ends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["ModelFit", "FIXED_COLUMNS", "VARIANCE_COLUMNS", "DIAGNOSTIC_COLUMNS"]

FIXED_COLUMNS = ("term", "estimate", "se", "lo", "hi", "level", "scale", "label")
VARIANCE_COLUMNS = ("factor", "sd", "variance", "share", "icc", "lo", "hi", "level", "backend")
DIAGNOSTIC_COLUMNS = ("parameter", "mean", "sd", "r_hat", "ess_bulk", "ess_tail")


@dataclass(frozen=True, eq=False)
class ModelFit:
    """A fitted crossed random-effects model.

    Attributes
    ----------
    backend : str
        ``"bayes"``, ``"mixedlm"`` or ``"glmm_vb"``/``"glmm_map"``.
    family : str
        ``"bernoulli"``/``"binomial"``, ``"gaussian"``, ``"cumulative"`` ...
    formula : str
    idata : arviz.InferenceData or None
        Posterior (Bayesian back end), with provenance in ``idata.attrs``.
    results : object or None
        The statsmodels results object (frequentist back ends).
    fixed_effects, variance, diagnostics : pandas.DataFrame
        See the module docstring for their columns.
    divergences : int
    approximate : bool
        True when the back end is an approximation (VB, MAP/Laplace, linear probability).
    provenance : Mapping
        formula, priors, versions, seed, sampler, wall time, rows before/after collapsing.
    warnings : tuple of str
        Plain-words warnings raised during the fit (also emitted as EvalmixWarning).
    """

    backend: str
    family: str
    formula: str
    fixed_effects: pd.DataFrame
    variance: pd.DataFrame
    diagnostics: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=list(DIAGNOSTIC_COLUMNS)))
    divergences: int = 0
    idata: Any = None
    results: Any = None
    approximate: bool = False
    provenance: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def prior_sensitivity(self) -> pd.DataFrame | None:
        """Side-by-side estimates and intervals at two SD-prior scales (``term``,
        ``estimate@a``, ``lo@a``, ``hi@a``, ``estimate@b`` ...), when the fit was made
        with ``sensitivity=``; None otherwise."""
        out = self.provenance.get("prior_sensitivity")
        return out if isinstance(out, pd.DataFrame) else None

    def __str__(self) -> str:
        lines = [f"ModelFit(backend={self.backend!r}, family={self.family!r})",
                 f"formula: {self.formula}"]
        if self.approximate:
            lines.append("note: approximate back end (see provenance)")
        lines += ["", self.fixed_effects.to_string(index=False), "",
                  self.variance.to_string(index=False)]
        if self.warnings:
            lines += ["", *("warning: " + w for w in self.warnings)]
        return "\n".join(lines)
