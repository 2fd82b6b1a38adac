"""Run locks: a ``.kafka-index-run-<id>.lock`` per directory a run writes, held with ``fcntl`` for the run's
life, so two runs never write the same place and a dead run's leftovers are told from a live run's; and the
broker's own ``.lock``, which an in-place write holds for its whole length as the broker takes it, so that a
broker started meanwhile fails to lock its log dir and exits (:func:`broker_locks`)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..format.errors import KafkaIndexError
from ..format.layout import (
    LOG_DIR_LOCK,
    run_lock_name,
    run_lock_run_id,
    stage_fence_name,
    stage_fence_run_id,
    staged_run_id,
)
from .publish import make_dirs, sync_or_raise


class LockedLogDirError(KafkaIndexError, RuntimeError):
    """An in-place write was asked for in a log dir that a running broker holds."""


class RunInUseError(LockedLogDirError):
    """Another process is running with the same run id and writes under the same dir."""


class StagingClosedError(KafkaIndexError, RuntimeError):
    """A task of a run that takes no more staged files (stopped, or its map is over): it stages nothing."""


def lock_is_held(path: str, lockers: tuple[Callable[[int, int], Any], ...] = (fcntl.lockf, fcntl.flock)) -> bool:
    """Whether another process holds a lock on ``path`` of one of these kinds (a shared, non-blocking probe,
    released at once): POSIX record locks (``fcntl.lockf``: Java's ``FileChannel.tryLock``, a broker's) and
    BSD ``flock`` locks (a script's, another tool's, a writing run's). A missing file is not locked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        for lock in lockers:
            try:
                lock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    return True
                raise
            lock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def log_dir_is_locked(log_dir: str | os.PathLike[str]) -> bool:
    """Whether another process holds ``<log_dir>/.lock`` (a running broker, or any other holder)."""
    return lock_is_held(os.path.join(log_dir, LOG_DIR_LOCK))


#: the lock descriptors this process holds (see :func:`run_locks` and :func:`broker_locks`)
_HELD_RUN_LOCKS: set[int] = set()


def _close_run_locks_in_child() -> None:
    """After a fork: close the child's copies of the held locks (a ``flock`` belongs to the open file, which
    the copies share; a POSIX record lock belongs to the process and is not inherited). A forked pool worker
    that outlives its run (the run SIGKILLed) must not keep that dead run's lock held, which would keep its
    staged files and lock file from ever being swept, or a broker from starting. Closing a copy does not
    release the parent's lock."""
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
            sync_or_raise(make_dirs(directory))  # an output dir made here: its name durable before anything in it
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
    finds it held and takes the new file, or holds it and the file stays. Their stage fences
    (:class:`StageFence`) go with them. Returns what was removed."""
    removed = []
    for directory in sorted(set(directories)):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            owner = stage_fence_run_id(name)
            if owner is not None and owner != run_id and not run_is_alive(directory, owner):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))
                    removed.append(os.path.join(directory, name))
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


class StageFence:
    """Closes a run's staging for good, even to executors the driver cannot see or stop (a Spark task that
    runs on after its job was cancelled). The driver creates ``<dir>/.kafka-index-run-<id>.fence`` before its
    map (:meth:`create`); every batch of tasks stages only inside :func:`staging_open` on it, which holds a
    shared ``flock`` for the batch, and is refused once the file is gone. :meth:`close` unlinks the file, then takes the lock
    exclusively: once it returns, no task stages a file again, so a sweep after it is final. A task that
    never ends (a stopped process) is waited for ``wait`` seconds at most; what it stages later carries
    this run's id, and a later run sweeps it as a dead run's."""

    def __init__(self, directory: str, run_id: str) -> None:
        self.path = os.path.join(directory, stage_fence_name(run_id))
        self._fd: int | None = None

    def create(self) -> str:
        """Create (or take over) the fence file; returns its path, which the tasks carry."""
        self._fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return self.path

    def close(self, wait: float = 60.0) -> bool:
        """Close staging (idempotent): unlink the file, wait until no task stages. False if one still held the
        fence after ``wait`` seconds."""
        fd, self._fd = self._fd, None
        if fd is None:
            return True
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(0.01)
        finally:
            os.close(fd)


@contextlib.contextmanager
def staging_open(fence: str | None) -> Iterator[None]:
    """For a batch of tasks: hold ``fence`` (:class:`StageFence`) shared for the block, or raise
    :class:`StagingClosedError` if the run already closed it. ``None``: a run that stages nothing."""
    if fence is None:
        yield
        return
    closed = f"{fence}: the run takes no more staged files (it was stopped, or its map is over)"
    try:
        fd = os.open(fence, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise StagingClosedError(closed) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits while the run closes it: then the file is gone
        if not _is_file_at(fd, fence):
            raise StagingClosedError(closed)
        yield
    finally:
        os.close(fd)


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


#: what a ``.lock`` that a run created holds (:func:`broker_locks`)
CREATED_LOCK = b"created by kafka-index-rebuild; removed by its next run\n"


@contextlib.contextmanager
def broker_locks(log_dirs: list[str], force: bool, advice: str) -> Iterator[list[str]]:
    """Hold each log dir's ``.lock`` for the block as a broker holds it: an exclusive POSIX record lock
    (``fcntl``, what Java's ``FileChannel.tryLock`` takes), and an exclusive ``flock`` beside it (what other
    tools take). A broker that starts meanwhile fails to lock the dir and exits; a second writing run is
    refused. A ``.lock`` this run creates (a copied log dir has none) is given the log dir's owner (a broker
    running as that user must still open it), holds :data:`CREATED_LOCK` and is removed on release; a killed run
    leaves it, and the next run that holds it removes it as its own, so the log dir ends as an uninterrupted run
    leaves it (Kafka reads no byte of a ``.lock``; a broker's own is empty). A dir another process holds:
    :class:`LockedLogDirError` (its line ends with ``advice``), unless ``force``, when it is left unheld and
    yielded (the caller warns).

    Invariant: while held, nothing else in this process opens and closes a ``.lock`` (closing any descriptor
    of the file would drop the POSIX lock); forked children close their copies (:func:`_close_run_locks_in_child`)."""
    held: list[tuple[int, str | None]] = []  # (descriptor, the path when this run created the file)
    unheld: list[str] = []
    try:
        for log_dir in sorted(set(log_dirs)):
            path = os.path.join(log_dir, LOG_DIR_LOCK)
            fd, created = _open_lock_file(path)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                if force:
                    unheld.append(log_dir)
                    continue
                raise LockedLogDirError(
                    f"{path}: held by another process (a running broker, or another writing run); {advice}"
                ) from None
            if created:
                with contextlib.suppress(OSError):  # not root: the file is the run user's, as the dir must be
                    owner = os.stat(log_dir)
                    os.fchown(fd, owner.st_uid, owner.st_gid)
                with contextlib.suppress(OSError):  # a full disk: an empty .lock, removed at the end all the same
                    os.write(fd, CREATED_LOCK)
            elif os.pread(fd, len(CREATED_LOCK) + 1, 0) == CREATED_LOCK:  # a killed run's: removed as its own
                created = True
            held.append((fd, path if created else None))
            _HELD_RUN_LOCKS.add(fd)
        yield unheld
    finally:
        for fd, created_path in reversed(held):
            if created_path is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(created_path)
            _HELD_RUN_LOCKS.discard(fd)
            os.close(fd)


def _open_lock_file(path: str) -> tuple[int, bool]:
    """``path`` opened for writing (a POSIX write lock needs it), created as Kafka creates it when absent:
    (the descriptor, whether this call created the file)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644), True
    except FileExistsError:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC), False
