"""The :class:`Report` that :func:`evalmix.analyze` returns, and its file writers.

A report holds tidy frames only; rendering (plots, HTML, Markdown) lives in
:mod:`evalmix.report.figures` and :mod:`evalmix.report.render`.
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix._escape import csv_frame, terminal
from evalmix.report.folder import (
    PARTIAL_MARKER,
    REPORT_MARKER,
    check_report_dir,
    swap_in,
    write_manifest,
)
from evalmix.tidy import tidy_rows

if TYPE_CHECKING:
    from evalmix.report.judges_vs_humans import HumansSection

__all__ = ["Report", "PARTS", "Part", "check_report_dir", "REPORT_MARKER"]


def _jsonable(obj: Any) -> Any:
    """Convert numpy/pandas scalars and frames into JSON-ready Python objects."""
    if isinstance(obj, pd.DataFrame):
        return json.loads(obj.to_json(orient="records", default_handler=str))
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is pd.NA:
        return None
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    return obj


#: Title of the report section for many-model tables.
LEADERBOARD_TITLE = "Leaderboard: per-model intervals, every model pair, rank ranges"


def _html_figure(figures: Mapping[str, str], name: str) -> str:
    """A section's figure embedded in the HTML page ("" when it was not drawn)."""
    png = figures.get(name)
    return f"<img alt='{name}' src='data:image/png;base64,{png}'>" if png else ""


def _reliability_frame(reliability: Mapping[str, Any]) -> pd.DataFrame:
    from evalmix.report.reliability import reliability_frame

    return reliability_frame(dict(reliability))


@dataclass(frozen=True)
class Part:
    """One part of a :class:`Report`: its attribute, its CSV file (None: in the JSON only)
    and how the attribute's value becomes the file's table."""

    attr: str
    file: str | None
    frame: Callable[[Any], pd.DataFrame] = lambda value: value


#: The report's parts, written once: :meth:`Report.frames` (the CSV files that
#: :meth:`Report.write` saves) and :meth:`Report.to_dict` (the JSON) both read this table,
#: so a part cannot be saved and left out of the JSON, or the other way round.
PARTS: tuple[Part, ...] = (
    Part("intervals", "intervals.csv"),
    Part("variance", "variance.csv"),
    Part("judges", "judges.csv"),
    Part("position", None),
    Part("prior_sensitivity", "prior_sensitivity.csv"),
    Part("reliability", "reliability.csv", _reliability_frame),
    Part("leaderboard", "leaderboard.csv"),
    Part("leaderboard_pairs", "leaderboard_pairs.csv"),
    Part("position_classes", "position_classes.csv"),
    Part("plan", None),
    Part("custom", "custom.csv"),
    Part("length_control", "length_control.csv"),
    Part("style_control", "style_control.csv"),
)


