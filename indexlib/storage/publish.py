"""Atomic publishing of rebuilt index files, written through the memory-mapped index classes.

Invariant: a crash at any point leaves either the old file or the new one under the final name, never a
torn one: each file is first *staged* (written to a hidden temporary name in the same directory, flushed
and fsynced), then *installed* (renamed over the final name, the directory fsynced). An existing file can
be kept in a backup directory first. Staging and installing may happen in different processes (the Spark
jobs stage on executors and install on the driver). Nothing is ever written through a read-only open.

One exception to staging (:func:`trim_in_place`): an index file that already holds its rebuild's bytes and then
only zeros (a preallocated index of a crashed or running broker) becomes its rebuild by a cut of that zero tail,
as Kafka's own ``trimToValidSize``; a crash leaves it whole at the old size or at the new one, both holding the
same entries.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

from ..format.errors import KafkaIndexError
from ..format.index_file import FileIdentity, data_end, file_identity
from ..format.layout import INDEX_SUFFIXES, segment_file, staged_by_run, staged_path
from ..format.offset_index import OffsetIndex
from ..format.time_index import TimeIndex
from ..format.transaction_index import TransactionIndex
from ..format.values import AbortedTxn
from ..recovery.entry_plan import PlanSummary, SegmentPlan
from ..recovery.settings import DEFAULT_SEGMENT_INDEX_BYTES
from . import file_system_sync

IndexT = TypeVar("IndexT", OffsetIndex, TimeIndex)
T = TypeVar("T")


class BackupExistsError(KafkaIndexError, FileExistsError):
    """A file to move into the backups whose name is taken there: nothing is moved over an existing backup."""


class ChangedSinceReadError(KafkaIndexError, ValueError):
    """A file to cut in place is no longer the file the run read (another writer, a new link): nothing is cut."""


class UnrebuildableSegmentError(KafkaIndexError, ValueError, TypeError):
    """Index files staged for a segment its plan cannot give them for: a fatal plan (Kafka's recovery
    refuses the segment; a ``ValueError``), or a :class:`PlanSummary`, which keeps no index entries (a
    ``TypeError``)."""


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: fsyncs in flight at once (:func:`fsync_paths`), and the time under which an fsync waited on no device
CONCURRENT_FSYNCS, INSTANT_FSYNC_SECONDS = 16, 50e-6


def fsync_paths(paths: Collection[str]) -> dict[str, OSError]:
    """``fsync`` every path (a file or a directory) and return those that failed with their error. Each path is
    fsynced on its own, concurrently where the first one waited on a device: a journaling file system (ext4,
    xfs) commits the fsyncs in flight together, so many small files cost a few journal commits instead of one
    each (about 10x fewer on ext4); where an fsync is instant (tmpfs), one thread is cheaper. In a run with
    ``--sync syncfs`` (:mod:`.file_system_sync`) the paths on its registered file systems are made durable by one
    ``syncfs`` each instead."""
    failed: dict[str, OSError] = {}
    if file_system_sync.active():
        failed, paths = file_system_sync.sync_paths(paths)

    def one(path: str) -> None:
        try:
            fsync_path(path)
        except OSError as exc:
            failed[path] = exc

    concurrently(paths, one, INSTANT_FSYNC_SECONDS)
    return failed


def sync_or_raise(paths: Collection[str]) -> None:
    """:func:`fsync_paths` of ``paths``; the first failure raised as an ``OSError`` naming its path."""
    for path, exc in fsync_paths(paths).items():
        raise OSError(exc.errno, exc.strerror, path) from exc


def concurrently(items: Collection[T], one: Callable[[T], object], instant_seconds: float) -> None:
    """``one(item)`` for every item, in order in this thread while the calls take under ``instant_seconds``
    each on average, the rest in :data:`CONCURRENT_FSYNCS` threads from the first slower one on (calls that
    wait on a device or a journal commit: a journaling file system serves those in flight together). ``one``
    handles its own errors."""
    ordered = list(items)
    started = time.perf_counter()
    for i, item in enumerate(ordered):
        one(item)
        if time.perf_counter() - started > instant_seconds * (i + 1) and len(ordered) > i + 2:
            from concurrent.futures import ThreadPoolExecutor  # here: only writes to a device need it

            with ThreadPoolExecutor(min(CONCURRENT_FSYNCS, len(ordered) - i - 1)) as threads:
                list(threads.map(one, ordered[i + 1 :]))
            break


def discard(path: str) -> None:
    """Remove ``path`` if it exists (a staged file that will not be installed, an unused backup)."""
    if os.path.lexists(path):
        os.unlink(path)


def _unlink_if_present(path: str) -> None:
    """Remove ``path`` if it is there: one ``unlink`` (no look first)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@contextmanager
