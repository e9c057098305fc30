# dpstream: two commands on a fresh machine.
#   make demo   - embedded broker + demo producer + worker, releases printed, metrics on :9108
#   make test   - the whole test suite (starts its own embedded broker)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test lint bench clean

# The stamp names the Python that built the venv: another $(PYTHON) (or a venv left
# half-built by a failed install, which has no stamp) is recreated from scratch.
PYVER  := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
STAMP  := $(VENV)/.installed-py$(PYVER)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "dpstream needs Python >= 3.11; run: make PYTHON=python3.11"; exit 1; }
	@if [ ! -x $(BIN)/python ] || ! ls $(VENV)/.installed-py$(PYVER) >/dev/null 2>&1 && \
	    [ "$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" \
	      != "$(PYVER)" -o ! -e $(VENV)/.installed ]; then \
	  echo "creating $(VENV) with $(PYTHON) $(PYVER) (replacing any other or half-built one)"; \
	  rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); fi
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(VENV)/.installed $@

install: $(STAMP)

demo: install
	$(BIN)/dpstream demo

test: install
	$(BIN)/ruff check sketches worker tests benchmarks scripts
	$(BIN)/mypy sketches worker
	$(BIN)/python -m pytest -q --doctest-modules sketches worker tests

lint: install
	$(BIN)/ruff check sketches worker tests benchmarks scripts
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
