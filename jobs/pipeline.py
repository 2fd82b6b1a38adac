"""The Spark pipeline behind ``verify``, ``rebuild`` and ``repair``.

Stages: (1) discovery and planning on the driver (metadata only); (2) ONE Spark job over bins of
segments balanced by bytes (:func:`jobs.discovery.task_count` bins): each segment is scanned, planned and
(verify/repair) checked on an executor, which *stages* the ``.index``/``.timeindex`` files it will
rewrite (written and fsynced under hidden temporary names, the old files copied to the backup dir) and
returns a small :class:`SegmentOutcome` (a :class:`PlanSummary`: no index entries, no per-batch data);
(3) on the driver, the sequential producer-state replay per partition and the ``.txnindex`` checks;
(4) on the driver, the commit: staged files renamed over the old ones (or discarded where the replay
found that Kafka's recovery would stop), ``.txnindex`` files written, a corrupt ``.log`` tail cut when
asked; (5) the audit rows. Executors and driver use the log dirs by path, so all of them must see them
(local mode, or the same mount on every node).

Invariants: ``verify`` never opens anything for writing; in-place writes refuse a log dir whose
``.lock`` is held unless forced; ``repair`` rewrites only files with an error finding (plus the
``.log`` tail, when asked, after saving the cut bytes); Kafka never sees a file of a segment that
cannot be rebuilt; what reaches the driver per segment is bounded by its producers and transactions,
never by its batches.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from indexlib import __version__
from indexlib.findings import CUT_TAIL, Finding, kind
from indexlib.layout import INDEX_SUFFIXES, LOG_START_OFFSET_CHECKPOINT, segment_file, staged_by_run
from indexlib.partition import install_segment, plan_segment_file, replay_partition, stage_segment
from indexlib.producer_state import read_log_start_offset
from indexlib.publish import discard, fsync_path, keep_backup, log_dir_is_locked
from indexlib.rebuild import PlanSummary
from indexlib.values import AbortedTxn
from indexlib.verify import (
    check_partition_transactions,
    check_segment_files,
    damaged_index_files,
    directory_findings,
    fatal_finding,
    log_findings,
)

from .config import Settings
from .discovery import Discovery, Partition, balance_by_bytes, task_count

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

MODES = ("verify", "rebuild", "repair")


class LockedLogDirError(RuntimeError):
    """An in-place write was asked for in a log dir that a running broker holds."""


class Progress(Protocol):
    """What :func:`run` reports the Spark job's progress to (:class:`jobs.cli.ConsoleProgress`)."""

    def start(self, total: int, total_bytes: int, poll: Callable[[], tuple[int, int]]) -> None: ...

    def stop(self) -> None: ...


#: A run id names a backup dir and tags staged files: no '/', whitespace, control characters or '~'
#: ('~' separates the task attempt in staged names), no leading '.', at most 200 characters.
RUN_ID = re.compile(r"[^/\s.~\x00-\x1f][^/\s~\x00-\x1f]{0,199}")


def check_run(discovery: Discovery, options: RunOptions) -> None:
    """Refuse, before anything runs, what a run cannot do safely (``ValueError`` with the reason): a
    malformed run id; one partition name in two log dirs when writing (its backup dir, or its
    ``--output-dir`` dir, is named by the partition alone)."""
    if options.run_id is not None and not RUN_ID.fullmatch(options.run_id):
        raise ValueError(
            f"run id {options.run_id!r}: it names backup dirs and files, so no '/', '~', whitespace "
            "or leading '.', at most 200 characters"
        )
    if options.read_only:
        return
    where: dict[str, str] = {}
    for p in discovery.partitions:
        if where.setdefault(p.name, p.log_dir) != p.log_dir:
            raise ValueError(
                f"{p.name} is in both {where[p.name]} and {p.log_dir}; its backups (and --output-dir) are "
                f"named by partition, so {options.mode} these log dirs in separate runs"
            )


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
    stage: str = "none"  # which .index/.timeindex to stage: "all", "damaged" (error findings) or "none"
    target_dir: str | None = None  # where staged files go (the partition dir, or under --output-dir)
    backup_dir: str | None = None  # copy the files to be replaced here first
    run_id: str | None = None  # tags staged file names


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
    staged: dict[str, str] = field(default_factory=dict)  # final path -> staged path, not installed yet
    aborted: list[AbortedTxn] = field(default_factory=list)
    action: str = "none"
    written: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    error: str | None = None


