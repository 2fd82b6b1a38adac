"""Segments Kafka's recovery would not finish (kafka-index-format.md 2.3-2.5, 6.1): the refusal paths.

Each case is a three-segment partition built with the generate helpers: a healthy segment at base 0, the
case's segment at base 100 and a healthy one at base 1000. For each case:

* the scan / plan / producer-state replay reports the fatal kind at the exact byte and batch;
* ``rebuild_partition`` writes no index file for that segment and rebuilds the other two;
* ``python -m indexlib verify --json -`` lists the finding (exit 1), and ``rebuild`` exits 1.

A malformed transaction marker is not a refusal but an invalid tail (``log_invalid_marker``): Kafka keeps
the marker batch and truncates after it (2.4). Where the code and the doc disagree, the doc's behaviour is
an ``xfail(strict=True)`` test.
"""

from __future__ import annotations

import gzip
import importlib
import json
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib.cli.main import main
from indexlib.engine import rebuild_partition, verify_partition
from indexlib.engine.segment_task import plan_segment_file
from indexlib.format.batch_walk import scan_buffer
from indexlib.format.records import StopReason
from indexlib.format.values import AbortedTxn
from indexlib.recovery.entry_plan import plan_segment
from indexlib.recovery.findings import KINDS, REFUSE_SEGMENT
from indexlib.recovery.log_scan import summarize
from indexlib.recovery.producer_state import replay_segment
from indexlib.recovery.settings import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES
from indexlib.storage.partition_files import summarize_log
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch

BAD = 100  # base offset of the case's segment
AFTER = 1000  # base offset of the healthy segment after it
PID = 7
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


# ------------------------------------------------------------------------------------------ batches
def data(offset: int, ts: int, n: int = 1, **kw) -> bytes:
    """A batch of ``n`` records of 40 bytes: the size depends on ``n`` only (offsets are not varints)."""
    return encode_batch_v2(offset, [(None, b"v" * 40, ts + i) for i in range(n)], **kw)


def txn(offset: int, ts: int) -> bytes:
    return data(offset, ts, producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)


def plain_from_producer(offset: int, ts: int) -> bytes:
    """A non-transactional (idempotent) batch of producer PID."""
    return data(offset, ts, producer_id=PID, producer_epoch=0, base_sequence=5)


def control(offset: int, key: bytes, value: bytes, compression: int = 0, pid: int = PID) -> bytes:
    """A control batch of ``pid`` whose one record has this key and value."""
    return encode_batch_v2(
        offset,
        [(key, value, 50)],
        producer_id=pid,
        producer_epoch=0,
        transactional=True,
        control=True,
        compression=compression,
    )


def marker_key(control_type: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, control_type)


def marker_value(coordinator_epoch: int = 0, version: int = 0) -> bytes:
    return struct.pack(">hi", version, coordinator_epoch)


def with_codec(batch: bytes, codec: int) -> bytes:
    """The batch with compression bits ``codec`` in its attributes and its CRC-32C recomputed."""
    b = bytearray(batch)
    attributes = struct.unpack_from(">h", b, 21)[0]
    struct.pack_into(">h", b, 21, (attributes & ~0x07) | codec)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def compressed(batch: bytes, codec: int) -> bytes:
    """The uncompressed v2 ``batch`` with its records compressed with ``codec`` (1 gzip, 2 snappy, 3 lz4, 4 zstd)
    framed as Kafka's Java client writes them (snappy: xerial's block framing; lz4: one LZ4 frame; zstd: one
    frame), and its size field, attributes and CRC-32C to match. Skips the test when the codec's library is
    missing (the ``decompress`` extra)."""
    records = batch[61:]
    if codec == 1:
        payload = gzip.compress(records)
    elif codec == 2:
        block = pytest.importorskip("snappy").compress(records)
        payload = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    elif codec == 3:
        payload = pytest.importorskip("lz4.frame").compress(records)
    else:
        payload = pytest.importorskip("zstandard").ZstdCompressor().compress(records)
    b = bytearray(batch[:61] + payload)
    struct.pack_into(">i", b, 8, len(b) - 12)
    attributes = struct.unpack_from(">h", b, 21)[0]
    struct.pack_into(">h", b, 21, (attributes & ~0x07) | codec)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


