"""The frozen result of :func:`evalmix.fit`, shared by every back end.

Column contracts (tidy DataFrames):

``fixed_effects``
    ``term, estimate, se, lo, hi, level, scale, label`` -- ``se`` is the posterior SD
    for Bayesian fits; ``term`` + ``scale`` identify a row. ``scale`` is
    ``"log-odds"``, ``"odds-ratio"``, ``"identity"``, ``"probability"`` (population-
    averaged: random effects integrated out, what design-based intervals estimate),
    ``"probability-typical"`` (a typical cluster: random effects at 0), and for ordinal
    scores ``"score"`` / ``"score-typical"``; ``label`` says it in words. Probability
    terms are spelled by :func:`probability_term` (``"P[gpt-4]"``,
    ``"P[gpt-4] - P[gpt-3.5]"``) on every back end. Extra rows carry position bias per
    judge (``term = "position[judge=gpt-4]"``) and per-judge condition effects when
    slopes are in.
``variance``
    ``factor, sd, variance, share, icc, sd_lo, sd_hi, var_lo, var_hi, level, backend``
    -- one row per factor on the latent scale plus a ``Residual`` row (pi^2/3 for logit
    links); ``sd_lo``/``sd_hi`` bound the SD, ``var_lo``/``var_hi`` the variance (their
    squares: both are quantiles, or Wald bounds on the log-SD, of a monotone function).
``diagnostics``
    ArviZ names: ``parameter, mean, sd, r_hat, ess_bulk, ess_tail`` (empty for
    statsmodels back ends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix.tidy import PicklableProxies, tidy_rows

if TYPE_CHECKING:
    from arviz import InferenceData

__all__ = ["ModelFit", "PosteriorDraws", "FIXED_COLUMNS", "VARIANCE_COLUMNS", "DIAGNOSTIC_COLUMNS",
           "FIXED_KEY", "probability_term", "PROBABILITY", "PROBABILITY_TYPICAL",
           "SCORE", "SCORE_TYPICAL", "TYPICAL", "POPULATION"]

FIXED_COLUMNS = ("term", "estimate", "se", "lo", "hi", "level", "scale", "label")
#: Columns that identify a fixed-effects row.
FIXED_KEY = ("term", "scale")
VARIANCE_COLUMNS = ("factor", "sd", "variance", "share", "icc", "sd_lo", "sd_hi", "var_lo",
                    "var_hi", "level", "backend")
DIAGNOSTIC_COLUMNS = ("parameter", "mean", "sd", "r_hat", "ess_bulk", "ess_tail")

#: Scales of the probability / expected-score rows: population-averaged (random
#: effects integrated out) and at a typical cluster (random effects at 0).
PROBABILITY, PROBABILITY_TYPICAL = "probability", "probability-typical"
SCORE, SCORE_TYPICAL = "score", "score-typical"
#: The ``label`` of those rows.
TYPICAL = "typical cluster (random effects at 0)"
POPULATION = "population-averaged (random effects integrated out)"


def probability_term(level: str, reference: str | None = None) -> str:
    """The term label of a probability row, the same on every back end.

    ``P[level]`` (win rate of ``model_b = level``, or the mean of a condition) and, with
    ``reference``, the difference ``P[level] - P[reference]``.

    Examples
    --------
    >>> probability_term("gpt-4"), probability_term("gpt-4", "gpt-3.5")
    ('P[gpt-4]', 'P[gpt-4] - P[gpt-3.5]')
    """
    one = f"P[{level}]"
    return one if reference is None else f"{one} - P[{reference}]"


@dataclass(frozen=True, eq=False)
class PosteriorDraws:
    """Posterior draws and sampler statistics as NumPy arrays, what ``ModelFit.idata``
    is built from when first read.

    ArviZ is imported only then: ``import arviz`` costs ~2.7 s in a fresh process
    (matplotlib, ``scipy.stats``, xarray, a Numba compile), more than the default fit of
    a 4,320-row design (docs/models.md, *Latency*).

    Attributes
    ----------
    posterior, sample_stats : Mapping of str to numpy.ndarray
        Each array (chain, draw, ...).
    coords : Mapping of str to sequence
        Labels of the named dimensions.
    dims : Mapping of str to tuple of str
        The dimensions of a variable after (chain, draw); unnamed ones become
        ``{name}_dim_{i}``, as in ``arviz.from_dict``.
    attrs : Mapping
        Attributes of the posterior group (provenance).
    source : arviz.InferenceData or None
        The InferenceData the draws were read from (PyMC's or Bambi's sampler), returned
        as ``idata`` with ``attrs`` added.
    """

    posterior: Mapping[str, np.ndarray]
    sample_stats: Mapping[str, np.ndarray]
    coords: Mapping[str, Any] = field(default_factory=dict)
    dims: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    attrs: Mapping[str, Any] = field(default_factory=dict)
    source: Any = None

    @classmethod
    def from_inference_data(cls, idata: Any) -> PosteriorDraws:
        """The posterior and sample statistics of an ArviZ InferenceData."""
        p, s = idata.posterior, idata.sample_stats
        return cls(posterior={n: p[n].to_numpy() for n in p.data_vars},
                   sample_stats={n: s[n].to_numpy() for n in s.data_vars},
                   coords={c: p[c].to_numpy() for c in p.coords if c not in ("chain", "draw")},
                   dims={n: tuple(p[n].dims[2:]) for n in p.data_vars}, source=idata)

    @property
    def n_draws(self) -> int:
        """Draws per chain."""
        return int(np.shape(next(iter(self.posterior.values())))[1])

    def to_inference_data(self) -> InferenceData:
        """``arviz.from_dict(posterior=, sample_stats=, coords=, dims=)`` built directly
        from the arrays: the same groups, dimensions, coordinates and attributes, without
        ``from_dict``'s copies of the coordinates for every variable (0.2 s on the 4k
        design, 0.33 s at 100k rows). nutpie's raw ``chain`` and ``draw`` statistics are
        the coordinates (``from_dict`` drops them too)."""
        import arviz as az
        import xarray as xr
        from arviz.data.base import make_attrs

        def dataset(group: Mapping[str, np.ndarray]) -> xr.Dataset:
            labels: dict[str, np.ndarray] = {}
            variables = {}
            for name, a in group.items():
                if name in ("chain", "draw"):
                    continue
                d = ["chain", "draw", *self.dims.get(name, ())]
                d += [f"{name}_dim_{i}" for i in range(a.ndim - len(d))]
                for dim, n in zip(d, a.shape, strict=True):
                    if dim not in labels:
                        labels[dim] = (np.asarray(self.coords[dim]) if dim in self.coords
                                       else np.arange(n))
                variables[name] = xr.Variable(d, a)
            return xr.Dataset(variables, coords=labels, attrs=make_attrs())

        idata: Any
        if self.source is None:
            idata = az.InferenceData(posterior=dataset(self.posterior),
                                     sample_stats=dataset(self.sample_stats))
        else:
            idata = self.source
        idata.posterior.attrs.update(self.attrs)
        return idata


@dataclass(frozen=True, eq=False)
class ModelFit(PicklableProxies):
    """A fitted crossed random-effects model.

    Attributes
    ----------
    backend : str
        ``"bayes"``, ``"mixedlm"`` or ``"glmm_vb"``/``"glmm_map"``.
    family : str
        ``"bernoulli"``/``"binomial"``, ``"gaussian"``, ``"cumulative"`` ...
    formula : str
    idata : arviz.InferenceData or None
        Posterior (Bayesian back end), with provenance in ``idata.posterior.attrs``;
        built from ``draws`` when first read (that imports ArviZ).
    draws : PosteriorDraws or None
        The same posterior as NumPy arrays (Bayesian back end).
    results : object or None
        The statsmodels results object (frequentist back ends; None otherwise and for a
        stratified fit).
    strata : Mapping of str to ModelFit
        A stratified fit (``fit(..., by=role)``): the fit of each level (read-only;
        empty otherwise).
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
    draws: PosteriorDraws | None = None
    results: Any = None
    approximate: bool = False
    provenance: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    strata: Mapping[str, ModelFit] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "strata", MappingProxyType(dict(self.strata)))

    @cached_property
    def idata(self) -> InferenceData | None:
        """The posterior as an ArviZ InferenceData (see ``draws``); None for the
        statsmodels back ends."""
        return None if self.draws is None else self.draws.to_inference_data()

    def tidy(self) -> pd.DataFrame:
        """Fixed effects and SDs in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`).

        One row per fixed-effects row (``estimand="fixed_effect"``, ``contrast`` the
        term, ``scale`` its scale) and per variance component (``estimand="sd"``,
        ``contrast`` the factor, ``scale="sd"``, ``lo``/``hi`` the SD interval);
        ``method`` is the back end and ``cluster`` is ``"model"``; ``df`` is the t
        reference of a fixed effect's Wald interval where the back end used one
        (``provenance["df"]``), NaN otherwise. Extra columns: ``label``, ``variance``,
        ``share``, ``icc``.
        """
        fe = self.fixed_effects
        dfs = self.provenance.get("df") or {}
        wald = ~fe["scale"].isin([PROBABILITY, PROBABILITY_TYPICAL])
        fixed = pd.DataFrame({
            "estimand": "fixed_effect", "contrast": fe["term"].astype(str),
            "scale": fe["scale"].astype(str), "estimate": fe["estimate"], "se": fe["se"],
            "lo": fe["lo"], "hi": fe["hi"], "level": fe["level"],
            "df": [float(dfs[t]) if w and t in dfs else np.nan
                   for t, w in zip(fe["term"], wald, strict=True)],
            "label": fe["label"]})
        v = self.variance
        sd = pd.DataFrame({
            "estimand": "sd", "contrast": v["factor"].astype(str), "scale": "sd",
            "estimate": v["sd"], "se": np.nan, "lo": v["sd_lo"], "hi": v["sd_hi"],
            "level": v["level"], "label": "SD on the latent scale", "variance": v["variance"],
            "share": v["share"], "icc": v["icc"]})
        seed = self.provenance.get("seed")
        return tidy_rows(pd.concat([fixed, sd], ignore_index=True), method=self.backend,
                         cluster="model", reps=0, note="",
                         seed=seed if isinstance(seed, int | str) else None)

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
