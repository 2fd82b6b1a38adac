"""One partition in memory, and the steps every run is made of.

The steps: :func:`plan_segment_file` (scan + plan one segment: independent, parallel),
:func:`replay_partition` (producer state across the segments: sequential, small), :func:`stage_segment`
and :func:`install_segment` (atomic publishing). :mod:`indexlib.engine.runner` assembles them into the runs the
command lines and the Spark job make. :func:`plan_partition` and :func:`rebuild_partition` keep a whole
partition's summaries and plans in memory: the library API for one partition, and the tests' reference.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..format.errors import KafkaIndexError
from ..format.layout import INDEX_SUFFIXES, LOG_SUFFIX, parse_partition_dir, segment_base_offsets, segment_file
from ..format.records import ScanProblem
from ..format.values import AbortedTxn
from ..recovery.checks import check_partition_transactions, check_segment_files, directory_findings, has_invalid_tail
from ..recovery.entry_plan import PlanSummary, SegmentPlan, plan_segment
from ..recovery.findings import ERROR, Finding, files_to_rebuild
from ..recovery.log_scan import (
    EVENT_TXN_DATA,
    NO_PROBES,
    ExistingIndex,
    LogSummary,
    Probes,
    probes_for,
    unreadable_summary,
)
from ..recovery.producer_state import relevant_events, replay_segment
from ..recovery.settings import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES, check_index_setting
from ..storage.partition_files import (
    initial_state_for,
    partition_file_names,
    read_existing_indexes,
    read_existing_txn_index,
    read_log_start_offset,
    summarize_log,
    tail_is_zero,
)
from ..storage.publish import (
    discard,
    fsync_path,
    install,
    keep_backup,
    stage_offset_index,
    stage_time_index,
    stage_transaction_index,
)


class UnrebuildableSegmentError(KafkaIndexError, ValueError, TypeError):
    """Index files staged for a segment its plan cannot give them for: a fatal plan (Kafka's recovery
    refuses the segment; a ``ValueError``), or a :class:`PlanSummary`, which keeps no index entries (a
    ``TypeError``)."""


@dataclass
class SegmentRebuild:
    """The outcome of rebuilding one segment."""

    base_offset: int
    log_path: str
    summary: LogSummary
    plan: SegmentPlan
    aborted: list[AbortedTxn]
    fatal: ScanProblem | None
    written: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    existing: dict[str, ExistingIndex] | None = None  # the .index/.timeindex as read (verify reads them)
    zero_tail: bool = False  # the .log's invalid tail is all zeros


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
    read_indexes: bool = False,
) -> PartitionRebuild:
    """Scan and plan every segment and replay producer state; writes nothing. ``read_indexes``: also
    read each segment's existing ``.index``/``.timeindex`` (``SegmentRebuild.existing``), and look
    their entries up during the scan (what verify needs)."""
    partition_dir = os.fspath(partition_dir)
    topic, partition = parse_partition_dir(partition_dir)
    log_start = read_log_start_offset(os.path.dirname(os.path.abspath(partition_dir)), topic, partition)
    bases = segment_base_offsets(partition_dir)
    summaries, plans, existing = [], [], []
    for base in bases:
        indexes = read_existing_indexes(partition_dir, base) if read_indexes else None
        summary, plan = plan_segment_file(
            segment_file(partition_dir, base, LOG_SUFFIX),
            base,
            index_interval_bytes,
            segment_index_bytes,
            probes_for(indexes, base) if indexes is not None else NO_PROBES,
        )
        summaries.append(summary)
        plans.append(plan)
        existing.append(indexes)
    aborted_per_segment = replay_partition(partition_dir, bases, plans, log_start)
    segments = []
    for base, summary, plan, indexes, (aborted, replay_fatal) in zip(
        bases, summaries, plans, existing, aborted_per_segment, strict=True
    ):
        fatals = [p for p in (plan.fatal, replay_fatal) if p is not None]
        fatal = min(fatals, key=lambda p: p.batch_index) if fatals else None
        log_path = segment_file(partition_dir, base, LOG_SUFFIX)
        zero_tail = has_invalid_tail(summary) and tail_is_zero(log_path, summary.valid_bytes)
        segments.append(
            SegmentRebuild(base, log_path, summary, plan, aborted, fatal, existing=indexes, zero_tail=zero_tail)
        )
    return PartitionRebuild(partition_dir, topic, partition, log_start, segments)


@dataclass
class SegmentVerify:
    """Findings for one segment; ``identical[suffix]``: the file equals the rebuild (``None``: the file
    is absent and the rebuild writes none, or the segment cannot be rebuilt)."""

    base_offset: int
    log_path: str
    active: bool
    findings: list[Finding]
    identical: dict[str, bool | None]
    rebuild: SegmentRebuild | None = field(default=None, repr=False, compare=False)

    @property
    def damaged_files(self) -> list[str]:
        """Suffixes of this segment's index files that have an error finding (what a repair rewrites)."""
        return files_to_rebuild(os.path.dirname(self.log_path), self.base_offset, self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_offset": self.base_offset,
            "log_path": self.log_path,
            "active": self.active,
            "identical": dict(self.identical),
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass
class PartitionVerify:
    """The verify report of one partition directory."""

    partition_dir: str
    topic: str
    partition: int
    segments: list[SegmentVerify]
    findings: list[Finding]  # partition-level: orphan and unexpected files

    @property
    def all_findings(self) -> list[Finding]:
        return self.findings + [f for s in self.segments for f in s.findings]

    @property
    def healthy(self) -> bool:
        return not any(f.severity == ERROR for f in self.all_findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition_dir": self.partition_dir,
            "topic": self.topic,
            "partition": self.partition,
            "healthy": self.healthy,
            "findings": [f.to_dict() for f in self.findings],
            "segments": [s.to_dict() for s in self.segments],
        }


def plan_segment_file(
    log_path: str,
    base_offset: int,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    probes: Probes = NO_PROBES,
) -> tuple[LogSummary, SegmentPlan]:
    """Scan and plan one segment: the independent, parallel part of a partition's rebuild. A segment
    that cannot be read gets an empty summary whose ``fatal`` says why."""
    check_index_setting("plan_segment_file", "index_interval_bytes", index_interval_bytes)
    try:
        summary = summarize_log(log_path, base_offset, index_interval_bytes, probes)
    except (OSError, ValueError) as exc:
        summary = unreadable_summary(log_path, base_offset, index_interval_bytes, exc)
    return summary, plan_segment(summary, segment_index_bytes)


def replay_partition(
    partition_dir: str, bases: list[int], plans: Sequence[SegmentPlan | PlanSummary], log_start_offset: int
) -> list[tuple[list[AbortedTxn], ScanProblem | None]]:
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
            ongoing, snapshot = initial_state_for(partition_dir, base, log_start_offset)
            map_end = snapshot if snapshot is not None else log_start_offset
        pids = np.union1d(txn_pids, np.fromiter(ongoing.keys(), dtype=np.int64, count=len(ongoing)))
        replay = replay_segment(ongoing, relevant_events(plan.events, pids))
        results.append((replay.aborted, replay.fatal))
        previous_map_end = max(map_end, plan.next_v2_offset) if plan.next_v2_offset is not None else map_end
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
    The ``.log`` is never modified (a corrupt tail is reported in each segment's ``summary.problem``, not cut).
    ``.txnindex`` is written when there are aborted transactions, and emptied (0 bytes) when a stale
    one exists, as Kafka does.
    """
    result = plan_partition(partition_dir, index_interval_bytes, segment_index_bytes)
    source = result.partition_dir
    target = (
        source
        if output_dir is None
        else os.path.join(os.fspath(output_dir), os.path.basename(os.path.normpath(source)))
    )
    os.makedirs(target, exist_ok=True)
    backup = os.fspath(backup_dir) if backup_dir is not None else None
    for seg in result.segments:
        if seg.fatal is None:
            stale_txn = os.path.lexists(segment_file(source, seg.base_offset, ".txnindex"))
            seg.written, seg.backups = publish_segment(
                target, seg.base_offset, seg.plan, seg.aborted, INDEX_SUFFIXES, stale_txn, segment_index_bytes, backup
            )
    return result


def verify_partition(
    partition_dir: str | os.PathLike[str],
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
) -> PartitionVerify:
    """Verify every segment's index files against its ``.log`` (:mod:`indexlib.recovery.checks`)."""
    planned = plan_partition(partition_dir, index_interval_bytes, segment_index_bytes, read_indexes=True)
    return verify_planned(planned)


def verify_planned(planned: PartitionRebuild) -> PartitionVerify:
    """:func:`verify_partition` on an already planned partition (planned with ``read_indexes=True``)."""
    segs = planned.segments
    last_base = segs[-1].base_offset if segs else None
    per_file = [
        check_segment_files(
            s.log_path, s.base_offset, s.summary, s.plan, s.base_offset == last_base, s.existing, s.zero_tail
        )
        for s in segs
    ]
    txn = check_partition_transactions(
        [s.log_path for s in segs],
        [s.base_offset for s in segs],
        [s.plan for s in segs],
        [(s.aborted, s.fatal if s.fatal is not s.plan.fatal else None) for s in segs],
        [
            read_existing_txn_index(segment_file(planned.partition_dir, s.base_offset, ".txnindex"), s.base_offset)
            for s in segs
        ],
    )
    segments = []
    for seg, (findings, identical), (txn_findings, txn_identical) in zip(segs, per_file, txn, strict=True):
        identical[".txnindex"] = txn_identical
        if seg.fatal is not None and seg.fatal is not seg.plan.fatal:  # the replay failed: no rebuild
            identical = dict.fromkeys(INDEX_SUFFIXES)
        segments.append(
            SegmentVerify(
                seg.base_offset, seg.log_path, seg.base_offset == last_base, findings + txn_findings, identical, seg
            )
        )
    names = partition_file_names(planned.partition_dir)
    return PartitionVerify(
        planned.partition_dir,
        planned.topic,
        planned.partition,
        segments,
        directory_findings(planned.partition_dir, names),
    )


def stage_segment(
    target_dir: str,
    base_offset: int,
    plan: SegmentPlan | PlanSummary,
    aborted: list[AbortedTxn],
    suffixes: Collection[str],
    stale_txn: bool,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    tag: str | None = None,
) -> dict[str, str]:
    """Stage the chosen index files of one rebuilt segment beside their final names (see
    :mod:`indexlib.storage.publish`); returns ``{final: staged}`` in ``INDEX_SUFFIXES`` order. Kafka sees nothing
    until :func:`install_segment`. ``.index``/``.timeindex`` need a full :class:`SegmentPlan`; ``.txnindex``
    is staged only when there are aborted transactions or ``stale_txn`` (an existing one, which becomes 0
    bytes as Kafka does). Never call this for a segment whose plan is fatal. On failure nothing is left."""
    if plan.fatal is not None:
        raise UnrebuildableSegmentError(f"segment {base_offset} of {target_dir} cannot be rebuilt: {plan.fatal.detail}")

    def full_plan() -> SegmentPlan:
        """The plan, with the index entries that ``.index``/``.timeindex`` are written from."""
        if not isinstance(plan, SegmentPlan):
            raise UnrebuildableSegmentError(
                f"segment {base_offset} of {target_dir}: a {type(plan).__name__} has no index entries"
            )
        return plan

    stagers = {
        ".index": lambda f: stage_offset_index(
            f, base_offset, full_plan().offset_offsets, full_plan().offset_positions, segment_index_bytes, tag
        ),
        ".timeindex": lambda f: stage_time_index(
            f, base_offset, full_plan().time_timestamps, full_plan().time_offsets, segment_index_bytes, tag
        ),
        ".txnindex": lambda f: stage_transaction_index(f, base_offset, aborted, tag),
    }
    staged: dict[str, str] = {}
    try:
        for suffix in INDEX_SUFFIXES:
            if suffix not in suffixes or (suffix == ".txnindex" and not (aborted or stale_txn)):
                continue
            final = segment_file(target_dir, base_offset, suffix)
            staged[final] = stagers[suffix](final)
    except BaseException:
        for path in staged.values():
            discard(path)
        raise
    return staged


def install_segment(
    staged: dict[str, str], backup_dir: str | None = None, sync_dir: bool = True, written: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """Install staged files over their final names, each old file kept in ``backup_dir`` first (if
    given); returns (written, backups). Staged files never survive, installed or not. ``written``, if
    given, is appended to as each file is installed (so a caller knows what was replaced after a failure)."""
    written = [] if written is None else written
    backups = []
    try:
        for final, path in staged.items():
            if backup_dir is not None and (kept := keep_backup(final, backup_dir)):
                backups.append(kept)
            install(path, final, sync_dir=False)
            written.append(final)
    finally:
        for path in staged.values():
            discard(path)
    if sync_dir:
        for directory in {os.path.dirname(final) for final in written}:
            fsync_path(directory)
    return written, backups


def publish_segment(
    target_dir: str,
    base_offset: int,
    plan: SegmentPlan,
    aborted: list[AbortedTxn],
    suffixes: Collection[str],
    stale_txn: bool,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    backup_dir: str | None = None,
) -> tuple[list[str], list[str]]:
    """Stage and install the chosen index files of one rebuilt segment (:func:`stage_segment`, then
    :func:`install_segment`); returns (written, backups)."""
    staged = stage_segment(target_dir, base_offset, plan, aborted, suffixes, stale_txn, segment_index_bytes)
    return install_segment(staged, backup_dir)