STAGED_BY_EXECUTORS = (".index", ".timeindex")  # the files that need the full plan; .txnindex needs the replay


def process_segment(task: SegmentTask, tag: str | None = None) -> SegmentOutcome:
    """Executor side: scan, plan and (``task.check``) verify one segment's ``.log``, ``.index`` and
    ``.timeindex``; stage the ``.index``/``.timeindex`` the run will write (``task.stage``; staged names
    carry ``tag``, default the run id), backing up the old ones. A staging failure is recorded in
    ``error`` with nothing left staged. ``seconds`` covers all of it."""
    started = time.perf_counter()
    scan, plan = plan_segment_file(task.log_path, task.base_offset, task.index_interval_bytes, task.segment_index_bytes)
    if task.check:
        findings, identical = check_segment_files(task.log_path, task.base_offset, scan, plan, task.active)
    else:
        findings, identical = log_findings(task.log_path, scan, plan.fatal), {}
    sizes: dict[str, int | None] = {}
    for suffix in INDEX_SUFFIXES:
        try:
            sizes[suffix] = os.stat(segment_file(task.partition_dir, task.base_offset, suffix)).st_size
        except OSError:
            sizes[suffix] = None
    outcome = SegmentOutcome(
        task,
        plan.summary(),
        scan.batch_count,
        scan.file_size,
        scan.valid_bytes,
        scan.invalid_bytes,
        findings,
        identical,
        sizes,
        0.0,
    )
    suffixes: tuple[str, ...]
    if task.stage == "all":
        suffixes = STAGED_BY_EXECUTORS
    elif task.stage == "damaged":
        suffixes = tuple(
            s for s in damaged_index_files(task.partition_dir, task.base_offset, findings) if s in STAGED_BY_EXECUTORS
        )
    else:
        suffixes = ()
    if suffixes and plan.fatal is None:
        try:
            target_dir = _target_dir(task)
            os.makedirs(target_dir, exist_ok=True)
            outcome.staged = stage_segment(
                target_dir,
                task.base_offset,
                plan,
                [],
                suffixes,
                False,
                task.segment_index_bytes,
                tag or task.run_id,
            )
            if task.backup_dir is not None:
                outcome.backups = [b for final in outcome.staged if (b := keep_backup(final, task.backup_dir))]
        except (OSError, ValueError) as exc:
            _discard_all(outcome)
            outcome.error = f"{segment_file(task.target_dir or task.partition_dir, task.base_offset, '')}: {exc}"
    outcome.seconds = time.perf_counter() - started
    return outcome


def _target_dir(task: SegmentTask) -> str:
    """Where a task that writes puts its files (:func:`plan_tasks` sets it for every task that stages)."""
    if task.target_dir is None:
        raise ValueError(f"{task.log_path}: a task that writes files needs a target dir")
    return task.target_dir


def _discard_all(outcome: SegmentOutcome) -> None:
    """Drop what an outcome staged and the backups made of the files it would have replaced (nothing
    was replaced). Any other backup (a cut ``.log`` tail) is kept: it may be the only copy of its bytes."""
    staged_names = {os.path.basename(final) for final in outcome.staged}
    for path in outcome.staged.values():
        discard(path)
    for path in [b for b in outcome.backups if os.path.basename(b) in staged_names]:
        discard(path)
    outcome.backups = [b for b in outcome.backups if os.path.basename(b) not in staged_names]
    outcome.staged = {}


def cut_log_tail(
    log_path: str, valid_bytes: int, backup_dir: str | None, written: list[str], backups: list[str]
) -> None:
    """Save ``log_path[valid_bytes:]`` to ``backup_dir`` (fsynced), then truncate the ``.log`` there.
    Appends to ``backups`` once the saved tail is durable and to ``written`` once the ``.log`` is cut,
    so the report stays true if a later step fails."""
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
    backups.append(saved)
    os.truncate(log_path, valid_bytes)
    written.append(log_path)
    fsync_path(log_path)


