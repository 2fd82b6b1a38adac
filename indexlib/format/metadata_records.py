"""The records of KRaft's metadata log (``__cluster_metadata``) and its snapshots, read as Kafka's
``MetadataRecordSerde`` reads them, from the schemas of :mod:`.metadata_schemas`.

A value is framed: an unsigned varint frame version (1; 0 was KRaft's 2.8 preview), then the record type and the
record version (unsigned varints), then the record, with nothing after it. :func:`read_metadata_record` gives the
record; :func:`decode_metadata_record` what ``kafka-dump-log.sh --cluster-metadata-decoder`` prints of one:
``{"type":"TOPIC_RECORD","version":0,"data":{...}}`` in Kafka's compact JSON, or ``Error at N, skipping. <why>``.

Invariants: nothing is guessed about a type or version the schemas do not define (an :class:`InvalidRecordError`
naming it); bytes left after a record are an error, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidRecordError
from .message_schema import Message, compact_json
from .metadata_schemas import METADATA_RECORD_TYPES
from .record_fields import FieldReader

#: the frame version every metadata record of KRaft (3.0 on) carries
FRAME_VERSION = 1


@dataclass(frozen=True)
class MetadataRecord:
    """One metadata record: its type (``METADATA_RECORD_TYPES``' key), version, name and fields."""

    type_id: int
    version: int
    type_name: str
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The record as Kafka's dump shows it (type name, version, the data as its JSON converter writes it)."""
        schema = METADATA_RECORD_TYPES[self.type_id][1]
        return {"type": self.type_name, "version": self.version, "data": schema.to_json(self.data, self.version)}


def _short(reader: FieldReader, what: str) -> int:
    value = reader.unsigned_varint(what)
    if value > 0x7FFF:
        raise InvalidRecordError(f"Value for {what} was too large.")
    return value


def read_framed_record(
    value: bytes | memoryview, types: dict[int, tuple[str, Message]], decode: frozenset[int] | None = None
) -> MetadataRecord:
    """The record a framed value holds (``AbstractApiMessageSerde``'s frame: the frame version, then the record's
    type among ``types`` and its version, then its fields); :class:`InvalidRecordError` with Kafka's reason when it
    does not parse (an unknown frame version, type or version, a field that does not read, garbage after it).
    ``decode``: the types whose fields are read (the others: their frame only, ``data`` empty); None: all."""
    reader = FieldReader(value)
    frame = _short(reader, "frame version")
    if frame == 0:
        raise InvalidRecordError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release "
            "of KRaft in 2.8 to newer versions are not supported."
        )
    if frame != FRAME_VERSION:
        raise InvalidRecordError(
            f"Could not deserialize metadata record due to unknown frame version {frame}(only frame version 1 is "
            "supported)"
        )
    type_id = _short(reader, "type")
    version = _short(reader, "version")
    if type_id not in types:
        raise InvalidRecordError(f"Unknown metadata id {type_id}")
    type_name, schema = types[type_id]
    if decode is not None and type_id not in decode:
        return MetadataRecord(type_id, version, type_name, {})
    try:
        data = schema.read(reader, version, exact=False)
    except InvalidRecordError as exc:
        raise InvalidRecordError(f"Failed to deserialize record with type {type_id}: {exc}") from None
    if reader.remaining:
        raise InvalidRecordError(f"Found {reader.remaining} byte(s) of garbage after {type_id}")
    return MetadataRecord(type_id, version, type_name, data)


def read_metadata_record(value: bytes | memoryview, decode: frozenset[int] | None = None) -> MetadataRecord:
    """The KRaft metadata record a record's value holds (:func:`read_framed_record` of the metadata types)."""
    return read_framed_record(value, METADATA_RECORD_TYPES, decode)


def decode_metadata_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str | None, str | None]:
    """``(key, value)`` of one metadata record as ``--cluster-metadata-decoder`` prints them: no key (metadata
    records have none), the record's JSON or why it cannot be read."""
    if value is None:
        return None, f"Error at {offset}, skipping. the record has no value"
    try:
        return None, compact_json(read_metadata_record(value).to_json())
    except InvalidRecordError as exc:
        return None, f"Error at {offset}, skipping. {exc}"
