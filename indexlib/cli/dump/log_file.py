"""The dump of a ``.log``: every batch the walk accepted (:func:`indexlib.format.batch_walk.scan_buffer`, Kafka's
iteration rules) with every header field ``kafka-dump-log.sh`` prints, how the walk ended, and with
``--deep-iteration`` each batch's records (:mod:`.record_view`).

Invariants: the file is opened read-only and never modified; one row per accepted batch, in file order; with
``max_bytes`` only the first ``max_bytes`` bytes are read, as Kafka's dump slices the file, and a batch cut there
is not shown (and is no problem); problems met while records are decoded are appended to ``problems`` as the
rows are made (one per kind of trouble and codec), so a streamed dump lists them after its rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from ...format.batch_headers import gather_headers
from ...format.batch_walk import FramedBatches, frame_batches, open_log, scan_buffer
from ...format.compression import CodecUnavailableError
from ...format.control_records import marker_type_or_error
from ...format.layout import parse_kraft_snapshot_name
from ...format.record_decoding import increment_sequence
from ...format.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    COMPRESSION_NAMES,
    MARKER_ABORT,
    MARKER_COMMIT,
    LogScan,
    ScanProblem,
    StopReason,
)
from .model import DEFAULT_OPTIONS, DumpOptions, FileDump, RowMaker, problem
from .record_view import record_rows

#: attribute bit 6: the batch's base timestamp is its delete horizon (a compacted topic's tombstones)
ATTR_DELETE_HORIZON = 0x40


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
    "base_sequences",
    "partition_leader_epochs",
    "base_timestamps",
    "crcs",
    "is_valid",
)
#: the columns a walk's :class:`LogScan` holds (the others: :func:`_header_columns`)
_SCAN_COLUMNS = _LOG_COLUMNS[:11]


def _big_endian(raw: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], dtype: str) -> npt.NDArray[np.int64]:
    """The big-endian ``dtype`` integer at each byte position ``at`` of ``raw``, widened to int64."""
    size = np.dtype(dtype).itemsize
    picked = raw[at[:, None] + np.arange(size)] if len(at) else np.zeros((0, size), np.uint8)
    return np.ascontiguousarray(picked).view(dtype).ravel().astype(np.int64)


def _header_columns(buf: Any, scan: LogScan) -> dict[str, npt.NDArray[np.int64]]:
    """The v2 header fields the walk does not keep (0 for a legacy entry, whose row shows none), and every
    batch's stored CRC (a legacy entry's at byte 12)."""
    raw = np.frombuffer(buf, dtype=np.uint8, count=scan.file_size) if scan.batch_count else np.zeros(0, np.uint8)
    pos, v2 = scan.positions, scan.magic >= 2
    columns = {name: np.zeros(len(pos), np.int64) for name in _LOG_COLUMNS[11:15]}
    for name, at, dtype in (
        ("base_sequences", 53, ">i4"),
        ("partition_leader_epochs", 12, ">i4"),
        ("base_timestamps", 27, ">i8"),
        ("crcs", 17, ">u4"),
    ):
        columns[name][v2] = _big_endian(raw, pos[v2] + at, dtype)
    columns["crcs"][~v2] = _big_endian(raw, pos[~v2] + 12, ">u4")
    return columns


def _batch_row(values: tuple[Any, ...]) -> dict[str, Any]:
    (
        pos,
        base,
        last,
        count,
        size,
        magic,
        attrs,
        max_ts,
        pid,
        epoch,
        marker,
        base_seq,
        leader_epoch,
        base_ts,
        crc,
        valid,
    ) = values
    v2 = magic >= 2
    codec = attrs & ATTR_COMPRESSION_MASK
    row = {
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
        "base_sequence": base_seq if v2 else None,
        "last_sequence": (-1 if base_seq == -1 else increment_sequence(base_seq, last - base)) if v2 else None,
        "partition_leader_epoch": leader_epoch if v2 else None,
        "delete_horizon_ms": base_ts if v2 and attrs & ATTR_DELETE_HORIZON else None,
        "crc": crc,
        "is_valid": valid,  # Kafka's isValid: the batch's CRC matches (false only past where recovery stops)
    }
    return row


class _RecordRows:
    """Adds each batch's records to its row (``--deep-iteration``), reading the batch from the mapped file;
    a batch whose records cannot be read gets ``records: None`` and, once per reason, a problem."""

    def __init__(self, buf: Any, options: DumpOptions, problems: list[dict[str, Any]]) -> None:
        self.buf, self.options, self.problems = buf, options, problems
        self.reported: set[tuple[str, str]] = set()

    def __call__(self, chunk: list[list[Any]]) -> Iterator[dict[str, Any]]:
        for values in zip(*chunk, strict=True):
            row = _batch_row(values)
            if self.options.deep_iteration:
                pos, size = row["position"], row["size"]
                records, error = record_rows(bytes(self.buf[pos : pos + size]), row["is_control"], self.options)
                row["records"] = records
                if error is not None:
                    self._report(row, error)
            yield row

    def _report(self, row: dict[str, Any], error: Exception) -> None:
        missing = isinstance(error, CodecUnavailableError)
        trouble = "cannot_decompress" if missing else "invalid_record"
        reason = str(error) if missing else f"records of the batch at {row['position']} do not parse: {error}"
        row["records_error"] = reason
        if (trouble, row["compression"]) not in self.reported:
            self.reported.add((trouble, row["compression"]))
            detail = f"{reason}; their records are not shown" if missing else reason
            self.problems.append(problem(trouble, row["position"], detail))


def _end_of_walk(scan: LogScan, cut_by_max_bytes: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """How the walk ended, and the problems that makes; a batch cut by ``--max-bytes`` is none."""
    # the walk ended at --max-bytes with more of the file after it: a batch cut there, or none begun (0, or a batch
    # boundary): the file was not read to its end
    cut = cut_by_max_bytes and scan.stop in (StopReason.INCOMPLETE_BATCH, StopReason.SHORT_TAIL, StopReason.END)
    stop = "max_bytes" if cut else scan.stop.value
    found = None if cut else scan.problem
    end = {
        "stop": stop,
        "problem": _scan_problem(found),
        "fatal": _scan_problem(scan.fatal),
        "valid_bytes": scan.valid_bytes,
        "invalid_bytes": 0 if cut else scan.invalid_bytes,
    }
    problems = []
    if found is not None:
        problems.append(problem(found.kind, found.position, found.detail))
    elif scan.invalid_bytes and not cut:
        problems.append(
            problem(
                scan.stop.value,
                scan.valid_bytes,
                f"{scan.invalid_bytes} trailing bytes are too short for a batch header; Kafka's recovery "
                "truncates them",
            )
        )
    if scan.fatal is not None:
        problems.append(problem(scan.fatal.kind, scan.fatal.position, scan.fatal.detail))
    return end, problems


def _columns(buf: Any, scan: LogScan, past: FramedBatches) -> dict[str, npt.NDArray[Any]]:
    """Every row's columns: the batches the walk accepted, then those ``kafka-dump-log.sh`` walks past its stop
    (``past``: from a batch whose CRC fails, or after one recovery cannot read, on while sizes hold)."""
    columns = _scan_columns(buf, scan, np.ones(scan.batch_count, dtype=bool))
    if not len(past.positions):
        return columns
    magic = np.frombuffer(buf, dtype=np.int8, count=scan.file_size)[past.positions + 16]
    with memoryview(buf) as view:
        tail = gather_headers(view, scan.path, scan.file_size, past.positions, bool((magic < 2).any()), scan.stop, None)
        markers = (tail.magic >= 2) & ((tail.attributes & ATTR_CONTROL) != 0) & (tail.producer_ids > -1)
        for i in np.flatnonzero(markers & (tail.records_counts != 0)).tolist():
            pos, size = int(tail.positions[i]), int(tail.sizes[i])
            control_type = marker_type_or_error(view[pos : pos + size], int(tail.records_counts[i]))
            if isinstance(control_type, int):
                tail.marker_types[i] = control_type
    more = _scan_columns(buf, tail, past.valid)
    return {name: np.concatenate([columns[name], more[name]]) for name in _LOG_COLUMNS}


def _scan_columns(buf: Any, scan: LogScan, valid: npt.NDArray[np.bool_]) -> dict[str, npt.NDArray[Any]]:
    return {name: getattr(scan, name) for name in _SCAN_COLUMNS} | _header_columns(buf, scan) | {"is_valid": valid}


def dump_log(
    path: str, base_offset: int | None, options: DumpOptions = DEFAULT_OPTIONS, kraft_snapshot: bool = False
) -> FileDump:
    """The dump of one ``.log`` (see the module docstring), or of a KRaft snapshot (``kraft_snapshot``: the same
    record batches; ``base_offset`` its end offset, ``None`` for the bootstrap snapshot)."""
    size, mm = open_log(path, options.max_bytes)  # only what is read is mapped: --max-bytes bounds the memory
    try:
        end = size if options.max_bytes is None else min(size, options.max_bytes)
        buf = mm if mm is not None else b""
        scan = scan_buffer(buf, end, path)
        past = frame_batches(buf, scan.valid_bytes, end)
        columns = _columns(buf, scan, past)
    finally:
        if mm is not None:
            mm.close()
    end_of_walk, problems = _end_of_walk(scan, end < size)
    if len(past.positions):
        end_of_walk["walked_past"] = {
            "batches": len(past.positions),
            "invalid_batches": int((~past.valid).sum()),
            "stop": past.stop.value,
            "end": past.end,
        }
    summary: dict[str, Any] = {
        "file": path,
        "kind": "log",
        "base_offset": base_offset,
        "file_size": size,
        "batch_count": scan.batch_count + len(past.positions),
        "end": end_of_walk,
        "problems": problems,
    }
    if kraft_snapshot:
        named = parse_kraft_snapshot_name(os.path.basename(path))
        summary["kraft_snapshot"] = {"end_offset": base_offset, "epoch": named[1] if named else None}
    if options.max_bytes is not None:
        summary["max_bytes"] = options.max_bytes

    @contextmanager
    def record_source() -> Iterator[RowMaker]:
        if not options.deep_iteration or not summary["batch_count"]:
            yield _plain_rows
            return
        _, mapping = open_log(path, options.max_bytes)
        try:
            yield _RecordRows(mapping if mapping is not None else b"", options, problems)
        finally:
            if mapping is not None:
                mapping.close()

    return FileDump(summary, "batches", columns, _plain_rows, record_source)


def _plain_rows(chunk: list[list[Any]]) -> Iterator[dict[str, Any]]:
    for values in zip(*chunk, strict=True):
        yield _batch_row(values)
