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
* missing ``.index`` / ``.timeindex``; a 0-byte ``.index`` on an inactive segment whose rebuild holds entries (an
  empty ``.timeindex`` there lacks its final entry); an untrimmed zero tail on an inactive segment's index; a corrupt
  or incomplete tail of the ``.log`` (where it starts, how many bytes Kafka's recovery would cut);
  segments whose rebuild Kafka's recovery would refuse; index files without a ``.log``.

An ``.index``/``.timeindex`` that is its rebuild's bytes (then only zeros) gets only its zero tail checked: the
rebuild is built to the invariants above (tests hold the same findings both ways on every real partition).

Verify only opens files read-only and never raises on bad file contents: every problem is a finding.
A bad partition directory (missing, not a directory, not named ``<topic>-<partition>``) raises.
"""

from __future__ import annotations

import os

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
from ..format.values import AbortedTxn
from .entry_checks import (
    ExistingTxnIndex,
    check_offset_index,
    check_time_index,
    check_txn_index,
    length_findings,
    offset_index_bytes,
    time_index_bytes,
)
from .entry_plan import PlanSummary, SegmentPlan
from .findings import Finding
from .log_scan import ExistingIndex, LogSummary


class VerifyInputError(KafkaIndexError, ValueError):
    """A check called without what it checks (the existing index files, read before the scan)."""


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


def foreign_dir_findings(paths: list[str]) -> list[Finding]:
    """``not_a_partition_dir`` for each dir of a log dir that is not a partition (``paths``, from discovery): Kafka
    4.1's ``LogManager`` fails on the log dir ("... is not in the form of topic-partition")."""
    return [
        Finding(
            "not_a_partition_dir",
            path,
            detail=f"{os.path.basename(path)} is not in the form <topic>-<partition>: the broker's start fails on this "
            "log dir (move it out of the log dir)",
        )
        for path in paths
    ]


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
    for suffix, cls, check in (
        (".index", OffsetIndex, check_offset_index),
        (".timeindex", TimeIndex, check_time_index),
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
        expected = REBUILT_BYTES[suffix](plan) if rebuildable else None
        # a file that is the rebuild's bytes and then zeros needs only its zero tail checked
        rebuilt = (
            len(expected) // cls.ENTRY_SIZE
            if expected is not None and holds_only_the_rebuild(index, plan, suffix, expected)
            else -1
        )
        findings += length_findings(path, length, cls.ENTRY_SIZE)
        findings += check(path, base, summary, entries, len(entries) + index.sparse_entries, active, rebuilt)
        if suffix == ".index" and not active and length == 0 and expected:
            findings.append(empty_index_finding(path, len(expected) // cls.ENTRY_SIZE))
        identical[suffix] = (
            (length == len(entries) * cls.ENTRY_SIZE and entries.tobytes() == expected)
            if expected is not None
            else None
        )
    return findings, identical


REBUILT_BYTES = {".index": offset_index_bytes, ".timeindex": time_index_bytes}


def empty_index_finding(path: str, rebuilt_entries: int) -> Finding:
    """``index_empty``: an inactive segment's 0-byte ``.index`` whose rebuild holds ``rebuilt_entries`` (> 0).
    Kafka's load accepts it (no sanity check since 2.3.0), so nothing but a rebuild restores the entries. A 0-byte
    ``.timeindex`` there is ``time_index_missing_final_entry`` already."""
    return Finding(
        "index_empty",
        path,
        expected=rebuilt_entries,
        found=0,
        detail=f"{os.path.basename(path)} is 0 bytes on an inactive segment whose rebuild holds {rebuilt_entries} "
        "entries (every lookup there scans the segment's batches from its start)",
    )


def holds_only_the_rebuild(index: ExistingIndex, plan: SegmentPlan, suffix: str, expected: bytes | None = None) -> bool:
    """Whether an existing ``.index``/``.timeindex`` (``index``, as read) holds nothing its rebuild from ``plan``
    (``expected``: its bytes, when already made) lacks: its bytes are exactly the rebuild's, then only zeros (a
    preallocated index of a crashed or running broker whose entries are the rebuild's). False when it could not
    be read whole, changed while read, or ends in a partial entry."""
    if not index.exists or index.error is not None or index.changed:
        return False
    entry_size = OffsetIndex.ENTRY_SIZE if suffix == ".index" else TimeIndex.ENTRY_SIZE
    if index.length % entry_size:
        return False
    if expected is None:
        expected = REBUILT_BYTES[suffix](plan)
    stored = index.entries.tobytes()  # its bytes up to a trailing hole (zeros, never read)
    return stored[: len(expected)] == expected and stored.count(0, len(expected)) == len(stored) - len(expected)


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
    txn_findings, identical = check_txn_index(
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
