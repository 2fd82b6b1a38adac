"""Dumps of the three index files: ``.index`` and ``.timeindex`` (mapped read-only, absolute offsets, the
all-zero tail counted, not listed) and ``.txnindex`` (every record, a bad version shown and listed as a problem).

Invariants: every file is opened read-only; rows carry absolute offsets.
"""

from __future__ import annotations

import os

import numpy as np

from ...format.errors import CorruptIndexError
from ...format.index_file import data_extents
from ...format.offset_index import OffsetIndex
from ...format.time_index import TimeIndex
from ...format.transaction_index import ABORTED_TXN_VERSION, TransactionIndex
from .model import FileDump, problem

#: bytes read at a time while looking for an index's last entry that is not all zeros
ZERO_TAIL_CHUNK = 8 << 20


def entries_before_zero_tail(path: str, entry_size: int, slots: int) -> int:
    """How many of the first ``slots`` entries come before the all-zero run at the end (slot 0 always counts):
    read backwards ``ZERO_TAIL_CHUNK`` bytes at a time (memory bounded by that, whatever the file's size; a
    preallocated index's zeros are read, not mapped)."""
    per_chunk = max(1, ZERO_TAIL_CHUNK // entry_size)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for first_slot, end in reversed(_data_slots(fd, entry_size, slots)):  # holes read as zeros: skipped
            while end > max(first_slot, 1):
                start = max(first_slot, 1, end - per_chunk)
                data = os.pread(fd, (end - start) * entry_size, start * entry_size)
                whole = len(data) // entry_size * entry_size
                entries = np.frombuffer(data, np.uint8)[:whole].reshape(-1, entry_size)
                nonzero = np.flatnonzero(entries.any(axis=1))
                if len(nonzero):
                    return start + int(nonzero[-1]) + 1
                end = start
        return min(slots, 1)
    finally:
        os.close(fd)


def _data_slots(fd: int, entry_size: int, slots: int) -> list[tuple[int, int]]:
    """The slot ranges ``[first, end)`` of the first ``slots`` that hold data (:func:`data_extents`)."""
    return [(a // entry_size, -(-b // entry_size)) for a, b in data_extents(fd, 0, slots * entry_size)]


def dump_mmap_index(path: str, base_offset: int, cls: type[OffsetIndex] | type[TimeIndex], kind: str) -> FileDump:
    """Memory bounded by the entries shown, whatever the file's size (Kafka's dump stops at the first all-zero slot
    after slot 0; we count the all-zero run at the end, read in chunks): only those entries are read, then the file
    is looked at again to tell whether a broker changed it meanwhile."""
    from .state_files import read_whole

    before = os.stat(path)
    length = before.st_size
    entry_size = cls.ENTRY_SIZE
    slots = length // entry_size
    shown = entries_before_zero_tail(path, entry_size, slots)
    data = read_whole(path, shown * entry_size)
    raw = np.frombuffer(data, cls.DTYPE, count=len(data) // entry_size)
    if kind == "offset_index":
        first = base_offset + raw["relative_offset"].astype(np.int64)
        second = raw["position"].astype(np.int64)
    else:
        first = raw["timestamp"].astype(np.int64)
        second = base_offset + raw["relative_offset"].astype(np.int64)
    after = os.stat(path)
    changed = len(raw) != shown or (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns)
    shown = len(raw)
    zero_tail = slots - shown
    partial = length % entry_size
    problems = []
    if partial:
        problems.append(
            problem(
                "partial_entry",
                length - partial,
                f"{partial} trailing bytes do not make a whole {entry_size}-byte entry (length {length} is not a "
                f"multiple of {entry_size}); readers ignore them",
            )
        )
    if changed:
        problems.append(
            problem(
                "changed_while_read",
                None,
                "the file changed while it was read (a running broker writing, trimming or growing it): the entries "
                "shown may mix two versions; dump it again",
            )
        )
    summary = {
        "file": path,
        "kind": kind,
        "base_offset": base_offset,
        "file_size": length,
        "entry_size": entry_size,
        "entry_count": shown,
        "zero_tail_entries": zero_tail,
        "partial_entry_bytes": partial,
        "problems": problems,
    }
    if kind == "offset_index":
        columns = {"offset": first, "position": second}
        row = lambda c: ({"offset": o, "position": p} for o, p in zip(*c, strict=True))  # noqa: E731
    else:
        columns = {"timestamp": first, "offset": second}
        row = lambda c: ({"timestamp": t, "offset": o} for t, o in zip(*c, strict=True))  # noqa: E731
    return FileDump(summary, "entries", columns, row)


def dump_txn_index(path: str, base_offset: int) -> FileDump:
    size = TransactionIndex.RECORD_SIZE
    problems = []
    with TransactionIndex(path, base_offset, writable=False) as index:
        if not index.exists:  # removed between the check and the open
            raise FileNotFoundError(2, "No such file or directory", path)
        length = index.length
        try:
            records = index.to_numpy()
        except CorruptIndexError:
            records = None
    if records is None:
        # A record with a version other than 0: show the records as they are and say where.
        whole = length - length % size
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            data = os.pread(fd, whole, 0)
        finally:
            os.close(fd)
        records = np.frombuffer(data[: len(data) - len(data) % size], dtype=TransactionIndex.DTYPE)
        bad = np.flatnonzero(records["version"] != ABORTED_TXN_VERSION)
        for n in bad[:10].tolist():
            problems.append(
                problem(
                    "bad_version",
                    n * size,
                    f"record {n} has version {int(records['version'][n])}; only version {ABORTED_TXN_VERSION} exists "
                    "(Kafka's reader throws on it)",
                )
            )
        if len(bad) > 10:
            problems.append(problem("bad_version", None, f"{len(bad) - 10} more records with a bad version"))
    partial = length % size
    if partial:
        problems.append(
            problem(
                "partial_entry",
                length - partial,
                f"{partial} trailing bytes do not make a whole {size}-byte record (length {length} is not a "
                f"multiple of {size}); readers ignore them",
            )
        )
    names = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")
    columns = {k: records[k].astype(np.int64) for k in names}
    summary = {
        "file": path,
        "kind": "transaction_index",
        "base_offset": base_offset,
        "file_size": length,
        "entry_size": size,
        "entry_count": len(records),
        "zero_tail_entries": 0,
        "partial_entry_bytes": partial,
        "problems": problems,
    }
    row = lambda c: (dict(zip(names, values, strict=True)) for values in zip(*c, strict=True))  # noqa: E731
    return FileDump(summary, "entries", columns, row)
