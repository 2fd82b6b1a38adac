"""The walk over a ``.log`` segment's record batches, with Kafka's exact iteration rules.

The walk (:func:`scan_log`) is one tight loop that only reads what it must to advance and validate each
batch (size, magic, CRC): a fast path for well-formed v2 batches (compiled: ``indexlib.format._kernel.walk_v2``;
the same loop in Python where the extension is not built or ``KAFKA_INDEX_PURE_PYTHON=1``, see
:mod:`.scan_kernel`), and a general step with every rule for anything else. Every other header field is then
gathered for all batches at once (:mod:`.batch_headers`), and the markers of control batches read
(:mod:`.control_records`). Compressed payloads are never decompressed.

Iteration rules (Kafka's ``FileLogInputStream`` + ``ensureValid``, kafka-index-format.md 2.2 and 6):

* stop normally when 17 or fewer bytes remain (``pos >= end - 17``);
* ``size < 14`` is corrupt;
* a batch that does not fit in the file ends the walk normally (an incomplete tail);
* magic >= 2 (signed byte, so 2..127) is a v2 batch: size >= 61 and CRC-32C of bytes [21, end);
  anything else is a legacy v0/v1 entry: CRC32 of the record from its magic byte to the end;
* for v2 control batches that carry a producer id, the first record must be a well-formed transaction
  marker; a malformed one ends the valid data *after* that batch (Kafka's ``InvalidRecordException``),
  and a control type other than ABORT/COMMIT is fatal for Kafka's recovery (reported, not guessed).

The fast loop accepts the common case only: a magic-2 batch whose whole header lies before ``end``, with size
>= 61, that fits, and whose CRC-32C matches. Every other batch (legacy, magic 3..127, the last bytes of the file,
anything wrong) falls through to the general step, which applies all of Kafka's rules to that same batch, so the
result does not depend on which part accepted a batch.

:func:`frame_batches` is the other walk, ``kafka-dump-log.sh``'s: batches framed by their size alone, a batch
whose CRC fails shown and walked past; only a dump uses it, after the walk above stopped at such a batch.

Invariants: the file is opened read-only and never modified; nothing of it is copied into Python bytes, and
nothing at or past ``end`` is read (only Kafka's 17-byte header before a batch is known to fit); the compiled and
the pure-Python walk accept the same batches.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import zlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .batch_headers import gather_epoch_columns, gather_headers
from .control_records import check_markers, read_marker_fields
from .errors import NotARegularFileError
from .records import (
    ATTR_CONTROL,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MIN_SIZE_FIELD,
    P_CRC_LEGACY,
    P_CRC_V2,
    P_SIZE,
    P_TRUNCATED,
    P_V2_SIZE,
    V2_HEADER_SIZE,
    LogScan,
    ScanProblem,
    StopReason,
    problem_from_code,
)
from .scan_kernel import crc32c_function, kernel_for

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on

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


def _first_hole(fd: int) -> int:
    """Where the file's first hole begins (its size when it has none, or when the file system does not say)."""
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        return os.fstat(fd).st_size


def open_log(path: str | os.PathLike[str], length: int | None = None) -> tuple[int, mmap.mmap | None]:
    """Open a ``.log`` read-only and map it, or its first ``length`` bytes (``None`` for nothing to map). Returns
    (the file's size, mapping)."""
    fd = open_segment(path)
    try:
        size = os.fstat(fd).st_size
        mapped = size if length is None else min(size, length)
        if mapped == 0:
            return size, None
        # read ahead at once, but for a sparse file (a preallocated segment, log.preallocate=true): its hole would
        # be mapped whole, and the walk stops where the hole's zeros begin
        sparse = _first_hole(fd) < mapped
        flags = mmap.MAP_SHARED | (0 if sparse else getattr(mmap, "MAP_POPULATE", 0))
        mm = mmap.mmap(fd, mapped, flags=flags, prot=mmap.PROT_READ)
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
    """:func:`scan_log` over any buffer of ``end`` bytes (an mmap, bytes): the walk (:func:`_walk`), then every
    header field of the accepted batches gathered at once, then the markers of the control batches checked, then
    the leader epochs, base sequences and the markers' coordinator epochs and timestamps read.

    Whether a v2 control batch was accepted is decided afterwards from the gathered attributes, not in the
    loop. ``compiled``: use the compiled fast path (default: when it is built, see
    :data:`~.scan_kernel.KERNEL`); both give the same scan.
    """
    view = memoryview(buf)
    try:
        positions, legacy_seen, stop, problem = _walk(view, end, kernel_for(compiled))
        scan = gather_headers(view, path, end, positions, legacy_seen, stop, problem)
        if scan.batch_count and ((scan.attributes & ATTR_CONTROL) != 0).any():
            check_markers(view, scan)  # it looks at v2 control batches only
        gather_epoch_columns(view, end, scan)  # after the markers' cut: one item per batch kept
        read_marker_fields(view, scan)
        return scan
    finally:
        view.release()


