"""The Spark pipeline behind ``verify``, ``rebuild`` and ``repair``.

Stages: (1) discovery and planning on the driver (metadata only); (2) one Spark job over bins of
segments balanced by bytes (:func:`jobs.discovery.task_count` bins): each segment is scanned, planned and
(verify/repair) checked on an executor, which returns a small :class:`SegmentOutcome` (a
:class:`PlanSummary`: no index entries, no per-batch data) and keeps the full plans it may have to write
in Spark's cache (memory, spilling to disk); (3) the small sequential producer-state replay per
partition on the driver, and the ``.txnindex`` checks; (4) the writes, as a second job over the cached
bins (a lost cache block is recomputed: planning is deterministic); (5) the audit rows. Executors read
the log dirs by path, so they must see them (local mode, or the same mount on every node).

Invariants: ``verify`` never opens anything for writing; in-place writes refuse a log dir whose
``.lock`` is held unless forced; ``repair`` rewrites only files with an error finding (plus the
``.log`` tail, when asked, after saving the cut bytes); what reaches the driver per segment is bounded by
its producers and transactions, never by its batches.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

from indexlib import __version__
from indexlib.partition import INDEX_SUFFIXES, plan_segment_file, publish_segment, replay_partition, segment_file
from indexlib.producer_state import read_log_start_offset
from indexlib.publish import fsync_path, log_dir_is_locked
from indexlib.rebuild import PlanSummary, SegmentPlan
from indexlib.verify import (
    Finding,
    check_partition_transactions,
    check_segment_files,
    damaged_index_files,
    directory_findings,
    fatal_finding,
    log_findings,
)
from indexlib.values import AbortedTxn

from .config import Settings
from .discovery import Discovery, Partition, balance_by_bytes, task_count

MODES = ("verify", "rebuild", "repair")


class LockedLogDirError(RuntimeError):
    """An in-place write was asked for in a log dir that a running broker holds."""


@dataclass(frozen=True)
class SegmentTask:
    log_dir: str
    partition_dir: str
    topic: str
    partition: int
    base_offset: int
    log_path: str
    size: int
    active: bool
    index_interval_bytes: int
    segment_index_bytes: int
    check: bool  # run the semantic verify of the existing files
    keep_plan: str  # which full plans the executor keeps for the writes: "all", "damaged" or "none"

    @property
    def key(self) -> tuple[str, int]:
        return self.partition_dir, self.base_offset


@dataclass
class SegmentOutcome:
    """What an executor returns for one segment (small: a plan summary, no scan columns)."""

    task: SegmentTask
    plan: PlanSummary
    batches: int
    file_size: int
    valid_bytes: int
    invalid_bytes: int
    findings: list[Finding]
    identical: dict[str, bool | None]
    index_sizes: dict[str, int | None]
    seconds: float
    aborted: list[AbortedTxn] = field(default_factory=list)
    action: str = "none"
    written: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    error: str | None = None


def process_segment(task: SegmentTask) -> tuple[SegmentOutcome, SegmentPlan | None]:
    """Executor side: scan, plan and (``task.check``) verify one segment's ``.log``, ``.index`` and
    ``.timeindex``. Returns the outcome for the driver and the full plan when ``task.keep_plan`` asks
    for it ("damaged": only when the ``.index`` or ``.timeindex`` has an error finding)."""
    started = time.perf_counter()
    scan, plan = plan_segment_file(task.log_path, task.base_offset, task.index_interval_bytes, task.segment_index_bytes)
    if task.check:
        findings, identical = check_segment_files(task.log_path, task.base_offset, scan, plan, task.active)
    else:
        findings, identical = log_findings(task.log_path, scan, plan.fatal), {}
    sizes = {}
    for suffix in INDEX_SUFFIXES:
        try:
            sizes[suffix] = os.stat(segment_file(task.partition_dir, task.base_offset, suffix)).st_size
        except OSError:
            sizes[suffix] = None
    outcome = SegmentOutcome(task, plan.summary(), scan.batch_count, scan.file_size, scan.valid_bytes,
                             scan.invalid_bytes, findings, identical, sizes, time.perf_counter() - started)
    keep = task.keep_plan == "all" or (
        task.keep_plan == "damaged" and bool(damaged_index_files(task.partition_dir, task.base_offset, findings)))
    return outcome, plan if keep and plan.fatal is None else None


@dataclass(frozen=True)
class WriteTask:
    segment: SegmentTask
    target_dir: str
    aborted: list[AbortedTxn]
    suffixes: tuple[str, ...]
    stale_txn: bool
    backup_dir: str | None
    truncate_log_at: int | None  # cut the .log here (after saving the tail to backup_dir)


def publish(task: WriteTask, plan: SegmentPlan | None) -> tuple[list[str], list[str], str | None]:
    """Executor side: write one segment's chosen files atomically; returns (written, backups, error).
    ``plan`` is the full plan kept by :func:`process_segment`; without one it is planned again."""
    seg = task.segment
    written: list[str] = []
    backups: list[str] = []
    try:
        if task.truncate_log_at is not None:
            backups.append(cut_log_tail(seg.log_path, task.truncate_log_at, task.backup_dir))
            written.append(seg.log_path)
        if task.suffixes:
            if plan is None:
                plan = plan_segment_file(seg.log_path, seg.base_offset, seg.index_interval_bytes, seg.segment_index_bytes)[1]
            os.makedirs(task.target_dir, exist_ok=True)
            w, b = publish_segment(task.target_dir, seg.base_offset, plan, task.aborted, task.suffixes,
                                   task.stale_txn, seg.segment_index_bytes, task.backup_dir)
            written += w
            backups += b
        return written, backups, None
    except (OSError, ValueError) as exc:
        return written, backups, f"{task.target_dir}/{seg.base_offset:020d}: {exc}"


def cut_log_tail(log_path: str, valid_bytes: int, backup_dir: str | None) -> str:
    """Save ``log_path[valid_bytes:]`` to ``backup_dir`` (fsynced), then truncate the ``.log`` there."""
    if backup_dir is None:
        raise ValueError(f"{log_path}: cutting a corrupt tail needs a backup dir")
    os.makedirs(backup_dir, exist_ok=True)
    saved = os.path.join(backup_dir, f"{os.path.basename(log_path)}.tail-from-{valid_bytes}")
    with open(log_path, "rb") as src, open(saved, "wb") as dst:
        src.seek(valid_bytes)
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.flush()
        os.fsync(dst.fileno())
    fsync_path(backup_dir)
    os.truncate(log_path, valid_bytes)
    fsync_path(log_path)
    return saved


@dataclass
class RunOptions:
    mode: str
    run_id: str | None = None
    output_dir: str | None = None
    dry_run: bool = False
    truncate_corrupt_tail: bool = False
    force: bool = False


@dataclass
class RunReport:
    run_id: str
    mode: str
    started: datetime
    finished: datetime
    settings: Settings
    options: RunOptions
    outcomes: list[SegmentOutcome]
    partition_findings: dict[str, list[Finding]]
    skipped: list[tuple[str, str]]
    partitions: list[Partition]

    @property
    def remaining_findings(self) -> list[Finding]:
        """Error findings not fixed by this run's writes."""
        left = [f for fs in self.partition_findings.values() for f in fs if f.severity == "error"]
        for o in self.outcomes:
            fixed = set(o.written) if o.error is None else set()
            left += [f for f in o.findings if f.severity == "error" and f.file not in fixed]
        return left

    @property
    def exit_code(self) -> int:
        failed = any(o.error for o in self.outcomes)
        if self.mode == "verify" or (self.mode == "repair" and self.options.dry_run):
            return 1 if (self.remaining_findings or failed) else 0
        if self.mode == "rebuild":
            return 1 if failed or any(o.plan.fatal is not None or o.action == "failed" for o in self.outcomes) else 0
        return 1 if (self.remaining_findings or failed) else 0


