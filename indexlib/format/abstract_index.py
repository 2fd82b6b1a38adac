"""The memory-mapped base shared by :class:`OffsetIndex` and :class:`TimeIndex`.

It owns everything that does not depend on the entry format: opening and preallocating the file, the
mmap, sizes, resize and trim, truncation by entry count, the zero-copy numpy view, and Kafka's warm/cold
binary search. Subclasses own only their entry layout and their append and sanity rules.

Invariants (the same as Kafka's ``AbstractIndex``):

* ``0 <= entries <= max_entries`` and ``max_entries == length // ENTRY_SIZE`` after open and resize;
  the live entries are the first ``entries`` slots of the file.
* A newly created file is preallocated (zero-filled, usually sparse) to ``max_index_size`` rounded down
  to a whole number of entries, and starts with 0 entries.
* An existing file is opened with ``entries = length // ENTRY_SIZE``: every whole slot counts, including
  a zero-filled preallocated tail, exactly as Kafka counts it. Trailing bytes that do not make a whole
  entry are ignored but still count in ``length``.
* ``writable=False`` opens the file ``O_RDONLY`` and reads a private copy of it (no mapping: a broker that
  trims or grows the file meanwhile cannot fault the reader with SIGBUS; ``changed_while_read`` tells that
  the copy may mix two versions). It never creates or changes a file, works on files the process may not
  write, and every mutating call raises :class:`ReadOnlyIndexError`.

Not thread-safe for concurrent mutation (Kafka guards its indexes with a lock; share read-only
instances or add your own lock).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator
from typing import ClassVar, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from .errors import ClosedIndexError, IndexArgumentError, IndexInUseError, IndexOffsetOverflowError
from .index_file import IndexFile, read_snapshot

#: Kafka's default ``segment.index.bytes``.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
#: The warm section is the last 8192 bytes' worth of entries (Kafka's ``warmEntries``).
WARM_SECTION_BYTES = 8192
INT32_MAX = 2**31 - 1


class _Entry(Protocol):
    @property
    def offset(self) -> int: ...


E = TypeVar("E", bound=_Entry)  # an entry type with an absolute ``offset`` (OffsetPosition, TimestampOffset)


def round_down_to_multiple(number: int, factor: int) -> int:
    """``factor * (number / factor)`` with Java's integer division (truncates toward zero)."""
    quotient = abs(number) // factor
    return factor * (quotient if number >= 0 else -quotient)


def as_int64_array(values: npt.ArrayLike, path: str, what: str) -> npt.NDArray[np.int64]:
    """``values`` as a 1-D int64 array; :class:`IndexArgumentError` naming the file for non-integers or values beyond int64."""
    array = np.asarray(values)
    if array.size and array.dtype.kind not in "iu":
        raise IndexArgumentError(f"{path}: {what} must be integers, got {array.dtype}")
    if array.dtype.kind == "u" and array.size and int(array.max()) > 2**63 - 1:
        raise IndexArgumentError(f"{path}: {what} exceed the int64 range")
    return array.astype(np.int64, copy=False).reshape(-1)


def reserve(fd: int, path: str, start: int, end: int) -> None:
    """Give the file's bytes ``[start, end)`` real blocks. A store through the mapping into a sparse hole on
    a full filesystem kills the process with SIGBUS; reserving first turns that into an OSError (ENOSPC)
    naming the file."""
    if end <= start:
        return
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror} (reserving bytes {start}..{end})", path) from None


def first_true(mask: npt.NDArray[np.bool_], default: int) -> int:
    """Index of the first True in ``mask``, or ``default`` when there is none."""
    if len(mask) == 0:
        return default
    hit = int(np.argmax(mask))
    return hit if mask[hit] else default


