"""The records of Kafka's internal topics, decoded from Kafka's published message schemas
(``group-coordinator/src/main/resources/common/message/*.json`` and
``transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json``):

* ``__consumer_offsets``: a key's leading ``int16`` is its record type (0, 1 an offset commit, 2 a classic
  group's metadata, 3..15 the new consumer and share groups' records), and a value's its version;
* ``__transaction_state``: key version 0 (the transactional id), value versions 0..1.

The result is what ``kafka-dump-log.sh --offsets-decoder`` / ``--transaction-log-decoder`` print: a key
``{"type": "<key version>", "data": {...}}`` and a value ``{"version": "<value version>", "data": {...}}``, or
``<DELETE>`` for a tombstone; field names are the schema's, first letter in lower case, as Kafka's JSON
converters write them; ``bytes`` fields are base64. Values of the new groups' records (key types 3..15) are
not decoded: their key is, and the value is reported by size.

Invariants: a record that does not parse is reported as Kafka's parser reports it (``Error at offset N,
skipping. <why>``), never raised; nothing is guessed about a version the schemas do not define.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from .errors import InvalidRecordError
from .message_schema import Field, Message
from .record_fields import FieldReader

_S = "string"

OFFSET_COMMIT_KEY = Message(
    "OffsetCommitKey", (0, 1), None, (Field("group", _S), Field("topic", _S), Field("partition", "int32"))
)
GROUP_METADATA_KEY = Message("GroupMetadataKey", (2, 2), None, (Field("group", _S),))
OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    (0, 4),
    4,
    (
        Field("offset", "int64"),
        Field("leaderEpoch", "int32", since=3, default=-1),
        Field("metadata", _S),
        Field("commitTimestamp", "int64"),
        Field("expireTimestamp", "int64", since=1, until=1, default=-1),
    ),
)
_MEMBER_METADATA = (
    Field("memberId", _S),
    Field("groupInstanceId", _S, since=3, nullable_since=3),
    Field("clientId", _S),
    Field("clientHost", _S),
    Field("rebalanceTimeout", "int32", since=1, default=-1),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
)
GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    (0, 4),
    4,
    (
        Field("protocolType", _S),
        Field("generation", "int32"),
        Field("protocol", _S, nullable_since=0),
        Field("leader", _S, nullable_since=0),
        Field("currentStateTimestamp", "int64", since=2, default=-1),
        Field("members", "[]", struct=_MEMBER_METADATA),
    ),
)
TRANSACTION_LOG_KEY = Message("TransactionLogKey", (0, 0), None, (Field("transactionalId", _S),))
TRANSACTION_LOG_VALUE = Message(
    "TransactionLogValue",
    (0, 1),
    1,
    (
        Field("producerId", "int64"),
        Field("previousProducerId", "int64", tag=0, default=-1),
        Field("nextProducerId", "int64", tag=1, default=-1),
        Field("producerEpoch", "int16"),
        Field("transactionTimeoutMs", "int32"),
        Field("transactionStatus", "int8"),
        Field(
            "transactionPartitions",
            "[]",
            nullable_since=0,
            struct=(Field("topic", _S), Field("partitionIds", "[]int32")),
        ),
        Field("transactionLastUpdateTimestampMs", "int64"),
        Field("transactionStartTimestampMs", "int64"),
        Field("clientTransactionVersion", "int16", tag=2, default=0),
    ),
)


def _group_key(name: str, version: int, member: bool) -> Message:
    fields = (Field("groupId", _S), Field("memberId", _S)) if member else (Field("groupId", _S),)
    return Message(name, (version, version), None, fields)


#: __consumer_offsets key type -> (key schema, value schema or None when this module does not decode the value)
OFFSETS_RECORD_TYPES: dict[int, tuple[Message, Message | None]] = {
    0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    **{
        version: (_group_key(name, version, member), None)
        for version, name, member in (
            (3, "ConsumerGroupMetadataKey", False),
            (4, "ConsumerGroupPartitionMetadataKey", False),
            (5, "ConsumerGroupMemberMetadataKey", True),
            (6, "ConsumerGroupTargetAssignmentMetadataKey", False),
            (7, "ConsumerGroupTargetAssignmentMemberKey", True),
            (8, "ConsumerGroupCurrentMemberAssignmentKey", True),
            (9, "ShareGroupPartitionMetadataKey", False),
            (10, "ShareGroupMemberMetadataKey", True),
            (11, "ShareGroupMetadataKey", False),
            (12, "ShareGroupTargetAssignmentMetadataKey", False),
            (13, "ShareGroupTargetAssignmentMemberKey", True),
            (14, "ShareGroupCurrentMemberAssignmentKey", True),
            (15, "ShareGroupStatePartitionMetadataKey", False),
        )
    },
}
#: __transaction_state key version -> (key schema, value schema)
TRANSACTION_RECORD_TYPES: dict[int, tuple[Message, Message | None]] = {0: (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}
TOMBSTONE = "<DELETE>"


def _versioned(data: bytes, what: str) -> tuple[int, FieldReader]:
    if len(data) < 2:
        raise InvalidRecordError(f"{what} of {len(data)} bytes has no version")
    return struct.unpack_from(">h", data)[0], FieldReader(data, 2)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def decode_key_value(
    types: dict[int, tuple[Message, Message | None]], key: bytes | None, value: bytes | None, offset: int
) -> tuple[str, str | None]:
    """The decoded key and value of one internal-topic record as ``kafka-dump-log.sh`` prints them (see the module
    docstring); ``types`` is :data:`OFFSETS_RECORD_TYPES` or :data:`TRANSACTION_RECORD_TYPES`."""
    if key is None:
        return f"Error at offset {offset}, skipping. the record has no key", None
    try:
        key_type, reader = _versioned(key, "key")
        if key_type not in types:
            return f"Unknown record type {key_type} at offset {offset}, skipping.", None
        key_schema, value_schema = types[key_type]
        key_text = json.dumps({"type": str(key_type), "data": key_schema.read(reader, key_type)})
        if value is None:
            return key_text, TOMBSTONE
        value_version, reader = _versioned(value, "value")
        if value_schema is None:
            return key_text, json.dumps({"version": str(value_version), "bytes": len(value), "data": None})
        data = _jsonable(value_schema.read(reader, value_version))
        return key_text, json.dumps({"version": str(value_version), "data": data})
    except InvalidRecordError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None


def decode_offsets_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """A ``__consumer_offsets`` record: ``(key, value)`` as ``--offsets-decoder`` prints them."""
    return decode_key_value(OFFSETS_RECORD_TYPES, key, value, offset)


def decode_transaction_log_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """A ``__transaction_state`` record: ``(key, value)`` as ``--transaction-log-decoder`` prints them."""
    return decode_key_value(TRANSACTION_RECORD_TYPES, key, value, offset)
