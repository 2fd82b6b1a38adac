"""indexlib.cli.dump: dumps of the three index files and of a .log's batch headers, as data and as text."""

from __future__ import annotations

import collections
import io
import itertools
import json
import os
import pathlib
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from indexlib import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from indexlib.cli.dump import (
    DumpOptions,
    FileDump,
    dump_file,
    format_dump,
    iter_json,
    parse_segment_file_name,
    read_dump,
)
from indexlib.engine import rebuild_partition
from indexlib.engine.segment_task import plan_segment_file
from indexlib.format.layout import segment_file
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, requires_kafka_real, run_as_unprivileged


def records(n: int, ts: int) -> list[tuple[bytes | None, bytes | None, int]]:
    return [(b"k%d" % i, b"v" * 50, ts + i) for i in range(n)]


def roundtrip(data):
    return json.loads(json.dumps(data))


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """A generated partition with transactions, rebuilt into an output dir with a small interval."""
    root = tmp_path_factory.mktemp("dump")
    part = root / "logs" / "orders-0"
    logs = generate_partition(part, segments=3, batches_per_segment=80, transactional_producers=3, seed=11)
    result = rebuild_partition(part, index_interval_bytes=700, output_dir=root / "out")
    return part, root / "out" / "orders-0", logs, result


def planned(seg):
    """The full plan (every entry) of one rebuilt segment of ``rebuilt``."""
    return plan_segment_file(seg.task.log_path, seg.task.base_offset, index_interval_bytes=700)[1]


# ------------------------------------------------------------------------------- indexes vs the rebuild
def test_offset_index_dump_equals_the_planned_entries(rebuilt):
    _, out, _, result = rebuilt
    for seg in result.segments:
        dump = dump_file(segment_file(str(out), seg.task.base_offset, ".index"))
        assert dump["kind"] == "offset_index" and dump["base_offset"] == seg.task.base_offset
        plan = planned(seg)
        assert len(plan.offset_offsets) > 10
        assert dump["entries"] == [
            {"offset": o, "position": p}
            for o, p in zip(plan.offset_offsets.tolist(), plan.offset_positions.tolist(), strict=True)
        ]
        assert dump["entry_count"] == len(dump["entries"]) and dump["file_size"] == 8 * dump["entry_count"]
        assert dump["zero_tail_entries"] == 0 and dump["partial_entry_bytes"] == 0 and dump["problems"] == []
        # offsets are absolute: the first indexed batch lies beyond the base
        assert dump["entries"][0]["offset"] > seg.task.base_offset


def test_time_index_dump_equals_the_planned_entries(rebuilt):
    _, out, _, result = rebuilt
    for seg in result.segments:
        dump = dump_file(segment_file(str(out), seg.task.base_offset, ".timeindex"))
        assert dump["kind"] == "time_index"
        plan = planned(seg)
        assert dump["entries"] == [
            {"timestamp": t, "offset": o}
            for t, o in zip(plan.time_timestamps.tolist(), plan.time_offsets.tolist(), strict=True)
        ]
        assert dump["file_size"] == 12 * len(dump["entries"])


def test_txn_index_dump_equals_the_aborted_transactions(rebuilt):
    _, out, _, result = rebuilt
    seen = 0
    for seg in result.segments:
        path = segment_file(str(out), seg.task.base_offset, ".txnindex")
        if not seg.aborted:
            assert not os.path.exists(path)
            continue
        dump = dump_file(path)
        assert dump["kind"] == "transaction_index" and dump["file_size"] == 34 * len(seg.aborted)
        assert [
            AbortedTxn(e["producer_id"], e["first_offset"], e["last_offset"], e["last_stable_offset"])
            for e in dump["entries"]
        ] == seg.aborted
        assert {e["version"] for e in dump["entries"]} == {0}
        seen += len(seg.aborted)
    assert seen >= 2