@dataclass
class RunOptions:
    mode: str
    run_id: str | None = None
    output_dir: str | None = None
    dry_run: bool = False
    truncate_corrupt_tail: bool = False
    force: bool = False

    @property
    def read_only(self) -> bool:
        """Verify and every dry run write nothing: no staged file, backup, rename or tail cut."""
        return self.mode == "verify" or self.dry_run


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
    phase_seconds: dict[str, float] = field(default_factory=dict)  # "scan" (the Spark job), "replay", "commit"

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
            return 1 if failed or any(o.action in ("cannot_rebuild", "failed") for o in self.outcomes) else 0
        return 1 if (self.remaining_findings or failed) else 0


def new_run_id(mode: str) -> str:
    return f"{mode}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def check_locks(partitions: list[Partition], force: bool) -> None:
    for log_dir in sorted({p.log_dir for p in partitions}):
        if log_dir_is_locked(log_dir) and not force:
            raise LockedLogDirError(
                f"{log_dir}: the log dir's .lock is held (a running broker?); stop the broker, or pass --force"
            )


def plan_tasks(
    discovery: Discovery, settings: Settings, options: RunOptions, run_id: str | None = None
) -> list[SegmentTask]:
    """One task per segment, with what the executor should check and stage for this run's mode."""
    check = options.mode in ("verify", "repair")
    stage = "none" if options.read_only else {"rebuild": "all", "repair": "damaged"}[options.mode]
    tasks = []
    for p in discovery.partitions:
        topic_settings = settings.for_topic(p.topic)
        target = p.path if options.output_dir is None else os.path.join(options.output_dir, p.name)
        backup = _backup_dir(settings, options, run_id, p)
        for s in p.segments:
            tasks.append(
                SegmentTask(
                    p.log_dir,
                    p.path,
                    p.topic,
                    p.partition,
                    s.base_offset,
                    s.log_path,
                    s.size,
                    s.active,
                    topic_settings.index_interval_bytes,
                    topic_settings.segment_index_bytes,
                    check,
                    stage,
                    target,
                    backup,
                    run_id,
                )
            )
    return tasks


def _backup_dir(settings: Settings, options: RunOptions, run_id: str | None, p: Partition) -> str | None:
    """``<backup root>/<run id>/<topic>-<partition>``: always for repair; for an in-place rebuild only
    when a backup dir is configured; never for verify or ``--output-dir``."""
    if options.read_only:
        return None
    if options.mode == "repair" or (options.mode == "rebuild" and options.output_dir is None and settings.backup_dir):
        root = settings.backup_dir or os.path.join(os.getcwd(), "kafka-index-backups")
        return os.path.join(root, run_id or "unnamed-run", p.name)
    return None


def run(
    spark: SparkSession,
    discovery: Discovery,
    settings: Settings,
    options: RunOptions,
    progress: Progress | None = None,
) -> RunReport:
    """Run one verify/rebuild/repair over the discovered partitions (see the module docstring)."""
    if options.mode not in MODES:
        raise ValueError(f"unknown mode {options.mode!r}")
    started = datetime.now(UTC)
    check_run(discovery, options)
    run_id = options.run_id or new_run_id(options.mode)
    writes_in_place = not options.read_only and (options.mode == "repair" or options.output_dir is None)
    if writes_in_place:
        check_locks(discovery.partitions, options.force)
    clock = time.perf_counter()
    phases: dict[str, float] = {}
    tasks = plan_tasks(discovery, settings, options, run_id)
    sc = spark.sparkContext
    outcomes: list[SegmentOutcome] = []
    try:
        if tasks:
            outcomes = _scan(sc, tasks, run_id, settings.bytes_per_task, progress)
        phases["scan"], clock = time.perf_counter() - clock, time.perf_counter()
        partition_findings = _replay_partitions(discovery, outcomes, options.mode in ("verify", "repair"), run_id)
        phases["replay"], clock = time.perf_counter() - clock, time.perf_counter()
        _commit(outcomes, options)
        phases["commit"] = time.perf_counter() - clock
    finally:  # a failed job or an interrupted commit: nothing staged may stay behind
        for o in outcomes:
            if o.staged:
                _discard_all(o)
        _sweep_staged(tasks, run_id)
    return RunReport(
        run_id,
        options.mode,
        started,
        datetime.now(UTC),
        settings,
        options,
        outcomes,
        partition_findings,
        discovery.skipped,
        discovery.partitions,
        phases,
    )


