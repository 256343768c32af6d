"""Wilson and Clopper-Pearson intervals, defined at a proportion of 0 and 1.

References: statsmodels ``proportion_confint`` (methods "wilson" and "beta") and the
closed forms at the boundary: Wilson's lower bound at k = n is n / (n + z^2), the
Clopper-Pearson one is (alpha/2)^(1/n); the two-sided exact binomial p-value of k = n
against 1/2 is 2 * 0.5^n, the score test's z is sqrt(n).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

import evalmix
from evalmix.inference.naive import clopper_pearson_interval, wilson_interval

TOL = 1e-10


@pytest.mark.parametrize("k", [0, 1, 17, 39, 40])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_wilson_and_clopper_pearson_match_statsmodels(k, level):
    n = 40
    for ours, method in ((wilson_interval, "wilson"), (clopper_pearson_interval, "beta")):
        lo, hi = ours(k / n, n, level)
        ref = proportion_confint(k, n, alpha=1 - level, method=method)
        assert lo == pytest.approx(ref[0], abs=TOL) and hi == pytest.approx(ref[1], abs=TOL)


def test_closed_forms_at_one():
    z = stats.norm.ppf(0.975)
    assert wilson_interval(1.0, 40) == (pytest.approx(40 / (40 + z**2), abs=TOL), 1.0)
    assert wilson_interval(0.0, 40) == (0.0, pytest.approx(z**2 / (40 + z**2), abs=TOL))
    assert clopper_pearson_interval(1.0, 40) == (pytest.approx(0.025 ** (1 / 40), abs=TOL),
                                                 1.0)
    assert round(wilson_interval(1.0, 40)[0], 3) == 0.912


def _all_correct(n=40, value=1):
    df = pd.DataFrame({"y": [value] * n, "item": [f"i{i}" for i in range(n)]})
    return evalmix.read(df, outcome="y", clusters={"item": "item"})


@pytest.mark.parametrize("value", [0, 1])
def test_interval_is_defined_at_zero_and_one_with_a_note(value):
    t = _all_correct(value=value)
    w = evalmix.interval(t, "mean", method="wilson")
    cp = evalmix.interval(t, "mean", method="clopper_pearson")
    for r, method in ((w, "wilson"), (cp, "beta")):
        ref = proportion_confint(40 * value, 40, method=method)
        assert (r.lo, r.hi) == (pytest.approx(ref[0], abs=TOL), pytest.approx(ref[1], abs=TOL))
        assert f"every outcome is {value} (40 of 40)" in r.note
    # the tests each interval inverts: score z = sqrt(n); exact two-sided 2 * 0.5^n
    assert w.p_value == pytest.approx(2 * stats.norm.sf(np.sqrt(40)), rel=1e-9)
    assert cp.p_value == pytest.approx(2 * 0.5**40, rel=1e-9)
    with pytest.warns(evalmix.errors.NotEstimableWarning, match="clopper_pearson"):
        r = evalmix.interval(t, "mean", method="CR2", cluster="item")
    assert np.isnan(r.lo) and np.isnan(r.hi)


def test_wilson_pvalue_agrees_with_its_interval():
    t = evalmix.read(pd.DataFrame({"y": [1] * 27 + [0] * 13}), outcome="y")
    r = evalmix.interval(t, "mean", method="wilson")
    z = (27 / 40 - 0.5) / np.sqrt(0.25 / 40)
    assert r.p_value == pytest.approx(2 * stats.norm.sf(z), rel=1e-12)
    assert (r.p_value < 0.05) == (r.lo > 0.5)


def test_one_model_winning_every_comparison_gets_a_wilson_row():
    rows = [{"q": f"i{i}", "j": j, "a": "base", "b": "new", "win": "b"}
            for i in range(20) for j in ("j1", "j2")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = evalmix.read(pd.DataFrame(rows), outcome="win", model_a="a", model_b="b",
                         clusters={"item": "q", "judge": "j"})
        rep = evalmix.analyze(t, fast=True, reps=99, seed=1, progress=False)
    iv = rep.intervals.set_index(["method", "cluster"])
    wilson = iv.loc[("wilson", "")]
    assert (wilson["lo"], wilson["hi"]) == (pytest.approx(40 / (40 + stats.norm.ppf(0.975)**2)),
                                            1.0)
    assert bool(wilson["decision"]) and "40 of 40" in wilson["note"]
    assert np.isnan(iv.loc[("CR2", "item"), "lo"])   # clustered rows: not estimable
