"""One segment's share of a run, anywhere (this process, a pool worker, a Spark executor): the task the
driver plans (:func:`plan_tasks`) and :func:`process_segment`, which scans, plans, checks and stages it
and returns a small :class:`SegmentOutcome` (never the scan)."""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..format.index_file import FileIdentity
from ..format.layout import (
    segment_file,
)
from ..format.meta_properties import BrokerIdentity
from ..recovery.checks import (
    REBUILT_BYTES,
    check_segment_files,
    holds_only_the_rebuild,
    log_findings,
)
from ..recovery.entry_plan import PlanSummary, SegmentPlan, plan_segment
from ..recovery.findings import Finding, files_to_rebuild
from ..recovery.log_scan import NO_PROBES, ExistingIndex, LogSummary, Probes, unreadable_summary
from ..recovery.settings import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    IndexSettings,
)
from ..storage import (
    LOCAL,
    Discovery,
    Partition,
    StoreSpec,
    discard,
    fsync_paths,
    keep_backup,
    name_backups,
    producer_states_inside,
    staging_open,
    store_for,
    summarize_log,
    writable,
)
from .options import RunOptions, backup_root

#: the files an executor stages (they need the full plan); the .txnindex needs the replay, on the driver
STAGED_BY_EXECUTORS = (".index", ".timeindex")


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
    broker: BrokerIdentity = BrokerIdentity()  # whose log dir (its meta.properties, or --broker-id)
    # an index that is its rebuild then zeros may be cut in place; never in a forced run, beside a broker that may
    # be running: it maps its active segment's indexes, and a cut under its mapping would kill it (SIGBUS)
    may_cut: bool = True
    # the run's stage fence (storage.locks.StageFence): a task stages only while it is there; None: stages nothing
    stage_fence: str | None = None
    store: StoreSpec = LOCAL  # where the segment's files are: each process builds the same store from it
    target_store: StoreSpec = LOCAL  # where ``target_dir`` is (an output prefix in object storage, or a local dir)
    # with ``check``: the offsets of the partition's snapshots inside this segment (before the next one's base; on
    # a local disk), whose producer states the task computes (PlanSummary.producers_at)
    snapshot_points: tuple[int, ...] = ()


#: what a writing mode stages of each segment (:attr:`SegmentTask.stage`)
STAGE_BY_MODE = {"rebuild": "all", "repair": "damaged", "recover": "all"}


def staged_suffixes(stage: str, partition_dir: str, base_offset: int, findings: list[Finding]) -> tuple[str, ...]:
    """The index files a task with ``stage`` stages of its segment, given the map's ``findings`` of it."""
    if stage == "all":
        return STAGED_BY_EXECUTORS
    if stage == "damaged":
        return tuple(s for s in files_to_rebuild(partition_dir, base_offset, findings) if s in STAGED_BY_EXECUTORS)
    return ()


def plan_tasks(
    discovery: Discovery,
    options: RunOptions,
    run_id: str,
    index_settings: Callable[[str], IndexSettings],
    brokers: dict[str, BrokerIdentity] | None = None,
    only: dict[str, list[int]] | None = None,
    stage_fence: str | None = None,
) -> list[SegmentTask]:
    """One task per segment, with what to check and stage for this run's mode (``index_settings``: a
    topic's settings; ``brokers``: each log dir's identity; ``only``: partition dir -> the base offsets to
    take, all when absent; ``stage_fence``: the run's, which a staging task needs)."""
    stage = "none" if options.read_only else STAGE_BY_MODE[options.mode]
    tasks = []
    for p in discovery.partitions:
        settings = index_settings(p.topic)
        target = options.target_dir(p)
        backup = partition_backup_dir(options, run_id, p)
        chosen = None if only is None else set(only.get(p.path, ()))
        checked_here = options.checks and options.store == LOCAL
        for i, s in enumerate(p.segments):
            if chosen is not None and s.base_offset not in chosen:
                continue
            # the snapshots above its base and below the next segment's (sorted: one bisect each, not a scan of all)
            end = bisect.bisect_left(p.snapshots, p.segments[i + 1].base_offset) if i + 1 < len(p.segments) else None
            inside = tuple(p.snapshots[bisect.bisect_right(p.snapshots, s.base_offset) : end])
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
                    (brokers or {}).get(p.log_dir, BrokerIdentity()),
                    not options.force,
                    stage_fence if stage != "none" else None,
                    options.store,
                    options.output_store if options.output_dir is not None else LOCAL,
                    inside if checked_here else (),
                )
            )
    return tasks


