"""The segment summary (:mod:`indexlib.recovery.log_scan`): the streaming compiled kernel and the reference over a
scan's columns give the same :class:`LogSummary`, field for field, on every real fixture segment (probed
with its real index files), on generated partitions, and on random and mutated logs with random probes;
and the plan and verify built on it keep their guarantees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexlib.format import batch_walk, control_records, scan_kernel
from indexlib.format.layout import segment_base_offsets, segment_file
from indexlib.recovery.entry_plan import plan_segment
from indexlib.recovery.log_scan import (
    EVENT_DTYPE,
    EVENT_TXN_DATA,
    NO_OFFSET,
    LogSummary,
    Probes,
    compact_events,
    from_kernel,
    probes_for,
    summarize,
)
from indexlib.storage.partition_files import read_existing_indexes, summarize_log
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch
from indexlib.testing.generate import generate_partition, write_uniform_segment

from ..conftest import KAFKA_REAL
from .test_records import mutated_logs

kernel = scan_kernel.compiled_kernel()
needs_kernel = pytest.mark.skipif(
    kernel is None or not hasattr(kernel, "scan_segment"),
    reason="the C extension with scan_segment is not built (no compiler at install)",
)

FIELDS = (
    "path", "file_size", "base_offset", "index_interval_bytes", "batch_count", "valid_bytes", "stop", "problem",
    "fatal", "plan_end", "last_offset", "raw_max",
)  # fmt: skip


def assert_same_summary(a: LogSummary, b: LogSummary) -> None:
    for name in FIELDS:
        assert getattr(a, name) == getattr(b, name), name
    for name in ("entries", "events"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name
    for name in ("last_row", "stop_row"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.tolist() == y.tolist(), name
    for name in ("starts", "bases", "previous_lasts", "running_max"):
        assert np.array_equal(getattr(a.answers, name), getattr(b.answers, name)), name
    assert a.epoch_starts.dtype == b.epoch_starts.dtype and a.epoch_starts.tobytes() == b.epoch_starts.tobytes()
    if a.producers is not None and b.producers is not None:  # None: the kernel had the type-only marker parser
        assert a.producers.dtype == b.producers.dtype and a.producers.tobytes() == b.producers.tobytes()


def kernel_summary(path: str | Path, base: int, interval: int, probes: Probes) -> LogSummary:
    """The kernel's summary with the marker parser that also gives coordinator epochs and record timestamps."""
    assert kernel is not None
    fd = batch_walk.open_segment(path)
    try:
        size = os.fstat(fd).st_size
        raw = kernel.scan_segment(
            fd, size, base, interval, probes.positions.tobytes(), probes.offsets.tobytes(),
            control_records.marker_fields_or_error, 1 << 20, True,
        )  # fmt: skip
    finally:
        os.close(fd)
    return from_kernel(raw, os.fspath(path), size, base, interval, probes)


def both(path: str | Path, base: int, interval: int, probes: Probes) -> LogSummary:
    compiled = summarize_log(path, base, interval, probes, compiled=True)
    reference = summarize_log(path, base, interval, probes, compiled=False)
    assert_same_summary(compiled, reference)
    full = kernel_summary(path, base, interval, probes)
    assert reference.producers is not None and full.producers is not None
    assert_same_summary(full, reference)
    return compiled


def partition_dirs(root: Path) -> list[Path]:
    return sorted({p.parent for p in root.rglob("*.log")})


@needs_kernel
@pytest.mark.skipif(not KAFKA_REAL.is_dir(), reason="needs ../shared/fixtures/kafka-real (real brokers' segments)")
def test_every_real_fixture_segment_summarizes_alike_with_its_real_index_files_as_probes():
    segments = 0
    for part in partition_dirs(KAFKA_REAL):
        for base in segment_base_offsets(str(part)):
            existing = read_existing_indexes(str(part), base)
            probes = probes_for(existing, base)
            for interval in (4096, 0, 1000):
                summary = both(segment_file(str(part), base, ".log"), base, interval, probes)
            segments += 1
            # every probe of a real index (Kafka's own entries) lands on a batch start inside the data
            inside = (probes.positions >= 0) & (probes.positions < summary.valid_bytes)
            assert np.array_equal(summary.answers.starts[inside], probes.positions[inside])
    assert segments > 10


