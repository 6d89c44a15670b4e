# Quick start: `make run` (set up and start the gateway) and `make test` (set up and run every check).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: run test lint typecheck pytest bench soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/companion run

test: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -q

# The long whole-process runs (README, "Development"): kill -9 at random points of a turn
# SOAK_KILLS times, then SOAK_MESSAGES messages over SOAK_CHATS chats against `companion run`.
# `make test` runs the same tests with 5 kills and 500 messages over 50 chats.
SOAK_KILLS ?= 50
SOAK_MESSAGES ?= 20000
SOAK_CHATS ?= 500

soak: $(STAMP_DEV)
	SOAK_KILLS=$(SOAK_KILLS) SOAK_MESSAGES=$(SOAK_MESSAGES) SOAK_CHATS=$(SOAK_CHATS) \
		$(BIN)/pytest -q -s tests/e2e/test_kill9.py tests/e2e/test_soak.py

bench: $(STAMP_DEV)
	$(BIN)/python bench/search.py
	$(BIN)/python bench/turn.py
	$(BIN)/python bench/discord_throughput.py
	$(BIN)/python bench/media.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
