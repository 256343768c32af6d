"""The built documentation site (``make docs`` -> ``site/``) renders and is self-contained.

Run after the build: ``make docs-check`` (CI) sets ``EVALMIX_DOCS_SITE``, and then a
missing site is a failure. In a plain ``pytest`` run without a built site the tests skip
and say so. The browser test loads the pages in headless Chromium with every host name
unresolvable, so a page that needs the network to show its headings fails; it is skipped,
with a message, only where no Chromium is installed.
"""

from __future__ import annotations

import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import ROOT, chromium

_ENV = os.environ.get("EVALMIX_DOCS_SITE")
SITE = Path(_ENV) if _ENV else ROOT / "site"

#: page -> headings (h1/h2 text) it must show
EXPECTED = {
    "index.html": ["evalmix documentation"],
    "getting-started.html": ["Getting started", "The 30-second example"],
    "which-interval.html": ["Which interval should I report?", "Step 1: which factors are sampled?"],
    "api/intervals.html": ["Intervals", "interval", "IntervalResult", "design_effect"],
    "api/data.html": ["Reading data", "read", "EvalTable", "DesignSummary"],
    "api/datasets.html": ["Bundled data sets", "load", "load_table"],
    "notebooks/quickstart.html": ["Quickstart: read a pairwise judge table and describe its design"],
    "notebooks/mtbench_position_bias.html": [
        "MT-Bench: position bias by judge, and what AB/BA swapping buys"],
    "notebooks/crossed_audit.html": [
        "A crossed judge audit with known truth: every interval family side by side"],
    "notebooks/planning_benchmark.html": [
        "Planning a benchmark: how many questions, judgments and judges?"],
}
NOTEBOOKS = [p for p in EXPECTED if p.startswith("notebooks/")]


class _Page(HTMLParser):
    """Headings, ids, outbound references and notebook outputs of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []      # <a href>
        self.assets: list[str] = []     # script/img/iframe src, link href
        self.outputs = 0                # executed notebook output areas
        self._heading: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag in ("h1", "h2"):
            self._heading = []
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("script", "img", "iframe", "source") and a.get("src"):
            self.assets.append(a["src"])
        if tag == "link" and a.get("href"):
            self.assets.append(a["href"])
        if "jp-OutputArea-output" in (a.get("class") or ""):
            self.outputs += 1

    def handle_data(self, data):
        if self._heading is not None:
            self._heading.append(data)

    def handle_endtag(self, tag):
        if tag in ("h1", "h2") and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()).rstrip("¶ ").strip())
            self._heading = None


def _has(headings: list[str], heading: str) -> bool:
    """API headings carry a label after the name ("EvalTable dataclass")."""
    return any(h == heading or h.startswith(heading + " ") for h in headings)


def _site() -> Path:
    if not (SITE / "index.html").exists():
        if _ENV:
            pytest.fail(f"EVALMIX_DOCS_SITE={_ENV} has no index.html: run `make docs` first")
        pytest.skip(f"documentation site not built ({SITE}): run `make docs` (CI: make docs-check)")
    return SITE


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_page_has_its_headings(name):
    page = _parse(_site() / name)
    for heading in EXPECTED[name]:
        assert _has(page.headings, heading), f"{name}: no heading {heading!r} in {page.headings}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_were_executed(name):
    page = _parse(_site() / name)
    assert page.outputs >= 5, f"{name}: {page.outputs} output cells (was it executed?)"
    text = (_site() / name).read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" not in text


def test_api_reference_covers_every_public_name():
    import evalmix

    site = _site()
    ids = set()
    for page in (site / "api").glob("*.html"):
        ids |= _parse(page).ids
    # mkdocstrings gives every documented object an id of its full dotted path
    documented = {i.rsplit(".", 1)[-1] for i in ids if i.startswith("evalmix.")}
    public = {n for n in evalmix.__all__ if not n.startswith("_") and n != "sim"}
    missing = public - documented
    assert not missing, f"public names without an API entry: {sorted(missing)}"


def test_api_tables_show_signature_defaults_and_no_raw_roles():
    """docs/hooks: defaults from the signature (not numpydoc's first choice); no ':func:'."""
    site = _site()
    html = (site / "api" / "intervals.html").read_text(encoding="utf-8")
    row = re.search(r"<code>method</code>.*?</tr>", html, re.S)
    assert row is not None
    cells = re.findall(r"<td>(.*?)</td>", row.group(0), re.S)
    assert "&#39;CR2&#39;" in cells[-1], f"interval's method default shown as {cells[-1]!r}"
    for page in (site / "api").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        raw = re.findall(r":(?:func|mod|class|meth|attr):<code>", text)
        assert not raw, f"{page.name}: Sphinx roles left verbatim: {raw[:3]}"


def test_pages_load_nothing_from_the_network_and_links_resolve():
    site = _site()
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 20
    external, broken = [], []
    for path in pages:
        page = _parse(path)
        for ref in page.assets:
            if urlsplit(ref).scheme or ref.startswith("//"):
                external.append(f"{path.relative_to(site)}: {ref}")
        if path.name == "404.html":
            continue   # served at any missing path, so MkDocs writes its links from the root
        for ref in page.links:
            parts = urlsplit(ref)
            if parts.scheme or ref.startswith(("//", "#")) or not parts.path:
                continue
            target = (path.parent / parts.path).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {ref}")
    assert not external, "pages load external assets:\n" + "\n".join(external)
    assert not broken, "links to missing files:\n" + "\n".join(broken)


@pytest.mark.parametrize("name", ["index.html", "api/intervals.html",
                                  "notebooks/crossed_audit.html"])
def test_chromium_renders_page_offline(name, tmp_path):
    site = _site()
    exe = chromium("the HTML checks of the built site above still ran")
    cmd = [*exe, "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--host-resolver-rules=MAP * ~NOTFOUND",   # no network: every name unresolvable
           f"--user-data-dir={tmp_path}", "--virtual-time-budget=5000", "--dump-dom",
           (site / name).as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = _Page()
    dom.feed(out.stdout)
    for heading in EXPECTED[name]:
        assert _has(dom.headings, heading), f"{name} in Chromium: no {heading!r} in {dom.headings}"
    # the theme's JavaScript (a local asset) ran: it marks <html> with js-focus-visible,
    # which the static file does not have
    assert "js-focus-visible" in out.stdout, f"{name}: the theme's JavaScript did not run"
    assert "js-focus-visible" not in (site / name).read_text(encoding="utf-8")