def _staging(final: str, tag: str | None) -> Iterator[str]:
    """Yield the staged path of ``final``; the body writes it at its final size and fsyncs it (one fsync per
    file, through the writer's own descriptor, or later by the caller: ``unsynced``). On failure it is removed."""
    staged = staged_path(final, tag if tag is not None else str(os.getpid()))
    _unlink_if_present(staged)  # a retried task's leftover
    try:
        yield staged
    except BaseException:
        discard(staged)
        raise


def _ensure_dir(directory: str, unsynced: list[str] | None = None) -> None:
    """Make sure ``directory`` exists (an ``--output-dir``'s partition dir), the names of the dirs it creates durable:
    each dir whose entries changed fsynced, or added to ``unsynced`` for the caller's sync with the files staged in
    it. One ``stat`` when it exists (the usual case)."""
    changed = make_dirs(directory)
    if unsynced is not None:
        unsynced += changed
    else:
        sync_or_raise(changed)


def make_dirs(directory: str) -> list[str]:
    """Create ``directory`` and any missing parent; returns the dirs whose entries changed (the parent of each dir
    created), to be synced before a file in it is the only copy of anything (a backup) or is reported written: a
    dir's own sync is not enough while its name in its parent is not durable. One ``stat`` when it exists (the
    usual case)."""
    if os.path.isdir(directory):
        return []
    created, level = [], os.path.abspath(directory)
    while not os.path.isdir(level):
        created.append(level)
        level = os.path.dirname(level)
    os.makedirs(directory, exist_ok=True)
    return [os.path.dirname(d) for d in reversed(created)]


def _create_empty(path: str, unsynced: list[str] | None = None) -> None:
    """Create ``path`` as a durable 0-byte file (a new name: an existing one is an error); not fsynced but added
    to ``unsynced`` when that is given."""
    _write_whole(path, b"", os.O_EXCL, unsynced)


def keep_backup(final: str, backup_dir: str, unsynced: list[str] | None = None) -> str | None:
    """Copy ``final`` (if it exists) into ``backup_dir``, its holes kept (not a hard link: whatever writes the file in
    place later must not change its backup); returns the copy's path. An existing backup of the same name is kept
    as it is: the first copy is the oldest, and a late writer (a retried task, a re-run under the same run id, a
    speculative attempt copying at the same time) must not replace it with a file that was already rebuilt. A
    backup never has its name before its bytes are durable (a crash must not leave a torn copy that a later run
    keeps as the oldest).

    The copy is written under a name of its own, ``<backup>.<this process and a random tag>.partial``, so that two
    writers never share one. Without ``unsynced`` it is durable and named when this returns (fsynced, named,
    ``backup_dir`` fsynced). With it, the copy is left unsynced, its partial path added to ``unsynced``: the caller
    syncs ``unsynced`` (one ``syncfs`` under ``--sync syncfs``, or the fsyncs together), then
    :func:`name_backups`, then syncs the dirs that returns, all before ``final`` is replaced."""
    if not os.path.lexists(final):
        return None
    parents = make_dirs(backup_dir)
    backup = os.path.join(backup_dir, os.path.basename(final))
    if not os.path.lexists(backup):
        partial = _copy_sparse(final, backup)
        if unsynced is not None:
            unsynced += [partial, *parents]
            return backup
        try:
            fsync_path(partial)
            _name_copy(partial, backup)
        except BaseException:
            discard(partial)
            raise
        for directory in [backup_dir, *parents]:
            fsync_path(directory)
    return backup


def partial_copy_of(backup: str, paths: Collection[str]) -> str | None:
    """The partial copy of ``backup`` among ``paths`` (a caller's ``unsynced``), or None."""
    prefix = backup + "."
    return next(
        (p for p in paths if p.startswith(prefix) and p.endswith(".partial") and "/" not in p[len(prefix) :]), None
    )


