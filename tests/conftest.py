"""Shared fixtures: the real judge data bundled in :mod:`evalmix.datasets`.

``shared_data`` is a folder laid out like ``../shared/data`` (the CSVs the bundled sets
were built from, see tests/reference/datasets/build_datasets.py), written from the
package data, so the real-data tests run on a clone without ``../shared``;
tests/datasets/test_datasets.py checks that the bundled sets equal the shared CSVs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import evalmix.datasets

#: the tests' folder (one folder per package under it; ``from conftest import ...`` works
#: from any of them), the repository, the frozen references and the fixture files
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
REFERENCE = TESTS / "reference"
FIXTURES = TESTS / "fixtures"
#: scripts that made the frozen reference values (some need R-side or optional Python
#: packages) and fixture files: not test modules, so --doctest-modules does not import them
collect_ignore_glob = ["reference/*", "fixtures/*"]
#: bundled data set -> its file under ../shared/data
SHARED_FILES = {
    "mtbench_position_bias": "judging_the_judges/jtj_MTBench_position_bias.csv",
    "mtbench_repetition": "judging_the_judges/jtj_MTBench_repetition.csv",
    "devbench_repetition": "judging_the_judges/jtj_DevBench_repetition.csv",
    "pandalm": "pandalm/pandalm_testset_judgments.csv",
    "wildbench": "wildbench/wildbench_scores.csv",
    "mtbench_human": "humans/mtbench_human/mtbench_human_judgments.csv",
}


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled data sets written as CSV files in the layout of ../shared/data."""
    root = tmp_path_factory.mktemp("shared_data")
    for name, rel in SHARED_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        evalmix.datasets.load(name).to_csv(path, index=False)
    return root


@pytest.fixture(scope="session")
def mtbench_path(shared_data: Path) -> Path:
    return shared_data / SHARED_FILES["mtbench_position_bias"]


def mc_band(expected: float, reps: int, checks: int = 1, *,
            fwer: float = 0.01) -> tuple[float, float]:
    """Monte Carlo band of a simulated coverage (or any proportion) around ``expected``.

    ``expected +- z * sqrt(expected (1 - expected) / reps)`` with ``z`` the Bonferroni
    quantile for ``checks`` two-sided checks at family-wise error ``fwer``: a study whose
    intervals cover exactly ``expected`` fails one of its ``checks`` with probability at
    most ``fwer``.

    >>> lo, hi = mc_band(0.95, 5000, 50)
    >>> round(lo, 4), round(hi, 4)
    (0.9385, 0.9615)
    """
    from scipy import stats

    z = float(stats.norm.isf(fwer / (2 * checks)))
    half = z * (expected * (1 - expected) / reps) ** 0.5
    return expected - half, expected + half


def chromium(why: str) -> list[str]:
    """A headless Chromium command: Debian's ``chromium-headless-shell`` (headless only),
    else a full Chromium with ``--headless=new``; skips the test with ``why`` when none is
    installed."""
    shell = shutil.which("chromium-headless-shell")
    if shell:
        return [shell]
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return [exe, "--headless=new"]
    pytest.skip(f"no headless Chromium (Debian: apt-get install chromium or "
                f"chromium-headless-shell); {why}")