def partition_backup_dir(options: RunOptions, run_id: str, p: Partition) -> str | None:
    """``<backup root>/<run id>/<topic>-<partition>``: always for repair (default root
    ``<state dir>/kafka-index-backups``); for an in-place rebuild only when a root is set; never for a read-only
    run or an ``--output-dir`` elsewhere."""
    root = backup_root(options)
    if root is not None and (options.mode in ("repair", "recover") or options.in_place(p)):
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


_FACT_NAMES = tuple(f.name for f in fields(SegmentFacts))


def segment_facts(facts: SegmentFacts) -> dict[str, Any]:
    """The :class:`SegmentFacts` fields of ``facts`` (an outcome), by name: what a result built from it starts from."""
    return {name: getattr(facts, name) for name in _FACT_NAMES}


@dataclass
class SegmentOutcome(SegmentFacts):
    """What the map step returns for one segment: its facts and what it staged."""

    staged: dict[str, str] = field(default_factory=dict)  # final path -> staged path, not installed yet
    # final path -> (its rebuild's size, the file as read): an index file that is its rebuild's bytes and then only
    # zeros, which the commit cuts to that size in place instead of staging a copy (nothing staged, nothing to back up)
    trims: dict[str, tuple[int, FileIdentity]] = field(default_factory=dict)
    backups: list[str] = field(default_factory=list)  # copies of the files the staged ones will replace
    error: str | None = None  # staging failed (nothing is left staged)


def plan_segment_file(
    log_path: str,
    base_offset: int,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    probes: Probes = NO_PROBES,
) -> tuple[LogSummary, SegmentPlan]:
    """Scan and plan one segment: the independent, parallel part of a partition's rebuild. A segment
    that cannot be read gets an empty summary whose ``fatal`` says why. The settings are trusted (an
    :class:`IndexSettings`'s: validated where they enter)."""
    try:
        summary = summarize_log(log_path, base_offset, index_interval_bytes, probes)
    except (OSError, ValueError) as exc:
        summary = unreadable_summary(log_path, base_offset, index_interval_bytes, exc)
    return summary, plan_segment(summary, segment_index_bytes)


