"""Kafka's ``.index`` file: sparse map from offset to the byte position of a batch in the ``.log``."""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from .abstract_index import INT32_MAX, AbstractIndex, first_true
from .errors import CorruptIndexError, IndexArgumentError, IndexFullError, InvalidOffsetError
from .values import OffsetPosition


class OffsetIndex(AbstractIndex[OffsetPosition]):
    """Offset index: 8-byte big-endian entries ``(int32 offset - base_offset, int32 position)``.

    Invariants enforced on append (Kafka's ``OffsetIndex.append``):

    * entry offsets are strictly increasing; the first may equal the base offset;
    * ``0 <= offset - base_offset <= 2**31 - 1`` (else :class:`IndexOffsetOverflowError`);
    * ``0 <= position <= 2**31 - 1``;
    * at most ``max_entries`` entries (else :class:`IndexFullError`; a reopened trimmed file is full).

    ``sanity_check`` applies Kafka's load-time rule only: the last offset is not below the base offset
    and the length is a multiple of 8. Monotonicity and agreement with the ``.log`` are checked by the
    semantic verifier, not here.
    """

    ENTRY_SIZE = 8
    DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
    _ENTRY_STRUCT = struct.Struct(">ii")
    _KEY_STRUCT = struct.Struct(">i")
    _KEY_FIELD_OFFSET = 0
    _OFFSET_IS_KEY = True
    _KEY_IS_RELATIVE = True
    _VALUE_STRUCT = struct.Struct(">i")
    _VALUE_FIELD_OFFSET = 4
    _VALUE_IS_RELATIVE = False

    _COLUMNS = ("offsets", "positions")

    def _empty_entry(self) -> OffsetPosition:
        return OffsetPosition(self._base_offset, 0)

    def _parse_entry(self, slot: int) -> OffsetPosition:
        mm = self._mm  # read inline: this is the per-entry path
        if mm is None:
            mm = self._mapping()  # raises: only a closed index has no mapping
        relative, position = self._ENTRY_STRUCT.unpack_from(mm, slot * 8)
        return OffsetPosition(self._base_offset + relative, position)

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_entry.offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= ``target_offset``; ``(base_offset, 0)`` when there is none."""
        if self._fd < 0:
            self._check_open()
        slot = self._slot_for(target_offset, True, True)
        if slot < 0:
            return OffsetPosition(self._base_offset, 0)
        return self._parse_entry(slot)

    def lookup_ceiling(self, target_offset: int) -> OffsetPosition | None:
        """Smallest entry with offset >= ``target_offset``, or ``None``."""
        self._check_open()
        slot = self._ceiling_slot(target_offset)
        return None if slot < 0 else self._parse_entry(slot)

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition, fetch_size: int) -> int | None:
        """Offset of the first entry whose position is >= ``fetch_offset.position + fetch_size``
        (Kafka's smallest-upper-bound search on positions, quirk included), or ``None``.

        Unlike Java, the sum is not wrapped at 32 bits."""
        self._check_open()
        slot = self._slot_for(fetch_offset.position + fetch_size, False, False)
        return None if slot < 0 else self._parse_entry(slot).offset

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``; checks in Kafka's order: full, monotonic, relative range."""
        self._check_writable()
        if self._entries >= self._max_entries:
            raise IndexFullError(f"{self._path}: attempt to append to a full index (size = {self._entries})")
        last_offset = self._last_entry.offset
        if self._entries != 0 and offset <= last_offset:
            raise InvalidOffsetError(
                f"{self._path}: attempt to append offset {offset} to position {self._entries}, "
                f"no larger than the last offset appended ({last_offset})"
            )
        relative = self._relative_offset(offset)
        if position < 0 or position > INT32_MAX:
            raise IndexArgumentError(f"{self._path}: position {position} is outside 0..2^31-1")
        self._write_entry(self._entries, relative, position)
        self._entries += 1
        self._last_entry = OffsetPosition(offset, position)

    def append_many(self, offsets: npt.ArrayLike, positions: npt.ArrayLike) -> None:
        """Append a block of entries, all or nothing.

        Equivalent, byte for byte and in the error raised, to calling :meth:`append` for each pair in
        order, except that nothing is written when any pair would fail.
        """
        self._append_many(offsets, positions)

    def _entries_written(
        self, offsets: npt.NDArray[np.int64], positions: npt.NDArray[np.int64], relative: npt.NDArray[np.int64]
    ) -> None:
        """Raise the error :meth:`append` would raise first for this block; every entry is written otherwise."""
        n = len(offsets)
        last_offset = self._last_entry.offset
        if (
            self._entries + n <= self._max_entries
            and (self._entries == 0 or offsets[0] > last_offset)
            and relative[0] >= 0
            and relative[-1] <= INT32_MAX
            and bool(np.all(offsets[1:] > offsets[:-1]))
            and bool(np.all((positions >= 0) & (positions <= INT32_MAX)))
        ):
            return  # fast path, the usual case: every check passes
        # First failing element of each kind; an element fails on the first check in append's order.
        first_full = max(0, self._max_entries - self._entries) if self._entries + n > self._max_entries else n
        previous = np.empty(n, dtype=np.int64)
        previous[1:] = offsets[:-1]
        not_increasing = offsets <= previous
        if self._entries == 0:
            not_increasing[0] = False
        else:
            not_increasing[0] = offsets[0] <= last_offset
        bad_range = (relative < 0) | (relative > INT32_MAX) | (positions < 0) | (positions > INT32_MAX)
        first_order = first_true(not_increasing, n)
        first_range = first_true(bad_range, n)
        first_error = min(first_full, first_order, first_range)
        if first_error < n:
            if first_error == first_full:
                raise IndexFullError(
                    f"{self._path}: appending {n} entries to an index with {self._entries} of "
                    f"{self._max_entries} slots used would overflow it at element {first_full}"
                )
            offset = int(offsets[first_error])
            if first_error == first_order:
                last = last_offset if first_error == 0 else int(offsets[first_error - 1])
                raise InvalidOffsetError(
                    f"{self._path}: attempt to append offset {offset} (element {first_error}) after "
                    f"offset {last}; offsets must strictly increase"
                )
            if not 0 <= offset - self._base_offset <= INT32_MAX:
                self._relative_offset(offset)  # raises IndexOffsetOverflowError naming the offset
            raise IndexArgumentError(
                f"{self._path}: position {int(positions[first_error])} (element {first_error}) is outside 0..2^31-1"
            )

    def sanity_check(self) -> None:
        """Kafka's rule: last offset >= base offset (when non-empty) and length a multiple of 8."""
        self._check_open()
        last_offset = self._last_entry.offset
        if self._entries != 0 and last_offset < self._base_offset:
            raise CorruptIndexError(
                f"{self._path}: corrupt offset index: has {self._entries} entries but the last offset "
                f"{last_offset} is below the base offset {self._base_offset}"
            )
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{self._path}: corrupt offset index: length {self._length} is not a multiple of {self.ENTRY_SIZE}"
            )
