"""One batch's bytes, written from the format description (``docs/kafka-index-format.md`` §6.1, §6.2 and §2.5 of
the project's shared material): a v2 record batch (:func:`encode_batch_v2`, uncompressed or gzip), a transaction
marker (:func:`encode_control_batch`, always 78 bytes) and an uncompressed v0/v1 log entry (:func:`encode_legacy`).

Invariants: every batch is well formed (sizes, varints, a matching CRC-32C or CRC32), as a broker writes it; the
bytes depend only on the arguments; arguments that cannot make such a batch are :class:`GeneratorArgumentError`.
Only the stdlib and crc32c are used.
"""

from __future__ import annotations

import gzip
import itertools
import struct
import zlib
from collections.abc import Sequence

import crc32c

from ..format.errors import KafkaIndexError

__all__ = [
    "GeneratorArgumentError",
    "encode_batch_v2",
    "encode_control_batch",
    "encode_legacy",
]


class GeneratorArgumentError(KafkaIndexError, ValueError):
    """Arguments the generator cannot write a segment from (a codec other than none or gzip, a range or
    count out of bounds, offset deltas that do not increase)."""


#: Size of the v2 batch header (``RECORD_BATCH_OVERHEAD``).
BATCH_OVERHEAD = 61
#: Size of a transaction marker batch.
CONTROL_BATCH_SIZE = 78

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_NO_TIMESTAMP = -1

# baseOffset, length, partitionLeaderEpoch, magic, crc
_HEAD = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, count
_CRC_COVERED_HEAD = struct.Struct(">hiqqqhii")
#: where the CRC-covered part of a v2 batch starts (its attributes), and where its two timestamps lie
CRC_START = _HEAD.size  # 21
BASE_TIMESTAMP_AT = 27
MAX_TIMESTAMP_AT = 35


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
    if compression not in (COMPRESSION_NONE, COMPRESSION_GZIP):
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
    if compression == COMPRESSION_GZIP:
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
    length = CRC_START + len(covered) - 12
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
    partition_leader_epoch: int = 0,
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
        partition_leader_epoch=partition_leader_epoch,
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