# ------------------------------------------------------------------------------------------- .log
def test_log_dump_matches_the_generated_segments(rebuilt):
    part, _, logs, _ = rebuilt
    bases = [int(p.name[:20]) for p in logs]
    for i, path in enumerate(logs):
        dump = dump_file(path)
        batches = dump["batches"]
        assert dump["kind"] == "log" and dump["base_offset"] == bases[i]
        assert dump["batch_count"] == len(batches) == 80
        assert batches[0]["base_offset"] == bases[i] and batches[0]["position"] == 0
        if i + 1 < len(bases):  # contiguous offsets across segments
            assert batches[-1]["last_offset"] + 1 == bases[i + 1]
        for a, b in itertools.pairwise(batches):
            assert b["position"] == a["position"] + a["size"]
            assert b["base_offset"] == a["last_offset"] + 1
        assert all(b["count"] == b["last_offset"] - b["base_offset"] + 1 for b in batches)
        assert batches[-1]["position"] + batches[-1]["size"] == dump["file_size"] == path.stat().st_size
        assert dump["end"] == {
            "stop": "end",
            "problem": None,
            "fatal": None,
            "valid_bytes": path.stat().st_size,
            "invalid_bytes": 0,
        }
        markers = [b for b in batches if b["is_control"]]
        assert markers and all(b["marker"] in ("ABORT", "COMMIT") and b["is_transactional"] for b in markers)
        assert all(b["producer_id"] in (1000, 1001, 1002) for b in batches if b["is_transactional"])
        assert all(b["marker"] is None for b in batches if not b["is_control"])


def test_log_dump_fields_of_hand_encoded_batches(tmp_path):
    batches = [
        encode_batch_v2(0, records(3, 1_700_000_000_000)),
        encode_batch_v2(3, records(2, 1_700_000_000_100), compression=1, log_append_time=True),
        encode_batch_v2(5, records(4, 1_700_000_000_200), producer_id=77, producer_epoch=3, transactional=True),
        encode_control_batch(9, 77, 3, abort=True, timestamp=1_700_000_000_300),
        encode_batch_v2(10, records(1, 1_700_000_000_400), producer_id=78, producer_epoch=0, transactional=True),
        encode_control_batch(11, 78, 0, abort=False, timestamp=1_700_000_000_500),
    ]
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(batches))
    dump = dump_file(log)
    got = dump["batches"]
    sizes = [len(b) for b in batches]
    assert [b["position"] for b in got] == [sum(sizes[:i]) for i in range(6)]
    assert [b["size"] for b in got] == sizes
    assert [(b["base_offset"], b["last_offset"], b["count"]) for b in got] == [
        (0, 2, 3),
        (3, 4, 2),
        (5, 8, 4),
        (9, 9, 1),
        (10, 10, 1),
        (11, 11, 1),
    ]
    assert [b["compression"] for b in got] == ["none", "gzip", "none", "none", "none", "none"]
    assert [b["timestamp_type"] for b in got] == ["CreateTime", "LogAppendTime"] + ["CreateTime"] * 4
    assert [b["max_timestamp"] for b in got] == [
        1_700_000_000_002,
        1_700_000_000_101,
        1_700_000_000_203,
        1_700_000_000_300,
        1_700_000_000_400,
        1_700_000_000_500,
    ]
    assert [b["producer_id"] for b in got] == [-1, -1, 77, 77, 78, 78]
    assert [b["producer_epoch"] for b in got] == [-1, -1, 3, 3, 0, 0]
    assert [b["is_transactional"] for b in got] == [False, False, True, True, True, True]
    assert [b["is_control"] for b in got] == [False, False, False, True, False, True]
    assert [b["marker"] for b in got] == [None, None, None, "ABORT", None, "COMMIT"]
    assert {b["magic"] for b in got} == {2}

    lines = list(format_dump(dump))
    assert lines[0] == f"Dumping {log}"
    assert lines[1] == "Log starting offset: 0"
    crc = struct.unpack_from(">I", batches[0], 17)[0]
    assert lines[2] == (  # kafka-dump-log.sh's line, field for field
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 1700000000002 size: {sizes[0]} magic: 2 compresscodec: none crc: {crc} isvalid: true"
    )
    assert "LogAppendTime: 1700000000101" in lines[3] and "compresscodec: gzip" in lines[3]
    assert lines[5].endswith("isvalid: true")  # the marker's type is in its record's line, as in Kafka's dump
    assert lines[-1] == f"End of walk: end; 6 batches, valid bytes {sum(sizes)}, invalid bytes 0"


