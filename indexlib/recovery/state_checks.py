"""Verify of the two files Kafka's recovery derives beside the segments: the producer-state snapshots
(``<offset>.snapshot``) and ``leader-epoch-checkpoint``; and of what the log dir's checkpoints say of a partition
(:func:`recovery_point_findings`, :func:`log_start_findings`).

Each file on its own, as Kafka reads it at its next start:

* a ``.snapshot`` Kafka would refuse (version, length, count, CRC-32C): it deletes the file and replays the
  log from an older snapshot or the log start (a slower start; producers it no longer knows are fenced);
* a ``leader-epoch-checkpoint`` Kafka cannot read (the partition fails to load), or whose entries are not
  strictly increasing in epoch and start offset (the cache Kafka loads differs from the file, so a replica
  may truncate to the wrong offset).

And both against the log: ``leader-epoch-checkpoint`` against the epochs its batches start
(:func:`leader_epoch_log_findings`), each ``.snapshot`` at a segment base or the log end against the producer state
its batches below that offset give (:func:`replay_snapshots`, :func:`snapshot_log_findings`). What a repair writes
instead of a file with a finding is the file Kafka would have written there (:func:`snapshot_rewrites`,
:func:`repaired_leader_epochs`).

A 0-byte file is what Kafka leaves when it was stopped before its first write: it reads as empty, never a
finding. Pure: the files' contents are read by :mod:`indexlib.storage.partition_files`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..format.checkpoint import CheckpointError
from ..format.layout import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    parse_segment_name,
)
from ..format.leader_epoch_checkpoint import (
    EpochEntry,
    check_leader_epoch_checkpoint,
    load_leader_epochs,
    parse_leader_epoch_checkpoint,
)
from ..format.producer_snapshot import ProducerSnapshotEntry, SnapshotError, format_snapshot, parse_snapshot_entries
from .entry_plan import PlanSummary, SegmentPlan
from .findings import Finding
from .log_loader import log_end_offset
from .producer_state import apply_segment, snapshot_entries, state_from_snapshot

if TYPE_CHECKING:
    from ..format.cluster_metadata import ClusterFacts


def snapshot_findings(snapshots: dict[str, bytes | str]) -> list[Finding]:
    """A ``bad_producer_snapshot`` finding for each snapshot file Kafka would refuse. ``snapshots``: path ->
    the file's bytes, or why it could not be read."""
    findings = []
    for path, data in sorted(snapshots.items()):
        if isinstance(data, str):
            findings.append(Finding("bad_producer_snapshot", path, detail=data))
            continue
        try:
            parse_snapshot_entries(data, path)
        except SnapshotError as exc:
            findings.append(Finding("bad_producer_snapshot", path, detail=f"{exc}; Kafka deletes it at its next start"))
    return findings


def leader_epoch_findings(path: str, text: str | None, unreadable: str | None = None) -> list[Finding]:
    """The findings on a partition's ``leader-epoch-checkpoint``: ``text`` is its content (None: no such file),
    ``unreadable`` why it could not be read."""
    if unreadable is not None:
        return [Finding("bad_leader_epoch_checkpoint", path, detail=unreadable)]
    if text is None:
        return []
    problems = check_leader_epoch_checkpoint(text, path)
    if not problems:
        return []
    first = problems[0]
    if first.kind == "malformed":
        return [
            Finding("bad_leader_epoch_checkpoint", path, detail=f"{first.message}; Kafka cannot load the partition")
        ]
    return [
        Finding(
            "leader_epoch_not_increasing",
            path,
            entry=first.index,
            detail=f"{first.message}; Kafka's cache drops entries as it loads them",
            count=len(problems),
        )
    ]


