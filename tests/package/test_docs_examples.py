"""Every ```python block of README.md and docs/**/*.md runs against the current API.

Blocks of one page run in order in one namespace (like a reader pasting them into one
session), in a temporary directory holding the files the pages name (``judgments.csv``
and ``jtj_MTBench_position_bias.csv``: the bundled MT-Bench data; ``docs/examples/``).
Where a page shows an output as a comment after an expression (``x.power  # 0.0881``, or
``# array([0.191, 0.349])`` on the next line), the value is checked to the printed digits.

Three lists below are the only exceptions, each with its reason; a listed text that no
longer occurs in its page fails the test, so the lists cannot go stale:

* ``CONTEXT``: code a page's first block relies on without showing it;
* ``SMALLER``: textual substitutions that shrink MCMC draws / bootstrap or simulation
  replicates so the suite stays fast (the calls and their arguments are still checked);
* ``BASH``: shell blocks are not run; each is listed with the test that covers it.
"""

from __future__ import annotations

import ast
import io
import math
import re
import shutil
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)

#: page -> code run before its first block (the page shows it elsewhere or in prose)
CONTEXT: dict[str, str] = {
    # report.md's block continues "you have a table": the simulator's, small
    "docs/report.md": ("import evalmix\nfrom evalmix.sim import pairwise_judges\n"
                       "table = pairwise_judges(12, 4, 2, 2, seed=1).table()\n"),
    # controlled.md reads an AlpacaEval results folder and Arena battles with answers:
    # small ones built from the test fixtures (tests/docs_data_controlled.py)
    "docs/controlled.md": (f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
                           "import docs_data_controlled\ndocs_data_controlled.write('.')\n"),
    # leaderboard.md's bootstrap block reads Arena battles from a Parquet file: small ones
    # from the simulator, in FastChat's column names
    "docs/leaderboard.md": ("from evalmix.sim.boards import arena_battles as _arena\n"
                            "_arena(8, 400, seed=1).data.rename(columns={'prompt': "
                            "'question_id', 'outcome': 'winner'})"
                            ".to_parquet('battles.parquet')\n"),
    # humans.md reads ../shared/data/humans/ as a reader at the repository root would
    "docs/humans.md": ("import os, pytest\n"
                       f"os.chdir({str(ROOT)!r})\n"
                       "if not os.path.isdir('../shared/data/humans'):\n"
                       "    pytest.skip('../shared/data/humans absent')\n"),
}

#: (page, text in the page, replacement, reason)
SMALLER: list[tuple[str, str, str, str]] = [
    ("README.md", "fit = evalmix.fit(table, seed=1)",
     "fit = evalmix.fit(table, seed=1, backend=evalmix.Bayes(draws=200, tune=200), "
     "progress=False)",
     "MCMC: 200 draws instead of 2,000 (about 60 s -> 10 s)"),
    ("README.md", "report = evalmix.analyze(table, fast=True, seed=1,",
     "report = evalmix.analyze(table, fast=True, seed=1, reps=199, progress=False,",
     "199 bootstrap replicates instead of 2,000"),
    ("docs/models.md", 'fit = evalmix.fit(table, slopes=("judge",), seed=1)',
     'fit = evalmix.fit(table, slopes=("judge",), seed=1, '
     'backend=evalmix.Bayes(draws=200, tune=200), progress=False)',
     "MCMC: 200 draws instead of 2,000"),
    ("docs/models.md", "backend=evalmix.Bayes(draws=1000, chains=4))",
     "backend=evalmix.Bayes(draws=100, tune=100, chains=4), progress=False)",
     "MCMC: 4 x 100 draws instead of 4 x 1,000"),
    ("docs/planning.md", "reps=2000, seed=1, jobs=2,", "reps=40, seed=1, jobs=1,",
     "coverage grid: 40 replications per cell instead of 2,000, in-process"),
    ("docs/planning.md", "R = 20000", "R = 1000",
     "power-table appendix: 1,000 simulated data sets per design instead of 20,000"),
    ("docs/custom-statistics.md", 'cluster="scenario", reps=2000, seed=1)',
     'cluster="scenario", reps=199, seed=1, progress=False)',
     "a Python statistic: 199 bootstrap replicates instead of 2,000"),
    ("docs/leaderboard.md", 'cluster="prompt", reps=1000, seed=1)',
     'cluster="prompt", reps=20, seed=1, progress=False)',
     "Arena bootstrap: 20 replicates instead of 1,000"),
    ("docs/leaderboard.md", "reps=1000, seed=1,\n", "reps=20, seed=1, progress=False,\n",
     "the same 20 replicates on the cluster"),
    ("docs/leaderboard.md", "LocalCluster(n_workers=8)", "LocalCluster(n_workers=1)",
     "one worker process instead of eight"),
    ("docs/report.md", "report = evalmix.analyze(table, fast=False, reps=2000, seed=1)",
     "report = evalmix.analyze(table, fast=False, reps=199, seed=1, draws=200, "
     "progress=False)",
     "MCMC: 200 draws; 199 bootstrap replicates"),
]

