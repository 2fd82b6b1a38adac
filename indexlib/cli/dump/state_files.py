"""Dumps of the files Kafka keeps beside the segments: a producer-state snapshot (``<offset>.snapshot``, what
``kafka-dump-log.sh`` prints of one), a partition's ``leader-epoch-checkpoint`` and a log dir's offset checkpoints
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
``cleaner-offset-checkpoint``), which ``kafka-dump-log.sh`` does not read.

Each file is read by the project's one parser of it (:mod:`indexlib.format.producer_snapshot`,
:mod:`indexlib.format.leader_epoch_checkpoint`, :mod:`indexlib.format.checkpoint`); a file Kafka refuses to read
raises its ``ValueError`` naming the file (the dump's exit 2), as Kafka's own dump prints only the reason. Rows are
the parser's entries, field for field (``dataclasses.asdict``).

Invariants: every file is opened read-only and non-blocking (a FIFO never hangs a dump); nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

import numpy as np

from ...format.checkpoint import CHECKPOINT_VERSION, CheckpointError, parse_offset_checkpoint
from ...format.leader_epoch_checkpoint import EpochEntry, parse_leader_epoch_checkpoint, validate_leader_epochs
from ...format.producer_snapshot import (
    SNAPSHOT_VERSION,
    ProducerSnapshotEntry,
    SnapshotError,
    parse_snapshot_entries,
    snapshot_trailing_bytes,
)
from .model import FileDump, problem

#: the producer snapshot's fields, in file order (``ProducerSnapshotEntry``)
SNAPSHOT_FIELDS = tuple(f.name for f in fields(ProducerSnapshotEntry))
EPOCH_FIELDS = tuple(f.name for f in fields(EpochEntry))
OFFSET_CHECKPOINT_FIELDS = ("topic", "partition", "offset")


def read_whole(path: str, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most its first ``limit``), opened read-only and non-blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        chunks, size = [], 0
        while (limit is None or size < limit) and (
            chunk := os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit - size))
        ):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str) -> str:
    """The text of a checkpoint file (UTF-8, as Kafka reads it); a ``ValueError`` naming the file if it is not."""
    data = read_whole(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not UTF-8 text (byte {exc.start}): Kafka cannot read it") from None


def _row_maker(names: Sequence[str]) -> Callable[[list[list[Any]]], Iterator[dict[str, Any]]]:
    return lambda chunk: (dict(zip(names, values, strict=True)) for values in zip(*chunk, strict=True))


def _columns(names: Sequence[str], rows: Sequence[Sequence[Any]], strings: Sequence[str] = ()) -> dict[str, np.ndarray]:
    return {
        name: np.array([row[k] for row in rows], dtype=object if name in strings else np.int64)
        for k, name in enumerate(names)
    }


def dump_snapshot(path: str, offset: int) -> FileDump:
    """A ``.snapshot``: one row per producer (:class:`ProducerSnapshotEntry`'s fields). Raises
    :class:`SnapshotError` naming the file when Kafka would refuse it (version, length, count, CRC-32C); a version
    it refuses is read from the first two bytes alone, however big the file."""
    head = read_whole(path, 2)
    try:
        if len(head) == 2 and int.from_bytes(head, "big", signed=True) != SNAPSHOT_VERSION:
            parse_snapshot_entries(head, path)  # refuses the version, as for the whole file
        data = read_whole(path)
        entries = parse_snapshot_entries(data, path)
    except SnapshotError as exc:
        raise SnapshotError(f"{exc} (Kafka refuses this snapshot and deletes it at its next start)") from None
    problems = []
    trailing = snapshot_trailing_bytes(data)
    if trailing:
        problems.append(
            problem(
                "trailing_bytes",
                len(data) - trailing,
                f"{trailing} bytes follow the last entry; Kafka ignores them (the CRC covers them) but never writes them",
            )
        )
    summary = {
        "file": path,
        "kind": "producer_snapshot",
        "offset": offset,
        "file_size": len(data),
        "version": SNAPSHOT_VERSION,
        "crc": int.from_bytes(data[2:6], "big"),
        "entry_count": len(entries),
        "problems": problems,
    }
    columns = _columns(SNAPSHOT_FIELDS, [tuple(asdict(e).values()) for e in entries])
    return FileDump(summary, "entries", columns, _row_maker(SNAPSHOT_FIELDS))


def dump_leader_epoch_checkpoint(path: str) -> FileDump:
    """A ``leader-epoch-checkpoint``: one row per line (:class:`EpochEntry`'s fields), in file order. Raises
    :class:`CheckpointError` naming the file when Kafka cannot read it; entries that are not strictly increasing
    (which Kafka never writes, and its cache drops as it loads them) are listed as problems."""
    text = read_text(path)
    entries = parse_leader_epoch_checkpoint(text, path)
    problems = [
        problem(p.kind, None, p.message if p.index is None else f"entry {p.index}: {p.message}")
        for p in validate_leader_epochs(entries)
    ]
    summary = {
        "file": path,
        "kind": "leader_epoch_checkpoint",
        "file_size": len(text.encode("utf-8")),
        "version": CHECKPOINT_VERSION,
        "entry_count": len(entries),
        "problems": problems,
    }
    columns = _columns(EPOCH_FIELDS, [(e.epoch, e.start_offset) for e in entries])
    return FileDump(summary, "entries", columns, _row_maker(EPOCH_FIELDS))


def dump_offset_checkpoint(path: str) -> FileDump:
    """A log dir's offset checkpoint: one row per partition (``topic``, ``partition``, ``offset``), in file order.
    Raises :class:`CheckpointError` naming the file when Kafka cannot read it."""
    text = read_text(path)
    offsets = parse_offset_checkpoint(text, path)
    summary = {
        "file": path,
        "kind": "offset_checkpoint",
        "name": os.path.basename(path),
        "file_size": len(text.encode("utf-8")),
        "version": CHECKPOINT_VERSION,
        "entry_count": len(offsets),
        "problems": [],
    }
    rows = [(topic, partition, offset) for (topic, partition), offset in offsets.items()]
    columns = _columns(OFFSET_CHECKPOINT_FIELDS, rows, strings=("topic",))
    return FileDump(summary, "entries", columns, _row_maker(OFFSET_CHECKPOINT_FIELDS))


def _int32(value: int) -> int:
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def first_sequence(last_sequence: int, offset_delta: int) -> int:
    """Kafka's ``BatchMetadata.firstSeq``: ``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``, in
    Java's ``int`` arithmetic (below 0 the sequence goes on from Integer.MAX_VALUE)."""
    if last_sequence < offset_delta:
        return _int32(_int32(2147483647 - _int32(offset_delta - last_sequence)) + 1)
    return _int32(last_sequence - offset_delta)


def format_snapshot_entry(e: Mapping[str, Any]) -> str:
    """One producer as ``kafka-dump-log.sh`` prints it (DumpLogSegments.dumpProducerIdSnapshot): its entry, then
    its batch metadata when it has one (a last offset of at least 0); without Kafka's trailing blank."""
    txn = e["current_txn_first_offset"]
    line = (
        f"producerId: {e['producer_id']} producerEpoch: {e['epoch']} coordinatorEpoch: {e['coordinator_epoch']} "
        f"currentTxnFirstOffset: {f'OptionalLong[{txn}]' if txn >= 0 else 'OptionalLong.empty'} "
        f"lastTimestamp: {e['timestamp']}"
    )
    if e["last_offset"] >= 0:
        line += (
            f" firstSequence: {first_sequence(e['last_sequence'], e['offset_delta'])} "
            f"lastSequence: {e['last_sequence']} lastOffset: {e['last_offset']} offsetDelta: {e['offset_delta']} "
            f"timestamp: {e['timestamp']}"
        )
    return line
