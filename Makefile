# Quick start: `make demo` and `make test`. Both create .venv when it is missing.
# `make demo` installs only what the demo needs (the two distributions, agentplug-hookspecs
# from hookspecs/ and agentplug from here, and the example plugins its scenario names);
# `make test` adds the test tools, every extra, the docs tools and the other examples,
# and builds the docs site (mkdocs build --strict) before the checks.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
EXAMPLES := $(sort $(wildcard example_plugins/*/pyproject.toml))
# The example plugins demo/scenario.json loads (their folders are named after them).
DEMO_PLUGINS := $(shell $(PYTHON) -c 'import json; print(" ".join(p for p in json.load(open("demo/scenario.json"))["plugins"] if isinstance(p, str)))')
DEMO_EXAMPLES := $(foreach p,$(DEMO_PLUGINS),example_plugins/$(p)/pyproject.toml)
OTHER_EXAMPLES := $(filter-out $(DEMO_EXAMPLES),$(EXAMPLES))
DEMO_STAMP := $(VENV)/.agentplug-demo
STAMP := $(VENV)/.agentplug-installed
# pytest-xdist workers for `make pytest`. More workers than CPUs pays off: many tests wait
# on subprocesses, servers and sockets. PYTEST_ARGS adds options, e.g. PYTEST_ARGS="-m 'not stress'".
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?=
# SKIP_STRESS=1 leaves out the tests marked `stress` (many processes, fresh virtualenvs,
# database restarts) for a quicker local run; CI runs them (`make test` without it).
SKIP_STRESS ?=
STRESS_ARGS := $(if $(SKIP_STRESS),-m "not stress",)
# The documentation site (mkdocs.yml), built into a git-ignored folder.
SITE_DIR := build/site

.PHONY: demo test lint typecheck pytest bench bench-quick docs docs-site docs-serve ui-screenshots clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(DEMO_STAMP): $(PY) pyproject.toml hookspecs/pyproject.toml demo/scenario.json $(DEMO_EXAMPLES)
	$(PIP) install -e hookspecs -e .
	@for p in $(dir $(DEMO_EXAMPLES)); do $(PIP) install -e "$$p" || exit 1; done
	@touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP) $(EXAMPLES)
	$(PIP) install -e hookspecs -e '.[test,docs,js,otel,api,yaml,mcp,pydantic-ai,langchain,postgres]'
	@for p in $(dir $(OTHER_EXAMPLES)); do $(PIP) install -e "$$p" || exit 1; done
	@touch $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/agentplug run demo/scenario.json

lint: $(STAMP)
	$(VENV)/bin/ruff check framework hookspecs tests bench example_plugins
	$(VENV)/bin/ruff format --check framework hookspecs tests bench example_plugins
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(STRESS_ARGS) $(PYTEST_ARGS)

test: docs-site lint typecheck pytest

# The docs site: --strict fails on any warning (a broken link or anchor, a page missing
# from the nav, an API-reference name that does not resolve). `make docs-serve` previews it.
docs-site: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(SITE_DIR)

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# The control room's pictures in docs/ui.md: a served gateway photographed by headless
# Chromium (Debian's chromium package; `apt-get install chromium`).
ui-screenshots: $(STAMP)
	$(PY) -m tests.ui.screenshots docs/img

bench: $(STAMP)
	$(PY) bench/run.py

# Every benchmark at small N (a smoke run: the numbers are noisy). Not part of `make test`:
# on a loaded 2-core machine it takes over 2 minutes. tests/test_bench_capacity.py (a stress
# test, so `make test` runs it) runs the capacity benchmarks of bench/run.py this way.
bench-quick: $(STAMP)
	$(PY) bench/run.py --quick

docs: $(STAMP)
	$(VENV)/bin/agentplug docs hooks --write docs/hooks.md
	$(VENV)/bin/agentplug docs cli --write docs/cli.md

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .pytest_cache .ruff_cache
