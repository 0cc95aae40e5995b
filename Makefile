# compactctl: every target uses the project's own virtualenv in .venv.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
DEMO    := .demo

.PHONY: install demo test lint typecheck bench stress clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	@bash scripts/demo.sh

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check compactctl tests bench
	$(BIN)/ruff format --check compactctl tests bench

typecheck: install
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/run.py

stress: install
	COMPACTCTL_CRASH_TRIALS=1000 $(BIN)/python -m pytest tests/test_crash.py -q -s

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache
