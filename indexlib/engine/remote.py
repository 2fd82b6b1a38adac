"""``verify-remote``: tiered segments checked where their RSM wrote them, one task per segment.

A :class:`RemoteSegmentTask` names a segment of ``__remote_log_metadata`` and where its objects are (a store, a
root, a layout); :func:`verify_remote_segment` reads its index objects and returns what the index-only checks
(:mod:`indexlib.recovery.remote_checks`) find, plus what its manifest says wrong. Tasks are independent (a remote
segment is closed and immutable), so they run in any order, on threads here (the reads wait on the store) or as
Spark tasks.

Invariants: read-only; a task is picklable (a :class:`~indexlib.storage.StoreSpec`, not a client); an object
that is absent is a finding, a store that fails raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..format.errors import InvalidRecordError
from ..recovery.findings import ERROR, Finding, kind
from ..recovery.remote_checks import remote_index_findings
from ..recovery.settings import IndexSettings
from ..storage import (
    Discovery,
    RecentSnapshots,
    RemoteIndexObjects,
    StoreSpec,
    discover_partition_dir,
    materialised_segment,
    private_dir,
    read_index_files,
    read_index_objects,
    read_producer_snapshot,
    store_for,
    write_rebuilt_objects,
)
from .options import RunOptions
from .pool import map_locally
from .runner import run

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteSegment


@dataclass(frozen=True)
class RemoteSegmentTask:
    """One remote segment to verify: its metadata, and its objects' store, root (``--remote``) and layout. With
    ``full``, its ``.log`` is read too, through the engine with ``settings`` (the topic's); ``previous``: the
    partition's segment before it, whose uploaded producer snapshot is the state at this one's base (None: the
    segment starts the partition's remote log, replayed from no producer state)."""

    spec: StoreSpec
    root: str
    layout: str
    segment: RemoteSegment
    full: bool = False
    settings: IndexSettings = IndexSettings()
    previous: RemoteSegment | None = None
    #: ``rebuild-remote``: where a segment whose indexes are not their rebuild's gets its rebuilt objects (in the
    #: same layout; a new, empty dir or prefix of ``output_spec``); the run's id tags local staged names
    output_root: str | None = None
    output_spec: StoreSpec | None = None
    run_id: str = ""


@dataclass
class RemoteSegmentOutcome:
    """What the checks found of one segment; ``skipped``: why its indexes were not checked (encryption);
    ``requests``: the objects it read from the store (listings aside)."""

    segment: RemoteSegment
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None
    requests: int = 0
    #: ``--full``: per index suffix, whether the stored object is its rebuild's bytes (None: not compared)
    identical: dict[str, bool | None] = field(default_factory=dict)
    #: ``rebuild-remote``: the objects written under the output root
    written: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(kind(f.kind).severity == ERROR for f in self.findings)


def verify_remote_segment(task: RemoteSegmentTask, recent: RecentSnapshots | None = None) -> RemoteSegmentOutcome:
    """The checks of one remote segment (module docstring); ``recent``: the producer snapshots its run read lately,
    where a previous segment's may be (and this one's is kept)."""
    objects = read_index_objects(store_for(task.spec), task.root, task.layout, task.segment, recent)
    out = RemoteSegmentOutcome(task.segment, skipped=objects.skipped, requests=objects.requests)
    out.findings += [Finding("remote_object_missing", uri, detail=why) for uri, why in objects.missing]
    out.findings += [Finding("remote_manifest_mismatch", uri, detail=why) for uri, why in objects.problems]
    if objects.skipped is None and objects.indexes_read:
        out.findings += remote_index_findings(
            task.segment, objects.uris, objects.data, objects.log_uri, objects.log_size
        )
        if (task.full or task.output_root is not None) and objects.log_size is not None:
            _verify_full(task, objects, out, recent)
    return out


def _needs_rebuild(objects: RemoteIndexObjects, out: RemoteSegmentOutcome) -> bool:
    """Whether a segment's stored indexes are not their rebuild's: one differs, or has a finding (missing, torn)."""
    index_uris = {objects.uris[k] for k in ("offset", "timestamp", "transaction")}
    return any(v is False for v in out.identical.values()) or any(f.file in index_uris for f in out.findings)


def _verify_full(
    task: RemoteSegmentTask, objects: RemoteIndexObjects, out: RemoteSegmentOutcome, recent: RecentSnapshots | None
) -> None:
    """The segment as a one-segment partition dir, verified by the engine as a local segment is (every index,
    the ``.txnindex`` from the state at its base, its snapshot against the replay to its end, its epoch blob
    against its batches); findings already found index-only are not repeated."""
    store = store_for(task.spec)
    segment = task.segment
    state_at_base = None
    if task.previous is not None:
        state_at_base, requests = read_producer_snapshot(store, task.root, task.layout, task.previous, recent)
        out.requests += requests
    try:
        with materialised_segment(store, task.root, task.layout, segment, objects, state_at_base) as (path, sources):
            discovery = discover_partition_dir(path)
            for partition in discovery.partitions:  # every remote segment is closed: none is the active one
                partition.segments = [replace(s, active=False) for s in partition.segments]
            report = run(discovery, RunOptions("verify"), lambda topic: task.settings, map_locally())
            out.requests += 1  # the .log (ranged reads of a large one counted once)
            seen = {(f.kind, f.file) for f in out.findings}
            found = [f for fs in report.partition_findings.values() for f in fs]
            for result in report.segments:
                out.identical = dict(result.identical)
                found += result.findings
                if result.plan.last_offset != segment.end_offset and result.fatal is None:
                    out.findings.append(
                        Finding(
                            "remote_metadata_mismatch", objects.log_uri, expected=segment.end_offset,
                            found=result.plan.last_offset,
                            detail=f"the .log's last offset is {result.plan.last_offset}, the metadata's end offset "
                            f"{segment.end_offset}",
                        )
                    )  # fmt: skip
            for f in found:
                if f.file != path and not f.file.startswith(path + "/"):
                    continue  # the private log dir around it (no meta.properties, ...): not the segment's
                remote = replace(f, file=_remote_name(f.file, sources))
                if (remote.kind, remote.file) not in seen:
                    seen.add((remote.kind, remote.file))
                    out.findings.append(remote)
            log_damaged = any(f.file == objects.log_uri and kind(f.kind).severity == ERROR for f in out.findings)
            if task.output_root is not None and _needs_rebuild(objects, out) and not log_damaged:
                _rebuild(task, objects, discovery, out)  # a damaged .log is not mended by new indexes: none
    except InvalidRecordError as exc:  # an Aiven chunk that does not decompress
        out.findings.append(Finding("unreadable_segment", objects.log_uri, detail=str(exc)))


def _rebuild(
    task: RemoteSegmentTask, objects: RemoteIndexObjects, discovery: Discovery, out: RemoteSegmentOutcome
) -> None:
    """The materialised segment rebuilt into a private output dir by the engine, and those of its index files
    that differ from the stored ones written under the task's output root in the task's layout (Aiven: a new
    ``.indexes`` and manifest); a segment Kafka's recovery would refuse gets nothing."""
    assert task.output_root is not None and task.output_spec is not None
    with private_dir("kafka-index-rebuilt-") as target:
        report = run(discovery, RunOptions("rebuild", output_dir=target), lambda topic: task.settings, map_locally())
        rebuilt = read_index_files([path for result in report.segments for path in result.written])
        rebuilt = {suffix: data for suffix, data in rebuilt.items() if out.identical.get(suffix) is not True}
        if rebuilt:
            out.written = write_rebuilt_objects(
                store_for(task.output_spec), task.root, task.output_root, task.layout, task.segment, objects, rebuilt,
                task.run_id,
            )  # fmt: skip


def _remote_name(path: str, sources: dict[str, str]) -> str:
    """The URI a file of the materialised partition dir came from (the dir itself: the segment's remote dir)."""
    if path in sources:
        return sources[path]
    for local, uri in sources.items():
        if path.startswith(local + "/"):
            return uri + path[len(local) :]
    return path


def verify_remote_segments(tasks: list[RemoteSegmentTask], workers: int) -> Iterator[RemoteSegmentOutcome]:
    """Each task's outcome, in the tasks' order (a partition's segments in offset order, so that a segment's base
    state is the snapshot its predecessor's check read: :class:`~indexlib.storage.RecentSnapshots`), ``workers``
    segments in flight at once."""
    recent = RecentSnapshots()

    def verify(task: RemoteSegmentTask) -> RemoteSegmentOutcome:
        return verify_remote_segment(task, recent)

    if workers <= 1:
        yield from map(verify, tasks)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="verify-remote") as pool:
        yield from pool.map(verify, tasks)
