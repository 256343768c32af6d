"""Argument errors are :class:`InvalidOptionError`, a ``ValueError`` as well as an
``EvalmixError``; problems with the data keep the bare root.

One call per layer with an argument no function can take: each is refused before any
work starts, and ``except ValueError`` catches it (it did not for ``analyze(reps=0)``,
which raised the bare root).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.design.gtheory import GDesign
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference.bootstrap import cluster_bootstrap
from evalmix.inference.leaderboard import leaderboard
from evalmix.plan.power import power
from evalmix.plan.study import coverage
from evalmix.sim import clustered_scores


@pytest.fixture(scope="module")
def table():
    return clustered_scores(12, 4, p=0.6, icc=0.1, seed=2).table()


@pytest.fixture(scope="module")
def board_table():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"model": np.repeat(["a", "b", "c"], 10),
                       "item": np.tile(np.arange(10), 3), "y": rng.integers(0, 2, 30)})
    return evalmix.read(df, outcome="y", condition="model", clusters={"item": "item"})


BAD_CALLS = {
    "analyze reps=0": lambda t: evalmix.analyze(t, reps=0, progress=False),
    "analyze level=95": lambda t: evalmix.analyze(t, level=95, progress=False),
    "interval method": lambda t: evalmix.interval(t, "mean", method="CR9"),
    "interval nested=pair on scores": lambda t: evalmix.interval(
        t, "mean", method="bootstrap", cluster="cluster", nested="pair", reps=99, seed=1),
    "cluster_bootstrap reps=1": lambda t: cluster_bootstrap(
        np.ones((4, 1)), np.arange(4.0), np.arange(4), reps=1),
    "fit formula not a string": lambda t: evalmix.fit(t, formula=3),
    "coverage reps=1": lambda t: coverage(reps=1, progress=False),
    "power icc=1.5": lambda t: power(0.1, n_clusters=20, cluster_size=5, icc=1.5, sd=1.0),
    "clustered_scores p=2": lambda t: clustered_scores(10, 5, p=2.0),
    "GDesign object as facet": lambda t: GDesign("model", ("model", "item")),
    "datasets unknown name": lambda t: evalmix.datasets.load("no-such-set"),
}


def test_leaderboard_reps(board_table):
    with pytest.raises(ValueError, match="reps must be at least 100"):
        leaderboard(board_table, cluster="item", reps=5)
    # the old name still works, with a FutureWarning; beside a changed reps it is refused
    with pytest.warns(FutureWarning, match=r"leaderboard\(draws=...\) is now leaderboard\(reps=...\)"):
        with pytest.raises(ValueError, match="reps must be at least 100"):
            leaderboard(board_table, cluster="item", draws=5)
    with pytest.raises(ValueError, match="give reps= only"):
        leaderboard(board_table, cluster="item", draws=500, reps=600)


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_argument_errors_are_value_errors(name, table):
    with pytest.raises(ValueError) as info:
        BAD_CALLS[name](table)
    assert isinstance(info.value, InvalidOptionError), type(info.value)
    assert isinstance(info.value, EvalmixError)


def test_data_problems_keep_the_root(table):
    """A table without the condition column a comparison needs is a data problem."""
    with pytest.raises(EvalmixError, match="needs a condition column") as info:
        evalmix.compare_all(table)
    assert not isinstance(info.value, InvalidOptionError)


@pytest.mark.parametrize("value", [1.0, 0.0, -0.1, float("nan"), "0.5", True, None])
def test_a_probability_outside_its_range_is_refused_by_the_shared_check(value):
    """``clustered_scores(p=...)`` goes through ``errors.check_number``: the value and the
    open interval are named; a string or a bool is not read as a number."""
    with pytest.raises(InvalidOptionError, match=r"p must be (a finite number )?in \(0, 1\)"):
        clustered_scores(10, 5, p=value)
