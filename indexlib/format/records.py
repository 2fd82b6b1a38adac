"""Record-batch reader over a memory-mapped ``.log`` segment, with Kafka's exact iteration rules.

The walk (:func:`scan_log`) is one tight loop that only reads what it must to advance and validate each
batch (size, magic, CRC): a fast path for well-formed v2 batches (compiled: ``indexlib.format._kernel.walk_v2``;
the same loop in Python where the extension is not built or ``KAFKA_INDEX_PURE_PYTHON=1``), and a general
step with every rule for anything else. Every other header field is then gathered for all batches at once with numpy. Nothing of
the file is copied into Python bytes, and nothing at or past ``end`` is read. Compressed payloads are never
decompressed.

Iteration rules (Kafka's ``FileLogInputStream`` + ``ensureValid``, kafka-index-format.md 2.2 and 6):

* stop normally when 17 or fewer bytes remain (``pos >= end - 17``);
* ``size < 14`` is corrupt;
* a batch that does not fit in the file ends the walk normally (an incomplete tail);
* magic >= 2 (signed byte, so 2..127) is a v2 batch: size >= 61 and CRC-32C of bytes [21, end);
  anything else is a legacy v0/v1 entry: CRC32 of the record from its magic byte to the end;
* for v2 control batches that carry a producer id, the first record must be a well-formed transaction
  marker; a malformed one ends the valid data *after* that batch (Kafka's ``InvalidRecordException``),
  and a control type other than ABORT/COMMIT is fatal for Kafka's recovery (reported, not guessed).
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .errors import InvalidRecordError, NotARegularFileError

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on

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

_compiled: ModuleType | None
try:
    import indexlib.format._kernel as _compiled
except ImportError as exc:  # pragma: no cover - built without a C compiler, or its CRC self-test failed
    _compiled = None
    import warnings

    warnings.warn(
        f"indexlib: the compiled scan kernel (indexlib.format._kernel) cannot be loaded ({exc}), so segments are scanned "
        "in pure Python, several times slower; reinstall with a C compiler (gcc or clang) present",
        RuntimeWarning,
        stacklevel=2,
    )
#: the compiled fast path, unless the pure-Python one is asked for (the reference, and the fallback)
KERNEL = None if os.environ.get("KAFKA_INDEX_PURE_PYTHON") else _compiled
#: the compiled scan reads a file longer than two megabytes one megabyte ahead on a thread of its own, unless
#: ``KAFKA_INDEX_READ_AHEAD=0``
READ_AHEAD = os.environ.get("KAFKA_INDEX_READ_AHEAD", "1") != "0"


def crc32c_function(compiled: bool | None = None) -> Callable[[Buffer], int]:
    """CRC-32C of a buffer: the compiled kernel's (the CPU's instruction) when the kernel is in use (or
    ``compiled``), else the ``crc32c`` package's, imported only then (its import costs ~30 ms of every
    process's start)."""
    kernel = KERNEL if compiled is None else (_compiled if compiled else None)
    if kernel is not None:
        function: Callable[[Buffer], int] = kernel.crc32c
        return function
    import crc32c

    if not crc32c.hardware_based:  # pragma: no cover - depends on the CPU
        import warnings

        warnings.warn(
            "crc32c is running in software mode: CRC-32C checks will be an order of magnitude slower",
            RuntimeWarning,
            stacklevel=2,
        )
    return crc32c.crc32c


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
        detail = f"control batch with compression {COMPRESSION_NAMES.get(a, a)}: " + (
            "Kafka's recovery fails on it" if a > 4 else "its marker cannot be read without decompressing (unsupported)"
        )
    elif code == F_UNKNOWN_CONTROL_TYPE:
        kind = "unknown_control_type"
        detail = f"control type {a} in a batch with a producer id: Kafka's recovery fails on it"
    else:
        raise AssertionError(f"unknown scan problem code {code}")
    return ScanProblem(kind, position, batch_index, detail, base_offset)


def compiled_kernel() -> ModuleType | None:
    """The compiled kernel if it is built, whatever ``KAFKA_INDEX_PURE_PYTHON`` says (tests compare both)."""
    return _compiled


