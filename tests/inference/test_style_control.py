"""Style-controlled Bradley-Terry (evalmix.inference.style_control) against LMArena's
arena-rank ContextualBradleyTerry: frozen values (tests/reference/arena_rank/, made by
make_reference.py with arena-rank 0.1.1) and, where arena-rank is installed, live."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
from evalmix.data.readers import read_battles
from evalmix.errors import InvalidOptionError
from evalmix.inference.style_control import ARENA_SCALE, style_controlled_bt, style_features

REF = REFERENCE / "arena_rank"
FEATURES = ["length", "headers", "lists", "bold"]


@pytest.fixture(scope="module")
def battles():
    frame = pd.read_csv(REF / "battles.csv.gz")
    frame["outcome"] = frame["winner"].map({"model_a": "a", "model_b": "b", "tie": "tie"})
    table = evalmix.read(frame, outcome="outcome", model_a="model_a", model_b="model_b",
                         clusters={"item": "prompt"})
    return frame, table


@pytest.fixture(scope="module")
def ref():
    return json.loads((REF / "reference.json").read_text())


def _by_model(res, estimand="bt_style_controlled"):
    m = res.models
    return m[m["estimand"] == estimand].set_index("model")


@pytest.mark.parametrize("reg", [0.0, 1.0])
def test_equals_arena_rank_contextual_bt(battles, ref, reg):
    """Abilities and style coefficients equal arena-rank's to 1e-4 (reg 0 and its default 1)."""
    frame, table = battles
    res = style_controlled_bt(table, FEATURES, columns=frame, reg=reg,
                              method="CR1" if reg else "CR2")
    r = ref[f"reg={reg:g}"]
    theta = _by_model(res)["estimate"].loc[r["competitors"]].to_numpy()
    assert np.max(np.abs(theta - np.array(r["theta"]))) < 1e-4
    assert np.max(np.abs(res.coefficients["estimate"].to_numpy() - np.array(r["coeffs"]))) < 1e-4
    rating = _by_model(res)["arena_rating"].loc[r["competitors"]].to_numpy()
    assert np.allclose(rating, 1000 + ARENA_SCALE * np.array(r["theta"]), atol=1e-2)


def test_row_sandwich_near_arena_rank_variances(battles, ref):
    """Clustered by battle (rows), CR0 is arena-rank's sandwich: SEs within 1%."""
    frame, table = battles
    res = style_controlled_bt(table, FEATURES, columns=frame, cluster=None, method="CR0")
    r = ref["reg=0"]
    se = _by_model(res)["se"].loc[r["competitors"]].to_numpy()
    se_ref = np.sqrt(np.array(r["variances"])) / ARENA_SCALE
    assert np.allclose(se, se_ref, rtol=0.01)


def test_prompt_clusters_widen_the_length_coefficient(battles):
    """The length effect varies by prompt (simulated, SD 0.5 around 1.5; 10 battles a
    prompt), so clustering by prompt widens its interval (by 7% on these battles)."""
    frame, table = battles
    by_prompt = style_controlled_bt(table, FEATURES, columns=frame)
    by_row = style_controlled_bt(table, FEATURES, columns=frame, cluster=None)
    assert by_prompt.cluster == "item" and by_row.cluster == ""
    se_p = by_prompt.coefficients.set_index("contrast")["se"]
    se_r = by_row.coefficients.set_index("contrast")["se"]
    assert se_p["length"] > 1.05 * se_r["length"]
    c = by_prompt.coefficients.set_index("contrast")
    assert c.loc["length", "lo"] > 0  # longer answers win, and the interval says so
    assert c.loc["lists", "lo"] < 0 < c.loc["lists", "hi"]  # lists were simulated inert


