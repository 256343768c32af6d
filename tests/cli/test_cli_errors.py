"""Issue 12, the command line: every user or OS error is one line on stderr, checked
before the work starts; numeric options are validated; dropped rows are printed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evalmix.cli import main


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def scores_csv(tmp_path: Path) -> Path:
    path = tmp_path / "scores.csv"
    rows = [{"item": f"q{i}", "model": m, "correct": (i + j) % 2}
            for i in range(12) for j, m in enumerate(("x", "y"))]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


# ------------------------------------------------------------------ --out
def out_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    return {
        "file in the way": (tmp_path / "a_file", "is a file, not a folder"),
        "parent is a file": (tmp_path / "a_file" / "report", "is a file, not a folder"),
        "unwritable": (Path("/proc/evalmix-report"), "cannot write in '/proc'"),
        "other files": (tmp_path / "other", "not an evalmix report"),
    }


@pytest.mark.parametrize("case", ["file in the way", "parent is a file", "unwritable",
                                  "other files"])
def test_report_out_is_checked_before_the_work(tmp_path, capsys, case):
    out, needle = out_cases(tmp_path)[case]
    # the data file does not exist: the --out error must come first (no work done)
    code, stdout, err = run(["report", str(tmp_path / "missing.csv"), "--outcome", "y",
                             "--out", str(out)], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith("evalmix: error: --out") and needle in line
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("command", [["power"], ["coverage"], ["demo", "--fast"]])
def test_other_commands_check_out_first(tmp_path, capsys, command):
    (tmp_path / "a_file").write_text("x")
    code, _, err = run([*command, "--out", str(tmp_path / "a_file" / "sub")], capsys)
    assert code == 2 and "is a file, not a folder" in one_line(err)


def test_os_errors_are_one_line(tmp_path, capsys, monkeypatch):
    import evalmix.cli.report as report_cli

    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.csv"))

    monkeypatch.setattr(report_cli, "run_report", denied)
    code, _, err = run(["report", "x.csv", "--outcome", "y", "--out", str(tmp_path / "r")],
                       capsys)
    line = one_line(err)
    assert code == 2 and "Permission denied" in line and "x.csv" in line


def test_a_bug_is_one_line_unless_the_traceback_is_asked_for(tmp_path, capsys, monkeypatch):
    import evalmix.cli.report as report_cli

    def bug(args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(report_cli, "run_report", bug)
    argv = ["report", "x.csv", "--outcome", "y", "--out", str(tmp_path / "r")]
    code, _, err = run(argv, capsys)
    line = one_line(err)
    assert code == 1 and line.startswith("evalmix: internal error: ZeroDivisionError")
    monkeypatch.setenv("EVALMIX_TRACEBACK", "1")
    with pytest.raises(ZeroDivisionError):
        main(argv)


# ------------------------------------------------------------------ options
@pytest.mark.parametrize("argv, needle", [
    (["report", "d.csv", "--draws", "0"], "--draws: expected a positive integer"),
    (["report", "d.csv", "--mcmc-timeout", "-1"], "--mcmc-timeout: expected a finite number"),
    (["report", "d.csv", "--mcmc-timeout", "nan"], "--mcmc-timeout: expected a finite"),
    (["report", "d.csv", "--seed", "-1"], "--seed: expected an integer >= 0"),
    (["report", "d.csv", "--reps", "0"], "--reps: expected a positive integer"),
    (["coverage", "--jobs", "0"], "--jobs: expected a number of worker processes"),
    (["coverage", "--seed", "-1"], "--seed: expected an integer >= 0"),
    (["power", "--size-cv", "-1"], "--size-cv: expected a finite number >= 0"),
    (["power", "--sd", "nan"], "--sd: expected a finite number >= 0"),
])
def test_bad_numeric_options_are_one_line_usage_errors(tmp_path, capsys, argv, needle):
    with pytest.raises(SystemExit) as ei:
        main([*argv, "--out", str(tmp_path / "o")])
    line = one_line(capsys.readouterr().err)
    assert ei.value.code == 2 and needle in line


@pytest.mark.parametrize("argv, needle", [
    (["--effect", "nan"], "cannot read 'nan' as finite numbers"),
    (["--icc", "nan"], "cannot read 'nan' as finite numbers"),
    (["--components", "scenario=-0.8", "--levels", "scenario=10"],
     "standard deviations, finite and >= 0"),
])
def test_bad_power_values_are_one_line(tmp_path, capsys, argv, needle):
    code, _, err = run(["power", *argv, "--out", str(tmp_path / "p")], capsys)
    assert code == 2 and needle in one_line(err)
    assert not (tmp_path / "p").exists()  # nothing written for a refused plan


def test_unreachable_scheduler_is_one_line(tmp_path, capsys):
    code, _, err = run(["coverage", "--clusters", "5", "--cluster-size", "2", "--icc", "0.1",
                        "--reps", "5", "--methods", "naive", "--quiet", "--scheduler",
                        "tcp://127.0.0.1:9", "--out", str(tmp_path / "c")], capsys)
    line = one_line(err)
    assert code == 2 and "could not connect to the Dask scheduler" in line


def test_same_cluster_role_twice(scores_csv, tmp_path, capsys):
    code, _, err = run(["report", str(scores_csv), "--outcome", "correct", "--cluster",
                        "item=item", "--cluster", "item=model", "--out",
                        str(tmp_path / "r")], capsys)
    assert code == 2 and "gives the role 'item' twice" in one_line(err)


def test_ties_on_a_scores_table(scores_csv, tmp_path, capsys):
    code, _, err = run(["report", str(scores_csv), "--outcome", "correct", "--condition",
                        "model", "--cluster", "item=item", "--ties", "exclude", "--out",
                        str(tmp_path / "r")], capsys)
    line = one_line(err)
    assert code == 2 and "--ties exclude applies to pairwise tables" in line


def test_cluster_column_with_spaces_is_kept(tmp_path, capsys, monkeypatch):
    import evalmix
    import evalmix.report.analyze

    df = pd.DataFrame({" item id ": [f"q{i // 2}" for i in range(12)],
                       "model": ["x", "y"] * 6, "correct": [1, 0, 1, 1, 0, 1] * 2})
    path = tmp_path / "spaces.csv"
    df.to_csv(path, index=False)
    seen = {}

    def stop(table, **kwargs):  # the read is what is tested; stop before the analysis
        seen["table"] = table
        raise evalmix.EvalmixError("stopped")

    monkeypatch.setattr(evalmix.report.analyze, "analyze", stop)
    code, _, err = run(["report", str(path), "--outcome", "correct", "--condition", "model",
                        "--cluster", "item= item id ", "--out", str(tmp_path / "r")], capsys)
    assert "stopped" in one_line(err)
    assert seen["table"].roles.clusters == {"item": " item id "}
    assert seen["table"].n_levels("item") == 6


def test_encoding_option_and_dropped_rows_reach_the_terminal(tmp_path, capsys, monkeypatch):
    import evalmix
    import evalmix.report.analyze

    rows = [f"q{i},{m},{(i + j) % 2}" for i in range(40) for j, m in enumerate(("café", "thé"))]
    rows[3] = "q1,thé,??"  # one of 80: dropped and shown
    path = tmp_path / "latin.csv"
    path.write_bytes(("item,model,correct\n" + "\n".join(rows) + "\n").encode("latin-1"))
    base = ["report", str(path), "--outcome", "correct", "--condition", "model",
            "--cluster", "item=item", "--out", str(tmp_path / "r")]
    code, _, err = run(base, capsys)
    assert code == 2 and "--encoding latin-1" in one_line(err)

    monkeypatch.setattr(evalmix.report.analyze, "analyze", lambda table, **kw: (_ for _ in ()).throw(
        evalmix.EvalmixError(f"stopped after reading {table.n_obs} rows")))
    code, _, err = run([*base, "--encoding", "latin-1"], capsys)
    lines = err.strip().splitlines()
    assert lines[0] == ("evalmix: warning: dropped 1 of 80 rows (1 unparsed outcome (e.g. "
                        "'??')); they are counted in table.dropped and in the design summary")
    assert lines[1] == "evalmix: error: stopped after reading 79 rows"