def test_legacy_entries(tmp_path):
    entries = [
        encode_legacy(0, b"a", magic=0),
        encode_legacy(1, b"bb", magic=1, timestamp=1234),
        encode_legacy(2, b"c", magic=1, timestamp=1300),
    ]
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(entries))
    got = dump_file(log)["batches"]
    assert [(b["magic"], b["base_offset"], b["last_offset"], b["count"]) for b in got] == [
        (0, 0, 0, None),
        (1, 1, 1, None),
        (1, 2, 2, None),
    ]
    assert [b["timestamp_type"] for b in got] == ["NoTimestampType", "CreateTime", "CreateTime"]
    assert [b["max_timestamp"] for b in got] == [-1, 1234, 1300]
    assert [b["producer_id"] for b in got] == [-1, -1, -1]
    line = list(format_dump(dump_file(log)))[2]
    assert "count:" not in line and "NoTimestampType: -1" in line and "magic: 0" in line


def test_corrupt_and_short_tails_are_reported(tmp_path):
    batches = [encode_batch_v2(i * 2, records(2, 5000 + i)) for i in range(10)]
    whole = b"".join(batches)
    bad_at = sum(len(b) for b in batches[:6])
    data = bytearray(whole)
    data[bad_at + 70] ^= 0xFF
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(data))
    dump = dump_file(log)
    # kafka-dump-log.sh's walk: every batch its size frames, the corrupt one invalid (test_dump_parity holds it)
    assert dump["batch_count"] == 10 and [b["base_offset"] for b in dump["batches"]] == list(range(0, 20, 2))
    assert [b["is_valid"] for b in dump["batches"]] == [True] * 6 + [False] + [True] * 3
    end = dump["end"]
    assert end["stop"] == "corrupt_batch" and end["valid_bytes"] == bad_at
    assert end["invalid_bytes"] == len(whole) - bad_at
    assert end["problem"]["kind"] == "crc_mismatch" and end["problem"]["position"] == bad_at
    assert end["problem"]["batch_index"] == 6 and end["problem"]["base_offset"] == 12
    assert [p["kind"] for p in dump["problems"]] == ["crc_mismatch"]
    text = list(format_dump(dump))
    assert text[-2].startswith("End of walk: corrupt_batch; 6 batches") and "truncates" in text[-2]
    assert text[-2].endswith(
        f"; 4 more shown past it, as kafka-dump-log.sh walks on (1 failing their CRC), to end at byte {len(whole)}"
    )
    assert text[-1].startswith(f"Problem: crc_mismatch at position {bad_at} (batch 6, base offset 12)")

    log.write_bytes(whole + b"\x00" * 10)  # 10 bytes: below the 17-byte header, never parsed
    dump = dump_file(log)
    assert dump["end"]["stop"] == "short_tail" and dump["end"]["problem"] is None
    assert dump["end"]["invalid_bytes"] == 10 and dump["problems"][0]["position"] == len(whole)

    log.write_bytes(whole[:-5])
    dump = dump_file(log)
    assert dump["end"]["stop"] == "incomplete_batch" and dump["batch_count"] == 9
    assert dump["problems"][0]["kind"] == "truncated_batch"


def test_empty_log(tmp_path):
    log = tmp_path / "00000000000000000042.log"
    log.write_bytes(b"")
    dump = dump_file(log)
    assert dump["base_offset"] == 42 and dump["batches"] == [] and dump["problems"] == []
    assert list(format_dump(dump))[-1] == "End of walk: end; 0 batches, valid bytes 0, invalid bytes 0"


# ------------------------------------------------------------------------------- index file shapes
def test_untrimmed_zero_tail_is_counted_not_listed(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=80)
    index.append(105, 0)
    index.append(110, 4096)
    index.flush()
    index.close_handler()  # no trim: a preallocated active-segment file
    dump = dump_file(path)
    assert dump["entries"] == [{"offset": 105, "position": 0}, {"offset": 110, "position": 4096}]
    assert dump["zero_tail_entries"] == 8 and dump["file_size"] == 80 and dump["problems"] == []
    lines = list(format_dump(dump))
    assert lines[2:] == [
        "offset: 105 position: 0",
        "offset: 110 position: 4096",
        "8 zero-filled slots follow (an untrimmed preallocated tail; not shown)",
    ]

    tpath = tmp_path / "00000000000000000100.timeindex"
    times = TimeIndex(tpath, 100, max_index_size=120)
    times.maybe_append(1000, 105)
    times.flush()
    times.close_handler()
    dump = dump_file(tpath)
    assert dump["entries"] == [{"timestamp": 1000, "offset": 105}] and dump["zero_tail_entries"] == 9


def test_all_zero_index_shows_slot_zero_like_kafka(tmp_path):
    path = tmp_path / "00000000000000000007.index"
    path.write_bytes(b"\x00" * 32)
    dump = dump_file(path)
    assert dump["entries"] == [{"offset": 7, "position": 0}] and dump["zero_tail_entries"] == 3


