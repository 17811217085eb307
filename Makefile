# acvi_tf: every table is a make target. `make help` lists them.
PYTHON ?= python3
PYTEST_WORKERS ?= 2

.PHONY: help install test demo bench bench-quick lint

help:  ## this list
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

install:  ## pip install the package with pinned dependencies (+ test tools)
	$(PYTHON) -m pip install -q -e ".[test]"

test:  ## the whole test suite (tiny sizes, CPU, a few minutes)
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) tests

lint:  ## byte-compile everything and run ruff if it is installed
	$(PYTHON) -m compileall -q acvi_tf experiments benchmarks tests
	@if $(PYTHON) -m ruff --version >/dev/null 2>&1; then $(PYTHON) -m ruff check acvi_tf experiments benchmarks tests; else echo "ruff not installed: skipped"; fi

bench:  ## training-step and beam-search speed, paper sizes, XLA on/off -> bench_results/bench.json
	$(PYTHON) -m benchmarks.bench --profile=full --out bench_results/bench.json

bench-quick:  ## the same at reduced sizes (a minute or two)
	$(PYTHON) -m benchmarks.bench --profile=quick --out bench_results/bench_quick.json
