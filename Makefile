# Two set-up commands: `make demo` and `make test`. Both need only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint slow bench docs docs-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@ $(VENV)/.installed

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev,docs]"
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/evalmix demo --out demo-report
	@echo "Report written to $(CURDIR)/demo-report/ (open demo-report/report.html or report.md)"

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m "not slow"

slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m slow

# style (ruff), types (mypy) and the layer contracts of pyproject.toml (import-linter)
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src
	$(BIN)/lint-imports --no-cache

# the documentation site in site/ (strict: a broken link, a missing API reference, a docstring
# error or a notebook cell that raises fails the build; notebooks/*.py are executed;
# EVALMIX_DOCS_CACHE=true reuses notebook outputs whose source is unchanged, for local edits)
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the built site renders (headless Chromium when installed) and loads nothing from the network
docs-check: $(VENV)/.installed-docs
	EVALMIX_DOCS_SITE=$(CURDIR)/site $(BIN)/python -m pytest -q tests/test_docs_site.py

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) demo-report site
