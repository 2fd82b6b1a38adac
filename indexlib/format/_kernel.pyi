"""Types of the compiled ``indexlib.format._kernel`` (see ``_kernel.c``)."""

from collections.abc import Callable
from typing import Protocol

from typing_extensions import Buffer

# scan_segment's problem / fatal codes (the first item of its problem and fatal tuples)
P_SIZE: int
P_V2_SIZE: int
P_TRUNCATED: int
P_CRC_V2: int
P_CRC_LEGACY: int
P_INVALID_MARKER: int
F_COMPRESSED_CONTROL: int
F_UNKNOWN_CONTROL_TYPE: int

def walk_v2(buffer: Buffer, pos: int, end: int, /) -> tuple[bytes, int]: ...
def crc32c(buffer: Buffer, crc: int = 0, /) -> int: ...
def crc32c_table(buffer: Buffer, crc: int = 0, /) -> int: ...
def crc32c_interleaved(buffer: Buffer, crc: int = 0, /) -> int: ...
def hardware() -> bool: ...

class PreadSource(Protocol):
    """What scan_segment reads in place of a descriptor (an object store's reader)."""

    def pread_into(self, buffer: memoryview, offset: int, /) -> int:
        """Fill ``buffer`` from ``offset`` (all or part of it); how many bytes were written, 0 at the end."""
        ...

def scan_segment(
    source: int | PreadSource,
    end: int,
    base_offset: int,
    index_interval_bytes: int,
    offset_probes: Buffer,
    time_probes: Buffer,
    marker_parser: Callable[[bytes, int], int | tuple[int, int, int] | str | tuple[str]],
    window: int = 1 << 20,
    prefetch: bool = True,
    /,
) -> dict[str, object]:
    """Stream bytes [0, end) of the ``.log`` open on descriptor ``source`` once (pread, a reused ``window``-byte
    buffer), or read through ``source.pread_into`` (then without the prefetch thread: a source reads ahead itself;
    its exception ends the walk as it is).

    Keys: ``batch_count``, ``valid_bytes``, ``walked``, ``stop`` (0 end, 1 short tail, 2 incomplete batch,
    3 corrupt batch, 4 invalid record), ``problem`` and ``fatal`` (``(code, position, batch_index,
    base_offset, a, b, text | None)`` or None), ``plan_end``, ``entries`` (native int64 rows of 7: batch,
    position, base offset, last offset, running max timestamp, offset of that max, last v2 offset + 1),
    ``last_row`` / ``stop_row`` (one such row as a tuple, or None), ``events`` (rebuild.EVENT_DTYPE records,
    compacted), ``offset_answers`` (int64 x3 per offset probe), ``time_answers`` (int64 per time probe),
    ``last_offset`` and ``raw_max`` (None without a batch), ``epoch_starts`` (log_scan.EPOCH_DTYPE records) and
    ``producers`` (log_scan.PRODUCER_DTYPE records; None when ``marker_parser`` gave some marker's control type
    alone, an int, instead of ``(type, coordinator epoch, record timestamp)``). ``marker_parser`` decompresses a
    control batch of a known codec (the kernel never does); its answer ``(why,)`` (a compressed batch it cannot
    read) is the fatal ``F_COMPRESSED_CONTROL`` with ``why`` as its text. OSError when the file shrinks or
    cannot be read.
    """
