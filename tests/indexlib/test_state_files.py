"""Verify of the files Kafka's recovery derives beside the segments (``indexlib.recovery.state_checks``): a
producer snapshot Kafka would refuse, a ``leader-epoch-checkpoint`` it cannot read or whose entries do not
increase, and no false finding on what a broker killed in its first minute leaves (0-byte checkpoints)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
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


@pytest.mark.parametrize("fault", ["missing", "later-by-one", "earlier-by-one", "before-the-previous-epoch"])
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
    elif fault == "earlier-by-one":  # onto the previous batch's last offset (offsets contiguous: no cleaner)
        changed[1] = EpochEntry(changed[1].epoch, changed[1].start_offset - 1)
        kind = "leader_epoch_start_mismatch"
    else:  # at the previous epoch's first batch: batches of that epoch lie in between
        changed[2] = EpochEntry(changed[2].epoch, changed[1].start_offset)
        del changed[1]
        kind = "leader_epoch_start_mismatch"
    (part / "leader-epoch-checkpoint").write_text(format_leader_epoch_checkpoint(changed))
    found = kinds(part)
    assert kind in found, found
    assert verify_partition(part).healthy is False


# ------------------------------------------------------------ snapshots against the log; what a repair writes
def repair(part: Path, tmp_path: Path, dry_run: bool = False):
    """``repair`` of one partition dir in place, its backups under ``tmp_path/backups``."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover_partition_dir

    options = RunOptions("repair", backup_root=str(tmp_path / "backups"), dry_run=dry_run)
    return run(discover_partition_dir(str(part)), options, lambda topic: IndexSettings(), map_locally())


def _rewrite_snapshot(path: Path, change) -> None:
    """Rewrite a snapshot with one entry changed and a CRC-32C that matches (a file Kafka accepts)."""
    from indexlib.format.producer_snapshot import format_snapshot, parse_snapshot_entries

    entries = parse_snapshot_entries(path.read_bytes(), str(path))
    path.write_bytes(format_snapshot([change(entries[0]), *entries[1:]]))


SNAPSHOT_FAULTS = {
    "producer-epoch": lambda e: replace(e, epoch=e.epoch + 1),
    "last-sequence": lambda e: replace(e, last_sequence=e.last_sequence - 1),
    "timestamp": lambda e: replace(e, timestamp=e.timestamp - 1),
    "coordinator-epoch": lambda e: replace(e, coordinator_epoch=e.coordinator_epoch + 1),
    "transaction-left-open": lambda e: replace(e, current_txn_first_offset=5),
}


@pytest.mark.parametrize("fault", list(SNAPSHOT_FAULTS))
def test_a_snapshot_kafka_accepts_but_the_log_contradicts_is_found_and_repaired_to_kafkas_file(tmp_path, fault):
    """Each snapshot of the local broker's transactional partitions at a segment base: one entry changed, the
    CRC recomputed (Kafka would load it and trust it). Verify names the producer and the field; repair writes the
    file the broker wrote, keeps the changed one in the backups, and leaves the partition healthy."""
    logs = copy_log_dir(tmp_path, "txn-0", "txn-1")
    for part, name in (("txn-0", "00000000000000000011.snapshot"), ("txn-1", "00000000000000000010.snapshot")):
        snapshot = logs / part / name
        original = snapshot.read_bytes()
        _rewrite_snapshot(snapshot, SNAPSHOT_FAULTS[fault])
        changed = snapshot.read_bytes()
        found = kinds(logs / part)
        assert list(found) == ["producer_snapshot_mismatch"], (part, found)
        assert found["producer_snapshot_mismatch"][0].file == str(snapshot)
        field_name = {"producer-epoch": "epoch", "transaction-left-open": "current_txn_first_offset"}.get(
            fault, fault.replace("-", "_")
        )
        assert field_name in found["producer_snapshot_mismatch"][0].detail
        assert repair(logs / part, tmp_path, dry_run=True).exit_code == 1 and snapshot.read_bytes() == changed
        report = repair(logs / part, tmp_path)
        assert report.exit_code == 0 and report.rewritten == [str(snapshot)]
        assert snapshot.read_bytes() == original, part
        [backup] = (tmp_path / "backups").glob(f"*/{part}/{name}")
        assert backup.read_bytes() == changed
        assert kinds(logs / part) == {}


