"""The records of ``__remote_log_metadata``, where Kafka's topic-based remote log metadata manager (KIP-405) keeps
what tiered storage holds, and their replay to each remote segment's latest state.

A record's key is null; its value is framed as a KRaft metadata record (``AbstractApiMessageSerde``: frame
version 1, the type and its version as unsigned varints, then a flexible-version body), with the types of
Kafka 4.1.0's ``storage/src/main/resources/message/*.json``: 0 a segment's metadata (added in
``COPY_SEGMENT_STARTED``), 1 an update of a segment's state (and custom metadata), 2 a partition's deletion,
3 a segment in a snapshot (the file-based snapshots of the manager's own cache, not written to the topic).

:func:`describe_record` gives what ``kafka-dump-log.sh --remote-log-metadata-decoder`` prints of a value (the
``toString`` of the record's Java object). :class:`RemoteLogReplay` replays records in their partitions' offset
order as the manager's cache does: an update or a delete state finishes its segment's state; a segment whose
update arrives without its first record (compacted or retained away) is kept, marked ``orphan_update``.

Invariants: pure (the records come from :mod:`indexlib.storage.remote_log_metadata_files`); nothing is guessed
about a type or version the schemas do not define; a record that does not read is counted with its reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InvalidRecordError
from .message_schema import Field as F
from .message_schema import Message
from .record_fields import FieldReader

#: the topic and its partitions' dir names: ``__remote_log_metadata-<n>``
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

_TOPIC_ID_PARTITION = (F("name", "string"), F("id", "uuid"), F("partition", "int32"))
_SEGMENT_ID = (F("topicIdPartition", "struct", struct=_TOPIC_ID_PARTITION), F("id", "uuid"))
_EPOCHS = F("segmentLeaderEpochs", "[]", struct=(F("leaderEpoch", "int32"), F("offset", "int64")))
_CUSTOM = F("customMetadata", "bytes", nullable_since=0, default=None)

RemoteLogSegmentMetadataRecord = Message(
    "RemoteLogSegmentMetadataRecord",
    (0, 0),
    0,
    (
        F("remoteLogSegmentId", "struct", struct=_SEGMENT_ID),
        F("startOffset", "int64"),
        F("endOffset", "int64"),
        F("brokerId", "int32"),
        F("maxTimestampMs", "int64"),
        F("eventTimestampMs", "int64"),
        _EPOCHS,
        F("segmentSizeInBytes", "int32"),
        _CUSTOM,
        F("remoteLogSegmentState", "int8"),
        F("txnIndexEmpty", "bool", tag=0),
    ),
)
RemoteLogSegmentMetadataUpdateRecord = Message(
    "RemoteLogSegmentMetadataUpdateRecord",
    (0, 0),
    0,
    (
        F("remoteLogSegmentId", "struct", struct=_SEGMENT_ID),
        F("brokerId", "int32"),
        F("eventTimestampMs", "int64"),
        _CUSTOM,
        F("remoteLogSegmentState", "int8"),
    ),
)
RemotePartitionDeleteMetadataRecord = Message(
    "RemotePartitionDeleteMetadataRecord",
    (0, 0),
    0,
    (
        F("topicIdPartition", "struct", struct=_TOPIC_ID_PARTITION),
        F("brokerId", "int32"),
        F("eventTimestampMs", "int64"),
        F("remotePartitionDeleteState", "int8"),
    ),
)
RemoteLogSegmentMetadataSnapshotRecord = Message(
    "RemoteLogSegmentMetadataSnapshotRecord",
    (0, 0),
    0,
    (
        F("segmentId", "uuid"),
        F("startOffset", "int64"),
        F("endOffset", "int64"),
        F("brokerId", "int32"),
        F("maxTimestampMs", "int64"),
        F("eventTimestampMs", "int64"),
        _EPOCHS,
        F("segmentSizeInBytes", "int32"),
        _CUSTOM,
        F("remoteLogSegmentState", "int8"),
        F("txnIndexEmpty", "bool", tag=0),
    ),
)

#: apiKey -> (the Java class a record becomes, its schema)
REMOTE_LOG_METADATA_TYPES: dict[int, tuple[str, Message]] = {
    0: ("RemoteLogSegmentMetadata", RemoteLogSegmentMetadataRecord),
    1: ("RemoteLogSegmentMetadataUpdate", RemoteLogSegmentMetadataUpdateRecord),
    2: ("RemotePartitionDeleteMetadata", RemotePartitionDeleteMetadataRecord),
    3: ("RemoteLogSegmentMetadataSnapshot", RemoteLogSegmentMetadataSnapshotRecord),
}
#: ``RemoteLogSegmentState`` by id
SEGMENT_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED")
#: ``RemotePartitionDeleteState`` by id
PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")
#: the state transitions ``RemoteLogSegmentState.isValidTransition`` allows (a state to itself is allowed too)
_NEXT_STATES = {0: {1, 2}, 1: {2}, 2: {3}, 3: set()}
#: Aiven's custom metadata fields (``SegmentCustomMetadataField``): tag -> name
AIVEN_CUSTOM_FIELDS = {0: "remote_size", 1: "object_prefix", 2: "object_key"}


def read_remote_log_metadata(value: bytes | memoryview) -> tuple[int, dict[str, Any]]:
    """(type, fields) of one record's value; :class:`InvalidRecordError` when it does not parse whole."""
    from .metadata_records import read_framed_record

    record = read_framed_record(value, REMOTE_LOG_METADATA_TYPES)
    if record.type_id in (0, 1, 3):
        state = record.data["remoteLogSegmentState"]
        if not 0 <= state < len(SEGMENT_STATES):
            raise InvalidRecordError(f"Unknown RemoteLogSegmentState id: {state}")
    else:
        state = record.data["remotePartitionDeleteState"]
        if not 0 <= state < len(PARTITION_DELETE_STATES):
            raise InvalidRecordError(f"Unknown RemotePartitionDeleteState id: {state}")
    return record.type_id, record.data