#: codec id -> (its name, the module compression.py imports for it, the package that provides it)
CODECS = {1: ("gzip", None, None), 2: ("snappy", "snappy", "python-snappy"), 3: ("lz4", "lz4.frame", "lz4")}
CODECS[4] = ("zstd", "zstandard", "zstandard")

BATCH = len(data(0, 0))  # every one-record data batch has this size


# --------------------------------------------------------------------------------------------- cases
@dataclass
class Case:
    id: str
    bad: list[bytes]  # the batches of the segment at base BAD
    kind: str
    batch: int  # index in that segment of the batch concerned
    source: str  # "scan" (LogScan.fatal), "plan" (plan_segment) or "replay" (producer state)
    interval: int = DEFAULT_INDEX_INTERVAL_BYTES
    index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    first: list[bytes] = field(default_factory=lambda: [data(0, 10), data(1, 20)])

    @property
    def position(self) -> int:
        return sum(len(b) for b in self.bad[: self.batch])

    @property
    def base_offset(self) -> int:
        return struct.unpack_from(">q", self.bad[self.batch])[0]

    def settings(self) -> list[str]:
        return ["--index-interval-bytes", str(self.interval), "--segment-index-bytes", str(self.index_bytes)]


def _cases() -> list[Case]:
    b = BAD
    return [
        # 2.4 / C/EndTransactionMarker: a control type other than ABORT/COMMIT with a producer id
        Case(
            "unknown-control-type-leader-change",
            [data(b, 1), txn(b + 1, 2), control(b + 2, marker_key(2), marker_value()), data(b + 3, 4)],
            "unknown_control_type",
            2,
            "scan",
        ),
        Case(
            "unknown-control-type-99-short-value",  # the type is checked before the value
            [txn(b, 1), control(b + 1, marker_key(99), b"")],
            "unknown_control_type",
            1,
            "scan",
        ),
        # a control batch whose codec bits name a codec its records are not compressed with: Kafka's recovery
        # fails to decompress it (a KafkaException its recover does not catch); indexlib cannot read it either
        Case(
            "compressed-control-batch-gzip-bits",
            [txn(b, 1), with_codec(control(b + 1, marker_key(0), marker_value()), 1), data(b + 2, 3)],
            "compressed_control_batch",
            1,
            "scan",
        ),
        Case(
            "compressed-control-batch-zstd-bits",
            [txn(b, 1), data(b + 1, 2), with_codec(encode_control_batch(b + 2, PID, 0, abort=True, timestamp=3), 4)],
            "compressed_control_batch",
            2,
            "scan",
        ),
        # 2.4 / C/CompressionType: an unknown compression id 5-7 when a control batch is iterated
        *(
            Case(
                f"unknown-compression-{codec}",
                [txn(b, 1), with_codec(encode_control_batch(b + 1, PID, 0, abort=False, timestamp=2), codec)],
                "unknown_compression",
                1,
                "scan",
            )
            for codec in (5, 7)
        ),
        # 1.2: the offset index holds roundDown(36, 8) / 8 = 4 entries; batches 1..5 each want one (interval 0).
        # Equal timestamps keep the time index at one entry, below its limit (3 - 1).
        Case(
            "offset-index-full",
            [data(b + i, 500) for i in range(6)],
            "offset_index_full",
            5,
            "plan",
            interval=0,
            index_bytes=36,
        ),
        # 1.3: the time index holds 24 / 12 = 2 slots and is full at 1 entry (the last slot is reserved);
        # the offset index (3 entries) is not full at batch 2
        Case(
            "time-index-full",
            [data(b + i, 500 + i) for i in range(4)],
            "time_index_full",
            2,
            "plan",
            interval=0,
            index_bytes=24,
        ),
        # 1.2 / 2.4: an indexed batch whose last offset is not above the previous entry's (InvalidOffsetException)
        Case(
            "offset-going-back",
            [data(b, 1), data(b + 5, 2), data(b + 3, 3), data(b + 6, 4)],
            "log_offset_not_increasing",
            2,
            "plan",
            interval=0,
        ),
        Case(
            "offset-repeated",
            [data(b, 1), data(b + 5, 2), data(b + 5, 3)],
            "log_offset_not_increasing",
            2,
            "plan",
            interval=0,
        ),
        # 1.3 step 2: a time-index append whose offset is below the last entry's. With interval = one batch,
        # batches 2 and 4 are indexed: batch 2 writes (100, 110); batch 3 (not indexed) raises the max to
        # 200 at offset 103; batch 4 (offset 120, above 110: the offset index is fine) appends (200, 103).
        Case(
            "time-offset-going-back",
            [data(b, 1), data(b + 1, 2), data(b + 10, 100), data(b + 3, 200), data(b + 20, 150)],
            "log_time_offset_not_increasing",
            4,
            "plan",
            interval=BATCH,
        ),
        # 2.4 step 4: the same through the forced final entry (skipFullCheck skips only the full check)
        Case(
            "final-time-offset-going-back",
            [data(b, 1), data(b + 1, 2), data(b + 10, 100), data(b + 3, 200)],
            "log_time_offset_not_increasing",
            3,
            "plan",
            interval=BATCH,
        ),
        # 2.3: 0 <= lastOffset - base <= 2^31 - 1, else LogSegmentOffsetOverflowException
        Case("offset-overflow", [data(b, 1), data(b + 2**31, 2)], "offset_overflow", 1, "plan"),
        Case(
            "offset-overflow-by-last-offset",  # the base offset fits; the last offset is base + 2^31
            [data(b, 1), data(b + 2**31 - 3, 2, n=4)],
            "offset_overflow",
            1,
            "plan",
        ),
        Case("offset-below-base", [data(b, 1), data(b - 1, 2)], "offset_overflow", 1, "plan"),
        # 2.5: a non-transactional batch of a producer whose transaction is open (InvalidTxnStateException)
        Case(
            "plain-batch-in-open-transaction",
            [txn(b, 1), data(b + 1, 2), plain_from_producer(b + 2, 3)],
            "non_transactional_in_open_transaction",
            2,
            "replay",
        ),
        Case(
            "plain-batch-in-transaction-from-previous-segment",
            [plain_from_producer(b, 3), data(b + 1, 4)],
            "non_transactional_in_open_transaction",
            0,
            "replay",
            first=[data(0, 10), txn(1, 20)],
        ),
    ]


