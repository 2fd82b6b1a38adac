"""``recover``: leave a stopped broker's log dirs as its own unclean start would, so that the next start finds
nothing to recover (issue 24).

Per partition (see :mod:`indexlib.recovery.log_loader`): the segments from the one containing its recovery point
are validated and their indexes rebuilt (the segment map, as ``rebuild``); the ``.log`` is cut at the first
invalid batch, after the cut bytes are saved in the backup dir and every later segment is moved there (the last
first: killed at any point, the partition still holds the invalid batch, and the next run cuts there again); the
leader-epoch cache is truncated at the new log end; a new empty segment is rolled at the log end (0-byte
``.log``, ``.index``, ``.timeindex``: what a roll and a clean shutdown leave), so that the broker's recovery from
the new recovery point reads nothing; then the recovery point is moved to the log end in
``recovery-point-offset-checkpoint`` (written as Kafka writes its checkpoints).

Never written: ``.kafka_cleanshutdown``: the broker must still tell its controller that it stopped uncleanly.
A partition Kafka's recovery would refuse, or one it must finish itself (:func:`~indexlib.recovery.log_loader.left_to_broker`),
keeps its recovery point and files.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, replace

from ..format.checkpoint import CheckpointError, format_offset_checkpoint
from ..format.errors import error_line
from ..format.layout import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    parse_segment_name,
    segment_file,
)
from ..format.leader_epoch_checkpoint import (
    format_leader_epoch_checkpoint,
    load_leader_epochs,
    parse_leader_epoch_checkpoint,
)
from ..format.producer_snapshot import ProducerSnapshotEntry, format_snapshot
from ..recovery.findings import Finding
from ..recovery.log_loader import left_to_broker, log_end_offset, segments_to_recover
from ..recovery.producer_state import apply_segment, recovered_leader_epochs, snapshot_entries
from ..recovery.state_checks import recovery_point_findings
from ..storage import (
    ROLLED_SEGMENT_SUFFIXES,
    Discovery,
    LogDirError,
    Partition,
    RecoveringMark,
    concurrently,
    create_empty_segment,
    discard,
    discard_staged,
    discover,
    discover_partition_dir,
    file_exists,
    fsync_paths,
    install,
    keep_backup,
    log_dir_backup_dir,
    mark_path,
    move_to_backup,
    name_backups,
    partial_copy_of,
    partition_file_names,
    read_leader_epoch_text,
    read_log_start_offset,
    read_mark,
    read_offset_checkpoint,
    remote_store,
    remove_mark,
    snapshot_offsets,
    stage_checkpoint_file,
    stage_file,
    write_checkpoint_file,
    write_mark,
)
from .commit import Decision, SegmentResult
from .options import TargetDirError
from .replay import SegmentReplay, StateBefore, state_before
from .segment_task import SegmentOutcome, segment_facts


@dataclass
class PartitionRecovery:
    """One partition in a ``recover`` run. ``bases``: the segments it recovers (none when ``left`` says why the
    broker keeps it); after the run, ``new_recovery_point`` (None: unchanged), the files it created and the
    backups of what it moved away."""

    partition: Partition
    recovery_point: int
    bases: list[int]
    left: str | None = None
    new_recovery_point: int | None = None
    created: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what it left to the broker's start (no snapshot to start from)
    error: str | None = None  # why its files beside the segments could not be finished (its recovery point kept)
    moved: list[str] = field(default_factory=list)  # files beside the segments it moved into the backups


def plan_recovery(discovery: Discovery) -> tuple[dict[str, PartitionRecovery], dict[str, list[Finding]]]:
    """Each partition's recovery point and the segments an unclean start recovers; the findings of log dirs
    whose ``recovery-point-offset-checkpoint`` Kafka cannot read (the broker then recovers every segment of
    every partition there: so does this run)."""
    points: dict[str, dict[tuple[str, int], int]] = {}
    findings: dict[str, list[Finding]] = {}
    for log_dir in sorted({p.log_dir for p in discovery.partitions}):
        try:
            points[log_dir] = read_offset_checkpoint(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT)[1]
        except (OSError, CheckpointError) as exc:  # so does this run
            findings[log_dir] = recovery_point_findings(log_dir, exc)
            points[log_dir] = {}
    plans = {}
    clean = {d for d in points if file_exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))}
    for p in discovery.partitions:
        point = points[p.log_dir].get((p.topic, p.partition), 0)
        left = left_to_broker(p.topic, partition_file_names(p.path)) if p.unreadable is None else p.unreadable
        if p.log_dir in clean:
            left = f"the broker shut down cleanly ({CLEAN_SHUTDOWN_FILE}): its start recovers nothing here"
        bases = [] if left else segments_to_recover([s.base_offset for s in p.segments], point)
        plans[p.path] = PartitionRecovery(p, point, bases, left)
        if left:
            findings.setdefault(p.path, []).append(Finding("left_to_broker", p.path, detail=left))
    return plans, findings


def unreadable_recovery_points(discovery: Discovery) -> dict[str, list[Finding]]:
    """Per log dir of the partitions, ``bad_recovery_point_checkpoint`` when Kafka cannot read its
    ``recovery-point-offset-checkpoint`` (an absent or 0-byte one it reads as empty): verify's and repair's check
    (recover's :func:`plan_recovery` reads the file and reports it itself)."""
    findings: dict[str, list[Finding]] = {}
    store = remote_store(discovery.store)
    for log_dir in sorted({p.log_dir for p in discovery.partitions}):
        try:
            read_offset_checkpoint(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT, store)
        except (OSError, CheckpointError) as exc:
            findings[log_dir] = recovery_point_findings(log_dir, exc)
    return findings


def unreadable_log_start_points(discovery: Discovery) -> dict[str, list[Finding]]:
    """Per log dir of the partitions, ``bad_log_start_checkpoint`` when its ``log-start-offset-checkpoint`` cannot
    be read (every mode: the replay of each of its partitions then assumes log start offset 0), once per log dir."""
    findings: dict[str, list[Finding]] = {}
    store = remote_store(discovery.store)
    for log_dir in sorted({p.log_dir for p in discovery.partitions}):
        try:
            read_log_start_offset(log_dir, "", 0, store)
        except (OSError, CheckpointError) as exc:
            path = os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
            detail = f"{error_line(exc, path)}; assuming log start offset 0 for every partition here"
            findings[log_dir] = [Finding("bad_log_start_checkpoint", path, detail=detail)]
    return findings


def recover_decisions(
    partition: Partition, pairs: list[tuple[SegmentOutcome, SegmentReplay]], decisions: list[Decision]
) -> tuple[list[Decision], int | None]:
    """A recover's decisions for one partition's segments (``pairs``, ascending base offset), and the index of the
    segment it cuts (None: no cut). A partition is recovered whole or not at all: one segment Kafka's recovery
    would refuse (or that failed) leaves it all to the broker (``kept``). Else the first segment with an invalid
    batch is cut there and every later one dropped: the cut's decision names their files, highest base first and
    each ``.log`` last, so that its commit (which the runner makes first of the partition's) moves them away
    before the cut (:func:`~indexlib.engine.commit.commit_segment`)."""
    if any(o.error or o.plan.fatal or r.fatal for o, r in pairs):
        return [Decision("kept") if d.install else d for d in decisions], None
    cut = next((i for i, (o, _) in enumerate(pairs) if o.invalid_bytes), None)
    if cut is None:
        return decisions, None
    if decisions[cut].install:
        later = {o.task.base_offset for o, _ in pairs[cut + 1 :]}
        by_base: dict[int, list[str]] = {}
        for name in partition_file_names(partition.path):
            base = _segment_base(name)
            if base in later:
                by_base.setdefault(base, []).append(os.path.join(partition.path, name))
        drop = tuple(
            (base, tuple(sorted(files, key=lambda path: (path.endswith(".log"), path))))
            for base, files in sorted(by_base.items(), reverse=True)
        )
        decisions = decisions[:cut] + [replace(decisions[cut], drop=drop)] + decisions[cut + 1 :]
    return decisions, cut


def interrupted_recoveries(discovery: Discovery) -> dict[str, RecoveringMark]:
    """The marks killed recovers left in the log dirs of ``discovery`` (log dir -> its mark)."""
    store = remote_store(discovery.store)
    log_dirs = sorted({p.log_dir for p in discovery.partitions})
    return {d: mark for d in log_dirs if (mark := read_mark(d, store)) is not None}


def interrupted_recovery_findings(marks: dict[str, RecoveringMark]) -> dict[str, list[Finding]]:
    """Each mark as an error finding of its log dir (verify's, and every run's report)."""
    findings = {}
    for log_dir, mark in marks.items():
        which = (
            f"(unreadable: {mark.unreadable}; any partition of this log dir)"
            if mark.unreadable
            else f"{mark.run_id} ({len(mark.partitions)} partition(s): {', '.join(mark.partitions[:5])}"
            + (", ..." if len(mark.partitions) > 5 else "")
            + ")"
        )
        detail = (
            f"recover run {which} did not finish (killed, or its recovery points could not be written); run "
            "recover again to finish it"
        )
        if file_exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)):
            detail += " (the broker has since shut down cleanly: its own recovery finished them; recover removes it)"
        findings[log_dir] = [Finding("interrupted_recovery", mark.path, detail=detail)]
    return findings


