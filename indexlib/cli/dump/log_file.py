"""The dump of a ``.log``: every batch header the walk accepted (:func:`indexlib.format.batch_walk.scan_log`),
and how the walk ended.

Invariants: the file is opened read-only and never modified; one row per accepted batch, in file order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...format.batch_walk import scan_log
from ...format.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    COMPRESSION_NAMES,
    MARKER_ABORT,
    MARKER_COMMIT,
    ScanProblem,
)
from .model import FileDump, problem


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


def dump_log(path: str, base_offset: int) -> FileDump:
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
        problems.append(problem(scan.problem.kind, scan.problem.position, scan.problem.detail))
    elif scan.invalid_bytes:
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
