"""What every index file shares: a path opened read-only or writable through one file descriptor,
closing, renaming, deleting, and the context manager. The mmap'ed offset and time indexes
(:class:`~indexlib.format.abstract_index.AbstractIndex`) and the append-only transaction index build on it.

Reading is never through a mapping (:func:`read_snapshot`): a broker trims or grows an active segment's index
at every roll, and a mapped page past the new end of file kills the reader with SIGBUS; a copy read with
``pread`` cannot fault, and a change during the read is reported, not crashed on.

Invariants: a read-only index never creates, changes, renames or deletes its file (``ReadOnlyIndexError``);
only regular files are opened (a FIFO never blocks the open); closing twice is a no-op.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import ClassVar, Self

from .errors import ClosedIndexError, NotARegularFileError, ReadOnlyIndexError


class IndexFile:
    #: the kind of index, in messages ("index", "transaction index")
    KIND: ClassVar[str] = "index"

    def __init__(self, path: str | os.PathLike[str], writable: bool) -> None:
        self._path = os.fspath(path)
        self._writable = bool(writable)
        self._fd = -1

    def _open_regular(self, flags: int) -> int:
        """Open ``path`` (read-only opens never block on a FIFO); :class:`NotARegularFileError` unless it is a regular file."""
        if not self._writable:
            flags = os.O_RDONLY | os.O_NONBLOCK
        fd = os.open(self._path, flags | os.O_CLOEXEC, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotARegularFileError(f"{self._path}: not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd

    @property
    def path(self) -> str:
        return self._path

    @property
    def writable(self) -> bool:
        return self._writable

    def _is_open(self) -> bool:
        return self._fd >= 0

    def _check_open(self) -> None:
        if not self._is_open():
            raise ClosedIndexError(f"{self._path}: {self.KIND} is closed")

    def _require_writable(self) -> None:
        if not self._writable:
            raise ReadOnlyIndexError(f"{self._path}: {self.KIND} was opened read-only")

    def _check_writable(self) -> None:
        self._check_open()
        self._require_writable()

    def close_handler(self) -> None:
        """Release the file without any final write (Kafka's ``closeHandler``)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        self.close_handler()

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Atomically rename the file (if it exists) and follow it; an open mapping stays valid."""
        self._require_writable()
        new_path = os.fspath(new_path)
        if os.path.lexists(self._path):
            os.replace(self._path, new_path)
        self._path = new_path

    def delete_if_exists(self) -> bool:
        """Close without any final write and delete the file. Returns whether a file was deleted."""
        self._require_writable()
        self.close_handler()
        try:
            os.unlink(self._path)
            return True
        except FileNotFoundError:
            return False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best-effort release at garbage collection
        try:
            if self._fd >= 0:
                self.close_handler()
        except Exception:
            pass


def data_end(fd: int, length: int) -> int:
    """Where a file's stored bytes end: the end of its last data extent (``SEEK_DATA``/``SEEK_HOLE``), so
    every byte from there to ``length`` is a hole that reads as zero. A preallocated index (Kafka sizes a
    new one to ``segment.index.bytes`` with ``setLength``: sparse) stores only the pages its entries were
    written to. ``length`` where the file system does not report holes."""
    end = pos = 0
    try:
        while pos < length:
            pos = os.lseek(fd, os.lseek(fd, pos, os.SEEK_DATA), os.SEEK_HOLE)
            end = pos
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data at or after pos; anything else: holes not reported
            return length
    return min(end, length)


def data_extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The byte ranges ``[a, b)`` of ``[start, end)`` that hold stored data (``SEEK_DATA``/``SEEK_HOLE``), in
    order; every byte outside them reads as zero. ``[(start, end)]`` where the file system does not report holes."""
    ranges: list[tuple[int, int]] = []
    pos = start
    try:
        while pos < end:
            first = os.lseek(fd, pos, os.SEEK_DATA)
            if first >= end:
                break
            pos = min(os.lseek(fd, first, os.SEEK_HOLE), end)
            ranges.append((first, pos))
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data at or after pos; anything else: holes not reported
            return [(start, end)] if start < end else []
    return ranges


#: (inode, size, modification time in ns, links): :func:`file_identity`
FileIdentity = tuple[int, int, int, int]


@dataclass(frozen=True)
class Snapshot:
    """A private copy of a file as one read saw it: ``data`` holds its stored bytes (the file's first
    ``len(data)`` bytes); the rest, up to ``length``, is a trailing hole (zeros, never read). ``changed``: the
    file's size or modification time moved during the read, or it ended early (a running broker wrote,
    trimmed or grew it), so the copy may mix two versions. ``identity``: the file as the read ended
    (:func:`file_identity`), to tell later whether it is still the file that was read."""

    data: bytearray
    length: int
    changed: bool
    identity: FileIdentity = (0, 0, 0, 0)

    def padded(self) -> bytearray:
        """All ``length`` bytes, the hole as zeros."""
        if len(self.data) == self.length:
            return self.data
        whole = bytearray(self.length)
        whole[: len(self.data)] = self.data
        return whole


def read_snapshot(fd: int, before: os.stat_result | None = None) -> Snapshot:
    """Read a regular file through ``fd`` into memory with ``pread``, up to its trailing hole (see
    :func:`data_end`; a file whose blocks cover its size has none to skip). Never maps the file, so a concurrent
    truncation cannot fault the reader. ``before``: the descriptor's ``fstat`` just made, if the caller has one."""
    if before is None:
        before = os.fstat(fd)
    length = before.st_size
    stored = length if before.st_blocks * 512 >= length else data_end(fd, length)
    data = bytearray(stored)
    view = memoryview(data)
    got = 0
    while got < stored:
        n = os.preadv(fd, [view[got:]], got)
        if n == 0:  # the file shrank under the read
            break
        got += n
    after = os.fstat(fd)
    changed = got < stored or (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns)
    view.release()
    del data[got:]
    return Snapshot(data, length, changed, file_identity(after))


def file_identity(st: os.stat_result) -> FileIdentity:
    """(inode, size, modification time, links): what tells a file from its own later or replaced self, or from
    itself with another name. No device number: a Spark executor and the driver may see one shared file system
    under different ones."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_nlink)
