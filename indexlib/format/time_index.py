"""Kafka's ``.timeindex`` file: sparse map from timestamp to the offset after which it is exceeded."""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from .abstract_index import INT32_MAX, AbstractIndex, first_true
from .errors import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    InvalidTimestampError,
)
from .values import TimestampOffset

#: Kafka's ``RecordBatch.NO_TIMESTAMP``.
NO_TIMESTAMP = -1


class TimeIndex(AbstractIndex[TimestampOffset]):
    """Time index: 12-byte big-endian entries ``(int64 timestamp, int32 offset - base_offset)``.

    An entry ``(t, o)`` means every record with a timestamp above ``t`` has an offset above ``o``.

    Invariants enforced by :meth:`maybe_append` (Kafka's ``TimeIndex.maybeAppend``):

    * stored timestamps are strictly increasing: an entry is written only when its timestamp exceeds the
      last entry's (``-1`` on an empty index, so negative timestamps are never written);
    * offsets never go back (:class:`InvalidOffsetError`) and timestamps never go back
      (:class:`InvalidTimestampError`) once the index has entries;
    * the last slot is reserved for the entry forced at segment roll or close: the index counts as full
      at ``max_entries - 1`` unless ``skip_full_check`` is given.

    ``sanity_check`` is Kafka's load-time rule: last timestamp not below the first, last offset not below
    the base offset, length a multiple of 12.
    """

    ENTRY_SIZE = 12
    DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
    _ENTRY_STRUCT = struct.Struct(">qi")
    _KEY_STRUCT = struct.Struct(">q")
    _KEY_FIELD_OFFSET = 0
    _OFFSET_IS_KEY = False
    _KEY_IS_RELATIVE = False
    _VALUE_STRUCT = struct.Struct(">i")
    _VALUE_FIELD_OFFSET = 8
    _VALUE_IS_RELATIVE = True

    _COLUMNS = ("timestamps", "offsets")

    def _empty_entry(self) -> TimestampOffset:
        return TimestampOffset(NO_TIMESTAMP, self._base_offset)

    def _parse_entry(self, slot: int) -> TimestampOffset:
        mm = self._mm  # read inline: this is the per-entry path
        if mm is None:
            mm = self._mapping()  # raises: only a closed index has no mapping
        timestamp, relative = self._ENTRY_STRUCT.unpack_from(mm, slot * 12)
        return TimestampOffset(timestamp, self._base_offset + relative)

    @property
    def is_full(self) -> bool:
        """Full at ``max_entries - 1``: the last slot is kept for the forced entry at roll/close."""
        return self._entries >= self._max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= ``target_timestamp``; ``(-1, base_offset)`` when none."""
        if self._fd < 0:
            self._check_open()
        slot = self._slot_for(target_timestamp, True, True)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return self._parse_entry(slot)

    def lookup_ceiling(self, target_timestamp: int) -> TimestampOffset | None:
        """Smallest entry with timestamp >= ``target_timestamp``, or ``None``."""
        self._check_open()
        slot = self._ceiling_slot(target_timestamp)
        return None if slot < 0 else self._parse_entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if ``timestamp`` exceeds the last entry's. Returns whether it
        was written. Checks in Kafka's order: full, offset order, timestamp order, relative range."""
        self._check_writable()
        if not skip_full_check and self._entries >= self._max_entries - 1:
            raise IndexFullError(f"{self._path}: attempt to append to a full time index (size = {self._entries})")
        last_timestamp, last_offset = self._last_entry
        if self._entries != 0 and offset < last_offset:
            raise InvalidOffsetError(
                f"{self._path}: attempt to append offset {offset} to slot {self._entries}, below the "
                f"last offset {last_offset}"
            )
        if self._entries != 0 and timestamp < last_timestamp:
            raise InvalidTimestampError(
                f"{self._path}: attempt to append timestamp {timestamp} to slot {self._entries}, below "
                f"the last timestamp {last_timestamp}"
            )
        if timestamp <= last_timestamp:
            return False
        relative = self._relative_offset(offset)
        if self._entries >= self._max_entries:
            raise IndexFullError(f"{self._path}: no free slot left in the file (size = {self._entries})")
        self._write_entry(self._entries, timestamp, relative)
        self._entries += 1
        self._last_entry = TimestampOffset(timestamp, offset)
        return True

    def append_many(self, timestamps: npt.ArrayLike, offsets: npt.ArrayLike) -> int:
        """:meth:`maybe_append` for each pair in order, all or nothing, with one vectorised store.

        Equal timestamps are skipped exactly as ``maybe_append`` skips them; the result and the error
        raised equal the one-by-one calls, except that nothing is written when any pair would fail.
        Returns the number of entries written.
        """
        return self._append_many(timestamps, offsets)

    def _entries_written(
        self, t: npt.NDArray[np.int64], o: npt.NDArray[np.int64], relative: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_] | None:
        """Raise the error :meth:`maybe_append` would raise first for this block; else which pairs it writes
        (a timestamp above every one before it)."""
        n = len(t)
        last_timestamp, last_offset = self._last_entry
        if (
            self._entries + n < self._max_entries
            and t[0] > last_timestamp
            and (self._entries == 0 or o[0] >= last_offset)
            and relative[0] >= 0
            and bool(np.all(t[1:] > t[:-1]))
            and bool(np.all(o[1:] >= o[:-1]))
            and relative[-1] <= INT32_MAX
        ):
            return None  # fast path, the usual case: every timestamp is new and every check passes
        # Running max of the timestamps before each element = the last written timestamp then,
        # provided nothing failed earlier (only the first failure matters).
        slots = np.arange(n)
        running_max = np.maximum.accumulate(np.concatenate(([last_timestamp], t)))[:-1]
        written = t > running_max
        entries_before = self._entries + (np.cumsum(written, dtype=np.int64) - written)
        last_written = np.maximum.accumulate(np.where(written, slots, -1))
        last_written_before = np.concatenate(([-1], last_written[:-1]))
        offset_before = np.where(last_written_before >= 0, o[np.maximum(last_written_before, 0)], last_offset)
        has_entries = entries_before > 0

        first_full = first_true(entries_before >= self._max_entries - 1, n)
        first_offset = first_true(has_entries & (o < offset_before), n)
        first_timestamp = first_true(has_entries & (t < running_max), n)
        first_range = first_true(written & ((relative < 0) | (relative > INT32_MAX)), n)
        first_error = min(first_full, first_offset, first_timestamp, first_range)
        if first_error < n:
            i = first_error
            if i == first_full:
                raise IndexFullError(
                    f"{self._path}: time index would be full (size = {int(entries_before[i])}) at element {i} of {n}"
                )
            if i == first_offset:
                raise InvalidOffsetError(
                    f"{self._path}: offset {int(o[i])} (element {i}) is below the last offset {int(offset_before[i])}"
                )
            if i == first_timestamp:
                raise InvalidTimestampError(
                    f"{self._path}: timestamp {int(t[i])} (element {i}) is below the last timestamp "
                    f"{int(running_max[i])}"
                )
            self._relative_offset(int(o[i]))  # raises IndexOffsetOverflowError naming the offset
        return None if bool(written.all()) else written

    def sanity_check(self) -> None:
        """Kafka's rule: last timestamp >= first, last offset >= base, length a multiple of 12."""
        self._check_open()
        last_timestamp, last_offset = self._last_entry
        if self._entries != 0:
            first_timestamp = self._parse_entry(0).timestamp
            if last_timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"{self._path}: corrupt time index: the last timestamp {last_timestamp} is below "
                    f"the first timestamp {first_timestamp}"
                )
            if last_offset < self._base_offset:
                raise CorruptIndexError(
                    f"{self._path}: corrupt time index: the last offset {last_offset} is below the "
                    f"base offset {self._base_offset}"
                )
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{self._path}: corrupt time index: length {self._length} is not a multiple of {self.ENTRY_SIZE}"
            )
