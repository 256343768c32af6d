"""The report answers first (issue 26, item 5): a ranked table of the headline contrasts
and one plain sentence on the first screen of report.html (1280 x 900, measured in
headless Chromium) and at the top of report.md; one interval per quantity; findings
that agree with their tables; figures whose titles and labels fit."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, chromium

import evalmix
from evalmix.report.answer import MAX_ANSWER_ROWS, answer_frame, answer_sentence

LOGS = FIXTURES / "logs"
#: A 1 x 1 PNG standing in for figures a test does not need drawn.
TINY_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVO"
            "RK5CYII=")
NO_FIGURES = {"leaderboard": TINY_PNG}
#: The first screen: a laptop browser window.
SCREEN_W, SCREEN_H = 1280, 900


def _analyze(table, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.analyze(table, fast=True, reps=199, seed=1, progress=False, **kw)


@pytest.fixture(scope="module")
def mtbench_report():
    """The bundled MT-Bench judgments (30 models vs vicuna-13b-v1.3, 3 judges), the
    naive and recommended rows only (the answer and the leaderboard use no others)."""
    from evalmix.datasets import load_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = load_table("mtbench_position_bias")
    return _analyze(table, methods=["naive", "CR2"])


@pytest.fixture(scope="module")
def alpaca_table():
    from evalmix.data.readers import read_log

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_log(LOGS / "alpaca_eval" / "results", format="alpaca_eval")


@pytest.fixture(scope="module")
def alpaca_report(alpaca_table):
    return _analyze(alpaca_table)


# ---------------------------------------------------------------- the answer table
def test_answer_rows_are_the_headline_ranked(mtbench_report):
    """Every headline contrast once, best first, with the headline's own numbers."""
    a, h = answer_frame(mtbench_report), mtbench_report.headline
    assert len(a) == len(h) == 30
    assert list(a["estimate"]) == sorted(a["estimate"], reverse=True)
    assert list(a["rank"]) == list(range(1, 31))
    merged = a.merge(h, on=["estimand", "contrast"], suffixes=("", "_h"))
    assert len(merged) == 30
    for col in ("estimate", "lo", "hi", "naive_lo", "naive_hi"):
        np.testing.assert_array_equal(merged[col], merged[f"{col}_h"])
    # the words follow the recommended interval: beats iff it lies above 0.5
    beats = merged["verdict"].str.startswith("beats")
    loses = merged["verdict"].str.startswith("loses")
    assert (beats == (merged["lo"] > 0.5)).all() and (loses == (merged["hi"] < 0.5)).all()
    assert (merged["verdict"].str.startswith("no clear") == ~(beats | loses)).all()
    assert a.iloc[0]["contrast"] == "gpt-4 vs vicuna-13b-v1.3"


def test_answer_sentence_counts_the_table(mtbench_report):
    a = answer_frame(mtbench_report)
    up = int(a["verdict"].str.startswith("beats").sum())
    down = int(a["verdict"].str.startswith("loses").sum())
    same = int(a["verdict"].str.startswith("no clear").sum())
    text = answer_sentence(mtbench_report)
    top = a.iloc[0]
    assert text.startswith(f"Against vicuna-13b-v1.3, {up} of 30 models win more often "
                           f"than they lose, {down} lose more often and {same} cannot")
    assert f"gpt-4 leads with a win rate of {top['estimate']:.3f} " \
           f"[{top['lo']:.3f}, {top['hi']:.3f}]" in text
    assert "CR2 clustered by item, 80 clusters" in text  # categories are strata


def test_markdown_opens_with_the_answer(mtbench_report, alpaca_report):
    for rep in (mtbench_report, alpaca_report):
        md = rep.to_markdown()
        lines = md.splitlines()
        assert lines[0] == "# evalmix report"
        assert lines[2] == answer_sentence(rep)
        assert lines[4] == rep.recommendation["statement"]
        assert "--sampled" in lines[4] and md.count(lines[4]) == 1
        table_at = lines.index(next(ln for ln in lines if ln.startswith("| # |")))
        method_at = lines.index("## How these intervals were made")
        assert table_at == 6 and table_at < method_at
        assert md.index("Recommended interval:") > md.index("## How these intervals")


def test_answer_table_is_capped_and_says_where_the_rest_are(mtbench_report):
    from dataclasses import replace

    h = mtbench_report.headline
    more = pd.concat([h, h.assign(contrast=h["contrast"] + "-copy")], ignore_index=True)
    big = replace(mtbench_report, headline=more)
    page = big.to_html(figures=NO_FIGURES)
    answer = page[page.index("id='answer'"):page.index("</table>", page.index("id='answer'"))]
    assert answer.count("<tr") == MAX_ANSWER_ROWS + 1   # + the header row
    assert f"{60 - MAX_ANSWER_ROWS} more contrasts: see the headline table below" in page


