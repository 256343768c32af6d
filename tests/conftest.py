"""Shared fixtures: the public judge data in ../shared/data (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
REFERENCE = Path(__file__).resolve().parent / "reference"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"shared data not found at {SHARED_DATA} (it sits beside the repository)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def mtbench_path(shared_data: Path) -> Path:
    return shared_data / "judging_the_judges" / "jtj_MTBench_position_bias.csv"
