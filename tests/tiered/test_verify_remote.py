"""``verify-remote``'s index-only pass on a real broker's tiering, in both layouts: no finding on what the broker
uploaded; each fault injected into a copy of the objects found, named by its object's URI: an offset index torn,
a position past the ``.log``, a time-index timestamp past the segment's largest, a last time-index entry lost, a
producer snapshot's CRC, a wrong leader-epoch blob, a missing ``.timeindex`` and ``.txnindex``, an Aiven manifest
whose ranges disagree with its ``.indexes``, and the transaction-index-empty flag over aborted transactions."""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from indexlib.format.remote_log_metadata import RemoteSegment
from indexlib.recovery.remote_checks import remote_index_findings
from indexlib.storage.remote_log_metadata_files import read_remote_log_metadata

from ..conftest import PROJECT_ROOT, S3_BUCKET, storage_flags
from .conftest import AIVEN_PREFIX, copy_prefix


def remote_command(name: str, *args: str, command: str = "indexlib") -> tuple[int, dict, str]:
    """``name`` (verify-remote, rebuild-remote) of ``python -m indexlib``, or of ``kafka-index`` on its local engine
    with no audit table: (exit code, its JSON report, stderr)."""
    module = ["-m", "indexlib"] if command == "indexlib" else ["-m", "jobs.cli"]
    job = [] if command == "indexlib" else ["--engine", "local", "--audit-table", "none"]
    proc = subprocess.run(
        [sys.executable, *module, name, *args, *job, "--json"], capture_output=True, text=True,
        cwd=PROJECT_ROOT, timeout=300,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {}, proc.stderr


def verify_remote(*args: str, command: str = "indexlib") -> tuple[int, dict, str]:
    return remote_command("verify-remote", *args, command=command)


def rebuild_remote(*args: str, command: str = "indexlib") -> tuple[int, dict, str]:
    return remote_command("rebuild-remote", *args, command=command)


def findings_by_object(report: dict) -> dict[str, set[str]]:
    """Object (URI, relative to the root given) -> the kinds found in it."""
    out: dict[str, set[str]] = {}
    root = report["remote"].rstrip("/") + "/"
    for o in report["outcomes"]:
        for f in o["findings"]:
            out.setdefault(f["file"].removeprefix(root), set()).add(f["kind"])
    return out


def segment_files(root: Path, topic_partition: str) -> dict[int, dict[str, Path]]:
    topic, _, number = topic_partition.rpartition("-")
    (tp_dir,) = (root / "kafka-tiered-storage").glob(f"{topic}-{number}-*")
    out: dict[int, dict[str, Path]] = {}
    for path in tp_dir.iterdir():
        offset, _, rest = path.name.partition("-")
        out.setdefault(int(offset), {})[rest.partition(".")[2]] = path
    return out


def second_segment(root: Path, topic_partition: str) -> dict[str, Path]:
    """The files of a partition's second remote segment (its bases vary from run to run)."""
    files = segment_files(root, topic_partition)
    return files[sorted(files)[1]]


def test_what_the_broker_uploaded_has_no_finding_in_either_layout(tiered_kafka, tiered_aiven, s3):
    code, report, err = verify_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", tiered_kafka.remote_uri, "--layout", "kafka"
    )
    assert code == 0, err
    segments = sum(len(v) for v in tiered_kafka.copied.values())
    assert (report["segments"], report["failed"]) == (segments, 0)
    assert all(o["findings"] == [] and o["skipped"] is None for o in report["outcomes"])
    options, _ = s3
    code, report, err = verify_remote(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{AIVEN_PREFIX}", "--layout", "aiven",
        *storage_flags(options), command="kafka-index",
    )  # fmt: skip
    assert code == 0, err
    assert (report["segments"], report["failed"]) == (sum(len(v) for v in tiered_aiven.copied.values()), 0)
    assert {o["requests"] for o in report["outcomes"]} == {2}  # manifest, .indexes (the .log's size: the listing)