def test_alpaca_answer_names_the_baseline(alpaca_report):
    text = answer_sentence(alpaca_report)
    assert text.startswith("Against gpt4_1106_preview, ")
    a = answer_frame(alpaca_report)
    assert list(a["estimand"]) == ["win_rate", "win_rate", "difference"]


def _scores(outcome: str):
    rng = np.random.default_rng(1)
    d = pd.DataFrame({"item": np.repeat(np.arange(40), 3).astype(str),
                      "condition": np.tile(["a", "b", "c"], 40),
                      "score": rng.normal(5, 1, 120)})
    d["y"] = (d["score"] > 5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if outcome == "y":
            return evalmix.read(d, outcome="y", clusters={"item": "item"})
        return evalmix.read(d, outcome="score", condition="condition",
                            clusters={"item": "item"})


def test_numeric_means_have_no_null_and_the_differences_are_counted():
    """Means of a numeric score have no null: no decision, and the sentence counts the
    differences between conditions instead (none is 'not estimable')."""
    rep = _analyze(_scores("score"), methods=["naive", "CR2"])
    a = answer_frame(rep)
    means = a[a["estimand"] == "mean"]
    assert len(means) == 3 and (means["verdict"] == "no null to test (a score has no "
                                                   "natural zero)").all()
    diffs = a[a["estimand"] == "difference"]
    text = answer_sentence(rep)
    above = int((diffs["lo"] > 0).sum())
    below = int((diffs["hi"] < 0).sum())
    assert text.startswith(f"Of 3 differences, {above} lie above 0, {below} below and "
                           f"{3 - above - below} are too close to call; ")
    assert "not estimable" not in text
    top = means.iloc[0]
    assert (f"{top['contrast']} leads with a mean of {top['estimate']:.3f} "
            f"[{top['lo']:.3f}, {top['hi']:.3f}]") in text


def test_one_contrast_is_one_clause():
    rep = _analyze(_scores("y"), methods=["naive", "CR2"])
    r = answer_frame(rep).iloc[0]
    side = ("above" if r["lo"] > 0.5 else "below" if r["hi"] < 0.5
            else "no clear difference from")
    assert side in r["verdict"] and r["verdict"].endswith("0.5")
    assert answer_sentence(rep) == (
        f"overall: mean {r['estimate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}], "
        f"{r['verdict']} (95% interval, CR2 clustered by item, 40 clusters).")


# ---------------------------------------------------------------- one interval per quantity
def test_leaderboard_rows_equal_the_headline_intervals(mtbench_report):
    """A model's win rate has one interval in the report: the leaderboard's per-model
    rows are the headline's (CR2 by item, logit scale, the same t critical
    value), to rounding."""
    lb = mtbench_report.leaderboard.set_index("model")
    h = mtbench_report.headline
    h = h.assign(model=h["contrast"].str.rpartition(" vs ")[0]).set_index("model")
    assert (lb["scale"] == "logit").all()
    for col in ("estimate", "lo", "hi"):
        np.testing.assert_allclose(lb[col].reindex(h.index), h[col], rtol=0, atol=1e-12)
    iv = mtbench_report.intervals
    cr2 = iv[(iv["method"] == "CR2") & (iv["cluster"] == "item")
             & (iv["estimand"] == "win_rate")]
    cr2 = cr2.assign(model=cr2["contrast"].str.rpartition(" vs ")[0]).set_index("model")
    np.testing.assert_allclose(lb["se"].reindex(cr2.index), cr2["se"], rtol=1e-10)
    np.testing.assert_allclose(lb["df"].reindex(cr2.index), cr2["df"], rtol=1e-10)


def test_leaderboard_labels_say_which_intervals_are_simultaneous(mtbench_report):
    md = mtbench_report.to_markdown()
    section = md[md.index("## Leaderboard"):]
    assert "95% interval (per model)" in section
    assert "Each model's 95% interval is its own" in section
    assert "simultaneous interval (max-t)" in section
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # 8 clusters: the few-clusters warning
        text = str(evalmix.leaderboard(mtbench_report_table(), cluster="item_group",
                                       seed=1, draws=1000))
    assert "each model's 95% interval is its own" in text
    assert "differences between models use 95% simultaneous intervals (max-t" in text


def mtbench_report_table():
    from evalmix.datasets import load_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_table("mtbench_position_bias")


def test_leaderboard_bounded_interval_closed_form():
    """Per-model rows of a win-rate board: expit(logit(p) -+ t se / (p (1 - p)))."""
    from scipy import special, stats

    from evalmix.sim import pairwise_judges

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = pairwise_judges(12, 4, 2, 2, seed=11).table()
        board = evalmix.leaderboard(table, cluster="scenario", seed=1, reps=500).tidy()
    for r in board.itertuples():
        q = stats.t.ppf(0.975, r.df)
        half = q * r.se / (r.estimate * (1 - r.estimate))
        assert r.lo == pytest.approx(special.expit(special.logit(r.estimate) - half),
                                     abs=1e-12)
        assert r.hi == pytest.approx(special.expit(special.logit(r.estimate) + half),
                                     abs=1e-12)


# ---------------------------------------------------------------- findings vs tables
def test_one_judge_findings_agree_with_the_position_table():
    """Issue 26: on FastChat's own one-judge MT-Bench file (gpt-4_pair.jsonl) the report
    said "no judge's first-shown win rate differs from 0.5" while its table showed
    0.648 [0.581, 0.714] (the pooled row, the only one, was filtered out)."""
    from evalmix.data.readers import read_log
    from evalmix.report.render import _findings

    path = FIXTURES / "upstream" / "fastchat"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = read_log(path / "gpt-4_pair.jsonl")
    rep = _analyze(table, methods=["naive", "CR2"])
    p = rep.position
    assert list(p["judge"]) == ["(all judges)"]
    r = p.iloc[0]
    # the CR1 interval of a proportion on the logit scale (by hand from the CR1 SE of the
    # decisive first-shown wins by item, t with G - 1 df): inside (0, 1), asymmetric
    from scipy import stats
    from scipy.special import expit, logit

    from evalmix.compare.position import mean_cr1

    dec = table.data[table.data["verdict"].isin(["a", "b"]) & table.data["a_first"].notna()]
    won = ((dec["verdict"] == "a") == (dec["a_first"] == 1.0)).to_numpy(dtype=float)
    est, se, _, _, g = mean_cr1(won, dec["item"].to_numpy())
    half = stats.t.ppf(0.975, g - 1) * se / (est * (1 - est))
    assert r["first_shown_win_rate"] == pytest.approx(est, rel=1e-12)
    assert (r["first_shown_lo"], r["first_shown_hi"]) == pytest.approx(
        (expit(logit(est) - half), expit(logit(est) + half)), rel=1e-12)
    assert (round(r["first_shown_win_rate"], 3), round(r["first_shown_lo"], 3),
            round(r["first_shown_hi"], 3)) == (0.648, 0.579, 0.711)
    lines = _findings(rep)
    assert len(lines) == 1 and lines[0][0] == "finding"
    assert ("the judge prefers the answer shown first: first-shown win rate 0.648 "
            "[0.579, 0.711]") in lines[0][1]
    md = rep.to_markdown()
    assert "no judge" not in md and "0.648 [0.579, 0.711]" in md


def test_unbiased_findings_quote_the_interval(mtbench_report):
    from dataclasses import replace

    from evalmix.report.render import _findings

    p = mtbench_report.position
    one = p[p["judge"] == "(all judges)"].assign(first_shown_lo=0.45, first_shown_hi=0.55,
                                                 first_shown_win_rate=0.5)
    text = _findings(replace(mtbench_report, position=one))[0][1]
    assert "0.500 [0.450, 0.550] does not differ from 0.5" in text
    fair = p.assign(first_shown_lo=0.45, first_shown_hi=0.55)
    assert "nor does the pooled one" in _findings(replace(mtbench_report, position=fair))[0][1]
    biased = _findings(mtbench_report)
    assert any("gemini-pro prefers the answer shown second" in t for _, t in biased)


# ---------------------------------------------------------------- figures
def _boxes(fig):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for name, artist in (("title", ax.title), ("left title", ax._left_title),
                             ("xlabel", ax.xaxis.label), ("legend", ax.get_legend())):
            if artist is not None and (name == "legend" or artist.get_text()):
                out.append((name, artist.get_window_extent(r)))
    return out


@pytest.mark.parametrize("title", [
    "oasst-sft-4-pythia-12b-epoch-3.5 vs gpt4_1106_preview (weighted annotator) "
    "- controlled_win_rate",
    "x" * 150 + " vs y - win_rate"])
def test_forest_title_of_a_long_fragile_contrast_fits(title):
    from evalmix.report.figures import forest

    rows = pd.DataFrame({
        "estimand": "controlled_win_rate", "contrast": "x", "method": ["naive", "CR2", "CR2"],
        "cluster": ["", "item", "item_group"], "estimate": 0.6, "lo": [0.55, 0.45, 0.52],
        "hi": [0.65, 0.7, 0.68], "decision": [True, False, True], "fragile": True,
        "null": 0.5, "source": "design"})
    fig = forest(rows, title=title, recommended=("CR2", "item_group"))
    (name, box), = [(n, b) for n, b in _boxes(fig) if "title" in n]
    x0, y0, x1, y1 = fig.bbox.extents
    assert x0 <= box.x0 and box.x1 <= x1 and y0 <= box.y0 and box.y1 <= y1, (box, fig.bbox)
    assert "[FRAGILE: methods disagree]" in fig.axes[0]._left_title.get_text()


@pytest.mark.parametrize("n_judges", [1, 3])
def test_position_plot_labels_do_not_overlap(n_judges):
    from evalmix.report.figures import position_plot

    pos = pd.DataFrame({
        "judge": ["gpt-4-0613", "gemini-pro", "(all judges)"][-n_judges:],
        "first_shown_win_rate": 0.6, "first_shown_lo": 0.5, "first_shown_hi": 0.7,
        "flip_rate": 0.2, "consistency": 0.6})
    fig = position_plot(pos)
    boxes = _boxes(fig)
    assert any(n == "legend" for n, _ in boxes)
    for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2):
        assert not b1.overlaps(b2), f"{n1} overlaps {n2}"
    x0, y0, x1, y1 = fig.bbox.extents
    for n, b in boxes:
        assert x0 <= b.x0 and b.x1 <= x1 and y0 <= b.y0 and b.y1 <= y1, n


