"""A run's options and the checks a run passes before it touches anything: the mode, the run id, where
it writes and keeps backups (never under a log dir, never over an earlier run's backups), and whether it can
write there."""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..format.errors import KafkaIndexError
from ..storage import (
    LOCAL,
    Discovery,
    Partition,
    StoreSpec,
    check_syncfs_available,
    directory_key,
    first_file_under,
    is_uri,
    nearest_existing,
    state_dir,
    store_for,
    why_unwritable,
)
from .identity import BROKER_ID_MAX, broker_id_conflicts

if TYPE_CHECKING:
    from ..format.cluster_metadata import ClusterFacts

MODES = ("verify", "rebuild", "repair", "recover")
#: how a writing run makes its files durable: an fsync of each file and dir, one syncfs per file system
#: (:mod:`indexlib.storage.file_system_sync`), or ``auto``: syncfs where it is safe (:func:`chosen_sync`)
SYNC_METHODS = ("auto", "fsync", "syncfs")

#: A run id names a backup dir and tags staged files: no '/', whitespace, control characters or '~'
#: ('~' separates the task attempt in staged names), no leading '.', at most 200 characters.
RUN_ID = re.compile(r"[^/\s.~\x00-\x1f][^/\s~\x00-\x1f]{0,199}")


class RunOptionError(KafkaIndexError, ValueError):
    """A run the options make unsafe: an unknown mode, a malformed run id or one an earlier run's backups
    use, a partition given twice or found in two log dirs."""


class TargetDirError(KafkaIndexError, ValueError):
    """A dir a writing run refuses to write into or keep backups in: one inside a log dir, one it cannot
    write, a file where a dir must be, or none where a cut tail must be saved."""


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
    broker_id: int | None = None  # names the broker of a log dir without meta.properties (--broker-id)
    sync: str = "fsync"  # how a writing run makes its files durable (SYNC_METHODS; the run resolves auto)
    cluster: ClusterFacts | None = None  # the cluster's metadata each partition dir is checked against, when read
    store: StoreSpec = LOCAL  # where the log dirs are (every task carries it)
    output_store: StoreSpec = LOCAL  # where --output-dir is (a local dir, or a prefix in object storage)

    @property
    def read_only(self) -> bool:
        """Verify and every dry run write nothing: no staged file, backup, rename or tail cut."""
        return self.mode == "verify" or self.dry_run

    @property
    def checks(self) -> bool:
        """Verify, repair and recover check the existing files; a rebuild rewrites them all without looking."""
        return self.mode in ("verify", "repair", "recover")

    def target_dir(self, p: Partition) -> str:
        """Where a partition's files are written: the partition dir, or ``<output dir>/<topic>-<partition>``."""
        return p.path if self.output_dir is None else os.path.join(self.output_dir, p.name)

    def in_place(self, p: Partition) -> bool:
        """Whether this run writes into the partition dir itself (an ``--output-dir`` is never a log dir or
        inside one: :func:`check_run` refuses it)."""
        return not self.read_only and self.output_dir is None


def chosen_sync(options: RunOptions, unheld_log_dirs: list[str], syncfs_is_trusted: bool) -> str:
    """The sync method a run uses: ``fsync`` or ``syncfs`` as asked, and for ``auto`` syncfs only where the run writes
    nothing a running broker writes: it holds the broker ``.lock`` of every log dir it writes in place (the broker is
    stopped: ``unheld_log_dirs`` is empty, no ``--force`` past a running broker) or writes only to an output dir (a
    new dir of its own), and this kernel's syncfs reports write errors (Linux 5.17 or later). A read-only run's is
    ``fsync`` (it writes nothing)."""
    if options.read_only:
        return "fsync"
    if options.sync != "auto":
        return options.sync
    if unheld_log_dirs or not syncfs_is_trusted:
        return "fsync"
    return "syncfs"


def new_run_id(mode: str) -> str:
    return f"{mode}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def check_run(discovery: Discovery, options: RunOptions) -> None:
    """Refuse, before anything runs, what a run cannot do safely (:class:`RunOptionError` or
    :class:`TargetDirError`, both ``ValueError``, with the reason): an
    unknown mode; a ``--broker-id`` that a log dir's ``meta.properties`` contradicts; a malformed run id; a partition given twice (two paths to one dir); one partition name
    in two log dirs when writing (its backup dir, or its ``--output-dir`` dir, is named by the partition
    alone); a writing run whose run id already has backups (:func:`check_backups_unused`)."""
    if options.mode not in MODES:
        raise RunOptionError(f"unknown mode {options.mode!r} (one of {', '.join(MODES)})")
    if options.sync not in SYNC_METHODS:
        raise RunOptionError(f"unknown sync method {options.sync!r} (one of {', '.join(SYNC_METHODS)})")
    if options.sync == "syncfs" and not options.read_only:
        check_syncfs_available()
    if options.store.scheme != "file" and not options.read_only and options.output_dir is None:
        raise RunOptionError(
            f"{options.store.root}: objects in object storage are never changed in place, so {options.mode} cannot "
            "run there; verify reads it, and rebuild --output-dir DIR_OR_NEW_PREFIX writes the rebuilt log dir "
            "elsewhere"
        )
    if options.broker_id is not None:
        if not 0 <= options.broker_id <= BROKER_ID_MAX:
            raise RunOptionError(f"--broker-id {options.broker_id}: a broker id is 0 to {BROKER_ID_MAX}")
        conflicts = broker_id_conflicts(discovery, options.broker_id)
        if conflicts:
            raise RunOptionError(
                f"{conflicts[0]}: --broker-id names the broker of a log dir without meta.properties; this run "
                "reads another broker's log dir (drop --broker-id, or give that broker's log dirs)"
            )
    if options.run_id is not None and not RUN_ID.fullmatch(options.run_id):
        raise RunOptionError(
            f"run id {options.run_id!r}: it names backup dirs and files, so no '/', '~', whitespace "
            "or leading '.', at most 200 characters"
        )
    seen: dict[object, str] = {}
    for p in discovery.partitions:
        key = directory_key(p.path)
        if key in seen:
            raise RunOptionError(f"{p.path}: the same partition dir as {seen[key]}; give each partition once")
        seen[key] = p.path
    if options.mode == "recover" and options.output_dir is not None:
        raise RunOptionError(
            "recover works in place (it leaves the log dirs as the broker's start would): no --output-dir"
        )
    if options.read_only:
        return
    _refuse_writes_under_log_dirs(discovery, options)
    _refuse_unwritable_targets(discovery, options)
    where: dict[str, str] = {}
    for p in discovery.partitions:
        if where.setdefault(p.name, p.log_dir) != p.log_dir:
            raise RunOptionError(
                f"{p.name} is in both {where[p.name]} and {p.log_dir}; its backups (and --output-dir) are "
                f"named by partition, so {options.mode} these log dirs in separate runs"
            )
    check_backups_unused(options)


