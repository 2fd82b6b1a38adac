"""Dumps of the three index files: ``.index`` and ``.timeindex`` (mapped read-only, absolute offsets, the
all-zero tail counted, not listed) and ``.txnindex`` (every record, a bad version shown and listed as a problem).

Invariants: every file is opened read-only; rows carry absolute offsets.
"""

from __future__ import annotations

import os

import numpy as np

from ...format.errors import CorruptIndexError
from ...format.offset_index import OffsetIndex
from ...format.time_index import TimeIndex
from ...format.transaction_index import ABORTED_TXN_VERSION, TransactionIndex
from .model import FileDump, problem


def dump_mmap_index(path: str, base_offset: int, cls: type[OffsetIndex] | type[TimeIndex], kind: str) -> FileDump:
    with cls(path, base_offset, writable=False) as index:
        raw = index.to_numpy()
        length = index.length
        changed = index.changed_while_read
        entry_size = cls.ENTRY_SIZE
        slots = len(raw)
        if kind == "offset_index":
            first = base_offset + raw["relative_offset"].astype(np.int64)
            second = raw["position"].astype(np.int64)
            zero = (raw["relative_offset"] == 0) & (raw["position"] == 0)
        else:
            first = raw["timestamp"].astype(np.int64)
            second = base_offset + raw["relative_offset"].astype(np.int64)
            zero = (raw["timestamp"] == 0) & (raw["relative_offset"] == 0)
        del raw  # release the view of the mapping before the index closes
    # Kafka's dump stops at the first all-zero slot after slot 0; we count the all-zero run at the end.
    nonzero = np.flatnonzero(~zero[1:]) if slots > 1 else np.empty(0, np.int64)
    shown = min(slots, int(nonzero[-1]) + 2 if len(nonzero) else 1)
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
        columns = {"offset": first[:shown], "position": second[:shown]}
        row = lambda c: ({"offset": o, "position": p} for o, p in zip(*c, strict=True))  # noqa: E731
    else:
        columns = {"timestamp": first[:shown], "offset": second[:shown]}
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