def _tip(t: dict[str, Any]) -> str:
    return f"{t['id']}:{t['name']}-{t['partition']}"


def _custom(data: bytes | None) -> str:
    return "Optional.empty" if data is None else f"Optional[CustomMetadata{{{len(data)} bytes}}]"


def _epochs(entries: list[dict[str, Any]]) -> str:
    ordered = sorted((e["leaderEpoch"], e["offset"]) for e in entries)
    return "{" + ", ".join(f"{epoch}={offset}" for epoch, offset in ordered) + "}"


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def describe_record(type_id: int, d: dict[str, Any]) -> str:
    """The record as its Java object's ``toString`` shows it (what Kafka's formatter and dump print)."""
    if type_id == 2:
        state = PARTITION_DELETE_STATES[d["remotePartitionDeleteState"]]
        return (
            f"RemotePartitionDeleteMetadata{{topicPartition={_tip(d['topicIdPartition'])}, state={state}, "
            f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}"
        )
    state = SEGMENT_STATES[d["remoteLogSegmentState"]]
    custom = _custom(d["customMetadata"])
    if type_id == 3:
        return (
            f"RemoteLogSegmentMetadataSnapshot{{segmentId={d['segmentId']}, startOffset={d['startOffset']}, "
            f"endOffset={d['endOffset']}, maxTimestampMs={d['maxTimestampMs']}, "
            f"segmentLeaderEpochs={_epochs(d['segmentLeaderEpochs'])}, segmentSizeInBytes={d['segmentSizeInBytes']}, "
            f"customMetadata={custom}, state={state}, txnIdxEmpty={_bool(d['txnIndexEmpty'])}}}"
        )
    sid = d["remoteLogSegmentId"]
    segment = f"RemoteLogSegmentId{{topicIdPartition={_tip(sid['topicIdPartition'])}, id={sid['id']}}}"
    if type_id == 1:
        return (
            f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={segment}, customMetadata={custom}, state={state}, "
            f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}"
        )
    return (
        f"RemoteLogSegmentMetadata{{remoteLogSegmentId={segment}, startOffset={d['startOffset']}, "
        f"endOffset={d['endOffset']}, brokerId={d['brokerId']}, maxTimestampMs={d['maxTimestampMs']}, "
        f"eventTimestampMs={d['eventTimestampMs']}, segmentLeaderEpochs={_epochs(d['segmentLeaderEpochs'])}, "
        f"segmentSizeInBytes={d['segmentSizeInBytes']}, customMetadata={custom}, state={state}, "
        f"txnIdxEmpty={_bool(d['txnIndexEmpty'])}}}"
    )


