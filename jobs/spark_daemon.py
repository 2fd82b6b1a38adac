"""PySpark's Python worker daemon (``spark.python.daemon.module``), quiet when the JVM hangs up.

When a SparkContext stops (every run's end), the JVM closes the sockets of its idle Python workers; a
worker that still has bytes to flush then dies on ``BrokenPipeError`` and PySpark's daemon prints the
traceback to the console, in about one run in twenty, after a run that succeeded. Nothing is lost there:
the JVM had every result, and a task whose worker really fails is reported by the JVM, not by this
stderr. This module is PySpark's own daemon with that one case silenced: a worker whose connection the
JVM closed exits quietly. Everything else is unchanged (``pyspark.daemon.manager``).
"""

from __future__ import annotations

import socket

from pyspark import daemon

_pyspark_worker = daemon.worker

#: how the JVM closing the socket shows up in a worker
HUNG_UP = (BrokenPipeError, ConnectionResetError)


def worker(sock: socket.socket, authenticated: bool) -> int:
    """PySpark's ``daemon.worker``; 1 (stop this worker) when the JVM closed the connection."""
    try:
        code: int = _pyspark_worker(sock, authenticated)
        return code
    except HUNG_UP:
        return 1


daemon.worker = worker  # the manager looks the name up at each fork

if __name__ == "__main__":  # pragma: no cover - Spark starts it as `python -m jobs.spark_daemon`
    daemon.manager()
