"""evalmix.bootstrap: any statistic, the built-in bootstrap's draws, strata, crossed factors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.errors import (
    EvalmixError,
    FewClustersWarning,
    InvalidOptionError,
    InvalidTableError,
    TooFewClustersError,
)
from evalmix.inference.bootstrap import cluster_bootstrap
from evalmix.inference.custom import COPY_COLUMN
from evalmix.inference.sums import Sums, expression

# the fast path and a Python function add the same numbers in another order
SUM_ORDER_RTOL = 1e-12


def _scores(g: int = 24, seed: int = 3) -> evalmix.EvalTable:
    return evalmix.sim.clustered_scores(g, np.arange(g) % 5 + 2, p=0.4, icc=0.2,
                                        seed=seed).table()


def _flags(g: int = 30, seed: int = 0) -> pd.DataFrame:
    """Red flags of two conditions on items in scenarios (each item under both)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 6, size=g)
    scen = np.repeat(np.arange(g), sizes)
    item = np.arange(scen.size)
    frame = pd.DataFrame({"scenario": np.repeat(scen, 2), "item": np.repeat(item, 2),
                          "condition": np.tile(["A", "B"], scen.size)})
    u = rng.normal(0, 0.8, g)[frame["scenario"]]
    p = 1 / (1 + np.exp(-(-1.2 + 0.5 * (frame["condition"] == "B") + u)))
    frame["red_flag"] = (rng.random(len(frame)) < p).astype(int)
    frame["score"] = rng.normal(size=len(frame)) + u
    frame["category"] = np.where(frame["scenario"] % 3 == 0, "x", "y")
    return frame


def test_custom_mean_reproduces_the_builtin_draws():
    t = _scores()
    codes = t.codes("cluster")
    ref = cluster_bootstrap(np.ones((t.n_obs, 1)), t.y, codes, reps=999, seed=11)
    fast = evalmix.bootstrap(t, "mean(y)", cluster="cluster", reps=999, seed=11,
                             progress=False)
    slow = evalmix.bootstrap(t, lambda d: d["y"].mean(), cluster="cluster", reps=999,
                             seed=11, progress=False)
    np.testing.assert_array_equal(fast.draws[:, 0], ref.draws)  # same sums, same order
    np.testing.assert_allclose(slow.draws[:, 0], ref.draws, rtol=SUM_ORDER_RTOL)
    assert (fast.lo[0], fast.hi[0], fast.se[0]) == (ref.lo, ref.hi, ref.se)
    via_api = evalmix.interval(t, "mean", method="bootstrap", cluster="cluster", reps=999,
                               seed=11)
    assert via_api.lo == pytest.approx(slow.lo[0], rel=1e-12)
    assert fast.seed == 11 and fast.cluster == "cluster" and fast.n_clusters == 24


def test_custom_paired_difference_reproduces_the_builtin_bootstrap():
    frame = _flags()
    t = evalmix.read(frame, outcome="score", condition="condition",
                     clusters={"scenario": "scenario", "item": "item"})

    def paired(d: pd.DataFrame) -> float:
        unit = d.groupby(["scenario", "item", COPY_COLUMN, "condition"])["y"].mean()
        wide = unit.unstack("condition")
        return float((wide["B"] - wide["A"]).mean())

    ref = evalmix.interval(t, "difference", method="bootstrap", cluster="scenario",
                           reps=150, seed=5)
    assert ref.paired
    got = evalmix.bootstrap(t, paired, cluster="scenario", reps=150, seed=5, progress=False)
    assert got.estimate[0] == pytest.approx(ref.estimate, rel=1e-12)
    assert (got.lo[0], got.hi[0], got.se[0]) == pytest.approx((ref.lo, ref.hi, ref.se),
                                                               rel=1e-10)


@pytest.mark.parametrize("cluster,strata", [("scenario", None), ("scenario", "category"),
                                            (["scenario", "item"], None),
                                            ("scenario:category", None)])
