"""A Kafka partition directory: its segments, and the rebuild of all their index files.

:func:`rebuild_partition` = scan + plan every segment (independent, parallelisable), replay producer
state across them (sequential, small), then publish. The Spark jobs reuse the same three steps.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from .producer_state import initial_state_for, read_log_start_offset, relevant_events, replay_segment
from .publish import write_offset_index, write_time_index, write_transaction_index
from .rebuild import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    EVENT_TXN_DATA,
    SegmentPlan,
    plan_segment,
)
from .records import LogScan, ScanProblem, scan_buffer, scan_log
from .values import AbortedTxn

_LOG_NAME = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def parse_partition_dir(path: str | os.PathLike[str]) -> tuple[str, int]:
    """``(topic, partition)`` from a ``<topic>-<partition>`` directory name; ValueError naming it if not."""
    name = os.path.basename(os.path.normpath(os.fspath(path)))
    match = _PARTITION_DIR.match(name)
    if not match:
        raise ValueError(f"{os.fspath(path)}: not a Kafka partition directory (expected <topic>-<partition>)")
    return match.group("topic"), int(match.group("partition"))


def segment_base_offsets(partition_dir: str | os.PathLike[str]) -> list[int]:
    """Base offsets of the ``<base:020d>.log`` segments in a partition directory, ascending."""
    return sorted(int(m.group(1)) for m in map(_LOG_NAME.match, os.listdir(partition_dir)) if m)


def segment_file(partition_dir: str, base_offset: int, suffix: str) -> str:
    return os.path.join(partition_dir, f"{base_offset:020d}{suffix}")


@dataclass
class SegmentRebuild:
    """The outcome of rebuilding one segment."""

    base_offset: int
    log_path: str
    scan: LogScan
    plan: SegmentPlan
    aborted: list[AbortedTxn]
    fatal: ScanProblem | None
    written: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)

    @property
    def truncation(self) -> ScanProblem | None:
        """The corrupt or incomplete tail Kafka's recovery would cut from the ``.log``."""
        return self.scan.problem


@dataclass
class PartitionRebuild:
    partition_dir: str
    topic: str
    partition: int
    log_start_offset: int
    segments: list[SegmentRebuild]


def plan_partition(
    partition_dir: str | os.PathLike[str],
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
) -> PartitionRebuild:
    """Scan and plan every segment and replay producer state; writes nothing."""
    partition_dir = os.fspath(partition_dir)
    topic, partition = parse_partition_dir(partition_dir)
    log_start = read_log_start_offset(os.path.dirname(os.path.abspath(partition_dir)), topic, partition)
    bases = segment_base_offsets(partition_dir)
    scans = [_scan_or_unreadable(segment_file(partition_dir, b, ".log")) for b in bases]
    plans = [plan_segment(s, b, index_interval_bytes, segment_index_bytes) for s, b in zip(scans, bases)]
    aborted_per_segment = replay_partition(partition_dir, bases, scans, plans, log_start)
    segments = []
    for base, scan, plan, (aborted, replay_fatal) in zip(bases, scans, plans, aborted_per_segment):
        fatals = [p for p in (plan.fatal, replay_fatal) if p is not None]
        fatal = min(fatals, key=lambda p: p.batch_index) if fatals else None
        segments.append(SegmentRebuild(base, segment_file(partition_dir, base, ".log"), scan, plan, aborted, fatal))
    return PartitionRebuild(partition_dir, topic, partition, log_start, segments)


def _scan_or_unreadable(path: str) -> LogScan:
    """``scan_log``; a segment that cannot be read becomes an empty scan whose ``fatal`` says why."""
    try:
        return scan_log(path)
    except (OSError, ValueError) as exc:
        scan = scan_buffer(b"", 0, path)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        scan.fatal = ScanProblem("unreadable_segment", 0, 0, f"cannot read {path}: {reason}")
        return scan


