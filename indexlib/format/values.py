"""Small immutable value types shared by the index classes.

They are ``NamedTuple``s: immutable, compared field by field with ``==``, hashable, and cheap to build
on the lookup path.
"""

from __future__ import annotations

from typing import NamedTuple


class OffsetPosition(NamedTuple):
    """An offset-index entry: ``offset`` (absolute) is found in the batch starting at byte ``position``."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time-index entry: every record with a timestamp above ``timestamp`` has an offset above ``offset``."""

    timestamp: int
    offset: int


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` record: an aborted transaction of ``producer_id`` spanning
    ``first_offset``..``last_offset`` (the ABORT marker), with the partition's last stable offset when
    the marker was written. All offsets are absolute."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
