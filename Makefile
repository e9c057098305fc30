# dpstream: two commands on a fresh machine.
#   make demo   - embedded broker + demo producer + worker, releases printed, metrics on :9108
#   make test   - the whole test suite (starts its own embedded broker)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,deploy]'
	touch $@

# tests/deploy validates the chart's custom resources with node (KEDA and Prometheus
# Operator schemas from the npm registry, pinned by package-lock.json).
CRD    := tests/deploy/crd
$(CRD)/node_modules/.installed: $(CRD)/package-lock.json
	npm ci --prefix $(CRD) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/dpstream demo

test: install $(CRD)/node_modules/.installed
	$(BIN)/ruff check sketches worker tests benchmarks scripts deploy
	$(BIN)/mypy sketches worker
	$(BIN)/python -m pytest -q --doctest-modules sketches worker tests

lint: install
	$(BIN)/ruff check sketches worker tests benchmarks scripts deploy
	$(BIN)/mypy sketches worker

bench: install
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_noise.py
	$(BIN)/python benchmarks/bench_e2e.py
	$(BIN)/python benchmarks/bench_lazyhh.py --quick
	$(BIN)/python benchmarks/bench_fig3.py --quick
	$(BIN)/python benchmarks/bench_hh_compare.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
