"""Issue 12, crashes: raw Python exceptions from the maths become clear EvalmixErrors.

An exact fit (a difference on one item; ZeroDivisionError before), logit separation
(LinAlgError before), Wilson on a mean of ones that round-off puts above 1, negative
seeds (numpy ValueError before), NaN or negative planning inputs (silent NaN power
before), and a zero-width or failed coverage cell in the coverage plot.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference.naive import wilson_interval
from evalmix.seeding import check_seed


def test_exact_fit_is_an_error_for_every_method():
    # one item, two conditions: the difference fits both rows exactly
    t = evalmix.read(pd.DataFrame({"item": ["q1", "q1"], "model": ["x", "y"],
                                   "score": [1, 0]}), outcome="score", condition="model")
    for method in ("naive", "CR1", "CR2", "CR3"):
        with pytest.raises(EvalmixError, match=r"2 rows for 2 coefficients: the fit is exact"):
            evalmix.interval(t, "difference", method=method)
    one = evalmix.read(pd.DataFrame({"score": [1.0]}), outcome="score")
    with pytest.raises(EvalmixError, match=r"1 row for 1 coefficient:"):
        evalmix.interval(one, "mean", method="naive")


def test_logit_separation_is_an_error_not_linalg():
    df = pd.DataFrame({"item": [f"i{i // 2}" for i in range(20)], "model": ["x", "y"] * 10,
                       "score": [1, 0] * 10})
    t = evalmix.read(df, outcome="score", condition="model", clusters={"item": "item"})
    with pytest.raises(EvalmixError, match=r"perfectly separated.*family='gaussian'"):
        evalmix.interval(t, "coef", family="binomial", cluster="item")
    # the linear-probability answer exists and is exact: y - x = -1
    res = evalmix.interval(t, "difference", cluster="item")
    assert res.estimate == pytest.approx(-1.0)


def test_wilson_accepts_round_off_above_one_and_refuses_real_overshoot():
    assert wilson_interval(1.0000000000000002, 10) == wilson_interval(1.0, 10)
    assert wilson_interval(-1e-17, 10) == wilson_interval(0.0, 10)
    lo, hi = wilson_interval(1.0, 10)  # closed form: lo = n / (n + z^2)
    assert lo == pytest.approx(10 / (10 + 1.959963984540054 ** 2))
    with pytest.raises(EvalmixError, match=r"proportion in \[0, 1\]"):
        wilson_interval(1.01, 10)


@pytest.mark.parametrize("seed", [-1, 1.5, "7", True])
def test_bad_seeds_are_refused(seed):
    with pytest.raises(InvalidOptionError, match="seed"):
        check_seed(seed)
    t = evalmix.read(pd.DataFrame({"item": list("aabbccddee"),
                                   "score": [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]}),
                     outcome="score", clusters={"item": "item"})
    with pytest.raises(EvalmixError, match="seed"):
        evalmix.interval(t, "mean", method="bootstrap", cluster="item", seed=seed, reps=99)


def test_coverage_refuses_zero_jobs_and_negative_seed():
    from evalmix.plan import coverage

    grid = {"n_clusters": [5], "cluster_size": [2], "icc": [0.1]}
    with pytest.raises(InvalidOptionError, match="jobs=0"):
        coverage(["naive"], grid, reps=10, jobs=0, progress=False)
    with pytest.raises(InvalidOptionError, match="seed=-1 is negative"):
        coverage(["naive"], grid, reps=10, seed=-1, progress=False)


@pytest.mark.parametrize("kw, needle", [
    (dict(icc=float("nan")), "icc must be in"),
    (dict(effect=float("nan")), "effect must be a finite number"),
    (dict(size_cv=-1.0), "size_cv must be >= 0"),
    (dict(sd=float("nan")), "sd must be positive"),
    (dict(level=float("nan")), "level must be in"),
])
def test_power_refuses_nan_and_negative_inputs(kw, needle):
    args = dict(effect=0.05, n_clusters=[10, 20], cluster_size=10, icc=0.1, sd=0.5)
    args.update(kw)
    with pytest.raises(EvalmixError, match=needle):
        evalmix.power(args.pop("effect"), **args)


def test_parametric_power_refuses_negative_sd():
    from evalmix.plan.pilot import parametric_power

    with pytest.raises(EvalmixError, match=r"standard deviations.*'scenario': -0.8"):
        parametric_power({"scenario": -0.8}, n_levels={"scenario": 10}, reps=20, seed=1)


def test_coverage_plot_survives_failed_and_single_cells(tmp_path):
    from evalmix.plan.plots import plot_coverage

    base = pd.DataFrame({"n_clusters": [5, 5], "icc": [0.1, 0.1], "method": ["CR2", "naive"],
                         "coverage": [1.0, 0.9], "mcse": [0.0, 0.03], "level": 0.95,
                         "mean_width": [0.0, 0.1]})
    for name, table in {"single": base,  # one K: a log axis would have zero width
                        "failed": base.assign(coverage=np.nan, mcse=np.nan),
                        "zero_k": base.assign(n_clusters=0)}.items():
        path = plot_coverage(table, tmp_path / f"{name}.png")
        assert path.stat().st_size > 1000


@pytest.mark.parametrize("cell, needle", [
    ({"size_cv": -1.0}, "size_cv >= 0"),
    ({"size_cv": float("nan")}, "size_cv >= 0"),
    ({"icc": float("nan")}, "icc in [0, 1)"),
    ({"n_clusters": float("nan")}, "n_clusters >= 2"),
])
def test_coverage_grid_refuses_negative_and_nan_cells(cell, needle):
    from evalmix.plan import coverage

    with pytest.raises(EvalmixError, match=needle.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        coverage(["naive"], [{"n_clusters": 5, "cluster_size": 2, **cell}], reps=10,
                 progress=False)
