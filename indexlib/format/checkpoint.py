"""Kafka's text checkpoint files, as text: ``log-start-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint`` (``<topic> <partition> <offset>`` lines), and the
shared shape of ``leader-epoch-checkpoint`` (see :mod:`.leader_epoch_checkpoint`).

The shape is Kafka's ``CheckpointFile`` (server-common ``CheckpointFile.java``; the same in 4.1.0): a version line,
a count line, then one entry per line, each line ended by ``\\n`` (``BufferedWriter.newLine`` on Linux). Reading
follows ``CheckpointReadBuffer.read``:

- no first line (a 0-byte file) or no count line: no entries (Kafka reads that as empty: every partition at 0);
- the version line must be an int equal to 0, the count line an int (``Integer.parseInt``: optional sign, decimal
  digits, 32-bit; no blank, no ``_``);
- *every* line after the count is an entry (an empty line is a malformed one), and their number must equal the count.

An entry line is split on runs of ASCII whitespace (``\\s+``), trailing empty fields dropped, as Java's
``String.split`` does. Lines end at ``\\n``, ``\\r`` or ``\\r\\n`` (``BufferedReader.readLine``).
Pure computation on text: this module never opens a file (storage does)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from .errors import KafkaIndexError

#: the only version of every text checkpoint Kafka writes and reads
CHECKPOINT_VERSION = 0

_T = TypeVar("_T")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")  # java.util.regex \s without UNICODE_CHARACTER_CLASS
_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # Integer/Long.parseInt: Character.digit accepts every Nd digit, like \d


class CheckpointError(KafkaIndexError, ValueError):
    """A checkpoint file Kafka would refuse to read."""


def java_lines(text: str) -> list[str]:
    """``text`` cut into lines as ``BufferedReader.readLine`` cuts it: at ``\\n``, ``\\r`` or ``\\r\\n``; a final
    terminator does not start an empty line."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def java_split(line: str) -> list[str]:
    """``line.split("\\\\s+")`` as Java computes it: a leading separator gives a leading empty field, trailing empty
    fields are dropped."""
    fields = _JAVA_WHITESPACE.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def java_parse_int(text: str, bits: int) -> int:
    """``Integer.parseInt`` (``bits`` 32) or ``Long.parseLong`` (64). Raises :class:`CheckpointError` (a
    ValueError) where Java throws ``NumberFormatException``."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise CheckpointError(f"not an integer: {text!r}")
    value = int(text)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise CheckpointError(f"out of the {bits}-bit range: {text!r}")
    return value


def parse_checkpoint(text: str, path: str, parse_entry: Callable[[list[str]], _T | None]) -> list[_T]:
    """The entries of a checkpoint's text, in file order, by Kafka's ``CheckpointReadBuffer`` rules (module doc).
    ``parse_entry`` gets one line's fields and returns None for a malformed line (Kafka's ``Optional.empty``) or
    raises ValueError (Kafka's ``NumberFormatException`` inside the formatter). Raises :class:`CheckpointError`
    naming ``path`` for anything Kafka refuses."""
    lines = java_lines(text)
    if not lines:
        return []
    try:
        version = java_parse_int(lines[0], 32)
    except ValueError:
        raise CheckpointError(f"{path}: malformed line in checkpoint file: {lines[0]!r}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unrecognised checkpoint version {version}, expected {CHECKPOINT_VERSION}")
    if len(lines) == 1:
        return []
    try:
        count = java_parse_int(lines[1], 32)
    except ValueError:
        raise CheckpointError(f"{path}: malformed line in checkpoint file: {lines[1]!r}") from None
    if count < 0:  # new ArrayList<>(count) throws IllegalArgumentException
        raise CheckpointError(f"{path}: negative entry count {count} in checkpoint file")
    entries: list[_T] = []
    for line in lines[2:]:
        try:
            entry = parse_entry(java_split(line))
        except ValueError as exc:
            raise CheckpointError(f"{path}: malformed line in checkpoint file: {line!r} ({exc})") from None
        if entry is None:
            raise CheckpointError(f"{path}: malformed line in checkpoint file: {line!r}")
        entries.append(entry)
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries in checkpoint file, found {len(entries)}")
    return entries


def format_checkpoint(lines: Iterable[str]) -> str:
    """A checkpoint's text as ``CheckpointWriteBuffer.write`` produces it: version, count, one entry per line,
    each ended by ``\\n``."""
    body = list(lines)
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(body)), *body])


def _offset_entry(fields: list[str]) -> tuple[tuple[str, int], int] | None:
    if len(fields) != 3:
        return None
    return (fields[0], java_parse_int(fields[1], 32)), java_parse_int(fields[2], 64)


def parse_offset_checkpoint(text: str, path: str) -> dict[tuple[str, int], int]:
    """Every ``(topic, partition) -> offset`` of an offset checkpoint's text, in file order (a repeated partition
    keeps its first position and its last offset, as Kafka's ``HashMap.put`` keeps the last). A 0-byte file, or one
    with a version line only, has no entries. Raises :class:`CheckpointError` naming ``path`` when Kafka would
    refuse it (then the broker resets every recovery point to 0, or every log start to its first segment)."""
    return dict(parse_checkpoint(text, path, _offset_entry))


def format_offset_checkpoint(
    offsets: Mapping[tuple[str, int], int] | Iterable[tuple[tuple[str, int], int]],
) -> str:
    """The text Kafka writes for these offsets, one ``<topic> <partition> <offset>`` line each, in the order given.
    Kafka's own order is the iteration order of a Scala ``mutable.AnyRefMap`` of the log dir's partitions (hash
    order, not sorted; no reader depends on it), so give the entries in a file's order to reproduce that file:
    ``format_offset_checkpoint(parse_offset_checkpoint(t, p)) == t`` for every file Kafka wrote but a 0-byte one.
    Raises :class:`CheckpointError` for a topic Kafka could not read back (empty, or holding whitespace)."""
    items = offsets.items() if isinstance(offsets, Mapping) else offsets
    lines = []
    for (topic, partition), offset in items:
        if not topic or _JAVA_WHITESPACE.search(topic):
            raise CheckpointError(f"topic {topic!r} cannot be written to a checkpoint line")
        lines.append(f"{topic} {partition} {offset}")
    return format_checkpoint(lines)
