# acvi_tf: every table is a make target. `make help` lists them.
PYTHON ?= python3
PYTEST_WORKERS ?= 2

.PHONY: help install test demo bench bench-quick lint table4 table4-cpu table4-dry-run

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

demo:  ## a short Multi30k En->De run of soft and acvi (+ copy baseline) -> results/demo.md
	$(PYTHON) -m experiments.tables run demo --runs_root runs/demo --out results/demo.md

table4-cpu:  ## Table 4 at CPU scale: Multi30k En->De soft vs acvi (~30 min each) -> results/table4_cpu.md
	$(PYTHON) -m experiments.tables run table4-cpu --runs_root runs/table4_cpu --out results/table4_cpu.md

table4:  ## Table 4, paper profile, every row and direction (needs the full IWSLT/WMT data and a GPU)
	$(PYTHON) -m experiments.tables run table4 --runs_root runs/table4 --out results/table4.md

table4-dry-run:  ## check Table 4's data and print the commands it would run
	$(PYTHON) -m experiments.tables run table4 --runs_root runs/table4 --out results/table4.md --dry_run
