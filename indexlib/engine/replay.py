"""The driver's replay of producer state over one partition's outcomes, in order: each segment's aborted
transactions, its ``.txnindex`` findings, and whether Kafka's recovery would refuse it."""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..format.errors import error_line
from ..format.layout import (
    CLUSTER_METADATA_TOPIC,
    SNAPSHOT_SUFFIX,
    segment_file,
    staged_by_run,
)
from ..format.leader_epoch_checkpoint import format_leader_epoch_checkpoint
from ..format.producer_snapshot import ProducerSnapshotEntry, SnapshotError, parse_snapshot_entries
from ..format.records import ScanProblem
from ..format.values import AbortedTxn
from ..recovery.checks import (
    check_partition_transactions,
    directory_findings,
    fatal_finding,
)
from ..recovery.entry_plan import PlanSummary, SegmentPlan
from ..recovery.findings import REWRITE_FROM_LOG, Finding, kind
from ..recovery.log_scan import EVENT_DATA, EVENT_TXN_DATA, LogSummary, sorted_unique
from ..recovery.producer_state import (
    apply_segment,
    recovered_leader_epochs,
    relevant_events,
    replay_segment,
    state_from_snapshot,
)
from ..recovery.settings import DEFAULT_INDEX_INTERVAL_BYTES
from ..recovery.state_checks import (
    cluster_findings,
    leader_epoch_findings,
    leader_epoch_log_findings,
    log_start_findings,
    readable_leader_epochs,
    readable_snapshots,
    repaired_leader_epochs,
    replay_snapshots,
    snapshot_findings,
    snapshot_log_findings,
    snapshot_rewrites,
)
from ..storage import (
    Partition,
    Segment,
    last_offset_before_batch,
    partition_file_names,
    read_existing_txn_index,
    read_file,
    read_leader_epoch_text,
    read_log_start_offset,
    read_partition_topic_id,
    read_snapshot_files,
    snapshot_offsets,
    summarize_log,
)
from .segment_task import SegmentOutcome

if TYPE_CHECKING:
    from ..format.cluster_metadata import ClusterFacts
    from ..storage import Store


# ------------------------------------------------------------------------------------------- replay
@dataclass(frozen=True)
class SegmentReplay:
    """The partition-side facts about one segment: from the producer-state replay and the ``.txnindex``."""

    aborted: list[AbortedTxn]
    fatal: ScanProblem | None  # Kafka's recovery would stop here (found only by the replay)
    findings: list[Finding]  # the .txnindex's, and the replay's fatal problem
    txn_identical: bool | None


@dataclass(frozen=True)
class PartitionReplay:
    findings: list[Finding]  # partition-level: directory contents, a bad log start checkpoint
    segments: list[SegmentReplay]  # in the order of the partition's outcomes (ascending base offset)
    # the file Kafka would have written in place of each partition file with a "rewrite from the log" finding,
    # where the log says what that is: path -> content
    rewrites: dict[str, bytes] = field(default_factory=dict)


def replay_outcomes(
    partition: Partition,
    outcomes: list[SegmentOutcome],
    check: bool,
    run_id: str,
    cluster: ClusterFacts | None = None,
    store: Store | None = None,
) -> PartitionReplay:
    """Replay producer state over one partition's outcomes (ascending base offset) and, when ``check``,
    check its ``.txnindex`` files and directory (this run's own staged files are not leftovers), and the dir
    against the cluster's metadata (``cluster``, when read). Its files are read through ``store`` (None: the local
    disk)."""
    if partition.unreadable is not None:
        detail = f"{partition.unreadable}; nothing in it was verified or written"
        return PartitionReplay([Finding("unreadable_partition", partition.path, detail=detail)], [])
    findings: list[Finding] = []
    snapshots: dict[str, bytes | str] = {}
    epoch_path, epoch_text, epoch_unreadable = "", None, None
    if check:
        names = partition_file_names(partition.path, store)
        findings = [
            f for f in directory_findings(partition.path, names) if not staged_by_run(os.path.basename(f.file), run_id)
        ]
        snapshots = read_snapshot_files(partition.path, names, store)
        findings += snapshot_findings(snapshots)
        epoch_path, epoch_text, epoch_unreadable = read_leader_epoch_text(partition.path, store)
        findings += leader_epoch_findings(epoch_path, epoch_text, epoch_unreadable)
        if cluster is not None and partition.topic != CLUSTER_METADATA_TOPIC:
            epochs = readable_leader_epochs(epoch_path, epoch_text)
            topic_id = read_partition_topic_id(partition.path, store)
            findings += cluster_findings(
                partition.path, partition.topic, partition.partition, topic_id, epochs, epoch_path, cluster
            )
    if not outcomes:
        return PartitionReplay(findings, [])
    try:
        log_start = read_log_start_offset(partition.log_dir, partition.topic, partition.partition, store)
    except (OSError, ValueError):  # reported once for the log dir (unreadable_log_start_points)
        log_start = 0
    bases = [o.task.base_offset for o in outcomes]
    plans: list[SegmentPlan | PlanSummary] = [o.plan for o in outcomes]
    if check:
        findings += log_start_findings(partition.log_dir, partition.name, log_start, bases[-1], plans[-1])
    replays = replay_partition(partition, bases, plans, log_start, store)
    rewrites: dict[str, bytes] = {}
    if check and all(p.fatal is None for p in plans):  # epochs past a refused batch are not known
        log_epochs = recovered_leader_epochs([], [p.epoch_starts for p in plans])
        if epoch_unreadable is None:
            before = _last_offset_before(outcomes, store)
            firsts = [(int(p.epoch_starts[0]["epoch"]), int(p.epoch_starts[0]["start_offset"])) for p in plans
                      if len(p.epoch_starts)]  # fmt: skip
            findings += leader_epoch_log_findings(epoch_path, epoch_text, log_epochs, log_start, before, firsts)
            if any(f.file == epoch_path and kind(f.kind).triggers == REWRITE_FROM_LOG for f in findings):
                entries = repaired_leader_epochs(epoch_text, log_epochs, log_start)
                rewrites[epoch_path] = format_leader_epoch_checkpoint(entries).encode()
    if check and snapshots:
        known = [
            None if plan.fatal or fatal else plan.producers for plan, (_, fatal) in zip(plans, replays, strict=True)
        ]
        inside = [o.plan.producers_at for o in outcomes]
        snapshot_replays = replay_snapshots(
            bases, known, plans[-1].next_v2_offset, readable_snapshots(snapshots), inside
        )
        findings += snapshot_log_findings(snapshots, snapshot_replays)
        rewrites.update(snapshot_rewrites(snapshots, snapshot_replays))
    if check:
        txn_files = [
            read_existing_txn_index(segment_file(partition.path, base, ".txnindex"), base, store) for base in bases
        ]
        txn = check_partition_transactions([o.task.log_path for o in outcomes], bases, plans, replays, txn_files)
    else:
        txn = [
            ([fatal_finding(o.task.log_path, fatal)] if fatal else [], None)
            for o, (_, fatal) in zip(outcomes, replays, strict=True)
        ]
    segments = [
        SegmentReplay(aborted, fatal, txn_findings, txn_identical)
        for (aborted, fatal), (txn_findings, txn_identical) in zip(replays, txn, strict=True)
    ]
    return PartitionReplay(findings, segments, rewrites)


def _last_offset_before(outcomes: list[SegmentOutcome], store: Store | None) -> Callable[[int], int | None]:
    """For the leader-epoch check: the last offset of the batch before the batch at an offset (a segment's first
    batch: the previous segment's last offset; else read from its ``.log``)."""

    def last_offset_before(offset: int) -> int | None:
        bases = [o.task.base_offset for o in outcomes]
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            return None
        if outcomes[i].plan.batch_count and offset == outcomes[i].task.base_offset:
            return outcomes[i - 1].plan.last_offset if i > 0 and outcomes[i - 1].plan.batch_count else None
        return last_offset_before_batch(outcomes[i].task.log_path, offset, store)

    return last_offset_before


def replay_partition(
    partition: Partition,
    bases: list[int],
    plans: Sequence[SegmentPlan | PlanSummary],
    log_start_offset: int,
    store: Store | None = None,
) -> list[tuple[list[AbortedTxn], ScanProblem | None]]:
    """Per segment ``(aborted transactions, fatal replay problem)`` of ``bases`` (the partition's from one on),
    with Kafka's starting state.

    Kafka recovers segments in order, each from the newest valid snapshot with ``L < offset <= base``
    (``L`` = log start offset) and the segments between it and the base replayed, and writes a snapshot at its map
    end offset after each one. So: a segment with ``base <= L`` starts empty; a segment whose predecessor's map end
    offset is above ``L`` carries the predecessor's state on (that is the snapshot Kafka just wrote); otherwise
    (the first of ``bases``, or a predecessor wholly at or below ``L``) it starts from :func:`state_before`.
    """
    all_events = [p.events for p in plans]
    txn_pids = (
        sorted_unique(np.concatenate([e["producer_id"][e["kind"] == EVENT_TXN_DATA] for e in all_events]))
        if all_events
        else np.empty(0, np.int64)
    )
    results = []
    ongoing: dict[int, int] = {}
    previous_map_end: int | None = None
    for base, plan in zip(bases, plans, strict=True):
        if base <= log_start_offset:
            ongoing, map_end = {}, log_start_offset
        elif previous_map_end is not None and previous_map_end > log_start_offset:
            map_end = previous_map_end  # carry on
        else:
            ongoing, map_end = dict(state_before(partition, base, log_start_offset, store).ongoing), base
        if len(txn_pids) or ongoing:
            pids = sorted_unique(np.concatenate((txn_pids, np.fromiter(ongoing, dtype=np.int64, count=len(ongoing)))))
            events = relevant_events(plan.events, pids)
        else:  # relevant_events with no transactional producer: every event but plain data
            events = plan.events[plan.events["kind"] != EVENT_DATA]
        replay = replay_segment(ongoing, events)
        results.append((replay.aborted, replay.fatal))
        previous_map_end = max(map_end, plan.next_v2_offset) if plan.next_v2_offset is not None else map_end
    return results


