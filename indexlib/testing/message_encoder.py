"""Writes Kafka's generated message formats from a :class:`~indexlib.format.message_schema.Message`: the inverse of
its reader, for tests that need metadata records (and any other schema'd record) Kafka did not write for them.

``data`` gives the fields by their names; a field left out takes its default; a tagged field is written when its
value differs from its default. :func:`encode_metadata_record` frames a metadata record as Kafka's
``MetadataRecordSerde`` does (frame version 1, type, version).

Invariants: ``schema.read(FieldReader(encode_message(schema, data, v)), v)`` gives ``data`` back (with defaults).
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from ..format.message_schema import Field, Message
from ..format.metadata_schemas import METADATA_RECORD_TYPES

_INT_FORMATS = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "float64": ">d"}


def unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length(n: int, flexible: bool, fixed: str) -> bytes:
    return unsigned_varint(n + 1) if flexible else struct.pack(fixed, n)


def _value(type_name: str, f: Field, value: Any, version: int, flexible: bool) -> bytes:
    if type_name in _INT_FORMATS:
        return struct.pack(_INT_FORMATS[type_name], value)
    if type_name == "bool":
        return b"\x01" if value else b"\x00"
    if type_name == "uuid":
        return base64.urlsafe_b64decode(value + "==")
    if type_name in ("string", "bytes"):
        if value is None:
            return _length(-1, flexible, ">h" if type_name == "string" else ">i")
        data = value.encode() if type_name == "string" else bytes(value)
        return _length(len(data), flexible, ">h" if type_name == "string" else ">i") + data
    if type_name == "struct":
        if f.nullable(version):
            if value is None:
                return b"\x00" if flexible else b"\xff"
            return b"\x01" + _struct(f.struct, value, version, flexible)
        return _struct(f.struct, value, version, flexible)
    if value is None:
        return _length(-1, flexible, ">i")
    element = type_name[2:]
    items = (
        [_value(element, f, v, version, flexible) for v in value]
        if element
        else [_struct(f.struct, v, version, flexible) for v in value]
    )
    return _length(len(items), flexible, ">i") + b"".join(items)


def _struct(fields: tuple[Field, ...], data: dict[str, Any], version: int, flexible: bool) -> bytes:
    out = bytearray()
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not f.in_version(version):
            continue
        value = data.get(f.name, f.default_value())
        if f.tag is None:
            out += _value(f.type_name, f, value, version, flexible)
        elif flexible and value != f.default_value():
            tagged.append((f.tag, _value(f.type_name, f, value, version, flexible)))
    if flexible:
        out += unsigned_varint(len(tagged))
        for tag, body in sorted(tagged):
            out += unsigned_varint(tag) + unsigned_varint(len(body)) + body
    return bytes(out)


def encode_message(schema: Message, data: dict[str, Any], version: int) -> bytes:
    """``data`` as ``schema`` at ``version`` writes it."""
    return _struct(schema.fields, data, version, schema.flexible(version))


def encode_metadata_record(type_id: int, data: dict[str, Any], version: int = 0) -> bytes:
    """A metadata record's value: frame version 1, its type and version, then the record."""
    _, schema = METADATA_RECORD_TYPES[type_id]
    return (
        unsigned_varint(1) + unsigned_varint(type_id) + unsigned_varint(version) + encode_message(schema, data, version)
    )