def test_each_fault_in_a_kafka_layout_copy_is_found_in_its_object(tiered_kafka, tmp_path):
    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    plain = segment_files(remote, "plain-0")
    txn = segment_files(remote, "txn-1")
    first, second, third = sorted(plain)[:3]
    damaged: dict[Path, str] = {}
    # an offset index torn (what the broker answered with CorruptIndexException forever)
    index = plain[first]["index"]
    index.write_bytes(index.read_bytes()[:7])
    damaged[index] = "bad_length"
    # a position past the .log
    index = plain[second]["index"]
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, len(data) - 4, 1 << 30)
    index.write_bytes(bytes(data))
    damaged[index] = "position_outside_valid_data"
    # a time-index timestamp past the segment's largest, and a last entry lost
    timeindex = plain[third]["timeindex"]
    data = bytearray(timeindex.read_bytes())
    (ts,) = struct.unpack_from(">q", data, len(data) - 12)
    struct.pack_into(">q", data, len(data) - 12, ts + 10**9)  # the last entry: still increasing
    timeindex.write_bytes(bytes(data))
    damaged[timeindex] = "remote_metadata_mismatch"
    timeindex = plain[first]["timeindex"]
    timeindex.write_bytes(timeindex.read_bytes()[:-12])
    damaged[timeindex] = "time_index_missing_final_entry"
    # a producer snapshot's CRC, a leader-epoch blob naming another epoch
    snapshot = plain[second]["snapshot"]
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    damaged[snapshot] = "bad_producer_snapshot"
    epochs = plain[third]["leader_epoch_checkpoint"]
    epochs.write_text("0\n1\n3 0\n")
    damaged[epochs] = "remote_metadata_mismatch"
    # a .timeindex gone; a .txnindex gone where the metadata says the segment has aborted transactions
    with_txn = next(base for base, files in sorted(txn.items()) if "txnindex" in files)
    txn[with_txn]["timeindex"].unlink()
    damaged[txn[with_txn]["timeindex"]] = "timeindex_missing"
    txn[with_txn]["txnindex"].unlink()
    damaged[txn[with_txn]["txnindex"]] = "remote_object_missing"
    code, report, err = verify_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--jobs", "3"
    )
    assert code == 1, err
    found = findings_by_object(report)
    assert found == {str(p.relative_to(remote)): {k} for p, k in damaged.items()}
    assert report["failed"] == len({(p.parent, p.name.split(".")[0]) for p in damaged})


def test_a_manifest_whose_ranges_disagree_with_its_indexes_is_found(tiered_aiven, s3):
    options, client = s3
    target = "tiered-manifest/"
    keys = copy_prefix(client, AIVEN_PREFIX, target)
    manifest_key = next(k for k in keys if k.endswith(".rsm-manifest") and "/0/" in k)
    manifest = json.loads(client.get_object(Bucket=S3_BUCKET, Key=manifest_key)["Body"].read())
    manifest["segmentIndexes"]["offset"]["size"] += 4  # every range after it is now 4 bytes off
    damaged = target + manifest_key[len(AIVEN_PREFIX) :]
    client.put_object(Bucket=S3_BUCKET, Key=damaged, Body=json.dumps(manifest).encode())
    code, report, err = verify_remote(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{target}", "--layout", "aiven",
        *storage_flags(options),
    )  # fmt: skip
    assert code == 1, err
    found = findings_by_object(report)
    assert found[damaged[len(target) :]] == {"remote_manifest_mismatch"}
    assert report["failed"] == 1


