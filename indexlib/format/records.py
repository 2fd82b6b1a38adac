"""Record batches as Kafka lays them out, and what a walk over a ``.log``'s batches reports.

The layout (kafka-index-format.md 2.2): the sizes Kafka's iteration checks, the attribute bits, the 61-byte v2
header (:data:`V2_HEADER_DTYPE`, big-endian, field for field Kafka's ``DefaultRecordBatch``) and the marker
types. The result of a walk (:class:`LogScan`, how it ended, :class:`ScanProblem`) and the problem codes the
compiled kernel and :mod:`.batch_walk` share, with their words made in one place (:func:`problem_from_code`).

Invariants: the constants and the dtype are Kafka's and agree with each other (``V2_HEADER_DTYPE.itemsize ==
V2_HEADER_SIZE``); the codes are ``_kernel.c``'s numbers; nothing here reads a file or runs a scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

#: Kafka's HEADER_SIZE_UP_TO_MAGIC: a walk stops when this many bytes or fewer remain.
HEADER_SIZE_UP_TO_MAGIC = 17
#: Kafka's LegacyRecord.RECORD_OVERHEAD_V0: a size field below this is corrupt.
MIN_SIZE_FIELD = 14
#: Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD.
V2_HEADER_SIZE = 61
LOG_OVERHEAD = 12

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

MARKER_ABORT = 0
MARKER_COMMIT = 1

#: Big-endian layout of the 61-byte v2 batch header.
V2_HEADER_DTYPE = np.dtype(
    [
        ("base_offset", ">i8"),
        ("length", ">i4"),
        ("partition_leader_epoch", ">i4"),
        ("magic", "i1"),
        ("crc", ">u4"),
        ("attributes", ">i2"),
        ("last_offset_delta", ">i4"),
        ("base_timestamp", ">i8"),
        ("max_timestamp", ">i8"),
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("base_sequence", ">i4"),
        ("records_count", ">i4"),
    ]
)
assert V2_HEADER_DTYPE.itemsize == V2_HEADER_SIZE


class StopReason(StrEnum):
    """Why a walk over a ``.log`` ended."""

    END = "end"  # every byte was consumed
    SHORT_TAIL = "short_tail"  # 1..17 bytes left: never parsed (Kafka stops silently)
    INCOMPLETE_BATCH = "incomplete_batch"  # the last batch runs past the end of the file
    CORRUPT_BATCH = "corrupt_batch"  # size < 14, v2 size < 61, or a CRC mismatch
    INVALID_RECORD = "invalid_record"  # a malformed transaction marker; the data ends after that batch


@dataclass(frozen=True)
class ScanProblem:
    """Where and why a walk stopped early or found something Kafka's recovery cannot handle."""

    kind: str  # e.g. "crc_mismatch" (reported as the finding log_crc_mismatch), or a fatal finding kind
    position: int  # byte position of the batch concerned
    batch_index: int  # index of that batch in the walk (== number of good batches before it)
    detail: str
    base_offset: int | None = None


