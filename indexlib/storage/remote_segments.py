"""A tiered segment's index objects, read from where its RSM wrote them (:mod:`.remote_layout`), through a
:class:`~indexlib.storage.store.Store` (a dir, or a bucket).

* ``kafka`` layout: one object per file (``.index``, ``.timeindex``, ``.txnindex`` when the segment has one,
  ``.snapshot``, ``.leader_epoch_checkpoint``), each read whole, and the ``.log``'s size.
* ``aiven`` layout: the ``.rsm-manifest`` (JSON), then the ``.indexes`` object whole, cut into the five indexes at
  the manifest's ranges, and the ``.log``'s size against the manifest's chunk index. What a manifest says that
  its objects or the metadata contradict is a problem here, since the broker reads through it.

Invariants: read-only; an object that is absent is ``None`` in :attr:`RemoteIndexObjects.data` (never an
error); any other failure of the store raises (:class:`~indexlib.storage.store.ObjectStoreError`, ``OSError``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..format.errors import InvalidRecordError
from .remote_layout import segment_key

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteSegment
    from .store import Store

#: the index kinds of a remote segment, as ``RemoteStorageManager.IndexType`` names them (lower case)
INDEX_KINDS = ("offset", "timestamp", "transaction", "producer_snapshot", "leader_epoch")
_KAFKA_SUFFIXES = {
    "offset": "index", "timestamp": "timeindex", "transaction": "txnindex", "producer_snapshot": "snapshot",
    "leader_epoch": "leader_epoch_checkpoint",
}  # fmt: skip
#: Aiven's manifest names of the index kinds, in the order its ``.indexes`` holds them
_AIVEN_RANGES = {
    "offset": "offset", "timestamp": "timestamp", "producer_snapshot": "producerSnapshot",
    "leader_epoch": "leaderEpoch", "transaction": "transaction",
}  # fmt: skip


@dataclass
class RemoteIndexObjects:
    """One remote segment's index objects: per kind its URI (for an Aiven segment, the ``.indexes`` object's, with
    ``#kind``) and bytes (None: absent); the ``.log``'s URI and its size as Kafka wrote it (None: absent);
    ``problems``: (URI, what a manifest says wrong); ``missing``: (URI, why) of an Aiven manifest or ``.indexes``
    that is absent (the indexes are then not read); ``skipped``: why the indexes were not read (encryption)."""

    uris: dict[str, str]
    data: dict[str, bytes | None]
    log_uri: str
    log_size: int | None
    problems: list[tuple[str, str]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)
    skipped: str | None = None
    #: whether ``data`` holds what the layout keeps (False: an Aiven manifest or ``.indexes`` that did not read)
    indexes_read: bool = True
    #: the requests made of the store (listings aside: one a partition)
    requests: int = 0
    #: an Aiven segment's manifest, as read (None: the Kafka layout, or one that did not read)
    manifest: dict[str, Any] | None = None


def object_uri(root: str, key: str) -> str:
    """The URI (or local path) of ``key`` under ``root`` (what ``--remote`` gave)."""
    return f"{root.rstrip('/')}/{key}" if "://" in root else os.path.join(root, key)


def _read(store: Store, uri: str) -> bytes | None:
    try:
        return store.read_bytes(uri)
    except FileNotFoundError:
        return None


class RecentSnapshots:
    """The producer snapshots a run read lately, by URI (a few): a partition's next segment needs this one's as its
    state at its base, and is usually checked soon after, by the same process. One per run (a process may outlive a
    run, and a run's objects be replaced after it); safe across threads."""

    def __init__(self, kept: int = 64) -> None:
        self._kept = kept
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, uri: str, data: bytes | None) -> None:
        if data is None:
            return
        with self._lock:
            self._data[uri] = data
            self._data.move_to_end(uri)
            while len(self._data) > self._kept:
                self._data.popitem(last=False)

    def get(self, uri: str) -> bytes | None:
        with self._lock:
            return self._data.get(uri)


