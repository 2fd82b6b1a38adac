"""Where the engine's files are found and written: log dirs and partitions (``discovery``), staging, backups,
locks and atomic publishing (``publish``).

Imports ``format`` and ``recovery``."""

from .discovery import (
    Discovery,
    LogDirError,
    PartitionFilterError,
    discover,
    is_partition_dir,
    parse_partition_filter,
)
from .publish import fsync_path

__all__ = [
    "Discovery",
    "LogDirError",
    "PartitionFilterError",
    "discover",
    "fsync_path",
    "is_partition_dir",
    "parse_partition_filter",
]
