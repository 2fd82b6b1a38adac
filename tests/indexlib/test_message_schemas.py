"""Our transcriptions of Kafka's message definitions (:mod:`indexlib.format.coordinator_schemas`,
:mod:`indexlib.format.raft_schemas`, :mod:`indexlib.format.metadata_schemas`,
:mod:`indexlib.format.remote_log_metadata`) against the definitions inside Kafka 4.1.0's own jars, field for field; and
the schema reader on bytes written by hand for the types the real fixtures do not hold."""

from __future__ import annotations

import base64
import struct
import uuid

import pytest

from indexlib.format import coordinator_schemas, metadata_schemas, raft_schemas, remote_log_metadata
from indexlib.format.coordinator_records import decode_offsets_record
from indexlib.format.errors import InvalidRecordError
from indexlib.format.message_schema import Field, Message, compact_json
from indexlib.format.record_fields import FieldReader

from ..broker.kafka_broker import kafka_home_missing
from .kafka_message_json import load_definitions, message

OURS = {
    m.name: m
    for module in (coordinator_schemas, metadata_schemas, raft_schemas, remote_log_metadata)
    for m in vars(module).values()
    if isinstance(m, Message)
}


def shape(fields: tuple[Field, ...]) -> list[tuple]:
    return [
        (f.name, f.type_name, f.since, f.until, f.nullable_since, f.default_value(), f.tag, shape(f.struct))
        for f in fields
    ]


@pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")
def test_every_transcribed_schema_equals_kafkas_definition():
    definitions = load_definitions()
    assert len(OURS) >= 79
    for name, ours in OURS.items():
        theirs = message(definitions[name])
        assert (ours.versions, ours.flexible_from) == (theirs.versions, theirs.flexible_from), name
        assert shape(ours.fields) == shape(theirs.fields), name


@pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")
def test_the_record_types_are_kafkas_api_keys():
    definitions = load_definitions()
    for types in (coordinator_schemas.GROUP_RECORD_TYPES, coordinator_schemas.TRANSACTION_RECORD_TYPES):
        for record_type, (key, value) in types.items():
            assert definitions[key.name]["apiKey"] == definitions[value.name]["apiKey"] == record_type
    group_keys = {
        d["apiKey"]
        for d in definitions.values()
        if d.get("type") == "coordinator-key"
        and d["name"].startswith(("Consumer", "Share", "Streams", "Group", "Offset"))
        and not d["name"].startswith(("ShareSnapshot", "ShareUpdate"))
    } | {0}
    assert set(coordinator_schemas.GROUP_RECORD_TYPES) == group_keys


@pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")
def test_the_metadata_record_types_are_kafkas():
    definitions = load_definitions()
    metadata = {
        d["apiKey"]: name
        for name, d in definitions.items()
        if d.get("type") == "metadata" and not name.startswith(("RemoteLog", "RemotePartition"))
    }
    assert {t: m.name for t, (_, m) in metadata_schemas.METADATA_RECORD_TYPES.items()} == metadata


@pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")
def test_the_remote_log_metadata_record_types_are_kafkas():
    definitions = load_definitions()
    remote = {d["apiKey"]: name for name, d in definitions.items() if name.startswith(("RemoteLog", "RemotePartition"))}
    assert {t: m.name for t, (_, m) in remote_log_metadata.REMOTE_LOG_METADATA_TYPES.items()} == remote


def compact_string(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data  # an unsigned varint below 128


def test_a_kip_848_member_decodes_with_its_tagged_classic_metadata():
    """``ConsumerGroupMemberMetadataValue`` (flexible): nullable strings, a string array, and the tagged, nullable
    ``classicMemberMetadata`` struct (absent: null; present: its presence varint, then its fields)."""
    key = struct.pack(">h", 5) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"m"
    body = (
        b"\x00"  # instanceId null
        + compact_string("rack")
        + compact_string("client")
        + compact_string("/127.0.0.1")
        + b"\x03" + compact_string("a") + compact_string("b")  # subscribedTopicNames
        + b"\x00"  # subscribedTopicRegex null
        + struct.pack(">i", 45000)
        + compact_string("uniform")
    )  # fmt: skip
    plain = struct.pack(">h", 0) + body + b"\x00"
    k, v = decode_offsets_record(key, plain, 9)
    assert k == '{"type":"5","data":{"groupId":"g","memberId":"m"}}'
    assert v == (
        '{"version":"0","data":{"instanceId":null,"rackId":"rack","clientId":"client","clientHost":"/127.0.0.1",'
        '"subscribedTopicNames":["a","b"],"subscribedTopicRegex":null,"rebalanceTimeoutMs":45000,'
        '"serverAssignor":"uniform","classicMemberMetadata":null}}'  # a null tagged struct is written, as by Kafka
    )
    classic = b"\x01" + struct.pack(">i", 10000) + b"\x02" + compact_string("range") + b"\x04xyz" + b"\x00" + b"\x00"
    tagged = struct.pack(">h", 0) + body + b"\x01" + b"\x00" + bytes([len(classic)]) + classic
    _, v = decode_offsets_record(key, tagged, 9)
    assert v.endswith(
        '"classicMemberMetadata":{"sessionTimeoutMs":10000,"supportedProtocols":[{"name":"range","metadata":"eHl6"}]}}}'
    )


def test_uuids_print_as_kafkas_and_an_unknown_tag_is_skipped():
    topic = uuid.UUID("12345678-1234-5678-1234-567812345678")
    schema = Message("M", (0, 0), 0, (Field("topicId", "uuid"), Field("port", "uint16")))
    data = topic.bytes + struct.pack(">H", 65535) + b"\x01" + b"\x07" + b"\x02" + b"zz"
    got = schema.read(FieldReader(data), 0)
    assert schema.to_json(got, 0) == {
        "topicId": base64.urlsafe_b64encode(topic.bytes).decode().rstrip("="),
        "port": 65535,
    }
    with pytest.raises(InvalidRecordError, match="bytes left"):
        schema.read(FieldReader(data + b"!"), 0)
    assert schema.read(FieldReader(data + b"!"), 0, exact=False) == got
    with pytest.raises(InvalidRecordError, match="elements declared"):
        Message("A", (0, 0), 0, (Field("xs", "[]int32"),)).read(FieldReader(b"\xff\xff\x7f"), 0)


def test_compact_json_escapes_as_jackson():
    assert compact_json({"a": "x\x01é\\u00ab", "b": [1, None, True]}) == '{"a":"x\\u0001é\\\\u00ab","b":[1,null,true]}'
