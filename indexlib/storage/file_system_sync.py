"""Durability by file system (``--sync syncfs``): one ``syncfs(2)`` per file system in place of an ``fsync`` per
file and dir, as PostgreSQL's ``recovery_init_sync_method = syncfs``. Many small files (a crashed broker's
thousands of partitions) then cost one write-back and one journal commit instead of an fsync each.

Invariants: a path counts as durable only when it is on a file system this process registered (:func:`register`)
before it wrote there, and that file system's ``syncfs`` succeeded after the path was written and no ``syncfs`` of
it failed before in this process; a path on any other file system is left to the caller, who fsyncs it.

- Registering opens a descriptor on the file system; ``syncfs`` through it reports every write error on that file
  system since: errors writing file data from Linux 5.8, the file system's own (its journal commit) from 5.17, so
  :func:`register` refuses older kernels. Only the local file systems of :data:`SYNCFS_FILE_SYSTEMS` are
  registered (a network or FUSE file system may honour an fsync better than a ``syncfs``): the rest are fsynced.
- An error fails every path its call covered, and every later call on that file system in this process (the
  kernel reports an error once per descriptor: a later call would otherwise succeed over pages that were lost).
- Each process has descriptors of its own: a forked child drops what it inherited (a descriptor shared across a
  fork shares its error cursor, so one process's ``syncfs`` would consume the error another's write caused), and
  a pool worker registers again (:func:`roots`).

The costs: ``syncfs`` also writes whatever else is waiting to be written on those file systems, and an error
there fails the run's paths too. A write error from before the run that another program's ``syncfs`` already
reported is not seen (an fsync of each file would still see it for that file)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import re
from collections.abc import Collection, Iterator
from typing import Any

from ..format.errors import KafkaIndexError

#: the first Linux whose ``syncfs`` reports both write-back errors (errseq on the superblock, 5.8) and the file
#: system's own sync errors (``sync_filesystem`` returning ``->sync_fs``'s, 5.17)
MIN_KERNEL = (5, 17)
#: the file systems synced by ``syncfs`` (``/proc/self/mountinfo``'s type); any other is fsynced path by path
SYNCFS_FILE_SYSTEMS = frozenset({"ext4", "xfs", "btrfs", "tmpfs"})


class SyncfsUnavailableError(KafkaIndexError, ValueError):
    """``--sync syncfs`` where ``syncfs`` would not report write errors (not Linux, Linux < 5.17) or is missing."""


#: st_dev -> (the dir it was registered as, this process's descriptor on it)
_registered: dict[int, tuple[str, int]] = {}
#: st_dev -> the error of a failed ``syncfs`` of a registered file system (every later call on it fails with it)
_failed: dict[int, OSError] = {}


def file_system_type(device: int) -> str | None:
    """The type of the mounted file system whose device number is ``device`` (``/proc/self/mountinfo``), or None."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields, _, after = line.partition(" - ")
                if after and fields.split()[2:3] == [wanted]:
                    return after.split()[0]
    except OSError:
        return None
    return None


def kernel_reports_syncfs_errors(system: str | None = None, release: str | None = None) -> bool:
    """Whether ``syncfs`` on this kernel (or ``system``/``release``, as ``platform`` names them) reports write-back
    errors: Linux >= :data:`MIN_KERNEL`."""
    system = platform.system() if system is None else system
    release = platform.release() if release is None else release
    found = re.match(r"(\d+)\.(\d+)", release)
    return system == "Linux" and found is not None and (int(found[1]), int(found[2])) >= MIN_KERNEL


def check_available() -> None:
    """Raise :class:`SyncfsUnavailableError` naming the reason where ``--sync syncfs`` cannot be trusted."""
    if not kernel_reports_syncfs_errors():
        raise SyncfsUnavailableError(
            f"--sync syncfs needs Linux {MIN_KERNEL[0]}.{MIN_KERNEL[1]} or later (this system: {platform.system()} "
            f"{platform.release()}): older kernels do not report write errors from syncfs; use --sync fsync"
        )
    if _syncfs_function() is None:
        raise SyncfsUnavailableError("--sync syncfs: this C library has no syncfs(); use --sync fsync")


