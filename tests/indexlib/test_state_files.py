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
    assert kind in found  # (a file that disagrees with the log's epochs also gives leader_epoch_missing)
    assert set(found) <= {kind, "leader_epoch_missing"}
    assert verify_partition(logs / "txn-0").healthy is False


def test_a_broker_killed_in_its_first_minute_leaves_no_false_finding(tmp_path):
    """Kafka creates every checkpoint file empty when it opens it: a broker killed before its first flush leaves
    0-byte ``log-start-offset-checkpoint`` and ``recovery-point-offset-checkpoint`` files (its leader epochs are
    written as it assigns them, before any batch: a partition never written keeps a 0-byte one), which it reads as
    empty. No finding, and the replay uses log start offset 0."""
    logs = copy_log_dir(tmp_path, "txn-0", "plain-0")
    for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (logs / name).write_bytes(b"")
    empty = logs / "quiet-0"  # a partition created but never written: its leader-epoch-checkpoint is 0 bytes too
    empty.mkdir()
    for suffix in (".log", ".index", ".timeindex"):
        (empty / f"{0:020d}{suffix}").write_bytes(b"")
    (empty / "leader-epoch-checkpoint").write_bytes(b"")
    for part in ("txn-0", "plain-0", "quiet-0"):
        report = verify_partition(logs / part)
        assert [f.kind for f in report.findings if f.kind != "no_meta_properties"] == [], part
        assert report.healthy


# ------------------------------------------------------------------------------- leader epochs against the log
def epochs_partition(tmp_path: Path) -> tuple[Path, list]:
    """A generated partition whose batches start several leader epochs, its indexes rebuilt, and the
    ``leader-epoch-checkpoint`` Kafka would hold for it; returns (partition dir, the epochs)."""
    from indexlib.engine import rebuild_partition
    from indexlib.format.leader_epoch_checkpoint import format_leader_epoch_checkpoint
    from indexlib.recovery.producer_state import recovered_leader_epochs
    from indexlib.storage.partition_files import summarize_log
    from indexlib.testing.generate import generate_partition

    part = tmp_path / "logs" / "orders-0"
    generate_partition(part, segments=3, batches_per_segment=40, transactional_producers=1, epochs=True, seed=9)
    rebuild_partition(part)
    starts = [summarize_log(p, int(p.name[:20]), 4096).epoch_starts for p in sorted(part.glob("*.log"))]
    epochs = recovered_leader_epochs([], starts)
    assert len(epochs) >= 3
    (part / "leader-epoch-checkpoint").write_text(format_leader_epoch_checkpoint(epochs))
    return part, epochs


def test_leader_epochs_that_match_the_log_give_no_finding(tmp_path):
    part, _ = epochs_partition(tmp_path)
    assert kinds(part) == {}


@pytest.mark.parametrize("fault", ["missing", "later-by-one", "before-the-previous-epoch"])
def test_a_leader_epoch_checkpoint_that_disagrees_with_the_log_is_found(tmp_path, fault):
    from indexlib.format.leader_epoch_checkpoint import EpochEntry, format_leader_epoch_checkpoint

    part, epochs = epochs_partition(tmp_path)
    changed = list(epochs)
    if fault == "missing":
        del changed[1]
        kind = "leader_epoch_missing"
    elif fault == "later-by-one":
        changed[1] = EpochEntry(changed[1].epoch, changed[1].start_offset + 1)
        kind = "leader_epoch_start_mismatch"
    else:  # at the previous epoch's first batch: batches of that epoch lie in between
        changed[2] = EpochEntry(changed[2].epoch, changed[1].start_offset)
        del changed[1]
        kind = "leader_epoch_start_mismatch"
    (part / "leader-epoch-checkpoint").write_text(format_leader_epoch_checkpoint(changed))
    found = kinds(part)
    assert kind in found, found
    assert verify_partition(part).healthy is False
