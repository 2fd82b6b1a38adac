"""Recovery cases on generated segments: where the valid data ends and what the rebuild covers."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from indexlib import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from indexlib.engine import rebuild_partition, verify_partition
from indexlib.format.batch_walk import scan_log
from indexlib.format.records import StopReason
from indexlib.recovery.entry_plan import plan_segment
from indexlib.recovery.log_scan import summarize
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy
from indexlib.testing.generate import generate_partition


def write_log(path, batches):
    path.write_bytes(b"".join(batches))
    return path


def records(n, ts):
    return [(None, b"v" * 100, ts + i) for i in range(n)]


def test_flipped_payload_byte_stops_at_that_batch(tmp_path):
    batches = [encode_batch_v2(i * 3, records(3, 1000 + 10 * i)) for i in range(50)]
    log = write_log(tmp_path / "00000000000000000000.log", batches)
    data = bytearray(log.read_bytes())
    bad = sum(len(b) for b in batches[:20])
    data[bad + 70] ^= 0x01  # inside batch 20's records
    log.write_bytes(bytes(data))
    scan = scan_log(log)
    assert scan.stop is StopReason.CORRUPT_BATCH
    assert scan.problem.kind == "crc_mismatch" and scan.problem.position == bad and scan.problem.batch_index == 20
    assert scan.batch_count == 20 and scan.valid_bytes == bad
    plan = plan_segment(summarize(scan, 0, index_interval_bytes=300))
    assert plan.fatal is None
    assert plan.offset_positions.max() < bad  # the rebuild covers exactly the valid prefix
    assert scan.last_offsets.tolist() == [i * 3 + 2 for i in range(20)]


def test_truncated_last_batch_and_size_below_minimum(tmp_path):
    batches = [encode_batch_v2(i, records(1, 5000 + i)) for i in range(10)]
    whole = b"".join(batches)
    log = write_log(tmp_path / "00000000000000000000.log", [whole[:-7]])
    scan = scan_log(log)
    assert scan.stop is StopReason.INCOMPLETE_BATCH and scan.batch_count == 9
    assert scan.problem.kind == "truncated_batch" and scan.invalid_bytes == len(batches[-1]) - 7
    small = bytearray(whole)
    pos = sum(len(b) for b in batches[:4])
    struct.pack_into(">i", small, pos + 8, 13)
    log.write_bytes(bytes(small))
    scan = scan_log(log)
    assert scan.stop is StopReason.CORRUPT_BATCH and scan.problem.kind == "size_below_minimum"
    assert scan.problem.position == pos and scan.batch_count == 4


def test_preallocated_zero_tail_is_cut(tmp_path):
    batches = [encode_batch_v2(i, records(2, 7000 + i)) for i in range(5)]
    log = write_log(tmp_path / "00000000000000000000.log", batches + [b"\x00" * 4096])
    scan = scan_log(log)
    assert scan.stop is StopReason.CORRUPT_BATCH and scan.problem.kind == "size_below_minimum"
    assert scan.valid_bytes == sum(map(len, batches)) and scan.invalid_bytes == 4096


def test_recover_transaction_index_lso_example(tmp_path):
    # LogSegmentTest.testRecoverTransactionIndex: pid1 starts at 100, pid2 at 102; pid2 aborted at 106,
    # pid1 committed at 107 -> one entry (pid2, 102, 106, LSO 100).
    part = tmp_path / "t-0"
    part.mkdir()
    pid1, pid2 = 10, 20
    batches = [
        encode_batch_v2(100, records(2, 1), producer_id=pid1, producer_epoch=0, transactional=True),
        encode_batch_v2(102, records(2, 3), producer_id=pid2, producer_epoch=0, transactional=True),
        encode_batch_v2(104, records(2, 5), producer_id=pid1, producer_epoch=0, transactional=True),
        encode_control_batch(106, pid2, 0, abort=True, timestamp=7),
        encode_control_batch(107, pid1, 0, abort=False, timestamp=8),
    ]
    write_log(part / "00000000000000000100.log", batches)
    result = rebuild_partition(part)
    assert result.segments[0].aborted == [AbortedTxn(pid2, 102, 106, 100)]
    with TransactionIndex(part / "00000000000000000100.txnindex", 100, writable=False) as txn:
        assert txn.all_aborted_txns() == [AbortedTxn(pid2, 102, 106, 100)]


def test_transactions_spanning_segments_match_a_single_segment_replay(tmp_path):
    part = tmp_path / "t-0"
    logs = generate_partition(
        part, segments=4, batches_per_segment=40, transactional_producers=3, abort_every=2, seed=3
    )
    result = rebuild_partition(part, index_interval_bytes=512)
    aborted = [t for seg in result.segments for t in seg.aborted]
    assert aborted, "the generator should produce aborted transactions"
    # The same log as one segment gives the same aborted transactions (state carried across boundaries).
    one = tmp_path / "one-0"
    one.mkdir()
    (one / "00000000000000000000.log").write_bytes(b"".join(p.read_bytes() for p in logs))
    single = rebuild_partition(one, index_interval_bytes=512)
    assert single.segments[0].aborted == aborted
    spanning = [t for seg in result.segments for t in seg.aborted if t.first_offset < seg.task.base_offset]
    assert spanning, "some aborted transaction should start in an earlier segment"


def test_index_files_follow_the_interval_rule(tmp_path):
    part = tmp_path / "t-0"
    generate_partition(part, segments=1, batches_per_segment=200, seed=5)
    result = rebuild_partition(part, index_interval_bytes=1000)
    seg = result.segments[0]
    scan = scan_log(seg.task.log_path)
    positions = scan.positions.tolist()
    expected, last = [], 0
    for i, p in enumerate(positions):
        if p - last > 1000:
            expected.append((int(scan.last_offsets[i]), p))
            last = p
    with OffsetIndex(part / "00000000000000000000.index", 0, writable=False) as index:
        assert [tuple(e) for e in index] == expected
    with TimeIndex(part / "00000000000000000000.timeindex", 0, writable=False) as times:
        ts = [e.timestamp for e in times]
        assert ts == sorted(set(ts)) and times.last_entry.timestamp == int(scan.max_timestamps.max())


def test_offset_overflow_is_fatal_and_writes_nothing(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    write_log(
        part / "00000000000000000000.log", [encode_batch_v2(0, records(1, 1)), encode_batch_v2(2**31, records(1, 2))]
    )
    result = rebuild_partition(part)
    seg = result.segments[0]
    assert seg.fatal is not None and seg.fatal.kind == "offset_overflow" and seg.fatal.batch_index == 1
    assert seg.written == [] and not (part / "00000000000000000000.index").exists()


# --------------------------------------------------------------- LogLoaderTest: four producers
def _four_producer_log() -> list[bytes]:
    """The append sequence of LogLoaderTest.testFullTransactionIndexRecovery (one batch per append)."""
    batches: list[bytes] = []
    next_offset = 0
    ts = 1_000

    def data(n, pid=-1):
        nonlocal next_offset, ts
        txn = pid != -1
        batches.append(
            encode_batch_v2(
                next_offset,
                records(n, ts),
                producer_id=pid,
                producer_epoch=0 if txn else -1,
                base_sequence=0 if txn else -1,
                transactional=txn,
            )
        )
        next_offset += n
        ts += n

    def marker(pid, abort):
        nonlocal next_offset, ts
        batches.append(encode_control_batch(next_offset, pid, 0, abort=abort, timestamp=ts))
        next_offset += 1
        ts += 1

    data(5, 1)
    data(3)
    data(2, 2)
    data(4, 1)
    data(3, 3)
    data(2)
    data(10, 1)
    marker(1, abort=True)  # offset 29
    data(6, 2)
    data(3, 4)
    data(10)
    data(9, 3)
    marker(3, abort=False)  # 58
    data(8, 4)
    data(7, 2)
    marker(2, abort=True)  # 74
    data(10)
    data(4, 4)
    marker(4, abort=False)  # 89
    assert next_offset == 90
    return batches


def _write_segments(part, batches, segment_bytes):
    """Split batches into segments the way Kafka rolls: a batch that would overflow starts a new one."""
    part.mkdir(parents=True)
    segments: list[list[bytes]] = [[]]
    for b in batches:
        if segments[-1] and sum(map(len, segments[-1])) + len(b) > segment_bytes:
            segments.append([])
        segments[-1].append(b)
    for seg in segments:
        base = struct.unpack_from(">q", seg[0])[0]
        (part / f"{base:020d}.log").write_bytes(b"".join(seg))
    return len(segments)


@pytest.mark.parametrize("segment_bytes", [128 * 5, 1024, 1024 * 5 * 100])
def test_four_producers_across_segments(tmp_path, segment_bytes):
    part = tmp_path / f"loader-{segment_bytes}" / "t-0"
    count = _write_segments(part, _four_producer_log(), segment_bytes)
    assert (count > 1) == (segment_bytes < 5000)  # transactions really span segments (one segment last)
    result = rebuild_partition(part)
    aborted = []
    for seg in result.segments:
        with TransactionIndex(
            part / f"{seg.task.base_offset:020d}.txnindex", seg.task.base_offset, writable=False
        ) as txns:
            aborted += txns.all_aborted_txns()
    assert aborted == [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]
    assert verify_partition(part).healthy


# --------------------------------------------------------------------------- v0 (0.9.0) data
def test_v0_data_gives_a_zero_byte_time_index(tmp_path):
    part = tmp_path / "old-0"
    part.mkdir()
    entries = [encode_legacy(i, b"m" * 200, magic=0) for i in range(60)]
    (part / "00000000000000000000.log").write_bytes(b"".join(entries))
    result = rebuild_partition(part, index_interval_bytes=1000)
    assert os.path.getsize(part / "00000000000000000000.timeindex") == 0
    with OffsetIndex(part / "00000000000000000000.index", 0, writable=False) as index:
        assert index.entries > 0  # the offset index is still built
    assert result.segments[0].plan.timeindex_entries == 0
    assert verify_partition(part).healthy


# ------------------------------------------------- LogSegmentTest: corrupt index, corrupt message
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_recovery_fixes_corrupt_index(tmp_path, suffix):
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    log.write_bytes(b"".join(encode_batch_v2(i, [(None, b"v" * 20, i * 10)]) for i in range(100)))
    rebuild_partition(part, index_interval_bytes=10)
    good = (part / f"00000000000000000000{suffix}").read_bytes()
    damaged = bytearray(good)
    damaged[5:] = np.random.default_rng(3).integers(0, 256, len(good) - 5, dtype=np.uint8).tobytes()
    (part / f"00000000000000000000{suffix}").write_bytes(bytes(damaged))
    assert not verify_partition(part, index_interval_bytes=10).healthy
    rebuild_partition(part, index_interval_bytes=10)
    assert (part / f"00000000000000000000{suffix}").read_bytes() == good
    with (
        OffsetIndex(part / "00000000000000000000.index", 0, writable=False) as index,
        TimeIndex(part / "00000000000000000000.timeindex", 0, writable=False) as times,
    ):
        scan = scan_log(log)
        for i in range(100):
            # Every offset is readable: the floor entry's position is at or before offset i's batch.
            assert index.lookup(i).position <= scan.positions[i]
            # findOffsetByTimestamp(i*10) == i: time floor entry -> its position -> first batch reaching ts.
            start = index.lookup(times.lookup(i * 10).offset).position
            after = np.flatnonzero((scan.positions >= start) & (scan.max_timestamps >= i * 10))
            assert scan.base_offsets[after[0]] == i


def test_recovery_with_corrupt_message(tmp_path):
    """Random bytes from inside message k to the end: the rebuilt data holds exactly offsets [0, k)."""
    rng = np.random.default_rng(5)
    for k in (0, 1, 17, 49):
        part = tmp_path / f"c{k}-0"
        part.mkdir()
        batches = [encode_batch_v2(i, [(None, b"v" * 30, 1000 + i)]) for i in range(50)]
        start = sum(map(len, batches[:k])) + int(rng.integers(0, len(batches[k])))
        data = bytearray(b"".join(batches))
        data[start:] = rng.integers(0, 256, len(data) - start, dtype=np.uint8).tobytes()
        (part / "00000000000000000000.log").write_bytes(bytes(data))
        result = rebuild_partition(part, index_interval_bytes=10)
        assert scan_log(result.segments[0].task.log_path).last_offsets.tolist() == list(range(k))
        finding = [f for f in verify_partition(part, index_interval_bytes=10).findings if f.file.endswith(".log")]
        assert len(finding) == 1 and finding[0].entry == k


@pytest.mark.parametrize("tail", [18, 19, 20])
def test_a_tail_shorter_than_the_size_field_read_is_a_truncated_batch(tmp_path, tail):
    """18-20 bytes after the last batch: more than Kafka's 17-byte header, less than a full header."""
    batches = [encode_batch_v2(i, records(1, 100 + i)) for i in range(3)]
    good = b"".join(batches)
    log = write_log(tmp_path / "00000000000000000000.log", [good + batches[0][:tail]])
    scan = scan_log(log)
    assert scan.batch_count == 3 and scan.valid_bytes == len(good)
    assert scan.problem.kind == "truncated_batch" and scan.problem.position == len(good)
    assert scan.invalid_bytes == tail
