"""The segment engine: one verify, rebuild or repair run over a broker's partitions, for every driver.

A run, in order (:func:`run`):

1. **Plan** (driver, metadata only): one :class:`SegmentTask` per segment, saying what to check, what to
   stage, where to stage it and where backups go (:func:`plan_tasks`).
2. **Map** (anywhere, in parallel): :func:`process_segment` scans, plans and checks one segment, and
   *stages* the ``.index``/``.timeindex`` the run will write (fsynced under hidden names beside the final
   ones, old files copied to the backup dir first). It returns a small :class:`SegmentOutcome`: a plan
   summary, never the scan. The driver chooses how tasks are mapped: :func:`map_locally` (this process or
   a process pool) or a Spark job (``jobs.pipeline``).
3. **Replay** (driver, per partition, sequential and small): producer state is replayed over the
   outcomes' events (:func:`replay_outcomes`), giving each segment's aborted transactions, the
   ``.txnindex`` findings and whether Kafka's recovery would refuse it.
4. **Decide** (pure): :func:`decide` turns an outcome, its replay and the run's options into a
   :class:`Decision`: the action, whether to write the ``.txnindex``, where to cut the ``.log``.
5. **Commit** (driver): :func:`commit_segment` applies one decision (renames, the ``.txnindex``, the tail
   cut) and returns the :class:`SegmentResult` the report and the audit read; what a run staged and did
   not install is swept (:func:`sweep_staged`), also after a failure.

Invariants: verify and every dry run write nothing; a repair rewrites only files whose findings the
registry marks "rebuild the file" (and cuts a ``.log`` tail only when asked, after saving the cut bytes);
Kafka never sees a file of a segment its recovery would refuse; every file is either the old one or the
whole new one at any moment; in-place writes refuse a log dir whose ``.lock`` is held unless forced.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Protocol

from ..format import records
from ..format.layout import (
    INDEX_SUFFIXES,
    LOG_START_OFFSET_CHECKPOINT,
    partition_name,
    run_lock_name,
    run_lock_run_id,
    segment_file,
    staged_by_run,
    staged_run_id,
)
from ..format.records import ScanProblem
from ..format.values import AbortedTxn
from ..recovery.checks import (
    check_partition_transactions,
    check_segment_files,
    directory_findings,
    fatal_finding,
    has_invalid_tail,
    log_findings,
)
from ..recovery.entry_plan import PlanSummary, SegmentPlan
from ..recovery.findings import CUT_TAIL, Finding, files_to_rebuild, kind
from ..recovery.log_scan import NO_PROBES, probes_for
from ..recovery.settings import IndexSettings
from ..storage.discovery import Discovery, Partition
from ..storage.partition_files import (
    partition_file_names,
    read_existing_indexes,
    read_existing_txn_index,
    read_log_start_offset,
    tail_is_zero,
)
from ..storage.publish import discard, fsync_path, keep_backup, lock_is_held, log_dir_is_locked
from .interrupts import deferred_signals
from .partition import install_segment, plan_segment_file, replay_partition, stage_segment

MODES = ("verify", "rebuild", "repair")
#: the files an executor stages (they need the full plan); the .txnindex needs the replay, on the driver
STAGED_BY_EXECUTORS = (".index", ".timeindex")

#: A run id names a backup dir and tags staged files: no '/', whitespace, control characters or '~'
#: ('~' separates the task attempt in staged names), no leading '.', at most 200 characters.
RUN_ID = re.compile(r"[^/\s.~\x00-\x1f][^/\s~\x00-\x1f]{0,199}")


class LockedLogDirError(RuntimeError):
    """An in-place write was asked for in a log dir that a running broker holds."""


# ------------------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class RunOptions:
    """What a run does. ``backup_root``: where a writing run keeps replaced files, under
    ``<backup_root>/<run id>/<topic>-<partition>/`` (repair always; an in-place rebuild only when set)."""

    mode: str
    run_id: str | None = None
    output_dir: str | None = None
    dry_run: bool = False
    truncate_corrupt_tail: bool = False
    force: bool = False
    backup_root: str | None = None

    @property
    def read_only(self) -> bool:
        """Verify and every dry run write nothing: no staged file, backup, rename or tail cut."""
        return self.mode == "verify" or self.dry_run

    @property
    def checks(self) -> bool:
        """Verify and repair check the existing files; a rebuild rewrites them all without looking."""
        return self.mode in ("verify", "repair")

    def target_dir(self, p: Partition) -> str:
        """Where a partition's files are written: the partition dir, or ``<output dir>/<topic>-<partition>``."""
        return p.path if self.output_dir is None else os.path.join(self.output_dir, p.name)

    def in_place(self, p: Partition) -> bool:
        """Whether this run writes into the partition dir itself (an ``--output-dir`` is never a log dir or
        inside one: :func:`check_run` refuses it)."""
        return not self.read_only and self.output_dir is None