def test_the_txn_index_empty_flag_over_aborted_transactions_is_found(tiered_kafka):
    inventory = read_remote_log_metadata([str(tiered_kafka.log_dir)])
    remote = tiered_kafka.remote_dir
    assert remote is not None
    segment: RemoteSegment = next(s for s in inventory.segments.values() if s.topic == "txn" and not s.txn_index_empty)
    files = segment_files(remote, segment.topic_partition)[segment.start_offset]
    kinds = {"offset": "index", "timestamp": "timeindex", "transaction": "txnindex"}
    kinds.update(producer_snapshot="snapshot", leader_epoch="leader_epoch_checkpoint")
    uris = {k: str(files[suffix]) for k, suffix in kinds.items()}
    data = {k: files[suffix].read_bytes() for k, suffix in kinds.items()}
    log = files["log"]
    assert remote_index_findings(segment, uris, data, str(log), log.stat().st_size) == []
    flagged = dataclasses.replace(segment, txn_index_empty=True)
    (finding,) = remote_index_findings(flagged, uris, data, str(log), log.stat().st_size)
    assert finding.kind == "remote_txn_empty_flag_wrong" and finding.file == uris["transaction"]
    assert finding.found == len(data["transaction"]) // 34 > 0


# ------------------------------------------------------------------------------------------ --full
def test_full_rebuilds_equal_every_remote_index_in_both_layouts(tiered_kafka, tiered_aiven, s3):
    options, _ = s3
    for run, uri, flags in (
        (tiered_kafka, tiered_kafka.remote_uri, []),
        (tiered_aiven, f"s3://{S3_BUCKET}/{AIVEN_PREFIX}", storage_flags(options)),
    ):
        code, report, err = verify_remote(
            "--log-dir", str(run.log_dir), "--remote", uri, "--layout", run.layout, "--full", *flags
        )
        assert code == 0, err
        assert report["mode"] == "full" and report["failed"] == 0
        assert all(o["findings"] == [] for o in report["outcomes"])
        identical = [o["identical"] for o in report["outcomes"]]
        assert all(i[".index"] is True and i[".timeindex"] is True for i in identical), run.layout
        assert all(i[".txnindex"] in (True, None) for i in identical)
        assert sum(i[".txnindex"] is True for i in identical) >= 2  # the transactional topic's aborts


def test_full_finds_an_entry_one_batch_too_far_and_a_lost_aborted_range(tiered_kafka, tmp_path):
    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    # the silent skip: an entry pointing at the next entry's batch (Kafka's sanity check passes it, and a
    # consumer fetching from its offset is handed the later batch)
    index = second_segment(remote, "plain-1")["index"]
    data = bytearray(index.read_bytes())
    (next_position,) = struct.unpack_from(">i", data, 3 * 8 + 4)
    struct.pack_into(">i", data, 2 * 8 + 4, next_position)
    index.write_bytes(bytes(data))
    # a transaction index that lost one aborted range: read_committed consumers would get its records
    txn = segment_files(remote, "txn-0")
    txnindex = next(files["txnindex"] for _, files in sorted(txn.items()) if "txnindex" in files)
    txnindex.write_bytes(txnindex.read_bytes()[34:])
    code, report, err = verify_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--full"
    )
    assert code == 1, err
    found = findings_by_object(report)
    assert set(found) == {str(index.relative_to(remote)), str(txnindex.relative_to(remote))}
    assert {"offset_before_batch", "position_not_increasing"} <= found[str(index.relative_to(remote))]
    assert found[str(txnindex.relative_to(remote))] == {"txn_entry_missing"}
    # the index-only pass finds the first (the entries' own order), never the second (it needs the .log)
    code, report, err = verify_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka"
    )
    assert code == 1, err
    assert set(findings_by_object(report)) == {str(index.relative_to(remote))}


def test_full_finds_a_corrupt_log_chunk_in_the_aiven_layout(tiered_aiven, s3):
    options, client = s3
    target = "tiered-chunk/"
    keys = copy_prefix(client, AIVEN_PREFIX, target)
    log_key = next(k for k in keys if k.endswith(".log") and "/zstd-" not in k and "/0/" in k)
    damaged = target + log_key[len(AIVEN_PREFIX) :]
    data = bytearray(client.get_object(Bucket=S3_BUCKET, Key=damaged)["Body"].read())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # inside a compressed chunk
    client.put_object(Bucket=S3_BUCKET, Key=damaged, Body=bytes(data))
    code, report, err = verify_remote(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{target}", "--layout", "aiven",
        "--full", *storage_flags(options),
    )  # fmt: skip
    assert code == 1, err
    found = findings_by_object(report)
    assert set(found) == {damaged[len(target) :]}
    assert found[damaged[len(target) :]] & {"unreadable_segment", "log_crc_mismatch"}


