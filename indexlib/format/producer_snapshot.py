"""A producer-state snapshot (``<offset>.snapshot``), as bytes: Kafka's ``ProducerStateManager`` format,
version 1: a header (version int16, CRC-32C uint32 of everything after it, entry count int32) and one 46-byte
entry per producer (id, epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch, first
offset of its open transaction or -1). Only the open transactions change index bytes."""

from __future__ import annotations

import struct

from .errors import KafkaIndexError
from .scan_kernel import crc32c_function

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, delta, ts, coord epoch, txn first
assert _SNAPSHOT_ENTRY.size == 46


class SnapshotError(KafkaIndexError, ValueError):
    """A ``.snapshot`` file that Kafka would reject (and skip)."""


def parse_snapshot(data: bytes, path: str) -> dict[int, int]:
    """The open transactions a snapshot records: ``{producer_id: first_offset}``. Raises
    :class:`SnapshotError` naming ``path`` when the version, length or CRC-32C is wrong."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise SnapshotError(f"{path}: {len(data)} bytes is too short for a producer snapshot")
    version, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"{path}: snapshot version {version}, expected {SNAPSHOT_VERSION}")
    if crc32c_function()(memoryview(data)[6:]) != stored_crc:
        raise SnapshotError(f"{path}: snapshot CRC-32C mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise SnapshotError(f"{path}: {count} entries do not match the file length {len(data)}")
    ongoing: dict[int, int] = {}
    for pid, _e, _s, _lo, _d, _t, _c, txn_first in _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEADER.size :]):
        if txn_first >= 0:
            ongoing[pid] = txn_first
    return ongoing
