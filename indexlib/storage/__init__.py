"""Where the engine's files are found and written: log dirs and partitions (``discovery``), staging, backups,
locks and atomic publishing (``publish``).

Imports ``format`` and ``recovery``."""

from .discovery import (
    Discovery,
    LogDirError,
    LogDirMeta,
    PartitionFilterError,
    discover,
    is_partition_dir,
    parse_partition_filter,
    read_log_dir_meta,
)
from .publish import fsync_path

__all__ = [
    "Discovery",
    "LogDirError",
    "LogDirMeta",
    "PartitionFilterError",
    "discover",
    "fsync_path",
    "is_partition_dir",
    "parse_partition_filter",
    "read_log_dir_meta",
]
