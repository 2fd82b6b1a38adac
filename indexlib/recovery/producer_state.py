"""Producer-state replay: ongoing transactions carried across segments for the ``.txnindex`` rebuild, the full
producer state a ``.snapshot`` holds, and the leader epochs Kafka's cache holds after recovery.

Only ``{producer_id -> first offset of its open transaction}`` can change index bytes (epochs,
sequences and coordinator epochs only produce warnings on recovery's path). The replay is sequential per
partition but cheap: it consumes the compact event arrays that :func:`indexlib.recovery.entry_plan.plan_segment`
produced for each segment (in parallel).

The snapshot's producer state (:func:`apply_segment`, :func:`replay_producers`, :func:`snapshot_entries`) composes
each segment's :data:`~indexlib.recovery.log_scan.PRODUCER_DTYPE` end states, in segment order, over a starting
state (a snapshot's entries, or none). It is ``ProducerStateManager``'s map as ``LogSegment.updateProducerState``
leaves it, one batch at a time with origin REPLICATION (no sequence check): per producer, its last batch's epoch
and timestamp; the BatchMetadata (last sequence, last offset, offset delta) of its last data batch, cleared by any
epoch change after it; its last marker's coordinator epoch; and its open transaction. A producer whose batches in a
later segment are markers only keeps its earlier BatchMetadata (same epoch) or loses it (new epoch), and keeps
nothing else of the earlier state but its insertion order.

Starting state per segment, with ``L`` the partition's log start offset (kafka-index-format.md 2.5):
segments with ``base <= L`` start empty; the first segment with ``base > L`` starts from the newest valid
``.snapshot`` with ``L < offset <= base`` (or empty); later segments carry on. The snapshots are read by
:mod:`indexlib.storage.partition_files`; this module only computes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from ..format.leader_epoch_checkpoint import EpochEntry, load_leader_epochs, truncate_from_end, truncate_from_start
from ..format.producer_snapshot import ProducerSnapshotEntry, kafka_snapshot_order
from ..format.records import ScanProblem
from ..format.values import AbortedTxn
from .log_scan import EVENT_ABORT, EVENT_COMMIT, EVENT_DATA, EVENT_TXN_DATA, META_CLEARED, META_INHERIT, META_SET

#: Kafka's default ``producer.id.expiration.ms`` (one day)
PRODUCER_ID_EXPIRATION_MS = 86_400_000


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


# --------------------------------------------------------------------------------- the snapshot's producer state
def _empty_entry(producer_id: int) -> ProducerSnapshotEntry:
    """``ProducerStateEntry.empty``: no epoch, no BatchMetadata, coordinator epoch -1, no timestamp, no transaction."""
    return ProducerSnapshotEntry(producer_id, -1, -1, -1, 0, -1, -1, -1)


def apply_segment(
    state: Mapping[int, ProducerSnapshotEntry], producers: npt.NDArray[np.void]
) -> dict[int, ProducerSnapshotEntry]:
    """The producer state after a segment whose own end states are ``producers`` (a LogSummary's
    :data:`~indexlib.recovery.log_scan.PRODUCER_DTYPE` records), from ``state`` (not modified). Producers keep their
    order in ``state``; new ones follow in the order of their first batch (a ``HashMap``'s insertion order).

    Per producer the segment decides the epoch and timestamp; the BatchMetadata when it set or cleared it (an
    inherited one survives only if the earlier epoch equals the segment's first epoch: ``maybeUpdateProducerEpoch``
    clears it otherwise); the coordinator epoch when it has a marker; the open transaction when it has a marker or
    the producer had none open (a transactional batch does not move an open transaction's first offset)."""
    result = dict(state)
    for record in producers.tolist():
        pid, first_epoch, epoch, meta, has_marker, last_seq, last_offset, delta, timestamp, coordinator, txn = record
        before = result.get(pid) or _empty_entry(pid)
        if meta == META_SET:
            batch = (last_seq, last_offset, delta)
        elif meta == META_CLEARED or (meta == META_INHERIT and before.epoch != first_epoch):
            batch = (-1, -1, 0)
        else:
            batch = (before.last_sequence, before.last_offset, before.offset_delta)
        if not has_marker:
            coordinator = before.coordinator_epoch
            if before.has_open_transaction:
                txn = before.current_txn_first_offset
        result[pid] = ProducerSnapshotEntry(pid, epoch, *batch, timestamp, coordinator, txn)
    return result


def is_expired(entry: ProducerSnapshotEntry, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> bool:
    """``ProducerStateManager.isProducerExpired``: no open transaction, and idle (``now - timestamp``) for at
    least ``producer.id.expiration.ms``."""
    return not entry.has_open_transaction and now_ms - entry.timestamp >= expiration_ms


def state_from_snapshot(
    entries: Iterable[ProducerSnapshotEntry], now_ms: int | None = None, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS
) -> dict[int, ProducerSnapshotEntry]:
    """The state ``loadFromSnapshot`` makes of a snapshot's entries (file order is insertion order): with
    ``now_ms``, producers expired at that time dropped, as Kafka drops them on load. An entry whose last offset
    is negative has no BatchMetadata (Kafka reads it so): its sequence and delta read as -1 and 0 from then on; a
    negative transaction first offset is no open transaction (-1)."""
    state: dict[int, ProducerSnapshotEntry] = {}
    for entry in entries:
        if now_ms is not None and is_expired(entry, now_ms, expiration_ms):
            continue
        if entry.last_offset < 0:
            entry = replace(entry, last_sequence=-1, last_offset=-1, offset_delta=0)
        if entry.current_txn_first_offset < -1:  # any negative value is "none", written back as -1
            entry = replace(entry, current_txn_first_offset=-1)
        state[entry.producer_id] = entry
    return state


def replay_producers(
    segments: Iterable[npt.NDArray[np.void]], start: Mapping[int, ProducerSnapshotEntry] | None = None
) -> dict[int, ProducerSnapshotEntry]:
    """:func:`apply_segment` of each segment's end states in order, from ``start`` (default: no producer)."""
    state: dict[int, ProducerSnapshotEntry] = dict(start or {})
    for producers in segments:
        state = apply_segment(state, producers)
    return state


def snapshot_entries(
    state: Mapping[int, ProducerSnapshotEntry],
    now_ms: int | None = None,
    expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    capacity: int | None = None,
) -> list[ProducerSnapshotEntry]:
    """The entries ``writeSnapshot`` writes for this state, in Kafka's order (:func:`kafka_snapshot_order`, with
    its ``capacity``); with ``now_ms``, without the producers a broker that ran ``removeExpiredProducers`` at that
    time (or loaded the state then) would have dropped. Write them with ``format_snapshot``."""
    kept = [entry for entry in state.values() if now_ms is None or not is_expired(entry, now_ms, expiration_ms)]
    return kafka_snapshot_order(kept, capacity)


# ------------------------------------------------------------------------------------------ the leader epochs
def recovered_leader_epochs(
    cache: Sequence[EpochEntry],
    segments: Iterable[npt.NDArray[np.void]],
    log_end_offset: int | None = None,
    log_start_offset: int | None = None,
) -> list[EpochEntry]:
    """The entries Kafka's ``LeaderEpochFileCache`` holds after recovering segments, in order, whose epoch starts
    (a LogSummary's :data:`~indexlib.recovery.log_scan.EPOCH_DTYPE` records) are given, from ``cache`` (as
    :func:`~indexlib.format.leader_epoch_checkpoint.load_leader_epochs` returns a file's): each start whose epoch
    is above the cache's latest (or any, on an empty cache) is ``assign``ed (which drops newer conflicting
    entries); then, as ``LogLoader.load`` does, ``truncateFromEnd(log_end_offset)`` and
    ``truncateFromStart(log_start_offset)`` (the log-start checkpoint's value) when given. Raises
    ``CheckpointError`` for a negative start offset, as ``assign`` throws."""
    entries = list(cache)
    for starts in segments:
        for epoch, start_offset in starts.tolist():
            if not entries or epoch > entries[-1].epoch:
                entries = load_leader_epochs([*entries, EpochEntry(epoch, start_offset)])
    if log_end_offset is not None:
        entries = truncate_from_end(entries, log_end_offset)
    if log_start_offset is not None:
        entries = truncate_from_start(entries, log_start_offset)
    return entries
