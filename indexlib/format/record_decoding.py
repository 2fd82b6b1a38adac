"""The records inside a batch, as Kafka's consumers read them: v2 records (``DefaultRecord``: varint length,
attributes, timestamp and offset deltas, key, value, headers) and legacy v0/v1 messages (``LegacyRecord``,
with the inner messages of a compressed wrapper), decompressing through :mod:`.compression` where needed.

kafka-index-format.md 6.1 and 6.2 give the layouts. Derived values follow Kafka's record classes: a v2 record's
offset is ``baseOffset + offsetDelta``, its timestamp ``baseTimestamp + timestampDelta`` (or the batch's
``maxTimestamp`` under LogAppendTime), its sequence ``baseSequence + offsetDelta`` wrapped at 2^31 (-1 without
one); a magic-1 inner message of a compressed wrapper has an offset relative to the wrapper's (the wrapper holds
the last inner offset) and, under LogAppendTime, the wrapper's timestamp.

Invariants: nothing outside the batch given is read; a batch that does not parse is an
:class:`~.errors.InvalidRecordError` (or :class:`~.compression.CodecUnavailableError` for a missing optional
package), never a partial list passed off as whole; inputs are never modified.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .compression import decompress
from .errors import InvalidRecordError
from .record_fields import FieldReader, java_string
from .records import ATTR_COMPRESSION_MASK, ATTR_LOG_APPEND_TIME, LOG_OVERHEAD, V2_HEADER_DTYPE, V2_HEADER_SIZE

_INT32_MAX = 2**31 - 1
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _V2_HEADER.size == V2_HEADER_DTYPE.itemsize
#: a legacy entry: offset, size, crc, magic, attributes
_LEGACY_HEAD = struct.Struct(">qiIbb")


@dataclass(frozen=True)
class Header:
    """One record header: a UTF-8 key (Kafka's ``String``) and a nullable value."""

    key: str
    value: bytes | None


@dataclass(frozen=True)
class Record:
    """One record as a consumer sees it. ``sequence`` is -1 without a producer sequence (and for legacy
    messages); ``headers`` is empty for legacy messages, which have none."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    sequence: int
    attributes: int


@dataclass(frozen=True)
class BatchFields:
    """The v2 batch header, field for field (kafka-index-format.md 6.1)."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


def batch_fields(batch: bytes | memoryview) -> BatchFields:
    """The header of the v2 batch that starts ``batch``; :class:`InvalidRecordError` when it is shorter."""
    if len(batch) < V2_HEADER_SIZE:
        raise InvalidRecordError(f"a v2 batch needs {V2_HEADER_SIZE} header bytes, got {len(batch)}")
    return BatchFields(*_V2_HEADER.unpack_from(batch, 0))


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: a producer sequence wraps from 2^31 - 1 to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """A v2 batch's ``lastSequence`` (-1 when it has no base sequence)."""
    return -1 if base_sequence == -1 else increment_sequence(base_sequence, last_offset_delta)


# ------------------------------------------------------------------------------------------------ v2
def v2_records(batch: bytes | memoryview) -> list[Record]:
    """Every record of one whole v2 batch (its bytes from the base offset on), decompressed when it must be.

    Kafka's rules: ``recordsCount`` records exactly, each record's body exactly its declared length, and
    (uncompressed) no bytes after the last record."""
    fields = batch_fields(batch)
    end = LOG_OVERHEAD + fields.length
    if end > len(batch):
        raise InvalidRecordError(f"batch of {end} bytes is cut at {len(batch)}")
    codec = fields.attributes & ATTR_COMPRESSION_MASK
    view = memoryview(batch)[V2_HEADER_SIZE:end]
    data: bytes | memoryview = decompress(codec, view) if codec else view
    if fields.records_count < 0:
        raise InvalidRecordError(f"negative record count {fields.records_count}")
    reader = FieldReader(data)
    records = [_v2_record(reader, fields) for _ in range(fields.records_count)]
    if reader.remaining:
        raise InvalidRecordError(f"{reader.remaining} bytes left after the batch's {fields.records_count} records")
    return records


def _v2_record(reader: FieldReader, b: BatchFields) -> Record:
    size = reader.varint("record length")
    if size < 0 or size > reader.remaining:
        raise InvalidRecordError(f"record length {size} runs past the batch ({reader.remaining} bytes left)")
    body = FieldReader(reader.view, reader.pos, reader.pos + size)
    reader.pos += size
    attributes = body.fixed(1, "record attributes")
    timestamp_delta = body.varlong("timestamp delta")
    offset_delta = body.varint("offset delta")
    key = body.nullable_bytes(body.varint("key length"), "key")
    value = body.nullable_bytes(body.varint("value length"), "value")
    header_count = body.varint("header count")
    if header_count < 0:
        raise InvalidRecordError(f"invalid header count {header_count}")
    headers = tuple(_header(body) for _ in range(header_count))
    if body.remaining:
        raise InvalidRecordError(f"record body of {size} bytes has {body.remaining} bytes left over")
    log_append = bool(b.attributes & ATTR_LOG_APPEND_TIME)
    return Record(
        offset=b.base_offset + offset_delta,
        timestamp=b.max_timestamp if log_append else b.base_timestamp + timestamp_delta,
        key=key,
        value=value,
        headers=headers,
        sequence=-1 if b.base_sequence == -1 else increment_sequence(b.base_sequence, offset_delta),
        attributes=attributes,
    )


def _header(body: FieldReader) -> Header:
    key_length = body.varint("header key length")
    if key_length < 0:
        raise InvalidRecordError(f"invalid header key length {key_length}")
    key = java_string(body.take(key_length, "header key"))
    return Header(key, body.nullable_bytes(body.varint("header value length"), "header value"))


# -------------------------------------------------------------------------------------------- legacy
def legacy_records(entry: bytes | memoryview) -> list[Record]:
    """The messages of one whole legacy v0/v1 log entry: itself when uncompressed, else its inner messages.

    Inner offsets of a magic-1 wrapper are relative (the wrapper's offset is the last inner one); magic 0
    inner messages carry absolute offsets. A wrapper under LogAppendTime gives its timestamp to every inner
    message."""
    outer = _legacy_message(entry, 0)
    codec = outer.attributes & ATTR_COMPRESSION_MASK
    if not codec:
        return [outer]
    if outer.value is None:
        raise InvalidRecordError("compressed legacy wrapper without a value")
    inner_data = decompress(codec, outer.value, magic=entry[16])
    inner, pos = [], 0
    while pos < len(inner_data):
        message = _legacy_message(inner_data, pos)
        inner.append(message)
        pos += LOG_OVERHEAD + struct.unpack_from(">i", inner_data, pos + 8)[0]
    if entry[16] == 1 and inner:
        shift = outer.offset - inner[-1].offset
        log_append = bool(outer.attributes & ATTR_LOG_APPEND_TIME)
        inner = [
            Record(
                m.offset + shift, outer.timestamp if log_append else m.timestamp, m.key, m.value, (), -1, m.attributes
            )
            for m in inner
        ]
    return inner


def _legacy_message(data: bytes | memoryview, pos: int) -> Record:
    """The legacy message at ``pos`` of ``data`` (offset, size, then the record)."""
    if pos + _LEGACY_HEAD.size > len(data):
        raise InvalidRecordError(f"legacy entry at {pos} is shorter than its header")
    offset, size, _crc, magic, attributes = _LEGACY_HEAD.unpack_from(data, pos)
    end = pos + LOG_OVERHEAD + size
    if size < 14 or end > len(data):
        raise InvalidRecordError(f"legacy entry at {pos} declares {size} bytes, {len(data) - pos - 12} there")
    reader = FieldReader(data, pos + _LEGACY_HEAD.size, end)
    timestamp = reader.fixed(8, "timestamp") if magic == 1 else -1
    key = reader.nullable_bytes(reader.fixed(4, "key length"), "key")
    value = reader.nullable_bytes(reader.fixed(4, "value length"), "value")
    if reader.remaining:
        raise InvalidRecordError(f"legacy entry at {pos} has {reader.remaining} bytes after its value")
    return Record(offset, timestamp, key, value, (), -1, attributes)


def batch_records(batch: bytes | memoryview) -> list[Record]:
    """The records of one whole batch of any magic (v2, or a legacy v0/v1 entry)."""
    if len(batch) < 17:
        raise InvalidRecordError(f"a batch needs at least 17 bytes, got {len(batch)}")
    return v2_records(batch) if batch[16] >= 2 and batch[16] < 128 else legacy_records(batch)
