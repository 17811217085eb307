# acvi_tf: every table is a make target. `make help` lists them.
PYTHON ?= python3
PYTEST_WORKERS ?= 2

.PHONY: help install install-gpu check-gpu-install test status demo readme bench bench-quick bench-peers bench-peers-train lint table4 table4-cpu table4-cpu-2500 table4-dry-run table3 table3-cpu table3-smoke table1 table1-cpu table5 lead3

help:  ## this list
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

install:  ## pip install the package with pinned dependencies (+ test tools), then the set-up check
	$(PYTHON) -m pip install -q -e ".[test]"
	$(PYTHON) -m acvi_tf.setup_check

install-gpu:  ## the same with TensorFlow's CUDA and cuDNN wheels (pip install -e ".[gpu]"), for an NVIDIA GPU
	$(PYTHON) -m pip install -q -e ".[test,gpu]"
	$(PYTHON) -m acvi_tf.setup_check

check-gpu-install:  ## check that pip resolves the GPU install (pip install --dry-run -e ".[gpu]"; asks the registry, ~1 min)
	ACVI_TEST_NETWORK=1 $(PYTHON) -m pytest -q -rs tests/test_setup.py

test:  ## the whole test suite (tiny sizes, CPU; on 2 idle cores 6:33-7:53 or 10:57-20:37 by the machine, README)
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal tests

readme:  ## rewrite README.md's generated result lines from results/*.json (after re-rendering a table; make test checks them)
	$(PYTHON) -m experiments.readme_results

lint:  ## byte-compile everything and run ruff if it is installed
	$(PYTHON) -m compileall -q acvi_tf experiments benchmarks tests
	@if $(PYTHON) -m ruff --version >/dev/null 2>&1; then $(PYTHON) -m ruff check acvi_tf experiments benchmarks tests; else echo "ruff not installed: skipped"; fi

bench:  ## training-step and beam-search speed, paper sizes, XLA on/off -> bench_results/bench.json
	$(PYTHON) -m benchmarks.bench --profile=full --out bench_results/bench.json

bench-quick:  ## the same at reduced sizes (a minute or two)
	$(PYTHON) -m benchmarks.bench --profile=quick --out bench_results/bench_quick.json

# The peer's own environment (OpenNMT-tf 2.32 needs TF 2.13): made on first use.
# PEERS_ARGS=--quick checks the harness at toy sizes (a minute or two).
PEERS_VENV ?= .venv-peers
$(PEERS_VENV)/.installed: benchmarks/peers/requirements-opennmt.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q -r benchmarks/peers/requirements-opennmt.txt
	touch $@

bench-peers: $(PEERS_VENV)/.installed  ## ours vs OpenNMT-tf, same model size and batches, alternating steps (makes .venv-peers) -> bench_results/bench_peers.{json,md}
	$(PYTHON) -m benchmarks.peers --peer_python $(PEERS_VENV)/bin/python $(PEERS_ARGS)

bench-peers-train: $(PEERS_VENV)/.installed  ## end-to-end Multi30k training, ours vs onmt-main, each with its own data pipeline (minutes) -> bench_results/bench_peers_train.{json,md}
	$(PYTHON) -m benchmarks.peers.train_e2e --peer_python $(PEERS_VENV)/bin/python $(PEERS_ARGS)

