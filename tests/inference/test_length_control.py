"""AlpacaEval 2's length-controlled win rate (evalmix.inference.length_control).

Upstream files: tests/fixtures/upstream/alpaca_eval/lc/ (built by
tests/reference/upstream/make_lc_fixture.py from tatsu-lab/alpaca_eval @ cd543a14,
Apache-2.0): the annotations of the 56 models the public snapshot holds, the answer
lengths of the two gamed baselines (whose annotations the snapshot lacks), the
``glm_preference`` upstream's GLM wrote into two annotation files, the AlpacaEval 2
leaderboard CSV and upstream's fitted GLM weights.

Two inputs of upstream's GLM are read from Hugging Face, not the repository:

- the instruction difficulty (``instruction_difficulty.csv``): recovered exactly from the
  two files that keep ``glm_preference = expit(b + g d_i)`` with their models' weights
  (:func:`_upstream_difficulty`; the two recoveries agree to 1e-7);
- the gamed baselines' annotations (``df_gamed.csv``; their files in the repository are
  over the snapshot's 4 MiB limit): stood in for by upstream's own fitted preferences of
  the two gamed baselines (their weights, their real answer lengths), which give the
  regularised fits nearly the same sufficient statistics (:func:`_gamed_rows`).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from conftest import FIXTURES
from scipy.optimize import least_squares
from scipy.special import expit, logit

import evalmix
from evalmix.data.readers import read_alpaca_eval
from evalmix.errors import InvalidOptionError
from evalmix.inference.glm_fits import estimate_difficulty
from evalmix.inference.length_control import (
    _oriented,
    _std_tanh,
    lc_glm,
    length_controlled_win_rate,
)

LC = FIXTURES / "upstream" / "alpaca_eval" / "lc"
BASELINE = "gpt4_1106_preview"
GAMED = (f"{BASELINE}_verbose", f"{BASELINE}_concise")
#: upstream's weight columns: length slope, difficulty slope, intercept
W_COLS = ["np.tanh(std_delta_len)", "instruction_difficulty",
          "not_gamed_baseline.astype(float)"]


def _table(ann: pd.DataFrame, item: str = "instruction") -> evalmix.EvalTable:
    """The annotations as the AlpacaEval reader makes them: model_a the baseline, y the
    probability that it was preferred (read as verdicts, then the probabilities put
    back, as read_alpaca_eval does). ``item``: ``"instruction"`` (the instruction, as
    the reader) or ``"index"`` (the position in the file, as upstream's GLM)."""
    ann = ann.copy()
    ann["y"] = 2.0 - ann["preference"].replace({0.0: 1.5})
    ann = ann[ann["y"].notna()].reset_index(drop=True)
    ann["baseline"] = BASELINE
    ann["verdict"] = np.where(ann["y"] > 0.5, "a", np.where(ann["y"] < 0.5, "b", "tie"))
    table = evalmix.read(ann, outcome="verdict", model_a="baseline", model_b="model",
                         clusters={"item": item}, ties="half")
    data = table.frame()
    data["y"] = ann["y"].to_numpy()[data["row"].to_numpy()]
    for c in ("length_a", "length_b"):
        data[c] = ann[c].to_numpy(dtype=float)[data["row"].to_numpy()]
    return replace(table, data=data, outcome_type="proportion")


def _lc(result) -> pd.Series:
    tidy = result.tidy()
    return tidy[tidy["estimand"] == "lc_win_rate"].set_index("model")["estimate"] * 100


@pytest.fixture(scope="module")
def upstream():
    ann = pd.read_csv(LC / "annotations.csv.gz")
    lb = pd.read_csv(LC / "weighted_alpaca_eval_gpt4_turbo_leaderboard.csv", index_col=0)
    w = pd.read_csv(LC / "baseline_gpt4_1106_preview.csv", index_col=0)
    w = w[~w.index.duplicated(keep="last")]
    return ann, lb, w


@pytest.fixture(scope="module")
def fitted(upstream):
    """evalmix's default: the instruction as the item, difficulty estimated, no gamed rows."""
    ann, _, _ = upstream
    return length_controlled_win_rate(_table(ann), reps=2, seed=1)


def _upstream_difficulty(w: pd.DataFrame) -> tuple[pd.Series, float]:
    """Upstream's instruction difficulty from the ``glm_preference`` of two models:
    ``d_i = (logit p_i - b) / g`` with each model's weights. Returns the first model's
    recovery (by instruction) and the largest gap between the two."""
    glm = pd.read_csv(LC / "glm_preference.csv.gz")
    out = []
    for model, part in glm.groupby("model", sort=False):
        b, g = w.loc[model, W_COLS[2]], w.loc[model, W_COLS[1]]
        out.append(pd.Series((logit(part["glm_preference"].to_numpy()) - b) / g,
                             index=part["instruction"].to_numpy()).sort_index())
    return out[0], float(np.max(np.abs(out[0] - out[1])))


def _calibrated_difficulty(fitted, lb: pd.DataFrame, w: pd.DataFrame):
    """evalmix's difficulty on upstream's location and scale: ``a + c d`` with (a, c) making
    upstream's weights reproduce the 56 models' leaderboard LC (least squares).

    Returns the calibrated difficulty by instruction, (a, c) and the LC that upstream's
    weights predict with it for every model of the weights file.
    """
    d = fitted.difficulty.sort_index(key=lambda s: s.astype(int)).to_numpy()
    assert d.size == 805
    w = w[w.index.isin(lb.index)]
    b, g = w[W_COLS[2]].to_numpy(), w[W_COLS[1]].to_numpy()
    target = lb.loc[w.index, "length_controlled_winrate"].to_numpy()

    def lc(dd: np.ndarray) -> np.ndarray:
        return 100 * expit(b[:, None] + g[:, None] * dd[None, :]).mean(axis=1)

    cal = w.index.isin(_lc(fitted).index)
    assert cal.sum() == 56
    fit = least_squares(lambda p: (lc(p[0] + p[1] * d) - target)[cal], [0.0, 1.0])
    d_up = fit.x[0] + fit.x[1] * d
    err = pd.Series(lc(d_up) - target, index=w.index)
    return pd.Series(d_up, index=np.arange(805)), fit.x, err, cal


def _gamed_rows(ann: pd.DataFrame, w: pd.DataFrame, d: pd.Series) -> pd.DataFrame:
    """Annotation rows for the two gamed baselines: their real answer lengths (the
    snapshot's model_outputs.json) and, as preference, upstream's own fitted GLM
    prediction for them, ``expit(s t + g d + b)`` with their weights from the weights file.

    A logistic GLM sees its targets only through ``X' w y``; the gamed rows enter every
    model's fit with the columns ``(t, d, 0)``, and the gamed baseline's own fit makes
    ``sum (y - yhat) (t, d)`` zero up to its regulariser rows, so the fitted preferences
    carry almost the same information as the missing annotations.
    """
    gl = pd.read_csv(LC / "gamed_lengths.csv.gz")
    base = ann.groupby("instruction")["length_a"].first()
    out = []
    for model, part in gl.groupby("model", sort=False):
        idx = part["instruction"].to_numpy()
        delta = base.loc[idx].to_numpy(float) - part["length"].to_numpy(float)
        t = np.tanh(delta / delta.std(ddof=1))
        co = w.loc[model, W_COLS].to_numpy()
        p = expit(co[0] * t + co[1] * d.loc[idx].to_numpy() + co[2])
        out.append(pd.DataFrame({"model": model, "index": idx, "instruction": idx,
                                 "preference": 1.0 + p, "length_a": base.loc[idx].to_numpy(),
                                 "length_b": part["length"].to_numpy()}))
    return pd.concat(out, ignore_index=True)


@pytest.fixture(scope="module")
def difficulty(upstream) -> pd.Series:
    return _upstream_difficulty(upstream[2])[0]


@pytest.fixture(scope="module")
def reproduced(upstream, difficulty):
    """Upstream's pipeline on the repository's files: the position in the file as the
    instruction (as upstream's ``reset_index()``), upstream's difficulty, the gamed
    baselines' rows, regularised with weight 0.2 / 2 (``gamed="auto"``)."""
    ann, _, w = upstream
    full = pd.concat([ann, _gamed_rows(ann, w, difficulty)], ignore_index=True)
    return length_controlled_win_rate(_table(full, item="index"), reps=2, seed=1,
                                      difficulty=difficulty.set_axis(
                                          difficulty.index.astype(str)))


def test_upstream_difficulty_from_glm_preference_gives_the_leaderboard(upstream, difficulty):
    """The difficulty recovered from the two files agrees between them to 1e-7, is zero at
    instruction 0 (the reference level of upstream's joint fit), and with upstream's own
    weights gives the leaderboard's LC: the verbose / concise pair (64.30 raw -> LC 51.58,
    22.92 -> 41.90) to 1e-8 points, 189 of the 199 models to 1e-4, all within 0.2. For the
    models with annotations upstream averages over the rows of their file (fewer than 805
    in six files); so averaged, 55 of the 56 agree to 1e-4, and NullModel (the adversarial
    constant answer, #414) to 0.13: its saved weights are not quite those of its
    leaderboard entry."""
    ann, lb, w = upstream
    _, gap = _upstream_difficulty(w)
    assert gap < 1e-7
    assert difficulty.size == 805 and abs(difficulty.loc[0]) < 1e-8
    w = w[w.index.isin(lb.index)]
    b, g = w[W_COLS[2]].to_numpy(), w[W_COLS[1]].to_numpy()
    pred = 100 * expit(b[:, None] + g[:, None] * difficulty.to_numpy()[None, :]).mean(axis=1)
    err = pd.Series(pred, index=w.index) - lb.loc[w.index, "length_controlled_winrate"]
    assert err.size == 199
    assert err[list(GAMED)].abs().max() < 1e-8
    assert lb.loc["gpt4_1106_preview_verbose", "win_rate"] == pytest.approx(64.30, abs=0.01)
    assert (err.abs() < 1e-4).sum() == 189 and err.abs().max() < 0.2
    own = {m: 100 * expit(w.loc[m, W_COLS[2]] + w.loc[m, W_COLS[1]]
                          * difficulty.loc[part["index"]].to_numpy()).mean()
           - lb.loc[m, "length_controlled_winrate"]
           for m, part in ann.groupby("model") if m in w.index}
    off = {m: v for m, v in own.items() if abs(v) >= 1e-4}
    assert len(own) == 56 and list(off) == ["NullModel"] and abs(off["NullModel"]) < 0.15


def test_evalmix_difficulty_against_upstreams(upstream, fitted, difficulty):
    """evalmix's own difficulty estimate (the joint fit on the 56 models) against
    upstream's: correlation 0.87; put on upstream's location and scale by two constants
    fitted to the 56 models' LC through upstream's weights, it predicts the other 143
    models' LC within 0.6 points and the verbose / concise pair within 0.3."""
    _, lb, w = upstream
    d = fitted.difficulty.sort_index(key=lambda s: s.astype(int)).to_numpy()
    assert np.corrcoef(d, difficulty.to_numpy())[0, 1] == pytest.approx(0.87, abs=0.01)
    _, (a, c), err, cal = _calibrated_difficulty(fitted, lb, w)
    held = err[~cal]
    assert held.size == 143
    assert err[list(GAMED)].abs().max() < 0.3
    assert held.abs().max() < 0.6
    assert err[cal].abs().max() < 0.35
    assert c == pytest.approx(0.9, abs=0.05) and abs(a) < 0.15


def test_upstream_pipeline_reproduces_the_leaderboard(upstream, reproduced):
    """Upstream's regularised GLM refitted on the repository's annotations with upstream's
    difficulty and the gamed baselines' stand-in rows: every one of the 56 models within
    0.2 points of the leaderboard's LC (mean difference 0.04; the deliberately gamed
    gpt4_gamed 0.13, 15.5 without the gamed rows), the gamed baselines' own LC (51.58 and
    41.90 on the leaderboard; their rows are the stand-in) within 1.2."""
    _, lb, _ = upstream
    assert reproduced.gamed == GAMED
    err = (_lc(reproduced) - lb["length_controlled_winrate"].dropna()).dropna()
    own = err.drop(list(GAMED))
    assert own.size == 56
    assert own.abs().max() < 0.2
    assert abs(own.mean()) < 0.1
    assert err[list(GAMED)].abs().max() < 1.2


def test_upstream_lrcv_fit_equals_maximum_likelihood(upstream, difficulty):
    """Upstream fits by scikit-learn's LogisticRegressionCV (L1, liblinear, C by 5-fold
    cross-validation on the duplicated probability-target rows); evalmix by maximum
    likelihood. On the same rows (gamed baselines included) the LC agree within 0.1
    point for three of four models and 0.15 for the adversarial gpt4_gamed: the penalty
    that cross-validation keeps is small beside 2,400 weighted rows."""
    sk = pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    def loss(y, q, true_prob, true_sample_weight):
        p = np.where(y == 1, true_prob, 1 - true_prob)
        q = np.clip(q, 1e-15, 1 - 1e-15)
        return -np.mean((p * np.log(q) + (1 - p) * np.log(1 - q)) * true_sample_weight)

    def lrcv(X, p, w):  # upstream's fit_LogisticRegressionCV with probability targets
        n = p.size
        groups, prob, sw = np.r_[np.arange(n), np.arange(n)], np.r_[p, 1 - p], np.r_[w, w]
        with warnings.catch_warnings(), sk.config_context(enable_metadata_routing=True):
            warnings.simplefilter("ignore")  # sklearn 1.8+: 'penalty' is deprecated
            scorer = make_scorer(loss, response_method="predict_proba",
                                 greater_is_better=False).set_score_request(
                true_sample_weight=True, true_prob=True)
            model = LogisticRegressionCV(cv=GroupKFold(n_splits=5), scoring=scorer,
                                         random_state=123, penalty="l1", solver="liblinear",
                                         fit_intercept=False)
            model.set_fit_request(sample_weight=True)
            model.fit(np.vstack([X, X]), np.r_[np.ones(n), np.zeros(n)], sample_weight=prob * sw,
                      groups=groups, true_sample_weight=sw, true_prob=prob)
        return model.coef_[0]

    ann, _, w = upstream
    keep = ["claude-2", "vicuna-13b", "gpt4_gamed", "phi-2", *GAMED]
    full = pd.concat([ann[ann["model"].isin(keep)], _gamed_rows(ann, w, difficulty)],
                     ignore_index=True)
    dat, _ = _oriented(_table(full, item="index"), None, None)
    diff = difficulty.loc[dat.items.astype(int)].to_numpy()
    gamed = [int(np.searchsorted(dat.models, g)) for g in GAMED]
    lc, coef, _ = lc_glm(dat, diff, gamed, 0.2)
    t = _std_tanh(dat.delta, dat.model, dat.models.size)
    g_rows = np.flatnonzero(np.isin(dat.model, gamed))
    gaps = {}
    for m, name in enumerate(dat.models):
        if name in GAMED:
            continue
        own = np.flatnonzero(dat.model == m)
        rows = np.r_[own, g_rows]
        X = np.column_stack([t[rows], diff[dat.item[rows]],
                             np.r_[np.ones(own.size), np.zeros(g_rows.size)]])
        beta = lrcv(X, dat.y[rows], np.r_[np.ones(own.size), np.full(g_rows.size, 0.1)])
        ref = expit(beta[2] + beta[1] * diff[dat.item[own]]).mean()
        gaps[name] = 100 * abs(lc[m] - ref)
    # the L1 penalty shrinks the steepest length slope most: gpt4_gamed 0.15 points
    assert max(gaps.values()) < 0.2, gaps
    assert sorted(gaps) == sorted(["claude-2", "vicuna-13b", "gpt4_gamed", "phi-2"])
    assert sum(g < 0.1 for g in gaps.values()) >= 3, gaps


def test_evalmix_default_refit_near_the_leaderboard(upstream, fitted):
    """evalmix's own default on the 56 models: the instruction as the item (the reader's
    choice), difficulty estimated from them, no gamed rows (the snapshot has none), plain
    maximum likelihood. Without upstream's regulariser: median difference 0.60 points, 35
    of 56 within 1; the far ones have steep length slopes that the regulariser pulls in
    (gpt4_gamed, a deliberately gamed model, 15.5 points off; 0.13 with the gamed rows
    and upstream's difficulty, test above).
    """
    _, lb, _ = upstream
    tidy = fitted.tidy()
    lc = _lc(fitted)
    raw = tidy[tidy["estimand"] == "win_rate"].set_index("model")["estimate"] * 100
    board = lb.dropna(subset=["length_controlled_winrate"])
    common = lc.index.intersection(board.index)
    assert len(common) == 56 and lc.size == 57  # text_davinci_003 has no AlpacaEval 2 LC
    # the raw win rate is the leaderboard's exactly
    assert np.allclose(raw[common], lb.loc[common, "win_rate"], atol=1e-3)
    diff = (lc[common] - lb.loc[common, "length_controlled_winrate"]).abs()
    assert diff.median() < 0.65
    assert (diff < 1).sum() >= 35
    assert diff.drop("gpt4_gamed").max() < 6
    assert fitted.gamed == ()


def test_instruction_alignment_of_the_snapshot(upstream):
    """Six annotation files lack one to three annotations, so their positions are not the
    instructions' (upstream's GLM looks the difficulty up by position); the reader's item
    is the instruction, whose baseline answer then matches for every row."""
    ann, _, _ = upstream
    shifted = ann.loc[ann["index"] != ann["instruction"], "model"].unique()
    assert sorted(shifted) == sorted(["phi-2", "text_davinci_001", "minotaur-13b",
                                      "gpt35_turbo_instruct", "alpaca-7b_verbose",
                                      "alpaca-7b_concise"])
    assert ann.groupby("instruction")["length_a"].nunique().max() == 1
    assert ann.groupby("index")["length_a"].nunique().max() > 1


def test_glm_matches_statsmodels_with_gamed_rows(upstream):
    """The regularised per-model GLM equals statsmodels' weighted binomial GLM."""
    ann, _, _ = upstream
    keep = ["alpaca-7b", "alpaca-7b_verbose", "alpaca-7b_concise", "phi-2"]
    table = _table(ann[ann["model"].isin(keep) & (ann["index"] < 300)])
    dat, _ = _oriented(table, None, None)
    rng = np.random.default_rng(0)
    diff = rng.normal(size=dat.n_items)
    gamed = [int(np.searchsorted(dat.models, m)) for m in ("alpaca-7b_verbose",
                                                           "alpaca-7b_concise")]
    lc, coef, _ = lc_glm(dat, diff, gamed, 0.2)
    t = _std_tanh(dat.delta, dat.model, dat.models.size)
    for m in range(dat.models.size):
        own = np.flatnonzero(dat.model == m)
        grows = np.concatenate([np.flatnonzero(dat.model == g) for g in gamed])
        rows = np.r_[own, grows]
        X = np.column_stack([t[rows], diff[dat.item[rows]],
                             np.r_[np.ones(own.size), np.zeros(grows.size)]])
        w = np.r_[np.ones(own.size), np.full(grows.size, 0.1)]
        ref = sm.GLM(dat.y[rows], X, family=sm.families.Binomial(), var_weights=w).fit(
            tol=1e-12)
        assert np.allclose(coef[m], ref.params, atol=1e-7)
        assert lc[m] == pytest.approx(expit(ref.params[2] + ref.params[1]
                                            * diff[dat.item[own]]).mean(), abs=1e-9)


def test_difficulty_matches_statsmodels_joint_fit(upstream):
    """The Schur-complement Newton fit equals the dummy-coded GLM (centred effects)."""
    ann, _, _ = upstream
    models = ["phi-2", "vicuna-13b", "claude-2", "gemma-7b-it", "alpaca-7b", "claude",
              "jina-chat", "NullModel"]
    table = _table(ann[ann["model"].isin(models) & (ann["index"] < 60)])
    dat, _ = _oriented(table, None, None)
    k, n = dat.models.size, dat.n_items
    t = _std_tanh(dat.delta, dat.model, k)
    d = estimate_difficulty(dat.y, dat.model, dat.item, t, n)
    X = np.column_stack([np.eye(k)[dat.model], np.eye(k)[dat.model] * t[:, None],
                         np.eye(n)[dat.item][:, 1:]])
    ref = sm.GLM(dat.y, X, family=sm.families.Binomial()).fit(tol=1e-12)
    d_ref = np.r_[0.0, ref.params[2 * k:]]
    assert ref.converged
    # the ridge of 1e-8 on the instruction effects moves them by < 1e-4 here
    assert np.max(np.abs(d - (d_ref - d_ref.mean()))) < 1e-4


def test_given_difficulty_and_errors(upstream):
    ann, _, _ = upstream
    table = _table(ann[ann["model"].isin(["phi-2", "vicuna-13b"]) & (ann["index"] < 80)])
    items = np.unique(table.data["item"].astype(str))
    given = pd.Series(np.linspace(-1, 1, items.size), index=items)
    res = length_controlled_win_rate(table, difficulty=given, reps=20, seed=3)
    assert res.difficulty.attrs["estimated"] is False
    assert np.allclose(res.difficulty.loc[items], given.to_numpy())
    rows = res.tidy()
    assert set(rows["estimand"]) == {"lc_win_rate", "win_rate"}
    assert (rows["lo"] <= rows["estimate"]).all() and (rows["estimate"] <= rows["hi"]).all()
    assert "Length-controlled win rate" in str(res)
    with pytest.raises(InvalidOptionError, match="no value for"):
        length_controlled_win_rate(table, difficulty=given.iloc[1:], reps=2)
    with pytest.raises(InvalidOptionError, match="not models of the table"):
        length_controlled_win_rate(table, gamed=["nope"], reps=2)
    bare = replace(table, data=table.frame().drop(columns=["length_a", "length_b"]))
    with pytest.raises(InvalidOptionError, match="length_a and length_b"):
        length_controlled_win_rate(bare, reps=2)


def test_reader_gives_answer_lengths(tmp_path):
    recs = [{"instruction": f"q{i}", "output_1": "x" * (10 + i), "generator_1": "base",
             "output_2": "y" * (30 - i), "generator_2": "m", "annotator": "a",
             "preference": 1.0 + (i % 3) / 2} for i in range(6)]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(recs))
    t = read_alpaca_eval(path)
    d = t.data.sort_values("row")
    assert d["length_a"].tolist() == [10.0 + i for i in range(6)]
    assert d["length_b"].tolist() == [30.0 - i for i in range(6)]