def name_backups(backups: Collection[str], unsynced: Collection[str], named: list[str] | None = None) -> list[str]:
    """Give each copy :func:`keep_backup` left among ``unsynced`` (already synced by the caller) its backup's name;
    a backup already there (made before, or by another writer meanwhile) is kept and the copy dropped. Returns the
    dirs to sync before any backed-up file is replaced; ``named`` gets the backups this call named (this writer's
    own: the only ones it may remove if it fails). A backup with neither its copy nor its name raises
    ``FileNotFoundError`` naming it."""
    dirs: list[str] = []
    for backup in backups:
        partial = partial_copy_of(backup, unsynced)
        if partial is not None and os.path.lexists(partial):
            if _name_copy(partial, backup) and named is not None:
                named.append(backup)
            directory = os.path.dirname(backup)
            if directory not in dirs:
                dirs.append(directory)
        elif not os.path.lexists(backup):
            raise FileNotFoundError(errno.ENOENT, "its backup copy is gone before it was named", backup)
    return dirs


def _name_copy(partial: str, backup: str) -> bool:
    """Name a durable copy ``backup`` unless that name is taken (the first copy wins: a link never replaces), then
    remove the partial name; whether this copy got the name. Where the file system has no hard links, a rename
    unless the name is taken."""
    try:
        os.link(partial, backup)
    except FileExistsError:  # another writer's copy is the backup: this one is dropped
        os.unlink(partial)
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if not os.path.lexists(backup):
            os.rename(partial, backup)
            return True
        os.unlink(partial)
        return False
    os.unlink(partial)
    return True


def discard_backup(final: str, backup_dir: str) -> None:
    """Remove the copy of ``final`` that :func:`keep_backup` made in ``backup_dir``, or was making (its partial
    copies, left by a process killed while copying or before the copy was named)."""
    backup = os.path.join(backup_dir, os.path.basename(final))
    discard(backup)
    discard_partial_copies(backup)


def discard_partial_copies(backup: str) -> None:
    """Remove every partial copy of ``backup`` (``<backup>.partial``, ``<backup>.<tag>.partial``)."""
    directory, name = os.path.split(backup)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.listdir(directory):
            if entry.startswith(name + ".") and entry.endswith(".partial"):
                discard(os.path.join(directory, entry))


def _copy_sparse(source: str, target: str) -> str:
    """Copy ``source`` to a partial copy of ``target`` of this call's own (``<target>.<pid>-<random>.partial``; not
    fsynced: the caller syncs it before it names it ``target``), its trailing hole kept a hole
    (:func:`~indexlib.format.index_file.data_end`): an active segment's index preallocated to 10 MiB stores a few
    pages, and its copy stores no more. Returns the partial copy's path; nothing is left there when the copy fails,
    and its error names ``target``."""
    partial = f"{target}.{os.getpid()}-{secrets.token_hex(4)}.partial"
    try:
        with open(source, "rb") as src, open(partial, "wb") as dst:
            size = os.fstat(src.fileno()).st_size
            at, end = 0, data_end(src.fileno(), size)  # a preallocated index's hole is its tail
            while at < end:
                chunk = os.pread(src.fileno(), min(1 << 20, end - at), at)
                if not chunk:
                    break
                _write_naming(dst.fileno(), chunk, at, target)
                at += len(chunk)
            try:
                os.ftruncate(dst.fileno(), size)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, target) from None
        shutil.copystat(source, partial)
    except BaseException:  # a full disk, say: no partial copy stays behind
        discard(partial)
        raise
    return partial


def _write_naming(fd: int, data: bytes, at: int, path: str) -> None:
    """``pwrite`` all of ``data`` at ``at``; an error names ``path`` (a descriptor's error names no file)."""
    view = memoryview(data)
    try:
        while view:
            written = os.pwrite(fd, view, at)
            view, at = view[written:], at + written
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None


def install(staged: str, final: str, sync_dir: bool = True) -> None:
    """Rename a staged file over ``final`` (atomic), then fsync the directory (``sync_dir=False``: the
    caller fsyncs it once after several installs)."""
    os.replace(staged, final)
    if sync_dir:
        fsync_path(os.path.dirname(final) or ".")


