"""The two topic configs that decide an index file's bytes, validated the same way for every entry point.

Kafka accepts ``index.interval.bytes`` in ``0..2^31-1`` and ``segment.index.bytes`` in ``12..2^31-1`` (one
time-index entry at least; both are Java ints). Every command line, config file, ``server.properties`` and
topic config goes through :func:`check_index_setting`, so the bounds and the messages are the same
everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..format.abstract_index import DEFAULT_MAX_INDEX_SIZE, INT32_MAX
from ..format.errors import KafkaIndexError

DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_SEGMENT_INDEX_BYTES = DEFAULT_MAX_INDEX_SIZE  # Kafka's segment.index.bytes default, 10 MiB

#: our name -> (Kafka's topic config name, smallest value Kafka accepts)
INDEX_SETTINGS = {
    "index_interval_bytes": ("index.interval.bytes", 0),
    "segment_index_bytes": ("segment.index.bytes", 12),
}


class SettingError(KafkaIndexError, ValueError):
    """A setting Kafka would refuse; the message names where it came from."""


def check_index_setting(source: str, name: str, value: object) -> int:
    """``value`` as an int within Kafka's bounds for ``name``; SettingError naming ``source`` otherwise."""
    kafka_name, minimum = INDEX_SETTINGS[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError(f"{source}: {kafka_name} must be an integer, got {value!r}")
    if not minimum <= value <= INT32_MAX:
        raise SettingError(f"{source}: {kafka_name} must be between {minimum} and {INT32_MAX}, got {value}")
    return value


@dataclass(frozen=True)
class IndexSettings:
    """A topic's ``index.interval.bytes`` and ``segment.index.bytes``, within Kafka's bounds."""

    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES

    def __post_init__(self) -> None:
        for name in INDEX_SETTINGS:
            check_index_setting("index settings", name, getattr(self, name))
