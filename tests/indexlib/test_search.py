"""Kafka's warm/cold search: results, boundary semantics, and which slots a lookup reads."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

from indexlib import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset

N = 5000  # well above the warm section of both index types


def record_reads(index) -> list[int]:
    """Wrap the index's field readers so that every slot a search reads is recorded."""
    slots: list[int] = []
    es = index.ENTRY_SIZE
    key, value = index._unpack_key, index._unpack_value
    index._unpack_key = lambda buf, off: (slots.append(off // es), key(buf, off))[1]
    index._unpack_value = lambda buf, off: (slots.append(off // es), value(buf, off))[1]
    return slots


@pytest.fixture
def offset_index(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000001000.index", 1000, max_index_size=N * 8)
    index.append_many(1000 + 3 * np.arange(N), 100 * np.arange(N))
    yield index
    index.close()


@pytest.fixture
def time_index(tmp_path):
    index = TimeIndex(tmp_path / "00000000000000001000.timeindex", 1000, max_index_size=(N + 1) * 12)
    index.append_many(10_000 + 7 * np.arange(N), 1000 + 3 * np.arange(N))
    yield index
    index.close()


def test_warm_lookups_read_only_the_warm_section(offset_index):
    warm = 8192 // 8
    first_hot = N - 1 - warm
    slots = record_reads(offset_index)
    for slot in range(first_hot + 1, N):
        slots.clear()
        target = 1000 + 3 * slot + (slot % 3)  # exact hits and in-between targets
        assert offset_index.lookup(target) == OffsetPosition(1000 + 3 * slot, 100 * slot)
        assert slots and min(slots) >= first_hot, (slot, sorted(set(slots)))
        assert len(slots) <= 2 + warm.bit_length()


def test_warm_time_lookups_read_only_the_warm_section(time_index):
    warm = 8192 // 12
    first_hot = N - 1 - warm
    slots = record_reads(time_index)
    for slot in range(first_hot + 1, N):
        slots.clear()
        assert time_index.lookup(10_000 + 7 * slot + 3) == TimestampOffset(10_000 + 7 * slot, 1000 + 3 * slot)
        assert min(slots) >= first_hot


def test_cold_lookup_reads_slot_zero_region_not_just_warm(offset_index):
    slots = record_reads(offset_index)
    assert offset_index.lookup(1000 + 3 * 10) == OffsetPosition(1030, 1000)
    assert N - 1 - 1024 in slots and min(slots) <= 10 + 1


def test_lookups_agree_with_brute_force(offset_index, time_index):
    offsets = (1000 + 3 * np.arange(N)).tolist()
    timestamps = (10_000 + 7 * np.arange(N)).tolist()
    rng = np.random.default_rng(1)
    for target in rng.integers(990, 1000 + 3 * N + 10, 3000).tolist() + [1000, offsets[-1]]:
        i = bisect.bisect_right(offsets, target) - 1
        assert offset_index.lookup(target) == (
            OffsetPosition(offsets[i], 100 * i) if i >= 0 else OffsetPosition(1000, 0)
        )
        j = bisect.bisect_left(offsets, target)
        assert offset_index.lookup_ceiling(target) == (OffsetPosition(offsets[j], 100 * j) if j < N else None)
    for target in rng.integers(9_990, 10_000 + 7 * N + 10, 3000).tolist():
        i = bisect.bisect_right(timestamps, target) - 1
        expected = TimestampOffset(timestamps[i], offsets[i]) if i >= 0 else TimestampOffset(-1, 1000)
        assert time_index.lookup(target) == expected
        j = bisect.bisect_left(timestamps, target)
        assert time_index.lookup_ceiling(target) == (TimestampOffset(timestamps[j], offsets[j]) if j < N else None)


def test_kafka_smallest_upper_bound_quirk_and_true_ceiling(tmp_path):
    # Kafka's SUB never probes slot 0 in the cold search, so a target equal to slot 0 answers slot 1.
    with OffsetIndex(tmp_path / "0.index", 0, max_index_size=80) as index:
        for offset, position in [(0, 0), (1, 10), (2, 23), (3, 37)]:
            index.append(offset, position)
        assert index.fetch_upper_bound_offset(OffsetPosition(0, 0), 0) == 1  # Kafka's answer
        assert index.lookup_ceiling(0) == OffsetPosition(0, 0)  # the true ceiling
        assert index.fetch_upper_bound_offset(OffsetPosition(0, 0), -5) == 0  # below slot 0
