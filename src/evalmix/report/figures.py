"""Report figures: which figures a report draws (:func:`figure_list`), and drawing them
to PNG, in worker processes when there are many (:func:`draw_figures`).

The charts themselves are in :mod:`evalmix.report.charts` (re-exported here, and looked up
here when the list is drawn, so a chart replaced on this module is the one drawn).
"""

from __future__ import annotations

import base64
import io
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from evalmix.errors import EvalmixWarning
from evalmix.report.charts import (
    MAX_FOREST,
    controlled_plot,
    forest,
    headline_plot,
    position_plot,
    variance_plot,
)
from evalmix.report.charts import _controlled_rows as _controlled_rows
from evalmix.report.charts import _plt as _plt

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from evalmix.report.report_data import ReportData

__all__ = ["forest", "headline_plot", "variance_plot", "position_plot", "controlled_plot",
           "figure_list", "draw_figures", "Drawn", "png_bytes", "to_base64", "save_png",
           "MAX_FOREST"]


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG (the figure is closed).

    A figure with a layout engine is laid out while it is drawn; one without (labels
    placed outside its axes) is cropped to what it draws, which costs another draw."""
    buf = io.BytesIO()
    crop = fig.get_layout_engine() is None
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if crop else None)
    _plt().close(fig)
    return buf.getvalue()


def to_base64(fig: Figure, dpi: int = 110) -> str:
    return base64.b64encode(png_bytes(fig, dpi)).decode("ascii")


def save_png(fig: Figure, path: str | Path, dpi: int = 110) -> None:
    Path(path).write_bytes(png_bytes(fig, dpi))


def forest_order(report: ReportData) -> list[tuple[str, str]]:
    """(estimand, contrast) keys for forest plots: fragile, then most widened, first."""
    head = report.headline
    if head.empty:
        keys = list(dict.fromkeys(zip(report.intervals["estimand"],
                                      report.intervals["contrast"], strict=True)))
        return keys[:MAX_FOREST]
    h = head.assign(_f=~head["fragile"].astype(bool),
                    _r=-head["width_ratio"].astype(float).fillna(0))
    h = h.sort_values(["_f", "_r"], kind="stable")
    keys = list(zip(h["estimand"], h["contrast"], strict=True))
    rest = [k for k in dict.fromkeys(zip(report.intervals["estimand"],
                                         report.intervals["contrast"], strict=True))
            if k not in keys]
    return (keys + rest)[:MAX_FOREST]


def figure_list(report: ReportData) -> list[tuple[str, Callable[[], Figure]]]:
    """(name, draw) for every figure of a report, in reading order.

    The one list of figures: :meth:`~evalmix.report.report.Report.write` saves
    ``plots/<name>.png`` for each and the Markdown and HTML pages show exactly these, so a
    page never links a figure that was not drawn. Deciding the names draws nothing.
    """
    rec = report.recommendation
    rec_key = (rec.get("method", "CR2"), rec.get("cluster", ""))
    iv = report.intervals
    out: list[tuple[str, Callable[[], Figure]]] = []
    if not report.headline.empty:
        nulls = iv.groupby("estimand")["null"].first().to_dict()
        out.append(("headline", lambda: headline_plot(
            report.headline, null_of=nulls, reference=report.common_reference)))
    for i, (est, con) in enumerate(forest_order(report)):
        rows = iv[(iv["estimand"] == est) & (iv["contrast"] == con)]
        if not rows.empty:
            out.append((f"forest_{i:02d}", partial(forest, rows, title=f"{con} - {est}",
                                                   recommended=rec_key)))
    if not report.variance.empty:
        out.append(("variance", lambda: variance_plot(report.variance)))
    if report.position is not None and not report.position.empty:
        out.append(("position", lambda: position_plot(report.position)))
    if not _controlled_rows(iv, *rec_key).empty:
        out.append(("controlled", lambda: cast("Figure", controlled_plot(
            iv, method=rec_key[0], cluster=rec_key[1]))))
    return out


#: Reports with at least this many figures draw them on two forked processes (matplotlib
#: text layout is most of a report's drawing time: ~5 s for MT-Bench's 17 figures).
PARALLEL_MIN_FIGURES = 6

#: One report draws at a time in a process: pyplot's figure registry is not thread-safe,
#: and a fork while another thread is inside matplotlib would copy its held locks. Two
#: threads writing reports at once each draw their own figures, one after the other.
_DRAWING = threading.Lock()


@dataclass(frozen=True)
class Drawn:
    """The figures of a report: ``pngs`` (name -> PNG bytes, in reading order) and
    ``failed`` (name -> the error that stopped it: that figure alone is missing)."""

    pngs: dict[str, bytes]
    failed: dict[str, str]


def _try_png(draw: Callable[[], Figure]) -> bytes | str:
    """PNG bytes of one figure, or the one-line error that stopped it."""
    try:
        return png_bytes(draw())
    except Exception as exc:  # any failure costs this figure only
        _plt().close("all")
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]


#: the figures of the report a forked worker draws (set by the pool's initializer, in
#: that worker only: the drawing closures are inherited through the fork, not pickled)
_WORKER_FIGURES: list[tuple[str, Callable[[], Figure]]] = []


def _set_worker_figures(figs: list[tuple[str, Callable[[], Figure]]]) -> None:
    _WORKER_FIGURES[:] = figs


def _draw_in_worker(i: int) -> bytes | str:
    return _try_png(_WORKER_FIGURES[i][1])


def draw_figures(report: ReportData,
                 extra: Sequence[tuple[str, Callable[[], Figure]]] = ()) -> Drawn:
    """Draw every figure of :func:`figure_list` (then ``extra``), each in isolation.

    A figure that fails to draw is left out with a :class:`~evalmix.errors.EvalmixWarning`
    and its error in :attr:`Drawn.failed`; the others and the report's numbers are not
    affected. With :data:`PARALLEL_MIN_FIGURES` or more figures, two cores and a platform
    that forks (Linux), two worker processes draw them (they end with this process,
    :mod:`evalmix._children`); the bytes are the same as drawn here
    (``tests/report/test_report_figures.py``)."""
    figs = [*figure_list(report), *extra]
    with _DRAWING:
        if (len(figs) < PARALLEL_MIN_FIGURES or (os.cpu_count() or 1) < 2
                or not sys.platform.startswith("linux")):
            out = [_try_png(draw) for _, draw in figs]
        else:
            from evalmix._children import fork_pool

            with fork_pool(2, _set_worker_figures, (figs,)) as pool:
                out = pool.map(_draw_in_worker, range(len(figs)), chunksize=1)
    pngs = {name: r for (name, _), r in zip(figs, out, strict=True) if isinstance(r, bytes)}
    failed = {name: r for (name, _), r in zip(figs, out, strict=True) if isinstance(r, str)}
    for name, err in failed.items():
        warnings.warn(f"figure {name!r} could not be drawn ({err}); the report is written "
                      "without it", EvalmixWarning, stacklevel=2)
    return Drawn(pngs, failed)
