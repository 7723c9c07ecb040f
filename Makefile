# netsurvey: the two commands a user needs are `make demo` and `make test`.
# Both install whatever is missing first (scripts/install.sh, idempotent).
PY ?= python3
PYTEST_ARGS ?=

.PHONY: install demo test bench clean-db fuzz

install:
	bash scripts/install.sh

demo: install
	$(PY) -m netsurvey.cli demo

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: install
	$(PY) bench/bench_writer.py

# issue 12: every fuzz target for FUZZ_SECONDS each (atheris); FUZZ_RUNS=1000000 instead
# runs 1M executions per target. Results: fuzz/results.json; crashes: fuzz/crashes/.
FUZZ_SECONDS ?= 20
FUZZ_RUNS ?= 0
FUZZ_JOBS ?= 1
fuzz: install
	$(PY) -m fuzz.run_all --seconds $(FUZZ_SECONDS) --runs $(FUZZ_RUNS) --jobs $(FUZZ_JOBS)

clean-db:
	-$(PY) -m netsurvey.cli db down
	rm -rf .netsurvey/pgdata