def read_index_objects(
    store: Store, root: str, layout: str, segment: RemoteSegment, recent: RecentSnapshots | None = None
) -> RemoteIndexObjects:
    """The index objects of ``segment`` under ``root`` in ``layout`` (module docstring); its producer snapshot is
    kept in ``recent``."""
    recent = recent if recent is not None else RecentSnapshots(0)
    if layout == "kafka":
        uris = {k: object_uri(root, segment_key(layout, segment, suffix)) for k, suffix in _KAFKA_SUFFIXES.items()}
        log_uri = object_uri(root, segment_key(layout, segment, "log"))
        sizes = {k: store.listed_size(uri) for k, uri in uris.items()}  # absent or empty: nothing to fetch
        data = {k: None if sizes[k] is None else b"" if sizes[k] == 0 else _read(store, uri) for k, uri in uris.items()}
        recent.remember(uris["producer_snapshot"], data["producer_snapshot"])
        fetched = sum(1 for size in sizes.values() if size)
        return RemoteIndexObjects(uris, data, log_uri, store.listed_size(log_uri), requests=fetched)
    manifest_uri = object_uri(root, segment_key(layout, segment, "rsm-manifest"))
    indexes_uri = object_uri(root, segment_key(layout, segment, "indexes"))
    log_uri = object_uri(root, segment_key(layout, segment, "log"))
    uris = {k: f"{indexes_uri}#{k}" for k in INDEX_KINDS}
    out = RemoteIndexObjects(uris, dict.fromkeys(INDEX_KINDS), log_uri, None, requests=1, indexes_read=False)
    raw = _read(store, manifest_uri)
    if raw is None:
        out.missing.append((manifest_uri, "the manifest is missing: the broker cannot read the segment"))
        return out
    try:
        manifest = json.loads(raw)
        ranges = manifest["segmentIndexes"]
        chunks = manifest["chunkIndex"]
    except (ValueError, KeyError, TypeError) as exc:
        out.problems.append((manifest_uri, f"the manifest does not read as Aiven's JSON: {exc}"))
        return out
    out.manifest = manifest
    if manifest.get("encryption"):
        out.skipped = "encrypted, not checked (no key ring given)"
        return out
    out.problems.extend((manifest_uri, why) for why in _manifest_metadata_problems(manifest, segment))
    indexes = _read(store, indexes_uri)
    out.requests += 1
    if indexes is None:
        out.missing.append((indexes_uri, "the .indexes object is missing: the broker cannot read any index"))
        return out
    out.problems.extend((manifest_uri, why) for why in _range_problems(ranges, len(indexes)))
    for kind, name in _AIVEN_RANGES.items():
        r = ranges.get(name)
        if isinstance(r, dict) and r.get("position", -1) >= 0 and r.get("size", -1) >= 0:
            out.data[kind] = indexes[r["position"] : r["position"] + r["size"]]
    out.indexes_read = True
    recent.remember(uris["producer_snapshot"], out.data["producer_snapshot"])
    stored = store.listed_size(log_uri)
    if stored is not None:
        try:
            original, transformed = chunk_sizes(chunks)
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            out.problems.append((manifest_uri, f"its chunk index does not read: {exc}"))
        else:
            out.log_size = original
            if transformed != stored:
                out.problems.append(
                    (log_uri, f"{stored} bytes stored, but the manifest's chunk index says {transformed}")
                )
    return out


def _manifest_metadata_problems(manifest: dict[str, Any], segment: RemoteSegment) -> list[str]:
    out = []
    md = manifest.get("remoteLogSegmentMetadata")
    if isinstance(md, dict):
        said = (md.get("startOffset"), md.get("endOffset"), (md.get("remoteLogSegmentId") or {}).get("id"))
        if said != (segment.start_offset, segment.end_offset, segment.segment_id):
            out.append(
                f"its segment metadata says offsets {said[0]}-{said[1]} id {said[2]}, __remote_log_metadata "
                f"{segment.start_offset}-{segment.end_offset} id {segment.segment_id}"
            )
    size = manifest.get("chunkIndex", {}).get("originalFileSize")
    if size != segment.size:
        out.append(f"its chunk index's original file size is {size}, the metadata's segment size {segment.size}")
    return out


def _range_problems(ranges: dict[str, Any], total: int) -> list[str]:
    """What is wrong with the manifest's index ranges over a ``.indexes`` of ``total`` bytes: they must be there
    (the transaction index may be null), not negative, one after the other in Aiven's order, and end at its end."""
    out = []
    at = 0
    for kind, name in _AIVEN_RANGES.items():
        r = ranges.get(name)
        if r is None and kind == "transaction":
            continue
        if not isinstance(r, dict) or not isinstance(r.get("position"), int) or not isinstance(r.get("size"), int):
            out.append(f"its {name} index range is {r!r}, not a position and a size")
            return out
        if r["position"] != at or r["size"] < 0:
            out.append(f"its {name} index range {r['position']}+{r['size']} does not follow the previous one (at {at})")
        at = r["position"] + max(0, r["size"])
    if at != total:
        out.append(f"its index ranges end at byte {at}, but the .indexes object holds {total} bytes")
    return out


