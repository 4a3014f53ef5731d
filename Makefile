# Two commands do all the set-up (README): `make demo` runs the flight-delays job on the
# embedded cluster on real data; `make test` runs the tests. Both are idempotent.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test test-quick data lint mutation clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	bash scripts/ensure_system_deps.sh
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

data/flights/.complete: | $(STAMP)
	$(BIN)/python scripts/export_flights.py data/flights

data/weather/.complete: | $(STAMP)
	$(BIN)/python scripts/export_flights.py data/weather weather

data: data/flights/.complete data/weather/.complete

demo: $(STAMP) data/flights/.complete data/weather/.complete
	$(BIN)/millrace run examples/flight_delays.py

test: $(STAMP) data/flights/.complete data/weather/.complete
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-quick: $(STAMP)
	MILLRACE_TEST_ALLOW_SKIP=1 $(BIN)/python -m pytest -m 'not slow' $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/ruff format --check src tests bench examples scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

# Mutation testing (docs/testing.md): not part of CI; mutmut comes from the `mutation` extra.
# `make mutation` is a fresh run of every mutant (about an hour here, one worker);
# MUTATION_ARGS="report" prints the last run's summary, MUTATION_ARGS="run NAME..." re-tests some.
MUTATION_STAMP := $(VENV)/.mutation-stamp
MUTATION_ARGS ?=

$(MUTATION_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,mutation]'
	touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	$(BIN)/python scripts/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf out .millrace mutants