def leader_epoch_log_findings(
    path: str,
    text: str | None,
    log_epochs: list[EpochEntry],
    log_start: int,
    last_offset_before: Callable[[int], int | None] | None = None,
    segment_starts: Collection[tuple[int, int]] = (),
) -> list[Finding]:
    """The findings of a readable ``leader-epoch-checkpoint`` against the epochs its partition's batches start
    (``log_epochs``: each epoch's first batch, as the cache's ``assign`` keeps them over the whole log). For every
    epoch whose first batch is at or above the log start: the file must hold it (``leader_epoch_missing``: a
    follower asking where that epoch ends gets the wrong answer) and its start must be that batch's offset
    (``leader_epoch_start_mismatch``); an earlier start is allowed only past the previous epoch's first batch and
    past the last offset of the batch just before (``last_offset_before(first batch's offset)``, asked only
    then): the cleaner may have removed the batches in between, but an offset a batch still holds is that
    batch's epoch's. Entries of epochs with no batch left are allowed (a leader
    assigns its epoch at the log end before it writes; compaction removes batches). The file's first entry may
    start later than its epoch's first batch at the first batch of a segment (``segment_starts``: each segment's
    first batch as (epoch, offset)): what Kafka's unclean start leaves after it loaded an empty cache (a missing or
    0-byte file, which it reads alike and this checks alike: not at all) and assigned the epochs of the batches it
    recovered, from the segment holding its recovery point on."""
    if not text:
        return []
    try:
        entries = load_leader_epochs(parse_leader_epoch_checkpoint(text, path))
    except CheckpointError:
        return []  # leader_epoch_findings reports it
    starts = {e.epoch: e.start_offset for e in entries}
    missing, moved = [], []
    previous = None
    earliest = entries[0].epoch if entries else None
    restarts = set(segment_starts)
    for epoch in log_epochs:
        if epoch.start_offset >= log_start:
            found = starts.get(epoch.epoch)
            rebuilt_from_recovery = epoch.epoch == earliest and (epoch.epoch, found) in restarts
            if found is None:
                missing.append(epoch)
            elif (found > epoch.start_offset and not rebuilt_from_recovery) or (
                previous is not None and found <= previous.start_offset
            ):
                moved.append((epoch, found))
            elif found < epoch.start_offset and last_offset_before is not None:
                before = last_offset_before(epoch.start_offset)
                if before is not None and found <= before:
                    moved.append((epoch, found))
        previous = epoch
    findings = []
    if missing:
        first = missing[0]
        findings.append(
            Finding(
                "leader_epoch_missing",
                path,
                expected=first.start_offset,
                detail=f"epoch {first.epoch} starts at offset {first.start_offset} in the log but is not in the file",
                count=len(missing),
            )
        )
    if moved:
        epoch, found = moved[0]
        findings.append(
            Finding(
                "leader_epoch_start_mismatch",
                path,
                expected=epoch.start_offset,
                found=found,
                detail=f"epoch {epoch.epoch}'s first batch is at offset {epoch.start_offset}, the file says {found}",
                count=len(moved),
            )
        )
    return findings


# ------------------------------------------------------------------------------------ the log dir's checkpoints
def recovery_point_findings(log_dir: str, problem: Exception | str | None) -> list[Finding]:
    """The finding on ``<log_dir>/recovery-point-offset-checkpoint``: ``problem`` is why Kafka cannot read it (what
    :func:`~indexlib.storage.partition_files.read_offset_checkpoint` raised, naming the file), None when it reads.
    Kafka's ``LogManager`` takes such a file as empty (a warning): every recovery point 0. An absent or 0-byte file
    (a broker killed in its first minute) reads as empty without one, and is no finding (that reader raises nothing)."""
    if problem is None:
        return []
    path = os.path.join(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT)
    return [
        Finding(
            "bad_recovery_point_checkpoint",
            path,
            detail=f"{problem}; Kafka reads every recovery point of this log dir as 0, so its next unclean start "
            "recovers every segment of every partition here",
        )
    ]


