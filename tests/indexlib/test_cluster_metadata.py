"""The cluster's state from KRaft's metadata (indexlib.format.cluster_metadata, indexlib.storage.cluster_metadata_files):
a real broker's metadata log against the partition dirs beside it, and the replay's rules on metadata logs and
snapshots written here (indexlib.testing.message_encoder)."""

from __future__ import annotations

import base64
import contextlib
import os
import uuid
from pathlib import Path

import pytest

from indexlib.format.layout import parse_partition_dir_name
from indexlib.format.leader_epoch_checkpoint import parse_leader_epoch_checkpoint
from indexlib.format.message_schema import Message
from indexlib.format.metadata_records import read_metadata_record
from indexlib.format.record_fields import FieldReader
from indexlib.storage.cluster_metadata_files import (
    CLUSTER_METADATA_DIR,
    ClusterMetadataError,
    find_cluster_metadata,
    read_cluster_metadata,
)
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch
from indexlib.testing.message_encoder import encode_message, encode_metadata_record

from ..conftest import KAFKA_REAL, requires_kafka_real

TOPIC, PARTITION, CONFIG, CHANGE, REMOVE, FEATURE, BEGIN, END, ABORT = 2, 3, 4, 5, 9, 12, 23, 24, 25
TS = 1_700_000_000_000


def topic_id(seed: int) -> str:
    return base64.urlsafe_b64encode(uuid.UUID(int=seed + 1).bytes).decode().rstrip("=")


def topic(name: str, seed: int) -> bytes:
    return encode_metadata_record(TOPIC, {"name": name, "topicId": topic_id(seed)})


def partition(seed: int, p: int, leader: int = 1, epoch: int = 0) -> bytes:
    data = {"partitionId": p, "topicId": topic_id(seed), "replicas": [1], "isr": [1], "leader": leader}
    return encode_metadata_record(PARTITION, {**data, "leaderEpoch": epoch, "partitionEpoch": 0}, 0)


