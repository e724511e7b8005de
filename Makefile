# The README's two commands, each doing its own set-up on a fresh clone:
#
#   make demo    the monitor on the bundled PyTorch trainer and a SIMULATED card
#   make test    the test suite (pytest inside .venv): the tests not marked e2e in
#                parallel, the e2e ones marked beside in parallel, then the other
#                e2e ones alone (scripts/run_tests.sh)
#
# Both create .venv, install the pinned CPU torch (the example trainer and the tests
# need it; sattui itself never imports it) and sattui with its test extra. That runs
# once: the stamp below is newer than pyproject.toml and this file until either
# changes, so a second `make test` starts the tests at once. `make test` also installs
# the Debian packages its tests run for real (prometheus, tmux) where they are missing.
#
# People who add sattui to their own training environment do not need any of this:
# `pip install .` there (README, "Install").
#
# CI (.ci/run) also runs `make lint` when this file has that target (ruff, mypy).

PYTHON ?= python3
VENV ?= .venv
# Pinned: this exact CPU build is the one the tests were written against, and an
# unpinned torch pulls several GB of CUDA wheels. Extra pip arguments for it (for
# example `--index-url https://download.pytorch.org/whl/cpu`) go in TORCH_PIP_ARGS.
TORCH := torch==2.13.0
TORCH_PIP_ARGS ?=
# Extra arguments to pytest: `make test PYTEST_ARGS="-x tests/unit"`. Every part of the
# run gets them (scripts/run_tests.sh).
PYTEST_ARGS ?=
# pytest-xdist's workers for the tests not marked e2e: one more than the CPUs, as a few of
# them (a real Prometheus scraping for 8-14 s) mostly wait: 2:24 against 2:36 with one per
# CPU on a 2-core box (2:17 with two more, for a third more CPU time).
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# … and for the e2e tests marked beside, which mostly wait on their processes: 3 keep a
# 2-core box busy (scripts/run_tests.sh).
TEST_BESIDE_JOBS ?= 3

BIN := $(VENV)/bin
STAMP := $(VENV)/.sattui-installed

.PHONY: demo test test-tools setup lint

demo: $(STAMP)
	$(BIN)/sattui demo

# The CPU-bound tests share the cores; the end-to-end ones (real trainers, timings) then
# run one at a time with the box to themselves.
test: $(STAMP) test-tools
	$(SHELL) scripts/run_tests.sh $(BIN)/python $(TEST_JOBS) $(TEST_BESIDE_JOBS) $(PYTEST_ARGS)

# Debian's prometheus (with promtool) and tmux, which the tests run for real: installed
# where missing when we are root with apt-get, otherwise one line says what to install
# (scripts/test_tools.sh). $(SHELL), not `sh`: it runs whatever PATH holds.
test-tools:
	@$(SHELL) scripts/test_tools.sh

setup: $(STAMP)

# The layering rule (Textual only in the front end), import order, the usual bug
# patterns (ruff, configured in pyproject.toml) and the types (mypy).
lint: $(STAMP)
	$(BIN)/ruff check sattui tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) $(TORCH)
	$(BIN)/python -m pip install -q -e '.[test,lint]'
	@touch $@