def trusted() -> bool:
    """Whether ``syncfs`` here reports write errors (:func:`check_available` passes): what ``--sync auto`` needs."""
    return kernel_reports_syncfs_errors() and _syncfs_function() is not None


@functools.cache
def _syncfs_function() -> Any:
    """The C library's ``syncfs(int fd)``, or None."""
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


def register(dirs: Collection[str]) -> None:
    """Sync the file systems of ``dirs`` (each, or its nearest existing ancestor: a dir the run will create) by
    ``syncfs`` from now on in this process, replacing any registered before (:func:`check_available` first)."""
    check_available()
    release()
    try:
        for path in dirs:
            existing = os.path.abspath(path)
            while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
                existing = os.path.dirname(existing)
            fd = os.open(existing, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            device = os.fstat(fd).st_dev
            if device in _registered or file_system_type(device) not in SYNCFS_FILE_SYSTEMS:
                os.close(fd)
            else:
                _registered[device] = (existing, fd)
    except BaseException:  # none registered: this process stays with an fsync per path
        release()
        raise


def release() -> None:
    """Back to an fsync per path in this process: the descriptors closed, failures forgotten. Also what a forked child
    does first with what it inherited (the parent keeps its own)."""
    while _registered:
        _, (_, fd) = _registered.popitem()
        with contextlib.suppress(OSError):
            os.close(fd)
    _failed.clear()


os.register_at_fork(after_in_child=release)


@contextlib.contextmanager
def by_file_system(dirs: Collection[str]) -> Iterator[None]:
    """:func:`register` for the body (a run), then :func:`release`."""
    register(dirs)
    try:
        yield
    finally:
        release()


@contextlib.contextmanager
def for_task(dirs: Collection[str]) -> Iterator[None]:
    """A worker's share of a run's ``--sync syncfs`` for one task (a Spark task: its Python worker runs many):
    ``dirs`` (the driver's :func:`roots`; none: fsyncs) registered with descriptors of this process before the task
    writes, released after. Where this kernel cannot be trusted with ``syncfs``, or a dir cannot be opened here (an
    executor on another host), nothing is registered: each file is fsynced, durable the same."""
    registered = False
    if dirs:
        with contextlib.suppress(SyncfsUnavailableError, OSError):  # register then leaves nothing registered
            register(dirs)
            registered = True
    try:
        yield
    finally:
        if registered:
            release()


def roots() -> list[str]:
    """The dirs registered in this process, one per file system (what a pool worker registers again)."""
    return [path for path, _ in _registered.values()]


def active() -> bool:
    return bool(_registered)


def sync_paths(paths: Collection[str]) -> tuple[dict[str, OSError], list[str]]:
    """One ``syncfs`` per registered file system that holds some of ``paths``: (the paths that failed, with their
    error: one that cannot be stat'ed, or every path of a file system whose ``syncfs`` failed, now or before in
    this process; the paths on no registered file system, for the caller to fsync)."""
    failed: dict[str, OSError] = {}
    left: list[str] = []
    by_device: dict[int, list[str]] = {}
    for path in paths:
        try:
            device = os.stat(path).st_dev
        except OSError as exc:
            failed[path] = exc
            continue
        if device in _registered:
            by_device.setdefault(device, []).append(path)
        else:
            left.append(path)
    syncfs = _syncfs_function() if by_device else None
    for device, mine in by_device.items():
        assert syncfs is not None  # check_available() found it when the file system was registered
        if device not in _failed and syncfs(_registered[device][1]) != 0:
            code = ctypes.get_errno()
            _failed[device] = OSError(code, f"syncfs of its file system failed: {os.strerror(code)}")
        if device in _failed:
            error = _failed[device]
            for path in mine:
                failed[path] = OSError(error.errno, error.strerror, path)
    return failed, left
