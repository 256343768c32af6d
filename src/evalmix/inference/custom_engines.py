"""How :func:`evalmix.bootstrap` evaluates a statistic on its resamples.

A Python function of the resampled frame is called once per replicate
(:class:`_CallEngine`); a :class:`~evalmix.inference.sums.Sums` statistic is evaluated on
weighted cluster sums for a whole block of replicates at once (:class:`_SumsEngine`, the
fast path). :func:`_draw` runs a design's draws through either, block by block, with the
built-in bootstrap's random indices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from evalmix._progress import Progress
from evalmix.data.table import intersect_codes
from evalmix.errors import (
    InvalidOptionError,
)
from evalmix.inference.boot_weights import _counts, _gather_sums, index_chunks
from evalmix.inference.resampling import (
    COPY_COLUMN,
    Design,
    call_statistic,
    resample,
)
from evalmix.inference.sandwich import cluster_sums
from evalmix.inference.sums import Sums


def _engine(design: Design, statistic: Any, label: str) -> _CallEngine | _SumsEngine:
    return _SumsEngine(design, statistic) if isinstance(statistic, Sums) else \
        _CallEngine(design, statistic, label)


def _draw(design: Design, engine: _CallEngine | _SumsEngine, reps: int,
          rng: np.random.Generator, studentized: bool, bar: Progress, task: Any
          ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(reps, k)`` replicates (and their delta-method variances when studentized)."""
    k = len(engine.names)
    draws = np.empty((reps, k))
    var = np.empty((reps, k)) if studentized else None
    width = max(sum(int(c.max()) + 1 for c in design.factors), engine.width)
    chunks = [index_chunks(g, reps, rng, width) for g in design.groups]
    for parts in zip(*chunks, strict=True):
        a, b = parts[0][0], parts[0][1]
        draws[a:b], v = engine.draws([p[2] for p in parts], studentized, bar, task)
        if var is not None:
            var[a:b] = v
    return draws, var


class _CallEngine:
    """A Python function of the resampled frame: one call per replicate."""

    width = 0

    def __init__(self, design: Design, fn: Callable[[pd.DataFrame], Any], label: str):
        self.design, self.fn, self.label = design, fn, label
        self.names: tuple[str, ...] = ()

    def full(self) -> np.ndarray:
        frame = self.design.frame.copy()
        frame[COPY_COLUMN] = self.design.factors[0]
        value, self.names = call_statistic(self.fn, frame, None, f"statistic {self.label!r}")
        return value

    def draws(self, idx: list[np.ndarray], studentized: bool, bar: Progress, task: Any
              ) -> tuple[np.ndarray, None]:
        out = np.empty((idx[0].shape[0], len(self.names)))
        for r in range(out.shape[0]):
            frame = resample(self.design, [i[r] for i in idx])
            out[r] = call_statistic(self.fn, frame, self.names,
                           f"statistic {self.label!r} on a bootstrap resample")[0]
            bar.advance(task)
        return out, None

    def jackknife(self) -> np.ndarray:
        codes = self.design.factors[0]
        g = int(codes.max()) + 1
        out = np.empty((g, len(self.names)))
        for c in range(g):
            keep = codes != c
            frame = self.design.frame.loc[keep].reset_index(drop=True)
            frame[COPY_COLUMN] = codes[keep]
            out[c] = call_statistic(self.fn, frame, self.names,
                           f"statistic {self.label!r} without cluster {c}")[0]
        return out

    def se(self, counts: np.ndarray) -> np.ndarray:  # pragma: no cover - refused earlier
        raise InvalidOptionError("studentized intervals need a Sums statistic")


class _SumsEngine:
    """A function of column totals: replicates are counts times per-cluster sums."""

    def __init__(self, design: Design, stat: Sums):
        self.design, self.stat, self.names = design, stat, stat.names
        values = stat.values(design.frame)
        a = design.factors[0]
        self.sums = cluster_sums(values, a, int(a.max()) + 1)  # (G, p)
        self.width = 0
        if len(design.factors) == 2:
            b = design.factors[1]
            cell = intersect_codes(a, b)
            first = np.unique(cell, return_index=True)[1]
            self.cell_a, self.cell_b = a[first], b[first]
            self.cell_sums = cluster_sums(values, cell, first.size)
            self.width = first.size

    def full(self) -> np.ndarray:
        return self.stat.apply(self.sums.sum(axis=0))

    def totals(self, idx: list[np.ndarray]) -> np.ndarray:
        if len(idx) == 1:
            return _gather_sums(idx[0], self.sums)
        ca = _counts(idx[0], idx[0].shape[1])
        cb = _counts(idx[1], idx[1].shape[1])
        return (ca[:, self.cell_a] * cb[:, self.cell_b]) @ self.cell_sums

    def draws(self, idx: list[np.ndarray], studentized: bool, bar: Progress, task: Any
              ) -> tuple[np.ndarray, np.ndarray | None]:
        out = self.stat.apply(self.totals(idx))
        var = self.se(_counts(idx[0], self.sums.shape[0])) ** 2 if studentized else None
        bar.advance(task, idx[0].shape[0])
        return out, var

    def jackknife(self) -> np.ndarray:
        return self.stat.apply(self.sums.sum(axis=0) - self.sums)

    def se(self, counts: np.ndarray) -> np.ndarray:
        """Delta-method SE per replicate: ``sqrt(sum_h G_h/(G_h-1) sum_g w_g (a_g -
        abar_h)^2)`` with ``a_g = grad f(T) . s_g`` (the ultimate-cluster variance of
        the totals, within strata), ``(reps, k)``.

        Without strata and with unit weights this is
        :func:`evalmix.inference.totals.totals_delta` (clustered); it is repeated here
        because it runs for every replicate at once, within strata, and differentiates
        by central differences, which need no complex-safe ``combine`` (a user's ``Sums``
        may use ``np.abs`` or ``np.maximum``); a test checks the two agree."""
        T = counts @ self.sums  # (r, p)
        p = T.shape[1]
        step = 1e-6 * np.maximum(np.abs(T), 1.0)
        grad = np.empty((T.shape[0], len(self.names), p))
        for j in range(p):
            e = np.zeros(p)
            e[j] = 1.0
            h = step[:, j:j + 1]
            grad[:, :, j] = (self.stat.apply(T + h * e) - self.stat.apply(T - h * e)) / h / 2
        a = np.einsum("rkp,gp->rkg", grad, self.sums)  # (r, k, G)
        s = self.design.stratum
        member = np.eye(int(s.max()) + 1)[s]  # (G, H)
        g_h = member.sum(axis=0)
        abar = ((counts[:, None, :] * a) @ member) / g_h  # (r, k, H)
        dev = a - abar[..., s]
        factor = np.where(g_h > 1, g_h / np.maximum(g_h - 1, 1), 0.0)
        var = ((counts[:, None, :] * dev**2) @ member) @ factor
        return np.sqrt(np.maximum(var, 0.0))