@pytest.mark.parametrize("which", ["mtbench", "alpaca"])
def test_every_report_figure_keeps_its_text_inside(which, mtbench_report,
                                                   alpaca_folder_report):
    """Titles, axis labels and legends of every figure of a report lie inside the image
    and do not overlap one another."""
    from evalmix.report.figures import figure_list

    rep = mtbench_report if which == "mtbench" else alpaca_folder_report
    figures = figure_list(rep)
    assert len(figures) >= 5
    for name, draw in figures:
        fig = draw()
        fig.set_dpi(110)
        boxes = _boxes(fig)
        x0, y0, x1, y1 = fig.bbox.extents
        for n, b in boxes:
            assert x0 - 1 <= b.x0 and b.x1 <= x1 + 1 and y0 - 1 <= b.y0 and b.y1 <= y1 + 1, (
                name, n, b, fig.bbox)
        for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2):
            assert not b1.overlaps(b2), (name, n1, n2)
        import matplotlib.pyplot as plt

        plt.close(fig)


# ---------------------------------------------------------------- the page in a browser


_MEASURE = """<script>window.addEventListener('load', function () {
  var t = document.getElementById('answer');
  var r = t ? t.getBoundingClientRect() : null;
  var p = document.createElement('pre');
  p.id = 'evalmix-measure';
  p.textContent = JSON.stringify({
    scrollWidth: document.documentElement.scrollWidth,
    answerBottom: r ? r.bottom + window.scrollY : null,
    widest: Math.max.apply(null, Array.prototype.map.call(
      document.querySelectorAll('body > *'), function (e) {
        return e.getBoundingClientRect().right; }))});
  document.body.appendChild(p);
});</script>"""


