# Two set-up commands: `make demo` and `make test`. Both need only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint slow bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/evalmix demo --out demo-report
	@echo "Report written to $(CURDIR)/demo-report/ (open demo-report/report.html or report.md)"

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m "not slow"

slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m slow

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) demo-report
