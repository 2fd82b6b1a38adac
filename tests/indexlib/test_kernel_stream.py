"""The compiled streaming walk (``indexlib.format._kernel.scan_segment``) against a pure-Python reference.

:func:`reference` computes the same dict from the columns of ``batch_walk.scan_buffer(..., compiled=False)``
with numpy, straight from the definitions (walk, markers, running time-index values, index selection,
producer events and their compaction, position and offset lookups; the leader-epoch starts and the producers'
end states from :mod:`indexlib.recovery.log_scan`'s reference functions). Every case compares every key, with
read windows from 64 bytes (batches straddle every refill) to 1 MiB. Also: the three-stream CRC-32C, a
file that shrinks while it is read (an OSError, never a crash), bad descriptors and arguments.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexlib.format import batch_walk, control_records, records
from indexlib.recovery.log_scan import EPOCH_DTYPE, PRODUCER_DTYPE, leader_epoch_starts, producer_end_states
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL
from .test_kernel import mutated_logs as mutated_v2_logs
from .test_records import mutated_logs as mutated_marker_logs
from .test_refusals import compressed

kernel = pytest.importorskip("indexlib.format._kernel", reason="the C extension is not built (no compiler at install)")

WINDOWS = (64, 100, 4096, 1 << 20)
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
STOPS = {"end": 0, "short_tail": 1, "incomplete_batch": 2, "corrupt_batch": 3, "invalid_record": 4}
#: rebuild/summary's EVENT_DTYPE, spelled out here (the kernel's 29-byte packed record)
EVENT_DTYPE = np.dtype(
    [("batch", np.int32), ("kind", np.int8), ("producer_id", np.int64), ("offset", np.int64), ("position", np.int64)]
)
KEYS = {
    "batch_count", "valid_bytes", "walked", "stop", "problem", "fatal", "plan_end", "entries", "last_row",
    "stop_row", "events", "offset_answers", "time_answers", "last_offset", "raw_max", "epoch_starts", "producers",
}  # fmt: skip


def parse(batch: bytes, records_count: int) -> tuple[int, int, int] | str | tuple[str]:
    """The marker parser the kernel calls: (control type, coordinator epoch, record timestamp), or why the marker
    is malformed, or (why,) when a compressed batch cannot be read."""
    return control_records.marker_fields_or_error(batch, records_count)


def parse_type_only(batch: bytes, records_count: int) -> int | str:
    """The older marker parser: the control type alone (the kernel then gives no producer states)."""
    try:
        return control_records.parse_marker(memoryview(batch), 0, len(batch), records_count)[0]
    except ValueError as exc:
        return str(exc)


# ------------------------------------------------------------------------------------------ reference
def _problem_tuple(data: bytes, problem: records.ScanProblem) -> tuple[object, ...]:
    """(code, position, batch_index, base_offset, a, b, text) of a walk problem, from the bytes."""
    pos = problem.position
    size, magic = struct.unpack_from(">i4xb", data, pos + 8)
    a = b = 0
    text = None
    if problem.kind == "invalid_marker":
        code = kernel.P_INVALID_MARKER
        text = problem.detail.removeprefix("malformed transaction marker: ")
    elif problem.kind == "size_below_minimum":
        code, a = (kernel.P_SIZE, size) if size < 14 else (kernel.P_V2_SIZE, 12 + size)
    elif problem.kind == "truncated_batch":
        code, a, b = kernel.P_TRUNCATED, 12 + size, len(data)
    elif problem.kind == "crc_mismatch" and magic >= 2:
        code = kernel.P_CRC_V2
        a, b = struct.unpack_from(">I", data, pos + 17)[0], crc32c.crc32c(data[pos + 21 : pos + 12 + size])
    else:
        assert problem.kind == "crc_mismatch", problem
        code = kernel.P_CRC_LEGACY
        a, b = struct.unpack_from(">I", data, pos + 12)[0], zlib.crc32(data[pos + 16 : pos + 12 + size])
    base = struct.unpack_from(">q", data, pos)[0]
    return (code, pos, problem.batch_index, base, a, b, text)


def _fatal_tuple(data: bytes, scan: records.LogScan) -> tuple[object, ...] | None:
    fatal = scan.fatal
    if fatal is None:
        return None
    base = struct.unpack_from(">q", data, fatal.position)[0]
    if fatal.kind == "unknown_control_type":
        a = int(scan.marker_types[fatal.batch_index])
        return (kernel.F_UNKNOWN_CONTROL_TYPE, fatal.position, fatal.batch_index, base, a, 0, None)
    assert fatal.kind in ("compressed_control_batch", "unknown_compression"), fatal
    codec = struct.unpack_from(">h", data, fatal.position + 21)[0] & 7
    # a known codec is refused only when the batch cannot be read: the parser's reason follows the codec's name
    text = fatal.detail.split(": ", 1)[1] if codec <= 4 else None
    return (kernel.F_COMPRESSED_CONTROL, fatal.position, fatal.batch_index, base, codec, 0, text)


def _walked(data: bytes, scan: records.LogScan) -> int:
    """Batches the walk accepted: after a fatal batch it goes on to its own end (all accepted, or the
    problem's batch index says how many); it ends at a malformed marker."""
    if scan.problem is not None:
        return scan.problem.batch_index + (1 if scan.problem.kind == "invalid_marker" else 0)
    if scan.fatal is None:
        return scan.batch_count
    pos, count = scan.fatal.position, scan.fatal.batch_index
    while pos < len(data) - 17:  # no problem: every batch from here on was accepted
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        count += 1
    return count


def reference(
    data: bytes, base: int, interval: int, offset_probes: list[int], time_probes: list[int]
) -> dict[str, object]:
    """scan_segment's dict, from the pure-Python scan's columns (straight from the definitions)."""
    scan = batch_walk.scan_buffer(data, len(data), compiled=False)
    n = scan.batch_count
    positions = scan.positions
    bases, lasts, ts, magic = scan.base_offsets, scan.last_offsets, scan.max_timestamps, scan.magic
    attrs, pids, markers = scan.attributes, scan.producer_ids, scan.marker_types
    index = np.arange(n, dtype=np.int64)

    # plan_end: the first offset overflow or the fatal batch
    with np.errstate(over="ignore"):
        relative = lasts - np.int64(base)
    overflow = np.flatnonzero((relative < 0) | (relative > INT32_MAX))
    m = min(n, int(overflow[0]) if len(overflow) else n, scan.fatal.batch_index if scan.fatal else n)

    # rows: (batch, position, base offset, last offset, running max, offset of the max, last v2 offset + 1)
    running = np.maximum.accumulate(np.maximum(ts, -1)) if n else ts
    before = np.concatenate(([-1], running[:-1])) if n else ts
    source = np.maximum.accumulate(np.where(ts > before, index, -1)) if n else index
    max_offset = np.where(source >= 0, lasts[np.maximum(source, 0)], base) if n else ts
    last_v2 = np.maximum.accumulate(np.where(magic >= 2, index, -1)) if n else index
    with np.errstate(over="ignore"):
        v2_next = np.where(last_v2 >= 0, lasts[np.maximum(last_v2, 0)] + np.int64(1), INT64_MIN) if n else ts
    rows = np.stack([index, positions, bases, lasts, running, max_offset, v2_next], axis=1).astype(np.int64)

    selected, last_indexed = [], 0  # Kafka's rule, one batch at a time
    for i in range(m):
        if positions[i] - last_indexed > interval:
            selected.append(i)
            last_indexed = int(positions[i])

    # events of batches < min(m + 1, n), then the compaction (per producer, a data event of the kind of the
    # producer's previous event is dropped)
    events, previous = [], {}
    for i in range(min(m + 1, n)):
        if magic[i] < 2 or pids[i] < 0:
            continue
        pid, control = int(pids[i]), bool(attrs[i] & 0x20)
        if control:
            if markers[i] not in (0, 1):
                continue
            kind = 2 + int(markers[i])
        else:
            kind = 1 if attrs[i] & 0x10 else 0
        if not (kind <= 1 and previous.get(pid) == kind):
            events.append((i, kind, pid, int(bases[i]), int(positions[i])))
        previous[pid] = kind

    valid = scan.valid_bytes
    offset_answers = []
    for q in offset_probes:
        if 0 <= q < valid:
            i = int(np.searchsorted(positions, q, side="right")) - 1
            offset_answers += [int(positions[i]), int(bases[i]), int(lasts[i - 1]) if i else INT64_MIN]
        else:
            offset_answers += [-1, 0, INT64_MIN]
    raw_max = np.maximum.accumulate(ts) if n else ts
    top_last = np.maximum.accumulate(lasts) if n else lasts
    time_answers = []
    for o in time_probes:
        i = int(np.searchsorted(top_last, o, side="left"))
        time_answers.append(int(raw_max[i]) if i < n else INT64_MIN)

    return {
        "batch_count": n,
        "valid_bytes": valid,
        "walked": _walked(data, scan),
        "stop": STOPS[scan.stop.value],
        "problem": _problem_tuple(data, scan.problem) if scan.problem else None,
        "fatal": _fatal_tuple(data, scan),
        "plan_end": m,
        "entries": rows[selected].tobytes(),
        "last_row": tuple(int(x) for x in rows[m - 1]) if m else None,
        "stop_row": tuple(int(x) for x in rows[m]) if m < n else None,
        "events": np.array(events, dtype=EVENT_DTYPE).tobytes(),
        "offset_answers": np.array(offset_answers, dtype=np.int64).tobytes(),
        "time_answers": np.array(time_answers, dtype=np.int64).tobytes(),
        "last_offset": int(lasts[-1]) if n else None,
        "raw_max": int(ts.max()) if n else None,
        "epoch_starts": leader_epoch_starts(scan, m).tobytes(),
        "producers": producer_end_states(scan, m).tobytes(),
    }


# ------------------------------------------------------------------------------------------ running it
def memfd(data: bytes) -> int:
    fd = os.memfd_create("segment.log")
    os.write(fd, data)
    return fd


def probes_for(data: bytes) -> tuple[list[int], list[int]]:
    """Positions around every batch start and the file's edges; offsets around every batch's last offset."""
    scan = batch_walk.scan_buffer(data, len(data), compiled=False)
    positions = {INT64_MIN, -1, 0, 1, len(data) - 1, len(data), len(data) + 5, INT64_MAX, scan.valid_bytes}
    for p, size in zip(scan.positions.tolist(), scan.sizes.tolist(), strict=True):
        positions |= {p - 1, p, p + 1, p + size // 2, p + size - 1}
    offsets = {INT64_MIN, INT64_MAX, -1, 0}
    for o in scan.last_offsets.tolist()[:50] + scan.base_offsets.tolist()[:50]:
        offsets |= {max(INT64_MIN, o - 1), o, min(INT64_MAX, o + 1)}
    return sorted(positions), sorted(offsets)


class PreadSource:
    """A source for scan_segment in place of a descriptor (an object store's reader): ``pread_into`` answers at most
    ``most`` bytes a call, so a window is filled over several calls."""

    def __init__(self, fd: int, most: int = 777) -> None:
        self.fd, self.most, self.calls = fd, most, 0

    def pread_into(self, buffer: memoryview, offset: int) -> int:
        self.calls += 1
        data = os.pread(self.fd, min(len(buffer), self.most), offset)
        buffer[: len(data)] = data
        return len(data)


def run(
    fd: int | PreadSource,
    end: int,
    base: int,
    interval: int,
    offset_probes: list[int],
    time_probes: list[int],
    window: int,
    parser: Callable[[bytes, int], int | str] = parse,
    prefetch: bool = True,
) -> dict[str, object]:
    return kernel.scan_segment(
        fd,
        end,
        base,
        interval,
        np.array(offset_probes, np.int64).tobytes(),
        np.array(time_probes, np.int64).tobytes(),
        parser,
        window,
        prefetch,
    )


def assert_same(
    data: bytes,
    base: int | None = None,
    interval: int = 0,
    windows: tuple[int, ...] = WINDOWS,
    probes: tuple[list[int], list[int]] | None = None,
    prefetch_windows: tuple[int, ...] | None = None,
) -> dict[str, object]:
    """scan_segment equals the reference with every window without its prefetch thread, and with it (a file
    longer than two windows starts it) for every window of ``prefetch_windows`` (default: the same). Without
    ``probes``: once with probes around every batch (each batch then leaves the kernel's tight loop for its
    general step) and once with none (runs of plain batches stay in the tight loop). Returns the reference
    dict of the first."""
    if base is None:
        base = struct.unpack_from(">q", data)[0] if len(data) >= 8 else 0
    probe_sets = [probes_for(data), ([], [])] if probes is None else [probes]
    runs = [(window, False) for window in windows]
    runs += [(window, True) for window in (windows if prefetch_windows is None else prefetch_windows)]
    fd = memfd(data)
    try:
        results = []
        for offset_probes, time_probes in probe_sets:
            expected = reference(data, base, interval, offset_probes, time_probes)
            for window, prefetch in runs + [(windows[0], "source"), (windows[-1], "source")]:
                source = PreadSource(fd) if prefetch == "source" else fd
                got = run(source, len(data), base, interval, offset_probes, time_probes, window, prefetch=True)
                assert set(got) == KEYS
                for key in sorted(KEYS):
                    assert got[key] == expected[key], (key, window, prefetch, len(offset_probes))
            results.append(expected)
    finally:
        os.close(fd)
    return results[0]


def rows(raw: object) -> list[tuple[int, ...]]:
    assert isinstance(raw, bytes)
    return [tuple(r) for r in np.frombuffer(raw, np.int64).reshape(-1, 7).tolist()]


def events(raw: object) -> np.ndarray:
    assert isinstance(raw, bytes)
    return np.frombuffer(raw, EVENT_DTYPE)


# ------------------------------------------------------------------------------------------ CRC
@given(st.integers(0, 20_000), st.integers(0, 2**32 - 1), st.integers(0, 7))
@settings(max_examples=150, deadline=None)
def test_the_interleaved_crc32c_equals_the_table_one(length, seed, misalign):
    data = np.random.default_rng(length).bytes(length + misalign)[misalign:]
    expected = kernel.crc32c_table(data, seed)
    assert kernel.crc32c_interleaved(data, seed) == expected == crc32c.crc32c(data, seed)


@pytest.mark.parametrize(
    "length", [143, 144, 145, 147, 148, 149, 151, 152, 287, 288, 289, 3071, 3072, 3073, 3216, 6144, 6151, 100_000]
)
def test_the_interleaved_crc32c_at_the_block_edges(length):
    data = os.urandom(length)
    assert kernel.crc32c_interleaved(data) == crc32c.crc32c(data)
    # chained: the state carries over between calls
    assert kernel.crc32c_interleaved(data[length // 3 :], kernel.crc32c_interleaved(data[: length // 3])) == (
        crc32c.crc32c(data)
    )


def test_the_module_exports_the_problem_codes():
    codes = [kernel.P_SIZE, kernel.P_V2_SIZE, kernel.P_TRUNCATED, kernel.P_CRC_V2, kernel.P_CRC_LEGACY]
    codes += [kernel.P_INVALID_MARKER, kernel.F_COMPRESSED_CONTROL, kernel.F_UNKNOWN_CONTROL_TYPE]
    assert codes == list(range(1, 9))


# ------------------------------------------------------------------------------------------ real and generated
def fixture_logs() -> list[Path]:
    return sorted(KAFKA_REAL.rglob("*.log")) if KAFKA_REAL.is_dir() else []


#: how much of each real log the 64-byte windows read (a refill inside nearly every batch, a system call each): over
#: all 37 MB of the fixtures, at both intervals, they took 45 of the test's 47 s; now the first 256 KiB of each (11 MB
#: in all, cut inside a batch where the log is longer: a torn tail too), at one interval
SMALL_WINDOW_BYTES = 256 << 10


@pytest.mark.skipif(not fixture_logs(), reason="needs ../shared/fixtures/kafka-real (real brokers' segments)")
def test_every_real_fixture_log():
    checked = 0
    for path in fixture_logs():
        data = path.read_bytes()
        base = int(path.stem) if path.stem.isdigit() else 0
        for interval in (0, 4096):
            expected = assert_same(data, base, interval, windows=(4096, 1 << 20))
            checked += expected["batch_count"]  # type: ignore[operator]
        assert_same(data[:SMALL_WINDOW_BYTES], base, 4096, windows=(64,), prefetch_windows=())
    assert checked > 0


def test_generated_partitions_with_transactions(tmp_path):
    paths = generate_partition(
        tmp_path / "t-0", segments=3, batches_per_segment=120, transactional_producers=3, abort_every=2, seed=4
    )
    paths += generate_partition(
        tmp_path / "t-1", segments=1, batches_per_segment=60, transactional_producers=2, compression=1, seed=5
    )
    kinds: set[int] = set()
    for path in paths:
        data = path.read_bytes()
        for interval in (0, 700, 4096):
            expected = assert_same(data, int(path.stem), interval)
            assert expected["stop"] == 0 and expected["problem"] is None and expected["fatal"] is None
            kinds |= set(events(expected["events"])["kind"].tolist())
        # reading through a real file, not a memfd
        fd = os.open(path, os.O_RDONLY)
        try:
            got = run(fd, len(data), int(path.stem), 4096, [], [], 100)
        finally:
            os.close(fd)
        assert got == reference(data, int(path.stem), 4096, [], [])
    assert kinds == {1, 2, 3}  # transactional data, ABORT and COMMIT markers (plain data has no producer id)


def test_the_index_rows_and_time_values_by_hand():
    batches = [
        encode_batch_v2(100, [(None, b"a" * 40, 1_000)] * 3),  # offsets 100..102, max ts 1000
        encode_batch_v2(103, [(None, b"b" * 40, 900)]),  # below the max
        encode_legacy(104, b"c" * 40, magic=1, timestamp=2_000),  # a legacy entry raises the max
        encode_batch_v2(105, [(None, b"d" * 40, 2_000)] * 2),  # equal: not a new max
    ]
    data = b"".join(batches)
    starts = np.cumsum([0] + [len(b) for b in batches]).tolist()
    expected = assert_same(data, 100, interval=0, probes=([starts[2] + 3], [103, 106, 107]))
    assert rows(expected["entries"]) == [
        (1, starts[1], 103, 103, 1_000, 102, 104),
        (2, starts[2], 104, 104, 2_000, 104, 104),  # legacy: the v2 next offset stays at batch 1's
        (3, starts[3], 105, 106, 2_000, 104, 107),
    ]
    assert expected["last_row"] == (3, starts[3], 105, 106, 2_000, 104, 107) and expected["stop_row"] is None
    assert np.frombuffer(expected["offset_answers"], np.int64).tolist() == [starts[2], 104, 103]  # type: ignore[arg-type]
    assert np.frombuffer(expected["time_answers"], np.int64).tolist() == [1_000, 2_000, INT64_MIN]  # type: ignore[arg-type]
    assert (expected["last_offset"], expected["raw_max"], expected["plan_end"]) == (106, 2_000, 4)


# ------------------------------------------------------------------------------------------ edge cases
def plain(count: int = 6, n: int = 2, start: int = 0) -> list[bytes]:
    """``count`` plain batches of ``n`` records each, offsets contiguous from ``start``."""
    return [
        encode_batch_v2(start + i * n, [(None, b"v" * 40, 1_000 + 10 * i + r) for r in range(n)]) for i in range(count)
    ]


def starts_of(batches: list[bytes]) -> list[int]:
    return [int(x) for x in np.cumsum([0] + [len(b) for b in batches[:-1]])]


def patched(batches: list[bytes], index: int, at: int, fmt: str, value: int) -> bytes:
    data = bytearray(b"".join(batches))
    struct.pack_into(fmt, data, starts_of(batches)[index] + at, value)
    return bytes(data)


def flipped(batches: list[bytes], index: int, at: int) -> bytes:
    data = bytearray(b"".join(batches))
    data[starts_of(batches)[index] + (at if at >= 0 else len(batches[index]) + at)] ^= 1
    return bytes(data)


def marker(offset: int, control_type: int, value: bytes, pid: int = 7) -> bytes:
    key = struct.pack(">hh", 0, control_type)
    return encode_batch_v2(
        offset, [(key, value, 50)], producer_id=pid, producer_epoch=0, transactional=True, control=True
    )


def txn(offset: int, pid: int = 7, transactional: bool = True) -> bytes:
    return encode_batch_v2(
        offset, [(None, b"t" * 30, 70)], producer_id=pid, producer_epoch=0, transactional=transactional
    )


def gzip_marker(offset: int) -> bytes:
    key, value = b"\0\0\0\1", b"\0" * 6
    return encode_batch_v2(
        offset, [(key, value, 1)], producer_id=7, producer_epoch=0, transactional=True, control=True, compression=1
    )


def with_codec(batch: bytes, codec: int) -> bytes:
    """``batch`` with its compression codec bits set to ``codec`` (CRC resealed)."""
    data = bytearray(batch)
    data[22] = (data[22] & ~7) | codec
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


LEGACY = [
    encode_legacy(0, b"a" * 30, magic=0),
    encode_legacy(1, b"b" * 30, key=b"k", magic=1, timestamp=5_000),
    encode_legacy(2, None, magic=0),
    encode_legacy(7, b"c" * 5, magic=1, timestamp=4_000),
]


def _short_v1(offset: int, timestamp: int) -> bytes:
    record = struct.pack(">bbq", 1, 0, timestamp)
    record = struct.pack(">I", zlib.crc32(record)) + record
    return struct.pack(">qi", offset, len(record)) + record


CASES: dict[str, tuple[bytes, tuple[object, ...]]] = {
    # name: (data, (stop, problem code or None, fatal code or None, batch_count))
    "empty": (b"", (0, None, None, 0)),
    "clean": (b"".join(plain()), (0, None, None, 6)),
    "short-tail-1": (b"".join(plain(3)) + b"\xff", (1, None, None, 3)),
    "short-tail-17": (b"".join(plain(3)) + b"\xff" * 17, (1, None, None, 3)),
    "only-a-short-tail": (b"\xff" * 10, (1, None, None, 0)),
    "18-byte-tail": (b"".join(plain(3)) + b"\xff" * 18, (3, kernel.P_SIZE, None, 3)),
    "size-negative": (patched(plain(5), 2, 8, ">i", -(2**31)), (3, kernel.P_SIZE, None, 2)),
    "size-13": (patched(plain(5), 2, 8, ">i", 13), (3, kernel.P_SIZE, None, 2)),
    "size-huge-mid-file": (patched(plain(6), 1, 8, ">i", INT32_MAX), (2, kernel.P_TRUNCATED, None, 1)),
    "truncated-last": (b"".join(plain(4))[:-1], (2, kernel.P_TRUNCATED, None, 3)),
    "truncated-to-18": (b"".join(plain(3)) + plain(4)[3][:18], (2, kernel.P_TRUNCATED, None, 3)),
    "v2-below-61": (patched(plain(5), 3, 8, ">i", 30), (3, kernel.P_V2_SIZE, None, 3)),
    "v2-size-49-bad-crc": (patched(plain(5), 3, 8, ">i", 49), (3, kernel.P_CRC_V2, None, 3)),
    "empty-61-byte-batch": (b"".join([plain(1)[0], encode_batch_v2(2, []), plain(1, start=2)[0]]), (0, None, None, 3)),
    "crc-stored": (flipped(plain(6), 4, 17), (3, kernel.P_CRC_V2, None, 4)),
    "crc-last-byte": (flipped(plain(6), 4, -1), (3, kernel.P_CRC_V2, None, 4)),
    "base-offset-not-covered": (flipped(plain(3), 1, 0), (0, None, None, 3)),
    "magic-3": (patched(plain(4), 2, 16, ">b", 3), (0, None, None, 4)),
    "magic-127": (patched(plain(4), 2, 16, ">b", 127), (0, None, None, 4)),
    "magic-negative": (patched(plain(3), 1, 16, ">b", -128), (3, kernel.P_CRC_LEGACY, None, 1)),
    "magic-minus-1": (patched(plain(3), 1, 16, ">b", -1), (3, kernel.P_CRC_LEGACY, None, 1)),
    "legacy": (b"".join(LEGACY), (0, None, None, 4)),
    "legacy-then-v2": (b"".join(LEGACY + plain(2, start=8)), (0, None, None, 6)),
    "v2-then-legacy": (b"".join(plain(2) + LEGACY), (0, None, None, 6)),
    "legacy-short-v1": (b"".join([LEGACY[1], _short_v1(2, 20), LEGACY[2]]), (0, None, None, 3)),
    "legacy-crc": (flipped(LEGACY, 1, 20), (3, kernel.P_CRC_LEGACY, None, 1)),
    "legacy-crc-last": (flipped(LEGACY, 3, -1), (3, kernel.P_CRC_LEGACY, None, 3)),
    "markers": (
        b"".join(
            [
                txn(0),
                txn(1),
                encode_control_batch(2, 7, 0, abort=False, timestamp=5),
                txn(3),
                txn(4, 8),
                encode_control_batch(5, 8, 0, abort=True, timestamp=6),
                txn(6, 7, False),
                txn(7, 7, False),
            ]
        ),
        (0, None, None, 8),
    ),  # fmt: skip
    "control-without-pid-or-records": (
        b"".join(
            [
                plain(1)[0],
                encode_batch_v2(2, [(struct.pack(">hh", 0, 9), b"", 5)], control=True),
                encode_batch_v2(3, [], producer_id=3, producer_epoch=0, transactional=True, control=True),
                plain(1, start=3)[0],
            ]
        ),
        (0, None, None, 4),
    ),  # fmt: skip
    # a gzip marker is read (the parser decompresses it), as Kafka's recovery reads it
    "gzip-marker": (b"".join([txn(0), txn(1), gzip_marker(2), txn(3), txn(4)]), (0, None, None, 5)),
    "gzip-bits-marker": (
        b"".join([txn(0), with_codec(encode_control_batch(1, 7, 0, abort=True, timestamp=1), 1), txn(2)]),
        (0, None, kernel.F_COMPRESSED_CONTROL, 1),
    ),
    "codec-7-marker": (
        b"".join([txn(0), with_codec(encode_control_batch(1, 7, 0, abort=True, timestamp=1), 7), txn(2)]),
        (0, None, kernel.F_COMPRESSED_CONTROL, 1),
    ),
    "gzip-marker-then-crc": (flipped([txn(0), gzip_marker(1), txn(2), txn(3)], 3, 30), (3, kernel.P_CRC_V2, None, 3)),
    "gzip-bits-marker-then-crc": (
        flipped([txn(0), with_codec(encode_control_batch(1, 7, 0, abort=True, timestamp=1), 1), txn(2), txn(3)], 3, 30),
        (3, kernel.P_CRC_V2, kernel.F_COMPRESSED_CONTROL, 1),
    ),
    "gzip-marker-first": (b"".join([gzip_marker(0), txn(1)]), (0, None, None, 2)),
    "unknown-control-type": (
        b"".join([txn(0), marker(1, 5, b""), txn(2), marker(3, 0, b"\x00")]),
        (0, None, kernel.F_UNKNOWN_CONTROL_TYPE, 2),
    ),
    "unknown-control-then-short-tail": (
        b"".join([txn(0), marker(1, 5, b""), txn(2)]) + b"\x01" * 9,
        (1, None, kernel.F_UNKNOWN_CONTROL_TYPE, 2),
    ),
    "malformed-marker": (
        b"".join([txn(0), marker(1, 0, b"\x00"), txn(2), txn(3)]),
        (4, kernel.P_INVALID_MARKER, None, 2),
    ),
    "malformed-marker-then-crc": (
        flipped([txn(0), marker(1, 1, b"\x00\x01"), txn(2)], 2, -1),
        (4, kernel.P_INVALID_MARKER, None, 2),
    ),
    "malformed-marker-after-unknown-type": (
        b"".join([marker(0, 4, b""), marker(1, 0, b"\x00"), txn(2)]),
        (0, None, kernel.F_UNKNOWN_CONTROL_TYPE, 1),
    ),
    "long-marker": (
        b"".join([txn(0), marker(1, 1, b"\x00" * 6 + b"x" * 5000), txn(2), marker(3, 0, b"\x00" * 6 + b"y" * 300)]),
        (0, None, None, 4),
    ),
    "base-offset-overflow": (
        b"".join(plain(2) + [encode_batch_v2(2**31, [(None, b"o", 5)])] + plain(2, start=2**31 + 1)),
        (0, None, None, 5),
    ),
    "base-offset-wraps-int64": (
        b"".join([encode_batch_v2(INT64_MAX - 1, [(None, b"w", 1)] * 3), plain(1)[0]]),
        (0, None, None, 2),
    ),
    "overflow-and-unknown-type": (
        b"".join([txn(0), encode_batch_v2(2**32, [(None, b"o", 5)], producer_id=7), marker(2**32 + 1, 9, b"")]),
        (0, None, kernel.F_UNKNOWN_CONTROL_TYPE, 3),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_edge_cases(name):
    data, (stop, problem_code, fatal_code, count) = CASES[name]
    for interval in (0, 100):
        expected = assert_same(data, 0, interval)
        assert expected["stop"] == stop
        assert (expected["problem"] or (None,))[0] == problem_code  # type: ignore[index]
        assert (expected["fatal"] or (None,))[0] == fatal_code  # type: ignore[index]
        assert expected["batch_count"] == count


CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@pytest.mark.parametrize("codec", sorted(CODEC_NAMES), ids=CODEC_NAMES.get)
def test_compressed_markers_are_parsed_by_the_parser_as_kafka_reads_them(codec):
    """A control batch of each known codec is handed whole to the parser, which decompresses it (the kernel
    never does): ABORT and COMMIT markers (one whose records outgrow a small window), then one whose
    decompressed records run on after its only record (Kafka's "records still remaining": an invalid marker,
    the valid data ending after it)."""
    abort = compressed(encode_control_batch(3, 7, 0, abort=True, timestamp=9, coordinator_epoch=4), codec)
    commit = compressed(encode_control_batch(6, 8, 0, abort=False, timestamp=11, coordinator_epoch=5), codec)
    long_commit = compressed(marker(9, 1, b"\x00\x00\x00\x00\x00\x02" + os.urandom(3000)), codec)
    data = b"".join([txn(0), txn(1, 8), txn(2), abort, txn(4, 8), txn(5, 8), commit, txn(7), txn(8), long_commit])
    for interval in (0, 100):
        expected = assert_same(data, 0, interval)
        assert (expected["stop"], expected["problem"], expected["fatal"], expected["batch_count"]) == (
            0,
            None,
            None,
            10,
        )
        producers = np.frombuffer(expected["producers"], PRODUCER_DTYPE)  # type: ignore[arg-type]
        assert sorted(producers["coordinator_epoch"].tolist()) == [2, 5]  # the markers' epochs, read through the codec
    remaining = compressed(encode_control_batch(1, 7, 0, abort=True, timestamp=1) + b"\x00", codec)
    expected = assert_same(b"".join([txn(0), remaining, txn(2)]), 0)
    assert expected["stop"] == STOPS["invalid_record"] and expected["batch_count"] == 2
    assert expected["problem"][0] == kernel.P_INVALID_MARKER and "remaining" in expected["problem"][6]  # type: ignore[index]


@pytest.mark.parametrize(
    ("codec", "module", "package"),
    [(2, "snappy", "python-snappy"), (3, "lz4.frame", "lz4"), (4, "zstandard", "zstandard")],
)
def test_a_compressed_marker_without_its_package_is_the_refusal_naming_it(monkeypatch, codec, module, package):
    data = b"".join([txn(0), compressed(encode_control_batch(1, 7, 0, abort=True, timestamp=1), codec), txn(2)])
    monkeypatch.setitem(sys.modules, module, None)  # its import now raises ImportError
    expected = assert_same(data, 0)
    fatal = expected["fatal"]
    assert fatal[:5] == (kernel.F_COMPRESSED_CONTROL, len(txn(0)), 1, 1, codec)  # type: ignore[index]
    assert f"the {package} package" in fatal[6] and "[decompress]" in fatal[6]  # type: ignore[index]
    assert expected["batch_count"] == 1 and expected["walked"] == 3


def test_the_base_offset_argument_decides_the_plan_end():
    data = b"".join(plain(6))  # offsets 0..11
    assert assert_same(data, 0)["plan_end"] == 6
    below = assert_same(data, 5)  # batches 0..2 end below the base: relative offset < 0
    assert below["plan_end"] == 0 and below["last_row"] is None and below["stop_row"][0] == 0  # type: ignore[index]
    assert below["entries"] == b""
    far = assert_same(data, -(2**31))  # batch 3 (last offset 7) is the first past 2**31 - 1 from the base
    assert far["plan_end"] == 0
    mid = assert_same(data, 5 - 2**31)  # last offsets 1, 3, 5, 7: the third is 2**31 from the base
    assert mid["plan_end"] == 2 and mid["stop_row"][0] == 2  # type: ignore[index]


def test_unknown_control_type_stops_the_plan_at_that_batch():
    data = b"".join([txn(0), txn(1), marker(2, 5, b""), txn(3)])
    expected = assert_same(data, 0)
    assert expected["batch_count"] == 3 and expected["plan_end"] == 2 and expected["walked"] == 4
    assert expected["stop_row"][0] == 2 and expected["last_row"][0] == 1  # type: ignore[index]
    assert expected["fatal"][4] == 5  # type: ignore[index]  # the control type
    assert events(expected["events"]).tolist() == [(0, 1, 7, 0, 0)]  # the second txn batch is compacted away


def test_compaction_of_interleaved_producers():
    batches = [txn(0, 1), txn(1, 2), txn(2, 1), txn(3, 2, False), txn(4, 1, False), txn(5, 1, False), txn(6, 2)]
    batches += [encode_control_batch(7, 2, 0, abort=False, timestamp=1), txn(8, 2), txn(9, 2, False)]
    expected = assert_same(b"".join(batches), 0)
    got = events(expected["events"])
    assert got["batch"].tolist() == [0, 1, 3, 4, 6, 7, 8, 9]
    assert got["kind"].tolist() == [1, 1, 0, 0, 1, 3, 1, 0]


def test_many_producers_grow_the_producer_table():
    batches = [txn(i, pid=10_000 + (i * 7919) % 3000, transactional=bool((i // 7) % 2)) for i in range(6000)]
    expected = assert_same(b"".join(batches), 0, 4096, windows=(100, 1 << 20))
    assert 3000 < len(events(expected["events"])) < 6000


def test_plain_batches_through_the_tight_loop_and_out_of_it():
    """Runs of plain batches (the kernel's tight loop) ended by everything that must leave it: timestamps
    rising by one, staying, falling; an offset past base + 2**31 - 1 (the plan stops there); a producer's
    batch; a probe due; legacy entries; a CRC mismatch; a batch cut by the end."""
    ts = [5, 6, 7, 7, 6, 8, 9, 3, 10]
    run_of = [encode_batch_v2(i, [(None, b"p" * 20, t)]) for i, t in enumerate(ts)]
    far = [encode_batch_v2(2**31 - 1 + k, [(None, b"f", 11 + k)]) for k in range(3)]
    data = b"".join(run_of + far + [txn(2**31 + 9)] + run_of)
    for interval in (0, 100, 4096):
        expected = assert_same(data, 0, interval)
        assert expected["stop_row"] is not None  # the plan stopped at the first far batch
        assert expected["plan_end"] == len(ts) + 1
    mixed = b"".join(run_of[:3] + [txn(3)] + [encode_legacy(4, b"x" * 10, magic=1, timestamp=4)] + run_of[5:])
    assert_same(mixed, 0, 0)
    bad = bytearray(b"".join(run_of))
    bad[starts_of(run_of)[4] + 70] ^= 1  # a flipped byte in batch 4's records: its CRC no longer matches
    assert assert_same(bytes(bad), 0, 0)["batch_count"] == 4
    assert_same(b"".join(run_of)[:-7], 0, 0)  # the last batch cut


def test_producers_batches_through_the_tight_loop():
    """Data batches of producers (ids 0 and up; idempotent and transactional) stay in the tight loop: their
    events, compacted, equal the general step's; a marker takes them out of it."""

    def data(offset: int, pid: int, transactional: bool) -> bytes:
        return encode_batch_v2(
            offset, [(None, b"d" * 25, 100 + offset)], producer_id=pid, producer_epoch=0, transactional=transactional
        )

    layout = [(0, False)] * 4 + [(5, False)] * 3 + [(0, False), (0, True), (0, True), (5, True), (9, False)]
    batches = [data(i, pid, t) for i, (pid, t) in enumerate(layout)]
    batches += [encode_control_batch(len(batches), 0, 0, abort=True, timestamp=200)]
    batches += [data(len(batches) + k, 0, k % 2 == 1) for k in range(4)]
    for interval in (0, 150):
        expected = assert_same(b"".join(batches), 0, interval)
        got = events(expected["events"])
        # batch 7 (producer 0's data again, of the kind its last event was) is compacted away; then the ABORT
        assert got["producer_id"].tolist()[:6] == [0, 5, 0, 5, 9, 0]
        assert got["kind"].tolist()[:6] == [0, 0, 1, 1, 0, 2]


def test_a_batch_longer_than_the_window(tmp_path):
    big = encode_batch_v2(2, [(None, os.urandom(100_000), 5)])
    batches = plain(1) + [big] + plain(2, start=3) + [encode_legacy(7, os.urandom(50_000), magic=1, timestamp=9)]
    data = b"".join(batches)
    expected = assert_same(data, 0, 0, windows=(64, 100, 4096, 65536, 1 << 20))
    assert expected["batch_count"] == 5 and expected["stop"] == 0
    for index, at, code in ((1, 50_000, kernel.P_CRC_V2), (1, -1, kernel.P_CRC_V2), (4, 30_000, kernel.P_CRC_LEGACY)):
        bad = assert_same(flipped(batches, index, at), 0, 0, windows=(64, 100, 4096, 65536))
        assert bad["problem"][:3] == (code, starts_of(batches)[index], index)  # type: ignore[index]


# ------------------------------------------------------------------------------------------ fuzz
@given(st.binary(max_size=3000), st.sampled_from([0, 1, 64, 4096]))
@settings(max_examples=200, deadline=None)
def test_random_bytes(data, interval):
    assert_same(data, None, interval, windows=(64, 100, 4096))


@given(mutated_marker_logs(), st.sampled_from([0, 50, 4096]))
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_logs_with_markers(data, interval):
    assert_same(data, None, interval, windows=(64, 100, 4096))


@given(mutated_v2_logs(), st.sampled_from([0, 300]))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_v2_logs(data, interval):
    assert_same(data, None, interval, windows=(64, 100, 4096))


# ------------------------------------------------------------------------------------------ I/O errors, arguments
def test_a_file_that_shrank_before_the_walk_is_an_oserror(tmp_path):
    data = b"".join(plain(40))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDWR)
    try:
        end = os.fstat(fd).st_size
        os.ftruncate(fd, end // 2)
        for window, prefetch in ((64, False), (64, True), (1 << 20, True)):
            with pytest.raises(OSError, match="file shrank while being read"):
                run(fd, end, 0, 0, [], [], window, prefetch=prefetch)
        os.ftruncate(fd, 0)
        with pytest.raises(OSError, match="file shrank"):
            run(fd, end, 0, 0, [], [], 64)
    finally:
        os.close(fd)


def test_a_file_that_shrinks_during_the_walk_is_an_oserror(tmp_path):
    """The marker parser runs mid-walk: it truncates the file; the walk reads on and must fail cleanly."""
    batches = [txn(0), encode_control_batch(1, 7, 0, abort=False, timestamp=1)] + plain(50, start=2)
    data = b"".join(batches)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDWR)

    def shrinking(batch: bytes, count: int) -> int | str:
        os.ftruncate(fd, len(batches[0]) + len(batches[1]) + 30)
        return parse(batch, count)

    try:
        for prefetch in (False, True):
            os.pwrite(fd, data, 0)
            with pytest.raises(OSError, match="file shrank") as error:
                run(fd, len(data), 0, 0, [], [], 64, shrinking, prefetch=prefetch)
            assert error.value.errno is None
    finally:
        os.close(fd)


def test_a_directory_or_a_closed_descriptor_is_an_oserror(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(IsADirectoryError):
            run(fd, 100, 0, 0, [], [], 64)
    finally:
        os.close(fd)
    fd = memfd(b"".join(plain(2)))
    os.close(fd)
    with pytest.raises(OSError) as error:
        run(fd, 100, 0, 0, [], [], 64)
    assert error.value.errno == 9  # EBADF


def test_a_sources_error_is_raised_as_it_is_and_its_buffer_is_never_kept():
    """A Python source (an object store's reader) in place of a descriptor: its own exception ends the walk as
    that exception; an early end is the file that shrank; a count out of range or an object without
    ``pread_into`` is refused; the memoryview a call was given is released when the call returns (as with
    ``readinto``, a source must not keep views derived from it)."""
    data = b"".join(plain(40))
    fd = memfd(data)
    try:

        class Failing(PreadSource):
            def pread_into(self, buffer: memoryview, offset: int) -> int:
                if offset > 1000:
                    raise TimeoutError(f"s3://bucket/orders-0/00000000000000000000.log: read at {offset} timed out")
                return super().pread_into(buffer, offset)

        with pytest.raises(TimeoutError, match=r"s3://bucket/orders-0/\S+: read at \d+ timed out"):
            run(Failing(fd), len(data), 0, 0, [], [], 256)

        class Keeping(PreadSource):
            kept: list[memoryview] = []

            def pread_into(self, buffer: memoryview, offset: int) -> int:
                self.kept.append(buffer)
                return super().pread_into(buffer, offset)

        keeping = Keeping(fd)
        assert run(keeping, len(data), 0, 0, [], [], 256)["batch_count"] == 40
        with pytest.raises(ValueError, match="released memoryview"):
            keeping.kept[0][0] = 1

        with pytest.raises(OSError, match="file shrank while being read"):
            run(PreadSource(fd), len(data) + 100, 0, 0, [], [], 256)

        class Overlong(PreadSource):
            def pread_into(self, buffer: memoryview, offset: int) -> int:
                return len(buffer) + 1

        with pytest.raises(ValueError, match="pread_into returned"):
            run(Overlong(fd), len(data), 0, 0, [], [], 256)
        with pytest.raises(TypeError, match="a file descriptor or have pread_into"):
            run(object(), len(data), 0, 0, [], [], 256)  # type: ignore[arg-type]
    finally:
        os.close(fd)


def test_nothing_at_or_past_end_is_read():
    """The same answer whether bytes follow ``end`` in the file or not."""
    data = b"".join(plain(8))
    fd = memfd(data + os.urandom(300))
    try:
        for end in range(0, len(data), 23):
            probes = probes_for(data[:end])
            expected = reference(data[:end], 0, 0, *probes)
            for window in (64, 4096):
                assert run(fd, end, 0, 0, *probes, window) == expected
    finally:
        os.close(fd)


def test_the_marker_parser_errors_propagate():
    data = b"".join([txn(0), encode_control_batch(1, 7, 0, abort=True, timestamp=1), txn(2)])
    fd = memfd(data)

    def failing(batch: bytes, count: int) -> int | str:
        assert len(batch) == 78 and count == 1  # the whole control batch
        raise RuntimeError("parser failed")

    try:
        with pytest.raises(RuntimeError, match="parser failed"):
            run(fd, len(data), 0, 0, [], [], 64, failing)
        with pytest.raises(TypeError, match="int, a 3-tuple or a str"):
            run(fd, len(data), 0, 0, [], [], 64, lambda b, c: 1.5)  # type: ignore[arg-type,return-value]
        with pytest.raises(ValueError, match="not a short"):
            run(fd, len(data), 0, 0, [], [], 64, lambda b, c: 2**40)
        with pytest.raises(ValueError, match=r"not \(short, int, long\)"):
            run(fd, len(data), 0, 0, [], [], 64, lambda b, c: (1, 2**31, 0))  # type: ignore[arg-type,return-value]
        with pytest.raises(TypeError):
            run(fd, len(data), 0, 0, [], [], 64, lambda b, c: (1, "x", 0))  # type: ignore[arg-type,return-value]
        with pytest.raises(TypeError, match="3-tuple"):
            run(fd, len(data), 0, 0, [], [], 64, lambda b, c: (1, 2))  # type: ignore[arg-type,return-value]
        assert run(fd, len(data), 0, 0, [], [], 64, lambda b, c: 1)["fatal"] is None
    finally:
        os.close(fd)


def test_bad_arguments_are_refused():
    fd = memfd(b"".join(plain(2)))
    try:
        for window, end, interval in ((63, 100, 0), (64, -1, 0), (64, 100, -1), (64, 100, 2**31)):
            with pytest.raises(ValueError, match="scan_segment"):
                run(fd, end, 0, interval, [], [], window)
        with pytest.raises(ValueError, match="sorted"):
            run(fd, 100, 0, 0, [5, 3], [], 64)
        with pytest.raises(ValueError, match="multiple of 8"):
            kernel.scan_segment(fd, 100, 0, 0, b"\0" * 7, b"", parse)
        with pytest.raises(TypeError, match="callable"):
            kernel.scan_segment(fd, 100, 0, 0, b"", b"", None)  # type: ignore[arg-type]
        assert kernel.scan_segment(fd, 0, 0, 0, b"", b"", parse)["batch_count"] == 0  # the default window
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------ epochs and producers
def test_generated_partitions_with_varying_epochs(tmp_path):
    """Leader epochs that rise (and a rare older one), producer-epoch bumps on markers, rising coordinator epochs,
    idempotent producers: the epoch starts and the producers' end states equal the reference's, every window."""
    paths = generate_partition(
        tmp_path / "e-0", segments=3, batches_per_segment=150, transactional_producers=3, epochs=True, seed=11
    )
    paths += generate_partition(
        tmp_path / "e-1", segments=2, batches_per_segment=80, transactional_producers=2, compression=1, epochs=True
    )
    starts = producers = 0
    metas: set[int] = set()
    for path in paths:
        data = path.read_bytes()
        expected = assert_same(data, int(path.stem), 4096)
        starts += len(expected["epoch_starts"]) // 12  # type: ignore[arg-type]
        states = np.frombuffer(expected["producers"], PRODUCER_DTYPE)  # type: ignore[arg-type]
        producers += len(states)
        metas |= set(states["meta"].tolist())
        assert len({int(e) for e in states["epoch"]}) > 1 or len(states) < 3
    assert starts > 6 and producers > 10 and metas >= {2}


def test_a_type_only_marker_parser_gives_no_producer_states():
    """The older parser (the control type alone) leaves every other key as it was, and ``producers`` None."""
    data = CASES["markers"][0]
    fd = memfd(data)
    try:
        full = run(fd, len(data), 0, 0, [], [], 4096)
        typed = run(fd, len(data), 0, 0, [], [], 4096, parse_type_only)
    finally:
        os.close(fd)
    assert typed["producers"] is None and full["producers"]
    assert {k: v for k, v in typed.items() if k != "producers"} == {k: v for k, v in full.items() if k != "producers"}


def test_epoch_starts_and_producer_states_by_hand():
    """Kafka's rules on a hand-made segment (ProducerAppendInfo/ProducerStateEntry, LogSegment.recover)."""
    data = b"".join(
        [
            encode_batch_v2(0, [(None, b"a", 10)] * 3, producer_id=5, producer_epoch=1, base_sequence=7,
                            partition_leader_epoch=2),
            encode_batch_v2(3, [(None, b"b", 20)], producer_id=6, producer_epoch=0, base_sequence=2**31 - 1,
                            transactional=True, partition_leader_epoch=1),  # older epoch: no start
            encode_control_batch(4, 6, 1, abort=True, timestamp=30, coordinator_epoch=9, partition_leader_epoch=4),
            encode_control_batch(5, 5, 1, abort=False, timestamp=40, coordinator_epoch=3, partition_leader_epoch=4),
            encode_batch_v2(6, [(None, b"c", 50)] * 2, producer_id=6, producer_epoch=1, transactional=True,
                            partition_leader_epoch=-1),
            encode_batch_v2(8, [], producer_id=7, producer_epoch=0, transactional=True, control=True),  # ignored
            encode_legacy(9, b"d", magic=1, timestamp=60),
        ]
    )  # fmt: skip
    expected = assert_same(data, 0, 0)
    assert np.frombuffer(expected["epoch_starts"], EPOCH_DTYPE).tolist() == [(2, 0), (4, 4)]  # type: ignore[arg-type]
    states = np.frombuffer(expected["producers"], PRODUCER_DTYPE)  # type: ignore[arg-type]
    assert states.tolist() == [
        # pid, first epoch, epoch, meta, marker, last seq, last offset, delta, timestamp, coord epoch, txn first
        (5, 1, 1, 2, 1, 9, 2, 2, 40, 3, -1),  # a marker of the same epoch keeps the data batch's metadata
        (6, 0, 1, 2, 1, -1, 7, 1, 50, 9, 6),  # a data batch without sequence: -1; a new transaction at 6
    ]
