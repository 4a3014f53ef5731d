# Two commands do all the set-up (README): `make demo` runs the flight-delays job on the
# embedded cluster on real data; `make test` runs the tests. Both are idempotent.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# A full run fails if any test skipped (tests/real_parts.py) unless skips were asked for on the
# command line: `make test ALLOW_SKIP=1`. The same name inherited from the environment does not
# count (origin must be "command line").
ALLOW_SKIP_FLAG := $(if $(and $(filter command line,$(origin ALLOW_SKIP)),$(filter 1,$(ALLOW_SKIP))),--allow-skip,)

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
	$(BIN)/python -m pytest $(ALLOW_SKIP_FLAG) $(PYTEST_ARGS)

# the quick run is not the proof: a fast test whose PostgreSQL cannot start may skip here
test-quick: $(STAMP)
	$(BIN)/python -m pytest --allow-skip -m 'not slow' $(PYTEST_ARGS)

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