def new_run_id(mode: str) -> str:
    return f"{mode}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def check_locks(partitions: list[Partition], force: bool) -> None:
    for log_dir in sorted({p.log_dir for p in partitions}):
        if log_dir_is_locked(log_dir) and not force:
            raise LockedLogDirError(
                f"{log_dir}: the log dir's .lock is held (a running broker?); stop the broker, or pass --force")


def plan_tasks(discovery: Discovery, settings: Settings, check: bool, keep_plan: str = "none") -> list[SegmentTask]:
    tasks = []
    for p in discovery.partitions:
        topic_settings = settings.for_topic(p.topic)
        for s in p.segments:
            tasks.append(SegmentTask(p.log_dir, p.path, p.topic, p.partition, s.base_offset, s.log_path, s.size,
                                     s.active, topic_settings.index_interval_bytes, topic_settings.segment_index_bytes,
                                     check, keep_plan))
    return tasks


def run(spark, discovery: Discovery, settings: Settings, options: RunOptions, progress=None) -> RunReport:
    """Run one verify/rebuild/repair over the discovered partitions (see the module docstring)."""
    if options.mode not in MODES:
        raise ValueError(f"unknown mode {options.mode!r}")
    started = datetime.now(timezone.utc)
    run_id = options.run_id or new_run_id(options.mode)
    writes_in_place = (options.mode == "rebuild" and options.output_dir is None) or (options.mode == "repair" and not options.dry_run)
    if writes_in_place:
        check_locks(discovery.partitions, options.force)
    check = options.mode in ("verify", "repair")
    keep_plan = {"rebuild": "all", "repair": "none" if options.dry_run else "damaged"}.get(options.mode, "none")
    tasks = plan_tasks(discovery, settings, check, keep_plan)
    sc = spark.sparkContext
    outcomes: list[SegmentOutcome] = []
    scanned = None
    if tasks:
        sizes = [t.size for t in tasks]
        bins = balance_by_bytes(tasks, sizes, task_count(sum(sizes), sc.defaultParallelism, settings.bytes_per_task))
        done = sc.accumulator(0)
        done_bytes = sc.accumulator(0)

        def run_bin(group):
            out = [process_segment(t) for t in group]
            done.add(len(group))
            done_bytes.add(sum(t.size for t in group))
            return out

        scanned = sc.parallelize(bins, len(bins)).map(run_bin)
        if keep_plan != "none":
            from pyspark import StorageLevel

            scanned.persist(StorageLevel.MEMORY_AND_DISK)
        if progress is not None:
            progress.start(len(tasks), sum(sizes), lambda: (done.value, done_bytes.value))
        try:
            outcomes = scanned.flatMap(lambda pairs: [outcome for outcome, _ in pairs]).collect()
        finally:
            if progress is not None:
                progress.stop()
    try:
        outcomes.sort(key=lambda o: (o.task.log_dir, o.task.topic, o.task.partition, o.task.base_offset))
        partition_findings = _replay_partitions(discovery, outcomes, check)
        writes = _plan_writes(outcomes, options, run_id, settings)
        if writes:
            todo = sc.broadcast(writes)

            def write_bin(pairs):
                return [(o.task.key, publish(todo.value[o.task.key], plan)) for o, plan in pairs if o.task.key in todo.value]

            by_key = {o.task.key: o for o in outcomes}
            for key, (written, backups, error) in scanned.flatMap(write_bin).collect():
                o = by_key[key]
                o.written, o.backups, o.error = written, backups, error
                if error:
                    o.action = "failed"
            todo.destroy()
    finally:
        if scanned is not None and keep_plan != "none":
            scanned.unpersist()
    return RunReport(run_id, options.mode, started, datetime.now(timezone.utc), settings, options, outcomes,
                     partition_findings, discovery.skipped, discovery.partitions)


