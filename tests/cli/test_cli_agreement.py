"""``evalmix agreement``: files written atomically, safe cells, one line, clear errors."""

from __future__ import annotations

import pandas as pd

import evalmix.datasets
from evalmix.cli import main


def test_agreement_cli_writes_tidy_rows_and_the_alt_test(tmp_path, capsys):
    src = tmp_path / "ratings.csv"
    d = evalmix.datasets.mtbench_human()
    d = d[d["turn"] == 1].copy()
    d.loc[d["rater"] == "author_4", "rater"] = "=cmd|' /C calc'!A0"  # a formula name
    d.to_csv(src, index=False)
    out = tmp_path / "out"
    rc = main(["agreement", str(src), "--method", "delta", "--alt-test", "0.2",
               "--min-items", "2", "--out", str(out)])
    assert rc == 0
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0 and "gpt-4" in line and "human ceiling" in line
    table = pd.read_csv(out / "agreement.csv")
    row = table[(table.rater_1 == "gpt-4") & (table.rater_2 == "humans")]
    assert abs(row["estimate"].iloc[0] - 0.668) < 5e-4
    assert not table["contrast"].str.match(r"^[=+\-@]").any()
    assert (table["rater_1"] == "'=cmd|' /C calc'!A0").any()
    assert (out / "summary.txt").read_text().startswith("Agreement:")
    assert (out / "alt_test.csv").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_agreement_cli_errors_are_one_line(tmp_path, capsys):
    rc = main(["agreement", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("evalmix: error: no such file") and err.count("\n") == 1
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"item_id": [1, 1], "rater": ["a", "a"], "score": [1, 2]}).to_csv(bad)
    rc = main(["agreement", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "rater=" in err and not (tmp_path / "o").exists()
