"""Deferred opening of an offset or time index (Kafka's ``LazyIndex``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .abstract_index import DEFAULT_MAX_INDEX_SIZE, AbstractIndex
from .errors import ReadOnlyIndexError
from .offset_index import OffsetIndex
from .time_index import TimeIndex

IndexT = TypeVar("IndexT", bound=AbstractIndex[Any])


class LazyIndex(Generic[IndexT]):
    """Holds an index path and opens (maps) the index only on the first :meth:`get`.

    Invariant: until ``get()`` is called nothing touches the file system, so a missing file is not
    created; ``close``, ``rename_to`` and ``delete_if_exists`` work on the bare file while unloaded.
    """

    def __init__(self, path: str | os.PathLike[str], opener: Callable[[str], IndexT], writable: bool = True) -> None:
        self._path = os.fspath(path)
        self._opener = opener
        self._writable = writable
        self._index: IndexT | None = None

    @classmethod
    def for_offset(
        cls,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> LazyIndex[OffsetIndex]:
        return LazyIndex(path, lambda p: OffsetIndex(p, base_offset, max_index_size, writable), writable)

    @classmethod
    def for_time(
        cls,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> LazyIndex[TimeIndex]:
        return LazyIndex(path, lambda p: TimeIndex(p, base_offset, max_index_size, writable), writable)

    @property
    def path(self) -> str:
        return self._index.path if self._index is not None else self._path

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self) -> IndexT:
        """The index, opened on first use."""
        if self._index is None:
            self._index = self._opener(self._path)
        return self._index

    def close(self) -> None:
        """Close (and so trim) the index if it was opened."""
        if self._index is not None:
            self._index.close()

    def _check_writable(self) -> None:
        if not self._writable:
            raise ReadOnlyIndexError(f"{self.path}: index was opened read-only")

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        self._check_writable()
        new_path = os.fspath(new_path)
        if self._index is not None:
            self._index.rename_to(new_path)
        elif os.path.lexists(self._path):
            os.replace(self._path, new_path)
        self._path = new_path

    def delete_if_exists(self) -> bool:
        self._check_writable()
        if self._index is not None:
            return self._index.delete_if_exists()
        try:
            os.unlink(self._path)
            return True
        except FileNotFoundError:
            return False

    def __repr__(self) -> str:
        state = "loaded" if self._index is not None else "not loaded"
        return f"LazyIndex({self.path!r}, {state})"
