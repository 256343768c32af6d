"""The Inspect metric and hook (evalmix.integrations.inspect), run inside Inspect with
its mock model, offline.

References: Inspect's own ``stderr(cluster=)`` and ``ci(cluster=)`` computed in the same
eval (the CR1 row equals them exactly); evalmix.interval's CR2 mean on the log read back
(the CR2 row); the hook writes the comparison / report an evalmix command writes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed")

from inspect_ai import Task, eval_set  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import Score, ci, mean, scorer, stderr  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

import evalmix  # noqa: E402
from evalmix.data.readers import read_log  # noqa: E402
from evalmix.integrations import inspect as ev_inspect  # noqa: E402
from evalmix.integrations.inspect import cluster_ci  # noqa: E402


def _output(*_):  # usage given: the mock model then needs no tiktoken download
    out = ModelOutput.from_content(model="mockllm", content="answer")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


def _score(model: str, i: int, epoch: int) -> float:
    """Scores with a shared difficulty per subject, so clusters matter."""
    base = {0: 0.9, 1: 0.4, 2: 0.7, 3: 0.2, 4: 0.5}[i % 5]
    shift = 0.1 if model.endswith("beta") else 0.0
    return round(min(1.0, base + shift + 0.05 * ((i * 7 + epoch) % 3)), 2)


def _task(n=30, epochs=1, metrics=None):
    @scorer(metrics=metrics or [mean()])
    def graded():
        async def score(state, target):
            return Score(value=_score(str(state.model), int(state.sample_id), state.epoch))
        return score

    return Task(dataset=[Sample(input=f"q{i}", target="answer", id=i,
                                metadata={"subject": f"s{min(i % 8, 4)}"})
                         for i in range(1, n + 1)],
                solver=generate(), scorer=graded(), epochs=epochs, name="quiz")


def test_metric_cr1_equals_inspect_stderr_cluster_and_cr2_equals_evalmix(tmp_path):
    task = _task(metrics=[mean(), stderr(cluster="subject"), ci(cluster="subject"),
                          cluster_ci("subject")])
    log = inspect_eval(task, model=get_model("mockllm/alpha", custom_outputs=_output),
                       log_dir=str(tmp_path), display="none")[0]
    m = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    # Inspect lists a dict metric's keys as metrics (ci() gives lower and upper)
    assert m["se_cr1"] == pytest.approx(m["stderr"], rel=1e-15, abs=0)   # to rounding
    assert m["lower_cr1"] == pytest.approx(m["lower"], rel=1e-14)
    assert m["upper_cr1"] == pytest.approx(m["upper"], rel=1e-14)
    assert m["estimate"] == pytest.approx(m["mean"], rel=1e-15)
    assert m["clusters"] == 5
    # the CR2 row is evalmix's CR2 interval of the mean on the log read back
    table = read_log(tmp_path, clusters={"subject": "metadata.subject"})
    r = evalmix.interval(table, "mean", method="CR2", cluster="subject", scale="identity")
    assert m["se_cr2"] == pytest.approx(r.se, rel=1e-12)
    assert m["df_cr2"] == pytest.approx(r.df, rel=1e-10)
    assert (m["lower_cr2"], m["upper_cr2"]) == pytest.approx((r.lo, r.hi), rel=1e-10)
    # unequal clusters: CR2 differs from CR1 and its df from G - 1
    assert m["se_cr2"] != pytest.approx(m["se_cr1"], rel=1e-6) and m["df_cr2"] < 4


def test_metric_without_cluster_and_missing_metadata(tmp_path):
    task = _task(n=12, metrics=[stderr(), cluster_ci()])
    log = inspect_eval(task, model=get_model("mockllm/alpha", custom_outputs=_output),
                       log_dir=str(tmp_path), display="none")[0]
    m = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    # each sample its own cluster: CR1 = sd/sqrt(n) (Inspect's stderr) exactly
    assert m["se_cr1"] == pytest.approx(m["stderr"], rel=1e-14)
    bad = _task(n=4, metrics=[cluster_ci("nope")])
    log = inspect_eval(bad, model=get_model("mockllm/alpha", custom_outputs=_output),
                       log_dir=str(tmp_path / "bad"), display="none")[0]
    assert log.status == "error" and "has no metadata 'nope'" in log.error.message


def test_hook_is_registered_through_the_entry_point():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="inspect_ai") if ep.name == "evalmix"]
    assert [ep.value for ep in eps] == ["evalmix.integrations.inspect"]
    from inspect_ai._util.registry import registry_find

    found = registry_find(lambda info: info.type == "hooks" and "evalmix" in info.name)
    assert any(isinstance(h, ev_inspect.EvalmixHooks) for h in found)


def test_hook_writes_a_comparison_at_the_end_of_an_eval_set(tmp_path, monkeypatch):
    out = tmp_path / "evalmix"
    monkeypatch.setenv(ev_inspect.ENV_REPORT, str(out))
    models = [get_model(m, custom_outputs=_output) for m in ("mockllm/alpha", "mockllm/beta")]
    ok, logs = eval_set(_task(n=25, epochs=2), model=models, log_dir=str(tmp_path / "logs"),
                        display="none")
    assert ok
    summary = json.loads((out / "summary.json").read_text())
    (row,) = summary["comparisons"]
    assert row["run_b"] == "mockllm/beta" and row["n_pairs"] == 50
    # the paired difference by hand
    diff = np.mean([_score("beta", i, e) - _score("alpha", i, e)
                    for i in range(1, 26) for e in (1, 2)])
    assert row["estimate"] == pytest.approx(diff, abs=1e-12)
    # a second eval set with the first as the baseline: the paired comparison with it
    monkeypatch.setenv(ev_inspect.ENV_BASELINE, str(tmp_path / "logs"))
    out2 = tmp_path / "evalmix2"
    monkeypatch.setenv(ev_inspect.ENV_REPORT, str(out2))
    ok, _ = eval_set(_task(n=25, epochs=2), model=models[1], log_dir=str(tmp_path / "logs2"),
                     display="none")
    assert ok
    rows = json.loads((out2 / "summary.json").read_text())["comparisons"]
    assert [(r["run_a"], r["run_b"]) for r in rows] == [
        ("mockllm/beta (baseline)", "mockllm/beta")]
    assert rows[0]["estimate"] == 0.0 and rows[0]["n_pairs"] == 50   # the same scores


def test_hook_is_off_without_the_variable(monkeypatch):
    monkeypatch.delenv(ev_inspect.ENV_REPORT, raising=False)
    assert not ev_inspect.EvalmixHooks().enabled()


def test_one_model_gives_the_evalmix_report(tmp_path):
    inspect_eval(_task(n=24), model=get_model("mockllm/alpha", custom_outputs=_output),
                 log_dir=str(tmp_path / "logs"), display="none")
    said = ev_inspect.write_eval_set_report(tmp_path / "logs", tmp_path / "rep",
                                            cluster="subject")
    assert said.startswith("evalmix report")
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert (tmp_path / "rep" / "report.html").is_file() and summary
    with pytest.raises(evalmix.EvalmixError, match="has a run in the baseline"):
        other = tmp_path / "other"
        inspect_eval(_task(n=24), model=get_model("mockllm/gamma", custom_outputs=_output),
                     log_dir=str(other), display="none")
        ev_inspect.write_eval_set_report(tmp_path / "logs", tmp_path / "rep2", baseline=other)
