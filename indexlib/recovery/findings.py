"""Every kind of finding verify can report, with what it means and what it makes a run do.

Policy reads this registry, never a kind's name: a repair rewrites the file of every ``REBUILD_FILE``
finding, writes the file Kafka would have written for every ``REWRITE_FROM_LOG`` one (a producer snapshot,
``leader-epoch-checkpoint``) where the log says what that is, cuts the ``.log`` at the valid prefix for ``CUT_TAIL`` (only when asked to), and writes nothing
for a segment with a ``REFUSE_SEGMENT`` finding (Kafka's own recovery would fail there). ``concerns`` is
the file a finding of that kind names: an index suffix, ``.log``, ``"index file"`` (any of the three
index files), ``"partition dir"`` (any file in it), ``"log dir"`` (a file of the log dir), ``"remote object"`` (an
object of a tiered segment) or ``"remote-log-index-cache"`` (a broker's cached copy of one). The README's findings table is checked against
this registry by a test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from ..format.errors import KafkaIndexError
from ..format.layout import INDEX_SUFFIXES, segment_file

ERROR = "error"
INFO = "info"

REBUILD_FILE = "rebuild the file"
REWRITE_FROM_LOG = "rewrite the file from the log"
CUT_TAIL = "cut the .log tail when asked"
REFUSE_SEGMENT = "refuse the segment"
NOTHING = "nothing"


class FindingKindError(KafkaIndexError, ValueError):
    """A finding of a kind the registry does not hold, or with another severity than its kind's."""


@dataclass(frozen=True)
class FindingKind:
    name: str
    severity: str  # ERROR: the file is wrong (verify exits 1); INFO: worth knowing, nothing is wrong
    concerns: str
    triggers: str
    meaning: str


def _kinds(*kinds: FindingKind) -> dict[str, FindingKind]:
    registry: dict[str, FindingKind] = {}
    for kind in kinds:
        assert kind.name not in registry, f"finding kind {kind.name} registered twice"
        registry[kind.name] = kind
    return registry


def _index(name: str, concerns: str, meaning: str) -> FindingKind:
    return FindingKind(name, ERROR, concerns, REBUILD_FILE, meaning)


def _tail(name: str, meaning: str) -> FindingKind:
    return FindingKind(name, ERROR, ".log", CUT_TAIL, meaning)


def _refuse(name: str, meaning: str) -> FindingKind:
    return FindingKind(name, ERROR, ".log", REFUSE_SEGMENT, meaning)