status:  ## where the table runs under runs/ (or RUNS=dir ...) stand: state, step, selection metric (last, best), tokens/s, time left
	@if [ -n "$(RUNS)" ]; then $(PYTHON) -m experiments.tables status --runs_root $(RUNS); \
	elif [ -d runs ]; then $(PYTHON) -m experiments.tables status --runs_root $(or $(wildcard runs/*/),runs); \
	else echo "no runs yet: runs/ does not exist (make demo or a table target makes it)"; fi

demo:  ## a short Multi30k En->De run of soft and acvi (+ copy baseline), the two at once: table, example translations, an attention heat map -> results/demo.md
	$(PYTHON) -m experiments.tables run demo --runs_root runs/demo --out results/demo.md --parallel 2

# The CPU-scale targets run the paper's comparison (soft vs acvi) by default; ONLY=all adds
# every baseline row (structured, variational, VED, Transformer; ~40 min each on 2 cores),
# ONLY=name,name picks runs (names: `python -m experiments.tables run <table> --dry_run ...`).
# SEEDS=0,1,2 runs each once per seed (SEEDS=planned: each row's planned count, table4-cpu
# 5 / 3 / 1 as issue 33 asks; with ONLY=all the archive's missing seeds); PARALLEL=2 runs two at a time, one thread each (on 2
# cores faster than one after the other; output in <runs_root>/logs). Finished runs are
# archived under results/<table>/runs/, and the table renders from both.
# SHARD=I/N runs only the I-th of N disjoint slices of the chosen runs (one per machine
# sharing the runs directory; README "Paper scale"); empty: every run.
SEEDS ?= 0
PARALLEL ?= 1
SHARD ?=
SHARD_ARGS = $(if $(SHARD),--shard $(SHARD))
# Runs start seed by seed (every row's seed 0, then seed 1, ...; ORDER=rows: a row's seeds
# together). START_WITHIN=M starts no run after M minutes (an allocation's time left minus
# one run's length), so no run is cut off half-trained. FINISH_WITHIN=M starts a run only
# if its expected length (the median of its row's archived runs) ends within M minutes.
ORDER ?= seeds
START_WITHIN ?=
FINISH_WITHIN ?=
# ARCHIVE_ROOT=/path/to/main: the checkout whose results/ receives each finished run (when
# the runs train from a git worktree at a fixed commit); empty: this checkout.
ARCHIVE_ROOT ?=
TABLE_ARGS = --seeds $(SEEDS) --parallel $(PARALLEL) $(SHARD_ARGS) --order $(ORDER) \
	$(if $(START_WITHIN),--start_within $(START_WITHIN)) \
	$(if $(FINISH_WITHIN),--finish_within $(FINISH_WITHIN)) \
	$(if $(ARCHIVE_ROOT),--archive_root $(ARCHIVE_ROOT))
table4-cpu: ONLY ?= multi30k_copy,multi30k_soft,multi30k_acvi,multi30k_acvi_paper_elbo
table4-cpu:  ## Table 4 at CPU scale, converged: Multi30k En->De soft vs acvi, 8,000 steps, best val (38 min to 3.3 h a run on one core by row and CPU; ONLY=all adds the baselines) -> results/table4_cpu.md
	$(PYTHON) -m experiments.tables run table4-cpu --only $(ONLY) --runs_root runs/table4_cpu --out results/table4_cpu.md $(TABLE_ARGS)

table4-cpu-2500: ONLY ?= multi30k_copy,multi30k_soft,multi30k_acvi,multi30k_acvi_paper_elbo
table4-cpu-2500:  ## the superseded 2,500-step Table 4 at CPU scale (--profile=cpu, last checkpoint) -> results/table4_cpu_2500.md
	$(PYTHON) -m experiments.tables run table4-cpu-2500 --only $(ONLY) --runs_root runs/table4_cpu_2500 --out results/table4_cpu_2500.md $(TABLE_ARGS)

table4:  ## Table 4, paper profile, every row and direction (needs the full IWSLT/WMT data and a GPU)
	$(PYTHON) -m experiments.tables run table4 --runs_root runs/table4 --out results/table4.md $(SHARD_ARGS)

table4-dry-run:  ## check Table 4's data and print the commands it would run
	$(PYTHON) -m experiments.tables run table4 --runs_root runs/table4 --out results/table4.md --dry_run

table3-smoke:  ## Table 3 path on real MSVD captions + SYNTHETIC features (minutes; not results) -> results/table3_smoke.md
	$(PYTHON) -m experiments.tables run table3-smoke --runs_root runs/table3_smoke --out results/table3_smoke.md

table3-cpu: ONLY ?= soft,acvi
table3-cpu:  ## Table 3 at CPU scale, soft vs acvi (ONLY=all adds the baselines; needs real GoogLeNet features: see README) -> results/table3_cpu.md
	$(PYTHON) -m experiments.tables run table3-cpu --only $(ONLY) --runs_root runs/table3_cpu --out results/table3_cpu.md $(TABLE_ARGS)

table3:  ## Table 3, paper profile, SA/structured/variational/VED/gaussian/ACVI (needs real GoogLeNet features and a GPU)
	$(PYTHON) -m experiments.tables run table3 --runs_root runs/table3 --out results/table3.md $(SHARD_ARGS)

lead3:  ## lead-3 baseline on all local CNN/DM test chunks, ROUGE + METEOR (minutes) -> results/lead3.md
	$(PYTHON) -m experiments.tables run lead3 --runs_root runs/lead3 --out results/lead3.md

table1-cpu: ONLY ?= lead3,pg_soft,pg_acvi,pg_acvi_paper_elbo
table1-cpu:  ## Table 1/2 at CPU scale: pointer-generator soft vs acvi (ours and the paper ELBO; +coverage) and lead-3 (ONLY=all adds the baselines) -> results/table1_cpu.md
	$(PYTHON) -m experiments.tables run table1-cpu --only $(ONLY) --runs_root runs/table1_cpu --out results/table1_cpu.md $(TABLE_ARGS)

table1:  ## Table 1/2, paper profile (needs all 287,227 CNN/DM training pairs and a GPU; else says what to get)
	$(PYTHON) -m experiments.tables run table1 --runs_root runs/table1 --out results/table1.md $(SHARD_ARGS)

TABLE5_MODELS ?= runs/table1_cpu
table5: ONLY ?= pg_soft,pg_acvi
table5:  ## Table 5: DUC2004 with the Table 1 models in TABLE5_MODELS (default the CPU-scale soft and acvi runs; ONLY=all for every row) -> results/table5.md
	$(PYTHON) -m experiments.tables run table5 --only $(ONLY) --runs_root $(TABLE5_MODELS) --out results/table5.md $(TABLE_ARGS)
