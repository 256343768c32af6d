"""evalmix compare / compare_runs: runs aligned by sample and epoch, paired tests.

References: a hand computation of the paired difference and its CR1 SE on the aligned
samples of two Inspect logs made offline with the mock model; statsmodels' McNemar; the
numbers of lm-evaluation-harness PR #3868 (unpaired z p = 0.080, McNemar p = 0.008 at
n = 220); R's p.adjust for Benjamini-Hochberg.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.cli import main
from evalmix.compare.runs import COLUMNS, paired_runs
from evalmix.errors import EvalmixError, InvalidOptionError
from evalmix.inference.compare_all import benjamini_hochberg
from evalmix.inference.paired import mcnemar_pvalue, paired_se, unpaired_z

N_SAMPLES = 24


def _correct(model: str, sample: int, epoch: int) -> bool:
    """A fixed pattern: beta is right more often, with item difficulty shared."""
    hard = sample % 3 == 0
    if model.endswith("alpha"):
        return (not hard) and (sample + epoch) % 4 != 0
    return (not hard) or (sample + epoch) % 5 == 0


@pytest.fixture(scope="module")
def inspect_pair(tmp_path_factory):
    """Two Inspect logs (alpha: 24 samples, beta: sample 24 missing), 2 epochs, binary
    scorer, metadata ``subject``; and one-epoch logs of the same for McNemar."""
    pytest.importorskip("inspect_ai", reason="the inspect extra is not installed")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, accuracy, scorer
    from inspect_ai.solver import generate

    def output(*_):  # usage given, so the mock model needs no tokenizer (tiktoken) download
        out = ModelOutput.from_content(model="mockllm", content="answer")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    @scorer(metrics=[accuracy()])
    def right():
        async def score(state, target):
            ok = _correct(str(state.model), int(state.sample_id), state.epoch)
            return Score(value="C" if ok else "I")
        return score

    def task(n, epochs):
        return Task(dataset=[Sample(input=f"q{i}", target="answer", id=i,
                                    metadata={"subject": f"s{i % 6}"})
                             for i in range(1, n + 1)],
                    solver=generate(), scorer=right(), epochs=epochs, name="quiz")

    out = {}
    for epochs in (2, 1):
        root = tmp_path_factory.mktemp(f"cmp{epochs}")
        for model, n in (("mockllm/alpha", N_SAMPLES), ("mockllm/beta", N_SAMPLES - 1)):
            inspect_eval(task(n, epochs), model=get_model(model, custom_outputs=output),
                         log_dir=str(root / model.split("/")[1]), display="none")
        out[epochs] = root
    return out


def _hand(epochs: int, exclude: int = N_SAMPLES):
    rows = [(s, e, float(_correct("alpha", s, e)), float(_correct("beta", s, e)))
            for s in range(1, N_SAMPLES + 1) if s != exclude for e in range(1, epochs + 1)]
    return pd.DataFrame(rows, columns=["sample", "epoch", "a", "b"])


def test_paired_difference_and_cr1_equal_a_hand_computation(inspect_pair):
    root = inspect_pair[2]
    cmp = evalmix.compare_runs([root / "alpha", root / "beta"], reps=500, seed=1)
    rows = cmp.tidy()
    assert list(rows.columns) == list(COLUMNS)
    assert set(rows["run_b"]) == {"mockllm/beta"} and cmp.baseline == "mockllm/alpha"
    assert set(rows["task"]) == {"quiz"}
    h = _hand(2)
    d = h["b"] - h["a"]
    g = h["sample"].nunique()
    dev = (d - d.mean()).groupby(h["sample"]).sum()
    se_cr1 = np.sqrt(g / (g - 1) * (dev**2).sum()) / len(d)
    cr1 = rows[rows["method"] == "CR1"].iloc[0]
    assert cr1["estimate"] == pytest.approx(d.mean(), abs=1e-15)
    assert cr1["se"] == pytest.approx(se_cr1, rel=1e-12)
    assert cr1["df"] == g - 1 and cr1["n_pairs"] == len(d) == 46
    # the sample missing from beta is counted and named, in both epochs
    assert cr1["n_only_a"] == 2 and cr1["n_only_b"] == 0
    assert cmp.missing[["sample", "epoch"]].values.tolist() == [["24", "1"], ["24", "2"]]
    assert set(cmp.missing["reason"]) == {"only in mockllm/alpha"}
    # with epochs McNemar is refused (pairs share a sample), saying why
    mc = rows[rows["method"] == "mcnemar"].iloc[0]
    assert np.isnan(mc["p_value"]) and "independent pairs" in mc["note"]
    # CR2 headline with Satterthwaite df; the MDE solves the noncentral t at 80% power
    head = cmp.headline().iloc[0]
    assert head["method"] == "CR2" and head["df"] < g - 1 + 1e-9
    from evalmix.inference.power_t import power_from_ncp
    ncp = head["mde"] / head["se"]
    assert power_from_ncp(ncp, head["df"], 0.95)[()] == pytest.approx(0.8, abs=1e-9)


def test_grouping_field_cluster(inspect_pair):
    root = inspect_pair[2]
    with pytest.warns(evalmix.FewClustersWarning):
        cmp = paired_runs([root / "alpha", root / "beta"], cluster="subject", reps=200,
                          seed=1, clusters={"subject": "metadata.subject"})
    cr1 = cmp.tidy().query("method == 'CR1'").iloc[0]
    h = _hand(2)
    h["subject"] = "s" + (h["sample"] % 6).astype(str)
    d = h["b"] - h["a"]
    dev = (d - d.mean()).groupby(h["subject"]).sum()
    assert cr1["n_clusters"] == 6
    assert cr1["se"] == pytest.approx(np.sqrt(6 / 5 * (dev**2).sum()) / len(d), rel=1e-12)


def test_mcnemar_equals_statsmodels_on_one_epoch_logs(inspect_pair):
    from statsmodels.stats.contingency_tables import mcnemar

    root = inspect_pair[1]
    cmp = evalmix.compare_runs([root / "alpha", root / "beta"], reps=200, seed=2)
    rows = cmp.tidy()
    mc = rows[rows["method"] == "mcnemar"].iloc[0]
    h = _hand(1)
    table = [[int(((h.a == 1) & (h.b == 1)).sum()), int(((h.a == 1) & (h.b == 0)).sum())],
             [int(((h.a == 0) & (h.b == 1)).sum()), int(((h.a == 0) & (h.b == 0)).sum())]]
    assert (mc["n_a_only_right"], mc["n_b_only_right"]) == (table[0][1], table[1][0])
    assert mc["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    # one epoch, cluster = sample: CR1 is the paired t test's standard error
    d = h["b"] - h["a"]
    cr1 = rows[rows["method"] == "CR1"].iloc[0]
    assert cr1["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)), rel=1e-12)


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (7, 3), (30, 12), (100, 71)])
def test_mcnemar_pvalue_equals_statsmodels(b, c):
    from statsmodels.stats.contingency_tables import mcnemar

    assert mcnemar_pvalue(b, c) == pytest.approx(
        mcnemar([[5, b], [c, 5]], exact=True).pvalue, rel=1e-12)


def test_lm_eval_pr_3868_numbers():
    """PR #3868: on n = 220 paired items the unpaired z test gives p = 0.080 and McNemar
    0.008. The PR does not publish its table; this one (68 both right, 30 only A, 12 only
    B, 110 neither) reproduces both rounded numbers."""
    a = np.repeat([1, 1, 0, 0], [68, 30, 12, 110]).astype(float)
    b = np.repeat([1, 0, 1, 0], [68, 30, 12, 110]).astype(float)
    _, p_unpaired = unpaired_z(a, b)
    assert round(p_unpaired, 3) == 0.080
    assert round(mcnemar_pvalue(30, 12), 3) == 0.008
    frame = pd.DataFrame({"doc": np.tile(np.arange(220), 2), "y": np.r_[a, b],
                          "model": np.repeat(["A", "B"], 220)})
    table = evalmix.read(frame, outcome="y", condition="model", clusters={"item": "doc"})
    rows = paired_runs([table], reps=999, seed=3).tidy().set_index("method")
    assert rows.loc["mcnemar", "p_value"] == pytest.approx(mcnemar_pvalue(30, 12))
    assert rows.loc["unpaired_z", "p_value"] == pytest.approx(p_unpaired)
    assert rows.loc["CR2", "p_value"] < 0.01 and rows.loc["bootstrap", "p_value"] < 0.02
    assert rows.loc["CR2", "se"] < rows.loc["unpaired_z", "se"]


def test_paired_se_is_the_sandwich():
    rng = np.random.default_rng(0)
    d = rng.normal(size=40)
    g = np.repeat(np.arange(10), 4)
    r = paired_se(d, g, type="CR1")
    dev = np.bincount(g, weights=d - d.mean())
    assert r.se == pytest.approx(np.sqrt(10 / 9 * (dev**2).sum()) / 40, rel=1e-12)


def test_benjamini_hochberg_equals_r_p_adjust():
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005, 0.2), "BH")
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.2])
    assert benjamini_hochberg(p) == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.2])
    assert np.isnan(benjamini_hochberg(np.array([np.nan, 0.01]))[0])


def _lm_eval_copy(tmp_path, name, flip=(), drop=()):
    src = "tests/fixtures/logs/lm_eval/org__model-x"
    dst = tmp_path / name
    shutil.copytree(src, dst)
    path = next(dst.glob("samples_*.jsonl"))
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    out = []
    for r in recs:
        if r["doc_id"] in drop:
            continue
        if r["doc_id"] in flip:
            r["acc"] = 1.0 - r["acc"]
            r["doc_hash"] = "changed" if r["doc_id"] == 3 else r["doc_hash"]
        out.append(json.dumps(r))
    path.write_text("\n".join(out) + "\n")
    res = next(dst.glob("results_*.json"))
    meta = json.loads(res.read_text())
    meta["model_name"] = f"org/{name}"
    res.write_text(json.dumps(meta))
    return dst


def test_cli_compare_lm_eval_runs_writes_the_report(tmp_path, capsys):
    a = _lm_eval_copy(tmp_path, "a")
    b = _lm_eval_copy(tmp_path, "b", flip=(1, 3), drop=(2,))
    out = tmp_path / "cmp"
    code = main(["compare", str(a), str(b), "--out", str(out), "--read-option", "metric=acc",
                 "--reps", "200", "--seed", "1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "org/b - org/a on mmlu_mini" in printed.out
    assert sorted(p.name for p in out.iterdir()) == [
        ".evalmix-report", "comparison.csv", "missing.csv", "report.html", "report.md",
        "summary.json"]
    missing = pd.read_csv(out / "missing.csv", dtype=str)
    assert sorted(zip(missing["sample"], missing["reason"], strict=True)) == [
        ("2", "only in org/a"), ("3", "content differs (doc_hash)")]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer"][0].startswith("org/b - org/a on mmlu_mini")
    assert summary["comparisons"][0]["n_pairs"] == 2
    md = (out / "report.md").read_text()
    assert md.index("org/b - org/a") < md.index("## Headline")


def test_errors_are_one_line(tmp_path, capsys):
    a = _lm_eval_copy(tmp_path, "a")
    assert main(["compare", str(a), "--out", str(tmp_path / "o"),
                 "--read-option", "metric=acc"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two or more runs" in err
    with pytest.raises(InvalidOptionError, match="baseline='zzz' is not a run"):
        paired_runs([a, _lm_eval_copy(tmp_path, "b")], baseline="zzz", metric="acc")
    with pytest.raises(InvalidOptionError, match="cluster='subject' is not a cluster role"):
        paired_runs([a, a], cluster="subject", metric="acc")
    with pytest.raises(EvalmixError, match="labels= gives 1 names for 2 runs"):
        paired_runs([a, _lm_eval_copy(tmp_path, "c")], labels=["x"], metric="acc")


def test_csv_runs_and_hostile_names_are_written_safely(tmp_path, capsys):
    """A long CSV of two models (names a spreadsheet formula and HTML) through the CLI:
    the report shows them as text, the CSV cells are escaped, the terminal line is plain."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, (2, 30))
    frame = pd.DataFrame({"doc": np.tile(np.arange(30), 2), "acc": y.ravel(),
                          "model": np.repeat(["=HYPERLINK(\"x\")", "<img src=x>"], 30)})
    frame.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "cmp"
    code = main(["compare", str(tmp_path / "runs.csv"), "--out", str(out), "--format",
                 "table", "--read-option", "outcome=acc", "--read-option", "condition=model",
                 "--cluster", "item=doc", "--reps", "99", "--seed", "1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    html = (out / "report.html").read_text()
    assert "<img src=x>" not in html and "&lt;img src=x&gt;" in html
    assert "<img" not in (out / "report.md").read_text()
    cells = pd.read_csv(out / "comparison.csv", dtype=str)
    assert cells["run_a"].str.startswith("'=").all()
    # the baseline is the first model read: the difference is the second's minus it
    assert float(cells.loc[cells["method"] == "CR1", "estimate"].iloc[0]) == pytest.approx(
        (y[1] - y[0]).mean())


def test_reader_options_with_tables_only_are_refused():
    frame = pd.DataFrame({"doc": np.tile(np.arange(6), 2), "y": [1, 0, 1, 1, 0, 1] * 2,
                          "model": np.repeat(["a", "b"], 6)})
    table = evalmix.read(frame, outcome="y", condition="model", clusters={"item": "doc"})
    with pytest.raises(InvalidOptionError, match=r"reader options \(metric\) apply to files"):
        paired_runs([table], metric="acc")
