"""``dump`` of the files Kafka keeps beside the segments: producer snapshots (``<offset>.snapshot``, the lines
kafka-dump-log.sh prints of one), ``leader-epoch-checkpoint`` and a log dir's offset checkpoints; their JSON; a
snapshot or checkpoint Kafka refuses (one line naming it, exit 2); and ``--check`` of them (what verify reports).

Every real file in ``../shared/fixtures/kafka-real/`` is dumped in place (never copied into the project); damage is
done to copies in ``tmp_path``."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from indexlib.cli.dump import check_index_file, dump_file, format_dump, iter_json, read_dump
from indexlib.cli.dump.state_files import first_sequence, format_snapshot_entry
from indexlib.cli.main import main
from indexlib.format.checkpoint import parse_offset_checkpoint
from indexlib.format.leader_epoch_checkpoint import EpochEntry, parse_leader_epoch_checkpoint
from indexlib.format.producer_snapshot import ProducerSnapshotEntry, format_snapshot, parse_snapshot_entries
from indexlib.format.scan_kernel import crc32c_function
from indexlib.recovery.state_checks import leader_epoch_findings, snapshot_findings
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, hex_dump_copy, requires_kafka_real, written_by_kafka

PROG = "python -m indexlib: error: "
INT32_MAX = 2**31 - 1

# DumpLogSegments.dumpProducerIdSnapshot (Kafka 4.x: currentTxnFirstOffset is a java.util.OptionalLong), the batch
# metadata part only when the entry has one
SNAPSHOT_LINE = re.compile(
    r"producerId: -?\d+ producerEpoch: -?\d+ coordinatorEpoch: -?\d+ "
    r"currentTxnFirstOffset: (OptionalLong\.empty|OptionalLong\[\d+\]) lastTimestamp: -?\d+"
    r"( firstSequence: -?\d+ lastSequence: -?\d+ lastOffset: \d+ offsetDelta: -?\d+ timestamp: -?\d+)?"
)


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["dump", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def real_files(pattern: str) -> list[Path]:
    return sorted(p for p in KAFKA_REAL.glob(f"*/*/{pattern}") if "_rebuilt_by_kafka" not in str(p))


def entry(**changes) -> ProducerSnapshotEntry:
    fields = dict(
        producer_id=1000,
        epoch=0,
        last_sequence=9,
        last_offset=9,
        offset_delta=9,
        timestamp=1_700_000_000_000,
        coordinator_epoch=-1,
        current_txn_first_offset=-1,
    )
    return ProducerSnapshotEntry(**{**fields, **changes})


# ------------------------------------------------------------------------------------------ snapshots
def test_snapshot_lines_are_kafka_dump_logs():
    assert format_snapshot_entry(asdict(entry())) == (
        "producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000000 firstSequence: 0 lastSequence: 9 lastOffset: 9 offsetDelta: 9 "
        "timestamp: 1700000000000"
    )
    open_txn = entry(current_txn_first_offset=811, coordinator_epoch=3, epoch=2)
    assert "producerEpoch: 2 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[811] " in format_snapshot_entry(
        asdict(open_txn)
    )
    # no batch metadata (last offset -1): readSnapshot makes none, so the line ends at lastTimestamp
    bare = entry(last_sequence=-1, last_offset=-1, offset_delta=0)
    assert format_snapshot_entry(asdict(bare)).endswith(
        "currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1700000000000"
    )


def test_first_sequence_wraps_as_decrement_sequence():
    assert first_sequence(9, 9) == 0
    assert first_sequence(2, 5) == INT32_MAX - 3 + 1  # below 0 the sequence goes on from Integer.MAX_VALUE
    assert first_sequence(-1, 0) == INT32_MAX  # a batch without sequences: Kafka prints 2147483647
    assert first_sequence(INT32_MAX, 0) == INT32_MAX


def test_a_snapshot_dumps_as_text_and_json(capsys, tmp_path):
    entries = [entry(), entry(producer_id=1001, current_txn_first_offset=40, last_sequence=-1, last_offset=-1,
                              offset_delta=0)]  # fmt: skip
    path = tmp_path / f"{42:020d}.snapshot"
    path.write_bytes(format_snapshot(entries))
    code, out, err = run(capsys, path)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {path}", "Producer snapshot at offset 42, 102 bytes, 2 producers"]
    assert lines[2:] == [format_snapshot_entry(asdict(e)) for e in entries]
    code, out, _ = run(capsys, path, "--json")
    dumped = json.loads(out)
    assert code == 0 and dumped == dump_file(path)
    assert dumped["kind"] == "producer_snapshot" and dumped["offset"] == 42 and dumped["entry_count"] == 2
    assert [ProducerSnapshotEntry(**row) for row in dumped["entries"]] == entries
    assert list(format_dump(dumped)) == list(format_dump(read_dump(path)))  # text from the JSON form too


def test_bytes_after_the_entries_are_a_problem(capsys, tmp_path):
    """Kafka reads a snapshot with bytes after its entries (the CRC covers them) but never writes one: exit 1."""
    path = tmp_path / f"{0:020d}.snapshot"
    data = bytearray(format_snapshot([entry()]) + b"\x00\x00")
    data[2:6] = crc32c_function()(bytes(data[6:])).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    code, out, _ = run(capsys, path)
    assert code == 1 and format_snapshot_entry(asdict(entry())) in out
    assert "Problem: trailing_bytes at byte 56: 2 bytes follow the last entry" in out
    path.write_bytes(format_snapshot([entry()]) + b"\x00\x00")  # the stored CRC no longer covers them
    code, _, err = run(capsys, path)
    assert code == 2 and "CRC-32C mismatch" in err


@requires_kafka_real
def test_every_real_snapshot_dumps_in_place_as_its_parser_reads_it(capsys):
    paths = real_files("*.snapshot")
    dumped = 0
    for path in paths:
        if not written_by_kafka(path):
            continue
        expected = parse_snapshot_entries(path.read_bytes(), str(path))
        dump = dump_file(path)
        assert [ProducerSnapshotEntry(**row) for row in dump["entries"]] == expected, path
        assert dump["problems"] == [] and dump["file_size"] == path.stat().st_size
        assert json.loads("".join(iter_json(read_dump(path)))) == dump  # JSON round-trips
        code, out, err = run(capsys, path)
        assert code == 0 and err == "", path
        lines = out.splitlines()
        assert lines[0] == f"Dumping {path}" and len(lines) == 2 + len(expected)
        for line, e in zip(lines[2:], expected, strict=True):
            assert SNAPSHOT_LINE.fullmatch(line), line
            assert line.startswith(f"producerId: {e.producer_id} producerEpoch: {e.epoch} ")
        dumped += 1
    assert dumped >= 90 and any(dump_file(p)["entry_count"] for p in paths if written_by_kafka(p))


def xxd_copy(tmp_path: Path) -> Path:
    """A real snapshot with a producer replaced by its hex dump (:func:`~tests.conftest.hex_dump_copy`)."""
    source = next(p for p in real_files("*.snapshot") if written_by_kafka(p) and p.stat().st_size > 10)
    return hex_dump_copy(source, tmp_path / "xxd")


@requires_kafka_real
def test_a_hex_dump_in_place_of_a_snapshot_is_one_line_and_exit_2(capsys, tmp_path):
    damaged = xxd_copy(tmp_path)
    code, out, err = run(capsys, damaged)
    assert code == 2 and out == ""
    assert err.splitlines() == [f"{PROG}{damaged}: snapshot version 12336, expected 1 (Kafka refuses this snapshot "
                                "and deletes it at its next start)"]  # fmt: skip


def flipped_crc_copy(tmp_path: Path) -> Path:
    """A copy of a real snapshot with a producer, one byte of its stored CRC flipped."""
    source = next(p for p in real_files("*.snapshot") if written_by_kafka(p) and p.stat().st_size > 10)
    copy = tmp_path / source.parent.name / source.name
    copy.parent.mkdir()
    shutil.copyfile(source, copy)
    data = bytearray(copy.read_bytes())
    data[3] ^= 0x01
    copy.write_bytes(bytes(data))
    return copy


@requires_kafka_real
def test_a_flipped_crc_byte_is_one_line_naming_the_file_and_exit_2(capsys, tmp_path):
    copy = flipped_crc_copy(tmp_path)
    code, out, err = run(capsys, copy)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"{PROG}{copy}: snapshot CRC-32C mismatch (Kafka refuses this snapshot and deletes it at its next start)"
    ]
    good = next(p for p in real_files("*.snapshot") if written_by_kafka(p))
    code, out, err = run(capsys, copy, good, "--json")  # the other files are still dumped
    assert code == 2 and json.loads(out) == [dump_file(good)] and len(err.splitlines()) == 1


@requires_kafka_real
def test_check_of_a_flipped_crc_reports_what_verify_reports_and_exits_1(capsys, tmp_path):
    copy = flipped_crc_copy(tmp_path)
    result = check_index_file(str(copy))
    assert result.failed and result.sanity == f"{copy}: snapshot CRC-32C mismatch"
    assert result.findings == snapshot_findings({str(copy): copy.read_bytes()})
    assert [f.kind for f in result.findings] == ["bad_producer_snapshot"]
    code, out, _ = run(capsys, copy, "--check")
    assert code == 1
    assert out.splitlines() == [
        f"{copy} failed sanity check: {copy}: snapshot CRC-32C mismatch",
        f"error bad_producer_snapshot: {copy}: snapshot CRC-32C mismatch; Kafka deletes it at its next start",
    ]


@requires_kafka_real
def test_check_of_every_real_snapshot_and_leader_epoch_checkpoint(capsys, tmp_path):
    """Each file a broker wrote passes; a damaged snapshot (a hex dump in its place) fails as verify reports it."""
    hex_dump = xxd_copy(tmp_path)
    paths = real_files("*.snapshot") + real_files("leader-epoch-checkpoint") + [hex_dump]
    damaged = {p for p in paths if p == hex_dump or not written_by_kafka(p)}
    for path in paths:
        result = check_index_file(str(path))
        assert result.failed is (path in damaged), (path, result)
    code, out, _ = run(capsys, *paths, "--check")
    assert code == 1 and out.count("failed sanity check") == len(damaged) and "error bad_producer_snapshot" in out


# ------------------------------------------------------------------------------------------ checkpoints
@requires_kafka_real
def test_every_real_leader_epoch_checkpoint_dumps_as_its_parser_reads_it(capsys):
    paths = real_files("leader-epoch-checkpoint")
    assert len(paths) > 50
    for path in paths:
        expected = parse_leader_epoch_checkpoint(path.read_text(), str(path))
        dump = dump_file(path)
        assert [EpochEntry(**row) for row in dump["entries"]] == expected
        assert dump["problems"] == [] and json.loads("".join(iter_json(read_dump(path)))) == dump
        code, out, err = run(capsys, path)
        assert code == 0 and err == ""
        assert out.splitlines()[2:] == [f"epoch: {e.epoch} startOffset: {e.start_offset}" for e in expected]


@requires_kafka_real
def test_every_real_offset_checkpoint_dumps_as_its_parser_reads_it(capsys):
    names = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint")
    paths = sorted(p for name in names for p in KAFKA_REAL.glob(f"*/{name}"))
    assert len(paths) >= 3 * 7
    for path in paths:
        expected = parse_offset_checkpoint(path.read_text(), str(path))
        dump = dump_file(path)
        assert {(r["topic"], r["partition"]): r["offset"] for r in dump["entries"]} == expected
        assert [(r["topic"], r["partition"]) for r in dump["entries"]] == list(expected)  # file order
        code, out, _ = run(capsys, path)
        assert code == 0 and f"Offset checkpoint {path.name}, " in out
        assert all(re.fullmatch(r"topic: \S+ partition: \d+ offset: -?\d+", line) for line in out.splitlines()[2:])


def test_leader_epochs_that_do_not_increase_are_problems_and_fail_check(capsys, tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    text = "0\n3\n0 0\n2 100\n1 50\n"
    path.write_text(text)
    code, out, _ = run(capsys, path)
    assert code == 1
    assert "epoch: 1 startOffset: 50" in out and "Problem: epoch_not_increasing: entry 2: " in out
    result = check_index_file(str(path))
    assert result.sanity is None and result.failed  # Kafka reads it; its cache drops entries while loading
    assert result.findings == leader_epoch_findings(str(path), text)
    assert run(capsys, path, "--check")[0] == 1


def test_a_leader_epoch_checkpoint_kafka_cannot_read(capsys, tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n")  # the count says 2, one entry follows
    code, out, err = run(capsys, path)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"{PROG}{path}: expected 2 entries in checkpoint file, found 1")
    code, out, _ = run(capsys, path, "--check")
    assert code == 1 and "failed sanity check" in out and "error bad_leader_epoch_checkpoint" in out


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", "recovery-point-offset-checkpoint"])
def test_check_of_a_checkpoint_that_is_not_utf8_fails_as_a_malformed_one_does(capsys, tmp_path, name):
    """Issue 37: a non-UTF-8 checkpoint is one Kafka cannot read: a plain dump refuses it (exit 2, one line), and
    ``--check`` fails it (exit 1, as for a malformed ASCII line), where it once exited 2."""
    path = tmp_path / name
    path.write_bytes(b"0\n1\nt\xff 0 0\n" if name.startswith("recovery") else b"0\n1\n\xff 0\n")
    code, out, err = run(capsys, path)
    assert code == 2 and out == "" and "not UTF-8 text" in err and len(err.splitlines()) == 1
    code, out, err = run(capsys, path, "--check")
    assert code == 1 and err == "" and f"{path} failed sanity check: {path}: not UTF-8 text" in out
    if name == "leader-epoch-checkpoint":
        assert "error bad_leader_epoch_checkpoint" in out
    else:
        assert "verify's checks not run" in out and "passed" not in out


def test_check_of_a_leader_epoch_checkpoint_against_its_partitions_log(capsys, tmp_path):
    """Beside the partition's .log files --check also reports what verify finds of its epochs against theirs."""
    part = tmp_path / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=40, epochs=True, seed=3)
    path = part / "leader-epoch-checkpoint"
    path.write_text("0\n0\n")  # readable, but without the epochs the batches start
    result = check_index_file(str(path))
    assert result.sanity is None and result.verified_against == "its partition's .log files"
    assert "leader_epoch_missing" in [f.kind for f in result.findings]
    code, out, _ = run(capsys, path, "--check")
    assert code == 1 and "error leader_epoch_missing" in out


