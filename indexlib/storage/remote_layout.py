"""Where a RemoteStorageManager keeps a tiered segment's objects, in the two open layouts, and what a listing of
them says against ``__remote_log_metadata`` (:func:`reconcile`).

* ``kafka``: Kafka's own ``LocalTieredStorage``, plain copies of the broker's files:
  ``kafka-tiered-storage/<topic>-<partition>-<topicId>/<startOffset:020>-<segmentId>.<suffix>``, suffixes ``log``,
  ``index``, ``timeindex``, ``snapshot``, ``leader_epoch_checkpoint`` and, when the segment has one, ``txnindex``.
* ``aiven``: Aiven's ``tiered-storage-for-apache-kafka``:
  ``<topic>-<topicId>/<partition>/<startOffset:020>-<segmentId>.{log,indexes,rsm-manifest}`` (under its
  ``key.prefix``); the segment's custom metadata may name the key it was written under (``object_key``).

Ids are Kafka's base64url uuids (22 characters, ``-`` and ``_`` among them), so names are parsed by shape, never
split on ``-``. Keys here are relative to the root a user gives (``--remote``).

Invariants: pure (the listing comes from :meth:`Store.list_tree`); every listed key is either a segment's object
the metadata knows, an object of a segment it does not know (an orphan), or not a layout's name at all (counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..format.layout import parse_remote_object_key, remote_object_key

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteLogInventory, RemoteSegment

LAYOUTS = ("kafka", "aiven")
#: layout -> the objects every finished segment has
REQUIRED = {
    "kafka": ("log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint"),
    "aiven": ("log", "indexes", "rsm-manifest"),
}


@dataclass(frozen=True)
class RemoteObject:
    """One object of a layout, by its key's parts."""

    key: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int
    segment_id: str
    suffix: str


def parse_key(layout: str, key: str) -> RemoteObject | None:
    """The parts of a layout's object key (relative to the root), or None when it is not one."""
    m = parse_remote_object_key(layout, key)
    if m is None:
        return None
    return RemoteObject(
        key, m["topic"], m["topic_id"], int(m["partition"]), int(m["offset"]), m["segment_id"], m["suffix"]
    )


def segment_key(layout: str, segment: RemoteSegment, suffix: str) -> str:
    """The key of ``segment``'s ``suffix`` object in ``layout``, relative to the root."""
    return remote_object_key(
        layout, segment.topic, segment.topic_id, segment.partition, segment.start_offset, segment.segment_id, suffix
    )


def required_suffixes(layout: str, segment: RemoteSegment) -> tuple[str, ...]:
    """The objects a finished ``segment`` must have: a ``kafka`` one also its ``.txnindex`` when the metadata says
    it is not empty."""
    if layout == "kafka" and not segment.txn_index_empty:
        return (*REQUIRED["kafka"], "txnindex")
    return REQUIRED[layout]


@dataclass(frozen=True)
class Problem:
    """One thing the reconciliation found: ``kind`` (:data:`PROBLEM_KINDS`), the segment or object, and why."""

    kind: str
    topic_partition: str
    segment_id: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "topic_partition": self.topic_partition, "segment_id": self.segment_id,
            "detail": self.detail,
        }  # fmt: skip


#: what :func:`reconcile` reports, and what each means
PROBLEM_KINDS = {
    "remote_object_missing": "a finished segment lacks an object its layout requires (its reads fail)",
    "remote_object_orphan": "an object of a segment the metadata does not know (it costs, nothing reads it)",
    "remote_object_after_delete": "an object of a segment whose delete finished (it costs, nothing reads it)",
    "remote_copy_not_finished": "a segment still in COPY_SEGMENT_STARTED (a copy that failed or was cut)",
    "remote_delete_not_finished": "a segment still in DELETE_SEGMENT_STARTED (a delete that failed or was cut)",
    "remote_metadata_unreadable": "records of __remote_log_metadata that do not read, or a torn tail",
}


@dataclass
class Reconciliation:
    """The problems found, and what was looked at: segments by state, objects listed, keys of no layout."""

    problems: list[Problem] = field(default_factory=list)
    objects: int = 0
    foreign_keys: int = 0


def reconcile(
    inventory: RemoteLogInventory, listing: dict[str, int] | None, layout: str, topics: set[str] | None = None
) -> Reconciliation:
    """What the metadata says against the objects in ``listing`` (relative key -> size; None: no listing, the
    metadata's own problems only), for the segments of ``topics`` (None: all)."""
    out = Reconciliation()
    segments = {sid: s for sid, s in inventory.segments.items() if topics is None or s.topic in topics}
    for why, count in sorted(inventory.unreadable.items()):
        out.problems.append(Problem("remote_metadata_unreadable", "", "", f"{count} record(s): {why}"))
    for why in inventory.stopped:
        out.problems.append(Problem("remote_metadata_unreadable", "", "", why))
    for s in sorted(segments.values(), key=lambda x: (x.topic_partition, x.start_offset)):
        if s.state == "COPY_SEGMENT_STARTED":
            out.problems.append(
                Problem(
                    "remote_copy_not_finished",
                    s.topic_partition,
                    s.segment_id,
                    f"offsets {s.start_offset}-{s.end_offset}",
                )
            )
        elif s.state == "DELETE_SEGMENT_STARTED":
            out.problems.append(
                Problem(
                    "remote_delete_not_finished",
                    s.topic_partition,
                    s.segment_id,
                    f"offsets {s.start_offset}-{s.end_offset}",
                )
            )
    if listing is None:
        return out
    found: dict[str, set[str]] = {}
    for key in listing:
        obj = parse_key(layout, key)
        if obj is None:
            out.foreign_keys += 1
            continue
        if topics is not None and obj.topic not in topics:
            continue
        out.objects += 1
        found.setdefault(obj.segment_id, set()).add(obj.suffix)
        known = segments.get(obj.segment_id)
        tp = f"{obj.topic}-{obj.partition}"
        if known is None:
            out.problems.append(Problem("remote_object_orphan", tp, obj.segment_id, key))
        elif known.state == "DELETE_SEGMENT_FINISHED":
            out.problems.append(Problem("remote_object_after_delete", tp, obj.segment_id, key))
    for s in sorted(segments.values(), key=lambda x: (x.topic_partition, x.start_offset)):
        if s.state != "COPY_SEGMENT_FINISHED":
            continue
        missing = [suffix for suffix in required_suffixes(layout, s) if suffix not in found.get(s.segment_id, ())]
        for suffix in missing:
            out.problems.append(
                Problem("remote_object_missing", s.topic_partition, s.segment_id, segment_key(layout, s, suffix))
            )
    return out
