"""KRaft's metadata on disk, read for :mod:`indexlib.format.cluster_metadata`: the ``__cluster_metadata-0`` dir of
a broker's (or controller's) metadata log dir holds the metadata log's segments and its snapshots
(``<end offset>-<epoch>.checkpoint``: record batches, every record below the end offset).

:func:`read_cluster_metadata` replays the latest snapshot, then the log's records from the snapshot's end offset
on, as a broker's metadata loader does at its start; each ``.log`` is walked with Kafka's iteration rules
(:func:`~indexlib.format.batch_walk.scan_log`), so a torn tail (a killed broker) ends the replay at its last valid
batch, and says so (``ClusterMetadata.stopped``); a latest snapshot that does not read whole is refused. Control
batches (a snapshot's header and footer, KRaft's leader changes and voters) hold no metadata
record and are passed over.

Invariants: read-only; a file that cannot be read is a :class:`ClusterMetadataError` naming it; a record that
does not parse is counted, never raised.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..format.batch_walk import open_log, scan_buffer
from ..format.compression import CodecUnavailableError
from ..format.errors import ClusterMetadataError, InvalidRecordError, describe_error
from ..format.layout import (
    CLUSTER_METADATA_TOPIC,
    LOG_SUFFIX,
    parse_kraft_snapshot_name,
    parse_segment_name,
    partition_name,
)
from ..format.records import ATTR_CONTROL

if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable
    from typing import Any

    from ..format.cluster_metadata import ClusterMetadata, MetadataReplay
    from .store import Store

#: the partition dir of the metadata log inside a metadata log dir
CLUSTER_METADATA_DIR = partition_name(CLUSTER_METADATA_TOPIC, 0)

__all__ = ["CLUSTER_METADATA_DIR", "ClusterMetadataError", "find_cluster_metadata", "read_cluster_metadata"]


_WAY_ROUND = "give --cluster-metadata none (and --topic-config) to run without it"


def find_cluster_metadata(log_dirs: list[str], store: Store | None = None) -> str | None:
    """The ``__cluster_metadata-0`` dir of the first of ``log_dirs`` that has one (a broker keeps it in its
    ``metadata.log.dir``, by default its first log dir), on the local disk or in ``store``;
    :class:`ClusterMetadataError` when the first one there is not a dir (a file, a dangling or looping link): the
    settings must not silently fall back to Kafka's."""
    for log_dir in log_dirs:
        if store is not None and not store.is_dir(log_dir):  # one listing of the log dir, which discovery reuses
            continue
        candidate = os.path.join(log_dir, CLUSTER_METADATA_DIR)
        if os.path.isdir(candidate) if store is None else store.is_dir(candidate):
            return candidate
        if os.path.lexists(candidate) if store is None else store.exists(candidate):
            raise ClusterMetadataError(f"{candidate}: not a directory (KRaft's metadata log dir is expected there)")
    return None


def _open_records(path: str, store: Store | None) -> tuple[int, bytes | mmap.mmap | None, Callable[[], None]]:
    """(size, its bytes or None when empty, close) of a metadata segment or snapshot: mapped from the local disk,
    or read whole from ``store`` (the metadata log's segments are small)."""
    if store is None:
        size, mm = open_log(path)
        return size, mm, (mm.close if mm is not None else lambda: None)
    data = store.read_bytes(path)
    return len(data), (data or None), lambda: None


