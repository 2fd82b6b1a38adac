"""A reader of Kafka's generated message formats from a schema: what Kafka's ``*.json`` message definitions say
a record key or value holds, read for one version, and written back as Kafka's JSON converters write it.

A :class:`Message` is a list of :class:`Field`\\ s, each present in a range of versions; a version at or above
``flexible_from`` is a *flexible* one (KIP-482): strings, bytes and arrays carry an unsigned-varint length plus
one (0 is null), and every struct ends with tagged fields (a count, then tag, size and data each), read
by tag where the schema knows it and skipped otherwise.

:func:`to_json` gives what Kafka's generated ``*JsonConverter.write`` gives: the fields present in the version, in
schema order, a tagged field only when it differs from its default (a tagged struct's default is the struct of
its fields' defaults, whatever the definition says, so a null one is written, as ``null``); ``bytes`` as base64, a ``uuid`` as Kafka's
``Uuid.toString`` (URL-safe base64, no padding). :func:`compact_json` prints it as Jackson's ``toString`` does.

Invariants: a value is read wholly from the bytes given (or, with ``exact=False``, as Kafka's generated readers
read it: from the start, whatever follows), or :class:`~.errors.InvalidRecordError` names the field that does
not parse; a field absent from the version read gets the schema's default; nothing is guessed.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import InvalidRecordError
from .record_fields import FieldReader, java_string

_INT_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8}
_ZERO_UUID = "A" * 22


class _Natural:
    """The default of a field whose definition names none: its type's zero (0, "", empty, a struct of defaults)."""

    def __repr__(self) -> str:
        return "NATURAL"


_NATURAL = _Natural()


@dataclass(frozen=True)
class Field:
    """One field: ``type_name`` is ``int8``..``int64``, ``uint16``, ``float64``, ``bool``, ``uuid``, ``string``, ``bytes``,
    ``struct`` (one, of ``struct``'s fields), ``[]`` (an array of ``struct``) or ``[]<primitive>``; ``name`` is
    the key Kafka's JSON converters write. Present in versions ``since``..``until`` (inclusive, ``None``: every
    later one), nullable from ``nullable_since``; a tagged field has ``tag`` and is read only from the tagged
    section of a flexible version."""

    UNSET: ClassVar[_Natural] = _NATURAL

    name: str
    type_name: str
    since: int = 0
    until: int | None = None
    nullable_since: int | None = None
    default: Any = _NATURAL
    tag: int | None = None
    struct: tuple[Field, ...] = ()

    def in_version(self, version: int) -> bool:
        return self.since <= version and (self.until is None or version <= self.until)

    def present(self, version: int) -> bool:
        """Whether the field is in ``version``'s fixed part (a tagged field never is)."""
        return self.tag is None and self.in_version(version)

    def nullable(self, version: int) -> bool:
        return self.nullable_since is not None and version >= self.nullable_since

    def default_value(self) -> Any:
        """The value of the field when a version lacks it (and, for a tagged field, when it is not written)."""
        if self.default is not Field.UNSET:
            return self.default
        if self.type_name in _INT_SIZES or self.type_name == "uint16":
            return 0
        natural = {"bool": False, "float64": 0.0, "uuid": _ZERO_UUID, "string": "", "bytes": b""}
        return natural.get(self.type_name, _composite(self))


def _composite(f: Field) -> Any:
    if f.type_name == "struct":
        return {s.name: s.default_value() for s in f.struct}
    return []


@dataclass(frozen=True)
class Message:
    """A message definition: its name, valid versions, first flexible version (``None``: none) and fields."""

    name: str
    versions: tuple[int, int]
    flexible_from: int | None
    fields: tuple[Field, ...] = field(default=())

    def read(self, reader: FieldReader, version: int, exact: bool = True) -> dict[str, Any]:
        """The message's fields at ``version`` from ``reader``; with ``exact`` the reader must hold exactly the
        message (bytes left after it are an error), else what follows is ignored, as Kafka's readers do."""
        low, high = self.versions
        if not low <= version <= high:
            raise InvalidRecordError(f"{self.name} version {version} is not one of {low}..{high}")
        out = _read_struct(reader, self.fields, version, self.flexible(version), self.name)
        if exact and reader.remaining:
            raise InvalidRecordError(f"{self.name} v{version}: {reader.remaining} bytes left after its last field")
        return out

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def to_json(self, data: dict[str, Any], version: int) -> dict[str, Any]:
        """``data`` (read at ``version``) as Kafka's JSON converter writes it (see the module docstring)."""
        return _struct_json(self.fields, data, version)


_Plan = tuple[tuple[tuple[Field, str, bool], ...], dict[int, tuple[Field, str]]]
#: (id of a fields tuple, version, where) -> its plan; the schemas' tuples are module constants that live as long
_PLANS: dict[tuple[int, int, str], tuple[tuple[Field, ...], _Plan]] = {}


def _plan(fields: tuple[Field, ...], version: int, where: str) -> _Plan:
    """How ``fields`` read at ``version``: each field with its name in error messages and whether it is in the
    fixed part (else its default is taken), and the tagged fields by tag. Computed once per schema and version
    (keyed by the tuple's identity: hashing the schema itself on every record would cost more than reading it)."""
    key = (id(fields), version, where)
    cached = _PLANS.get(key)
    if cached is not None and cached[0] is fields:
        return cached[1]
    fixed = tuple((f, f"{where}.{f.name}", f.present(version)) for f in fields)
    tagged = {f.tag: (f, f"{where}.{f.name}") for f in fields if f.tag is not None and f.in_version(version)}
    _PLANS[key] = (fields, (fixed, tagged))
    return fixed, tagged


def _read_struct(
    reader: FieldReader, fields: tuple[Field, ...], version: int, flexible: bool, where: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fixed, tagged = _plan(fields, version, where)
    for f, what, present in fixed:
        out[f.name] = _read_value(reader, f.type_name, f, version, flexible, what) if present else f.default_value()
    if flexible:
        for _ in range(reader.unsigned_varint(f"{where} tagged field count")):
            tag = reader.unsigned_varint(f"{where} tag")
            size = reader.unsigned_varint(f"{where} tag {tag} size")
            if size > reader.remaining:
                raise InvalidRecordError(f"{where} tag {tag}: {size} bytes declared, {reader.remaining} left")
            if tag in tagged:
                f, what = tagged[tag]
                out[f.name] = _read_value(
                    FieldReader(reader.view, reader.pos, reader.pos + size), f.type_name, f, version, flexible, what
                )
            reader.take(size, f"{where} tag {tag}")
    return out


def _length(reader: FieldReader, flexible: bool, fixed_size: int, what: str) -> int:
    """A length prefix: compact (unsigned varint minus one) in flexible versions, else a fixed int; -1 is null."""
    if flexible:
        return reader.unsigned_varint(what) - 1
    return reader.fixed(fixed_size, what)


def _read_value(reader: FieldReader, type_name: str, f: Field, version: int, flexible: bool, what: str) -> Any:
    if type_name in _INT_SIZES:
        return reader.fixed(_INT_SIZES[type_name], what)
    if type_name == "uint16":
        return reader.fixed(2, what) & 0xFFFF
    if type_name == "bool":
        return reader.fixed(1, what) != 0
    if type_name == "float64":
        return float(struct.unpack(">d", reader.take(8, what))[0])
    if type_name == "uuid":
        return base64.urlsafe_b64encode(reader.take(16, what)).decode("ascii").rstrip("=")
    if type_name in ("string", "bytes"):
        n = _length(reader, flexible, 2 if type_name == "string" else 4, f"{what} length")
        if n < 0:
            if not f.nullable(version):
                raise InvalidRecordError(f"{what}: null, but not nullable in version {version}")
            return None
        data = reader.take(n, what)
        return java_string(data) if type_name == "string" else data
    if type_name == "struct":
        # a nullable struct's presence: an unsigned varint (0: null) in flexible versions, else a byte (<0: null)
        if f.nullable(version) and (
            reader.unsigned_varint(f"{what} presence") == 0 if flexible else reader.fixed(1, f"{what} presence") < 0
        ):
            return None
        return _read_struct(reader, f.struct, version, flexible, what)
    if type_name.startswith("[]"):
        n = _length(reader, flexible, 4, f"{what} count")
        if n < 0:
            if not f.nullable(version):
                raise InvalidRecordError(f"{what}: null array, but not nullable in version {version}")
            return None
        if n > reader.remaining:  # every element takes a byte at least: a count beyond that is garbage
            raise InvalidRecordError(f"{what}: {n} elements declared, {reader.remaining} bytes left")
        element = type_name[2:]
        if element:
            return [_read_value(reader, element, f, version, flexible, what) for _ in range(n)]
        return [_read_struct(reader, f.struct, version, flexible, what) for _ in range(n)]
    raise AssertionError(f"unknown field kind {type_name}")  # pragma: no cover - the schemas are ours


def _struct_json(fields: tuple[Field, ...], data: dict[str, Any], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.tag is not None:  # written when it differs from its default (a struct's: the struct of defaults)
            default = _composite(f) if f.type_name == "struct" else f.default_value()
            if not f.in_version(version) or data[f.name] == default:
                continue
        elif not f.in_version(version):
            continue
        out[f.name] = _value_json(f, data[f.name], version)
    return out


def _value_json(f: Field, value: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if f.type_name == "struct":
        return _struct_json(f.struct, value, version)
    if f.type_name == "[]":
        return [_struct_json(f.struct, v, version) for v in value]
    return value


#: a ``\\uXXXX`` escape (not an escaped backslash followed by ``u``) with a lower-case hex digit
_LOWER_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-f]{4})")


def compact_json(value: Any) -> str:
    """``value`` as Jackson's ``JsonNode.toString`` prints it: no spaces, non-ASCII as is, ``\\uXXXX`` escapes of
    control characters in upper-case hex."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if "\\u" in text:
        text = _LOWER_HEX_ESCAPE.sub(lambda m: m.group(1) + "\\u" + m.group(2).upper(), text)
    return text


def versioned(data: bytes, what: str) -> tuple[int, FieldReader]:
    """The leading ``int16`` of ``data`` (a key's record type, a value's version) and a reader of the rest."""
    if len(data) < 2:
        raise InvalidRecordError(f"{what} of {len(data)} bytes has no version")
    return struct.unpack_from(">h", data)[0], FieldReader(data, 2)
