"""Shared fixtures of the Spark job tests: one real local Spark session for the whole run."""

from __future__ import annotations

import pytest

from ..conftest import copy_fixture

pyspark = pytest.importorskip("pyspark", reason="the Spark job tests need the [spark] extra (make test installs it)")


@pytest.fixture(scope="session")
def spark():
    """The session the jobs' own ``spark_session`` would create (local[2]), shared by every test."""
    from jobs.config import resolve_settings
    from jobs.session import spark_session

    settings = resolve_settings(log_dirs=["."])
    settings.spark_master = "local[2]"
    session = spark_session(settings, "kafka-index-tests")
    yield session
    session.stop()


@pytest.fixture
def copy_set(tmp_path):
    """Copy chosen partitions of a fixture set into a fresh log dir (writable copies)."""

    def copy(set_dir, names, log_dir="logs"):
        target = tmp_path / log_dir
        target.mkdir(exist_ok=True)
        for name in names:
            copy_fixture(set_dir / name, target / name)
        return target

    return copy
