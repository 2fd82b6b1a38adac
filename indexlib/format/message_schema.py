"""A reader of Kafka's generated message formats from a schema: what Kafka's ``*.json`` message definitions say
a record key or value holds, read for one version.

A :class:`Message` is a list of :class:`Field`\\ s, each present in a range of versions; a version at or above
``flexible_from`` is a *flexible* one (KIP-482): strings, bytes and arrays carry an unsigned-varint length plus
one (0 is null), and every struct ends with tagged fields (a count, then tag, size and data each), read
by tag where the schema knows it and skipped otherwise.

Invariants: a value is read wholly from the bytes given, or :class:`~.errors.InvalidRecordError` names the field
that does not parse; a field absent from the version read gets the schema's default; nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidRecordError
from .record_fields import FieldReader

_INT_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8}


@dataclass(frozen=True)
class Field:
    """One field: ``type_name`` is ``int8``..``int64``, ``string``, ``bytes``, ``[]int32`` or ``[]`` (an array of
    ``struct``); present in versions ``since``..``until`` (inclusive, ``None``: every later one), nullable from
    ``nullable_since``; a tagged field has ``tag`` and is read only from the tagged section."""

    name: str
    type_name: str
    since: int = 0
    until: int | None = None
    nullable_since: int | None = None
    default: Any = None
    tag: int | None = None
    struct: tuple[Field, ...] = ()

    def present(self, version: int) -> bool:
        return self.tag is None and self.since <= version and (self.until is None or version <= self.until)

    def nullable(self, version: int) -> bool:
        return self.nullable_since is not None and version >= self.nullable_since


@dataclass(frozen=True)
class Message:
    """A message definition: its name, valid versions, first flexible version (``None``: none) and fields."""

    name: str
    versions: tuple[int, int]
    flexible_from: int | None
    fields: tuple[Field, ...] = field(default=())

    def read(self, reader: FieldReader, version: int) -> dict[str, Any]:
        """The message's fields at ``version`` from ``reader`` (which must hold exactly the message)."""
        low, high = self.versions
        if not low <= version <= high:
            raise InvalidRecordError(f"{self.name} version {version} is not one of {low}..{high}")
        flexible = self.flexible_from is not None and version >= self.flexible_from
        out = _read_struct(reader, self.fields, version, flexible, self.name)
        if reader.remaining:
            raise InvalidRecordError(f"{self.name} v{version}: {reader.remaining} bytes left after its last field")
        return out


def _read_struct(
    reader: FieldReader, fields: tuple[Field, ...], version: int, flexible: bool, where: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.present(version):
            out[f.name] = _read_field(reader, f, version, flexible, f"{where}.{f.name}")
        elif f.tag is None or not flexible:
            continue
        else:
            out[f.name] = f.default
    if flexible:
        tagged = {f.tag: f for f in fields if f.tag is not None}
        for _ in range(reader.unsigned_varint(f"{where} tagged field count")):
            tag = reader.unsigned_varint(f"{where} tag")
            size = reader.unsigned_varint(f"{where} tag {tag} size")
            if tag in tagged:
                body = FieldReader(reader.view, reader.pos, reader.pos + size)
                f = tagged[tag]
                out[f.name] = _read_field(body, f, version, flexible, f"{where}.{f.name}")
            reader.take(size, f"{where} tag {tag}")
    return out


def _length(reader: FieldReader, flexible: bool, fixed_size: int, what: str) -> int:
    """A length prefix: compact (unsigned varint minus one) in flexible versions, else a fixed int; -1 is null."""
    if flexible:
        return reader.unsigned_varint(what) - 1
    return reader.fixed(fixed_size, what)


def _read_field(reader: FieldReader, f: Field, version: int, flexible: bool, what: str) -> Any:
    if f.type_name in _INT_SIZES:
        return reader.fixed(_INT_SIZES[f.type_name], what)
    if f.type_name in ("string", "bytes"):
        n = _length(reader, flexible, 2 if f.type_name == "string" else 4, f"{what} length")
        if n < 0:
            if not f.nullable(version):
                raise InvalidRecordError(f"{what}: null, but not nullable in version {version}")
            return None
        data = reader.take(n, what)
        return data.decode("utf-8", errors="replace") if f.type_name == "string" else data
    if f.type_name.startswith("[]"):
        n = _length(reader, flexible, 4, f"{what} count")
        if n < 0:
            if not f.nullable(version):
                raise InvalidRecordError(f"{what}: null array, but not nullable in version {version}")
            return None
        if f.type_name == "[]int32":
            return [reader.fixed(4, what) for _ in range(n)]
        return [_read_struct(reader, f.struct, version, flexible, what) for _ in range(n)]
    raise AssertionError(f"unknown field kind {f.type_name}")  # pragma: no cover - the schemas are ours
