"""The header fields of every batch a walk accepted, read at once with numpy (a vectorised gather).

A v2 batch's fields come from its 61-byte header (:data:`~.records.V2_HEADER_DTYPE`); a legacy v0/v1 entry
has an offset, a size, a magic, attributes and (v1) a timestamp, and ``-1`` for what it does not carry.

Invariants: only bytes before ``end`` are read, and only at accepted batch positions (a v2 batch is at least 61
bytes long and a legacy entry at least 26, so every header read there lies inside the file); nothing of the
file is copied into Python bytes; the columns have the dtypes :class:`~.records.LogScan` lists.
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

from .records import LOG_OVERHEAD, V2_HEADER_DTYPE, V2_HEADER_SIZE, LogScan, ScanProblem, StopReason


class Columns(TypedDict):
    """The columns read from the headers, by :class:`~.records.LogScan` field."""

    sizes: npt.NDArray[np.int64]
    base_offsets: npt.NDArray[np.int64]
    last_offsets: npt.NDArray[np.int64]
    max_timestamps: npt.NDArray[np.int64]
    attributes: npt.NDArray[np.int16]
    producer_ids: npt.NDArray[np.int64]
    producer_epochs: npt.NDArray[np.int16]
    records_counts: npt.NDArray[np.int32]


def _strided(view: memoryview, end: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """A read-only array with one ``dtype`` item starting at every byte ``p`` with ``p + itemsize <= end``.

    Fancy-indexing it with batch positions copies whole headers at once (a fixed-size copy per item),
    without building an index per byte.
    """
    dtype = np.dtype(dtype)
    return np.ndarray((end - dtype.itemsize + 1,), dtype, buffer=view, strides=(1,))


def gather_headers(
    view: memoryview,
    path: str,
    end: int,
    positions: npt.NDArray[np.int64],
    legacy_seen: bool,
    stop: StopReason,
    problem: ScanProblem | None,
) -> LogScan:
    """The :class:`~.records.LogScan` of the batches accepted at ``positions`` (``legacy_seen``: whether any is a
    legacy entry), every header field read at once; no marker read yet (``marker_types`` all ``-1``)."""
    pos = np.asarray(positions, dtype=np.int64)
    if len(pos) == 0:
        return _empty_scan(path, end, pos, stop, problem)
    raw = np.frombuffer(view, dtype=np.uint8, count=end)
    magic = raw[pos + 16].view(np.int8)
    columns = _v2_columns(_v2_headers(view, end, pos, magic >= 2, legacy_seen))
    if legacy_seen:
        _fill_legacy_columns(view, end, raw, pos, magic, columns)
    return LogScan(
        path=path,
        file_size=end,
        positions=pos,
        magic=magic,
        marker_types=np.full(len(pos), -1, dtype=np.int16),
        stop=stop,
        problem=problem,
        **columns,
    )


def _empty_scan(
    path: str, end: int, pos: npt.NDArray[np.int64], stop: StopReason, problem: ScanProblem | None
) -> LogScan:
    """The scan of a walk that accepted no batch: every column empty, with its dtype."""
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


def _v2_headers(
    view: memoryview, end: int, pos: npt.NDArray[np.int64], is_v2: npt.NDArray[np.bool_], legacy_seen: bool
) -> npt.NDArray[Any]:
    """The v2 header of every batch (zeros where a batch is a legacy entry)."""
    # The last v2 header always fits: a v2 batch is at least 61 bytes long.
    if not legacy_seen:  # every accepted batch is v2
        return _strided(view, end, f"V{V2_HEADER_SIZE}")[pos].view(V2_HEADER_DTYPE)
    headers = np.zeros(len(pos), dtype=V2_HEADER_DTYPE)
    v2_pos = pos[is_v2]
    if len(v2_pos):
        headers[is_v2] = _strided(view, end, f"V{V2_HEADER_SIZE}")[v2_pos].view(V2_HEADER_DTYPE)
    return headers


def _v2_columns(headers: npt.NDArray[Any]) -> Columns:
    """The scan's columns from the v2 headers, each in its own native-endian array."""
    base_offsets = headers["base_offset"].astype(np.int64)
    return {
        "sizes": headers["length"].astype(np.int64) + LOG_OVERHEAD,
        "base_offsets": base_offsets,
        "last_offsets": base_offsets + headers["last_offset_delta"].astype(np.int64),
        "max_timestamps": headers["max_timestamp"].astype(np.int64),
        "attributes": headers["attributes"].astype(np.int16),
        "producer_ids": headers["producer_id"].astype(np.int64),
        "producer_epochs": headers["producer_epoch"].astype(np.int16),
        "records_counts": headers["records_count"].astype(np.int32),
    }


def _fill_legacy_columns(
    view: memoryview,
    end: int,
    raw: npt.NDArray[np.uint8],
    pos: npt.NDArray[np.int64],
    magic: npt.NDArray[np.int8],
    columns: Columns,
) -> None:
    """Overwrite the columns at the legacy entries with what a v0/v1 entry holds (``-1`` for the rest)."""
    legacy = magic < 2
    lp = pos[legacy]
    offsets = _strided(view, end, "V12")[lp].view([("offset", ">i8"), ("size", ">i4")])
    columns["sizes"][legacy] = offsets["size"].astype(np.int64) + LOG_OVERHEAD
    columns["base_offsets"][legacy] = offsets["offset"]
    columns["last_offsets"][legacy] = offsets["offset"]  # the wrapper's offset is the last inner offset
    columns["attributes"][legacy] = raw[lp + 17]
    columns["producer_ids"][legacy] = -1
    columns["producer_epochs"][legacy] = -1
    columns["records_counts"][legacy] = -1
    ts = np.full(len(lp), -1, dtype=np.int64)
    v1 = magic[legacy] == 1
    if v1.any():
        # A legacy entry is at least 12 + 14 bytes, so a v1 timestamp at +18..+26 is inside the file
        # (Kafka checks no more than size >= 14 and the CRC32 before reading it).
        ts[v1] = _strided(view, end, ">i8")[lp[v1] + 18]
    columns["max_timestamps"][legacy] = ts


def gather_epoch_columns(view: memoryview, end: int, scan: LogScan) -> None:
    """Fill ``scan.partition_leader_epochs`` and ``scan.base_sequences`` for its batches as they stand (after any
    cut): the v2 header's int32 fields at +12 and +53, -1 for a legacy entry. Reads only inside accepted v2
    headers (each at least 61 bytes long)."""
    pos = scan.positions
    epochs = np.full(len(pos), -1, dtype=np.int32)
    sequences = np.full(len(pos), -1, dtype=np.int32)
    v2 = scan.magic >= 2
    if v2.any():
        words = _strided(view, end, ">i4")
        epochs[v2] = words[pos[v2] + 12]
        sequences[v2] = words[pos[v2] + 53]
    scan.partition_leader_epochs = epochs
    scan.base_sequences = sequences
