# Two commands do all the set-up (README): `make demo` runs the flight-delays job on the
# embedded cluster on real data; `make test` runs the tests. Both are idempotent.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test test-quick data lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	bash scripts/ensure_system_deps.sh
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

data/flights/.complete: | $(STAMP)
	$(BIN)/python scripts/export_flights.py data/flights

data: data/flights/.complete

demo: $(STAMP) data/flights/.complete
	$(BIN)/millrace run examples/flight_delays.py

test: $(STAMP) data/flights/.complete
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-quick: $(STAMP)
	MILLRACE_TEST_ALLOW_SKIP=1 $(BIN)/python -m pytest -m 'not slow' $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/ruff format --check src tests bench examples scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf out .millrace
