# Every target a newcomer needs. `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
# The interpreter .venv is made from: the system's /usr/bin/python3 when it is 3.11 or later
# and can make a venv, else the first python3 on PATH. A distribution's CPython is built with
# profile-guided and link-time optimisation; one built from source without
# --enable-optimizations (pyenv's default) cost `make test` about 10% more CPU here: 1,480
# to 1,530 CPU-s in four runs against 1,270 to 1,460 (and 7% on test_drill.py alone, run by
# turns). So the pins in constraints.txt hold for Debian 12's Python 3.11.2
# (pymdown-extensions 13 would need 3.11.5). `make venv PYTHON=python3.12` takes another;
# an existing .venv is kept as it is.
SYSTEM_PYTHON = $(shell /usr/bin/python3 -c 'import ensurepip, sys; assert sys.version_info >= (3, 11); print(sys.executable)' 2>/dev/null)
PYTHON ?= $(or $(SYSTEM_PYTHON),python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Test servers from the npm registry (package.json: Azurite, the Azure Storage emulator).
NODE_STAMP := node_modules/.installed-stamp
DRILLS := $(BIN)/drills

export PREFECT_SERVER_ANALYTICS_ENABLED := false
export STREAMLIT_BROWSER_GATHER_USAGE_STATS := false
export NO_MKDOCS_2_WARNING := 1
# Python writes its bytecode caches (__pycache__/, git-ignored). An environment that sets
# PYTHONDONTWRITEBYTECODE would have every process compile drills anew: the suite starts
# some 400 Python processes, and the modules of `drills run` take 2.5 CPU-s to import
# without the caches, 0.8 with them (tests/test_repository.py checks this line).
unexport PYTHONDONTWRITEBYTECODE
# Parallel test workers: most of the suite waits on servers rather than computing, so more
# workers than cores pay off. The tests marked `serial` are timed against the machine's load;
# they run in a pytest session of their own, SERIAL_WORKERS files at a time (the long ones
# mostly wait, on a lease period or a held fault), beside the other session, which runs at
# the lower CPU priority TEST_NICE: the serial tests get a core the moment they want one,
# and the rest of the suite takes what they leave (they use about 0.9 of 2 cores, for the
# two minutes or so that they take).
TEST_WORKERS ?= 5
SERIAL_WORKERS ?= 3
TEST_NICE ?= 10
# Only the files that mark tests `serial` are collected for that run (collecting all the
# others costs each serial worker ~10 s of CPU).
SERIAL_TEST_FILES = $(shell grep -rl --include='test_*.py' 'mark\.serial' tests)

.PHONY: help venv sysdeps lint typecheck test test-caches demo serve down lab-up lab-down lock bench screenshots docs clean

help:
	@echo "make demo         start the lab and a local Prefect server, run a whole drill as a flow run"
	@echo "make ui           the dashboard (in lab mode while the lab runs)"
	@echo "make down         stop everything the demo started"
	@echo "make test         install what the tests need, lint, then pytest with the typecheck beside it"
	@echo "                  (on TEST_WORKERS=5 parallel workers at nice TEST_NICE=10, and beside them"
	@echo "                  the tests marked serial on SERIAL_WORKERS=3)"
	@echo "make serve        start a local Prefect server, the drills deployments and a worker"
	@echo "make lab-up       start the local lab only (two stand-in sites on loopback)"
	@echo "make lab-down     stop the local lab"
	@echo "make lint         ruff, the format check and the import contracts"
	@echo "make typecheck    mypy"
	@echo "make test-caches  collect the suite once and import the servers it starts, writing the"
	@echo "                  bytecode caches the test workers read (part of make test)"
	@echo "make typecheck-beside  mypy in the background, its report to TYPECHECK_LOG=file (part of"
	@echo "                  make test, which waits for it and prints the report)"
	@echo "make docs         serve the docs site (docs/, mkdocs.yml) on http://127.0.0.1:8000"
	@echo "make screenshots  re-take the dashboard screenshots in docs/screenshots"
	@echo "make bench        run the benchmarks in bench/"
	@echo "make lock         re-pin constraints.txt from a fresh resolve"
	@echo "make venv         create .venv (system Python 3.11+ or PYTHON=...), install drills, test extras, Azurite"
	@echo "make sysdeps      install the Debian packages the lab and the tests need (as root)"
	@echo "make clean        remove the venv, caches, and the state of the lab, the local server and the default history (.drills)"

# uv installs the pinned packages (pip took 30 to 40 s of a fresh clone's `make test` to
# resolve and unpack them, uv takes about 6). It takes the system's certificates, as pip does
# here (--native-tls), and writes no bytecode: the processes that import a module write its
# cache, and `make test` writes those the tests need first (test-caches).
UV_VERSION := 0.13.9
UV_INSTALL := $(BIN)/uv pip install --quiet --native-tls --python $(BIN)/python
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==$(UV_VERSION)
	$(UV_INSTALL) --upgrade pip
	$(UV_INSTALL) -c constraints.txt -e '.[test]'
	touch $(STAMP)

# The Node packages, pinned by package-lock.json: loadtest (the load probe's generator) and
# Azurite (the Azure Storage emulator the tests start).
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(NODE_STAMP)

venv: $(STAMP) $(NODE_STAMP)
	@:

sysdeps:
	./scripts/sysdeps.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --num-workers 2

# uv and npm install side by side: they share nothing, and what checks the code needs only the
# Python packages, so it starts as soon as they are in, beside npm: the lint, the typecheck,
# and the bytecode and assertion-rewrite caches that the test workers read (otherwise the
# workers would each compile the same modules at once: ~9 CPU-s apiece).
#
# mypy (34 CPU-s) runs in the background from then on, at the lowest CPU priority, beside
# the tests too. It takes what the others leave: one core of two while the cache collection
# ends alone (some 12 s), then the tenth of the two cores that the tests leave idle while
# they wait on their servers, and it no longer holds them back. It runs in one process: its
# parallel workers, starved at that priority, miss their start-up handshake ("Failed to
# establish connection with worker"). Its report is printed at the end, and `make test`
# fails if it fails.
#
# The two pytest sessions run side by side. The serial one writes its report to a file of its
# own, shown after the other's; its workers take the port ranges after the other's
# (DRILLS_TESTS_FIRST_SLOT, tests/conftest.py). `make test` fails if either session fails.
# Ctrl-C reaches both sessions; if `make test` ends before the serial one (a signal to the
# shell alone), it interrupts that session on its way out, so none runs on unseen.
PYTEST_DIST = --dist loadfile --no-loadscope-reorder
test: sysdeps
	@typecheck_log=$$(mktemp -t drills-typecheck.XXXXXX); \
	trap 'kill $$(cat "$$typecheck_log.pid" 2>/dev/null) 2>/dev/null; \
		test -z "$$serial" || kill -INT $$serial 2>/dev/null; rm -f "$$typecheck_log"* "$$serial_log"' EXIT; \
	trap 'exit 130' INT TERM; \
	$(MAKE) --no-print-directory -j3 --output-sync=target $(NODE_STAMP) lint test-caches typecheck-beside \
		TYPECHECK_LOG=$$typecheck_log || exit 1; \
	serial_log=$$(mktemp -t drills-serial-tests.XXXXXX); \
	echo "$(BIN)/pytest -n $(SERIAL_WORKERS) $(PYTEST_DIST) -m serial ... > $$serial_log (in the background)"; \
	DRILLS_TESTS_FIRST_SLOT=$(TEST_WORKERS) $(BIN)/pytest -n $(SERIAL_WORKERS) $(PYTEST_DIST) \
		-p no:cacheprovider -m serial $(SERIAL_TEST_FILES) >"$$serial_log" 2>&1 & serial=$$!; \
	echo "nice -n $(TEST_NICE) $(BIN)/pytest -n $(TEST_WORKERS) $(PYTEST_DIST) -m \"not serial\""; \
	nice -n $(TEST_NICE) $(BIN)/pytest -n $(TEST_WORKERS) $(PYTEST_DIST) -m "not serial"; rest=$$?; \
	wait $$serial; serial_status=$$?; serial=; \
	while [ ! -s "$$typecheck_log.status" ] && kill -0 $$(cut -d' ' -f1 "$$typecheck_log.pid" 2>/dev/null) 2>/dev/null; do sleep 1; done; \
	typecheck_status=$$(cat "$$typecheck_log.status" 2>/dev/null || echo 1); rm -f "$$typecheck_log.pid"; \
	echo; echo "The tests marked serial, run beside the others:"; cat "$$serial_log"; \
	echo; echo "The typecheck, run beside the tests:"; cat "$$typecheck_log"; \
	test $$rest -eq 0 && test $$serial_status -eq 0 && test $$typecheck_status -eq 0

# Part of `make test`: mypy in the background, its report to TYPECHECK_LOG, the pids of its
# shell and of itself to TYPECHECK_LOG.pid, then its exit status to TYPECHECK_LOG.status.
# `make test` stops it if it ends first (a failed lint, Ctrl-C). It stays in the session of
# `make test`: the kernel's autogroup scheduling gives a session of its own a share of the
# CPU equal to that of all the tests, whatever its nice.
.PHONY: typecheck-beside
typecheck-beside: $(STAMP)
	@test -n "$(TYPECHECK_LOG)" || { echo "typecheck-beside is run by make test" >&2; exit 2; }
	@echo "nice -n 19 $(BIN)/mypy > $(TYPECHECK_LOG) (in the background)"
	@sh -c 'nice -n 19 $(BIN)/mypy >"$$1" 2>&1 & echo $$$$ $$! >"$$1.pid"; wait $$!; echo $$? >"$$1.status"' \
		typecheck "$(TYPECHECK_LOG)" </dev/null >/dev/null 2>&1 &

# Two processes side by side write the caches of what the tests run: one collection of the
# suite (drills, the tests and the 3,300 modules they import), and an import of the servers
# the tests start (SERVER_MODULES: Prefect's server, worker and flow engine, the lab's daemon
# and Streamlit, some 900 modules more). Compiling the whole venv instead (17,000 modules, most
# of which nothing imports) took 20 s longer here and bought nothing in the tests: on fresh
# clones, 76 s before the tests against 56 s, and test sessions of 786 s against 785 s. The
# modules left (some 1,900) are cached by the first process that imports them.
SERVER_MODULES := prefect.server.api.server prefect.cli prefect.workers.process prefect.flow_engine \
	drills_lab.daemon streamlit.web.bootstrap uvicorn
test-caches: $(STAMP)
	set -o pipefail; \
	home=$$(mktemp -d -t drills-caches.XXXXXX); \
	PREFECT_HOME=$$home $(BIN)/python -c 'import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]' \
		$(SERVER_MODULES) & servers=$$!; \
	$(BIN)/pytest --collect-only -q -p no:xdist -p no:cacheprovider | tail -1; collected=$$?; \
	wait $$servers; imported=$$?; rm -rf "$$home"; test $$collected -eq 0 && test $$imported -eq 0

# The drill runs as a real flow run of the quarterly-drill deployment, executed by the
# worker from this directory, so it writes the same history store the CLI reads.
demo: venv
	$(DRILLS) lab up
	$(DRILLS) plan validate .lab/plan.yaml
	$(DRILLS) serve
	$(DRILLS) serve run quarterly-drill --param reason="make demo"
	@echo
	@echo "The lab and the Prefect server keep running:"
	@echo "  Prefect UI   $$($(DRILLS) serve status --json | $(BIN)/python -c 'import json,sys; print(json.load(sys.stdin)["ui_url"])')"
	@echo "  dashboard    make ui"
	@echo "  history      $(DRILLS) history"
	@echo "  stop it all  make down"

serve: venv
	$(DRILLS) serve

# Prefect first, then the lab its flow runs act on.
down: venv
	-$(DRILLS) serve stop --force
	$(DRILLS) lab down

# The dashboard. With the lab running it starts in lab mode (no sign-in; a banner says so),
# and `drills ui` finds the Prefect server of `make serve`/`make demo` by itself.
.PHONY: ui
ui: venv
	$(DRILLS) ui $(if $(wildcard .lab/lab.json),--lab,)

lab-up: venv
	$(DRILLS) lab up

lab-down: venv
	$(DRILLS) lab down

# Re-take the README's screenshots of the dashboard with the browser test.
screenshots: sysdeps venv
	DRILLS_UPDATE_SCREENSHOTS=1 $(BIN)/pytest tests/ui/test_browser.py

# The docs site, rebuilt on every save; `make test` builds it with --strict (tests/docs).
docs: venv
	$(BIN)/mkdocs serve --strict

bench: venv sysdeps
	$(BIN)/python -m bench

# Re-resolve the ranges in pyproject.toml and pin the result for reproducible installs
# (setuptools too: the packaging test builds the wheel with it).
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	.venv-lock/bin/python -m pip install -q -e '.[test]'
	.venv-lock/bin/python -m pip freeze --all --exclude pip --exclude-editable > constraints.txt
	rm -rf .venv-lock

clean:
	rm -rf $(VENV) node_modules .lab .prefect-local .drills .pytest_cache .mypy_cache .ruff_cache