def process_segment(task: SegmentTask, tag: str | None = None, unsynced: list[str] | None = None) -> SegmentOutcome:
    """Scan, plan and (``task.check``) verify one segment's ``.log``, ``.index`` and ``.timeindex``;
    stage the ``.index``/``.timeindex`` the run will write (``task.stage``; staged names carry ``tag``,
    default the run id), backing up the old ones that hold more than the rebuild. A staging failure is recorded in ``error`` with
    nothing left staged. ``seconds`` covers all of it. With ``unsynced`` the staged files (and the backup dir
    after its copies) are not fsynced but added to it: the caller fsyncs them before it hands the outcome on
    (:func:`process_segments`)."""
    started = time.perf_counter()
    target_dir = task.target_dir or task.partition_dir
    store = store_for(task.store)
    # read when checked, and when written in place (an index that is its rebuild then zeros is only cut)
    read_indexes = task.check or (task.stage != "none" and target_dir == task.partition_dir and task.may_cut)
    reads = store.read_segment(
        task.log_path, task.partition_dir, task.base_offset, task.index_interval_bytes, read_indexes, task.check,
        task.size,
    )  # fmt: skip
    summary, existing, zero_tail = reads.summary, reads.existing, reads.zero_tail
    plan = plan_segment(summary, task.segment_index_bytes)
    if task.check:
        findings, identical = check_segment_files(
            task.log_path, task.base_offset, summary, plan, task.active, existing, zero_tail
        )
    else:
        findings, identical = log_findings(task.log_path, summary, plan.fatal, zero_tail), {}
    planned = plan.summary()
    # a snapshot inside the segment, below its log end (the replay checks one at the log end): the state there
    inside = [o for o in task.snapshot_points if summary.last_offset is not None and o <= summary.last_offset]
    if inside and plan.fatal is None:
        # gone or changed since the scan (beside a broker): that file is then not compared
        with contextlib.suppress(OSError, ValueError):
            planned = replace(planned, producers_at=producer_states_inside(task.log_path, inside))
    outcome = SegmentOutcome(
        task, planned, summary.batch_count, summary.file_size, summary.valid_bytes, summary.invalid_bytes, findings,
        identical, reads.index_sizes, 0.0,
    )  # fmt: skip
    suffixes = staged_suffixes(task.stage, task.partition_dir, task.base_offset, findings)
    if suffixes and plan.fatal is None:
        if existing is not None and target_dir == task.partition_dir and task.may_cut:
            outcome.trims = _trims(task, plan, existing, suffixes)
            suffixes = tuple(s for s in suffixes if segment_file(target_dir, task.base_offset, s) not in outcome.trims)
        mine: list[str] | None = None if unsynced is None else []
        try:
            outcome.staged = store_for(task.target_store).stage_segment(
                target_dir, task.base_offset, plan, [], suffixes, False, task.segment_index_bytes, tag or task.run_id,
                mine,
            )  # fmt: skip
            if task.backup_dir is not None:
                staged = [s for s in suffixes if segment_file(target_dir, task.base_offset, s) in outcome.staged]
                outcome.backups = _keep_backups(task, plan, existing, staged, mine)
            if unsynced is not None and mine:
                unsynced += mine
        except (OSError, ValueError) as exc:
            # the backups named are kept: another attempt of this task may have named them, and its outcome may be
            # the one committed (a speculative twin); they copy files nothing has replaced yet
            store_for(task.target_store).discard_staged(outcome.staged, [])
            for partial in [p for p in mine or [] if p.endswith(".partial")]:  # copies made before the failure
                discard(partial)
            outcome.staged, outcome.backups = {}, []
            outcome.error = f"{segment_file(target_dir, task.base_offset, '')}: {exc}"
    outcome.seconds = time.perf_counter() - started
    return outcome


def _trims(
    task: SegmentTask, plan: SegmentPlan, existing: dict[str, ExistingIndex], suffixes: tuple[str, ...]
) -> dict[str, tuple[int, FileIdentity]]:
    """The segment's index files (of ``suffixes``, in its partition dir) that become their rebuild by a cut of
    their zero tail: regular files read whole and unchanged that hold the rebuild's bytes and then only zeros
    (:func:`holds_only_the_rebuild`; a crashed or running broker's preallocated index), the rebuild within
    ``segment.index.bytes``, and writable by this process where there is something to cut (else staged and
    renamed, which needs only the dir). Final path -> (the rebuild's size, the file as read)."""
    trims = {}
    for suffix in suffixes:
        index = existing[suffix]
        if index.identity is None:
            continue
        expected = REBUILT_BYTES[suffix](plan)
        if len(expected) > task.segment_index_bytes or not holds_only_the_rebuild(index, plan, suffix, expected):
            continue
        if index.length == len(expected) or writable(index.path):
            trims[index.path] = (len(expected), index.identity)
    return trims