def own_mark_findings(log_dir: str, run_id: str) -> list[Finding]:
    """The mark this run leaves in ``log_dir`` (its recovery points there could not be written), as the finding a
    later verify reports: still true after the run."""
    detail = (
        f"recover run {run_id} (this run) did not finish here: its recovery points were not written; run recover again"
    )
    return [Finding("interrupted_recovery", mark_path(log_dir), detail=detail)]


def with_interrupted_partitions(discovery: Discovery, marks: dict[str, RecoveringMark]) -> Discovery:
    """``discovery`` with every partition a killed recover's mark names (all of its log dir's when the mark is
    unreadable) that the selection left out: the run finishes them too."""
    known = {p.path for p in discovery.partitions}
    added: list[Partition] = []
    for log_dir, mark in sorted(marks.items()):
        if mark.unreadable:
            candidates = discover([log_dir]).partitions
        else:
            candidates = []
            for name in mark.partitions:
                with contextlib.suppress(LogDirError):  # gone since (moved, deleted): nothing left to finish
                    candidates += discover_partition_dir(os.path.join(log_dir, name)).partitions
        for p in candidates:
            if p.path not in known:
                known.add(p.path)
                added.append(p)
    if not added:
        return discovery
    return Discovery(discovery.partitions + added, discovery.log_dirs, discovery.skipped, discovery.foreign)


