"""A broker log dir kept in object storage (``s3://bucket/prefix/``), laid out as on disk, behind the same
:class:`~indexlib.storage.store.Store` as a local file system: read-only (objects are immutable; a run that writes
in place is refused before it starts).

What a run reads, and how: the driver lists each log dir once, recursively (names and sizes for discovery); an
executor reads a segment with a ``HEAD`` of its ``.log`` (size and version), a ``GET`` of each index object, and the
``.log`` streamed into the scan kernel in ranged ``GET`` s of :data:`CHUNK` bytes, one read ahead
(:class:`ObjectSource`): memory per segment is about three chunks, never the object. Every ranged read names the
version the ``HEAD`` saw, so an object replaced meanwhile fails the read (:class:`ObjectChangedError`) instead of
mixing two versions.

The requests go through an :class:`ObjectClient` (:mod:`~indexlib.storage.object_clients` builds one from a
:class:`~indexlib.storage.store.StoreSpec`); this module holds no library's names.
"""

from __future__ import annotations

import bisect
import os
import tempfile
import threading
from collections.abc import Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import numpy as np

from ..format.layout import segment_file, staged_by_run
from ..format.offset_index import OffsetIndex
from ..format.time_index import TimeIndex
from ..format.values import AbortedTxn
from ..recovery.checks import has_invalid_tail
from ..recovery.entry_plan import PlanSummary, SegmentPlan
from ..recovery.log_scan import (
    NO_PROBES,
    ExistingIndex,
    LogSummary,
    Probes,
    from_kernel,
    probes_for,
    unreadable_summary,
)
from . import publish
from .partition_files import existing_index_of
from .store import ObjectChangedError, ObjectStoreError, SegmentReads, StoreSpec

#: bytes of a ``.log`` one ranged read asks for (one more is read ahead while the kernel walks this one)
CHUNK = 8 << 20


@dataclass(frozen=True)
class ObjectMeta:
    size: int
    version: str  # what a conditional read names (an ETag)


class ObjectClient(Protocol):
    """The requests :class:`ObjectStore` makes, in one bucket (``key`` without it). Failures raise
    :class:`ObjectStoreError` (naming the URI); a missing object is ``None`` where a method says so."""

    root: str  # the bucket's URI (``s3://bucket``): a key's URI is ``root/key``

    def list(self, prefix: str) -> Iterator[tuple[str, int]]:
        """Every key under ``prefix`` (recursively) and its size, in any order."""
        ...

    def head(self, key: str) -> ObjectMeta | None:
        """The object's size and version, or None when there is none."""
        ...

    def get(self, key: str) -> bytes | None:
        """The whole object, or None when there is none."""
        ...

    def get_range(self, key: str, start: int, end: int, version: str) -> bytes:
        """Bytes [start, end) of the object, if it is still ``version`` (else :class:`ObjectChangedError`); fewer
        when it is shorter."""
        ...

    def get_head(self, key: str, end: int) -> tuple[bytes, ObjectMeta] | None:
        """Bytes [0, end) of the object (all of it when shorter) and its size and version, in one request; None
        when there is none."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Write the whole object (a reader sees the old object or this one, never a part)."""
        ...

    def copy(self, source: str, target: str) -> None:
        """Copy an object inside the bucket (on the server: the bytes do not travel)."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object (none there: nothing to do)."""
        ...


def split_uri(uri: str) -> tuple[str, str, str]:
    """``s3://bucket/a/b`` -> ``("s3", "bucket", "a/b")``."""
    scheme, sep, rest = uri.partition("://")
    if not sep or not scheme:
        raise ObjectStoreError(f"{uri}: not a URI (scheme://bucket/path)")
    bucket, _, key = rest.partition("/")
    return scheme, bucket, key.strip("/")


