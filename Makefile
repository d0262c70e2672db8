# Every target a newcomer needs. `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DRILLS := $(BIN)/drills

export PREFECT_SERVER_ANALYTICS_ENABLED := false
export STREAMLIT_BROWSER_GATHER_USAGE_STATS := false

.PHONY: help venv sysdeps lint typecheck test demo down lab-up lab-down lock bench clean

help:
	@echo "make demo   start the local lab and validate its plan"
	@echo "make test   install what the tests need, then ruff, mypy and pytest"
	@echo "make down   stop everything the demo started"
	@echo "make bench  run the benchmarks in bench/"
	@echo "make lock   re-pin constraints.txt from a fresh resolve"

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

sysdeps:
	./scripts/sysdeps.sh

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

test: sysdeps venv lint typecheck
	$(BIN)/pytest

demo: venv
	$(DRILLS) lab up
	$(DRILLS) plan validate .lab/plan.yaml
	$(DRILLS) lab status

down: lab-down

lab-up: venv
	$(DRILLS) lab up

lab-down: venv
	$(DRILLS) lab down

bench: venv sysdeps
	$(BIN)/python -m bench

# Re-resolve the ranges in pyproject.toml and pin the result for reproducible installs.
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	.venv-lock/bin/python -m pip install -q -e '.[test]'
	.venv-lock/bin/python -m pip freeze --exclude-editable > constraints.txt
	rm -rf .venv-lock

clean:
	rm -rf $(VENV) .lab .pytest_cache .mypy_cache .ruff_cache