CASES = _cases()


def make_partition(root: Path, case: Case) -> Path:
    part = root / "logs" / "events-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(b"".join(case.first))
    (part / f"{BAD:020d}.log").write_bytes(b"".join(case.bad))
    (part / f"{AFTER:020d}.log").write_bytes(data(AFTER, 5_000) + data(AFTER + 1, 5_001))
    return part


def index_files(part: Path, base: int) -> list[str]:
    return sorted(p.name for p in part.glob(f"{base:020d}.*") if p.suffix in INDEX_SUFFIXES)


def assert_problem(problem, case: Case) -> None:
    assert problem is not None, case.id
    assert (problem.kind, problem.position, problem.batch_index) == (case.kind, case.position, case.batch)
    assert problem.base_offset == case.base_offset


def test_every_case_kind_is_a_registered_refusal():
    assert {c.kind for c in CASES} <= {k for k, v in KINDS.items() if v.triggers == REFUSE_SEGMENT}


def test_the_time_offset_cases_index_the_batches_they_claim():
    """With equal batches and interval = one batch, batches 2, 4, ... are indexed; 3 is not."""
    case = next(c for c in CASES if c.id == "time-offset-going-back")
    assert {len(b) for c in CASES if c.interval == BATCH for b in c.bad} == {BATCH}
    d = b"".join(case.bad)
    plan = plan_segment(summarize(scan_buffer(d, len(d)), BAD, case.interval))
    assert plan.offset_positions.tolist() == [2 * BATCH, 4 * BATCH]
    assert plan.offset_offsets.tolist() == [BAD + 10, BAD + 20]  # increasing: the offset index is fine


# ------------------------------------------------------------------------------------- (a) plan
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_fatal_problem(tmp_path, case):
    part = make_partition(tmp_path, case)
    scan, plan = plan_segment_file(str(part / f"{BAD:020d}.log"), BAD, case.interval, case.index_bytes)
    if case.source == "scan":
        assert_problem(scan.fatal, case)
        assert plan.fatal is scan.fatal
    elif case.source == "plan":
        assert scan.fatal is None and scan.problem is None and scan.stop is StopReason.END
        assert_problem(plan.fatal, case)
    else:
        assert scan.fatal is None and plan.fatal is None  # only the replay across batches finds it
    result = verify_partition(part, case.interval, case.index_bytes)
    assert [s.task.base_offset for s in result.segments] == [0, BAD, AFTER]
    assert_problem(result.segments[1].fatal, case)
    assert result.segments[0].fatal is None and result.segments[2].fatal is None