def decode_remote_log_metadata(key: bytes | None, value: bytes | None, offset: int) -> tuple[str | None, str | None]:
    """``(key, value)`` of one record as ``--remote-log-metadata-decoder`` prints them: no key, the record's
    ``toString``, or why it cannot be read."""
    if value is None:
        return None, f"Error at {offset}, skipping. the record has no value"
    try:
        return None, describe_record(*read_remote_log_metadata(value))
    except InvalidRecordError as exc:
        return None, f"Error at {offset}, skipping. {exc}"


def aiven_custom_metadata(data: bytes | None) -> dict[str, Any]:
    """Aiven's custom metadata (Kafka tagged fields: ``remote_size``, ``object_prefix``, ``object_key``); empty
    when there is none; :class:`InvalidRecordError` when the bytes are not tagged fields."""
    if not data:
        return {}
    reader = FieldReader(data)
    out: dict[str, Any] = {}
    for _ in range(reader.unsigned_varint("tagged field count")):
        tag = reader.unsigned_varint("tag")
        size = reader.unsigned_varint("tagged field size")
        body = FieldReader(reader.take(size, f"tagged field {tag}"))
        if tag == 0:
            out["remote_size"] = body.varlong("remote_size")
        elif tag in (1, 2):
            length = body.unsigned_varint(AIVEN_CUSTOM_FIELDS[tag]) - 1
            out[AIVEN_CUSTOM_FIELDS[tag]] = None if length < 0 else body.take(length, "string").decode("utf-8")
    if reader.remaining:
        raise InvalidRecordError(f"{reader.remaining} byte(s) after the custom metadata's tagged fields")
    return out