def replay_partition(partition_dir, bases, scans, plans, log_start_offset):
    """Per segment ``(aborted transactions, fatal replay problem)``, with Kafka's starting state.

    Kafka recovers segments in order, each from the newest valid snapshot with ``L < offset <= base``
    (``L`` = log start offset), and writes a snapshot at its map end offset after each one. So: a segment
    with ``base <= L`` starts empty; a segment whose predecessor's map end offset is above ``L`` carries
    the predecessor's state on (that is the snapshot Kafka just wrote); otherwise (the first segment, or
    a predecessor wholly at or below ``L``) it starts from the newest valid pre-existing ``.snapshot``
    in ``(L, base]``, or empty.
    """
    all_events = [p.events for p in plans]
    txn_pids = (
        np.unique(np.concatenate([e["producer_id"][e["kind"] == EVENT_TXN_DATA] for e in all_events]))
        if all_events else np.empty(0, np.int64)
    )
    results = []
    ongoing: dict[int, int] = {}
    previous_map_end: int | None = None
    for base, scan, plan in zip(bases, scans, plans):
        if base <= log_start_offset:
            ongoing, map_end = {}, log_start_offset
        elif previous_map_end is not None and previous_map_end > log_start_offset:
            map_end = previous_map_end  # carry on
        else:
            ongoing, snapshot = initial_state_for(partition_dir, base, log_start_offset)
            map_end = snapshot if snapshot is not None else log_start_offset
        pids = np.union1d(txn_pids, np.fromiter(ongoing.keys(), dtype=np.int64, count=len(ongoing)))
        replay = replay_segment(ongoing, relevant_events(plan.events, pids), scan.positions)
        results.append((replay.aborted, replay.fatal))
        limit = plan.fatal.batch_index + 1 if plan.fatal is not None else scan.batch_count
        v2 = np.flatnonzero(scan.magic[:limit] >= 2)
        previous_map_end = max(map_end, int(scan.last_offsets[v2[-1]]) + 1) if len(v2) else map_end
    return results


def rebuild_partition(
    partition_dir: str | os.PathLike[str],
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    output_dir: str | os.PathLike[str] | None = None,
    backup_dir: str | os.PathLike[str] | None = None,
) -> PartitionRebuild:
    """Rebuild the ``.index``, ``.timeindex`` and ``.txnindex`` of every segment, as Kafka's recovery would.

    With ``output_dir`` the files go to ``output_dir/<topic>-<partition>/`` and the partition is only read.
    A segment whose rebuild Kafka would abort (see :class:`SegmentRebuild.fatal`) gets no file at all.
    The ``.log`` is never modified (a corrupt tail is reported in ``truncation``, not cut).
    ``.txnindex`` is written when there are aborted transactions, and emptied (0 bytes) when a stale
    one exists, as Kafka does.
    """
    result = plan_partition(partition_dir, index_interval_bytes, segment_index_bytes)
    source = result.partition_dir
    target = source if output_dir is None else os.path.join(os.fspath(output_dir), os.path.basename(os.path.normpath(source)))
    os.makedirs(target, exist_ok=True)
    backup = os.fspath(backup_dir) if backup_dir is not None else None
    for seg in result.segments:
        if seg.fatal is not None:
            continue
        plan = seg.plan
        name = lambda suffix: segment_file(target, seg.base_offset, suffix)  # noqa: E731
        for final, write in (
            (name(".index"), lambda f: write_offset_index(f, seg.base_offset, plan.offset_offsets, plan.offset_positions, segment_index_bytes, backup)),
            (name(".timeindex"), lambda f: write_time_index(f, seg.base_offset, plan.time_timestamps, plan.time_offsets, segment_index_bytes, backup)),
        ):
            kept = write(final)
            seg.written.append(final)
            if kept:
                seg.backups.append(kept)
        stale_txn = os.path.lexists(segment_file(source, seg.base_offset, ".txnindex"))
        if seg.aborted or stale_txn:
            final = name(".txnindex")
            kept = write_transaction_index(final, seg.base_offset, seg.aborted, backup)
            seg.written.append(final)
            if kept:
                seg.backups.append(kept)
    return result