#: whether a writability check can ask for this process's effective ids (Linux: yes)
_EFFECTIVE_IDS = os.access in os.supports_effective_ids


def writable(path: str) -> bool:
    """Whether this process may open ``path`` for writing (a cut in place needs it; a rename only the dir)."""
    return os.access(path, os.W_OK, effective_ids=_EFFECTIVE_IDS)


def check_as_read(path: str, identity: FileIdentity) -> None:
    """:class:`ChangedSinceReadError` unless ``path`` (not followed) is still the file a read saw (``identity``)."""
    if file_identity(os.lstat(path)) != identity:
        raise ChangedSinceReadError(f"{path}: changed since this run read it; not written")


def trim_in_place(path: str, size: int, identity: FileIdentity) -> None:
    """Cut the regular file ``path`` to ``size`` bytes, where the bytes cut are known to be zeros: only if it is
    still the file a read saw (``identity``: :func:`~indexlib.format.index_file.file_identity`, its one link
    included), else :class:`ChangedSinceReadError` and nothing changed. Not fsynced: the caller fsyncs the file
    (its directory is unchanged)."""
    cut = size != identity[1]  # else it already is its rebuild: nothing to cut (nor to open for writing)
    fd = os.open(path, (os.O_RDWR if cut else os.O_RDONLY) | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if file_identity(os.fstat(fd)) != identity:
            raise ChangedSinceReadError(f"{path}: changed since this run read it; not written")
        if cut:
            os.ftruncate(fd, size)
    finally:
        os.close(fd)


def _stage_index(
    final: str,
    index_class: type[IndexT],
    base_offset: int,
    entries: int,
    segment_index_bytes: int,
    tag: str | None,
    write: Callable[[IndexT], object],
    unsynced: list[str] | None = None,
) -> str:
    """Stage a trimmed ``.index`` or ``.timeindex`` of ``entries`` entries under ``staged_path(final, tag)``,
    written by ``write`` into an index created at exactly that size (never above ``segment_index_bytes``), so
    the file is sized once and never trimmed; returns that path. One fsync: the mapping's pages are the
    file's page cache, which ``fsync`` writes (no ``msync`` first). With ``unsynced`` the fsync is left to the
    caller (:func:`fsync_paths`, before the staged file is reported), and the path is added to it."""
    with _staging(final, tag) as staged:
        if entries == 0:
            _create_empty(staged, unsynced)
            return staged
        size = min(entries * index_class.ENTRY_SIZE, segment_index_bytes)
        with index_class(staged, base_offset, max_index_size=size) as index:
            write(index)
            if unsynced is None:
                index.sync()
        if unsynced is not None:
            unsynced.append(staged)
    return staged


def stage_offset_index(
    final: str,
    base_offset: int,
    offsets: np.ndarray,
    positions: np.ndarray,
    segment_index_bytes: int,
    tag: str | None = None,
    unsynced: list[str] | None = None,
) -> str:
    """Write a trimmed ``.index`` holding exactly these entries under ``staged_path(final, tag)``; returns that
    path (``unsynced``: see :func:`_stage_index`)."""
    return _stage_index(
        final,
        OffsetIndex,
        base_offset,
        len(offsets),
        segment_index_bytes,
        tag,
        lambda index: index.append_many(offsets, positions),
        unsynced,
    )


def stage_time_index(
    final: str,
    base_offset: int,
    timestamps: np.ndarray,
    offsets: np.ndarray,
    segment_index_bytes: int,
    tag: str | None = None,
    unsynced: list[str] | None = None,
) -> str:
    """Stage a trimmed ``.timeindex``; the last pair is the forced final entry (no full check). ``unsynced``: see
    :func:`_stage_index`."""

    def write(index: TimeIndex) -> None:
        if len(timestamps):
            index.append_many(timestamps[:-1], offsets[:-1])
            index.maybe_append(int(timestamps[-1]), int(offsets[-1]), skip_full_check=True)

    return _stage_index(final, TimeIndex, base_offset, len(timestamps), segment_index_bytes, tag, write, unsynced)


def stage_transaction_index(final: str, base_offset: int, aborted: list[AbortedTxn], tag: str | None = None) -> str:
    """Stage a ``.txnindex`` with these records (an empty list gives a 0-byte file)."""
    with _staging(final, tag) as staged:
        if not aborted:
            _create_empty(staged)
            return staged
        with TransactionIndex(staged, base_offset) as index:
            for txn in aborted:
                index.append(txn)
            index.flush()  # its fsync
    return staged


def discard_staged(staged: dict[str, str], backups: list[str]) -> None:
    """Drop staged files and the backups made of the files they would have replaced (in place: the
    list is emptied of them). Any other backup (a cut ``.log`` tail) is kept: it may be the only copy."""
    names = {os.path.basename(final) for final in staged}
    for path in staged.values():
        discard(path)
    for path in [b for b in backups if os.path.basename(b) in names]:
        discard(path)
    backups[:] = [b for b in backups if os.path.basename(b) not in names]
    staged.clear()


def stage_segment(
    target_dir: str,
    base_offset: int,
    plan: SegmentPlan | PlanSummary,
    aborted: list[AbortedTxn],
    suffixes: Collection[str],
    stale_txn: bool,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    tag: str | None = None,
    unsynced: list[str] | None = None,
) -> dict[str, str]:
    """Stage the chosen index files of one rebuilt segment beside their final names (see this
    module's docstring); returns ``{final: staged}`` in ``INDEX_SUFFIXES`` order. Kafka sees nothing
    until :func:`install_segment`. ``.index``/``.timeindex`` need a full :class:`SegmentPlan`; ``.txnindex``
    is staged only when there are aborted transactions or ``stale_txn`` (an existing one, which becomes 0
    bytes as Kafka does). Creates ``target_dir`` if needed. Never call this for a segment whose plan is fatal.
    On failure nothing is left. With ``unsynced``, the staged ``.index``/``.timeindex`` are added to it instead of
    fsynced: the caller fsyncs them (:func:`fsync_paths`) before it reports them staged."""
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
            f, base_offset, full_plan().offset_offsets, full_plan().offset_positions, segment_index_bytes, tag, unsynced
        ),
        ".timeindex": lambda f: stage_time_index(
            f, base_offset, full_plan().time_timestamps, full_plan().time_offsets, segment_index_bytes, tag, unsynced
        ),
        ".txnindex": lambda f: stage_transaction_index(f, base_offset, aborted, tag),
    }
    chosen = [s for s in INDEX_SUFFIXES if s in suffixes and (s != ".txnindex" or aborted or stale_txn)]
    if not chosen:
        return {}
    _ensure_dir(target_dir, unsynced)
    staged: dict[str, str] = {}
    try:
        for suffix in chosen:
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
    installed: set[str] = set()
    try:
        for final, path in staged.items():
            if backup_dir is not None and (kept := keep_backup(final, backup_dir)):
                backups.append(kept)
            install(path, final, sync_dir=False)
            installed.add(path)
            written.append(final)
    finally:
        for path in staged.values():
            if path not in installed:
                discard(path)
    if sync_dir:
        for directory in {os.path.dirname(final) for final in written}:
            fsync_path(directory)
    return written, backups