def test_a_snapshot_kafka_would_refuse_is_repaired_to_kafkas_file(tmp_path):
    """A flipped CRC byte: Kafka would delete the file and replay; repair writes the state the replay gives,
    which is the file the broker wrote."""
    logs = copy_log_dir(tmp_path, "txn-0")
    snapshot = logs / "txn-0" / "00000000000000000011.snapshot"
    original = snapshot.read_bytes()
    snapshot.write_bytes(original[:3] + bytes([original[3] ^ 0x10]) + original[4:])
    assert list(kinds(logs / "txn-0")) == ["bad_producer_snapshot"]
    assert repair(logs / "txn-0", tmp_path).exit_code == 0
    assert snapshot.read_bytes() == original
    assert kinds(logs / "txn-0") == {}


def merged_txn_partition(tmp_path: Path) -> tuple[Path, Path]:
    """The local broker's ``txn-0`` with its two segments made one (the second's batches appended to the first's
    ``.log``, the indexes rebuilt): Kafka's snapshot at the second's base, 11, now lies inside a segment, as an
    older clean shutdown's does, and holds the state the broker wrote there. (partition dir, that snapshot)"""
    from indexlib.engine import rebuild_partition

    logs = copy_log_dir(tmp_path, "txn-0")
    part = logs / "txn-0"
    second = part / "00000000000000000011.log"
    with open(part / "00000000000000000000.log", "ab") as first:
        first.write(second.read_bytes())
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        (part / f"00000000000000000011{suffix}").unlink(missing_ok=True)
    rebuild_partition(part)
    return part, part / "00000000000000000011.snapshot"


def test_a_snapshot_inside_a_segment_that_kafka_wrote_gives_no_finding(tmp_path):
    """Issue 41: a snapshot inside a segment is compared with the state the segment's batches below it give; the
    broker's own file agrees."""
    part, inside = merged_txn_partition(tmp_path)
    from indexlib.format.producer_snapshot import parse_snapshot_entries

    assert parse_snapshot_entries(inside.read_bytes(), str(inside))  # it has producers to compare
    assert kinds(part) == {}


@pytest.mark.parametrize("fault", list(SNAPSHOT_FAULTS))
def test_a_snapshot_inside_a_segment_that_the_log_contradicts_is_found_and_repaired_to_kafkas_file(tmp_path, fault):
    """Issue 41: the broker's snapshot inside a segment with one entry changed (CRC recomputed: Kafka would trust
    it, were it the newest it has): verify names it; repair writes the broker's file back, byte for byte."""
    part, inside = merged_txn_partition(tmp_path)
    original = inside.read_bytes()
    _rewrite_snapshot(inside, SNAPSHOT_FAULTS[fault])
    found = kinds(part)
    assert list(found) == ["producer_snapshot_mismatch"] and found["producer_snapshot_mismatch"][0].file == str(inside)
    report = repair(part, tmp_path)
    assert report.exit_code == 0 and report.rewritten == [str(inside)]
    assert inside.read_bytes() == original
    assert kinds(part) == {}


def test_a_snapshot_the_log_cannot_speak_for_is_not_compared(tmp_path):
    """A snapshot inside a segment at an offset that is no batch's end (Kafka writes none there) is only checked as
    a file; a producer the log no longer holds (its batches below the log's first segment) is not a finding."""
    from indexlib.format.producer_snapshot import ProducerSnapshotEntry, format_snapshot, parse_snapshot_entries

    logs = copy_log_dir(tmp_path, "txn-0")
    inside = logs / "txn-0" / "00000000000000000005.snapshot"
    inside.write_bytes(format_snapshot([ProducerSnapshotEntry(42, 7, 1, 3, 1, 1_700_000_000_000, -1, -1)]))
    snapshot = logs / "txn-0" / "00000000000000000011.snapshot"
    entries = parse_snapshot_entries(snapshot.read_bytes(), str(snapshot))
    gone = ProducerSnapshotEntry(99, 0, 4, 2, 0, 1_700_000_000_000, -1, -1)  # no batch of producer 99 in the log
    snapshot.write_bytes(format_snapshot([*entries, gone]))
    assert kinds(logs / "txn-0") == {}


