"""Readable and JSON-able dumps of Kafka segment files: ``.index``, ``.timeindex``, ``.txnindex`` and a
``.log``'s batch headers (what Kafka's ``kafka-dump-log.sh`` prints, as data).

* :func:`read_dump` opens one file and returns a :class:`FileDump`: a small summary plus the rows in
  numpy columns, so a huge file is read once and its rows are produced one at a time.
* :func:`dump_file` is ``read_dump(path).to_dict()``: a plain dict that ``json.dumps`` accepts.
* :func:`format_dump` yields readable lines (kafka-dump-log style) from either form; :func:`iter_json`
  yields the JSON text in chunks. Neither builds the whole output in memory.

The kind of file comes from its name, which must be ``<20-digit base offset>.<suffix>``. Every file is
opened read-only (``O_RDONLY | O_NONBLOCK``, through the index classes and :func:`batch_walk.scan_log`),
so a dump needs no write permission, never changes a file and never hangs on a FIFO. Bad input raises
``ValueError`` or ``OSError`` naming the file.

Index rows carry ABSOLUTE offsets. As in Kafka's dump, an index's trailing all-zero slots after the
first (an untrimmed, preallocated tail) are counted, not listed. Anything a reader of the file should
know about (a partial trailing entry, a bad ``.txnindex`` version, a ``.log`` that does not end cleanly)
is listed in ``problems``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from ..format.batch_walk import scan_log
from ..format.errors import CorruptIndexError, FileNameError, NotARegularFileError
from ..format.layout import parse_segment_name
from ..format.offset_index import OffsetIndex
from ..format.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    COMPRESSION_NAMES,
    MARKER_ABORT,
    MARKER_COMMIT,
    ScanProblem,
)
from ..format.time_index import TimeIndex
from ..format.transaction_index import ABORTED_TXN_VERSION, TransactionIndex

__all__ = [
    "FileDump",
    "KINDS",
    "dump_file",
    "format_dump",
    "iter_json",
    "parse_segment_file_name",
    "read_dump",
    "write_dump",
]

#: File suffix -> dump kind.
KINDS = {".index": "offset_index", ".timeindex": "time_index", ".txnindex": "transaction_index", ".log": "log"}

_ROW_CHUNK = 65536


def parse_segment_file_name(path: str | os.PathLike[str]) -> tuple[int, str]:
    """``(base_offset, suffix)`` of ``<20 digits>.<index|timeindex|txnindex|log>``; :class:`FileNameError` naming the file."""
    parsed = parse_segment_name(os.path.basename(os.fspath(path)))
    if parsed is None or parsed[1] not in KINDS:
        raise FileNameError(
            f"{os.fspath(path)}: not a Kafka segment file name (expected <20-digit base offset> followed by "
            f"one of {', '.join(KINDS)}, e.g. 00000000000000000000.index)"
        )
    return parsed


@dataclass
class FileDump:
    """One dumped file: ``summary`` (JSON-able, without the rows) and the rows in numpy columns.

    ``rows_key`` is ``"entries"`` for an index and ``"batches"`` for a ``.log``; :meth:`rows` yields one
    dict per row, in file order, built lazily from ``columns``.
    """

    summary: dict[str, Any]
    rows_key: str
    columns: dict[str, np.ndarray] = field(repr=False)
    _row: Any = field(repr=False, default=None)  # columns chunk (lists) -> iterator of row dicts

    @property
    def kind(self) -> str:
        kind: str = self.summary["kind"]
        return kind

    @property
    def row_count(self) -> int:
        count: int = self.summary["batch_count" if self.rows_key == "batches" else "entry_count"]
        return count

    @property
    def problems(self) -> list[dict[str, Any]]:
        problems: list[dict[str, Any]] = self.summary["problems"]
        return problems

    def rows(self) -> Iterator[dict[str, Any]]:
        names = list(self.columns)
        n = len(next(iter(self.columns.values()))) if names else 0
        for start in range(0, n, _ROW_CHUNK):
            chunk = [self.columns[k][start : start + _ROW_CHUNK].tolist() for k in names]
            yield from self._row(chunk)

    def to_dict(self) -> dict[str, Any]:
        """Summary and rows as one JSON-able dict (rows under ``rows_key``, before ``problems``)."""
        out = {k: v for k, v in self.summary.items() if k != "problems"}
        out[self.rows_key] = list(self.rows())
        out["problems"] = self.summary["problems"]
        return out


def _problem(kind: str, position: int | None, detail: str) -> dict[str, Any]:
    return {"kind": kind, "position": position, "detail": detail}


def _scan_problem(p: ScanProblem | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "kind": p.kind,
        "position": p.position,
        "batch_index": p.batch_index,
        "base_offset": p.base_offset,
        "detail": p.detail,
    }


def _check_regular(path: str) -> os.stat_result:
    st = os.stat(path)  # FileNotFoundError / PermissionError name the file
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "is a directory, not a segment file", path)
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFileError(f"{path}: not a regular file")
    return st


def read_dump(path: str | os.PathLike[str]) -> FileDump:
    """Open one segment file read-only and read everything a dump shows (see the module docstring)."""
    path = os.fspath(path)
    base_offset, suffix = parse_segment_file_name(path)
    _check_regular(path)
    kind = KINDS[suffix]
    if kind == "log":
        return _dump_log(path, base_offset)
    if kind == "transaction_index":
        return _dump_txn_index(path, base_offset)
    return _dump_mmap_index(path, base_offset, OffsetIndex if kind == "offset_index" else TimeIndex, kind)


def dump_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The dump of one segment file as a JSON-able dict (``read_dump(path).to_dict()``)."""
    return read_dump(path).to_dict()


