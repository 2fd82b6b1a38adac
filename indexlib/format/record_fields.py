"""A cursor over Kafka's serialized fields: the zig-zag varints of v2 records, the unsigned varints of flexible
message versions, big-endian fixed-size integers, and length-prefixed byte strings.

Invariants: a :class:`FieldReader` never reads at or past its ``end``; a field that would is an
:class:`~.errors.InvalidRecordError` naming what was being read, never a short or guessed value; nothing is
copied until a caller asks for bytes (:meth:`FieldReader.take`).
"""

from __future__ import annotations

import codecs
import struct

from .errors import InvalidRecordError

_FIXED = {1: struct.Struct(">b"), 2: struct.Struct(">h"), 4: struct.Struct(">i"), 8: struct.Struct(">q")}


def _java_replacement(exc: UnicodeError) -> tuple[str, int]:
    """Java's replacement of malformed UTF-8 (``new String(bytes, UTF_8)``): one U+FFFD per maximal ill-formed
    subpart, as Python's, except that Java reads ``ED A0..BF`` (an encoded surrogate) as the start of a three-byte
    sequence: one U+FFFD for it and its continuation byte, where Python gives one per byte."""
    assert isinstance(exc, UnicodeDecodeError)
    data, start = exc.object, exc.start
    if data[start] == 0xED and start + 1 < len(data) and 0xA0 <= data[start + 1] <= 0xBF:
        continued = start + 2 < len(data) and data[start + 2] & 0xC0 == 0x80
        return "\ufffd", start + (3 if continued else 2)
    return "\ufffd", exc.end


codecs.register_error("kafka-index-java-replace", _java_replacement)


def java_string(data: bytes) -> str:
    """``data`` decoded as Kafka's Java code decodes a UTF-8 string, malformed bytes replaced as Java replaces them
    (so a dump prints what ``kafka-dump-log.sh`` prints)."""
    return data.decode("utf-8", errors="kafka-index-java-replace")


class FieldReader:
    """Reads fields one after another from ``view[pos:end]``; ``pos`` is the next unread byte."""

    __slots__ = ("end", "pos", "view")

    def __init__(self, view: memoryview | bytes, pos: int = 0, end: int | None = None) -> None:
        self.view = memoryview(view) if not isinstance(view, memoryview) else view
        self.pos = pos
        self.end = len(self.view) if end is None else end
        if not 0 <= self.pos <= self.end <= len(self.view):
            raise InvalidRecordError(f"a field of {self.end - self.pos} bytes runs past the {len(self.view)} given")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _unsigned(self, max_bytes: int, what: str) -> int:
        result = shift = 0
        for _ in range(max_bytes):
            if self.pos >= self.end:
                raise InvalidRecordError(f"{what}: varint runs past the end")
            b = self.view[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise InvalidRecordError(f"{what}: varint longer than {max_bytes} bytes")

    def varint(self, what: str = "varint") -> int:
        """A zig-zag varint of at most 5 bytes (Kafka's ``ByteUtils.readVarint``)."""
        z = self._unsigned(5, what) & 0xFFFF_FFFF
        return (z >> 1) ^ -(z & 1)

    def varlong(self, what: str = "varlong") -> int:
        """A zig-zag varlong of at most 10 bytes (``ByteUtils.readVarlong``)."""
        z = self._unsigned(10, what) & 0xFFFF_FFFF_FFFF_FFFF
        return (z >> 1) ^ -(z & 1)

    def unsigned_varint(self, what: str = "unsigned varint") -> int:
        """An unsigned varint of at most 5 bytes (``ByteUtils.readUnsignedVarint``: lengths of flexible versions)."""
        return self._unsigned(5, what)

    def fixed(self, size: int, what: str) -> int:
        """A big-endian signed integer of 1, 2, 4 or 8 bytes."""
        if self.pos + size > self.end:
            raise InvalidRecordError(f"{what}: needs {size} bytes, {self.remaining} left")
        (value,) = _FIXED[size].unpack_from(self.view, self.pos)
        self.pos += size
        return int(value)

    def take(self, n: int, what: str) -> bytes:
        """The next ``n`` bytes (a copy)."""
        if n < 0 or self.pos + n > self.end:
            raise InvalidRecordError(f"{what}: {n} bytes declared, {self.remaining} left")
        data = bytes(self.view[self.pos : self.pos + n])
        self.pos += n
        return data

    def nullable_bytes(self, length: int, what: str) -> bytes | None:
        """``length`` bytes, or ``None`` for a negative length (Kafka's null)."""
        return None if length < 0 else self.take(length, what)