def test_raw_side_is_the_leaderboard_bradley_terry(battles):
    frame, table = battles
    res = style_controlled_bt(table, ["length"], columns=frame, method="CR1")
    board = evalmix.leaderboard(table, estimand="bradley_terry", cluster="item",
                                method="CR1").tidy().set_index("model")
    raw = _by_model(res, "bradley_terry")
    assert np.allclose(raw["estimate"], board.loc[raw.index, "estimate"], atol=1e-6)
    assert np.allclose(raw["se"], board.loc[raw.index, "se"], rtol=1e-5)
    text = str(res)
    assert "Style-controlled Bradley-Terry" in text and "length" in text


def test_arena_rank_live(battles, ref):
    pytest.importorskip("arena_rank")
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset

    frame, table = battles
    feats = frame[["model_a", "model_b", "winner"]].copy()
    for f in FEATURES:
        feats[f] = (frame[f"{f}_a"] - frame[f"{f}_b"]) / (frame[f"{f}_a"] + frame[f"{f}_b"] + 1)
    data = ContextualPairDataset.from_pandas(feats, FEATURES, reweighted=False)
    model = ContextualBradleyTerry(len(data.competitors), len(FEATURES), reg=0.0)
    out = model.compute_ratings_and_cis(data)
    theta = (np.asarray(out["ratings"]) - 1000) * math.log(10) / 400
    ours = _by_model(style_controlled_bt(table, FEATURES, columns=frame))
    assert np.max(np.abs(ours["estimate"].loc[list(out["competitors"])] - theta)) < 1e-4


def test_features_and_errors(battles):
    frame, table = battles
    a = np.array([[1.0], [3.0], [0.0]])
    b = np.array([[3.0], [1.0], [0.0]])
    assert np.allclose(style_features(a, b, normalize=False).ravel(), [-0.4, 0.4, 0.0])
    z = style_features(a, b)
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    with pytest.raises(InvalidOptionError, match="non-negative"):
        style_features(-a, b)
    with pytest.raises(InvalidOptionError, match="tokens_a and tokens_b"):
        style_controlled_bt(table, ["tokens"], columns=frame)
    with pytest.raises(InvalidOptionError, match="CR0 or CR1"):
        style_controlled_bt(table, ["length"], columns=frame, reg=1.0)
    separate = evalmix.read(frame, outcome="outcome", model_a="model_a", model_b="model_b",
                            clusters={"item": "prompt"}, ties="separate")
    with pytest.raises(InvalidOptionError, match="ties='half'"):
        style_controlled_bt(separate, ["length"], columns=frame)


def test_battles_reader_counts_answer_style(tmp_path):
    def conv(text):
        return [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]
    recs = [{"model_a": "x", "model_b": "y", "winner": w, "question_id": f"q{i}",
             "conversation_a": conv("# H\n- a\n- b\n**bold**" + "!" * i),
             "conversation_b": conv("plain " * (i + 1))}
            for i, w in enumerate(["model_a", "model_b", "tie", "model_a"])]
    path = tmp_path / "battles.json"
    path.write_text(json.dumps(recs))
    t = read_battles(path)
    d = t.data.sort_values("row")
    assert d["headers_a"].tolist() == [1.0] * 4 and d["lists_a"].tolist() == [2.0] * 4
    assert d["bold_a"].tolist() == [1.0] * 4 and d["headers_b"].tolist() == [0.0] * 4
    assert d["length_b"].tolist() == [6.0 * (i + 1) for i in range(4)]
    res = style_controlled_bt(t, ["length"], cluster=None, method="CR0")
    assert res.features == ("length",)
    evil = tmp_path / "evil.json"  # a model name with terminal control bytes
    evil.write_text(json.dumps([{**r, "model_a": "x\x1b]0;owned\x07"} for r in recs]))
    text = str(style_controlled_bt(read_battles(evil), ["length"], cluster=None, method="CR0"))
    assert "\x1b" not in text and "\\x1b" in text


