"""Memory in proportion to the data (issue 36, item 5): the Bradley-Terry leaderboard and
``analyze(fast=True)`` allocate a few times the input frame, not per-row copies of it
or (rows x models) designs. Python's tracemalloc sees numpy's allocations;
benchmarks/bench_memory.py measures the resident peak at 1M and 5M rows."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.inference.leaderboard import leaderboard


def arena(n: int, n_models: int = 8) -> tuple[pd.DataFrame, evalmix.EvalTable]:
    """The benchmark's table: 16 rows per item (4 judges x 4 model pairs)."""
    rng = np.random.default_rng(1)
    models = np.array([f"model-{i}" for i in range(n_models)])
    i = np.arange(n)
    k = (i // 4) % 4
    a = (2 * k + i // 16) % n_models
    b = (a + 1 + k) % n_models
    frame = pd.DataFrame({"model_a": models[a], "model_b": models[b], "item": i // 16,
                          "judge": i % 4,
                          "outcome": rng.choice([0.0, 0.5, 1.0], n, p=[0.45, 0.1, 0.45])})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = evalmix.read(frame, outcome="outcome", model_a="model_a",
                             model_b="model_b", clusters={"item": "item", "judge": "judge"})
    return frame, table


def peak_mb(fn) -> float:  # noqa: ANN001
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_bradley_terry_board_stays_within_a_few_frames():
    """Before the patterns, the CR2 board held an (n x k) design and its whitened copy
    (at 200 models, 1.6 GB each per million rows; 29x the frame here before): here 20
    models, 100,000 rows."""
    frame, table = arena(100_000, n_models=20)
    size = frame.memory_usage(deep=True).sum() / 2**20
    table.y, table.codes("item")  # the table's own cached arrays are not the board's
    peak = peak_mb(lambda: leaderboard(table, cluster="item", method="CR2", seed=1,
                                       draws=1000, letters=False))
    assert peak < 3 * size, f"{peak:.1f} MB for a {size:.1f} MB frame"


@pytest.mark.slow
def test_analyze_fast_stays_within_five_frames():
    frame, table = arena(250_000)
    size = frame.memory_usage(deep=True).sum() / 2**20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peak = peak_mb(lambda: evalmix.analyze(table, fast=True, methods=["naive", "CR2"],
                                               progress=False, seed=1))
    assert peak < 5 * size, f"{peak:.1f} MB for a {size:.1f} MB frame"