def new_run_id(mode: str) -> str:
    return f"{mode}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def check_run(discovery: Discovery, options: RunOptions) -> None:
    """Refuse, before anything runs, what a run cannot do safely (``ValueError`` with the reason): an
    unknown mode; a malformed run id; a partition given twice (two paths to one dir); one partition name
    in two log dirs when writing (its backup dir, or its ``--output-dir`` dir, is named by the partition
    alone); a writing run whose run id already has backups (:func:`check_backups_unused`)."""
    if options.mode not in MODES:
        raise ValueError(f"unknown mode {options.mode!r} (one of {', '.join(MODES)})")
    if options.run_id is not None and not RUN_ID.fullmatch(options.run_id):
        raise ValueError(
            f"run id {options.run_id!r}: it names backup dirs and files, so no '/', '~', whitespace "
            "or leading '.', at most 200 characters"
        )
    seen: dict[str, str] = {}
    for p in discovery.partitions:
        real = os.path.realpath(p.path)
        if real in seen:
            raise ValueError(f"{p.path}: the same partition dir as {seen[real]}; give each partition once")
        seen[real] = p.path
    if options.read_only:
        return
    _refuse_writes_under_log_dirs(discovery, options)
    _refuse_unwritable_targets(discovery, options)
    where: dict[str, str] = {}
    for p in discovery.partitions:
        if where.setdefault(p.name, p.log_dir) != p.log_dir:
            raise ValueError(
                f"{p.name} is in both {where[p.name]} and {p.log_dir}; its backups (and --output-dir) are "
                f"named by partition, so {options.mode} these log dirs in separate runs"
            )
    check_backups_unused(options)


def backup_root(options: RunOptions) -> str | None:
    """The root a writing run keeps replaced files under (``./kafka-index-backups`` for a repair when none
    is given); None when it keeps none (a read-only run, a rebuild without a backup root)."""
    if options.read_only or not (options.backup_root or options.mode == "repair"):
        return None
    return options.backup_root or os.path.join(os.getcwd(), "kafka-index-backups")


def check_backups_unused(options: RunOptions) -> None:
    """``ValueError`` when ``<backup root>/<run id>/`` already holds a file: an earlier writing run with this
    run id may have replaced files. An existing backup is never overwritten (:func:`indexlib.storage.publish.keep_backup`),
    so a second run under that id would replace files and keep no copy of them. Empty directories are no
    evidence (a failed staging leaves them); a generated run id is new by construction."""
    root = backup_root(options)
    if root is None or options.run_id is None:
        return
    run_dir = os.path.join(root, options.run_id)
    first = next((os.path.join(d, n) for d, _, names in os.walk(run_dir) for n in names), None)
    if first is not None:
        raise ValueError(
            f"{run_dir}: run id {options.run_id!r} was used by an earlier run that may have replaced files (its backups "
            f"are here: {os.path.relpath(first, run_dir)}); a re-run under that id would keep no copy of the files "
            "it replaces: give a new --run-id"
        )


def _refuse_writes_under_log_dirs(discovery: Discovery, options: RunOptions) -> None:
    """``--output-dir`` and the backup root must lie outside every log dir the run reads (and so outside its
    partition dirs): there they would replace the broker's files with no backup, or add dirs the broker
    reads as partitions. ``ValueError`` naming both paths."""
    log_dirs = {os.path.realpath(d): d for d in discovery.log_dirs}
    log_dirs.update({os.path.realpath(p.log_dir): p.log_dir for p in discovery.partitions})
    for option, directory in (("--output-dir", options.output_dir), ("--backup-dir", backup_root(options))):
        if directory is None:
            continue
        real = os.path.realpath(directory)
        for real_log_dir, log_dir in log_dirs.items():
            if real == real_log_dir or real.startswith(real_log_dir.rstrip(os.sep) + os.sep):
                where = "is the log dir" if real == real_log_dir else "lies inside the log dir"
                raise ValueError(
                    f"{option} {directory} {where} {log_dir}: the broker's own files would be replaced or its dir "
                    f"filled; choose a dir outside every log dir"
                )


def _why_unwritable(directory: str) -> str | None:
    """Why files cannot be created in ``directory`` (an existing dir), or None."""
    if os.access(directory, os.W_OK | os.X_OK):
        return None
    with contextlib.suppress(OSError):
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "Read-only file system"
    return "Permission denied"