def test_where_the_scan_stops_on_a_refused_control_batch():
    """A control batch of an unknown type is kept (Kafka reads it, then throws); a compressed one is not."""
    for case in (c for c in CASES if c.source == "scan"):
        d = b"".join(case.bad)
        scan = scan_buffer(d, len(d))
        kept = case.batch + 1 if case.kind == "unknown_control_type" else case.batch
        assert scan.batch_count == kept, case.id
        assert scan.valid_bytes == sum(len(x) for x in case.bad[:kept]), case.id


# ---------------------------------------------------------------------------- (b) rebuild_partition
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rebuild_partition_writes_nothing_for_the_refused_segment(tmp_path, case):
    part = make_partition(tmp_path, case)
    result = rebuild_partition(part, case.interval, case.index_bytes)
    refused = result.segments[1]
    assert_problem(refused.fatal, case)
    assert refused.written == [] and index_files(part, BAD) == []
    for seg in (result.segments[0], result.segments[2]):
        assert seg.fatal is None
        assert sorted(Path(p).name for p in seg.written) == [
            f"{seg.task.base_offset:020d}.index",
            f"{seg.task.base_offset:020d}.timeindex",
        ]
        assert index_files(part, seg.task.base_offset) == [
            f"{seg.task.base_offset:020d}.index",
            f"{seg.task.base_offset:020d}.timeindex",
        ]


# ------------------------------------------------------------------------------------------ (c) CLI
def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_command_line_reports_the_refusal(tmp_path, capsys, case):
    part = make_partition(tmp_path, case)
    log = str(part / f"{BAD:020d}.log")
    report_path = tmp_path / "rebuild.json"
    code, out, err = run_cli(capsys, "rebuild", part, "--jobs", "1", "--json", report_path, *case.settings())
    assert code == 1 and err == ""
    assert f"FATAL {case.kind} at byte {case.position} (batch {case.batch})" in out
    rebuild = {s["base_offset"]: s for s in json.loads(report_path.read_text())["segments"]}
    assert rebuild[BAD]["action"] == "cannot_rebuild" and rebuild[BAD]["written"] == []
    assert rebuild[0]["action"] == rebuild[AFTER]["action"] == "rebuilt"
    assert index_files(part, BAD) == [] and len(index_files(part, 0)) == len(index_files(part, AFTER)) == 2

    code, out, err = run_cli(capsys, "verify", part, "--jobs", "1", "--json", "-", *case.settings())
    assert code == 1
    report = json.loads(out)
    assert report["exit_code"] == 1 and "could not be rebuilt" in err.splitlines()[-1]
    segments = {s["base_offset"]: s for s in report["segments"]}
    assert segments[0]["findings"] == [] and segments[AFTER]["findings"] == []  # the others are healthy
    refused = segments[BAD]
    assert refused["action"] == "cannot_rebuild"
    refusals = [f for f in refused["findings"] if KINDS[f["kind"]].triggers == REFUSE_SEGMENT]
    assert len(refusals) == 1
    finding = refusals[0]
    assert (finding["kind"], finding["file"], finding["entry"], finding["position"]) == (
        case.kind,
        log,
        case.batch,
        case.position,
    )
    assert finding["severity"] == "error"
    assert any(f["kind"] == case.kind and f["entry"] == case.batch for f in report["remaining_findings"])


# ------------------------------------------------------------------------ malformed transaction marker
MALFORMED = {
    "value-too-short": (marker_key(0), struct.pack(">h", 0), "shorter than 6"),
    "value-version-negative": (marker_key(1), marker_value(version=-1), "invalid end transaction marker version -1"),
    "key-too-short": (b"\x00\x00\x00", marker_value(), "shorter than 4"),
    "key-version-negative": (marker_key(0, version=-2), marker_value(), "invalid control record key version -2"),
}


