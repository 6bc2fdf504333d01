# Quick start: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
EXAMPLES := $(sort $(wildcard example_plugins/*/pyproject.toml))
STAMP := $(VENV)/.agentplug-installed

.PHONY: demo test lint typecheck pytest bench docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(STAMP): $(PY) pyproject.toml $(EXAMPLES)
	$(PIP) install -e '.[test,js,otel,api,mcp,pydantic-ai,langchain]'
	@for p in $(dir $(EXAMPLES)); do $(PIP) install -e "$$p" || exit 1; done
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/agentplug run demo/scenario.json

lint: $(STAMP)
	$(VENV)/bin/ruff check framework hookspecs tests bench example_plugins
	$(VENV)/bin/ruff format --check framework hookspecs tests bench example_plugins
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(PY) -m pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/run.py

docs: $(STAMP)
	$(VENV)/bin/agentplug docs hooks --write docs/hooks.md

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
