"""``evalmix plan dstudy`` on a table and on an eval log (issue 30).

Reference for the numbers: evalmix.gstudy / evalmix.dstudy in-process (the CLI must
write exactly what the API returns); Brennan's Synthetic Data No. 3
(tests/reference/gtheory/).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, REFERENCE

import evalmix
from evalmix.cli import main

REF = REFERENCE / "gtheory"
LOGS = FIXTURES / "logs"


def test_table_to_components_designs_and_plot(tmp_path, capsys):
    out = tmp_path / "ds"
    rc = main([
        "plan", "dstudy", str(REF / "brennan_synthetic3.csv"), "--outcome", "score",
        "--object", "person", "--facet", "item", "--facet", "occasion", "--target", "0.8",
        "--cost", "call=1", "--cost", "item=5", "--budget", "500", "--seed", "1", "--quiet",
        "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "smallest" in printed and "wrote 5 files" in printed
    comp = pd.read_csv(out / "components.csv").set_index("effect")
    assert comp.loc["person", "variance"] == pytest.approx(0.5528, abs=5e-5)
    table = pd.read_csv(out / "dstudy.csv")
    g = evalmix.gstudy(pd.read_csv(REF / "brennan_synthetic3.csv"), "person",
                       ["item", "occasion"], outcome="score", seed=1)
    d = evalmix.dstudy(g, target=0.8, budget=500, costs={"call": 1, "item": 5})
    np.testing.assert_allclose(table["erho2"], d.table["erho2"], rtol=1e-12)
    np.testing.assert_allclose(table["erho2_lo"], d.table["erho2_lo"], rtol=1e-12)
    assert (out / "dstudy.png").stat().st_size > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "anova" and summary["budget"] == 500
    assert (out / "dstudy.csv").stat().st_mode & 0o044   # not a private temp file
    assert not list(out.glob(".*"))


def test_eval_log_roles_become_facets(tmp_path, capsys):
    out = tmp_path / "log"
    rc = main(["plan", "dstudy", str(LOGS / "lm_eval"), "--read-option", "metric=acc",
               "--seed", "1", "--quiet", "--out", str(out)])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["object"] == "condition" and summary["facets"] == ["item"]


def test_formula_cells_are_escaped(tmp_path):
    data = pd.read_csv(REF / "brennan_synthetic3.csv")
    data = data.rename(columns={"item": "=SUM(1)"})
    path = tmp_path / "hostile.csv"
    data.to_csv(path, index=False)
    out = tmp_path / "h"
    assert main(["plan", "dstudy", str(path), "--outcome", "score", "--object", "person",
                 "--facet", "=SUM(1)", "--facet", "occasion", "--quiet", "--reps", "50",
                 "--out", str(out)]) == 0
    assert "'=SUM(1)" in (out / "components.csv").read_text()
    for name in ("facets.csv", "components.csv"):
        text = (out / name).read_text()
        assert not any(cell.startswith("=") for line in text.splitlines()
                       for cell in line.split(","))


def test_bad_input_is_one_line(tmp_path, capsys):
    rc = main(["plan", "dstudy", str(REF / "brennan_synthetic3.csv"), "--outcome", "score",
               "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--object" in err
    rc = main(["plan", "dstudy", str(REF / "brennan_synthetic3.csv"), "--outcome", "score",
               "--object", "person", "--facet", "item", "--facet", "occasion", "--cost",
               "items=2", "--quiet", "--out", str(tmp_path / "y")])
    err = capsys.readouterr().err
    assert rc == 2 and "costs names 'items'" in err
