"""Producer-state replay for the ``.txnindex`` rebuild: ongoing transactions carried across segments.

Only ``{producer_id -> first offset of its open transaction}`` can change index bytes (epochs,
sequences and coordinator epochs only produce warnings on recovery's path). The replay is sequential per
partition but cheap: it consumes the compact event arrays that :func:`indexlib.recovery.entry_plan.plan_segment`
produced for each segment (in parallel).

Starting state per segment, with ``L`` the partition's log start offset (kafka-index-format.md 2.5):
segments with ``base <= L`` start empty; the first segment with ``base > L`` starts from the newest valid
``.snapshot`` with ``L < offset <= base`` (or empty); later segments carry on.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..format.layout import LOG_START_OFFSET_CHECKPOINT, SNAPSHOT_SUFFIX, parse_segment_name, segment_file
from ..format.records import ScanProblem, crc32c_function
from ..format.values import AbortedTxn
from .log_scan import EVENT_ABORT, EVENT_COMMIT, EVENT_DATA, EVENT_TXN_DATA

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, delta, ts, coord epoch, txn first
assert _SNAPSHOT_ENTRY.size == 46


class SnapshotError(ValueError):
    """A ``.snapshot`` file that Kafka would reject (and skip)."""


def read_snapshot(path: str | os.PathLike[str]) -> dict[int, int]:
    """Open transactions recorded in a producer-state snapshot: ``{producer_id: first_offset}``.

    Raises :class:`SnapshotError` (naming the file) when the version, length or CRC-32C is wrong.
    """
    path = os.fspath(path)
    data = Path(path).read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise SnapshotError(f"{path}: {len(data)} bytes is too short for a producer snapshot")
    version, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"{path}: snapshot version {version}, expected {SNAPSHOT_VERSION}")
    if crc32c_function()(memoryview(data)[6:]) != stored_crc:
        raise SnapshotError(f"{path}: snapshot CRC-32C mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise SnapshotError(f"{path}: {count} entries do not match the file length {len(data)}")
    ongoing: dict[int, int] = {}
    for pid, _e, _s, _lo, _d, _t, _c, txn_first in _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEADER.size :]):
        if txn_first >= 0:
            ongoing[pid] = txn_first
    return ongoing


def snapshot_offsets(partition_dir: str | os.PathLike[str]) -> list[int]:
    """Offsets of the ``<offset>.snapshot`` files in a partition directory, ascending."""
    parsed = (parse_segment_name(name) for name in os.listdir(partition_dir))
    return sorted(p[0] for p in parsed if p is not None and p[1] == SNAPSHOT_SUFFIX)


def initial_state_for(
    partition_dir: str | os.PathLike[str], base_offset: int, log_start_offset: int
) -> tuple[dict[int, int], int | None]:
    """State of the first segment with ``base > L``: the newest valid snapshot with
    ``L < offset <= base``, skipping invalid ones as Kafka does. Returns (state, snapshot offset used)."""
    for offset in reversed(snapshot_offsets(partition_dir)):
        if log_start_offset < offset <= base_offset:
            try:
                return read_snapshot(segment_file(os.fspath(partition_dir), offset, SNAPSHOT_SUFFIX)), offset
            except (SnapshotError, OSError):
                continue
    return {}, None


def read_log_start_offset(log_dir: str | os.PathLike[str], topic: str, partition: int) -> int:
    """The partition's log start offset from ``<log_dir>/log-start-offset-checkpoint`` (0 when absent).

    Raises ``ValueError`` naming the file when it is malformed."""
    path = os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return 0
    try:
        version, count = int(lines[0]), int(lines[1])
        if version != 0:
            raise ValueError(f"version {version}")
        for line in lines[2 : 2 + count]:
            t, p, o = line.rsplit(" ", 2)
            if t == topic and int(p) == partition:
                return int(o)
    except (IndexError, ValueError) as exc:
        raise ValueError(f"{path}: malformed checkpoint file ({exc})") from None
    return 0


@dataclass
class ReplayResult:
    """Per segment: the aborted transactions of its ``.txnindex``, and a fatal replay error if any."""

    aborted: list[AbortedTxn]
    fatal: ScanProblem | None = None


def replay_segment(ongoing: dict[int, int], events: npt.NDArray[np.void]) -> ReplayResult:
    """Apply one segment's events to ``ongoing`` (in place), returning its aborted transactions.

    LSO written with an abort = first offset of the earliest other producer's open transaction, else
    marker offset + 1. A non-transactional batch from a producer with an open transaction is Kafka's
    ``InvalidTxnStateException``: reported as fatal, the replay of the segment stops there.
    """
    aborted: list[AbortedTxn] = []
    for batch, kind, pid, offset, position in events.tolist():
        if kind == EVENT_TXN_DATA:
            if pid not in ongoing:
                ongoing[pid] = offset
        elif kind == EVENT_DATA:
            if pid in ongoing:
                return ReplayResult(
                    aborted,
                    ScanProblem(
                        "non_transactional_in_open_transaction",
                        position,
                        batch,
                        f"non-transactional batch of producer {pid} at offset {offset} while its transaction "
                        f"from offset {ongoing[pid]} is open (Kafka: InvalidTxnStateException)",
                        offset,
                    ),
                )
        elif kind in (EVENT_ABORT, EVENT_COMMIT):
            first = ongoing.get(pid)
            if first is None:
                continue  # a marker without an open transaction completes nothing
            if kind == EVENT_ABORT:
                others = [f for p, f in ongoing.items() if p != pid]
                lso = min(others) if others else offset + 1
                aborted.append(AbortedTxn(pid, first, offset, lso))
            del ongoing[pid]
    return ReplayResult(aborted)


def relevant_events(events: npt.NDArray[np.void], transactional_pids: npt.NDArray[np.int64]) -> npt.NDArray[np.void]:
    """Drop non-transactional events of producers that never open a transaction (they cannot matter)."""
    keep: npt.NDArray[np.bool_] = (events["kind"] != EVENT_DATA) | np.isin(events["producer_id"], transactional_pids)
    return events[keep]