@dataclass
class LogScan:
    """Result of :func:`scan_log`: every valid batch (in columns) and how the walk ended.

    Invariants: batches are contiguous from byte 0 (``positions[i+1] == positions[i] + sizes[i]``) and
    ``valid_bytes == positions[-1] + sizes[-1]`` (0 with no batch); ``valid_bytes <= file_size``; every
    listed batch passed Kafka's size and CRC checks.
    """

    path: str
    file_size: int
    positions: np.ndarray  # int64, start byte of each batch
    sizes: np.ndarray  # int64, 12 + length
    base_offsets: np.ndarray  # int64
    last_offsets: np.ndarray  # int64
    max_timestamps: np.ndarray  # int64 (-1 for v0)
    magic: np.ndarray  # int8
    attributes: np.ndarray  # int16 (v2) / int8 widened (legacy)
    producer_ids: np.ndarray  # int64 (-1 for legacy)
    producer_epochs: np.ndarray  # int16 (-1 for legacy)
    records_counts: np.ndarray  # int32 (-1 for legacy)
    marker_types: np.ndarray  # int16: ABORT 0 / COMMIT 1 / other control type; -1 where not a marker
    stop: StopReason
    problem: ScanProblem | None = None
    #: A batch at which Kafka's recovery would throw instead of finishing (unknown control type, ...).
    fatal: ScanProblem | None = None
    #: What producer state and the leader-epoch cache read, one item per batch, filled by
    #: :func:`~.batch_walk.scan_buffer` once the batches are final (``None`` before): int32 partition leader epoch
    #: and int32 base sequence (-1 for legacy), and for an ABORT/COMMIT marker its int32 coordinator epoch and the
    #: int64 timestamp of its record (Kafka's ``Record.timestamp()``; -1 and -1 where not such a marker).
    partition_leader_epochs: np.ndarray | None = None
    base_sequences: np.ndarray | None = None
    marker_coordinator_epochs: np.ndarray | None = None
    marker_timestamps: np.ndarray | None = None

    @property
    def batch_count(self) -> int:
        return len(self.positions)

    @property
    def valid_bytes(self) -> int:
        if len(self.positions) == 0:
            return 0
        return int(self.positions[-1] + self.sizes[-1])

    @property
    def invalid_bytes(self) -> int:
        """Bytes after the valid data, which Kafka's recovery would truncate."""
        return self.file_size - self.valid_bytes


#: StopReason by the number the compiled kernel returns
STOP_CODES = tuple(StopReason)

# Problems by code (the compiled kernel returns the same numbers; see _kernel.c): a walk's problem ...
P_SIZE, P_V2_SIZE, P_TRUNCATED, P_CRC_V2, P_CRC_LEGACY, P_INVALID_MARKER = range(1, 7)
# ... and a fatal one (Kafka's recovery would throw)
F_COMPRESSED_CONTROL, F_UNKNOWN_CONTROL_TYPE = 7, 8


def problem_from_code(
    code: int, position: int, batch_index: int, base_offset: int | None, a: int, b: int, text: str | None
) -> ScanProblem:
    """The :class:`ScanProblem` for a problem code and its numbers (the one place their words are made)."""
    if code == P_SIZE:
        kind, detail = "size_below_minimum", f"batch size field {a} is below the minimum {MIN_SIZE_FIELD}"
    elif code == P_V2_SIZE:
        kind, detail = "size_below_minimum", f"v2 batch of {a} bytes is below the {V2_HEADER_SIZE}-byte header"
    elif code == P_TRUNCATED:
        kind = "truncated_batch"
        detail = f"batch of {a} bytes runs {position + a - b} bytes past the end of the file ({b} bytes)"
    elif code == P_CRC_V2:
        kind, detail = "crc_mismatch", f"CRC-32C mismatch: stored {a:#010x}, computed {b:#010x}"
    elif code == P_CRC_LEGACY:
        kind, detail = "crc_mismatch", f"legacy CRC32 mismatch: stored {a:#010x}, computed {b:#010x}"
    elif code == P_INVALID_MARKER:
        kind, detail = "invalid_marker", f"malformed transaction marker: {text}"
    elif code == F_COMPRESSED_CONTROL:
        kind = "unknown_compression" if a > 4 else "compressed_control_batch"
        # a known codec is refused only when its batch cannot be read here; `text` says why (the package to install)
        detail = f"control batch with compression {COMPRESSION_NAMES.get(a, a)}: " + (
            "Kafka's recovery fails on it" if a > 4 else text or "its marker cannot be read here"
        )
    elif code == F_UNKNOWN_CONTROL_TYPE:
        kind = "unknown_control_type"
        detail = f"control type {a} in a batch with a producer id: Kafka's recovery fails on it"
    else:
        raise AssertionError(f"unknown scan problem code {code}")
    return ScanProblem(kind, position, batch_index, detail, base_offset)