def log_start_findings(
    log_dir: str, partition: str, log_start: int, last_base: int, last: SegmentPlan | PlanSummary
) -> list[Finding]:
    """The finding on ``<log_dir>/log-start-offset-checkpoint`` when it gives ``partition`` (``<topic>-<n>``) a log
    start offset beyond its log end (``last``: the plan of its last segment, at ``last_base``): Kafka's
    ``LogLoader`` then deletes every segment of the partition at its next start, clean or not
    (``deleteSegmentsIfLogStartGreaterThanLogEnd``). A log start at the log end is Kafka's own (DeleteRecords up
    to the end, a roll); a last segment Kafka's recovery would refuse has no known end, and gets no finding. The
    log end is the last segment's valid end: an unclean start that cuts an earlier segment ends the log lower."""
    if last.fatal is not None:
        return []
    log_end = log_end_offset(last_base, last.batch_count, last.last_offset)
    if log_start <= log_end:
        return []
    path = os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
    return [
        Finding(
            "log_start_beyond_log_end",
            path,
            expected=f"<= {log_end}",
            found=log_start,
            detail=f"{partition}: log start offset {log_start} is beyond its log end {log_end}: the broker's next "
            f"start deletes every segment of {partition}",
        )
    ]


# ------------------------------------------------------------------------------- snapshots against the log
@dataclass(frozen=True)
class SnapshotReplay:
    """What the log says of the ``.snapshot`` at ``offset`` (a segment base or the log end).

    ``replayed``: the producer state the partition's batches below ``offset`` give, carried from the nearest
    earlier snapshot (or from an empty state at offset 0). ``differing``: the producers whose entry in a readable
    file disagrees with the log. ``kafka_state``: the state Kafka would write there (a readable file's producers,
    each corrected where the log disagrees; for a file Kafka refuses, ``replayed``)."""

    offset: int
    replayed: dict[int, ProducerSnapshotEntry]
    differing: list[int]
    kafka_state: dict[int, ProducerSnapshotEntry]
    refused: bool


def replay_snapshots(
    bases: Sequence[int],
    producers: Sequence[npt.NDArray[np.void] | None],
    log_end: int | None,
    files: Mapping[int, list[ProducerSnapshotEntry] | None],
    inside: Sequence[Mapping[int, npt.NDArray[np.void]]] = (),
) -> dict[int, SnapshotReplay]:
    """Per snapshot offset in ``files`` (offset -> its entries, None for a file Kafka refuses) that the log can
    speak for: the replay there. ``producers``: each segment's end states in base order (None: not known, e.g. a
    segment Kafka would refuse; nothing after it can be said). The state is known from offset 0 (empty) or from a
    readable snapshot at a segment base on. A snapshot inside a segment (an older clean shutdown's) is compared
    where ``inside`` (per segment: offset -> the states of its batches below it) has its offset; the state carried
    on is the whole segments' (Kafka loads such a file only as the newest it has).

    A file entry is taken as right where the log no longer holds what it records: a producer the log has no batch
    of, or whose last offset in the file is above the log's (retention, the cleaner). A producer of the log the
    file lacks is right unless it has an open transaction (Kafka expires only idle producers without one)."""
    state: dict[int, ProducerSnapshotEntry] | None = {} if bases and bases[0] == 0 else None
    points = list(bases) + ([log_end] if log_end is not None and bases and log_end > bases[-1] else [])
    result: dict[int, SnapshotReplay] = {}
    for i, point in enumerate(points):
        if point in files:
            state = _at_snapshot(point, state, files[point], result)
        for offset, below in sorted((inside[i] if i < len(inside) else {}).items()):
            if offset in files and offset not in points and state is not None:
                _at_snapshot(offset, apply_segment(state, below), files[offset], result)
        if i < len(bases):
            segment = producers[i]
            state = None if state is None or segment is None else apply_segment(state, segment)
    return result