@needs_kernel
def test_generated_partitions_summarize_alike(tmp_path):
    generate_partition(tmp_path / "t-0", segments=3, batches_per_segment=300, transactional_producers=3, seed=4)
    generate_partition(
        tmp_path / "t-1", segments=2, batches_per_segment=300, transactional_producers=3, epochs=True, seed=6
    )
    for name in ("t-0", "t-1"):
        for base in segment_base_offsets(str(tmp_path / name)):
            log = segment_file(str(tmp_path / name), base, ".log")
            size = os.path.getsize(log)
            probes = Probes.of(np.arange(-3, size + 3, 7), np.arange(base - 2, base + 400, 3))
            summary = both(log, base, 500, probes)
            assert len(summary.entries) > 5 and len(summary.events) > 3
            assert summary.producers is None or len(summary.producers) >= 3


@needs_kernel
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    data=mutated_logs(),
    base=st.integers(-5, 40),
    interval=st.sampled_from([0, 1, 60, 200, 4096]),
    positions=st.lists(st.integers(-5, 1500), max_size=12),
    offsets=st.lists(st.integers(-5, 60), max_size=12),
)
def test_mutated_logs_summarize_alike(tmp_path, data, base, interval, positions, offsets):
    log = tmp_path / f"{abs(hash(data))}.log"
    log.write_bytes(data)
    summary = both(log, base, interval, Probes.of(positions, offsets))
    plan = plan_segment(summary)  # never raises, whatever the bytes
    assert plan.batch_count == summary.batch_count
    log.unlink()


@needs_kernel
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=700), base=st.integers(-3, 3))
def test_random_bytes_summarize_alike(tmp_path, data, base):
    log = tmp_path / "random.log"
    log.write_bytes(data)
    both(log, base, 0, Probes.of(range(-2, len(data) + 2, 5), range(-3, 10)))


def test_the_reference_answers_probes_by_the_batch_holding_them(tmp_path):
    generate_partition(tmp_path / "t-0", segments=1, batches_per_segment=40, seed=2)
    log = segment_file(str(tmp_path / "t-0"), 0, ".log")
    scan = batch_walk.scan_log(log)
    middle = scan.positions[5] + 3
    probes = Probes.of([scan.positions[0], scan.positions[5], middle, -1, scan.valid_bytes], [scan.last_offsets[7]])
    summary = summarize(scan, 0, 4096, probes)
    starts, bases, previous = summary.answers.at_positions(np.array([scan.positions[5], middle, -1, scan.positions[0]]))
    assert starts.tolist() == [scan.positions[5], scan.positions[5], -1, scan.positions[0]]
    assert bases.tolist()[:2] == [scan.base_offsets[5]] * 2
    assert previous.tolist() == [scan.last_offsets[4], scan.last_offsets[4], NO_OFFSET, NO_OFFSET]
    assert summary.answers.at_offsets(np.array([scan.last_offsets[7]])).tolist() == [scan.max_timestamps[:8].max()]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=40),
    st.integers(0, 40),
)
def test_compaction_is_prefix_stable(pairs, k):
    """What the plan relies on: compacting the first k events keeps exactly the kept events among them
    (so the summary can compact while it walks and the plan can cut the events later)."""
    events = np.zeros(len(pairs), EVENT_DTYPE)
    events["batch"] = np.arange(len(pairs))
    events["kind"] = [kind for kind, _ in pairs]
    events["producer_id"] = [pid for _, pid in pairs]
    whole = compact_events(events)
    assert compact_events(events[:k]).tobytes() == whole[whole["batch"] < k].tobytes()
    kept = set(whole["batch"].tolist())
    last_kind: dict[int, int] = {}
    for batch, (kind, pid) in enumerate(pairs):  # the rule the kernel applies while walking
        assert (batch in kept) == (kind > EVENT_TXN_DATA or last_kind.get(pid) != kind)
        last_kind[pid] = kind