def replay_log_file(
    path: str,
    from_offset: int,
    decode: Callable[[bytes], Any],
    apply: Callable[[int, Any], None],
    skip: Callable[[int, int, str], None],
    store: Store | None = None,
    whole: bool = False,
    unreadable: str = "cannot read the cluster metadata",
) -> str | None:
    """Call ``apply(offset, decode(value))`` for each record at or above ``from_offset`` of the non-control record
    batches of ``path`` (``apply(offset, reason)`` when its value is absent or ``decode`` raises
    :class:`InvalidRecordError`; ``skip(first, last, reason)`` for a batch that does not read). Returns why the
    walk ended early (a torn or corrupt batch: the records after it are not read), or None. With ``whole``, a
    file that is empty or does not read whole is a :class:`ClusterMetadataError` instead."""
    from ..format.record_decoding import batch_records

    try:
        size, mm, close = _open_records(path, store)
    except OSError as exc:
        raise ClusterMetadataError(f"{path}: {unreadable}: {describe_error(exc)}") from None
    if mm is None:
        if whole:
            raise ClusterMetadataError(f"{path}: the latest KRaft snapshot is empty; {_WAY_ROUND}")
        return None
    stopped = None
    try:
        scan = scan_buffer(mm, size, path)
        if scan.valid_bytes < size or scan.fatal is not None:
            problem = scan.fatal or scan.problem
            why = (
                f"{problem.kind} at byte {problem.position}"
                if problem
                else f"{scan.stop.value} at byte {scan.valid_bytes}"
            )
            if whole:
                raise ClusterMetadataError(
                    f"{path}: the latest KRaft snapshot does not read whole ({why}); {_WAY_ROUND}"
                )
            stopped = f"{path}: {why}; the records after it were not read"
        for i in range(scan.batch_count):
            if int(scan.last_offsets[i]) < from_offset or int(scan.attributes[i]) & ATTR_CONTROL:
                continue
            pos, length = int(scan.positions[i]), int(scan.sizes[i])
            try:
                records = batch_records(mm[pos : pos + length])
            except (InvalidRecordError, CodecUnavailableError) as exc:
                skip(int(scan.base_offsets[i]), int(scan.last_offsets[i]), f"a batch that does not read: {exc}")
                continue
            for r in records:
                if r.offset < from_offset:
                    continue
                if r.value is None:
                    apply(r.offset, "a record without a value")
                    continue
                try:
                    apply(r.offset, decode(r.value))
                except InvalidRecordError as exc:
                    apply(r.offset, str(exc))
    finally:
        close()
    return stopped


def _replay_file(
    replay: MetadataReplay, path: str, from_offset: int, snapshot: bool = False, store: Store | None = None
) -> None:
    """Apply the metadata records at or above ``from_offset`` of ``path`` (a segment or a snapshot, which must
    read whole: Kafka writes one whole, then renames it); a segment whose walk ends early ends the replay there,
    saying so in ``stopped``."""
    from ..format.cluster_metadata import APPLIED_TYPES
    from ..format.metadata_records import read_metadata_record

    stopped = replay_log_file(
        path, from_offset, lambda value: read_metadata_record(value, APPLIED_TYPES), replay.apply, replay.skip,
        store=store, whole=snapshot,
    )  # fmt: skip
    if stopped is not None:
        replay.state.stopped = stopped


def read_cluster_metadata(metadata_dir: str, store: Store | None = None) -> ClusterMetadata:
    """The state the metadata in ``metadata_dir`` (a ``__cluster_metadata-0`` dir, on the local disk or in
    ``store``) describe (module docstring). The reader's modules (every metadata record's schema) are imported here,
    not by a run that finds no metadata."""
    from ..format.cluster_metadata import MetadataReplay

    try:
        names = os.listdir(metadata_dir) if store is None else store.list_names(metadata_dir)
    except OSError as exc:
        raise ClusterMetadataError(f"{metadata_dir}: cannot list the cluster metadata: {describe_error(exc)}") from None
    snapshots = sorted((found, name) for name in names if (found := parse_kraft_snapshot_name(name)) is not None)
    segments = sorted(
        (segment[0], name) for name in names if (segment := parse_segment_name(name)) and segment[1] == LOG_SUFFIX
    )
    replay = MetadataReplay()
    start = 0
    if snapshots:
        (end_offset, _), name = snapshots[-1]
        _replay_file(replay, os.path.join(metadata_dir, name), 0, snapshot=True, store=store)
        replay.state.snapshot = start = end_offset
        replay.state.end_offset = max(replay.state.end_offset, end_offset)
    for i, (_, name) in enumerate(segments):
        following = segments[i + 1][0] if i + 1 < len(segments) else None
        if following is not None and following <= start:
            continue  # every record of this segment is in the snapshot
        _replay_file(replay, os.path.join(metadata_dir, name), start, store=store)
        if replay.state.stopped is not None:
            break  # Kafka's recovery of the metadata log truncates there too
    return replay.finish()
