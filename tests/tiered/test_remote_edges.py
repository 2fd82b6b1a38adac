"""The edges of the tiered-storage commands, in-process on copies of a real broker's tiering: their text reports;
a broker's ``remote-log-index-cache`` with a good, a stale, a corrupt and an orphan entry (and what is no entry's),
checked and repaired; the index-only checks on objects that are absent or unreadable; an Aiven manifest that is
missing, unreadable, out of order, or whose chunk index disagrees with its ``.log``."""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
from pathlib import Path

import pytest

from indexlib.cli.main import main
from indexlib.format.remote_log_metadata import RemoteSegment
from indexlib.recovery.remote_checks import remote_index_findings
from indexlib.storage.remote_layout import segment_key
from indexlib.storage.remote_log_metadata_files import read_remote_log_metadata
from indexlib.storage.remote_segments import chunk_sizes, read_index_objects
from indexlib.storage.store import LOCAL, store_for

from ..conftest import S3_BUCKET
from .conftest import AIVEN_PREFIX


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def first_segments(run_dir: Path) -> list[RemoteSegment]:
    inventory = read_remote_log_metadata([str(run_dir)])
    return [s for segments in inventory.by_partition().values() for s in segments]


# ------------------------------------------------------------------------------------------ text reports
def test_the_text_reports_name_each_segment_and_each_object(tiered_kafka, tmp_path, capsys):
    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    common = ["--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka"]
    segment = first_segments(tiered_kafka.log_dir)[0]
    index = remote / segment_key("kafka", segment, "index")
    index.write_bytes(index.read_bytes()[:-3])
    code, out, _ = run(capsys, "verify-remote", *common)
    assert code == 1
    assert (
        f"{segment.topic_partition} {segment.start_offset}-{segment.end_offset} {segment.segment_id}: 1 finding" in out
    )
    assert f"  bad_length: {index}: " in out and "with findings, 0 skipped" in out.splitlines()[-1]
    code, out, _ = run(capsys, "rebuild-remote", *common, "--output-uri", str(tmp_path / "staging"))
    assert code == 0
    assert f"{segment.segment_id}: rebuilt" in out and f"  wrote {tmp_path / 'staging'}" in out
    assert out.splitlines()[-1].endswith("1 rebuilt (1 objects under " + str(tmp_path / "staging") + "), 0 not rebuilt")
    code, out, _ = run(capsys, "remote-inventory", *common)
    assert code == 0 and out.splitlines()[-1].endswith("; 0 problems")
    assert f"  {segment.start_offset}-{segment.end_offset} COPY_SEGMENT_FINISHED" in out


def test_a_segment_whose_log_does_not_rebuild_is_reported_not_rebuilt(tiered_kafka, tmp_path, capsys):
    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    segment = first_segments(tiered_kafka.log_dir)[0]
    log = remote / segment_key("kafka", segment, "log")
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF  # a CRC mismatch in the first batch: Kafka's recovery would refuse the segment
    log.write_bytes(bytes(data))
    code, out, _ = run(
        capsys, "rebuild-remote", "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout",
        "kafka", "--output-uri", str(tmp_path / "staging"),
    )  # fmt: skip
    assert code == 1
    assert f"{segment.segment_id}: not rebuilt" in out and "log_crc_mismatch" in out


