"""Issue 36 item 3: no option is accepted and ignored.

Every option of ``interval`` is either read by the estimand / method asked for or refused
with the way to say what was meant; counts go through the one ``errors.check_count``
(``reps="99"``, ``99.5`` and ``True`` refused; the wild bootstrap's minimum is the
cluster bootstrap's); a pandas DataFrame where an EvalTable is expected is refused with a
message naming ``evalmix.read``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference.api import METHOD_OPTIONS
from evalmix.inference.estimands import PROBLEM_DEFAULTS, USED_OPTIONS


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(5)
    n_items = 30
    rows = []
    for item in range(n_items):
        for model, p in (("m1", 0.5), ("m2", 0.7)):
            for rep in range(2):
                rows.append({"item": f"q{item}", "model": model, "run": rep,
                             "correct": int(rng.random() < p)})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def table(frame):
    return evalmix.read(frame, outcome="correct", condition="model",
                        clusters={"item": "item"})


@pytest.mark.parametrize("option", [{"conditions": ["m1"]}, {"model": "m1"}])
def test_the_mean_of_one_model_is_asked_with_contrast(table, frame, option):
    """The issue's case: these once returned the pooled mean of every model."""
    with pytest.raises(InvalidOptionError, match=r"contrast='m1'"):
        evalmix.interval(table, "mean", method="CR2", cluster="item", **option)
    r = evalmix.interval(table, "mean", method="CR2", cluster="item", contrast="m1")
    assert r.estimate == pytest.approx(frame.loc[frame["model"] == "m1", "correct"].mean())
    pooled = evalmix.interval(table, "mean", method="CR2", cluster="item")
    assert r.estimate != pytest.approx(pooled.estimate)


def test_every_estimand_option_is_used_or_refused(table):
    """For each estimand, each option it does not read (at a non-default value) is
    refused; the options it reads are accepted (or refused for their value, never for
    being there)."""
    values = {"contrast": "m1", "model": "m1", "conditions": ("m1", "m2"),
              "term": "condition[m2]", "family": "binomial", "paired": False}
    assert set(values) == set(PROBLEM_DEFAULTS)
    for estimand, used in USED_OPTIONS.items():
        for name, value in values.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    evalmix.interval(table, estimand, method="CR2", cluster="item",
                                     **{name: value})
            except EvalmixError as exc:
                refused = f"does not use {name}=" in str(exc)
            else:
                refused = False
            assert refused == (name not in used), (estimand, name)


@pytest.mark.parametrize("method", ["naive", "wilson", "CR1", "CR2", "bootstrap", "wild"])
def test_every_resampling_option_is_used_or_refused(table, method):
    values = {"reps": 99, "seed": 1, "ci": "bca", "weights": "webb", "nested": "item"}
    cluster = None if method in ("naive", "wilson") else "item"
    for name, value in values.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                evalmix.interval(table, "mean", method=method, cluster=cluster,
                                 **{name: value})
        except EvalmixError as exc:
            refused = f"does not use {name}=" in str(exc)
        else:
            refused = False
        assert refused == (name not in METHOD_OPTIONS.get(method, ())), (method, name)


def test_problem_given_with_estimand_options_is_refused(table):
    from evalmix.inference.estimands import build_problem

    problem = build_problem(table, "mean", contrast="m2")
    with pytest.raises(InvalidOptionError, match="problem= already fixes"):
        evalmix.interval(table, "mean", method="CR2", cluster="item", problem=problem,
                         contrast="m1")


@pytest.mark.parametrize("method", ["bootstrap", "wild"])
@pytest.mark.parametrize("reps", ["99", 99.5, 2.0, True, 1, 0, -5])
def test_counts_are_integers_at_least_the_minimum(table, method, reps):
    with pytest.raises(InvalidOptionError, match="reps must be"):
        evalmix.interval(table, "mean", method=method, cluster="item", reps=reps, seed=1)


def test_the_wild_and_cluster_bootstrap_share_the_minimum(table):
    """reps=1 was accepted by the wild bootstrap (an interval from one draw) and refused
    by the cluster bootstrap; both refuse it now, and both take 2."""
    for method in ("bootstrap", "wild"):
        with pytest.raises(InvalidOptionError, match="reps must be at least 2, got 1"):
            evalmix.interval(table, "mean", method=method, cluster="item", reps=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = evalmix.interval(table, "mean", method=method, cluster="item", reps=2,
                                 seed=1)
        assert r.reps == 2 or method == "wild"


@pytest.mark.parametrize("reps", ["99", 99.5, True, 1])
def test_analyze_and_compare_all_refuse_bad_counts(table, reps):
    with pytest.raises(InvalidOptionError, match="reps must be"):
        evalmix.analyze(table, fast=True, reps=reps, progress=False)
    with pytest.raises(InvalidOptionError, match="reps must be"):
        evalmix.compare_all(table, cluster="item", reps=reps)


def test_the_cli_refuses_reps_1(frame, tmp_path):
    from evalmix.cli import main

    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    assert main(["report", str(data), "--outcome", "correct", "--condition", "model",
                 "--cluster", "item=item", "--fast", "--reps", "1", "--quiet",
                 "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("call", [
    lambda df: evalmix.analyze(df, fast=True, progress=False),
    lambda df: evalmix.interval(df, "mean"),
    lambda df: evalmix.design_effect(df),
    lambda df: evalmix.fit(df),
    lambda df: evalmix.compare_all(df),
    lambda df: evalmix.leaderboard(df),
])
def test_a_dataframe_is_refused_with_the_way_to_read_it(frame, call):
    with pytest.raises(EvalmixError, match=r"not a pandas DataFrame.*evalmix\.read\(df"):
        call(frame)


# ------------------------------------------------------------------ messages (item 6)
def _scaled(frame, factor):
    rng = np.random.default_rng(2)
    item_effect = {f"q{i}": rng.normal() for i in range(30)}
    y = np.array([item_effect[q] for q in frame["item"]]) + rng.normal(size=len(frame))
    return evalmix.read(frame.assign(score=y * factor), outcome="score",
                        clusters={"item": "item"}), y


def test_tiny_scores_that_underflow_are_named_as_such(frame):
    """Scores scaled to 1e-170 vary; the old message said they did not."""
    table, _ = _scaled(frame, 1e-170)
    with pytest.warns(evalmix.NotEstimableWarning, match="underflow"):
        r = evalmix.interval(table, "mean", method="CR2", cluster="item")
    assert "underflow" in r.note and "1e" in r.note and "does not vary" not in r.note


def test_small_scores_get_their_interval(frame):
    """Scores of size 1e-12 are not "zero standard error": the interval is the unscaled
    one times 1e-12 (scale equivariance of the mean and its CR2 SE)."""
    small, _ = _scaled(frame, 1e-12)
    unit, _ = _scaled(frame, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", evalmix.NotEstimableWarning)
        r = evalmix.interval(small, "mean", method="CR2", cluster="item")
    u = evalmix.interval(unit, "mean", method="CR2", cluster="item")
    assert r.note == "" or "zero" not in r.note
    for a in ("estimate", "se", "lo", "hi"):
        assert getattr(r, a) == pytest.approx(getattr(u, a) * 1e-12, rel=1e-9)
