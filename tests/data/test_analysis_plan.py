"""Analysis plans (issue 31, item 2): parse errors, checks against a table, the report.

References for the numbers: a plan's primary row is the report's own interval row at
the cluster level and method the plan fixes (the same numbers, by identity); the hash is
``hashlib.sha256`` of the file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.cli import main
from evalmix.data.analysis_plan import PLAN_EXAMPLE, read_plan
from evalmix.errors import InvalidOptionError, InvalidTableError
from evalmix.report.planned import EXPLORATORY, PRIMARY, REPLACED, resolve_plan
from evalmix.sim import pairwise_judges

#: persona has 3 levels, scenario 10: a plan clustering by persona with min_clusters 5
#: falls back to scenario.
FEW = """\
title = "few personas"
ties = "half"
judges = "pooled"

[primary]
estimand = "win_rate"
contrast = "treatment vs reference"
cluster = "persona"

[fallback]
min_clusters = 5
cluster = "scenario"

[sensitivity]
clusters = ["author"]

[interval]
method = "CR2"
reps = 99
"""


def _write(tmp_path: Path, text: str, name: str = "plan.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def sim():
    return pairwise_judges(10, 3, 2, 2, seed=1)


@pytest.fixture(scope="module")
def table(sim):
    return sim.table()


@pytest.fixture(scope="module")
def planned_report(table, tmp_path_factory):
    path = _write(tmp_path_factory.mktemp("plan"), FEW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=199, seed=3, progress=False,
                              plan=read_plan(path))
    return rep, path


# ------------------------------------------------------------------------ reading
def test_example_plan_reads_and_hashes_the_file_bytes(tmp_path):
    path = _write(tmp_path, PLAN_EXAMPLE)
    plan = evalmix.read_plan(path)
    assert plan.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (plan.estimand, plan.cluster, plan.min_clusters) == ("win_rate", "item", 20)
    assert (plan.fallback_method, plan.fallback_cluster) == ("wild", None)
    assert plan.sensitivity == ("judge",) and (plan.method, plan.reps) == ("CR2", 2000)
    assert (plan.ties, plan.judges, plan.level) == ("half", "pooled", 0.95)
    assert set(plan.items()) >= {"primary_estimand", "primary_cluster", "fallback",
                                 "sensitivity_clusters", "interval_method", "reps", "ties",
                                 "judges"}
    # one byte more (a comment) is another plan
    path.write_text(PLAN_EXAMPLE + "# edited\n")
    assert evalmix.read_plan(path).sha256 != plan.sha256


@pytest.mark.parametrize("edit, needles", [
    (lambda s: s.replace('estimand = "win_rate"', 'estimand = "accuracy"'),
     ["[primary] estimand", "'accuracy'", "'win_rate'"]),
    (lambda s: s.replace('ties = "half"', 'ties = "ignore"'), ["ties", "'ignore'", "'half'"]),
    (lambda s: s.replace('judges = "pooled"', 'judges = "mixed"'),
     ["judges", "'mixed'", "'per_judge'"]),
    (lambda s: s.replace("reps = 2000", "reps = 1.5"), ["[interval] reps", "1.5", "2000"]),
    (lambda s: s.replace("min_clusters = 20", "min_clusters = 1"),
     ["[fallback] min_clusters", "= 1", ">= 2"]),
    (lambda s: s.replace('method = "wild"                #    and/or cluster = "..."', ""),
     ["[fallback]", "cluster =", "method ="]),
    (lambda s: s.replace('clusters = ["judge"]', 'clusters = "judge"'),
     ["[sensitivity] clusters", "'judge'", "list"]),
    (lambda s: s.replace("reps = 2000", "reps = 2000\nlevel = 95"),
     ["[interval] level", "95", "between 0 and 1"]),
    (lambda s: s.replace('cluster = "item"', 'cluster = 3'),
     ["[primary] cluster", "3", "role name"]),
    (lambda s: s.replace('cluster = "item"', 'cluster = "item++judge"'),
     ["[primary] cluster", "item++judge", "empty part"]),
    (lambda s: s.replace("reps = 2000", "reps = 2000\nrepz = 5"),
     ["unknown key", "[interval] repz", "method, reps, level"]),
    (lambda s: s.replace('judges = "pooled"', 'judges = "pooled"\nclusterz = 1'),
     ["unknown key", "clusterz"]),
    (lambda s: s.replace('ties = "half"', ""), ["missing ties", "item 7", 'ties = "half"']),
    (lambda s: s.replace("reps = 2000", ""), ["missing [interval] reps", "item 6"]),
    (lambda s: s.replace('[sensitivity]\nclusters = ["judge"]           # 4. sensitivity '
                         'cluster levels', ""),
     ["missing [sensitivity] clusters", "item 4"]),
    (lambda s: s + "[primary\n", ["not valid TOML"]),
])
def test_bad_plans_name_file_key_value_and_fix(tmp_path, edit, needles):
    text = edit(PLAN_EXAMPLE)
    assert text != PLAN_EXAMPLE  # the edit applied
    path = _write(tmp_path, text)
    with pytest.raises(InvalidOptionError) as err:
        read_plan(path)
    message = str(err.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_missing_plan_file(tmp_path):
    with pytest.raises(InvalidOptionError, match="does not exist"):
        read_plan(tmp_path / "nope.toml")


# ------------------------------------------------------------- checks against a table
@pytest.mark.parametrize("edit, needles", [
    (lambda s: s.replace('cluster = "persona"', 'cluster = "prompt"'),
     ["[primary] cluster = 'prompt'", "not a cluster role", "'scenario'",
      "--cluster prompt=COLUMN"]),
    (lambda s: s.replace('clusters = ["author"]', 'clusters = ["author", "judge+pilot"]'),
     ["[sensitivity] clusters[1] = 'judge+pilot'", "'pilot'"]),
    (lambda s: s.replace('estimand = "win_rate"', 'estimand = "mean"'),
     ["[primary] estimand = 'mean'", "pairwise"]),
    (lambda s: s.replace('ties = "half"', 'ties = "exclude"'),
     ["ties = 'exclude'", "read with ties 'half'", "--ties exclude"]),
    (lambda s: s.replace('method = "CR2"', 'method = "CR9"'),
     ["[interval] method = 'CR9'", "CR1, CR2"]),
    (lambda s: s.replace('cluster = "persona"', 'cluster = "persona+scenario"')
     .replace('method = "CR2"', 'method = "wild"'),
     ["[interval] method = 'wild'", "multiway", "use CR1 or CR2"]),
    (lambda s: s.replace('method = "CR2"', 'method = "naive"'),
     ["'naive' treats rows as independent", "'persona'"]),
    (lambda s: s.replace('"treatment vs reference"', '"gpt-4 vs reference"'),
     ["[primary] contrast = 'gpt-4 vs reference'", "'treatment vs reference'"]),
    (lambda s: s.replace('judges = "pooled"', 'judges = "sampled"'),
     ["judges = 'sampled'", "must include the judge role", 'cluster = "persona+judge"']),
    (lambda s: s.replace('cluster = "persona"', 'cluster = "persona+judge"'),
     ["judges = 'pooled' holds the judges fixed", "persona+judge"]),
])
def test_plan_that_does_not_fit_the_table(tmp_path, table, edit, needles):
    path = _write(tmp_path, edit(FEW))
    with pytest.raises(InvalidTableError) as err:
        resolve_plan(read_plan(path), table)
    message = str(err.value)
    assert f"analysis plan {str(path)!r}" in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_every_problem_at_once(tmp_path, table):
    path = _write(tmp_path, FEW.replace('cluster = "persona"', 'cluster = "prompt"')
                  .replace('ties = "half"', 'ties = "separate"'))
    with pytest.raises(InvalidTableError) as err:
        resolve_plan(read_plan(path), table)
    assert len(err.value.problems) == 2


def test_per_judge_needs_a_judge_role(tmp_path):
    df = pd.DataFrame({"item": [f"i{i}" for i in range(12)], "score": [0, 1] * 6})
    t = evalmix.read(df, outcome="score", clusters={"item": "item"})
    text = (PLAN_EXAMPLE.replace('judges = "pooled"', 'judges = "per_judge"')
            .replace('"win_rate"', '"mean"').replace('clusters = ["judge"]', "clusters = []"))
    with pytest.raises(InvalidTableError, match="judges = 'per_judge', but the table has no "
                                                "judge role"):
        resolve_plan(read_plan(_write(tmp_path, text)), t)


def test_resolution_without_and_with_fallback(tmp_path, table):
    plan = read_plan(_write(tmp_path, FEW.replace("min_clusters = 5", "min_clusters = 3")))
    use = resolve_plan(plan, table)  # 3 personas >= 3: no fallback
    assert (use.cluster, use.method, use.deviations) == (("persona",), "CR2", ())
    plan = read_plan(_write(tmp_path, FEW.replace('cluster = "scenario"', 'method = "wild"')))
    use = resolve_plan(plan, table)  # fallback method only: same cluster, wild
    assert (use.cluster, use.method) == (("persona",), "wild")
    assert "3 levels, fewer than the plan's min_clusters = 5" in use.deviations[0]
    assert use.keys == (("win_rate", "treatment vs reference"),)


# ------------------------------------------------------------------------ the report
def test_report_states_the_fallback_and_marks_the_deviation(planned_report):
    rep, path = planned_report
    iv = rep.intervals
    primary = iv[iv["analysis"] == PRIMARY]
    assert len(primary) == 1
    row = primary.iloc[0]
    assert (row["contrast"], row["method"], row["cluster"]) == (
        "treatment vs reference", "CR2", "scenario")
    assert row["n_clusters"] == 10
    assert "'persona' has 3 levels, fewer than the plan's min_clusters = 5" in row["deviation"]
    # the declared primary row is kept, named as replaced; every other row is exploratory
    replaced = iv[iv["analysis"] == REPLACED]
    assert list(zip(replaced["method"], replaced["cluster"], strict=True)) == [("CR2",
                                                                                "persona")]
    sens = iv[iv["analysis"] == "sensitivity"]
    assert list(zip(sens["contrast"], sens["method"], sens["cluster"], strict=True)) == [
        ("treatment vs reference", "CR2", "author")]
    others = iv[~iv["analysis"].isin([PRIMARY, REPLACED, "sensitivity"])]
    assert len(others) == len(iv) - 3 and (others["analysis"] == EXPLORATORY).all()
    assert (iv.loc[iv["analysis"] != PRIMARY, "deviation"] == "").all()
    # the primary result is the interval row itself, recorded in the plan block
    p = rep.plan["primary"]
    assert p["estimate"].iloc[0] == row["estimate"] and p["lo"].iloc[0] == row["lo"]
    assert rep.plan["used"] == {"cluster": "scenario", "method": "CR2"}
    assert rep.headline["analysis"].eq(EXPLORATORY).all()  # the headline is by persona
    assert (rep.judges["analysis"] == EXPLORATORY).all()
    assert (rep.position["analysis"] == EXPLORATORY).all()
    assert (rep.position_classes["analysis"] == EXPLORATORY).all()


def test_report_files_record_the_plan_and_its_hash(planned_report, tmp_path):
    rep, path = planned_report
    rep.write(tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    plan = summary["plan"]
    assert plan["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert plan["path"] == str(path) and plan["title"] == "few personas"
    assert plan["items"]["primary_cluster"] == "persona"
    assert plan["items"]["fallback"] == {"min_clusters": 5, "cluster": "scenario",
                                         "method": None}
    assert len(plan["deviations"]) == 1 and plan["primary"][0]["cluster"] == "scenario"
    iv = pd.read_csv(tmp_path / "out" / "intervals.csv", keep_default_na=False)
    assert set(iv["analysis"]) == {PRIMARY, REPLACED, "sensitivity", EXPLORATORY}
    md = (tmp_path / "out" / "report.md").read_text()
    # the pre-declared result comes first, before the (exploratory) answer
    first = md.index("## Pre-declared primary result")
    assert first < md.index("Exploratory (evalmix's recommended interval")
    assert "> **Deviation forced by the data: the primary cluster 'persona' has 3" in md
    assert plan["sha256"][:16] in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.index("id='plan'") < html.index("id='answer'")
    assert "class='finding'>Deviation forced by the data" in html


def test_plan_as_written_has_no_deviation(table, tmp_path):
    text = FEW.replace('cluster = "persona"', 'cluster = "scenario"').replace(
        "min_clusters = 5", "min_clusters = 10")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=99, seed=3, progress=False,
                              plan=read_plan(_write(tmp_path, text)))
    assert rep.plan["deviations"] == []
    p = rep.plan["primary"].iloc[0]
    iv = rep.intervals.set_index(["estimand", "contrast", "method", "cluster"])
    row = iv.loc[("win_rate", "treatment vs reference", "CR2", "scenario")]
    assert (p["estimate"], p["lo"], p["hi"]) == (row["estimate"], row["lo"], row["hi"])
    assert row["analysis"] == PRIMARY and row["deviation"] == ""
    # the headline (the recommendation, multiway here) is not the plan's: exploratory
    assert rep.headline.set_index("contrast").loc["treatment vs reference", "cluster"] \
        != "scenario"
    assert rep.headline["analysis"].eq(EXPLORATORY).all()
    assert "No deviation: the plan ran as written." in rep.to_markdown()
    assert rep.summary["reps"] == 99


def test_per_judge_plan_takes_the_judge_rows(table, tmp_path):
    text = FEW.replace('judges = "pooled"', 'judges = "per_judge"')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=99, seed=3, progress=False,
                              plan=read_plan(_write(tmp_path, text)))
    p = rep.plan["primary"]
    assert sorted(p["judge"]) == ["judge1", "judge2"]
    assert set(p["cluster"]) == {"scenario"} and set(p["method"]) == {"CR2"}
    j = rep.judges[rep.judges["analysis"] == PRIMARY]
    np.testing.assert_array_equal(np.sort(j["estimate"]), np.sort(p["estimate"]))
    # the judge-stratified row is the interval on that judge's rows
    one = table.subset((table.data["judge"] == "judge1").to_numpy())
    ref = evalmix.interval(one, "win_rate", contrast="treatment", method="CR2",
                           cluster="scenario")
    got = p.set_index("judge").loc["judge1"]
    assert got["estimate"] == pytest.approx(ref.estimate, rel=1e-12)
    assert got["lo"] == pytest.approx(ref.lo, rel=1e-12)


# --------------------------------------------------------------------------- the CLI
def _csv(sim, tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "data.csv"
    sim.data.to_csv(path, index=False)
    return path, ["--outcome", "outcome", "--model-a", "model_a", "--model-b", "model_b",
                  "--first-shown", "first_shown", "--cluster", "scenario=scenario",
                  "--cluster", "persona=persona", "--cluster", "author=author",
                  "--cluster", "judge=judge"]


def test_cli_plan_check(sim, tmp_path, capsys):
    data, read = _csv(sim, tmp_path)
    plan = _write(tmp_path, FEW)
    assert main(["plan", "check", str(plan), str(data), *read]) == 0
    out = capsys.readouterr().out
    assert "2. primary cluster: persona (3 levels)" in out
    assert "3. fallback below 5 levels: CR2 by scenario (10 levels)" in out
    assert "deviation the data force: the primary cluster 'persona' has 3 levels" in out
    bad = _write(tmp_path, FEW.replace('cluster = "persona"', 'cluster = "prompt"'), "bad.toml")
    assert main(["plan", "check", str(bad), str(data), *read]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "'prompt'" in err


def test_cli_report_plan_and_contradicting_options(sim, tmp_path, capsys):
    data, read = _csv(sim, tmp_path)
    plan = _write(tmp_path, FEW)
    rc = main(["report", str(data), *read, "--plan", str(plan), "--ties", "exclude",
               "--out", str(tmp_path / "r")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--ties exclude contradicts the analysis plan" in err and "ties = 'half'" in err
    rc = main(["report", str(data), *read, "--plan", str(plan), "--reps", "500",
               "--out", str(tmp_path / "r")])
    assert rc == 2 and "[interval] reps = 99" in capsys.readouterr().err
    rc = main(["report", str(data), *read, "--plan", str(plan), "--fast", "--quiet",
               "--seed", "1", "--out", str(tmp_path / "r")])
    assert rc == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["plan"]["sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest()
    assert summary["reps"] == 99 and summary["plan"]["used"]["cluster"] == "scenario"


def test_answer_label_when_the_plan_is_the_recommendation(table, tmp_path):
    from evalmix.compare.recommend import recommend_cluster

    rec = recommend_cluster(table)
    text = FEW.replace('cluster = "persona"', f'cluster = "{rec.label}"').replace(
        "min_clusters = 5", "min_clusters = 2").replace(
        'clusters = ["author"]', "clusters = []")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=99, seed=3, progress=False,
                              plan=read_plan(_write(tmp_path, text)))
    head = rep.headline.set_index("contrast")["analysis"]
    assert head.loc["treatment vs reference"] == PRIMARY
    assert (head.drop("treatment vs reference") == EXPLORATORY).all()
    assert ("Exploratory beyond the primary contrast (the same method and cluster as the "
            "plan): ") in rep.to_markdown()
