# netsurvey: the two commands a user needs are `make demo` and `make test`.
# Both install whatever is missing first (scripts/install.sh, idempotent): a virtual
# environment .venv made with $(PYTHON) (CPython 3.11 or 3.12, e.g. Debian's
# /usr/bin/python3), holding the pinned dependencies of requirements-test.lock.
# Every target runs .venv/bin/python; nothing needs `netsurvey` or python3 on PATH.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
INSTALL = PYTHON="$(PYTHON)" VENV="$(VENV)" bash scripts/install.sh

.PHONY: install install-fuzz lock demo test test-slow test-install test-compose bench clean-db fuzz

install:
	$(INSTALL)

# runtime + test + fuzz extras (atheris) from requirements-fuzz.lock
install-fuzz:
	LOCK=requirements-fuzz.lock $(INSTALL)

# Regenerate the three lock files from pyproject.toml (uv, pinned; UPGRADE=1 to upgrade).
lock:
	PYTHON="$(PYTHON)" bash scripts/lock.sh

demo: install
	$(PY) -m netsurvey.cli demo

# CI's command. Tests marked `slow` (long rehearsals, bisections, scale runs, the fresh
# install) are left to `make test-slow`. Lint (ruff) and types (mypy) run inside it too:
# tests/core/test_lint.py, configured in pyproject.toml; both must report nothing.
# TEST_WORKERS pytest-xdist workers (most of the suite waits on servers, timeouts and
# subprocesses, so more workers than cores): tests that use the shared testbed go by file,
# holding it shared or exclusively (tests/conftest.py); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 4
test: install
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --durations=30 $(PYTEST_ARGS)

test-slow: install
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

# The install path itself, from Debian's python3 into a fresh virtual environment
# (tests/install/test_install.py, marked slow: ~1-2 min with a warm pip cache).
test-install: install
	$(PY) -m pytest -q -m slow tests/install/test_install.py

# docker-compose.yml for real (tests/install/test_compose_e2e.py): needs a running Docker engine
# and the testbed; builds the base images, Compose v2 and the images when missing.
test-compose: install
	NETSURVEY_COMPOSE_E2E=1 $(PY) -m pytest -q -s tests/install/test_compose_e2e.py

bench: install
	$(PY) bench/bench_writer.py

# issue 12: every fuzz target for FUZZ_SECONDS each (atheris); FUZZ_RUNS=1000000 instead
# runs 1M executions per target. Results: fuzz/results.json; crashes: fuzz/crashes/.
FUZZ_SECONDS ?= 20
FUZZ_RUNS ?= 0
FUZZ_JOBS ?= 1
fuzz: install-fuzz
	$(PY) -m fuzz.run_all --seconds $(FUZZ_SECONDS) --runs $(FUZZ_RUNS) --jobs $(FUZZ_JOBS)

clean-db:
	-$(PY) -m netsurvey.cli db down
	rm -rf .netsurvey/pgdata
