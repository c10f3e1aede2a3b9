# Two entry points (see README): `make run` serves the service, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: run test install install-test build coverage bench load

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

install: $(VENV)/bin/activate
	$(PIP) install -q -e .

install-test: $(VENV)/bin/activate
	$(PIP) install -q -e '.[test]'

run: install
	$(VENV)/bin/casebook serve --host 127.0.0.1 --port 8000

build: install
	$(VENV)/bin/casebook build

coverage: install
	$(VENV)/bin/casebook coverage

# The wheel the measured tables were copied from: a test re-imports them from it and checks every sha256.
WHEEL_DIR := .cache/wheels
MEASUREMENT_WHEEL_GLOB := $(WHEEL_DIR)/aiconfigurator_core-0.12.0-*.whl

test: install-test
	@[ -n "$$CASEBOOK_MEASUREMENT_WHEEL" ] || ls $(MEASUREMENT_WHEEL_GLOB) >/dev/null 2>&1 || \
		$(PIP) download -q --no-deps aiconfigurator-core==0.12.0 -d $(WHEEL_DIR)
	CASEBOOK_MEASUREMENT_WHEEL=$${CASEBOOK_MEASUREMENT_WHEEL:-$$(ls $(MEASUREMENT_WHEEL_GLOB) | head -n 1)} \
		$(PY) -m pytest -q -p no:cacheprovider -n auto --durations=25

bench: install
	$(PY) benchmarks/bench_calculators.py
	$(PY) benchmarks/bench_planner.py

# wrk against `casebook serve --workers 2`, mixed profile for LOAD_S seconds (see benchmarks/load.sh)
LOAD_S ?= 60
load: install
	benchmarks/load.sh $(LOAD_S)