def _at_snapshot(
    offset: int,
    replayed: dict[int, ProducerSnapshotEntry] | None,
    entries: list[ProducerSnapshotEntry] | None,
    result: dict[int, SnapshotReplay],
) -> dict[int, ProducerSnapshotEntry] | None:
    """Record the replay at one snapshot; return the state to carry on (Kafka's, as far as it is known)."""
    if entries is None:
        if replayed is not None:
            result[offset] = SnapshotReplay(offset, replayed, [], replayed, refused=True)
        return replayed
    loaded = state_from_snapshot(entries)
    if replayed is None:
        return loaded  # the first state known
    kafka: dict[int, ProducerSnapshotEntry] = {}
    differing = []
    for pid, entry in loaded.items():
        ours = replayed.get(pid)
        if ours is None or entry.last_offset > ours.last_offset:
            kafka[pid] = entry  # batches the log no longer holds
            continue
        kafka[pid] = ours
        if ours != entry:
            differing.append(pid)
    for pid, ours in replayed.items():
        if pid not in loaded and ours.has_open_transaction:
            kafka[pid] = ours
            differing.append(pid)
    result[offset] = SnapshotReplay(offset, replayed, differing, kafka, refused=False)
    return kafka


def _differences(found: ProducerSnapshotEntry | None, expected: ProducerSnapshotEntry) -> str:
    if found is None:
        return (
            f"producer {expected.producer_id} with its open transaction from offset "
            f"{expected.current_txn_first_offset} is not in the file"
        )
    diffs = [
        f"{f.name} {getattr(found, f.name)} (the log: {getattr(expected, f.name)})"
        for f in fields(ProducerSnapshotEntry)
        if getattr(found, f.name) != getattr(expected, f.name)
    ]
    return f"producer {expected.producer_id}: " + ", ".join(diffs)


def snapshot_log_findings(snapshots: Mapping[str, bytes | str], replays: Mapping[int, SnapshotReplay]) -> list[Finding]:
    """A ``producer_snapshot_mismatch`` for each readable snapshot whose entries disagree with the log (see
    :func:`replay_snapshots`); ``snapshots`` as :func:`snapshot_findings` takes them."""
    findings = []
    for path, data in sorted(snapshots.items()):
        replay = replays.get(_snapshot_offset(path))
        if replay is None or not replay.differing or not isinstance(data, bytes):
            continue
        loaded = state_from_snapshot(parse_snapshot_entries(data, path))
        first = replay.differing[0]
        findings.append(
            Finding(
                "producer_snapshot_mismatch",
                path,
                detail=f"{_differences(loaded.get(first), replay.replayed[first])}; Kafka trusts the file at its next "
                "start (producers fenced, sequence errors, a transaction left open or closed)",
                count=len(replay.differing),
            )
        )
    return findings


def snapshot_rewrites(snapshots: Mapping[str, bytes | str], replays: Mapping[int, SnapshotReplay]) -> dict[str, bytes]:
    """The file Kafka would have written in place of each snapshot with a finding that the log can speak for:
    the corrected state (a readable file's producers); for a refused file the replayed state less the producers
    idle a day before the newest batch timestamp among them (as Kafka drops them when it loads or expires)."""
    rewrites = {}
    for path, data in snapshots.items():
        replay = replays.get(_snapshot_offset(path))
        if replay is None:
            continue
        if replay.refused or not isinstance(data, bytes):
            newest = max((e.timestamp for e in replay.replayed.values()), default=0)
            rewrites[path] = format_snapshot(snapshot_entries(replay.replayed, now_ms=newest))
        elif replay.differing:
            rewrites[path] = format_snapshot(snapshot_entries(replay.kafka_state))
    return rewrites


def _snapshot_offset(path: str) -> int:
    parsed = parse_segment_name(os.path.basename(path))
    return parsed[0] if parsed is not None and parsed[1] == SNAPSHOT_SUFFIX else -1


