"""The segment engine: one verify, rebuild or repair run over a broker's partitions, for every driver.

A run, in order (:func:`run`):

1. **Plan** (driver, metadata only): one :class:`SegmentTask` per segment, saying what to check, what to
   stage, where to stage it and where backups go (:func:`plan_tasks`).
2. **Map** (anywhere, in parallel): :func:`process_segment` scans, plans and checks one segment, and
   *stages* the ``.index``/``.timeindex`` the run will write (fsynced under hidden names beside the final
   ones, old files copied to the backup dir first; an index file that is its rebuild's bytes and then only
   zeros is not staged but marked to be cut in place). It returns a small :class:`SegmentOutcome`: a plan
   summary, never the scan. The driver chooses how tasks are mapped: :func:`map_locally` (this process or
   a process pool) or a Spark job (``jobs.pipeline``).
3. **Replay** (driver, per partition, sequential and small; each partition as soon as the map has handed over all
   of its outcomes, beside the map's workers): producer state is replayed over the outcomes' events
   (:func:`replay_outcomes`), giving each segment's aborted transactions, the ``.txnindex`` findings and whether
   Kafka's recovery would refuse it.
4. **Decide** (pure): :func:`decide` turns an outcome, its replay and the run's options into a
   :class:`Decision`: the action, whether to write the ``.txnindex``, where to cut the ``.log``.
5. **Commit** (driver): :func:`commit_segment` applies one decision (renames, cuts in place, the
   ``.txnindex``, the tail cut) and returns the :class:`SegmentResult` the report and the audit read; what a run staged and did
   not install is swept (:func:`sweep_staged`), also after a failure.

Invariants: verify and every dry run write nothing; a repair rewrites only files whose findings the
registry marks "rebuild the file" (and cuts a ``.log`` tail only when asked, after saving the cut bytes);
Kafka never sees a file of a segment its recovery would refuse; every file is either the old one or the
whole new one at any moment; an in-place write holds each log dir's ``.lock`` as the broker does for the whole
run (:func:`~indexlib.storage.locks.broker_locks`), and refuses one another process holds unless forced.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..format.layout import RECOVERY_POINT_OFFSET_CHECKPOINT, partition_name, run_lock_run_id
from ..format.meta_properties import BrokerIdentity
from ..recovery.checks import foreign_dir_findings
from ..recovery.findings import Finding
from ..recovery.settings import IndexSettings
from ..storage import (
    Discovery,
    Partition,
    RecoveringMark,
    StageFence,
    broker_locks,
    by_file_system,
    fsync_paths,
    is_uri,
    remote_store,
    run_locks,
    store_for,
    sweep_dead_run_locks,
    sweep_dead_runs,
    sweep_partial_backups,
    sync_roots,
    syncfs_trusted,
)
from .commit import (
    Decision,
    SegmentResult,
    commit_partition_files,
    commit_segment,
    decide,
    files_to_write,
    sweep_map_backups,
    sweep_staged,
)
from .identity import identities
from .interrupts import deferred_signals
from .options import RunOptions, backup_root, check_run, chosen_sync, new_run_id
from .recover import (
    PartitionRecovery,
    clear_marks,
    dropped_result,
    finish_partitions,
    interrupted_recoveries,
    interrupted_recovery_findings,
    mark_log_dirs,
    own_mark_findings,
    partition_files_a_dry_run_lists,
    partition_files_to_write,
    plan_recovery,
    recover_decisions,
    unreadable_log_start_points,
    unreadable_recovery_points,
    with_interrupted_partitions,
    write_recovery_points,
    writes_partition_files,
)
from .replay import PartitionReplay, SegmentReplay, replay_outcomes
from .segment_task import MapSegments, SegmentOutcome, SegmentTask, partition_backup_dir, plan_tasks

if TYPE_CHECKING:
    from ..format.cluster_metadata import ClusterFacts


# ---------------------------------------------------------------------------------------------- run
@dataclass
class RunReport:
    run_id: str
    mode: str
    started: datetime
    finished: datetime
    options: RunOptions
    segments: list[SegmentResult]
    partition_findings: dict[str, list[Finding]]  # partition dir (or log dir) -> its findings
    skipped: list[tuple[str, str]]
    partitions: list[Partition]
    log_dirs: list[str]
    phase_seconds: dict[str, float] = field(default_factory=dict)  # "scan" (the map), "replay", "commit"
    swept: list[str] = field(default_factory=list)  # staged files of dead runs this run removed
    brokers: dict[str, BrokerIdentity] = field(default_factory=dict)  # log dir -> whose it is
    recovered: dict[str, PartitionRecovery] = field(default_factory=dict)  # recover: partition dir -> what it did
    checkpoints: list[str] = field(default_factory=list)  # recover: the recovery-point files it rewrote
    rewritten: list[str] = field(default_factory=list)  # repair: snapshots and leader epochs rewritten from the log
    rewrite_backups: dict[str, list[str]] = field(default_factory=dict)  # repair: partition dir -> their backups
    interrupted: dict[str, RecoveringMark] = field(default_factory=dict)  # log dir -> an unfinished recover's mark
    cleared: list[str] = field(default_factory=list)  # recover: the marks it removed once it had finished
    errors: list[str] = field(default_factory=list)  # writes that failed outside any segment's commit (recover's)
    # a dry run: the files beside the segments the real run would write (as its partition_files_written)
    would_write: list[str] = field(default_factory=list)

    def broker_of(self, path: str) -> BrokerIdentity:
        """The identity of the log dir ``path`` is in (or is): the longest log dir that holds it."""
        best = ""
        for log_dir in self.brokers:
            if (path == log_dir or path.startswith(log_dir.rstrip(os.sep) + os.sep)) and len(log_dir) > len(best):
                best = log_dir
        return self.brokers.get(best, BrokerIdentity())

    @property
    def partition_files_written(self) -> list[str]:
        """The files a run wrote beside the segments: a repair's snapshots and leader epochs, a recover's
        snapshots, leader epochs, rolled empty segments and recovery-point checkpoints."""
        created = [path for plan in self.recovered.values() for path in plan.created]
        return sorted(set(self.rewritten + created + self.checkpoints))

    def files_beside_segments(self) -> list[tuple[Partition, list[str], list[str]]]:
        """Per partition (in discovery order), the files this run wrote in its dir beside the segments (a repair's
        rewritten snapshots and leader epochs; a recover's snapshots, leader epochs and rolled empty segment) and
        the backups of what they replaced or moved away. Partitions with none are left out."""
        rewritten: dict[str, list[str]] = {}
        for path in self.rewritten:
            rewritten.setdefault(os.path.dirname(path), []).append(path)
        found = []
        for p in self.partitions:
            plan = self.recovered.get(p.path)
            written = sorted((plan.created if plan else []) + rewritten.get(self.options.target_dir(p), []))
            backups = sorted((plan.backups if plan else []) + self.rewrite_backups.get(p.path, []))
            if written or backups:
                found.append((p, written, backups))
        return found

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the run: each partition's partition-level ones, then its segments' in order."""
        return [f for fs in self.partition_findings.values() for f in fs] + [
            f for s in self.segments for f in s.findings
        ]

    @property
    def healthy(self) -> bool:
        """No error finding and no failed segment: what a verify reports with exit code 0."""
        return not self.failed and not any(f.severity == "error" for f in self.findings)

    @property
    def remaining_findings(self) -> list[Finding]:
        """Error findings not fixed by this run's writes."""
        moved = [path for plan in self.recovered.values() for path in plan.moved]
        rewritten = {*self.rewritten, *self.cleared, *self.partition_files_written, *moved}  # no longer as found
        left = [
            f
            for fs in self.partition_findings.values()
            for f in fs
            if f.severity == "error" and f.file not in rewritten
        ]
        for s in self.segments:
            if s.action == "dropped":  # the whole segment moved away (after a cut): none of its findings holds
                continue
            fixed = set(s.written) if s.error is None else set()
            left += [f for f in s.findings if f.severity == "error" and f.file not in fixed]
        return left

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(s.error for s in self.segments)

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

    def run_started(self, options: RunOptions) -> None:
        """The options the run goes with, once it holds its locks: its sync method chosen (``auto`` resolved), as its
        rows record it."""

    def before_commit(self, outcome: SegmentOutcome, decision: Decision) -> None: ...

    def after_commit(self, result: SegmentResult) -> None: ...

    def before_partition_files(self, partition: Partition, broker: BrokerIdentity, files: list[str]) -> None:
        """Before a run writes files beside a partition's segments (``files``: those it may write, replace or move
        away)."""

    def after_partition_files(
        self, partition: Partition, broker: BrokerIdentity, written: list[str], backups: list[str]
    ) -> None:
        """After them: what was written, and the backups of what it replaced or moved away."""


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
    stages = _RunStages(discovery, options, observer)
    with stages.held():
        stages.prepare(index_settings)
        try:
            stages.map(map_segments)
            stages.replay()
            stages.commit()
        finally:  # a failed map or an interrupted commit: the renames made are durable, nothing staged stays
            stages.clean_up()
    return stages.report(started)


def check_locks_free(discovery: Discovery, options: RunOptions) -> None:
    """Refuse what :func:`run` refuses when it takes its locks (:class:`LockedLogDirError`: a running broker's
    ``.lock``; :class:`RunInUseError`: a run with this ``--run-id`` writing there), by taking them and letting go, so
    that a slow start (the Spark job's JVM) never comes before that refusal; :func:`run` takes them again for the
    whole run. A run without a run id takes a new one: no run lock can be held."""
    stages = _RunStages(discovery, options, None)
    if options.run_id is None:
        stages.lock_dirs = []
    with stages.locks():
        pass  # taken, then let go: nothing is done under them here


class _RunStages:
    """One run's stages in order (:func:`run`) and what they hand on: ``held`` (the locks), ``prepare`` (sweeps,
    identities, the recover plan, the tasks, the findings before any scan), ``map``, ``replay``, ``commit`` (per
    partition, then a recover's files beside the segments and its recovery points), ``clean_up`` (always), and
    ``report``."""

    def __init__(self, discovery: Discovery, options: RunOptions, observer: CommitObserver | None) -> None:
        self.discovery, self.options, self.observer = discovery, options, observer
        self.run_id = options.run_id or new_run_id(options.mode)
        # the local dirs a writing run writes under: each in-place partition's log dir, or the output dir (a prefix in
        # object storage takes no lock or fence: it must be new, objects are never replaced, and a staged object a
        # stopped task puts late is named as staged, never as an index file)
        self.lock_dirs = [
            p.log_dir if options.in_place(p) else os.path.dirname(options.target_dir(p))
            for p in discovery.partitions
            if not options.read_only and not is_uri(options.target_dir(p))
        ]
        self.root = backup_root(options)
        self.fence = StageFence(min(self.lock_dirs), self.run_id) if self.lock_dirs else None
        self.swept: list[str] = []
        self.phases: dict[str, float] = {}
        self.clock = time.perf_counter()
        self.tasks: list[SegmentTask] = []
        self.outcomes: list[SegmentOutcome] = []
        self.mapped = False
        self.results: list[SegmentResult] = []
        self.partition_findings: dict[str, list[Finding]] = {}
        self.checkpoints: list[str] = []
        self.errors: list[str] = []  # failures after work began that no segment's row holds
        self.cleared: list[str] = []
        self.rewritten: list[str] = []
        self.rewrite_backups: dict[str, list[str]] = {}
        self.unfinished: list[tuple[Partition, PartitionRecovery, list[SegmentResult]]] = []  # recover's, in order
        self.would_write: list[str] = []  # a dry run's files beside the segments
        self.touched: set[str] = set()  # dirs with a name changed by this run: fsynced at its end
        self.trimmed: list[str] = []  # files cut in place (commit_segment): fsynced at its end
        self.finished: set[str] = set()  # recover: partition dirs whose files (trimmed ones too) are fsynced already
        self.marked: list[str] = []
        self.by_partition: dict[str, list[SegmentOutcome]] = {}
        self.replays: dict[str, PartitionReplay] = {}

    @contextlib.contextmanager
    def locks(self) -> Iterator[list[str]]:
        """The broker's ``.lock`` of every log dir written in place, then the run locks; yields the log dirs whose
        ``.lock`` another process holds (``--force``: a running broker's)."""
        options = self.options
        in_place_log_dirs = [p.log_dir for p in self.discovery.partitions if options.in_place(p)]
        advice = {
            "recover": "recover works only on a stopped broker's log dirs",
            "rebuild": "stop the broker, use --output-dir, or pass --force",
        }.get(options.mode, "stop the broker, or pass --force")
        with broker_locks(in_place_log_dirs, options.force, advice) as unheld, run_locks(self.lock_dirs, self.run_id):
            yield unheld

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The locks (:meth:`locks`) and the file systems' durability (``--sync syncfs``), for the whole run."""
        options = self.options
        written_roots = sorted({*self.lock_dirs, *([self.root] if self.root is not None else [])})
        with self.locks() as unheld, contextlib.ExitStack() as durability:
            sync = chosen_sync(options, unheld, options.sync == "auto" and syncfs_trusted())
            if sync == "syncfs":
                try:
                    durability.enter_context(by_file_system(written_roots))
                except OSError:
                    if options.sync != "auto":
                        raise
                    sync = "fsync"  # a root it cannot open: auto falls back to what always works
            if sync == "syncfs" and not sync_roots():
                sync = "fsync"  # no root on a file system syncfs is trusted on (ext4, xfs, btrfs, tmpfs)
            self.options = replace(options, sync=sync)  # what the run used: the report and audit rows say it
            if self.observer is not None:
                self.observer.run_started(self.options)
            yield

    def prepare(self, index_settings: Callable[[str], IndexSettings]) -> None:
        """Before the map: the leftovers of dead runs swept, unfinished recovers found, each log dir's identity, a
        recover's plan, the tasks, and the findings that need no scan."""
        options, run_id = self.options, self.run_id
        self.marks = interrupted_recoveries(
            self.discovery
        )  # recovers that did not finish: reported; a recover finishes them
        if options.mode == "recover":
            self.discovery = with_interrupted_partitions(self.discovery, self.marks)
        discovery = self.discovery
        if not options.read_only:
            local_targets = [options.target_dir(p) for p in discovery.partitions if not is_uri(options.target_dir(p))]
            self.swept = sweep_dead_runs(local_targets, run_id)
            dead = {run_lock_run_id(os.path.basename(path)) for path in sweep_dead_run_locks(self.lock_dirs, run_id)}
            if self.root is not None:  # the copies those runs were making into their backups (under this root)
                self.swept += sweep_partial_backups(self.root, {d for d in dead if d is not None})
        self.clock = time.perf_counter()
        self.brokers, log_dir_findings = identities(discovery, options.broker_id)
        self.recovery, recovery_findings = plan_recovery(discovery) if options.mode == "recover" else ({}, {})
        if options.checks and options.mode != "recover":  # recover's plan reads the file and reports it itself
            recovery_findings = unreadable_recovery_points(discovery)
        self.recovery_findings = recovery_findings
        only = {path: plan.bases for path, plan in self.recovery.items()} if options.mode == "recover" else None
        fence = self.fence.path if self.fence else None
        self.tasks = plan_tasks(discovery, options, run_id, index_settings, self.brokers, only, fence)
        self.partition_findings = dict(log_dir_findings)
        for path, found in [*interrupted_recovery_findings(self.marks).items(), *recovery_findings.items()]:
            self.partition_findings.setdefault(path, []).extend(found)
        for path in discovery.foreign:
            self.partition_findings.setdefault(os.path.dirname(path), []).extend(foreign_dir_findings([path]))
        for path, found in unreadable_log_start_points(discovery).items():
            self.partition_findings.setdefault(path, []).extend(found)
        self.replayer = _Replayer(discovery, self.tasks, options.checks, run_id, options.cluster)

    def map(self, map_segments: MapSegments) -> None:
        """The map, inside the run's stage fence; closed as it returns, so a task attempt Spark runs on (speculative,
        or a zombie) stages nothing now."""
        if self.fence is not None:
            self.fence.create()
        self.outcomes = map_segments(self.tasks, self.run_id, self.replayer.arrived) if self.tasks else []
        self.mapped = True
        _close_staging(self.fence)
        self.phases["scan"], self.clock = time.perf_counter() - self.clock, time.perf_counter()

    def replay(self) -> None:
        """Every partition replayed (most of them already, beside the map); their findings."""
        self.by_partition, self.replays = self.replayer.finish(self.outcomes)
        for p in self.discovery.partitions:
            self.partition_findings[p.path] = self.recovery_findings.get(p.path, []) + self.replays[p.path].findings
        self.phases["replay"], self.clock = time.perf_counter() - self.clock, time.perf_counter()

    def commit(self) -> None:
        """Each partition's segments decided and committed, in order; a recover's files beside the segments (in
        groups as they come) and its recovery points."""
        options = self.options
        marks = self.marks
        self.marked = mark_log_dirs(self.recovery, marks, self.run_id) if self.recovery and not options.dry_run else []
        for p in self.discovery.partitions:
            self._commit_partition(p)
        self.finished |= _finish_partitions(self.unfinished, self.brokers, self.observer)
        self.errors += [plan.error for plan in self.recovery.values() if plan.error]
        if self.recovery and not options.dry_run:
            with deferred_signals():
                root = self.root
                self.checkpoints, unmoved = write_recovery_points(
                    self.recovery, os.path.join(root, self.run_id) if root else None
                )
                self.errors += [unmoved[d] for d in sorted(unmoved)]
                # a stale mark too (its partitions are done); a log dir whose points did not move keeps its mark
                self.cleared = clear_marks([d for d in self.marked + list(marks) if d not in unmoved])
                cleared_dirs = {os.path.dirname(m) for m in self.cleared}
                for log_dir in sorted(set(self.marked) - set(marks) - cleared_dirs):
                    self.partition_findings.setdefault(log_dir, []).extend(own_mark_findings(log_dir, self.run_id))
        self.phases["commit"] = time.perf_counter() - self.clock

    def _commit_partition(self, p: Partition) -> None:
        options, observer, recovery = self.options, self.observer, self.recovery
        mine: list[SegmentResult] = []
        pairs = list(zip(self.by_partition.get(p.path, []), self.replays[p.path].segments, strict=True))
        decisions, cut = _decisions(p, pairs, options)
        real = _decisions(p, pairs, replace(options, dry_run=False))[0] if options.dry_run else decisions
        if cut is not None and decisions[cut].drop:  # the segments it drops are moved whole, their files
            for outcome, _ in pairs[cut + 1 :]:  # as they are: nothing staged or copied for them stays in
                store_for(outcome.task.target_store).discard_staged(outcome.staged, outcome.backups)  # their way
                outcome.staged, outcome.backups = {}, []
        for i in ([cut] if cut is not None else []) + [i for i in range(len(pairs)) if i != cut]:
            outcome, replay = pairs[i]
            decision = decisions[i]
            if cut is not None and i != cut:  # the cut segment's commit came first (mine[0])
                if mine[0].action != "failed" and i > cut:  # moved away with that commit
                    mine.append(dropped_result(outcome, replay, options.dry_run, mine[0].dropped))
                    if options.dry_run:  # the files the cut's commit would move away
                        base = outcome.task.base_offset
                        mine[-1].would_write = sorted(f for b, fs in real[cut].drop if b == base for f in fs)
                    continue
                if mine[0].action == "failed" and decision.install:
                    decision = Decision("kept")  # the cut failed: the partition stops unchanged
            # SIGINT/SIGTERM stop the run between two segments, never inside one's journal record,
            # renames and row (a commit that touches no file, as all of a verify's, has none to cut)
            with deferred_signals() if decision.install or outcome.staged else contextlib.nullcontext():
                target = outcome.task.target_dir or outcome.task.partition_dir
                if decision.install and observer is not None:
                    observer.before_commit(outcome, decision)
                try:
                    result = commit_segment(outcome, replay, decision)
                except BaseException:  # fsynced at the end even if the commit failed after a rename
                    if decision.install:
                        self.touched.add(target)
                    raise
                if options.dry_run:
                    result.would_write = files_to_write(outcome, replay, real[i], options.mode)
                if len(result.written) > len(result.trimmed):  # a name in the dir changed
                    self.touched.add(target)
                self.trimmed += result.trimmed
                if decision.install and observer is not None:
                    observer.after_commit(result)
                mine.append(result)
        mine.sort(key=lambda r: r.task.base_offset)
        if p.path in recovery and writes_partition_files(mine):
            self.unfinished.append((p, recovery[p.path], mine))
            if len(self.unfinished) == FINISHED_TOGETHER:
                self.finished |= _finish_partitions(self.unfinished, self.brokers, observer)
                self.unfinished = []
        rewrites = self.replays[p.path].rewrites
        if options.dry_run and p.path in recovery and writes_partition_files(mine, dry_run=True):
            self.would_write += partition_files_a_dry_run_lists(recovery[p.path], mine)
            if recovery[p.path].left is None:
                self.would_write.append(os.path.join(p.log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT))
        if options.mode == "repair" and options.dry_run:
            self.would_write += [os.path.join(options.target_dir(p), os.path.basename(f)) for f in rewrites]
        if options.mode == "repair" and not options.dry_run and rewrites:
            self.touched.add(options.target_dir(p))
            who = self.brokers.get(p.log_dir, BrokerIdentity())
            written, copies = _rewrite_partition_files(p, who, rewrites, options, self.run_id, observer)
            self.rewritten += written
            self.rewrite_backups[p.path] = copies
        self.results += mine

    def clean_up(self) -> None:
        """After the commit, or a failed map or commit: the renames made are durable, nothing staged stays."""
        left = [t for t in self.trimmed if os.path.dirname(t) not in self.finished]
        left += sorted(d for d in self.touched - self.finished if not is_uri(d))  # a put object is durable already
        unsynced = fsync_paths(left)  # together: one journal commit covers many
        _close_staging(self.fence)  # a map stopped midway: no task of it stages after this sweep
        for o in self.outcomes or self.replayer.handed_over():  # a map stopped midway: what it handed over before
            store_for(o.task.target_store).discard_staged(o.staged, o.backups)
        if not self.mapped:  # and what it did not
            sweep_map_backups(self.tasks)
        sweep_staged(self.tasks, self.run_id)
        if unsynced:
            raise unsynced[min(unsynced)]

    def report(self, started: datetime) -> RunReport:
        results = sorted(
            self.results, key=lambda r: (r.task.log_dir, r.task.topic, r.task.partition, r.task.base_offset)
        )
        d = self.discovery
        return RunReport(
            self.run_id, self.options.mode, started, datetime.now(UTC), self.options, results,
            self.partition_findings, d.skipped, d.partitions, d.log_dirs, self.phases, self.swept, self.brokers,
            self.recovery, self.checkpoints, self.rewritten, self.rewrite_backups, self.marks, self.cleared,
            self.errors, sorted(set(self.would_write)),
        )  # fmt: skip


def _close_staging(fence: StageFence | None) -> None:
    """Close the run's staging (:class:`~indexlib.storage.locks.StageFence`): after it no task stages a file."""
    if fence is not None:
        fence.close()


class _Replayer:
    """The replay of each partition (:func:`replay_outcomes`, read-only) as soon as the map has handed over all of
    its outcomes (:data:`~indexlib.engine.segment_task.Arrived`), while the map goes on with other partitions; the
    rest when the map returns. Each partition is replayed once, over its outcomes in ascending base offset."""

    def __init__(
        self, discovery: Discovery, tasks: list[SegmentTask], check: bool, run_id: str, cluster: ClusterFacts | None
    ) -> None:
        self.partitions = {p.path: p for p in discovery.partitions}
        self.check, self.run_id, self.cluster = check, run_id, cluster
        self.store = remote_store(discovery.store)
        self.expected: dict[str, int] = {}
        for t in tasks:
            self.expected[t.partition_dir] = self.expected.get(t.partition_dir, 0) + 1
        self.arrived_outcomes: dict[str, list[SegmentOutcome]] = {}
        self.replays: dict[str, PartitionReplay] = {}

    def arrived(self, outcomes: list[SegmentOutcome]) -> None:
        complete = []
        for o in outcomes:  # all of them kept first: a replay that fails leaves none unaccounted for
            path = o.task.partition_dir
            mine = self.arrived_outcomes.setdefault(path, [])
            mine.append(o)
            if len(mine) == self.expected[path]:
                complete.append(path)
        for path in complete:
            self._replay(path, self.arrived_outcomes[path])

    def handed_over(self) -> list[SegmentOutcome]:
        """The outcomes the map has handed over so far (all of them once it returned)."""
        return [o for outcomes in self.arrived_outcomes.values() for o in outcomes]

    def finish(
        self, outcomes: list[SegmentOutcome]
    ) -> tuple[dict[str, list[SegmentOutcome]], dict[str, PartitionReplay]]:
        """Every partition's outcomes (ascending base offset) and replay, from the map's whole result."""
        by_partition: dict[str, list[SegmentOutcome]] = {}
        for o in outcomes:
            by_partition.setdefault(o.task.partition_dir, []).append(o)
        for path in self.partitions:
            mine = by_partition.setdefault(path, [])
            mine.sort(key=lambda o: o.task.base_offset)
            if path not in self.replays:
                self._replay(path, mine)
        return by_partition, self.replays

    def _replay(self, path: str, outcomes: list[SegmentOutcome]) -> None:
        outcomes.sort(key=lambda o: o.task.base_offset)
        self.replays[path] = replay_outcomes(
            self.partitions[path], outcomes, self.check, self.run_id, self.cluster, self.store
        )


#: how many partitions a recover finishes at once (their files' fsyncs in flight together: one journal commit of
#: a journaling file system covers many, and two rounds of fsyncs per group; also how many may still finish after
#: one fails)
FINISHED_TOGETHER = 256


def _decisions(
    p: Partition, pairs: list[tuple[SegmentOutcome, SegmentReplay]], options: RunOptions
) -> tuple[list[Decision], int | None]:
    """Each segment's decision (:func:`decide`) and, for a recover, the cut and its drops (:func:`recover_decisions`):
    the index of the segment it cuts, None for none. A dry run asks it again with ``dry_run`` off: what it would do."""
    decisions = [decide(outcome, replay, options) for outcome, replay in pairs]
    if options.mode != "recover":
        return decisions, None
    return recover_decisions(p, pairs, decisions)


def _finish_partitions(
    unfinished: list[tuple[Partition, PartitionRecovery, list[SegmentResult]]],
    brokers: dict[str, BrokerIdentity],
    observer: CommitObserver | None,
) -> set[str]:
    """A recover's files beside the segments of these partitions (their segments committed): each partition's
    intent told to the observer first, then the partitions finished together (:func:`finish_partitions`), then
    the rows of those that finished (one that failed says why in its ``error``). Returns the dirs of those
    that finished: fsynced after every rename in them (the segments' too), so the run need not again."""
    if not unfinished:
        return set()
    with deferred_signals():
        if observer is not None:
            for p, plan, mine in unfinished:
                try:
                    files = partition_files_to_write(plan, mine)
                except OSError:  # its dir cannot be listed: the finish fails it alone; the intent names the dir
                    files = [p.path]
                observer.before_partition_files(p, brokers.get(p.log_dir, BrokerIdentity()), files)
        try:
            finish_partitions([(plan, mine) for _, plan, mine in unfinished])
        finally:  # a partition that failed keeps its intent: the journal's record of an interrupted one
            if observer is not None:
                for p, plan, _ in unfinished:
                    if plan.new_recovery_point is not None:
                        who = brokers.get(p.log_dir, BrokerIdentity())
                        observer.after_partition_files(p, who, plan.created, plan.backups)
    return {p.path for p, plan, _ in unfinished if plan.new_recovery_point is not None}


def _rewrite_partition_files(
    p: Partition,
    broker: BrokerIdentity,
    rewrites: dict[str, bytes],
    options: RunOptions,
    run_id: str,
    observer: CommitObserver | None,
) -> tuple[list[str], list[str]]:
    """A repair's producer snapshots and leader epochs of one partition, after the segments they describe, told
    to the observer before and after: (the files written, the backups of the old ones)."""
    target = options.target_dir(p)
    with deferred_signals():
        if observer is not None:
            finals = sorted(os.path.join(target, os.path.basename(f)) for f in rewrites)
            observer.before_partition_files(p, broker, finals)
        written, copies = commit_partition_files(rewrites, target, partition_backup_dir(options, run_id, p), run_id)
        if observer is not None:
            observer.after_partition_files(p, broker, written, copies)
    return written, copies


def _files_beside_segments_by_partition(report: RunReport) -> dict[str, int]:
    """Partition dir -> how many files the run wrote beside its segments (a dry run: would write)."""
    if not report.options.dry_run:
        return {p.path: len(written) for p, written, _ in report.files_beside_segments()}
    by_target = {report.options.target_dir(p): p.path for p in report.partitions}
    counts: dict[str, int] = {}
    for path in report.would_write:
        if (partition := by_target.get(os.path.dirname(path))) is not None:
            counts[partition] = counts.get(partition, 0) + 1
    return counts


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
        row["written"] += len(s.written) + len(s.would_write)  # a dry run: what it would write
        if s.action != "none":
            row["actions"].add(s.action)
    for path, count in _files_beside_segments_by_partition(report).items():
        if path in rows:
            rows[path]["written"] += count
    for path, findings in report.partition_findings.items():
        errors = [f for f in findings if f.severity == "error"]
        if errors and path not in rows:  # a partition with no segment read (an unreadable dir), or a log dir
            p = next((p for p in report.partitions if p.path == path), None)
            name, log_dir = (p.name, p.log_dir) if p is not None else ("(log dir)", path)
            rows[path] = {"partition": name, "log_dir": log_dir, "segments": 0, "bytes": 0, "findings": 0,
                          "kinds": set(), "written": 0, "actions": set()}  # fmt: skip
        if errors:
            rows[path]["findings"] += len(errors)
            rows[path]["kinds"].update(f.kind for f in errors)
    return list(rows.values())
