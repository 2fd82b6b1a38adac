"""Deciding and committing one segment: :func:`decide` (pure) turns an outcome, its replay and the options
into a :class:`Decision`; :func:`commit_segment` applies it (renames, the ``.txnindex``, a ``.log`` tail cut)
and returns the :class:`SegmentResult` the report and the audit read."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..format.layout import (
    INDEX_SUFFIXES,
    segment_file,
)
from ..format.records import ScanProblem
from ..format.values import AbortedTxn
from ..recovery.entry_checks import txn_index_bytes
from ..recovery.findings import CUT_TAIL, files_to_rebuild, kind
from ..storage import (
    LOCAL,
    ObjectStoreError,
    StoreSpec,
    already_holds,
    check_as_read,
    discard_backup,
    drop_segment_files,
    file_exists,
    keep_backup,
    replace_file,
    save_log_tail,
    store_for,
    trim_in_place,
    truncate_log,
)
from .options import RunOptions, TargetDirError
from .replay import SegmentReplay
from .segment_task import (
    STAGE_BY_MODE,
    STAGED_BY_EXECUTORS,
    SegmentFacts,
    SegmentOutcome,
    SegmentTask,
    segment_facts,
    staged_suffixes,
)


# ------------------------------------------------------------------------------------------- decide
@dataclass(frozen=True)
class Decision:
    """What the commit does for one segment. ``action``: ``none``, ``rebuilt``, ``repaired``,
    ``would_rebuild``, ``would_repair`` (dry run), ``cannot_rebuild`` (Kafka's recovery would refuse the
    segment: nothing is written, what was staged is dropped), ``failed`` (staging failed); for ``recover`` also
    ``recovered``, ``would_recover``, ``dropped``/``would_drop`` (after a cut: Kafka deletes the segment) and
    ``kept`` (another segment of the partition cannot be recovered: the broker keeps it all)."""

    action: str
    install: bool = False  # rename the staged .index/.timeindex into place
    write_txn: bool = False  # write the .txnindex (from the replay)
    cut_tail_at: int | None = None  # cut the .log to this many bytes (after saving the rest)
    # recover: the later segments a cut drops, (base offset, files) highest base first: moved into the backups
    # before the cut (:func:`~indexlib.storage.publish.drop_segment_files`)
    drop: tuple[tuple[int, tuple[str, ...]], ...] = ()


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
    elif options.mode == "recover":  # every index file rewritten, the invalid tail cut, as Kafka's recovery does
        write_txn, cut = True, outcome.valid_bytes if outcome.invalid_bytes else None
    else:
        t = outcome.task
        findings = outcome.findings + replay.findings
        rebuild = files_to_rebuild(t.partition_dir, t.base_offset, findings)
        wants_cut = any(f.file == t.log_path and kind(f.kind).triggers == CUT_TAIL for f in findings)
        write_txn = ".txnindex" in rebuild
        cut = outcome.valid_bytes if options.truncate_corrupt_tail and wants_cut else None
        if not (rebuild or cut is not None):
            return Decision("none")
    done, would = {"rebuild": ("rebuilt", "would_rebuild"), "recover": ("recovered", "would_recover")}.get(
        options.mode, ("repaired", "would_repair")
    )
    if options.dry_run:
        return Decision(would)
    return Decision(done, install=True, write_txn=write_txn, cut_tail_at=cut)


# ------------------------------------------------------------------------------------------- commit
@dataclass
class SegmentResult(SegmentFacts):
    """One segment at the end of a run: what was found, decided and done (the report's and audit's row)."""

    aborted: list[AbortedTxn]
    action: str
    fatal: ScanProblem | None = None  # why Kafka's recovery would refuse the segment (its scan's or the replay's)
    written: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    error: str | None = None
    # of ``written``, the files made their rebuild in place: cut (:func:`trim_in_place`), or a ``.txnindex`` that
    # already was (kept as it is); not fsynced yet, the caller does
    trimmed: list[str] = field(default_factory=list)
    # recover, the segment it cut: the later segments it moved away, base offset -> (their files, the backups)
    dropped: dict[int, tuple[list[str], list[str]]] = field(default_factory=dict)
    # a dry run: the files the real run's commit would write (or, for a segment a cut drops, move away)
    would_write: list[str] = field(default_factory=list)

    @property
    def damaged_files(self) -> list[str]:
        """The suffixes of this segment's files with an error finding that a repair rewrites."""
        return files_to_rebuild(self.task.partition_dir, self.task.base_offset, self.findings)