def mark_log_dirs(plans: dict[str, PartitionRecovery], marks: dict[str, RecoveringMark], run_id: str) -> list[str]:
    """Before a recover's first change: mark each log dir where it recovers a partition (the names of those, and
    those of an earlier killed run's readable mark there), durable. Returns the log dirs marked."""
    names: dict[str, set[str]] = {}
    for plan in plans.values():
        if plan.bases and plan.left is None:
            names.setdefault(plan.partition.log_dir, set()).add(plan.partition.name)
    for log_dir, found in names.items():
        earlier = marks.get(log_dir)
        write_mark(log_dir, run_id, sorted(found | set(earlier.partitions if earlier else [])))
    return sorted(names)


def clear_marks(log_dirs: list[str]) -> list[str]:
    """After the recovery points are durable: remove the marks of ``log_dirs``; returns the marks removed."""
    return [mark_path(d) for d in sorted(set(log_dirs)) if remove_mark(d)]


def dropped_result(
    outcome: SegmentOutcome,
    replay: SegmentReplay,
    dry_run: bool,
    dropped: dict[int, tuple[list[str], list[str]]],
) -> SegmentResult:
    """The result of a segment after a cut: Kafka deletes it; the cut segment's commit moved its files away
    (``dropped``: base offset -> its files and their backups). What the map staged for it is dropped here, with the
    copies made of the files it would have replaced."""
    discard_staged(outcome.staged, outcome.backups)
    facts = segment_facts(outcome)
    facts["findings"] = outcome.findings + replay.findings
    written, backups = dropped.get(outcome.task.base_offset, ([], []))
    action = "would_drop" if dry_run else "dropped"
    return SegmentResult(**facts, aborted=[], action=action, written=list(written), backups=list(backups))


#: the actions of a segment recovered (or that a dry run would recover)
RECOVERED = ("recovered", "would_recover")


