# Bruce: the two commands that matter are `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= $(or $(BRUCE_CONFIG),config.yml)

.PHONY: run test install install-test lock bench soak clean mutate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Every package comes from a lock file, pinned with its hashes (docs/operations.md, "Installing
# from the lock"): pip refuses a file whose hash differs. The lock also pins pip and setuptools,
# so Bruce itself is then built without fetching anything. A stamp per lock, so a changed lock
# or pyproject.toml reinstalls.
$(VENV)/.installed: requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# requirements-test.lock holds the same runtime pins plus the test extra's.
$(VENV)/.installed-test: requirements-test.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements-test.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Refreshes both locks from pyproject.toml with uv (from the test extra), for every platform and
# Python 3.11+. Pins still allowed are kept; to move on:  make lock LOCK_ARGS=--upgrade
# (or LOCK_ARGS="--upgrade-package litellm"). Review the diff before committing it.
LOCK_ARGS  ?=
LOCK_FLAGS := --quiet --universal --python-version 3.11 --generate-hashes --custom-compile-command "make lock"
lock: install-test
	printf 'pip\nsetuptools>=68\n' | $(BIN)/uv pip compile pyproject.toml - $(LOCK_FLAGS) $(LOCK_ARGS) \
		-o requirements.lock
	printf 'pip\nsetuptools>=68\n' | $(BIN)/uv pip compile pyproject.toml - --extra test $(LOCK_FLAGS) $(LOCK_ARGS) \
		-c requirements.lock -o requirements-test.lock
	! grep -E '^litellm==1\.82\.[78]( |$$)' requirements.lock requirements-test.lock

run: install
	$(BIN)/bruce --config $(CONFIG) run

test: install-test
	$(BIN)/ruff check bruce channels tools tests benchmarks
	$(BIN)/mypy --strict bruce channels tools
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: install-test
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/turn_overhead.py
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/telegram_load.py
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/discord_load.py
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/scheduler_load.py
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/memory_overhead.py
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/send_window.py
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/media_overhead.py
	# fails (exit 1) when idle memory grew by more than 10 % over benchmarks/footprint.json
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/footprint.py --check

# The kill -9 soak (docs/benchmarks.md, "Crash soak"); minutes, so never part of `make test`.
# A short run:  make soak SOAK_ARGS="--kills 5 --messages 40 --phase2-reminders 12 --phase2-restarts 1"
SOAK_ARGS ?=
soak: install-test
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python benchmarks/crash_soak.py $(SOAK_ARGS)

# Mutation testing with mutmut (docs/testing.md); slow, so never part of `make test`.
# Every module:  make mutate        One module:  make mutate MODULE=bruce.actions.policy
# Each mutant runs only the tests that reach the function it changed ([tool.mutmut] in
# pyproject.toml); MUTATE_JOBS mutants run at a time, at low priority.
MUTATE_MODULES ?= bruce.actions.policy bruce.actions.registry bruce.actions.checks bruce.actions.arguments bruce.turns.agent_loop bruce.turns.prompt bruce.channel bruce.turns.grounding
MODULE         ?= $(MUTATE_MODULES)
MUTATE_JOBS    ?= 1

mutate: install-test
	mkdir -p mutants
	PATH="$(CURDIR)/$(BIN):$$PATH" LITELLM_LOCAL_MODEL_COST_MAP=True nice -n 10 \
		$(BIN)/mutmut run --max-children $(MUTATE_JOBS) $(foreach m,$(MODULE),"$(m).*") > mutants/mutate.log 2>&1 \
		|| { tail -n 40 mutants/mutate.log; exit 1; }
	@$(BIN)/mutmut results --all true | awk -F': ' -v modules="$(MODULE)" ' \
		{ split($$1, p, "."); m = p[1] "." p[2]; s = $$2; sub(/^ +/, "", m) } \
		index(" " modules " ", " " m " ") { total[m]++; if (s == "killed" || s == "timeout" || s == "caught by type check") killed[m]++; \
		  else if (s != "killed") left[m] = left[m] "\n    " $$1 ": " s } \
		END { for (m in total) printf "%-16s %4d / %4d killed (%.1f%%)%s\n", m, killed[m], total[m], \
		      100 * killed[m] / total[m], left[m] }'

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
