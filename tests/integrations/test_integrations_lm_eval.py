"""lm-eval pairs: two --log_samples runs compared per task (lm-eval #3831), and
evalmix's numbers written back in lm-eval's results layout for its own table printer.

References: lm-eval's own ``mean_stderr`` (the ``acc_stderr`` it writes) and the z test
of its ``scripts/model_comparator.py`` on the results files; statsmodels' McNemar and
``multipletests`` (Holm, BH); ``lm_eval.utils.make_table``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import evalmix
from evalmix.errors import EvalmixError
from evalmix.integrations.lm_eval_results import comparison_results, with_evalmix

lm_metrics = pytest.importorskip("lm_eval.api.metrics", reason="lm-eval is not installed")
make_table = pytest.importorskip("lm_eval.utils").make_table

DATE = "2024-05-01T12-00-00.123456"
# arc_mini: lm-eval PR #3868's n = 220 (68 both right, 30 only A, 12 only B, 110 neither)
ARC_A = np.repeat([1, 1, 0, 0], [68, 30, 12, 110])
ARC_B = np.repeat([1, 0, 1, 0], [68, 30, 12, 110])
# mmlu_mini: 60 documents in 6 subjects of unequal size; B better on two subjects
SUBJECTS = np.array([f"sub{min(i % 9, 5)}" for i in range(60)])
MMLU_A = np.array([(i * 7) % 3 != 0 for i in range(60)], dtype=float)
MMLU_B = np.where(np.isin(SUBJECTS, ["sub0", "sub3"]), 1.0, MMLU_A)


def _run(root, name, tasks):
    """An lm-eval --output_path folder of one model: samples and results files, the
    results' acc_stderr computed by lm-eval's own mean_stderr."""
    folder = root / f"org__{name}"
    folder.mkdir(parents=True)
    results = {}
    for task, acc in tasks.items():
        lines = []
        for i, a in enumerate(acc):
            doc = {"question": f"{task} q{i}", "subject": str(SUBJECTS[i % 60])}
            lines.append(json.dumps({
                "doc_id": i, "doc": doc, "target": "0", "arguments": {}, "resps": [],
                "filtered_resps": [], "filter": "none", "metrics": ["acc"],
                "doc_hash": f"h{task}{i}", "prompt_hash": "p", "target_hash": "t",
                "acc": float(a)}))
        (folder / f"samples_{task}_{DATE}.jsonl").write_text("\n".join(lines) + "\n")
        values = [float(a) for a in acc]
        results[task] = {"alias": task, "acc,none": float(np.mean(values)),
                         "acc_stderr,none": lm_metrics.mean_stderr(values)}
    (folder / f"results_{DATE}.json").write_text(json.dumps(
        {"results": results, "versions": dict.fromkeys(tasks, 1.0), "n-shot": {},
         "model_name": f"org/{name}", "config": {"model": "hf"}}))
    return folder


@pytest.fixture
def two_runs(tmp_path):
    a = _run(tmp_path, "base", {"arc_mini": ARC_A, "mmlu_mini": MMLU_A})
    b = _run(tmp_path, "tuned", {"arc_mini": ARC_B, "mmlu_mini": MMLU_B})
    return a, b


def _results(folder):
    return json.loads(next(folder.glob("results_*.json")).read_text())


def test_two_lm_eval_runs_compared_per_task(two_runs):
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests

    a, b = two_runs
    cmp = evalmix.compare_runs([a, b], metric="acc", reps=999, seed=1)
    rows = cmp.tidy()
    per_task = rows[rows["task"] != "(all tasks)"].set_index(["task", "method"])
    assert set(rows["task"]) == {"arc_mini", "mmlu_mini", "(all tasks)"}
    # McNemar on arc_mini: statsmodels' exact test, PR #3868's 0.008
    mc = per_task.loc[("arc_mini", "mcnemar")]
    assert mc["p_value"] == pytest.approx(
        mcnemar([[68, 30], [12, 110]], exact=True).pvalue, rel=1e-12)
    assert round(mc["p_value"], 3) == 0.008
    # the unpaired row is lm-eval's model_comparator z test on its own results files
    ra, rb = _results(a)["results"], _results(b)["results"]
    for task in ("arc_mini", "mmlu_mini"):
        z = (rb[task]["acc,none"] - ra[task]["acc,none"]) / np.hypot(
            ra[task]["acc_stderr,none"], rb[task]["acc_stderr,none"])
        assert per_task.loc[(task, "unpaired_z"), "p_value"] == pytest.approx(
            2 * stats.norm.sf(abs(z)), rel=1e-12)
    assert round(per_task.loc[("arc_mini", "unpaired_z"), "p_value"], 3) == 0.080
    # Holm and BH over the two tasks, per method: statsmodels' multipletests
    head = per_task.xs("CR2", level="method")
    p = head["p_value"].to_numpy()
    assert head["p_holm"].to_numpy() == pytest.approx(multipletests(p, method="holm")[1])
    assert head["p_bh"].to_numpy() == pytest.approx(multipletests(p, method="fdr_bh")[1])
    # the pooled row clusters by task/document over both tasks
    pooled = rows[(rows["task"] == "(all tasks)") & (rows["method"] == "CR1")].iloc[0]
    assert pooled["n_pairs"] == 280 and pooled["n_clusters"] == 280
    assert np.isnan(pooled["p_holm"])   # not one of the tests adjusted


def test_grouping_field_of_the_documents(two_runs):
    a, b = two_runs
    cmp = evalmix.compare_runs([a, b], metric="acc", cluster="subject", reps=200, seed=1,
                               clusters={"subject": "doc.subject"})
    cr1 = cmp.tidy().query("task == 'mmlu_mini' and method == 'CR1'").iloc[0]
    d = MMLU_B - MMLU_A
    dev = np.array([(d[SUBJECTS == s] - d.mean()).sum() for s in np.unique(SUBJECTS)])
    assert cr1["n_clusters"] == 6
    assert cr1["se"] == pytest.approx(np.sqrt(6 / 5 * (dev**2).sum()) / 60, rel=1e-12)


def test_comparison_in_lm_eval_layout_prints_with_make_table(two_runs):
    a, b = two_runs
    cmp = evalmix.compare_runs([a, b], metric="acc", reps=200, seed=1)
    res = comparison_results(cmp)
    name = "arc_mini: org/tuned - org/base"
    entry = res["results"][name]
    head = cmp.headline().set_index("task")
    assert entry["acc_diff,none"] == head.loc["arc_mini", "estimate"]
    assert entry["acc_diff_stderr,none"] == head.loc["arc_mini", "se"]
    assert entry["mcnemar_p,none"] == pytest.approx(0.0079, abs=5e-5)
    table = make_table(res)
    line = next(x for x in table.splitlines() if "acc_diff " in x and "arc_mini" in x)
    assert f"{entry['acc_diff,none']:.4f}" in line and "±" in line
    assert f"{entry['acc_diff_stderr,none']:.4f}" in line
    assert "all tasks: org/tuned - org/base" in table and "mcnemar_p" in table


def test_with_evalmix_writes_the_stderr_beside_acc(two_runs):
    a, _ = two_runs
    res_file = next(a.glob("results_*.json"))
    out = with_evalmix(res_file, a, metric="acc")
    for task in ("arc_mini", "mmlu_mini"):
        e = out["results"][task]
        # CR2 by document is lm-eval's own acc_stderr (HC2 of a mean = sd / sqrt(n))
        assert e["acc_cr2_stderr,none"] == pytest.approx(e["acc_stderr,none"], rel=1e-12)
        assert e["acc_cr2,none"] == pytest.approx(e["acc,none"], rel=1e-15)
    by_subject = with_evalmix(res_file, a, metric="acc", cluster="subject",
                              clusters={"subject": "doc.subject"})
    table = evalmix.read(pd.DataFrame({"y": MMLU_A, "s": SUBJECTS, "d": np.arange(60)}),
                         outcome="y", clusters={"item": "d", "subject": "s"})
    ref = evalmix.interval(table, "mean", method="CR2", cluster="subject", scale="identity")
    assert by_subject["results"]["mmlu_mini"]["acc_cr2_stderr,none"] == pytest.approx(
        ref.se, rel=1e-12)
    lines = make_table(by_subject).splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("|mmlu_mini"))
    line = next(x for x in lines[start:] if "acc_cr2" in x and "±" in x)
    assert f"{ref.se:.4f}" in line
    assert json.loads(res_file.read_text())["results"]["arc_mini"].get("acc_cr2,none") is None
    arc = next(a.glob("samples_arc_mini_*.jsonl"))
    with pytest.raises(EvalmixError, match="have no metric 'acc'"):
        with_evalmix({"results": {"arc_mini": {"exact_match,none": 1.0}}}, arc, metric="acc")
    with pytest.raises(EvalmixError, match="the results have no task 'arc_mini'"):
        with_evalmix({"results": {"other": {"acc,none": 1.0}}}, arc, metric="acc")