def malformed_case(key: bytes, value: bytes) -> Case:
    b = BAD
    bad = [txn(b, 1), data(b + 1, 2), control(b + 2, key, value), data(b + 3, 4), data(b + 4, 5)]
    return Case("malformed", bad, "log_invalid_marker", 2, "scan", interval=0)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_marker_ends_the_valid_data_after_its_batch(tmp_path, capsys, name):
    """2.4: InvalidRecordException is caught by recover; validBytes already counts the marker batch, so the
    batch stays (and is indexed) and everything after it is truncated. Not a refusal."""
    key, value, reason = MALFORMED[name]
    case = malformed_case(key, value)
    part = make_partition(tmp_path, case)
    log = part / f"{BAD:020d}.log"
    before = log.read_bytes()
    at, end = case.position, case.position + len(case.bad[2])

    # (a) the scan: an invalid tail after the marker batch, nothing fatal
    scan, plan = plan_segment_file(str(log), BAD, case.interval, case.index_bytes)
    assert scan.problem is not None and scan.fatal is None and plan.fatal is None
    assert (scan.problem.kind, scan.problem.position, scan.problem.batch_index) == ("invalid_marker", at, 2)
    assert reason in scan.problem.detail
    assert scan.stop is StopReason.INVALID_RECORD
    assert scan.batch_count == 3 and scan.valid_bytes == end and scan.invalid_bytes == len(before) - end
    assert plan.offset_positions.tolist() == [len(case.bad[0]), at]  # the marker batch is indexed

    # (b) the segment is rebuilt over the valid data, the .log left as it is
    result = rebuild_partition(part, case.interval, case.index_bytes)
    assert all(s.fatal is None for s in result.segments)
    assert index_files(part, BAD) == [f"{BAD:020d}.index", f"{BAD:020d}.timeindex"]
    assert log.read_bytes() == before

    # (c) verify reports the invalid tail (an error: exit 1); rebuild succeeds (exit 0)
    code, out, _ = run_cli(capsys, "verify", part, "--jobs", "1", "--json", "-", *case.settings())
    assert code == 1
    segments = {s["base_offset"]: s for s in json.loads(out)["segments"]}
    assert [(f["kind"], f["file"], f["entry"], f["position"], f["found"]) for f in segments[BAD]["findings"]] == [
        ("log_invalid_marker", str(log), 2, at, len(before) - end)
    ]
    assert segments[BAD]["action"] == "none" and segments[0]["findings"] == segments[AFTER]["findings"] == []
    code, out, _ = run_cli(capsys, "rebuild", part, "--jobs", "1", *case.settings())
    assert code == 0 and "corrupt tail: log_invalid_marker at byte" in out and "FATAL" not in out


def test_a_malformed_marker_opens_no_transaction(tmp_path):
    """kafka-index-format.md 2.4/2.5: the marker's InvalidRecordException is thrown while Kafka appends
    it, so the producer state does not change (it once opened a transaction here)."""
    key, value, _ = MALFORMED["value-too-short"]
    part = tmp_path / "events-0"
    part.mkdir()
    # producer PID has no open transaction: the stray, malformed marker must not start one
    (part / f"{0:020d}.log").write_bytes(data(0, 1) + control(1, key, value))
    _, plan = plan_segment_file(str(part / f"{0:020d}.log"), 0)
    state: dict[int, int] = {}
    replay_segment(state, plan.events)
    assert state == {}
    # so a later plain batch of that producer is no refusal
    (part / f"{2:020d}.log").write_bytes(plain_from_producer(2, 3))
    assert [s.fatal for s in verify_partition(part).segments] == [None, None]


# ----------------------------------------------------------------------------- compressed marker
def test_a_gzip_abort_marker_is_read_as_kafka_reads_it(tmp_path):
    """kafka-index-format.md 2.5: Kafka parses the first record of a control batch as the marker whatever the
    codec (2.4 lists no exception for a known one), so its recovery decompresses a gzip marker and finishes."""
    part = tmp_path / "events-0"
    part.mkdir()
    batches = [txn(0, 1), control(1, marker_key(0), marker_value(), compression=1), data(2, 3)]
    (part / f"{0:020d}.log").write_bytes(b"".join(batches))
    result = rebuild_partition(part)
    seg = result.segments[0]
    assert seg.fatal is None and seg.aborted == [AbortedTxn(PID, 0, 1, 2)]
    assert index_files(part, 0) == [f"{0:020d}.index", f"{0:020d}.timeindex", f"{0:020d}.txnindex"]