def _scan(
    sc: SparkContext, tasks: list[SegmentTask], run_id: str, bytes_per_task: int, progress: Progress | None
) -> list[SegmentOutcome]:
    """The run's one Spark job: :func:`process_segment` over bins of tasks balanced by bytes; the
    outcomes sorted by log dir, topic, partition, base offset."""
    sizes = [t.size for t in tasks]
    bins = balance_by_bytes(tasks, sizes, task_count(sum(sizes), sc.defaultParallelism, bytes_per_task))
    done = sc.accumulator(0)
    done_bytes = sc.accumulator(0)

    def run_bin(group: list[SegmentTask]) -> list[SegmentOutcome]:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:  # only ever called inside a Spark task
            raise RuntimeError("run_bin runs inside a Spark task only")
        # a task attempt's own tag: a speculative or zombie attempt never touches another's staged files
        tag = f"{run_id}~{context.taskAttemptId()}"
        out = [process_segment(t, tag) for t in group]
        done.add(len(group))
        done_bytes.add(sum(t.size for t in group))
        return out

    if progress is not None:
        progress.start(len(tasks), sum(sizes), lambda: (done.value, done_bytes.value))
    try:
        outcomes = sc.parallelize(bins, len(bins)).flatMap(run_bin).collect()
    finally:
        if progress is not None:
            progress.stop()
    return sorted(outcomes, key=lambda o: (o.task.log_dir, o.task.topic, o.task.partition, o.task.base_offset))


def _sweep_staged(tasks: list[SegmentTask], run_id: str) -> None:
    """Remove this run's staged files that no outcome accounts for (a task attempt that died or was
    superseded after staging). Only names this run made: ``.<segment file>.<run id>[~<attempt>].rebuild.tmp``."""
    for target in sorted({t.target_dir for t in tasks if t.stage != "none" and t.target_dir}):
        try:
            names = os.listdir(target)
        except OSError:
            continue
        for name in names:
            if staged_by_run(name, run_id):
                discard(os.path.join(target, name))


def _replay_partitions(
    discovery: Discovery, outcomes: list[SegmentOutcome], check: bool, run_id: str
) -> dict[str, list[Finding]]:
    """Driver: the sequential producer-state replay per partition (sets each outcome's ``aborted``),
    the ``.txnindex`` checks, and ``cannot_rebuild`` where Kafka's recovery would stop. Returns the
    partition-level findings (directory contents but this run's own staged files, a bad log start checkpoint)."""
    partition_findings: dict[str, list[Finding]] = {}
    by_partition: dict[str, list[SegmentOutcome]] = {}
    for o in outcomes:
        by_partition.setdefault(o.task.partition_dir, []).append(o)
    for p in discovery.partitions:
        partition_findings[p.path] = (
            [f for f in directory_findings(p.path) if not staged_by_run(os.path.basename(f.file), run_id)]
            if check
            else []
        )
        segs = by_partition.get(p.path, [])
        if not segs:
            continue
        try:
            log_start = read_log_start_offset(p.log_dir, p.topic, p.partition)
        except (OSError, ValueError) as exc:
            partition_findings[p.path].append(
                Finding(
                    "bad_log_start_checkpoint",
                    os.path.join(p.log_dir, LOG_START_OFFSET_CHECKPOINT),
                    detail=f"{exc}; assuming log start offset 0",
                )
            )
            log_start = 0
        replays = replay_partition(p.path, [o.task.base_offset for o in segs], [o.plan for o in segs], log_start)
        for o, (aborted, replay_fatal) in zip(segs, replays, strict=True):
            o.aborted = aborted
            if replay_fatal is not None and not check:
                o.findings.append(fatal_finding(o.task.log_path, replay_fatal))
        if check:
            txn = check_partition_transactions(
                [o.task.log_path for o in segs], [o.task.base_offset for o in segs], [o.plan for o in segs], replays
            )
            for o, (findings, identical), (_, replay_fatal) in zip(segs, txn, replays, strict=True):
                o.findings += findings
                o.identical[".txnindex"] = identical
                if replay_fatal is not None:
                    o.identical = dict.fromkeys(INDEX_SUFFIXES)
        for o, (_, replay_fatal) in zip(segs, replays, strict=True):
            if replay_fatal is not None or o.plan.fatal is not None:
                o.action = "cannot_rebuild"
    return partition_findings


