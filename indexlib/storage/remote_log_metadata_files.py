"""``__remote_log_metadata`` on disk, read for :mod:`indexlib.format.remote_log_metadata`: the topic's partitions
are ordinary logs (``__remote_log_metadata-<n>`` dirs) in the log dirs of every broker holding a replica, kept
forever by default (``remote.log.metadata.topic.retention.ms`` = -1), so the whole history of the tiered storage
is readable from a stopped broker's disks, with no cluster and no bucket.

:func:`read_remote_log_metadata` reads every replica found of each metadata partition, keeps each offset's record
once (replicas hold the same records; a lagging one only fewer), and replays each partition in offset order. A
torn tail ends that replica's walk where Kafka's recovery would truncate it, and says so.

Invariants: read-only; a dir that cannot be listed is a :class:`ClusterMetadataError` naming it; a record that
does not parse is counted, never raised.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from ..format.errors import ClusterMetadataError, describe_error
from ..format.layout import LOG_SUFFIX, parse_segment_name, segment_file
from ..format.remote_log_metadata import REMOTE_LOG_METADATA_TOPIC
from .cluster_metadata_files import replay_log_file

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteLogInventory
    from .store import Store

__all__ = ["find_remote_log_metadata", "read_remote_log_metadata"]

_PARTITION_DIR = re.compile(re.escape(REMOTE_LOG_METADATA_TOPIC) + r"-(\d+)")


def find_remote_log_metadata(log_dirs: list[str], store: Store | None = None) -> dict[int, list[str]]:
    """Metadata partition -> its dirs (one per replica found) in ``log_dirs``, on the local disk or in ``store``."""
    found: dict[int, list[str]] = {}
    for log_dir in log_dirs:
        try:
            names = os.listdir(log_dir) if store is None else store.list_names(log_dir)
        except OSError as exc:
            raise ClusterMetadataError(f"{log_dir}: cannot list the log dir: {describe_error(exc)}") from None
        for name in sorted(names):
            if m := _PARTITION_DIR.fullmatch(name):
                path = os.path.join(log_dir, name)
                if os.path.isdir(path) if store is None else store.is_dir(path):
                    found.setdefault(int(m.group(1)), []).append(path)
    return dict(sorted(found.items()))


def _replica_records(path: str, store: Store | None, stopped: list[str]) -> dict[int, Any]:
    """Offset -> decoded record (or why it does not read) of one replica's segments, in offset order."""
    from ..format.remote_log_metadata import read_remote_log_metadata as decode

    try:
        names = os.listdir(path) if store is None else store.list_names(path)
    except OSError as exc:
        raise ClusterMetadataError(f"{path}: cannot list the remote log metadata: {describe_error(exc)}") from None
    segments = sorted(s[0] for name in names if (s := parse_segment_name(name)) and s[1] == LOG_SUFFIX)
    records: dict[int, Any] = {}

    def skip(first: int, last: int, why: str) -> None:
        for offset in range(first, last + 1):
            records[offset] = why

    for base in segments:
        why = replay_log_file(
            segment_file(path, base, LOG_SUFFIX), 0, decode, records.__setitem__, skip, store=store,
            unreadable="cannot read the remote log metadata",
        )  # fmt: skip
        if why is not None:
            stopped.append(why)
            break
    return records


def read_remote_log_metadata(log_dirs: list[str], store: Store | None = None) -> RemoteLogInventory:
    """The remote segments the ``__remote_log_metadata`` partitions in ``log_dirs`` describe (module docstring)."""
    from ..format.remote_log_metadata import RemoteLogReplay

    replay = RemoteLogReplay()
    for partition, replicas in find_remote_log_metadata(log_dirs, store).items():
        merged: dict[int, Any] = {}
        for path in replicas:
            stopped: list[str] = []
            for offset, record in _replica_records(path, store, stopped).items():
                if offset not in merged or isinstance(merged[offset], str):
                    merged[offset] = record
            for why in stopped:
                replay.stop(why)
        for offset in sorted(merged):
            replay.apply(partition, offset, merged[offset])
    return replay.finish()
