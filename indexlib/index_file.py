"""What every index file shares: a path opened read-only or writable through one file descriptor,
closing, renaming, deleting, and the context manager. The mmap'ed offset and time indexes
(:class:`~indexlib.abstract_index.AbstractIndex`) and the append-only transaction index build on it.

Invariants: a read-only index never creates, changes, renames or deletes its file (``ReadOnlyIndexError``);
only regular files are opened (a FIFO never blocks the open); closing twice is a no-op.
"""

from __future__ import annotations

import os
import stat
from typing import ClassVar, Self

from .errors import ReadOnlyIndexError


class IndexFile:
    #: the kind of index, in messages ("index", "transaction index")
    KIND: ClassVar[str] = "index"

    def __init__(self, path: str | os.PathLike[str], writable: bool) -> None:
        self._path = os.fspath(path)
        self._writable = bool(writable)
        self._fd = -1

    def _open_regular(self, flags: int) -> int:
        """Open ``path`` (read-only opens never block on a FIFO); ValueError unless it is a regular file."""
        if not self._writable:
            flags = os.O_RDONLY | os.O_NONBLOCK
        fd = os.open(self._path, flags | os.O_CLOEXEC, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"{self._path}: not a regular file")
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
            raise ValueError(f"{self._path}: {self.KIND} is closed")

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