def save_log_tail(log_path: str, valid_bytes: int, backup_dir: str) -> str:
    """Copy ``log_path[valid_bytes:]`` into ``backup_dir`` as ``<name>.tail-from-<valid bytes>``, durable (written
    under ``.partial``, fsynced, renamed, the dir fsynced); returns its path. An existing copy of that name (a
    killed run's, under the same run id) is replaced: the bytes past ``valid_bytes`` are still the same."""
    saved = os.path.join(backup_dir, f"{os.path.basename(log_path)}.tail-from-{valid_bytes}")
    partial = saved + ".partial"
    parents = make_dirs(backup_dir)
    try:
        with open(log_path, "rb") as src, open(partial, "wb") as dst:
            src.seek(valid_bytes)
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(partial, saved)
    except BaseException:  # the .log is not cut yet: a partial copy is worth nothing
        discard(partial)
        raise
    for directory in [backup_dir, *parents]:
        fsync_path(directory)
    return saved


def truncate_log(log_path: str, valid_bytes: int, written: list[str]) -> None:
    """Cut the ``.log`` to ``valid_bytes`` (its tail already saved) and fsync it; ``written`` once cut."""
    os.truncate(log_path, valid_bytes)
    written.append(log_path)
    fsync_path(log_path)


def drop_segment_files(segments: list[list[str]], backup_dir: str) -> list[list[str]]:
    """Move whole segments out of their partition dir into ``backup_dir`` (those after a cut, which an unclean
    start deletes), ``segments`` given highest base offset first, each segment's ``.log`` last. Returns each
    segment's backups, in the same order.

    Every copy is made and durable before the first file leaves (a full backup disk changes nothing); then the
    files leave in the order given (a rename where both dirs share a file system, else an unlink of the copied
    file), so that a kill at any point leaves the partition's log whole up to some later segment: still the
    invalid batch the run cuts at, from which the next run reaches the same result. The partition dir and
    ``backup_dir`` are fsynced before this returns, so no later change (the cut) is durable before these."""
    sync_or_raise(make_dirs(backup_dir))  # its name durable before the first file leaves for it
    paths = [path for files in segments for path in files]
    device = os.stat(backup_dir).st_dev
    backups = {path: os.path.join(backup_dir, os.path.basename(path)) for path in paths}
    for path, backup in backups.items():
        if os.path.lexists(backup):
            raise BackupExistsError(f"{backup}: a backup of that name exists; nothing of {path} was moved")
    copied = {path for path in paths if os.stat(path).st_dev != device}
    if copied:
        unsynced: list[str] = []
        named: list[str] = []
        try:
            for path in sorted(copied):
                keep_backup(path, backup_dir, unsynced)
            sync_or_raise(unsynced)
            sync_or_raise(name_backups([backups[path] for path in sorted(copied)], unsynced, named))
        except BaseException:  # nothing has left yet: no copy made here keeps anything
            for leftover in [p for p in unsynced if p.endswith(".partial")] + named:
                discard(leftover)
            raise
    for path in paths:
        if path in copied:
            os.unlink(path)
        else:
            os.rename(path, backups[path])
    directories = sorted({os.path.dirname(path) for path in paths} | {backup_dir})
    failed = fsync_paths(directories)
    if failed:
        raise failed[min(failed)]
    return [[backups[path] for path in files] for files in segments]