KINDS: dict[str, FindingKind] = _kinds(
    # ---- missing, torn or unreadable index files
    _index("index_missing", ".index", "the segment has no .index"),
    _index("timeindex_missing", ".timeindex", "the segment has no .timeindex"),
    _index(
        "txnindex_missing",
        ".txnindex",
        "the segment has aborted transactions but no .txnindex (a 0-byte or absent one is otherwise fine)",
    ),
    _index(
        "index_empty",
        ".index",
        "an inactive segment's .index is 0 bytes while its rebuild holds entries: Kafka accepts it, but every lookup "
        "in the segment then scans its batches from the start, and its own recovery would write those entries",
    ),
    _index("bad_length", "index file", "the file is not a whole number of entries (8, 12 or 34 bytes): a torn write"),
    _index("unreadable_file", "index file", "the index file cannot be read (permissions, not a regular file)"),
    _index(
        "untrimmed_zero_tail",
        "index file",
        "zero-filled preallocated entries at the end of an inactive segment's index (Kafka reads them as entries)",
    ),
    FindingKind(
        "preallocated_zero_tail",
        INFO,
        "index file",
        NOTHING,
        "the active segment's index is preallocated with zeros, as a running broker leaves it",
    ),
    FindingKind(
        "index_changed_during_read",
        INFO,
        "index file",
        NOTHING,
        "the file changed while verify read it (a running broker's active segment); it was not checked",
    ),
    # ---- .index entries
    _index("offset_below_base", ".index", "an entry's offset is below the segment's base offset"),
    _index("offset_not_increasing", ".index", "an entry's offset is not above the previous entry's"),
    _index("position_not_increasing", ".index", "an entry's position is not above the previous entry's"),
    _index("position_outside_valid_data", ".index", "an entry points past the valid data of the .log"),
    _index("position_not_batch_start", ".index", "an entry points into the middle of a batch"),
    _index("offset_before_batch", ".index", "an entry's offset is below the first offset of the batch it points to"),
    _index(
        "offset_inside_previous_batch",
        ".index",
        "an entry's offset belongs to the batch before the one it points to",
    ),
    # ---- .timeindex entries
    _index("timestamp_not_increasing", ".timeindex", "an entry's timestamp is not above the previous entry's"),
    _index("time_offset_decreasing", ".timeindex", "an entry's offset is below the previous entry's"),
    _index("time_offset_outside_segment", ".timeindex", "an entry's offset is outside the segment's offsets"),
    _index(
        "timestamp_not_running_max",
        ".timeindex",
        "an entry's timestamp is not the largest batch timestamp up to its offset",
    ),
    _index(
        "time_index_missing_final_entry",
        ".timeindex",
        "an inactive segment's time index lacks the entry Kafka appends on roll (time-based retention reads it)",
    ),
    # ---- .txnindex records
    _index("txn_bad_version", ".txnindex", "a record's version is not 0"),
    _index("txn_last_offset_not_increasing", ".txnindex", "a record's last offset is not above the previous one's"),
    _index("txn_outside_segment", ".txnindex", "a record's last offset is outside the segment's valid offsets"),
    _index("txn_not_abort_marker", ".txnindex", "a record's last offset is not an ABORT marker of its producer"),
    _index("txn_entry_missing", ".txnindex", "an aborted transaction replayed from the log is not in the file"),
    _index("txn_entry_unexpected", ".txnindex", "a record matches no aborted transaction replayed from the log"),
    _index(
        "txn_last_stable_offset_mismatch",
        ".txnindex",
        "a record's last stable offset differs from the replay's (a raised one makes the broker stop collecting "
        "aborted transactions early, so read_committed consumers receive aborted records)",
    ),
    # ---- an invalid .log tail: indexes cover the valid prefix; only --truncate-corrupt-tail cuts the .log
    _tail("log_crc_mismatch", "a batch's CRC does not match: the .log is invalid from that batch on"),
    _tail("log_size_below_minimum", "a batch's size field is below the minimum: the .log is invalid from there"),
    _tail("log_truncated_batch", "the last batch runs past the end of the .log"),
    _tail("log_invalid_marker", "a transaction marker is malformed: the .log is invalid after that batch"),
    _tail("log_short_tail", "1 to 17 bytes after the last batch, too short for a batch header"),
    _tail("log_zero_tail", "zero bytes after the last batch (a preallocated or unflushed tail)"),
    # ---- Kafka's recovery would fail on this segment: nothing is rebuilt for it
    _refuse("offset_overflow", "an offset does not fit the index's 32-bit relative offsets"),
    _refuse("offset_index_full", "the offset index would need more entries than segment.index.bytes holds"),
    _refuse("time_index_full", "the time index would need more entries than segment.index.bytes holds"),
    _refuse("log_offset_not_increasing", "a batch's last offset is not above the previously indexed offset"),
    _refuse("log_time_offset_not_increasing", "the time index offset would go back below the previous entry's"),
    _refuse(
        "non_transactional_in_open_transaction",
        "a producer writes a plain batch while its transaction is open (Kafka throws InvalidTxnStateException)",
    ),
    _refuse("unknown_control_type", "a control batch of an unknown type"),
    _refuse(
        "compressed_control_batch",
        "a compressed transaction marker batch that cannot be read here: its codec's package is not installed (the "
        "detail names it; pip install 'kafka-index-rebuild[decompress]'), or its records do not decompress",
    ),
    _refuse("unknown_compression", "a batch compressed with an unknown codec"),
    _refuse("unreadable_segment", "the .log cannot be read (permissions, not a regular file)"),
    # ---- the partition dir and its log dir
    FindingKind(
        "no_meta_properties",
        INFO,
        "log dir",
        NOTHING,
        "the log dir has no meta.properties, so it names no broker (--broker-id names it); Kafka writes one at start",
    ),
    FindingKind(
        "bad_meta_properties",
        ERROR,
        "log dir",
        NOTHING,
        "the log dir's meta.properties is unreadable or malformed (Kafka refuses to start on it); no broker named",
    ),
    FindingKind(
        "bad_log_start_checkpoint",
        ERROR,
        "log dir",
        NOTHING,
        "the log dir's log-start-offset-checkpoint is malformed; the replay assumes log start offset 0",
    ),
    FindingKind(
        "log_start_beyond_log_end",
        ERROR,
        "log dir",
        NOTHING,
        "the log dir's log-start-offset-checkpoint gives a partition a log start offset beyond its log end: the "
        "broker's next start deletes every segment of that partition",
    ),
    FindingKind(
        "bad_recovery_point_checkpoint",
        ERROR,
        "log dir",
        NOTHING,
        "the log dir's recovery-point-offset-checkpoint cannot be read as Kafka reads it: its next unclean start "
        "recovers every segment of every partition there",
    ),
    FindingKind(
        "not_a_partition_dir",
        ERROR,
        "log dir",
        NOTHING,
        "a dir in the log dir that is not <topic>-<partition> (nor Kafka's -delete/-future/-stray dirs or its "
        "remote-log-index-cache): the broker's start refuses it and fails on this log dir",
    ),
    FindingKind(
        "interrupted_recovery",
        ERROR,
        "log dir",
        NOTHING,
        "a recover did not finish changing this log dir (killed, or its recovery points could not be written; its "
        "mark, .kafka-index-recovering, names the run and partitions): run recover again, which finishes them first",
    ),
    FindingKind(
        "left_to_broker",
        INFO,
        "partition dir",
        NOTHING,
        "recover leaves this partition to the broker's own start (the KRaft metadata log; an interrupted "
        "compaction or split; a log dir the broker shut down cleanly)",
    ),
    FindingKind(
        "bad_producer_snapshot",
        ERROR,
        "partition dir",
        REWRITE_FROM_LOG,
        "a producer-state .snapshot Kafka would refuse (version, length, CRC-32C): it deletes it at its next start "
        "and replays the log from an older snapshot or the log start",
    ),
    FindingKind(
        "producer_snapshot_mismatch",
        ERROR,
        "partition dir",
        REWRITE_FROM_LOG,
        "a producer-state .snapshot whose entries disagree with the log's batches below its offset (an epoch, a "
        "sequence, an offset, a timestamp, a coordinator epoch, an open transaction): Kafka trusts it at its next start",
    ),
    FindingKind(
        "bad_leader_epoch_checkpoint",
        ERROR,
        "partition dir",
        REWRITE_FROM_LOG,
        "the partition's leader-epoch-checkpoint cannot be read as Kafka reads it (the partition fails to load)",
    ),
    FindingKind(
        "leader_epoch_not_increasing",
        ERROR,
        "partition dir",
        REWRITE_FROM_LOG,
        "leader-epoch-checkpoint entries whose epoch or start offset does not increase: the cache Kafka loads "
        "differs from the file, and a replica may truncate to the wrong offset",
    ),
    FindingKind(
        "leader_epoch_missing",
        ERROR,
        "partition dir",
        REWRITE_FROM_LOG,
        "a leader epoch the log's batches start is not in leader-epoch-checkpoint: a follower asking where that "
        "epoch ends is told another offset, and may truncate records",
    ),
    FindingKind(
        "leader_epoch_start_mismatch",
        ERROR,
        "partition dir",
        REWRITE_FROM_LOG,
        "a leader-epoch-checkpoint entry's start offset is not its epoch's first batch in the log",
    ),
    FindingKind(
        "unreadable_partition",
        ERROR,
        "partition dir",
        NOTHING,
        "the partition dir cannot be listed (permissions); nothing in it was verified or written",
    ),
    FindingKind(
        "topic_id_mismatch",
        ERROR,
        "partition dir",
        NOTHING,
        "the topic id in partition.metadata is not the cluster metadata's id for that topic name (a topic deleted "
        "and re-created under the same name): Kafka does not load it as that topic, it treats it as a stray",
    ),
    FindingKind(
        "leader_epoch_above_metadata",
        ERROR,
        "partition dir",
        NOTHING,
        "a leader-epoch-checkpoint entry has an epoch above the partition's current leader epoch in the cluster "
        "metadata: no leader ever had it",
    ),
    FindingKind(
        "partition_unknown_to_metadata",
        INFO,
        "partition dir",
        NOTHING,
        "the cluster metadata know no such partition (a deleted topic's leftovers, or a copy from another "
        "cluster): Kafka treats it as a stray",
    ),
    # ---- tiered storage (verify-remote): a remote segment's objects against __remote_log_metadata
    FindingKind(
        "remote_object_missing",
        ERROR,
        "remote object",
        NOTHING,
        "a finished remote segment lacks an object its layout requires: the broker's reads of it fail",
    ),
    FindingKind(
        "remote_metadata_mismatch",
        ERROR,
        "remote object",
        NOTHING,
        "a remote index, producer snapshot or leader-epoch blob disagrees with the segment's __remote_log_metadata "
        "record (offsets, positions or timestamps outside it, leader epochs)",
    ),
    FindingKind(
        "remote_txn_empty_flag_wrong",
        ERROR,
        "remote object",
        NOTHING,
        "the metadata says the segment's transaction index is empty (KIP-1058) but it holds aborted "
        "transactions: read_committed fetches skip it and hand out aborted records",
    ),
    FindingKind(
        "remote_manifest_mismatch",
        ERROR,
        "remote object",
        NOTHING,
        "an Aiven .rsm-manifest whose index ranges or sizes disagree with its .indexes object or the metadata: "
        "the broker reads the wrong bytes as an index",
    ),
    FindingKind(
        "remote_cache_stale",
        ERROR,
        "remote-log-index-cache",
        NOTHING,
        "a broker's cached copy of a remote index differs from the object the RSM serves now: the broker keeps "
        "serving the copy, across restarts; remote-index-cache --repair removes it",
    ),
    FindingKind(
        "remote_cache_corrupt",
        ERROR,
        "remote-log-index-cache",
        NOTHING,
        "a broker's cached copy of a remote index fails Kafka's load-time rules: fetches of that segment fail; "
        "remote-index-cache --repair removes it",
    ),
    FindingKind(
        "remote_cache_orphan",
        INFO,
        "remote-log-index-cache",
        NOTHING,
        "a cached entry of a segment the metadata does not list as finished (deleted, or never finished): "
        "nothing reads it",
    ),
    FindingKind("orphan_index_file", ERROR, "partition dir", NOTHING, "an index file without its .log"),
    FindingKind("unknown_file", INFO, "partition dir", NOTHING, "a file that is not Kafka's"),
    FindingKind(
        "skipped_file", INFO, "partition dir", NOTHING, "a file Kafka is deleting, cleaning or swapping; not verified"
    ),
    FindingKind(
        "leftover_temporary_file",
        INFO,
        "partition dir",
        NOTHING,
        "a staged file of an interrupted run; safe to delete",
    ),
)


