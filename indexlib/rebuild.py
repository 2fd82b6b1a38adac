"""Kafka's ``LogSegment.recover``, offline: the index entries a rebuild writes for one segment.

:func:`plan_segment` is pure: from a :class:`LogScan` and the topic's ``index.interval.bytes`` /
``segment.index.bytes`` it computes the ``.index`` and ``.timeindex`` entries Kafka's recovery writes,
the transactional events the cross-segment replay needs, and the first point where Kafka's recovery
would throw instead of finishing. Segments can be planned in parallel; only the transaction replay
(:mod:`indexlib.producer_state`) is sequential per partition.

Rules (kafka-index-format.md 2.3-2.4): a batch gets an entry when the bytes from the start of the last
indexed batch to its own start exceed the interval (strict; so the first batch never does); the offset
entry is (batch last offset, batch start); the time entry is the running max of batch max timestamps
with the last offset of the first batch that reached it, written only when it grows; after the walk a
forced final time entry; both files trimmed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .abstract_index import INT32_MAX, round_down_to_multiple
from .records import ATTR_CONTROL, ATTR_TRANSACTIONAL, MARKER_ABORT, MARKER_COMMIT, LogScan, ScanProblem
from .settings import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES, check_index_setting

# Transactional event kinds (one per v2 batch with a producer id).
EVENT_DATA = 0  # non-transactional data batch
EVENT_TXN_DATA = 1  # transactional data batch
EVENT_ABORT = 2  # ABORT marker
EVENT_COMMIT = 3  # COMMIT marker

EVENT_DTYPE = np.dtype(
    [("batch", np.int32), ("kind", np.int8), ("producer_id", np.int64), ("offset", np.int64), ("position", np.int64)]
)


@dataclass
class SegmentPlan:
    """What a rebuild of one segment writes, or why it cannot.

    Invariants: ``offset_entries`` offsets strictly increase and positions are batch starts inside
    ``valid_bytes``; ``time_entries`` timestamps strictly increase and offsets never decrease; when
    ``fatal`` is set nothing may be written for the segment.
    """

    base_offset: int
    valid_bytes: int
    batch_count: int  # batches inside the valid data
    offset_offsets: np.ndarray  # int64 absolute offsets of the .index entries
    offset_positions: np.ndarray  # int64 positions
    time_timestamps: np.ndarray  # int64
    time_offsets: np.ndarray  # int64 absolute offsets
    events: np.ndarray  # EVENT_DTYPE: producer events the replay needs, in batch order (compact_events)
    fatal: ScanProblem | None  # where Kafka's recovery would throw (nothing is written then)
    last_offset: int  # last offset of the valid batches (base_offset - 1 when there is none)
    next_v2_offset: int | None  # last offset + 1 of the last v2 batch Kafka's recovery replays, if any

    @property
    def index_entries(self) -> int:
        return len(self.offset_offsets)

    @property
    def timeindex_entries(self) -> int:
        return len(self.time_offsets)

    def summary(self) -> PlanSummary:
        """This plan without its index entries (what the partition replay, verify and the audit read)."""
        return PlanSummary(
            self.base_offset,
            self.valid_bytes,
            self.batch_count,
            self.index_entries,
            self.timeindex_entries,
            self.events,
            self.fatal,
            self.last_offset,
            self.next_v2_offset,
        )


@dataclass(frozen=True)
class PlanSummary:
    """A :class:`SegmentPlan` less its entry arrays: small (no per-batch data beyond :func:`compact_events`),
    so it can travel from a Spark executor to the driver. Enough for the producer-state replay
    (:func:`indexlib.partition.replay_partition`) and the ``.txnindex`` checks; not for writing."""

    base_offset: int
    valid_bytes: int
    batch_count: int
    index_entries: int
    timeindex_entries: int
    events: np.ndarray
    fatal: ScanProblem | None
    last_offset: int
    next_v2_offset: int | None


def plan_segment(
    scan: LogScan,
    base_offset: int,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
) -> SegmentPlan:
    """Compute the rebuilt index entries of one segment (see the module docstring)."""
    check_index_setting("plan_segment", "index_interval_bytes", index_interval_bytes)
    check_index_setting("plan_segment", "segment_index_bytes", segment_index_bytes)
    n = scan.batch_count
    positions, sizes, last_offsets = scan.positions, scan.sizes, scan.last_offsets
    problems: list[ScanProblem] = []
    if scan.fatal is not None:
        problems.append(scan.fatal)

    # LogSegmentOffsetOverflowException: checked on every batch right after its CRC.
    relative = last_offsets - base_offset
    overflow = np.flatnonzero((relative < 0) | (relative > INT32_MAX))
    m = n
    if len(overflow):
        i = int(overflow[0])
        problems.append(
            ScanProblem(
                "offset_overflow",
                int(positions[i]),
                i,
                f"batch last offset {int(last_offsets[i])} does not fit the 32-bit relative range of base "
                f"offset {base_offset}; Kafka would split this segment",
                int(scan.base_offsets[i]),
            )
        )
        m = i
    if scan.fatal is not None:
        m = min(m, scan.fatal.batch_index)

    selected = _select_indexed_batches(positions[:m], sizes[:m], index_interval_bytes)
    off_offsets = last_offsets[selected]
    off_positions = positions[selected]

    # Time index candidates: the running max at each indexed batch, then the forced final entry.
    ts = scan.max_timestamps[:m]
    running_max = np.maximum.accumulate(np.maximum(ts, -1)) if m else ts
    previous_max = np.concatenate(([-1], running_max[:-1])) if m else ts
    source = np.maximum.accumulate(np.where(ts > previous_max, np.arange(m), -1)) if m else ts
    offset_of_max = np.where(source >= 0, last_offsets[:m][np.maximum(source, 0)], base_offset) if m else ts
    cand_ts = running_max[selected]
    cand_off = offset_of_max[selected]

    max_offset_entries = round_down_to_multiple(segment_index_bytes, 8) // 8
    max_time_entries = round_down_to_multiple(segment_index_bytes, 12) // 12

    # Offset index: append order (InvalidOffsetException) and capacity (full).
    k = len(selected)
    bad_order = np.flatnonzero(off_offsets[1:] <= off_offsets[:-1])
    first_bad_order = int(bad_order[0]) + 1 if len(bad_order) else k
    first_full = max_offset_entries if k > max_offset_entries else k
    # Time index: entries written where the candidate timestamp grows.
    written = cand_ts > np.concatenate(([-1], cand_ts[:-1]))
    entries_before = np.cumsum(written) - written
    time_full = np.flatnonzero(entries_before >= max_time_entries - 1)
    first_time_full = int(time_full[0]) if len(time_full) else k
    last_written = np.maximum.accumulate(np.where(written, np.arange(k), -1))
    prev_written = np.concatenate(([-1], last_written[:-1])) if k else last_written
    prev_off = np.where(prev_written >= 0, cand_off[np.maximum(prev_written, 0)], base_offset)
    time_back = np.flatnonzero((prev_written >= 0) & (cand_off < prev_off))
    first_time_back = int(time_back[0]) if len(time_back) else k
    first_index_error = min(first_bad_order, first_full, first_time_full, first_time_back)
    if first_index_error < k:
        j = first_index_error
        b = int(selected[j])
        if j in (first_bad_order, first_full):
            if j == first_full:
                reason = (
                    f"the offset index would need more than {max_offset_entries} entries with "
                    f"segment.index.bytes={segment_index_bytes}"
                )
                kind = "offset_index_full"
            else:
                reason = (
                    f"batch last offset {int(off_offsets[j])} is not above the previous indexed "
                    f"offset {int(off_offsets[j - 1])}"
                )
                kind = "log_offset_not_increasing"
        elif j == first_time_full:
            reason = (
                f"the time index would need more than {max_time_entries - 1} entries with "
                f"segment.index.bytes={segment_index_bytes}"
            )
            kind = "time_index_full"
        else:
            reason = f"time index offset {int(cand_off[j])} goes back below {int(prev_off[j])}"
            kind = "log_time_offset_not_increasing"
        problems.append(ScanProblem(kind, int(positions[b]), b, reason, int(scan.base_offsets[b])))

    time_ts = cand_ts[written]
    time_off = cand_off[written]
    if m:  # forced final entry (skipFullCheck), written only if the max grew since the last entry
        final_ts, final_off = int(running_max[m - 1]), int(offset_of_max[m - 1])
        last_ts = int(time_ts[-1]) if len(time_ts) else -1
        if len(time_ts) and final_off < int(time_off[-1]):
            problems.append(
                ScanProblem(
                    "log_time_offset_not_increasing",
                    int(positions[m - 1]),
                    m - 1,
                    f"final time index offset {final_off} goes back below {int(time_off[-1])}",
                    int(scan.base_offsets[m - 1]),
                )
            )
        elif final_ts > last_ts:
            time_ts = np.append(time_ts, final_ts)
            time_off = np.append(time_off, final_off)

    fatal = min(problems, key=lambda p: p.batch_index) if problems else None
    limit = fatal.batch_index + 1 if fatal is not None else m
    v2 = np.flatnonzero(scan.magic[:limit] >= 2)
    return SegmentPlan(
        base_offset=base_offset,
        valid_bytes=scan.valid_bytes,
        batch_count=n,
        offset_offsets=off_offsets,
        offset_positions=off_positions,
        time_timestamps=time_ts,
        time_offsets=time_off,
        events=transaction_events(scan, min(limit, n)),
        fatal=fatal,
        last_offset=int(last_offsets[-1]) if n else base_offset - 1,
        next_v2_offset=int(last_offsets[v2[-1]]) + 1 if len(v2) else None,
    )


def _select_indexed_batches(positions: np.ndarray, sizes: np.ndarray, interval: int) -> np.ndarray:
    """Indices of the batches that get an index entry (greedy, exactly Kafka's sequential rule)."""
    n = len(positions)
    if n <= 1:
        return np.empty(0, dtype=np.int64)
    if bool(np.all(sizes[:-1] > interval)):
        return np.arange(1, n, dtype=np.int64)  # every batch but the first
    chosen: list[int] = []
    last = 0
    search = positions.searchsorted
    while True:
        i = int(search(last + interval, side="right"))
        if i >= n:
            break
        chosen.append(i)
        last = int(positions[i])
    return np.asarray(chosen, dtype=np.int64)


def transaction_events(scan: LogScan, limit: int) -> np.ndarray:
    """The producer-state events of the first ``limit`` batches: v2 batches with a producer id.

    Empty control batches are skipped (Kafka ignores them); markers carry their control type. A control
    batch that is not a well-formed ABORT or COMMIT marker changes no state either: Kafka throws while
    appending it (a malformed marker ends the valid data after it; an unknown type is fatal).
    """
    magic = scan.magic[:limit]
    pids = scan.producer_ids[:limit]
    attrs = scan.attributes[:limit]
    control = (attrs & ATTR_CONTROL) != 0
    is_marker = (scan.marker_types[:limit] == MARKER_ABORT) | (scan.marker_types[:limit] == MARKER_COMMIT)
    mask = (magic >= 2) & (pids > -1) & ~(control & ~is_marker)
    idx = np.flatnonzero(mask)
    events = np.empty(len(idx), dtype=EVENT_DTYPE)
    events["batch"] = idx
    events["producer_id"] = pids[idx]
    events["offset"] = scan.base_offsets[:limit][idx]
    events["position"] = scan.positions[:limit][idx]
    kind = np.where((attrs[idx] & ATTR_TRANSACTIONAL) != 0, EVENT_TXN_DATA, EVENT_DATA)
    markers = scan.marker_types[:limit][idx]
    kind = np.where(control[idx] & (markers == MARKER_ABORT), EVENT_ABORT, kind)
    kind = np.where(control[idx] & (markers == MARKER_COMMIT), EVENT_COMMIT, kind)
    events["kind"] = kind
    return compact_events(events)


def compact_events(events: np.ndarray) -> np.ndarray:
    """Drop the data events the replay cannot notice: a data event whose producer's previous event in
    the segment has the same kind (both transactional or both not).

    Lossless for :func:`indexlib.producer_state.replay_segment` from any starting state: after a
    transactional batch the producer's transaction is open, so a second one changes nothing; after a
    non-transactional batch it is not open (or the replay already stopped there), so a second one is
    harmless too. Markers are all kept. Bounds the events per segment by producers x transactions,
    not by batches (idempotent producers write a producer id on every batch).
    """
    if len(events) < 2:
        return events
    kind, pid = events["kind"], events["producer_id"]
    data = kind <= EVENT_TXN_DATA
    # pass 1 (linear): runs of one producer's same-kind data events
    repeat = np.zeros(len(events), dtype=bool)
    repeat[1:] = data[1:] & (pid[1:] == pid[:-1]) & (kind[1:] == kind[:-1])
    events = events[~repeat]
    if len(events) < 2:
        return events
    # pass 2: the same, between each producer's own consecutive events (interleaved producers)
    kind, pid = events["kind"], events["producer_id"]
    order = np.argsort(pid, kind="stable")
    k, p = kind[order], pid[order]
    repeat_sorted = np.zeros(len(events), dtype=bool)
    repeat_sorted[1:] = (k[1:] <= EVENT_TXN_DATA) & (p[1:] == p[:-1]) & (k[1:] == k[:-1])
    repeat = np.empty_like(repeat_sorted)
    repeat[order] = repeat_sorted
    return events[~repeat]
