# netsurvey: the two commands a user needs are `make demo` and `make test`.
# Both install whatever is missing first (scripts/install.sh, idempotent).
PY ?= python3
PYTEST_ARGS ?=

.PHONY: install demo test bench clean-db

install:
	bash scripts/install.sh

demo: install
	$(PY) -m netsurvey.cli demo

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: install
	$(PY) bench/bench_writer.py

clean-db:
	-$(PY) -m netsurvey.cli db down
	rm -rf .netsurvey/pgdata
