"""LazyIndex: nothing touches the file system before the first get()."""

from __future__ import annotations

import pytest

from indexlib import LazyIndex, OffsetIndex, OffsetPosition, ReadOnlyIndexError, TimeIndex


def test_file_not_created_until_first_get(tmp_path):
    path = tmp_path / "00000000000000000010.index"
    lazy = LazyIndex.for_offset(path, 10, max_index_size=80)
    assert not lazy.is_loaded and not path.exists()
    index = lazy.get()
    assert isinstance(index, OffsetIndex) and lazy.is_loaded and path.stat().st_size == 80
    assert lazy.get() is index
    index.append(12, 0)
    lazy.close()
    assert path.stat().st_size == 8


def test_rename_and_delete_while_unloaded(tmp_path):
    path = tmp_path / "00000000000000000010.timeindex"
    with TimeIndex(path, 10, max_index_size=120) as index:
        index.maybe_append(5, 11)
    read_only = LazyIndex.for_time(path, 10, writable=False)
    with pytest.raises(ReadOnlyIndexError):
        read_only.rename_to(tmp_path / "elsewhere")
    with pytest.raises(ReadOnlyIndexError):
        read_only.delete_if_exists()
    assert path.exists()
    lazy = LazyIndex.for_time(path, 10)
    target = tmp_path / "00000000000000000010.timeindex.swap"
    lazy.rename_to(target)
    assert not path.exists() and target.exists() and not lazy.is_loaded
    assert lazy.get().entry(0) == (5, 11)
    lazy.close()
    other = LazyIndex.for_offset(tmp_path / "gone.index", 0)
    assert other.delete_if_exists() is False and not (tmp_path / "gone.index").exists()


def test_rename_while_loaded_follows_the_file(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    lazy = LazyIndex.for_offset(path, 0, max_index_size=80)
    lazy.get().append(1, 0)
    lazy.rename_to(tmp_path / "renamed.index")
    assert lazy.path.endswith("renamed.index")
    assert lazy.get().lookup(1) == OffsetPosition(1, 0)
    assert lazy.delete_if_exists() is True and not (tmp_path / "renamed.index").exists()