def test_fast_path_equals_the_function_of_the_resample(cluster, strata):
    frame = _flags()
    if isinstance(cluster, list):  # two crossed factors: items shared by scenarios
        frame = frame.assign(item=frame["item"] % 21)
    text = 'mean(red_flag, condition == "B") / mean(red_flag, condition == "A")'

    def ratio(d: pd.DataFrame) -> float:
        by = d.groupby("condition")["red_flag"].mean()
        return float(by["B"] / by["A"])

    ci = "percentile" if isinstance(cluster, list) else "bca"  # BCa: one factor only
    kw = dict(cluster=cluster, strata=strata, reps=200, seed=9, ci=ci, progress=False,
              crossed="pigeonhole")
    fast = evalmix.bootstrap(frame, text, **kw)
    slow = evalmix.bootstrap(frame, ratio, **kw)
    assert fast.details["fast_path"] and not slow.details["fast_path"]
    np.testing.assert_allclose(fast.draws, slow.draws, rtol=1e-10)
    np.testing.assert_allclose([fast.lo, fast.hi], [slow.lo, slow.hi], rtol=1e-10)
    assert fast.estimate[0] == pytest.approx(ratio(frame))


def test_strata_keep_their_number_of_clusters_and_pairs_stay_together():
    frame = _flags()
    n_x = frame.loc[frame["category"] == "x", "scenario"].nunique()

    def drawn_in_x(d: pd.DataFrame) -> float:
        return float(d.loc[d["category"] == "x", COPY_COLUMN].nunique())

    r = evalmix.bootstrap(frame, drawn_in_x, cluster="scenario", strata="category",
                          reps=50, seed=1, progress=False)
    assert np.all(r.draws == n_x)
    free = evalmix.bootstrap(frame, drawn_in_x, cluster="scenario", strata=[], reps=50,
                             seed=1, progress=False)
    assert free.draws.std() > 0
    # the AB and BA records of a comparison are one resampling unit by default
    sim = evalmix.sim.pairwise_judges(8, 2, 2, 2, seed=4)
    t = evalmix.read(sim.data, **sim.read_kwargs)

    def pair_sizes(d: pd.DataFrame) -> pd.Series:
        size = d.groupby(["pair_id", COPY_COLUMN]).size()
        return pd.Series({"min": size.min(), "max": size.max()})

    with pytest.warns(FewClustersWarning):  # 8 scenarios
        evalmix.bootstrap(t, "mean(y)", cluster="scenario", reps=20, seed=0, progress=False)
    p = evalmix.bootstrap(t, pair_sizes, reps=20, seed=0, progress=False)
    assert p.details["unit"] == "pair" and np.all(p.draws == 2)


def test_pigeonhole_repeats_a_row_by_both_draw_counts():
    frame = _flags().assign(item=lambda d: d["item"] % 20)
    rng_rows = evalmix.bootstrap(frame, lambda d: float(len(d)),
                                 cluster=["scenario", "item"], reps=300, seed=2,
                                 progress=False, crossed="pigeonhole")
    assert rng_rows.details["resampling"] == "pigeonhole"
    # E[n_a * n_b] = 1 for each row: the resample has n rows on average
    assert rng_rows.draws.mean() == pytest.approx(len(frame), rel=0.05)
    with pytest.raises(InvalidOptionError, match="crossed"):
        evalmix.bootstrap(frame, "mean(score)", cluster=["scenario", "item"], ci="bca",
                          reps=20, progress=False)


def test_multiway_variance_combines_three_one_way_bootstraps():
    frame = _flags().assign(item=lambda d: d["item"] % 20)
    kw = dict(reps=300, seed=4, progress=False)
    both = evalmix.bootstrap(frame, "mean(score)", cluster=["scenario", "item"], **kw)
    assert both.details["resampling"] == "multiway" and both.ci_type == "multiway-t"
    v = both.details["variance_by_factor"]
    assert set(v) == {"scenario", "item", "scenario:item"}
    # the first factor's bootstrap is the one-way bootstrap with the same seed; the
    # others continue the stream, so they agree with a one-way run within Monte Carlo error
    for u in ("scenario", "item", "scenario:item"):
        r = evalmix.bootstrap(frame, "mean(score)", cluster=u, **kw)
        assert v[u][0] == pytest.approx(r.se[0] ** 2, rel=1e-12 if u == "scenario" else 0.3)
    expect = v["scenario"] + v["item"] - v["scenario:item"]
    expect = np.maximum(expect, max(v["scenario"], v["item"]))
    assert both.se[0] == pytest.approx(float(np.sqrt(expect[0])), rel=1e-12)
    from scipy import stats

    q = stats.t.ppf(0.975, 19)  # min(G) - 1: 20 items
    assert both.hi[0] - both.estimate[0] == pytest.approx(q * both.se[0], rel=1e-12)


