"""One family vocabulary (evalmix.families) at every public entry point."""

import numpy as np
import pytest

import evalmix
from evalmix.errors import InvalidOptionError
from evalmix.families import FAMILIES, REGRESSION_FAMILIES, family_name
from evalmix.inference.bootstrap import cluster_bootstrap
from evalmix.inference.estimands import build_problem, fit_problem
from evalmix.models.spec import FAMILIES as MODEL_FAMILIES
from evalmix.models.spec import build_spec
from evalmix.sim import pairwise_judges


@pytest.fixture(scope="module")
def pairwise():
    return pairwise_judges(8, 2, 2, 2, tie_threshold=0.0, seed=3).table()


def test_one_vocabulary():
    assert MODEL_FAMILIES is FAMILIES
    assert set(REGRESSION_FAMILIES) <= set(FAMILIES)


@pytest.mark.parametrize(("old", "new"), [("linear", "gaussian"), ("logit", "binomial")])
def test_old_regression_names_warn_and_give_the_same_fit(pairwise, old, new):
    ref = fit_problem(build_problem(pairwise, "coef", term="position", family=new)).beta
    with pytest.warns(FutureWarning, match=f"family='{old}' is now spelled family='{new}'"):
        p = build_problem(pairwise, "coef", term="position", family=old)
    assert p.family == new
    np.testing.assert_array_equal(fit_problem(p).beta, ref)


@pytest.mark.filterwarnings("ignore::evalmix.errors.FewClustersWarning")
def test_bootstrap_records_the_canonical_name(pairwise):
    p = build_problem(pairwise, "coef", term="position", family="binomial")
    codes = pairwise.codes("scenario")
    with pytest.warns(FutureWarning):
        old = cluster_bootstrap(p.X, p.y, codes, target=p.target, family="logit", reps=20,
                                seed=1)
    new = cluster_bootstrap(p.X, p.y, codes, target=p.target, family="binomial", reps=20,
                            seed=1)
    assert old.family == new.family == "binomial"
    assert old.estimate == new.estimate and old.lo == new.lo
    assert new.tidy()["scale"].iloc[0] == "log-odds"


def test_unknown_family_names_the_choices(pairwise):
    with pytest.raises(InvalidOptionError, match=r"family='poisson'.*'gaussian', 'binomial'"):
        evalmix.interval(pairwise, "coef", family="poisson", cluster="scenario")
    with pytest.raises(InvalidOptionError, match=r"family='poisson'.*'cumulative' \(or 'ordinal'"):
        build_spec(pairwise, family="poisson")
    assert family_name("ordinal") == "cumulative"


def test_ordinal_and_cumulative_build_the_same_spec():
    rng = np.random.default_rng(0)
    import pandas as pd
    df = pd.DataFrame({"item": np.repeat([f"q{i}" for i in range(30)], 2),
                       "model": ["a", "b"] * 30, "score": rng.integers(1, 6, 60)})
    t = evalmix.read(df, outcome="score", condition="model", clusters={"item": "item"})
    a, b = build_spec(t, family="ordinal"), build_spec(t, family="cumulative")
    assert a.family == b.family == "cumulative" and a.categories == b.categories
    np.testing.assert_array_equal(a.y, b.y)


def test_a_family_the_table_implies_is_accepted_and_another_refused(pairwise):
    """fit(family="binomial") on 0/1 verdicts is the model fit(family=None) builds (the
    fitted family is binomial with one trial); a family that does not fit is refused."""
    implied = build_spec(pairwise)
    assert implied.family == "bernoulli"
    for name in ("bernoulli", "binomial"):
        spec = build_spec(pairwise, family=name)
        assert spec.family == implied.family and spec.formula == implied.formula
        np.testing.assert_array_equal(spec.y, implied.y)
    with pytest.raises(InvalidOptionError, match=r"family='gaussian' does not fit .*'bernoulli'"):
        build_spec(pairwise, family="gaussian")