def _both_summaries(log: Path, base: int):
    """The segment's summary from the compiled kernel (when built) and from the pure-Python reference, which
    must be equal field for field; returns the reference's."""
    reference = summarize_log(log, base, DEFAULT_INDEX_INTERVAL_BYTES, compiled=False)
    compiled = summarize_log(log, base, DEFAULT_INDEX_INTERVAL_BYTES, compiled=True)
    assert repr(compiled.fatal) == repr(reference.fatal) and repr(compiled.problem) == repr(reference.problem)
    for name in ("batch_count", "valid_bytes", "stop", "plan_end", "last_offset"):
        assert getattr(compiled, name) == getattr(reference, name), name
    assert compiled.events.tobytes() == reference.events.tobytes()
    assert compiled.epoch_starts.tobytes() == reference.epoch_starts.tobytes()
    assert compiled.producers is not None and reference.producers is not None
    assert compiled.producers.tobytes() == reference.producers.tobytes()
    return reference


@pytest.mark.parametrize("abort", [True, False], ids=["abort", "commit"])
@pytest.mark.parametrize("codec", sorted(CODECS), ids=lambda c: CODECS[c][0])
def test_a_compressed_marker_is_read_as_kafka_reads_it(tmp_path, codec, abort):
    """Each codec's ABORT / COMMIT marker (its records compressed as the Java client frames them) ends the
    transaction as the uncompressed marker does: both scans agree, and an ABORT is in the .txnindex."""
    part = tmp_path / "events-0"
    part.mkdir()
    marker = encode_control_batch(1, PID, 0, abort=abort, timestamp=7, coordinator_epoch=3)
    plain_log = b"".join([txn(0, 1), marker, plain_from_producer(2, 3)])
    log = b"".join([txn(0, 1), compressed(marker, codec), plain_from_producer(2, 3)])
    (part / f"{0:020d}.log").write_bytes(log)
    (tmp_path / "plain.log").write_bytes(plain_log)
    summary = _both_summaries(part / f"{0:020d}.log", 0)
    expected = _both_summaries(tmp_path / "plain.log", 0)
    assert summary.fatal is None and summary.problem is None and summary.batch_count == 3
    for name in ("batch", "kind", "producer_id", "offset"):  # the same marker at the same batch (later positions move)
        assert summary.events[name].tolist() == expected.events[name].tolist(), name
    assert summary.producers is not None and expected.producers is not None
    # the producer's end state (the marker's coordinator epoch and timestamp) as from the uncompressed marker
    assert summary.producers.tobytes() == expected.producers.tobytes()
    result = rebuild_partition(part)
    seg = result.segments[0]
    assert seg.fatal is None and seg.aborted == ([AbortedTxn(PID, 0, 1, 2)] if abort else [])
    suffixes = [".index", ".timeindex", ".txnindex"] if abort else [".index", ".timeindex"]
    assert index_files(part, 0) == [f"{0:020d}{s}" for s in suffixes]


@pytest.mark.parametrize("codec", [2, 3, 4], ids=lambda c: CODECS[c][0])
def test_a_compressed_marker_without_its_codec_package_is_refused_naming_it(tmp_path, capsys, monkeypatch, codec):
    """The codec's package not installed: the segment is refused as before the extra existed
    (``compressed_control_batch``), its detail naming the package and the extra; both scans agree."""
    name, module, package = CODECS[codec]
    assert module is not None and package is not None
    part = tmp_path / "events-0"
    part.mkdir()
    marker = compressed(encode_control_batch(BAD + 1, PID, 0, abort=True, timestamp=2), codec)
    (part / f"{0:020d}.log").write_bytes(txn(0, 1))
    (part / f"{BAD:020d}.log").write_bytes(b"".join([txn(BAD, 1), marker, data(BAD + 2, 3)]))
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError (undone after)
    with pytest.raises(ImportError):
        importlib.import_module(module)
    summary = _both_summaries(part / f"{BAD:020d}.log", BAD)
    fatal = summary.fatal
    assert fatal is not None and summary.batch_count == 1 and summary.valid_bytes == len(txn(BAD, 1))
    assert (fatal.kind, fatal.position, fatal.batch_index) == ("compressed_control_batch", len(txn(BAD, 1)), 1)
    assert f"compression {name}" in fatal.detail and f"the {package} package" in fatal.detail
    assert "pip install 'kafka-index-rebuild[decompress]'" in fatal.detail
    code, out, _ = run_cli(capsys, "verify", part, "--jobs", "1", "--json", "-")
    assert code == 1
    segments = {s["base_offset"]: s for s in json.loads(out)["segments"]}
    [finding] = [f for f in segments[BAD]["findings"] if KINDS[f["kind"]].triggers == REFUSE_SEGMENT]
    assert finding["kind"] == "compressed_control_batch" and f"the {package} package" in json.dumps(finding)