def test_named_vector_and_studentized_mean_equals_builtin():
    t = _scores()
    ref = cluster_bootstrap(np.ones((t.n_obs, 1)), t.y, t.codes("cluster"), reps=499,
                            seed=4, ci="studentized")
    got = evalmix.bootstrap(t, "m = mean(y)\nn = count()", cluster="cluster", reps=499,
                            seed=4, ci="studentized", progress=False)
    assert got.names == ("m", "n")
    # the delta-method SE of a ratio of sums is CR1 for a mean (k = 1)
    assert got.details["se_delta"][0] == pytest.approx(ref.se_cr1, rel=1e-6)
    assert (got.lo[0], got.hi[0]) == pytest.approx((ref.lo, ref.hi), rel=1e-6)
    rows = got.tidy()
    assert list(rows["contrast"]) == ["m", "n"] and set(rows["method"]) == {"bootstrap"}

    def by_cluster(d: pd.DataFrame) -> pd.Series:
        return d.groupby("cluster")["y"].mean().head(3)

    vec = evalmix.bootstrap(t, by_cluster, cluster="cluster", reps=30, seed=1,
                            progress=False)
    assert len(vec.names) == 3 and vec.n_failed.sum() > 0  # a cluster not drawn: NaN


def test_bca_runs_and_few_clusters_are_refused():
    t = _scores()
    r = evalmix.bootstrap(t, "mean(y)", cluster="cluster", reps=499, seed=3, ci="bca",
                          progress=False)
    assert np.isfinite(r.details["acceleration"][0]) and r.lo[0] < r.hi[0]
    small = _scores(4)
    with pytest.raises(TooFewClustersError):
        evalmix.bootstrap(small, "mean(y)", cluster="cluster", reps=20, progress=False)


@pytest.mark.parametrize("text", [
    '__import__("os").system("true")', "mean(y).real", "mean(y) ** 2", "lambda: 1",
    "mean(y, open('x'))", "import os", "mean(y, y == z)", "[mean(y)]"])
def test_expressions_are_whitelisted(text):
    with pytest.raises(InvalidOptionError, match="expression"):
        expression(text)


def test_expression_errors_name_the_column():
    frame = pd.DataFrame({"flag": ["yes", "no"], "g": [1, 2]})
    with pytest.raises(InvalidTableError, match="'missing'"):
        expression("mean(missing)").evaluate(frame)
    with pytest.raises(InvalidTableError, match="non-numeric.*'yes'"):
        expression("mean(flag)").evaluate(frame)
    assert expression("mean(g, flag in ('yes',))").evaluate(frame)[0] == 1.0


def test_a_failing_statistic_is_reported_with_its_cause():
    t = _scores()

    def boom(d: pd.DataFrame) -> float:
        raise KeyError("rubric")

    with pytest.raises(EvalmixError, match="KeyError") as info:
        evalmix.bootstrap(t, boom, cluster="cluster", reps=10, progress=False)
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(InvalidOptionError, match="studentized"):
        evalmix.bootstrap(t, lambda d: d["y"].mean(), cluster="cluster", reps=10,
                          ci="studentized", progress=False)
    s = Sums(lambda d: d[["y"]].to_numpy(), lambda T: T[..., 0], names=("a", "b"))
    with pytest.raises(InvalidOptionError, match="names"):
        evalmix.bootstrap(t, s, cluster="cluster", reps=10, progress=False)


REF = REFERENCE / "bootstrap"
#: boot's values went through write_json(digits = NA) (15 significant digits); the
#: statistic is the same ratio computed from cluster sums (Python) and weighted row means (R)
R_RTOL = 1e-12


@pytest.mark.parametrize("case,seed,strata", [("plain", 20261208, None),
                                              ("strata", 20261209, "stratum")])
