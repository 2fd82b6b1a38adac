"""A dump as text (kafka-dump-log style lines) or JSON, streamed: neither builds the whole output in memory.

Invariants: :func:`iter_json` equals ``json.dumps`` of the dump's dict in value; lines carry no newline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

from .model import FileDump
from .reading import read_dump


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
