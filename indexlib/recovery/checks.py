"""Semantic verify: are a partition's existing index files correct for its ``.log`` segments?

Indexes written live by real brokers may differ from a rebuild and still be right (restarts, follower
appends, record-level time-index offsets of Kafka <= 3.6), so verify checks the invariants that make
Kafka's lookups correct (design.md, "Semantic verify"), and separately says whether each file is
byte-identical to what a rebuild would write.

Invariants checked (a violation is a :class:`Finding` with severity ``"error"``):

* ``.index``: length a multiple of 8; offsets >= base and strictly increasing; positions strictly
  increasing, each the start of a batch inside the valid data; that batch's base offset <= the entry
  offset, and the batch before it ends below the entry offset.
* ``.timeindex``: length a multiple of 12; timestamps strictly increasing; offsets non-decreasing and
  inside the segment; each timestamp equals the running maximum of batch max-timestamps through the
  batch holding the entry's offset; on an inactive segment the last entry is the segment's maximum
  timestamp (Kafka appends it when the segment rolls; its retention reads it).
* ``.txnindex``: length a multiple of 34; version 0; last offsets strictly increasing and inside the
  segment, each an ABORT marker of that producer; the (producer, first, last) set equals the rebuild's,
  and each such record's last stable offset equals the replay's. A 0-byte ``.txnindex`` is the same as
  an absent one.
* missing ``.index`` / ``.timeindex``; an untrimmed zero tail on an inactive segment's index; a corrupt
  or incomplete tail of the ``.log`` (where it starts, how many bytes Kafka's recovery would cut);
  segments whose rebuild Kafka's recovery would refuse; index files without a ``.log``.

Verify only opens files read-only and never raises on bad file contents: every problem is a finding.
A bad partition directory (missing, not a directory, not named ``<topic>-<partition>``) raises.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..format.errors import KafkaIndexError
from ..format.layout import (
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    is_kafka_metadata,
    is_kafka_transient,
    is_staged_name,
    parse_segment_name,
    segment_name,
)
from ..format.offset_index import OffsetIndex
from ..format.records import ScanProblem, StopReason
from ..format.time_index import TimeIndex
from ..format.transaction_index import TransactionIndex
from ..format.values import AbortedTxn
from .entry_plan import PlanSummary, SegmentPlan
from .findings import Finding
from .log_scan import EVENT_ABORT, ExistingIndex, LogSummary


class VerifyInputError(KafkaIndexError, ValueError):
    """A check called without what it checks (the existing index files, read before the scan)."""


@dataclass(frozen=True)
class ExistingTxnIndex:
    """A ``.txnindex`` as verify reads it: its records and length; ``exists`` False when there is no such
    file; ``bad_version`` or ``error`` when it could not be read (why)."""

    path: str
    exists: bool
    records: npt.NDArray[np.void] = field(default_factory=lambda: np.empty(0, TransactionIndex.DTYPE))
    length: int = 0
    bad_version: str | None = None
    error: str | None = None


def check_partition_transactions(
    log_paths: list[str],
    bases: list[int],
    plans: list[SegmentPlan | PlanSummary],
    replays: list[tuple[list[AbortedTxn], ScanProblem | None]],
    existing: list[ExistingTxnIndex],
) -> list[tuple[list[Finding], bool | None]]:
    """:func:`check_transaction_file` for every segment of a partition, in order, each with its ``.txnindex``
    as read. After an unreadable segment the replay has a gap, so later files are checked but not compared
    with the rebuild."""
    trusted = True
    out = []
    for log_path, base, plan, (aborted, replay_fatal), txn in zip(
        log_paths, bases, plans, replays, existing, strict=True
    ):
        out.append(check_transaction_file(log_path, base, plan, aborted, replay_fatal, txn, trusted))
        if plan.fatal is not None and plan.fatal.kind == "unreadable_segment":
            trusted = False
    return out


def directory_findings(partition_dir: str, names: list[str]) -> list[Finding]:
    """The findings on a partition directory's ``names``: orphan index files (no ``.log``) are errors;
    skipped (``.deleted``/``.cleaned``/``.swap``), leftover temporary and unknown files are info."""
    parsed = {name: parse_segment_name(name) for name in names}
    bases = {p[0] for p in parsed.values() if p is not None and p[1] == LOG_SUFFIX}
    findings = []
    for name in names:
        path = os.path.join(partition_dir, name)
        segment = parsed[name]
        if segment is not None:
            base, suffix = segment
            if suffix in INDEX_SUFFIXES and base not in bases:
                findings.append(
                    Finding(
                        "orphan_index_file", path, detail=f"{name} has no {segment_name(base, LOG_SUFFIX)} beside it"
                    )
                )
        elif is_kafka_transient(name):
            findings.append(
                Finding(
                    "skipped_file",
                    path,
                    detail=f"{name}: a file Kafka is deleting, cleaning or swapping; not verified",
                )
            )
        elif is_staged_name(name):
            findings.append(
                Finding(
                    "leftover_temporary_file",
                    path,
                    detail=f"{name}: a temporary file of an interrupted rebuild; safe to delete",
                )
            )
        elif not is_kafka_metadata(name):
            findings.append(Finding("unknown_file", path, detail=f"{name} is not a Kafka file"))
    return findings


def check_segment_files(
    log_path: str,
    base: int,
    summary: LogSummary,
    plan: SegmentPlan,
    active: bool,
    existing: dict[str, ExistingIndex] | None,
    zero_tail: bool = False,
) -> tuple[list[Finding], dict[str, bool | None]]:
    """The per-segment part of verify (parallel): the ``.log`` (``zero_tail``: see :func:`log_findings`), and
    the ``.index`` and ``.timeindex`` as read before the scan (``existing``; the summary answers their probes,
    see :func:`indexlib.recovery.log_scan.probes_for`). Returns the findings and, per file, whether it equals
    the rebuild."""
    findings = log_findings(log_path, summary, plan.fatal, zero_tail)
    if plan.fatal is not None and plan.fatal.kind == "unreadable_segment":
        return findings, {".index": None, ".timeindex": None}
    if existing is None:
        raise VerifyInputError(f"{log_path}: verify needs the existing index files read before the scan")
    rebuildable = plan.fatal is None
    identical: dict[str, bool | None] = {}
    for suffix, cls, check, expected_bytes in (
        (".index", OffsetIndex, _check_offset_index, _offset_index_bytes),
        (".timeindex", TimeIndex, _check_time_index, _time_index_bytes),
    ):
        index = existing[suffix]
        path, entries, length = index.path, index.entries, index.length
        if not index.exists:
            findings.append(Finding(f"{suffix[1:]}_missing", path, detail=f"{os.path.basename(path)} does not exist"))
            identical[suffix] = False if rebuildable else None
            continue
        if index.error is not None:
            findings.append(Finding("unreadable_file", path, detail=index.error))
            identical[suffix] = False if rebuildable else None
            continue
        if index.changed:
            findings.append(
                Finding(
                    "index_changed_during_read",
                    path,
                    detail=f"{os.path.basename(path)} changed while it was read (a running broker writing, trimming "
                    "or growing it); not checked",
                )
            )
            identical[suffix] = None
            continue
        findings += _length_findings(path, length, cls.ENTRY_SIZE)
        findings += check(path, base, summary, entries, len(entries) + index.sparse_entries, active)
        identical[suffix] = (
            (length == len(entries) * cls.ENTRY_SIZE and entries.tobytes() == expected_bytes(plan))
            if rebuildable
            else None
        )
    return findings, identical


def check_transaction_file(
    log_path: str,
    base: int,
    plan: SegmentPlan | PlanSummary,
    aborted: list[AbortedTxn],
    replay_fatal: ScanProblem | None,
    existing: ExistingTxnIndex,
    compare: bool = True,
) -> tuple[list[Finding], bool | None]:
    """The per-partition part of verify (after the sequential replay): the ``.txnindex`` (``existing``, as
    read), and the replay's fatal problem if any. ``compare=False`` skips the comparison with the rebuild
    (used when the replay could not start from the partition's beginning)."""
    findings = []
    if replay_fatal is not None:
        findings.append(fatal_finding(log_path, replay_fatal))
    if plan.fatal is not None and plan.fatal.kind == "unreadable_segment":
        return findings, None
    txn_findings, identical = _check_txn_index(
        existing, base, plan, aborted, compare and plan.fatal is None and replay_fatal is None
    )
    return findings + txn_findings, identical


# ------------------------------------------------------------------------------------------ .log
def has_invalid_tail(summary: LogSummary) -> bool:
    """Whether the ``.log`` has an invalid tail that may be all zeros (what :func:`log_findings` then asks)."""
    problem = summary.problem
    return (problem is not None and problem.kind != "invalid_marker") or (
        problem is None and summary.stop is StopReason.SHORT_TAIL
    )


def log_findings(
    log_path: str, summary: LogSummary, fatal: ScanProblem | None, zero_tail: bool = False
) -> list[Finding]:
    """The ``.log``'s invalid tail and any point where Kafka's recovery would refuse the segment.
    ``zero_tail``: the invalid tail is all zeros (read by the caller where :func:`has_invalid_tail`)."""
    findings = []
    last_valid = summary.last_offset
    cut = f"Kafka's recovery would truncate the last {summary.invalid_bytes} bytes (from byte {summary.valid_bytes}"
    cut += f"; last valid offset {last_valid})" if last_valid is not None else "; no valid batch)"
    if summary.problem is not None and summary.problem.kind != "invalid_marker":
        kind = "log_zero_tail" if zero_tail else f"log_{summary.problem.kind}"
        findings.append(
            Finding(
                kind,
                log_path,
                summary.problem.batch_index,
                summary.problem.position,
                found=summary.invalid_bytes,
                detail=f"{summary.problem.detail}; {cut}",
            )
        )
    elif summary.problem is not None:  # the marker batch itself is kept; everything after it is cut
        findings.append(
            Finding(
                "log_invalid_marker",
                log_path,
                summary.problem.batch_index,
                summary.problem.position,
                found=summary.invalid_bytes,
                detail=f"{summary.problem.detail}; {cut}",
            )
        )
    elif summary.stop is StopReason.SHORT_TAIL:
        kind = "log_zero_tail" if zero_tail else "log_short_tail"
        findings.append(
            Finding(
                kind,
                log_path,
                summary.batch_count,
                summary.valid_bytes,
                found=summary.invalid_bytes,
                detail=f"{summary.invalid_bytes} bytes too short for a batch header; {cut}",
            )
        )
    if fatal is not None:
        findings.append(fatal_finding(log_path, fatal))
    return findings


def fatal_finding(log_path: str, fatal: ScanProblem) -> Finding:
    return Finding(
        fatal.kind,
        log_path,
        fatal.batch_index,
        fatal.position,
        detail=f"{fatal.detail}; Kafka's recovery would fail here, so no index is rebuilt for this segment",
    )


# ------------------------------------------------------------------------------------ index files
def _length_findings(path: str, length: int, entry_size: int) -> list[Finding]:
    extra = length % entry_size
    if not extra:
        return []
    return [
        Finding(
            "bad_length",
            path,
            length // entry_size,
            length - extra,
            f"a multiple of {entry_size}",
            length,
            f"{length} bytes: {extra} trailing bytes after the last whole {entry_size}-byte entry",
        )
    ]


def _zero_tail_start(first: np.ndarray, second: np.ndarray, n: int) -> int:
    """Start of the all-zero entries at the end (a preallocated, untrimmed tail) of an index of ``n``
    entries whose first ``len(first)`` were read (the rest are a hole: zeros); ``n`` if there is no tail.

    A single all-zero entry on its own is an entry, not a tail (a time index may hold timestamp 0).
    """
    nonzero = np.flatnonzero((first != 0) | (second != 0))
    start = int(nonzero[-1]) + 1 if len(nonzero) else 0
    return start if (n - start >= 1 and (start >= 1 or n >= 2)) else n


def _zero_tail(path: str, start: int, n: int, entry_size: int, active: bool) -> list[Finding]:
    if start == n:
        return []
    if active:
        return [
            Finding(
                "preallocated_zero_tail",
                path,
                start,
                start * entry_size,
                0,
                n - start,
                detail=f"{n - start} zero entries after entry {start}: the active segment's preallocated "
                "space (a running broker, or an unclean shutdown that Kafka's recovery handles)",
            )
        ]
    return [
        Finding(
            "untrimmed_zero_tail",
            path,
            start,
            start * entry_size,
            0,
            n - start,
            f"{n - start} all-zero entries from entry {start} on an inactive segment (never trimmed); "
            "Kafka would read them as entries",
        )
    ]


def _flag(
    findings: list[Finding],
    kind: str,
    path: str,
    mask: np.ndarray,
    entry_size: int,
    expected: np.ndarray | None,
    found: np.ndarray,
    what: str,
) -> None:
    """One finding for all entries where ``mask`` holds, describing the first."""
    hits = np.flatnonzero(mask)
    if not len(hits):
        return
    i = int(hits[0])
    exp = int(expected[i]) if expected is not None else None
    more = f" (and {len(hits) - 1} more entries)" if len(hits) > 1 else ""
    findings.append(Finding(kind, path, i, i * entry_size, exp, int(found[i]), f"entry {i}: {what}{more}", len(hits)))


def _check_offset_index(
    path: str, base: int, summary: LogSummary, entries: np.ndarray, total: int, active: bool
) -> list[Finding]:
    """``entries``: the ones read; ``total``: the index's entries, the rest zeros in a hole."""
    rel = entries["relative_offset"].astype(np.int64)
    pos = entries["position"].astype(np.int64)
    n = _zero_tail_start(rel, pos, total)
    findings = _zero_tail(path, n, total, 8, active)
    off, pos = base + rel[:n], pos[:n]
    prev_off = np.concatenate(([np.iinfo(np.int64).min], off[:-1]))
    prev_pos = np.concatenate(([-1], pos[:-1]))
    _flag(
        findings,
        "offset_below_base",
        path,
        off < base,
        8,
        np.full(n, base),
        off,
        "offset is below the segment's base offset",
    )
    _flag(
        findings,
        "offset_not_increasing",
        path,
        off <= prev_off,
        8,
        prev_off + 1,
        off,
        "offset is not above the previous entry's",
    )
    _flag(
        findings,
        "position_not_increasing",
        path,
        pos <= prev_pos,
        8,
        prev_pos + 1,
        pos,
        "position is not above the previous entry's",
    )
    inside = (pos >= 0) & (pos < summary.valid_bytes)
    _flag(
        findings,
        "position_outside_valid_data",
        path,
        ~inside,
        8,
        None,
        pos,
        f"position is outside the valid data of the .log ({summary.valid_bytes} bytes)",
    )
    if summary.batch_count:
        starts, batch_base, prev_last = summary.answers.at_positions(pos)
        is_start = inside & (starts == pos)
        _flag(
            findings,
            "position_not_batch_start",
            path,
            inside & ~is_start,
            8,
            starts,
            pos,
            "position points into the middle of a batch (expected: the start of that batch)",
        )
        _flag(
            findings,
            "offset_before_batch",
            path,
            is_start & (off < batch_base),
            8,
            batch_base,
            off,
            "the batch at this position starts after the entry's offset",
        )
        _flag(
            findings,
            "offset_inside_previous_batch",
            path,
            is_start & (prev_last >= off),
            8,
            prev_last + 1,
            off,
            "the batch before this position already reaches the entry's offset",
        )
    return findings


def _check_time_index(
    path: str, base: int, summary: LogSummary, entries: np.ndarray, total: int, active: bool
) -> list[Finding]:
    """``entries``: the ones read; ``total``: the index's entries, the rest zeros in a hole."""
    ts = entries["timestamp"].astype(np.int64)
    rel = entries["relative_offset"].astype(np.int64)
    n = _zero_tail_start(ts, rel, total)
    findings = _zero_tail(path, n, total, 12, active)
    ts, off = ts[:n], base + rel[:n]
    prev_ts = np.concatenate(([np.iinfo(np.int64).min], ts[:-1]))
    prev_off = np.concatenate(([np.iinfo(np.int64).min], off[:-1]))
    _flag(
        findings,
        "timestamp_not_increasing",
        path,
        ts <= prev_ts,
        12,
        prev_ts + 1,
        ts,
        "timestamp is not above the previous entry's",
    )
    _flag(
        findings,
        "time_offset_decreasing",
        path,
        off < prev_off,
        12,
        prev_off,
        off,
        "offset is below the previous entry's",
    )
    last = summary.last_offset if summary.last_offset is not None else base - 1
    inside = (off >= base) & (off <= last)
    _flag(
        findings,
        "time_offset_outside_segment",
        path,
        ~inside,
        12,
        None,
        off,
        f"offset is outside the segment's valid offsets {base}..{last}",
    )
    if summary.raw_max is not None:
        # the largest batch timestamp up to the first batch reaching the offset (answered for every
        # offset inside the segment's valid offsets)
        expected = summary.answers.at_offsets(off)
        _flag(
            findings,
            "timestamp_not_running_max",
            path,
            inside & (ts != expected),
            12,
            expected,
            ts,
            "timestamp is not the largest batch timestamp up to the batch holding the entry's offset",
        )
        segment_max = summary.raw_max
        if not active and segment_max >= 0 and (n == 0 or int(ts[n - 1]) < segment_max):
            findings.append(
                Finding(
                    "time_index_missing_final_entry",
                    path,
                    n,
                    n * 12,
                    segment_max,
                    int(ts[n - 1]) if n else None,
                    f"the last entry should hold the segment's largest timestamp {segment_max} (Kafka appends it when "
                    "the segment rolls, and time-based retention reads it)",
                )
            )
    return findings


def _check_txn_index(
    existing: ExistingTxnIndex, base: int, plan: SegmentPlan | PlanSummary, aborted: list[AbortedTxn], compare: bool
) -> tuple[list[Finding], bool | None]:
    """Findings for the ``.txnindex`` and whether it equals the rebuild's (``identical`` of a segment)."""
    path = existing.path
    expected = {(t.producer_id, t.first_offset, t.last_offset) for t in aborted}
    expected_bytes = _txn_index_bytes(aborted) if compare else None
    if not existing.exists:
        if compare and expected:
            return [
                Finding(
                    "txnindex_missing",
                    path,
                    expected=len(expected),
                    found=0,
                    detail=f"absent, but the segment has {len(expected)} aborted transactions",
                )
            ], False
        return [], None
    if existing.bad_version is not None:
        return [Finding("txn_bad_version", path, detail=existing.bad_version)], False if compare else None
    if existing.error is not None:
        return [Finding("unreadable_file", path, detail=existing.error)], False if compare else None
    length, records = existing.length, existing.records
    size = TransactionIndex.RECORD_SIZE
    findings = _length_findings(path, length, size)
    pid = records["producer_id"].astype(np.int64)
    first = records["first_offset"].astype(np.int64)
    last = records["last_offset"].astype(np.int64)
    n = len(records)
    prev_last = np.concatenate(([np.iinfo(np.int64).min], last[:-1]))
    _flag(
        findings,
        "txn_last_offset_not_increasing",
        path,
        last <= prev_last,
        size,
        prev_last + 1,
        last,
        "last offset is not above the previous record's",
    )
    _flag(
        findings,
        "txn_outside_segment",
        path,
        (last < base) | (last > plan.last_offset),
        size,
        None,
        last,
        f"last offset is outside the segment's valid offsets {base}..{plan.last_offset}",
    )
    events = plan.events
    aborts = events[events["kind"] == EVENT_ABORT]
    marker_keys = set(zip(aborts["producer_id"].tolist(), aborts["offset"].tolist(), strict=True))
    not_marker = np.array(
        [(p, o) not in marker_keys for p, o in zip(pid.tolist(), last.tolist(), strict=True)], dtype=bool
    )
    _flag(
        findings,
        "txn_not_abort_marker",
        path,
        not_marker,
        size,
        None,
        last,
        "last offset is not an ABORT marker of this producer",
    )
    if compare:
        found = list(zip(pid.tolist(), first.tolist(), last.tolist(), strict=True))
        unexpected = np.array([key not in expected for key in found], dtype=bool) & ~not_marker
        _flag(
            findings,
            "txn_entry_unexpected",
            path,
            unexpected,
            size,
            None,
            first,
            "no aborted transaction with this producer, first and last offset in the rebuild",
        )
        stable = {(t.producer_id, t.first_offset, t.last_offset): t.last_stable_offset for t in aborted}
        replayed_lso = np.array([stable.get(key, -1) for key in found], dtype=np.int64)
        lso = records["last_stable_offset"].astype(np.int64)
        known = np.array([key in stable for key in found], dtype=bool)
        _flag(
            findings,
            "txn_last_stable_offset_mismatch",
            path,
            known & (lso != replayed_lso),
            size,
            replayed_lso,
            lso,
            "last stable offset differs from the replay's (Kafka stops collecting aborted transactions "
            "at the first record whose last stable offset reaches the fetch's upper bound)",
        )
        missing = sorted(expected - set(found), key=lambda k: k[2])
        if missing:
            producer, first_offset, last_offset = missing[0]
            findings.append(
                Finding(
                    "txn_entry_missing",
                    path,
                    n,
                    None,
                    f"producer {producer} offsets {first_offset}..{last_offset}",
                    None,
                    f"aborted transaction of producer {producer} ({first_offset}..{last_offset}) is not in the file"
                    + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                    len(missing),
                )
            )
        raw_equal = length == n * size and records.tobytes() == expected_bytes
        return findings, raw_equal
    return findings, None


# ----------------------------------------------------------------------------- expected bytes
def _encode(dtype: np.dtype[np.void], first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]) -> bytes:
    names = dtype.names
    assert names is not None  # an index entry's structured dtype
    out = np.empty(len(first), dtype=dtype)
    out[names[0]] = first
    out[names[1]] = second
    return out.tobytes()


def _offset_index_bytes(plan: SegmentPlan) -> bytes:
    return _encode(OffsetIndex.DTYPE, plan.offset_offsets - plan.base_offset, plan.offset_positions)


def _time_index_bytes(plan: SegmentPlan) -> bytes:
    return _encode(TimeIndex.DTYPE, plan.time_timestamps, plan.time_offsets - plan.base_offset)


def _txn_index_bytes(aborted: list[AbortedTxn]) -> bytes:
    out = np.zeros(len(aborted), dtype=TransactionIndex.DTYPE)
    for i, t in enumerate(aborted):
        out[i] = (0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
    return out.tobytes()
