# Bruce: the two commands that matter are `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= config.yml

.PHONY: run test install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# A stamp per extra, so a changed pyproject.toml reinstalls.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: install
	$(BIN)/bruce --config $(CONFIG) run

test: install-test
	$(BIN)/ruff check bruce channels tools tests benchmarks
	$(BIN)/mypy --strict --follow-imports=silent bruce channels
	$(BIN)/mypy tools
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: install-test
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/turn_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