_SIZE_MAGIC_CRC = struct.Struct(">i4xBI")  # at pos+8: size, (leader epoch skipped), magic, crc
_SIZE_MAGIC = struct.Struct(">i4xB")  # at pos+8: size, magic (Kafka's 17-byte header up to the magic)
_LEGACY_CRC = struct.Struct(">I")


def open_segment(path: str | os.PathLike[str]) -> int:
    """Open a ``.log`` read-only (never blocking on a FIFO); a file descriptor. :class:`NotARegularFileError` if it is
    not a regular file."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFileError(f"{os.fspath(path)}: not a regular file")
    return fd


def open_log(path: str | os.PathLike[str]) -> tuple[int, mmap.mmap | None]:
    """Open a ``.log`` read-only and map it (``None`` for an empty file). Returns (size, mapping)."""
    fd = open_segment(path)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, None
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        mm = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    if hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_SEQUENTIAL)
    return size, mm


def scan_log(path: str | os.PathLike[str]) -> LogScan:
    """Walk a ``.log`` segment with Kafka's rules; see the module docstring. Never modifies the file."""
    path = os.fspath(path)
    size, mm = open_log(path)
    try:
        return scan_buffer(mm if mm is not None else b"", size, path)
    finally:
        if mm is not None:
            mm.close()


def scan_buffer(buf: Buffer, end: int, path: str = "<buffer>", compiled: bool | None = None) -> LogScan:
    """:func:`scan_log` over any buffer of ``end`` bytes (an mmap, bytes).

    The walk has two parts. A fast inner loop accepts the common case only: a magic-2 batch whose
    whole header lies before ``end``, with size >= 61, that fits, and whose CRC-32C matches. Every
    other batch (legacy, magic 3..127, the last bytes of the file, anything wrong) falls through to
    the general step, which applies all of Kafka's rules to that same batch, so the result does not
    depend on which part accepted a batch. Only Kafka's 17-byte header is read before the batch is
    known to fit, so no byte at or after ``end`` is read. Whether a v2 control batch was accepted is
    decided afterwards from the gathered attributes, not in the loop. ``compiled``: use the compiled
    fast path (default: when it is built, see :data:`KERNEL`); both give the same scan.
    """
    kernel = KERNEL if compiled is None else (_compiled if compiled else None)
    view = memoryview(buf)
    unpack_smc = _SIZE_MAGIC_CRC.unpack_from
    unpack_sm = _SIZE_MAGIC.unpack_from
    unpack_u32 = _LEGACY_CRC.unpack_from
    crc_c = crc32c_function(kernel is not None)
    crc_ieee = zlib.crc32
    parts: list[npt.NDArray[np.int64]] = []  # accepted positions, in order: the kernel's chunks ...
    positions: list[int] = []  # ... and the ones accepted in Python since the last chunk
    append = positions.append

    def accepted() -> int:
        return sum(len(p) for p in parts) + len(positions)

    legacy_seen = False
    pos = 0
    stop = StopReason.END
    problem: ScanProblem | None = None
    limit = end - HEADER_SIZE_UP_TO_MAGIC
    fast_limit = end - V2_HEADER_SIZE  # pos <= fast_limit: the whole v2 header is before ``end``
    try:
        while True:
            if kernel is not None:
                chunk, pos = kernel.walk_v2(view, pos, end)
                if chunk:
                    if positions:
                        parts.append(np.asarray(positions, dtype=np.int64))
                        positions.clear()
                    parts.append(np.frombuffer(chunk, dtype=np.int64))
            # Fast path in Python. (Written as ``while True`` + ``if ... break`` on purpose: on CPython 3.11
            # this shape measured ~1/3 faster per iteration than ``while pos <= fast_limit``.)
            while kernel is None:
                if pos > fast_limit:
                    break
                length, magic, stored_crc = unpack_smc(view, pos + 8)
                batch_end = pos + LOG_OVERHEAD + length
                if (
                    magic == 2
                    and length >= V2_HEADER_SIZE - LOG_OVERHEAD
                    and batch_end <= end
                    and crc_c(view[pos + 21 : batch_end]) == stored_crc
                ):
                    append(pos)
                    pos = batch_end
                    continue
                break
            # General step: Kafka's rules for the one batch at ``pos``.
            if pos >= limit:
                if pos < end:
                    stop = StopReason.SHORT_TAIL
                break
            if kernel is not None or pos > fast_limit:
                length, magic = unpack_sm(view, pos + 8)
            # else the Python fast loop stopped on this very batch and already read its size and magic
            if length < MIN_SIZE_FIELD:
                stop = StopReason.CORRUPT_BATCH
                problem = problem_from_code(P_SIZE, pos, accepted(), _base_offset_at(view, pos), length, 0, None)
                break
            batch_end = pos + LOG_OVERHEAD + length
            if batch_end > end:
                stop = StopReason.INCOMPLETE_BATCH
                problem = problem_from_code(
                    P_TRUNCATED, pos, accepted(), _base_offset_at(view, pos), LOG_OVERHEAD + length, end, None
                )
                break
            if 2 <= magic < 128:
                if length + LOG_OVERHEAD < V2_HEADER_SIZE:
                    stop = StopReason.CORRUPT_BATCH
                    problem = problem_from_code(
                        P_V2_SIZE, pos, accepted(), _base_offset_at(view, pos), length + LOG_OVERHEAD, 0, None
                    )
                    break
                stored_crc = unpack_u32(view, pos + 17)[0]
                computed = crc_c(view[pos + 21 : batch_end])
                if computed != stored_crc:
                    stop = StopReason.CORRUPT_BATCH
                    problem = problem_from_code(
                        P_CRC_V2, pos, accepted(), _base_offset_at(view, pos), stored_crc, computed, None
                    )
                    break
            else:
                legacy_seen = True
                crc_stored = unpack_u32(view, pos + 12)[0]
                computed = crc_ieee(view[pos + 16 : batch_end])
                if computed != crc_stored:
                    stop = StopReason.CORRUPT_BATCH
                    problem = problem_from_code(
                        P_CRC_LEGACY, pos, accepted(), _base_offset_at(view, pos), crc_stored, computed, None
                    )
                    break
            append(pos)
            pos = batch_end
        if positions or not parts:
            parts.append(np.asarray(positions, dtype=np.int64))
        scan = _gather(view, path, end, np.concatenate(parts), legacy_seen, stop, problem)
        if scan.batch_count and ((scan.attributes & ATTR_CONTROL) != 0).any():
            _check_markers(view, scan)  # it looks at v2 control batches only
        return scan
    finally:
        view.release()


