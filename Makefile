# `make demo` and `make test` are the whole set-up on a fresh machine: each creates .venv
# when it is missing and installs what it needs (a stamp file per extras set keeps reruns fast).
# `make demo` runs the real control plane on the embedded default (SQLite, local processes,
# four fake GPUs; no GPU or torch needed): a two-worker job admitted, run, succeeded, and the
# environment each replica saw; then a preemption with checkpoint and resume, followed live.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TEST_EXTRAS := dev,torch,sim,k8s,ray,experiments
# Two workers: the tests that start processes on one, the in-process tests on the other.
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: demo test lint fmt install install-dev bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[$(TEST_EXTRAS)]"
	touch $@ $(VENV)/.installed-base

install: $(VENV)/.installed-base

install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/muster demo

lint: install-dev
	$(BIN)/ruff check muster tests benchmarks examples
	$(BIN)/ruff format --check muster tests benchmarks examples

fmt: install-dev
	$(BIN)/ruff format muster tests benchmarks examples
	$(BIN)/ruff check --fix muster tests benchmarks examples

test: lint
	$(BIN)/pytest $(PYTEST_ARGS)

bench: install-dev
	@for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
