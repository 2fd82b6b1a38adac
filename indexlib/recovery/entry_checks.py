"""The checks of one index file's entries against the scan of its ``.log`` (the invariants in
:mod:`indexlib.recovery.checks`' docstring): ``.index`` and ``.timeindex`` (:func:`check_offset_index`,
:func:`check_time_index`), ``.txnindex`` (:func:`check_txn_index`), and the bytes a rebuild would write for
each, which say whether the file is identical to it. Every problem is a :class:`~indexlib.recovery.findings.Finding`;
nothing here reads a file."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..format.offset_index import OffsetIndex
from ..format.time_index import TimeIndex
from ..format.transaction_index import TransactionIndex
from ..format.values import AbortedTxn
from .entry_plan import PlanSummary, SegmentPlan
from .findings import Finding
from .log_scan import EVENT_ABORT, LogSummary


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


def length_findings(path: str, length: int, entry_size: int) -> list[Finding]:
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


def flag_entries(
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
    if not mask.any():  # the usual case, a few times cheaper than the search below
        return
    hits = np.flatnonzero(mask)
    i = int(hits[0])
    exp = int(expected[i]) if expected is not None else None
    more = f" (and {len(hits) - 1} more entries)" if len(hits) > 1 else ""
    findings.append(Finding(kind, path, i, i * entry_size, exp, int(found[i]), f"entry {i}: {what}{more}", len(hits)))


@dataclass(frozen=True)
class MetadataBounds:
    """A ``.log`` known only by what metadata says of it (a tiered segment checked without reading it): its size
    and its last offset. The index checks given it check what needs no batch: order, zero tails, offsets and
    positions inside these bounds."""

    valid_bytes: int
    last_offset: int
    batch_count: int = 0
    raw_max: int | None = None


def check_offset_index(
    path: str,
    base: int,
    summary: LogSummary | MetadataBounds,
    entries: np.ndarray,
    total: int,
    active: bool,
    rebuilt: int = -1,
) -> list[Finding]:
    """``entries``: the ones read; ``total``: the index's entries, the rest zeros in a hole; ``rebuilt``: how
    many first entries are known to be the rebuild's own bytes (-1: not known)."""
    rel = entries["relative_offset"].astype(np.int64)
    pos = entries["position"].astype(np.int64)
    n = _zero_tail_start(rel, pos, total)
    findings = _zero_tail(path, n, total, 8, active)
    if n == rebuilt:  # the entries are the rebuild's, which is built to pass every check below
        return findings
    off, pos = base + rel[:n], pos[:n]
    _flag_offset_order(findings, path, base, off, pos)
    inside = (pos >= 0) & (pos < summary.valid_bytes)
    flag_entries(
        findings,
        "position_outside_valid_data",
        path,
        ~inside,
        8,
        None,
        pos,
        f"position is outside the valid data of the .log ({summary.valid_bytes} bytes)",
    )
    if isinstance(summary, LogSummary) and summary.batch_count:
        _flag_offset_batches(findings, path, summary, off, pos, inside)
    return findings


def _flag_offset_order(findings: list[Finding], path: str, base: int, off: np.ndarray, pos: np.ndarray) -> None:
    """The ``.index`` entries' own order: offsets from the base offset up, offsets and positions increasing."""
    prev_off = np.concatenate(([np.iinfo(np.int64).min], off[:-1]))
    prev_pos = np.concatenate(([-1], pos[:-1]))
    flag_entries(
        findings,
        "offset_below_base",
        path,
        off < base,
        8,
        np.full(len(off), base),
        off,
        "offset is below the segment's base offset",
    )
    flag_entries(
        findings,
        "offset_not_increasing",
        path,
        off <= prev_off,
        8,
        prev_off + 1,
        off,
        "offset is not above the previous entry's",
    )
    flag_entries(
        findings,
        "position_not_increasing",
        path,
        pos <= prev_pos,
        8,
        prev_pos + 1,
        pos,
        "position is not above the previous entry's",
    )


def _flag_offset_batches(
    findings: list[Finding], path: str, summary: LogSummary, off: np.ndarray, pos: np.ndarray, inside: np.ndarray
) -> None:
    """The ``.index`` entries against the ``.log``'s batches: each position (``inside`` the valid data) is the start
    of a batch that holds the entry's offset, and the batch before it does not."""
    starts, batch_base, prev_last = summary.answers.at_positions(pos)
    is_start = inside & (starts == pos)
    flag_entries(
        findings,
        "position_not_batch_start",
        path,
        inside & ~is_start,
        8,
        starts,
        pos,
        "position points into the middle of a batch (expected: the start of that batch)",
    )
    flag_entries(
        findings,
        "offset_before_batch",
        path,
        is_start & (off < batch_base),
        8,
        batch_base,
        off,
        "the batch at this position starts after the entry's offset",
    )
    flag_entries(
        findings,
        "offset_inside_previous_batch",
        path,
        is_start & (prev_last >= off),
        8,
        prev_last + 1,
        off,
        "the batch before this position already reaches the entry's offset",
    )


