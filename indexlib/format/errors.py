"""Exceptions raised by indexlib. Every message names the file it concerns."""

from __future__ import annotations

import os


class KafkaIndexError(Exception):
    """Base class of every error indexlib raises on purpose."""


class CorruptIndexError(KafkaIndexError, ValueError):
    """An index file breaks one of Kafka's sanity rules (Kafka: CorruptIndexException)."""


class InvalidOffsetError(KafkaIndexError, ValueError):
    """An append would break offset monotonicity (Kafka: InvalidOffsetException)."""


class IndexOffsetOverflowError(KafkaIndexError, ValueError):
    """An offset does not fit the 32-bit relative range of its segment
    (Kafka: IndexOffsetOverflowException)."""


class IndexFullError(KafkaIndexError, ValueError):
    """An append to an index that has no free slot (Kafka: IllegalArgumentException "full")."""


class InvalidTimestampError(KafkaIndexError, ValueError):
    """A time-index append whose timestamp is below the last one (Kafka: IllegalStateException)."""


class ReadOnlyIndexError(KafkaIndexError, PermissionError):
    """A mutating call on an index opened with ``writable=False``."""


class ClosedIndexError(KafkaIndexError, ValueError):
    """A call on an index file that is closed."""


class IndexArgumentError(KafkaIndexError, ValueError):
    """An index call given what it cannot take: a position outside ``0..2^31-1``, columns of different
    lengths or not integers, a max index size out of range, an entry number or a size beyond the live
    entries (Kafka: IllegalArgumentException)."""


class IndexInUseError(KafkaIndexError, BufferError):
    """A resize that would shrink a mapping that arrays from ``to_numpy()`` still view."""


class ShortWriteError(KafkaIndexError, OSError):
    """A write that stored fewer bytes than it was given (the file is put back as it was)."""


class NotARegularFileError(KafkaIndexError, ValueError):
    """A path indexlib reads or writes as a file is a directory, a FIFO, a device or a socket."""


class FileNameError(KafkaIndexError, ValueError):
    """A path whose name is not the Kafka name it must have: ``<topic>-<partition>`` for a partition dir,
    ``<20-digit base offset>.<suffix>`` for a segment file."""


class InvalidRecordError(KafkaIndexError, ValueError):
    """A record Kafka would refuse to read: a malformed varint, control record or transaction marker
    (Kafka: InvalidRecordException)."""


def describe_error(exc: BaseException) -> str:
    """The reason of an error in a few words: an OSError's strerror ("Permission denied"), else its message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def error_line(exc: BaseException, subject: str | None) -> str:
    """One line naming the file an error concerns: an OSError as '<file>: <reason>'; other errors by their
    message, prefixed with ``subject`` (the file the command was given) unless the message already names
    it or a file beside it."""
    if isinstance(exc, OSError) and exc.filename is not None:
        message = f"{os.fsdecode(exc.filename)}: {exc.strerror or exc}"
        if exc.filename2 is not None:
            message += f" ({os.fsdecode(exc.filename2)})"
    else:
        message = str(exc) or type(exc).__name__
        directory = os.path.dirname(subject) if subject else ""
        if subject and subject not in message and not (directory and f"{directory}{os.sep}" in message):
            message = f"{subject}: {message}"
    return " ".join(message.split())


class ClusterMetadataError(KafkaIndexError, OSError):
    """The cluster's metadata (KRaft's ``__cluster_metadata``) cannot be read (a file named in the message): one
    line, exit 2."""
