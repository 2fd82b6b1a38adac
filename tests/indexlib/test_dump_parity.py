"""``dump`` against Kafka's own ``kafka-dump-log.sh`` (Kafka 4.1.0 in ``../shared``): every line it prints for
every real fixture file (batches, records, payloads, the coordinators' records decoded, KRaft's control records
and snapshots) is the line ``dump`` prints, and a batch whose CRC fails is shown ``isvalid: false`` and walked
past, as Kafka walks past it. ``dump``'s own lines (how the walk ended, problems) are left out of the comparison;
they come after a file's rows.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from indexlib.cli.dump import DumpOptions, dump_file
from indexlib.format.record_fields import java_string

from ..broker.kafka_broker import kafka_home_missing
from ..broker.kafka_dump_log import assert_same_lines, kafka_dump_log, our_dump
from ..conftest import KAFKA_REAL, requires_kafka_real

pytestmark = [
    requires_kafka_real,
    pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or ""),
]


def fixture_logs(pattern: str = "*.log") -> list[Path]:
    return sorted(p for p in KAFKA_REAL.rglob(pattern) if p.is_file())


@pytest.mark.parametrize("options", [(), ("--print-data-log",)], ids=["batches", "records-and-payloads"])
def test_every_real_segment_dumps_as_kafka_dumps_it(options):
    """Batch lines, and each record with its key, payload and header keys (payloads decoded as Java decodes
    UTF-8, binary ones included), on every real fixture ``.log``."""
    assert_same_lines(fixture_logs(), *options)


@pytest.mark.parametrize(
    ("topic", "option"),
    [("__consumer_offsets", "--offsets-decoder"), ("__transaction_state", "--transaction-log-decoder")],
)
def test_coordinator_records_decode_as_kafka_decodes_them(topic, option):
    """Kafka's compact JSON of each key and value: offset commits, classic groups with their members'
    subscriptions and assignments decoded, transactions without the tagged fields left at their defaults."""
    files = fixture_logs(f"{topic}-*/*.log")
    assert len(files) >= 3
    assert_same_lines(files, option)


def test_kraft_control_records_and_snapshots_decode_as_kafka_decodes_them():
    """``LeaderChange``, ``KRaftVersion``, ``KRaftVoters``, ``SnapshotHeader`` and ``SnapshotFooter`` records of
    the metadata log, its snapshot and the bootstrap snapshots, each with Kafka's title line."""
    files = [*fixture_logs("__cluster_metadata-0/*.log"), *fixture_logs("*.checkpoint")]
    files = [f for f in files if not f.name.endswith("offset-checkpoint")]
    assert any(f.name == "bootstrap.checkpoint" for f in files) and any("-" in f.stem for f in files)
    expected = kafka_dump_log(files, "--deep-iteration")
    for title in ("LeaderChange: {", "KRaftVersion {", "KRaftVoters {", "SnapshotHeader {", "SnapshotFooter {"):
        assert any(title in line for line in expected), title
    assert_same_lines(files, "--deep-iteration")


def test_metadata_records_decode_as_kafka_decodes_them():
    """``--cluster-metadata-decoder`` on the metadata log of a real broker and the snapshots beside it: every
    record's type, version and fields as Kafka's converters write them."""
    files = [*fixture_logs("__cluster_metadata-0/*.log"), *fixture_logs("*.checkpoint")]
    files = [f for f in files if not f.name.endswith("offset-checkpoint")]
    expected = kafka_dump_log(files, "--cluster-metadata-decoder")
    kinds = {line.split('payload: {"type":"')[1].split('"')[0] for line in expected if 'payload: {"type":"' in line}
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "FEATURE_LEVEL_RECORD"} <= kinds, kinds
    assert_same_lines(files, "--cluster-metadata-decoder")


def corrupt_crcs(source: Path, target: Path, batches: tuple[int, ...]) -> list[int]:
    """A copy of ``source`` with the stored CRC of the given batches (by index) flipped; their positions."""
    data = bytearray(source.read_bytes())
    positions, pos, i = [], 0, 0
    while pos + 17 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        if i in batches:
            data[pos + 17] ^= 0xFF  # v2: the CRC's first byte (a legacy entry's would be at 12)
            positions.append(pos)
        pos, i = pos + 12 + size, i + 1
    target.write_bytes(bytes(data))
    return positions