def measure(page: str, tmp_path: Path) -> dict:
    """Layout numbers of ``page`` rendered at 1280 x 900 in headless Chromium."""
    cmd = chromium("the first-screen and overflow checks of report.html need a browser")
    path = tmp_path / "measured.html"
    path.write_text(page.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    out = subprocess.run(
        [*cmd, "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--hide-scrollbars", f"--window-size={SCREEN_W},{SCREEN_H}",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r'<pre id="evalmix-measure">(.*?)</pre>', out.stdout, re.S)
    assert found, out.stdout[-2000:]
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def alpaca_folder_report():
    """AlpacaEval's own results folder (3 models x 805 instructions, a nested duplicate
    file and the baseline-vs-itself file; tests/fixtures/upstream)."""
    from evalmix.data.readers import read_log

    folder = FIXTURES / "upstream" / "alpaca_eval"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = read_log(folder / "results")
    return _analyze(table, methods=["naive", "CR1", "CR2", "wild"])


@pytest.mark.parametrize("which", ["mtbench", "alpaca"])
def test_first_screen_holds_the_answer_without_overflow(which, mtbench_report,
                                                        alpaca_folder_report, tmp_path):
    """The answer table ends above 900 px and nothing is wider than 1280 px."""
    rep = mtbench_report if which == "mtbench" else alpaca_folder_report
    if which == "alpaca":
        rep.write(tmp_path / "report")          # with its figures
        page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    else:
        page = rep.to_html(figures=NO_FIGURES)          # 30 forest plots cost seconds; tables only
    m = measure(page, tmp_path)
    assert m["answerBottom"] is not None and m["answerBottom"] <= SCREEN_H, m
    assert m["scrollWidth"] <= SCREEN_W and m["widest"] <= SCREEN_W, m


def test_the_old_page_overflowed(mtbench_report, tmp_path):
    """The check can fail: a headline table of nowrap cells without the scroll rule
    runs past 1280 px."""
    page = mtbench_report.to_html(figures=NO_FIGURES).replace(
        "table{display:block;max-width:100%;overflow-x:auto}", "")
    assert measure(page, tmp_path)["scrollWidth"] > SCREEN_W


# ---------------------------------------------------------------- warnings
def test_cli_warnings_are_one_line_without_source(tmp_path):
    """Reader warnings reach the terminal as ``evalmix: warning: ...``, never as
    Python's ``file.py:123: Category: ...`` followed by evalmix's source line."""
    import subprocess
    import sys

    folder = LOGS / "alpaca_eval" / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "evalmix.cli", "report", str(folder), "--fast", "--quiet",
         "--reps", "99", "--seed", "1", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(ln.startswith("evalmix: warning: ") for ln in lines), proc.stderr
    assert all(ln.startswith("evalmix: ") for ln in lines), proc.stderr
    assert ".py:" not in proc.stderr and "Warning:" not in proc.stderr


def test_main_restores_the_warning_display():
    import warnings as w

    from evalmix.cli import main

    before = w.showwarning
    assert main(["report", "/no/such/file.csv", "--outcome", "y", "--quiet",
                 "--out", "/tmp/evalmix-no-such-out"]) == 2
    assert w.showwarning is before


# ---------------------------------------------------------------- the API agrees
def test_unnamed_win_rate_on_a_baseline_table_is_refused_with_the_fix(alpaca_table,
                                                                     alpaca_report):
    """interval(t, "win_rate") on AlpacaEval annotations would score the baseline; it
    is refused, and the named call gives the report's own number."""
    from evalmix.errors import EvalmixError

    with pytest.raises(EvalmixError, match=r"model='m1' is its win rate against "
                                           r"'gpt4_1106_preview'"):
        evalmix.interval(alpaca_table, "win_rate")
    h = alpaca_report.headline.set_index("contrast")
    rec = alpaca_report.recommendation
    for m in ("m1", "m2"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = evalmix.interval(alpaca_table, "win_rate", model=m, method=rec["method"],
                                 cluster=rec["cluster"])
        row = h.loc[f"{m} vs gpt4_1106_preview"]
        assert r.contrast == f"{m} vs gpt4_1106_preview"
        assert (r.estimate, r.lo, r.hi) == pytest.approx(
            (row["estimate"], row["lo"], row["hi"]), abs=1e-12)
    # the baseline's own rate stays available by name (y scores model_a, the baseline)
    base = evalmix.interval(alpaca_table, "win_rate", model="gpt4_1106_preview",
                            method="naive")
    assert base.estimate == pytest.approx(np.mean(alpaca_table.y), abs=1e-12)


def test_first_shown_interval_stays_inside_zero_one():
    """A judge whose first-shown answer wins 23 of 24 decisive verdicts over 6 items: the
    Wald interval of the mean (0.958 +- t5 * SE) passes 1; the logit-scale one does not."""

    from evalmix.compare.position import mean_cr1, position_bias

    rows = []
    for i in range(6):
        for k in range(4):
            first = "a" if k % 2 == 0 else "b"
            lost = i == 0 and k == 0
            winner = ("b" if first == "a" else "a") if lost else first
            rows.append({"item": f"q{i}", "model_a": "m1", "model_b": "m2",
                         "first_shown": first, "winner": winner, "rep": k})
    table = evalmix.read(pd.DataFrame(rows), outcome="winner", model_a="model_a",
                         model_b="model_b", first_shown="first_shown",
                         clusters={"item": "item"}, replicate="rep", order_design="single")
    r = position_bias(table, judge=None, cluster="item").iloc[0]
    won = np.r_[np.zeros(1), np.ones(23)]
    est, _, wald_lo, wald_hi, g = mean_cr1(won, np.repeat(np.arange(6), 4))
    assert g == 6 and wald_hi > 1
    assert r["first_shown_win_rate"] == pytest.approx(23 / 24)
    assert 0 < r["first_shown_lo"] < est < r["first_shown_hi"] < 1
