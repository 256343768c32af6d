"""The result of a G study: variance components, G coefficients, and where to spend.

:class:`GStudyResult` holds the variance components of a design (point estimates and
bootstrap or posterior draws) and projects them to any facet sizes
(:meth:`GStudyResult.project`, what :func:`evalmix.dstudy` tabulates). It is built by
:func:`evalmix.gstudy`; the arithmetic is :func:`evalmix.design.gtheory.coefficients`.

Which facets a design must *sample* (new levels) and which it can *repeat* (more calls
of the same configuration) follows the kind of each facet (:func:`facet_kind`); the
advice names the largest source of error in the words of seed 003 (:data:`ADVICE`,
:meth:`GStudyResult.dominant`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.table import is_judge_role, is_replicate_role
from evalmix.design.gtheory import QUANTITIES, GDesign, coefficients
from evalmix.tidy import PicklableProxies, tidy_rows
from evalmix.vocabulary import FacetKind

__all__ = ["GStudyResult", "FacetKind", "facet_kind", "ADVICE", "ORDER_WORDS"]

#: Facet names read as a presentation order (AB/BA).
ORDER_WORDS: tuple[str, ...] = ("order", "position", "first_shown", "a_first", "swap")
#: What to spend on when a facet of each kind cuts the error most (seed 003's words).
ADVICE: dict[str, str] = {
    "sample": ("cluster-level heterogeneity dominates: spend on more {facet} (sample new "
               "levels; seed 003: \"If cluster-level heterogeneity dominates, spend on more "
               "scenarios or personas.\")"),
    "judge": ("judge noise dominates: spend on more {facet} (sample new judges; seed 003: "
              "\"If judge noise dominates, spend on more judges or repeated judging.\")"),
    "counterbalance": ("position bias dominates: judge every comparison in both orders "
                       "(seed 003: \"If position bias dominates, spend on AB/BA "
                       "counterbalancing.\")"),
    "repeat": ("output randomness dominates: repeat the calls ({facet}; seed 003: \"If "
               "output randomness dominates, sample multiple completions per "
               "author-condition cell.\")"),
}
#: Labels of the quantities of :meth:`GStudyResult.project`.
QUANTITY_LABELS: dict[str, str] = {
    "erho2": "E rho^2 (relative G coefficient)", "phi": "Phi (dependability)",
    "universe_var": "universe-score variance", "relative_var": "relative error variance",
    "absolute_var": "absolute error variance", "se_score": "SE of an object's score",
    "se_relative": "relative SE of an object's score",
    "se_diff": "SE of a difference of two objects"}


def facet_kind(design: GDesign, facet: str) -> FacetKind:
    """How a D study adds levels of ``facet``.

    ``"fixed"``: never varied. ``"repeat"``: nested within every other factor (runs,
    epochs, replicates: more calls of the same configuration). ``"counterbalance"``: a
    presentation order. ``"judge"``: a judge, rater or grader. ``"sample"``: anything
    else (items, scenarios, personas, prompt templates): new levels drawn.

    Examples
    --------
    >>> d = GDesign("model", ("item", "judge", "run"), {"run": ("model", "item", "judge")})
    >>> [facet_kind(d, f) for f in d.facets]
    ['sample', 'judge', 'repeat']
    """
    if facet in design.fixed or facet in design.differentiation:
        return "fixed"
    others = set(design.factors) - {facet}
    if (design.ancestors(facet) >= others
            or (is_replicate_role(facet) and design.object in design.ancestors(facet))):
        return "repeat"
    if facet.lower() in ORDER_WORDS:
        return "counterbalance"
    return "judge" if is_judge_role(facet) else "sample"


def _chi2_df(draws: np.ndarray) -> np.ndarray:
    """Degrees of freedom of a scaled chi-square with the draws' mean and variance,
    ``2 mean^2 / var`` (Satterthwaite's moments; the ANOVA error variances are linear
    combinations of mean squares)."""
    m, v = np.nanmean(draws, axis=0), np.nanvar(draws, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(v > 0, 2 * m**2 / v, np.inf)


def _n_text(n: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in n.items())


@dataclass(frozen=True, eq=False)
class GStudyResult(PicklableProxies):
    """Variance components of a G study and the coefficients they imply.

    Attributes
    ----------
    design : GDesign
    method : {"anova", "reml", "bayes"}
        How the components were estimated.
    scale : str
        ``"identity"`` (the scores as given) or the latent scale of the Bayesian model
        (``"latent logit"``, ``"latent cumulative logit"``).
    variances : ndarray (n_effects,)
        Point estimates in :attr:`GDesign.effects` order (ANOVA: unbiased, may be
        negative; REML: at least 0; Bayes: posterior medians).
    draws : ndarray (m, n_effects) or None
        Parametric-bootstrap replicates (ANOVA, REML) or posterior draws (Bayes).
    interval : str
        How ``draws`` were made (plain words).
    n_observed : Mapping of str to float
        ``n'`` of each facet in the data (levels per object; within each parent for a
        nested facet; harmonic mean over objects when unbalanced).
    n_levels : Mapping of str to int
        Distinct levels of every factor.
    n_obs : int
    scores : pandas.DataFrame
        One row per object: ``object, n, mean, sd, naive_se`` (the naive SE treats rows
        as independent, ``sd / sqrt(n)``).
    level : float
    reps : int
        Bootstrap replicates or posterior draws behind the intervals (0: none).
    seed : int or None
    notes : tuple of str
        How the design was read (nesting found, replicates numbered, rows dropped).
    details : Mapping
        Back-end specifics (``anova``: the ANOVA table; ``fit``: the model fit).
    """

    design: GDesign
    method: str
    scale: str
    variances: np.ndarray
    draws: np.ndarray | None
    interval: str
    n_observed: Mapping[str, float]
    n_levels: Mapping[str, int]
    n_obs: int
    scores: pd.DataFrame
    level: float = 0.95
    reps: int = 0
    seed: int | None = None
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ projection
    def sizes(self, n: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``n'`` per facet: the observed ones, with those in ``n`` replaced."""
        out: dict[str, Any] = dict(self.n_observed)
        for k, v in (n or {}).items():
            if k not in out:
                raise KeyError(k)
            out[k] = v
        return out

    def project(self, n: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Every quantity of :data:`~evalmix.design.gtheory.QUANTITIES` at sizes ``n``.

        Parameters
        ----------
        n : mapping of str to float or 1-d array, optional
            ``n'`` of some facets (others as observed); arrays give one design each.

        Returns
        -------
        dict
            ``{quantity: estimate}`` and ``{quantity + "_lo"/"_hi": bound}``, arrays of
            one value per design. Estimates are plug-in (ANOVA, REML: negative
            components at 0) or posterior medians (Bayes); bounds are percentiles of the
            draws at ``level`` (NaN without draws; with few levels of a facet they
            undercover, see docs/gtheory.md). ``df_score`` and ``df_diff`` are the degrees of freedom
            of the error variances behind ``se_score`` and ``se_diff``
            (:func:`_chi2_df`): use ``t(df)`` quantiles for an interval of a score.
        """
        sizes = self.sizes(n)
        point = coefficients(self.variances, self.design, sizes)
        out: dict[str, np.ndarray] = {}
        alpha = (1 - self.level) / 2
        drawn = (coefficients(self.draws, self.design, sizes) if self.draws is not None
                 else None)
        for q in QUANTITIES:
            if drawn is None:
                est = point[q]
                lo = hi = np.full_like(est, np.nan)
            else:
                lo, hi = np.nanquantile(drawn[q], [alpha, 1 - alpha], axis=0)
                est = np.nanmedian(drawn[q], axis=0) if self.method == "bayes" else point[q]
            out[q], out[q + "_lo"], out[q + "_hi"] = est, lo, hi
        for q, var in (("score", "absolute_var"), ("diff", "relative_var")):
            out["df_" + q] = (_chi2_df(drawn[var]) if drawn is not None
                              else np.full_like(point[var], np.nan))
        return out

    # ------------------------------------------------------------------ tables
    @property
    def naive_se_score(self) -> float:
        """Root mean square over objects of the naive SE of an object's mean."""
        return float(np.sqrt(np.mean(self.scores["naive_se"] ** 2)))

    @property
    def naive_se_diff(self) -> float:
        """Naive SE of a difference of two objects' means (rows independent)."""
        return float(np.sqrt(2 * np.mean(self.scores["naive_se"] ** 2)))

    def components(self) -> pd.DataFrame:
        """One row per effect: ``effect, role, variance, lo, hi, share, divisor,
        error_share``.

        ``lo``/``hi`` are percentiles of the draws with negative ones at 0. ``share`` is
        the effect's part of the total variance (negative estimates at 0); ``divisor`` the ``n'`` product it is divided by in the observed design;
        ``error_share`` its part of the absolute error variance there (0 for the
        universe score).
        """
        d = self.design
        v = np.clip(self.variances, 0.0, None)
        uni, rel, ab = d.weights(self.n_observed)
        weight = np.where(uni[:, 0] > 0, uni[:, 0], ab[:, 0])
        contrib = v * ab[:, 0]
        total_err = contrib.sum()
        alpha = (1 - self.level) / 2
        if self.draws is not None:   # negative draws (ANOVA, MINQUE) count as 0
            lo, hi = np.quantile(np.clip(self.draws, 0.0, None), [alpha, 1 - alpha], axis=0)
        else:
            lo = hi = np.full(v.size, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            return pd.DataFrame({
                "effect": [d.label(e) for e in d.effects],
                "role": [d.role(e) for e in d.effects],
                "variance": self.variances, "lo": lo, "hi": hi,
                "share": v / v.sum() if v.sum() > 0 else np.nan,
                "divisor": np.where(weight > 0, 1 / np.where(weight > 0, weight, 1), np.nan),
                "error_share": contrib / total_err if total_err > 0 else 0.0})

    def dominant(self) -> tuple[str, FacetKind, tuple[str, ...]]:
        """The effect contributing most to the relative error variance (what E rho^2
        and the SE of a difference respond to), the kind of error it is, and the facets
        to spend on.

        The kind follows seed 003's four sources, in this order: an effect holding a
        repeated facet is output randomness (``"repeat"``), one holding the order is
        position bias (``"counterbalance"``), one holding a judge is judge noise
        (``"judge"``), any other cluster-level heterogeneity (``"sample"``). Without a
        repeated facet the highest-order effect is confounded with run-to-run noise and
        counts by its facets.
        """
        d = self.design
        _, rel, _ = d.weights(self.n_observed)
        contrib = np.clip(self.variances, 0.0, None) * rel[:, 0]
        if not np.any(contrib > 0):
            return "", "fixed", ()
        e = d.effects[int(np.argmax(contrib))]
        kinds = {f: facet_kind(d, f) for f in e if f in d.facets}
        for kind in ("repeat", "counterbalance", "judge", "sample"):
            hit = tuple(f for f in d.facets if kinds.get(f) == kind)
            if hit:
                return d.label(e), kind, hit    # type: ignore[return-value]
        return d.label(e), "fixed", ()

    def facets(self) -> pd.DataFrame:
        """Where to spend: one row per facet, ``facet, kind, n_observed, error_share,
        se_score, se_score_doubled, se_diff, se_diff_doubled, gain, advice``.

        ``error_share`` is the part of the relative error variance in effects holding
        the facet (effects with several facets count for each); ``*_doubled`` are the
        SEs with the facet's ``n'`` doubled (the others as observed); ``gain`` is the
        share of the relative error variance that doubling removes. Doubling a facet
        crossed with everything (the items) always removes the most, at the most calls;
        ``advice`` instead names the source of the largest error term
        (:meth:`dominant`) in seed 003's words, on the facets that reduce it.
        """
        d = self.design
        now = self.project()
        _, rel, _ = d.weights(self.n_observed)
        contrib = np.clip(self.variances, 0.0, None) * rel[:, 0]
        total = contrib.sum()
        rows = []
        for f in d.facets:
            if f in d.differentiation:
                continue
            kind = facet_kind(d, f)
            share = sum(c for e, c in zip(d.effects, contrib, strict=True) if f in e)
            row: dict[str, Any] = {"facet": f, "kind": kind, "n_observed": self.n_observed[f],
                                   "error_share": share / total if total > 0 else 0.0,
                                   "se_score": float(now["se_score"][0]),
                                   "se_diff": float(now["se_diff"][0])}
            if kind == "fixed":
                row.update(se_score_doubled=np.nan, se_diff_doubled=np.nan, gain=0.0)
            else:
                doubled = self.project({f: 2 * self.n_observed[f]})
                rel_now, rel_2 = now["relative_var"][0], doubled["relative_var"][0]
                row.update(se_score_doubled=float(doubled["se_score"][0]),
                           se_diff_doubled=float(doubled["se_diff"][0]),
                           gain=float((rel_now - rel_2) / rel_now) if rel_now > 0 else 0.0)
            rows.append(row)
        out = pd.DataFrame(rows)
        out["advice"] = ""
        effect, kind, facets = self.dominant()
        if facets:
            text = (f"the largest error term is {effect}: "
                    + ADVICE[kind].format(facet=", ".join(facets)))
            out.loc[out["facet"] == facets[0], "advice"] = text
        return out

    @property
    def advice(self) -> str:
        """One sentence: the largest source of relative error and what seed 003 says
        to spend on (:meth:`dominant`)."""
        f = self.facets()
        hit = f[f["advice"] != ""]
        return str(hit["advice"].iloc[0]) if len(hit) else "no facet reduces the error"

    def tidy(self) -> pd.DataFrame:
        """Rows in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`).

        ``estimand="variance"`` per effect (``contrast`` the effect, extra columns
        ``role``, ``share``); every quantity of
        :data:`~evalmix.design.gtheory.QUANTITIES` for the observed design
        (``contrast`` its sizes; ``df`` of ``se_score`` and ``se_diff`` for a ``t``
        interval of a score or a difference); and ``se_score`` / ``se_diff`` with
        ``method="naive"`` (rows independent). ``cluster`` names the random facets.
        """
        comp = self.components()
        cluster = " x ".join(self.design.random_facets)
        rows = [{"estimand": "variance", "contrast": r.effect, "estimate": r.variance,
                 "lo": r.lo, "hi": r.hi, "role": r.role, "share": r.share}
                for r in comp.itertuples()]
        now = self.project()
        design = _n_text(self.n_observed)
        dfs = {"se_score": float(now["df_score"][0]), "se_diff": float(now["df_diff"][0])}
        for q in QUANTITIES:
            rows.append({"estimand": q, "contrast": design, "estimate": float(now[q][0]),
                         "lo": float(now[q + "_lo"][0]), "hi": float(now[q + "_hi"][0]),
                         "df": dfs.get(q, np.nan)})
        for q, value in (("se_score", self.naive_se_score), ("se_diff", self.naive_se_diff)):
            rows.append({"estimand": q, "contrast": design, "method": "naive",
                         "cluster": "", "scale": "identity", "estimate": value,
                         "note": "rows treated as independent"})
        frame = pd.DataFrame(rows)
        frame["method"] = frame.get("method", pd.Series(dtype=object)).fillna(self.method)
        frame["cluster"] = frame.get("cluster", pd.Series(dtype=object)).fillna(cluster)
        frame["scale"] = frame.get("scale", pd.Series(dtype=object)).fillna(self.scale)
        frame["note"] = frame.get("note", pd.Series(dtype=object)).fillna(self.interval)
        return tidy_rows(frame, level=self.level, reps=self.reps, seed=self.seed,
                         n_clusters=np.nan)

    def __str__(self) -> str:
        d = self.design
        now = self.project()
        lines = [f"G study of {d.object!r} over {', '.join(d.facets)} ({self.method}, "
                 f"{self.n_obs} scores, scale {self.scale})"]
        comp = self.components()
        width = max(len(e) for e in comp["effect"])
        for r in comp.itertuples():
            ci = f" [{r.lo:.4g}, {r.hi:.4g}]" if np.isfinite(r.lo) else ""
            lines.append(f"  {r.effect:<{width}}  {r.variance:9.4g}{ci}  "
                         f"{r.share:6.1%}  {r.role}")
        lines.append(f"observed design ({_n_text(self.n_observed)}):")
        for q in ("erho2", "phi", "se_score", "se_diff"):
            ci = (f" [{now[q + '_lo'][0]:.3g}, {now[q + '_hi'][0]:.3g}]"
                  if np.isfinite(now[q + "_lo"][0]) else "")
            lines.append(f"  {QUANTITY_LABELS[q]}: {now[q][0]:.3g}{ci}")
        on = "" if self.scale == "identity" else ", on the scores' own scale"
        lines.append(f"  naive SE (rows independent{on}): score {self.naive_se_score:.3g}, "
                     f"difference {self.naive_se_diff:.3g}")
        lines.append(f"advice: {self.advice}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