# ------------------------------------------------------------------------------------------ indexes
def _dump_mmap_index(path: str, base_offset: int, cls: type[OffsetIndex] | type[TimeIndex], kind: str) -> FileDump:
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
            _problem(
                "partial_entry",
                length - partial,
                f"{partial} trailing bytes do not make a whole {entry_size}-byte entry (length {length} is not a "
                f"multiple of {entry_size}); readers ignore them",
            )
        )
    if changed:
        problems.append(
            _problem(
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


def _dump_txn_index(path: str, base_offset: int) -> FileDump:
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
                _problem(
                    "bad_version",
                    n * size,
                    f"record {n} has version {int(records['version'][n])}; only version {ABORTED_TXN_VERSION} exists "
                    "(Kafka's reader throws on it)",
                )
            )
        if len(bad) > 10:
            problems.append(_problem("bad_version", None, f"{len(bad) - 10} more records with a bad version"))
    partial = length % size
    if partial:
        problems.append(
            _problem(
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


# ---------------------------------------------------------------------------------------------- log
def _marker_name(t: int) -> str | None:
    if t == MARKER_ABORT:
        return "ABORT"
    if t == MARKER_COMMIT:
        return "COMMIT"
    return None if t < 0 else f"CONTROL_TYPE_{t}"


def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & ATTR_LOG_APPEND_TIME else "CreateTime"


_LOG_COLUMNS = (
    "positions",
    "base_offsets",
    "last_offsets",
    "records_counts",
    "sizes",
    "magic",
    "attributes",
    "max_timestamps",
    "producer_ids",
    "producer_epochs",
    "marker_types",
)


def _log_rows(chunk: list[list[Any]]) -> Iterator[dict[str, Any]]:
    for pos, base, last, count, size, magic, attrs, max_ts, pid, epoch, marker in zip(*chunk, strict=True):
        v2 = magic >= 2
        codec = attrs & ATTR_COMPRESSION_MASK
        yield {
            "position": pos,
            "base_offset": base,
            "last_offset": last,
            "count": count if v2 else None,
            "size": size,
            "magic": magic,
            "compression": COMPRESSION_NAMES.get(codec, f"unknown({codec})"),
            "timestamp_type": _timestamp_type(magic, attrs),
            "max_timestamp": max_ts,
            "producer_id": pid,
            "producer_epoch": epoch,
            "is_transactional": bool(v2 and attrs & ATTR_TRANSACTIONAL),
            "is_control": bool(v2 and attrs & ATTR_CONTROL),
            "marker": _marker_name(marker),
        }


def _dump_log(path: str, base_offset: int) -> FileDump:
    scan = scan_log(path)
    end = {
        "stop": scan.stop.value,
        "problem": _scan_problem(scan.problem),
        "fatal": _scan_problem(scan.fatal),
        "valid_bytes": scan.valid_bytes,
        "invalid_bytes": scan.invalid_bytes,
    }
    problems = []
    if scan.problem is not None:
        problems.append(_problem(scan.problem.kind, scan.problem.position, scan.problem.detail))
    elif scan.invalid_bytes:
        problems.append(
            _problem(
                scan.stop.value,
                scan.valid_bytes,
                f"{scan.invalid_bytes} trailing bytes are too short for a batch header; Kafka's recovery "
                "truncates them",
            )
        )
    if scan.fatal is not None:
        problems.append(_problem(scan.fatal.kind, scan.fatal.position, scan.fatal.detail))
    summary = {
        "file": path,
        "kind": "log",
        "base_offset": base_offset,
        "file_size": scan.file_size,
        "batch_count": scan.batch_count,
        "end": end,
        "problems": problems,
    }
    columns = {name: getattr(scan, name) for name in _LOG_COLUMNS}
    return FileDump(summary, "batches", columns, _log_rows)


# ------------------------------------------------------------------------------------------ output
def _parts(
    dump: FileDump | Mapping[str, Any],
) -> tuple[Mapping[str, Any], Iterator[dict[str, Any]] | list[dict[str, Any]]]:
    if isinstance(dump, FileDump):
        return dump.summary, dump.rows()
    rows_key = "batches" if dump["kind"] == "log" else "entries"
    return dump, dump[rows_key]


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _format_batch(b: Mapping[str, Any]) -> str:
    count = "" if b["count"] is None else f" count: {b['count']}"
    line = (
        f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']}{count} "
        f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
        f"isTransactional: {_bool(b['is_transactional'])} isControl: {_bool(b['is_control'])} "
        f"position: {b['position']} {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} "
        f"magic: {b['magic']} compresscodec: {b['compression']}"
    )
    if b["marker"] is not None:
        line += f" endTxnMarker: {b['marker']}"
    return line


def _format_scan_problem(p: Mapping[str, Any]) -> str:
    return (
        f"{p['kind']} at position {p['position']} (batch {p['batch_index']}, base offset "
        f"{p['base_offset']}): {p['detail']}"
    )


def format_dump(dump: FileDump | Mapping[str, Any]) -> Iterator[str]:
    """Readable lines (no newlines) in the spirit of ``kafka-dump-log.sh``; streams a :class:`FileDump`."""
    summary, rows = _parts(dump)
    kind = summary["kind"]
    yield f"Dumping {summary['file']}"
    if kind == "log":
        yield f"Log starting offset: {summary['base_offset']}"
        for batch in rows:
            yield _format_batch(batch)
        end = summary["end"]
        yield (
            f"End of walk: {end['stop']}; {_plural(summary['batch_count'], 'batch', 'batches')}, valid bytes "
            f"{end['valid_bytes']}, invalid bytes {end['invalid_bytes']}"
            + (" (Kafka's recovery truncates them)" if end["invalid_bytes"] else "")
        )
        if end["problem"] is not None:
            yield "Problem: " + _format_scan_problem(end["problem"])
        if end["fatal"] is not None:
            yield "Fatal (Kafka's recovery would fail here): " + _format_scan_problem(end["fatal"])
        return
    title = {"offset_index": "Offset index", "time_index": "Time index", "transaction_index": "Transaction index"}[kind]
    yield (
        f"{title}, base offset {summary['base_offset']}, {summary['file_size']} bytes, "
        f"{_plural(summary['entry_count'], 'entry', 'entries')}"
    )
    if summary["file_size"] == 0:
        yield f"{summary['file']} is empty."
    for e in rows:
        if kind == "offset_index":
            yield f"offset: {e['offset']} position: {e['position']}"
        elif kind == "time_index":
            yield f"timestamp: {e['timestamp']} offset: {e['offset']}"
        else:
            yield (
                f"version: {e['version']} producerId: {e['producer_id']} firstOffset: {e['first_offset']} "
                f"lastOffset: {e['last_offset']} lastStableOffset: {e['last_stable_offset']}"
            )
    if summary["zero_tail_entries"]:
        yield (f"{summary['zero_tail_entries']} zero-filled slots follow (an untrimmed preallocated tail; not shown)")
    for p in summary["problems"]:
        where = "" if p["position"] is None else f" at byte {p['position']}"
        yield f"Problem: {p['kind']}{where}: {p['detail']}"


def iter_json(dump: FileDump | Mapping[str, Any], indent: int | None = None) -> Iterator[str]:
    """The JSON text of ``dump`` in chunks (one row per line), equal in value to ``json.dumps(dump_file(...))``."""
    if not isinstance(dump, FileDump):
        yield json.dumps(dump, indent=indent)
        return
    head = {k: v for k, v in dump.summary.items() if k != "problems"}
    yield json.dumps(head)[:-1] + f', "{dump.rows_key}": ['
    first = True
    for row in dump.rows():
        yield ("\n" if first else ",\n") + json.dumps(row)
        first = False
    yield "\n], " + json.dumps("problems") + ": " + json.dumps(dump.summary["problems"]) + "}"


def write_dump(path: str | os.PathLike[str], as_json: bool, out: TextIO) -> int:
    """Dump one file to ``out`` as text or JSON, streamed; exit code 1 when the file has problems."""
    dump = read_dump(path)
    if as_json:
        _write_chunks(out, iter_json(dump), "")
        out.write("\n")
    else:
        _write_chunks(out, format_dump(dump), "\n")
    out.flush()
    return 1 if dump.problems else 0


def _write_chunks(out: TextIO, chunks: Iterable[str], sep: str, batch: int = 4096) -> None:
    """Write ``chunks`` (each followed by ``sep``) in batches: one write per ``batch`` chunks."""
    pending: list[str] = []
    for chunk in chunks:
        pending.append(chunk)
        if len(pending) >= batch:
            out.write(sep.join(pending) + sep)
            pending.clear()
    if pending:
        out.write(sep.join(pending) + sep)
