"""indexlib.format.batch_walk (and records, control_records): the batch reader's stop rules and problems (kafka-index-format.md 2.2, 2.4, 6.1, 6.2).

Every case asserts the exact problem kind, byte position and batch index. The fuzz tests hold the
reader's contract on random and mutated input: it returns (never raises), and what it returns keeps the
``LogScan`` invariants.
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexlib.format.batch_walk import scan_buffer, scan_log
from indexlib.format.records import (
    HEADER_SIZE_UP_TO_MAGIC,
    MIN_SIZE_FIELD,
    V2_HEADER_SIZE,
    StopReason,
)
from indexlib.recovery.entry_plan import plan_segment
from indexlib.recovery.log_scan import summarize
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy

#: The problems a walk or the marker check may report (batch_walk.py, control_records.py), and the fatal kinds.
PROBLEM_KINDS = {"size_below_minimum", "truncated_batch", "crc_mismatch", "invalid_marker"}
FATAL_KINDS = {"unknown_control_type", "compressed_control_batch", "unknown_compression"}
STOP_OF_PROBLEM = {
    "size_below_minimum": StopReason.CORRUPT_BATCH,
    "crc_mismatch": StopReason.CORRUPT_BATCH,
    "truncated_batch": StopReason.INCOMPLETE_BATCH,
    "invalid_marker": StopReason.INVALID_RECORD,
}


def data_batch(offset: int, ts: int, n: int = 1, value: bytes = b"v" * 40, **kw) -> bytes:
    return encode_batch_v2(offset, [(None, value, ts + i) for i in range(n)], **kw)


def plain_log(count: int = 6, n: int = 2) -> list[bytes]:
    """``count`` uncompressed batches of ``n`` records each, offsets contiguous from 0."""
    return [data_batch(i * n, 1_000 + 10 * i, n) for i in range(count)]


def starts(batches: list[bytes]) -> list[int]:
    return [int(x) for x in np.cumsum([0] + [len(b) for b in batches[:-1]])]


def write(tmp_path, data: bytes):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def assert_stopped_at(scan, kind: str, position: int, batch_index: int, stop: StopReason) -> None:
    """The walk stopped at ``position`` (batch ``batch_index``) with ``kind``; the valid data ends there."""
    assert scan.problem is not None, scan.stop
    assert (scan.problem.kind, scan.problem.position, scan.problem.batch_index) == (kind, position, batch_index)
    assert scan.stop is stop
    assert scan.fatal is None
    assert scan.batch_count == batch_index
    assert scan.valid_bytes == position


# ------------------------------------------------------------------------------------------ clean
def test_clean_multi_batch_log_lists_every_batch(tmp_path):
    pid = 42
    batches = [
        data_batch(0, 1_000, 3),  # offsets 0..2
        data_batch(3, 900, 1),  # a batch whose timestamp lies below the previous one
        data_batch(4, 2_000, 2, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True),
        encode_control_batch(6, pid, 0, abort=False, timestamp=2_100),  # COMMIT of pid's transaction
        data_batch(7, 3_000, 4, compression=1),  # gzip: read, never decompressed
        data_batch(11, 3_500, 1, offset_deltas=[5]),  # a gap inside the batch: last offset 16
    ]
    data = b"".join(batches)
    scan = scan_log(write(tmp_path, data))
    assert scan.stop is StopReason.END and scan.problem is None and scan.fatal is None
    assert scan.batch_count == 6
    assert scan.positions.tolist() == starts(batches)
    assert scan.sizes.tolist() == [len(b) for b in batches]
    assert scan.base_offsets.tolist() == [0, 3, 4, 6, 7, 11]
    assert scan.last_offsets.tolist() == [2, 3, 5, 6, 10, 16]
    assert scan.max_timestamps.tolist() == [1_002, 900, 2_001, 2_100, 3_003, 3_500]
    assert scan.magic.tolist() == [2] * 6
    assert scan.producer_ids.tolist() == [-1, -1, pid, pid, -1, -1]
    assert scan.records_counts.tolist() == [3, 1, 2, 1, 4, 1]
    assert scan.marker_types.tolist() == [-1, -1, -1, 1, -1, -1]  # the COMMIT marker's control type
    assert (scan.attributes & 0x07).tolist() == [0, 0, 0, 0, 1, 0]
    assert scan.valid_bytes == scan.file_size == len(data) and scan.invalid_bytes == 0
    # the buffer entry point gives the same walk
    again = scan_buffer(data, len(data))
    for name in ("positions", "sizes", "base_offsets", "last_offsets", "max_timestamps", "marker_types"):
        assert np.array_equal(getattr(again, name), getattr(scan, name)), name
    assert again.stop is StopReason.END


def test_empty_file(tmp_path):
    scan = scan_log(write(tmp_path, b""))
    assert scan.file_size == 0 and scan.batch_count == 0 and scan.valid_bytes == 0 and scan.invalid_bytes == 0
    assert scan.stop is StopReason.END and scan.problem is None and scan.fatal is None
    assert all(len(getattr(scan, a)) == 0 for a in ("sizes", "base_offsets", "last_offsets", "magic"))
    assert scan_buffer(b"", 0).stop is StopReason.END


def test_only_the_first_end_bytes_are_read():
    batches = plain_log(4)
    data = b"".join(batches)
    # a buffer longer than ``end``: the bytes past it (a whole further batch) are not part of the walk
    scan = scan_buffer(data + data_batch(8, 5_000), len(data))
    assert scan.batch_count == 4 and scan.stop is StopReason.END and scan.file_size == len(data)


# ---------------------------------------------------------------------------------------- short tail
@pytest.mark.parametrize("tail", range(1, HEADER_SIZE_UP_TO_MAGIC + 1))
def test_a_tail_of_1_to_17_bytes_is_never_parsed(tmp_path, tail):
    batches = plain_log(3)
    good = b"".join(batches)
    # 0xff would read as a negative size field if it were parsed
    scan = scan_log(write(tmp_path, good + b"\xff" * tail))
    assert scan.stop is StopReason.SHORT_TAIL and scan.problem is None and scan.fatal is None
    assert scan.batch_count == 3 and scan.valid_bytes == len(good) and scan.invalid_bytes == tail
    alone = scan_buffer(b"\xff" * tail, tail)  # a file that is nothing but a short tail
    assert alone.stop is StopReason.SHORT_TAIL and alone.batch_count == 0 and alone.problem is None


def test_an_18_byte_tail_is_parsed():
    good = b"".join(plain_log(3))
    data = good + b"\xff" * (HEADER_SIZE_UP_TO_MAGIC + 1)  # size field 0xffffffff = -1
    assert_stopped_at(scan_buffer(data, len(data)), "size_below_minimum", len(good), 3, StopReason.CORRUPT_BATCH)


# -------------------------------------------------------------------------------------- size < 14
@pytest.mark.parametrize("size", [-(2**31), -1, 0, 1, MIN_SIZE_FIELD - 1])
def test_size_field_below_14_is_corrupt(size):
    batches = plain_log(5)
    data = bytearray(b"".join(batches))
    at = starts(batches)[2]
    struct.pack_into(">i", data, at + 8, size)
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "size_below_minimum", at, 2, StopReason.CORRUPT_BATCH)
    assert scan.problem.base_offset == 4 and f"size field {size} is below the minimum 14" in scan.problem.detail


def test_size_field_below_14_in_the_last_few_bytes():
    """A header that starts less than 61 bytes before the end (read without the v2 fast path)."""
    good = b"".join(plain_log(2))
    header = struct.pack(">qib", 77, 13, 0) + bytes(11)  # 24 bytes: offset, size 13, leader epoch byte ...
    data = good + header
    scan = scan_buffer(data, len(data))
    assert_stopped_at(scan, "size_below_minimum", len(good), 2, StopReason.CORRUPT_BATCH)
    assert scan.problem.base_offset == 77


# ------------------------------------------------------------------------------------ v2 size < 61
@pytest.mark.parametrize("length", [MIN_SIZE_FIELD, 30, V2_HEADER_SIZE - 12 - 1])
def test_v2_batch_below_61_bytes_is_corrupt(length):
    batches = plain_log(5)
    data = bytearray(b"".join(batches))
    at = starts(batches)[3]
    struct.pack_into(">i", data, at + 8, length)  # the batch now ends inside its own header
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "size_below_minimum", at, 3, StopReason.CORRUPT_BATCH)
    assert f"v2 batch of {length + 12} bytes is below the 61-byte header" in scan.problem.detail
    assert scan.problem.base_offset == 6


def test_a_61_byte_v2_batch_is_checked_by_its_crc():
    batches = plain_log(5)
    data = bytearray(b"".join(batches))
    at = starts(batches)[3]
    struct.pack_into(">i", data, at + 8, V2_HEADER_SIZE - 12)  # size ok, the CRC now covers 40 bytes only
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "crc_mismatch", at, 3, StopReason.CORRUPT_BATCH)


def test_an_empty_61_byte_v2_batch_is_valid():
    batches = [data_batch(0, 10), encode_batch_v2(1, []), data_batch(1, 20)]
    data = b"".join(batches)
    scan = scan_buffer(data, len(data))
    assert len(batches[1]) == V2_HEADER_SIZE
    assert scan.stop is StopReason.END and scan.batch_count == 3 and scan.records_counts.tolist() == [1, 0, 1]
    assert scan.max_timestamps.tolist() == [10, -1, 20]


# ------------------------------------------------------------------------------------ truncated
@pytest.mark.parametrize("keep", [HEADER_SIZE_UP_TO_MAGIC + 1, 60, 61, -1])
def test_truncated_last_batch_ends_the_walk(tmp_path, keep):
    batches = plain_log(4)
    at = starts(batches)[3]
    kept = len(batches[3]) - 1 if keep == -1 else keep
    data = b"".join(batches[:3]) + batches[3][:kept]
    scan = scan_log(write(tmp_path, data))
    assert_stopped_at(scan, "truncated_batch", at, 3, StopReason.INCOMPLETE_BATCH)
    assert scan.invalid_bytes == kept and scan.problem.base_offset == 6
    assert f"runs {len(batches[3]) - kept} bytes past the end" in scan.problem.detail


def test_a_truncated_last_batch_of_17_bytes_is_a_short_tail():
    batches = plain_log(4)
    data = b"".join(batches[:3]) + batches[3][:HEADER_SIZE_UP_TO_MAGIC]
    scan = scan_buffer(data, len(data))
    assert scan.stop is StopReason.SHORT_TAIL and scan.problem is None
    assert scan.batch_count == 3 and scan.invalid_bytes == HEADER_SIZE_UP_TO_MAGIC


def test_a_size_field_past_the_end_mid_file_is_an_incomplete_batch():
    """Kafka's step 4: a batch that does not fit ends the walk normally, even with bytes after it."""
    batches = plain_log(6)
    data = bytearray(b"".join(batches))
    at = starts(batches)[1]
    struct.pack_into(">i", data, at + 8, 10**6)
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "truncated_batch", at, 1, StopReason.INCOMPLETE_BATCH)
    assert scan.invalid_bytes == len(data) - at


# ------------------------------------------------------------------------------------------ CRC
@pytest.mark.parametrize(
    "where",
    [
        pytest.param(17, id="stored-crc"),
        pytest.param(22, id="attributes"),
        pytest.param(36, id="max-timestamp"),
        pytest.param(-1, id="last-record-byte"),
    ],
)
def test_crc_mismatch(where):
    batches = plain_log(6)
    data = bytearray(b"".join(batches))
    at = starts(batches)[4]
    byte = at + (len(batches[4]) - 1 if where == -1 else where)
    data[byte] ^= 0x01
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "crc_mismatch", at, 4, StopReason.CORRUPT_BATCH)
    assert scan.problem.detail.startswith("CRC-32C mismatch") and scan.problem.base_offset == 8


@pytest.mark.parametrize(
    "where", [0, 7, 12, 15], ids=["base-offset-high", "base-offset-low", "leader-epoch", "epoch-low"]
)
def test_bytes_outside_the_crc_are_not_checked(where):
    """The base offset and the partition leader epoch lie before byte 21: the CRC does not cover them."""
    batches = plain_log(3)
    data = bytearray(b"".join(batches))
    at = starts(batches)[1]
    data[at + where] ^= 0x01
    scan = scan_buffer(bytes(data), len(data))
    assert scan.stop is StopReason.END and scan.problem is None and scan.batch_count == 3
    expected = 2 ^ (1 << 56) if where == 0 else 2 ^ 1 if where == 7 else 2
    assert int(scan.base_offsets[1]) == expected


# ------------------------------------------------------------------------------------------ magic
@pytest.mark.parametrize("magic", [3, 64, 127])
def test_magic_above_2_is_read_as_a_v2_batch(magic):
    """2.2 step 5: magic >= 2, including > 2, is a v2 batch (size >= 61, CRC-32C); the magic is not CRC-covered."""
    batches = plain_log(4)
    data = bytearray(b"".join(batches))
    at = starts(batches)[2]
    data[at + 16] = magic
    scan = scan_buffer(bytes(data), len(data))
    assert scan.stop is StopReason.END and scan.problem is None and scan.batch_count == 4
    assert scan.magic.tolist() == [2, 2, magic, 2]
    assert scan.last_offsets.tolist() == [1, 3, 5, 7] and scan.max_timestamps[2] == 1_021  # v2 header fields
    data[at + 40] ^= 0x10  # and it is checked with the v2 CRC-32C
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "crc_mismatch", at, 2, StopReason.CORRUPT_BATCH)
    assert scan.problem.detail.startswith("CRC-32C mismatch")
    struct.pack_into(">i", data, at + 8, 40)  # and with the v2 minimum size
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "size_below_minimum", at, 2, StopReason.CORRUPT_BATCH)


@pytest.mark.parametrize("magic", [0x80, 0xFF])
def test_a_negative_magic_is_read_as_a_legacy_entry(magic):
    """The magic is a signed byte: 0x80..0xff are below 2, so legacy rules (CRC32 from the magic byte) apply."""
    batches = plain_log(3)
    data = bytearray(b"".join(batches))
    at = starts(batches)[1]
    data[at + 16] = magic
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "crc_mismatch", at, 1, StopReason.CORRUPT_BATCH)
    assert scan.problem.detail.startswith("legacy CRC32 mismatch")


# ------------------------------------------------------------------------------------------ legacy
def legacy_log() -> list[bytes]:
    return [
        encode_legacy(0, b"a" * 30, magic=0),
        encode_legacy(1, b"b" * 30, key=b"k", magic=1, timestamp=5_000),
        encode_legacy(2, None, magic=0),  # the smallest entry: a 14-byte record
        encode_legacy(7, b"c" * 5, magic=1, timestamp=4_000),  # offsets may jump
    ]


def test_legacy_entries(tmp_path):
    entries = legacy_log()
    data = b"".join(entries)
    scan = scan_log(write(tmp_path, data))
    assert len(entries[2]) == 12 + MIN_SIZE_FIELD
    assert scan.stop is StopReason.END and scan.problem is None and scan.batch_count == 4
    assert scan.positions.tolist() == starts(entries)
    assert scan.sizes.tolist() == [len(e) for e in entries]
    assert scan.magic.tolist() == [0, 1, 0, 1]
    assert scan.base_offsets.tolist() == scan.last_offsets.tolist() == [0, 1, 2, 7]
    assert scan.max_timestamps.tolist() == [-1, 5_000, -1, 4_000]  # v0: -1, v1: the record's timestamp
    assert scan.producer_ids.tolist() == [-1] * 4 and scan.records_counts.tolist() == [-1] * 4


def test_legacy_entries_then_v2_batches():
    batches = legacy_log() + [data_batch(8, 6_000, 2)]
    data = b"".join(batches)
    scan = scan_buffer(data, len(data))
    assert scan.stop is StopReason.END and scan.batch_count == 5
    assert scan.magic.tolist() == [0, 1, 0, 1, 2] and scan.last_offsets.tolist() == [0, 1, 2, 7, 9]
    assert scan.max_timestamps.tolist() == [-1, 5_000, -1, 4_000, 6_001]


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(12, id="stored-crc"),
        pytest.param(16, id="magic"),
        pytest.param(17, id="attributes"),
        pytest.param(20, id="timestamp"),
        pytest.param(-1, id="last-value-byte"),
    ],
)
def test_legacy_crc32_error(where):
    entries = legacy_log()
    data = bytearray(b"".join(entries))
    at = starts(entries)[1]  # the v1 entry
    data[at + (len(entries[1]) - 1 if where == -1 else where)] ^= 0x01
    scan = scan_buffer(bytes(data), len(data))
    assert_stopped_at(scan, "crc_mismatch", at, 1, StopReason.CORRUPT_BATCH)
    assert scan.problem.detail.startswith("legacy CRC32 mismatch") and scan.problem.base_offset == 1


def _short_v1_entry(offset: int, timestamp: int) -> bytes:
    """A magic-1 entry of 14 bytes (crc, magic, attributes, timestamp) with a correct CRC32."""
    record = struct.pack(">bbq", 1, 0, timestamp)
    record = struct.pack(">I", zlib.crc32(record)) + record
    return struct.pack(">qi", offset, len(record)) + record


def test_a_v1_entry_of_14_bytes_with_a_good_crc_is_valid_per_the_doc():
    """kafka-index-format.md 6.2: legacy ensureValid is size >= 14 and the CRC32, nothing more (a 14..21-byte
    v1 entry was once cut as size_below_minimum)."""
    entries = [encode_legacy(0, b"a", magic=1, timestamp=10), _short_v1_entry(1, 20), encode_legacy(2, b"b", magic=0)]
    data = b"".join(entries)
    scan = scan_buffer(data, len(data))
    assert scan.problem is None and scan.stop is StopReason.END and scan.batch_count == 3
    assert scan.max_timestamps.tolist() == [10, 20, -1]


# ------------------------------------------------------------------------------------ control batches
def test_control_batches_that_kafka_does_not_parse():
    """Only control batches with a producer id and at least one record are parsed as markers (2.5, 6.1)."""
    no_pid = encode_batch_v2(1, [(struct.pack(">hh", 0, 9), b"", 5)], control=True)  # unknown type, no pid
    empty = encode_batch_v2(2, [], producer_id=3, producer_epoch=0, transactional=True, control=True)
    batches = [data_batch(0, 1), no_pid, empty, data_batch(3, 7)]
    data = b"".join(batches)
    scan = scan_buffer(data, len(data))
    assert scan.stop is StopReason.END and scan.problem is None and scan.fatal is None and scan.batch_count == 4
    assert scan.marker_types.tolist() == [-1, -1, -1, -1]


# ------------------------------------------------------------------------------------------ fuzz
def check_scan(scan, data: bytes) -> None:
    """The LogScan contract on any input."""
    n = len(data)
    assert scan.file_size == n
    count = scan.batch_count
    for name in ("sizes", "base_offsets", "last_offsets", "max_timestamps", "magic", "attributes", "producer_ids"):
        assert len(getattr(scan, name)) == count, name
    assert 0 <= scan.valid_bytes <= n
    pos, sizes = scan.positions, scan.sizes
    if count:
        assert pos[0] == 0
        assert np.all(np.diff(pos) > 0)
        assert np.array_equal(pos[1:], pos[:-1] + sizes[:-1])
        assert int(pos[-1]) < n and scan.valid_bytes == int(pos[-1] + sizes[-1])
    for p, size, magic in zip(pos.tolist(), sizes.tolist(), scan.magic.tolist(), strict=True):
        assert size >= 12 + MIN_SIZE_FIELD
        if magic >= 2:  # every listed batch passed Kafka's checks
            assert size >= V2_HEADER_SIZE
            assert crc32c.crc32c(data[p + 21 : p + size]) == struct.unpack_from(">I", data, p + 17)[0]
        else:
            assert zlib.crc32(data[p + 16 : p + size]) == struct.unpack_from(">I", data, p + 12)[0]
    problem, fatal = scan.problem, scan.fatal
    if problem is not None:
        assert problem.kind in PROBLEM_KINDS
        assert scan.stop is STOP_OF_PROBLEM[problem.kind]
        assert 0 <= problem.position < n
        if problem.kind == "invalid_marker":  # the marker batch stays; the data ends after it
            assert (problem.batch_index, problem.position) == (count - 1, int(pos[-1]))
        elif fatal is None:
            assert (problem.batch_index, problem.position) == (count, scan.valid_bytes)
    else:
        assert scan.stop in (StopReason.END, StopReason.SHORT_TAIL)
        if fatal is None and scan.stop is StopReason.END:
            assert scan.valid_bytes == n
        elif fatal is None:
            assert 1 <= n - scan.valid_bytes <= HEADER_SIZE_UP_TO_MAGIC
    if fatal is not None:
        assert fatal.kind in FATAL_KINDS
        if fatal.kind == "unknown_control_type":  # kept (recovery reads it, then throws)
            assert (fatal.batch_index, fatal.position) == (count - 1, int(pos[-1]))
        else:  # never read
            assert (fatal.batch_index, fatal.position) == (count, scan.valid_bytes)


def check_plan(scan) -> None:
    """Planning any scan returns too, with a refusal kind when it cannot be rebuilt."""
    base = int(scan.base_offsets[0]) if scan.batch_count else 0
    plan = plan_segment(summarize(scan, base, index_interval_bytes=0), segment_index_bytes=1200)
    assert plan.valid_bytes == scan.valid_bytes and plan.batch_count == scan.batch_count
    if plan.fatal is not None:
        assert plan.fatal.kind in FATAL_KINDS | {
            "offset_overflow",
            "offset_index_full",
            "time_index_full",
            "log_offset_not_increasing",
            "log_time_offset_not_increasing",
        }
    else:  # what a rebuild would write keeps the index invariants
        assert np.all(np.diff(plan.offset_offsets) > 0) and np.all(np.diff(plan.time_timestamps) > 0)
        assert np.all(np.diff(plan.time_offsets) >= 0)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=600))
def test_random_bytes_never_raise(data):
    scan = scan_buffer(data, len(data))
    check_scan(scan, data)
    check_plan(scan)


def _marker(offset: int, control_type: int, value: bytes) -> bytes:
    return encode_batch_v2(
        offset,
        [(struct.pack(">hh", 0, control_type), value, 50)],
        producer_id=7,
        producer_epoch=0,
        transactional=True,
        control=True,
    )


PIECES = {
    "data": lambda o: data_batch(o, 1_000 + o, 2),
    "gzip": lambda o: data_batch(o, 1_000 + o, 3, compression=1),
    "txn": lambda o: data_batch(o, 1_000 + o, 1, producer_id=7, producer_epoch=0, transactional=True),
    "commit": lambda o: encode_control_batch(o, 7, 0, abort=False, timestamp=1_000 + o),
    "abort": lambda o: encode_control_batch(o, 7, 0, abort=True, timestamp=1_000 + o),
    "bad_marker": lambda o: _marker(o, 0, b"\x00"),  # value too short
    "unknown_type": lambda o: _marker(o, 5, b""),
    "gzip_marker": lambda o: encode_batch_v2(
        o,
        [(b"\0\0\0\0", b"\0" * 6, 1)],
        producer_id=7,
        producer_epoch=0,
        transactional=True,
        control=True,
        compression=1,
    ),
    "v0": lambda o: encode_legacy(o, b"x" * 20, magic=0),
    "v1": lambda o: encode_legacy(o, b"y" * 20, magic=1, timestamp=1_000 + o),
}


def _reseal(data: bytearray, pos: int) -> None:
    """Recompute the CRC of the v2-looking batch at ``pos`` (so a mutation reaches the record parsing)."""
    if pos + V2_HEADER_SIZE > len(data) or data[pos + 16] != 2:
        return
    size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
    if size >= V2_HEADER_SIZE and pos + size <= len(data):
        struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21 : pos + size])))


@st.composite
def mutated_logs(draw):
    names = draw(st.lists(st.sampled_from(sorted(PIECES)), min_size=1, max_size=8))
    batches, offset = [], 0
    for name in names:
        batches.append(PIECES[name](offset))
        offset += 3
    data = bytearray(b"".join(batches))
    flips = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), max_size=4))
    for at, value in flips:
        data[at] = value
    if draw(st.booleans()):
        for at in starts(batches):
            _reseal(data, at)
    cut = draw(st.integers(0, len(data)))
    if draw(st.booleans()):
        del data[cut:]
    data += draw(st.binary(max_size=40))
    return bytes(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated_logs(), beyond=st.binary(min_size=1, max_size=80))
def test_mutated_valid_logs_never_raise(data, beyond):
    scan = scan_buffer(data, len(data))
    check_scan(scan, data)
    check_plan(scan)
    # bytes past ``end`` change nothing
    longer = scan_buffer(data + beyond, len(data))
    assert longer.positions.tolist() == scan.positions.tolist()
    assert (longer.stop, longer.problem, longer.fatal) == (scan.stop, scan.problem, scan.fatal)
