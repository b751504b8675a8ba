# frontier-operator — the README's two commands (`make demo`, `make test`) do all the set-up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PYTHONPATH := $(CURDIR)/operator

.PHONY: demo test lint layering crds crds-check unit bench prometheus sglang-parser golden clean

# The venv is (re)installed whenever the project's dependencies change.
$(STAMP): pyproject.toml
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	@touch $@

# Debian's prometheus: the real server the feedback tests scrape with.
prometheus:
	@command -v prometheus >/dev/null || { $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }

# The real planner and tuning loop against the simulated SGLang fleet: the frontier, the chosen
# configuration, the tuning timeline and the result against the oracle, on the central scenario
# (GLM-5 agentic coding on H200s; about 40 s).
demo: $(STAMP)
	$(BIN)/frontier simulate -f examples/glm5-agentic-coding.yaml --hours 6 --mode auto

lint: $(STAMP)
	$(BIN)/ruff check operator tests bench
	$(BIN)/ruff format --check operator tests bench
	$(BIN)/mypy --strict -p frontier_operator

layering: $(STAMP)
	$(BIN)/lint-imports

crds: $(STAMP)
	$(BIN)/frontier crds

crds-check: $(STAMP)
	$(BIN)/frontier crds --check

# SGLang's real argument parser (CPU torch from the local wheel, sglang without its GPU dependencies),
# for the contract tests of every rendered command line.
sglang-parser: $(STAMP)
	VENV_PYTHON=$(BIN)/python scripts/install-sglang-parser.sh

unit: $(STAMP) sglang-parser
	$(BIN)/pytest -q -p no:logging

# Rewrite tests/golden/ from the renderer; review the diff before committing it.
golden: $(STAMP)
	FRONTIER_UPDATE_GOLDEN=1 $(BIN)/pytest tests/render/test_golden.py tests/sweep/test_sweep_golden.py

test: $(STAMP) prometheus lint layering crds-check unit

# Every benchmark; bench/inferencex_deployments.py is not one: it regenerates the shipped deployment facts from a
# clone of InferenceX (--repo), which this machine does not have.
BENCHMARKS := $(filter-out bench/inferencex_deployments.py,$(wildcard bench/*.py))
bench: $(STAMP)
	@mkdir -p bench/results
	@for script in $(BENCHMARKS); do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache bench/results
