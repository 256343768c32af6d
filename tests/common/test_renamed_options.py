"""Options renamed so that ``level`` means the confidence level only: the old names
still work, warn, and give the same result."""

import pandas as pd
import pytest

import evalmix
from evalmix.cli import build_parser
from evalmix.errors import InvalidOptionError
from evalmix.plan.pilot import parametric_power
from evalmix.sim import clustered_scores


@pytest.fixture(scope="module")
def table():
    return clustered_scores(12, 4, p=0.6, icc=0.1, seed=2).table()


def _intervals(rep):
    return rep.intervals.drop(columns=["seed"], errors="ignore").reset_index(drop=True)


def test_analyze_levels_is_cluster_levels(table):
    kw = dict(fast=True, reps=99, seed=1, progress=False, methods=["naive", "CR2"])
    new = evalmix.analyze(table, cluster_levels=["none", "cluster"], **kw)
    with pytest.warns(FutureWarning, match=r"analyze\(cluster_levels=\.\.\.\)"):
        old = evalmix.analyze(table, levels=["none", "cluster"], **kw)
    pd.testing.assert_frame_equal(_intervals(old), _intervals(new))
    assert new.summary["cluster_levels"] == ["none", "cluster"]
    with pytest.raises(InvalidOptionError, match="cluster_levels= only"):
        evalmix.analyze(table, levels=["none"], cluster_levels=["none"], **kw)


def test_parametric_power_levels_is_n_levels():
    kw = dict(vary={"scenario": [6]}, estimand="mean", reps=40, seed=3)
    new = parametric_power({"scenario": 0.5}, n_levels={"scenario": 10}, **kw)
    with pytest.warns(FutureWarning, match=r"parametric_power\(n_levels=\.\.\.\)"):
        old = parametric_power({"scenario": 0.5}, levels={"scenario": 10}, **kw)
    pd.testing.assert_frame_equal(old.table, new.table)
    assert list(new.table["n_levels_scenario"]) == [10, 6]
    with pytest.raises(InvalidOptionError, match="needs n_levels="):
        parametric_power({"scenario": 0.5}, reps=10, seed=1)


def test_cli_old_option_names_are_aliases():
    p = build_parser()
    a = p.parse_args(["report", "x.csv", "--outcome", "y", "--out", "o", "--levels", "none"])
    b = p.parse_args(["report", "x.csv", "--outcome", "y", "--out", "o",
                      "--cluster-levels", "none"])
    assert a.cluster_levels == b.cluster_levels == ["none"]
    c = p.parse_args(["power", "--components", "s=0.5", "--levels", "s=10"])
    d = p.parse_args(["power", "--components", "s=0.5", "--n-levels", "s=10"])
    assert c.n_levels == d.n_levels == ["s=10"]
