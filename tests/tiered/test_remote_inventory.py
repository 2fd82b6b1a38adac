"""``__remote_log_metadata`` read offline, against Kafka's own decoder of it, and ``remote-inventory``'s
reconciliation of the metadata with the objects the test RSM wrote (a dir in Kafka's layout, moto's S3 in Aiven's),
on a real broker's tiering; faults: an object deleted, a stray object, a torn metadata tail. The replay rules
(orphan updates, refused transitions, partition deletes, unfinished copies and deletes) on records made here."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path

from indexlib.format.remote_log_metadata import (
    RemoteLogReplay,
    aiven_custom_metadata,
    decode_remote_log_metadata,
    describe_record,
)
from indexlib.storage.remote_layout import parse_key, reconcile

from ..broker.kafka_dump_log import assert_same_lines, kafka_dump_log
from ..conftest import PROJECT_ROOT, S3_BUCKET, storage_flags
from .conftest import AIVEN_PREFIX
from .tiered_broker import TieredRun


def metadata_logs(run: TieredRun) -> list[Path]:
    return sorted(p for p in run.log_dir.glob("__remote_log_metadata-*/*.log") if p.stat().st_size)


def inventory(*args: str, env: dict | None = None) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "indexlib", "remote-inventory", *args], capture_output=True, text=True, cwd=PROJECT_ROOT,
        timeout=300, env=env,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


def kafka_job(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "remote-inventory", *args], capture_output=True, text=True,
        cwd=PROJECT_ROOT, timeout=300,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


# ------------------------------------------------------------------------------------------ against Kafka's decoder
def test_dump_decodes_remote_log_metadata_as_kafka_dump_log_does(tiered_kafka, tiered_aiven):
    for run in (tiered_kafka, tiered_aiven):
        files = metadata_logs(run)
        assert files
        assert_same_lines(files, "--remote-log-metadata-decoder")


_FIELD = re.compile(r"(\w+)=(\{[^}]*\}|Optional\[[^\]]*\]|[^,{}]+)")


def kafkas_final_states(run: TieredRun) -> dict[str, dict[str, str]]:
    """Segment id -> its fields as Kafka's decoder prints its records, each record's fields over the last's."""
    out: dict[str, dict[str, str]] = {}
    for line in kafka_dump_log(metadata_logs(run), "--remote-log-metadata-decoder"):
        if "payload: RemoteLogSegmentMetadata" not in line:
            continue
        payload = line.split("payload: ", 1)[1]
        segment_id = re.search(r"RemoteLogSegmentId\{topicIdPartition=\S+, id=([^}]+)\}", payload).group(1)
        fields = dict(_FIELD.findall(payload.split("}, ", 1)[1]))
        out.setdefault(segment_id, {}).update(fields)
    return out


def test_inventory_equals_kafkas_decoder_record_for_record(tiered_kafka, tiered_aiven):
    for run in (tiered_kafka, tiered_aiven):
        code, out, err = inventory("--log-dir", str(run.log_dir), "--json")
        assert code == 0, err
        report = json.loads(out)
        theirs = kafkas_final_states(run)
        ours = {s["segment_id"]: s for segments in report["partitions"].values() for s in segments}
        assert set(ours) == set(theirs) and len(ours) == sum(len(v) for v in run.copied.values())
        for segment_id, k in theirs.items():
            s = ours[segment_id]
            assert (s["start_offset"], s["end_offset"], s["size"]) == (
                int(k["startOffset"]), int(k["endOffset"]), int(k["segmentSizeInBytes"])
            )  # fmt: skip
            assert (s["state"], s["broker_id"], s["max_timestamp_ms"], s["event_timestamp_ms"]) == (
                k["state"], int(k["brokerId"]), int(k["maxTimestampMs"]), int(k["eventTimestampMs"])
            )  # fmt: skip
            assert str(s["txn_index_empty"]).lower() == k["txnIdxEmpty"]
            assert "{" + ", ".join(f"{e}={o}" for e, o in s["leader_epochs"]) + "}" == k["segmentLeaderEpochs"]
        # what the broker's server.log says it copied, by partition and base offset
        copied = {tp: sorted(s["start_offset"] for s in segments) for tp, segments in report["partitions"].items()}
        assert copied == run.copied