def test_a_leader_epoch_checkpoint_is_repaired_to_kafkas_file(tmp_path):
    """The local broker's file (one epoch from offset 0) emptied, its start moved, or made unreadable: repair
    writes the broker's file again."""
    logs = copy_log_dir(tmp_path, "txn-0")
    path = logs / "txn-0" / "leader-epoch-checkpoint"
    original = path.read_text()
    for text in ("0\n0\n", "0\n1\n0 1\n", "0\n2\n0 0\n"):
        path.write_text(text)
        assert kinds(logs / "txn-0"), text
        report = repair(logs / "txn-0", tmp_path)
        assert report.exit_code == 0 and str(path) in report.rewritten, text
        assert path.read_text() == original, text


@pytest.mark.parametrize(
    "fault", ["missing", "later-by-one", "earlier-by-one", "before-the-previous-epoch", "out-of-order"]
)
def test_a_leader_epoch_checkpoint_that_disagrees_with_the_log_is_repaired(tmp_path, fault):
    """On a partition of several epochs, each fault repaired to the file a broker holds; an epoch entry with no
    batch (a leader that wrote nothing) is kept where it fits."""
    from indexlib.format.leader_epoch_checkpoint import EpochEntry, format_leader_epoch_checkpoint

    part, epochs = epochs_partition(tmp_path)
    idle = EpochEntry(epochs[-1].epoch + 5, epochs[-1].start_offset + 1)  # fits after the log's last epoch start
    expected = format_leader_epoch_checkpoint([*epochs, idle])
    changed = [*epochs, idle]
    if fault == "missing":
        del changed[1]
    elif fault == "later-by-one":
        changed[1] = EpochEntry(changed[1].epoch, changed[1].start_offset + 1)
    elif fault == "earlier-by-one":
        changed[1] = EpochEntry(changed[1].epoch, changed[1].start_offset - 1)
    elif fault == "before-the-previous-epoch":
        changed[2] = EpochEntry(changed[2].epoch, changed[1].start_offset)
    else:
        changed[1], changed[2] = changed[2], changed[1]
    (part / "leader-epoch-checkpoint").write_text(format_leader_epoch_checkpoint(changed))
    assert kinds(part)
    assert repair(part, tmp_path).exit_code == 0
    assert (part / "leader-epoch-checkpoint").read_text() == expected
    assert kinds(part) == {}


# ---------------------------------------------------------------------------------- the log dir's checkpoints
def verify_log_dir(logs: Path, mode: str = "verify"):
    """A run over every partition of the log dir ``logs`` (repair: in place, its backups beside ``logs``)."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    options = RunOptions(mode, backup_root=str(logs.parent / "backups") if mode == "repair" else None)
    return run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally())


def log_dir_findings(report) -> list[tuple[str, str, str]]:
    """(kind, file, severity) of every finding of the run but on the log dir's ``meta.properties``."""
    return [(f.kind, f.file, f.severity) for f in report.findings if f.kind != "no_meta_properties"]


def test_the_log_dir_checkpoint_findings_from_what_was_read():
    """The pure half of the two checks below (``recovery.state_checks``): a recovery-point file that could not be
    read is one error naming it; a log start above the last segment's end (its base when empty) is one error naming
    the log-start file and the partition; at the end, or where the last segment is refused, none."""
    from types import SimpleNamespace

    from indexlib.recovery.state_checks import log_start_findings, recovery_point_findings

    assert recovery_point_findings("/d", None) == []
    (bad,) = recovery_point_findings("/d", "/d/recovery-point-offset-checkpoint: expected 2 entries, found 1")
    assert (bad.kind, bad.severity) == ("bad_recovery_point_checkpoint", "error")
    assert bad.file == "/d/recovery-point-offset-checkpoint" and bad.detail.startswith(f"{bad.file}: expected 2")
    full = SimpleNamespace(fatal=None, batch_count=3, last_offset=140)  # offsets 100..140 at base 100
    empty = SimpleNamespace(fatal=None, batch_count=0, last_offset=99)
    refused = SimpleNamespace(fatal=object(), batch_count=0, last_offset=99)
    assert log_start_findings("/d", "t-0", 141, 100, full) == log_start_findings("/d", "t-0", 100, 100, empty) == []
    assert log_start_findings("/d", "t-0", 10**6, 100, refused) == []
    (beyond,) = log_start_findings("/d", "t-0", 142, 100, full)
    assert (beyond.kind, beyond.found, beyond.expected) == ("log_start_beyond_log_end", 142, "<= 141")
    assert beyond.file == "/d/log-start-offset-checkpoint" and beyond.severity == "error"
    assert [f.found for f in log_start_findings("/d", "t-0", 101, 100, empty)] == [101]