# ------------------------------------------------------------------------------------------ rebuild-remote
def test_rebuild_remote_stages_the_brokers_own_bytes_for_each_damaged_object_only(tiered_kafka, tmp_path):
    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    index = second_segment(remote, "plain-1")["index"]
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 2 * 8 + 4, struct.unpack_from(">i", data, 3 * 8 + 4)[0])  # one batch too far
    index.write_bytes(bytes(data))
    timeindex = segment_files(remote, "zstd-0")[0]["timeindex"]
    timeindex.write_bytes(timeindex.read_bytes()[:-5])
    output = tmp_path / "staging"
    code, report, err = rebuild_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--output-uri",
        str(output),
    )  # fmt: skip
    assert code == 0, err
    assert (report["rebuilt"], report["not_rebuilt"]) == (2, 0)
    staged = sorted(p for p in output.rglob("*") if p.is_file())
    assert [p.relative_to(output) for p in staged] == sorted(p.relative_to(remote) for p in (index, timeindex))
    for path in staged:  # what the broker uploaded, byte for byte
        assert path.read_bytes() == (tiered_kafka.remote_dir / path.relative_to(output)).read_bytes()
    # the staging prefix is written once, never inside the live objects
    code, _, err = rebuild_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--output-uri",
        str(output),
    )  # fmt: skip
    assert code == 2 and "not empty" in err and err.count("\n") == 1
    code, _, err = rebuild_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--output-uri",
        str(remote / "staging"),
    )  # fmt: skip
    assert code == 2 and "never over live ones" in err


def test_rebuild_remote_writes_a_matching_indexes_and_manifest_in_the_aiven_layout(tiered_aiven, s3):
    options, client = s3
    target, staging = "tiered-rebuild/", "tiered-staging/"
    keys = copy_prefix(client, AIVEN_PREFIX, target)
    indexes_key = next(k for k in keys if k.endswith(".indexes") and "/plain-" in k and "/1/" in k)
    original = client.get_object(Bucket=S3_BUCKET, Key=indexes_key)["Body"].read()
    data = bytearray(original)
    struct.pack_into(">i", data, 2 * 8 + 4, struct.unpack_from(">i", data, 3 * 8 + 4)[0])  # the offset index first
    client.put_object(Bucket=S3_BUCKET, Key=target + indexes_key[len(AIVEN_PREFIX) :], Body=bytes(data))
    code, report, err = rebuild_remote(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{target}", "--layout", "aiven",
        "--output-uri", f"s3://{S3_BUCKET}/{staging}", *storage_flags(options), command="kafka-index",
    )  # fmt: skip
    assert code == 0, err
    assert report["rebuilt"] == 1
    written = {o["Key"][len(staging) :] for o in client.list_objects_v2(Bucket=S3_BUCKET, Prefix=staging)["Contents"]}
    main = indexes_key[len(AIVEN_PREFIX) : -len(".indexes")]
    assert written == {f"{main}.indexes", f"{main}.rsm-manifest"}
    assert client.get_object(Bucket=S3_BUCKET, Key=f"{staging}{main}.indexes")["Body"].read() == original
    ours = json.loads(client.get_object(Bucket=S3_BUCKET, Key=f"{staging}{main}.rsm-manifest")["Body"].read())
    theirs = json.loads(client.get_object(Bucket=S3_BUCKET, Key=f"{AIVEN_PREFIX}{main}.rsm-manifest")["Body"].read())
    assert ours == theirs