def _walk(
    view: memoryview, end: int, kernel: ModuleType | None
) -> tuple[npt.NDArray[np.int64], bool, StopReason, ScanProblem | None]:
    """The positions of the batches the walk accepts, whether one of them is a legacy entry, and how it ended:
    the fast loop (``kernel.walk_v2``, or its Python twin without a kernel), then the general step for the batch
    it stopped at (see the module docstring)."""
    unpack_smc, unpack_sm, unpack_u32 = _SIZE_MAGIC_CRC.unpack_from, _SIZE_MAGIC.unpack_from, _LEGACY_CRC.unpack_from
    crc_c = crc32c_function(kernel is not None)
    crc_ieee = zlib.crc32
    parts: list[npt.NDArray[np.int64]] = []  # accepted positions, in order: the kernel's chunks ...
    positions: list[int] = []  # ... and the ones accepted in Python since the last chunk
    append = positions.append
    legacy_seen = False
    pos = 0
    limit = end - HEADER_SIZE_UP_TO_MAGIC
    fast_limit = end - V2_HEADER_SIZE  # pos <= fast_limit: the whole v2 header is before ``end``
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
            stop, code, a, b = (StopReason.SHORT_TAIL if pos < end else StopReason.END), 0, 0, 0
            break
        if kernel is not None or pos > fast_limit:
            length, magic = unpack_sm(view, pos + 8)
        # else the Python fast loop stopped on this very batch and already read its size and magic
        if length < MIN_SIZE_FIELD:
            stop, code, a, b = StopReason.CORRUPT_BATCH, P_SIZE, length, 0
            break
        batch_end = pos + LOG_OVERHEAD + length
        if batch_end > end:
            stop, code, a, b = StopReason.INCOMPLETE_BATCH, P_TRUNCATED, LOG_OVERHEAD + length, end
            break
        if 2 <= magic < 128:
            if length + LOG_OVERHEAD < V2_HEADER_SIZE:
                stop, code, a, b = StopReason.CORRUPT_BATCH, P_V2_SIZE, length + LOG_OVERHEAD, 0
                break
            stored_crc = unpack_u32(view, pos + 17)[0]
            computed = crc_c(view[pos + 21 : batch_end])
            if computed != stored_crc:
                stop, code, a, b = StopReason.CORRUPT_BATCH, P_CRC_V2, stored_crc, computed
                break
        else:
            legacy_seen = True
            crc_stored = unpack_u32(view, pos + 12)[0]
            computed = crc_ieee(view[pos + 16 : batch_end])
            if computed != crc_stored:
                stop, code, a, b = StopReason.CORRUPT_BATCH, P_CRC_LEGACY, crc_stored, computed
                break
        append(pos)
        pos = batch_end
    if positions or not parts:
        parts.append(np.asarray(positions, dtype=np.int64))
    accepted = np.concatenate(parts)
    return accepted, legacy_seen, stop, _problem_at(view, pos, len(accepted), code, a, b) if code else None


def _problem_at(view: memoryview, pos: int, batch_index: int, code: int, a: int, b: int) -> ScanProblem:
    """The problem (its ``code`` and numbers, see :func:`~.records.problem_from_code`) of the batch at ``pos``,
    the walk's ``batch_index``-th."""
    base_offset: int = struct.unpack_from(">q", view, pos)[0]
    return problem_from_code(code, pos, batch_index, base_offset, a, b, None)


@dataclass(frozen=True)
class FramedBatches:
    """The batches of :func:`frame_batches`: their positions, whether each passes Kafka's ``isValid`` (its size
    holds a header and its CRC matches), how the framing ended and the first byte after the last batch."""

    positions: npt.NDArray[np.int64]
    valid: npt.NDArray[np.bool_]
    stop: StopReason
    end: int


def frame_batches(buf: Buffer, start: int, end: int) -> FramedBatches:
    """The batches from byte ``start`` framed by their size field alone, as ``kafka-dump-log.sh`` walks a file
    (``FileLogInputStream`` without ``ensureValid``): a batch whose CRC fails is listed (``valid`` false) and the
    walk goes on after it. It stops where 17 or fewer bytes are left, at a size below 14, at a batch that runs
    past ``end``, and at a v2 batch shorter than its 61-byte header (Kafka's dump cannot show one). Read-only."""
    view = memoryview(buf)
    crc_c, crc_ieee = crc32c_function(), zlib.crc32
    positions: list[int] = []
    valid: list[bool] = []
    pos, stop = start, StopReason.END
    try:
        while True:
            if pos >= end - HEADER_SIZE_UP_TO_MAGIC:
                stop = StopReason.SHORT_TAIL if pos < end else StopReason.END
                break
            length, magic = _SIZE_MAGIC.unpack_from(view, pos + 8)
            batch_end = pos + LOG_OVERHEAD + length
            if length < MIN_SIZE_FIELD or (2 <= magic < 128 and length + LOG_OVERHEAD < V2_HEADER_SIZE):
                stop = StopReason.CORRUPT_BATCH
                break
            if batch_end > end:
                stop = StopReason.INCOMPLETE_BATCH
                break
            if 2 <= magic < 128:
                ok = crc_c(view[pos + 21 : batch_end]) == _LEGACY_CRC.unpack_from(view, pos + 17)[0]
            else:
                ok = crc_ieee(view[pos + 16 : batch_end]) == _LEGACY_CRC.unpack_from(view, pos + 12)[0]
            positions.append(pos)
            valid.append(ok)
            pos = batch_end
    finally:
        view.release()
    return FramedBatches(np.asarray(positions, dtype=np.int64), np.asarray(valid, dtype=bool), stop, pos)