MALFORMED_RECOVERY_POINTS = {
    "one-entry-of-two": b"0\n2\nplain 0 6000\n",
    "count-with-no-entry": b"0\n1\n",
    "entries-beyond-count": b"0\n0\nplain 0 6000\n",
    "negative-count": b"0\n-1\n",
    "version-1": b"1\n1\nplain 0 6000\n",
    "version-not-a-number": b"zero\n1\nplain 0 6000\n",
    "version-with-blank": b" 0\n1\nplain 0 6000\n",
    "count-not-a-number": b"0\none\nplain 0 6000\n",
    "offset-not-a-number": b"0\n1\nplain 0 6k\n",
    "partition-not-a-number": b"0\n1\nplain p0 6000\n",
    "partition-beyond-int": b"0\n1\nplain 2147483648 6000\n",
    "offset-beyond-long": b"0\n1\nplain 0 9223372036854775808\n",
    "two-fields": b"0\n1\nplain 6000\n",
    "four-fields": b"0\n1\nplain 0 6000 7\n",
    "empty-entry-line": b"0\n1\n\n",
    "not-utf8": b"0\n1\nplain\xff 0 6000\n",
    "binary-garbage": bytes(range(256)),
}


@pytest.mark.parametrize("damage", list(MALFORMED_RECOVERY_POINTS))
def test_a_recovery_point_file_kafka_cannot_read_is_one_error_naming_it(tmp_path, damage):
    """Kafka reads a ``recovery-point-offset-checkpoint`` it cannot parse (``CheckpointReadBuffer``: version 0, a
    count, exactly that many ``topic partition offset`` lines, UTF-8) as empty, so its next unclean start recovers
    every segment of every partition in the log dir: verify and repair report it once per log dir, as an error
    naming the file (repair leaves it: exit 1)."""
    logs = copy_log_dir(tmp_path, "plain-0", "txn-0")
    checkpoint = logs / "recovery-point-offset-checkpoint"
    checkpoint.write_bytes(MALFORMED_RECOVERY_POINTS[damage])
    for mode in ("verify", "repair"):
        report = verify_log_dir(logs, mode)
        assert log_dir_findings(report) == [("bad_recovery_point_checkpoint", str(checkpoint), "error")], mode
        (finding,) = [f for f in report.findings if f.kind == "bad_recovery_point_checkpoint"]
        assert finding.detail.startswith(f"{checkpoint}: ") and "recovers every segment" in finding.detail
        assert report.exit_code == 1, mode
    assert checkpoint.read_bytes() == MALFORMED_RECOVERY_POINTS[damage]


@pytest.mark.parametrize(
    "content",
    [None, b"", b"0\n", b"0\n0\n", b"0\n1\nplain 0 6000\n", b"0\r\n1\r\nplain 0 6000\r\n", b"0\n1\nplain  0\t6000\n"],
    ids=["absent", "0 bytes", "version only", "no entries", "one entry", "CRLF", "runs of whitespace"],
)
def test_a_recovery_point_file_kafka_reads_is_no_finding(tmp_path, content):
    """Absent or 0 bytes (a broker killed in its first minute), a version line alone, no entries, and the line
    endings and whitespace Java's ``readLine``/``split("\\\\s+")`` accept: Kafka reads them all, no finding."""
    logs = copy_log_dir(tmp_path, "plain-0", "txn-0")
    checkpoint = logs / "recovery-point-offset-checkpoint"
    checkpoint.unlink()
    if content is not None:
        checkpoint.write_bytes(content)
    report = verify_log_dir(logs)
    assert log_dir_findings(report) == [] and report.exit_code == 0


def with_log_start(logs: Path, offsets: dict[tuple[str, int], int]) -> Path:
    from indexlib.format.checkpoint import format_offset_checkpoint

    checkpoint = logs / "log-start-offset-checkpoint"
    checkpoint.write_text(format_offset_checkpoint(offsets))
    return checkpoint