def test_partial_trailing_entry_is_a_problem(tmp_path):
    path = tmp_path / "00000000000000000010.index"
    path.write_bytes(struct.pack(">iiii", 3, 100, 9, 200) + b"abc")
    dump = dump_file(path)
    assert dump["entries"] == [{"offset": 13, "position": 100}, {"offset": 19, "position": 200}]
    assert dump["partial_entry_bytes"] == 3 and dump["file_size"] == 19
    assert dump["problems"] == [{"kind": "partial_entry", "position": 16, "detail": dump["problems"][0]["detail"]}]
    assert "3 trailing bytes" in dump["problems"][0]["detail"]
    assert list(format_dump(dump))[-1].startswith("Problem: partial_entry at byte 16: 3 trailing bytes")


def test_empty_index_says_so(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(b"")
    dump = dump_file(path)
    assert dump["entries"] == [] and dump["problems"] == []
    assert list(format_dump(dump))[-1] == f"{path} is empty."


def test_txn_index_bad_version_and_partial_record(tmp_path):
    path = tmp_path / "00000000000000000050.txnindex"
    good = struct.pack(">hqqqq", 0, 7, 51, 60, 51)
    bad = struct.pack(">hqqqq", 256, 8, 52, 70, 52)
    path.write_bytes(good + bad + b"\x01\x02")
    dump = dump_file(path)
    assert [e["version"] for e in dump["entries"]] == [0, 256]
    assert dump["entries"][1] == {
        "version": 256,
        "producer_id": 8,
        "first_offset": 52,
        "last_offset": 70,
        "last_stable_offset": 52,
    }
    assert [(p["kind"], p["position"]) for p in dump["problems"]] == [("bad_version", 34), ("partial_entry", 68)]
    lines = list(format_dump(dump))
    assert lines[2] == "version: 0 producerId: 7 firstOffset: 51 lastOffset: 60 lastStableOffset: 51"


def test_written_txn_index(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    with TransactionIndex(path, 0) as index:
        index.append(AbortedTxn(5, 1, 9, 1))
        index.append(AbortedTxn(6, 3, 12, 2))
    assert dump_file(path)["entries"] == [
        {"version": 0, "producer_id": 5, "first_offset": 1, "last_offset": 9, "last_stable_offset": 1},
        {"version": 0, "producer_id": 6, "first_offset": 3, "last_offset": 12, "last_stable_offset": 2},
    ]


# --------------------------------------------------------------------------------------- JSON, text
def test_json_round_trips_and_streamed_forms_agree(rebuilt):
    part, out, logs, result = rebuilt
    seg = result.segments[1]
    paths = [logs[1]] + [segment_file(str(out), seg.task.base_offset, s) for s in (".index", ".timeindex", ".txnindex")]
    for path in paths:
        dump = dump_file(path)
        assert roundtrip(dump) == dump
        streamed = read_dump(path)
        assert isinstance(streamed, FileDump)
        assert json.loads("".join(iter_json(streamed))) == dump
        assert json.loads("".join(iter_json(dump))) == dump
        assert list(format_dump(streamed)) == list(format_dump(dump)) == list(format_dump(roundtrip(dump)))
        assert isinstance(format_dump(streamed), Iterator)


def test_rows_are_produced_in_chunks(tmp_path, monkeypatch):
    import indexlib.cli.dump.model as dump_module

    monkeypatch.setattr(dump_module, "_ROW_CHUNK", 7)
    path = tmp_path / "00000000000000000000.index"
    with OffsetIndex(path, 0, max_index_size=8 * 50) as index:
        index.append_many(np.arange(1, 51), np.arange(0, 5000, 100))
    rows = list(read_dump(path).rows())
    assert rows == [{"offset": i + 1, "position": i * 100} for i in range(50)]


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "name",
    [
        "foo.index",
        "0000000000000000000.index",
        "00000000000000000000.snapshot.deleted",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000000.index.deleted",
        "00000000000000000000",
        "x00000000000000000000.log",
    ],
)
def test_bad_names_raise_value_error_naming_the_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x00" * 24)
    with pytest.raises(ValueError, match="not a Kafka segment file name") as info:
        dump_file(path)
    assert str(path) in str(info.value)


def test_parse_segment_file_name():
    assert parse_segment_file_name("/a/b/00000000000000012345.timeindex") == (12345, ".timeindex")
    with pytest.raises(ValueError):
        parse_segment_file_name("00000000000000012345.TIMEINDEX")


def test_missing_and_directory(tmp_path):
    missing = tmp_path / "00000000000000000000.txnindex"  # the class treats a missing file as empty
    with pytest.raises(FileNotFoundError) as info:
        dump_file(missing)
    assert str(missing) in str(info.value)
    directory = tmp_path / "00000000000000000000.log"
    directory.mkdir()
    with pytest.raises(OSError) as info:
        dump_file(directory)
    assert str(directory) in str(info.value)


@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".txnindex", ".log"])
def test_fifo_does_not_hang(tmp_path, suffix):
    fifo = tmp_path / f"00000000000000000000{suffix}"
    os.mkfifo(fifo)
    outcome: list[BaseException | object] = []

    def run():
        try:
            outcome.append(dump_file(fifo))
        except BaseException as exc:  # noqa: BLE001 - the assertion below inspects it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "dump_file hung on a FIFO"
    assert isinstance(outcome[0], ValueError) and str(fifo) in str(outcome[0])


