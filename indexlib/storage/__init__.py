"""Every file the engine touches, found, read, locked and written here and nowhere else: the store a run's paths
are in (``store``: the local file system, or a log dir in object storage, ``object_store`` over an
``object_clients`` client), log dirs and partitions (``discovery``), a partition's files as a run reads them
(``partition_files``), KRaft's metadata (``cluster_metadata_files``), the broker's ``.lock``, the run locks and the
stage fence (``locks``), and staging, backups, tail cuts and atomic publishing (``publish``).

This package's names are the stage's interface: the engine imports them from here, never a module inside
(``tests/test_architecture.py``). Imports ``format`` and ``recovery``."""

from typing import TYPE_CHECKING

from ..format.errors import ClusterMetadataError
from .discovery import (
    Discovery,
    LogDirError,
    LogDirMeta,
    Partition,
    PartitionFilterError,
    Segment,
    directory_key,
    discover,
    discover_partition_dir,
    is_partition_dir,
    parse_partition_filter,
    parse_topic_filter,
    read_log_dir_meta,
)
from .file_system_sync import by_file_system
from .file_system_sync import check_available as check_syncfs_available
from .file_system_sync import for_task as sync_for_task
from .file_system_sync import register as register_sync_roots
from .file_system_sync import roots as sync_roots
from .file_system_sync import trusted as syncfs_trusted
from .locks import (
    LockedLogDirError,
    RunInUseError,
    StageFence,
    StagingClosedError,
    broker_locks,
    run_locks,
    staging_open,
    sweep_dead_run_locks,
    sweep_dead_runs,
)
from .partition_files import (
    already_holds,
    file_exists,
    last_offset_before_batch,
    partition_file_names,
    producer_states_inside,
    read_existing_txn_index,
    read_file,
    read_leader_epoch_text,
    read_log_start_offset,
    read_offset_checkpoint,
    read_partition_topic_id,
    read_snapshot_files,
    snapshot_offsets,
    summarize_log,
)
from .publish import (
    ROLLED_SEGMENT_SUFFIXES,
    check_as_read,
    concurrently,
    create_empty_segment,
    discard,
    discard_backup,
    discard_staged,
    drop_segment_files,
    first_file_under,
    fsync_path,
    fsync_paths,
    install,
    keep_backup,
    log_dir_backup_dir,
    move_to_backup,
    name_backups,
    nearest_existing,
    partial_copy_of,
    replace_file,
    save_log_tail,
    stage_checkpoint_file,
    stage_file,
    sweep_partial_backups,
    trim_in_place,
    truncate_log,
    why_unwritable,
    writable,
    write_checkpoint_file,
)
from .recovery_mark import RecoveringMark, mark_path, read_mark, remove_mark, write_mark
from .state import state_dir
from .store import (
    LOCAL,
    ObjectChangedError,
    ObjectStoreError,
    Store,
    StoreSpec,
    is_uri,
    remote_store,
    store_for,
)

if TYPE_CHECKING:  # imported on first use (``__getattr__`` below)
    from .remote_log_metadata_files import read_remote_log_metadata
    from .remote_segments import (
        RecentSnapshots,
        RemoteIndexObjects,
        materialised_segment,
        private_dir,
        read_index_files,
        read_index_objects,
        read_producer_snapshot,
        write_rebuilt_objects,
    )

__all__ = [
    # the store of a run's paths: what a run reads through, and where its output goes (store.py)
    "LOCAL",
    "ObjectChangedError",
    "ObjectStoreError",
    "Store",
    "StoreSpec",
    "is_uri",
    "remote_store",
    "store_for",
    # log dirs and partitions (discovery.py)
    "Discovery",
    "LogDirError",
    "LogDirMeta",
    "Partition",
    "PartitionFilterError",
    "directory_key",
    "discover",
    "discover_partition_dir",
    "is_partition_dir",
    "parse_partition_filter",
    "parse_topic_filter",
    "read_log_dir_meta",
    # KRaft's metadata (cluster_metadata_files.py, imported on first use)
    "ClusterMetadataError",
    "find_cluster_metadata",
    "read_cluster_metadata",
    # tiered storage: __remote_log_metadata, the RSM layouts, a remote segment's index objects (imported on first use)
    "read_remote_log_metadata",
    "read_index_objects",
    "read_producer_snapshot",
    "materialised_segment",
    "write_rebuilt_objects",
    "private_dir",
    "read_index_files",
    "RecentSnapshots",
    "RemoteIndexObjects",
    # a partition's files on a local disk, as the replay and an in-place commit read them (partition_files.py)
    "already_holds",
    "file_exists",
    "Segment",
    "read_file",
    "snapshot_offsets",
    "producer_states_inside",
    "last_offset_before_batch",
    "partition_file_names",
    "read_existing_txn_index",
    "read_leader_epoch_text",
    "read_log_start_offset",
    "read_offset_checkpoint",
    "read_partition_topic_id",
    "read_snapshot_files",
    "summarize_log",
    # what only a broker's own disk has: in-place writes, backups, tail cuts, durability (publish.py, file_system_sync.py)
    "ROLLED_SEGMENT_SUFFIXES",
    "by_file_system",
    "check_as_read",
    "check_syncfs_available",
    "concurrently",
    "create_empty_segment",
    "discard",
    "discard_backup",
    "discard_staged",
    "drop_segment_files",
    "first_file_under",
    "fsync_path",
    "fsync_paths",
    "install",
    "keep_backup",
    "name_backups",
    "partial_copy_of",
    "log_dir_backup_dir",
    "move_to_backup",
    "nearest_existing",
    "register_sync_roots",
    "replace_file",
    "save_log_tail",
    "stage_checkpoint_file",
    "stage_file",
    "sweep_partial_backups",
    "sync_for_task",
    "sync_roots",
    "syncfs_trusted",
    "trim_in_place",
    "truncate_log",
    "why_unwritable",
    "writable",
    "write_checkpoint_file",
    # the broker's .lock, run locks, the stage fence (locks.py); recover's mark (recovery_mark.py); the state dir
    "LockedLogDirError",
    "RunInUseError",
    "StageFence",
    "StagingClosedError",
    "broker_locks",
    "run_locks",
    "staging_open",
    "sweep_dead_run_locks",
    "sweep_dead_runs",
    "RecoveringMark",
    "mark_path",
    "read_mark",
    "remove_mark",
    "write_mark",
    "state_dir",
]


def __getattr__(name: str) -> object:
    """``find_cluster_metadata`` and ``read_cluster_metadata``, and the tiered-storage names, imported on first
    use: their modules (and the schemas of every metadata record) are not every run's start-up cost."""
    if name in ("find_cluster_metadata", "read_cluster_metadata"):
        from . import cluster_metadata_files

        return getattr(cluster_metadata_files, name)
    if name == "read_remote_log_metadata":
        from . import remote_log_metadata_files

        return remote_log_metadata_files.read_remote_log_metadata
    if name in (
        "read_index_objects", "read_producer_snapshot", "materialised_segment", "write_rebuilt_objects",
        "private_dir", "read_index_files", "RecentSnapshots", "RemoteIndexObjects",
    ):  # fmt: skip
        from . import remote_segments

        return getattr(remote_segments, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
