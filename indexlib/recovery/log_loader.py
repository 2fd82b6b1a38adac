"""What Kafka 4.1.0's ``LogLoader`` does to a partition at an unclean start, as decisions on names and offsets
(no I/O): which segments it recovers, which partitions an offline ``recover`` leaves to the broker, and where the
recovered log ends.

Invariants (``LogLoader.recoverLog``, ``LogSegments.values``; see kafka-index-format.md 4.2):

* the broker recovers every segment from the one *containing* the recovery point (the last base offset <= it)
  on; a recovery point below the first base recovers them all;
* a cut at the first invalid batch ends the recovery: every later segment is deleted;
* the log end offset is the last kept segment's last offset + 1, or its base when it holds no batch;
* ``__cluster_metadata`` belongs to the Raft layer, and a partition with an interrupted compaction or split
  (``.swap``/``.cleaned`` files) is finished by the broker's own load: both are left alone.
"""

from __future__ import annotations

import bisect

from ..format.layout import CLUSTER_METADATA_TOPIC


def segments_to_recover(bases: list[int], recovery_point: int) -> list[int]:
    """The base offsets (ascending ``bases``) of the segments an unclean start recovers: ``LogSegments.values
    (recovery_point, MAX)``, from the segment that contains the recovery point."""
    first = bisect.bisect_right(bases, recovery_point) - 1
    return bases[max(first, 0) :]


def left_to_broker(topic: str, names: list[str]) -> str | None:
    """Why an offline recovery must leave this partition to the broker, or None. ``names``: its dir's listing."""
    if topic == CLUSTER_METADATA_TOPIC:
        return "the KRaft metadata log belongs to the Raft layer, which recovers it itself"
    unfinished = sorted(n for n in names if n.endswith((".swap", ".cleaned")))
    if unfinished:
        return f"an interrupted compaction or split ({unfinished[0]}): the broker's load finishes it"
    return None


def log_end_offset(base_offset: int, batch_count: int, last_offset: int) -> int:
    """The next offset after a segment's accepted batches (Kafka's ``readNextOffset``): its base when empty."""
    return last_offset + 1 if batch_count > 0 else base_offset
