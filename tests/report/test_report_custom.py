"""The report's custom-statistics section: analyze(statistics=, randomized=) and the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.cli import main
from evalmix.inference.permutation import permutation_test
from evalmix.report import custom_statistics as custom
from evalmix.seeding import child_seed

RATIO = 'mean(red_flag, condition == "B") / mean(red_flag, condition == "A")'


@pytest.fixture(scope="module")
def flags() -> pd.DataFrame:
    """24 scenarios, each under both conditions (randomized within scenario)."""
    rng = np.random.default_rng(8)
    g, per = 24, 6
    d = pd.DataFrame({"scenario": np.repeat([f"s{k:02d}" for k in range(g)], per),
                      "condition": np.tile(["A", "B"], g * per // 2)})
    u = rng.normal(0, 0.7, g)[np.repeat(np.arange(g), per)]
    d["correct"] = (rng.random(len(d)) < 1 / (1 + np.exp(-(0.3 + u)))).astype(int)
    d["red_flag"] = (rng.random(len(d)) < 0.2 + 0.15 * (d["condition"] == "B")).astype(int)
    return d


def test_analyze_shows_custom_statistics_and_the_randomization_test(flags, tmp_path):
    t = evalmix.read(flags, outcome="correct", condition="condition",
                     clusters={"scenario": "scenario"})
    rep = evalmix.analyze(t, fast=True, reps=199, seed=3, progress=False,
                          statistics={"flag_ratio": RATIO}, columns=flags, randomized=True)
    c = rep.custom
    assert c is not None and list(c["method"]) == ["bootstrap", "permutation"]
    boot = c.iloc[0]
    assert boot["estimand"] == "flag_ratio" and boot["cluster"] == "scenario"
    assert boot["lo"] < boot["estimate"] < boot["hi"]
    perm = c.iloc[1]
    ref = permutation_test(t, cluster="scenario", progress=False,  # the report's seed
                           seed=child_seed(3, custom._SEED_OFFSET - 1))
    assert perm["p_value"] == ref.p_value and perm["contrast"] == "B - A"
    design = rep.intervals[(rep.intervals["estimand"] == "difference")
                           & (rep.intervals["method"] == rep.recommendation["method"])
                           & (rep.intervals["cluster"] == "scenario")]
    assert perm["design_p_value"] == pytest.approx(float(design["p_value"].iloc[0]))
    assert "Custom statistics and randomization tests" in rep.to_markdown()
    paths = rep.write(tmp_path / "rep")
    assert pd.read_csv(paths["custom.csv"])["estimand"].tolist()[0] == "flag_ratio"


def test_cli_report_takes_statistics_and_refuses_code(flags, tmp_path, capsys):
    src = tmp_path / "flags.csv"
    flags.to_csv(src, index=False)
    base = ["report", str(src), "--outcome", "correct", "--condition", "condition",
            "--cluster", "scenario=scenario", "--fast", "--reps", "99", "--quiet",
            "--seed", "1"]
    code = main([*base, "--statistic", f"ratio={RATIO}", "--statistic",
                 "evalmix.inference.statistics:red_flag_rate", "--randomized",
                 "--out", str(tmp_path / "out")])
    assert code == 0
    custom = pd.read_csv(tmp_path / "out" / "custom.csv")
    assert set(custom["estimand"]) == {"ratio", "red_flag_rate", "difference"}
    capsys.readouterr()
    code = main([*base, "--statistic", '__import__("os").system("echo hi")',
                 "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not allowed" in err[0]
    code = main([*base, "--statistic", "no_such_module_x:f", "--out", str(tmp_path / "b2")])
    assert code == 2 and "cannot import" in capsys.readouterr().err
