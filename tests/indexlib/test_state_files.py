"""Verify of the files Kafka's recovery derives beside the segments (``indexlib.recovery.state_checks``): a
producer snapshot Kafka would refuse, a ``leader-epoch-checkpoint`` it cannot read or whose entries do not
increase, and no false finding on what a broker killed in its first minute leaves (0-byte checkpoints)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from indexlib.engine import verify_partition

from ..conftest import KAFKA_REAL, copy_fixture, requires_kafka_real

LOCAL = KAFKA_REAL / "local-apache-kafka-4.1.0"
pytestmark = requires_kafka_real


def copy_log_dir(tmp_path: Path, *names: str) -> Path:
    """A copy of the local broker's log dir with these partitions, its checkpoints and meta.properties, without
    a file the broker did not write (``written_by_kafka``)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in os.listdir(LOCAL):
        if (LOCAL / name).is_file() and name != "MANIFEST.json":
            shutil.copy(LOCAL / name, logs / name)
    for name in names:
        copy_fixture(LOCAL / name, logs / name)
    return logs


def kinds(part: Path) -> dict[str, list]:
    found: dict[str, list] = {}
    for f in verify_partition(part).findings:
        if f.kind != "no_meta_properties":
            found.setdefault(f.kind, []).append(f)
    return found


def test_kafkas_own_snapshots_and_leader_epochs_give_no_finding(tmp_path):
    logs = copy_log_dir(tmp_path, "txn-0", "txn-1", "__transaction_state-0", "comp-zstd-0")
    for part in ("txn-0", "txn-1", "__transaction_state-0", "comp-zstd-0"):
        assert kinds(logs / part) == {}, part


@pytest.mark.parametrize("byte", [2, 5, 9, 20, -1], ids=["crc-first", "crc-last", "count", "entry", "last-byte"])
def test_a_snapshot_kafka_would_refuse_is_found(tmp_path, byte):
    """A flipped byte anywhere but the version (the CRC-32C, the count, an entry) is what Kafka refuses."""
    logs = copy_log_dir(tmp_path, "txn-0")
    snapshot = logs / "txn-0" / "00000000000000000011.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[byte] ^= 0x01
    snapshot.write_bytes(bytes(data))
    found = kinds(logs / "txn-0")
    assert list(found) == ["bad_producer_snapshot"] and found["bad_producer_snapshot"][0].file == str(snapshot)
    assert "Kafka deletes it" in found["bad_producer_snapshot"][0].detail


@pytest.mark.parametrize(
    "text, kind",
    [
        ("0\n2\n0 0\n0 5\n", "leader_epoch_not_increasing"),  # the same epoch twice
        ("0\n2\n3 10\n2 20\n", "leader_epoch_not_increasing"),  # an epoch out of order
        ("0\n2\n1 10\n2 10\n", "leader_epoch_not_increasing"),  # a start offset not moved on
        ("0\n2\n0 0\n", "bad_leader_epoch_checkpoint"),  # one entry missing: the count is wrong
        ("0\n1\n-1 0\n", "bad_leader_epoch_checkpoint"),  # Kafka's cache refuses a negative epoch
        ("1\n0\n", "bad_leader_epoch_checkpoint"),  # an unknown version
    ],
)
def test_a_leader_epoch_checkpoint_kafka_would_not_write_is_found(tmp_path, text, kind):
    logs = copy_log_dir(tmp_path, "txn-0")
    (logs / "txn-0" / "leader-epoch-checkpoint").write_text(text)
    found = kinds(logs / "txn-0")
    assert list(found) == [kind]
    assert verify_partition(logs / "txn-0").healthy is False


def test_a_broker_killed_in_its_first_minute_leaves_no_false_finding(tmp_path):
    """Kafka creates every checkpoint file empty when it opens it: a broker killed before its first flush leaves
    0-byte ``log-start-offset-checkpoint``, ``recovery-point-offset-checkpoint`` and ``leader-epoch-checkpoint``
    files, which it reads as empty. No finding, and the replay uses log start offset 0."""
    logs = copy_log_dir(tmp_path, "txn-0", "plain-0")
    for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (logs / name).write_bytes(b"")
    for part in ("txn-0", "plain-0"):
        (logs / part / "leader-epoch-checkpoint").write_bytes(b"")
        report = verify_partition(logs / part)
        assert [f.kind for f in report.findings if f.kind != "no_meta_properties"] == [], part
        assert report.healthy