@pytest.fixture
def shared_dir():
    """A directory another user can enter (pytest's tmp_path is private to its owner)."""
    directory = tempfile.mkdtemp(prefix="indexlib-dump-")
    os.chmod(directory, 0o755)
    yield pathlib.Path(directory)
    shutil.rmtree(directory)


def test_read_only_files_dump_and_unreadable_files_fail(shared_dir):
    tmp_path = shared_dir
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 5, 100))
    os.chmod(path, 0o444)  # nobody can read it but not write it
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(encode_batch_v2(0, records(2, 1)))
    os.chmod(log, 0o000)
    result = run_as_unprivileged(lambda: {"dump": dump_file(path)})
    assert result == {"dump": dump_file(path)}
    result = run_as_unprivileged(lambda: {"dump": dump_file(log)})
    assert result["error"].startswith("PermissionError") and str(log) in result["error"]


# ---------------------------------------------------------------------------------- real Kafka files
def manifest_files():
    if not KAFKA_REAL.is_dir():
        return []
    found = []
    for manifest in sorted(KAFKA_REAL.glob("*/MANIFEST.json")):
        for name, info in json.loads(manifest.read_text()).items():
            if os.path.splitext(name)[1] in (".log", ".index", ".timeindex", ".txnindex"):
                found.append((manifest.parent / name, info))
    return found


@requires_kafka_real
def test_every_real_file_dumps_as_its_manifest_says():
    files = manifest_files()
    assert len(files) > 150
    for path, info in files:
        dump = dump_file(path)
        assert dump["file_size"] == info["size"], path
        assert dump["problems"] == [], path
        if dump["kind"] != "log":
            assert dump["entry_count"] == info["entries"] and dump["zero_tail_entries"] == 0, path
            continue
        batches = dump["batches"]
        counts = collections.Counter()
        for b in batches:
            counts[f"magic{b['magic']}"] += 1
            counts[f"codec_{b['compression']}"] += 1
            counts["transactional"] += b["is_transactional"]
            counts["control"] += b["is_control"]
            counts["log_append_time"] += b["timestamp_type"] == "LogAppendTime"
            counts["records"] += b["count"] or 0
        expected = info["batches"]
        assert {k: v for k, v in counts.items() if v} == {k: v for k, v in expected.items() if v}, path
        if batches:
            assert batches[0]["base_offset"] == info["first_offset"], path
            assert batches[-1]["last_offset"] == info["last_offset"], path
        assert dump["end"]["invalid_bytes"] == 0, path


@requires_kafka_real
def test_real_transaction_files_text():
    part = KAFKA_REAL / "local-apache-kafka-4.1.0" / "txn-0"
    lines = list(format_dump(read_dump(part / "00000000000000000011.txnindex")))
    assert lines[1] == "Transaction index, base offset 11, 884 bytes, 26 entries" and len(lines) == 2 + 26
    log_lines = list(format_dump(read_dump(part / "00000000000000000011.log", DumpOptions(deep_iteration=True))))
    assert sum(line.startswith("| ") and "endTxnMarker: ABORT coordinatorEpoch: " in line for line in log_lines) == 26
    out = io.StringIO()
    for chunk in iter_json(read_dump(part / "00000000000000000011.index")):
        out.write(chunk)
    assert len(json.loads(out.getvalue())["entries"]) == 90
