"""indexlib: Kafka's segment index files (``.index``, ``.timeindex``, ``.txnindex``), read and written
exactly as Kafka does, through memory-mapped files. No Spark; numpy, crc32c and javaproperties only.

Reference: ``docs/kafka-index-format.md`` of the project's shared material.

indexlib uses no BLAS: imported before numpy, it sets ``OPENBLAS_NUM_THREADS=1`` unless already set, because
numpy's OpenBLAS otherwise starts a thread per extra core that spins after start-up, taking ~80 ms of CPU from
every process and a core from the scan's read-ahead thread.
"""

import os as _os
import sys as _sys

if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .format.abstract_index import DEFAULT_MAX_INDEX_SIZE, AbstractIndex
from .format.errors import (
    ClosedIndexError,
    CorruptIndexError,
    FileNameError,
    IndexArgumentError,
    IndexFullError,
    IndexInUseError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaIndexError,
    NotARegularFileError,
    ReadOnlyIndexError,
    ShortWriteError,
)
from .format.lazy_index import LazyIndex
from .format.offset_index import OffsetIndex
from .format.time_index import NO_TIMESTAMP, TimeIndex
from .format.transaction_index import TransactionIndex
from .format.values import AbortedTxn, OffsetPosition, TimestampOffset

__version__ = "0.1.0"

__all__ = [
    "AbortedTxn",
    "AbstractIndex",
    "ClosedIndexError",
    "CorruptIndexError",
    "DEFAULT_MAX_INDEX_SIZE",
    "FileNameError",
    "IndexArgumentError",
    "IndexFullError",
    "IndexInUseError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaIndexError",
    "LazyIndex",
    "NO_TIMESTAMP",
    "NotARegularFileError",
    "OffsetIndex",
    "OffsetPosition",
    "ReadOnlyIndexError",
    "ShortWriteError",
    "TimeIndex",
    "TimestampOffset",
    "TransactionIndex",
    "__version__",
]