def sweep_partial_backups(backup_root: str, run_ids: Collection[str]) -> list[str]:
    """Remove the ``*.partial`` copies dead runs (``run_ids``: killed while copying a file into their backups) left
    under ``<backup_root>/<run id>/``: a copy is named only once it is whole, so a ``.partial`` one keeps
    nothing. Returns what was removed."""
    removed = []
    for run_id in sorted(run_ids):
        for directory, _, names in os.walk(os.path.join(backup_root, run_id)):
            for name in sorted(n for n in names if n.endswith(".partial")):
                path = os.path.join(directory, name)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed.append(path)
    return removed


def discard_staged_by_run(directories: list[str], run_id: str) -> None:
    """Remove every file in ``directories`` that this run staged (see :func:`indexlib.format.layout.staged_by_run`);
    a directory that cannot be listed is skipped."""
    for directory in sorted(set(directories)):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if staged_by_run(name, run_id):
                discard(os.path.join(directory, name))


def why_unwritable(directory: str) -> str | None:
    """Why files cannot be created in ``directory`` (an existing dir), or None."""
    if os.access(directory, os.W_OK | os.X_OK):
        return None
    with contextlib.suppress(OSError):
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "Read-only file system"
    return "Permission denied"


def nearest_existing(path: str) -> tuple[str, bool]:
    """``path`` made absolute, or the nearest path above it that exists (what creating it would write into),
    and whether that is a directory."""
    probe = os.path.abspath(path)
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    return probe, os.path.isdir(probe)


def first_file_under(directory: str) -> str | None:
    """Some file anywhere under ``directory`` (None when it holds none, or does not exist)."""
    return next((os.path.join(d, n) for d, _, names in os.walk(directory) for n in names), None)