class ObjectSource:
    """A ``.log`` object as the scan kernel reads it (``pread_into``): chunks of :data:`CHUNK` bytes fetched with
    conditional ranged reads, the next one in a thread of its own while the kernel walks this one; at most the
    current chunk, the one read ahead and the one before are held."""

    def __init__(self, client: ObjectClient, key: str, meta: ObjectMeta, chunk: int = CHUNK) -> None:
        self.client, self.key, self.meta, self.chunk = client, key, meta, chunk
        self._fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-index-read-ahead")
        self._chunks: dict[int, Future[bytes]] = {}
        self._lock = threading.Lock()

    def _fetch(self, index: int) -> Future[bytes]:
        future = self._chunks.get(index)
        if future is None:
            start = index * self.chunk
            end = min(self.meta.size, start + self.chunk)
            future = self._fetcher.submit(self.client.get_range, self.key, start, end, self.meta.version)
            self._chunks[index] = future
        return future

    def pread_into(self, buffer: memoryview, offset: int) -> int:
        if offset >= self.meta.size or len(buffer) == 0:
            return 0
        index = offset // self.chunk
        with self._lock:
            current = self._fetch(index)
            if (index + 1) * self.chunk < self.meta.size:
                self._fetch(index + 1)
            for old in [i for i in self._chunks if i < index - 1]:
                self._chunks.pop(old).cancel()
        data = current.result()
        expected = min(self.meta.size, (index + 1) * self.chunk) - index * self.chunk
        if len(data) != expected:  # a response cut short: never scanned as the object's end (a torn tail)
            raise ObjectStoreError(
                f"{self.client.root}/{self.key}: a ranged read of bytes {index * self.chunk}-{index * self.chunk + expected} "
                f"returned {len(data)} bytes"
            )
        at = offset - index * self.chunk
        n = max(0, min(len(buffer), len(data) - at))
        buffer[:n] = data[at : at + n]
        return n

    def close(self) -> None:
        for future in self._chunks.values():
            future.cancel()
        self._fetcher.shutdown(wait=True)
        self._chunks.clear()