def test_ratio_bca_equals_r_boot_on_the_same_resamples(case, seed, strata):
    ref = json.loads((REF / "custom_reference.json").read_text())[case]
    frame = pd.read_csv(REF / "custom_data.csv")
    stat = 'mean(red_flag, condition == "B") / mean(red_flag, condition == "A")'
    kw = dict(cluster="scenario", strata=strata, reps=999, seed=seed, progress=False)
    with pytest.warns(FewClustersWarning):  # 16 clusters
        bca = evalmix.bootstrap(frame, stat, ci="bca", **kw)
        perc = evalmix.bootstrap(frame, stat, **kw)
    np.testing.assert_allclose(bca.draws[:5, 0], ref["draws_head"], rtol=R_RTOL)
    assert bca.estimate[0] == pytest.approx(ref["t0"], rel=R_RTOL)
    assert bca.se[0] == pytest.approx(ref["sd"], rel=1e-10)
    assert bca.details["acceleration"][0] == pytest.approx(ref["acceleration"], rel=1e-9)
    assert (bca.lo[0], bca.hi[0]) == pytest.approx(tuple(ref["bca"]), rel=1e-10)
    assert (perc.lo[0], perc.hi[0]) == pytest.approx(tuple(ref["perc"]), rel=1e-10)
    if case == "plain":  # a Python function of the rows draws R's first resamples too
        def ratio(d: pd.DataFrame) -> float:
            m = d.groupby("condition")["red_flag"].mean()
            return float(m["B"] / m["A"])

        with pytest.warns(FewClustersWarning):
            head = evalmix.bootstrap(frame, ratio, **{**kw, "reps": 5})
        np.testing.assert_allclose(head.draws[:, 0], ref["draws_head"], rtol=R_RTOL)


def test_progress_counts_replicates_and_permutation_assignments(monkeypatch):
    import io

    from rich.console import Console

    import evalmix.inference.custom as custom_mod
    import evalmix.inference.permutation as perm_mod
    from evalmix._progress import Progress

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=110)
    for mod in (custom_mod, perm_mod):
        monkeypatch.setattr(mod, "Progress", lambda enabled: Progress(enabled, console=console))
    t = _scores()
    evalmix.bootstrap(t, lambda d: d["y"].mean(), cluster="cluster", reps=30, seed=1,
                      name="m")
    evalmix.permutation_test(_flags(8), cluster="scenario", outcome="score")
    text = buf.getvalue()
    assert "30/30" in next(x for x in text.splitlines() if "bootstrap m" in x)
    assert "256/256" in next(x for x in text.splitlines() if "permutation difference" in x)


def test_delta_method_se_is_the_totals_delta_method():
    from evalmix.inference.sandwich import cluster_sums
    from evalmix.inference.totals import totals_delta

    frame = _flags()
    stat = expression('mean(red_flag, condition == "B") / mean(red_flag, condition == "A")')
    r = evalmix.bootstrap(frame, stat, cluster="scenario", ci="studentized", reps=20,
                          seed=1, progress=False)
    S = cluster_sums(stat.values(frame), frame["scenario"].to_numpy(), 30)
    ref = totals_delta(S, lambda t: stat.combine(t)[..., 0], clustered=True)
    assert r.details["se_delta"][0] == pytest.approx(ref.se, rel=1e-7)


def test_three_crossed_factors_use_inclusion_exclusion():
    sim = evalmix.sim.pairwise_judges(12, 5, 6, 2, seed=2)
    t = evalmix.read(sim.data, **sim.read_kwargs)
    r = evalmix.bootstrap(t, "mean(y)", cluster=["scenario", "persona", "author"],
                          reps=100, seed=3, progress=False)
    v = r.details["variance_by_factor"]
    assert len(v) == 7
    sign = {u: (-1) ** (u.count(":")) for u in v}  # one factor +, two -, three +
    expect = sum(sign[u] * v[u] for u in v)
    expect = np.maximum(expect, max(v["scenario"], v["persona"], v["author"]))
    assert r.se[0] ** 2 == pytest.approx(float(expect[0]), rel=1e-12)
    assert r.n_clusters == 5 and r.details["df"] == 4
    with pytest.raises(InvalidOptionError, match="two crossed factors"):
        evalmix.bootstrap(t, "mean(y)", cluster=["scenario", "persona", "author"],
                          crossed="pigeonhole", reps=10, progress=False)