def test_report_shows_style_control_beside_raw(battles, tmp_path):
    """analyze() adds the style section (and style_control.csv) for battles with answer
    features; its numbers are style_controlled_bt's."""
    from dataclasses import replace

    frame, _ = battles
    sub = frame[frame["model_a"].isin(["m0", "m1", "m2", "m3"])
                & frame["model_b"].isin(["m0", "m1", "m2", "m3"])].reset_index(drop=True)
    table = evalmix.read(sub, outcome="outcome", model_a="model_a", model_b="model_b",
                         clusters={"item": "prompt"})
    data = table.frame()
    for f in FEATURES:
        for s in ("a", "b"):
            data[f"{f}_{s}"] = sub[f"{f}_{s}"].to_numpy(dtype=float)[data["row"].to_numpy()]
    table = replace(table, data=data)
    rep = evalmix.analyze(table, fast=True, reps=30, seed=1, progress=False,
                          methods=["naive", "CR2"])
    direct = style_controlled_bt(table, FEATURES).tidy()
    assert rep.style_control is not None and rep.length_control is None
    assert np.allclose(rep.style_control["estimate"], direct["estimate"])
    rep.write(tmp_path / "rep")
    assert (tmp_path / "rep" / "style_control.csv").is_file()
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Style-controlled Bradley-Terry" in md and "rank (raw)" in md


def _metadata_records(n: int = 400, seed: int = 5) -> list[dict]:
    """Arena battles carrying FastChat's conv_metadata (ints and dicts of counts, as the
    clean_battle exports hold them) and no texts."""
    rng = np.random.default_rng(seed)
    models = [f"m{i}" for i in range(5)]
    out = []
    for i in range(n):
        a, b = rng.choice(models, 2, replace=False)
        meta = {}
        for side in "ab":
            meta[f"sum_assistant_{side}_tokens"] = int(rng.integers(20, 900))
            meta[f"header_count_{side}"] = {f"h{j}": int(rng.integers(0, 2)) for j in range(1, 7)}
            meta[f"list_count_{side}"] = {"ordered": int(rng.integers(0, 5)),
                                          "unordered": int(rng.integers(0, 5))}
            meta[f"bold_count_{side}"] = {"**": int(rng.integers(0, 4)), "__": 0}
        out.append({"model_a": str(a), "model_b": str(b), "question_id": f"q{i % 80}",
                    "winner": str(rng.choice(["model_a", "model_b", "tie"])),
                    "judge": "arena_user", "conv_metadata": meta})
    return out


def _fastchat_style_block(records: list[dict]) -> np.ndarray:
    """The style columns of FastChat's construct_style_matrices (elo_analysis.py: each
    element an int or a dict summed; (a - b) / (a + b + 1); standardised with the
    population SD), re-expressed here as the reference."""
    names = ["sum_assistant_{}_tokens", "header_count_{}", "list_count_{}", "bold_count_{}"]

    def value(v):
        return v if isinstance(v, int) else sum(v.values())

    a = np.array([[value(r["conv_metadata"][n.format("a")]) for n in names] for r in records],
                 dtype=float)
    b = np.array([[value(r["conv_metadata"][n.format("b")]) for n in names] for r in records],
                 dtype=float)
    d = (a - b) / (a + b + 1.0)
    return (d - d.mean(axis=0)) / d.std(axis=0)


def test_battles_reader_reads_fastchat_conv_metadata(tmp_path):
    """The battles reader turns Arena's conv_metadata into tokens / headers / lists / bold
    of both answers; the style covariates evalmix builds from them equal FastChat's
    construct_style_matrices block (1e-12), and the report's style control uses them
    (tokens first, Arena's length unit)."""
    from evalmix.data.answers import answer_columns
    from evalmix.report.controlled import choose_controlled

    records = _metadata_records()
    path = tmp_path / "clean_battle.json"
    path.write_text(json.dumps(records))
    table = read_battles(path)
    feats = ["tokens", "headers", "lists", "bold"]
    a, b = answer_columns(table, feats)
    rows = table.data["row"].to_numpy()
    ref = _fastchat_style_block(records)[rows]
    assert np.allclose(style_features(a, b), ref, atol=1e-12)
    assert choose_controlled(table) == ("style", feats)
    res = style_controlled_bt(table, feats)
    assert list(res.coefficients["feature"]) == feats
