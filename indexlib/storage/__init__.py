"""Every file the engine touches, found, read, locked and written here and nowhere else: the store a run's paths
are in (``store``: the local file system, or a log dir in object storage, ``object_store`` over an
``object_clients`` client), log dirs and partitions (``discovery``), a partition's files as a run reads them
(``partition_files``), KRaft's metadata (``cluster_metadata_files``), the broker's ``.lock``, the run locks and the
stage fence (``locks``), and staging, backups, tail cuts and atomic publishing (``publish``).

Imports ``format`` and ``recovery``."""

from ..format.errors import ClusterMetadataError
from .discovery import (
    Discovery,
    LogDirError,
    LogDirMeta,
    Partition,
    PartitionFilterError,
    discover,
    is_partition_dir,
    parse_partition_filter,
    parse_topic_filter,
    read_log_dir_meta,
)
from .file_system_sync import for_task as sync_for_task
from .file_system_sync import roots as sync_roots
from .publish import fsync_path
from .store import LOCAL, ObjectChangedError, ObjectStoreError, StoreSpec, is_uri, remote_store, store_for

__all__ = [
    "ClusterMetadataError",
    "find_cluster_metadata",
    "read_cluster_metadata",
    "Discovery",
    "LogDirError",
    "LogDirMeta",
    "LOCAL",
    "ObjectChangedError",
    "ObjectStoreError",
    "StoreSpec",
    "Partition",
    "PartitionFilterError",
    "discover",
    "fsync_path",
    "is_partition_dir",
    "parse_partition_filter",
    "parse_topic_filter",
    "read_log_dir_meta",
    "sync_for_task",
    "remote_store",
    "store_for",
    "sync_roots",
    "is_uri",
]


def __getattr__(name: str) -> object:
    """``find_cluster_metadata`` and ``read_cluster_metadata``, imported on first use: their module (and the
    schemas of every metadata record) is not every run's start-up cost."""
    if name in ("find_cluster_metadata", "read_cluster_metadata"):
        from . import cluster_metadata_files

        return getattr(cluster_metadata_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
