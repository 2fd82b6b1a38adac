"""Shared test helpers: where the real-Kafka fixtures are (and a skip when they are absent), and running a
function as an unprivileged user."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
KAFKA_REAL = PROJECT_ROOT.parent / "shared" / "fixtures" / "kafka-real"

requires_kafka_real = pytest.mark.skipif(
    not KAFKA_REAL.is_dir(),
    reason=f"real Kafka fixtures not found at {KAFKA_REAL} (../shared is absent beside the checkout)",
)


NOBODY = 65534


def run_as_unprivileged(fn) -> dict:
    """Run ``fn`` in a forked child that dropped to uid/gid 65534 (when we are root); return its JSON-able
    result, or ``{"error": ...}`` if it raised. The child never returns into pytest."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - report, never return into pytest in the child
            result = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_fd, json.dumps(result).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)
