"""append_many equals the same entries appended one by one: same bytes, same error, all or nothing."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib import KafkaIndexError, OffsetIndex, TimeIndex

BASE = 1000


def one_by_one(index, append, pairs) -> type | None:
    for a, b in pairs:
        try:
            append(a, b)
        except KafkaIndexError as exc:
            return type(exc)
        except ValueError as exc:  # e.g. position out of range
            return type(exc)
    return None


def bulk(index, append_many, pairs) -> type | None:
    try:
        append_many([p[0] for p in pairs], [p[1] for p in pairs])
    except (KafkaIndexError, ValueError) as exc:
        return type(exc)
    return None


def state(index) -> tuple:
    return index.entries, index.to_numpy().tobytes()


# Offsets around the base and the relative-range edge; mostly increasing so that long valid runs occur.
offset_steps = st.lists(st.integers(-2, 40), min_size=0, max_size=40)
prefix_sizes = st.integers(0, 12)


@settings(max_examples=300, deadline=None)
@given(
    prefix=prefix_sizes,
    steps=offset_steps,
    start=st.sampled_from([BASE - 1, BASE, BASE + 5, BASE + 2**31 - 20]),
    capacity=st.integers(1, 60),
    bad_position=st.booleans(),
)
def test_offset_index_append_many_matches_append(prefix, steps, start, capacity, bad_position):
    offsets, current = [], start
    for step in steps:
        current += step
        offsets.append(current)
    positions = [i * 10 for i in range(len(offsets))]
    if bad_position and positions:
        positions[len(positions) // 2] = -1
    pairs = list(zip(offsets, positions, strict=True))
    with tempfile.TemporaryDirectory() as d:
        a = OffsetIndex(os.path.join(d, "a.index"), BASE, max_index_size=capacity * 8)
        b = OffsetIndex(os.path.join(d, "b.index"), BASE, max_index_size=capacity * 8)
        for i in range(min(prefix, capacity)):  # same history on both
            a.append(BASE + i, i)
            b.append(BASE + i, i)
        base_state = state(b)
        err_a = one_by_one(a, a.append, pairs)
        err_b = bulk(b, b.append_many, pairs)
        assert err_a == err_b
        if err_b is None:
            assert state(a) == state(b)
            assert a.last_offset == b.last_offset
        else:
            assert state(b) == base_state  # all or nothing
        a.close(), b.close()


@settings(max_examples=300, deadline=None)
@given(
    prefix=prefix_sizes,
    ts_steps=st.lists(st.integers(-3, 30), max_size=40),
    off_steps=st.lists(st.integers(-1, 5), max_size=40),
    ts_start=st.integers(-5, 20),
    capacity=st.integers(2, 60),
)
def test_time_index_append_many_matches_maybe_append(prefix, ts_steps, off_steps, ts_start, capacity):
    n = min(len(ts_steps), len(off_steps))
    timestamps, offsets, t, o = [], [], ts_start, BASE + 2 * prefix - 2
    for i in range(n):
        t += ts_steps[i]
        o += off_steps[i]
        timestamps.append(t)
        offsets.append(o)
    pairs = list(zip(timestamps, offsets, strict=True))
    with tempfile.TemporaryDirectory() as d:
        a = TimeIndex(os.path.join(d, "a.timeindex"), BASE, max_index_size=capacity * 12)
        b = TimeIndex(os.path.join(d, "b.timeindex"), BASE, max_index_size=capacity * 12)
        for i in range(min(prefix, capacity - 1)):
            a.maybe_append(i, BASE + i)
            b.maybe_append(i, BASE + i)
        base_state = state(b)
        err_a = one_by_one(a, a.maybe_append, pairs)
        err_b = bulk(b, b.append_many, pairs)
        assert err_a == err_b
        if err_b is None:
            assert state(a) == state(b)
            assert a.last_entry == b.last_entry
        else:
            assert state(b) == base_state
        a.close(), b.close()
