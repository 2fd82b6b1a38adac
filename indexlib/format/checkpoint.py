"""Kafka's offset checkpoint files (``log-start-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint``), as text: a version line (0), a count line, then ``<topic> <partition>
<offset>`` per partition."""

from __future__ import annotations

from .errors import KafkaIndexError


class CheckpointError(KafkaIndexError, ValueError):
    """A checkpoint file Kafka would refuse to read."""


def parse_offset_checkpoint(text: str, path: str) -> dict[tuple[str, int], int]:
    """Every ``(topic, partition) -> offset`` of a checkpoint's text. Raises :class:`CheckpointError` naming
    ``path`` when it is malformed."""
    lines = text.splitlines()
    offsets: dict[tuple[str, int], int] = {}
    try:
        version, count = int(lines[0]), int(lines[1])
        if version != 0:
            raise CheckpointError(f"version {version}")
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            offsets[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError) as exc:
        raise CheckpointError(f"{path}: malformed checkpoint file ({exc})") from None
    return offsets