def test_full_finds_a_snapshot_kafka_reads_that_disagrees_with_the_segment(tiered_kafka, tmp_path):
    from indexlib.format.producer_snapshot import format_snapshot, parse_snapshot_entries

    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    snapshot = second_segment(remote, "txn-0")["snapshot"]  # the state at its end, what a new replica installs
    entries = parse_snapshot_entries(snapshot.read_bytes(), str(snapshot))
    assert entries
    changed = [dataclasses.replace(e, epoch=e.epoch + 1) for e in entries]
    snapshot.write_bytes(format_snapshot(changed))  # a valid CRC: Kafka's reader takes it
    code, report, err = verify_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka", "--full"
    )
    assert code == 1, err
    assert findings_by_object(report) == {str(snapshot.relative_to(remote)): {"producer_snapshot_mismatch"}}


def test_an_encrypted_aiven_segment_is_reported_not_checked(tiered_aiven, s3):
    options, client = s3
    target = "tiered-encrypted/"
    keys = copy_prefix(client, AIVEN_PREFIX, target)
    manifest_key = next(k for k in keys if k.endswith(".rsm-manifest"))
    manifest = json.loads(client.get_object(Bucket=S3_BUCKET, Key=manifest_key)["Body"].read())
    manifest["encryption"] = {"dataKey": "AAAA", "aad": "AAAA"}
    client.put_object(Bucket=S3_BUCKET, Key=target + manifest_key[len(AIVEN_PREFIX) :], Body=json.dumps(manifest))
    code, report, err = verify_remote(
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{target}", "--layout", "aiven",
        "--full", *storage_flags(options),
    )  # fmt: skip
    assert code == 0, err
    (skipped,) = [o for o in report["outcomes"] if o["skipped"]]
    assert skipped["skipped"].startswith("encrypted, not checked") and skipped["findings"] == []
    assert manifest_key.endswith(f"{skipped['start_offset']:020d}-{skipped['segment_id']}.rsm-manifest")


def test_full_reads_each_object_once_and_asks_for_none_the_listing_lacks(tiered_kafka, s3, moto_log):
    """``--full`` of the Kafka layout in a bucket, as moto served it: one GET for each object that exists and holds
    bytes (a ``.log`` smaller than a read's chunk in one ranged GET), nothing for an absent or empty one (a
    ``.txnindex`` the broker did not upload), no HEAD, one listing a partition, and a segment's base state taken
    from its predecessor's read (``--jobs 1``: in order); the report's request count is the server's."""
    from ..conftest import upload

    options, client = s3
    assert tiered_kafka.remote_dir is not None
    uri = upload(client, tiered_kafka.remote_dir, "full-requests")
    listed = {o["Key"]: o["Size"] for p in client.get_paginator("list_objects_v2").paginate(
        Bucket=S3_BUCKET, Prefix="full-requests/") for o in p.get("Contents", [])}  # fmt: skip
    import audit_writers  # benchmarks/: on the path since the s3 fixture

    since = moto_log.stat().st_size
    code, report, err = verify_remote(
        "--log-dir", str(tiered_kafka.log_dir), "--remote", uri, "--layout", "kafka", "--full", "--jobs", "1",
        *storage_flags(options),
    )  # fmt: skip
    assert code == 0, err
    with open(moto_log, "rb") as f:
        f.seek(since)
        served = audit_writers.REQUEST.findall(f.read())
    fetched = [path for method, path, status in served if method == b"GET" and b"list-type" not in path]
    assert [r for r in served if r[0] != b"GET" or r[2] not in (b"200", b"206")] == []  # no HEAD, no 404
    keys = sorted(p.decode().split("?")[0].removeprefix(f"/{S3_BUCKET}/") for p in fetched)
    assert keys == sorted(k for k, size in listed.items() if size > 0)  # each once: base states were not re-read
    listings = [path for method, path, status in served if b"list-type" in path]
    assert len(listings) == len(tiered_kafka.copied)
    assert sum(o["requests"] for o in report["outcomes"]) == len(fetched)
