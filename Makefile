# dpstream: two commands on a fresh machine.
#   make demo   - embedded broker + demo producer + worker, releases printed, metrics on :9108,
#                 dashboard on http://127.0.0.1:8050/
#   make test   - the whole test suite (starts its own embedded broker)
#   make audit  - the large empirical privacy audit (results/privacy_audit.md)
#   make mutate - mutation testing of the privacy-critical modules (results/mutation.md);
#                 make mutate-fast: only those changed vs main, before submitting privacy code
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test lint bench audit mutate mutate-fast clean

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
	$(BIN)/python -m pip install -q -e '.[dev,deploy]'
	touch $(VENV)/.installed $@

# tests/deploy validates the chart's custom resources with node (KEDA and Prometheus
# Operator schemas from the npm registry, pinned by package-lock.json).
CRD    := tests/deploy/crd
$(CRD)/node_modules/.installed: $(CRD)/package-lock.json
	npm ci --prefix $(CRD) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

install: $(STAMP)

demo: install
	@echo "dpstream demo: the dashboard will be on http://127.0.0.1:8050/ (Ctrl-C stops everything)"
	$(BIN)/dpstream demo

test: install $(CRD)/node_modules/.installed
	$(BIN)/ruff check sketches worker privacy_audit tests benchmarks scripts examples deploy
	$(BIN)/mypy sketches worker privacy_audit
	$(BIN)/python -m pytest -q --doctest-modules sketches worker privacy_audit tests

lint: install
	$(BIN)/ruff check sketches worker privacy_audit tests benchmarks scripts examples deploy
	$(BIN)/mypy sketches worker privacy_audit

# empirical privacy audit, large version (~15 min CPU): writes results/privacy_audit.md
audit: install
	$(BIN)/python scripts/privacy_audit.py

# Mutation testing (mutmut, [tool.mutmut] in pyproject.toml; scripts/mutate.py): every
# privacy-critical module, or MODULES="worker/ingest/event_time.py ..."; one mutant at a time
# (MUTATE_JOBS=2 on an idle machine). The full run takes about 2 h of one core.
MUTATE_JOBS ?= 1
mutate: install
	$(BIN)/python scripts/mutate.py --jobs $(MUTATE_JOBS) \
	  $(if $(MODULES),--modules $(MODULES),--fresh --write results/mutation.md)

# the privacy-critical modules this branch changed vs main (git diff --name-only against
# the merge base, uncommitted changes included): a few
# minutes for one module; run it before submitting privacy code
mutate-fast: install
	$(BIN)/python scripts/mutate.py --jobs $(MUTATE_JOBS) --changed-vs main

bench: install
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_noise.py
	$(BIN)/python benchmarks/bench_fetch_records.py
	$(BIN)/python benchmarks/bench_e2e.py
	$(BIN)/python benchmarks/bench_json_decoders.py
	$(BIN)/python benchmarks/bench_workers.py
	$(BIN)/python benchmarks/bench_shards.py
	$(BIN)/python benchmarks/bench_lazyhh.py --quick
	$(BIN)/python benchmarks/bench_lazyhh.py --speed 2
	$(BIN)/python benchmarks/bench_fig3.py --quick
	$(BIN)/python benchmarks/bench_hh_compare.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache mutants
