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

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..format.abstract_index import round_down_to_multiple
from ..format.records import ScanProblem
from .log_scan import NO_OFFSET, LogSummary
from .settings import DEFAULT_SEGMENT_INDEX_BYTES, check_index_setting


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


def plan_segment(summary: LogSummary, segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES) -> SegmentPlan:
    """Compute the rebuilt index entries of one segment from its summary (see the module docstring)."""
    check_index_setting("plan_segment", "segment_index_bytes", segment_index_bytes)
    base_offset, n, m = summary.base_offset, summary.batch_count, summary.plan_end
    problems: list[ScanProblem] = []
    if summary.fatal is not None:
        problems.append(summary.fatal)
    stop = summary.stop_row
    if stop is not None and (summary.fatal is None or summary.fatal.batch_index > m):
        # LogSegmentOffsetOverflowException: checked on every batch right after its CRC.
        problems.append(
            ScanProblem(
                "offset_overflow",
                int(stop["position"]),
                m,
                f"batch last offset {int(stop['last_offset'])} does not fit the 32-bit relative range of base "
                f"offset {base_offset}; Kafka would split this segment",
                int(stop["base_offset"]),
            )
        )
    entries = summary.entries
    off_offsets = entries["last_offset"]
    off_positions = entries["position"]
    # Time index candidates: the running max at each indexed batch, then the forced final entry.
    cand_ts = entries["running_max"]
    cand_off = entries["max_offset"]

    max_offset_entries = round_down_to_multiple(segment_index_bytes, 8) // 8
    max_time_entries = round_down_to_multiple(segment_index_bytes, 12) // 12

    # Offset index: append order (InvalidOffsetException) and capacity (full).
    k = len(entries)
    bad_order = np.flatnonzero(off_offsets[1:] <= off_offsets[:-1])
    first_bad_order = int(bad_order[0]) + 1 if len(bad_order) else k
    first_full = max_offset_entries if k > max_offset_entries else k
    # Time index: entries written where the candidate timestamp grows.
    written = cand_ts > np.concatenate(([-1], cand_ts[:-1]))
    entries_before: npt.NDArray[np.int64] = np.cumsum(written) - written
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
        row = entries[j]
        problems.append(ScanProblem(kind, int(row["position"]), int(row["batch"]), reason, int(row["base_offset"])))

    time_ts = cand_ts[written]
    time_off = cand_off[written]
    last = summary.last_row
    if last is not None:  # forced final entry (skipFullCheck), written only if the max grew since the last entry
        final_ts, final_off = int(last["running_max"]), int(last["max_offset"])
        last_ts = int(time_ts[-1]) if len(time_ts) else -1
        if len(time_ts) and final_off < int(time_off[-1]):
            problems.append(
                ScanProblem(
                    "log_time_offset_not_increasing",
                    int(last["position"]),
                    m - 1,
                    f"final time index offset {final_off} goes back below {int(time_off[-1])}",
                    int(last["base_offset"]),
                )
            )
        elif final_ts > last_ts:
            time_ts = np.append(time_ts, final_ts)
            time_off = np.append(time_off, final_off)

    fatal = min(problems, key=lambda p: p.batch_index) if problems else None
    replayed = min(fatal.batch_index + 1 if fatal is not None else m, n)  # batches Kafka's recovery replays
    return SegmentPlan(
        base_offset=base_offset,
        valid_bytes=summary.valid_bytes,
        batch_count=n,
        offset_offsets=off_offsets.copy(),
        offset_positions=off_positions.copy(),
        time_timestamps=time_ts.copy(),
        time_offsets=time_off.copy(),
        events=summary.events[summary.events["batch"] < replayed],
        fatal=fatal,
        last_offset=summary.last_offset if summary.last_offset is not None else base_offset - 1,
        next_v2_offset=_next_v2_offset(summary, replayed),
    )


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