def _refuse_unwritable_targets(discovery: Discovery, options: RunOptions) -> None:
    """Before any work, both command lines alike: every dir a writing run writes into must be writable (an
    in-place partition dir; ``--output-dir`` and the backup root, or the nearest dir above them that exists,
    which must be a dir). ``ValueError`` naming the dir and why."""
    for p in discovery.partitions:
        if options.in_place(p) and p.unreadable is None and (why := _why_unwritable(p.path)):
            hint = " (rebuild elsewhere with --output-dir DIR)" if options.mode == "rebuild" else ""
            raise ValueError(
                f"{p.path}: {why}: cannot write the {options.mode}'s index files into this directory{hint}"
            )
    for option, directory in (("--output-dir", options.output_dir), ("--backup-dir", backup_root(options))):
        if directory is None:
            continue
        probe = os.path.abspath(directory)
        while not os.path.lexists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe):
            raise ValueError(f"{directory}: {option} must be a directory, but {probe} is a file")
        if why := _why_unwritable(probe):
            raise ValueError(f"{directory}: {option}: {why}: cannot create or write {probe}")


class RunInUseError(LockedLogDirError):
    """Another process is running with the same run id and writes under the same dir."""


#: the run lock descriptors this process holds (see :func:`run_locks`)
_HELD_RUN_LOCKS: set[int] = set()


def _close_run_locks_in_child() -> None:
    """After a fork: close the child's copies of the run locks (a ``flock`` belongs to the open file, which
    the copies share). A forked pool worker that outlives its run (the run SIGKILLed) must not keep that
    dead run's lock held, which would keep its staged files and lock file from ever being swept. Closing a
    copy does not release the parent's lock."""
    for fd in _HELD_RUN_LOCKS:
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD_RUN_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_run_locks_in_child)


def _is_file_at(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not unlinked or replaced meanwhile)."""
    try:
        opened, named = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


@contextlib.contextmanager
def run_locks(directories: list[str], run_id: str) -> Iterator[None]:
    """Hold ``<dir>/.kafka-index-run-<run id>.lock`` (``flock``) in each of ``directories`` for the block:
    a second run with the same id, which would stage and sweep the same file names, is refused
    (:class:`RunInUseError`) while the first holds them. The files are removed on release; the kernel
    drops a dead process's lock, so a killed run never blocks its id, and a later writing run removes the
    file it left (:func:`sweep_dead_run_locks`)."""
    held: list[tuple[int, str]] = []
    try:
        for directory in sorted(set(directories)):
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, run_lock_name(run_id))
            while True:  # lock the file that is at the path (a releasing run or a sweep may unlink it meanwhile)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    removed = not _is_file_at(fd, path)  # held by a run releasing it, or by a sweep removing it
                    os.close(fd)
                    if removed:
                        continue
                    raise RunInUseError(
                        f"{path}: another run with run id {run_id!r} is writing here; wait for it, or use "
                        "another --run-id"
                    ) from None
                if _is_file_at(fd, path):
                    held.append((fd, path))
                    _HELD_RUN_LOCKS.add(fd)
                    break
                os.close(fd)
        yield
    finally:
        for fd, path in reversed(held):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            _HELD_RUN_LOCKS.discard(fd)
            os.close(fd)


def sweep_dead_run_locks(directories: list[str], run_id: str) -> list[str]:
    """Remove the run lock files (:func:`run_locks`) that killed runs left in ``directories``: those no
    process holds. Each is locked before it is unlinked, so a run taking that lock at the same moment either
    finds it held and takes the new file, or holds it and the file stays. Returns what was removed."""
    removed = []
    for directory in sorted(set(directories)):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            owner = run_lock_run_id(name)
            if owner is None or owner == run_id:
                continue
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:  # gone meanwhile, or not ours to open
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # a live run's
                    continue
                if _is_file_at(fd, path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                        removed.append(path)
            finally:
                os.close(fd)
    return removed


def run_is_alive(directory: str, run_id: str) -> bool:
    """Whether a process holds run ``run_id``'s lock in ``directory`` (see :func:`run_locks`)."""
    return lock_is_held(os.path.join(directory, run_lock_name(run_id)), (fcntl.flock,))