def kind(name: str) -> FindingKind:
    """The registered kind; KeyError for a name no code may produce."""
    return KINDS[name]


@dataclass(frozen=True)
class Finding:
    """One problem (or, with severity ``"info"``, one notable fact) about one file.

    ``kind`` is a registered kind (:class:`FindingKindError` otherwise) and sets ``severity``. ``entry`` is the entry
    number in an index file or the batch number in a ``.log``; ``position`` the byte position in the
    file; ``count`` how many entries share this kind (the first one is described).
    """

    kind: str
    file: str
    entry: int | None = None
    position: int | None = None
    expected: int | str | None = None
    found: int | str | None = None
    detail: str = ""
    count: int = 1
    severity: str = ""

    def __post_init__(self) -> None:
        registered = KINDS.get(self.kind)
        if registered is None:
            raise FindingKindError(f"finding kind {self.kind!r} is not registered in indexlib.recovery.findings")
        if self.severity and self.severity != registered.severity:
            raise FindingKindError(
                f"finding kind {self.kind!r} has severity {registered.severity}, not {self.severity}"
            )
        object.__setattr__(self, "severity", registered.severity)

    def to_dict(self) -> dict[str, Any]:
        """Its fields by name (each a plain value: a shallow copy, what ``asdict`` gives, without its deep copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def files_to_rebuild(partition_dir: str, base_offset: int, findings: Iterable[Finding]) -> list[str]:
    """Suffixes of one segment's index files that a finding marks "rebuild the file" (what a repair
    rewrites), sorted."""
    names = {segment_file(partition_dir, base_offset, s): s for s in INDEX_SUFFIXES}
    return sorted({names[f.file] for f in findings if f.file in names and KINDS[f.kind].triggers == REBUILD_FILE})
