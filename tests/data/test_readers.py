"""Log readers on fixture files written in each upstream format (tests/fixtures/logs/).

Every expected number is computed by hand from the values written into the fixture
(comments give the arithmetic); the Inspect logs are made here with inspect_ai's mock
model and checked against the accuracy inspect_ai itself reports.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

from evalmix.compare.position import position_bias
from evalmix.data.readers import (
    detect_format,
    read_alpaca_eval,
    read_battles,
    read_inspect,
    read_lm_eval,
    read_log,
)
from evalmix.errors import DroppedRowsWarning, EvalmixError, EvalmixWarning
from evalmix.inference.estimands import build_problem, fit_problem

LOGS = FIXTURES / "logs"


def estimate(table, estimand, **kw) -> float:
    problem = build_problem(table, estimand, **kw)
    return float(fit_problem(problem).beta[problem.target])


def means(table) -> dict[str, float]:
    return table.data.groupby("condition")["y"].mean().to_dict()


# --------------------------------------------------------------------------- lm-eval
def test_lm_eval_output_folder_two_models():
    t = read_lm_eval(LOGS / "lm_eval", metric="acc")
    # model-x wrote model_name; model-y only config.model_args (pretrained=org/model-y)
    assert means(t) == {"org/model-x": 0.75, "org/model-y": 0.25}   # 3/4 and 1/4
    assert t.kind == "scores" and t.outcome_type == "binary" and t.n_obs == 8
    assert t.clusters == ("item",) and t.n_levels("item") == 4 and t.replicate is None
    assert estimate(t, "difference", conditions=("org/model-y", "org/model-x")) == 0.5


def test_lm_eval_dotted_fields_as_clusters_and_metric_choice():
    with pytest.raises(EvalmixError, match=r"2 metrics \('acc', 'acc_norm'\).*metric="):
        read_lm_eval(LOGS / "lm_eval")
    t = read_lm_eval(LOGS / "lm_eval", metric="acc_norm",
                     clusters={"subject": "doc.subject"})
    assert means(t) == {"org/model-x": 0.25, "org/model-y": 0.75}
    assert t.roles.clusters["subject"] == "doc.subject" and t.n_levels("subject") == 2
    assert t.describe().relations.iloc[0]["relation"] == "item nested in subject"
    with pytest.raises(EvalmixError, match="model='meta.name' is not a field"):
        read_lm_eval(LOGS / "lm_eval", metric="acc", model="meta.name")


def test_lm_eval_filters_and_several_tasks():
    gsm = LOGS / "lm_eval_gsm8k"
    with pytest.raises(EvalmixError, match=r"2 filters \('flexible-extract', 'strict-match'\)"):
        read_lm_eval(gsm)
    strict = read_lm_eval(gsm, filter="strict-match")
    flexible = read_lm_eval(gsm, filter="flexible-extract")
    assert strict.y.mean() == pytest.approx(1 / 3) and flexible.y.mean() == pytest.approx(2 / 3)
    both = read_lm_eval([LOGS / "lm_eval", gsm], metric="acc", filter="none")
    assert both.n_obs == 8   # gsm8k has no 'none' rows
    # two tasks with one metric: items are task/doc_id, the task a cluster above them
    src = next(gsm.rglob("samples_*.jsonl"))
    other = pd.read_json(src, lines=True)
    out = Path(str(src).replace("lm_eval_gsm8k", "tmp_gsm8k")).with_name(
        src.name.replace("gsm8k", "gsm8k_copy"))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        other.to_json(out, orient="records", lines=True)
        t = read_lm_eval([src, out], filter="strict-match")
    finally:
        out.unlink(missing_ok=True)
        out.parent.rmdir()
        out.parent.parent.rmdir()
    assert t.n_obs == 6 and t.clusters == ("item", "task") and t.n_levels("item") == 6
    assert set(t.data["item"]) == {f"{k}/{i}" for k in ("gsm8k", "gsm8k_copy") for i in range(3)}
    assert t.source.endswith("(2 files)")


def test_lm_eval_model_from_a_column(tmp_path):
    src = next((LOGS / "lm_eval" / "org__model-x").glob("samples_*.jsonl"))
    rows = pd.read_json(src, lines=True)
    rows["meta"] = [{"name": n} for n in ["a", "a", "b", "b"]]
    out = tmp_path / src.name
    rows.to_json(out, orient="records", lines=True)
    t = read_lm_eval(out, metric="acc", model="meta.name")
    assert means(t) == {"a": 0.5, "b": 1.0}   # acc 1, 0 | 1, 1


# --------------------------------------------------------------------------- AlpacaEval
def alpaca(model, **kw):
    files = {"m1": "weighted_alpaca_eval_gpt4_turbo", "m2": "alpaca_eval_gpt4_turbo_fn"}
    path = LOGS / "alpaca_eval" / "results" / model / files[model] / "annotations.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvalmixWarning)
        return read_alpaca_eval(path, **kw)


def test_alpaca_eval_failures_tie_scores_them_as_draws():
    # m2 preferences 2, 1, 1.5, 0 (legacy draw), null, 2
    with pytest.warns(EvalmixWarning, match=r"1 of 6 annotations are judge failures"):
        t = read_alpaca_eval(LOGS / "alpaca_eval/results/m2/alpaca_eval_gpt4_turbo_fn",
                             failures="tie")
    assert t.n_obs == 6 and t.n_ties == 3 and t.outcome_type == "proportion"
    assert estimate(t, "win_rate", model="m2") == pytest.approx((1 + 0 + .5 + .5 + .5 + 1) / 6)
    assert t.data["model_a"].unique().tolist() == ["gpt4_1106_preview"]
    assert {r: t.n_levels(r) for r in t.clusters} == {"item": 6, "item_group": 5}


def test_alpaca_eval_failures_drop_is_counted():
    # the default, as AlpacaEval's describe_head2head (tests/data/test_upstream.py)
    with pytest.warns(DroppedRowsWarning, match="dropped 1 of 6 rows"):
        t = read_alpaca_eval(LOGS / "alpaca_eval/results/m2")
    assert dict(t.dropped) == {"na_outcome": 1}
    assert estimate(t, "win_rate", model="m2") == pytest.approx((1 + 0 + .5 + .5 + 1) / 5)
    with pytest.raises(EvalmixError, match="failures='skip'"):
        read_alpaca_eval(LOGS / "alpaca_eval", failures="skip")


def test_alpaca_eval_probability_verdicts():
    # m1 (weighted annotator): 1.9, 1.2, 1.5, null, 1.0, 2.0
    t = alpaca("m1", failures="tie")
    assert sorted(t.y) == pytest.approx(sorted([0.1, 0.8, 0.5, 0.5, 1.0, 0.0]))
    assert estimate(t, "win_rate", model="m1") == pytest.approx((.9 + .2 + .5 + .5 + 0 + 1) / 6)
    assert estimate(alpaca("m1"), "win_rate", model="m1") == \
        pytest.approx((.9 + .2 + .5 + 0 + 1) / 5)
    assert list(t.data["verdict"]) == ["b", "a", "tie", "tie", "a", "b"]
    with pytest.raises(EvalmixError, match="ties='exclude' does not apply to probability"):
        alpaca("m1", ties="exclude")
    # a results folder with both models: one table, the annotator is the judge factor
    both = read_alpaca_eval(LOGS / "alpaca_eval" / "results", failures="tie")
    assert set(both.clusters) == {"item", "item_group", "judge"} and both.n_obs == 12
    assert estimate(both, "win_rate", model="m2") == pytest.approx(3.5 / 6)


def test_alpaca_eval_discrete_ties_exclude():
    t = alpaca("m2", ties="exclude")
    assert t.n_obs == 3 and estimate(t, "win_rate", model="m2") == pytest.approx(2 / 3)


# --------------------------------------------------------------------------- battles
def test_arena_battles_single_randomised_order():
    path = LOGS / "battles" / "arena_battles.json"
    plain = read_battles(path)
    assert not plain.has_order and plain.n_obs == 8
    # gpt-4 scores 1, 1, 1, .5, 0, 0 over its six battles
    assert estimate(plain, "win_rate", model="gpt-4") == pytest.approx(3.5 / 6)
    t = read_battles(path, model_a_first=True)
    assert t.single_order and t.pairs_read["single_order"] == 1
    assert {r: t.n_levels(r) for r in t.clusters} == {"item": 8, "judge": 3}
    # left side (model_a) won 4 of the 6 decisive battles
    row = position_bias(t, judge=None).iloc[-1]
    assert row["first_shown_win_rate"] == pytest.approx(4 / 6) and row["n_decisive"] == 6
    # standardised: gpt-4 shown first 1, 1, 0; second 1, .5, 0 -> (2/3 + 1/2) / 2
    assert estimate(t, "controlled_win_rate", model="gpt-4") == pytest.approx(7 / 12)
    assert t.data.loc[5, "verdict"] == "tie"   # 'tie (bothbad)'


def test_fastchat_pairwise_judgments_are_matched_ab_ba():
    with pytest.warns(DroppedRowsWarning, match="dropped 1 of 12 rows"):
        t = read_battles(LOGS / "battles" / "gpt-4_pair.jsonl")
    assert t.has_order and not t.single_order
    assert t.pairs_read == {"comparisons": 6, "both_orders": 6, "one_order_only": 0}
    assert {r: t.n_levels(r) for r in t.clusters} == {"item": 6, "question": 3}
    # alpaca-13b (model_1) scores 1,1 | 1,0 | 0,0 | .5,1 | -,1 | 1,.5 -> 7 / 11
    assert t.y.mean() == pytest.approx(7 / 11)
    row = position_bias(t, judge=None).iloc[-1]
    assert row["first_shown_win_rate"] == pytest.approx(5 / 9)
    assert row["n_pairs"] == 5 and row["flip_rate"] == pytest.approx(1 / 5)
    assert row["consistency"] == pytest.approx(2 / 5)
    with pytest.raises(EvalmixError, match="model_a_first applies to battle records"):
        read_battles(LOGS / "battles" / "gpt-4_pair.jsonl", model_a_first=True)


def test_battles_refuse_unknown_winners(tmp_path):
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"model_a": "x", "model_b": "y", "winner": "left"}\n'
                   '{"model_a": "y", "model_b": "x", "winner": "model_a"}\n')
    with pytest.raises(EvalmixError, match="1 values that are not model_a.*'left'"):
        read_battles(bad)


# --------------------------------------------------------------------------- detection
@pytest.mark.parametrize("rel, kind", [
    ("lm_eval", "lm_eval"),
    ("lm_eval/org__model-x/samples_mmlu_mini_2024-05-01T12-00-00.123456.jsonl", "lm_eval"),
    ("alpaca_eval", "alpaca_eval"),
    ("alpaca_eval/results/m2/alpaca_eval_gpt4_turbo_fn/annotations.json", "alpaca_eval"),
    ("battles/arena_battles.json", "battles"),
    ("battles/gpt-4_pair.jsonl", "battles"),
])
def test_detect_format(rel, kind):
    assert detect_format(LOGS / rel) == kind


def test_read_log_dispatches_and_plain_tables_fall_through(tmp_path):
    t = read_log(LOGS / "lm_eval", metric="acc")
    assert means(t)["org/model-x"] == 0.75
    csv = tmp_path / "t.csv"
    pd.DataFrame({"model": ["a", "b"], "score": [1, 0]}).to_csv(csv, index=False)
    assert detect_format(csv) == "table"
    assert read_log(csv, outcome="score", condition="model").n_obs == 2
    with pytest.raises(EvalmixError, match="format='inspectai'"):
        read_log(csv, format="inspectai")


# --------------------------------------------------------------------------- Inspect
def test_inspect_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    with pytest.raises(EvalmixError, match=r"pip install 'evalmix\[inspect\]'"):
        read_inspect(LOGS)


#: value of scorer "grade" by (model, sample id, epoch)
GRADES = {
    "mockllm/alpha": {1: "CCC", 2: "CIC", 3: "PPI", 4: "NIC"},
    "mockllm/beta": {1: "III", 2: "CIC", 3: "CCC", 4: "PIN"},
}
# by hand (C=1, I=0, P=.5, N=0): alpha 3 + 2 + 1 + 1 = 7 of 12; beta 0 + 2 + 3 + .5 = 5.5


@pytest.fixture(scope="session")  # shared with tests/data/test_strata.py
def inspect_logs(tmp_path_factory):
    pytest.importorskip("inspect_ai", reason="the inspect extra is not installed")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, accuracy, mean, scorer
    from inspect_ai.solver import generate

    def output(*_):  # usage given, so the mock model needs no tokenizer download
        out = ModelOutput.from_content(model="mockllm", content="answer")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    @scorer(metrics=[accuracy()])
    def grade():
        async def score(state, target):
            return Score(value=GRADES[str(state.model)][int(state.sample_id)][state.epoch - 1])
        return score

    @scorer(metrics=[mean()])
    def length():
        async def score(state, target):
            return Score(value=float(state.sample_id) * state.epoch)
        return score

    task = Task(dataset=[Sample(input=f"question {i}", target="answer", id=i,
                                metadata={"subject": "odd" if i % 2 else "even"})
                         for i in range(1, 5)],
                solver=generate(), scorer=[grade(), length()], epochs=3, name="quiz")
    root = tmp_path_factory.mktemp("inspect")
    logs = []
    for model, fmt in (("mockllm/alpha", "eval"), ("mockllm/beta", "json")):
        logs += inspect_eval(task, model=get_model(model, custom_outputs=output),
                             log_dir=str(root), log_format=fmt, display="none")
    return root, logs


def test_inspect_log_folder_two_models_with_epochs(inspect_logs):
    root, logs = inspect_logs
    assert sorted(p.suffix for p in root.iterdir()) == [".eval", ".json"]
    assert detect_format(root) == "inspect"
    with pytest.raises(EvalmixError, match=r"2 scorers \('grade', 'length'\).*scorer="):
        read_inspect(root)
    t = read_inspect(root, scorer="grade")
    assert means(t) == pytest.approx({"mockllm/alpha": 7 / 12, "mockllm/beta": 5.5 / 12})
    # and what inspect_ai reports for its own accuracy() metric
    for lg in logs:
        reported = lg.results.scores[0].metrics["accuracy"].value
        assert means(t)[lg.eval.model] == pytest.approx(reported)
    assert t.replicate == "epoch" and t.clusters == ("item",) and t.n_levels("item") == 4
    assert t.n_obs == 24 and t.data["replicate"].nunique() == 3
    # epochs agree within (model, sample) for alpha CCC and beta III, CCC: 3 of 8 cells
    rep = t.describe().replicates
    assert rep["agreement"] == pytest.approx(3 / 8) and rep["cells_with_replicates"] == 8
    assert estimate(t, "difference", conditions=("mockllm/beta", "mockllm/alpha")) == \
        pytest.approx(1.5 / 12)


def test_inspect_single_file_numeric_scorer_and_metadata_cluster(inspect_logs):
    root, _ = inspect_logs
    one = next(root.glob("*.eval"))
    t = read_inspect(one, scorer="length", clusters={"subject": "metadata.subject"})
    assert t.outcome_type == "numeric" and set(t.data["condition"]) == {"mockllm/alpha"}
    assert t.y.mean() == pytest.approx(np.mean([i * e for i in range(1, 5) for e in (1, 2, 3)]))
    assert t.n_levels("subject") == 2
    assert read_log(one, scorer="grade").n_obs == 12


def test_inspect_value_errors_name_the_log(inspect_logs):
    root, _ = inspect_logs
    with pytest.raises(EvalmixError, match=r"\.(eval|json)': scorer 'grade' has no key 'x'"):
        read_inspect(root, scorer="grade.x")


# --------------------------------------------------------------------------- CLI
def test_cli_report_reads_logs_with_format_and_reader_options(tmp_path, capsys):
    import json

    from evalmix.cli import main

    out = tmp_path / "rep"
    code = main(["report", str(LOGS / "lm_eval"), "--format", "lm_eval", "--read-option",
                 "metric=acc", "--cluster", "subject=doc.subject", "--fast", "--reps", "50",
                 "--seed", "1", "--quiet", "--out", str(out)])
    assert code == 0
    design = json.loads((out / "design.json").read_text())
    assert design["roles"]["clusters"] == {"item": "doc_id", "subject": "doc.subject"}
    assert {c["condition"]: c["mean"] for c in design["conditions"]} == {
        "org/model-x": 0.75, "org/model-y": 0.25}
    # detected without --format; a reader error is one line on stderr with exit code 2
    assert main(["report", str(LOGS / "lm_eval"), "--fast", "--reps", "20", "--quiet",
                 "--out", str(tmp_path / "b")]) == 2
    assert "2 metrics ('acc', 'acc_norm'); choose one with metric=" in capsys.readouterr().err
    assert main(["report", str(LOGS / "lm_eval"), "--read-option", "metric", "--out",
                 str(tmp_path / "c")]) == 2
    assert "--read-option expects KEY=VALUE" in capsys.readouterr().err
