# The two commands the README promises: `make demo` and `make test`.
# Each creates .venv on first use, installs what it needs, and is safe to re-run.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
# Airflow lives in its own virtualenv (its pins must not constrain the project's); the DAG tests use it.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_PKGS := "apache-airflow==3.3.*" "apache-airflow-providers-apache-spark>=5,<7" "apache-airflow-providers-standard" "pyyaml>=6" \
                "apache-airflow-providers-ssh==7.0.1" "apache-airflow-providers-cncf-kubernetes==10.25.0" \
                "types-pyyaml==6.0.12.20261113"

.PHONY: demo airflow check test bench package package-full clean

# The Python every venv is made with, said once and checked: 3.11 or later (Debian 12's 3.11.2 included).
CHECK_PYTHON = @$(PYTHON) -c 'import sys; v = sys.version_info; print(f"using {sys.executable} (Python {v.major}.{v.minor}.{v.micro})"); sys.exit(0 if v >= (3, 11) else "kafka-index-rebuild needs Python 3.11 or later: make PYTHON=/path/to/python3.11")'

$(VENV)/.stamp-base: pyproject.toml setup.py indexlib/format/_kernel.c indexlib/format/_crc32c.h
	$(CHECK_PYTHON)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77,<85"  # setup.py build_ext --inplace (benchmarks' --other-tree) reads the SPDX license
	$(PY) -m pip install --quiet -e .
	touch $@

# pyspark's spark-submit finds Spark and runs a Python job with the `python3` on PATH, which without an
# activated venv is not this one ("Could not find valid SPARK_HOME"); one line makes this venv's Python its
# default (a PYSPARK_PYTHON of the caller's still wins), so .venv/bin/spark-submit works from any shell.
# After every install that may (re)install pyspark, since a reinstall writes the script afresh.
SUBMIT_DEFAULT := export PYSPARK_PYTHON="$${PYSPARK_PYTHON:-$(abspath $(PY))}"  \# kafka-index-rebuild: this venv
SUBMIT_PATCH = grep -q 'kafka-index-rebuild: this venv' $(VENV)/bin/spark-submit || sed -i '2i $(SUBMIT_DEFAULT)' $(VENV)/bin/spark-submit

$(VENV)/.stamp-spark: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install --quiet -e '.[spark]'
	$(SUBMIT_PATCH)
	touch $@

$(VENV)/.stamp-test: pyproject.toml $(VENV)/.stamp-spark
	$(PY) -m pip install --quiet -e '.[spark-test]'
	$(SUBMIT_PATCH)
	touch $@

demo: $(VENV)/.stamp-spark
	$(PY) -m jobs.demo

$(AIRFLOW_VENV)/.stamp: Makefile
	$(CHECK_PYTHON)
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet $(AIRFLOW_PKGS)
	touch $@

# Airflow 3 in a venv of its own (.venv-airflow), beside the project's: README "Airflow", trying the DAGs here
airflow: $(VENV)/.stamp-spark $(AIRFLOW_VENV)/.stamp

test: $(VENV)/.stamp-test $(AIRFLOW_VENV)/.stamp
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m mypy --python-executable $(AIRFLOW_VENV)/bin/python airflow_dags
	$(PY) -m pytest -q --durations=25 --cov --cov-report=term-missing -n 3 --dist loadgroup
	$(PY) tools/check_coverage.py
	# the library again on its pure-Python scan (the reference, and the fallback without a C compiler): the scan's
	# own tests, and the engine's whole runs over it
	KAFKA_INDEX_PURE_PYTHON=1 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup $(SCAN_TESTS) $(PURE_RUN_TESTS)

# the engine's whole runs (verify, rebuild, repair, recover; the state files) over the pure-Python scan too
PURE_RUN_TESTS := tests/indexlib/test_engine.py tests/indexlib/test_recover.py tests/indexlib/test_verify.py \
                  tests/indexlib/test_state_files.py

# The inner loop's fast tier: lint, types, the tests not marked slow (tests/conftest.py: no broker, Airflow run,
# Spark session, cluster or kill trial) on two workers, and the scan's pure-Python reference on the scan's own tests.
# `make test` runs everything; CI runs `make test`.
SCAN_TESTS := tests/indexlib/test_conformance.py tests/indexlib/test_real_fixtures.py tests/indexlib/test_summary.py \
              tests/indexlib/test_records.py tests/indexlib/test_kernel.py tests/indexlib/test_producer_end_states.py
check: $(VENV)/.stamp-test $(AIRFLOW_VENV)/.stamp
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m mypy --python-executable $(AIRFLOW_VENV)/bin/python airflow_dags
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" -n 2 --dist loadgroup
	KAFKA_INDEX_PURE_PYTHON=1 $(PY) -m pytest -q -p no:cacheprovider -m "not slow" $(SCAN_TESTS)

# One runner per question (benchmarks/RESULTS.md); the fuzzers in benchmarks/fuzz/ run for minutes, apart.
bench: $(VENV)/.stamp-test
	$(PY) benchmarks/broker.py
	$(PY) benchmarks/vs_kafka.py
	$(PY) benchmarks/memory.py
	$(PY) benchmarks/spark.py
	$(PY) benchmarks/kernel.py --parts scan,alignment,index
	$(PY) benchmarks/cluster_metadata.py
	$(PY) benchmarks/object_storage.py
	$(PY) benchmarks/tiered_storage.py

# For clusters: the executors' Python as a packed virtualenv for --archives: the project (with its compiled
# scan kernel) and what the executors import, numpy, crc32c and obstore (log dirs in object storage), and nothing else (no pip, setuptools or the
# packer: .venv's pip installs into it and .venv's venv-pack packs it); ~92 MB unpacked. The driver runs the
# project's own .venv (spark.pyspark.driver.python), so pyarrow, deltalake and pyyaml never travel.
# `make package-full` also packs everything (for a driver that runs in the cluster: YARN cluster mode).
# pyspark itself comes from the cluster. `make package PACKAGE_EXTRAS=object-storage,decompress` adds the
# decompressors (zstandard, lz4, python-snappy: +~30 MB): executors that check Aiven's zstd-compressed tiered
# segments need zstandard.
PACKAGE_EXTRAS ?= object-storage
package: $(VENV)/.stamp-base
	rm -rf dist build/executor-env
	$(PY) -m pip wheel --quiet --no-deps -w dist .
	$(PY) -m pip install --quiet venv-pack
	$(PYTHON) -m venv --without-pip build/executor-env
	$(PY) -m pip --python build/executor-env/bin/python install --quiet "$$(ls dist/kafka_index_rebuild-*.whl)[$(PACKAGE_EXTRAS)]"
	$(VENV)/bin/venv-pack --quiet -p build/executor-env -o dist/kafka-index-executor-env.tar.gz --force
	@ls -l dist

package-full: package
	rm -rf build/pack-venv
	$(PYTHON) -m venv build/pack-venv
	build/pack-venv/bin/python -m pip install --quiet "$$(ls dist/kafka_index_rebuild-*.whl)[object-storage]" "pyarrow>=15" "pyyaml>=6" "deltalake>=1.0" "javaproperties>=0.8" venv-pack
	install -m 755 tools/packed-kafka-index.sh build/pack-venv/bin/kafka-index  # runs without activation
	build/pack-venv/bin/venv-pack --quiet -p build/pack-venv -o dist/kafka-index-env.tar.gz --force
	@ls -l dist

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache .coverage dist build