def _commit(outcomes: list[SegmentOutcome], options: RunOptions) -> None:
    """Driver, after the replay: decide each segment's action and make its writes visible. Staged files
    are installed (renamed; each directory fsynced once at the end), or discarded with their backups
    where the segment cannot be rebuilt or failed; ``.txnindex`` files are written here (they need the
    replay); a corrupt ``.log`` tail is cut when asked (after saving it)."""
    if options.mode == "verify":
        return
    touched: set[str] = set()
    try:
        for o in outcomes:
            t = o.task
            if o.action == "cannot_rebuild" or o.error is not None:
                _discard_all(o)
                if o.error is not None:
                    o.action = "failed"
                continue
            if options.mode == "rebuild":
                txn, cut = True, None
            else:
                damaged = damaged_index_files(t.partition_dir, t.base_offset, o.findings)
                txn = ".txnindex" in damaged
                cut = None
                if options.truncate_corrupt_tail and any(
                    f.file == t.log_path and kind(f.kind).triggers == CUT_TAIL for f in o.findings
                ):
                    cut = o.valid_bytes
                if not damaged and cut is None:
                    continue
            done, would = ("rebuilt", "would_rebuild") if options.mode == "rebuild" else ("repaired", "would_repair")
            o.action = would if options.dry_run else done
            if options.dry_run:
                continue
            try:
                if txn:
                    stale = os.path.lexists(segment_file(t.partition_dir, t.base_offset, ".txnindex"))
                    target_dir = _target_dir(t)
                    os.makedirs(target_dir, exist_ok=True)
                    staged_txn = stage_segment(
                        target_dir,
                        t.base_offset,
                        o.plan,
                        o.aborted,
                        (".txnindex",),
                        stale,
                        t.segment_index_bytes,
                        t.run_id,
                    )
                    o.staged.update(staged_txn)
                    if t.backup_dir is not None:
                        o.backups += [b for final in staged_txn if (b := keep_backup(final, t.backup_dir))]
                if cut is not None:  # from here on the saved tail is the only copy of those bytes: never discarded
                    cut_log_tail(t.log_path, cut, t.backup_dir, o.written, o.backups)
                staged, o.staged = o.staged, {}
                install_segment(staged, sync_dir=False, written=o.written)  # backups were kept when staging
            except (OSError, ValueError) as exc:
                if o.staged:  # failed before anything was replaced: drop what was staged and backed up for it
                    _discard_all(o)
                o.error = f"{segment_file(t.target_dir or t.partition_dir, t.base_offset, '')}: {exc}"
                o.action = "failed"
            finally:
                touched.update(os.path.dirname(f) for f in o.written)
    finally:  # the renames made are durable even if the loop was interrupted
        for directory in sorted(touched):
            fsync_path(directory)


def summary_rows(report: RunReport) -> list[dict[str, Any]]:
    """One dict per partition: the final summary table."""
    rows: dict[str, dict[str, Any]] = {}
    for o in report.outcomes:
        t = o.task
        row = rows.setdefault(
            t.partition_dir,
            {
                "partition": f"{t.topic}-{t.partition}",
                "log_dir": t.log_dir,
                "segments": 0,
                "bytes": 0,
                "findings": 0,
                "kinds": set(),
                "written": 0,
                "actions": set(),
            },
        )
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
