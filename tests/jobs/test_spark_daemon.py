"""The Python worker daemon the jobs give Spark (``jobs.spark_daemon``): PySpark's own, except that a
worker whose connection the JVM closed (a SparkContext stopping) exits quietly instead of printing a
BrokenPipeError traceback after a successful run."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("pyspark", reason="needs the [spark] extra (make test installs it)")

from pyspark import daemon  # noqa: E402

from jobs import spark_daemon  # noqa: E402


def test_a_worker_the_jvm_hung_up_on_stops_quietly(monkeypatch, capsys):
    calls = []

    def hung_up(sock, authenticated):
        calls.append(authenticated)
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(spark_daemon, "_pyspark_worker", hung_up)
    a, b = socket.socketpair()
    with a, b:
        assert daemon.worker is spark_daemon.worker  # what PySpark's manager calls at each fork
        assert daemon.worker(a, True) == 1
    assert calls == [True] and capsys.readouterr().err == ""


def test_any_other_failure_is_pyspark_s_as_before(monkeypatch):
    def broken(sock, authenticated):
        raise ValueError("a real bug")

    monkeypatch.setattr(spark_daemon, "_pyspark_worker", broken)
    with pytest.raises(ValueError, match="a real bug"):
        spark_daemon.worker(None, False)  # type: ignore[arg-type]


def test_the_jobs_sessions_use_it(spark):
    assert spark.conf.get("spark.python.daemon.module") == "jobs.spark_daemon"
    assert spark.sparkContext.parallelize(range(100), 4).map(lambda x: x * 2).sum() == 9900  # workers start
