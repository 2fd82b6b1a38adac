"""The reads of a partition's files for a run: a ``.log`` summarized by one pass of the scan, the existing
index files as verify reads them, the zero tail of a ``.log``, the directory's names, the producer snapshots
and the log start offset. Read-only: nothing here writes, and nothing raises on bad file contents where a
finding can say it (the result carries the reason).

Reads never go through a mapping that a broker could shrink under them (SIGBUS): the kernel and the index
reads use ``pread``."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..format import control_records, scan_kernel
from ..format.abstract_index import AbstractIndex
from ..format.batch_walk import open_segment, scan_buffer, scan_log
from ..format.checkpoint import CheckpointError, parse_offset_checkpoint
from ..format.errors import CorruptIndexError, NotARegularFileError, describe_error
from ..format.index_file import FileIdentity, data_extents, read_snapshot
from ..format.layout import (
    INDEX_SUFFIXES,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    SNAPSHOT_SUFFIX,
    parse_segment_name,
    segment_file,
)
from ..format.offset_index import OffsetIndex
from ..format.time_index import TimeIndex
from ..format.transaction_index import TransactionIndex, transaction_records
from ..recovery.entry_checks import ExistingTxnIndex
from ..recovery.log_scan import (
    NO_PROBES,
    ExistingIndex,
    LogSummary,
    Probes,
    from_kernel,
    producer_end_states,
    summarize,
)

if TYPE_CHECKING:
    from .store import Store


# ------------------------------------------------------------------------------------------ the .log
def producer_states_inside(log_path: str, offsets: Sequence[int]) -> dict[int, npt.NDArray[np.void]]:
    """Per offset of ``offsets`` that is a batch boundary inside the ``.log`` (a snapshot written there: an older
    clean shutdown's): the :data:`~indexlib.recovery.log_scan.PRODUCER_DTYPE` states its batches below that offset
    leave. The reference scan reads the file (this is rare: one segment of a partition at most, usually none);
    an offset that is no batch's end is left out."""
    scan = scan_log(log_path)
    found = {}
    for offset in offsets:
        below = int(np.searchsorted(scan.base_offsets, offset))
        if below and int(scan.last_offsets[below - 1]) + 1 == offset:
            found[offset] = producer_end_states(scan, below)
    return found


def summarize_log(
    path: str | os.PathLike[str],
    base_offset: int,
    index_interval_bytes: int,
    probes: Probes = NO_PROBES,
    compiled: bool | None = None,
) -> LogSummary:
    """The summary of a ``.log`` file: one streaming pass of the compiled kernel, or (``compiled=False``,
    or the kernel not in use, see :data:`indexlib.format.scan_kernel.KERNEL`) :func:`~indexlib.recovery.log_scan.summarize`
    over :func:`~indexlib.format.batch_walk.scan_log`. Never modifies the file. Raises ``OSError``/``ValueError``
    when it cannot be read."""
    path = os.fspath(path)
    kernel = scan_kernel.kernel_for(compiled)
    if kernel is None or not hasattr(kernel, "scan_segment"):
        return summarize(scan_log(path), base_offset, index_interval_bytes, probes)
    fd = open_segment(path)
    try:
        size = os.fstat(fd).st_size
        raw = kernel.scan_segment(
            fd,
            size,
            base_offset,
            index_interval_bytes,
            probes.positions.tobytes(),
            probes.offsets.tobytes(),
            control_records.marker_fields_or_error,
            1 << 20,
            scan_kernel.READ_AHEAD,
        )
    finally:
        os.close(fd)
    return from_kernel(raw, path, size, base_offset, index_interval_bytes, probes)


def tail_is_zero(path: str, start: int, chunk: int = 1 << 20) -> bool:
    """Whether every byte of the file from ``start`` on is zero (and there is one); its stored bytes read in chunks
    with ``pread`` (its holes skipped), so a file that shrinks meanwhile is just "no"."""
    try:
        fd = open_segment(path)
    except (OSError, ValueError):
        return False
    try:
        size = os.fstat(fd).st_size
        if start >= size:
            return False
        for first, last in data_extents(fd, start, size):  # holes read as zeros: only stored bytes are read
            for at in range(first, last, chunk):
                data = os.pread(fd, min(chunk, last - at), at)
                if not data or data.count(0) != len(data):
                    return False
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------ the existing indexes
def read_existing_index(cls: type[AbstractIndex[Any]], path: str) -> ExistingIndex:
    """Read an index file read-only (a copy, never a mapping; its trailing hole skipped), never failing."""
    try:
        opened = _open_index(path)
    except OSError as exc:  # a dangling link among them
        return ExistingIndex(path, True, np.empty(0, cls.DTYPE), 0, f"cannot read {path}: {describe_error(exc)}")
    if opened is None:
        return ExistingIndex(path, False, np.empty(0, cls.DTYPE), 0)
    fd, link = opened
    try:
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise NotARegularFileError(f"{path}: not a regular file")
            snapshot = read_snapshot(fd, before)
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:
        return ExistingIndex(path, True, np.empty(0, cls.DTYPE), 0, f"cannot read {path}: {describe_error(exc)}")
    identity = None if link or snapshot.changed or snapshot.identity[3] != 1 else snapshot.identity  # one link
    return existing_index_of(cls, path, snapshot.data, snapshot.length, snapshot.changed, identity)


def existing_index_of(
    cls: type[AbstractIndex[Any]],
    path: str,
    stored: bytes | bytearray,
    length: int,
    changed: bool = False,
    identity: FileIdentity | None = None,
) -> ExistingIndex:
    """An index file's entries from its ``stored`` bytes (those before a trailing hole: the rest of ``length`` reads as
    zeros), as verify reads them: a stored partial entry before the hole zero-padded, whole entries after it
    counted as sparse. An object's bytes are all stored (``length == len(stored)``)."""
    es = cls.ENTRY_SIZE
    whole = length // es
    raw = np.frombuffer(stored, np.uint8)
    read = min(whole, len(raw) // es)
    data = raw[: read * es]
    if read < whole and len(raw) > read * es:  # a stored partial entry before the hole: zero-padded
        data = np.concatenate((raw[: (read + 1) * es], np.zeros((read + 1) * es - len(raw), np.uint8)))
        read += 1
    return ExistingIndex(path, True, data.view(cls.DTYPE), length, None, whole - read, changed, identity)


def _open_index(path: str) -> tuple[int, bool] | None:
    """Open an index file read-only, never blocking on a FIFO: (its descriptor, whether ``path`` is a symbolic link,
    which is followed), or None when nothing is there (not even a dangling link). One ``open`` for a file or
    nothing, two for a link."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        return os.open(path, flags | os.O_NOFOLLOW), False
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    return os.open(path, flags), True


def read_existing_indexes(directory: str, base_offset: int) -> dict[str, ExistingIndex]:
    """The segment's existing ``.index`` and ``.timeindex``."""
    return {
        ".index": read_existing_index(OffsetIndex, segment_file(directory, base_offset, ".index")),
        ".timeindex": read_existing_index(TimeIndex, segment_file(directory, base_offset, ".timeindex")),
    }


def read_existing_txn_index(path: str, base_offset: int, store: Store | None = None) -> ExistingTxnIndex:
    """Read a ``.txnindex`` read-only, never failing: its records, or why they cannot be read."""
    if store is not None:
        try:
            data = read_file(path, store)
        except FileNotFoundError:
            return ExistingTxnIndex(path, False)
        except OSError as exc:
            return ExistingTxnIndex(path, True, error=f"cannot read {path}: {describe_error(exc)}")
        try:
            return ExistingTxnIndex(path, True, transaction_records(data, path), len(data))
        except CorruptIndexError as exc:
            return ExistingTxnIndex(path, True, bad_version=str(exc))
    if not os.path.lexists(path):
        return ExistingTxnIndex(path, False)
    try:
        with TransactionIndex(path, base_offset, writable=False) as index:
            return ExistingTxnIndex(path, True, index.to_numpy(), index.length)
    except CorruptIndexError as exc:
        return ExistingTxnIndex(path, True, bad_version=str(exc))
    except (OSError, ValueError) as exc:
        return ExistingTxnIndex(path, True, error=f"cannot read {path}: {describe_error(exc)}")


# ------------------------------------------------------------------------------------ the directory
def partition_file_names(partition_dir: str, store: Store | None = None) -> list[str]:
    """The names in a partition directory, sorted."""
    return sorted(os.listdir(partition_dir) if store is None else store.list_names(partition_dir))


def snapshot_offsets(partition_dir: str | os.PathLike[str], store: Store | None = None) -> list[int]:
    """Offsets of the ``<offset>.snapshot`` files in a partition directory, ascending."""
    names = os.listdir(partition_dir) if store is None else store.list_names(os.fspath(partition_dir))
    parsed = (parse_segment_name(name) for name in names)
    return sorted(p[0] for p in parsed if p is not None and p[1] == SNAPSHOT_SUFFIX)


def read_file(path: str, store: Store | None = None) -> bytes:
    """A small file's bytes (a checkpoint, a snapshot): from the local disk, or through ``store``. FileNotFoundError
    when there is none."""
    if store is not None:
        return store.read_bytes(path)
    with open(path, "rb") as f:
        return f.read()


def read_snapshot_files(partition_dir: str, names: list[str], store: Store | None = None) -> dict[str, bytes | str]:
    """Every ``<offset>.snapshot`` among ``names`` (the dir's listing): path -> its bytes, or why it could not
    be read."""
    found: dict[str, bytes | str] = {}
    for name in names:
        parsed = parse_segment_name(name)
        if parsed is None or parsed[1] != SNAPSHOT_SUFFIX:
            continue
        path = os.path.join(partition_dir, name)
        try:
            found[path] = read_file(path, store)
        except OSError as exc:
            found[path] = f"cannot read {path}: {describe_error(exc)}"
    return found


def read_leader_epoch_text(partition_dir: str, store: Store | None = None) -> tuple[str, str | None, str | None]:
    """The partition's ``leader-epoch-checkpoint``: (path, its text or None when absent, why it could not be
    read or None)."""
    path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
    try:
        return path, read_file(path, store).decode("utf-8"), None
    except FileNotFoundError:
        return path, None, None
    except (OSError, UnicodeDecodeError) as exc:
        return path, None, f"cannot read {path}: {describe_error(exc)}"


def read_partition_topic_id(partition_dir: str, store: Store | None = None) -> str | None:
    """The topic id a partition dir's ``partition.metadata`` names (``topic_id: <id>``), or None when it has none
    or it cannot be read (Kafka writes it when it creates the partition)."""
    try:
        text = read_file(os.path.join(partition_dir, PARTITION_METADATA), store)[:4096].decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id" and value.strip():
            return value.strip()
    return None


def read_offset_checkpoint(
    log_dir: str, name: str, store: Store | None = None
) -> tuple[str, dict[tuple[str, int], int]]:
    """A log dir's offset checkpoint ``name``: (its path, its entries; empty when absent or 0 bytes, as Kafka
    reads it). Raises :class:`~indexlib.format.checkpoint.CheckpointError` naming the file when malformed."""
    path = os.path.join(log_dir, name)
    try:
        text = _checkpoint_text(read_file(path, store), path)
    except FileNotFoundError:
        return path, {}
    return path, parse_offset_checkpoint(text, path)


def _checkpoint_text(data: bytes, path: str) -> str:
    """A checkpoint file's bytes as text; :class:`~indexlib.format.checkpoint.CheckpointError` naming the file when
    they are not UTF-8 (Kafka's reader then fails to parse them: it treats the file as corrupt)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(
            f"{path}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from None


#: log start offset checkpoints as parsed, by path, with the identity of the file they were parsed from
_LOG_STARTS: dict[str, tuple[tuple[int, ...], dict[tuple[str, int], int]]] = {}
#: the same, of log dirs read through a store (by URI)
_STORED_LOG_STARTS: dict[str, dict[tuple[str, int], int]] = {}


def read_log_start_offset(
    log_dir: str | os.PathLike[str], topic: str, partition: int, store: Store | None = None
) -> int:
    """The partition's log start offset from ``<log_dir>/log-start-offset-checkpoint`` (0 when absent).
    Raises :class:`~indexlib.format.checkpoint.CheckpointError` naming the file when it is malformed. The file
    lists every partition of its log dir and is asked once per partition: it is parsed again only when it is
    another file (Kafka replaces it by a rename) or its size or times changed."""
    path = os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
    if store is not None:  # an object store's copy does not change under a run: parsed once
        if path not in _STORED_LOG_STARTS:
            try:
                data = read_file(path, store)
            except FileNotFoundError:
                data = b""
            _STORED_LOG_STARTS[path] = parse_offset_checkpoint(_checkpoint_text(data, path), path)
        return _STORED_LOG_STARTS[path].get((topic, partition), 0)
    try:
        cached = _LOG_STARTS.get(path)
        if cached is not None:  # one stat to see that it is still the file parsed
            st = os.stat(path)
            if cached[0] == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                return cached[1].get((topic, partition), 0)
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            text = _checkpoint_text(f.read(), path)
    except FileNotFoundError:
        return 0
    entries = parse_offset_checkpoint(text, path)
    _LOG_STARTS[path] = (identity, entries)
    return entries.get((topic, partition), 0)


def last_offset_before_batch(log_path: str, offset: int, store: Store | None = None) -> int | None:
    """The last offset of the batch just before the valid batch whose base offset is ``offset`` in the ``.log``
    (None: no such batch, or it is the segment's first). Reads the whole segment's headers: for the rare check that
    needs it (a leader epoch's start offset below its first batch). Through a ``store``, the object is read whole."""
    if store is not None:
        data = store.read_bytes(log_path)
        scan = scan_buffer(data, len(data), log_path)
    else:
        scan = scan_log(log_path)
    found = np.flatnonzero(scan.base_offsets[: scan.batch_count] == offset)
    return int(scan.last_offsets[found[0] - 1]) if found.size and found[0] > 0 else None


def index_file_sizes(
    partition_dir: str, base_offset: int, read: dict[str, ExistingIndex] | None = None
) -> dict[str, int | None]:
    """The size of each of a segment's index files (``INDEX_SUFFIXES``), None for one that cannot be stat'ed;
    those in ``read`` (as :func:`read_existing_indexes` read them, whole) not stat'ed again."""
    sizes: dict[str, int | None] = {}
    for suffix in INDEX_SUFFIXES:
        known = read.get(suffix) if read is not None else None
        if known is not None and known.error is None and not known.changed:
            sizes[suffix] = known.length if known.exists else None
            continue
        try:
            sizes[suffix] = os.stat(segment_file(partition_dir, base_offset, suffix)).st_size
        except OSError:
            sizes[suffix] = None
    return sizes


def already_holds(path: str, data: bytes) -> bool:
    """Whether ``path`` is a regular file (not a link) whose bytes are exactly ``data``; no for anything that cannot be
    read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        return os.pread(fd, len(data) + 1, 0) == data
    except OSError:
        return False
    finally:
        os.close(fd)


def file_exists(path: str) -> bool:
    """Whether anything is at ``path``, a dangling symlink included (what a rename over it replaces)."""
    return os.path.lexists(path)