def chunk_sizes(chunk_index: dict[str, Any]) -> tuple[int, int]:
    """(the original file size, the stored size) an Aiven chunk index describes: ``fixed`` (each chunk stored at
    ``transformedChunkSize``, the last at ``finalTransformedChunkSize``) or ``variable`` (the stored sizes listed in
    ``transformedChunks``: base64 of a zstd frame of Aiven's binary list)."""
    original = int(chunk_index["originalFileSize"])
    chunk = int(chunk_index["originalChunkSize"])
    count = -(-original // chunk) if original else 0
    if chunk_index.get("type", "fixed") == "fixed" and "transformedChunkSize" in chunk_index:
        if count == 0:
            return original, 0
        return original, (count - 1) * int(chunk_index["transformedChunkSize"]) + int(
            chunk_index["finalTransformedChunkSize"]
        )
    sizes = transformed_chunks(chunk_index["transformedChunks"])
    if len(sizes) != count:
        raise InvalidRecordError(f"{len(sizes)} chunk sizes listed for {count} chunks")
    return original, sum(sizes)


def transformed_chunks(encoded: str) -> list[int]:
    """Aiven's list of stored chunk sizes: base64, a zstd frame, then a count; for two or more a base, a width and
    each value but the last less the base in that many big-endian bytes; the last value in four."""
    from ..format.compression import decompress

    data = decompress(4, base64.b64decode(encoded))  # codec 4: zstd
    (count,) = struct.unpack_from(">i", data, 0)
    if count <= 1:
        return list(struct.unpack_from(f">{count}i", data, 4))
    base, width = struct.unpack_from(">ib", data, 4)
    at = 9
    values = []
    for _ in range(count - 1):
        values.append(int.from_bytes(data[at : at + width], "big") + base)
        at += width
    values.append(struct.unpack_from(">i", data, at)[0])
    return values


def read_producer_snapshot(
    store: Store, root: str, layout: str, segment: RemoteSegment, recent: RecentSnapshots | None = None
) -> tuple[tuple[bytes, str] | None, int]:
    """((the producer snapshot ``segment``'s copy uploaded: the state at its end, the next segment's start; its
    URI) or None when it cannot be read, the requests it took): one in ``recent`` is not asked for again."""
    recent = recent if recent is not None else RecentSnapshots(0)
    if layout == "kafka":
        uri = object_uri(root, segment_key(layout, segment, _KAFKA_SUFFIXES["producer_snapshot"]))
    else:
        uri = object_uri(root, segment_key(layout, segment, "indexes")) + "#producer_snapshot"
    known = recent.get(uri)
    if known is not None:
        return (known, uri), 0
    if layout == "kafka":
        data = _read(store, uri)
        return (None if data is None else (data, uri)), 1
    objects = read_index_objects(store, root, layout, segment, recent)
    data = objects.data["producer_snapshot"] if objects.indexes_read else None
    return (None if data is None else (data, objects.uris["producer_snapshot"])), objects.requests


def _write_log(store: Store, layout: str, objects: RemoteIndexObjects, manifest_uri: str, target: str) -> None:
    """The segment's ``.log`` as Kafka wrote it, at ``target``: copied (Kafka's layout, Aiven's without compression)
    or each stored chunk decompressed in turn (Aiven's with compression)."""
    if layout == "kafka":
        with open(target, "wb") as f:
            store.copy_to(objects.log_uri, f)
        return
    manifest = objects.manifest if objects.manifest is not None else json.loads(store.read_bytes(manifest_uri))
    chunk_index = manifest["chunkIndex"]
    stored = target + ".stored"
    with open(stored, "wb") as f:
        store.copy_to(objects.log_uri, f)
    if not manifest.get("compression"):
        os.replace(stored, target)
        return
    from ..format.compression import decompress

    sizes = transformed_chunks(chunk_index["transformedChunks"])
    try:
        with open(stored, "rb") as source, open(target, "wb") as out:
            for i, size in enumerate(sizes):
                chunk = source.read(size)
                if len(chunk) != size:
                    raise InvalidRecordError(
                        f"{objects.log_uri}: chunk {i} is cut short ({len(chunk)} of {size} bytes)"
                    )
                try:
                    out.write(decompress(4, chunk))
                except InvalidRecordError as exc:
                    raise InvalidRecordError(f"{objects.log_uri}: chunk {i} does not decompress: {exc}") from None
    finally:
        os.unlink(stored)


@contextlib.contextmanager
def materialised_segment(
    store: Store, root: str, layout: str, segment: RemoteSegment, objects: RemoteIndexObjects,
    state_at_base: tuple[bytes, str] | None,
) -> Iterator[tuple[str, dict[str, str]]]:  # fmt: skip
    """A private partition dir holding ``segment`` as a broker's partition dir would (``<base>.log`` as Kafka wrote
    it, its index files as stored, ``<base>.snapshot`` = ``state_at_base`` (the previous segment's upload), its own
    snapshot as ``<end + 1>.snapshot`` and its epoch blob as ``leader-epoch-checkpoint``), removed on exit; yields
    (its path, local path -> the URI each file came from). :class:`InvalidRecordError` for a ``.log`` whose
    chunks do not decompress."""
    from ..format.layout import LEADER_EPOCH_CHECKPOINT, segment_file

    with tempfile.TemporaryDirectory(prefix="kafka-index-remote-") as tmp:
        partition_dir = os.path.join(tmp, f"{segment.topic}-{segment.partition}")
        os.mkdir(partition_dir)
        base, end = segment.start_offset, segment.end_offset
        sources = {partition_dir: objects.log_uri.rsplit("/", 1)[0]}
        log_path = segment_file(partition_dir, base, ".log")
        manifest_uri = object_uri(root, segment_key(layout, segment, "rsm-manifest"))
        _write_log(store, layout, objects, manifest_uri, log_path)
        sources[log_path] = objects.log_uri
        files = {
            segment_file(partition_dir, base, ".index"): "offset",
            segment_file(partition_dir, base, ".timeindex"): "timestamp",
            segment_file(partition_dir, base, ".txnindex"): "transaction",
            segment_file(partition_dir, end + 1, ".snapshot"): "producer_snapshot",
            os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT): "leader_epoch",
        }
        for path, kind in files.items():
            data = objects.data[kind]
            if data is not None:
                with open(path, "wb") as f:
                    f.write(data)
                sources[path] = objects.uris[kind]
        if state_at_base is not None:
            path = segment_file(partition_dir, base, ".snapshot")
            with open(path, "wb") as f:
                f.write(state_at_base[0])
            sources[path] = state_at_base[1]
        yield partition_dir, sources


