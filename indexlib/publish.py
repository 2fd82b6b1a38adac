"""Atomic publishing of rebuilt index files, written through the memory-mapped index classes.

Invariant: a crash at any point leaves either the old file or the new one under the final name, never a
torn one: each file is written to a temporary name in the same directory, flushed and fsynced, renamed
over the final name, and the directory is fsynced. An existing file can be kept in a backup directory
first. Nothing is ever written through a read-only open.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from contextlib import contextmanager

import numpy as np

from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .transaction_index import TransactionIndex
from .values import AbortedTxn


class LogDirLockedError(RuntimeError):
    """The log dir's ``.lock`` is held by another process (a running broker)."""


def log_dir_is_locked(log_dir: str | os.PathLike[str]) -> bool:
    """Whether another process holds the POSIX lock on ``<log_dir>/.lock`` (a running broker does)."""
    path = os.path.join(log_dir, ".lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_name(final: str) -> str:
    directory, name = os.path.split(final)
    return os.path.join(directory, f".{name}.{os.getpid()}.rebuild.tmp")


def _install(temp: str, final: str, backup_dir: str | None) -> str | None:
    """fsync ``temp``, keep the old ``final`` in ``backup_dir`` (if given), rename, fsync the directory."""
    fsync_path(temp)
    backup = None
    if backup_dir is not None and os.path.lexists(final):
        os.makedirs(backup_dir, exist_ok=True)
        backup = os.path.join(backup_dir, os.path.basename(final))
        shutil.copy2(final, backup)
        fsync_path(backup)
    os.replace(temp, final)
    fsync_path(os.path.dirname(final) or ".")
    return backup


@contextmanager
def _publishing(final: str, backup_dir: str | None):
    """Yield a temporary path beside ``final``; on success install it (see :func:`_install`) and record
    the backup path in the yielded list; the temporary file never survives."""
    temp = _temp_name(final)
    outcome: list[str | None] = []
    try:
        yield temp, outcome
        outcome.append(_install(temp, final, backup_dir))
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)


def write_offset_index(final: str, base_offset: int, offsets: np.ndarray, positions: np.ndarray,
                       segment_index_bytes: int, backup_dir: str | None = None) -> str | None:
    """Publish a trimmed ``.index`` holding exactly these entries. Returns the backup path, if any."""
    with _publishing(final, backup_dir) as (temp, outcome):
        with OffsetIndex(temp, base_offset, max_index_size=segment_index_bytes) as index:
            index.reset()
            index.append_many(offsets, positions)
            index.flush()
    return outcome[0]


def write_time_index(final: str, base_offset: int, timestamps: np.ndarray, offsets: np.ndarray,
                     segment_index_bytes: int, backup_dir: str | None = None) -> str | None:
    """Publish a trimmed ``.timeindex``; the last pair is the forced final entry (no full check)."""
    with _publishing(final, backup_dir) as (temp, outcome):
        with TimeIndex(temp, base_offset, max_index_size=segment_index_bytes) as index:
            index.reset()
            if len(timestamps):
                index.append_many(timestamps[:-1], offsets[:-1])
                index.maybe_append(int(timestamps[-1]), int(offsets[-1]), skip_full_check=True)
            index.flush()
    return outcome[0]


def write_transaction_index(final: str, base_offset: int, aborted: list[AbortedTxn],
                            backup_dir: str | None = None) -> str | None:
    """Publish a ``.txnindex`` with these records (an empty list gives a 0-byte file)."""
    with _publishing(final, backup_dir) as (temp, outcome):
        with TransactionIndex(temp, base_offset) as index:
            index.reset()
            for txn in aborted:
                index.append(txn)
            index.flush()
        if not os.path.lexists(temp):  # nothing appended: create the empty file explicitly
            open(temp, "wb").close()
    return outcome[0]