def test_report_shows_lc_beside_raw(upstream, tmp_path):
    """analyze() adds the LC section (and length_control.csv) for AlpacaEval tables."""
    ann, _, _ = upstream
    table = _table(ann[ann["model"].isin(["phi-2", "vicuna-13b", "claude-2"])
                       & (ann["index"] < 120)])
    rep = evalmix.analyze(table, fast=True, reps=30, seed=1, progress=False,
                          methods=["naive", "CR2"])
    rep.write(tmp_path / "rep")
    rows = rep.length_control
    assert rows is not None and set(rows["model"]) == {"phi-2", "vicuna-13b", "claude-2"}
    assert int(rows["reps"].iloc[0]) == 30
    assert (tmp_path / "rep" / "length_control.csv").is_file()
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Length-controlled win rate" in md and "raw win rate" in md
    assert "Length-controlled win rate" in (tmp_path / "rep" / "report.html").read_text()
    no_lengths = replace(table, data=table.frame().drop(columns=["length_a", "length_b"]))
    assert evalmix.analyze(no_lengths, fast=True, reps=30, seed=1, progress=False,
                           methods=["naive"]).length_control is None


def test_gamed_auto_finds_the_baselines_variants(upstream):
    """gamed='auto' regularises towards <baseline>_verbose / _concise (upstream's pair),
    each weighted 0.2 / 2, and changes the fit; gamed=None leaves them ordinary models."""
    ann, _, _ = upstream
    sub = ann[ann["model"].isin(["alpaca-7b_verbose", "alpaca-7b_concise", "phi-2"])
              & (ann["index"] < 200)].copy()
    sub["model"] = sub["model"].replace({"alpaca-7b_verbose": f"{BASELINE}_verbose",
                                         "alpaca-7b_concise": f"{BASELINE}_concise"})
    table = _table(sub)
    reg = length_controlled_win_rate(table, reps=2, seed=1)
    plain = length_controlled_win_rate(table, gamed=None, reps=2, seed=1)
    assert reg.gamed == (f"{BASELINE}_verbose", f"{BASELINE}_concise")
    assert plain.gamed == ()
    lc = {r.tidy().query("model == 'phi-2' and estimand == 'lc_win_rate'")["estimate"].item()
          for r in (reg, plain)}
    assert len(lc) == 2


