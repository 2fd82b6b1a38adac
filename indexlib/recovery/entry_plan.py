"""Kafka's ``LogSegment.recover``, offline: the index entries a rebuild writes for one segment.

:func:`plan_segment` is pure: from a :class:`~indexlib.recovery.log_scan.LogSummary` (one pass over the ``.log``
with the topic's ``index.interval.bytes``) and ``segment.index.bytes`` it computes the ``.index`` and ``.timeindex`` entries Kafka's recovery writes,
the transactional events the cross-segment replay needs, and the first point where Kafka's recovery
would throw instead of finishing. Segments can be planned in parallel; only the transaction replay
(:mod:`indexlib.recovery.producer_state`) is sequential per partition.

Rules (kafka-index-format.md 2.3-2.4): a batch gets an entry when the bytes from the start of the last
indexed batch to its own start exceed the interval (strict; so the first batch never does); the offset
entry is (batch last offset, batch start); the time entry is the running max of batch max timestamps
with the last offset of the first batch that reached it, written only when it grows; after the walk a
forced final time entry; both files trimmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..format.abstract_index import round_down_to_multiple
from ..format.records import ScanProblem
from .log_scan import EPOCH_DTYPE, NO_OFFSET, LogSummary
from .settings import DEFAULT_SEGMENT_INDEX_BYTES


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
    epoch_starts: np.ndarray = field(default_factory=lambda: np.empty(0, EPOCH_DTYPE))  # the leader epochs it starts
    producers: np.ndarray | None = None  # PRODUCER_DTYPE: each producer's state at its end (None: not known)

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
            self.epoch_starts,
            self.producers,
        )


@dataclass(frozen=True)
class PlanSummary:
    """A :class:`SegmentPlan` less its entry arrays: small (no per-batch data beyond :func:`compact_events`),
    so it can travel from a Spark executor to the driver. Enough for the producer-state replay
    (:func:`indexlib.engine.replay.replay_partition`) and the ``.txnindex`` checks; not for writing."""

    base_offset: int
    valid_bytes: int
    batch_count: int
    index_entries: int
    timeindex_entries: int
    events: np.ndarray
    fatal: ScanProblem | None
    last_offset: int
    next_v2_offset: int | None
    epoch_starts: np.ndarray = field(default_factory=lambda: np.empty(0, EPOCH_DTYPE))
    producers: np.ndarray | None = None
    #: at each snapshot offset inside the segment (an older clean shutdown's), the producer states of its batches
    #: below that offset (PRODUCER_DTYPE), for the snapshot's check; filled by the task that has the task's points
    producers_at: dict[int, np.ndarray] = field(default_factory=dict)


def plan_segment(summary: LogSummary, segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES) -> SegmentPlan:
    """Compute the rebuilt index entries of one segment from its summary (see the module docstring).
    ``segment_index_bytes`` is trusted: settings are validated where they enter (:mod:`.settings`)."""
    base_offset, n, m = summary.base_offset, summary.batch_count, summary.plan_end
    entries = summary.entries
    # Time index candidates: the running max at each indexed batch, then the forced final entry.
    cand_ts, cand_off = entries["running_max"], entries["max_offset"]
    written = cand_ts > np.concatenate(([-1], cand_ts[:-1]))  # written where the candidate timestamp grows
    time_ts, time_off, final_problem = _with_final_time_entry(summary, cand_ts[written], cand_off[written])
    problems = [
        problem
        for problem in (
            summary.fatal,
            _offset_overflow(summary),
            _first_index_error(entries, written, base_offset, segment_index_bytes),
            final_problem,
        )
        if problem is not None
    ]
    fatal = min(problems, key=lambda p: p.batch_index) if problems else None
    replayed = min(fatal.batch_index + 1 if fatal is not None else m, n)  # batches Kafka's recovery replays
    return SegmentPlan(
        base_offset=base_offset,
        valid_bytes=summary.valid_bytes,
        batch_count=n,
        offset_offsets=entries["last_offset"].copy(),
        offset_positions=entries["position"].copy(),
        time_timestamps=time_ts.copy(),
        time_offsets=time_off.copy(),
        events=summary.events[summary.events["batch"] < replayed],
        fatal=fatal,
        last_offset=summary.last_offset if summary.last_offset is not None else base_offset - 1,
        next_v2_offset=_next_v2_offset(summary, replayed),
        epoch_starts=summary.epoch_starts,
        producers=summary.producers,
    )


def _offset_overflow(summary: LogSummary) -> ScanProblem | None:
    """Kafka's ``LogSegmentOffsetOverflowException`` at the batch that ends the plan, unless a fatal problem of the
    scan comes first (checked on every batch right after its CRC)."""
    stop, m = summary.stop_row, summary.plan_end
    if stop is None or (summary.fatal is not None and summary.fatal.batch_index <= m):
        return None
    return ScanProblem(
        "offset_overflow",
        int(stop["position"]),
        m,
        f"batch last offset {int(stop['last_offset'])} does not fit the 32-bit relative range of base "
        f"offset {summary.base_offset}; Kafka would split this segment",
        int(stop["base_offset"]),
    )


def _first_index_error(
    entries: np.ndarray, written: npt.NDArray[np.bool_], base_offset: int, segment_index_bytes: int
) -> ScanProblem | None:
    """The first indexed batch at which appending to the indexes throws: the offset index's append order
    (``InvalidOffsetException``) or capacity (full), the time index's capacity or an offset going back."""
    off_offsets, cand_off = entries["last_offset"], entries["max_offset"]
    max_offset_entries = round_down_to_multiple(segment_index_bytes, 8) // 8
    max_time_entries = round_down_to_multiple(segment_index_bytes, 12) // 12
    k = len(entries)
    if (  # the usual segment, in three whole-column passes: both indexes fit, offsets increase, none goes back
        k <= max_offset_entries
        and int(np.count_nonzero(written)) < max_time_entries - 1
        and (k < 2 or bool((off_offsets[1:] > off_offsets[:-1]).all() and (cand_off[1:] >= cand_off[:-1]).all()))
    ):
        return None
    return _find_first_index_error(entries, written, base_offset, segment_index_bytes)


