"""OffsetIndex: the cases of Kafka's OffsetIndexTest (kafka-index-format.md 7.1) and more."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from indexlib import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    ReadOnlyIndexError,
)

BASE = 45


@pytest.fixture
def idx(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, max_index_size=30 * 8)
    yield index
    index.close()


def random_increasing(count: int, seed: int = 7) -> list[int]:
    rnd = random.Random(seed)
    values: set[int] = set()
    while len(values) < count:
        values.add(rnd.randrange(1000))
    return sorted(values)


def test_new_file_is_preallocated_to_whole_entries(tmp_path):
    path = tmp_path / "0.index"
    with OffsetIndex(path, 0, max_index_size=245) as index:
        assert index.max_entries == 30
        assert index.entries == 0
        assert os.path.getsize(path) == 240
    assert os.path.getsize(path) == 0  # close trims to the live entries


def test_max_index_size_below_one_entry_is_rejected_and_creates_nothing(tmp_path):
    path = tmp_path / "0.index"
    with pytest.raises(ValueError, match="0.index"):
        OffsetIndex(path, 0, max_index_size=7)
    assert not path.exists()


def test_random_lookup(idx):
    assert idx.lookup(92) == OffsetPosition(BASE, 0)  # empty index
    offsets = [BASE + o for o in random_increasing(idx.max_entries)]
    positions = random_increasing(idx.max_entries, seed=8)
    for offset, position in zip(offsets, positions, strict=True):
        idx.append(offset, position)
    assert idx.is_full
    for offset, position in zip(offsets, positions, strict=True):
        assert idx.lookup(offset) == OffsetPosition(offset, position)
    for target in range(BASE, offsets[-1] + 10):
        below = [i for i, o in enumerate(offsets) if o <= target]
        expected = OffsetPosition(offsets[below[-1]], positions[below[-1]]) if below else OffsetPosition(BASE, 0)
        assert idx.lookup(target) == expected
    assert idx.lookup(offsets[0] - 1) == OffsetPosition(BASE, 0)


def test_lookup_extreme_cases(idx):
    assert idx.lookup(BASE) == OffsetPosition(BASE, 0)
    for i in range(idx.max_entries):
        idx.append(BASE + i + 1, i)
    assert idx.lookup(BASE) == OffsetPosition(BASE, 0)
    assert idx.lookup(BASE + idx.max_entries) == OffsetPosition(BASE + 30, 29)


def test_entry(idx):
    for i in range(idx.max_entries):
        idx.append(BASE + i, i)
    for i in range(idx.max_entries):
        assert idx.entry(i) == OffsetPosition(BASE + i, i)


def test_entry_overflow(idx):
    with pytest.raises(ValueError, match="entry 0 of an index with 0 entries"):
        idx.entry(0)


def test_append_too_many(idx):
    for i in range(idx.max_entries):
        idx.append(BASE + i + 1, i)
    with pytest.raises(IndexFullError):
        idx.append(BASE + 100, 100)


def test_append_out_of_order(idx):
    idx.append(51, 0)
    with pytest.raises(InvalidOffsetError):
        idx.append(50, 1)
    with pytest.raises(InvalidOffsetError):
        idx.append(51, 1)  # equal is not allowed either


def test_first_entry_may_equal_base_and_sanity_passes(idx):
    idx.append(BASE, 0)
    idx.sanity_check()  # Kafka's rule is last offset >= base, not >
    assert idx.entries == 1 and idx.lookup(BASE) == OffsetPosition(BASE, 0)
    assert idx.to_numpy().tobytes() == b"\x00" * 8  # relative offset 0, position 0


def test_relative_offset_overflow(tmp_path):
    with OffsetIndex(tmp_path / "x.index", 100, max_index_size=80) as index:
        with pytest.raises(IndexOffsetOverflowError):
            index.append(99, 0)
        with pytest.raises(IndexOffsetOverflowError):
            index.append(100 + 2**31, 0)
        index.append(100 + 2**31 - 1, 0)
        assert index.last_offset == 100 + 2**31 - 1


@pytest.mark.parametrize(
    ("start", "size", "expected"),
    [
        (45, 5, 46),
        (45, 10, 46),
        (45, 23, 47),
        (45, 22, 47),
        (46, 24, 48),
        (48, 1, None),
        (45, 200, None),
        (46, 200, None),
    ],
)
def test_fetch_upper_bound_offset(idx, start, size, expected):
    for offset, position in [(45, 0), (46, 10), (47, 23), (48, 37)]:
        idx.append(offset, position)
    assert idx.fetch_upper_bound_offset(idx.lookup(start), size) == expected


def test_fetch_upper_bound_offset_on_empty_index(idx):
    assert idx.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 10) is None


def test_reopen(tmp_path):
    path = tmp_path / "00000000000000000045.index"
    with OffsetIndex(path, BASE, max_index_size=30 * 8) as index:
        index.append(51, 0)
        index.append(52, 1)
    with OffsetIndex(path, BASE, max_index_size=-1) as reopened:
        assert reopened.lookup(51) == OffsetPosition(51, 0)
        assert reopened.lookup(52) == OffsetPosition(52, 1)
        assert reopened.last_offset == 52
        assert reopened.entries == 2
        with pytest.raises(IndexFullError):  # a trimmed file is full
            reopened.append(53, 3)


def test_reopen_counts_every_slot_of_a_zero_tail(tmp_path):
    path = tmp_path / "00000000000000000045.index"
    index = OffsetIndex(path, BASE, max_index_size=30 * 8)
    index.append(51, 0)
    index.flush()
    index.close_handler()  # no trim: the file keeps its preallocated tail, as after a crash
    with OffsetIndex(path, BASE, writable=False) as reopened:
        assert reopened.entries == 30
        assert reopened.entry(1) == OffsetPosition(BASE, 0)
        reopened.sanity_check()  # Kafka's '<' rule lets a zero tail pass


def test_truncate(tmp_path):
    with OffsetIndex(tmp_path / "0.index", 0, max_index_size=10 * 8) as index:
        for i in range(1, 10):
            index.append(i, i)
        index.truncate_to(12)
        assert index.entries == 9 and index.last_offset == 9
        index.append(10, 10)
        index.truncate_to(10)
        assert index.last_offset == 9
        index.truncate_to(9)
        assert index.last_offset == 8
        index.truncate_to(5)
        assert index.last_offset == 4
        index.truncate()
        assert index.entries == 0
        assert index.last_offset == 0


def test_closed_index_raises(idx):
    idx.append(50, 0)
    idx.close()
    with pytest.raises(ValueError, match="closed"):
        idx.lookup(50)
    idx.close()  # a second close is a no-op


def test_sanity_check_length_not_multiple(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(b"\x00" * 8 + b"\x01\x02")
    with OffsetIndex(path, 0, writable=False) as index:
        assert index.entries == 1 and index.length == 10
        with pytest.raises(CorruptIndexError, match="not a multiple of 8"):
            index.sanity_check()


def test_sanity_check_last_offset_below_base(tmp_path):
    path = tmp_path / "100.index"
    path.write_bytes(np.array([(0, 0), (-1, 10)], dtype=OffsetIndex.DTYPE).tobytes())
    with OffsetIndex(path, 100, writable=False) as index:
        assert index.last_offset == 99
        with pytest.raises(CorruptIndexError, match="below the base offset 100"):
            index.sanity_check()


def test_resize_and_reset(tmp_path):
    path = tmp_path / "0.index"
    with OffsetIndex(path, 0, max_index_size=80) as index:
        index.append(1, 0)
        index.append(2, 10)
        assert index.resize(80) is False
        assert index.resize(36) is True and index.length == 32 and index.max_entries == 4
        assert index.entries == 2 and index.lookup(2) == OffsetPosition(2, 10)
        with pytest.raises(ValueError, match="below its 2 live entries"):
            index.resize(8)
        assert index.trim_to_valid_size() is True and os.path.getsize(path) == 16
        index.reset()
        assert index.entries == 0 and index.length == 80 and index.max_entries == 10


def test_to_numpy_is_a_zero_copy_read_only_view(idx):
    idx.append_many([46, 47, 50], [0, 100, 200])
    view = idx.to_numpy()
    assert view.dtype == OffsetIndex.DTYPE
    assert view["relative_offset"].tolist() == [1, 2, 5]
    assert view["position"].tolist() == [0, 100, 200]
    assert not view.flags.writeable
    assert not view.flags.owndata  # a view on the mapping, not a copy
    idx.truncate()
    idx.append(60, 7)
    assert view["relative_offset"][0] == 15  # it sees the mapped bytes change


def test_read_only_refuses_every_mutation(tmp_path):
    path = tmp_path / "0.index"
    with OffsetIndex(path, 0, max_index_size=80) as index:
        index.append(3, 0)
    before = path.read_bytes()
    with OffsetIndex(path, 0, writable=False) as ro:
        for call in (
            lambda: ro.append(5, 1),
            lambda: ro.append_many([5], [1]),
            lambda: ro.truncate(),
            lambda: ro.truncate_to(0),
            lambda: ro.reset(),
            lambda: ro.resize(800),
            lambda: ro.trim_to_valid_size(),
            lambda: ro.delete_if_exists(),
        ):
            with pytest.raises(ReadOnlyIndexError, match="read-only"):
                call()
        assert ro.lookup(3) == OffsetPosition(3, 0)
    assert path.read_bytes() == before


def test_read_only_never_creates_a_file(tmp_path):
    path = tmp_path / "missing.index"
    with pytest.raises(FileNotFoundError):
        OffsetIndex(path, 0, writable=False)
    assert not path.exists()


def test_directory_is_rejected_with_its_name(tmp_path):
    with pytest.raises(ValueError, match="not a regular file"):
        OffsetIndex(tmp_path, 0, writable=False)


def test_force_unmap(idx):
    # Kafka's forceUnmapTest: after unmapping, lookups fail. Here they fail with a clear error naming the
    # file; close() after close_handler() is a no-op by design (Kafka's throws an NPE).
    idx.append(50, 0)
    idx.close_handler()
    with pytest.raises(ValueError, match=r"00000000000000000045.index: index is closed"):
        idx.lookup(50)
    idx.close()


def test_read_only_cannot_rename_or_delete_even_after_close(tmp_path):
    path = tmp_path / "0.index"
    OffsetIndex(path, 0, max_index_size=80).close()
    ro = OffsetIndex(path, 0, writable=False)
    ro.close()
    with pytest.raises(ReadOnlyIndexError):
        ro.rename_to(tmp_path / "moved.index")
    with pytest.raises(ReadOnlyIndexError):
        ro.delete_if_exists()
    assert path.exists()


def test_iterating_a_closed_index_raises_clearly(idx):
    idx.close()
    with pytest.raises(ValueError, match="closed"):
        list(idx)


def test_fifo_is_rejected_without_hanging(tmp_path):
    fifo = tmp_path / "0.index"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        OffsetIndex(fifo, 0, writable=False)


def test_append_many_rejects_non_integers_and_huge_values(idx):
    with pytest.raises(ValueError, match="offsets must be integers"):
        idx.append_many([46.5], [0])
    with pytest.raises(ValueError, match="int64"):
        idx.append_many(np.array([2**64 - 1], dtype=np.uint64), [0])
    assert idx.entries == 0


def test_shrinking_under_a_live_view_is_refused(tmp_path):
    with OffsetIndex(tmp_path / "0.index", 0, max_index_size=80) as index:
        index.append_many([1, 2, 3], [0, 10, 20])
        view = index.to_numpy()
        index.truncate_to(2)
        with pytest.raises(BufferError, match="release them first"):
            index.trim_to_valid_size()
        assert view["position"].tolist() == [0, 10, 20]  # still readable: the file was not cut
        del view
        assert index.trim_to_valid_size() is True and index.length == 8


def test_max_index_size_beyond_int32_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="exceeds 2\\^31-1"):
        OffsetIndex(tmp_path / "big.index", 0, max_index_size=2**40)
    assert not (tmp_path / "big.index").exists()