#: a rebuilt index file's suffix -> its index kind
_REBUILT_KINDS = {".index": "offset", ".timeindex": "timestamp", ".txnindex": "transaction"}


def write_rebuilt_objects(
    store: Store, root: str, output_root: str, layout: str, segment: RemoteSegment, objects: RemoteIndexObjects,
    rebuilt: dict[str, bytes], tag: str,
) -> list[str]:  # fmt: skip
    """``segment``'s rebuilt index files (suffix -> bytes) written under ``output_root`` at the keys its layout
    gives them under ``root``; the URIs written. ``kafka``: one object per rebuilt file. ``aiven``: a new
    ``.indexes`` (the rebuilt offset, time and transaction indexes, the stored producer snapshot and epoch blob, in
    Aiven's order) and the stored manifest with the ranges of the new ``.indexes`` (nothing else in it changed)."""
    written = []
    if layout == "kafka":
        for suffix, data in sorted(rebuilt.items()):
            uri = object_uri(output_root, segment_key(layout, segment, _KAFKA_SUFFIXES[_REBUILT_KINDS[suffix]]))
            store.put_whole(uri, data, tag)
            written.append(uri)
        return written
    manifest = json.loads(store.read_bytes(object_uri(root, segment_key(layout, segment, "rsm-manifest"))))
    parts = dict(objects.data)
    parts.update({_REBUILT_KINDS[suffix]: data for suffix, data in rebuilt.items()})
    indexes = bytearray()
    ranges: dict[str, Any] = {}
    for kind, name in _AIVEN_RANGES.items():
        part = parts.get(kind)
        if part is None:
            ranges[name] = None
            continue
        ranges[name] = {"position": len(indexes), "size": len(part)}
        indexes += part
    manifest["segmentIndexes"] = ranges
    for suffix, data in (
        ("indexes", bytes(indexes)),
        ("rsm-manifest", json.dumps(manifest, separators=(",", ":")).encode()),
    ):
        uri = object_uri(output_root, segment_key(layout, segment, suffix))
        store.put_whole(uri, data, tag)
        written.append(uri)
    return written


@contextlib.contextmanager
def private_dir(prefix: str) -> Iterator[str]:
    """A new private temporary dir, removed with everything in it on exit."""
    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        yield path


def read_index_files(paths: list[str]) -> dict[str, bytes]:
    """Suffix -> bytes of the ``.index``, ``.timeindex`` and ``.txnindex`` among ``paths`` (a rebuild's output)."""
    out = {}
    for path in paths:
        suffix = os.path.splitext(path)[1]
        if suffix in _REBUILT_KINDS:
            with open(path, "rb") as f:
                out[suffix] = f.read()
    return out