READ_AHEAD_PROBE = """
import os, sys
from indexlib.format import control_records, scan_kernel
from indexlib.storage import partition_files
threads, parse = [], control_records.marker_fields_or_error
def parser(batch, count):
    threads.append(len(os.listdir("/proc/self/task")))  # mid-walk: is the read-ahead thread there?
    return parse(batch, count)
control_records.marker_fields_or_error = parser
s = partition_files.summarize_log(sys.argv[1], 0, 4096)
print(scan_kernel.READ_AHEAD, s.batch_count, len(s.events), max(threads))
"""


@pytest.mark.skipif(scan_kernel.compiled_kernel() is None, reason="the C extension is not built")
def test_the_read_ahead_thread_runs_unless_turned_off(tmp_path):
    """A segment longer than two read windows (2 MiB) with a marker in its middle: while the walk is at the
    marker, the process has the kernel's read-ahead thread beside its own, unless KAFKA_INDEX_READ_AHEAD=0;
    the summary is the same either way."""
    path = tmp_path / "00000000000000000000.log"
    count = write_uniform_segment(path, total_bytes=3 << 20, batch_bytes=4096)
    txn = encode_batch_v2(count, [(None, b"t", 5)], producer_id=3, producer_epoch=0, transactional=True)
    with open(path, "ab") as f:
        f.write(txn + encode_control_batch(count + 1, 3, 0, abort=False, timestamp=6))
    with open(path, "ab") as f, open(tmp_path / "more.log", "wb") as more:
        write_uniform_segment(more.name, base_offset=count + 2, total_bytes=3 << 20, batch_bytes=4096)
        f.write(Path(more.name).read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_INDEX_READ_AHEAD", "KAFKA_INDEX_PURE_PYTHON")}
    lines = []
    for setting in (None, "0"):
        run_env = dict(env, KAFKA_INDEX_READ_AHEAD=setting) if setting else env
        out = subprocess.run(
            [sys.executable, "-c", READ_AHEAD_PROBE, str(path)], env=run_env, capture_output=True, text=True, check=True
        )
        lines.append(out.stdout.split())
    assert lines[0][0] == "True" and lines[1][0] == "False"
    assert lines[0][1:3] == lines[1][1:3] and int(lines[0][1]) == 2 * count + 2
    assert (int(lines[0][3]), int(lines[1][3])) == (2, 1)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(-2, 6), max_size=10), st.integers(0, 5))
def test_probes_are_np_unique_of_the_entries(steps, zeros):
    """The probes' shortcut (increasing entries, then a zero tail) gives exactly ``np.unique``."""
    import numpy as np

    from indexlib.recovery.log_scan import Probes

    values = list(np.cumsum(steps)) + [0] * zeros
    probes = Probes.of(values, values[::-1])
    assert probes.positions.tolist() == np.unique(np.asarray(values, np.int64)).tolist()
    assert probes.offsets.tolist() == np.unique(np.asarray(values[::-1], np.int64)).tolist()
    assert probes.positions.dtype == np.int64


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=12), st.booleans())
def test_sorted_unique_is_np_unique(values, square):
    """``sorted_unique`` (the replay's and the probes' fallback) is ``np.unique`` of int64 values, flattened."""
    from indexlib.recovery.log_scan import sorted_unique

    array = np.asarray(values, np.int64)
    if square and array.size >= 4:
        array = array[:4].reshape(2, 2)
    got = sorted_unique(array)
    assert got.dtype == np.int64 and got.tolist() == np.unique(array).tolist()
