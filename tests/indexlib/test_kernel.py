"""The compiled scan kernel (``indexlib.format._kernel``) against the pure-Python path it replaces: the same
CRC-32C, and the same :class:`~indexlib.format.records.LogScan` (every column, the stop, the problem, the fatal
problem) on every real fixture log, on generated logs and on random and mutated bytes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexlib.format import records
from indexlib.format.batch_walk import scan_buffer
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL

kernel = pytest.importorskip("indexlib.format._kernel", reason="the C extension is not built (no compiler at install)")

COLUMNS = (
    "positions", "sizes", "base_offsets", "last_offsets", "max_timestamps", "magic", "attributes", "producer_ids",
    "producer_epochs", "records_counts", "marker_types",
)  # fmt: skip


def assert_same_scan(data: bytes, end: int | None = None) -> records.LogScan:
    end = len(data) if end is None else end
    compiled = scan_buffer(data, end, compiled=True)
    python = scan_buffer(data, end, compiled=False)
    for column in COLUMNS:
        a, b = getattr(compiled, column), getattr(python, column)
        assert a.dtype == b.dtype and np.array_equal(a, b), column
    assert (compiled.stop, compiled.problem, compiled.fatal) == (python.stop, python.problem, python.fatal)
    return compiled


@given(st.binary(max_size=5000), st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_crc32c_equals_the_crc32c_package(data, seed):
    assert kernel.crc32c(data) == kernel.crc32c_table(data) == crc32c.crc32c(data)
    assert kernel.crc32c(data, seed) == kernel.crc32c_table(data, seed) == crc32c.crc32c(data, seed)


def test_the_cpu_instruction_is_used_where_the_cpu_has_it():
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text() if cpuinfo.exists() else ""
    if " sse4_2" in flags or " crc32" in flags:
        assert kernel.hardware()


def test_walk_v2_checks_its_bounds_and_stops_where_the_common_case_ends():
    good = encode_batch_v2(0, [(None, b"a" * 50, 1)]) + encode_batch_v2(1, [(None, b"b" * 50, 2)])
    chunk, pos = kernel.walk_v2(good, 0, len(good))
    assert np.frombuffer(chunk, np.int64).tolist() == [0, len(good) // 2] and pos == len(good)
    chunk, pos = kernel.walk_v2(good, 0, len(good) - 1)  # the second batch no longer fits
    assert np.frombuffer(chunk, np.int64).tolist() == [0] and pos == len(good) // 2
    legacy = encode_legacy(0, b"x", magic=1, timestamp=1)
    assert kernel.walk_v2(legacy + good, 0, len(legacy + good)) == (b"", 0)  # not v2: Python's general step
    for bad in ((-1, 10), (5, 4), (0, len(good) + 1)):
        with pytest.raises(ValueError, match="walk_v2"):
            kernel.walk_v2(good, *bad)


def fixture_logs() -> list:
    return sorted(KAFKA_REAL.rglob("*.log")) if KAFKA_REAL.is_dir() else []


@pytest.mark.skipif(not fixture_logs(), reason="needs ../shared/fixtures/kafka-real (real brokers' segments)")
def test_every_real_fixture_log_scans_alike():
    for path in fixture_logs():
        assert_same_scan(path.read_bytes())


def test_generated_logs_scan_alike(tmp_path):
    generate_partition(tmp_path / "t-0", segments=3, batches_per_segment=80, transactional_producers=2, seed=9)
    for path in sorted((tmp_path / "t-0").glob("*.log")):
        data = path.read_bytes()
        scan = assert_same_scan(data)
        assert scan.batch_count == 80 and scan.problem is None
        for cut in (1, 17, 18, 60, len(data) // 2):  # every way the end can fall
            assert_same_scan(data, len(data) - cut)
    markers = encode_control_batch(5, 7, 0, abort=True, timestamp=9) + encode_batch_v2(6, [(None, b"z", 10)])
    assert assert_same_scan(markers).marker_types.tolist() == [0, -1]


@st.composite
def mutated_logs(draw):
    batches = [
        encode_batch_v2(i * 3, [(None, b"v" * draw(st.integers(0, 300)), 1000 + i)] * 3, producer_id=draw(st.sampled_from([-1, 4])))
        for i in range(draw(st.integers(1, 12)))
    ]  # fmt: skip
    data = bytearray(b"".join(batches))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "size", "magic", "cut", "garbage"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "size" and len(data) >= at + 12:
            struct.pack_into(">i", data, at + 8, draw(st.integers(-(2**31), 2**31 - 1)))
        elif kind == "magic" and len(data) > at + 16:
            data[at + 16] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "garbage":
            data[at:at] = draw(st.binary(max_size=64))
    return bytes(data)


@given(mutated_logs())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_logs_scan_alike(data):
    assert_same_scan(data)


@given(st.binary(max_size=3000))
@settings(max_examples=300, deadline=None)
def test_random_bytes_scan_alike(data):
    assert_same_scan(data)


def test_nothing_past_end_is_read():
    """The same scan whether the bytes after ``end`` exist or not (a read past it would differ or crash)."""
    data = b"".join(encode_batch_v2(i, [(None, b"q" * 90, i)]) for i in range(20))
    for end in range(0, len(data), 37):
        expected = scan_buffer(data[:end], end, compiled=False)
        got = scan_buffer(data + os.urandom(200), end, compiled=True)
        assert np.array_equal(got.positions, expected.positions) and got.problem == expected.problem
