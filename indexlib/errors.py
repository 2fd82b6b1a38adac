"""Exceptions raised by indexlib. Every message names the file it concerns."""

from __future__ import annotations


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


def describe_error(exc: BaseException) -> str:
    """The reason of an error in a few words: an OSError's strerror ("Permission denied"), else its message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