@dataclass(frozen=True, eq=False)
class Report:
    """Every interval of every estimand, method and cluster level, with what they mean.

    Attributes
    ----------
    intervals : pandas.DataFrame
        One row per estimand x contrast x method x cluster level; columns
        ``estimand, contrast, method, cluster, estimate, se, lo, hi, level, df,
        n_clusters, n_obs, decision, fragile`` then ``null, p_value, reps, seed, ci_type,
        paired, source, note``. Win rates are those of ``model_b`` against ``model_a``.
    variance : pandas.DataFrame
        Variance components by factor and back end: ``factor, sd, variance, share, icc,
        sd_lo, sd_hi, var_lo, var_hi, level, backend`` (+ ``share_lo, share_hi``).
    judges : pandas.DataFrame
        Judge-stratified estimates (``judge, estimand, contrast, method, cluster,
        estimate, lo, hi, ...``) and per-judge position bias rows (estimands
        ``first_shown_win_rate``, ``flip_rate``, ``consistency``).
    position : pandas.DataFrame
        The same position-bias numbers, one row per judge (wide).
    position_classes : pandas.DataFrame or None
        Matched AB/BA cells by class (stable condition wins, stable slot wins, stable
        ties, flips) and the rates derived from them, per judge and pooled, with cluster
        bootstrap intervals (:func:`evalmix.compare.position.position_classes`); None
        without matched pairs.
    design : Mapping
        Design summary, ICC / design effect per factor, cluster levels, the
        recommendation and why, dropped rows.
    headline : pandas.DataFrame
        Each primary contrast: naive interval, recommended interval, width ratio.
    warnings : tuple of str
        Everything a reader should know, in plain words.
    truth : pandas.DataFrame or None
        Simulated data only: true values and whether each recommended interval holds it.
    summary : Mapping
        Versions, seed, roles, options and the command line.
    prior_sensitivity : pandas.DataFrame or None
        The Bayesian model refitted with SD priors 2.5x wider, side by side with the
        default fit: ``term, estimate@1, lo@1, hi@1, estimate@2.5, lo@2.5, hi@2.5`` (fixed
        effects on the log-odds or identity scale, then ``sd[<factor>]`` rows). Made when
        a cluster factor has fewer than 5 levels; None otherwise.
    leaderboard, leaderboard_pairs : pandas.DataFrame or None
        With more than 5 models: one row per model (estimate, interval, simultaneous
        rank range, tier letters) and one per model pair (difference, Holm p-value,
        simultaneous max-t interval), clustered at the recommended level
        (:func:`evalmix.inference.leaderboard.leaderboard`); None otherwise.
    length_control : pandas.DataFrame or None
        Pairwise tables with one baseline and the answer lengths (AlpacaEval): the
        length-controlled win rate beside the raw one per model
        (:func:`evalmix.inference.length_control.length_controlled_win_rate`); None
        otherwise.
    style_control : pandas.DataFrame or None
        Battles with answer features and no common baseline (Arena): style-controlled and
        raw Bradley-Terry abilities and the style coefficients
        (:func:`evalmix.inference.style_control.style_controlled_bt`); None otherwise.
    humans : HumansSection or None
        With ``analyze(humans=[...])``: the judges against the humans who rated the same
        units (:mod:`evalmix.report.judges_vs_humans`); None otherwise.
    reliability : Mapping or None
        With two or more facets around one object (the condition or the evaluated
        model): the G study of :mod:`evalmix.report.reliability` (``summary``: E rho^2,
        Phi, the SEs next to the naive ones, the advice; ``facets`` and ``components``
        frames); None otherwise.
    plan : Mapping or None
        With ``analyze(plan=...)``: the analysis plan as applied
        (:func:`evalmix.report.planned.apply_plan`: path, SHA-256, the eight items, the
        cluster and method used, the deviations the data forced, the primary rows); the
        report opens with it. None otherwise.
    custom : pandas.DataFrame or None
        With ``analyze(statistics=..., randomized=True)``: custom statistics bootstrapped
        at the recommended level and the cluster randomization test beside the
        design-based p-value (:mod:`evalmix.report.custom_statistics`); None otherwise.
    """

    intervals: pd.DataFrame
    variance: pd.DataFrame
    judges: pd.DataFrame
    design: Mapping[str, Any]
    headline: pd.DataFrame
    warnings: tuple[str, ...] = ()
    truth: pd.DataFrame | None = None
    position: pd.DataFrame = field(default_factory=pd.DataFrame)
    summary: Mapping[str, Any] = field(default_factory=dict)
    prior_sensitivity: pd.DataFrame | None = None
    leaderboard: pd.DataFrame | None = None
    leaderboard_pairs: pd.DataFrame | None = None
    humans: HumansSection | None = None
    reliability: Mapping[str, Any] | None = None
    plan: Mapping[str, Any] | None = None
    position_classes: pd.DataFrame | None = None
    custom: pd.DataFrame | None = None
    length_control: pd.DataFrame | None = None
    style_control: pd.DataFrame | None = None

    def tidy(self) -> pd.DataFrame:
        """The interval table in the result contract: :data:`evalmix.tidy.RESULT_COLUMNS`
        first (``scale`` is ``""``: the report's intervals are on the estimand's own scale),
        then the rest of :attr:`intervals`'
        columns (``n_obs, decision, fragile, null, p_value, ...``)."""
        return tidy_rows(self.intervals)

    # ------------------------------------------------------------------ helpers
    def with_truth(self, truth: pd.DataFrame | None, note: str | None = None) -> Report:
        """A copy with a truth table (and an extra summary note)."""
        from dataclasses import replace

        summary = dict(self.summary)
        if note:
            summary["truth_note"] = note
        return replace(self, truth=truth, summary=summary)

    def with_summary(self, **extra: Any) -> Report:
        from dataclasses import replace

        return replace(self, summary={**self.summary, **extra})

    @property
    def recommendation(self) -> Mapping[str, Any]:
        return self.design.get("recommendation", {})

    @property
    def common_reference(self) -> str | None:
        """The one model every headline win-rate contrast is against (``"B vs A"`` rows
        all ending in the same ``A``), or None."""
        h = self.headline
        if h.empty or not h["estimand"].isin(["win_rate"]).all():
            return None
        contrasts = [str(c) for c in h["contrast"]]
        refs = {c.rpartition(" vs ")[2] for c in contrasts}
        return refs.pop() if len(refs) == 1 and all(" vs " in c for c in contrasts) else None

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every table of the report that is present, by its CSV file name (the parts of
        :data:`PARTS`, then the humans section's)."""
        out = {part.file: part.frame(value) for part in PARTS
               if part.file and (value := getattr(self, part.attr)) is not None}
        if self.humans is not None:
            out.update(self.humans.frames())
        return out

    def to_dict(self) -> dict[str, Any]:
        """The whole report as plain data: the summary, headline, warnings, design and
        truth, then every part of :data:`PARTS` that is present (the same parts
        :meth:`write` saves), and the humans section's tables."""
        parts = {part.attr: value for part in PARTS
                 if (value := getattr(self, part.attr)) is not None}
        if self.humans is not None:
            parts["humans"] = {name.removesuffix(".csv"): frame
                               for name, frame in self.humans.frames().items()}
        return _jsonable({"summary": self.summary, "headline": self.headline,
                          "warnings": list(self.warnings), "design": self.design,
                          "truth": self.truth, **parts})

    # ------------------------------------------------------------------ writers
    def to_json(self, path: str | Path | None = None) -> str:
        """The whole report as JSON (written to ``path`` when given)."""
        text = json.dumps(self.to_dict(), indent=2, default=str)
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_markdown(self, path: str | Path | None = None, *, plots_dir: str | None = None
                    ) -> str:
        """The report as Markdown; ``plots_dir`` (relative) links PNGs written by
        :meth:`write`."""
        from evalmix.report.leaderboard_view import leaderboard_markdown
        from evalmix.report.render import markdown

        sections = []
        if self.leaderboard is not None:
            body = leaderboard_markdown(self.leaderboard, self.leaderboard_pairs)
            if plots_dir and "leaderboard" not in self.summary.get("figures_not_drawn", {}):
                body += f"\n\n![leaderboard]({plots_dir}/leaderboard.png)"
            sections.append((LEADERBOARD_TITLE, body))
        if self.length_control is not None:
            from evalmix.report.controlled import CONTROLLED_TITLE, controlled_markdown

            sections.append((CONTROLLED_TITLE, controlled_markdown(self.length_control)
                             + self._md_figure(plots_dir, "length_control")))
        if self.style_control is not None:
            from evalmix.report.controlled import STYLE_TITLE, style_markdown

            sections.append((STYLE_TITLE, style_markdown(self.style_control)
                             + self._md_figure(plots_dir, "style_control")))
        if self.humans is not None:
            from evalmix.report.judges_vs_humans import HUMANS_TITLE

            sections.append((HUMANS_TITLE, self.humans.markdown()))
        if self.reliability is not None:
            from evalmix.report.reliability import RELIABILITY_TITLE, reliability_markdown

            sections.append((RELIABILITY_TITLE, reliability_markdown(dict(self.reliability))))
        if self.custom is not None:
            from evalmix.report.custom_statistics import CUSTOM_TITLE, custom_markdown

            sections.append((CUSTOM_TITLE, custom_markdown(self.custom)))
        text = markdown(self, plots_dir=plots_dir, sections=sections)
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_html(self, path: str | Path | None = None, *,
                figures: Mapping[str, str] | None = None) -> str:
        """A self-contained HTML page (plots embedded as base64 PNG; ``figures``: those
        already drawn, by name, as :meth:`write` passes them)."""
        from evalmix.report.figures import draw_figures
        from evalmix.report.leaderboard_view import leaderboard_html
        from evalmix.report.render import html

        if figures is None:
            figures = {name: base64.b64encode(png).decode("ascii") for name, png in
                       draw_figures(self, self._extra_figures()).pngs.items()}
        sections = []
        if self.leaderboard is not None:
            png = figures.get("leaderboard")
            sections.append((LEADERBOARD_TITLE, leaderboard_html(
                self.leaderboard, self.leaderboard_pairs)
                + (f"<img alt='leaderboard' src='data:image/png;base64,{png}'>" if png
                   else "")))
        if self.length_control is not None:
            from evalmix.report.controlled import CONTROLLED_TITLE, controlled_html

            sections.append((CONTROLLED_TITLE, controlled_html(self.length_control)
                             + _html_figure(figures, "length_control")))
        if self.style_control is not None:
            from evalmix.report.controlled import STYLE_TITLE, style_html

            sections.append((STYLE_TITLE, style_html(self.style_control)
                             + _html_figure(figures, "style_control")))
        if self.humans is not None:
            from evalmix.report.judges_vs_humans import HUMANS_TITLE

            sections.append((HUMANS_TITLE, self.humans.html()))
        if self.reliability is not None:
            from evalmix.report.reliability import RELIABILITY_TITLE, reliability_html

            sections.append((RELIABILITY_TITLE, reliability_html(dict(self.reliability))))
        if self.custom is not None:
            from evalmix.report.custom_statistics import CUSTOM_TITLE, custom_html

            sections.append((CUSTOM_TITLE, custom_html(self.custom)))
        text = html(self, sections=sections, figures=figures)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def write(self, out: str | Path, *, escape_csv: bool = True) -> dict[str, Path]:
        """Write every file of the report into folder ``out``, atomically.

        Files: ``intervals.csv``, ``variance.csv``, ``judges.csv``, ``design.json``,
        ``design.md``, ``report.html``, ``report.md`` (with ``plots/*.png``),
        ``summary.json``, ``prior_sensitivity.csv`` when the Bayesian model was
        refitted with wider SD priors, ``reliability.csv`` with a G study, and
        ``custom.csv`` with custom statistics or a randomization test. The folder is
        built as a hidden sibling of ``out``
        and renamed into place, replacing an earlier report there as a whole: an
        interrupted write leaves the old report (or nothing), stale files of the old
        report do not survive, and two writers never mix their files. An existing
        ``out`` must be empty or an evalmix report (see
        :func:`~evalmix.report.folder.check_report_dir`); files in it that evalmix did
        not write (listed in its manifest, ``.evalmix-report``) are kept.

        Text cells of the CSV files that a spreadsheet would run as a formula (starting
        with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) get a leading ``'``
        (``evalmix._escape.csv_frame``; numbers are never changed);
        ``escape_csv=False`` writes every cell as it is, for programs that read the files.

        A report whose ``summary["incomplete"]`` says what is still running (the partial
        report :func:`~evalmix.report.analyze.analyze` writes before its model fits) is
        written the same way but without plots, ``report.html`` and the completion
        marker; its ``report.md`` opens with an "incomplete" banner.
        """
        d = check_report_dir(out)
        complete = not self.summary.get("incomplete")
        tmp = Path(tempfile.mkdtemp(dir=d.parent, prefix=f".{d.name}.tmp-"))
        try:
            umask = os.umask(0)
            os.umask(umask)
            tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; a report folder is not
            self._write_files(tmp, figures=complete, escape_csv=escape_csv)
            write_manifest(tmp, REPORT_MARKER if complete else PARTIAL_MARKER)
            swap_in(tmp, d, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        names = [*self.frames(), "design.json", "design.md",
                 *(["report.html"] if complete else []), "report.md", "summary.json"]
        return {name: Path(out) / name for name in names}

    def _extra_figures(self) -> list[tuple[str, Any]]:
        """Figures of the report's sections beyond :func:`~evalmix.report.figures.
        figure_list` (the leaderboard's and the controlled estimands'), as (name, draw)."""
        from functools import partial

        out: list[tuple[str, Any]] = []
        if self.leaderboard is not None:
            from evalmix.report.leaderboard_view import leaderboard_plot

            out.append(("leaderboard", partial(leaderboard_plot, self.leaderboard)))
        if self.length_control is not None:
            from evalmix.report.controlled_plots import length_control_plot

            out.append(("length_control", partial(length_control_plot,
                                                  self.length_control)))
        if self.style_control is not None:
            from evalmix.report.controlled_plots import style_control_plot

            out.append(("style_control", partial(style_control_plot, self.style_control)))
        return out

    def _md_figure(self, plots_dir: str | None, name: str) -> str:
        """The Markdown link of a section's figure, when it was written."""
        if not plots_dir or name in self.summary.get("figures_not_drawn", {}):
            return ""
        return f"\n\n![{name}]({plots_dir}/{name}.png)"

    def _noting_figures(self, failed: Mapping[str, str]) -> Report:
        """The report with the figures that could not be drawn recorded: in
        ``summary["figures_not_drawn"]`` (name -> error) and one warning each."""
        if not failed:
            return self
        notes = [f"figure {name!r} could not be drawn ({err}); the report is complete "
                 "without it (its numbers are in the tables)" for name, err in failed.items()]
        return replace(self, summary={**self.summary, "figures_not_drawn": dict(failed)},
                       warnings=(*self.warnings, *notes))

    def _write_files(self, d: Path, *, figures: bool = True, escape_csv: bool = True
                     ) -> None:
        from evalmix.report.figures import draw_figures
        from evalmix.report.render import design_markdown

        drawn = None
        if figures:
            # drawn first: a figure that fails is a note in the files written below
            drawn = draw_figures(self, self._extra_figures())
            self = self._noting_figures(drawn.failed)

        def csv(frame: pd.DataFrame, name: str) -> None:
            csv_frame(frame, escape=escape_csv).to_csv(d / name, index=False)

        for name, frame in self.frames().items():
            csv(frame, name)
        (d / "design.json").write_text(json.dumps(_jsonable(self.design), indent=2,
                                                  default=str))
        (d / "design.md").write_text(design_markdown(self))
        summary = dict(self.summary)
        summary["headline"] = self.headline
        summary["warnings"] = list(self.warnings)
        if self.truth is not None:
            summary["truth"] = self.truth
        if self.prior_sensitivity is not None:
            summary["prior_sensitivity"] = self.prior_sensitivity
        (d / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2,
                                                   default=str))
        if drawn is None:
            self.to_markdown(d / "report.md")
            return
        plots = d / "plots"
        plots.mkdir()
        # each figure is drawn once: its PNG file and the HTML page's copy
        pngs = drawn.pngs
        for name, png in pngs.items():
            (plots / f"{name}.png").write_bytes(png)
        self.to_markdown(d / "report.md", plots_dir="plots")
        self.to_html(d / "report.html", figures={
            name: base64.b64encode(png).decode("ascii") for name, png in pngs.items()})

    def __str__(self) -> str:
        lines = ["evalmix report"]
        rec = self.recommendation
        if rec:
            lines.append(f"recommended: {rec.get('method')} clustered by "
                         f"{rec.get('cluster') or 'none'} -- {rec.get('reason', '')}")
        if not self.headline.empty:
            show = self.headline[["estimand", "contrast", "estimate", "lo", "hi",
                                  "width_ratio", "fragile"]]
            lines += ["", show.to_string(index=False, float_format=lambda v: f"{v:.3f}")]
        if self.warnings:
            lines += ["", *("warning: " + w for w in self.warnings)]
        return terminal("\n".join(lines))

    __repr__ = __str__
