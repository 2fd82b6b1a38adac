"""The cluster's state as KRaft's metadata records leave it: topics (name and id), each partition's leader and leader
epoch, the dynamic configs of topics and brokers, and feature levels; replayed in offset order as a broker's
metadata loader replays them (``MetadataDelta``), from a snapshot (or from nothing) to the log's end.

Rules of the replay, Kafka's:

* ``TopicRecord`` adds a topic; ``RemoveTopicRecord`` removes it, its partitions and its configs;
* ``PartitionRecord`` sets a partition (its leader and leader epoch); ``PartitionChangeRecord`` with a leader
  (not -2, "no change") makes it the leader and bumps the leader epoch by one;
* ``ConfigRecord`` sets a config of a resource (topic by name; broker by id, ``""`` for the cluster-wide
  default); a null value deletes it;
* ``FeatureLevelRecord`` sets a feature's level (0 removes it);
* the records between ``BeginTransactionRecord`` and ``EndTransactionRecord`` apply at the end; those before an
  ``AbortTransactionRecord``, or still open where the log ends, never do;
* a record that cannot be read is counted (by reason) and skipped, never guessed at; every other type is
  counted as replayed and changes nothing here.

Invariants: pure (no file access: the records come from :mod:`indexlib.storage.cluster_metadata_files`); a
:class:`ClusterMetadata` describes the state after every record given, in order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .metadata_records import MetadataRecord


#: ``ConfigResource.Type`` ids of the resources whose configs matter here
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
#: ``PartitionChangeRecord.leader`` when the leader does not change
NO_LEADER_CHANGE = -2

_TOPIC, _PARTITION, _CONFIG, _PARTITION_CHANGE, _REMOVE_TOPIC, _FEATURE = 2, 3, 4, 5, 9, 12
_BEGIN, _END, _ABORT = 23, 24, 25
#: the record types the replay reads the fields of (every other type is counted, its fields never read)
APPLIED_TYPES = frozenset(
    {_TOPIC, _PARTITION, _CONFIG, _PARTITION_CHANGE, _REMOVE_TOPIC, _FEATURE, _BEGIN, _END, _ABORT}
)


@dataclass
class PartitionState:
    """A partition's leader and leader epoch, as the metadata last set them."""

    leader: int
    leader_epoch: int


@dataclass
class ClusterMetadata:
    """What the metadata say: ``topic_ids`` (name -> id), ``partitions`` ((topic id, partition) -> state),
    ``topic_configs`` (topic name -> config -> value), ``broker_configs`` (broker id, ``""`` for the cluster-wide
    default -> config -> value), ``features`` (name -> level); ``end_offset``: the offset after the last record
    replayed; ``snapshot``: the end offset of the snapshot the replay began from (None: the log from its start);
    ``skipped``: records not applied, by reason."""

    topic_ids: dict[str, str] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    end_offset: int = 0
    snapshot: int | None = None
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    stopped: str | None = None  # why the replay ended before the log's last byte (a torn or corrupt batch), if so

    def topic_name(self, topic_id: str) -> str | None:
        return next((name for name, tid in self.topic_ids.items() if tid == topic_id), None)

    def leader_epoch(self, topic: str, partition: int) -> int | None:
        """The partition's current leader epoch, or None when the metadata do not know it."""
        topic_id = self.topic_ids.get(topic)
        state = None if topic_id is None else self.partitions.get((topic_id, partition))
        return None if state is None else state.leader_epoch

    def facts(self, source: str) -> ClusterFacts:
        """The :class:`ClusterFacts` of this state."""
        names = {topic_id: name for name, topic_id in self.topic_ids.items()}
        epochs = {(names[t], p): s.leader_epoch for (t, p), s in self.partitions.items() if t in names}
        return ClusterFacts(source, dict(self.topic_ids), epochs)

    def broker_defaults(self, broker_id: int | None) -> dict[str, str]:
        """The dynamic broker configs that apply to ``broker_id``: its own over the cluster-wide defaults."""
        merged = dict(self.broker_configs.get("", {}))
        if broker_id is not None:
            merged.update(self.broker_configs.get(str(broker_id), {}))
        return merged