# ------------------------------------------------------------------------------------------ the replay
@dataclass(frozen=True)
class RemoteSegment:
    """One remote segment's latest state. ``leader_epochs``: (epoch, start offset) pairs, ascending;
    ``custom_metadata``: the RSM's bytes (None: none); ``offset``: where its latest record is in
    ``metadata_partition`` of the metadata topic; ``orphan_update``: its first record was never seen."""

    topic: str
    topic_id: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]
    size: int
    custom_metadata: bytes | None
    state: str
    txn_index_empty: bool
    metadata_partition: int
    offset: int
    orphan_update: bool = False

    @property
    def topic_partition(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_json(self) -> dict[str, Any]:
        out = {
            "topic": self.topic, "topic_id": self.topic_id, "partition": self.partition,
            "segment_id": self.segment_id, "start_offset": self.start_offset, "end_offset": self.end_offset,
            "broker_id": self.broker_id, "max_timestamp_ms": self.max_timestamp_ms,
            "event_timestamp_ms": self.event_timestamp_ms,
            "leader_epochs": [list(e) for e in self.leader_epochs], "size": self.size, "state": self.state,
            "txn_index_empty": self.txn_index_empty,
            "custom_metadata": None if self.custom_metadata is None else self.custom_metadata.hex(),
            "metadata": f"{REMOTE_LOG_METADATA_TOPIC}-{self.metadata_partition}@{self.offset}",
        }  # fmt: skip
        if self.orphan_update:
            out["orphan_update"] = True
        return out


@dataclass
class RemoteLogInventory:
    """What the metadata says: every remote segment by id, the partitions whose deletion was recorded (topic
    id-partition -> state), records that could not be read (reason -> count), state transitions Kafka would
    refuse (reason -> count), and how many records were replayed."""

    segments: dict[str, RemoteSegment] = field(default_factory=dict)
    deleted_partitions: dict[str, str] = field(default_factory=dict)
    unreadable: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    records: int = 0
    stopped: list[str] = field(default_factory=list)

    def by_partition(self) -> dict[str, list[RemoteSegment]]:
        """``topic-partition`` -> its segments by start offset (then by the order they were added)."""
        out: dict[str, list[RemoteSegment]] = {}
        for segment in self.segments.values():
            out.setdefault(segment.topic_partition, []).append(segment)
        return {tp: sorted(s, key=lambda x: (x.start_offset, x.end_offset)) for tp, s in sorted(out.items())}


class RemoteLogReplay:
    """Replays records of one or more metadata partitions; call :meth:`apply` in each partition's offset order."""

    def __init__(self) -> None:
        self.state = RemoteLogInventory()

    def skip(self, first: int, last: int, why: str) -> None:
        self.state.unreadable[why] += last - first + 1

    def stop(self, why: str) -> None:
        self.state.stopped.append(why)

    def apply(self, metadata_partition: int, offset: int, record: tuple[int, dict[str, Any]] | str) -> None:
        self.state.records += 1
        if isinstance(record, str):
            self.state.unreadable[record] += 1
            return
        type_id, d = record
        if type_id == 0:
            self._add(metadata_partition, offset, d)
        elif type_id == 1:
            self._update(metadata_partition, offset, d)
        elif type_id == 2:
            tip = d["topicIdPartition"]
            self.state.deleted_partitions[_tip(tip)] = PARTITION_DELETE_STATES[d["remotePartitionDeleteState"]]
        # type 3 (a snapshot of the manager's cache) is never written to the topic: nothing to replay

    def _add(self, metadata_partition: int, offset: int, d: dict[str, Any]) -> None:
        sid = d["remoteLogSegmentId"]
        tip = sid["topicIdPartition"]
        if d["remoteLogSegmentState"] != 0:
            self.state.refused["a segment added in a state other than COPY_SEGMENT_STARTED"] += 1
        self.state.segments[sid["id"]] = RemoteSegment(
            topic=tip["name"], topic_id=tip["id"], partition=tip["partition"], segment_id=sid["id"],
            start_offset=d["startOffset"], end_offset=d["endOffset"], broker_id=d["brokerId"],
            max_timestamp_ms=d["maxTimestampMs"], event_timestamp_ms=d["eventTimestampMs"],
            leader_epochs=tuple(sorted((e["leaderEpoch"], e["offset"]) for e in d["segmentLeaderEpochs"])),
            size=d["segmentSizeInBytes"], custom_metadata=d["customMetadata"],
            state=SEGMENT_STATES[d["remoteLogSegmentState"]], txn_index_empty=d["txnIndexEmpty"],
            metadata_partition=metadata_partition, offset=offset,
        )  # fmt: skip

    def _update(self, metadata_partition: int, offset: int, d: dict[str, Any]) -> None:
        sid = d["remoteLogSegmentId"]
        tip = sid["topicIdPartition"]
        new_state = d["remoteLogSegmentState"]
        current = self.state.segments.get(sid["id"])
        if current is None:
            self.state.segments[sid["id"]] = RemoteSegment(
                topic=tip["name"], topic_id=tip["id"], partition=tip["partition"], segment_id=sid["id"],
                start_offset=-1, end_offset=-1, broker_id=d["brokerId"], max_timestamp_ms=-1,
                event_timestamp_ms=d["eventTimestampMs"], leader_epochs=(), size=-1,
                custom_metadata=d["customMetadata"], state=SEGMENT_STATES[new_state], txn_index_empty=False,
                metadata_partition=metadata_partition, offset=offset, orphan_update=True,
            )  # fmt: skip
            return
        old_state = SEGMENT_STATES.index(current.state)
        if new_state != old_state and new_state not in _NEXT_STATES[old_state]:
            self.state.refused[f"{current.state} -> {SEGMENT_STATES[new_state]}"] += 1
            return
        self.state.segments[sid["id"]] = replace(
            current, state=SEGMENT_STATES[new_state], custom_metadata=d["customMetadata"], broker_id=d["brokerId"],
            event_timestamp_ms=d["eventTimestampMs"], metadata_partition=metadata_partition, offset=offset,
        )  # fmt: skip

    def finish(self) -> RemoteLogInventory:
        return self.state