def writes_partition_files(results: list[SegmentResult], dry_run: bool = False) -> bool:
    """Whether :func:`finish_partitions` writes anything after these committed segments (with ``dry_run``: would):
    every one recovered or dropped (no segment Kafka's recovery would refuse)."""
    done = ("would_recover", "would_drop") if dry_run else ("recovered", "dropped")
    return bool(results) and all(r.action in done for r in results)


@dataclass
class _PendingFiles:
    """A partition's new files beside its segments, written but not yet durable or named: the paths to fsync,
    the backup copies to name once those are durable (:func:`~indexlib.storage.publish.keep_backup`), the (staged,
    final) renames, the files it creates, and the new log end its recovery point moves to."""

    plan: PartitionRecovery
    end: int
    unsynced: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    renames: list[tuple[str, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    rolls: bool = False  # an empty segment is rolled at ``end``, after the renames
    dry: bool = False  # only list in ``created`` what would be written: nothing staged, moved or copied

    def discard(self) -> None:
        """Remove what was written and not renamed: the staged files, the backup copies not yet named and the
        created empty segment."""
        for staged, _ in self.renames:
            discard(staged)
        for backup in self.backups:
            partial = partial_copy_of(backup, self.unsynced)
            if partial is not None and file_exists(partial):  # a copy not yet named: gone, and out of the report
                discard(partial)
                self.plan.backups.remove(backup)
        for path in self.created:
            if path not in {final for _, final in self.renames}:
                discard(path)


def finish_partitions(group: list[tuple[PartitionRecovery, list[SegmentResult]]]) -> None:
    """After their segments were committed, for each partition of ``group`` that :func:`writes_partition_files`:
    move the snapshots past the new log end into the backup dir, write the producer snapshots and the
    leader epochs the broker's recovery leaves and roll an empty segment at the log end; then set its
    ``new_recovery_point``. Every file is written first (the partitions concurrently where creating a file waits
    on the file system's journal), all of the group's fsynced together (concurrently:
    a journaling file system commits them in a few journal commits), then renamed, then the empty segments
    rolled, then the partition dirs fsynced together: a crash leaves each file old or whole, and the recovery
    points move (later, in the checkpoint) only over durable files. The roll comes last because it moves the
    segment that holds the unchanged recovery point: a run killed before it recovers the same segments again, and
    one killed after it finds every other file already written. A partition that fails keeps its recovery point,
    its staged and created files removed, and says why in its ``error``; the others are finished."""
    written: dict[int, _PendingFiles] = {}
    refused: dict[int, Exception] = {}

    def write(i: int) -> None:
        plan, results = group[i]
        files = _PendingFiles(plan, 0)
        try:
            _write_partition_files(results, files)
            written[i] = files
        except Exception as exc:
            files.discard()
            refused[i] = exc

    # each partition's files written on their own (creating files waits on the journal of a file system that
    # is committing: several partitions in flight overlap those waits)
    concurrently([i for i, (_, results) in enumerate(group) if writes_partition_files(results)], write, 1e-3)
    for i, exc in refused.items():
        group[i][0].error = f"{group[i][0].partition.path}: {error_line(exc, None)}"
    pending = [written[i] for i in sorted(written) if written[i].plan.left is None]
    failed = fsync_paths(list(dict.fromkeys(path for files in pending for path in files.unsynced)))  # a dir: once
    errors: list[OSError | None] = []
    backup_dirs: list[list[str]] = []
    for files in pending:  # the backup copies, durable now, named; their dirs synced before anything is replaced
        errors.append(next((failed[path] for path in files.unsynced if path in failed), None))
        try:
            backup_dirs.append(name_backups(files.backups, files.unsynced) if errors[-1] is None else [])
        except OSError as exc:
            errors[-1] = exc
            backup_dirs.append([])
    failed = fsync_paths(list(dict.fromkeys(d for dirs in backup_dirs for d in dirs)))
    named = []
    rolled: list[str] = []
    for files, error, dirs in zip(pending, errors, backup_dirs, strict=True):
        error = error or next((failed[d] for d in dirs if d in failed), None)
        try:
            if error is not None:
                raise error
            for staged, final in files.renames:
                install(staged, final, sync_dir=False)
            if files.rolls:  # its files fsynced with the partition dirs, below
                files.created += create_empty_segment(files.plan.partition.path, files.end, rolled)
        except OSError as exc:
            files.discard()
            files.plan.error = f"{files.plan.partition.path}: {error_line(exc, None)}"
            continue
        named.append(files)
    failed = fsync_paths(rolled + [files.plan.partition.path for files in named])
    for files in named:
        lost = [failed[path] for path in [*files.created, files.plan.partition.path] if path in failed]
        if lost:
            files.plan.error = f"{files.plan.partition.path}: {error_line(lost[0], None)}"
            continue
        files.plan.created += files.created
        files.plan.new_recovery_point = files.end


def partition_files_to_write(plan: PartitionRecovery, results: list[SegmentResult]) -> list[str]:
    """The files :func:`finish_partitions` may write, replace or move into the backup dir in the partition of
    ``plan`` (``results``: its segments' committed rows; the journal's intent, before any of them is touched): the
    snapshots past the new log end, a snapshot at each later recovered segment's base and at the log end,
    ``leader-epoch-checkpoint`` and the empty segment rolled at the log end. (The segments dropped after a cut
    were moved away by the cut segment's commit, named in its own intent.)"""
    kept = [r for r in results if r.action == "recovered"]
    end = _log_end(kept)
    directory = plan.partition.path
    names = partition_file_names(directory)
    files = [os.path.join(directory, n) for n in names if _snapshot_after(n, end)]
    files += [segment_file(directory, base, SNAPSHOT_SUFFIX) for base in {r.task.base_offset for r in kept[1:]} | {end}]
    first, bases = kept[0].task.base_offset, [s.base_offset for s in plan.partition.segments]
    log_start = _log_start(plan.partition)
    if first > log_start:  # the state before the first is rebuilt (state_before): the snapshots it may write or move
        files += [
            segment_file(directory, o, SNAPSHOT_SUFFIX) for o in snapshot_offsets(directory) if log_start < o < first
        ]
        files += [segment_file(directory, o, SNAPSHOT_SUFFIX) for o in [*bases[-2:], first] if log_start < o <= first]
    files.append(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
    if end > kept[-1].task.base_offset:
        files += [segment_file(directory, end, suffix) for suffix in ROLLED_SEGMENT_SUFFIXES]
    return sorted(set(files))


def partition_files_a_dry_run_lists(plan: PartitionRecovery, results: list[SegmentResult]) -> list[str]:
    """A dry run's answer for one partition whose segments would all be recovered or dropped: the files
    :func:`finish_partitions` would write there (as its ``created``), computed the same way, nothing written."""
    files = _PendingFiles(plan, 0, dry=True)
    _write_partition_files(results, files)
    if plan.left is not None:
        return []
    rolled = [segment_file(plan.partition.path, files.end, s) for s in ROLLED_SEGMENT_SUFFIXES] if files.rolls else []
    return sorted(files.created + rolled)


def _log_end(kept: list[SegmentResult]) -> int:
    last = kept[-1]
    return log_end_offset(last.task.base_offset, last.plan.batch_count, last.plan.last_offset)


def _write_partition_files(results: list[SegmentResult], files: _PendingFiles) -> None:
    """One partition's (``files.plan``) share of :func:`finish_partitions` up to the fsyncs: the stale snapshots
    moved into the backup dir (durable there), the new files written into ``files``, ``files.end`` set."""
    plan = files.plan
    kept = [r for r in results if r.action in RECOVERED]
    last = kept[-1]
    files.end = end = _log_end(kept)
    log_start = _log_start(plan.partition)
    if log_start > end:  # LogLoader deletes every segment at the next start and begins again at the log start
        plan.left = f"its log start offset {log_start} is beyond its log end {end}: the broker's next start deletes every segment"
        return
    before = _state_before_first(plan, kept[0].task.base_offset, log_start)
    if before is not None and before.why is not None:  # its .txnindex may lack a transaction: the broker redoes it
        plan.left = (
            f"{before.why}: the broker's start recovers its segments from the recovery point {plan.recovery_point}"
        )
        return
    files.unsynced += [path for r in results for path in r.trimmed]  # durable before the recovery point moves
    directory = plan.partition.path
    backup_dir = last.task.backup_dir
    names = partition_file_names(directory)  # the segments after a cut are gone: moved away before the cut
    stale = [os.path.join(directory, n) for n in names if _snapshot_after(n, end)]
    if stale and not files.dry:  # Kafka's truncateAndReload deletes snapshots past the log end
        plan.backups += move_to_backup(stale, _required(backup_dir, directory))
        plan.moved += stale
    _write_producer_snapshots(files, kept, before, backup_dir)
    _recover_leader_epochs(files, kept, log_start, backup_dir)
    files.rolls = end > last.task.base_offset


def _segment_base(name: str) -> int | None:
    parsed = parse_segment_name(name)
    return parsed[0] if parsed is not None and parsed[1] != SNAPSHOT_SUFFIX else None


def _snapshot_after(name: str, end: int) -> bool:
    parsed = parse_segment_name(name)
    return parsed is not None and parsed[1] == SNAPSHOT_SUFFIX and parsed[0] > end


def _required(backup_dir: str | None, directory: str) -> str:
    if backup_dir is None:  # check_run gives every recover a backup root: a bug if reached
        raise TargetDirError(f"{directory}: recover moves files only into a backup dir, and this run has none")
    return backup_dir


def _log_start(partition: Partition) -> int:
    """The partition's log start offset as the broker's load reads it (a checkpoint it cannot read: 0)."""
    try:
        return read_log_start_offset(partition.log_dir, partition.topic, partition.partition)
    except (OSError, CheckpointError):
        return 0


def _write_producer_snapshots(
    files: _PendingFiles, kept: list[SegmentResult], before: StateBefore | None, backup_dir: str | None
) -> None:
    """The producer snapshots the broker's recovery leaves: one at each recovered segment's end that is a segment
    base (the next segment's, or the new log end, where the roll puts the empty segment), each holding the state
    after that segment, from the state before the first recovered segment (``before``, :func:`_state_before_first`:
    None is empty; where it was replayed, what Kafka writes on the way is staged too). Where that state or a
    segment's producer states are not known, nothing is written: the broker's start then rebuilds the state
    (correct, slower). Staged into ``files``, the old files copied into the backups first."""
    producer_states = [r.plan.producers for r in kept]
    if any(p is None for p in producer_states):
        return
    first = kept[0].task.base_offset
    state: dict[int, ProducerSnapshotEntry] = {}
    if before is not None:
        if before.producers is None:
            files.plan.notes.append(f"the producer state before {first}, replayed from {before.start}, is not known "
                                    "here: the broker rebuilds producer state at its start")  # fmt: skip
            return
        _stage_state_before(files, before, kept[0].task.run_id, backup_dir)
        state = before.producers
    bases = {r.task.base_offset for r in kept} | {files.end}
    for r, producers in zip(kept, producer_states, strict=True):
        assert producers is not None
        state = apply_segment(state, producers)
        map_end = r.plan.next_v2_offset
        if map_end is None or map_end not in bases or map_end <= r.task.base_offset:
            continue  # Kafka writes no snapshot there, or one its load deletes again (not a segment base)
        _stage_snapshot(files, map_end, state, r.task.run_id, backup_dir)


def _state_before_first(plan: PartitionRecovery, first: int, log_start: int) -> StateBefore | None:
    """The state Kafka's ``recoverSegment`` rebuilds before the first recovered segment (at ``first``); None where it
    starts empty (a segment at or below the log start). The partition's first segment is no exception: after
    retention its base is above the log start the checkpoint gives (the broker lists there only a log start inside
    a segment; none: 0), and Kafka loads the snapshot at that base."""
    if first <= log_start:
        return None
    return state_before(plan.partition, first, log_start, now_ms=_now_ms())


def _stage_state_before(files: _PendingFiles, before: StateBefore, run_id: str | None, backup_dir: str | None) -> None:
    """What Kafka's rebuild of ``before`` leaves when it replays segments (no snapshot at the first recovered base):
    the snapshots it takes on the way and at that base, staged into ``files``; the refused snapshots it deleted,
    moved into the backups."""
    if before.start == before.base or before.producers is None:
        return
    for offset, state in before.passed.items():
        _stage_snapshot(files, offset, state, run_id, backup_dir)
    _stage_snapshot(files, before.base, before.producers, run_id, backup_dir)
    replaced = set(files.created)
    moved = [path for path in before.refused if path not in replaced]
    if moved and not files.dry:  # Kafka deletes a snapshot it refuses to load
        files.plan.backups += move_to_backup(moved, _required(backup_dir, files.plan.partition.path))
        files.plan.moved += moved


def _stage_snapshot(
    files: _PendingFiles,
    offset: int,
    state: dict[int, ProducerSnapshotEntry],
    run_id: str | None,
    backup_dir: str | None,
) -> None:
    """The snapshot of ``state`` at ``offset`` staged into ``files`` (only listed in a dry run), the file it
    replaces copied into the backups first."""
    final = segment_file(files.plan.partition.path, offset, SNAPSHOT_SUFFIX)
    files.created.append(final)
    if files.dry:
        return
    staged = stage_file(final, format_snapshot(snapshot_entries(state)), run_id or "recover", files.unsynced)
    files.renames.append((staged, final))
    kept_copy = keep_backup(final, backup_dir, files.unsynced) if backup_dir is not None else None
    files.backups += [kept_copy] if kept_copy else []
    files.plan.backups += [kept_copy] if kept_copy else []


def _now_ms() -> int:
    return int(time.time() * 1000)


def _recover_leader_epochs(
    files: _PendingFiles, kept: list[SegmentResult], log_start: int, backup_dir: str | None
) -> None:
    """``leader-epoch-checkpoint`` as the broker's load leaves it: each recovered batch's new epoch assigned, then
    the cache truncated at the log end and at the log start (``LogLoader``); rewritten (the old file kept in the
    backups) only when that changes the entries, staged into ``files``. A file Kafka cannot read is left to the
    broker (a finding)."""
    plan, end = files.plan, files.end
    path, text, unreadable = read_leader_epoch_text(plan.partition.path)
    if unreadable is not None:
        return
    try:
        cache = load_leader_epochs(parse_leader_epoch_checkpoint(text or "", path))
        entries = recovered_leader_epochs(cache, [r.plan.epoch_starts for r in kept], end, log_start)
    except CheckpointError:
        return
    if entries == cache and text is not None:
        return
    if text is None and not entries:
        return
    if files.dry:
        files.created.append(path)
        return
    if backup_dir is not None and (kept_copy := keep_backup(path, backup_dir, files.unsynced)) is not None:
        files.backups.append(kept_copy)
        plan.backups.append(kept_copy)
    files.renames.append((stage_checkpoint_file(path, format_leader_epoch_checkpoint(entries), files.unsynced), path))
    files.created.append(path)


def write_recovery_points(
    plans: dict[str, PartitionRecovery], backup_root: str | None
) -> tuple[list[str], dict[str, str]]:
    """Per log dir with a moved recovery point: rewrite ``recovery-point-offset-checkpoint`` with the new points
    (every other entry as read), the old file kept under ``backup_root``. Returns the files written and, per log
    dir whose file could not be written (left as it was: its partitions' points unmoved, their
    ``new_recovery_point`` None again and their ``error`` saying why), why."""
    written = []
    failed: dict[str, str] = {}
    by_log_dir: dict[str, list[PartitionRecovery]] = {}
    for plan in plans.values():
        if plan.new_recovery_point is not None:
            by_log_dir.setdefault(plan.partition.log_dir, []).append(plan)
    for log_dir, moved in sorted(by_log_dir.items()):
        try:
            path, points = read_offset_checkpoint(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT)
        except (OSError, CheckpointError):  # as the broker reads it: every other partition's point 0
            path, points = os.path.join(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT), {}
        for plan in moved:
            points[(plan.partition.topic, plan.partition.partition)] = plan.new_recovery_point  # type: ignore[assignment]
        try:
            if backup_root is not None:
                keep_backup(path, log_dir_backup_dir(backup_root, log_dir))
            write_checkpoint_file(path, format_offset_checkpoint(points))
        except OSError as exc:
            line = error_line(exc, None)
            failed[log_dir] = f"{line if path in line else f'{path}: {line}'}; its recovery points were not moved"
            for plan in moved:  # unchanged after all: its files are written, the broker recovers them again
                plan.new_recovery_point = None
                plan.error = plan.error or f"{line if path in line else f'{path}: {line}'}"
            continue
        written.append(path)
    return written, failed