def _replay_partitions(discovery: Discovery, outcomes: list[SegmentOutcome], check: bool) -> dict[str, list[Finding]]:
    """Driver: the sequential producer-state replay per partition (sets each outcome's ``aborted``),
    the ``.txnindex`` checks, and ``cannot_rebuild`` where Kafka's recovery would stop. Returns the
    partition-level findings (directory contents, a bad log start checkpoint)."""
    partition_findings: dict[str, list[Finding]] = {}
    by_partition: dict[str, list[SegmentOutcome]] = {}
    for o in outcomes:
        by_partition.setdefault(o.task.partition_dir, []).append(o)
    for p in discovery.partitions:
        partition_findings[p.path] = directory_findings(p.path) if check else []
        segs = by_partition.get(p.path, [])
        if not segs:
            continue
        try:
            log_start = read_log_start_offset(p.log_dir, p.topic, p.partition)
        except (OSError, ValueError) as exc:
            partition_findings[p.path].append(Finding("bad_log_start_checkpoint", os.path.join(p.log_dir, "log-start-offset-checkpoint"),
                                                      detail=f"{exc}; assuming log start offset 0"))
            log_start = 0
        replays = replay_partition(p.path, [o.task.base_offset for o in segs], [o.plan for o in segs], log_start)
        for o, (aborted, replay_fatal) in zip(segs, replays):
            o.aborted = aborted
            if replay_fatal is not None and not check:
                o.findings.append(fatal_finding(o.task.log_path, replay_fatal))
        if check:
            txn = check_partition_transactions([o.task.log_path for o in segs], [o.task.base_offset for o in segs],
                                               [o.plan for o in segs], replays)
            for o, (findings, identical), (_, replay_fatal) in zip(segs, txn, replays):
                o.findings += findings
                o.identical[".txnindex"] = identical
                if replay_fatal is not None:
                    o.identical = dict.fromkeys(INDEX_SUFFIXES)
        for o, (_, replay_fatal) in zip(segs, replays):
            if replay_fatal is not None or o.plan.fatal is not None:
                o.action = "cannot_rebuild"
    return partition_findings