def test_alpaca_eval_difficulty_from_annotation_files(upstream, tmp_path):
    """evalmix.data.readers.alpaca_eval.alpaca_eval_difficulty on annotation files shaped
    as upstream writes them (glm_preference kept): the difficulty by instruction text,
    with which upstream's weights give the verbose / concise pair's LC to 1e-8, and which
    length_controlled_win_rate takes as difficulty=."""
    from evalmix.data.readers.alpaca_eval import alpaca_eval_difficulty

    _, lb, w = upstream
    glm = pd.read_csv(LC / "glm_preference.csv.gz")
    for model, part in glm.groupby("model"):
        folder = tmp_path / model / "weighted_alpaca_eval_gpt4_turbo"
        folder.mkdir(parents=True)
        recs = [{"instruction": f"instruction {r.instruction}", "generator_1": BASELINE,
                 "generator_2": model, "output_1": "x", "output_2": "y", "preference": 1.5,
                 "glm_preference": r.glm_preference} for r in part.itertuples()]
        (folder / "annotations.json").write_text(json.dumps(recs))
    d = alpaca_eval_difficulty(tmp_path, LC / "baseline_gpt4_1106_preview.csv")
    assert d.size == 805 and d.index[0].startswith("instruction ")
    for m in GAMED:
        lc = 100 * expit(w.loc[m, W_COLS[2]] + w.loc[m, W_COLS[1]] * d.to_numpy()).mean()
        assert lc == pytest.approx(lb.loc[m, "length_controlled_winrate"], abs=1e-8)
    bad = w.copy()
    bad.loc["vicuna-7b-v1.5", W_COLS[1]] *= 1.01
    with pytest.raises(evalmix.EvalmixError, match="recovered difficulties differ"):
        alpaca_eval_difficulty(tmp_path, bad)
