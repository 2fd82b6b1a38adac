"""A writing run holds the broker's own ``.lock`` (issue 36): a real Apache Kafka 4.1.0 broker started on a log dir
while ``recover`` runs there fails to lock it and exits without serving; the run then finishes.

Skipped, saying why, where ``../shared/kafka_2.13-4.1.0`` (or ``java``) is absent. About 15 s: one broker start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexlib.testing.generate import generate_partition

from .kafka_broker import PROJECT_ROOT, BrokerError, KafkaBroker, kafka_home_missing, python_env

pytestmark = pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")

#: ``python -m indexlib recover``, which stops itself (SIGSTOP) once it holds its locks, just before it plans: the
#: test starts the broker then, and lets the run go on with SIGCONT. The pause is the only change to the command.
PAUSED_RECOVER = (
    "import os, signal, sys\n"
    "import indexlib.engine.runner as runner\n"
    "plan = runner.plan_recovery\n"
    "def paused(discovery):\n"
    "    os.kill(os.getpid(), signal.SIGSTOP)\n"
    "    return plan(discovery)\n"
    "runner.plan_recovery = paused\n"
    "from indexlib.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def process_state(pid: int) -> str:
    """The one-letter state of ``pid`` (``T``: stopped), from ``/proc``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def test_a_broker_started_while_recover_runs_fails_to_lock_and_exits(tmp_path):
    logs = tmp_path / "logs"
    broker = KafkaBroker(tmp_path / "broker", logs)
    broker.format()
    generate_partition(logs / "orders-0", segments=3, batches_per_segment=30, transactional_producers=1, seed=3)
    recover = subprocess.Popen(
        [sys.executable, "-c", PAUSED_RECOVER, "recover", str(logs), "--backup-dir", str(tmp_path / "backups")],
        cwd=PROJECT_ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while process_state(recover.pid) != "T":
            assert recover.poll() is None, recover.communicate()
            assert time.monotonic() < deadline, "recover did not reach its pause"
            time.sleep(0.05)
        with pytest.raises(BrokerError, match="exited with"):
            broker.start(timeout=120)
        said = broker.tail(100_000)  # all of it: a controller request racing the shutdown can log pages after it
        assert "Failed to acquire lock on file .lock" in said, said[-5000:]
        assert "Kafka Server started" not in broker.server_log()
    finally:
        broker.close()
        os.kill(recover.pid, signal.SIGCONT)
    out, err = recover.communicate(timeout=120)
    assert recover.returncode == 0, out + err
    assert "recover orders-0: recovery point 0 ->" in out


def test_verify_from_inside_a_log_dir_leaves_it_startable_and_a_foreign_dir_is_what_stops_the_broker(tmp_path):
    """Issue 37: ``kafka-index verify --log-dir .`` run from inside a broker's log dir with default options writes
    nothing there (its audit table and journal go to the state dir), and the broker starts on it; a dir that is
    not a partition is what stops the broker, and verify names it first."""
    logs = tmp_path / "logs"
    broker = KafkaBroker(tmp_path / "broker", logs)
    broker.format()
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=30, seed=5)
    env = {k: v for k, v in python_env().items() if k != "KAFKA_INDEX_HOME"}
    env["HOME"] = str(tmp_path / "home")
    before = sorted(p.name for p in logs.iterdir())
    verify = [sys.executable, "-m", "jobs.cli", "verify", "--log-dir", "."]
    done = subprocess.run(verify, cwd=logs, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert sorted(p.name for p in logs.iterdir()) == before
    try:
        broker.start(timeout=120)
        broker.stop()
    finally:
        broker.close()
    (logs / "kafka-index-audit-journal").mkdir()  # what an older default left here
    done = subprocess.run(verify, cwd=logs, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "not_a_partition_dir" in done.stdout, done.stdout + done.stderr
    try:
        with pytest.raises(BrokerError, match="exited with"):
            broker.start(timeout=120)
        assert "is not in the form of topic-partition" in broker.tail(400)
    finally:
        broker.close()
