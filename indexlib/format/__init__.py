"""The bytes Kafka writes: record batches (their layout and a walk's result ``records``; the walk ``batch_walk``
with its header gather ``batch_headers`` and marker reading ``control_records``; the compiled scan ``_kernel``
and which scan runs, ``scan_kernel``), the three index files (``offset_index``, ``time_index``,
``transaction_index``, their base ``abstract_index`` and the file they live in, ``index_file``), file and
directory naming (``layout``), the values entries hold (``values``), the errors the library raises
(``errors``) and whose log dir it is (``meta_properties``).

Imports nothing else of indexlib. It knows bytes and how one index file is mapped or read, nothing about
partitions, runs or what a verdict is."""

from .errors import describe_error, error_line
from .layout import parse_partition_dir_name, segment_base_offsets, segment_file
from .meta_properties import BrokerIdentity, MetaPropertiesError, parse_meta_properties, parse_properties

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
]
