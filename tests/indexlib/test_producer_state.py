"""The producer state a ``.snapshot`` holds and the leader epochs Kafka's cache holds, derived from the segments'
summaries (:mod:`indexlib.recovery.producer_state` over :class:`~indexlib.recovery.log_scan.LogSummary`'s
``producers`` and ``epoch_starts``):

- against a direct model of Kafka 4.1.0's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``
  (one batch at a time, origin REPLICATION, BatchMetadata deque and all) on generated partitions whose epochs,
  sequences and coordinator epochs vary, from an empty start and from a snapshot in the middle;
- THE KEY TEST: every ``.snapshot`` a real broker wrote in ``../shared/fixtures/kafka-real/`` equals, byte for byte,
  the replay of its partition's segments up to its offset, except producers Kafka expired
  (``producer.id.expiration.ms``) and one snapshot whose data the log cleaner removed (both explained below);
- every real ``leader-epoch-checkpoint`` is consistent with the epochs its segments derive.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from indexlib.format import batch_walk, control_records, scan_kernel
from indexlib.format.checkpoint import parse_offset_checkpoint
from indexlib.format.leader_epoch_checkpoint import EpochEntry, load_leader_epochs, parse_leader_epoch_checkpoint
from indexlib.format.producer_snapshot import (
    ProducerSnapshotEntry,
    format_snapshot,
    kafka_snapshot_order,
    parse_snapshot_entries,
)
from indexlib.recovery.log_scan import (
    EPOCH_DTYPE,
    META_CLEARED,
    META_INHERIT,
    META_SET,
    NO_PROBES,
    PRODUCER_DTYPE,
    LogSummary,
    from_kernel,
    summarize,
)
from indexlib.recovery.producer_state import (
    PRODUCER_ID_EXPIRATION_MS,
    apply_segment,
    is_expired,
    recovered_leader_epochs,
    replay_producers,
    snapshot_entries,
    state_from_snapshot,
)
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, requires_kafka_real, written_by_kafka

KERNEL = scan_kernel.compiled_kernel()


def summarize_prefix(path: Path, base: int, end: int, compiled: bool) -> LogSummary:
    """The summary of bytes [0, end) of a ``.log``: the kernel with the full marker parser, or the reference."""
    if compiled:
        assert KERNEL is not None
        fd = os.open(path, os.O_RDONLY)
        try:
            raw = KERNEL.scan_segment(
                fd, end, base, 4096, b"", b"", control_records.marker_fields_or_error, 1 << 20, True
            )
        finally:
            os.close(fd)
        return from_kernel(raw, str(path), end, base, 4096, NO_PROBES)
    if end == 0:
        return summarize(batch_walk.scan_buffer(b"", 0, str(path)), base, 4096)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
        return summarize(batch_walk.scan_buffer(mm, end, str(path)), base, 4096)


def summaries(path: Path, base: int, end: int | None = None) -> LogSummary:
    """The kernel's summary (when built), checked against the reference's epoch starts and producers."""
    end = os.path.getsize(path) if end is None else end
    reference = summarize_prefix(path, base, end, compiled=False)
    if KERNEL is None:
        return reference
    compiled = summarize_prefix(path, base, end, compiled=True)
    assert compiled.producers is not None and reference.producers is not None
    assert compiled.producers.tobytes() == reference.producers.tobytes()
    assert compiled.epoch_starts.tobytes() == reference.epoch_starts.tobytes()
    return compiled


# ------------------------------------------------------------------------------------------ Kafka's model
def java_int(value: int) -> int:
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


@dataclass
class KafkaEntry:
    """``ProducerStateEntry``: epoch, a deque of at most 5 BatchMetadata (last seq, last offset, delta), coordinator
    epoch, last timestamp, current transaction first offset (None: none)."""

    pid: int
    epoch: int = -1
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))
    coordinator_epoch: int = -1
    timestamp: int = -1
    txn: int | None = None

    def maybe_update_epoch(self, epoch: int) -> None:
        if self.epoch != epoch:
            self.batches.clear()
            self.epoch = epoch

    def snapshot(self) -> ProducerSnapshotEntry:
        seq, off, delta = self.batches[-1] if self.batches else (-1, -1, 0)
        txn = -1 if self.txn is None else self.txn
        return ProducerSnapshotEntry(self.pid, self.epoch, seq, off, delta, self.timestamp, self.coordinator_epoch, txn)


def kafka_model(logs: list[Path], start: list[ProducerSnapshotEntry] = ()) -> dict[int, KafkaEntry]:  # type: ignore[assignment]
    """LogSegment.updateProducerState over every batch of ``logs``: prepareUpdate (a fresh updatedEntry: the current
    entry's fields without its BatchMetadata), append (appendDataBatch / appendEndTxnMarker), update."""
    producers: dict[int, KafkaEntry] = {}
    for e in start:
        entry = KafkaEntry(e.producer_id, e.epoch, coordinator_epoch=e.coordinator_epoch, timestamp=e.timestamp)
        entry.txn = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
        if e.last_offset >= 0:
            entry.batches.append((e.last_sequence, e.last_offset, e.offset_delta))
        producers[e.producer_id] = entry
    for log in logs:
        data = log.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            (attributes, delta, base_ts, max_ts, pid, epoch, base_seq, count) = struct.unpack_from(
                ">hiqqqhii", data, pos + 21
            )
            end = pos + 12 + length
            if pid > -1 and not (attributes & 0x20 and count == 0):
                current = producers.get(pid) or KafkaEntry(pid)
                updated = KafkaEntry(pid, current.epoch, coordinator_epoch=current.coordinator_epoch,
                                     timestamp=current.timestamp, txn=current.txn)  # fmt: skip
                if attributes & 0x20:
                    _, coordinator = control_records.parse_marker(data, pos, end - pos, count)
                    updated.maybe_update_epoch(epoch)
                    updated.coordinator_epoch, updated.txn = coordinator, None
                    updated.timestamp = base_ts  # generated markers: one CREATE_TIME record, timestamp delta 0
                else:
                    if base_seq == -1:
                        last_seq = -1
                    elif base_seq > java_int(2**31 - 1 - delta):
                        last_seq = java_int(delta - java_int(2**31 - 1 - base_seq) - 1)
                    else:
                        last_seq = java_int(base_seq + delta)
                    updated.maybe_update_epoch(epoch)
                    updated.batches.append((last_seq, base + delta, delta))
                    updated.timestamp = max_ts
                    if updated.txn is None and attributes & 0x10:
                        updated.txn = base
                if pid in producers:
                    current.maybe_update_epoch(updated.epoch)
                    current.batches.extend(updated.batches)
                    current.coordinator_epoch, current.txn = updated.coordinator_epoch, updated.txn
                    current.timestamp = updated.timestamp
                else:
                    producers[pid] = updated
            pos = end
    return producers


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_replay_equals_kafkas_model_on_generated_partitions(tmp_path, seed):
    logs = generate_partition(
        tmp_path / "p-0", segments=4, batches_per_segment=120, transactional_producers=4, epochs=True, seed=seed
    )
    summaries_ = [summaries(log, int(log.stem)) for log in logs]
    expected = [e.snapshot() for e in kafka_model(logs).values()]
    ours = replay_producers(s.producers for s in summaries_)  # type: ignore[misc]
    assert list(ours.values()) == expected  # the same entries, in the same insertion order
    assert format_snapshot(snapshot_entries(ours)) == format_snapshot(kafka_snapshot_order(expected))
    assert len({e.epoch for e in expected}) > 1 and {e.last_offset for e in expected} != {-1}
    # from a snapshot taken after the first two segments
    middle = [e.snapshot() for e in kafka_model(logs[:2]).values()]
    expected = [e.snapshot() for e in kafka_model(logs[2:], middle).values()]
    ours = replay_producers((s.producers for s in summaries_[2:]), state_from_snapshot(middle))  # type: ignore[misc]
    assert list(ours.values()) == expected
    # the segments' own states cover every way the BatchMetadata can go
    metas = set(np.concatenate([s.producers["meta"] for s in summaries_]).tolist())  # type: ignore[index]
    assert META_SET in metas


def _segment(*records: tuple[object, ...]) -> np.ndarray:
    return np.array(list(records), PRODUCER_DTYPE)


def test_a_later_segment_of_markers_only_keeps_what_it_does_not_touch():
    before = state_from_snapshot([ProducerSnapshotEntry(7, 3, 41, 1000, 4, 500, 2, 990)])
    # pid, first epoch, epoch, meta, marker, last seq, last offset, delta, timestamp, coordinator epoch, txn first
    same_epoch = apply_segment(before, _segment((7, 3, 3, META_INHERIT, 1, -1, -1, 0, 900, 5, -1)))
    assert same_epoch[7] == ProducerSnapshotEntry(7, 3, 41, 1000, 4, 900, 5, -1)
    new_epoch = apply_segment(before, _segment((7, 4, 4, META_INHERIT, 1, -1, -1, 0, 900, 5, -1)))
    assert new_epoch[7] == ProducerSnapshotEntry(7, 4, -1, -1, 0, 900, 5, -1)
    cleared = apply_segment(before, _segment((7, 3, 4, META_CLEARED, 1, -1, -1, 0, 900, 5, -1)))
    assert cleared[7] == ProducerSnapshotEntry(7, 4, -1, -1, 0, 900, 5, -1)
    # data only: the open transaction from before stays, and so does the coordinator epoch
    data = apply_segment(before, _segment((7, 3, 3, META_SET, 0, 45, 1010, 3, 950, -1, 1007)))
    assert data[7] == ProducerSnapshotEntry(7, 3, 45, 1010, 3, 950, 2, 990)
    assert before[7].timestamp == 500  # pure: the state given is not modified
    # a new producer goes after the others
    both = apply_segment(before, _segment((9, 0, 0, META_SET, 0, 0, 1200, 0, 990, -1, -1)))
    assert list(both) == [7, 9]


def test_expiration_and_snapshot_order():
    entries = [
        ProducerSnapshotEntry(17, 0, 1, 10, 0, 1_000, -1, -1),  # idle, no transaction
        ProducerSnapshotEntry(1, 0, 1, 11, 0, 1_000, -1, 11),  # idle, but its transaction is open: kept
        ProducerSnapshotEntry(33, 0, 1, 12, 0, 2_000, -1, -1),
    ]
    now = 1_000 + PRODUCER_ID_EXPIRATION_MS
    assert [is_expired(e, now) for e in entries] == [True, False, False]
    assert list(state_from_snapshot(entries, now)) == [1, 33]
    state = state_from_snapshot(entries)
    assert [e.producer_id for e in snapshot_entries(state)] == [17, 1, 33]  # buckets 1, 1, 1 of 16: insertion order
    assert [e.producer_id for e in snapshot_entries(state, now)] == [1, 33]


def test_recovered_leader_epochs():
    cache = load_leader_epochs([EpochEntry(0, 0), EpochEntry(3, 100)])
    starts = [np.array([(2, 150), (5, 200)], EPOCH_DTYPE), np.array([(4, 250), (7, 300)], EPOCH_DTYPE)]
    # 2 and 4 are not above the latest epoch when they come: not assigned
    assert recovered_leader_epochs(cache, starts) == [EpochEntry(0, 0), EpochEntry(3, 100), EpochEntry(5, 200),
                                                     EpochEntry(7, 300)]  # fmt: skip
    # an entry at or after the new start is dropped by assign
    stale = load_leader_epochs([EpochEntry(0, 0), EpochEntry(3, 500)])
    assert recovered_leader_epochs(stale, [np.array([(4, 400)], EPOCH_DTYPE)]) == [EpochEntry(0, 0), EpochEntry(4, 400)]
    # LogLoader's truncations: from the log end, then from the log start checkpoint
    assert recovered_leader_epochs(cache, starts, log_end_offset=300, log_start_offset=150) == [
        EpochEntry(3, 150),
        EpochEntry(5, 200),
    ]
    assert recovered_leader_epochs([], [np.array([(0, 0)], EPOCH_DTYPE)]) == [EpochEntry(0, 0)]


# ------------------------------------------------------------------------------------------ the real fixtures
def _log_start(part: Path) -> int:
    """The partition's log start offset from its set's ``log-start-offset-checkpoint`` (0 when absent)."""
    checkpoint = part.parent / "log-start-offset-checkpoint"
    if not checkpoint.exists():
        return 0
    topic, _, partition = part.name.rpartition("-")
    return parse_offset_checkpoint(checkpoint.read_text(), str(checkpoint)).get((topic, int(partition)), 0)


#: Snapshots whose state the log no longer holds, with Kafka's reason.
CLEANED_AWAY = {
    # compacted-0's first segment (0) is empty now: the log cleaner rewrote offsets 0..6833 away (the 6834 segment
    # starts at 7993). Its snapshot was taken at the roll at 6834 (UnifiedLog.roll -> takeSnapshot), before the
    # cleaning, and records producer 8's batch ending at 6833, which no segment holds any more. Kafka itself would
    # start from this snapshot, not replay (rebuildProducerState loads the newest snapshot <= the segment's base).
    "local-apache-kafka-4.1.0/compacted-0/00000000000000006834.snapshot",
}


def _snapshot_cases() -> list[tuple[Path, Path]]:
    if not KAFKA_REAL.is_dir():
        return []
    return [(part, snap) for part in sorted({p.parent for p in KAFKA_REAL.glob("*/*/*.snapshot")})
            for snap in sorted(part.glob("*.snapshot"))]  # fmt: skip


def _replay_to(part: Path, offset: int) -> tuple[dict[int, ProducerSnapshotEntry], int]:
    """The producer state after the partition's batches below ``offset`` (mapEnd = ``offset``), replayed from the
    start (kafka-index-format.md 2.5: every fixture's log start is its first segment's base, so no earlier
    snapshot is needed), and the largest batch timestamp among them (a time the broker had reached when it wrote a
    snapshot at ``offset``)."""
    log_start = _log_start(part)
    state: dict[int, ProducerSnapshotEntry] = {}
    newest = -1
    for log in sorted(part.glob("*.log")):
        base = int(log.stem)
        if base >= offset and state:
            break
        scan = batch_walk.scan_log(log)
        assert scan.batch_count == 0 or int(scan.base_offsets[0]) >= log_start
        below = int(np.searchsorted(np.maximum.accumulate(scan.last_offsets), offset, side="left"))
        end = int(scan.positions[below - 1] + scan.sizes[below - 1]) if below else 0
        summary = summaries(log, base, end)
        assert summary.producers is not None and summary.fatal is None and summary.plan_end == summary.batch_count
        state = apply_segment(state, summary.producers)
        if below:
            newest = max(newest, int(scan.max_timestamps[:below].max()))
    return state, newest


@requires_kafka_real
@pytest.mark.skipif(not _snapshot_cases(), reason="no .snapshot in the real fixtures")
def test_every_real_snapshot_is_the_replay_of_its_partition_up_to_its_offset():
    """Each entry of a snapshot equals ours exactly, and the file is byte for byte ``format_snapshot`` of ours in
    Kafka's order. A producer we have that the file lacks must be one Kafka expired: no open transaction, and idle
    for at least ``producer.id.expiration.ms`` (24 h, every fixture's default) before the newest batch below the
    snapshot's offset (ProducerStateManager.removeExpiredProducers runs every 10 minutes on a live broker, and
    loadFromSnapshot drops expired producers at every start; 4.1.0 S/ProducerStateManager isProducerExpired)."""
    checked = expired = 0
    explained: set[str] = set()
    for part, snap in _snapshot_cases():
        name = str(snap.relative_to(KAFKA_REAL))
        if not written_by_kafka(snap):
            continue
        data = snap.read_bytes()
        file_entries = parse_snapshot_entries(data, name)
        state, newest = _replay_to(part, int(snap.stem))
        if name in CLEANED_AWAY:
            assert any(e.producer_id not in state or state[e.producer_id] != e for e in file_entries), name
            explained.add(name)
            continue
        for entry in file_entries:
            assert state.get(entry.producer_id) == entry, (name, entry, state.get(entry.producer_id))
        present = {e.producer_id for e in file_entries}
        for pid, entry in state.items():
            if pid not in present:
                assert is_expired(entry, newest), (name, entry, newest)
                expired += 1
        ours = [state[e.producer_id] for e in kafka_snapshot_order(file_entries)]
        assert format_snapshot(snapshot_entries({e.producer_id: e for e in ours})) == data, name
        checked += 1
    assert explained == CLEANED_AWAY
    assert checked >= 90 and expired > 0


def _first_batches(part: Path) -> tuple[list[LogSummary], list[batch_walk.LogScan]]:
    logs = sorted(part.glob("*.log"))
    return [summaries(log, int(log.stem)) for log in logs], [batch_walk.scan_log(log) for log in logs]


@requires_kafka_real
def test_every_real_leader_epoch_checkpoint_agrees_with_the_segments():
    """Every entry of the file at or above the log start is the first batch of its epoch in the log, and every
    epoch the log starts is in the file. Two explained exceptions: an entry at the log end with no batch yet (a
    leader assigns its epoch at the log end offset when it becomes leader, before it writes:
    Partition.makeLeader -> UnifiedLog.maybeAssignEpochStartOffset, core/.../Partition.scala:793 in late-2024 trunk),
    and on a compacted log an entry below its epoch's first batch where the cleaner removed every batch in between
    (cleaning removes records without moving the log start, so the entry keeps the epoch's original start)."""
    files = sorted(KAFKA_REAL.glob("*/*/leader-epoch-checkpoint"))
    assert files
    at_log_end = cleaned = exact = 0
    for checkpoint in files:
        part = checkpoint.parent
        summaries_, scans = _first_batches(part)
        derived = {e.epoch: e.start_offset for e in recovered_leader_epochs([], [s.epoch_starts for s in summaries_])}
        lasts = np.concatenate([s.last_offsets for s in scans]) if scans else np.empty(0, np.int64)
        bases = np.concatenate([s.base_offsets for s in scans]) if scans else np.empty(0, np.int64)
        log_end = int(lasts.max()) + 1 if len(lasts) else _log_start(part)
        log_start = max(_log_start(part), min((int(log.stem) for log in part.glob("*.log")), default=0))
        entries = load_leader_epochs(parse_leader_epoch_checkpoint(checkpoint.read_text(), str(checkpoint)))
        for entry in entries:
            if entry.start_offset < log_start:
                continue
            start = derived.get(entry.epoch)
            if start == entry.start_offset:
                exact += 1
            elif start is None and entry.start_offset >= log_end:
                at_log_end += 1
            else:
                assert start is not None and entry.start_offset < start, (checkpoint, entry, start)
                between = (lasts >= entry.start_offset) & (bases < start)
                assert not between.any(), (checkpoint, entry, start)  # no batch left in [entry start, first batch)
                cleaned += 1
        in_file = {e.epoch for e in entries}
        assert set(derived) <= in_file, (checkpoint, derived, entries)
    assert exact > 40 and at_log_end > 10 and cleaned >= 5