@pytest.mark.parametrize("beyond", [1, 10**9])
def test_a_log_start_beyond_the_log_end_is_an_error_naming_the_checkpoint(tmp_path, beyond):
    """plain-0's log ends at 6000: a ``log-start-offset-checkpoint`` entry above that makes Kafka's ``LogLoader``
    delete every segment of the partition at its next start, clean or not. One error naming the checkpoint and the
    partition, for that partition only; repair writes nothing for it (exit 1)."""
    logs = copy_log_dir(tmp_path, "plain-0", "txn-0")
    checkpoint = with_log_start(logs, {("plain", 0): 6000 + beyond, ("txn", 0): 5})
    for mode in ("verify", "repair"):
        report = verify_log_dir(logs, mode)
        assert log_dir_findings(report) == [("log_start_beyond_log_end", str(checkpoint), "error")], mode
        assert report.partition_findings[str(logs / "plain-0")][0].kind == "log_start_beyond_log_end"
        (finding,) = [f for f in report.findings if f.kind == "log_start_beyond_log_end"]
        assert (finding.found, finding.expected) == (6000 + beyond, "<= 6000")
        assert finding.detail.startswith("plain-0: ") and "deletes every segment of plain-0" in finding.detail
        assert report.exit_code == 1, mode
    assert checkpoint.read_text().startswith("0\n2\nplain 0 ")
    (logs / ".kafka_cleanshutdown").unlink(missing_ok=True)  # after a crash: recover leaves plain-0 to the broker
    (logs / "recovery-point-offset-checkpoint").write_text("0\n2\nplain 0 0\ntxn 0 0\n")
    plain_files = sorted(p.name for p in (logs / "plain-0").iterdir())
    report = recover_log_dir(logs)
    assert "log_start_beyond_log_end" in {f.kind for f in report.remaining_findings} and report.exit_code == 1
    plan = report.recovered[str(logs / "plain-0")]
    assert plan.new_recovery_point is None and plan.left is not None and "deletes every segment" in plan.left
    assert sorted(p.name for p in (logs / "plain-0").iterdir()) == plain_files  # nothing rolled or moved there
    assert report.recovered[str(logs / "txn-0")].new_recovery_point is not None  # the other one recovered
    assert "plain 0 0" in (logs / "recovery-point-offset-checkpoint").read_text()


@pytest.mark.parametrize("mode", ["verify", "repair", "recover"])
def test_a_malformed_log_start_checkpoint_is_one_error_for_its_log_dir(tmp_path, mode):
    """A ``log-start-offset-checkpoint`` Kafka cannot read: one ``bad_log_start_checkpoint`` naming it and why, for
    the log dir (not one per partition), in every mode; the file is left as it was (the broker's to rewrite)."""
    logs = copy_log_dir(tmp_path, "plain-0", "txn-0", "comp-gzip-0")
    checkpoint = logs / "log-start-offset-checkpoint"
    checkpoint.write_bytes(b"0\n2\nplain 0 0\n")
    report = verify_log_dir(logs, mode) if mode != "recover" else recover_log_dir(logs)
    found = [f for f in report.findings if f.kind == "bad_log_start_checkpoint"]
    assert [(f.file, f.severity) for f in found] == [(str(checkpoint), "error")]
    assert found[0].detail.startswith(f"{checkpoint}: ") and "assuming log start offset 0" in found[0].detail
    assert checkpoint.read_bytes() == b"0\n2\nplain 0 0\n" and report.exit_code == 1


def recover_log_dir(logs: Path):
    """A ``recover`` of every partition of ``logs`` (its backups beside it)."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    options = RunOptions("recover", backup_root=str(logs.parent / "backups"))
    return run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally())


@pytest.mark.parametrize("start", [0, 2658, 3000, 6000])
def test_a_log_start_at_or_below_the_log_end_is_no_finding(tmp_path, start):
    """From the first segment's base to the log end itself (DeleteRecords up to the end): Kafka keeps the log."""
    logs = copy_log_dir(tmp_path, "plain-0")
    with_log_start(logs, {("plain", 0): start})
    assert log_dir_findings(verify_log_dir(logs)) == []


def test_the_log_end_of_an_empty_last_segment_is_its_base(tmp_path):
    """An empty segment rolled at 6000 (a roll, or what recover leaves): the log ends at its base, so a log start
    of 6000 is Kafka's own and 6001 deletes every segment."""
    logs = copy_log_dir(tmp_path, "plain-0")
    for suffix in (".log", ".index", ".timeindex"):
        (logs / "plain-0" / f"{6000:020d}{suffix}").write_bytes(b"")
    with_log_start(logs, {("plain", 0): 6000})
    assert log_dir_findings(verify_log_dir(logs)) == []
    checkpoint = with_log_start(logs, {("plain", 0): 6001})
    assert log_dir_findings(verify_log_dir(logs)) == [("log_start_beyond_log_end", str(checkpoint), "error")]