# ------------------------------------------------------------------------------------ not refusals
def test_what_is_not_refused(tmp_path):
    """Near misses of the cases above: Kafka's recovery finishes, so every segment is rebuilt."""
    b = BAD
    near = [
        # a last offset of exactly base + 2^31 - 1 fits the relative range
        Case("max-relative", [data(b, 1), data(b + 2**31 - 4, 2, n=4)], "", 0, "plan"),
        # offsets going back between batches that are not indexed (default interval): no index append fails
        Case("back-unindexed", [data(b, 1), data(b + 5, 2), data(b + 3, 3)], "", 0, "plan"),
        # 4 offset entries fill a 36-byte offset index exactly
        Case("offset-index-exactly-full", [data(b + i, 500) for i in range(5)], "", 0, "plan", 0, 36),
        # an unknown codec or control type on a control batch without a producer id is never parsed
        Case("no-pid", [data(b, 1), with_codec(control(b + 1, marker_key(9), b"", pid=-1), 6)], "", 0, "plan"),
        # an empty control batch of a producer is ignored, whatever its attributes
        Case(
            "empty-control",
            [with_codec(encode_batch_v2(b, [], producer_id=PID, producer_epoch=0, control=True), 7)],
            "",
            0,
            "plan",
        ),
        # a plain batch of the producer after its transaction is committed
        Case(
            "plain-after-commit",
            [txn(b, 1), encode_control_batch(b + 1, PID, 0, abort=False, timestamp=2), plain_from_producer(b + 2, 3)],
            "",
            0,
            "plan",
        ),
    ]
    for case in near:
        part = make_partition(tmp_path / case.id, case)
        result = rebuild_partition(part, case.interval, case.index_bytes)
        assert [s.fatal for s in result.segments] == [None, None, None], case.id
        scan, _ = plan_segment_file(str(part / f"{BAD:020d}.log"), BAD, case.interval, case.index_bytes)
        assert scan.problem is None, case.id
        assert len(index_files(part, BAD)) == 2, case.id


# the usual-segment shortcut of the index-append checks against the entry-by-entry search: steps between batches
# mostly forward (the usual segment, where the shortcut answers), sometimes back or still (where it must not)
_ENTRY_STEPS = st.lists(st.tuples(st.integers(-1, 4), st.integers(-1, 4), st.booleans()), min_size=0, max_size=12)


@settings(max_examples=1000, deadline=None)
@given(_ENTRY_STEPS, st.sampled_from([24, 36, 48, 96, 10 * 1024 * 1024]))
def test_the_index_append_shortcut_finds_what_the_entry_by_entry_search_finds(steps, segment_index_bytes):
    """Random indexed batches (last offset, max offset, whether a time entry is written), small indexes so that
    both fill: the shortcut says "none" only where the full search finds none, and otherwise gives its answer."""
    import numpy as np

    from indexlib.recovery.entry_plan import _find_first_index_error, _first_index_error
    from indexlib.recovery.log_scan import ROW_DTYPE

    entries = np.zeros(len(steps), ROW_DTYPE)
    entries["batch"] = np.arange(len(steps))
    entries["last_offset"] = np.cumsum([s[0] for s in steps]) if steps else []
    entries["max_offset"] = np.cumsum([s[1] for s in steps]) if steps else []
    written = np.array([s[2] for s in steps], bool)
    fast = _first_index_error(entries, written, 0, segment_index_bytes)
    assert fast == _find_first_index_error(entries, written, 0, segment_index_bytes)