def sweep_dead_runs(partition_dirs: list[str], run_id: str) -> list[str]:
    """Remove the staged files other runs left in ``partition_dirs`` when no process holds their run lock
    (killed runs: a staged file was never installed, and Kafka never reads one). A live run holds its lock
    from before it stages until after it sweeps, so its files are never touched. Returns what was removed."""
    removed = []
    for directory in sorted(set(partition_dirs)):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            owner = staged_run_id(name)
            if owner is None or owner == run_id or run_is_alive(os.path.dirname(directory), owner):
                continue
            path = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
    return removed


def check_locks(partitions: list[Partition], force: bool) -> None:
    for log_dir in sorted({p.log_dir for p in partitions}):
        if log_dir_is_locked(log_dir) and not force:
            raise LockedLogDirError(
                f"{log_dir}: the log dir's .lock is held (a running broker?); stop the broker, or pass --force"
            )


# --------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class SegmentTask:
    """One segment's work: where it is, its index settings, what to check and stage, where to put things."""

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
    stage: str = "none"  # which .index/.timeindex to stage: "all", "damaged" (to rebuild) or "none"
    target_dir: str | None = None  # where files are written (the partition dir, or under --output-dir)
    backup_dir: str | None = None  # copy the files to be replaced here first
    run_id: str | None = None  # tags staged file names


def plan_tasks(
    discovery: Discovery, options: RunOptions, run_id: str, index_settings: Callable[[str], IndexSettings]
) -> list[SegmentTask]:
    """One task per segment, with what to check and stage for this run's mode (``index_settings``: a
    topic's settings)."""
    stage = "none" if options.read_only else {"rebuild": "all", "repair": "damaged"}[options.mode]
    tasks = []
    for p in discovery.partitions:
        settings = index_settings(p.topic)
        target = options.target_dir(p)
        backup = _backup_dir(options, run_id, p)
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
                    settings.index_interval_bytes,
                    settings.segment_index_bytes,
                    options.checks,
                    stage,
                    target,
                    backup,
                    run_id,
                )
            )
    return tasks


def _backup_dir(options: RunOptions, run_id: str, p: Partition) -> str | None:
    """``<backup root>/<run id>/<topic>-<partition>``: always for repair (default root
    ``./kafka-index-backups``); for an in-place rebuild only when a root is set; never for a read-only
    run or an ``--output-dir`` elsewhere."""
    root = backup_root(options)
    if root is not None and (options.mode == "repair" or options.in_place(p)):
        return os.path.join(root, run_id, p.name)
    return None


# ---------------------------------------------------------------------------------------------- map
@dataclass
class SegmentFacts:
    """What the scan and the checks found about one segment (small: a plan summary, no scan columns)."""

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


@dataclass
class SegmentOutcome(SegmentFacts):
    """What the map step returns for one segment: its facts and what it staged."""

    staged: dict[str, str] = field(default_factory=dict)  # final path -> staged path, not installed yet
    backups: list[str] = field(default_factory=list)  # copies of the files the staged ones will replace
    error: str | None = None  # staging failed (nothing is left staged)


def process_segment(task: SegmentTask, tag: str | None = None) -> SegmentOutcome:
    """Scan, plan and (``task.check``) verify one segment's ``.log``, ``.index`` and ``.timeindex``;
    stage the ``.index``/``.timeindex`` the run will write (``task.stage``; staged names carry ``tag``,
    default the run id), backing up the old ones. A staging failure is recorded in ``error`` with
    nothing left staged. ``seconds`` covers all of it."""
    started = time.perf_counter()
    existing = read_existing_indexes(task.partition_dir, task.base_offset) if task.check else None
    summary, plan = plan_segment_file(
        task.log_path,
        task.base_offset,
        task.index_interval_bytes,
        task.segment_index_bytes,
        probes_for(existing, task.base_offset) if existing is not None else NO_PROBES,
    )
    zero_tail = has_invalid_tail(summary) and tail_is_zero(task.log_path, summary.valid_bytes)
    if task.check:
        findings, identical = check_segment_files(
            task.log_path, task.base_offset, summary, plan, task.active, existing, zero_tail
        )
    else:
        findings, identical = log_findings(task.log_path, summary, plan.fatal, zero_tail), {}
    sizes: dict[str, int | None] = {}
    for suffix in INDEX_SUFFIXES:
        try:
            sizes[suffix] = os.stat(segment_file(task.partition_dir, task.base_offset, suffix)).st_size
        except OSError:
            sizes[suffix] = None
    outcome = SegmentOutcome(
        task, plan.summary(), summary.batch_count, summary.file_size, summary.valid_bytes, summary.invalid_bytes, findings,
        identical, sizes, 0.0,
    )  # fmt: skip
    if task.stage == "all":
        suffixes: tuple[str, ...] = STAGED_BY_EXECUTORS
    elif task.stage == "damaged":
        suffixes = tuple(
            s for s in files_to_rebuild(task.partition_dir, task.base_offset, findings) if s in STAGED_BY_EXECUTORS
        )
    else:
        suffixes = ()
    if suffixes and plan.fatal is None:
        target_dir = task.target_dir or task.partition_dir
        try:
            os.makedirs(target_dir, exist_ok=True)
            outcome.staged = stage_segment(
                target_dir, task.base_offset, plan, [], suffixes, False, task.segment_index_bytes, tag or task.run_id
            )
            if task.backup_dir is not None:
                outcome.backups = [b for final in outcome.staged if (b := keep_backup(final, task.backup_dir))]
        except (OSError, ValueError) as exc:
            _discard_staged(outcome.staged, outcome.backups)
            outcome.staged, outcome.backups = {}, []
            outcome.error = f"{segment_file(target_dir, task.base_offset, '')}: {exc}"
    outcome.seconds = time.perf_counter() - started
    return outcome