def test_an_offset_checkpoint_kafka_cannot_read(capsys, tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("1\n0\n")
    code, _, err = run(capsys, path)
    assert code == 2 and "unrecognised checkpoint version 1" in err and str(path) in err
    code, out, _ = run(capsys, path, "--check")
    assert code == 1 and "failed sanity check" in out


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", "log-start-offset-checkpoint", f"{0:020d}.snapshot"])
def test_an_empty_file_is_read_as_kafka_reads_it(capsys, tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    code, out, err = run(capsys, path)
    if name.endswith(".snapshot"):  # a 0-byte snapshot is too short: Kafka refuses it
        assert code == 2 and "too short for a producer snapshot" in err
    else:  # a 0-byte checkpoint reads as no entries
        assert code == 0 and "0 bytes, 0 entries" in out


@requires_kafka_real
def test_check_of_a_snapshot_the_log_contradicts(capsys, tmp_path):
    """A snapshot Kafka reads (its CRC recomputed) with a wrong producer epoch: in its partition dir --check also
    compares its entries with the log, as verify does."""
    from dataclasses import replace

    from .test_state_files import _rewrite_snapshot, copy_log_dir

    logs = copy_log_dir(tmp_path, "txn-0")
    path = logs / "txn-0" / "00000000000000000011.snapshot"
    _rewrite_snapshot(path, lambda e: replace(e, epoch=e.epoch + 1))
    result = check_index_file(str(path))
    assert result.sanity is None and result.verified_against == "its partition's .log files"
    assert [f.kind for f in result.findings] == ["producer_snapshot_mismatch"]
    code, out, _ = run(capsys, path, "--check")
    assert code == 1 and "error producer_snapshot_mismatch" in out and "epoch 1 (the log: 0)" in out
