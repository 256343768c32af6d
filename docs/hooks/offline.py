"""MkDocs hook: keep notebook pages offline.

nbconvert's page template loads MathJax and Mermaid from cdnjs. The notebooks use neither,
and the site must work without network, so both tags are removed from every page.
"""

from __future__ import annotations

import re

_MATHJAX = re.compile(r'<script src="https?://[^"]*mathjax[^"]*">\s*</script>', re.I)
_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?cdnjs[^<]*mermaid'
                      r'(?:(?!</script>).)*</script>', re.I | re.S)


def on_page_content(html: str, **kwargs: object) -> str:
    return _MERMAID.sub("", _MATHJAX.sub("", html))
