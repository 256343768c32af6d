"""tests/reference/README.md indexes every generator of a frozen file, and `make
references` runs every seeded or R generator the index does not mark as run by hand."""

from __future__ import annotations

import re

from conftest import REFERENCE, ROOT

GENERATORS = sorted(p for p in REFERENCE.glob("*/*") if p.suffix in (".py", ".R"))


def test_every_generator_is_indexed():
    index = (REFERENCE / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w.-]+\.(?:py|R))`", index))
    missing = [str(p.relative_to(REFERENCE)) for p in GENERATORS if p.name not in named]
    assert GENERATORS and not missing, f"not in tests/reference/README.md: {missing}"


def test_make_references_lists_only_existing_generators():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    listed = re.findall(r"[\w/]+\.(?:py|R)\b", makefile.split("references:")[0])
    listed = [f for f in listed if "/" in f and not f.startswith(("tests/", "benchmarks/"))]
    assert listed, "the Makefile's REF_PY / REF_R lists were not found"
    absent = [f for f in listed if not (REFERENCE / f).is_file()]
    assert not absent, f"Makefile names generators that do not exist: {absent}"
