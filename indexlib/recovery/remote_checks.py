"""The checks of a tiered segment that need no ``.log`` (``verify-remote``'s index-only pass): its index objects
held to Kafka's load-time rules and verify's own order checks, and to what ``__remote_log_metadata`` says of the
segment (its offsets, size, largest timestamp, leader epochs and KIP-1058's transaction-index-empty flag).

* ``.index``: length, zero tail, offsets from the base up and increasing, positions increasing and inside the
  ``.log``'s size; no offset past the end offset.
* ``.timeindex``: length, zero tail, timestamps and offsets increasing, offsets inside the segment; no timestamp
  past the largest; the last entry the largest (Kafka appends it when the segment rolls).
* ``.txnindex``: length, record version, last offsets increasing, each aborted range inside the segment; the
  metadata's empty flag not set over aborted transactions (read_committed fetches would skip the file).
* producer snapshot: what Kafka refuses to read (version, length, CRC-32C).
* leader-epoch blob: what Kafka refuses, epochs and starts increasing, and each of the segment's leader epochs
  in it, starting where the metadata says.

Invariants: pure (the bytes come from :mod:`indexlib.storage.remote_segments`); findings name the objects'
URIs; a check that needs what is missing is skipped, the missing object being the finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..format.errors import CorruptIndexError
from ..format.leader_epoch_checkpoint import parse_leader_epoch_checkpoint
from ..format.offset_index import OffsetIndex
from ..format.time_index import TimeIndex
from ..format.transaction_index import TransactionIndex, transaction_records
from .entry_checks import MetadataBounds, check_offset_index, check_time_index, flag_entries, length_findings
from .findings import Finding
from .state_checks import leader_epoch_findings, snapshot_findings

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteSegment


def remote_index_findings(
    segment: RemoteSegment,
    uris: Mapping[str, str],
    data: Mapping[str, bytes | None],
    log_uri: str,
    log_size: int | None,
) -> list[Finding]:
    """The index-only findings of one remote segment: ``uris`` and ``data`` by index kind (``offset``,
    ``timestamp``, ``transaction``, ``producer_snapshot``, ``leader_epoch``; None: absent); ``log_size``: its
    ``.log``'s size as Kafka wrote it (None: absent)."""
    findings: list[Finding] = []
    if log_size is None:
        findings.append(Finding("remote_object_missing", log_uri, detail="the segment's .log is missing"))
    elif log_size != segment.size:
        findings.append(
            Finding(
                "remote_metadata_mismatch", log_uri, expected=segment.size, found=log_size,
                detail=f"the .log holds {log_size} bytes, the metadata says {segment.size}",
            )
        )  # fmt: skip
    bounds = MetadataBounds(valid_bytes=segment.size if log_size is None else log_size, last_offset=segment.end_offset)
    findings += _offset_index(segment, uris["offset"], data["offset"], bounds)
    findings += _time_index(segment, uris["timestamp"], data["timestamp"], bounds)
    findings += _txn_index(segment, uris["transaction"], data["transaction"])
    snapshot = data["producer_snapshot"]
    if snapshot is None:
        findings.append(Finding("remote_object_missing", uris["producer_snapshot"], detail="no producer snapshot"))
    else:
        findings += snapshot_findings({uris["producer_snapshot"]: snapshot})
    findings += _leader_epochs(segment, uris["leader_epoch"], data["leader_epoch"])
    return findings


