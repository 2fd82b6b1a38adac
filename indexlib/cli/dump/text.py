"""A dump as text (kafka-dump-log style lines) or JSON, streamed: neither builds the whole output in memory.

Invariants: :func:`iter_json` equals ``json.dumps`` of the dump's dict in value; lines carry no newline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

from .model import DEFAULT_OPTIONS, DumpOptions, FileDump
from .reading import read_dump
from .record_view import format_record
from .state_files import format_snapshot_entry


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
    """A batch as ``kafka-dump-log.sh`` prints it (its fields in its order; a legacy entry without the v2-only
    ones)."""
    v2 = b["count"] is not None
    horizon = b.get("delete_horizon_ms")
    line = f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']}"
    if v2:
        line += f" count: {b['count']} baseSequence: {b.get('base_sequence')} lastSequence: {b.get('last_sequence')}"
    line += f" producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']}"
    if v2:
        line += f" partitionLeaderEpoch: {b.get('partition_leader_epoch')}"
    line += f" isTransactional: {_bool(b['is_transactional'])} isControl: {_bool(b['is_control'])}"
    if v2:
        line += " deleteHorizonMs: " + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]")
    line += (
        f" position: {b['position']} {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} "
        f"magic: {b['magic']} compresscodec: {b['compression']} crc: {b.get('crc')} "
        f"isvalid: {_bool(b.get('is_valid', True))}"
    )
    return line


def _format_batch_and_records(b: Mapping[str, Any]) -> Iterator[str]:
    yield _format_batch(b)
    if b.get("records") is not None:
        for r in b["records"]:
            yield format_record(r, b["timestamp_type"])
    elif "records_error" in b:
        yield f"| records not shown: {b['records_error']}"


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
        snapshot = summary.get("kraft_snapshot")
        if snapshot is None:
            yield f"Log starting offset: {summary['base_offset']}"
        elif snapshot["end_offset"] is None:
            yield "KRaft bootstrap snapshot"
        else:
            yield f"Snapshot end offset: {snapshot['end_offset']}, epoch: {snapshot['epoch']}"
        for batch in rows:
            yield from _format_batch_and_records(batch)
        end = summary["end"]
        past = end.get("walked_past")
        walked = summary["batch_count"] - (past["batches"] if past else 0)
        yield (
            f"End of walk: {end['stop']}; {_plural(walked, 'batch', 'batches')}, valid bytes "
            f"{end['valid_bytes']}, invalid bytes {end['invalid_bytes']}"
            + (" (Kafka's recovery truncates them)" if end["invalid_bytes"] and snapshot is None else "")
            + (f" (--max-bytes {summary['max_bytes']})" if end["stop"] == "max_bytes" else "")
            + (
                f"; {past['batches']} more shown past it, as kafka-dump-log.sh walks on ({past['invalid_batches']} "
                f"failing their CRC), to {past['stop']} at byte {past['end']}"
                if past
                else ""
            )
        )
        if end["problem"] is not None:
            yield "Problem: " + _format_scan_problem(end["problem"])
        if end["fatal"] is not None:
            yield "Fatal (Kafka's recovery would fail here): " + _format_scan_problem(end["fatal"])
        for p in summary["problems"]:
            if p["kind"] in ("cannot_decompress", "invalid_record"):
                yield f"Problem: {p['kind']} at byte {p['position']}: {p['detail']}"
        return
    if kind in _STATE_TITLES:
        yield from _format_state_file(summary, rows)
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


_STATE_TITLES = {
    "producer_snapshot": "Producer snapshot",
    "leader_epoch_checkpoint": "Leader epoch checkpoint",
    "offset_checkpoint": "Offset checkpoint",
}


def _format_state_file(summary: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """A snapshot's producers as ``kafka-dump-log.sh`` prints them, or a checkpoint's entries, after our title."""
    kind = summary["kind"]
    title = _STATE_TITLES[kind]
    if kind == "producer_snapshot":
        title += f" at offset {summary['offset']}"
    elif kind == "offset_checkpoint":
        title += f" {summary['name']}"
    one, many = ("producer", "producers") if kind == "producer_snapshot" else ("entry", "entries")
    yield f"{title}, {summary['file_size']} bytes, {_plural(summary['entry_count'], one, many)}"
    for e in rows:
        if kind == "producer_snapshot":
            yield format_snapshot_entry(e)
        elif kind == "leader_epoch_checkpoint":
            yield f"epoch: {e['epoch']} startOffset: {e['start_offset']}"
        else:
            yield f"topic: {e['topic']} partition: {e['partition']} offset: {e['offset']}"
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


def write_dump(
    path: str | os.PathLike[str],
    as_json: bool,
    out: TextIO,
    options: DumpOptions = DEFAULT_OPTIONS,
    shown: str | None = None,
) -> int:
    """Dump one file to ``out`` as text or JSON, streamed (naming it ``shown`` when given); exit code 1 when the
    file has problems."""
    dump = read_dump(path, options, shown)
    if as_json:
        _write_chunks(out, iter_json(dump), "")
        out.write("\n")
    else:
        _write_chunks(out, format_dump(dump), "\n")
    out.flush()
    return 1 if dump.problems else 0


def write_lines(out: TextIO, lines: Iterable[str]) -> None:
    """Write ``lines``, each followed by a newline."""
    _write_chunks(out, lines, "\n")


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
