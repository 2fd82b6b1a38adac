# The two commands the README promises: `make demo` and `make test`.
# Each creates .venv on first use, installs what it needs, and is safe to re-run.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
# Airflow lives in its own virtualenv (its pins must not constrain the project's); the DAG tests use it.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_PKGS := "apache-airflow==3.3.*" "apache-airflow-providers-apache-spark>=5" "apache-airflow-providers-standard" "pyyaml>=6"

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

$(AIRFLOW_VENV)/.stamp: Makefile
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet $(AIRFLOW_PKGS)
	touch $@

test: $(VENV)/.stamp-test $(AIRFLOW_VENV)/.stamp
	$(PY) -m pytest -q

bench: $(VENV)/.stamp-test
	$(PY) benchmarks/bench_indexlib.py
	$(PY) benchmarks/bench_rebuild.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