def _offset_index(segment: RemoteSegment, uri: str, data: bytes | None, bounds: MetadataBounds) -> list[Finding]:
    if data is None:
        return [Finding("index_missing", uri, detail="the segment's offset index is missing: every fetch of it fails")]
    findings = length_findings(uri, len(data), 8)
    entries = np.frombuffer(data, dtype=OffsetIndex.DTYPE, count=len(data) // 8)
    findings += check_offset_index(uri, segment.start_offset, bounds, entries, len(entries), active=False)
    offsets = segment.start_offset + entries["relative_offset"].astype(np.int64)
    flag_entries(
        findings, "remote_metadata_mismatch", uri, offsets > segment.end_offset, 8, None, offsets,
        f"offset is past the segment's end offset {segment.end_offset}",
    )  # fmt: skip
    return findings


def _time_index(segment: RemoteSegment, uri: str, data: bytes | None, bounds: MetadataBounds) -> list[Finding]:
    if data is None:
        return [Finding("timeindex_missing", uri, detail="the segment's time index is missing: every fetch fails")]
    findings = length_findings(uri, len(data), 12)
    entries = np.frombuffer(data, dtype=TimeIndex.DTYPE, count=len(data) // 12)
    findings += check_time_index(uri, segment.start_offset, bounds, entries, len(entries), active=False)
    stamps = entries["timestamp"].astype(np.int64)
    flag_entries(
        findings, "remote_metadata_mismatch", uri, stamps > segment.max_timestamp_ms, 12, None, stamps,
        f"timestamp is past the segment's largest timestamp {segment.max_timestamp_ms}",
    )  # fmt: skip
    n = len(stamps)
    if n and int(stamps[-1]) < segment.max_timestamp_ms:
        findings.append(
            Finding(
                "time_index_missing_final_entry", uri, n - 1, (n - 1) * 12, segment.max_timestamp_ms,
                int(stamps[-1]),
                f"the last entry should hold the segment's largest timestamp {segment.max_timestamp_ms} (Kafka "
                "appends it when the segment rolls; offsets for times after it skip the segment)",
            )
        )  # fmt: skip
    return findings


def _txn_index(segment: RemoteSegment, uri: str, data: bytes | None) -> list[Finding]:
    if data is None:
        if segment.txn_index_empty:
            return []
        return [
            Finding(
                "remote_object_missing", uri,
                detail="the metadata says the transaction index is not empty, but there is none: the broker "
                "reads it as empty and read_committed fetches get aborted records",
            )
        ]  # fmt: skip
    size = TransactionIndex.RECORD_SIZE
    findings = length_findings(uri, len(data), size)
    try:
        records = transaction_records(data, uri)
    except CorruptIndexError as exc:
        return [*findings, Finding("txn_bad_version", uri, detail=str(exc))]
    first = records["first_offset"].astype(np.int64)
    last = records["last_offset"].astype(np.int64)
    prev_last = np.concatenate(([np.iinfo(np.int64).min], last[:-1]))
    flag_entries(
        findings, "txn_last_offset_not_increasing", uri, last <= prev_last, size, prev_last + 1, last,
        "last offset is not above the previous record's",
    )  # fmt: skip
    outside = (last < segment.start_offset) | (last > segment.end_offset) | (first > last)
    flag_entries(
        findings, "txn_outside_segment", uri, outside, size, None, last,
        f"the aborted range does not end inside the segment's offsets {segment.start_offset}..{segment.end_offset}",
    )  # fmt: skip
    if len(records) and segment.txn_index_empty:
        findings.append(
            Finding(
                "remote_txn_empty_flag_wrong", uri, expected=0, found=len(records),
                detail=f"the metadata says the transaction index is empty, but it holds {len(records)} aborted "
                "transactions: read_committed fetches skip it and hand out their records",
            )
        )  # fmt: skip
    return findings


def _leader_epochs(segment: RemoteSegment, uri: str, data: bytes | None) -> list[Finding]:
    if data is None:
        return [Finding("remote_object_missing", uri, detail="no leader-epoch blob: a new replica cannot start here")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [Finding("bad_leader_epoch_checkpoint", uri, detail=f"not UTF-8 text: {exc}")]
    findings = leader_epoch_findings(uri, text)
    if findings:
        return findings
    blob = {e.epoch: e.start_offset for e in parse_leader_epoch_checkpoint(text, uri)}
    for i, (epoch, start) in enumerate(segment.leader_epochs):
        found = blob.get(epoch)
        wrong = found is None or (found > start if i == 0 else found != start)
        if wrong:
            findings.append(
                Finding(
                    "remote_metadata_mismatch", uri, expected=start, found=found,
                    detail=f"the metadata's leader epoch {epoch} (from offset {start}) is "
                    + ("not in the blob" if found is None else f"at offset {found} in the blob"),
                )
            )  # fmt: skip
    ours = {epoch for epoch, _ in segment.leader_epochs}
    for epoch, start in sorted(blob.items()):
        if segment.start_offset < start <= segment.end_offset and epoch not in ours:
            findings.append(
                Finding(
                    "remote_metadata_mismatch", uri, found=start,
                    detail=f"the blob's leader epoch {epoch} starts at {start}, inside the segment, but the "
                    "metadata's leader epochs lack it",
                )
            )  # fmt: skip
    return findings
