# The two commands the README promises: `make demo` and `make test`.
# Each creates .venv on first use, installs what it needs, and is safe to re-run.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench clean

$(VENV)/.stamp-base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.stamp-test: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install --quiet -e '.[spark-test]'
	touch $@

demo: $(VENV)/.stamp-base
	$(PY) -m indexlib.demo

test: $(VENV)/.stamp-test
	$(PY) -m pytest -q

bench: $(VENV)/.stamp-test
	$(PY) benchmarks/bench_indexlib.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