def commit_segment(outcome: SegmentOutcome, replay: SegmentReplay, decision: Decision) -> SegmentResult:
    """Apply one decision: with a ``.log`` cut, first save the cut tail and move the segments it drops into the
    backups (every copy made before anything changes: a full backup disk fails the segment unchanged); then cut
    the outcome's ``trims`` to their rebuilt size, stage the ``.txnindex`` (with its backup; in place, one that
    already is its rebuild's bytes is kept as it is), cut the ``.log``, rename every staged file into place.
    Anything not installed is discarded with the backups made for it; a saved ``.log`` tail is never discarded.
    Directories and trimmed (or kept) files are not fsynced here (the caller does it once for many:
    ``result.trimmed``)."""
    t = outcome.task
    identical = dict(outcome.identical)
    if t.check:
        identical[".txnindex"] = replay.txn_identical
        if replay.fatal is not None:
            identical = dict.fromkeys(INDEX_SUFFIXES)
    facts = segment_facts(outcome)
    facts.update(findings=outcome.findings + replay.findings, identical=identical)
    fatals = [p for p in (outcome.plan.fatal, replay.fatal) if p is not None]
    fatal = min(fatals, key=lambda p: p.batch_index) if fatals else None
    result = SegmentResult(**facts, aborted=replay.aborted, action=decision.action, fatal=fatal, error=outcome.error)
    # the commit owns what was staged from here on: whoever cleans up after it must not touch those files
    staged, backups, outcome_trims = outcome.staged, outcome.backups, outcome.trims
    outcome.staged, outcome.backups = {}, []
    target = store_for(t.target_store)
    if not decision.install:
        target.discard_staged(staged, backups)
        return result
    target_dir = t.target_dir or t.partition_dir
    try:
        if decision.cut_tail_at is not None:  # from here on the saved tail is the only copy of those bytes
            if t.backup_dir is None:
                raise TargetDirError(f"{t.log_path}: cutting a corrupt tail needs a backup dir")
            result.backups.append(save_log_tail(t.log_path, decision.cut_tail_at, t.backup_dir))
            if decision.drop:  # before the cut: killed in between, the next run still finds the invalid batch
                for final, (_, identity) in outcome_trims.items():  # a file changed since the read: nothing moved
                    check_as_read(final, identity)
                moved = drop_segment_files([list(files) for _, files in decision.drop], t.backup_dir)
                for (base, files), copies in zip(decision.drop, moved, strict=True):
                    result.dropped[base] = (list(files), copies)
        for final, (size, identity) in outcome_trims.items():  # a file that changed stops the commit here,
            trim_in_place(final, size, identity)  # before the .log is cut or anything renamed
            result.written.append(final)
            result.trimmed.append(final)
        stale = decision.write_txn and _has_txn_index(outcome)
        txn_final = segment_file(target_dir, t.base_offset, ".txnindex")
        if stale and target_dir == t.partition_dir and already_holds(txn_final, txn_index_bytes(replay.aborted)):
            result.written.append(txn_final)  # already its rebuild's bytes: kept as it is, fsynced by the caller
            result.trimmed.append(txn_final)
        elif decision.write_txn:
            staged_txn = target.stage_segment(
                target_dir, t.base_offset, outcome.plan, replay.aborted, (".txnindex",), stale, t.segment_index_bytes,
                t.run_id,
            )  # fmt: skip
            staged.update(staged_txn)
            if t.backup_dir is not None:
                backups += [b for final in staged_txn if (b := keep_backup(final, t.backup_dir))]
        if decision.cut_tail_at is not None:
            truncate_log(t.log_path, decision.cut_tail_at, result.written)
        installing, staged = staged, {}  # from here on a backup may be the only copy of a replaced file
        target.install_segment(installing, result.written)  # backups were kept when staging
    except (OSError, ValueError, ObjectStoreError) as exc:
        result.error = f"{segment_file(target_dir, t.base_offset, '')}: {exc}"
        result.action = "failed"
    finally:
        if staged:  # failed before anything was replaced: drop what was staged and backed up for it
            target.discard_staged(staged, backups)
    result.backups = backups + result.backups
    return result