def _base_offset_at(view: memoryview, pos: int) -> int:
    base_offset: int = struct.unpack_from(">q", view, pos)[0]
    return base_offset


def _strided(view: memoryview, end: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """A read-only array with one ``dtype`` item starting at every byte ``p`` with ``p + itemsize <= end``.

    Fancy-indexing it with batch positions copies whole headers at once (a fixed-size copy per item),
    without building an index per byte.
    """
    dtype = np.dtype(dtype)
    return np.ndarray((end - dtype.itemsize + 1,), dtype, buffer=view, strides=(1,))


def _gather(
    view: memoryview,
    path: str,
    end: int,
    positions: npt.NDArray[np.int64],
    legacy_seen: bool,
    stop: StopReason,
    problem: ScanProblem | None,
) -> LogScan:
    """Read every header field of the accepted batches at once (vectorised gather)."""
    n = len(positions)
    pos = np.asarray(positions, dtype=np.int64)
    if n == 0:
        empty = np.empty(0, dtype=np.int64)
        return LogScan(
            path,
            end,
            pos,
            empty,
            empty,
            empty,
            empty,
            np.empty(0, np.int8),
            np.empty(0, np.int16),
            empty,
            np.empty(0, np.int16),
            np.empty(0, np.int32),
            np.empty(0, np.int16),
            stop,
            problem,
        )
    raw = np.frombuffer(view, dtype=np.uint8, count=end)
    magic = raw[pos + 16].view(np.int8)
    is_v2 = magic >= 2
    # The last v2 header always fits: a v2 batch is at least 61 bytes long.
    if not legacy_seen:  # every accepted batch is v2
        headers = _strided(view, end, f"V{V2_HEADER_SIZE}")[pos].view(V2_HEADER_DTYPE)
    else:
        headers = np.zeros(n, dtype=V2_HEADER_DTYPE)
        v2_pos = pos[is_v2]
        if len(v2_pos):
            headers[is_v2] = _strided(view, end, f"V{V2_HEADER_SIZE}")[v2_pos].view(V2_HEADER_DTYPE)
    sizes = headers["length"].astype(np.int64) + LOG_OVERHEAD
    base_offsets = headers["base_offset"].astype(np.int64)
    last_offsets = base_offsets + headers["last_offset_delta"].astype(np.int64)
    max_timestamps = headers["max_timestamp"].astype(np.int64)
    attributes = headers["attributes"].astype(np.int16)
    producer_ids = headers["producer_id"].astype(np.int64)
    producer_epochs = headers["producer_epoch"].astype(np.int16)
    records_counts = headers["records_count"].astype(np.int32)
    del headers
    if legacy_seen:
        legacy = ~is_v2
        lp = pos[legacy]
        offsets = _strided(view, end, "V12")[lp].view([("offset", ">i8"), ("size", ">i4")])
        sizes[legacy] = offsets["size"].astype(np.int64) + LOG_OVERHEAD
        base_offsets[legacy] = offsets["offset"]
        last_offsets[legacy] = offsets["offset"]  # the wrapper's offset is the last inner offset
        attributes[legacy] = raw[lp + 17]
        producer_ids[legacy] = -1
        producer_epochs[legacy] = -1
        records_counts[legacy] = -1
        ts = np.full(len(lp), -1, dtype=np.int64)
        v1 = magic[legacy] == 1
        if v1.any():
            # A legacy entry is at least 12 + 14 bytes, so a v1 timestamp at +18..+26 is inside the file
            # (Kafka checks no more than size >= 14 and the CRC32 before reading it).
            ts[v1] = _strided(view, end, ">i8")[lp[v1] + 18]
        max_timestamps[legacy] = ts
    marker_types = np.full(n, -1, dtype=np.int16)
    return LogScan(
        path,
        end,
        pos,
        sizes,
        base_offsets,
        last_offsets,
        max_timestamps,
        magic,
        attributes,
        producer_ids,
        producer_epochs,
        records_counts,
        marker_types,
        stop,
        problem,
    )


def _read_zigzag(view: memoryview | bytes, pos: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint of at most ``max_bytes`` bytes at ``pos``; :class:`InvalidRecordError` when malformed or past ``limit``."""
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= limit:
            raise InvalidRecordError("varint runs past the end of the record")
        b = view[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise InvalidRecordError(f"varint longer than {max_bytes} bytes")


def _read_varint(view: memoryview | bytes, pos: int, limit: int) -> tuple[int, int]:
    return _read_zigzag(view, pos, limit, 5)


def _read_varlong(view: memoryview | bytes, pos: int, limit: int) -> tuple[int, int]:
    return _read_zigzag(view, pos, limit, 10)


def _length_prefixed(view: memoryview | bytes, p: int, end: int, what: str) -> tuple[int, int, int]:
    """A control record's varint-length-prefixed key or value: (start, length, position after it)."""
    length, p = _read_varint(view, p, end)
    if length < 0:
        raise InvalidRecordError(f"control record has no {what}")
    if p + length > end:
        raise InvalidRecordError(f"control record {what} runs past the record")
    return p, length, p + length


def parse_marker(view: memoryview | bytes, pos: int, size: int, records_count: int) -> tuple[int, int]:
    """Parse the first record of an uncompressed control batch at ``pos`` as a transaction marker.

    Returns ``(control_type, coordinator_epoch)``. Raises :class:`InvalidRecordError` with Kafka's reason when the
    record or the marker is malformed (Kafka: ``InvalidRecordException``). The control type is returned
    as found; callers decide what a type other than ABORT/COMMIT means.
    """
    end = pos + size
    p = pos + V2_HEADER_SIZE
    body_len, p = _read_varint(view, p, end)
    record_start = p
    if body_len < 0 or record_start + body_len > end:
        raise InvalidRecordError(f"invalid record size {body_len}")
    record_end = record_start + body_len
    p += 1  # attributes
    _, p = _read_varlong(view, p, record_end)  # timestamp delta
    _, p = _read_varint(view, p, record_end)  # offset delta
    key, key_len, p = _length_prefixed(view, p, record_end, "key")
    value, value_len, p = _length_prefixed(view, p, record_end, "value")
    header_count, p = _read_varint(view, p, record_end)
    if header_count < 0:
        raise InvalidRecordError(f"invalid header count {header_count}")
    for _ in range(header_count):
        hk, p = _read_varint(view, p, record_end)
        if hk < 0 or p + hk > record_end:
            raise InvalidRecordError("invalid header key")
        p += hk
        hv, p = _read_varint(view, p, record_end)
        if p + max(hv, 0) > record_end:
            raise InvalidRecordError("invalid header value")
        p += max(hv, 0)
    if p != record_end:
        raise InvalidRecordError(f"record body of {body_len} bytes has {record_end - p} bytes left over")
    if records_count == 1 and record_end != end:
        raise InvalidRecordError("incorrect declared batch size, records still remaining in the batch")
    if key_len < 4:
        raise InvalidRecordError(f"control record key of {key_len} bytes is shorter than 4")
    key_version, control_type = struct.unpack_from(">hh", view, key)
    if key_version < 0:
        raise InvalidRecordError(f"invalid control record key version {key_version}")
    if control_type not in (MARKER_ABORT, MARKER_COMMIT):
        return control_type, -1
    if value_len < 6:
        raise InvalidRecordError(f"end transaction marker value of {value_len} bytes is shorter than 6")
    value_version, coordinator_epoch = struct.unpack_from(">hi", view, value)
    if value_version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {value_version}")
    return control_type, coordinator_epoch


def marker_type_or_error(batch: Buffer, records_count: int) -> int | str:
    """The control type of the marker a whole control batch (its bytes from the first) holds, or why it
    is malformed (:func:`parse_marker`'s reason)."""
    view = memoryview(batch)
    try:
        return parse_marker(view, 0, len(view), records_count)[0]
    except ValueError as exc:
        return str(exc)


def _check_markers(view: memoryview, scan: LogScan) -> None:
    """Parse the markers of control batches that carry a producer id (what Kafka's producer state reads),
    recording their type, and cut the scan after a malformed one."""
    is_marker = ((scan.attributes & ATTR_CONTROL) != 0) & (scan.magic >= 2) & (scan.producer_ids > -1)
    is_marker &= scan.records_counts != 0
    for i in np.flatnonzero(is_marker).tolist():
        pos, size = int(scan.positions[i]), int(scan.sizes[i])
        codec = int(scan.attributes[i]) & ATTR_COMPRESSION_MASK
        base = int(scan.base_offsets[i])
        if codec != 0:
            scan.fatal = problem_from_code(F_COMPRESSED_CONTROL, pos, i, base, codec, 0, None)
            _cut(scan, i)
            return
        control_type = marker_type_or_error(view[pos : pos + size], int(scan.records_counts[i]))
        if isinstance(control_type, str):
            scan.problem = problem_from_code(P_INVALID_MARKER, pos, i, base, 0, 0, control_type)
            scan.stop = StopReason.INVALID_RECORD
            _cut(scan, i + 1)
            return
        scan.marker_types[i] = control_type
        if control_type not in (MARKER_ABORT, MARKER_COMMIT):
            scan.fatal = problem_from_code(F_UNKNOWN_CONTROL_TYPE, pos, i, base, control_type, 0, None)
            _cut(scan, i + 1)
            return


def _cut(scan: LogScan, n: int) -> None:
    """Keep only the first ``n`` batches."""
    for name in (
        "positions",
        "sizes",
        "base_offsets",
        "last_offsets",
        "max_timestamps",
        "magic",
        "attributes",
        "producer_ids",
        "producer_epochs",
        "records_counts",
        "marker_types",
    ):
        setattr(scan, name, getattr(scan, name)[:n])
