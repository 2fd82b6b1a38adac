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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..recovery.findings import ERROR, Finding, kind
from ..recovery.remote_checks import remote_index_findings
from ..storage import StoreSpec, read_index_objects, store_for

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteSegment


@dataclass(frozen=True)
class RemoteSegmentTask:
    """One remote segment to verify: its metadata, and its objects' store, root (``--remote``) and layout."""

    spec: StoreSpec
    root: str
    layout: str
    segment: RemoteSegment


@dataclass
class RemoteSegmentOutcome:
    """What the checks found of one segment; ``skipped``: why its indexes were not checked (encryption);
    ``requests``: the reads it made of the store."""

    segment: RemoteSegment
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None
    requests: int = 0

    @property
    def failed(self) -> bool:
        return any(kind(f.kind).severity == ERROR for f in self.findings)


def verify_remote_segment(task: RemoteSegmentTask) -> RemoteSegmentOutcome:
    """The index-only checks of one remote segment (module docstring)."""
    objects = read_index_objects(store_for(task.spec), task.root, task.layout, task.segment)
    out = RemoteSegmentOutcome(task.segment, skipped=objects.skipped, requests=objects.requests)
    out.findings += [Finding("remote_object_missing", uri, detail=why) for uri, why in objects.missing]
    out.findings += [Finding("remote_manifest_mismatch", uri, detail=why) for uri, why in objects.problems]
    if objects.skipped is None and objects.indexes_read:
        out.findings += remote_index_findings(
            task.segment, objects.uris, objects.data, objects.log_uri, objects.log_size
        )
    return out


def verify_remote_segments(tasks: list[RemoteSegmentTask], workers: int) -> Iterator[RemoteSegmentOutcome]:
    """Each task's outcome, in the tasks' order, ``workers`` reads in flight at once."""
    if workers <= 1:
        yield from map(verify_remote_segment, tasks)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="verify-remote") as pool:
        yield from pool.map(verify_remote_segment, tasks)
