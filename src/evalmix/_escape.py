r"""One escaping layer per output medium: text from the data is shown, never obeyed.

Model, judge, condition, role and column names come from other people's logs, and
evalmix writes them into files opened in a spreadsheet, a Markdown viewer, a browser and
a terminal, and into plot labels. Every writer passes such text through the function of
its medium here:

- :func:`csv_frame` -- CSV: a string cell a spreadsheet would evaluate as a formula
  (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, or their
  full-width forms) gets a leading single quote, the OWASP defence against CSV
  injection. Numbers written as text (``-0.5``, ``+3``, ``1e-3``) are left alone, and
  numeric columns are never touched; ``escape=False`` writes every cell as it is, for
  machine consumers (``Report.write(out, escape_csv=False)``, ``--no-csv-escape``).
- :func:`md_text`, :func:`md_cell`, :func:`md_code` -- Markdown: no raw HTML (``<``,
  ``>``, ``&`` as entities), no link, image or autolink syntax (``[``, ``]``, ``://``
  and ``www.`` escaped), no emphasis, strike-through or math, and no table syntax (``|``
  escaped, line breaks as spaces); :func:`md_text` also escapes what would start a
  heading, quote or list at the start of a line.
- :func:`html_text` -- HTML: :func:`html.escape` of the visible text.
- :func:`terminal` -- the terminal: control characters (ANSI escape sequences, carriage
  returns, ...) are shown as ``\x1b``-style escapes.
- :func:`literal_text` -- plots: figures drawn with matplotlib's ``text.parse_math`` off,
  so ``$...$`` in a name is not read as TeX (:func:`plot_text` escapes ``$`` for a figure
  that needs mathtext elsewhere, e.g. log-axis tick labels).

In every medium, bidirectional-text controls (``U+202E`` makes ``gpt-\u202e4`` display
as another name), zero-width characters and line separators are shown as ``\u202e``-style
escapes (:func:`visible`); :func:`check_names` warns (:class:`~evalmix.errors.NameWarning`)
about names holding them, and about names that become the same after Unicode NFKC
normalisation.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pandas as pd

from evalmix.errors import NameWarning

__all__ = ["visible", "terminal", "html_text", "md_text", "md_cell", "md_code", "csv_frame",
           "csv_cell", "plot_text", "literal_text", "check_names", "name_problems"]

F = TypeVar("F", bound=Callable[..., Any])

#: Characters that change how text around them is displayed without being seen:
#: bidirectional controls, zero-width characters, the BOM and the line/paragraph separators.
_INVISIBLE = frozenset(
    [0x061C, 0x200B, 0x200C, 0x200E, 0x200F, 0x2028, 0x2029, 0x2060, 0xFEFF]
    + list(range(0x202A, 0x202F)) + list(range(0x2066, 0x206A)))
_CONTROLS = list(range(0x00, 0x20)) + list(range(0x7F, 0xA0))


def _escape_of(cp: int) -> str:
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


_VISIBLE = {cp: _escape_of(cp) for cp in [*_CONTROLS, *_INVISIBLE]}
_TERMINAL = {k: v for k, v in _VISIBLE.items() if k not in (0x09, 0x0A)}
_HIDDEN = re.compile("[" + "".join(re.escape(chr(c)) for c in _VISIBLE) + "]")


def visible(text: object) -> str:
    r"""``text`` with every control and invisible character written as an escape
    (``\x1b``, ``\u202e``); other text unchanged.

    Examples
    --------
    >>> visible("gpt-\u202e4")
    'gpt-\\u202e4'
    """
    s = str(text)
    return s.translate(_VISIBLE) if _HIDDEN.search(s) else s


def terminal(text: object) -> str:
    r"""``text`` safe to print: as :func:`visible`, but line breaks and tabs kept.

    Examples
    --------
    >>> terminal("\x1b]0;owned\x07model")
    '\\x1b]0;owned\\x07model'
    """
    s = str(text)
    return s.translate(_TERMINAL) if _HIDDEN.search(s) else s


def html_text(text: object) -> str:
    """``text`` as HTML element or attribute content: escaped, controls visible.

    Examples
    --------
    >>> html_text("<img src=x onerror=alert(1)>")
    '&lt;img src=x onerror=alert(1)&gt;'
    """
    return html.escape(visible(text), quote=True)


_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
# Markdown punctuation escaped with a backslash (CommonMark lets any ASCII punctuation be
# escaped so): code, emphasis, tables, strike-through, math; ``_`` only where it could open
# or close emphasis (``win_rate`` stays as it is); ``]`` where it would close a link or
# image text (``](``, ``][``), so ``sd[judge]`` stays readable and no link can form (a
# reference definition, ``[x]: url``, needs a ``[`` at the start of a line, escaped by
# :func:`md_text`)
_MD_PUNCT = re.compile(r"([\\`*|~$])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|\](?=[(\[:])")
# bare-URL autolinks of GitHub-flavoured Markdown (``http://...``, ``www.``)
_MD_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?i:(?<=\bwww)(\.))")
# what opens a block at the start of a line: heading, quote, list, thematic break,
# setext underline, indented code is prevented by stripping leading spaces
_MD_BLOCK = re.compile(r"^(?:[#>+=\[-]|\d+(?=[.)]))")


def _md_inline(text: object) -> str:
    s = visible(_LINE_BREAK.sub(" ", str(text)))
    s = _MD_PUNCT.sub(lambda m: "\\" + m.group(0), s)
    s = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(0), s)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_cell(text: object) -> str:
    r"""``text`` as a Markdown table cell: one line, no HTML, no link, image, emphasis or
    table syntax (see the module docstring).

    Examples
    --------
    >>> md_cell("sd[position|judge]")
    'sd[position\\|judge]'
    >>> md_cell("![x](http://evil.example/b.png)")
    '![x\\](http\\://evil.example/b.png)'
    """
    return _md_inline(text)


def md_text(text: object) -> str:
    r"""``text`` as one Markdown paragraph line (or list item, quote): as :func:`md_cell`,
    and nothing at its start opens a heading, quote or list.

    Examples
    --------
    >>> md_text("# <script>x</script>")
    '\\# &lt;script&gt;x&lt;/script&gt;'
    """
    s = _md_inline(text).lstrip(" \t")
    m = _MD_BLOCK.match(s)
    if m is None:
        return s
    at = m.end() if s[:1].isdigit() else 0   # "1." -> "1\.", "#" -> "\#"
    return s[:at] + "\\" + s[at:]


def md_code(text: object) -> str:
    """``text`` as a Markdown code span (literal: nothing in it is markup), one line.

    Examples
    --------
    >>> md_code("a `b` c")
    '`` a `b` c ``'
    """
    s = visible(_LINE_BREAK.sub(" ", str(text)))
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if s.startswith(("`", " ")) or s.endswith(("`", " ")) or runs else ""
    return f"{fence}{pad}{s}{pad}{fence}"


#: first characters a spreadsheet reads as the start of a formula (OWASP, with their
#: full-width forms, which some locales of Excel also evaluate)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    r"""``value`` as a CSV cell a spreadsheet shows as text: a string that would start a
    formula gets a leading ``'``; numbers, numbers written as text and everything else
    are returned unchanged.

    Examples
    --------
    >>> csv_cell('=HYPERLINK("http://x", "y")')
    '\'=HYPERLINK("http://x", "y")'
    >>> csv_cell("-0.5"), csv_cell(-0.5)
    ('-0.5', -0.5)
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START) \
            and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_frame(df: pd.DataFrame, *, escape: bool = True) -> pd.DataFrame:
    """``df`` ready for ``to_csv``: text cells and column names through :func:`csv_cell`
    (a copy; ``df`` itself when nothing needs it or ``escape`` is false).

    Examples
    --------
    >>> csv_frame(pd.DataFrame({"model": ["=1+1", "gpt"], "x": [-0.5, 1.0]})).to_dict("list")
    {'model': ["'=1+1", 'gpt'], 'x': [-0.5, 1.0]}
    """
    if not escape:
        return df
    columns = [csv_cell(c) for c in df.columns]
    text = [i for i, dtype in enumerate(df.dtypes)
            if pd.api.types.is_object_dtype(dtype)
            or isinstance(dtype, pd.StringDtype | pd.CategoricalDtype)]
    changed = {}
    for i in text:
        col = df.iloc[:, i]
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(object)
        new = col.map(csv_cell)
        if not new.equals(col):
            changed[i] = new
    if not changed and columns == list(df.columns):
        return df
    out = df.copy()
    for i, new in changed.items():
        out.isetitem(i, new)
    out.columns = columns
    return out


