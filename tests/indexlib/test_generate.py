"""indexlib.testing.generate writes batches that kafka-python's own readers decode and CRC-check."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy
from indexlib.testing.generate import generate_partition, write_uniform_segment

RECORDS = [
    (b"key-a", b"value-a", 1_700_000_000_100),
    (None, b"value-b", 1_700_000_000_050),  # earlier than the first: negative timestamp delta
    (b"key-c", None, 1_700_000_000_300),
    (b"", b"", 1_700_000_000_200),
]


def only_batch(data: bytes):
    records = MemoryRecords(data)
    batch = records.next_batch()
    assert batch is not None
    assert records.next_batch() is None, "trailing bytes after the single batch"
    return batch


def walk(paths: list[Path]) -> list[tuple[Path, DefaultRecordBatch, list]]:
    """Every batch of every file, CRC-checked, with its records (checks no bytes are left over)."""
    out = []
    for path in paths:
        data = path.read_bytes()
        records = MemoryRecords(data)
        assert records.valid_bytes() == len(data), f"{path.name}: partial batch at the end"
        for batch in records:
            assert batch.validate_crc(), f"{path.name}: bad CRC at offset {batch.base_offset}"
            out.append((path, batch, list(batch)))
    return out


# ------------------------------------------------------------------------------ encode_batch_v2
def test_batch_v2_round_trip_and_header_fields():
    data = encode_batch_v2(
        1234,
        RECORDS,
        producer_id=77,
        producer_epoch=5,
        base_sequence=40,
        transactional=True,
        partition_leader_epoch=9,
    )
    batch = only_batch(data)
    assert isinstance(batch, DefaultRecordBatch)
    assert batch.validate_crc()
    assert batch.magic == 2
    assert batch.size_in_bytes == len(data)
    assert struct.unpack_from(">i", data, 8)[0] == len(data) - 12
    assert batch.base_offset == 1234
    assert batch.last_offset_delta == 3
    assert batch.leader_epoch == 9
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 5, 40)
    assert batch.is_transactional and not batch.is_control_batch
    assert batch.compression_type == 0 and batch.timestamp_type == 0
    assert batch.records_count == 4
    assert batch.first_timestamp == RECORDS[0][2]  # the first record's, as Kafka's builder writes it
    assert batch.max_timestamp == max(r[2] for r in RECORDS)
    decoded = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch]
    assert decoded == [(1234 + i, k, v, ts, []) for i, (k, v, ts) in enumerate(RECORDS)]


def test_batch_v2_non_transactional_defaults():
    batch = only_batch(encode_batch_v2(0, RECORDS[:1]))
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.has_producer_id()
    assert not batch.is_transactional and not batch.is_control_batch
    assert batch.leader_epoch == 0


def test_batch_v2_offset_deltas_with_gaps():
    batch = only_batch(encode_batch_v2(500, RECORDS[:3], offset_deltas=[0, 4, 11]))
    assert batch.validate_crc()
    assert batch.last_offset_delta == 11
    assert batch.last_offset == 511
    assert [r.offset for r in batch] == [500, 504, 511]


@pytest.mark.parametrize("deltas", [[0, 1], [0, 2, 2], [1, 0, 3], [-1, 0, 1]])
def test_batch_v2_rejects_bad_offset_deltas(deltas):
    with pytest.raises(ValueError):
        encode_batch_v2(0, RECORDS[:3], offset_deltas=deltas)


def test_batch_v2_gzip_round_trip():
    plain = encode_batch_v2(10, RECORDS, producer_id=3, producer_epoch=0, base_sequence=0)
    packed = encode_batch_v2(10, RECORDS, producer_id=3, producer_epoch=0, base_sequence=0, compression=1)
    batch = only_batch(packed)
    assert batch.validate_crc()
    assert batch.compression_type == 1
    assert batch.records_count == 4 and batch.last_offset_delta == 3
    # The records section is the gzip of exactly the uncompressed batch's records section.
    assert gzip.decompress(packed[61:]) == plain[61:]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch] == [
        (10 + i, k, v, ts) for i, (k, v, ts) in enumerate(RECORDS)
    ]


def test_batch_v2_gzip_is_deterministic():
    assert encode_batch_v2(0, RECORDS, compression=1) == encode_batch_v2(0, RECORDS, compression=1)


@pytest.mark.parametrize("codec", [2, 3, 4, 5, -1])
def test_batch_v2_rejects_unavailable_codecs(codec):
    with pytest.raises(ValueError):
        encode_batch_v2(0, RECORDS, compression=codec)


def test_batch_v2_empty_batch():
    data = encode_batch_v2(42, [], producer_id=8, producer_epoch=1, transactional=True)
    assert len(data) == 61
    batch = only_batch(data)
    assert batch.validate_crc()
    assert batch.records_count == 0
    assert batch.last_offset_delta == 0
    assert batch.base_offset == 42 and batch.producer_id == 8 and batch.is_transactional
    assert list(batch) == []


def test_batch_v2_log_append_time_flag():
    batch = only_batch(encode_batch_v2(0, RECORDS, log_append_time=True))
    assert batch.validate_crc()
    assert batch.timestamp_type == 1
    assert batch.attributes & 0x08


def test_batch_v2_crc_covers_attributes_and_records():
    data = bytearray(encode_batch_v2(0, RECORDS))
    data[-3] ^= 0x01  # inside the last record
    assert not only_batch(bytes(data)).validate_crc()
    data = bytearray(encode_batch_v2(0, RECORDS))
    data[0:8] = struct.pack(">q", 999)  # baseOffset is outside the CRC
    assert only_batch(bytes(data)).validate_crc()


# -------------------------------------------------------------------------- encode_control_batch
@pytest.mark.parametrize("abort", [True, False])
def test_control_batch(abort):
    data = encode_control_batch(300, 1001, 4, abort=abort, timestamp=1_700_000_123_456, coordinator_epoch=17)
    assert len(data) == 78
    batch = only_batch(data)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert batch.compression_type == 0 and batch.timestamp_type == 0
    assert (batch.base_offset, batch.last_offset_delta, batch.records_count) == (300, 0, 1)
    assert (batch.producer_id, batch.producer_epoch) == (1001, 4)
    assert batch.first_timestamp == batch.max_timestamp == 1_700_000_123_456
    [record] = list(batch)
    assert record.offset == 300
    assert record.version == 0
    assert record.type == (0 if abort else 1)
    assert record.abort is abort and record.commit is not abort
    assert struct.unpack(">hh", record.key) == (0, 0 if abort else 1)
    assert struct.unpack(">hi", record.value) == (0, 17)


# --------------------------------------------------------------------------------- encode_legacy
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("key,value", [(b"k1", b"hello"), (None, b"v"), (b"k", None), (None, None)])
def test_legacy_entry(magic, key, value):
    data = encode_legacy(7_000, value, key=key, magic=magic, timestamp=1_650_000_000_000)
    overhead = 14 if magic == 0 else 22
    assert len(data) == 12 + overhead + len(key or b"") + len(value or b"")
    batch = only_batch(data)
    assert isinstance(batch, LegacyRecordBatch)
    assert batch.magic == magic
    assert batch.validate_crc()
    assert batch.base_offset == 7_000
    [record] = list(batch)
    assert (record.offset, record.key, record.value) == (7_000, key, value)
    assert record.validate_crc()
    assert record.timestamp == (None if magic == 0 else 1_650_000_000_000)


def test_legacy_default_timestamp_and_bad_magic():
    [record] = list(only_batch(encode_legacy(0, b"x")))
    assert record.timestamp == -1
    with pytest.raises(ValueError):
        encode_legacy(0, b"x", magic=2)


def test_legacy_crc_is_checked():
    data = bytearray(encode_legacy(0, b"payload", magic=1, timestamp=5))
    data[-1] ^= 0xFF
    assert not only_batch(bytes(data)).validate_crc()


# ---------------------------------------------------------------------------- generate_partition
def test_partition_is_contiguous_and_valid(tmp_path):
    paths = generate_partition(tmp_path / "topic-0", segments=4, batches_per_segment=30, base_offset=1_000, seed=3)
    assert sorted(p.name for p in (tmp_path / "topic-0").iterdir()) == [p.name for p in paths]
    assert len(paths) == 4 and all(p.suffix == ".log" for p in paths)
    batches = walk(paths)
    assert len(batches) == 4 * 30
    expected = 1_000
    for path in paths:
        in_file = [b for p, b, _ in batches if p == path]
        assert len(in_file) == 30
        assert path.name == f"{in_file[0].base_offset:020d}.log"
    previous_max = -1
    for _, batch, records in batches:
        assert batch.base_offset == expected
        assert [r.offset for r in records] == list(range(expected, batch.next_offset))
        assert 1 <= len(records) <= 20
        assert all(20 <= len(r.value) <= 200 for r in records)
        assert batch.producer_id == -1 and not batch.is_transactional
        assert batch.max_timestamp == max(r.timestamp for r in records)
        assert batch.max_timestamp >= previous_max  # in order unless asked otherwise
        previous_max = batch.max_timestamp
        expected = batch.next_offset
    assert batches[0][1].first_timestamp >= 1_700_000_000_000


def test_partition_transactions_span_segments_and_overlap(tmp_path):
    paths = generate_partition(tmp_path, transactional_producers=3, abort_every=3, seed=11)
    open_txns: dict[int, int] = {}
    started: list[int] = []  # first offsets, in start order
    outcome: dict[int, bool] = {}  # first offset -> aborted
    spanning = max_open = 0
    for path in paths:
        spanning += len(open_txns)  # open when this file starts, so its marker is in a later file
        for _, batch, records in walk([path]):
            pid = batch.producer_id
            if batch.is_control_batch:
                assert pid in open_txns, "marker without an open transaction"
                assert batch.is_transactional and len(records) == 1
                outcome[open_txns.pop(pid)] = records[0].abort
            elif batch.is_transactional:
                assert pid >= 0
                if pid not in open_txns:
                    open_txns[pid] = batch.base_offset
                    started.append(batch.base_offset)
            else:
                assert pid == -1, "non-transactional batch with a producer id"
            max_open = max(max_open, len(open_txns))
    assert spanning >= 1
    assert max_open >= 2
    assert open_txns == {}, "every transaction is closed by the end"
    assert len(started) >= 6
    assert [outcome[first] for first in started] == [(k + 1) % 3 == 0 for k in range(len(started))]


def test_partition_every_segment_boundary_has_an_open_transaction(tmp_path):
    paths = generate_partition(tmp_path, segments=5, batches_per_segment=6, transactional_producers=1, seed=2)
    open_pids: set[int] = set()
    open_at_boundary = []
    for path in paths:
        open_at_boundary.append(bool(open_pids))
        for _, batch, _ in walk([path]):
            if batch.is_control_batch:
                open_pids.discard(batch.producer_id)
            elif batch.is_transactional:
                open_pids.add(batch.producer_id)
    assert open_at_boundary == [False, True, True, True, True]
    assert not open_pids


def test_partition_is_deterministic_per_seed(tmp_path):
    kwargs = dict(transactional_producers=2, out_of_order_timestamps=True, compression=1)
    a = generate_partition(tmp_path / "a", seed=5, **kwargs)
    b = generate_partition(tmp_path / "b", seed=5, **kwargs)
    c = generate_partition(tmp_path / "c", seed=6, **kwargs)
    assert [p.name for p in a] == [p.name for p in b]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert [p.read_bytes() for p in a] != [p.read_bytes() for p in c]


def test_partition_gzip_round_trips(tmp_path):
    paths = generate_partition(tmp_path, segments=2, batches_per_segment=20, compression=1, transactional_producers=2)
    batches = walk(paths)
    data = [(b, r) for _, b, r in batches if not b.is_control_batch]
    markers = [b for _, b, _ in batches if b.is_control_batch]
    assert data and markers
    assert all(b.compression_type == 1 for b, _ in data)
    assert all(b.compression_type == 0 and b.size_in_bytes == 78 for b in markers)
    assert all(len(r) == b.records_count == b.last_offset_delta + 1 for b, r in data)


def test_partition_out_of_order_timestamps(tmp_path):
    paths = generate_partition(tmp_path, out_of_order_timestamps=True, seed=4)
    maxima = [b.max_timestamp for _, b, _ in walk(paths)]
    running = [max(maxima[: i + 1]) for i in range(len(maxima))]
    assert any(m < r for m, r in zip(maxima[1:], running[:-1], strict=True))


def test_partition_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        generate_partition(tmp_path, compression=2)
    with pytest.raises(ValueError):
        generate_partition(tmp_path, segments=0)
    assert list(tmp_path.glob("*.log")) == []


# ------------------------------------------------------------------------- write_uniform_segment
@pytest.mark.parametrize("batch_bytes,records_per_batch", [(1_000, 1), (4_099, 7), (150, 2)])
def test_uniform_segment(tmp_path, batch_bytes, records_per_batch):
    path = tmp_path / "00000000000000000500.log"
    total = 1_000_000
    count = write_uniform_segment(
        path, base_offset=500, total_bytes=total, batch_bytes=batch_bytes, records_per_batch=records_per_batch
    )
    size = path.stat().st_size
    batches = walk([path])
    assert len(batches) == count
    batch_size = batches[0][1].size_in_bytes
    assert abs(size - total) < batch_size
    assert batch_bytes - 4 <= batch_size <= batch_bytes
    expected, previous_max = 500, -1
    for _, batch, records in batches:
        assert batch.base_offset == expected
        assert batch.size_in_bytes == batch_size
        assert len(records) == records_per_batch
        assert [r.offset for r in records] == list(range(expected, expected + records_per_batch))
        assert [r.timestamp for r in records] == list(
            range(batch.first_timestamp, batch.first_timestamp + records_per_batch)
        )
        assert batch.max_timestamp == records[-1].timestamp > previous_max
        previous_max = batch.max_timestamp
        expected = batch.next_offset


def test_uniform_segment_is_deterministic_and_too_small_batches_fail(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    write_uniform_segment(a, total_bytes=50_000, batch_bytes=500, seed=1)
    write_uniform_segment(b, total_bytes=50_000, batch_bytes=500, seed=1)
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(ValueError):
        write_uniform_segment(tmp_path / "c.log", total_bytes=10_000, batch_bytes=60)


def test_uniform_segment_of_an_idempotent_producer(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    count = write_uniform_segment(path, total_bytes=200_000, batch_bytes=170, producer_id=42)
    batches = walk([path])  # kafka-python's reader: every CRC checks
    assert len(batches) == count > 1000
    assert {(b.producer_id, b.producer_epoch, b.is_transactional) for _, b, _ in batches} == {(42, 0, False)}
    assert write_uniform_segment(tmp_path / "plain.log", total_bytes=2_000, batch_bytes=170) > 0
    assert {b.producer_id for _, b, _ in walk([tmp_path / "plain.log"])} == {-1}
