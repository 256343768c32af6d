"""Report folders are evalmix's alone, and nothing else in them is lost.

Writing into an earlier report folder replaces only the files its manifest lists and keeps
every other file; a folder that is not a report is refused before any analysis; a bad
``--out`` ('' , '.', a mount point, a link) fails at once with the user's own path.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest

import evalmix
from evalmix.errors import EvalmixError
from evalmix.report.folder import PARTIAL_MARKER, REPORT_MARKER, check_report_dir


@pytest.fixture(scope="module")
def report():
    from evalmix.sim import clustered_scores

    t = clustered_scores(12, 3, p=0.6, icc=0.1, seed=4).table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.analyze(t, fast=True, reps=99, seed=1, progress=False)


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_rewrite_keeps_the_users_files_and_replaces_evalmix_s(report, tmp_path):
    out = tmp_path / "r"
    report.write(out)
    manifest = json.loads((out / REPORT_MARKER).read_text())["files"]
    assert "intervals.csv" in manifest and "notes.md" not in manifest
    (out / "notes.md").write_text("my notes")
    (out / "extra").mkdir()
    (out / "extra" / "analysis.ipynb").write_text("{}")
    (out / "plots" / "mine.png").write_bytes(b"png")
    (out / "empty").mkdir()
    (out / "intervals.csv").write_text("stale")       # evalmix's file: replaced
    inode = (out / "notes.md").stat().st_ino
    report.write(out)
    assert (out / "notes.md").read_text() == "my notes"
    assert (out / "notes.md").stat().st_ino == inode  # the same file, hard-linked over
    assert (out / "extra" / "analysis.ipynb").read_text() == "{}"
    assert (out / "plots" / "mine.png").read_bytes() == b"png" and (out / "empty").is_dir()
    assert (out / "intervals.csv").read_text() != "stale"
    assert "notes.md" not in json.loads((out / REPORT_MARKER).read_text())["files"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


@pytest.mark.parametrize("files", [["plots/"], ["report.md", "summary.json"],
                                   ["notes.txt"]])
def test_a_folder_that_is_not_a_report_is_refused_untouched(report, tmp_path, files):
    out = tmp_path / "r"
    for f in files:
        p = out / f
        if f.endswith("/"):
            p.mkdir(parents=True)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("the user's")
    before = _snapshot(out), sorted(os.listdir(out))
    with pytest.raises(EvalmixError, match="not an evalmix report") as e:
        report.write(out)
    assert files[0].rstrip("/") in str(e.value)
    assert (_snapshot(out), sorted(os.listdir(out))) == before


def test_a_users_file_where_evalmix_writes_is_refused(report, tmp_path):
    out = tmp_path / "r"
    report.write(out)
    (out / "leaderboard.csv").write_text("mine")   # not in the manifest: the user's
    with pytest.raises(EvalmixError, match="leaderboard.csv"):
        check_report_dir(out)
    assert (out / "leaderboard.csv").read_text() == "mine"


@pytest.mark.parametrize("fail_at", [1, 3])
def test_an_interrupted_write_loses_nothing(report, tmp_path, monkeypatch, fail_at):
    """The swap fails at its first rename, or after the old report was moved aside (the
    third: new -> out, old -> aside, new -> out): the old report and the user's file are
    back in place, and no hidden folder is left."""
    out = tmp_path / "r"
    report.write(out)
    (out / "notes.md").write_text("my notes")
    before = _snapshot(out)
    calls = []
    rename = os.rename

    def broken(src, dst):
        calls.append(src)
        if len(calls) == fail_at:
            raise OSError(5, "Input/output error")
        return rename(src, dst)

    monkeypatch.setattr("evalmix.report.folder.os.rename", broken)
    with pytest.raises(EvalmixError, match=f"could not write the report to '{out}'"):
        report.write(out)
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_partial_report_has_a_manifest_and_is_replaced(report, tmp_path):
    out = tmp_path / "r"
    report.with_summary(incomplete="model fits running").write(out)
    assert (out / PARTIAL_MARKER).is_file() and not (out / REPORT_MARKER).exists()
    (out / "notes.md").write_text("n")
    report.write(out)
    assert (out / REPORT_MARKER).is_file() and not (out / PARTIAL_MARKER).exists()
    assert (out / "notes.md").read_text() == "n"


def test_a_link_to_a_folder_is_followed(report, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    paths = report.write(link)
    assert link.is_symlink() and (real / "report.html").is_file()
    assert paths["report.html"] == link / "report.html"


@pytest.mark.parametrize("out, message", [
    ("", "--out is empty"), (".", "is the current folder"), ("..", "is the current folder")])
def test_bad_out_fails_before_the_analysis(tmp_path, monkeypatch, capsys, out, message):
    from evalmix.cli import main

    data = tmp_path / "t.csv"
    pd.DataFrame({"y": [1, 0, 1, 0], "item": list("abab")}).to_csv(data, index=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)

    def no_analysis(*args, **kwargs):
        raise AssertionError("the analysis ran")

    monkeypatch.setattr("evalmix.report.analyze.analyze", no_analysis)
    assert main(["report", str(data), "--outcome", "y", "--out", out]) == 2
    err = capsys.readouterr().err
    assert message in err and "Device or resource busy" not in err
    assert os.listdir(work) == []


def test_a_mount_point_is_refused_naming_the_users_path(tmp_path, monkeypatch):
    mount = tmp_path / "mnt"
    mount.mkdir()
    real = os.path.ismount
    monkeypatch.setattr("evalmix.report.folder.os.path.ismount",
                        lambda p: Path(p) == mount or real(p))
    with pytest.raises(EvalmixError, match=f"--out '{mount}' is a mount point.*"
                                           f"--out '{mount / 'report'}'"):
        check_report_dir(mount)


def test_a_report_landing_between_the_look_and_the_rename_is_replaced(tmp_path, monkeypatch):
    """The race seen in CI (two writers, one folder): writer A looks at ``out`` (absent),
    writer B's report lands there, A's rename fails with ENOTEMPTY. A must look again and
    replace B's report, not call it "files that are not an evalmix report"."""
    import errno

    from evalmix.report import folder

    def report(d, text):
        d.mkdir()
        (d / "intervals.csv").write_text(text)
        folder.write_manifest(d, folder.REPORT_MARKER)

    out, mine = tmp_path / "shared", tmp_path / ".shared.tmp-a"
    report(mine, "A")
    real = os.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 1:  # B's report lands just before A's first rename
            report(tmp_path / ".shared.tmp-b", "B")
            real(tmp_path / ".shared.tmp-b", out)
            raise OSError(errno.ENOTEMPTY, "Directory not empty")
        return real(src, dst)

    monkeypatch.setattr(folder.os, "rename", rename)
    folder.swap_in(mine, out, "shared")
    assert (out / "intervals.csv").read_text() == "A"
    assert [p.name for p in tmp_path.iterdir()] == ["shared"]