def test_a_batch_whose_crc_fails_is_shown_invalid_and_walked_past(tmp_path):
    """Kafka's dump shows every batch its size frames: one whose CRC fails is ``isvalid: false``, with its records,
    and the dump goes on to the end of the file. The walk's own end still says where recovery stops."""
    source = KAFKA_REAL / "local-apache-kafka-4.1.0" / "plain-0" / "00000000000000000000.log"
    log = tmp_path / source.name
    bad = corrupt_crcs(source, log, (2, 6))
    for options in ((), ("--print-data-log",)):
        assert_same_lines([log], *options)
    code, lines = our_dump([log])
    assert code == 1
    shown = dump_file(log)
    assert [b["position"] for b in shown["batches"] if not b["is_valid"]] == bad
    assert shown["batch_count"] == len(dump_file(source)["batches"])
    assert shown["end"]["stop"] == "corrupt_batch" and shown["end"]["valid_bytes"] == bad[0]
    assert shown["end"]["walked_past"] == {
        "batches": shown["batch_count"] - 2,
        "invalid_batches": 2,
        "stop": "end",
        "end": log.stat().st_size,
    }
    assert shown["problems"][0]["kind"] == "crc_mismatch" and shown["problems"][0]["position"] == bad[0]
    deep = dump_file(log, DumpOptions(deep_iteration=True))
    assert all(b["records"] for b in deep["batches"])  # only the CRC is wrong: the records read


def test_the_walk_past_stops_where_sizes_stop_holding(tmp_path):
    """After a CRC failure, a batch whose size field is below 14 ends Kafka's walk (and ours) there."""
    source = KAFKA_REAL / "local-apache-kafka-4.1.0" / "plain-0" / "00000000000000000000.log"
    log = tmp_path / source.name
    bad = corrupt_crcs(source, log, (1,))
    data = bytearray(log.read_bytes())
    third = bad[0] + 12 + struct.unpack_from(">i", data, bad[0] + 8)[0]
    struct.pack_into(">i", data, third + 8, 5)
    log.write_bytes(bytes(data))
    shown = dump_file(log)
    assert [b["is_valid"] for b in shown["batches"]] == [True, False]
    assert shown["end"]["walked_past"]["stop"] == "corrupt_batch" and shown["end"]["walked_past"]["end"] == third


def test_malformed_utf8_is_replaced_as_java_replaces_it(tmp_path):
    """:func:`java_string` against ``new String(bytes, UTF_8)`` of Java itself on random byte strings rich in the
    lead bytes and encoded surrogates where Java's replacement differs from Python's."""
    java = shutil.which("java")
    assert java is not None
    program = tmp_path / "Decode.java"
    program.write_text(
        "import java.io.*; import java.nio.charset.StandardCharsets;\n"
        "public class Decode { public static void main(String[] a) throws Exception {\n"
        "  BufferedReader r = new BufferedReader(new InputStreamReader(System.in)); String line;\n"
        "  StringBuilder out = new StringBuilder();\n"
        "  while ((line = r.readLine()) != null) {\n"
        "    byte[] b = new byte[line.length() / 2];\n"
        "    for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);\n"
        "    String s = new String(b, StandardCharsets.UTF_8);\n"
        '    for (int i = 0; i < s.length(); i++) out.append(String.format("%04x", (int) s.charAt(i)));\n'
        "    out.append('\\n'); }\n"
        "  System.out.print(out); } }\n"
    )
    rng = random.Random(11)
    interesting = [0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
    samples = [
        bytes(rng.choice([rng.randrange(256), rng.choice(interesting)]) for _ in range(rng.randint(1, 10)))
        for _ in range(20000)
    ]
    proc = subprocess.run(
        [java, str(program)], input="\n".join(s.hex() for s in samples) + "\n", capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = proc.stdout.split("\n")[:-1]
    got = [java_string(s).encode("utf-16-be").hex() for s in samples]
    assert got == expected
    assert sum(s.decode("utf-8", errors="replace") != java_string(s) for s in samples) > 100  # it matters


def test_json_keys_and_values_are_kafkas_compact_json():
    """The decoders' strings are Kafka's JSON byte for byte; in ``--json`` they are strings that parse."""
    log = fixture_logs("__transaction_state-*/*.log")[0]
    rows = dump_file(log, DumpOptions(decoder="transaction-log"))["batches"]
    record = next(r for b in rows for r in b["records"] or () if "value" in r)
    assert ": " not in record["key"] and ", " not in record["value"]
    assert "previousProducerId" not in record["value"]  # a tagged field at its default is not written
    assert json.loads(record["value"])["data"]["transactionStatus"] >= 0