def plot_text(text: object) -> str:
    r"""``text`` drawn as written by a matplotlib figure that keeps mathtext on: ``$``
    escaped (matplotlib reads ``$...$`` as TeX).

    Examples
    --------
    >>> plot_text("$x$")
    '\\$x\\$'
    """
    return str(text).replace("$", r"\$")


def literal_text(draw: F) -> F:
    r"""Decorate a function that makes a matplotlib figure: every text it creates is
    literal (``text.parse_math`` off while it runs, as each text keeps the setting it was
    made with), so a name such as ``$\foo$`` is drawn as written, not parsed as TeX."""

    @functools.wraps(draw)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _skeleton(name: str) -> str:
    """What a reader sees: NFKC-normalised, invisible characters removed."""
    return unicodedata.normalize("NFKC", "".join(c for c in name if ord(c) not in _INVISIBLE))


def name_problems(names: Iterable[object], what: str = "name") -> list[str]:
    r"""Plain-language problems with ``names`` (model, judge, condition or column names):
    control or bidirectional/invisible characters, and names that look the same
    (equal after NFKC normalisation with invisible characters removed).

    Examples
    --------
    >>> name_problems(["gpt-4", "gpt-\u202e4", "ｇｐｔ-4"], "model")[0][:62]
    "model name 'gpt-\\u202e4' holds control or invisible characters"
    """
    out: list[str] = []
    seen: dict[str, list[str]] = {}
    for raw in dict.fromkeys(str(n) for n in names):
        if _HIDDEN.search(raw):
            out.append(f"{what} name '{visible(raw)}' holds control or invisible characters "
                       "(bidirectional overrides, zero-width or line-control characters) "
                       "that can make it display as another name; it is shown escaped")
        seen.setdefault(_skeleton(raw), []).append(raw)
    for group in seen.values():
        if len(group) > 1:
            shown = ", ".join(f"'{visible(g)}'" for g in group)
            out.append(f"{what} names {shown} look the same (equal after Unicode NFKC "
                       "normalisation) but are different names; rename them if they are "
                       "the same, or make them distinguishable")
    return out


def check_names(names: Iterable[object], what: str = "name", *,
                stacklevel: int = 2) -> list[str]:
    """Warn (:class:`~evalmix.errors.NameWarning`) once per problem of
    :func:`name_problems`; returns the messages."""
    problems = name_problems(names, what)
    for p in problems:
        warnings.warn(p, NameWarning, stacklevel=stacklevel + 1)
    return problems
