"""The report's "Judges against humans" section.

When a table's judge role holds human and LLM raters (``analyze(humans=[...])``, CLI
``--human NAME`` or ``--rater-kind COL``), the report adds: each LLM judge's pooled
agreement with the human votes beside the human-human ceiling and its kappa and alpha
with the humans (:func:`evalmix.agreement`, delta-method intervals over the table's
sampled cluster), the alternative annotator test's verdict (:func:`evalmix.alt_test`,
when items have two or more human ratings), and the human-anchored headline
(:func:`evalmix.ppi`: what the humans would say, from each judge's ratings of every unit
and the humans' of theirs) beside the judge-only one.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix._escape import html_text, md_text
from evalmix._markdown import markdown_table
from evalmix.compare.recommend import judge_role
from evalmix.errors import EvalmixError, EvalmixWarning, InvalidOptionError

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["HumansSection", "humans_section", "HUMANS_TITLE"]

HUMANS_TITLE = "Judges against humans"
#: At most this many contrasts get a human-anchored estimate (the largest ones first).
MAX_CONTRASTS = 12


@dataclass(frozen=True)
class HumansSection:
    """Agreement, alt-test verdicts and human-anchored estimates of one table.

    Attributes
    ----------
    agreement : pandas.DataFrame
        Per LLM judge: pooled agreement with the human votes (``estimate``, ``lo``,
        ``hi``), the ``human_ceiling``, mean Cohen's kappa with the humans and
        Krippendorff's alpha of the judge with the humans.
    alt_test : pandas.DataFrame
        Per judge: ``winning_rate``, ``advantage``, ``passed``, ``verdict`` (empty when
        the test cannot run).
    anchored : pandas.DataFrame
        Per judge and contrast: the PPI++ estimate and interval (``ppi``, ``ppi_lo``,
        ``ppi_hi``), the judge-only one and the number of human labels.
    notes : tuple of str
    cluster : str
    """

    agreement: pd.DataFrame = field(repr=False)
    alt_test: pd.DataFrame = field(repr=False)
    anchored: pd.DataFrame = field(repr=False)
    notes: tuple[str, ...] = ()
    cluster: str = ""

    def frames(self) -> dict[str, pd.DataFrame]:
        """The files of the section: ``humans_agreement.csv``, ``humans_alt_test.csv``,
        ``humans_anchored.csv``."""
        return {"humans_agreement.csv": self.agreement, "humans_alt_test.csv": self.alt_test,
                "humans_anchored.csv": self.anchored}

    def markdown(self) -> str:
        out = [md_text(_lead(self)), "", "**Agreement with the human votes**", "",
               markdown_table(_agreement_view(self), cell=_cell)]
        if len(self.alt_test):
            out += ["", "**Can the judge replace a human annotator?** (alt-test)", ""]
            out += [f"- {md_text(v)}" for v in self.alt_test["verdict"]]
        if len(self.anchored):
            out += ["", "**Human-anchored estimates** (PPI++) beside the judge alone", "",
                    markdown_table(_anchored_view(self), cell=_cell)]
        out += [""] + [f"> {md_text(n)}" for n in self.notes]
        return "\n".join(out).rstrip() + "\n"

    def html(self) -> str:
        esc = html_text
        parts = [f"<p>{esc(_lead(self))}</p>", "<h3>Agreement with the human votes</h3>",
                 _table_html(_agreement_view(self))]
        if len(self.alt_test):
            parts.append("<h3>Can the judge replace a human annotator? (alt-test)</h3><ul>")
            parts += [f"<li>{esc(v)}</li>" for v in self.alt_test["verdict"]]
            parts.append("</ul>")
        if len(self.anchored):
            parts += ["<h3>Human-anchored estimates (PPI++) beside the judge alone</h3>",
                      _table_html(_anchored_view(self))]
        parts += [f"<p class='muted'>{esc(n)}</p>" for n in self.notes]
        return "\n".join(parts)


def _lead(sec: HumansSection) -> str:
    return ("The judges' verdicts are measured against the humans who rated the same "
            "units: agreement beside the agreement of the humans with each other (the "
            "ceiling), the alternative annotator test, and what the humans would say "
            "estimated from each judge's ratings anchored on the human labels. Intervals "
            + (f"are cluster-robust over {sec.cluster!r}." if sec.cluster
               else "treat units as independent."))


def _table_html(df: pd.DataFrame) -> str:
    esc = html_text
    head = "".join(f"<th>{esc(str(c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{esc(_cell(v))}</td>" for v in r) + "</tr>"
                   for r in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _cell(v: object) -> str:
    if isinstance(v, float | np.floating):
        return "" if not np.isfinite(v) else f"{v:.3f}"
    return str(v)


def _interval(est: pd.Series, lo: pd.Series, hi: pd.Series) -> list[str]:
    return [f"{e:.3f} [{a:.3f}, {b:.3f}]" if np.isfinite(a) else
            (f"{e:.3f}" if np.isfinite(e) else "") for e, a, b in zip(est, lo, hi, strict=True)]


def _agreement_view(sec: HumansSection) -> pd.DataFrame:
    a = sec.agreement
    return pd.DataFrame({"judge": a["judge"],
                         "agreement with humans": _interval(a["estimate"], a["lo"], a["hi"]),
                         "human ceiling": a["human_ceiling"].map(_cell),
                         "mean kappa with humans": a["kappa"].map(_cell),
                         "units": a["n_units"]})


def _anchored_view(sec: HumansSection) -> pd.DataFrame:
    a = sec.anchored
    return pd.DataFrame({"judge": a["judge"], "estimand": a["estimand"],
                         "contrast": a["contrast"],
                         "human-anchored (PPI++)": _interval(a["ppi"], a["ppi_lo"],
                                                             a["ppi_hi"]),
                         "judge only": _interval(a["judge_only"], a["judge_lo"],
                                                 a["judge_hi"]),
                         "human labels": a["n_labelled"]})


def _long(table: EvalTable, role: str, humans: set[str]) -> pd.DataFrame:
    """The table as a long frame of ratings (unit, rater, rating, rater_kind, ...)."""
    d = table.frame()
    others = [r for r in table.clusters if r != role]
    key = [c for c in ("model_a", "model_b", "condition", "replicate") if c in d.columns]
    unit = d[others + key].astype(str).agg(" | ".join, axis=1) if others + key else \
        d["row"].astype(str)
    rating = d["verdict"] if table.kind == "pairwise" else d["y"]
    out = pd.DataFrame({"unit": unit, "rater": d[role].astype(str), "rating": rating,
                        "rater_kind": np.where(d[role].astype(str).isin(humans), "human",
                                               "llm")})
    for c in others + [c for c in ("model_a", "model_b", "condition") if c in d.columns]:
        out[c] = d[c].astype(str)
    if table.has_order:
        out["first_shown"] = np.where(d["a_first"] == 1, "a", np.where(d["a_first"] == 0,
                                                                        "b", ""))
    return out


def _cluster(table: EvalTable, role: str) -> str | None:
    """The coarsest sampled role other than the judge (the claim generalises over it)."""
    roles = [r for r in table.sampled if r != role and ":" not in r]
    if not roles:
        return None
    return min(roles, key=table.n_levels)


def humans_section(table: EvalTable, humans: Sequence[str], *, level: float = 0.95,
                   seed: int | None = None) -> HumansSection:
    """The "Judges against humans" section of ``table`` (see the module docstring).

    Parameters
    ----------
    table : EvalTable
        A table whose judge role (a role named like ``judge`` or ``rater``) holds both
        human and LLM raters.
    humans : list of str
        The judge-role labels that are people.
    level : float
        Confidence level.
    seed : int, optional
        Unused by the delta-method intervals; recorded for the bootstrap-free section.

    Returns
    -------
    HumansSection
    """
    from evalmix.humans.alternative import alt_test
    from evalmix.humans.concordance import agreement
    from evalmix.humans.ratings import read_ratings

    role = judge_role(table)
    if role is None:
        raise EvalmixError("the table has no judge role (a cluster role named like 'judge' "
                           "or 'rater'); name the rater column as clusters={'judge': ...}")
    labels = set(pd.unique(table.frame()[role].astype(str)))
    people = {str(h) for h in humans} & labels
    if not people or people == labels:
        raise InvalidOptionError(f"humans= must name some but not all values of the judge role "
                                 f"{role!r}; it has {sorted(labels)[:10]}")
    frame = _long(table, role, people)
    cluster = _cluster(table, role)
    notes: list[str] = []
    extra = [c for c in ("model_a", "model_b", "condition") if c in frame.columns]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvalmixWarning)
        r = read_ratings(frame, item="unit", rater="rater", rating="rating", cluster=cluster,
                         keep=extra)
        res = agreement(r, method="delta", level=level, min_items=5)
    t = res.table
    vs = res.vs_humans()
    vs = vs[vs["rater_1"].map(r.kind_of) == "llm"]
    pair = t[(t["kind"] == "llm-human") & (t["method"] == "delta")]
    kappa = pair[pair["statistic"] == "cohen_kappa"].groupby("rater_1")["estimate"].mean()
    agree = pd.DataFrame({"judge": vs["rater_1"], "estimate": vs["estimate"],
                          "lo": vs["lo"], "hi": vs["hi"], "human_ceiling": vs["human_ceiling"],
                          "kappa": vs["rater_1"].map(kappa), "n_units": vs["n_units"]})
    if r.kind == "score" and not r.categories:
        notes.append("continuous scores: agreement is Krippendorff's interval alpha and rank "
                     "correlations, in agreement.csv of `evalmix agreement`")
    alt = pd.DataFrame(columns=["judge", "winning_rate", "advantage", "passed", "verdict"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EvalmixWarning)
            a = alt_test(r, epsilon=0.2, cluster=cluster)
        alt = a.judges[["judge", "winning_rate", "advantage", "passed", "verdict"]]
        notes.append("alt-test with epsilon = 0.2 (expert annotators; 0.15 skilled, 0.1 "
                     "crowd workers: run evalmix.alt_test to choose)")
    except EvalmixError as exc:
        notes.append(f"alt-test not run: {exc}")
    judges = [j for j in r.llms if not any(j in o[1:3] for o in r.orders)]
    anchored = _anchored(r, table, judges, level, notes)
    return HumansSection(agree.reset_index(drop=True), alt.reset_index(drop=True), anchored,
                         tuple(notes), cluster or "")


def _anchored(r, table: EvalTable, judges: list[str], level: float,  # noqa: ANN001
              notes: list[str]) -> pd.DataFrame:
    from evalmix.humans.anchored import PPIEstimand, ppi

    estimand: PPIEstimand
    if table.kind == "pairwise":
        size = table.data.groupby(["model_a", "model_b"]).size().sort_values(ascending=False)
        specs = [("win_rate", {"model": a, "opponent": b}, f"P({a} beats {b})")
                 for a, b in size.index[:MAX_CONTRASTS]]
        estimand = "win_rate"
    elif "condition" in r.units.columns:
        levels = r.units["condition"].value_counts().index[:MAX_CONTRASTS]
        specs = [("mean", {"model": c, "condition": "condition"}, f"mean of {c}")
                 for c in levels]
        estimand = "mean"
    else:
        specs = [("mean", {}, "mean")]
        estimand = "mean"
    rows = []
    for judge in judges:
        for est, kw, label in specs:
            if est == "win_rate":
                kw = {**kw, "model_a": "model_a", "model_b": "model_b"}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", EvalmixWarning)
                    p = ppi(r, judge=judge, estimand=estimand, level=level, **kw)
            except EvalmixError as exc:
                notes.append(f"{judge}, {label}: no human-anchored estimate ({exc})")
                continue
            e, j = p.estimates["ppi"], p.estimates["judge"]
            rows.append({"judge": judge, "estimand": estimand, "contrast": label,
                         "ppi": e.estimate, "ppi_lo": e.lo, "ppi_hi": e.hi, "ppi_se": e.se,
                         "judge_only": j.estimate, "judge_lo": j.lo, "judge_hi": j.hi,
                         "n_labelled": p.n_labelled, "n_units": p.n_units,
                         "variance": p.method})
    return pd.DataFrame(rows, columns=["judge", "estimand", "contrast", "ppi", "ppi_lo",
                                       "ppi_hi", "ppi_se", "judge_only", "judge_lo",
                                       "judge_hi", "n_labelled", "n_units", "variance"])
