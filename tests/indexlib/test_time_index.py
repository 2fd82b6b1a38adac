"""TimeIndex: the cases of Kafka's TimeIndexTest (kafka-index-format.md 7.2) and more."""

from __future__ import annotations

import os

import numpy as np
import pytest

from indexlib import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidTimestampError,
    TimeIndex,
    TimestampOffset,
)

BASE = 45
MAX_ENTRIES = 30


@pytest.fixture
def idx(tmp_path):
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, max_index_size=MAX_ENTRIES * 12)
    yield index
    index.close()


def fill(index: TimeIndex, count: int) -> None:
    """Entries (i*10, 45+i*10) for i = 1..count, as in Kafka's TimeIndexTest."""
    for i in range(1, count + 1):
        index.maybe_append(i * 10, i * 10 + BASE)


def test_preallocation_uses_whole_entries(tmp_path):
    path = tmp_path / "0.timeindex"
    with TimeIndex(path, 0) as index:
        assert os.path.getsize(path) == 10485756
        assert index.max_entries == 873813
    assert os.path.getsize(path) == 0


def test_lookup(idx):
    assert idx.lookup(100) == TimestampOffset(-1, BASE)
    fill(idx, MAX_ENTRIES - 1)
    assert idx.lookup(9) == TimestampOffset(-1, BASE)
    assert idx.lookup(10) == TimestampOffset(10, 55)
    assert idx.lookup(11) == TimestampOffset(10, 55)
    assert idx.lookup(25) == TimestampOffset(20, 65)
    assert idx.lookup(30) == TimestampOffset(30, 75)
    assert idx.lookup(10**6) == TimestampOffset(290, 335)


def test_lookup_ceiling(idx):
    assert idx.lookup_ceiling(5) is None
    fill(idx, MAX_ENTRIES - 1)
    assert idx.lookup_ceiling(5) == TimestampOffset(10, 55)
    assert idx.lookup_ceiling(10) == TimestampOffset(10, 55)
    assert idx.lookup_ceiling(11) == TimestampOffset(20, 65)
    assert idx.lookup_ceiling(290) == TimestampOffset(290, 335)
    assert idx.lookup_ceiling(291) is None


def test_entry(idx):
    fill(idx, MAX_ENTRIES - 1)
    assert [idx.entry(i) for i in range(4)] == [(10, 55), (20, 65), (30, 75), (40, 85)]


def test_truncate(idx):
    fill(idx, MAX_ENTRIES - 1)
    idx.truncate()
    assert idx.entries == 0
    fill(idx, MAX_ENTRIES - 1)
    idx.truncate_to(10 + BASE)  # exactly the offset of slot 0
    assert idx.entries == 0
    assert idx.last_entry == TimestampOffset(-1, BASE)
    fill(idx, 10)
    idx.truncate_to(86)  # removes (50, 95) and later
    assert idx.entries == 4 and idx.last_entry == TimestampOffset(40, 85)


def test_append(idx):
    fill(idx, MAX_ENTRIES - 1)
    assert idx.is_full
    with pytest.raises(IndexFullError):
        idx.maybe_append(10000, 1000)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(10000, 280, skip_full_check=True)  # 280 < 335
    assert idx.maybe_append(10000, 1000, skip_full_check=True)
    assert idx.entries == MAX_ENTRIES
    with pytest.raises(IndexFullError):  # the file itself has no slot left
        idx.maybe_append(20000, 2000, skip_full_check=True)


def test_append_rules(idx):
    assert not idx.maybe_append(-1, 50)  # not above the empty index's -1
    assert not idx.maybe_append(-7, 40)  # empty: no order checks, simply not written
    assert idx.entries == 0
    assert idx.maybe_append(100, 50)
    assert not idx.maybe_append(100, 60)  # equal timestamp: not written, no error
    assert idx.last_entry == TimestampOffset(100, 50)
    with pytest.raises(InvalidTimestampError):
        idx.maybe_append(99, 70)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(200, 49)
    assert idx.maybe_append(200, 50)  # equal offset is allowed
    with pytest.raises(IndexOffsetOverflowError):
        idx.maybe_append(300, BASE + 2**31)


def test_sanity_check(tmp_path):
    def write(name, entries, extra=b""):
        path = tmp_path / name
        path.write_bytes(np.array(entries, dtype=TimeIndex.DTYPE).tobytes() + extra)
        return TimeIndex(path, BASE, writable=False)

    with write("ok.timeindex", [(10, 0), (20, 5)]) as ok:
        ok.sanity_check()
    with write("offset.timeindex", [(10, 0), (20, -1)]) as bad_offset:
        with pytest.raises(CorruptIndexError, match="last offset 44 is below the base offset 45"):
            bad_offset.sanity_check()
    with write("ts.timeindex", [(10, 0), (5, 1)]) as bad_ts:
        with pytest.raises(CorruptIndexError, match="last timestamp 5 is below the first timestamp 10"):
            bad_ts.sanity_check()
    path = tmp_path / "short.timeindex"  # a whole file minus its last byte
    path.write_bytes(np.array([(10, 0), (20, 5)], dtype=TimeIndex.DTYPE).tobytes()[:-1])
    with TimeIndex(path, BASE, writable=False) as short:
        assert short.entries == 1
        with pytest.raises(CorruptIndexError, match="length 23 is not a multiple of 12"):
            short.sanity_check()
    with write("len.timeindex", [(10, 0)], extra=b"\x00" * 11) as bad_len:
        with pytest.raises(CorruptIndexError, match="length 23 is not a multiple of 12"):
            bad_len.sanity_check()


def test_zero_tail_fails_sanity(tmp_path):
    path = tmp_path / "45.timeindex"
    index = TimeIndex(path, BASE, max_index_size=MAX_ENTRIES * 12)
    fill(index, 3)
    index.close_handler()  # untrimmed, as after a crash
    with TimeIndex(path, BASE, writable=False) as reopened:
        assert reopened.entries == MAX_ENTRIES
        assert reopened.last_entry == TimestampOffset(0, BASE)
        with pytest.raises(CorruptIndexError):
            reopened.sanity_check()


def test_is_full(idx):
    fill(idx, MAX_ENTRIES - 2)
    assert not idx.is_full
    fill_one = idx.maybe_append(10**6, 10**3)
    assert fill_one and idx.is_full and idx.entries == MAX_ENTRIES - 1


def test_last_entry(idx):
    assert idx.last_entry == TimestampOffset(-1, BASE)
    idx.maybe_append(1, BASE + 1)
    assert idx.last_entry == TimestampOffset(1, BASE + 1)


def test_resize(idx):
    fill(idx, 5)
    assert idx.resize(360) is False
    assert idx.resize(180) is True
    assert idx.resize(720) is True
    assert idx.max_entries == 60 and idx.last_entry == TimestampOffset(50, 95)


def test_entry_size():
    assert TimeIndex.ENTRY_SIZE == 12 and TimeIndex.DTYPE.itemsize == 12


def test_reopen_keeps_entries(tmp_path):
    path = tmp_path / "45.timeindex"
    with TimeIndex(path, BASE, max_index_size=MAX_ENTRIES * 12) as index:
        fill(index, 7)
    assert os.path.getsize(path) == 7 * 12
    with TimeIndex(path, BASE, writable=False) as reopened:
        assert list(reopened) == [TimestampOffset(i * 10, BASE + i * 10) for i in range(1, 8)]
        assert reopened.last_entry == TimestampOffset(70, 115)
