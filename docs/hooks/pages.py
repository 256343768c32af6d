"""MkDocs hook: keep notebook pages offline; render Sphinx roles in docstrings.

nbconvert's page template loads MathJax and Mermaid from cdnjs. The notebooks use neither,
and the site must work without network, so both tags are removed from every page.

The docstrings use Sphinx roles (``:func:`evalmix.read```), which mkdocstrings shows
verbatim; each becomes an optional cross-reference (a link when the target is on an API
page, plain code otherwise), resolved by mkdocs-autorefs after this hook.
"""

from __future__ import annotations

import re

_MATHJAX = re.compile(r'<script src="https?://[^"]*mathjax[^"]*">\s*</script>', re.I)
_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?cdnjs[^<]*mermaid'
                      r'(?:(?!</script>).)*</script>', re.I | re.S)


_ROLE = re.compile(r":(?:py:)?(?:func|mod|class|meth|attr|data|exc|obj):"
                   r"<code>~?([\w.]+)(\(\))?</code>")


def _autoref(m: re.Match) -> str:
    target = m.group(1)
    return f'<autoref optional identifier="{target}"><code>{target}{m.group(2) or ""}</code></autoref>'


def on_page_content(html: str, **kwargs: object) -> str:
    html = _MERMAID.sub("", _MATHJAX.sub("", html))
    return _ROLE.sub(_autoref, html)
