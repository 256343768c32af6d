"""HELM run folders (evalmix.data.readers.helm) on real HELM output: the HELM Safety v4
BBQ runs of 9 models committed to stanford-crfm/helm (tests/fixtures/helm/, see its
make_fixture.py), and the leaderboard with tie groups on that suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

from evalmix.data.readers import detect_format, read_helm, read_log
from evalmix.errors import EvalmixError, EvalmixWarning, InvalidOptionError
from evalmix.inference.leaderboard import leaderboard

HELM = FIXTURES / "helm"
RUNS = sorted(p for p in HELM.iterdir() if p.is_dir())


def _helm_number(run: Path) -> tuple[str, float]:
    """HELM's own aggregate: exact_match on the test split, unperturbed (stats.json)."""
    model = json.loads((run / "run_spec.json").read_text())["adapter_spec"]["model"]
    stats = json.loads((run / "stats.json").read_text())
    (row,) = [s for s in stats if s["name"] == {"name": "exact_match", "split": "test"}]
    return model, float(row["mean"])


@pytest.fixture(scope="module")
def table():
    return read_helm(HELM)


def test_reads_the_suite_and_reproduces_helm_means(table):
    d = table.data
    assert table.kind == "scores" and len(RUNS) == 9 and table.n_obs == 900
    assert d.groupby("condition")["item"].nunique().eq(100).all()
    # one instance id set shared by the 9 models: the item is the BBQ instance
    assert d["item"].nunique() == 100
    means = d.groupby("condition")["y"].mean()
    for run in RUNS:
        model, helm = _helm_number(run)
        assert means[model] == pytest.approx(helm, abs=1e-12), model
    assert detect_format(HELM) == "helm"
    assert detect_format(RUNS[0] / "per_instance_stats.json") == "helm"
    assert read_log(HELM).n_obs == 900


def test_leaderboard_with_tie_groups_on_the_helm_suite(table):
    board = leaderboard(table, cluster="item", seed=1, reps=4000)
    m = board.tidy()
    assert len(m) == 9 and m["tie_group"].iloc[0] == 1
    # the estimates are HELM's numbers
    helm = dict(_helm_number(r) for r in RUNS)
    np.testing.assert_allclose(m["estimate"], [helm[x] for x in m["model"]], atol=1e-12)
    # the groups partition the board in order; the best-model set is the first models
    # whose rank range starts at 1
    g = m["tie_group"].to_numpy()
    assert set(np.diff(g)) <= {0, 1}
    assert board.top_set(1) == m.loc[m["rank_lo"] == 1, "model"].tolist()
    assert "group" in str(board)


def _copy(tmp_path: Path, runs: list[Path]) -> Path:
    out = tmp_path / "suite"
    for run in runs:
        shutil.copytree(run, out / run.name)
    return out


def test_train_trials_are_replicates(tmp_path):
    suite = _copy(tmp_path, RUNS[:2])
    for run in suite.iterdir():
        for name in ("per_instance_stats.json", "scenario_state.json"):
            path = run / name
            data = json.loads(path.read_text())
            recs = data if isinstance(data, list) else data["request_states"]
            twin = [{**r, "train_trial_index": 1} for r in recs]
            if isinstance(data, list):
                data = recs + twin
            else:
                data["request_states"] = recs + twin
            path.write_text(json.dumps(data))
    t = read_helm(suite)
    assert t.n_obs == 400 and t.replicate == "train_trial"


def test_perturbed_and_unlisted_instances_are_counted(tmp_path):
    suite = _copy(tmp_path, RUNS[:2])
    run = sorted(suite.iterdir())[0]
    path = run / "per_instance_stats.json"
    recs = json.loads(path.read_text())
    recs.append({**recs[0], "perturbation": {"name": "robustness"}})
    path.write_text(json.dumps(recs))
    state = json.loads((run / "scenario_state.json").read_text())
    state["request_states"] = state["request_states"][1:]  # one instance not requested
    (run / "scenario_state.json").write_text(json.dumps(state))
    with pytest.warns(EvalmixWarning, match=r"1 perturbed instance.*1 not in scenario_state"):
        t = read_helm(suite)
    assert t.n_obs == 199


def test_metric_choice_and_bad_input(tmp_path):
    suite = _copy(tmp_path, RUNS[:2])
    for run in suite.iterdir():
        path = run / "per_instance_stats.json"
        recs = json.loads(path.read_text())
        for r in recs:
            r["stats"].append({**r["stats"][0], "name": {"name": "quasi_exact_match",
                                                         "split": "test"}})
        path.write_text(json.dumps(recs))
    with pytest.raises(InvalidOptionError, match="quasi_exact_match"):
        read_helm(suite)
    assert read_helm(suite, metric="quasi_exact_match").n_obs == 200
    with pytest.raises(EvalmixError, match="split 'valid'"):
        read_helm(suite, metric="exact_match", split="valid")
    (sorted(suite.iterdir())[0] / "per_instance_stats.json").write_text("[{\"x\": 1}]")
    with pytest.raises(EvalmixError, match="instance_id"):
        read_helm(suite)
