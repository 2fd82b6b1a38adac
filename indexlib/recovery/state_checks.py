"""Verify of the two files Kafka's recovery derives beside the segments: the producer-state snapshots
(``<offset>.snapshot``) and ``leader-epoch-checkpoint``.

What is checked today is each file on its own, as Kafka reads it at its next start:

* a ``.snapshot`` Kafka would refuse (version, length, count, CRC-32C): it deletes the file and replays the
  log from an older snapshot or the log start (a slower start; producers it no longer knows are fenced);
* a ``leader-epoch-checkpoint`` Kafka cannot read (the partition fails to load), or whose entries are not
  strictly increasing in epoch and start offset (the cache Kafka loads differs from the file, so a replica
  may truncate to the wrong offset).

A 0-byte file is what Kafka leaves when it was stopped before its first write: it reads as empty, never a
finding. Pure: the files' contents are read by :mod:`indexlib.storage.partition_files`.
"""

from __future__ import annotations

from ..format.leader_epoch_checkpoint import check_leader_epoch_checkpoint
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
