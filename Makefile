# The two commands of the README: `make demo` and `make test`. Each sets itself up first
# (a virtualenv in .venv with shoal installed in editable mode), so a fresh clone needs
# nothing but python3 (>= 3.11) and make.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint bench bench-pg bench-pg-cycle bench-table bench-scale \
	bench-scale-pg clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.base

## Run the demo: agents share a skewed workload on a fresh SQLite fleet; then say how to
## get `shoal` on the PATH (make installs it in .venv/bin only).
demo: $(VENV)/.base
	$(BIN)/shoal demo
	@echo
	@echo "shoal is installed in $(BIN). To have \`shoal\` on your PATH:"
	@echo "  . $(BIN)/activate                        # in this shell"
	@echo "  pipx install .   (or: uv tool install .)   # in every shell; see Install in README.md"

## How the test targets run pytest. Python writes its bytecode caches (__pycache__, which
## git ignores) even where the shell sets PYTHONDONTWRITEBYTECODE: the suite starts
## thousands of Python processes (`shoal`, servers, racers), and without the caches each
## one compiled shoal from source again (tests/faces/test_cli_tasks.py: 17 s, 10 s with
## them). Each worker is handed the next test as it frees (--maxschedchunk 2), in the order
## tests/conftest.py puts the tiers in, the longest first: no long test starts last, and the
## short ones at the end even the workers out. One worker per core for the in-process tiers
## (-n auto); `make test` runs one more than the cores, since its slow tiers spend a quarter
## of their time waiting on the processes, servers and browsers they start (on 2 cores: 8 min
## 0 s with two workers, 6 min 53 s with three; docs/benchmarks.md, "The suite's time").
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --dist load --maxschedchunk 2
CORES := $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)))' 2>/dev/null || echo 2)

## Lint, type-check, check the import layers, and run the whole test suite; the 20 slowest
## tests are printed at the end, so a test that grows slow shows in every run's log.
test: lint
	$(PYTEST) -n $$(( $(CORES) + 1 )) --durations=20

## The in-process tiers only (unit, contract, stores), for the edit-test loop: the tests
## marked slow -- tests/faces and tests/processes, which start real processes, and the git
## store's tests (the contract suite's on git, tests/stores/test_git*.py), whose every
## write runs git -- and the lint are left to `make test`, the one that counts.
test-fast: $(VENV)/.dev
	$(PYTEST) -n auto -m "not slow" tests/unit tests/contract tests/stores

## The tests that are soaks at heart (marked soak: processes draining thousands of tasks,
## clones racing over a git board, the memory and SQLite stores agreeing over random
## histories) at full size; `make test` runs them small, with every assertion (tests/soak.py).
.PHONY: soak
soak: $(VENV)/.dev
	SHOAL_SOAK=1 $(PYTEST) -n auto -m soak --durations=20 tests

## Random input at every face (tests/fuzz: each CLI command, each MCP tool, the API on every
## store), big: FUZZ_EXAMPLES examples per test. `make test` runs the same tests small.
.PHONY: fuzz
FUZZ_EXAMPLES ?= 2000
fuzz: $(VENV)/.dev
	HYPOTHESIS_PROFILE=fuzz FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTEST) -n auto tests/fuzz

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

## The claim benchmark against huey and a raw SQLite loop: the table, and every figure by
## name in bench/results/sqlite.json (names and format: docs/benchmarks.md). BENCH_ARGS
## adds options, e.g. `make bench BENCH_ARGS=--quick`.
BENCH_ARGS ?=
bench: $(VENV)/.dev
	$(BIN)/python bench/claims.py $(BENCH_ARGS) --json bench/results/sqlite.json

## The same against pgqueuer on PostgreSQL (PG_URL, default postgresql://127.0.0.1:5432/test),
## into bench/results/postgres.json.
PG_URL ?= postgresql://127.0.0.1:5432/test
bench-pg: $(VENV)/.dev
	$(BIN)/python bench/claims.py --store postgres --pg-url '$(PG_URL)' $(BENCH_ARGS) \
		--json bench/results/postgres.json

## One PostgreSQL worker cycle by path: statements, round trips, CPU (docs/performance.md).
bench-pg-cycle: $(VENV)/.dev
	$(BIN)/python bench/pg_cycle.py --pg-url '$(PG_URL)' $(BENCH_ARGS) \
		--json bench/results/postgres_cycle.json