def _keep_backups(
    task: SegmentTask,
    plan: SegmentPlan,
    existing: dict[str, ExistingIndex] | None,
    suffixes: list[str],
    unsynced: list[str] | None,
) -> list[str]:
    """Copy into the task's backup dir each of the segment's files with these ``suffixes`` in its target dir (the
    files the staged ones will replace) that holds something its rebuild lacks; a file that is the rebuild's bytes and then only zeros (a crashed broker's
    preallocated index) is not copied: its copy would keep nothing. Only files in the partition dir itself are
    compared (an ``--output-dir``'s are always copied). Returns the copies."""
    assert task.backup_dir is not None
    in_place = (task.target_dir or task.partition_dir) == task.partition_dir
    if existing is None and in_place:  # a rebuild does not check them: read them (their stored bytes only)
        existing = store_for(task.store).read_indexes(task.partition_dir, task.base_offset)
    copies = []
    for suffix in suffixes:
        if existing is not None and in_place and holds_only_the_rebuild(existing[suffix], plan, suffix):
            continue
        final = segment_file(task.target_dir or task.partition_dir, task.base_offset, suffix)
        copy = keep_backup(final, task.backup_dir, unsynced)
        if copy is not None:
            copies.append(copy)
    return copies


def process_segments(tasks: list[SegmentTask], tag: str | None = None) -> list[SegmentOutcome]:
    """:func:`process_segment` of each task, in order, then what they staged and copied made durable together
    before any outcome is returned (:func:`~indexlib.storage.publish.fsync_paths`: one ``syncfs`` a file system
    under ``--sync syncfs``, else the fsyncs concurrently, a few journal commits for the lot): the staged files
    and the backup copies, then the copies named and their dirs synced (a backup never has its name before its
    bytes are durable). All of it inside the run's stage fence (:func:`~indexlib.storage.locks.staging_open`): a
    stopped run's sweep is never followed by a staged file or a backup. A segment one of whose paths cannot be
    synced or named gets an ``error``, nothing of it left staged, as if its staging had failed."""
    unsynced: list[list[str]] = [[] for _ in tasks]
    with staging_open(tasks[0].stage_fence if tasks else None):
        outcomes = [process_segment(task, tag, paths) for task, paths in zip(tasks, unsynced, strict=True)]
        failed = fsync_paths(list(dict.fromkeys(p for paths in unsynced for p in paths)))
        named: list[list[str]] = []
        own: list[list[str]] = [[] for _ in tasks]  # the backups each outcome's own copy was named
        for outcome, paths, mine in zip(outcomes, unsynced, own, strict=True):
            try:
                if (error := next((failed[p] for p in paths if p in failed), None)) is not None:
                    raise error
                named.append(name_backups(outcome.backups, paths, mine) if outcome.error is None else [])
            except OSError as exc:
                _fail(outcome, exc, paths, mine)
                named.append([])
        failed = fsync_paths(list(dict.fromkeys(d for dirs in named for d in dirs)))
        for outcome, paths, dirs, mine in zip(outcomes, unsynced, named, own, strict=True):
            if (error := next((failed[d] for d in dirs if d in failed), None)) is not None:
                _fail(outcome, error, paths, mine)
    return outcomes


def _fail(outcome: SegmentOutcome, exc: OSError, unsynced: list[str], own: list[str]) -> None:
    """The outcome's staging failed after all: its staged files, its copies not yet named (among ``unsynced``) and
    the backups its own copies were named (``own``) discarded, ``error`` says why. A backup another writer named (a
    speculative attempt of the same task, whose outcome may be committed) is kept."""
    if outcome.error is None:
        store_for(outcome.task.target_store).discard_staged(outcome.staged, own)
        for partial in [p for p in unsynced if p.endswith(".partial")]:
            discard(partial)
        outcome.staged, outcome.backups = {}, []
        target_dir = outcome.task.target_dir or outcome.task.partition_dir
        outcome.error = f"{segment_file(target_dir, outcome.task.base_offset, '')}: {exc}"


#: a map step: ``(tasks, run id, arrived)`` -> every task's outcome. ``arrived`` (may be ``None``), if the map calls
#: it, is handed each group of outcomes as the group is done, in the map's own thread, so the driver works on them
#: while the rest is mapped; an exception it raises stops the map like the map's own. A map that does not call it
#: (a Spark job: its outcomes come back together) is the same to the caller: it goes on from the returned list.
Arrived = Callable[[list[SegmentOutcome]], None]
MapSegments = Callable[[list[SegmentTask], str, Arrived | None], list[SegmentOutcome]]
