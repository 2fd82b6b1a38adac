"""The records of Kafka's internal topics as ``kafka-dump-log.sh`` decodes them (``--offsets-decoder``,
``--transaction-log-decoder``), from the schemas of :mod:`.coordinator_schemas`:

* a key ``{"type":"<record type>","data":{...}}`` and a value ``{"version":"<value version>","data":{...}}``, or
  ``<DELETE>`` for a tombstone, in Kafka's compact JSON (:func:`~.message_schema.compact_json`), fields as
  Kafka's JSON converters write them (:meth:`~.message_schema.Message.to_json`);
* a classic group's members (``GroupMetadataValue`` of protocol type ``consumer``) with their ``subscription``
  and ``assignment`` decoded (``ConsumerProtocolSubscription`` / ``Assignment`` at the version their first two
  bytes name), kept as base64 where they do not decode, as Kafka's dump does.

Invariants: a record that does not parse is reported as Kafka's parser reports it (``Unknown record type N at
offset M, skipping.`` or ``Error at offset N, skipping. <why>``), never raised; nothing is guessed about a type
or version the schemas do not define; keys and values are read as Kafka's generated readers read them (bytes after
the last field are ignored).
"""

from __future__ import annotations

from typing import Any

from .coordinator_schemas import (
    GROUP_RECORD_TYPES,
    TRANSACTION_RECORD_TYPES,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from .errors import InvalidRecordError
from .message_schema import Message, compact_json, versioned

TOMBSTONE = "<DELETE>"
#: the protocol type of a classic group whose members embed the consumer protocol (``ConsumerProtocol.PROTOCOL_TYPE``)
CONSUMER_PROTOCOL_TYPE = "consumer"


def _embedded(message: Message, raw: bytes | None) -> dict[str, Any] | None:
    """A member's ``subscription`` or ``assignment`` bytes decoded as ``message`` (its JSON), or ``None`` when
    they do not decode (Kafka's dump then keeps them as they are)."""
    if raw is None:
        return None
    try:
        version, reader = versioned(raw, message.name)
        return message.to_json(message.read(reader, version, exact=False), version)
    except InvalidRecordError:
        return None


def _value_json(schema: Message, data: dict[str, Any], version: int) -> dict[str, Any]:
    """A value as Kafka's dump writes it: its JSON, a classic consumer group's members' protocol decoded."""
    out = schema.to_json(data, version)
    if schema.name == "GroupMetadataValue" and data["protocolType"] == CONSUMER_PROTOCOL_TYPE:
        for member, shown in zip(data["members"] or (), out["members"] or (), strict=True):
            for name, embedded in (
                ("subscription", ConsumerProtocolSubscription),
                ("assignment", ConsumerProtocolAssignment),
            ):
                decoded = _embedded(embedded, member[name])
                if decoded is not None:
                    shown[name] = decoded
    return out


def decode_key_value(
    types: dict[int, tuple[Message, Message]], key: bytes | None, value: bytes | None, offset: int
) -> tuple[str, str | None]:
    """The decoded key and value of one internal-topic record as ``kafka-dump-log.sh`` prints them (see the module
    docstring); ``types`` is :data:`~.coordinator_schemas.GROUP_RECORD_TYPES` or
    :data:`~.coordinator_schemas.TRANSACTION_RECORD_TYPES`."""
    if key is None:
        return f"Error at offset {offset}, skipping. the record has no key", None
    try:
        key_type, reader = versioned(key, "key")
        if key_type not in types:
            return f"Unknown record type {key_type} at offset {offset}, skipping.", None
        key_schema, value_schema = types[key_type]
        key_text = compact_json(
            {"type": str(key_type), "data": key_schema.to_json(key_schema.read(reader, 0, exact=False), 0)}
        )
        if value is None:
            return key_text, TOMBSTONE
        version, reader = versioned(value, "value")
        data = value_schema.read(reader, version, exact=False)
        return key_text, compact_json({"version": str(version), "data": _value_json(value_schema, data, version)})
    except InvalidRecordError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None


def decode_offsets_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """A ``__consumer_offsets`` record: ``(key, value)`` as ``--offsets-decoder`` prints them."""
    return decode_key_value(GROUP_RECORD_TYPES, key, value, offset)


def decode_transaction_log_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """A ``__transaction_state`` record: ``(key, value)`` as ``--transaction-log-decoder`` prints them."""
    return decode_key_value(TRANSACTION_RECORD_TYPES, key, value, offset)