## README's Performance tables, rendered from the results files that exist (bench/table.py
## replaces what lies between README's bench markers).
BENCH_RESULTS ?= bench/results/sqlite.json bench/results/postgres.json \
	bench/results/postgres_cycle.json bench/results/sqlite_scale.json bench/results/postgres_scale.json
bench-table: $(VENV)/.dev
	$(BIN)/python bench/table.py --write-readme README.md $(wildcard $(BENCH_RESULTS))

## shoal at scale: 1,000 agents, 100,000 tasks queued, 10,000,000 finished -- does history
## slow the live work down? Long (tens of minutes); not part of `make test`. A sanity run:
## `.venv/bin/python bench/scale.py --quick` (1,000,000 finished).
bench-scale: $(VENV)/.dev
	$(BIN)/python bench/scale.py $(BENCH_ARGS) --json bench/results/sqlite_scale.json

## The same on PostgreSQL (PG_URL), in a fresh schema dropped afterwards.
bench-scale-pg: $(VENV)/.dev
	$(BIN)/python bench/scale.py --store postgres --pg-url '$(PG_URL)' $(BENCH_ARGS) \
		--json bench/results/postgres_scale.json

## The git store against SQLite on the same claim+complete workload at 1, 3 and 6 processes
## (each its own clone of a local bare repository): cycles/s, claim latency, lost pushes, and
## the board's growth per 1,000 tasks; into bench/results/git.json (docs/benchmarks.md, "The
## git store"). bench-git-pg adds PostgreSQL (PG_URL) beside them.
.PHONY: bench-git bench-git-pg
bench-git: $(VENV)/.dev
	$(BIN)/python bench/git.py $(BENCH_ARGS) --json bench/results/git.json

bench-git-pg: $(VENV)/.dev
	$(BIN)/python bench/git.py --pg '$(PG_URL)' $(BENCH_ARGS) --json bench/results/git.json

## The web face's pages on 1,000 agents and 100k tasks (SQLite): bench/web_pages.py.
.PHONY: bench-web
bench-web: $(VENV)/.dev
	$(BIN)/python bench/web_pages.py $(BENCH_ARGS) --json bench/results/web_pages.json

## 50 SSE watchers on /live while 16 processes race to claim (SQLite): claim p99 against the
## same race without watchers, and nothing lost; into bench/results/sqlite_sse.json.
## `make bench-sse BENCH_ARGS=--quick` for a smoke run; bench-sse-pg on PostgreSQL (PG_URL).
.PHONY: bench-sse bench-sse-pg
bench-sse: $(VENV)/.dev
	$(BIN)/python bench/sse_load.py $(BENCH_ARGS) --json bench/results/sqlite_sse.json

bench-sse-pg: $(VENV)/.dev
	$(BIN)/python bench/sse_load.py --store postgres --pg-url '$(PG_URL)' $(BENCH_ARGS) \
		--json bench/results/postgres_sse.json

## The scheduling comparison of docs/scheduling.md: every workload under every policy over
## ten seeds, the cold-start table, Pareto over 40 seeds (a few minutes of CPU).
.PHONY: bench-scheduling replay
bench-scheduling: $(VENV)/.dev
	$(BIN)/python bench/scheduling.py $(BENCH_ARGS)

## The simulator against real processes: the overnight night and a lognormal batch of 200
## replayed by real `shoal worker`s on SQLite, time compressed, under shoal and pull+wake,
## beside the simulator's figures (under 5 minutes; docs/scheduling.md records them).
replay: $(VENV)/.dev
	$(BIN)/python bench/replay.py $(BENCH_ARGS)

## The screenshots of each dashboard page in docs/screenshots/ (headless Chromium, a
## small realistic fleet); not part of `make test`.
.PHONY: screenshots
screenshots: $(VENV)/.dev
	$(BIN)/python bench/screenshots.py --out docs/screenshots

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

## The chaos suite (tests/chaos, docs/chaos.md): 16 worker processes and a monitor killed
## with kill -9, frozen past their leases, their PostgreSQL server crashed and restarted,
## their SQLite disk filled -- for SOAK, on STORE (sqlite, postgres or both), from SEED --
## then the audit: the totals, and exit 1 on a duplicate, a lost task or an inconsistency.
## e.g. `make chaos SOAK=10m STORE=postgres SEED=7`. A short form runs in `make test`.
SEED ?= 1
SOAK ?= 60s
STORE ?= both
.PHONY: chaos
chaos: $(VENV)/.dev
	$(BIN)/python -m tests.chaos.driver --seed '$(SEED)' --soak '$(SOAK)' --store '$(STORE)'
