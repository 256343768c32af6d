# Two set-up commands: `make demo` and `make test`. Both need only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint slow docs-tables references bench docs docs-check clean

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

# the quick loop while editing: no simulation studies and no MCMC (small chains, but the
# largest share of `make test`'s time); `make test` before landing
test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m "not slow and not mcmc"

# the simulation studies (coverage, recovery, power; about an hour on 2 cores): run by
# .ci/slow on its own schedule and before a release, never beside other heavy work
slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m slow -p no:randomly

# the studies' tables in docs/ rewritten from the same code and seeds (the slow tests
# check, without EVALMIX_WRITE_DOCS, that the docs hold exactly what they compute)
docs-tables: $(VENV)/.installed-dev
	EVALMIX_WRITE_DOCS=1 $(BIN)/python -m pytest -q -m slow -p no:randomly \
		tests/inference/test_coverage.py tests/plan/test_headline_coverage.py tests/plan/test_dstudy.py \
		tests/humans/test_humans_ppi.py

# every frozen reference of tests/reference/ (README.md there indexes them) made again:
# the seeded data, then the R fits that read it; those that need ../shared/data or an R
# package not installed are skipped with a message. Shows what changed.
REF := tests/reference
REF_PY := bootstrap/make_data.py bootstrap/make_compare_data.py design/make_data.py \
	gtheory/make_brennan.py humans/ppi_cr2.py letters/make_boards.py models/make_crossed_binary.py \
	models/make_ordinal_scores.py models/make_sparse_design.py sandwich/make_data.py \
	upstream/upstream_reference.py models/make_crossed_slopes.py models/make_mtbench_slopes.py \
	bootstrap/make_custom_data.py models/make_gaussian_slopes.py models/make_gaussian_singular.py
REF_R := bootstrap/boot_reference.R bootstrap/compare_reference.R design/icc_reference.R \
	humans/ppi_cr2.R letters/letters.R models/fit_reference.R models/fit_sparse.R \
	plan/cr2_intercept.R sandwich/reference.R models/fit_slopes.R models/fit_mtbench_slopes.R models/fit_reml_boundary.R \
	bootstrap/custom_reference.R models/fit_reml_singular.R models/fit_penalized.R
REF_SHARED_R := gtheory/reml_jtj.R models/fit_mtbench.R models/fit_pandalm.R models/fit_reml_slopes.R
references: $(VENV)/.installed-dev
	@command -v Rscript >/dev/null || { echo "make references needs R (Rscript)"; exit 1; }
	@set -e; for f in $(REF_PY); do echo "python $(REF)/$$f"; $(BIN)/python $(REF)/$$f; done
	@set -e; for f in $(REF_R); do echo "Rscript $(REF)/$$f"; Rscript $(REF)/$$f; done
	@if Rscript -e 'quit(status = !requireNamespace("ordinal", quietly = TRUE))'; then \
		echo "Rscript $(REF)/models/fit_ordinal.R"; Rscript $(REF)/models/fit_ordinal.R; \
	else echo "skipped $(REF)/models/fit_ordinal.R: R package ordinal not installed"; fi
	@if [ -d ../shared/data ]; then set -e; \
		echo "python $(REF)/datasets/build_datasets.py"; $(BIN)/python $(REF)/datasets/build_datasets.py; \
		for f in $(REF_SHARED_R); do echo "Rscript $(REF)/$$f"; Rscript $(REF)/$$f; done; \
	else echo "skipped datasets/build_datasets.py and $(REF_SHARED_R): no ../shared/data"; fi
	@echo "changed frozen files (review before committing):"; git status --short $(REF) src/evalmix/datasets

# style (ruff), types (mypy) and the layer contracts of pyproject.toml (import-linter)
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src
	$(BIN)/lint-imports --no-cache
	$(BIN)/lint-imports --no-cache importlinter-types.toml  # type-only imports counted

# the documentation site in site/ (strict: a broken link, a missing API reference, a docstring
# error or a notebook cell that raises fails the build; notebooks/*.py are executed;
# EVALMIX_DOCS_CACHE=true reuses notebook outputs whose source is unchanged, for local edits)
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the built site renders (headless Chromium when installed) and loads nothing from the network
docs-check: $(VENV)/.installed-docs
	EVALMIX_DOCS_SITE=$(CURDIR)/site $(BIN)/python -m pytest -q tests/package/test_docs_site.py

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) demo-report site