# ------------------------------------------------------------------------------------------ reconciliation
def test_a_clean_tiering_reconciles_in_both_layouts(tiered_kafka, tiered_aiven, s3):
    code, out, err = inventory(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", tiered_kafka.remote_uri, "--layout", "kafka"
    )
    assert code == 0, out + err
    assert "0 problems" in out and " 0 other keys" in out
    options, client = s3
    uri = f"s3://{S3_BUCKET}/{AIVEN_PREFIX}"
    code, out, err = kafka_job(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", uri, "--layout", "aiven", "--json", *storage_flags(options)
    )
    assert code == 0, out + err
    report = json.loads(out)
    segments = sum(len(v) for v in report["partitions"].values())
    assert report["problems"] == [] and report["objects"] == 3 * segments
    # Aiven's custom metadata names each segment's keys and what it stored, as the bucket holds them
    sizes = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket=S3_BUCKET, Prefix=AIVEN_PREFIX)["Contents"]}
    for tp, listed in report["partitions"].items():
        for s in listed:
            custom = aiven_custom_metadata(bytes.fromhex(s["custom_metadata"]))
            main = f"{s['topic']}-{s['topic_id']}/{s['partition']}/{s['start_offset']:020d}-{s['segment_id']}"
            assert custom["object_prefix"] == AIVEN_PREFIX and custom["object_key"] == main, tp
            assert custom["remote_size"] == sum(
                sizes[f"{AIVEN_PREFIX}{main}.{x}"] for x in ("log", "indexes", "rsm-manifest")
            )


def test_a_missing_object_and_an_orphan_are_found_in_a_dir(tiered_kafka, tmp_path):
    remote = shutil.copytree(tiered_kafka.remote_uri, tmp_path / "remote")
    keys = sorted(str(p.relative_to(remote)) for p in remote.rglob("*") if p.is_file())
    gone = next(k for k in keys if k.endswith(".timeindex") and "/txn-1-" in k)
    (remote / gone).unlink()
    stray = parse_key("kafka", next(k for k in keys if k.endswith(".log")))
    assert stray is not None
    orphan = Path(stray.key).parent / f"{99999:020d}-AAAAAAAAAAAAAAAAAAAAAA.log"
    (remote / orphan).write_bytes(b"left behind")
    (remote / "notes.txt").write_text("not a segment object")
    code, out, err = inventory(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--json"
    )
    assert code == 1, err
    problems = [(p["kind"], p["detail"]) for p in json.loads(out)["problems"]]
    assert problems == [("remote_object_orphan", str(orphan)), ("remote_object_missing", gone)]
    assert json.loads(out)["foreign_keys"] == 1


def test_a_missing_object_and_an_orphan_are_found_in_a_bucket(tiered_aiven, s3):
    options, client = s3
    source = AIVEN_PREFIX
    target = "tiered-damaged/"
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=S3_BUCKET, Prefix=source)["Contents"]]
    gone = next(k for k in keys if k.endswith(".indexes") and "/1/" in k)
    for key in keys:
        if key != gone:
            client.copy_object(Bucket=S3_BUCKET, Key=target + key[len(source) :], CopySource=f"{S3_BUCKET}/{key}")
    manifest = next(k for k in keys if k.endswith(".rsm-manifest"))
    orphan = manifest[len(source) :].rsplit("/", 1)[0] + f"/{7:020d}-BBBBBBBBBBBBBBBBBBBBBB.rsm-manifest"
    client.put_object(Bucket=S3_BUCKET, Key=target + orphan, Body=b"{}")
    code, out, err = inventory(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{target}", "--layout", "aiven",
        "--json", *storage_flags(options),
    )  # fmt: skip
    assert code == 1, err
    problems = [(p["kind"], p["detail"]) for p in json.loads(out)["problems"]]
    assert problems == [("remote_object_orphan", orphan), ("remote_object_missing", gone[len(source) :])]