def _find_first_index_error(
    entries: np.ndarray, written: npt.NDArray[np.bool_], base_offset: int, segment_index_bytes: int
) -> ScanProblem | None:
    """:func:`_first_index_error` entry by entry (each index's capacity, the offset order, a time entry going back
    below the previous written one)."""
    off_offsets, cand_off = entries["last_offset"], entries["max_offset"]
    max_offset_entries = round_down_to_multiple(segment_index_bytes, 8) // 8
    max_time_entries = round_down_to_multiple(segment_index_bytes, 12) // 12
    k = len(entries)
    bad_order = np.flatnonzero(off_offsets[1:] <= off_offsets[:-1])
    first_bad_order = int(bad_order[0]) + 1 if len(bad_order) else k
    first_full = max_offset_entries if k > max_offset_entries else k
    entries_before: npt.NDArray[np.int64] = np.cumsum(written) - written
    time_full = np.flatnonzero(entries_before >= max_time_entries - 1)
    first_time_full = int(time_full[0]) if len(time_full) else k
    last_written = np.maximum.accumulate(np.where(written, np.arange(k), -1))
    prev_written = np.concatenate(([-1], last_written[:-1])) if k else last_written
    prev_off = np.where(prev_written >= 0, cand_off[np.maximum(prev_written, 0)], base_offset)
    time_back = np.flatnonzero((prev_written >= 0) & (cand_off < prev_off))
    first_time_back = int(time_back[0]) if len(time_back) else k
    j = min(first_bad_order, first_full, first_time_full, first_time_back)
    if j == k:
        return None
    if j == first_full:
        kind = "offset_index_full"
        reason = (
            f"the offset index would need more than {max_offset_entries} entries with "
            f"segment.index.bytes={segment_index_bytes}"
        )
    elif j == first_bad_order:
        kind = "log_offset_not_increasing"
        reason = f"batch last offset {int(off_offsets[j])} is not above the previous indexed offset {int(off_offsets[j - 1])}"
    elif j == first_time_full:
        kind = "time_index_full"
        reason = (
            f"the time index would need more than {max_time_entries - 1} entries with "
            f"segment.index.bytes={segment_index_bytes}"
        )
    else:
        kind = "log_time_offset_not_increasing"
        reason = f"time index offset {int(cand_off[j])} goes back below {int(prev_off[j])}"
    row = entries[j]
    return ScanProblem(kind, int(row["position"]), int(row["batch"]), reason, int(row["base_offset"]))


def _with_final_time_entry(
    summary: LogSummary, time_ts: np.ndarray, time_off: np.ndarray
) -> tuple[np.ndarray, np.ndarray, ScanProblem | None]:
    """The time entries with the forced final one (``skipFullCheck``) after them, written only if the running max
    grew since the last entry; or, where its offset would go back below the last entry's, that problem."""
    last = summary.last_row
    if last is None:
        return time_ts, time_off, None
    final_ts, final_off = int(last["running_max"]), int(last["max_offset"])
    last_ts = int(time_ts[-1]) if len(time_ts) else -1
    if len(time_ts) and final_off < int(time_off[-1]):
        problem = ScanProblem(
            "log_time_offset_not_increasing",
            int(last["position"]),
            summary.plan_end - 1,
            f"final time index offset {final_off} goes back below {int(time_off[-1])}",
            int(last["base_offset"]),
        )
        return time_ts, time_off, problem
    if final_ts > last_ts:
        return np.append(time_ts, final_ts), np.append(time_off, final_off), None
    return time_ts, time_off, None


def _next_v2_offset(summary: LogSummary, replayed: int) -> int | None:
    """Last offset + 1 of the last v2 batch among the first ``replayed`` batches (None if none).

    Batch ``replayed - 1`` is always one the summary has a row for: the last planned batch, the batch
    that ends the plan, or an indexed batch where an index error is fatal."""
    if replayed == 0:
        return None
    want = replayed - 1
    if summary.last_row is not None and int(summary.last_row["batch"]) == want:
        row = summary.last_row
    elif summary.stop_row is not None and int(summary.stop_row["batch"]) == want:
        row = summary.stop_row
    else:
        hit = np.flatnonzero(summary.entries["batch"] == want)
        if not len(hit):
            raise AssertionError(f"{summary.path}: no summary row for batch {want}")
        row = summary.entries[int(hit[0])]
    v2_next = int(row["v2_next"])
    return None if v2_next == NO_OFFSET else v2_next