def readable_snapshots(snapshots: Mapping[str, bytes | str]) -> dict[int, list[ProducerSnapshotEntry] | None]:
    """Offset -> entries of each snapshot file (None when Kafka would refuse it or it cannot be read)."""
    readable: dict[int, list[ProducerSnapshotEntry] | None] = {}
    for path, data in snapshots.items():
        try:
            readable[_snapshot_offset(path)] = parse_snapshot_entries(data, path) if isinstance(data, bytes) else None
        except SnapshotError:
            readable[_snapshot_offset(path)] = None
    return readable


# ------------------------------------------------------------------------- the leader epochs a repair writes
def repaired_leader_epochs(text: str | None, log_epochs: Sequence[EpochEntry], log_start: int) -> list[EpochEntry]:
    """The entries of ``leader-epoch-checkpoint`` as a broker that wrote every batch of the log would hold them:
    each epoch's first batch at or above the log start (``log_epochs``, as :func:`leader_epoch_log_findings`
    takes them) is its entry; the file's other entries (epochs with no batch left, entries below the log start)
    are kept where they fit between those, start offsets strictly increasing with the epochs. An unreadable file
    contributes nothing."""
    try:
        listed = parse_leader_epoch_checkpoint(text or "", "leader-epoch-checkpoint")
    except CheckpointError:
        listed = []
    from_log = {e.epoch: e.start_offset for e in log_epochs if e.start_offset >= log_start}
    anchors = sorted((EpochEntry(epoch, start) for epoch, start in from_log.items()), key=_by_epoch)
    others = [e for e in listed if e.epoch not in from_log]
    result: list[EpochEntry] = []
    for entry in sorted(anchors + others, key=_by_epoch):
        if entry.epoch in from_log:
            while result and result[-1].start_offset >= entry.start_offset:  # a file entry in its way
                result.pop()
            result.append(entry)
            continue
        above = next((a.start_offset for a in anchors if a.epoch > entry.epoch), None)
        fits_below = not result or result[-1].start_offset < entry.start_offset
        if fits_below and (above is None or entry.start_offset < above):
            result.append(entry)
    return result


def _by_epoch(entry: EpochEntry) -> tuple[int, int]:
    return entry.epoch, entry.start_offset


def readable_leader_epochs(path: str, text: str | None) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint``'s text as Kafka reads them (none when absent or unreadable:
    :func:`leader_epoch_findings` reports that)."""
    if text is None:
        return []
    try:
        return parse_leader_epoch_checkpoint(text, path)
    except CheckpointError:
        return []


def cluster_findings(
    partition_dir: str,
    topic: str,
    partition: int,
    topic_id: str | None,
    epochs: Sequence[EpochEntry],
    epoch_path: str,
    facts: ClusterFacts,
) -> list[Finding]:
    """A partition dir against the cluster's metadata (``facts``): its ``partition.metadata`` topic id
    (``topic_id``, None where it has none) against the metadata's for its topic name, its leader epochs against
    the partition's current one, and whether the metadata know it at all."""
    where = f"in the cluster metadata of {facts.source}"
    expected = facts.topic_ids.get(topic)
    if expected is None or (topic, partition) not in facts.leader_epochs:
        detail = f"topic {topic!r} " + ("is not" if expected is None else f"has no partition {partition}") + f" {where}"
        return [Finding("partition_unknown_to_metadata", partition_dir, detail=detail)]
    if topic_id is not None and topic_id != expected:
        detail = f"partition.metadata names topic id {topic_id}; topic {topic!r} is {expected} {where}"
        return [Finding("topic_id_mismatch", partition_dir, expected=expected, found=topic_id, detail=detail)]
    current = facts.leader_epochs[(topic, partition)]
    above = [e for e in epochs if e.epoch > current]
    if above:
        detail = (
            f"epoch {above[0].epoch} (from offset {above[0].start_offset}) is above the leader epoch {current} {where}"
        )
        return [
            Finding("leader_epoch_above_metadata", epoch_path, expected=current, found=above[0].epoch, detail=detail)
        ]
    return []