# ------------------------------------------------------------------------ the state before a partition's segment
@dataclass(frozen=True)
class StateBefore:
    """The producer state before the segment at ``base`` as Kafka's ``recoverSegment`` rebuilds it
    (``UnifiedLog.rebuildProducerState``): loaded at ``start`` (the newest snapshot in ``(L, base]`` Kafka reads;
    none: the log start ``L``, empty), then the segments from there to the base replayed.

    ``ongoing``: the open transactions (producer id -> first offset). ``producers``: the whole state (expired
    producers dropped at load), ``None`` where it is not known here (the replay starts inside a segment, or a
    segment's producer states are not known). ``passed``: the snapshots Kafka takes on the way (the bases of the
    log's last two segments it replays, above ``start``: ``takeSnapshot`` writes only past the last snapshot):
    offset -> the state there. ``refused``: the snapshot files it found
    refused and deletes. ``why``: set when even ``ongoing`` is not known (a segment to replay cannot be read whole,
    or the log start inside a segment): then only the broker's own recovery gets it right."""

    base: int
    start: int
    ongoing: dict[int, int]
    producers: dict[int, ProducerSnapshotEntry] | None
    passed: dict[int, dict[int, ProducerSnapshotEntry]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    why: str | None = None


def state_before(
    partition: Partition, base: int, log_start: int, store: Store | None = None, now_ms: int | None = None
) -> StateBefore:
    """:class:`StateBefore` the segment of ``partition`` at ``base`` (``base > log_start``); ``now_ms``: when the
    state is loaded (Kafka drops the producers expired then; None: none dropped)."""
    directory = partition.path
    refused: list[str] = []
    start, loaded = log_start, {}
    for offset in reversed(snapshot_offsets(directory, store)):
        if not log_start < offset <= base:
            continue
        path = segment_file(directory, offset, SNAPSHOT_SUFFIX)
        try:
            loaded = state_from_snapshot(parse_snapshot_entries(read_file(path, store), path), now_ms)
        except (SnapshotError, OSError):
            refused.append(path)
            continue
        start = offset
        break
    ongoing = {pid: e.current_txn_first_offset for pid, e in loaded.items() if e.has_open_transaction}
    producers: dict[int, ProducerSnapshotEntry] | None = dict(loaded)
    ends = [s.base_offset for s in partition.segments[1:]] + [1 << 63]  # each segment's end: the next one's base
    replayed = [s for s, end in zip(partition.segments, ends, strict=True) if s.base_offset < base and end > start]
    if not replayed:
        return StateBefore(base, start, ongoing, producers, {}, refused)
    bases = [s.base_offset for s in partition.segments]
    inside = replayed[0].base_offset < start
    if inside and start == log_start:  # the log start may fall inside a batch: Kafka reads that batch whole
        why = f"the producer state before {base} is replayed from the log start {log_start}, inside a segment"
        return StateBefore(base, start, ongoing, None, {}, refused, why)
    passed: dict[int, dict[int, ProducerSnapshotEntry]] = {}
    for segment in replayed:
        if producers is not None and segment.base_offset in bases[-2:] and segment.base_offset > start:
            passed[segment.base_offset] = producers
        summary, why = _whole_summary(segment, store)
        if summary is None:
            return StateBefore(base, start, ongoing, None, {}, refused, why)
        events = summary.events[summary.events["offset"] >= start] if inside else summary.events
        replay = replay_segment(ongoing, events)
        if replay.fatal is not None:
            return StateBefore(base, start, ongoing, None, {}, refused, f"{segment.log_path}: {replay.fatal.detail}")
        whole = not inside or segment is not replayed[0]
        producers = None if producers is None or summary.producers is None or not whole else (
            apply_segment(producers, summary.producers)
        )  # fmt: skip
    return StateBefore(base, start, ongoing, producers, passed, refused)


def _whole_summary(segment: Segment, store: Store | None) -> tuple[LogSummary | None, str]:
    """A segment's summary when it reads whole (Kafka's replay reads every batch of it), else None and why not."""
    if store is not None:
        return None, f"{segment.log_path}: a segment to replay is not on this machine's disk"
    try:
        summary = summarize_log(segment.log_path, segment.base_offset, DEFAULT_INDEX_INTERVAL_BYTES)
    except (OSError, ValueError) as exc:
        return None, error_line(exc, segment.log_path)
    if summary.invalid_bytes or summary.fatal is not None:
        return None, f"{segment.log_path}: the segment cannot be read whole"
    return summary, ""
