"""``log_scan.producer_end_states`` (whole columns, grouped by producer) equals, field for field, the per-batch loop it
replaced (kept here as the oracle: one batch at a time, as ``LogSegment.updateProducerState`` appends them) on random
batch sequences: several producers interleaved, epochs that change at markers and at data batches, sequences near
Integer.MAX_VALUE, offsets whose delta wraps, transactional and not, control batches that are not markers, legacy
batches and batches without a producer."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib.format.abstract_index import INT32_MAX
from indexlib.format.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    MARKER_ABORT,
    MARKER_COMMIT,
    LogScan,
    StopReason,
)
from indexlib.recovery.log_scan import META_CLEARED, META_INHERIT, META_SET, PRODUCER_DTYPE, producer_end_states

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int32(value: int) -> int:
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence > _int32(INT32_MAX - increment):
        return _int32(increment - _int32(INT32_MAX - sequence) - 1)
    return _int32(sequence + increment)


def producer_end_states_loop(scan: LogScan, limit: int) -> np.ndarray:
    """The per-batch Python loop ``producer_end_states`` was before it was vectorized (its oracle)."""
    magic, pids, attrs = scan.magic[:limit], scan.producer_ids[:limit], scan.attributes[:limit]
    control = (attrs & ATTR_CONTROL) != 0
    markers = scan.marker_types[:limit]
    is_marker = control & ((markers == MARKER_ABORT) | (markers == MARKER_COMMIT))
    chosen = np.flatnonzero((magic >= 2) & (pids > -1) & (~control | is_marker))
    assert scan.base_sequences is not None and scan.marker_coordinator_epochs is not None
    assert scan.marker_timestamps is not None
    columns = zip(
        pids[chosen].tolist(),
        scan.producer_epochs[chosen].tolist(),
        is_marker[chosen].tolist(),
        (attrs[chosen] & ATTR_TRANSACTIONAL).tolist(),
        scan.base_offsets[chosen].tolist(),
        scan.last_offsets[chosen].tolist(),
        scan.base_sequences[chosen].tolist(),
        scan.max_timestamps[chosen].tolist(),
        scan.marker_coordinator_epochs[chosen].tolist(),
        scan.marker_timestamps[chosen].tolist(),
        strict=True,
    )
    states: dict[int, list[int]] = {}
    for pid, epoch, marker, transactional, base, last, sequence, max_ts, coordinator, stamp in columns:
        state = states.get(pid)
        if state is None:
            state = states[pid] = [pid, epoch, epoch, META_INHERIT, 0, -1, -1, 0, -1, -1, -1]
        if marker:
            if epoch != state[2]:
                state[3], state[5], state[6], state[7] = META_CLEARED, -1, -1, 0
            state[2], state[4], state[8], state[9], state[10] = epoch, 1, stamp, coordinator, -1
        else:
            delta = _int32(last - base)
            last_sequence = -1 if sequence == -1 else _increment_sequence(sequence, delta)
            state[2:4] = [epoch, META_SET]
            state[5:9] = [last_sequence, last, delta, max_ts]
            if transactional and state[10] == -1:
                state[10] = base
    out = np.empty(len(states), PRODUCER_DTYPE)
    for k, fields in enumerate(states.values()):
        out[k] = tuple(fields)
    return out


_batch = st.fixed_dictionaries(
    {
        "pid": st.sampled_from([-1, 0, 7, 42, 1000, 1001, INT64_MAX]),
        "epoch": st.sampled_from([-1, 0, 1, 2, 32767]),
        "kind": st.sampled_from(["data", "data", "txn", "txn", "abort", "commit", "other_control", "legacy"]),
        "base": st.one_of(st.integers(0, 1 << 20), st.sampled_from([INT64_MIN, INT64_MAX - 3])),
        "span": st.one_of(st.integers(0, 50), st.sampled_from([1 << 32, (1 << 31) + 5, -3])),
        "sequence": st.one_of(st.integers(-1, 100), st.sampled_from([INT32_MAX, INT32_MAX - 2, -(1 << 31)])),
        "max_ts": st.integers(-1, 1 << 45),
        "coordinator": st.integers(-1, 9),
        "stamp": st.integers(-1, 1 << 45),
    }
)


def scan_of(batches: list[dict]) -> LogScan:
    n = len(batches)
    kinds = [b["kind"] for b in batches]
    control = [k in ("abort", "commit", "other_control") for k in kinds]
    attributes = [
        (ATTR_CONTROL if c else 0) | (ATTR_TRANSACTIONAL if k in ("txn", "abort", "commit") else 0)
        for k, c in zip(kinds, control, strict=True)
    ]
    marker = {"abort": MARKER_ABORT, "commit": MARKER_COMMIT, "other_control": 5}
    with np.errstate(over="ignore"):
        base = np.array([b["base"] for b in batches], np.int64)
        last = base + np.array([b["span"] for b in batches], np.int64)  # wraps as a Java long would
    return LogScan(
        path="random.log",
        file_size=100 * n,
        positions=np.arange(n, dtype=np.int64) * 100,
        sizes=np.full(n, 100, np.int64),
        base_offsets=base,
        last_offsets=last,
        max_timestamps=np.array([b["max_ts"] for b in batches], np.int64),
        magic=np.array([1 if k == "legacy" else 2 for k in kinds], np.int8),
        attributes=np.array(attributes, np.int16),
        producer_ids=np.array([b["pid"] for b in batches], np.int64),
        producer_epochs=np.array([b["epoch"] for b in batches], np.int16),
        records_counts=np.ones(n, np.int32),
        marker_types=np.array([marker.get(k, -1) for k in kinds], np.int16),
        stop=StopReason.END,
        partition_leader_epochs=np.zeros(n, np.int32),
        base_sequences=np.array([b["sequence"] for b in batches], np.int32),
        marker_coordinator_epochs=np.array([b["coordinator"] for b in batches], np.int32),
        marker_timestamps=np.array([b["stamp"] for b in batches], np.int64),
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(_batch, max_size=40), st.integers(0, 45))
def test_equals_the_per_batch_loop_on_random_batches(batches, limit):
    scan = scan_of(batches)
    limit = min(limit, len(batches))
    expected = producer_end_states_loop(scan, limit)
    found = producer_end_states(scan, limit)
    assert found.dtype == PRODUCER_DTYPE
    assert found.tolist() == expected.tolist()


def test_a_producer_of_many_batches_and_markers():
    """One idempotent producer whose epoch rises at a marker (the metadata cleared), then writes again."""
    batches = [
        {"pid": 5, "epoch": 0, "kind": "data", "base": k, "span": 0, "sequence": k, "max_ts": 10 + k,
         "coordinator": -1, "stamp": -1}
        for k in range(100)
    ]  # fmt: skip
    batches.append(
        {"pid": 5, "epoch": 1, "kind": "abort", "base": 100, "span": 0, "sequence": -1, "max_ts": 0,
         "coordinator": 3, "stamp": 500}
    )  # fmt: skip
    scan = scan_of(batches)
    [state] = producer_end_states(scan, len(batches)).tolist()
    assert state == tuple(producer_end_states_loop(scan, len(batches))[0].tolist())
    assert state[3] == META_CLEARED and state[8] == 500 and state[9] == 3