# ------------------------------------------------------------------------------------------ the index cache
def test_a_cache_with_a_stale_a_corrupt_and_an_orphan_entry_is_checked_and_repaired(tiered_kafka, tmp_path, capsys):
    log_dir = tmp_path / "broker"
    cache = log_dir / "remote-log-index-cache"
    cache.mkdir(parents=True)
    good, stale, corrupt = first_segments(tiered_kafka.log_dir)[:3]
    remote = tiered_kafka.remote_dir
    assert remote is not None
    for segment in (good, stale, corrupt):
        for suffix in ("index", "timeindex"):
            shutil.copyfile(remote / segment_key("kafka", segment, suffix),
                            cache / f"{segment.start_offset}_{segment.segment_id}.{suffix}")  # fmt: skip
        (cache / f"{segment.start_offset}_{segment.segment_id}.txnindex").write_bytes(b"")  # as Kafka caches none
    stale_file = cache / f"{stale.start_offset}_{stale.segment_id}.timeindex"
    stale_file.write_bytes(stale_file.read_bytes()[:-12])
    corrupt_file = cache / f"{corrupt.start_offset}_{corrupt.segment_id}.index"
    corrupt_file.write_bytes(corrupt_file.read_bytes()[:7])
    orphan = cache / f"5_{'Z' * 22}.index"
    orphan.write_bytes(b"")
    (cache / f"{good.start_offset}_{good.segment_id}.index.tmp").write_bytes(b"half fetched")
    (cache / "notes.txt").write_text("not an entry")
    common = ["--cache", str(log_dir), "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote)]
    code, out, _ = run(capsys, "remote-index-cache", *common, "--layout", "kafka")
    assert code == 1
    kinds = {line.split(":", 1)[0] for line in out.splitlines()[:-1]}
    assert kinds == {"remote_cache_stale", "remote_cache_corrupt", "remote_cache_orphan"}
    assert f"remote_cache_stale: {stale_file}" in out and f"remote_cache_corrupt: {corrupt_file}" in out
    assert out.splitlines()[-1] == f"{cache}: 4 cached segments, 2 wrong; 1 other files (notes.txt)"
    code, out, _ = run(capsys, "remote-index-cache", *common, "--layout", "kafka", "--repair", "--json")
    assert code == 0
    report = json.loads(out)
    assert sorted(Path(p).name for p in report["removed"]) == sorted(
        f"{s.start_offset}_{s.segment_id}.{x}" for s in (stale, corrupt) for x in ("index", "timeindex", "txnindex")
    )
    assert orphan.exists() and (cache / f"{good.start_offset}_{good.segment_id}.index").exists()
    code, _, _ = run(capsys, "remote-index-cache", *common, "--layout", "kafka")
    assert code == 0  # the orphan is info: nothing wrong is left


# ------------------------------------------------------------------------------------------ index-only edges
def test_index_only_checks_of_absent_or_unreadable_objects(tiered_kafka):
    segment = next(s for s in first_segments(tiered_kafka.log_dir) if s.topic == "txn" and not s.txn_index_empty)
    remote = tiered_kafka.remote_dir
    assert remote is not None
    objects = read_index_objects(store_for(LOCAL), str(remote), "kafka", segment)
    uris, data = objects.uris, dict(objects.data)
    assert remote_index_findings(segment, uris, data, objects.log_uri, objects.log_size) == []

    def kinds(data, log_size=objects.log_size, seg=segment):  # type: ignore[no-untyped-def]
        return sorted((f.kind, f.file) for f in remote_index_findings(seg, uris, data, objects.log_uri, log_size))

    assert kinds(data, None) == [("remote_object_missing", objects.log_uri)]
    assert kinds(data, segment.size + 1) == [("remote_metadata_mismatch", objects.log_uri)]
    assert kinds({**data, "offset": None}) == [("index_missing", uris["offset"])]
    assert kinds({**data, "producer_snapshot": None}) == [("remote_object_missing", uris["producer_snapshot"])]
    assert kinds({**data, "leader_epoch": None}) == [("remote_object_missing", uris["leader_epoch"])]
    assert kinds({**data, "leader_epoch": b"\xff\xfe"}) == [("bad_leader_epoch_checkpoint", uris["leader_epoch"])]
    assert kinds({**data, "leader_epoch": b"0\n2\n0 0\n"}) == [("bad_leader_epoch_checkpoint", uris["leader_epoch"])]
    inside = f"0\n2\n0 0\n7 {segment.start_offset + 1}\n".encode()  # an epoch starting inside, unknown to the metadata
    assert kinds({**data, "leader_epoch": inside}) == [("remote_metadata_mismatch", uris["leader_epoch"])]
    txn = bytearray(data["transaction"] or b"")
    struct.pack_into(">h", txn, 0, 1)  # a record version Kafka does not know
    assert kinds({**data, "transaction": bytes(txn)}) == [("txn_bad_version", uris["transaction"])]
    empty = dataclasses.replace(segment, txn_index_empty=True)
    assert kinds({**data, "transaction": None}, seg=empty) == []


# ------------------------------------------------------------------------------------------ Aiven manifests
@pytest.fixture
def aiven_copy(tiered_aiven, s3, tmp_path) -> Path:
    """The Aiven layout's objects downloaded into a dir (the same layout, read through the local store)."""
    _, client = s3
    root = tmp_path / "aiven"
    for o in client.list_objects_v2(Bucket=S3_BUCKET, Prefix=AIVEN_PREFIX)["Contents"]:
        path = root / o["Key"][len(AIVEN_PREFIX) :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(client.get_object(Bucket=S3_BUCKET, Key=o["Key"])["Body"].read())
    return root


def test_aiven_manifests_that_are_missing_unreadable_or_wrong(tiered_aiven, aiven_copy):
    store = store_for(LOCAL)
    segments = first_segments(tiered_aiven.log_dir)
    clean = read_index_objects(store, str(aiven_copy), "aiven", segments[0])
    assert (clean.problems, clean.missing, clean.indexes_read) == ([], [], True)
    manifest = aiven_copy / segment_key("aiven", segments[0], "rsm-manifest")
    original = json.loads(manifest.read_bytes())
    manifest.unlink()
    gone = read_index_objects(store, str(aiven_copy), "aiven", segments[0])
    assert [uri for uri, _ in gone.missing] == [str(manifest)] and not gone.indexes_read
    manifest.write_text("{not json")
    assert (
        "does not read as Aiven's JSON"
        in read_index_objects(store, str(aiven_copy), "aiven", segments[0]).problems[0][1]
    )
    shifted = json.loads(json.dumps(original))
    shifted["segmentIndexes"]["timestamp"]["position"] += 1
    shifted["chunkIndex"]["originalFileSize"] += 1
    manifest.write_text(json.dumps(shifted))
    problems = [why for _, why in read_index_objects(store, str(aiven_copy), "aiven", segments[0]).problems]
    assert any("does not follow the previous one" in why for why in problems)
    assert any("original file size" in why for why in problems)
    indexes = aiven_copy / segment_key("aiven", segments[1], "indexes")
    indexes.unlink()
    assert read_index_objects(store, str(aiven_copy), "aiven", segments[1]).missing[0][0] == str(indexes)
    log = aiven_copy / segment_key("aiven", segments[2], "log")
    log.write_bytes(log.read_bytes()[:-1])
    ((uri, why),) = read_index_objects(store, str(aiven_copy), "aiven", segments[2]).problems
    assert uri == str(log) and "bytes stored, but the manifest's chunk index says" in why


def test_chunk_indexes_of_both_kinds_give_the_sizes():
    fixed = {"type": "fixed", "originalChunkSize": 100, "originalFileSize": 250, "transformedChunkSize": 100,
             "finalTransformedChunkSize": 50}  # fmt: skip
    assert chunk_sizes(fixed) == (250, 250)
    assert chunk_sizes({**fixed, "originalFileSize": 0}) == (0, 0)