def _plan_writes(outcomes: list[SegmentOutcome], options: RunOptions, run_id: str, settings: Settings) -> dict[tuple[str, int], WriteTask]:
    """Which files each segment gets written, by segment key; sets each outcome's ``action``."""
    writes = {}
    backup_root = settings.backup_dir or os.path.join(os.getcwd(), "kafka-index-backups")
    for o in outcomes:
        t = o.task
        if o.action == "cannot_rebuild" or options.mode == "verify":
            continue
        backup_dir = os.path.join(backup_root, run_id, os.path.basename(t.partition_dir))
        stale = os.path.lexists(segment_file(t.partition_dir, t.base_offset, ".txnindex"))
        if options.mode == "rebuild":
            target = t.partition_dir if options.output_dir is None else os.path.join(options.output_dir, os.path.basename(t.partition_dir))
            o.action = "rebuilt"
            keep = backup_dir if (options.output_dir is None and settings.backup_dir) else None
            writes[t.key] = WriteTask(t, target, o.aborted, INDEX_SUFFIXES, stale, keep, None)
            continue
        # repair: only the damaged files (and the .log tail when asked)
        damaged = tuple(damaged_index_files(t.partition_dir, t.base_offset, o.findings))
        cut = None
        if options.truncate_corrupt_tail and any(f.file == t.log_path and f.kind.startswith("log_") for f in o.findings):
            cut = o.valid_bytes
        if not damaged and cut is None:
            continue
        o.action = "would_repair" if options.dry_run else "repaired"
        if not options.dry_run:
            writes[t.key] = WriteTask(t, t.partition_dir, o.aborted, damaged, stale, backup_dir, cut)
    return writes


def summary_rows(report: RunReport) -> list[dict]:
    """One dict per partition: the final summary table."""
    rows: dict[str, dict] = {}
    for o in report.outcomes:
        t = o.task
        row = rows.setdefault(t.partition_dir, {"partition": f"{t.topic}-{t.partition}", "log_dir": t.log_dir, "segments": 0,
                                                "bytes": 0, "findings": 0, "kinds": set(), "written": 0, "actions": set()})
        row["segments"] += 1
        row["bytes"] += o.file_size
        errors = [f for f in o.findings if f.severity == "error"]
        row["findings"] += len(errors)
        row["kinds"].update(f.kind for f in errors)
        row["written"] += len(o.written)
        if o.action != "none":
            row["actions"].add(o.action)
    for path, findings in report.partition_findings.items():
        errors = [f for f in findings if f.severity == "error"]
        if errors and path in rows:
            rows[path]["findings"] += len(errors)
            rows[path]["kinds"].update(f.kind for f in errors)
    return list(rows.values())


TOOL_VERSION = __version__
