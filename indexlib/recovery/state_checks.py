"""Verify of the two files Kafka's recovery derives beside the segments: the producer-state snapshots
(``<offset>.snapshot``) and ``leader-epoch-checkpoint``.

Each file on its own, as Kafka reads it at its next start:

* a ``.snapshot`` Kafka would refuse (version, length, count, CRC-32C): it deletes the file and replays the
  log from an older snapshot or the log start (a slower start; producers it no longer knows are fenced);
* a ``leader-epoch-checkpoint`` Kafka cannot read (the partition fails to load), or whose entries are not
  strictly increasing in epoch and start offset (the cache Kafka loads differs from the file, so a replica
  may truncate to the wrong offset).

And ``leader-epoch-checkpoint`` against the epochs the log's batches start (:func:`leader_epoch_log_findings`).

A 0-byte file is what Kafka leaves when it was stopped before its first write: it reads as empty, never a
finding. Pure: the files' contents are read by :mod:`indexlib.storage.partition_files`.
"""

from __future__ import annotations

from ..format.checkpoint import CheckpointError
from ..format.leader_epoch_checkpoint import (
    EpochEntry,
    check_leader_epoch_checkpoint,
    load_leader_epochs,
    parse_leader_epoch_checkpoint,
)
from ..format.producer_snapshot import SnapshotError, parse_snapshot_entries
from .findings import Finding


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
    path: str, text: str | None, log_epochs: list[EpochEntry], log_start: int
) -> list[Finding]:
    """The findings of a readable ``leader-epoch-checkpoint`` against the epochs its partition's batches start
    (``log_epochs``: each epoch's first batch, as the cache's ``assign`` keeps them over the whole log). For every
    epoch whose first batch is at or above the log start: the file must hold it (``leader_epoch_missing``: a
    follower asking where that epoch ends gets the wrong answer) and its start must be that batch's offset
    (``leader_epoch_start_mismatch``); an earlier start is allowed only past the previous epoch's first batch (the
    cleaner may have removed the batches in between). Entries of epochs with no batch left are allowed (a leader
    assigns its epoch at the log end before it writes; compaction removes batches)."""
    if text is None:
        return []
    try:
        entries = load_leader_epochs(parse_leader_epoch_checkpoint(text, path))
    except CheckpointError:
        return []  # leader_epoch_findings reports it
    starts = {e.epoch: e.start_offset for e in entries}
    missing, moved = [], []
    previous = None
    for epoch in log_epochs:
        if epoch.start_offset >= log_start:
            found = starts.get(epoch.epoch)
            if found is None:
                missing.append(epoch)
            elif found > epoch.start_offset or (previous is not None and found <= previous.start_offset):
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