class AbstractIndex(IndexFile, Generic[E]):
    """Memory-mapped, fixed-size-entry Kafka index file. See the module docstring for the invariants."""

    ENTRY_SIZE: ClassVar[int]
    #: Big-endian numpy structured dtype of one entry (``itemsize == ENTRY_SIZE``).
    DTYPE: ClassVar[np.dtype[np.void]]
    #: struct of a whole entry, and of the search key / value fields with their byte offset in an entry.
    _ENTRY_STRUCT: ClassVar[struct.Struct]
    _KEY_STRUCT: ClassVar[struct.Struct]
    #: whether the entry's offset is its search key (offset index) or its value (time index)
    _OFFSET_IS_KEY: ClassVar[bool]
    _KEY_FIELD_OFFSET: ClassVar[int]
    _KEY_IS_RELATIVE: ClassVar[bool]
    _VALUE_STRUCT: ClassVar[struct.Struct]
    _VALUE_FIELD_OFFSET: ClassVar[int]
    _VALUE_IS_RELATIVE: ClassVar[bool]
    #: ``append_many``'s two columns, in the one-entry append's argument order (named in its messages)
    _COLUMNS: ClassVar[tuple[str, str]]
    #: the last entry (Kafka's ``lastEntry``): the last live slot's, or an empty index's (:meth:`_empty_entry`)
    _last_entry: E

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, writable)
        self._base_offset = int(base_offset)
        self._max_index_size = int(max_index_size)
        self._mm: mmap.mmap | memoryview | None = None  # the mapping, or a read-only index's copy
        self.changed_while_read = False  # a read-only index's file changed while its copy was read
        self._view_extent = 0  # bytes covered by to_numpy() views handed out on the current mapping
        self._reserved = 0  # bytes from 0 known to have real blocks: writes go only below it (see reserve)
        # Bound unpackers used by the search. Instance attributes so that a test can wrap them to record
        # exactly which slots a lookup reads.
        self._unpack_key = self._KEY_STRUCT.unpack_from
        self._unpack_value = self._VALUE_STRUCT.unpack_from
        self._open()
        self._load_last_entry()

    # ----------------------------------------------------------------------------------------- open
    def _open(self) -> None:
        es = self.ENTRY_SIZE
        newly_created = False
        if self._max_index_size > INT32_MAX:
            raise IndexArgumentError(f"{self._path}: max index size {self._max_index_size} exceeds 2^31-1 bytes")
        if self._writable:
            if self._max_index_size < es and not os.path.exists(self._path):
                raise IndexArgumentError(
                    f"{self._path}: invalid max index size {self._max_index_size}: below one {es}-byte entry"
                )
            try:
                fd = self._open_regular(os.O_RDWR | os.O_CREAT | os.O_EXCL)
                newly_created = True
            except FileExistsError:
                fd = self._open_regular(os.O_RDWR)
        else:
            fd = self._open_regular(os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if newly_created:
                os.ftruncate(fd, round_down_to_multiple(self._max_index_size, es))  # sparse, as Kafka's
                st = os.fstat(fd)
            self._fd = fd
            self._length = st.st_size
            self._map(self._length)
        except BaseException:
            os.close(fd)
            self._fd = -1
            if newly_created:  # nothing half-made stays behind (a full disk, say)
                with contextlib.suppress(OSError):
                    os.unlink(self._path)
            raise
        self._max_entries = self._length // es
        self._entries = 0 if newly_created else self._length // es

    def _map(self, length: int) -> None:
        if length == 0:
            self._mm = None
        elif self._writable:
            self._mm = mmap.mmap(self._fd, length, access=mmap.ACCESS_WRITE)
        else:
            snapshot = read_snapshot(self._fd)
            data = memoryview(snapshot.padded()).toreadonly()
            self.changed_while_read = snapshot.changed or snapshot.length != length
            self._length = snapshot.length  # the copy's length decides the entries
            self._mm = data if snapshot.length else None

    def _unmap(self) -> None:
        mm, self._mm = self._mm, None
        if isinstance(mm, mmap.mmap):
            # A to_numpy() view still uses the mapping: it stays mapped until that view is released.
            with contextlib.suppress(BufferError):
                mm.close()

    def _empty_entry(self) -> E:
        """The last entry of an empty index (Kafka's ``lastEntry`` with no entries)."""
        raise NotImplementedError

    def _load_last_entry(self) -> None:
        """Re-read the cached last entry: the last live slot's, or an empty index's."""
        self._last_entry = self._parse_entry(self._entries - 1) if self._entries else self._empty_entry()

    def _mapping(self) -> mmap.mmap | memoryview:
        """The mapping, to read or write a slot below ``max_entries``: an open index with a slot is always
        mapped (``_map`` maps any non-empty file), so only a closed index has none here."""
        mm = self._mm
        if mm is None:
            raise ClosedIndexError(f"{self._path}: index is closed")
        return mm

    # ------------------------------------------------------------------------------------ properties
    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def entries(self) -> int:
        """Number of live entries (every whole slot of a file opened as it was found)."""
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """Current file length in bytes, partial trailing entry included."""
        return self._length

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def last_entry(self) -> E:
        """The last entry, or an empty index's: ``(base_offset, 0)`` for an offset index, ``(-1, base_offset)``
        for a time index (Kafka's ``lastEntry``)."""
        return self._last_entry

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __len__(self) -> int:
        return self._entries

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"entries={self._entries}/{self._max_entries}"
        mode = "rw" if self._writable else "ro"
        return f"{type(self).__name__}({self._path!r}, base_offset={self._base_offset}, {state}, {mode})"

    # ------------------------------------------------------------------------------------- checks
    def _relative_offset(self, offset: int) -> int:
        relative = offset - self._base_offset
        if relative < 0 or relative > INT32_MAX:
            raise IndexOffsetOverflowError(
                f"{self._path}: offset {offset} does not fit the 32-bit relative range of "
                f"base offset {self._base_offset}"
            )
        return relative

    # ------------------------------------------------------------------------------------- entries
    def _parse_entry(self, slot: int) -> E:
        raise NotImplementedError

    def entry(self, n: int) -> E:
        """The ``n``-th live entry (0-based); :class:`IndexArgumentError` outside ``0 <= n < entries``."""
        self._check_open()
        if n < 0 or n >= self._entries:
            raise IndexArgumentError(
                f"{self._path}: attempt to fetch entry {n} of an index with {self._entries} entries"
            )
        return self._parse_entry(n)

    def __iter__(self) -> Iterator[E]:
        self._check_open()
        for slot in range(self._entries):
            yield self._parse_entry(slot)

    def to_numpy(self) -> npt.NDArray[np.void]:
        """Zero-copy, read-only, big-endian structured view of the live entries (``DTYPE``).

        The view reads the mapped file directly. It stays valid while the entries it shows exist; do
        not read it after a truncation and a trim have cut those entries from the file.
        """
        self._check_open()
        if self._entries == 0 or self._mm is None:
            return np.empty(0, dtype=self.DTYPE)
        view = np.frombuffer(self._mm, dtype=self.DTYPE, count=self._entries)
        view.flags.writeable = False
        self._view_extent = max(self._view_extent, self._entries * self.ENTRY_SIZE)
        return view

    # -------------------------------------------------------------------------------------- search
    def _slot_for(self, target: int, search_key: bool, largest_lower_bound: bool) -> int:
        """Kafka's ``indexSlotRangeFor``: warm section first, then the cold part.

        ``search_key`` selects KEY (offset / timestamp) or VALUE (position / offset);
        ``largest_lower_bound`` selects LLB (largest entry <= target, -1 if none) or Kafka's SUB (smallest
        entry >= target, -1 if none; reproduces Kafka's quirk of answering slot 1 when the target equals
        slot 0 and the cold section is searched).
        """
        n = self._entries
        if n == 0:
            return -1
        mm = self._mm
        if mm is None:
            mm = self._mapping()  # raises: only a closed index has no mapping
        es = self.ENTRY_SIZE
        if search_key:
            unpack, field, relative = self._unpack_key, self._KEY_FIELD_OFFSET, self._KEY_IS_RELATIVE
        else:
            unpack, field, relative = self._unpack_value, self._VALUE_FIELD_OFFSET, self._VALUE_IS_RELATIVE
        t = target - self._base_offset if relative else target

        first_hot = n - 1 - WARM_SECTION_BYTES // es
        if first_hot < 0:
            first_hot = 0
        if unpack(mm, first_hot * es + field)[0] < t:
            lo, hi = first_hot, n - 1
        elif unpack(mm, field)[0] > t:
            return -1 if largest_lower_bound else 0
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = unpack(mm, mid * es + field)[0]
            if found > t:
                hi = mid - 1
            elif found < t:
                lo = mid
            else:
                return mid
        if largest_lower_bound:
            return lo
        return -1 if lo == n - 1 else lo + 1

    def _ceiling_slot(self, target: int, search_key: bool = True) -> int:
        """True smallest slot whose field is >= target, or -1 (checks the exact match Kafka's SUB can miss)."""
        slot = self._slot_for(target, search_key, True)
        if slot >= 0:
            es = self.ENTRY_SIZE
            if search_key:
                unpack, field, relative = self._unpack_key, self._KEY_FIELD_OFFSET, self._KEY_IS_RELATIVE
            else:
                unpack, field, relative = self._unpack_value, self._VALUE_FIELD_OFFSET, self._VALUE_IS_RELATIVE
            t = target - self._base_offset if relative else target
            if unpack(self._mapping(), slot * es + field)[0] == t:
                return slot
        slot += 1
        return slot if slot < self._entries else -1

    # ------------------------------------------------------------------------------------ mutation
    def _reserve_through(self, end: int, ahead: int = 0) -> None:
        """Real blocks for bytes below ``end`` (plus up to ``ahead`` more, within the file) before they are
        stored through the mapping; only what is written is reserved, so a preallocated file stays sparse."""
        if end > self._reserved:
            target = min(self._length, max(end, self._reserved + ahead))
            reserve(self._fd, self._path, self._reserved, target)
            self._reserved = target

    def _write_entry(self, slot: int, a: int, b: int) -> None:
        end = (slot + 1) * self.ENTRY_SIZE
        if end > self._reserved:
            self._reserve_through(end, ahead=max(65536, self._reserved))  # amortised over single appends
        self._ENTRY_STRUCT.pack_into(self._mapping(), slot * self.ENTRY_SIZE, a, b)

    def _store_columns(self, first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]) -> None:
        """Store a block of entries after the live ones: each column is one vectorised, byte-swapping
        store straight into the mapping (no intermediate copy). Callers validate the block first."""
        count = len(first)
        self._reserve_through((self._entries + count) * self.ENTRY_SIZE)
        view = np.frombuffer(self._mapping(), dtype=self.DTYPE, count=count, offset=self._entries * self.ENTRY_SIZE)
        names = self.DTYPE.names
        assert names is not None  # DTYPE is a structured dtype of two fields
        first_name, second_name = names
        view[first_name] = first
        view[second_name] = second
        del view  # release the export so the mapping can be resized or closed
        self._entries += count

    def _entries_written(
        self, first: npt.NDArray[np.int64], second: npt.NDArray[np.int64], relative: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_] | None:
        """For :meth:`_append_many`: raise the error that appending the block entry by entry would raise first,
        else say which entries those appends would write (None: all). ``relative``: the block's offsets minus
        the base offset."""
        raise NotImplementedError

    def _append_many(self, first: npt.ArrayLike, second: npt.ArrayLike) -> int:
        """``append_many`` of both indexes: a block of entries given as two columns in the one-entry append's
        argument order, checked by :meth:`_entries_written`, then stored with one vectorised store per column.
        All or nothing; returns the number of entries written."""
        self._check_writable()
        first_name, second_name = self._COLUMNS
        a = as_int64_array(first, self._path, first_name)
        b = as_int64_array(second, self._path, second_name)
        if a.shape != b.shape:
            raise IndexArgumentError(f"{self._path}: append_many got {len(a)} {first_name} and {len(b)} {second_name}")
        if len(a) == 0:
            return 0
        relative = (a if self._OFFSET_IS_KEY else b) - self._base_offset
        written = self._entries_written(a, b, relative)
        if written is not None:
            a, b, relative = a[written], b[written], relative[written]
            if len(a) == 0:
                return 0
        if self._OFFSET_IS_KEY:
            self._store_columns(relative, b)
        else:
            self._store_columns(a, relative)
        self._load_last_entry()
        return len(a)

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries and remap.

        Returns ``False`` (and does nothing) when the length is already that. Live entries are kept, so
        the new size may not be below ``entries * ENTRY_SIZE``.
        """
        self._check_writable()
        rounded = round_down_to_multiple(int(new_size), self.ENTRY_SIZE)
        if self._length == rounded:
            return False
        if rounded < self._entries * self.ENTRY_SIZE:
            raise IndexArgumentError(
                f"{self._path}: cannot resize to {rounded} bytes, below its {self._entries} live entries"
            )
        if rounded < self._view_extent and isinstance(self._mm, mmap.mmap):
            try:
                self._mm.close()
            except BufferError:
                raise IndexInUseError(
                    f"{self._path}: cannot shrink to {rounded} bytes while arrays from to_numpy() still "
                    f"view {self._view_extent} bytes of it; release them first"
                ) from None
        self._unmap()
        self._view_extent = 0
        os.ftruncate(self._fd, rounded)  # growth is sparse: writes reserve what they store
        self._length = rounded
        self._reserved = min(self._reserved, rounded)
        self._map(rounded)
        self._max_entries = rounded // self.ENTRY_SIZE
        self._load_last_entry()
        return True

    def trim_to_valid_size(self) -> bool:
        """Cut the file to exactly ``entries * ENTRY_SIZE`` bytes (drops a preallocated tail)."""
        return self.resize(self.ENTRY_SIZE * self._entries)

    def _truncate_to_entries(self, n: int) -> None:
        self._entries = n
        self._load_last_entry()

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's ``truncateTo``)."""
        self._check_writable()
        slot = self._slot_for(offset, self._OFFSET_IS_KEY, True)
        if slot < 0:
            new_entries = 0
        elif self._parse_entry(slot).offset == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length; old bytes are cut by a later trim)."""
        self._check_writable()
        self._truncate_to_entries(0)

    def reset(self) -> None:
        """Remove every entry and re-expand the file to ``max_index_size`` (Kafka's ``reset``)."""
        self.truncate()
        self.resize(self._max_index_size)

    def sync(self) -> None:
        """Make the file durable with one ``fsync``: on Linux a shared mapping's pages are the file's page
        cache, which ``fsync`` writes, so no ``msync`` is needed first."""
        self._check_open()
        self._check_writable()
        os.fsync(self._fd)

    def flush(self) -> None:
        """Write dirty pages of the mapping to the file (msync)."""
        self._check_open()
        if isinstance(self._mm, mmap.mmap):  # a writable index's mapping
            self._mm.flush()

    def close(self) -> None:
        """Trim a writable index to its live entries, then unmap and close. Closing twice is a no-op."""
        if self._fd < 0:
            return
        try:
            if self._writable:
                self.trim_to_valid_size()
        finally:
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap and close without trimming (Kafka's ``closeHandler``)."""
        if self._fd < 0:
            return
        self._unmap()
        super().close_handler()
