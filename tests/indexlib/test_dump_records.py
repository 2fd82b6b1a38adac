"""indexlib.cli.dump's record view (``--deep-iteration``, ``--print-data-log``, the decoders) against kafka-python's
parser, on every real broker's segment and on batches kafka-python builds; indexlib.format.record_decoding and
compression on their own."""

from __future__ import annotations

import ast
import base64
import collections
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from indexlib.cli.dump import DumpOptions, dump_file, format_dump, read_dump
from indexlib.format import compression
from indexlib.format.coordinator_records import decode_offsets_record
from indexlib.format.record_decoding import batch_records, last_sequence
from indexlib.testing.batch_encoder import encode_batch_v2, encode_legacy

from ..conftest import KAFKA_REAL, PROJECT_ROOT, requires_kafka_real

BASE64_RECORDS = DumpOptions(print_data_log=True, payload_format="base64")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def kafka_python_records(data: bytes) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record kafka-python reads from a segment's bytes."""
    records, batches = [], MemoryRecords(data)
    while (batch := batches.next_batch()) is not None:
        records += [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
    return records


def dumped_records(dump: dict) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every dumped record; a control record (a marker, shown by its
    type, not its bytes) as (offset, timestamp)."""
    return [
        (r["offset"], r["timestamp"]) if b["is_control"] else
        (r["offset"], r["timestamp"], unb64(r["key"]), unb64(r["value"]),
         [(h["key"], unb64(h["value"])) for h in r["headers"]])
        for b in dump["batches"]
        for r in b["records"]
    ]  # fmt: skip


def comparable(records: list[tuple], dump: dict) -> list[tuple]:
    """kafka-python's records in :func:`dumped_records`' shape."""
    control = {r["offset"] for b in dump["batches"] if b["is_control"] for r in b["records"]}
    return [r[:2] if r[0] in control else r for r in records]


# ----------------------------------------------------------------------------------- real brokers
@requires_kafka_real
def test_deep_iteration_equals_kafka_python_on_every_real_segment():
    """Record by record (offset, timestamp, key, value, headers) on every .log of every fixture set, read in place:
    every codec a broker wrote (gzip, snappy, lz4, zstd) is among them."""
    codecs, segments, records = collections.Counter(), 0, 0
    for log in sorted(KAFKA_REAL.glob("*/*/*.log")):
        dump = dump_file(log, BASE64_RECORDS)
        assert dump["problems"] == [], log
        expected = comparable(kafka_python_records(log.read_bytes()), dump)
        assert dumped_records(dump) == expected, log
        codecs.update(b["compression"] for b in dump["batches"])
        segments, records = segments + 1, records + len(expected)
    assert {"none", "gzip", "snappy", "lz4", "zstd"} <= set(codecs), codecs
    assert segments > 50 and records > 100_000


def offset_commit_key(key: bytes) -> tuple[str, str, int]:
    """An OffsetCommitKey read by hand (int16 version, int16-length strings group and topic, int32 partition)."""
    pos, fields = 2, []
    for _ in range(2):
        (n,) = struct.unpack_from(">h", key, pos)
        fields.append(key[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return fields[0], fields[1], struct.unpack_from(">i", key, pos)[0]


@requires_kafka_real
def test_consumer_offsets_decode_to_the_groups_topics_partitions_and_offsets():
    """Every __consumer_offsets record of every set decodes; offset commits name the group, topic, partition and
    offset of the key and value bytes kafka-python reads, and each topic committed is a topic of that set."""
    seen = collections.Counter()
    for log in sorted(KAFKA_REAL.glob("*/__consumer_offsets-*/*.log")):
        dump = dump_file(log, DumpOptions(decoder="offsets"))
        raw = {r[0]: r for r in kafka_python_records(log.read_bytes())}
        for batch in dump["batches"]:
            for r in batch["records"]:
                if batch["is_control"]:
                    assert r["marker"] in ("ABORT", "COMMIT") and "key" not in r
                    continue
                key = json.loads(r["key"])
                _, _, raw_key, raw_value, _ = raw[r["offset"]]
                seen[key["type"]] += 1
                if key["type"] in ("0", "1"):
                    assert tuple(key["data"].values()) == offset_commit_key(raw_key)
                    if raw_value is None:
                        assert r["value"] == "<DELETE>"
                    else:
                        value = json.loads(r["value"])
                        assert value["data"]["offset"] == struct.unpack_from(">q", raw_value, 2)[0]
                else:
                    assert key["type"] == "2" and key["data"]["group"]
                    assert r["value"] == "<DELETE>" or json.loads(r["value"])["data"]["protocolType"] is not None
    assert seen["1"] > 1000 and seen["2"] > 100


@requires_kafka_real
def test_the_local_brokers_offsets_and_transactions_decode_to_what_was_written():
    """The 4.1.0 set: the transactional offset commit of group fixture-group on txn-0, and the transaction log of
    the transactional ids whose producer wrote txn-0 and txn-1."""
    local = KAFKA_REAL / "local-apache-kafka-4.1.0"
    dump = dump_file(local / "__consumer_offsets-1" / f"{0:020d}.log", DumpOptions(decoder="offsets"))
    first = dump["batches"][0]["records"][0]
    assert json.loads(first["key"]) == {"type": "1", "data": {"group": "fixture-group", "topic": "txn", "partition": 0}}
    assert json.loads(first["value"])["data"]["offset"] == 5
    topics = {p.name.rsplit("-", 1)[0] for p in local.iterdir() if p.is_dir()}
    committed = {json.loads(r["key"])["data"]["topic"] for b in dump["batches"] for r in b["records"] if "key" in r}
    assert committed <= topics
    producers = {
        b["producer_id"] for p in ("txn-0", "txn-1") for b in dump_file(local / p / f"{0:020d}.log")["batches"]
    }
    states = []
    for log in sorted(local.glob("__transaction_state-*/*.log")):
        for b in dump_file(log, DumpOptions(decoder="transaction-log"))["batches"]:
            for r in b["records"]:
                key = json.loads(r["key"])
                assert key["type"] == "0" and key["data"]["transactionalId"].startswith("fixture-")
                if r["value"] != "<DELETE>":
                    states.append(json.loads(r["value"])["data"])
    assert {s["producerId"] for s in states} & producers
    assert {s["transactionStatus"] for s in states} >= {4, 5}  # CompleteCommit, CompleteAbort
    assert any(p["topic"].startswith("txn") for s in states for p in s["transactionPartitions"] or [])


# ------------------------------------------------------------------------------ built batches
HEADERS = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=3)
RECORD = st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=40)), HEADERS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(RECORD, min_size=1, max_size=12),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    base_offset=st.integers(0, 2**40),
    base_sequence=st.sampled_from([-1, 0, 7, 2**31 - 3]),
    timestamps=st.lists(st.integers(0, 2**41), min_size=12, max_size=12),
)
def test_v2_records_round_trip_through_kafka_pythons_builder(records, codec, base_offset, base_sequence, timestamps):
    builder = DefaultRecordBatchBuilder(2, codec, False, 9 if base_sequence >= 0 else -1, 0, base_sequence, 1 << 20)
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamps[i], key, value, headers)
    batch = bytes(builder.build())
    batch = struct.pack(">q", base_offset) + batch[8:]  # the offset a broker assigns (not covered by the CRC)
    got = [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in batch_records(batch)]
    assert got == kafka_python_records(batch)
    sequences = [r.sequence for r in batch_records(batch)]
    assert sequences[-1] == last_sequence(base_sequence, len(records) - 1)


@pytest.mark.parametrize(
    "magic, codec",
    # kafka-python writes lz4 of magic 0 only with xxhash installed: test_xxh32_... covers that framing
    [(m, c) for m in (0, 1) for c in (0, 1, 2, 3) if (m, c) != (0, 3)],
)
def test_legacy_messages_equal_kafka_pythons(magic, codec):
    """v0/v1 messages, uncompressed or in a compressed wrapper (v1: relative inner offsets)."""
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(5):
        builder.append(i, 1_600_000_000_000 + i if magic else None, b"k%d" % i if i % 2 else None, b"v" * i)
    data = bytes(builder.build())
    if codec:  # one wrapper: a broker gives it the last inner offset (kafka-python's producer leaves 0)
        data = struct.pack(">q", 4) + data[8:]
    got = []
    pos = 0
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        got += [(r.offset, r.timestamp, r.key, r.value, []) for r in batch_records(data[pos : pos + size])]
        pos += size
    no_timestamp = [(o, -1 if t is None else t, *rest) for o, t, *rest in kafka_python_records(data)]
    assert got == no_timestamp and [r[0] for r in got] == [0, 1, 2, 3, 4]


def test_legacy_entries_show_their_records(tmp_path):
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(encode_legacy(0, b"a", magic=0) + encode_legacy(1, b"bb", magic=1, timestamp=1234))
    dump = dump_file(log, DumpOptions(print_data_log=True))
    assert [b["records"] for b in dump["batches"]] == [
        [{"offset": 0, "timestamp": -1, "key_size": -1, "value_size": 1, "key": None, "value": "a"}],
        [{"offset": 1, "timestamp": 1234, "key_size": -1, "value_size": 2, "key": None, "value": "bb"}],
    ]
    lines = list(format_dump(dump))
    assert lines[3] == "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 1 payload: a"  # no key: none shown


def test_payload_formats_and_the_text_lines(tmp_path):
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(encode_batch_v2(0, [(b"k\xff", b"hello", 5), (None, None, 6)], base_sequence=3, producer_id=4))
    for fmt, key in (("text", "k\ufffd"), ("hex", "6bff"), ("base64", "a/8=")):
        rows = dump_file(log, DumpOptions(print_data_log=True, payload_format=fmt))["batches"][0]["records"]
        assert rows[0]["key"] == key and rows[1]["key"] is None and rows[1]["value"] is None
    lines = list(format_dump(read_dump(log, DumpOptions(print_data_log=True, payload_format="hex"))))
    assert "baseSequence: 3 lastSequence: 4" in lines[2]
    assert (
        lines[3]
        == "| offset: 0 CreateTime: 5 keySize: 2 valueSize: 5 sequence: 3 headerKeys: [] key: 6bff payload: 68656c6c6f"
    )
    assert lines[4].endswith("sequence: 4 headerKeys: []")  # neither key nor value: Kafka's dump shows neither
    plain = list(format_dump(read_dump(log, DumpOptions(deep_iteration=True))))
    assert plain[3] == "| offset: 0 CreateTime: 5 keySize: 2 valueSize: 5 sequence: 3 headerKeys: []"


def test_a_missing_codec_package_is_one_line_naming_it(tmp_path, monkeypatch):
    builder = DefaultRecordBatchBuilder(2, 3, False, -1, -1, -1, 1 << 20)
    builder.append(0, 1, b"k", b"v" * 1000, [])  # compressible: kafka-python keeps it compressed
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(bytes(builder.build()))
    real_import = compression.importlib.import_module

    def no_lz4(name, *args):
        if name.startswith("lz4"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args)

    monkeypatch.setattr(compression.importlib, "import_module", no_lz4)
    dump = dump_file(log, DumpOptions(deep_iteration=True))
    assert dump["batches"][0]["records"] is None
    assert [p["kind"] for p in dump["problems"]] == ["cannot_decompress"]
    assert "lz4 package" in dump["problems"][0]["detail"] and "[decompress]" in dump["problems"][0]["detail"]
    lines = list(format_dump(read_dump(log, DumpOptions(deep_iteration=True))))
    assert sum("lz4 package" in line for line in lines) == 2  # the batch's line, and the problem


def test_a_malformed_record_is_a_problem_not_a_crash(tmp_path):
    import crc32c

    batch = bytearray(encode_batch_v2(0, [(b"k", b"v", 1)]))
    batch[61] = 0x7F  # the record's length varint: far past the batch
    batch[17:21] = struct.pack(">I", crc32c.crc32c(bytes(batch[21:])))
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(bytes(batch))
    dump = dump_file(log, DumpOptions(deep_iteration=True))
    assert dump["batches"][0]["records"] is None and [p["kind"] for p in dump["problems"]] == ["invalid_record"]


def test_max_bytes_reads_only_the_batches_that_end_within(tmp_path):
    batches = [encode_batch_v2(i, [(b"k", b"v" * 30, i)]) for i in range(5)]
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(b"".join(batches))
    limit = len(batches[0]) * 2 + 10
    dump = dump_file(log, DumpOptions(max_bytes=limit))
    assert [b["base_offset"] for b in dump["batches"]] == [0, 1]
    assert dump["end"]["stop"] == "max_bytes" and dump["problems"] == [] and dump["max_bytes"] == limit
    assert dump_file(log, DumpOptions(max_bytes=10**9))["batch_count"] == 5


def test_offsets_decoder_reports_unknown_types_and_tombstones():
    key = struct.pack(">h", 99) + b"rest"
    assert decode_offsets_record(key, None, 7) == ("Unknown record type 99 at offset 7, skipping.", None)
    group_key = struct.pack(">hh", 2, 3) + b"grp"
    assert decode_offsets_record(group_key, None, 1) == ('{"type":"2","data":{"group":"grp"}}', "<DELETE>")
    assert decode_offsets_record(group_key[:-1], b"", 3)[0].startswith("Error at offset 3, skipping.")
    assert decode_offsets_record(None, b"x", 4)[1] is None


# ------------------------------------------------------------------------------------ compression
def test_xxh32_known_values_and_the_lz4_frame_header_checksum():
    assert compression.xxh32(b"") == 0x02CC5D05
    import lz4.frame

    frame = lz4.frame.compress(b"x" * 100)
    end = 6 + (8 if frame[4] & 0x08 else 0)
    assert (compression.xxh32(frame[4:end]) >> 8) & 0xFF == frame[end]
    broken = frame[:end] + bytes([frame[end] ^ 0x5A]) + frame[end + 1 :]  # KAFKA-3160's wrong checksum
    assert compression.decompress(3, broken, magic=0) == b"x" * 100
    with pytest.raises(ValueError, match="cannot decompress lz4"):
        compression.decompress(3, broken, magic=2)


def test_unknown_codec_and_garbage_are_invalid_records():
    with pytest.raises(ValueError, match="unknown compression codec 6"):
        compression.decompress(6, b"")
    for codec in (1, 2, 3, 4):
        with pytest.raises(ValueError):
            compression.decompress(codec, b"\x82SNAPPY\x00garbage-garbage-garbage" if codec == 2 else b"garbage")


def test_indexlib_imports_the_codec_packages_only_when_a_batch_needs_them():
    """The [decompress] extra is optional: no module of indexlib imports snappy, lz4 or zstandard itself (only
    compression.py names them, for importlib, inside a function)."""
    optional = {"snappy", "lz4", "zstandard"}
    for path in sorted((PROJECT_ROOT / "indexlib").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not {n.split(".")[0] for n in names} & optional, path