MapSegments = Callable[[list[SegmentTask], str], list[SegmentOutcome]]


def map_locally(jobs: int = 1) -> MapSegments:
    """A map step on this machine: in this process (``jobs=1``) or a pool of ``jobs`` processes. The
    staged files' tag is the run id (each segment is staged by exactly one process). If the map is
    interrupted (SIGINT, SIGTERM) or fails, the pool's workers are stopped before the error goes on, so
    nothing stages a file after the run has swept its own."""

    def map_segments(tasks: list[SegmentTask], run_id: str) -> list[SegmentOutcome]:
        if jobs <= 1 or len(tasks) <= 1:
            return [process_segment(t, run_id) for t in tasks]
        ordered = sorted(tasks, key=lambda t: -t.size)  # big segments first: the pool ends together
        from concurrent.futures import ProcessPoolExecutor  # here: a pool is rare, its import costs ~10 ms

        workers = min(jobs, len(tasks))
        pool = ProcessPoolExecutor(max_workers=workers, initializer=pool_worker, initargs=(pool_reads_ahead(workers),))
        try:
            return list(pool.map(process_segment, ordered, [run_id] * len(ordered)))
        except BaseException:
            _stop_workers(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    return map_segments


def _stop_workers(pool: Any) -> None:
    """SIGTERM every worker of a ``ProcessPoolExecutor`` (``shutdown`` then joins them): a worker
    would otherwise finish its segment, and a shut-down pool would still run every queued one."""
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.terminate()


def pool_worker(read_ahead: bool = True) -> None:
    """A pool worker's initializer. The parent alone decides when the run stops: SIGINT, which a terminal
    sends to the whole process group, is ignored here, and SIGTERM kills (the fork copied the parent's
    handler, which would raise). On Linux a worker dies with its parent instead of waiting forever for work
    that will not come. Without ``read_ahead`` its scans read synchronously (:func:`pool_reads_ahead`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    if not read_ahead:
        scan_without_read_ahead()


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    pr_set_pdeathsig = 1
    if prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() != parent:
        os._exit(1)  # the parent died before the request took effect


def pool_reads_ahead(workers: int) -> bool:
    """Whether a pool of ``workers`` scanning processes keeps the kernel's read-ahead thread: only while a
    core is left over for it. With every core scanning, the thread only moves each worker's copy onto a core
    another worker needs (benchmarks/bench_logdir.py: 3-8 % slower)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return workers < cores


def scan_without_read_ahead() -> None:
    """A pool worker's initializer: its scans read synchronously (``records.READ_AHEAD``)."""
    records.READ_AHEAD = False


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


def replay_outcomes(partition: Partition, outcomes: list[SegmentOutcome], check: bool, run_id: str) -> PartitionReplay:
    """Replay producer state over one partition's outcomes (ascending base offset) and, when ``check``,
    check its ``.txnindex`` files and directory (this run's own staged files are not leftovers)."""
    if partition.unreadable is not None:
        detail = f"{partition.unreadable}; nothing in it was verified or written"
        return PartitionReplay([Finding("unreadable_partition", partition.path, detail=detail)], [])
    findings: list[Finding] = []
    if check:
        findings = [
            f
            for f in directory_findings(partition.path, partition_file_names(partition.path))
            if not staged_by_run(os.path.basename(f.file), run_id)
        ]
    if not outcomes:
        return PartitionReplay(findings, [])
    try:
        log_start = read_log_start_offset(partition.log_dir, partition.topic, partition.partition)
    except (OSError, ValueError) as exc:
        checkpoint = os.path.join(partition.log_dir, LOG_START_OFFSET_CHECKPOINT)
        findings.append(Finding("bad_log_start_checkpoint", checkpoint, detail=f"{exc}; assuming log start offset 0"))
        log_start = 0
    bases = [o.task.base_offset for o in outcomes]
    plans: list[SegmentPlan | PlanSummary] = [o.plan for o in outcomes]
    replays = replay_partition(partition.path, bases, plans, log_start)
    if check:
        txn_files = [read_existing_txn_index(segment_file(partition.path, base, ".txnindex"), base) for base in bases]
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
    return PartitionReplay(findings, segments)


# ------------------------------------------------------------------------------------------- decide
@dataclass(frozen=True)
class Decision:
    """What the commit does for one segment. ``action``: ``none``, ``rebuilt``, ``repaired``,
    ``would_rebuild``, ``would_repair`` (dry run), ``cannot_rebuild`` (Kafka's recovery would refuse the
    segment: nothing is written, what was staged is dropped) or ``failed`` (staging failed)."""

    action: str
    install: bool = False  # rename the staged .index/.timeindex into place
    write_txn: bool = False  # write the .txnindex (from the replay)
    cut_tail_at: int | None = None  # cut the .log to this many bytes (after saving the rest)


def decide(outcome: SegmentOutcome, replay: SegmentReplay, options: RunOptions) -> Decision:
    """Pure: the action for one segment from its outcome, its replay and the run's options."""
    if outcome.error is not None:
        return Decision("failed")
    if outcome.plan.fatal is not None or replay.fatal is not None:
        return Decision("cannot_rebuild")
    if options.mode == "verify":
        return Decision("none")
    if options.mode == "rebuild":
        write_txn, cut = True, None
    else:
        t = outcome.task
        findings = outcome.findings + replay.findings
        rebuild = files_to_rebuild(t.partition_dir, t.base_offset, findings)
        wants_cut = any(f.file == t.log_path and kind(f.kind).triggers == CUT_TAIL for f in findings)
        write_txn = ".txnindex" in rebuild
        cut = outcome.valid_bytes if options.truncate_corrupt_tail and wants_cut else None
        if not (rebuild or cut is not None):
            return Decision("none")
    done, would = ("rebuilt", "would_rebuild") if options.mode == "rebuild" else ("repaired", "would_repair")
    if options.dry_run:
        return Decision(would)
    return Decision(done, install=True, write_txn=write_txn, cut_tail_at=cut)


# ------------------------------------------------------------------------------------------- commit
@dataclass
class SegmentResult(SegmentFacts):
    """One segment at the end of a run: what was found, decided and done (the report's and audit's row)."""

    aborted: list[AbortedTxn]
    action: str
    written: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    error: str | None = None


def commit_segment(outcome: SegmentOutcome, replay: SegmentReplay, decision: Decision) -> SegmentResult:
    """Apply one decision: stage the ``.txnindex`` (with its backup), cut the ``.log`` tail (saved
    first), rename every staged file into place. Anything not installed is discarded with the backups
    made for it; a saved ``.log`` tail is never discarded. Directories are not fsynced here (the caller
    does it once per directory)."""
    t = outcome.task
    identical = dict(outcome.identical)
    if t.check:
        identical[".txnindex"] = replay.txn_identical
        if replay.fatal is not None:
            identical = dict.fromkeys(INDEX_SUFFIXES)
    facts = {f.name: getattr(outcome, f.name) for f in fields(SegmentFacts)}
    facts.update(findings=outcome.findings + replay.findings, identical=identical)
    result = SegmentResult(**facts, aborted=replay.aborted, action=decision.action, error=outcome.error)
    # the commit owns what was staged from here on: whoever cleans up after it must not touch those files
    staged, backups = outcome.staged, outcome.backups
    outcome.staged, outcome.backups = {}, []
    if not decision.install:
        _discard_staged(staged, backups)
        return result
    target_dir = t.target_dir or t.partition_dir
    try:
        if decision.write_txn:
            stale = os.path.lexists(segment_file(t.partition_dir, t.base_offset, ".txnindex"))
            os.makedirs(target_dir, exist_ok=True)
            staged_txn = stage_segment(
                target_dir, t.base_offset, outcome.plan, replay.aborted, (".txnindex",), stale, t.segment_index_bytes,
                t.run_id,
            )  # fmt: skip
            staged.update(staged_txn)
            if t.backup_dir is not None:
                backups += [b for final in staged_txn if (b := keep_backup(final, t.backup_dir))]
        if decision.cut_tail_at is not None:  # from here on the saved tail is the only copy of those bytes
            cut_log_tail(t.log_path, decision.cut_tail_at, t.backup_dir, result.written, result.backups)
        installing, staged = staged, {}  # from here on a backup may be the only copy of a replaced file
        install_segment(installing, sync_dir=False, written=result.written)  # backups were kept when staging
    except (OSError, ValueError) as exc:
        result.error = f"{segment_file(target_dir, t.base_offset, '')}: {exc}"
        result.action = "failed"
    finally:
        if staged:  # failed before anything was replaced: drop what was staged and backed up for it
            _discard_staged(staged, backups)
    result.backups = backups + result.backups
    return result


def _discard_staged(staged: dict[str, str], backups: list[str]) -> None:
    """Drop staged files and the backups made of the files they would have replaced (in place: the
    list is emptied of them). Any other backup (a cut ``.log`` tail) is kept: it may be the only copy."""
    names = {os.path.basename(final) for final in staged}
    for path in staged.values():
        discard(path)
    for path in [b for b in backups if os.path.basename(b) in names]:
        discard(path)
    backups[:] = [b for b in backups if os.path.basename(b) not in names]
    staged.clear()


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
    try:
        with open(log_path, "rb") as src, open(saved, "wb") as dst:
            src.seek(valid_bytes)
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
    except BaseException:  # the .log is not cut yet: a partial copy is worth nothing
        discard(saved)
        raise
    fsync_path(backup_dir)
    backups.append(saved)
    os.truncate(log_path, valid_bytes)
    written.append(log_path)
    fsync_path(log_path)


def sweep_staged(tasks: list[SegmentTask], run_id: str) -> None:
    """Remove this run's staged files that no outcome accounts for (a task attempt that died or was
    superseded after staging). Only names this run made (see :func:`indexlib.format.layout.staged_by_run`)."""
    for target in sorted({t.target_dir for t in tasks if t.stage != "none" and t.target_dir}):
        try:
            names = os.listdir(target)
        except OSError:
            continue
        for name in names:
            if staged_by_run(name, run_id):
                discard(os.path.join(target, name))


# ---------------------------------------------------------------------------------------------- run
@dataclass
class RunReport:
    run_id: str
    mode: str
    started: datetime
    finished: datetime
    options: RunOptions
    segments: list[SegmentResult]
    partition_findings: dict[str, list[Finding]]  # partition dir -> partition-level findings
    skipped: list[tuple[str, str]]
    partitions: list[Partition]
    log_dirs: list[str]
    phase_seconds: dict[str, float] = field(default_factory=dict)  # "scan" (the map), "replay", "commit"
    swept: list[str] = field(default_factory=list)  # staged files of dead runs this run removed

    @property
    def remaining_findings(self) -> list[Finding]:
        """Error findings not fixed by this run's writes."""
        left = [f for fs in self.partition_findings.values() for f in fs if f.severity == "error"]
        for s in self.segments:
            fixed = set(s.written) if s.error is None else set()
            left += [f for f in s.findings if f.severity == "error" and f.file not in fixed]
        return left

    @property
    def failed(self) -> bool:
        return any(s.error for s in self.segments)

    @property
    def exit_code(self) -> int:
        """0 done and healthy; 1 findings remain (verify, a dry-run repair, a repair that could not fix
        everything) or a segment could not be rebuilt or written."""
        if self.mode == "rebuild":
            return 1 if self.failed or any(s.action in ("cannot_rebuild", "failed") for s in self.segments) else 0
        return 1 if (self.remaining_findings or self.failed) else 0


class CommitObserver(Protocol):
    """Told about every segment commit that writes (a journal of the run): :meth:`before_commit` returns
    only once what it records is durable, before the first rename; :meth:`after_commit` follows the
    renames. So a process killed in the commit leaves a record of every file it may have replaced."""

    def before_commit(self, outcome: SegmentOutcome, decision: Decision) -> None: ...

    def after_commit(self, result: SegmentResult) -> None: ...


def files_to_replace(outcome: SegmentOutcome, decision: Decision) -> list[str]:
    """The final paths a commit of ``decision`` may replace or create."""
    t = outcome.task
    target = t.target_dir or t.partition_dir
    files = list(outcome.staged)
    if decision.write_txn:
        files.append(segment_file(target, t.base_offset, ".txnindex"))
    if decision.cut_tail_at is not None:
        files.append(t.log_path)
    return files


def run(
    discovery: Discovery,
    options: RunOptions,
    index_settings: Callable[[str], IndexSettings],
    map_segments: MapSegments,
    observer: CommitObserver | None = None,
) -> RunReport:
    """One verify/rebuild/repair over the discovered partitions (see the module docstring); ``observer``
    is told about every commit that writes."""
    started = datetime.now(UTC)
    check_run(discovery, options)
    run_id = options.run_id or new_run_id(options.mode)
    check_locks([p for p in discovery.partitions if options.in_place(p)], options.force)
    # the dirs a writing run writes under: each in-place partition's log dir, or the output dir
    lock_dirs = [
        p.log_dir if options.in_place(p) else os.path.dirname(options.target_dir(p))
        for p in discovery.partitions
        if not options.read_only
    ]
    swept: list[str] = []
    with run_locks(lock_dirs, run_id):
        if not options.read_only:
            swept = sweep_dead_runs([options.target_dir(p) for p in discovery.partitions], run_id)
            sweep_dead_run_locks(lock_dirs, run_id)
        clock = time.perf_counter()
        phases: dict[str, float] = {}
        tasks = plan_tasks(discovery, options, run_id, index_settings)
        outcomes: list[SegmentOutcome] = []
        results: list[SegmentResult] = []
        partition_findings: dict[str, list[Finding]] = {}
        touched: set[str] = set()
        try:
            outcomes = map_segments(tasks, run_id) if tasks else []
            phases["scan"], clock = time.perf_counter() - clock, time.perf_counter()
            by_partition: dict[str, list[SegmentOutcome]] = {}
            for o in sorted(outcomes, key=lambda o: o.task.base_offset):
                by_partition.setdefault(o.task.partition_dir, []).append(o)
            replays = {}
            for p in discovery.partitions:
                replays[p.path] = replay_outcomes(p, by_partition.get(p.path, []), options.checks, run_id)
                partition_findings[p.path] = replays[p.path].findings
            phases["replay"], clock = time.perf_counter() - clock, time.perf_counter()
            for p in discovery.partitions:
                for outcome, replay in zip(by_partition.get(p.path, []), replays[p.path].segments, strict=True):
                    decision = decide(outcome, replay, options)
                    # SIGINT/SIGTERM stop the run between two segments, never inside one's journal record,
                    # renames and row
                    with deferred_signals():
                        if decision.install:  # fsynced at the end even if the commit is interrupted after a rename
                            touched.add(outcome.task.target_dir or outcome.task.partition_dir)
                            if observer is not None:
                                observer.before_commit(outcome, decision)
                        result = commit_segment(outcome, replay, decision)
                        if decision.install and observer is not None:
                            observer.after_commit(result)
                        results.append(result)
            phases["commit"] = time.perf_counter() - clock
        finally:  # a failed map or an interrupted commit: the renames made are durable, nothing staged stays
            for directory in sorted(touched):
                fsync_path(directory)
            for o in outcomes:
                _discard_staged(o.staged, o.backups)
            sweep_staged(tasks, run_id)
    results.sort(key=lambda r: (r.task.log_dir, r.task.topic, r.task.partition, r.task.base_offset))
    return RunReport(
        run_id, options.mode, started, datetime.now(UTC), options, results, partition_findings, discovery.skipped,
        discovery.partitions, discovery.log_dirs, phases, swept,
    )  # fmt: skip


def summary_rows(report: RunReport) -> list[dict[str, Any]]:
    """One dict per partition: the final summary table."""
    rows: dict[str, dict[str, Any]] = {}
    for s in report.segments:
        t = s.task
        row = rows.setdefault(
            t.partition_dir,
            {"partition": partition_name(t.topic, t.partition), "log_dir": t.log_dir, "segments": 0, "bytes": 0,
             "findings": 0, "kinds": set(), "written": 0, "actions": set()},
        )  # fmt: skip
        errors = [f for f in s.findings if f.severity == "error"]
        row["segments"] += 1
        row["bytes"] += s.file_size
        row["findings"] += len(errors)
        row["kinds"].update(f.kind for f in errors)
        row["written"] += len(s.written)
        if s.action != "none":
            row["actions"].add(s.action)
    for path, findings in report.partition_findings.items():
        errors = [f for f in findings if f.severity == "error"]
        if errors and path not in rows:  # a partition with no segment read (an unreadable dir)
            p = next(p for p in report.partitions if p.path == path)
            rows[path] = {"partition": p.name, "log_dir": p.log_dir, "segments": 0, "bytes": 0, "findings": 0,
                          "kinds": set(), "written": 0, "actions": set()}  # fmt: skip
        if errors:
            rows[path]["findings"] += len(errors)
            rows[path]["kinds"].update(f.kind for f in errors)
    return list(rows.values())
