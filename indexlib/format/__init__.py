"""The bytes Kafka writes: record batches (their layout and a walk's result ``records``; the walk ``batch_walk``
with its header gather ``batch_headers`` and marker reading ``control_records``; the compiled scan ``_kernel``
and which scan runs, ``scan_kernel``), the three index files (``offset_index``, ``time_index``,
``transaction_index``, their base ``abstract_index`` and the file they live in, ``index_file``), file and
directory naming (``layout``), the values entries hold (``values``), the errors the library raises
(``errors``), whose log dir it is (``meta_properties``), and the partition state files beside the segments: the text
checkpoints (``checkpoint``, ``leader_epoch_checkpoint``) and the producer-state snapshots (``producer_snapshot``).

Imports nothing else of indexlib. It knows bytes and how one index file is mapped or read, nothing about
partitions, runs or what a verdict is."""

from .checkpoint import CheckpointError, format_offset_checkpoint, parse_offset_checkpoint
from .errors import describe_error, error_line
from .layout import parse_partition_dir_name, segment_base_offsets, segment_file
from .leader_epoch_checkpoint import (
    EpochEntry,
    LeaderEpochProblem,
    check_leader_epoch_checkpoint,
    format_leader_epoch_checkpoint,
    load_leader_epochs,
    parse_leader_epoch_checkpoint,
    truncate_from_end,
    truncate_from_start,
    validate_leader_epochs,
)
from .meta_properties import BrokerIdentity, MetaPropertiesError, parse_meta_properties, parse_properties
from .producer_snapshot import (
    EMPTY_SNAPSHOT,
    ProducerSnapshotEntry,
    SnapshotError,
    format_snapshot,
    kafka_snapshot_order,
    parse_snapshot,
    parse_snapshot_entries,
)

__all__ = [
    "BrokerIdentity",
    "MetaPropertiesError",
    "parse_meta_properties",
    "parse_properties",
    "describe_error",
    "error_line",
    "parse_partition_dir_name",
    "segment_base_offsets",
    "segment_file",
    "CheckpointError",
    "format_offset_checkpoint",
    "parse_offset_checkpoint",
    "EpochEntry",
    "LeaderEpochProblem",
    "check_leader_epoch_checkpoint",
    "format_leader_epoch_checkpoint",
    "load_leader_epochs",
    "parse_leader_epoch_checkpoint",
    "truncate_from_end",
    "truncate_from_start",
    "validate_leader_epochs",
    "EMPTY_SNAPSHOT",
    "ProducerSnapshotEntry",
    "SnapshotError",
    "format_snapshot",
    "kafka_snapshot_order",
    "parse_snapshot",
    "parse_snapshot_entries",
]