def test_a_torn_metadata_tail_is_a_problem_and_the_records_before_it_count(tiered_kafka, tmp_path):
    log_dir = tmp_path / "logs"
    for part in tiered_kafka.log_dir.glob("__remote_log_metadata-*"):
        shutil.copytree(part, log_dir / part.name)
    biggest = max(log_dir.glob("__remote_log_metadata-*/*.log"), key=lambda p: p.stat().st_size)
    size = biggest.stat().st_size
    with open(biggest, "r+b") as f:
        f.truncate(size - 20)
    code, out, err = inventory("--log-dir", str(log_dir), "--json")
    assert code == 1, err
    report = json.loads(out)
    # the cut record was the last segment's COPY_SEGMENT_FINISHED: the metadata now says its copy never finished
    problem, stuck = report["problems"]
    assert problem["kind"] == "remote_metadata_unreadable" and str(biggest) in problem["detail"]
    assert stuck["kind"] == "remote_copy_not_finished"
    assert "the records after it were not read" in problem["detail"]
    assert 0 < report["records"] < sum(1 for _ in kafkas_final_states(tiered_kafka)) * 2


def test_no_metadata_in_the_log_dirs_is_one_line_and_exit_2(tmp_path):
    code, out, err = inventory("--log-dir", str(tmp_path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no __remote_log_metadata-N partition dir" in err and str(tmp_path) in err


# ------------------------------------------------------------------------------------------ the replay's rules
def _segment_id(segment: str, topic: str = "t", partition: int = 0) -> dict:
    return {"topicIdPartition": {"name": topic, "id": "T" * 22, "partition": partition}, "id": segment}


def _added(segment: str, start: int, end: int, state: int = 0) -> tuple[int, dict]:
    return 0, {
        "remoteLogSegmentId": _segment_id(segment), "startOffset": start, "endOffset": end, "brokerId": 1,
        "maxTimestampMs": 5, "eventTimestampMs": 6, "segmentLeaderEpochs": [{"leaderEpoch": 0, "offset": start}],
        "segmentSizeInBytes": 100, "customMetadata": None, "remoteLogSegmentState": state, "txnIndexEmpty": True,
    }  # fmt: skip


def _updated(segment: str, state: int) -> tuple[int, dict]:
    return 1, {
        "remoteLogSegmentId": _segment_id(segment), "brokerId": 2, "eventTimestampMs": 7, "customMetadata": b"x",
        "remoteLogSegmentState": state,
    }  # fmt: skip


def test_the_replay_keeps_each_segments_latest_state_and_refuses_what_kafka_refuses():
    replay = RemoteLogReplay()
    a, b, c, d, e = ("A" * 22, "B" * 22, "C" * 22, "D" * 22, "E" * 22)
    records = [
        _added(a, 0, 9), _updated(a, 1),  # finished
        _added(b, 10, 19), _updated(b, 1), _updated(b, 2),  # delete started, not finished
        _added(c, 20, 29),  # copy started, never finished
        _updated(d, 1),  # an update whose segment was never seen (retained away)
        _added(e, 30, 39), _updated(e, 1), _updated(e, 0),  # FINISHED -> STARTED: Kafka refuses it
        (2, {"topicIdPartition": {"name": "gone", "id": "G" * 22, "partition": 3}, "brokerId": 1,
             "eventTimestampMs": 8, "remotePartitionDeleteState": 0}),
        "a record that does not read",
    ]  # fmt: skip
    for offset, record in enumerate(records):
        replay.apply(0, offset, record)
    state = replay.finish()
    assert {sid: s.state for sid, s in state.segments.items()} == {
        a: "COPY_SEGMENT_FINISHED", b: "DELETE_SEGMENT_STARTED", c: "COPY_SEGMENT_STARTED",
        d: "COPY_SEGMENT_FINISHED", e: "COPY_SEGMENT_FINISHED",
    }  # fmt: skip
    assert state.segments[d].orphan_update and not state.segments[a].orphan_update
    assert (state.segments[a].broker_id, state.segments[a].custom_metadata, state.segments[a].offset) == (2, b"x", 1)
    assert dict(state.refused) == {"COPY_SEGMENT_FINISHED -> COPY_SEGMENT_STARTED": 1}
    assert state.deleted_partitions == {f"{'G' * 22}:gone-3": "DELETE_PARTITION_MARKED"}
    assert state.records == len(records) and dict(state.unreadable) == {"a record that does not read": 1}
    kinds = [(p.kind, p.segment_id) for p in reconcile(state, None, "kafka").problems]
    assert kinds == [
        ("remote_metadata_unreadable", ""), ("remote_delete_not_finished", b), ("remote_copy_not_finished", c)
    ]  # fmt: skip
    # an object of a segment whose delete finished is left over, and a finished one lacking objects is missing
    replay.apply(0, 99, _updated(b, 3))
    listing = {f"kafka-tiered-storage/t-0-{'T' * 22}/{10:020d}-{b}.log": 5}
    found = reconcile(replay.finish(), listing, "kafka")
    assert ("remote_object_after_delete", b) in [(p.kind, p.segment_id) for p in found.problems]
    missing = [p.detail for p in found.problems if p.kind == "remote_object_missing" and p.segment_id == a]
    assert missing == [
        f"kafka-tiered-storage/t-0-{'T' * 22}/{0:020d}-{a}.{suffix}"
        for suffix in ("log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint")
    ]


def _partition_delete(state: int) -> bytes:
    """A RemotePartitionDeleteMetadataRecord's framed value, written by hand (frame 1, type 2, version 0)."""
    topic_id = uuid.UUID(int=7).bytes
    partition = bytes([4]) + b"t-x" + topic_id + struct.pack(">i", 3) + b"\0"  # a struct ends with its tags
    return bytes([1, 2, 0]) + partition + struct.pack(">iqb", 1, 1700000000000, state) + b"\0"


def test_records_no_fixture_holds_print_as_kafkas_objects_do():
    key, value = decode_remote_log_metadata(None, _partition_delete(1), 5)
    assert key is None
    assert value == (
        "RemotePartitionDeleteMetadata{topicPartition=AAAAAAAAAAAAAAAAAAAABw:t-x-3, state=DELETE_PARTITION_STARTED, "
        "eventTimestampMs=1700000000000, brokerId=1}"
    )
    assert decode_remote_log_metadata(None, _partition_delete(9), 5) == (
        None, "Error at 5, skipping. Unknown RemotePartitionDeleteState id: 9"
    )  # fmt: skip
    assert decode_remote_log_metadata(None, None, 6) == (None, "Error at 6, skipping. the record has no value")
    assert decode_remote_log_metadata(None, _partition_delete(1)[:-3], 5)[1].startswith("Error at 5, skipping. ")
    snapshot = {
        "segmentId": "A" * 22, "startOffset": 0, "endOffset": 9, "brokerId": 1, "maxTimestampMs": 5,
        "eventTimestampMs": 6, "segmentLeaderEpochs": [{"leaderEpoch": 2, "offset": 4}, {"leaderEpoch": 1, "offset": 0}],
        "segmentSizeInBytes": 100, "customMetadata": b"abc", "remoteLogSegmentState": 3, "txnIndexEmpty": False,
    }  # fmt: skip
    assert describe_record(3, snapshot) == (
        f"RemoteLogSegmentMetadataSnapshot{{segmentId={'A' * 22}, startOffset=0, endOffset=9, maxTimestampMs=5, "
        "segmentLeaderEpochs={1=0, 2=4}, segmentSizeInBytes=100, customMetadata=Optional[CustomMetadata{3 bytes}], "
        "state=DELETE_SEGMENT_FINISHED, txnIdxEmpty=false}"
    )
    assert aiven_custom_metadata(None) == {}