@dataclass(frozen=True)
class ClusterFacts:
    """What a run checks each partition dir against (small, picklable: carried in the run's options): each topic's
    id by name, each partition's current leader epoch by (topic name, partition), and the metadata dir they come
    from (``source``)."""

    source: str
    topic_ids: dict[str, str]
    leader_epochs: dict[tuple[str, int], int]


class MetadataReplay:
    """Applies records in offset order to a :class:`ClusterMetadata` (see the module docstring)."""

    def __init__(self, state: ClusterMetadata | None = None) -> None:
        self.state = state if state is not None else ClusterMetadata()
        self._pending: list[MetadataRecord] | None = None  # records of an open metadata transaction

    def skip(self, first: int, last: int, why: str) -> None:
        """Count the records ``first``..``last`` as not read (a batch whose records do not decode)."""
        state = self.state
        state.end_offset = max(state.end_offset, last + 1)
        state.records += last - first + 1
        state.skipped[why] += last - first + 1

    def apply(self, offset: int, record: MetadataRecord | str) -> None:
        """Apply the record at ``offset`` (a string: why it could not be read, counted and skipped)."""
        state = self.state
        state.end_offset = max(state.end_offset, offset + 1)
        state.records += 1
        if isinstance(record, str):
            state.skipped[record] += 1
            return
        if record.type_id == _BEGIN:
            if self._pending is not None:
                state.skipped["a transaction begun inside another"] += len(self._pending)
            self._pending = []
        elif record.type_id == _END:
            pending, self._pending = self._pending or [], None
            for r in pending:
                self._apply(r)
        elif record.type_id == _ABORT:
            state.skipped["aborted metadata transaction"] += len(self._pending or ())
            self._pending = None
        elif self._pending is not None:
            self._pending.append(record)
        else:
            self._apply(record)

    def finish(self) -> ClusterMetadata:
        """The state after the last record; a transaction still open there never applies."""
        if self._pending:
            self.state.skipped["metadata transaction open at the end of the log"] += len(self._pending)
        self._pending = None
        return self.state

    def _apply(self, record: MetadataRecord) -> None:
        state, data, kind = self.state, record.data, record.type_id
        if kind == _TOPIC:
            state.topic_ids[data["name"]] = data["topicId"]
        elif kind == _REMOVE_TOPIC:
            name = state.topic_name(data["topicId"])
            if name is not None:
                del state.topic_ids[name]
                state.topic_configs.pop(name, None)
            for key in [k for k in state.partitions if k[0] == data["topicId"]]:
                del state.partitions[key]
        elif kind == _PARTITION:
            key = (data["topicId"], data["partitionId"])
            state.partitions[key] = PartitionState(data["leader"], data["leaderEpoch"])
        elif kind == _PARTITION_CHANGE:
            partition = state.partitions.get((data["topicId"], data["partitionId"]))
            if partition is not None and data["leader"] != NO_LEADER_CHANGE:
                partition.leader, partition.leader_epoch = data["leader"], partition.leader_epoch + 1
        elif kind == _CONFIG:
            self._config(data["resourceType"], data["resourceName"], data["name"], data["value"])
        elif kind == _FEATURE:
            if data["featureLevel"] == 0:
                state.features.pop(data["name"], None)
            else:
                state.features[data["name"]] = data["featureLevel"]

    def _config(self, resource_type: int, resource: str, name: str, value: str | None) -> None:
        table = {TOPIC_RESOURCE: self.state.topic_configs, BROKER_RESOURCE: self.state.broker_configs}.get(
            resource_type
        )
        if table is None:
            return
        configs = table.setdefault(resource, {})
        if value is None:
            configs.pop(name, None)
        else:
            configs[name] = value
        if not configs:
            del table[resource]