#: (page, first line of a bash block, why it is not run here)
BASH: list[tuple[str, str, str]] = [
    ("README.md", "make demo   #",
     "creates a venv; `evalmix demo` is tests/cli/test_cli_demo.py, `make test` is CI itself"),
    ("README.md", ".venv/bin/python -c \"import evalmix.datasets",
     "MCMC on 14,400 rows (~1.5 min); the report CLI is tests/cli/test_cli_report.py"),
    ("docs/getting-started.md", "make demo   #",
     "as README.md's block (tests/cli/test_cli_demo.py)"),
    ("docs/howto/csv.md", "evalmix report judgments.csv",
     "the same read + analyze as the Python blocks above; CLI in tests/cli/test_cli_report.py"),
    ("docs/planning.md", "evalmix power --components",
     "planning CLI: tests/cli/test_plan_cli.py"),
    ("docs/planning.md", "evalmix power --effect 0.05",
     "planning CLI: tests/cli/test_plan_cli.py"),
    ("docs/gtheory.md", "evalmix plan dstudy ratings.csv",
     "the D-study CLI: tests/cli/test_cli_dstudy.py"),
    ("docs/plans.md", "evalmix plan check plan.toml mtbench.csv",
     "the plan CLI: tests/data/test_analysis_plan.py (test_cli_plan_check)"),
    ("docs/custom-statistics.md", "evalmix report data.csv --outcome correct",
     "the report CLI with --statistic: tests/report/test_report_custom.py"),
    ("docs/controlled.md", "evalmix report results/ --controlled length",
     "the report CLI with --controlled: tests/report/test_report_controlled.py"),
    ("docs/report.md", "evalmix report DATA --outcome COL",
     "a usage synopsis with placeholders, not a command"),
    ("docs/report.md", ".venv/bin/python -c \"import evalmix.datasets",
     "MCMC on 14,400 rows (~1.5 min); the report CLI is tests/cli/test_cli_report.py"),
]
# docs/humans.md's command-line block is a ```text block: tests/cli/test_cli_agreement.py

_OUTPUT = re.compile(r"^(?:array\()?\[?[-+0-9.eE, ]+\]?\)?$")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _blocks(page: Path, lang: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(page.read_text()) if m.group(1) == lang]


def _page_source(page: Path) -> str:
    rel = _rel(page)
    blocks = _blocks(page, "python")
    source = "\n\n".join(blocks)
    for where, old, new, _ in SMALLER:
        if where == rel:
            assert old in source, f"{rel}: SMALLER lists {old!r}, which the page no longer has"
            source = source.replace(old, new)
    return CONTEXT.get(rel, "") + source


def _shown_value(lines: list[str], node: ast.stmt) -> str | None:
    """The output a page prints for an expression: inline '# 0.0881' or next-line '# ...'."""
    line = lines[node.end_lineno - 1]
    inline = line[node.end_col_offset:].strip()
    candidates = [inline[1:].strip()] if inline.startswith("#") else []
    if node.end_lineno < len(lines):
        nxt = lines[node.end_lineno].strip()
        if nxt.startswith("#"):
            candidates.append(nxt[1:].strip())
    return next((c for c in candidates if c and _OUTPUT.match(c)), None)


def _check_shown(value: object, shown: str, where: str) -> None:
    texts = re.findall(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", shown)
    got = np.atleast_1d(np.asarray(value, dtype=float)).ravel()
    assert got.size == len(texts), f"{where}: the page shows {shown!r}, the code gives {got}"
    for g, text in zip(got, texts, strict=True):
        mantissa = re.split("[eE]", text)[0]
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        assert math.isclose(g, float(text), abs_tol=0.5 * 10**-decimals + 1e-12), (
            f"{where}: the page shows {shown!r}, the code gives {got}")


def _run(source: str, rel: str) -> int:
    """Run top-level statements one by one; check shown outputs. Returns #checked."""
    tree = ast.parse(source)
    lines = source.splitlines()
    ns: dict = {"__name__": "__docs__"}
    checked = 0
    for node in tree.body:
        code = ast.Module(body=[node], type_ignores=[])
        if isinstance(node, ast.Expr):
            value = eval(compile(ast.Expression(node.value), rel, "eval"), ns)
            shown = _shown_value(lines, node)
            if shown is not None:
                _check_shown(value, shown, f"{rel} line {node.lineno}")
                checked += 1
        else:
            exec(compile(code, rel, "exec"), ns)
    return checked


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    import evalmix.datasets

    frame = evalmix.datasets.load("mtbench_position_bias")
    for name in ("judgments.csv", "jtj_MTBench_position_bias.csv"):
        frame.to_csv(tmp_path / name, index=False)
    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


PYTHON_PAGES = [p for p in PAGES if _blocks(p, "python")]
#: pages whose examples sample (the MCMC rows of SMALLER): marked ``mcmc``
MCMC_PAGES = {where for where, _, _, why in SMALLER if why.startswith("MCMC")}


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=pytest.mark.mcmc) if _rel(p) in MCMC_PAGES else p
    for p in PYTHON_PAGES], ids=_rel)
def test_python_blocks_run(page, workdir):
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        _run(_page_source(page), _rel(page))


def test_every_bash_block_is_accounted_for():
    listed = {(page, first) for page, first, _ in BASH}
    found = set()
    for page in PAGES:
        for block in _blocks(page, "bash"):
            first = block.lstrip().splitlines()[0]
            match = [(p, f) for p, f in listed if p == _rel(page) and first.startswith(f)]
            assert match, (f"{_rel(page)}: a new bash block starting {first!r}: run it here "
                           "or add it to BASH with the test that covers it")
            found.update(match)
    assert not listed - found, f"BASH lists blocks no page has: {sorted(listed - found)}"


def test_shown_outputs_are_checked():
    """The output check works: a page's shown value that is wrong fails."""
    assert _run("x = 0.0881\nx  # 0.0881\n[0.1914, 0.35]\n# array([0.191, 0.350])\n",
                "t") == 2
    with pytest.raises(AssertionError, match="shows"):
        _run("0.0881  # 0.0871\n", "t")
    planning = _page_source(ROOT / "docs" / "planning.md")
    first = planning.split("\n\n")[0]
    assert _run(first, "docs/planning.md") >= 3   # power, mde and n_clusters are checked
