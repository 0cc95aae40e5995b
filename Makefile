# compactctl: every target uses the project's own virtualenv in .venv.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
DEMO    := .demo

.PHONY: install demo test lint typecheck bench stress clean agents record-agents

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,serve,dask]'
	touch $(STAMP)

demo: install
	@bash scripts/demo.sh

# The suite on 2 worker processes (pytest-xdist; many tests wait on CLI subprocesses, so one
# process leaves a core idle). loadfile: a test file runs on one worker, so its module fixtures
# (a Dask cluster, the 100 MB line, the golden runs' pool) are made once. (loadgroup does not
# group on pytest 9.2 with pytest-xdist 3.8.0, pytest-xdist issue 1386.)
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(BIN)/ruff check compactctl tests bench
	$(BIN)/ruff format --check compactctl tests bench

typecheck: install
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/run.py

# 1,000 crash trials, 1,000 live-writer trials (a slow agent writing its lines in pieces while
# rules runs: no agent line may be split) and a real 30 s pause mid-line (issue 14).
stress: install
	COMPACTCTL_CRASH_TRIALS=1000 $(BIN)/python -m pytest tests/system/test_crash.py -q -s
	COMPACTCTL_LIVE_TRIALS=1000 COMPACTCTL_STRESS=1 $(BIN)/python -m pytest tests/system/test_live_writer.py -q -s

# The real agents (issue 17): the pinned npm versions of scripts/agents/record.py VERSIONS,
# installed OUTSIDE the repository (about 1.2 GB with all four agents) in $COMPACTCTL_AGENTS_CACHE
# (default ~/.cache/compactctl-agents); tests/system/agents drives them when they are there.
agents: install
	$(BIN)/python scripts/agents/record.py --install

# Re-record fixtures/real/ with the installed agents against the scripted model servers.
record-agents: agents
	$(BIN)/python scripts/agents/record.py --out fixtures/real

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache
