"""The project's own encoder of Kafka log segments, for test data, the demo and benchmarks.

Written from the format description (``docs/kafka-index-format.md`` §6.1, §6.2 and §2.5 of the project's
shared material). Only the stdlib, numpy and crc32c are used.

* :func:`encode_batch_v2`: one v2 record batch (uncompressed or gzip).
* :func:`encode_control_batch`: one transaction marker (ABORT or COMMIT), always 78 bytes.
* :func:`encode_legacy`: one uncompressed v0/v1 log entry.
* :func:`generate_partition`: a small, realistic partition of ``.log`` segments, optionally with
  interleaved transactions that span segment boundaries.
* :func:`write_uniform_segment`: a large segment of equal-size batches, written quickly with numpy.
"""

from __future__ import annotations

import gzip
import itertools
import os
import pathlib
import struct
import zlib
from collections.abc import Sequence

import crc32c
import numpy as np

from ..format.errors import KafkaIndexError
from ..format.layout import LOG_SUFFIX, segment_name

__all__ = [
    "GeneratorArgumentError",
    "encode_batch_v2",
    "encode_control_batch",
    "encode_legacy",
    "generate_partition",
    "write_uniform_segment",
]


class GeneratorArgumentError(KafkaIndexError, ValueError):
    """Arguments the generator cannot write a segment from (a codec other than none or gzip, a range or
    count out of bounds, offset deltas that do not increase)."""


#: Size of the v2 batch header (``RECORD_BATCH_OVERHEAD``).
BATCH_OVERHEAD = 61
#: Size of a transaction marker batch.
CONTROL_BATCH_SIZE = 78

_COMPRESSION_NONE = 0
_COMPRESSION_GZIP = 1
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_NO_TIMESTAMP = -1

# baseOffset, length, partitionLeaderEpoch, magic, crc
_HEAD = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, count
_CRC_COVERED_HEAD = struct.Struct(">hiqqqhii")
_CRC_START = _HEAD.size  # 21
_BASE_TIMESTAMP_AT = 27
_MAX_TIMESTAMP_AT = 35


def _varlong(n: int) -> bytes:
    """Zig-zag varint/varlong encoding (Kafka's ``ByteUtils.writeVarint/writeVarlong``)."""
    if not -(2**63) <= n < 2**63:
        raise GeneratorArgumentError(f"varlong out of range: {n}")
    z = ((n << 1) ^ (n >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _nullable(data: bytes | None) -> bytes:
    if data is None:
        return _varlong(-1)
    return _varlong(len(data)) + bytes(data)


def _encode_record(timestamp_delta: int, offset_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = (
        b"\x00"  # record attributes (unused)
        + _varlong(timestamp_delta)
        + _varlong(offset_delta)
        + _nullable(key)
        + _nullable(value)
        + _varlong(0)  # header count
    )
    return _varlong(len(body)) + body


def encode_batch_v2(
    base_offset: int,
    records: Sequence[tuple[bytes | None, bytes | None, int]],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    compression: int = 0,
    log_append_time: bool = False,
    partition_leader_epoch: int = 0,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Encode one v2 record batch of ``(key, value, timestamp_ms)`` records.

    ``baseTimestamp`` is the first record's timestamp, ``maxTimestamp`` the largest one (both -1 for an
    empty batch). ``offset_deltas`` defaults to ``0..n-1``; gaps are allowed but deltas must increase.
    ``compression`` is 0 (none) or 1 (gzip); other codecs raise :class:`GeneratorArgumentError`.
    """
    if compression not in (_COMPRESSION_NONE, _COMPRESSION_GZIP):
        raise GeneratorArgumentError(f"unsupported compression codec {compression} (only 0 = none and 1 = gzip)")
    n = len(records)
    deltas = list(range(n)) if offset_deltas is None else [int(d) for d in offset_deltas]
    if len(deltas) != n:
        raise GeneratorArgumentError(f"{len(deltas)} offset deltas for {n} records")
    if any(d < 0 for d in deltas) or any(b <= a for a, b in itertools.pairwise(deltas)):
        raise GeneratorArgumentError("offset deltas must be non-negative and strictly increasing")

    if n:
        base_timestamp = int(records[0][2])
        max_timestamp = max(int(r[2]) for r in records)
    else:
        base_timestamp = max_timestamp = _NO_TIMESTAMP
    body = b"".join(
        _encode_record(int(ts) - base_timestamp, delta, key, value)
        for (key, value, ts), delta in zip(records, deltas, strict=True)
    )
    if compression == _COMPRESSION_GZIP:
        body = gzip.compress(body, mtime=0)

    attributes = compression
    if log_append_time:
        attributes |= _ATTR_LOG_APPEND_TIME
    if transactional:
        attributes |= _ATTR_TRANSACTIONAL
    if control:
        attributes |= _ATTR_CONTROL
    covered = (
        _CRC_COVERED_HEAD.pack(
            attributes,
            deltas[-1] if n else 0,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            n,
        )
        + body
    )
    length = _CRC_START + len(covered) - 12
    head = _HEAD.pack(base_offset, length, partition_leader_epoch, 2, crc32c.crc32c(covered))
    return head + covered


def encode_control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    *,
    abort: bool,
    timestamp: int,
    coordinator_epoch: int = 0,
) -> bytes:
    """Encode a transaction marker batch (ABORT or COMMIT) of ``producer_id``; always 78 bytes."""
    key = struct.pack(">hh", 0, 0 if abort else 1)  # version 0, type ABORT=0 / COMMIT=1
    value = struct.pack(">hi", 0, coordinator_epoch)  # version 0, coordinator epoch
    batch = encode_batch_v2(
        base_offset,
        [(key, value, timestamp)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
    assert len(batch) == CONTROL_BATCH_SIZE
    return batch


def encode_legacy(
    offset: int,
    value: bytes | None,
    *,
    key: bytes | None = None,
    magic: int = 1,
    timestamp: int = -1,
) -> bytes:
    """Encode one uncompressed v0 or v1 log entry (``timestamp`` is ignored for magic 0)."""
    if magic not in (0, 1):
        raise GeneratorArgumentError(f"legacy magic must be 0 or 1, not {magic}")
    record = struct.pack(">bb", magic, 0)
    if magic == 1:
        record += struct.pack(">q", timestamp)
    for field in (key, value):
        record += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + bytes(field)
    record = struct.pack(">I", zlib.crc32(record)) + record
    return struct.pack(">qi", offset, len(record)) + record


# --------------------------------------------------------------------------------- partitions
def generate_partition(
    partition_dir: str | os.PathLike[str],
    *,
    segments: int = 3,
    batches_per_segment: int = 50,
    records_per_batch: tuple[int, int] = (1, 20),
    value_bytes: tuple[int, int] = (20, 200),
    compression: int = 0,
    transactional_producers: int = 0,
    abort_every: int = 3,
    base_offset: int = 0,
    start_timestamp: int = 1_700_000_000_000,
    out_of_order_timestamps: bool = False,
    seed: int = 0,
) -> list[pathlib.Path]:
    """Write ``segments`` ``<base:020d>.log`` files (no indexes) with contiguous offsets; return their paths.

    Each segment holds ``batches_per_segment`` batches (markers included). ``records_per_batch`` and
    ``value_bytes`` are inclusive ranges. With ``transactional_producers > 0``, non-transactional batches
    (producer id -1) are interleaved with transactions of producer ids ``1000, 1001, ...``: each
    transaction is a few transactional data batches then a marker; the k-th transaction started
    (1-based) is aborted when ``k % abort_every == 0`` (``abort_every=0`` never aborts). At every
    segment boundary at least one transaction (two when there are two producers or more) is open, room
    permitting, so transactions span boundaries and overlap; every transaction is closed by the end of
    the last segment. ``compression`` applies to data batches only. Timestamps increase with jitter; with
    ``out_of_order_timestamps`` some batches lie below earlier ones and have their records shuffled in
    time. The output depends only on the arguments.
    """
    if segments < 1 or batches_per_segment < 1:
        raise GeneratorArgumentError("segments and batches_per_segment must be >= 1")
    if not 1 <= records_per_batch[0] <= records_per_batch[1]:
        raise GeneratorArgumentError(f"bad records_per_batch range {records_per_batch}")
    if not 0 <= value_bytes[0] <= value_bytes[1]:
        raise GeneratorArgumentError(f"bad value_bytes range {value_bytes}")
    if compression not in (_COMPRESSION_NONE, _COMPRESSION_GZIP):
        raise GeneratorArgumentError(f"unsupported compression codec {compression} (only 0 = none and 1 = gzip)")
    if transactional_producers < 0 or abort_every < 0:
        raise GeneratorArgumentError("transactional_producers and abort_every must be >= 0")

    rng = np.random.default_rng(seed)
    directory = pathlib.Path(partition_dir)
    directory.mkdir(parents=True, exist_ok=True)

    pids = [1000 + k for k in range(transactional_producers)]
    sequences = dict.fromkeys(pids, 0)
    open_txns: dict[int, list[int]] = {}  # pid -> [data batches still planned, txn number]
    txns_started = 0
    next_offset = base_offset
    cursor = start_timestamp  # timestamp of the next in-order record
    total = segments * batches_per_segment

    def data_batch(pid: int) -> bytes:
        nonlocal next_offset, cursor
        n = int(rng.integers(records_per_batch[0], records_per_batch[1] + 1))
        stamps = cursor + np.cumsum(rng.integers(0, 6, n))
        cursor = int(stamps[-1]) + int(rng.integers(0, 50))
        if out_of_order_timestamps and rng.random() < 0.2:
            stamps = stamps - int(rng.integers(1, 5_000))
            rng.shuffle(stamps)
        records = []
        for ts in stamps:
            key = None if rng.random() < 0.2 else b"key-%d" % int(rng.integers(0, 1000))
            value = rng.bytes(int(rng.integers(value_bytes[0], value_bytes[1] + 1)))
            records.append((key, value, int(ts)))
        if pid < 0:
            batch = encode_batch_v2(next_offset, records, compression=compression)
        else:
            batch = encode_batch_v2(
                next_offset,
                records,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequences[pid],
                transactional=True,
                compression=compression,
            )
            sequences[pid] += n
        next_offset += n
        return batch

    def open_txn(pid: int) -> bytes:
        nonlocal txns_started
        txns_started += 1
        open_txns[pid] = [int(rng.integers(1, 5)), txns_started]
        return txn_data(pid)

    def txn_data(pid: int) -> bytes:
        open_txns[pid][0] -= 1
        return data_batch(pid)

    def marker(pid: int) -> bytes:
        nonlocal next_offset, cursor
        number = open_txns.pop(pid)[1]
        abort = abort_every > 0 and number % abort_every == 0
        batch = encode_control_batch(next_offset, pid, 0, abort=abort, timestamp=cursor)
        next_offset += 1
        cursor += int(rng.integers(0, 50))
        return batch

    paths: list[pathlib.Path] = []
    for segment in range(segments):
        path = directory / segment_name(next_offset, LOG_SUFFIX)
        chunks: list[bytes] = []
        for position in range(batches_per_segment):
            remaining = total - (segment * batches_per_segment + position)
            idle = [p for p in pids if p not in open_txns]
            can_open = bool(idle) and remaining >= len(open_txns) + 2
            boundary = segment < segments - 1 and position == batches_per_segment - 1
            near_boundary = segment < segments - 1 and position >= batches_per_segment - 2
            if pids and remaining <= len(open_txns):  # close everything before the end
                chunks.append(marker(min(open_txns)))
            elif near_boundary and can_open and len(open_txns) < min(2, len(pids)):
                chunks.append(open_txn(idle[int(rng.integers(len(idle)))]))
            elif not pids or rng.random() < 0.35:
                chunks.append(data_batch(-1))
            else:
                pid = pids[int(rng.integers(len(pids)))]
                if pid in open_txns:
                    if open_txns[pid][0] > 0 or boundary:  # no marker on a boundary slot
                        chunks.append(txn_data(pid))
                    else:
                        chunks.append(marker(pid))
                elif can_open:
                    chunks.append(open_txn(pid))
                else:
                    chunks.append(data_batch(-1))
        path.write_bytes(b"".join(chunks))
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------ big segments
def _crc_bit_contributions(template: bytes, field_at: int) -> np.ndarray:
    """For each bit of the big-endian int64 at ``field_at``, the XOR it makes to the batch CRC.

    CRC-32C is affine in its input: for messages of equal length, ``crc(m ^ d) = crc(m) ^ L(d)`` with
    ``L(d) = crc(d) ^ crc(zeros)``, and ``L`` is linear, so the CRC change for any new field value is the
    XOR of the contributions of the flipped bits.
    """
    covered_len = len(template) - _CRC_START
    zero_crc = crc32c.crc32c(bytes(covered_len))
    out = np.empty(64, dtype=np.uint32)
    buf = bytearray(covered_len)
    for bit in range(64):
        at = field_at - _CRC_START + 7 - bit // 8
        buf[at] = 1 << (bit % 8)
        out[bit] = crc32c.crc32c(buf) ^ zero_crc
        buf[at] = 0
    return out


def write_uniform_segment(
    path: str | os.PathLike[str],
    *,
    base_offset: int = 0,
    total_bytes: int,
    batch_bytes: int,
    records_per_batch: int = 1,
    seed: int = 0,
    producer_id: int = -1,
) -> int:
    """Write a ``.log`` of about ``total_bytes`` made of equal v2 batches of about ``batch_bytes``;
    return the number of batches.

    ``producer_id`` >= 0: every batch is that idempotent producer's (epoch 0, base sequence 0 in every batch:
    not a sequence a broker would accept, and nothing a rebuild reads), as most clients write since Kafka 3.0.

    Offsets are contiguous from ``base_offset``; timestamps strictly increase from batch to batch. One
    template batch is copied with numpy; base offsets (not CRC-covered) and the two timestamps are stamped
    in, and the CRC is patched using CRC-32C linearity. The file is ``max(1, total_bytes // size)``
    batches, so its size is within one batch of ``total_bytes``.
    """
    if records_per_batch < 1:
        raise GeneratorArgumentError("records_per_batch must be >= 1")
    if total_bytes <= 0:
        raise GeneratorArgumentError("total_bytes must be > 0")
    rng = np.random.default_rng(seed)
    start_ts = 1_700_000_000_000
    epoch = sequence = 0 if producer_id >= 0 else -1

    def template_for(value_len: int, last_extra: int) -> bytes:
        records = []
        for r in range(records_per_batch):
            size = value_len + (last_extra if r == records_per_batch - 1 else 0)
            records.append((None, b"\x00" * size, start_ts + r))
        return encode_batch_v2(
            base_offset, records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
        )

    # Fit the record values to batch_bytes (varint widths make an exact fit occasionally impossible).
    per_record = (batch_bytes - BATCH_OVERHEAD) // records_per_batch
    value_len = max(0, per_record - 8)
    while value_len > 0 and len(template_for(value_len, 0)) > batch_bytes:
        value_len -= 1
    if len(template_for(value_len, 0)) > batch_bytes:
        raise GeneratorArgumentError(f"batch_bytes {batch_bytes} is too small for {records_per_batch} records")
    extra = batch_bytes - len(template_for(value_len, 0))
    while extra > 0 and len(template_for(value_len, extra)) > batch_bytes:
        extra -= 1  # the last record's length varints may have grown by a byte or two
    # Fill the values with seeded bytes, then re-encode.
    records = []
    for r in range(records_per_batch):
        size = value_len + (extra if r == records_per_batch - 1 else 0)
        records.append((None, rng.bytes(size), start_ts + r))
    template = encode_batch_v2(
        base_offset, records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    size = len(template)
    count = max(1, total_bytes // size)

    template_crc = np.uint32(struct.unpack_from(">I", template, 17)[0])
    base_bits = _crc_bit_contributions(template, _BASE_TIMESTAMP_AT)
    max_bits = _crc_bit_contributions(template, _MAX_TIMESTAMP_AT)
    span = records_per_batch - 1
    base_ts = start_ts + np.concatenate(([0], np.cumsum(rng.integers(1, 10, count - 1) + span)))
    offsets = base_offset + np.arange(count, dtype=np.int64) * records_per_batch

    template_row = np.frombuffer(template, dtype=np.uint8)
    chunk = max(1, (64 << 20) // size)
    with open(path, "wb") as f:
        for start in range(0, count, chunk):
            stop = min(count, start + chunk)
            m = stop - start
            first = base_ts[start:stop].astype(np.int64)
            last = first + span
            flips_first = (first ^ np.int64(start_ts)).view(np.uint64)
            flips_last = (last ^ np.int64(start_ts + span)).view(np.uint64)
            crcs = np.full(m, template_crc, dtype=np.uint32)
            for bit in range(64):
                crcs ^= ((flips_first >> np.uint64(bit)) & np.uint64(1)).astype(np.uint32) * base_bits[bit]
                crcs ^= ((flips_last >> np.uint64(bit)) & np.uint64(1)).astype(np.uint32) * max_bits[bit]
            block = np.tile(template_row, (m, 1))
            block[:, 0:8] = offsets[start:stop].astype(">i8").view(np.uint8).reshape(m, 8)
            block[:, 17:21] = crcs.astype(">u4").view(np.uint8).reshape(m, 4)
            block[:, 27:35] = first.astype(">i8").view(np.uint8).reshape(m, 8)
            block[:, 35:43] = last.astype(">i8").view(np.uint8).reshape(m, 8)
            f.write(block.data.cast("B"))
    return count