def check_time_index(
    path: str,
    base: int,
    summary: LogSummary | MetadataBounds,
    entries: np.ndarray,
    total: int,
    active: bool,
    rebuilt: int = -1,
) -> list[Finding]:
    """``entries``: the ones read; ``total``: the index's entries, the rest zeros in a hole; ``rebuilt``: how
    many first entries are known to be the rebuild's own bytes (-1: not known)."""
    ts = entries["timestamp"].astype(np.int64)
    rel = entries["relative_offset"].astype(np.int64)
    n = _zero_tail_start(ts, rel, total)
    findings = _zero_tail(path, n, total, 12, active)
    if n == rebuilt:  # the entries are the rebuild's, which is built to pass every check below
        return findings
    ts, off = ts[:n], base + rel[:n]
    prev_ts = np.concatenate(([np.iinfo(np.int64).min], ts[:-1]))
    prev_off = np.concatenate(([np.iinfo(np.int64).min], off[:-1]))
    flag_entries(
        findings,
        "timestamp_not_increasing",
        path,
        ts <= prev_ts,
        12,
        prev_ts + 1,
        ts,
        "timestamp is not above the previous entry's",
    )
    flag_entries(
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
    flag_entries(
        findings,
        "time_offset_outside_segment",
        path,
        ~inside,
        12,
        None,
        off,
        f"offset is outside the segment's valid offsets {base}..{last}",
    )
    if isinstance(summary, LogSummary) and summary.raw_max is not None:
        # the largest batch timestamp up to the first batch reaching the offset (answered for every
        # offset inside the segment's valid offsets)
        expected = summary.answers.at_offsets(off)
        flag_entries(
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


def check_txn_index(
    existing: ExistingTxnIndex, base: int, plan: SegmentPlan | PlanSummary, aborted: list[AbortedTxn], compare: bool
) -> tuple[list[Finding], bool | None]:
    """Findings for the ``.txnindex`` and whether it equals the rebuild's (``identical`` of a segment)."""
    path = existing.path
    expected = {(t.producer_id, t.first_offset, t.last_offset) for t in aborted}
    expected_bytes = txn_index_bytes(aborted) if compare else None
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
    findings = length_findings(path, length, size)
    pid = records["producer_id"].astype(np.int64)
    last = records["last_offset"].astype(np.int64)
    n = len(records)
    prev_last = np.concatenate(([np.iinfo(np.int64).min], last[:-1]))
    flag_entries(
        findings,
        "txn_last_offset_not_increasing",
        path,
        last <= prev_last,
        size,
        prev_last + 1,
        last,
        "last offset is not above the previous record's",
    )
    flag_entries(
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
    flag_entries(
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
        findings += _compare_txn_records(path, records, aborted, expected, not_marker)
        raw_equal = length == n * size and records.tobytes() == expected_bytes
        return findings, raw_equal
    return findings, None


def _compare_txn_records(
    path: str,
    records: npt.NDArray[np.void],
    aborted: list[AbortedTxn],
    expected: set[tuple[int, int, int]],
    not_marker: npt.NDArray[np.bool_],
) -> list[Finding]:
    """The ``.txnindex``'s records against the replay's aborted transactions (``expected``: their producer,
    first and last offsets): records the rebuild has not, last stable offsets that differ, and missing ones."""
    size = TransactionIndex.RECORD_SIZE
    findings: list[Finding] = []
    pid = records["producer_id"].astype(np.int64)
    first = records["first_offset"].astype(np.int64)
    last = records["last_offset"].astype(np.int64)
    n = len(records)
    found = list(zip(pid.tolist(), first.tolist(), last.tolist(), strict=True))
    unexpected = np.array([key not in expected for key in found], dtype=bool) & ~not_marker
    flag_entries(
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
    flag_entries(
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
    return findings


# ----------------------------------------------------------------------------- expected bytes
def _encode(dtype: np.dtype[np.void], first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]) -> bytes:
    names = dtype.names
    assert names is not None  # an index entry's structured dtype
    out = np.empty(len(first), dtype=dtype)
    out[names[0]] = first
    out[names[1]] = second
    return out.tobytes()


def offset_index_bytes(plan: SegmentPlan) -> bytes:
    return _encode(OffsetIndex.DTYPE, plan.offset_offsets - plan.base_offset, plan.offset_positions)


def time_index_bytes(plan: SegmentPlan) -> bytes:
    return _encode(TimeIndex.DTYPE, plan.time_timestamps, plan.time_offsets - plan.base_offset)


def txn_index_bytes(aborted: list[AbortedTxn]) -> bytes:
    out = np.zeros(len(aborted), dtype=TransactionIndex.DTYPE)
    for i, t in enumerate(aborted):
        out[i] = (0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
    return out.tobytes()