class ObjectStore:
    """A :class:`~indexlib.storage.store.Store` over one bucket's objects (paths are URIs of ``spec.scheme``)."""

    def __init__(self, spec: StoreSpec, client: ObjectClient, bucket: str) -> None:
        self.spec, self.client, self.bucket = spec, client, bucket
        self._listings: dict[str, list[tuple[str, int]]] = {}  # a listed prefix (ending in '/') -> sorted keys
        self._listing = threading.Lock()  # threads that need one prefix wait for its one listing

    # ---------------------------------------------------------------------------------------- listing
    def _key(self, path: str) -> str:
        scheme, bucket, key = split_uri(path)
        if scheme != self.spec.scheme or bucket != self.bucket:
            raise ObjectStoreError(f"{path}: not in {self.spec.scheme}://{self.bucket}, the store of this run")
        return key

    def _keys_under(self, key: str) -> list[tuple[str, int]]:
        """Every (key, size) under ``key/``, from the listing of it or of a prefix above it (listed once)."""
        prefix = key + "/" if key else ""
        with self._listing:
            for listed, keys in self._listings.items():
                if prefix.startswith(listed):
                    first = bisect.bisect_left(keys, (prefix, -1))
                    last = bisect.bisect_left(keys, (prefix + "\U0010ffff", -1))
                    return keys[first:last]
            keys = sorted(self.client.list(prefix))
            self._listings[prefix] = keys
            return keys

    def exists(self, path: str) -> bool:
        key = self._key(path)
        return self.is_dir(path) or self.client.head(key) is not None

    def is_dir(self, path: str) -> bool:
        return bool(self._keys_under(self._key(path)))

    def list_names(self, path: str) -> list[str]:
        key = self._key(path)
        prefix = key + "/" if key else ""
        names = list(dict.fromkeys(k[len(prefix) :].split("/", 1)[0] for k, _ in self._keys_under(key)))
        if not names:
            raise FileNotFoundError(2, "No such directory (no object under this prefix)", path)
        return names

    def list_tree(self, path: str) -> dict[str, int]:
        key = self._key(path)
        prefix = key + "/" if key else ""
        return {k[len(prefix) :]: size for k, size in self._keys_under(key)}

    def size(self, path: str) -> int:
        key = self._key(path)
        parent = key.rsplit("/", 1)[0] if "/" in key else ""
        for k, size in self._keys_under(parent):
            if k == key:
                return size
        meta = self.client.head(key)
        if meta is None:
            raise FileNotFoundError(2, "No such object", path)
        return meta.size

    def listed_size(self, path: str) -> int | None:
        key = self._key(path)
        parent = key.rsplit("/", 1)[0] if "/" in key else ""
        keys = self._keys_under(parent)
        at = bisect.bisect_left(keys, (key, -1))
        return keys[at][1] if at < len(keys) and keys[at][0] == key else None

    def read_bytes(self, path: str) -> bytes:
        data = self.client.get(self._key(path))
        if data is None:
            raise FileNotFoundError(2, "No such object", path)
        return data

    def copy_to(self, path: str, target: BinaryIO, limit: int | None = None) -> int:
        """Write the object at ``path`` (its first ``limit`` bytes) into ``target`` in ranged reads of
        :data:`CHUNK` bytes, each after the first naming the version the first saw (an object of one chunk is one
        request); the object's whole size. ``FileNotFoundError``
        when there is no object."""
        key = self._key(path)
        if limit is not None and limit <= 0:  # no byte wanted: its size alone
            meta = self.client.head(key)
            if meta is None:
                raise FileNotFoundError(2, "No such object", path)
            return meta.size
        first = self.client.get_head(key, CHUNK if limit is None else min(CHUNK, limit))
        if first is None:
            raise FileNotFoundError(2, "No such object", path)
        data, meta = first
        end = meta.size if limit is None else min(meta.size, limit)
        if len(data) != min(end, CHUNK):
            raise ObjectStoreError(f"{path}: a ranged read of bytes 0-{min(end, CHUNK)} returned {len(data)} bytes")
        target.write(data)
        for at in range(CHUNK, end, CHUNK):
            data = self.client.get_range(key, at, min(end, at + CHUNK), meta.version)
            if len(data) != min(end, at + CHUNK) - at:
                raise ObjectStoreError(
                    f"{path}: a ranged read of bytes {at}-{min(end, at + CHUNK)} returned {len(data)} bytes"
                )
            target.write(data)
        return meta.size

    # ---------------------------------------------------------------------------------------- writes
    def prefix_is_empty(self, path: str) -> bool:
        """Whether no object is under ``path`` (a fresh listing: a target is checked as it is now)."""
        key = self._key(path)
        return next(iter(self.client.list(key + "/" if key else "")), None) is None

    def put_whole(self, path: str, data: bytes, tag: str) -> None:
        self.client.put(self._key(path), data)

    def stage_segment(
        self,
        target_dir: str,
        base_offset: int,
        plan: SegmentPlan | PlanSummary,
        aborted: list[AbortedTxn],
        suffixes: Collection[str],
        stale_txn: bool,
        segment_index_bytes: int,
        tag: str | None,
        unsynced: list[str] | None = None,
    ) -> dict[str, str]:
        """The index files written as on a local disk (the same code, into a private temporary dir), then each put
        as an object under its staged name in ``target_dir``; a put object is durable (``unsynced`` is not used)."""
        staged: dict[str, str] = {}
        with tempfile.TemporaryDirectory(prefix="kafka-index-stage-") as local:
            here = publish.stage_segment(
                local, base_offset, plan, aborted, suffixes, stale_txn, segment_index_bytes, tag, []
            )
            try:
                for final_here, staged_here in here.items():
                    staged_uri = f"{target_dir}/{os.path.basename(staged_here)}"
                    with open(staged_here, "rb") as f:
                        self.client.put(self._key(staged_uri), f.read())
                    staged[f"{target_dir}/{os.path.basename(final_here)}"] = staged_uri
            except BaseException:
                self.discard_staged(staged, [])
                raise
        return staged

    def install_segment(self, staged: dict[str, str], written: list[str]) -> None:
        """Each staged object copied to its final name on the server, then removed."""
        try:
            for final, path in list(staged.items()):
                self.client.copy(self._key(path), self._key(final))
                written.append(final)
        finally:
            for path in staged.values():
                self.client.delete(self._key(path))

    def discard_staged(self, staged: dict[str, str], backups: list[str]) -> None:
        for path in staged.values():
            self.client.delete(self._key(path))
        staged.clear()  # objects are never backed up: nothing in them is replaced

    def discard_staged_by_run(self, directories: list[str], run_id: str) -> None:
        for directory in sorted(set(directories)):
            key = self._key(directory)
            for name, _ in list(self.client.list(key + "/")):
                if staged_by_run(name.rsplit("/", 1)[-1], run_id):
                    self.client.delete(name)

    def fsync_paths(self, paths: Collection[str]) -> dict[str, OSError]:
        return {}  # an object is durable once its put returned

    # ---------------------------------------------------------------------------------------- a segment
    def read_indexes(self, partition_dir: str, base_offset: int) -> dict[str, ExistingIndex]:
        found = {}
        for suffix, cls in ((".index", OffsetIndex), (".timeindex", TimeIndex)):
            path = segment_file(partition_dir, base_offset, suffix)
            data = self.client.get(self._key(path))
            found[suffix] = (
                existing_index_of(cls, path, data, len(data))
                if data is not None
                else ExistingIndex(path, False, np.empty(0, cls.DTYPE), 0)
            )
        return found

    def read_segment(
        self,
        log_path: str,
        partition_dir: str,
        base_offset: int,
        index_interval_bytes: int,
        read_indexes: bool,
        probe: bool,
        listed_size: int | None = None,
    ) -> SegmentReads:
        key = self._key(log_path)
        meta = self.client.head(key)
        if meta is not None and listed_size is not None and meta.size != listed_size:
            raise ObjectChangedError(
                f"{log_path}: the object changed since the log dir was listed ({listed_size} bytes then, "
                f"{meta.size} now)"
            )
        existing = self.read_indexes(partition_dir, base_offset) if read_indexes else None
        probes = probes_for(existing, base_offset) if probe and existing is not None else NO_PROBES
        if meta is None:
            summary = unreadable_summary(
                log_path, base_offset, index_interval_bytes, FileNotFoundError(2, "No such object", log_path)
            )
            zero_tail = False
        else:
            summary = self._summarize(log_path, key, meta, base_offset, index_interval_bytes, probes)
            zero_tail = has_invalid_tail(summary) and self._tail_is_zero(key, meta, summary.valid_bytes)
        sizes: dict[str, int | None] = {}
        for suffix in (".index", ".timeindex", ".txnindex"):
            known = existing.get(suffix) if existing is not None else None
            if known is not None:
                sizes[suffix] = known.length if known.exists else None
            else:
                head = self.client.head(self._key(segment_file(partition_dir, base_offset, suffix)))
                sizes[suffix] = head.size if head is not None else None
        return SegmentReads(summary, existing, zero_tail, sizes)

    def _summarize(
        self, log_path: str, key: str, meta: ObjectMeta, base_offset: int, interval: int, probes: Probes
    ) -> LogSummary:
        from ..format import control_records, scan_kernel

        kernel = scan_kernel.kernel_for(None)
        if kernel is None or not hasattr(kernel, "scan_segment"):
            raise ObjectStoreError(f"{log_path}: reading object storage needs the compiled scan kernel")
        source = ObjectSource(self.client, key, meta)
        try:
            raw = kernel.scan_segment(
                source, meta.size, base_offset, interval, probes.positions.tobytes(), probes.offsets.tobytes(),
                control_records.marker_fields_or_error, 1 << 20, False,
            )  # fmt: skip
        finally:
            source.close()
        return from_kernel(raw, log_path, meta.size, base_offset, interval, probes)

    def _tail_is_zero(self, key: str, meta: ObjectMeta, start: int) -> bool:
        if start >= meta.size:
            return False
        for at in range(start, meta.size, CHUNK):
            data = self.client.get_range(key, at, min(meta.size, at + CHUNK), meta.version)
            if not data or data.count(0) != len(data):
                return False
        return True
