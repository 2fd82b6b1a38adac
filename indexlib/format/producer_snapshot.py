"""A producer-state snapshot (``<offset>.snapshot``), as bytes: Kafka's ``ProducerSnapshot`` message, version 1
(``storage/src/main/resources/message/ProducerSnapshot.json``), as ``ProducerStateManager.writeSnapshot`` writes it:

- a header: version int16 (1), CRC-32C uint32 of bytes ``[6, end)``, entry count int32;
- one 46-byte entry per producer: id int64, epoch int16, last sequence int32, last offset int64, offset delta
  int32, timestamp int64, coordinator epoch int32, first offset of its open transaction int64 (-1: none).

Big-endian throughout. A snapshot of no producer is the 10-byte :data:`EMPTY_SNAPSHOT` (what every partition
without producers gets, ``__transaction_state`` and ``__consumer_offsets`` included). ``readSnapshot`` refuses
(``CorruptSnapshotException``, and the broker then deletes the file and tries the next older one) a version other
than 1, a header or entries cut short, a negative count, and a CRC mismatch, checked in that order; bytes after the
last entry are not refused (the CRC covers them). Pure computation: this module never opens a file."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import astuple, dataclass

from .errors import IndexArgumentError, KafkaIndexError
from .scan_kernel import crc32c_function

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, delta, ts, coord epoch, txn first
assert _SNAPSHOT_ENTRY.size == 46
_CRC_START = 6  # the CRC covers everything after the version and itself


class SnapshotError(KafkaIndexError, ValueError):
    """A ``.snapshot`` file that Kafka would reject (and skip)."""


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer of a snapshot, the fields in file order. ``last_offset`` -1 means no batch metadata (Kafka then
    ignores ``last_sequence``, ``offset_delta``); ``current_txn_first_offset`` -1 (any negative) means no open
    transaction. Field widths: ``epoch`` int16, ``last_sequence``, ``offset_delta`` and ``coordinator_epoch``
    int32, the rest int64."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def has_open_transaction(self) -> bool:
        """Whether the producer has an open transaction (Kafka: ``currentTxnFirstOffset >= 0``)."""
        return self.current_txn_first_offset >= 0


def parse_snapshot_entries(data: bytes | memoryview, path: str) -> list[ProducerSnapshotEntry]:
    """Every entry of a snapshot, in file order. Raises :class:`SnapshotError` naming ``path`` for what Kafka's
    ``readSnapshot`` refuses (module doc), in Kafka's order of checks; bytes after the entries are ignored, as Kafka
    ignores them (:func:`snapshot_trailing_bytes` counts them)."""
    view = memoryview(data)
    if len(view) < 2:
        raise SnapshotError(f"{path}: {len(view)} bytes is too short for a producer snapshot")
    (version,) = struct.unpack_from(">h", view, 0)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"{path}: snapshot version {version}, expected {SNAPSHOT_VERSION}")
    if len(view) < _SNAPSHOT_HEADER.size:
        raise SnapshotError(f"{path}: {len(view)} bytes is too short for a producer snapshot")
    _, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(view, 0)
    room = len(view) - _SNAPSHOT_HEADER.size
    if count < 0 or count * _SNAPSHOT_ENTRY.size > room:
        raise SnapshotError(f"{path}: {count} entries do not fit the file length {len(view)}")
    if crc32c_function()(view[_CRC_START:]) != stored_crc:
        raise SnapshotError(f"{path}: snapshot CRC-32C mismatch")
    end = _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size
    return [ProducerSnapshotEntry(*fields) for fields in _SNAPSHOT_ENTRY.iter_unpack(view[_SNAPSHOT_HEADER.size : end])]


def snapshot_trailing_bytes(data: bytes | memoryview) -> int:
    """How many bytes follow the last entry of a snapshot that :func:`parse_snapshot_entries` accepts (0 for every
    file Kafka wrote)."""
    count: int = _SNAPSHOT_HEADER.unpack_from(data, 0)[2]
    return len(data) - _SNAPSHOT_HEADER.size - count * _SNAPSHOT_ENTRY.size


def parse_snapshot(data: bytes, path: str) -> dict[int, int]:
    """The open transactions a snapshot records: ``{producer_id: first_offset}``. Raises
    :class:`SnapshotError` naming ``path`` when Kafka would refuse the file (:func:`parse_snapshot_entries`)."""
    return {
        entry.producer_id: entry.current_txn_first_offset
        for entry in parse_snapshot_entries(data, path)
        if entry.has_open_transaction
    }


def format_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The bytes ``writeSnapshot`` writes for these entries, in the order given (Kafka's order is its producers'
    ``HashMap`` iteration order: :func:`kafka_snapshot_order`). Raises ``struct.error`` for a field outside its
    width."""
    body = b"".join(_SNAPSHOT_ENTRY.pack(*astuple(entry)) for entry in entries)
    count = len(body) // _SNAPSHOT_ENTRY.size
    tail = struct.pack(">i", count) + body
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c_function()(tail)) + tail


def _java_hashmap_bucket(producer_id: int, capacity: int) -> int:
    bits = producer_id & 0xFFFFFFFFFFFFFFFF
    h = (bits ^ (bits >> 32)) & 0xFFFFFFFF  # Long.hashCode, as an unsigned 32-bit pattern
    return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash spreads the high half, then masks


def kafka_snapshot_order(
    entries: Iterable[ProducerSnapshotEntry], capacity: int | None = None
) -> list[ProducerSnapshotEntry]:
    """The entries in the order ``writeSnapshot`` iterates Kafka's ``HashMap<Long, ProducerStateEntry>``: by bucket
    of ``Long.hashCode(producer_id)`` in a table of ``capacity`` (a power of two; default the smallest table a map
    that never held more producers reaches: 16, doubled while the count exceeds 3/4 of it), producers of one bucket
    in the order given (their insertion order). A table that once held more producers stays larger (a ``HashMap``
    never shrinks), and a bucket of more than 8 producers in a table of 64 or more becomes a tree whose order this
    does not model: neither happens with the few, sequentially allocated producer ids of a partition."""
    ordered = list(entries)
    if capacity is None:
        capacity = 16
        while len(ordered) > capacity * 3 // 4:
            capacity *= 2
    if capacity <= 0 or capacity & (capacity - 1):
        raise IndexArgumentError(f"a HashMap capacity is a power of two, not {capacity}")
    return sorted(ordered, key=lambda entry: _java_hashmap_bucket(entry.producer_id, capacity))


#: the snapshot of no producer: version 1, the CRC-32C of a zero count, count 0 (10 bytes)
EMPTY_SNAPSHOT = format_snapshot(())