def backup_root(options: RunOptions) -> str | None:
    """The root a writing run keeps replaced files under (``<state dir>/kafka-index-backups`` for a repair or
    recover when none is given: :func:`state_dir`); None when it keeps none (a read-only run, a rebuild without a
    backup root)."""
    if options.read_only or not (options.backup_root or options.mode in ("repair", "recover")):
        return None
    return options.backup_root or os.path.join(state_dir(), "kafka-index-backups")


def check_backups_unused(options: RunOptions) -> None:
    """:class:`RunOptionError` when ``<backup root>/<run id>/`` already holds a file: an earlier writing run with this
    run id may have replaced files. An existing backup is never overwritten (:func:`indexlib.storage.publish.keep_backup`),
    so a second run under that id would replace files and keep no copy of them. Empty directories are no
    evidence (a failed staging leaves them); a generated run id is new by construction."""
    root = backup_root(options)
    if root is None or options.run_id is None:
        return
    run_dir = os.path.join(root, options.run_id)
    first = first_file_under(run_dir)
    if first is not None:
        raise RunOptionError(
            f"{run_dir}: run id {options.run_id!r} was used by an earlier run that may have replaced files (its backups "
            f"are here: {os.path.relpath(first, run_dir)}); a re-run under that id would keep no copy of the files "
            "it replaces: give a new --run-id"
        )


def _refuse_writes_under_log_dirs(discovery: Discovery, options: RunOptions) -> None:
    """``--output-dir`` and the backup root must lie outside every log dir the run reads (:func:`check_outside_log_dirs`)."""
    check_outside_log_dirs(discovery, [("--output-dir", options.output_dir), ("--backup-dir", backup_root(options))])


def check_outside_log_dirs(discovery: Discovery, targets: list[tuple[str, str | None]]) -> None:
    """Each ``(option, path)`` a run writes (a dir or a file; None: not used) must lie outside every log dir the
    run reads (and so outside its partition dirs): there it would replace the broker's files with no backup, or
    add a dir the broker refuses to start with. :class:`TargetDirError` naming both paths."""
    log_dirs = {_resolved(d): d for d in {*discovery.log_dirs, *(p.log_dir for p in discovery.partitions)}}
    for option, directory in targets:
        if directory is None:
            continue
        real = _resolved(directory)
        for real_log_dir, log_dir in log_dirs.items():
            if real == real_log_dir or real.startswith(real_log_dir.rstrip(os.sep) + os.sep):
                where = "is the log dir" if real == real_log_dir else "lies inside the log dir"
                raise TargetDirError(
                    f"{option} {directory} {where} {log_dir}: the broker's own files would be replaced or its dir "
                    f"filled; choose a path outside every log dir"
                )


def _resolved(path: str) -> str:
    """A local path with its links resolved, or a URI as it is (a prefix has no links), without a trailing ``/``."""
    return path.rstrip("/") if is_uri(path) else os.path.realpath(path)


def _refuse_unwritable_targets(discovery: Discovery, options: RunOptions) -> None:
    """Before any work, both command lines alike: every dir a writing run writes into must be writable (an
    in-place partition dir; ``--output-dir`` and the backup root, or the nearest dir above them that exists,
    which must be a dir). :class:`TargetDirError` naming the dir and why."""
    for p in discovery.partitions:
        if options.in_place(p) and p.unreadable is None and (why := why_unwritable(p.path)):
            hint = " (rebuild elsewhere with --output-dir DIR)" if options.mode == "rebuild" else ""
            raise TargetDirError(
                f"{p.path}: {why}: cannot write the {options.mode}'s index files into this directory{hint}"
            )
    for option, directory in (("--output-dir", options.output_dir), ("--backup-dir", backup_root(options))):
        if directory is None:
            continue
        if is_uri(directory):  # an output prefix in object storage: objects are never replaced, so a new one
            if not store_for(options.output_store).prefix_is_empty(directory):
                raise TargetDirError(
                    f"{directory}: --output-dir in object storage must be a new prefix (objects are never "
                    "replaced), and this one holds objects; give another"
                )
            continue
        probe, is_dir = nearest_existing(directory)
        if not is_dir:
            raise TargetDirError(f"{directory}: {option} must be a directory, but {probe} is a file")
        if why := why_unwritable(probe):
            raise TargetDirError(f"{directory}: {option}: {why}: cannot create or write {probe}")