# ------------------------------------------------------------------------- an unclean start's files
def _write_whole(path: str, data: bytes, flags: int, unsynced: list[str] | None) -> None:
    """Write ``data`` as the whole of ``path`` (opened with ``flags``), fsynced, or added to ``unsynced`` for the
    caller to fsync (:func:`fsync_paths`) before it gives the file its name."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if unsynced is None:
            os.fsync(fd)
        else:
            unsynced.append(path)
    except OSError as exc:  # a write or fsync error names no file (ENOSPC, EIO): this one
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, path) from exc
    finally:
        os.close(fd)


def stage_checkpoint_file(path: str, text: str, unsynced: list[str] | None = None) -> str:
    """A checkpoint file's new text written as Kafka writes one, to ``<path>.tmp`` (returned), fsynced (or added
    to ``unsynced``); the caller renames it over ``path`` and fsyncs the dir (:func:`write_checkpoint_file`)."""
    tmp = path + ".tmp"
    try:
        _write_whole(tmp, text.encode(), os.O_TRUNC, unsynced)
    except BaseException:
        discard(tmp)
        raise
    return tmp


def write_checkpoint_file(path: str, text: str) -> None:
    """Replace a checkpoint file as Kafka writes one: ``<path>.tmp`` written and fsynced, renamed over
    ``path``, the dir fsynced. A crash leaves the old file or the new one."""
    tmp = stage_checkpoint_file(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise
    fsync_path(os.path.dirname(path) or ".")


def stage_file(final: str, data: bytes, tag: str, unsynced: list[str] | None = None) -> str:
    """Stage a small whole file beside the segments (a producer snapshot) as every index file is staged: under
    its hidden staged name (returned; its dir made if missing: an ``--output-dir``), fsynced or added to
    ``unsynced``. The caller installs it (:func:`install`) or discards it."""
    _ensure_dir(os.path.dirname(final), unsynced)
    with _staging(final, tag) as staged:
        _write_whole(staged, data, os.O_EXCL, unsynced)
    return staged


def replace_file(final: str, data: bytes, backup_dir: str | None, tag: str) -> str | None:
    """Replace (or create) a small whole file beside the segments: staged (:func:`stage_file`), the old file kept
    in ``backup_dir`` first, renamed over ``final``; the caller fsyncs the dir. Returns the backup's path, if one
    was made."""
    staged = stage_file(final, data, tag)
    try:
        kept = keep_backup(final, backup_dir) if backup_dir is not None else None
        install(staged, final, sync_dir=False)
    except BaseException:
        discard(staged)
        raise
    return kept


#: the files of an empty segment rolled at the log end (:func:`create_empty_segment`)
ROLLED_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


def create_empty_segment(partition_dir: str, base_offset: int, unsynced: list[str] | None = None) -> list[str]:
    """The files of a segment rolled at ``base_offset`` with nothing in it yet, as a broker's roll and clean
    shutdown leave an empty active segment: 0-byte ``.log``, ``.index`` and ``.timeindex``, each new (an
    existing one is an error) and fsynced (or added to ``unsynced``); the caller fsyncs the dir. Returns their
    paths."""
    created = []
    try:
        for suffix in ROLLED_SEGMENT_SUFFIXES:
            path = segment_file(partition_dir, base_offset, suffix)
            _create_empty(path, unsynced)
            created.append(path)
    except BaseException:
        for path in created:
            discard(path)
        raise
    return created


def log_dir_backup_dir(backup_root: str, log_dir: str) -> str:
    """Where a log dir's own files are kept: ``<backup_root>/log-dirs/<its absolute path, '/' as '_'>``."""
    label = os.path.abspath(log_dir).strip(os.sep).replace(os.sep, "_") or "root"
    return os.path.join(backup_root, "log-dirs", label)


def move_to_backup(paths: list[str], backup_dir: str) -> list[str]:
    """Move files out of a partition dir into ``backup_dir`` (a segment an unclean start would delete), each
    durable there before it leaves: a rename where both dirs share a file system, else a copy, fsync and
    unlink. Returns the backups' paths; the caller fsyncs the partition dir."""
    for directory in make_dirs(backup_dir):  # its name durable before the first file leaves for it
        fsync_path(directory)
    moved = []
    for path in paths:
        backup = os.path.join(backup_dir, os.path.basename(path))
        if os.path.lexists(backup):
            raise BackupExistsError(f"{backup}: a backup of that name exists; nothing of {path} was moved")
        try:
            os.rename(path, backup)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            keep_backup(path, backup_dir)
            os.unlink(path)
        moved.append(backup)
    fsync_path(backup_dir)
    return moved