def _has_txn_index(outcome: SegmentOutcome) -> bool:
    """Whether the segment has a ``.txnindex`` (which a rebuild with no aborted transaction empties, as Kafka does):
    on a local disk, whether one is there now; in object storage (immutable), whether the map's read found one."""
    t = outcome.task
    if t.store == LOCAL:
        return file_exists(segment_file(t.partition_dir, t.base_offset, ".txnindex"))
    return outcome.index_sizes.get(".txnindex") is not None


def sweep_staged(tasks: list[SegmentTask], run_id: str) -> None:
    """Remove this run's staged files that no outcome accounts for (a task attempt that died or was
    superseded after staging). Only names this run made (see :func:`indexlib.format.layout.staged_by_run`)."""
    by_store: dict[StoreSpec, list[str]] = {}
    for t in tasks:
        if t.stage != "none" and t.target_dir:
            by_store.setdefault(t.target_store, []).append(t.target_dir)
    for spec, directories in by_store.items():
        store_for(spec).discard_staged_by_run(directories, run_id)


def sweep_map_backups(tasks: list[SegmentTask]) -> None:
    """After a map that did not finish (stopped, or failed, before any commit began): the copies its tasks made, or a
    stopped worker was making, of the index files they would have replaced. Nothing was replaced, so none of them
    keeps anything (a run id's backup dir is its own: a re-used one with backups is refused before the map)."""
    for t in tasks:
        if t.backup_dir is not None and t.stage != "none":
            for suffix in STAGED_BY_EXECUTORS:
                discard_backup(segment_file(t.target_dir or t.partition_dir, t.base_offset, suffix), t.backup_dir)


def files_to_replace(outcome: SegmentOutcome, decision: Decision) -> list[str]:
    """The final paths a commit of ``decision`` may replace or create."""
    t = outcome.task
    target = t.target_dir or t.partition_dir
    files = list(outcome.staged) + list(outcome.trims)
    if decision.write_txn:
        files.append(segment_file(target, t.base_offset, ".txnindex"))
    if decision.cut_tail_at is not None:
        files.append(t.log_path)
    files += [path for _, dropped in decision.drop for path in dropped]
    return files


def files_to_write(outcome: SegmentOutcome, replay: SegmentReplay, decision: Decision, mode: str) -> list[str]:
    """What the ``written`` of a real run's commit of ``decision`` lists (a dry run's answer to "what would it
    write?"): the index files its mode stages (:func:`~indexlib.engine.segment_task.staged_suffixes`, cut in
    place or replaced), the ``.txnindex`` when it has aborted transactions or one exists, the ``.log`` it cuts. The
    segments a cut drops are their own rows (:attr:`Decision.drop`)."""
    if not decision.install:
        return []
    t = outcome.task
    target = t.target_dir or t.partition_dir
    suffixes = staged_suffixes(STAGE_BY_MODE[mode], t.partition_dir, t.base_offset, outcome.findings)
    files = [segment_file(target, t.base_offset, s) for s in suffixes if outcome.plan.fatal is None]
    if decision.write_txn and (
        replay.aborted or file_exists(segment_file(t.partition_dir, t.base_offset, ".txnindex"))
    ):
        files.append(segment_file(target, t.base_offset, ".txnindex"))
    if decision.cut_tail_at is not None:
        files.append(t.log_path)
    return sorted(files)


# ------------------------------------------------------------------------------------ partition files
def commit_partition_files(
    rewrites: dict[str, bytes], target_dir: str, backup_dir: str | None, tag: str
) -> tuple[list[str], list[str]]:
    """A repair's rewrite of a partition's producer snapshots and ``leader-epoch-checkpoint`` (``rewrites``: the
    partition file -> the content Kafka would have written, :class:`~indexlib.engine.replay.PartitionReplay`):
    each written under its name in ``target_dir`` whole (staged, fsynced, renamed), the old file copied into
    ``backup_dir`` first; the caller fsyncs ``target_dir``. Returns (the files written, the backups made)."""
    written, backups = [], []
    for path, data in sorted(rewrites.items()):
        final = os.path.join(target_dir, os.path.basename(path))
        kept = replace_file(final, data, backup_dir, tag)
        written.append(final)
        backups += [kept] if kept else []
    return written, backups
