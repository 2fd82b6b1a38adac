"""Semantic verify: real brokers' files are valid; each kind of damage gives its finding, at its place.

Fault tests work on copies (in tmp_path) of the real fixture partitions; the rebuild of a damaged
partition must cover exactly the valid prefix of its ``.log``.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from indexlib import TransactionIndex
from indexlib.engine import rebuild_partition, verify_partition
from indexlib.engine.segment_task import plan_segment_file
from indexlib.format.batch_walk import scan_log
from indexlib.format.layout import segment_file
from indexlib.storage import LogDirError
from indexlib.testing.batch_encoder import encode_batch_v2
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, copy_fixture, damaged_fixture_files, requires_kafka_real
from .test_conformance import partitions

LOCAL = KAFKA_REAL / "local-apache-kafka-4.1.0"


def copy_partition(name: str, tmp_path: Path) -> Path:
    """A copy of a local fixture partition, without a file the broker did not write (as Kafka leaves the dir
    once it has deleted a snapshot it refuses: see ``written_by_kafka``)."""
    (tmp_path / "logs").mkdir(parents=True, exist_ok=True)
    return copy_fixture(LOCAL / name, tmp_path / "logs" / name)


def file_findings(report) -> list:
    """The report's findings about the partition's files (not its log dir's ``meta.properties``), but for the
    finding on a fixture file the broker did not write (``written_by_kafka``: verify is right to report it)."""
    damaged = set().union(*(damaged_fixture_files(Path(p.path)) for p in report.partitions))
    return [f for f in report.findings if f.kind != "no_meta_properties" and f.file not in damaged]


def kinds(report, name: str | None = None) -> dict[str, object]:
    return {f.kind: f for f in file_findings(report) if name is None or os.path.basename(f.file) == name}


def rebuilt_bytes(part: Path, out: Path) -> dict[str, bytes]:
    rebuild_partition(part, output_dir=out)
    return {p.name: p.read_bytes() for p in (out / part.name).iterdir()}


# --------------------------------------------------------------------------------------- real files
@requires_kafka_real
@pytest.mark.parametrize("part", partitions(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_broker_files_are_valid(part, tmp_path):
    report = verify_partition(part)
    assert file_findings(report) == [], [f.to_dict() for f in file_findings(report)]
    assert report.healthy or damaged_fixture_files(part)  # the damaged file's finding is right (file_findings)
    # Our own rebuild verifies as identical to itself, file by file.
    rebuild_partition(part, output_dir=tmp_path)
    for name in os.listdir(part):
        if name.endswith(".log"):
            shutil.copy(part / name, tmp_path / part.name / name)
    again = verify_partition(tmp_path / part.name)
    assert file_findings(again) == []
    for seg in again.segments:
        assert seg.identical[".index"] is True and seg.identical[".timeindex"] is True
        assert seg.identical[".txnindex"] in (True, None)


@requires_kafka_real
def test_local_originals_are_identical_to_the_rebuild():
    for part in (LOCAL / "txn-0", LOCAL / "plain-0", LOCAL / "__consumer_offsets-1"):
        report = verify_partition(part)
        for seg in report.segments:
            assert seg.identical[".index"] and seg.identical[".timeindex"], (part, seg.base_offset)
        assert any(seg.identical[".txnindex"] for seg in report.segments) == (part.name != "plain-0")


# ---------------------------------------------------------------------------------- index damage
@requires_kafka_real
def test_garbage_index_is_found_and_rebuilt(tmp_path):
    part = copy_partition("java-perf-0", tmp_path)
    expected = rebuilt_bytes(part, tmp_path / "expected")
    target = segment_file(str(part), 13336, ".index")
    size = os.path.getsize(target)
    data = bytearray(Path(target).read_bytes())
    data[5:] = np.random.default_rng(1).integers(0, 256, size - 5, dtype=np.uint8).tobytes()
    Path(target).write_bytes(bytes(data))
    report = verify_partition(part)
    assert not report.healthy
    found = kinds(report, os.path.basename(target))
    assert {"offset_not_increasing", "position_not_increasing"} & set(found)
    assert all(f.file == target for f in file_findings(report))  # nothing else is flagged
    assert [s.damaged_files for s in report.segments] == [[], [".index"], [], []]
    rebuild_partition(part)
    assert Path(target).read_bytes() == expected[os.path.basename(target)]
    assert verify_partition(part).healthy


@requires_kafka_real
def test_missing_timeindex(tmp_path):
    part = copy_partition("plain-0", tmp_path)
    target = segment_file(str(part), 2658, ".timeindex")
    os.unlink(target)
    report = verify_partition(part)
    assert [(f.kind, f.file) for f in file_findings(report)] == [("timeindex_missing", target)]
    assert report.segments[1].identical[".timeindex"] is False
    assert report.segments[1].damaged_files == [".timeindex"]


@requires_kafka_real
def test_index_entry_pointing_into_a_batch(tmp_path):
    part = copy_partition("java-perf-0", tmp_path)
    target = segment_file(str(part), 0, ".index")
    data = bytearray(Path(target).read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 8 * 7)
    struct.pack_into(">ii", data, 8 * 7, rel, pos + 30)
    Path(target).write_bytes(bytes(data))
    report = verify_partition(part)
    finding = kinds(report)["position_not_batch_start"]
    assert (finding.file, finding.entry, finding.position, finding.expected, finding.found) == (
        target,
        7,
        56,
        pos,
        pos + 30,
    )
    assert set(kinds(report)) == {"position_not_batch_start"}


@requires_kafka_real
def test_time_index_with_a_decreasing_timestamp(tmp_path):
    part = copy_partition("plain-0", tmp_path)
    target = segment_file(str(part), 0, ".timeindex")
    data = bytearray(Path(target).read_bytes())
    previous = struct.unpack_from(">q", data, 12 * 9)[0]
    struct.pack_into(">q", data, 12 * 10, previous - 5)
    Path(target).write_bytes(bytes(data))
    report = verify_partition(part)
    found = kinds(report)
    assert found["timestamp_not_increasing"].entry == 10
    assert found["timestamp_not_increasing"].found == previous - 5
    assert found["timestamp_not_running_max"].entry == 10
    assert {f.file for f in file_findings(report)} == {target}


@requires_kafka_real
def test_truncated_index_files(tmp_path):
    part = copy_partition("plain-0", tmp_path)
    index = segment_file(str(part), 0, ".index")
    os.truncate(index, os.path.getsize(index) - 3)
    times = segment_file(str(part), 2658, ".timeindex")
    os.truncate(times, os.path.getsize(times) - 12)  # drops the final entry Kafka appended on roll
    report = verify_partition(part)
    bad = kinds(report)["bad_length"]
    assert (bad.file, bad.found, bad.entry) == (index, os.path.getsize(index), os.path.getsize(index) // 8)
    final = kinds(report)["time_index_missing_final_entry"]
    assert (
        final.file == times
        and final.expected == plan_segment_file(segment_file(str(part), 2658, ".log"), 2658)[0].raw_max
    )
    assert set(kinds(report)) == {"bad_length", "time_index_missing_final_entry"}


@requires_kafka_real
@pytest.mark.parametrize("suffix, kind", [(".index", "index_empty"), (".timeindex", "time_index_missing_final_entry")])
def test_a_zero_byte_index_of_a_large_inactive_segment_is_an_error_that_repair_rebuilds(tmp_path, suffix, kind):
    """Kafka's load accepts a 0-byte ``.index`` or ``.timeindex`` (it sanity-checks neither since 2.3.0), but its
    rebuild of this 1 MiB segment holds entries: verify reports one error naming the file (for the ``.timeindex``,
    the final entry it lacks), and repair writes the rebuild's bytes."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover_partition_dir

    part = copy_partition("plain-0", tmp_path)
    expected = rebuilt_bytes(part, tmp_path / "expected")
    target = segment_file(str(part), 0, suffix)
    assert os.path.getsize(segment_file(str(part), 0, ".log")) > 10**6 and expected[os.path.basename(target)]
    Path(target).write_bytes(b"")
    report = verify_partition(part)
    assert [(f.kind, f.file, f.severity) for f in file_findings(report)] == [(kind, target, "error")]
    assert [s.damaged_files for s in report.segments] == [[suffix], [], []]
    options = RunOptions("repair", backup_root=str(tmp_path / "backups"))
    repaired = run(discover_partition_dir(str(part)), options, lambda topic: IndexSettings(), map_locally())
    assert repaired.exit_code == 0 and Path(target).read_bytes() == expected[os.path.basename(target)]
    assert verify_partition(part).healthy


@requires_kafka_real
def test_a_zero_byte_index_whose_rebuild_is_empty_too_or_of_the_active_segment_is_no_finding(tmp_path):
    """An empty ``.index`` is right where the rebuild holds no entry (an interval above the segment's size), and
    is the active segment's to grow (a running broker's, not yet written)."""
    part = copy_partition("plain-0", tmp_path)
    Path(segment_file(str(part), 0, ".index")).write_bytes(b"")
    assert verify_partition(part, index_interval_bytes=2**31 - 1).healthy
    shutil.copy(LOCAL / "plain-0" / f"{0:020d}.index", segment_file(str(part), 0, ".index"))
    Path(segment_file(str(part), 5336, ".index")).write_bytes(b"")
    assert file_findings(verify_partition(part)) == []


@requires_kafka_real
def test_zero_tail_on_inactive_and_active_segments(tmp_path):
    part = copy_partition("plain-0", tmp_path)
    inactive = segment_file(str(part), 0, ".index")
    active = segment_file(str(part), 5336, ".index")
    for path in (inactive, active):
        with open(path, "ab") as f:
            f.write(b"\0" * 8 * 100)
    report = verify_partition(part)
    tail = kinds(report)["untrimmed_zero_tail"]
    assert (tail.file, tail.entry, tail.found) == (inactive, 65, 100)
    info = kinds(report)["preallocated_zero_tail"]
    assert info.file == active and info.severity == "info"
    assert set(kinds(report)) == {"untrimmed_zero_tail", "preallocated_zero_tail"}


@requires_kafka_real
def test_orphan_and_unknown_files(tmp_path):
    part = copy_partition("plain-0", tmp_path)
    orphan = part / "00000000000000099999.index"
    orphan.write_bytes(b"")
    (part / "notes.txt").write_text("hello")
    (part / "00000000000000000000.log.deleted").write_bytes(b"")
    report = verify_partition(part)
    assert {(f.kind, f.severity) for f in file_findings(report)} == {
        ("orphan_index_file", "error"),
        ("unknown_file", "info"),
        ("skipped_file", "info"),
    }
    assert not report.healthy


# ---------------------------------------------------------------------------------- txnindex damage
@requires_kafka_real
@pytest.mark.parametrize(
    "entry, change",
    [(2, lambda lso: lso + 1), (5, lambda lso: lso - 1), (0, lambda lso: 2**62)],
    ids=["plus-1", "minus-1", "2^62"],
)
def test_txnindex_wrong_last_stable_offset_is_found_and_rebuilt(tmp_path, entry, change):
    """Kafka's collectAbortedTxns stops at the first record whose LSO reaches the fetch's upper bound, so a
    raised LSO hides later aborted transactions from read_committed consumers. Verify compares every
    record's LSO with the replay; the rebuild restores Kafka's bytes."""
    part = copy_partition("txn-0", tmp_path)
    target = segment_file(str(part), 11, ".txnindex")
    original = Path(target).read_bytes()
    data = bytearray(original)
    lso_at = 34 * entry + 26
    lso = struct.unpack_from(">q", data, lso_at)[0]
    struct.pack_into(">q", data, lso_at, change(lso))
    Path(target).write_bytes(bytes(data))

    report = verify_partition(part)
    assert not report.healthy
    found = kinds(report)
    assert set(found) == {"txn_last_stable_offset_mismatch"}
    mismatch = found["txn_last_stable_offset_mismatch"]
    assert (mismatch.file, mismatch.entry, mismatch.position) == (target, entry, 34 * entry)
    assert (mismatch.expected, mismatch.found, mismatch.count) == (lso, change(lso), 1)
    segment = next(s for s in report.segments if s.task.base_offset == 11)
    assert segment.damaged_files == [".txnindex"] and segment.identical[".txnindex"] is False

    with TransactionIndex(target, 11, writable=False) as index:
        damaged, _ = index.collect_aborted_txns(0, 811)
    if change(lso) == 2**62:  # the harm: the consumer is told of one aborted transaction out of 26
        assert len(damaged) == 1

    rebuild_partition(part)
    assert Path(target).read_bytes() == original
    with TransactionIndex(target, 11, writable=False) as index:
        collected, _ = index.collect_aborted_txns(0, 811)
        assert collected == index.all_aborted_txns() and len(collected) == 26
    assert verify_partition(part).healthy


@requires_kafka_real
def test_txnindex_damage(tmp_path):
    part = copy_partition("txn-0", tmp_path)
    target = segment_file(str(part), 11, ".txnindex")
    original = Path(target).read_bytes()
    data = bytearray(original)
    first = struct.unpack_from(">q", data, 34 * 3 + 10)[0]
    struct.pack_into(">q", data, 34 * 3 + 10, first + 1)
    Path(target).write_bytes(bytes(data))
    found = kinds(verify_partition(part))
    assert found["txn_entry_unexpected"].entry == 3 and found["txn_entry_unexpected"].found == first + 1
    assert found["txn_entry_missing"].count == 1
    struct.pack_into(">h", data, 34 * 5, 1)
    Path(target).write_bytes(bytes(data))
    assert "txn_bad_version" in kinds(verify_partition(part))
    os.unlink(target)
    found = kinds(verify_partition(part))
    assert set(found) == {"txnindex_missing"} and found["txnindex_missing"].expected == 26
    Path(target).write_bytes(b"")  # 0 bytes == absent
    assert set(kinds(verify_partition(part))) == {"txn_entry_missing"}
    rebuild_partition(part)
    assert Path(target).read_bytes() == original


@requires_kafka_real
def test_zero_byte_txnindex_without_aborts_is_valid(tmp_path):
    part = copy_partition("plain-0", tmp_path)
    Path(segment_file(str(part), 0, ".txnindex")).write_bytes(b"")
    report = verify_partition(part)
    assert report.healthy and file_findings(report) == []
    assert report.segments[0].identical[".txnindex"] is True


# -------------------------------------------------------------------------------------- .log damage
def _log_fault_case(part: Path, base: int, damage) -> tuple[Path, int]:
    log = Path(segment_file(str(part), base, ".log"))
    data = bytearray(log.read_bytes())
    damage(data)
    log.write_bytes(bytes(data))
    return log, len(data)


@requires_kafka_real
@pytest.mark.parametrize("fault", ["truncated", "flipped", "zero_tail", "size_below_14"])
def test_log_faults_give_their_finding_and_the_rebuild_covers_the_valid_prefix(fault, tmp_path):
    part = copy_partition("plain-0", tmp_path)
    scan = scan_log(segment_file(str(part), 2658, ".log"))
    k = 40
    at = int(scan.positions[k])
    damage = {
        "truncated": lambda d: d.__delitem__(slice(len(d) - 10, None)),
        "flipped": lambda d: d.__setitem__(at + 70, d[at + 70] ^ 0x40),
        "zero_tail": lambda d: d.extend(b"\0" * 5000),
        "size_below_14": lambda d: struct.pack_into(">i", d, at + 8, 13),
    }[fault]
    log, _ = _log_fault_case(part, 2658, damage)
    report = verify_partition(part)
    expected_kind, expected_batch = {
        "truncated": ("log_truncated_batch", scan.batch_count - 1),
        "flipped": ("log_crc_mismatch", k),
        "zero_tail": ("log_zero_tail", scan.batch_count),
        "size_below_14": ("log_size_below_minimum", k),
    }[fault]
    finding = kinds(report)[expected_kind]
    assert finding.file == str(log) and finding.entry == expected_batch
    assert finding.position == (
        int(scan.positions[expected_batch]) if expected_batch < scan.batch_count else scan.valid_bytes
    )
    valid = finding.position
    assert finding.found == log.stat().st_size - valid
    # The rebuild covers exactly the valid prefix: it equals the rebuild of the log cut at that point.
    damaged = rebuilt_bytes(part, tmp_path / "damaged")
    cut = copy_partition("plain-0", tmp_path / "cut")
    os.truncate(segment_file(str(cut), 2658, ".log"), valid)
    assert damaged == rebuilt_bytes(cut, tmp_path / "cut-out")


def test_unreadable_segment_is_a_finding_not_an_exception(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(encode_batch_v2(0, [(None, b"x", 1)]))
    os.mkfifo(part / "00000000000000000001.log")
    rebuild_partition(part)
    report = verify_partition(part)
    finding = kinds(report)["unreadable_segment"]
    assert finding.file == str(part / "00000000000000000001.log") and "not a regular file" in finding.detail
    assert report.segments[0].findings == []  # the good segment is still verified
    result = rebuild_partition(part)
    assert result.segments[1].fatal.kind == "unreadable_segment" and result.segments[1].written == []


def test_offset_overflow_is_reported(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    log.write_bytes(encode_batch_v2(0, [(None, b"x", 1)]) + encode_batch_v2(2**31, [(None, b"y", 2)]))
    report = verify_partition(part)
    finding = kinds(report)["offset_overflow"]
    assert finding.file == str(log) and finding.entry == 1
    result = rebuild_partition(part)
    assert result.segments[0].written == [] and not (part / "00000000000000000000.index").exists()


def test_bad_partition_dirs_raise(tmp_path):
    with pytest.raises(LogDirError, match="no such partition dir"):
        verify_partition(tmp_path / "nope-0")
    (tmp_path / "file-0").write_text("x")
    with pytest.raises(LogDirError, match="not a directory"):
        verify_partition(tmp_path / "file-0")
    (tmp_path / "noname").mkdir()
    with pytest.raises(LogDirError, match="not a Kafka partition directory"):
        verify_partition(tmp_path / "noname")


def _all_findings(report) -> list:
    return [(s.task.base_offset, s.findings) for s in report.segments] + sorted(report.partition_findings.items())


@requires_kafka_real
def test_an_index_that_is_its_rebuild_needs_only_its_zero_tail_checked_on_every_real_partition(monkeypatch):
    """verify skips the entry checks of an index that is its rebuild's bytes then zeros: on every real partition
    it finds exactly what the full checks find."""
    import indexlib.recovery.checks as checks

    dirs = sorted({p.parent for p in KAFKA_REAL.rglob("*.log")})
    assert len(dirs) > 20
    short = [_all_findings(verify_partition(d)) for d in dirs]
    monkeypatch.setattr(checks, "holds_only_the_rebuild", lambda *args: False)
    assert [_all_findings(verify_partition(d)) for d in dirs] == short


@pytest.mark.parametrize("damage", ["none", "preallocated", "untrimmed", "byte_in_tail", "entry", "zero_entry"])
def test_an_index_that_is_its_rebuild_needs_only_its_zero_tail_checked(tmp_path, monkeypatch, damage):
    """The same on generated partitions: healthy, a preallocated active index, an untrimmed inactive one, a byte in
    a zero tail, a wrong entry, an entry zeroed."""
    import indexlib.recovery.checks as checks

    part = tmp_path / "orders-0"
    generate_partition(part, segments=3, batches_per_segment=40, transactional_producers=1, seed=7)
    rebuild_partition(part)
    bases = sorted(int(n.name[:20]) for n in part.glob("*.log"))
    first, active = segment_file(str(part), bases[0], ".index"), segment_file(str(part), bases[-1], ".timeindex")
    if damage == "preallocated":
        os.truncate(active, 10 * 1024 * 1024 - 4)
    elif damage == "untrimmed":
        os.truncate(first, os.path.getsize(first) + 8 * 100)
    elif damage in ("byte_in_tail", "entry", "zero_entry"):
        size = os.path.getsize(first)
        if damage == "byte_in_tail":
            os.truncate(first, size + 8 * 100)
        with open(first, "r+b") as f:
            f.seek({"byte_in_tail": size + 8 * 50, "entry": 12, "zero_entry": 8}[damage])
            f.write(b"\x7f\x00\x00\x00" if damage != "zero_entry" else b"\x00" * 8)
    short = _all_findings(verify_partition(part))
    monkeypatch.setattr(checks, "holds_only_the_rebuild", lambda *args: False)
    assert _all_findings(verify_partition(part)) == short
    segment_findings = [f for base, found in short if isinstance(base, int) for f in found]
    assert bool(segment_findings) == (damage != "none")  # every damage is found, the healthy one has none