def config(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    data = {"resourceType": resource_type, "resourceName": resource, "name": name, "value": value}
    return encode_metadata_record(CONFIG, data)


def change(seed: int, p: int, leader: int) -> bytes:
    return encode_metadata_record(CHANGE, {"partitionId": p, "topicId": topic_id(seed), "leader": leader})


def write_log(path: Path, batches: list[list[bytes]], base: int = 0) -> int:
    """A metadata log segment of one batch per list of record values; the offset after its last record."""
    out, offset = b"", base
    for values in batches:
        out += encode_batch_v2(offset, [(None, v, TS) for v in values])
        offset += len(values)
    path.write_bytes(out)
    return offset


@pytest.fixture
def metadata_dir(tmp_path) -> Path:
    d = tmp_path / "logs" / CLUSTER_METADATA_DIR
    d.mkdir(parents=True)
    return d


@requires_kafka_real
def test_a_real_brokers_metadata_name_every_topic_id_and_leader_epoch_beside_it():
    """The broker of the fixture set: every partition dir's ``partition.metadata`` topic id is the metadata's for
    that name, no ``leader-epoch-checkpoint`` entry is above the metadata's leader epoch, the topic configs of
    ``kafka-topics.sh --config`` are there, and nothing was skipped."""
    log_dir = KAFKA_REAL / "local-apache-kafka-4.1.0"
    state = read_cluster_metadata(find_cluster_metadata([str(log_dir)]) or "")
    assert state.end_offset == 418 and state.records == 418 - 3 and not state.skipped and state.snapshot == 0  # 3 KRaft
    assert state.features["metadata.version"] == 27
    assert state.topic_configs["compacted"]["cleanup.policy"] == "compact"
    assert state.broker_defaults(1) == {"min.insync.replicas": "1"}
    checked = 0
    for d in sorted(log_dir.iterdir()):
        parsed = parse_partition_dir_name(d.name)
        if parsed is None or d.name == CLUSTER_METADATA_DIR:
            continue
        name, p = parsed
        assert (d / "partition.metadata").read_text().split("topic_id: ")[1].strip() == state.topic_ids[name]
        path = d / "leader-epoch-checkpoint"
        epochs = parse_leader_epoch_checkpoint(path.read_text(), str(path))
        assert all(e.epoch <= (state.leader_epoch(name, p) or 0) for e in epochs)
        checked += 1
    assert checked == 17


def test_the_replay_follows_kafkas_rules(metadata_dir):
    """Topics, partitions and their leader epochs, configs (a null value deletes; a broker's own over the
    cluster-wide default), a deleted topic re-created under the same name (a new id, its old configs gone)."""
    end = write_log(
        metadata_dir / "00000000000000000000.log",
        [
            [topic("orders", 1), partition(1, 0), partition(1, 1, epoch=3)],
            [config(2, "orders", "index.interval.bytes", "1024"), config(2, "orders", "segment.bytes", "1000")],
            [config(4, "", "log.index.interval.bytes", "2048"), config(4, "7", "log.index.interval.bytes", "512")],
            [change(1, 0, -2), change(1, 1, 1), change(1, 1, -1)],  # no change; a new leader; none: each +1
            [config(2, "orders", "segment.bytes", None)],
            [topic("gone", 2), partition(2, 0), config(2, "gone", "index.interval.bytes", "64")],
            [encode_metadata_record(REMOVE, {"topicId": topic_id(2)}), topic("gone", 3), partition(3, 0, epoch=0)],
        ],
    )
    state = read_cluster_metadata(str(metadata_dir))
    assert state.end_offset == end == 17 and state.records == 17 and not state.skipped
    assert state.topic_ids == {"orders": topic_id(1), "gone": topic_id(3)}
    assert [state.leader_epoch("orders", p) for p in (0, 1, 2)] == [0, 5, None]
    assert state.topic_configs == {"orders": {"index.interval.bytes": "1024"}}
    assert state.broker_defaults(7) == {"log.index.interval.bytes": "512"}
    assert state.broker_defaults(8) == state.broker_defaults(None) == {"log.index.interval.bytes": "2048"}


def test_metadata_transactions_apply_at_their_end_only(metadata_dir):
    begin = encode_metadata_record(BEGIN, {"name": "t"})
    write_log(
        metadata_dir / "00000000000000000000.log",
        [
            [begin, topic("kept", 1), encode_metadata_record(END, {})],
            [begin, topic("aborted", 2), encode_metadata_record(ABORT, {"reason": "x"})],
            [begin, topic("open", 3)],  # the log ends inside it
        ],
    )
    state = read_cluster_metadata(str(metadata_dir))
    assert state.topic_ids == {"kept": topic_id(1)}
    assert state.skipped == {"aborted metadata transaction": 1, "metadata transaction open at the end of the log": 1}


def test_a_snapshot_then_the_log_after_it(metadata_dir):
    """The latest snapshot holds every record below its end offset; the log's records from there on are replayed,
    a segment wholly below it is not read, and control batches (header, footer) are passed over."""
    header = encode_control_batch(0, -1, -1, abort=False, timestamp=TS)  # a control batch: no metadata record
    snapshot = header + encode_batch_v2(1, [(None, v, TS) for v in (topic("a", 1), partition(1, 0, epoch=4))])
    (metadata_dir / "00000000000000000003-0000000002.checkpoint").write_bytes(snapshot)
    (metadata_dir / "00000000000000000000-0000000001.checkpoint").write_bytes(b"garbage, never read: older")
    (metadata_dir / "00000000000000000000.log").write_bytes(b"\x00" * 100)  # wholly below the snapshot
    write_log(
        metadata_dir / "00000000000000000002.log",
        [[topic("old", 9), change(1, 0, 1)], [change(1, 0, 1), topic("b", 2)]],
        base=2,
    )
    state = read_cluster_metadata(str(metadata_dir))
    assert state.snapshot == 3 and state.end_offset == 6
    assert state.topic_ids == {"a": topic_id(1), "b": topic_id(2)}  # "old", at offset 2: below the snapshot's end
    assert state.leader_epoch("a", 0) == 6  # 4 in the snapshot, then the changes at offsets 3 and 4


def test_a_torn_tail_and_records_that_do_not_read(metadata_dir):
    """A killed broker's torn last batch ends the replay at the last whole one; an unknown record type or a
    record with garbage after it is counted and skipped, the others applied."""
    log = metadata_dir / "00000000000000000000.log"
    unknown = b"\x01" + b"\x63" + b"\x00" + b"\x00"  # frame 1, type 99
    write_log(log, [[topic("a", 1), unknown, topic("b", 2) + b"!!"], [topic("c", 3)], [topic("torn", 4)]])
    log.write_bytes(log.read_bytes()[:-7])
    state = read_cluster_metadata(str(metadata_dir))
    assert state.topic_ids == {"a": topic_id(1), "c": topic_id(3)}
    assert state.skipped == {"Unknown metadata id 99": 1, "Found 2 byte(s) of garbage after 2": 1}
    assert state.end_offset == 4


def test_an_unreadable_metadata_dir_is_one_line_naming_it(tmp_path):
    with pytest.raises(ClusterMetadataError, match=f"{tmp_path / 'nope'}: cannot list the cluster metadata"):
        read_cluster_metadata(str(tmp_path / "nope"))
    assert find_cluster_metadata([str(tmp_path)]) is None


def test_the_encoder_is_the_readers_inverse():
    """What tests write is what Kafka's reader reads: every field type of the metadata records, tagged ones too."""
    record = {
        "partitionId": 3,
        "topicId": topic_id(5),
        "isr": [1, 2],
        "leader": 2,
        "directories": [topic_id(6)],
        "eligibleLeaderReplicas": [3],
    }
    read = read_metadata_record(encode_metadata_record(CHANGE, record, 2))
    assert read.version == 2 and {k: read.data[k] for k in record} == record
    assert read.data["replicas"] is None and read.data["leaderRecoveryState"] == -1  # tagged, not written: defaults
    schema = Message("M", (0, 0), None, ())
    assert encode_message(schema, {}, 0) == b"" and schema.read(FieldReader(b""), 0) == {}
    assert os.path.basename(CLUSTER_METADATA_DIR) == "__cluster_metadata-0"


# ------------------------------------------------------------------------------------ settings from the metadata
KRAFT_META = "version=1\nnode.id={node}\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\ndirectory.id=XE2M0goTkGhQgA2Kte9nsA\n"


def broker_log_dir(root: Path, node: int = 7) -> Path:
    """A broker's log dir: meta.properties of ``node``, topics ``orders`` (3 partitions... one here), ``audit`` and
    ``plain`` with one segment each, and metadata that set: orders' index.interval.bytes 1024, the cluster-wide
    log.index.interval.bytes 2048 and broker 7's log.index.size.max.bytes 65536, audit's segment.index.bytes 4096."""
    from indexlib.testing.generate import generate_partition

    logs = root / "logs"
    (logs / CLUSTER_METADATA_DIR).mkdir(parents=True)
    (logs / "meta.properties").write_text(KRAFT_META.format(node=node))
    for i, name in enumerate(("orders", "audit", "plain")):
        generate_partition(logs / f"{name}-0", segments=1, batches_per_segment=40, seed=i)
    write_log(
        logs / CLUSTER_METADATA_DIR / "00000000000000000000.log",
        [
            [topic("orders", 1), topic("audit", 2), topic("plain", 3)],
            [config(2, "orders", "index.interval.bytes", "1024"), config(2, "audit", "segment.index.bytes", "4096")],
            [config(4, "", "log.index.interval.bytes", "2048"), config(4, "7", "log.index.size.max.bytes", "65536")],
            [config(4, "8", "log.index.size.max.bytes", "8192")],  # another broker's: not this one's
        ],
    )
    return logs


def run_json(*argv: str) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", *argv, "--json", "-"], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_the_settings_layers_and_where_each_value_came_from(tmp_path):
    """command line > --topic-config > the topic's config in the metadata > this broker's dynamic default > the
    cluster-wide one > server.properties > Kafka's; the rebuilt segments use them, and --json names each layer,
    the same on both command lines."""
    logs = broker_log_dir(tmp_path)
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={logs}\nlog.index.interval.bytes=512\nlog.index.size.max.bytes=100000\n")
    topics = tmp_path / "topics.json"
    topics.write_text('{"audit": {"index.interval.bytes": 256}}')
    common = ["--server-properties", str(props), "--topic-config", str(topics)]
    for argv in (
        ["indexlib", "verify", *common],
        ["jobs.cli", "verify", "--engine", "local", "--audit-table", "none", *common],
    ):
        report = run_json(*argv)
        got = report["settings"]
        used = {(s["topic"], s["index_interval_bytes"], s["segment_index_bytes"]) for s in report["segments"]}
        assert used == {
            (t, v["index_interval_bytes"]["value"], v["segment_index_bytes"]["value"]) for t, v in got["topics"].items()
        }
        assert got["cluster_metadata"]["dir"] == str(logs / CLUSTER_METADATA_DIR)
        assert got["cluster_metadata"]["broker_id"] == 7
        values = {t: {n: v["value"] for n, v in s.items()} for t, s in got["topics"].items()}
        assert values == {
            "__cluster_metadata": {"index_interval_bytes": 4096, "segment_index_bytes": 10485760},  # Kafka's alone
            "orders": {"index_interval_bytes": 1024, "segment_index_bytes": 65536},
            "audit": {"index_interval_bytes": 256, "segment_index_bytes": 4096},
            "plain": {"index_interval_bytes": 2048, "segment_index_bytes": 65536},
        }, argv
        sources = got["topics"]["plain"]
        assert sources["index_interval_bytes"]["source"].startswith("the cluster-wide dynamic default")
        assert sources["segment_index_bytes"]["source"].startswith("broker 7's dynamic config")
        assert got["topics"]["orders"]["index_interval_bytes"]["source"].startswith("the topic's config in the")
        assert got["topics"]["audit"]["index_interval_bytes"]["source"] == f"--topic-config {topics}"
    got = run_json("indexlib", "verify", *common, "--index-interval-bytes", "128")["settings"]["topics"]["plain"]
    assert got["index_interval_bytes"] == {"value": 128, "source": "the command line"}
    none = run_json("indexlib", "verify", *common, "--cluster-metadata", "none")["settings"]
    assert none["cluster_metadata"] is None
    assert none["topics"]["plain"]["index_interval_bytes"] == {"value": 512, "source": f"--server-properties {props}"}


def test_the_metadata_is_found_beside_a_partition_dir_or_where_server_properties_put_it(tmp_path):
    logs = broker_log_dir(tmp_path)
    got = run_json("indexlib", "verify", str(logs / "orders-0"))["settings"]
    assert got["topics"]["orders"]["index_interval_bytes"]["value"] == 1024
    elsewhere = tmp_path / "metadata"
    elsewhere.mkdir()
    (logs / CLUSTER_METADATA_DIR).rename(elsewhere / CLUSTER_METADATA_DIR)
    assert run_json("indexlib", "verify", str(logs))["settings"]["cluster_metadata"] is None  # none found
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={logs}\nmetadata.log.dir={elsewhere}\n")
    got = run_json("indexlib", "verify", "--server-properties", str(props))["settings"]
    assert got["cluster_metadata"]["dir"] == str(elsewhere / CLUSTER_METADATA_DIR)
    assert got["cluster_metadata"]["broker_id"] is None  # no meta.properties beside it: the cluster-wide layer only
    assert got["topics"]["plain"]["index_interval_bytes"]["value"] == 2048
    assert got["topics"]["plain"]["segment_index_bytes"]["value"] == 10485760
    got = run_json("indexlib", "verify", str(logs), "--cluster-metadata", str(elsewhere))["settings"]
    assert got["topics"]["orders"]["index_interval_bytes"]["value"] == 1024


def test_a_bad_cluster_metadata_option_is_one_line_exit_2(tmp_path):
    import subprocess
    import sys

    logs = broker_log_dir(tmp_path)
    for argv in (
        ["indexlib", "verify", str(logs)],
        ["jobs.cli", "verify", "--log-dir", str(logs), "--engine", "local"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", *argv, "--cluster-metadata", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
        assert f"{tmp_path}: --cluster-metadata: no KRaft metadata (__cluster_metadata-0) there" in done.stderr


def test_partition_dirs_checked_against_the_metadata(tmp_path):
    """A partition.metadata naming another topic id (the topic was deleted and re-created), a leader epoch above
    the partition's current one, a partition the metadata do not know: each a finding of verify, on both command
    lines; the dirs that agree with the metadata, none."""
    from indexlib.testing.generate import generate_partition

    logs = broker_log_dir(tmp_path)
    for name, seed in (("orders", 9), ("audit", 2), ("plain", 3)):
        (logs / f"{name}-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id(seed)}\n")
    (logs / "audit-0" / "leader-epoch-checkpoint").write_text("0\n1\n9 0\n")
    (logs / "plain-0" / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    generate_partition(logs / "ghost-0", segments=1, batches_per_segment=5, seed=4)
    with open(logs / CLUSTER_METADATA_DIR / "00000000000000000000.log", "ab") as f:  # the partitions of the topics
        f.write(encode_batch_v2(8, [(None, partition(s, 0), TS) for s in (1, 2, 3)]))
    for argv in (["indexlib", "verify", str(logs)], ["jobs.cli", "verify", "--log-dir", str(logs), "--engine", "local",
                                                      "--audit-table", "none"]):  # fmt: skip
        report = run_json(*argv)
        assert report["exit_code"] == 1
        found = {
            (f["kind"], os.path.relpath(f["file"], logs))
            for fs in report["partition_findings"].values()
            for f in fs
            if f["kind"] in ("topic_id_mismatch", "leader_epoch_above_metadata", "partition_unknown_to_metadata")
        }
        assert found == {
            ("topic_id_mismatch", "orders-0"),
            ("leader_epoch_above_metadata", "audit-0/leader-epoch-checkpoint"),
            ("partition_unknown_to_metadata", "ghost-0"),
        }, argv
        remaining = {f["kind"] for f in report["remaining_findings"]}
        assert {"topic_id_mismatch", "leader_epoch_above_metadata"} <= remaining
        assert "partition_unknown_to_metadata" not in remaining  # info
    none = run_json("indexlib", "verify", str(logs), "--cluster-metadata", "none")
    kinds = {f["kind"] for fs in none["partition_findings"].values() for f in fs}
    assert not kinds & {"topic_id_mismatch", "leader_epoch_above_metadata", "partition_unknown_to_metadata"}


#: ``kafka-configs.sh --bootstrap-server ... --describe --all --entity-type topics`` of Kafka 4.1.0 (trimmed to a
#: few lines of each topic), and a line of its output without ``--all``
DESCRIBE_ALL = """All configs for topic plain are:
  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}
  index.interval.bytes=4096 sensitive=false synonyms={DEFAULT_CONFIG:log.index.interval.bytes=4096}
  segment.index.bytes=10485760 sensitive=false synonyms={DEFAULT_CONFIG:log.index.size.max.bytes=10485760}
All configs for topic orders.v2 are:
  index.interval.bytes=1024 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:index.interval.bytes=1024, DEFAULT_CONFIG:log.index.interval.bytes=4096}
  message.timestamp.type=CreateTime sensitive=false synonyms={DEFAULT_CONFIG:log.message.timestamp.type=CreateTime}
  segment.index.bytes=65536 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.index.bytes=65536, DEFAULT_CONFIG:log.index.size.max.bytes=10485760}
Dynamic configs for topic audit are:
  index.interval.bytes=512 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:index.interval.bytes=512, DEFAULT_CONFIG:log.index.interval.bytes=4096}
"""


def test_a_zookeeper_era_brokers_topic_configs_from_kafka_configs_describe(tmp_path):
    """Item 5: ``--topic-config`` takes the output of ``kafka-configs.sh --describe [--all] --entity-type topics``
    as it is, on both command lines; a line that is not of it is one line naming the file and the line."""
    from indexlib.cli import SettingsFileError, read_topic_config

    described = tmp_path / "topics.txt"
    described.write_text(DESCRIBE_ALL)
    assert read_topic_config(described) == {
        "plain": {"index_interval_bytes": 4096, "segment_index_bytes": 10485760},
        "orders.v2": {"index_interval_bytes": 1024, "segment_index_bytes": 65536},
        "audit": {"index_interval_bytes": 512},
    }
    from indexlib.testing.generate import generate_partition

    logs = tmp_path / "logs"
    generate_partition(logs / "orders.v2-0", segments=1, batches_per_segment=5, seed=1)
    for argv in (["indexlib", "verify", str(logs)], ["jobs.cli", "verify", "--log-dir", str(logs), "--engine", "local",
                                                      "--audit-table", "none"]):  # fmt: skip
        got = run_json(*argv, "--topic-config", str(described))["settings"]["topics"]["orders.v2"]
        assert got["index_interval_bytes"] == {"value": 1024, "source": f"--topic-config {described}"}
    described.write_text(DESCRIBE_ALL + "  broken line\n")
    with pytest.raises(SettingsFileError, match=rf"{described}: line 11: not a line of kafka-configs.sh --describe"):
        read_topic_config(described)


# ------------------------------------------------------------------------------------ bad metadata (a fault trial's)
def run_cli(*argv: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=300)


def both_command_lines(logs: Path, *more: str) -> list[tuple[str, ...]]:
    return [
        ("indexlib", "verify", str(logs), *more),
        ("jobs.cli", "verify", "--log-dir", str(logs), "--engine", "local", "--audit-table", "none", *more),
    ]


@requires_kafka_real
def test_mutated_metadata_records_are_invalid_records_never_a_crash():
    """Every record of the real metadata log, each byte of it flipped, cut or grown in turn: reading it gives a
    record or an InvalidRecordError, and the dump's decoder a line, never another exception."""
    import random

    from indexlib.format.batch_walk import scan_log
    from indexlib.format.errors import InvalidRecordError
    from indexlib.format.metadata_records import decode_metadata_record
    from indexlib.format.record_decoding import batch_records

    log = KAFKA_REAL / "local-apache-kafka-4.1.0" / CLUSTER_METADATA_DIR / "00000000000000000000.log"
    data = log.read_bytes()
    scan = scan_log(log)
    values = [
        r.value
        for i in range(scan.batch_count)
        if not int(scan.attributes[i]) & 0x20
        for r in batch_records(data[int(scan.positions[i]) : int(scan.positions[i] + scan.sizes[i])])
        if r.value
    ]
    rng = random.Random(3)
    tried = 0
    for value in values:
        for _ in range(12):
            mutated = bytearray(value)
            at = rng.randrange(len(mutated))
            choice = rng.randrange(3)
            if choice == 0:
                mutated[at] = rng.randrange(256)
            elif choice == 1:
                del mutated[at:]
            else:
                mutated[at:at] = rng.randbytes(rng.randint(1, 4))
            with contextlib.suppress(InvalidRecordError):
                read_metadata_record(bytes(mutated))
            assert decode_metadata_record(None, bytes(mutated), 1)[1] is not None
            tried += 1
    assert tried > 4000
    with pytest.raises(InvalidRecordError, match="bytes declared"):
        read_metadata_record(bytes.fromhex("011700010012"))  # a tag longer than the record (it was an IndexError)


def test_a_damaged_latest_snapshot_is_one_line_exit_2(tmp_path):
    logs = broker_log_dir(tmp_path)
    snapshot = logs / CLUSTER_METADATA_DIR / "00000000000000000009-0000000001.checkpoint"
    for content in (
        b"",
        b"\x00" * 100 + b"garbage",
        (logs / CLUSTER_METADATA_DIR / "00000000000000000000.log").read_bytes()[:-9],
    ):
        snapshot.write_bytes(content)
        for argv in both_command_lines(logs):
            done = run_cli(*argv)
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
            assert f"{snapshot}: the latest KRaft snapshot" in done.stderr and "--cluster-metadata none" in done.stderr
        assert run_cli(*both_command_lines(logs, "--cluster-metadata", "none")[0]).returncode in (0, 1)


def test_a_corrupt_batch_inside_the_metadata_log_is_said_where_the_replay_stopped(tmp_path):
    logs = broker_log_dir(tmp_path)
    log = logs / CLUSTER_METADATA_DIR / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    got = run_json("indexlib", "verify", str(logs))["settings"]["cluster_metadata"]
    assert got["stopped"].startswith(f"{log}: crc_mismatch at byte ") and "not read" in got["stopped"]
    out = run_cli("indexlib", "verify", str(logs)).stdout
    assert "it stopped early: " in out.splitlines()[0]


def test_an_invalid_value_refuses_only_a_run_that_uses_it(tmp_path):
    """A topic's config of the metadata that is no valid setting (Java's int rules: no ``_``) stops a run of that
    topic with one line, exit 2; a run of other topics, or one whose --topic-config replaces it, goes on."""
    logs = broker_log_dir(tmp_path)
    with open(logs / CLUSTER_METADATA_DIR / "00000000000000000000.log", "ab") as f:
        f.write(encode_batch_v2(8, [(None, config(2, "audit", "index.interval.bytes", "1_000"), TS)]))
    for argv in both_command_lines(logs, "--topics", "audit"):
        done = run_cli(*argv)
        assert (
            done.returncode == 2 and "topic 'audit' index.interval.bytes must be an integer, got '1_000'" in done.stderr
        )
    assert run_cli("indexlib", "verify", str(logs), "--topics", "plain").returncode in (0, 1)
    fixed = tmp_path / "topics.json"
    fixed.write_text('{"audit": {"index.interval.bytes": 2048}}')
    assert run_cli("indexlib", "verify", str(logs), "--topic-config", str(fixed)).returncode in (0, 1)


def test_bad_metadata_places_are_one_line(tmp_path):
    logs = broker_log_dir(tmp_path)
    for named, why in (("", "--cluster-metadata: an empty path"), (str(tmp_path / "nope"), "no such directory"),
                       (str(logs / "meta.properties"), "not a directory")):  # fmt: skip
        done = run_cli("indexlib", "verify", str(logs), "--cluster-metadata", named)
        assert done.returncode == 2 and why in done.stderr, done.stderr
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={logs}\nmetadata.log.dir={logs / 'meta.properties'}\n")
    done = run_cli("indexlib", "verify", "--server-properties", str(props))
    assert done.returncode == 2 and "metadata.log.dir of --server-properties is not a directory" in done.stderr
    import shutil

    shutil.rmtree(logs / CLUSTER_METADATA_DIR)
    (logs / CLUSTER_METADATA_DIR).write_text("a file")
    for argv in both_command_lines(logs):
        done = run_cli(*argv)
        assert done.returncode == 2 and f"{logs / CLUSTER_METADATA_DIR}: not a directory" in done.stderr


def test_a_batch_that_does_not_decompress_counts_all_its_records(metadata_dir):
    import struct
    import zlib  # noqa: F401  (the batch's payload is gzip; its bytes are damaged, its CRC made right again)

    from indexlib.format.scan_kernel import crc32c_function

    batch = bytearray(encode_batch_v2(0, [(None, topic(f"t{i}", i), TS) for i in range(5)], compression=1))
    batch[-10] ^= 0xFF
    struct.pack_into(">I", batch, 17, crc32c_function()(bytes(batch[21:])))
    (metadata_dir / "00000000000000000000.log").write_bytes(bytes(batch))
    state = read_cluster_metadata(str(metadata_dir))
    assert state.end_offset == 5 and sum(state.skipped.values()) == 5 and state.records == 5


def test_describe_output_with_another_tools_lines_or_yaml_numbers(tmp_path):
    from indexlib.cli import SettingsFileError, read_topic_config

    f = tmp_path / "t.txt"
    f.write_text("SLF4J: Class path contains multiple bindings\n" + DESCRIBE_ALL)
    with pytest.raises(SettingsFileError, match=r"line 1: not a line of kafka-configs.sh --describe"):
        read_topic_config(f)
    f.write_text(DESCRIBE_ALL + DESCRIBE_ALL.splitlines()[0] + "\n")
    with pytest.raises(SettingsFileError, match=r"line 11: topic 'plain' is described twice"):
        read_topic_config(f)
    f.write_text("".join(line + "  \n" for line in DESCRIBE_ALL.splitlines()))  # trailing spaces: fine
    assert read_topic_config(f)["audit"] == {"index_interval_bytes": 512}
    y = tmp_path / "t.yaml"
    y.write_text("0123: {index.interval.bytes: 512}\n")
    with pytest.raises(SettingsFileError, match=r"topic name 83 is not a string \(YAML read it so\): quote it"):
        read_topic_config(y)
