"""Record-level reading of control batches: the transaction marker a control batch's first record holds.

Kafka's ``ControlRecordType`` / ``EndTransactionMarker`` parsing, as its producer state reads it: the record's
varints and length-prefixed key and value, the control type in the key, the coordinator epoch in the value.

A control batch compressed with a known codec (gzip, snappy, lz4, zstd) is read as Kafka's recovery reads it
(kafka-index-format.md 2.5: the batch's first record is the marker, whatever the codec): its records are
decompressed (:mod:`.compression`, the ``decompress`` extra for all but gzip) and the marker parsed from them.
When the codec's package is missing, or the bytes do not decompress, the batch is not read: the parsers answer
``(why,)`` and the segment is refused (``compressed_control_batch``, ``why`` naming the package to install).

Invariants: only a control batch's records are ever decompressed, here, never by the scan kernel; no byte outside
the batch given is read; a malformed record is :class:`InvalidRecordError` with Kafka's reason, never a guess;
:func:`check_markers` only ever shortens a :class:`~.records.LogScan` (to end after the batch concerned).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from . import compression
from .errors import InvalidRecordError
from .records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    F_COMPRESSED_CONTROL,
    F_UNKNOWN_CONTROL_TYPE,
    MARKER_ABORT,
    MARKER_COMMIT,
    P_INVALID_MARKER,
    V2_HEADER_SIZE,
    LogScan,
    StopReason,
    problem_from_code,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on


def _read_zigzag(view: memoryview | bytes, pos: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint of at most ``max_bytes`` bytes at ``pos``; :class:`InvalidRecordError` when malformed or past ``limit``."""
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= limit:
            raise InvalidRecordError("varint runs past the end of the record")
        b = view[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise InvalidRecordError(f"varint longer than {max_bytes} bytes")


def _read_varint(view: memoryview | bytes, pos: int, limit: int) -> tuple[int, int]:
    return _read_zigzag(view, pos, limit, 5)


def _read_varlong(view: memoryview | bytes, pos: int, limit: int) -> tuple[int, int]:
    return _read_zigzag(view, pos, limit, 10)


def _length_prefixed(view: memoryview | bytes, p: int, end: int, what: str) -> tuple[int, int, int]:
    """A control record's varint-length-prefixed key or value: (start, length, position after it)."""
    length, p = _read_varint(view, p, end)
    if length < 0:
        raise InvalidRecordError(f"control record has no {what}")
    if p + length > end:
        raise InvalidRecordError(f"control record {what} runs past the record")
    return p, length, p + length


def parse_marker(view: memoryview | bytes, pos: int, size: int, records_count: int) -> tuple[int, int]:
    """Parse the first record of an uncompressed control batch at ``pos`` as a transaction marker.

    Returns ``(control_type, coordinator_epoch)``. Raises :class:`InvalidRecordError` with Kafka's reason when the
    record or the marker is malformed (Kafka: ``InvalidRecordException``). The control type is returned
    as found; callers decide what a type other than ABORT/COMMIT means.
    """
    end = pos + size
    p = pos + V2_HEADER_SIZE
    body_len, p = _read_varint(view, p, end)
    record_start = p
    if body_len < 0 or record_start + body_len > end:
        raise InvalidRecordError(f"invalid record size {body_len}")
    record_end = record_start + body_len
    p += 1  # attributes
    _, p = _read_varlong(view, p, record_end)  # timestamp delta
    _, p = _read_varint(view, p, record_end)  # offset delta
    key, key_len, p = _length_prefixed(view, p, record_end, "key")
    value, value_len, p = _length_prefixed(view, p, record_end, "value")
    header_count, p = _read_varint(view, p, record_end)
    if header_count < 0:
        raise InvalidRecordError(f"invalid header count {header_count}")
    for _ in range(header_count):
        hk, p = _read_varint(view, p, record_end)
        if hk < 0 or p + hk > record_end:
            raise InvalidRecordError("invalid header key")
        p += hk
        hv, p = _read_varint(view, p, record_end)
        if p + max(hv, 0) > record_end:
            raise InvalidRecordError("invalid header value")
        p += max(hv, 0)
    if p != record_end:
        raise InvalidRecordError(f"record body of {body_len} bytes has {record_end - p} bytes left over")
    if records_count == 1 and record_end != end:
        raise InvalidRecordError("incorrect declared batch size, records still remaining in the batch")
    if key_len < 4:
        raise InvalidRecordError(f"control record key of {key_len} bytes is shorter than 4")
    key_version, control_type = struct.unpack_from(">hh", view, key)
    if key_version < 0:
        raise InvalidRecordError(f"invalid control record key version {key_version}")
    if control_type not in (MARKER_ABORT, MARKER_COMMIT):
        return control_type, -1
    if value_len < 6:
        raise InvalidRecordError(f"end transaction marker value of {value_len} bytes is shorter than 6")
    value_version, coordinator_epoch = struct.unpack_from(">hi", view, value)
    if value_version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {value_version}")
    return control_type, coordinator_epoch


#: a parser's answer for a compressed control batch it cannot read: ``(why,)``, the refusal's reason
Unreadable = tuple[str]


def readable_batch(batch: Buffer) -> memoryview | Unreadable:
    """A whole v2 control batch as :func:`parse_marker` reads it: the batch itself when uncompressed; for a
    known codec, its 61-byte header followed by its decompressed records (the marker's offsets and lengths
    then read as in an uncompressed batch, and "records still remaining" is bytes left in the decompressed
    stream, as Kafka's stream iterator checks it); ``(why,)`` when it cannot be decompressed here."""
    view = memoryview(batch)
    codec = view[22] & ATTR_COMPRESSION_MASK if len(view) >= V2_HEADER_SIZE else 0
    if codec == 0:
        return view
    try:
        records = compression.decompress(codec, view[V2_HEADER_SIZE:])
    except compression.CodecUnavailableError as exc:
        return (f"its marker cannot be read here: {exc}",)
    except InvalidRecordError as exc:
        return (f"{exc}; Kafka's recovery fails on a control batch it cannot decompress",)
    return memoryview(bytes(view[:V2_HEADER_SIZE]) + records)


def marker_type_or_error(batch: Buffer, records_count: int) -> int | str | Unreadable:
    """The control type of the marker a whole control batch (its bytes from the first) holds, or why it
    is malformed (:func:`parse_marker`'s reason), or ``(why,)`` when it is compressed and cannot be read."""
    view = readable_batch(batch)
    if isinstance(view, tuple):
        return view
    try:
        return parse_marker(view, 0, len(view), records_count)[0]
    except ValueError as exc:
        return str(exc)


def _wrap64(value: int) -> int:
    """``value`` as Java's ``long`` arithmetic leaves it (two's complement, 64 bits)."""
    return ((value + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def marker_record_timestamp(view: memoryview | bytes, pos: int) -> int:
    """The timestamp of the first record of the well-formed v2 batch at ``pos`` (Kafka's ``Record.timestamp()``):
    the batch's max timestamp under LOG_APPEND_TIME (attribute bit 0x08), else base timestamp + the record's
    timestamp delta, wrapped as a Java ``long``. Only for a batch :func:`parse_marker` accepted (its varints are
    known to be well-formed)."""
    attributes = view[pos + 22]  # Kafka reads the flags from the low byte of the int16 attributes
    if attributes & ATTR_LOG_APPEND_TIME:
        return int(struct.unpack_from(">q", view, pos + 35)[0])
    end = len(view)
    p = pos + V2_HEADER_SIZE
    _, p = _read_varint(view, p, end)  # record length
    p += 1  # record attributes
    raw = shift = 0
    for _ in range(10):  # the varlong, as ByteUtils.readVarlong: 64 bits kept, then zig-zag
        b = view[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    raw &= (1 << 64) - 1
    delta = _wrap64((raw >> 1) ^ -(raw & 1))
    return _wrap64(int(struct.unpack_from(">q", view, pos + 27)[0]) + delta)


def marker_fields_or_error(batch: Buffer, records_count: int) -> tuple[int, int, int] | str | Unreadable:
    """What producer state reads from a whole control batch (its bytes from the first): ``(control_type,
    coordinator_epoch, record_timestamp)`` (coordinator epoch -1 for a type other than ABORT/COMMIT), or why the
    marker is malformed (:func:`parse_marker`'s reason), or ``(why,)`` when the batch is compressed and cannot be
    read (:func:`readable_batch`). The kernel's marker parser, beside :func:`marker_type_or_error` (which gives
    the type alone)."""
    view = readable_batch(batch)
    if isinstance(view, tuple):
        return view
    try:
        control_type, coordinator_epoch = parse_marker(view, 0, len(view), records_count)
    except ValueError as exc:
        return str(exc)
    return control_type, coordinator_epoch, marker_record_timestamp(view, 0)


def read_marker_fields(view: memoryview, scan: LogScan) -> None:
    """Fill ``scan.marker_coordinator_epochs`` and ``scan.marker_timestamps`` (one item per batch, -1 where the
    batch is not an ABORT/COMMIT marker :func:`check_markers` recorded). Call it after :func:`check_markers`."""
    n = scan.batch_count
    epochs = np.full(n, -1, dtype=np.int32)
    stamps = np.full(n, -1, dtype=np.int64)
    control = (scan.attributes & ATTR_CONTROL) != 0
    markers = control & ((scan.marker_types == MARKER_ABORT) | (scan.marker_types == MARKER_COMMIT))
    for i in np.flatnonzero(markers).tolist():
        pos, size = int(scan.positions[i]), int(scan.sizes[i])
        fields = marker_fields_or_error(view[pos : pos + size], int(scan.records_counts[i]))
        assert isinstance(fields, tuple) and len(fields) == 3, fields  # check_markers accepted this very marker
        epochs[i], stamps[i] = fields[1], fields[2]
    scan.marker_coordinator_epochs = epochs
    scan.marker_timestamps = stamps


def check_markers(view: memoryview, scan: LogScan) -> None:
    """Parse the markers of control batches that carry a producer id (what Kafka's producer state reads),
    recording their type, and cut the scan after a malformed one."""
    is_marker = ((scan.attributes & ATTR_CONTROL) != 0) & (scan.magic >= 2) & (scan.producer_ids > -1)
    is_marker &= scan.records_counts != 0
    for i in np.flatnonzero(is_marker).tolist():
        pos, size = int(scan.positions[i]), int(scan.sizes[i])
        codec = int(scan.attributes[i]) & ATTR_COMPRESSION_MASK
        base = int(scan.base_offsets[i])
        if codec not in compression.CODECS and codec != 0:  # an unknown codec: never read
            scan.fatal = problem_from_code(F_COMPRESSED_CONTROL, pos, i, base, codec, 0, None)
            _cut(scan, i)
            return
        control_type = marker_type_or_error(view[pos : pos + size], int(scan.records_counts[i]))
        if isinstance(control_type, tuple):  # compressed, and it cannot be read here: refused, as Kafka's fails
            scan.fatal = problem_from_code(F_COMPRESSED_CONTROL, pos, i, base, codec, 0, control_type[0])
            _cut(scan, i)
            return
        if isinstance(control_type, str):
            scan.problem = problem_from_code(P_INVALID_MARKER, pos, i, base, 0, 0, control_type)
            scan.stop = StopReason.INVALID_RECORD
            _cut(scan, i + 1)
            return
        scan.marker_types[i] = control_type
        if control_type not in (MARKER_ABORT, MARKER_COMMIT):
            scan.fatal = problem_from_code(F_UNKNOWN_CONTROL_TYPE, pos, i, base, control_type, 0, None)
            _cut(scan, i + 1)
            return


def _cut(scan: LogScan, n: int) -> None:
    """Keep only the first ``n`` batches."""
    for name in (
        "positions",
        "sizes",
        "base_offsets",
        "last_offsets",
        "max_timestamps",
        "magic",
        "attributes",
        "producer_ids",
        "producer_epochs",
        "records_counts",
        "marker_types",
    ):
        setattr(scan, name, getattr(scan, name)[:n])
