"""One pass over a ``.log`` segment, reduced to what the rebuild plan and verify need: a :class:`LogSummary`.

A summary holds nothing per batch. Its size is bounded by the batches that get an index entry, the
producer events the replay needs (:func:`compact_events`) and the existing index entries verify looks up
(:class:`Probes`), so a 1 GiB segment of one-record batches needs megabytes, not a gigabyte.

Two ways make the same summary, field for field:

* :func:`indexlib.storage.partition_files.summarize_log` with the compiled kernel (``indexlib.format._kernel.scan_segment``): one streaming walk
  through a reused read buffer (``pread``: a file that shrinks meanwhile is an ``OSError``, never SIGBUS);
* :func:`summarize` over a :class:`~indexlib.format.records.LogScan`'s columns with numpy: the readable reference,
  and the fallback where the extension is not built or ``KAFKA_INDEX_PURE_PYTHON=1`` (it keeps the
  columns, so its memory grows with the batches).

Definitions (kafka-index-format.md 2.3-2.4, 3): ``n`` = accepted batches (after a marker cut);
``plan_end`` ``m`` = the first batch a rebuild cannot index: the first whose last offset does not fit the
32-bit relative range of the base offset, or the scan's fatal batch, else ``n``. For batch ``i``:
``running_max`` = max(-1, max timestamps of batches 0..i); ``max_offset`` = last offset of the batch that
first reached it (the base offset while it is -1); ``v2_next`` = last offset + 1 of the last v2 batch in
0..i (:data:`NO_OFFSET` if none). ``entries`` = those values at each batch ``i < m`` that gets an index
entry (bytes since the last indexed batch's start > ``index.interval.bytes``; never batch 0). The leader-epoch
starts (:data:`EPOCH_DTYPE`) and the producers' end states (:data:`PRODUCER_DTYPE`) come from batches ``< m``
(those Kafka's ``LogSegment.recover`` accepts and the plan covers); their size is bounded by the epochs and
the producers, not the batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..format.abstract_index import INT32_MAX
from ..format.batch_walk import scan_buffer
from ..format.errors import IndexArgumentError, describe_error
from ..format.index_file import FileIdentity
from ..format.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    MARKER_ABORT,
    MARKER_COMMIT,
    STOP_CODES,
    LogScan,
    ScanProblem,
    StopReason,
    problem_from_code,
)

#: "no such offset" in the int64 columns (no v2 batch yet, no previous batch, a probe outside the data)
NO_OFFSET = int(np.iinfo(np.int64).min)

#: The values at one batch: see the module docstring.
ROW_DTYPE = np.dtype(
    [
        ("batch", np.int64),
        ("position", np.int64),
        ("base_offset", np.int64),
        ("last_offset", np.int64),
        ("running_max", np.int64),
        ("max_offset", np.int64),
        ("v2_next", np.int64),
    ]
)

# Transactional event kinds (one per v2 batch with a producer id).
EVENT_DATA = 0  # non-transactional data batch
EVENT_TXN_DATA = 1  # transactional data batch
EVENT_ABORT = 2  # ABORT marker
EVENT_COMMIT = 3  # COMMIT marker

EVENT_DTYPE = np.dtype(
    [("batch", np.int32), ("kind", np.int8), ("producer_id", np.int64), ("offset", np.int64), ("position", np.int64)]
)

#: A leader epoch's first batch in the segment: ``(epoch, base offset)`` of each v2 batch before ``plan_end``
#: whose partition leader epoch is >= 0 and above every earlier one of the segment (Kafka's ``assign`` condition,
#: segment-local: kafka-index-format.md 2.3, LogSegment.recover 4.1.0 L503-506). Packed, as the kernel writes it.
EPOCH_DTYPE = np.dtype([("epoch", np.int32), ("start_offset", np.int64)])

# ``meta`` of a PRODUCER_DTYPE record: what the segment did to the producer's last batch metadata (BatchMetadata:
# last sequence, last offset, offset delta) relative to the state it started from.
META_INHERIT = 0  # untouched: the earlier state's, kept if its epoch equals ``first_epoch``, else cleared
META_CLEARED = 1  # a marker changed the epoch after the last data batch: no metadata (-1, -1, 0)
META_SET = 2  # the last data batch's (after it, no epoch change)

#: A producer's state at the segment's end as far as the segment's own batches decide it (batches before
#: ``plan_end``, v2, producer id > -1, empty control batches and non-markers skipped), one record per producer in
#: the order of its first batch. ``first_epoch``: the epoch of its first batch here; ``epoch``/``timestamp``: its
#: last batch's (a data batch's max timestamp, a marker record's timestamp); ``last_sequence``, ``last_offset``,
#: ``offset_delta``: its last data batch's when ``meta`` is META_SET, else -1, -1, 0; ``coordinator_epoch``: its last
#: marker's, valid when ``has_marker``; ``txn_first_offset``: the base offset of the transaction open at the end as
#: the segment alone shows it (-1: none), which an earlier open transaction overrides when ``has_marker`` is 0.
#: :func:`indexlib.recovery.producer_state.apply_segment` composes these over segments. Packed, as the kernel
#: writes it.
PRODUCER_DTYPE = np.dtype(
    [
        ("producer_id", np.int64),
        ("first_epoch", np.int16),
        ("epoch", np.int16),
        ("meta", np.int8),
        ("has_marker", np.int8),
        ("last_sequence", np.int32),
        ("last_offset", np.int64),
        ("offset_delta", np.int32),
        ("timestamp", np.int64),
        ("coordinator_epoch", np.int32),
        ("txn_first_offset", np.int64),
    ]
)


@dataclass(frozen=True)
class Probes:
    """Where verify will look into the batches: the positions of the existing ``.index`` entries and
    the offsets of the existing ``.timeindex`` entries (each sorted, unique, int64)."""

    positions: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]

    @staticmethod
    def of(positions: npt.ArrayLike = (), offsets: npt.ArrayLike = ()) -> Probes:
        return Probes(_sorted_unique(positions), _sorted_unique(offsets))


def sorted_unique(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """``np.unique`` of int64 values (flattened): each once, ascending; without ``np.unique``'s own overhead (and its
    import of ``numpy.ma``, ~15 ms of a run's first call)."""
    ordered = np.sort(np.asarray(values, np.int64), axis=None)
    keep = np.empty(ordered.size, np.bool_)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _sorted_unique(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """:func:`sorted_unique`, without its sort where the values increase strictly up to a run of zeros at the end
    (a sound index's entries, then a preallocated index's zero tail: the usual case, ~20-50 us a segment saved)."""
    array = np.asarray(values, np.int64)
    if array.ndim != 1:
        return sorted_unique(array)
    nonzero = np.flatnonzero(array)
    head = array[: int(nonzero[-1]) + 1] if nonzero.size else array[:0]
    if head.size and (head[0] < 0 or not bool((head[1:] > head[:-1]).all())):
        return sorted_unique(array)
    if head.size == array.size or (head.size and head[0] == 0):
        return head
    return np.concatenate((np.zeros(1, np.int64), head))  # the zeros after it, once, first


NO_PROBES = Probes.of()


@dataclass(frozen=True)
class ProbeAnswers:
    """What the batches say at each probe.

    For a position inside the valid data: the start, base offset and previous batch's last offset
    (:data:`NO_OFFSET` for the first batch) of the batch holding it; outside: (-1, 0, NO_OFFSET). For an
    offset: the largest batch max timestamp (not clamped) up to the first batch whose last offset
    reaches it; :data:`NO_OFFSET` when no batch does.
    """

    probes: Probes
    starts: npt.NDArray[np.int64]
    bases: npt.NDArray[np.int64]
    previous_lasts: npt.NDArray[np.int64]
    running_max: npt.NDArray[np.int64]

    def at_positions(
        self, positions: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(starts, bases, previous lasts) for ``positions``, each one of the probes."""
        i = np.searchsorted(self.probes.positions, positions)
        return self.starts[i], self.bases[i], self.previous_lasts[i]

    def at_offsets(self, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The running max timestamp for ``offsets``, each one of the probes."""
        result: npt.NDArray[np.int64] = self.running_max[np.searchsorted(self.probes.offsets, offsets)]
        return result


@dataclass
class LogSummary:
    """A ``.log`` segment as the rebuild plan and verify see it (see the module docstring).

    Invariants: ``entries["batch"]`` strictly increase and are ``< plan_end <= batch_count``;
    ``last_row`` is batch ``plan_end - 1`` (``None`` when ``plan_end == 0``), ``stop_row`` batch
    ``plan_end`` (``None`` when ``plan_end == batch_count``); ``events`` are compacted and their batches
    are ``< plan_end + 1``; ``valid_bytes <= file_size``.
    """

    path: str
    file_size: int
    base_offset: int
    index_interval_bytes: int
    batch_count: int
    valid_bytes: int
    stop: StopReason
    problem: ScanProblem | None
    fatal: ScanProblem | None
    plan_end: int
    entries: npt.NDArray[np.void]  # ROW_DTYPE
    last_row: np.void | None
    stop_row: np.void | None
    events: npt.NDArray[np.void]  # EVENT_DTYPE
    last_offset: int | None  # of the last valid batch
    raw_max: int | None  # the largest batch max timestamp (not clamped)
    answers: ProbeAnswers
    epoch_starts: npt.NDArray[np.void]  # EPOCH_DTYPE, epochs and offsets strictly increasing
    #: PRODUCER_DTYPE, one record per producer id; ``None`` when the kernel's marker parser gave control types only
    #: (``marker_type_or_error``), so that markers' coordinator epochs and timestamps are unknown
    producers: npt.NDArray[np.void] | None

    @property
    def invalid_bytes(self) -> int:
        """Bytes after the valid data, which Kafka's recovery would truncate."""
        return self.file_size - self.valid_bytes


# ------------------------------------------------------------------------------------ the reference
def summarize(scan: LogScan, base_offset: int, index_interval_bytes: int, probes: Probes = NO_PROBES) -> LogSummary:
    """The summary of a scan's columns (the reference; see the module docstring). ``index_interval_bytes`` is
    trusted: settings are validated where they enter (:mod:`indexlib.recovery.settings`)."""
    n = scan.batch_count
    last_offsets = scan.last_offsets
    relative = last_offsets - base_offset
    overflow = np.flatnonzero((relative < 0) | (relative > INT32_MAX))
    m = int(overflow[0]) if len(overflow) else n
    if scan.fatal is not None:
        m = min(m, scan.fatal.batch_index)
    ts = scan.max_timestamps
    index = np.arange(n)
    running_max = np.maximum.accumulate(np.maximum(ts, -1)) if n else ts
    previous_max = np.concatenate(([-1], running_max[:-1]))
    source = np.maximum.accumulate(np.where(ts > previous_max, index, -1)) if n else index
    max_offset = np.where(source >= 0, last_offsets[np.maximum(source, 0)], base_offset)
    v2_source = np.maximum.accumulate(np.where(scan.magic >= 2, index, -1)) if n else index
    v2_next = np.where(v2_source >= 0, last_offsets[np.maximum(v2_source, 0)] + 1, NO_OFFSET)

    def rows(batches: npt.NDArray[np.int64]) -> npt.NDArray[np.void]:
        out = np.empty(len(batches), ROW_DTYPE)
        out["batch"] = batches
        out["position"] = scan.positions[batches]
        out["base_offset"] = scan.base_offsets[batches]
        out["last_offset"] = last_offsets[batches]
        out["running_max"] = running_max[batches]
        out["max_offset"] = max_offset[batches]
        out["v2_next"] = v2_next[batches]
        return out

    selected = select_indexed_batches(scan.positions[:m], scan.sizes[:m], index_interval_bytes)
    return LogSummary(
        path=scan.path,
        file_size=scan.file_size,
        base_offset=base_offset,
        index_interval_bytes=index_interval_bytes,
        batch_count=n,
        valid_bytes=scan.valid_bytes,
        stop=scan.stop,
        problem=scan.problem,
        fatal=scan.fatal,
        plan_end=m,
        entries=rows(selected),
        last_row=rows(np.array([m - 1]))[0] if m else None,
        stop_row=rows(np.array([m]))[0] if m < n else None,
        events=transaction_events(scan, min(m + 1, n)),
        last_offset=int(last_offsets[-1]) if n else None,
        raw_max=int(ts.max()) if n else None,
        answers=answer_probes(scan, probes),
        epoch_starts=leader_epoch_starts(scan, m),
        producers=producer_end_states(scan, m),
    )


def leader_epoch_starts(scan: LogScan, limit: int) -> npt.NDArray[np.void]:
    """The :data:`EPOCH_DTYPE` starts among the first ``limit`` batches (the reference)."""
    epochs = _column(scan.partition_leader_epochs, scan)[:limit].astype(np.int64)
    epochs = np.where(scan.magic[:limit] >= 2, epochs, -1)
    before = np.maximum.accumulate(np.concatenate(([-1], epochs[:-1]))) if limit else epochs
    rising = np.flatnonzero(epochs > before)  # >= 0 follows: ``before`` is at least -1
    out = np.empty(len(rising), EPOCH_DTYPE)
    out["epoch"] = epochs[rising]
    out["start_offset"] = scan.base_offsets[rising]
    return out


def _column(values: np.ndarray | None, scan: LogScan) -> np.ndarray:
    if values is None:
        raise IndexArgumentError(
            f"{scan.path}: the scan has no epoch or marker columns (batch_walk.scan_buffer fills them)"
        )
    return values


def producer_end_states(scan: LogScan, limit: int) -> npt.NDArray[np.void]:
    """The :data:`PRODUCER_DTYPE` states after the first ``limit`` batches (the reference: what appending each batch
    in turn leaves, as ``LogSegment.updateProducerState`` appends them with origin REPLICATION). A data batch: epoch,
    its BatchMetadata (last sequence = ``incrementSequence(baseSequence, lastOffsetDelta)`` or -1 without a base
    sequence, last offset, offset delta), timestamp = its max timestamp, and a transaction opened at its base offset
    if it is transactional and none is open. A marker (the first record of a non-empty control batch): epoch (a
    new epoch clears the BatchMetadata), coordinator epoch, timestamp = its record's, no open transaction.

    Computed per producer on whole columns (the batches grouped by producer id, in file order within a producer):
    the last batch gives ``epoch`` and ``timestamp``; the last data batch the BatchMetadata, unless a later marker
    changed the epoch (cleared); the last marker the coordinator epoch; the first transactional data batch after the
    last marker the open transaction."""
    magic, pids, attrs = scan.magic[:limit], scan.producer_ids[:limit], scan.attributes[:limit]
    control = (attrs & ATTR_CONTROL) != 0
    markers = scan.marker_types[:limit]
    is_marker = control & ((markers == MARKER_ABORT) | (markers == MARKER_COMMIT))
    chosen = np.flatnonzero((magic >= 2) & (pids > -1) & (~control | is_marker))
    sequences = _column(scan.base_sequences, scan)
    coordinator_epochs = _column(scan.marker_coordinator_epochs, scan)
    marker_stamps = _column(scan.marker_timestamps, scan)
    n = len(chosen)
    if n == 0:
        return np.empty(0, PRODUCER_DTYPE)
    # The chosen batches grouped by producer id, file order kept within a group (a stable sort).
    order = chosen[np.argsort(pids[chosen], kind="stable")]
    pid = pids[order]
    epoch = scan.producer_epochs[order]
    marker = is_marker[order]
    data = ~marker
    starts_group = np.empty(n, bool)
    starts_group[0] = True
    np.not_equal(pid[1:], pid[:-1], out=starts_group[1:])
    starts = np.flatnonzero(starts_group)
    ends = np.append(starts[1:], n) - 1
    group = np.cumsum(starts_group) - 1
    at = np.arange(n)

    def last_where(condition: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Per group, the position (in ``order``) of its last batch meeting ``condition``, -1 if none."""
        return np.maximum.reduceat(np.where(condition, at, -1), starts)

    last_data = last_where(data)
    last_marker = last_where(marker)
    # maybeUpdateProducerEpoch: a marker whose epoch differs from the producer's batch before it clears the metadata
    epoch_changes = np.zeros(n, bool)
    np.not_equal(epoch[1:], epoch[:-1], out=epoch_changes[1:])
    cleared = last_where(marker & epoch_changes & ~starts_group) > last_data
    has_data = last_data >= 0
    meta = np.where(cleared, META_CLEARED, np.where(has_data, META_SET, META_INHERIT))
    kept = has_data & ~cleared
    data_at = order[np.maximum(last_data, 0)]
    base = scan.base_offsets[data_at]
    last = scan.last_offsets[data_at]
    with np.errstate(over="ignore"):  # Java's long and int arithmetic wraps
        delta = (last - base).astype(np.int32).astype(np.int64)  # the int32 lastOffsetDelta
    sequence = sequences[data_at].astype(np.int64)
    last_sequence = np.where(sequence == -1, -1, _increment_sequence(sequence, delta))
    # a transaction opens at the first transactional data batch after the producer's last marker
    opens = data & ((attrs[order] & ATTR_TRANSACTIONAL) != 0) & (at > last_marker[group])
    first_open = np.minimum.reduceat(np.where(opens, at, n), starts)
    marker_at = order[np.maximum(last_marker, 0)]
    last_at = order[ends]
    out = np.empty(len(starts), PRODUCER_DTYPE)
    out["producer_id"] = pid[starts]
    out["first_epoch"] = epoch[starts]
    out["epoch"] = epoch[ends]
    out["meta"] = meta
    out["has_marker"] = last_marker >= 0
    out["last_sequence"] = np.where(kept, last_sequence, -1)
    out["last_offset"] = np.where(kept, last, -1)
    out["offset_delta"] = np.where(kept, delta, 0)
    out["timestamp"] = np.where(marker[ends], marker_stamps[last_at], scan.max_timestamps[last_at])
    out["coordinator_epoch"] = np.where(last_marker >= 0, coordinator_epochs[marker_at], -1)
    out["txn_first_offset"] = np.where(first_open < n, scan.base_offsets[order[np.minimum(first_open, n - 1)]], -1)
    return out[np.argsort(order[starts], kind="stable")]  # in the order of each producer's first batch


def _int32(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``values`` as Java's ``int`` arithmetic leaves them (int64 values, none overflowing on the way)."""
    return ((values + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _increment_sequence(sequences: npt.NDArray[np.int64], increments: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` of each pair, in Java's wrapping ``int`` arithmetic (past
    Integer.MAX_VALUE the sequence goes on from 0); int32 values held in int64."""
    past = sequences > _int32(INT32_MAX - increments)
    return np.where(past, _int32(increments - _int32(INT32_MAX - sequences) - 1), _int32(sequences + increments))


def select_indexed_batches(positions: np.ndarray, sizes: np.ndarray, interval: int) -> npt.NDArray[np.int64]:
    """Indices of the batches that get an index entry (greedy, exactly Kafka's sequential rule)."""
    n = len(positions)
    if n <= 1:
        return np.empty(0, dtype=np.int64)
    if bool(np.all(sizes[:-1] > interval)):
        return np.arange(1, n, dtype=np.int64)  # every batch but the first
    chosen: list[int] = []
    last = 0
    search = positions.searchsorted
    while True:
        i = int(search(last + interval, side="right"))
        if i >= n:
            break
        chosen.append(i)
        last = int(positions[i])
    return np.asarray(chosen, dtype=np.int64)


def answer_probes(scan: LogScan, probes: Probes) -> ProbeAnswers:
    """:class:`ProbeAnswers` from a scan's columns (the reference)."""
    n = scan.batch_count
    q = probes.positions
    inside = (q >= 0) & (q < scan.valid_bytes)
    batch = np.clip(np.searchsorted(scan.positions, q, side="right") - 1, 0, None)
    if n:
        starts = np.where(inside, scan.positions[batch], -1)
        bases = np.where(inside, scan.base_offsets[batch], 0)
        previous = np.where(batch > 0, scan.last_offsets[np.maximum(batch - 1, 0)], NO_OFFSET)
        previous = np.where(inside, previous, NO_OFFSET)
        reach = np.searchsorted(np.maximum.accumulate(scan.last_offsets), probes.offsets, side="left")
        running = np.maximum.accumulate(scan.max_timestamps)[np.minimum(reach, n - 1)]
        running = np.where(reach < n, running, NO_OFFSET)
    else:
        starts = np.full(len(q), -1, np.int64)
        bases = np.zeros(len(q), np.int64)
        previous = np.full(len(q), NO_OFFSET, np.int64)
        running = np.full(len(probes.offsets), NO_OFFSET, np.int64)
    return ProbeAnswers(
        probes, starts.astype(np.int64), bases.astype(np.int64), previous.astype(np.int64), running.astype(np.int64)
    )


def transaction_events(scan: LogScan, limit: int) -> np.ndarray:
    """The producer-state events of the first ``limit`` batches: v2 batches with a producer id, compacted.

    Empty control batches are skipped (Kafka ignores them); markers carry their control type. A control
    batch that is not a well-formed ABORT or COMMIT marker changes no state either: Kafka throws while
    appending it (a malformed marker ends the valid data after it; an unknown type is fatal).
    """
    magic = scan.magic[:limit]
    pids = scan.producer_ids[:limit]
    attrs = scan.attributes[:limit]
    control = (attrs & ATTR_CONTROL) != 0
    is_marker = (scan.marker_types[:limit] == MARKER_ABORT) | (scan.marker_types[:limit] == MARKER_COMMIT)
    mask = (magic >= 2) & (pids > -1) & ~(control & ~is_marker)
    idx = np.flatnonzero(mask)
    events = np.empty(len(idx), dtype=EVENT_DTYPE)
    events["batch"] = idx
    events["producer_id"] = pids[idx]
    events["offset"] = scan.base_offsets[:limit][idx]
    events["position"] = scan.positions[:limit][idx]
    kind = np.where((attrs[idx] & ATTR_TRANSACTIONAL) != 0, EVENT_TXN_DATA, EVENT_DATA)
    markers = scan.marker_types[:limit][idx]
    kind = np.where(control[idx] & (markers == MARKER_ABORT), EVENT_ABORT, kind)
    kind = np.where(control[idx] & (markers == MARKER_COMMIT), EVENT_COMMIT, kind)
    events["kind"] = kind
    return compact_events(events)


def compact_events(events: np.ndarray) -> np.ndarray:
    """Drop the data events the replay cannot notice: a data event whose producer's previous event in
    the segment has the same kind (both transactional or both not).

    Lossless for :func:`indexlib.recovery.producer_state.replay_segment` from any starting state: after a
    transactional batch the producer's transaction is open, so a second one changes nothing; after a
    non-transactional batch it is not open (or the replay already stopped there), so a second one is
    harmless too. Markers are all kept. Bounds the events per segment by producers x transactions,
    not by batches (idempotent producers write a producer id on every batch). Prefix-stable: compacting
    the first ``k`` events keeps exactly the kept events among them.
    """
    if len(events) < 2:
        return events
    kind, pid = events["kind"], events["producer_id"]
    data = kind <= EVENT_TXN_DATA
    # pass 1 (linear): runs of one producer's same-kind data events
    repeat = np.zeros(len(events), dtype=bool)
    repeat[1:] = data[1:] & (pid[1:] == pid[:-1]) & (kind[1:] == kind[:-1])
    events = events[~repeat]
    if len(events) < 2:
        return events
    # pass 2: the same, between each producer's own consecutive events (interleaved producers)
    kind, pid = events["kind"], events["producer_id"]
    order = np.argsort(pid, kind="stable")
    k, p = kind[order], pid[order]
    repeat_sorted = np.zeros(len(events), dtype=bool)
    repeat_sorted[1:] = (k[1:] <= EVENT_TXN_DATA) & (p[1:] == p[:-1]) & (k[1:] == k[:-1])
    repeat = np.empty_like(repeat_sorted)
    repeat[order] = repeat_sorted
    return events[~repeat]


# ------------------------------------------------------------------------------- the kernel's result
def from_kernel(
    raw: dict[str, Any], path: str, file_size: int, base_offset: int, index_interval_bytes: int, probes: Probes
) -> LogSummary:
    """The :class:`LogSummary` of what ``_kernel.scan_segment`` returned for ``file_size`` bytes of ``path``."""
    answers = np.frombuffer(raw["offset_answers"], np.int64).reshape(-1, 3)  # columns: views, no copies

    def row(values: tuple[int, ...] | None) -> np.void | None:
        return None if values is None else np.array([values], ROW_DTYPE)[0]

    return LogSummary(
        path=path,
        file_size=file_size,
        base_offset=base_offset,
        index_interval_bytes=index_interval_bytes,
        batch_count=raw["batch_count"],
        valid_bytes=raw["valid_bytes"],
        stop=STOP_CODES[raw["stop"]],
        problem=problem_from_code(*raw["problem"]) if raw["problem"] is not None else None,
        fatal=problem_from_code(*raw["fatal"]) if raw["fatal"] is not None else None,
        plan_end=raw["plan_end"],
        entries=np.frombuffer(raw["entries"], ROW_DTYPE),
        last_row=row(raw["last_row"]),
        stop_row=row(raw["stop_row"]),
        events=np.frombuffer(raw["events"], EVENT_DTYPE),
        last_offset=raw["last_offset"],
        raw_max=raw["raw_max"],
        answers=ProbeAnswers(
            probes,
            answers[:, 0],
            answers[:, 1],
            answers[:, 2],
            np.frombuffer(raw["time_answers"], np.int64),
        ),
        epoch_starts=np.frombuffer(raw["epoch_starts"], EPOCH_DTYPE),
        producers=np.frombuffer(raw["producers"], PRODUCER_DTYPE) if raw["producers"] is not None else None,
    )


def unreadable_summary(path: str, base_offset: int, index_interval_bytes: int, exc: BaseException) -> LogSummary:
    """The summary of a segment that cannot be read: no batch, and a ``fatal`` that says why."""
    summary = summarize(scan_buffer(b"", 0, path), base_offset, index_interval_bytes)
    summary.fatal = ScanProblem("unreadable_segment", 0, 0, f"cannot read {path}: {describe_error(exc)}")
    return summary


# ------------------------------------------------------------------------------ the existing indexes
@dataclass(frozen=True)
class ExistingIndex:
    """An existing ``.index`` or ``.timeindex`` as verify reads it: its whole entries up to where the file's
    stored bytes end, and ``sparse_entries`` more whole entries after that, in a trailing hole (zeros that
    were never read: a preallocated index of a running or crashed broker); the file's length; or why it could
    not be read (``error``); ``exists`` False when there is no such file. ``changed``: the file changed
    while it was read (a running broker's active segment), so its entries may mix two versions. ``identity``:
    the regular file that was read (:func:`~indexlib.format.index_file.file_identity`), ``None`` for a
    symbolic link, a file with more than one link (a hard-linked copy elsewhere) or a file not read whole."""

    path: str
    exists: bool
    entries: npt.NDArray[np.void]
    length: int
    error: str | None = None
    sparse_entries: int = 0
    changed: bool = False
    identity: FileIdentity | None = None


def probes_for(existing: dict[str, ExistingIndex], base_offset: int) -> Probes:
    """Every position of the ``.index`` entries and every offset of the ``.timeindex`` entries."""
    offsets = existing[".index"].entries
    times = existing[".timeindex"].entries
    return Probes.of(offsets["position"].astype(np.int64), base_offset + times["relative_offset"].astype(np.int64))
