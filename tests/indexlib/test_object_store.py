"""A log dir in object storage (:mod:`indexlib.storage.object_store`), read through the store seam from moto's real
S3 API server on 127.0.0.1: discovery lists what the local disk lists, every segment reads to what the local store
reads (summary, existing indexes, zero tail, sizes), for generated partitions and every real fixture set; and the
faults: an object replaced while it is read, a missing ``.log``, an endpoint where nothing listens."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.storage.discovery import discover
from indexlib.storage.object_store import CHUNK, ObjectSource
from indexlib.storage.store import (
    LOCAL,
    ObjectChangedError,
    ObjectStoreError,
    StoreSpec,
    UnknownStoreError,
    spec_for,
    store_for,
)
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, PROJECT_ROOT, S3_BUCKET, needs_object_storage, storage_flags, upload

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import audit_writers  # noqa: E402  (moto's S3 options, as the audit benchmarks give them)

pytestmark = needs_object_storage
BUCKET = S3_BUCKET


@pytest.fixture(scope="module")
def generated(tmp_path_factory, s3):
    """Partitions with transactions, one .index deleted, one .timeindex torn, one .log with a zero tail; uploaded."""
    logs = tmp_path_factory.mktemp("generated") / "logs"
    for p in range(3):
        generate_partition(logs / f"orders-{p}", segments=3, batches_per_segment=120, transactional_producers=1, seed=p)
        rebuild_partition(logs / f"orders-{p}")
    (logs / "orders-1" / "00000000000000000000.index").unlink()
    torn = next((logs / "orders-2").glob("*.timeindex"))
    torn.write_bytes(torn.read_bytes()[:-5])
    with open(sorted((logs / "orders-0").glob("*.log"))[-1], "ab") as f:
        f.write(bytes(3000))
    return logs, upload(s3[1], logs, "generated/logs")


def reads_of(store, log: str, partition_dir: str, base: int) -> dict[str, object]:
    """What a segment's read gave, in plain values (paths reduced to names)."""
    r = store.read_segment(log, partition_dir, base, 4096, read_indexes=True, probe=True)
    s = r.summary
    return {
        "summary": (s.file_size, s.batch_count, s.valid_bytes, s.stop, s.plan_end, s.last_offset, s.raw_max,
                    s.entries.tobytes(), s.events.tobytes(), s.epoch_starts.tobytes(),
                    None if s.producers is None else s.producers.tobytes(),
                    None if s.problem is None else (s.problem.kind, s.problem.position),
                    None if s.fatal is None else (s.fatal.kind, s.fatal.position),
                    s.answers.starts.tolist(), s.answers.bases.tolist()),
        "existing": {k: (v.exists, v.length, v.entries.tobytes(), v.sparse_entries) for k, v in (r.existing or {}).items()},
        "zero_tail": r.zero_tail,
        "sizes": r.index_sizes,
    }  # fmt: skip


def assert_reads_equal(local_root: Path, uri: str, options: dict[str, str]) -> int:
    """Every .log under ``local_root`` reads from ``uri`` exactly as from the local disk; how many were compared."""
    store = store_for(spec_for([uri], options))
    compared = 0
    for log in sorted(local_root.rglob("*.log")):
        relative = log.relative_to(local_root)
        base = int(log.stem)
        local = reads_of(store_for(LOCAL), str(log), str(log.parent), base)
        remote = reads_of(store, f"{uri}/{relative}", f"{uri}/{relative.parent}", base)
        assert remote == local, relative
        compared += 1
    return compared


def test_discovery_lists_what_the_local_disk_lists(generated, s3):
    logs, uri = generated
    remote = discover([uri], store=store_for(spec_for([uri], s3[0])))
    local = discover([str(logs)])
    assert [(p.name, p.topic, p.partition) for p in remote.partitions] == [
        (p.name, p.topic, p.partition) for p in local.partitions
    ]
    for r, here in zip(remote.partitions, local.partitions, strict=True):
        assert [(s.base_offset, s.size, s.active) for s in r.segments] == [
            (s.base_offset, s.size, s.active) for s in here.segments
        ]
        assert r.path == f"{uri}/{here.name}" and r.segments[0].log_path.startswith(uri + "/")


def test_every_generated_segment_reads_as_from_the_local_disk(generated, s3):
    logs, uri = generated
    assert assert_reads_equal(logs, uri, s3[0]) == 9


@pytest.mark.skipif(not KAFKA_REAL.is_dir(), reason="needs ../shared/fixtures/kafka-real (real brokers' segments)")
def test_every_real_fixture_segment_reads_as_from_the_local_disk(s3):
    compared = 0
    for fixture in sorted(p for p in KAFKA_REAL.iterdir() if p.is_dir()):
        compared += assert_reads_equal(fixture, upload(s3[1], fixture, f"real/{fixture.name}"), s3[0])
    assert compared > 20


def test_a_log_object_replaced_while_it_is_read_fails_the_read(generated, s3):
    """The conditional ranged reads name the version the HEAD saw: a new version of the object mid-read is
    ObjectChangedError naming the URI, never a scan of two versions mixed."""
    logs, uri = generated
    options, client = s3
    store = store_for(spec_for([uri], options))
    key = "changing/orders-1/00000000000000000000.log"  # a copy of its own: the other tests read the rest
    client.upload_file(str(logs / "orders-1" / "00000000000000000000.log"), BUCKET, key)
    meta = store.client.head(key)
    assert meta is not None
    source = ObjectSource(store.client, key, meta, chunk=4096)
    try:
        first = memoryview(bytearray(100))
        assert source.pread_into(first, 0) == 100
        changed = bytearray((logs / "orders-1" / "00000000000000000000.log").read_bytes())
        changed[-1] ^= 0xFF  # a new version (the same bytes would be the same version: its ETag is their digest)
        client.put_object(Bucket=BUCKET, Key=key, Body=bytes(changed))
        with pytest.raises(ObjectChangedError, match=rf"s3://{BUCKET}/{key}: the object changed while it was read"):
            source.pread_into(memoryview(bytearray(100)), 3 * 4096)
    finally:
        source.close()


def test_a_missing_log_object_is_an_unreadable_segment(generated, s3):
    _, uri = generated
    store = store_for(spec_for([uri], s3[0]))
    reads = store.read_segment(f"{uri}/orders-9/00000000000000000000.log", f"{uri}/orders-9", 0, 4096, True, True)
    assert reads.summary.fatal is not None and reads.summary.fatal.kind == "unreadable_segment"
    assert reads.existing is not None and not reads.existing[".index"].exists
    assert reads.index_sizes == {".index": None, ".timeindex": None, ".txnindex": None}


def test_an_endpoint_where_nothing_listens_fails_in_one_line_within_seconds():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    options = {**audit_writers.s3_options(f"http://127.0.0.1:{port}")}
    started = time.monotonic()
    with pytest.raises(ObjectStoreError) as error:
        discover([f"s3://{BUCKET}/logs"], store=store_for(spec_for([f"s3://{BUCKET}/logs"], options)))
    assert time.monotonic() - started < 60  # bounded retries
    line = str(error.value)
    assert line.startswith(f"s3://{BUCKET}/logs") and "\n" not in line


def test_the_store_of_paths():
    assert spec_for(["/var/lib/kafka", "/data/kafka"]) == LOCAL
    spec = spec_for(["s3://b/x", "s3://b/y"], {"AWS_REGION": "eu-west-1"})
    assert spec == StoreSpec("s3", "s3://b", (("AWS_REGION", "eu-west-1"),))
    with pytest.raises(UnknownStoreError, match="paths in more than one store"):
        spec_for(["s3://b/x", "/var/lib/kafka"])
    with pytest.raises(UnknownStoreError, match="paths in more than one store"):
        spec_for(["s3://b/x", "s3://c/x"])
    with pytest.raises(UnknownStoreError, match="no store for gopher:// paths"):
        store_for(spec_for(["gopher://b/x"]))
    assert CHUNK >= 1 << 20


# ------------------------------------------------------------------------------------------ the command line
def indexlib_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexlib", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip


def findings_of(report: dict, root: str) -> list[tuple[str, str]]:
    """(kind, path under the log dir) of every finding of a --json report."""
    found = [(f["kind"], f["file"]) for fs in report["partition_findings"].values() for f in fs]
    found += [(f["kind"], f["file"]) for s in report["segments"] for f in s["findings"]]
    return sorted((kind, path.removeprefix(root).lstrip("/")) for kind, path in found)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_verify_from_s3_reports_what_verify_of_the_local_copy_reports(generated, s3, tmp_path, jobs):
    """``python -m indexlib verify s3://...`` (in this process, and in a pool of workers that start clean: a forked
    copy of a process that used the store's client would hang) finds what the local verify finds, file for file."""
    logs, uri = generated
    remote = indexlib_cli("verify", uri, "--jobs", jobs, "--json", str(tmp_path / "s3.json"), *storage_flags(s3[0]))
    local = indexlib_cli("verify", str(logs), "--jobs", jobs, "--json", str(tmp_path / "local.json"))
    assert remote.returncode == local.returncode == 1, remote.stderr
    remote_report = json.loads((tmp_path / "s3.json").read_text())
    local_report = json.loads((tmp_path / "local.json").read_text())
    assert findings_of(remote_report, uri) == findings_of(local_report, str(logs))
    assert {"index_missing", "bad_length", "log_zero_tail"} <= {kind for kind, _ in findings_of(remote_report, uri)}


def test_rebuild_from_s3_into_a_local_dir_equals_the_local_rebuild_byte_for_byte(generated, s3, tmp_path):
    logs, uri = generated
    remote = indexlib_cli("rebuild", uri, "--output-dir", str(tmp_path / "from-s3"), *storage_flags(s3[0]))
    local = indexlib_cli("rebuild", str(logs), "--output-dir", str(tmp_path / "from-disk"))
    assert remote.returncode == local.returncode == 0, remote.stderr
    written = sorted(p.relative_to(tmp_path / "from-s3") for p in (tmp_path / "from-s3").rglob("*") if p.is_file())
    assert written == sorted(
        p.relative_to(tmp_path / "from-disk") for p in (tmp_path / "from-disk").rglob("*") if p.is_file()
    )
    assert len(written) == 27  # 9 segments, 3 index files each
    for name in written:
        assert (tmp_path / "from-s3" / name).read_bytes() == (tmp_path / "from-disk" / name).read_bytes(), name


@pytest.mark.skipif(not KAFKA_REAL.is_dir(), reason="needs ../shared/fixtures/kafka-real (real brokers' segments)")
def test_a_real_brokers_log_dir_from_s3_verifies_and_rebuilds_as_from_the_disk(s3, tmp_path):
    logs = KAFKA_REAL / "local-apache-kafka-4.1.0"
    uri = upload(s3[1], logs, "real-cli/local-apache-kafka-4.1.0")
    remote = indexlib_cli("verify", uri, "--json", str(tmp_path / "s3.json"), *storage_flags(s3[0]))
    local = indexlib_cli("verify", str(logs), "--json", str(tmp_path / "local.json"))
    assert remote.returncode == local.returncode, remote.stderr
    assert findings_of(json.loads((tmp_path / "s3.json").read_text()), uri) == findings_of(
        json.loads((tmp_path / "local.json").read_text()), str(logs)
    )
    rebuilt = indexlib_cli("rebuild", uri, "--output-dir", str(tmp_path / "out"), *storage_flags(s3[0]))
    assert rebuilt.returncode == 0, rebuilt.stderr
    compared = 0
    for path in (tmp_path / "out").rglob("*"):
        expected = logs / path.relative_to(tmp_path / "out")
        if path.suffix in (".index", ".timeindex") and expected.exists():  # Kafka's own files, byte for byte
            assert path.read_bytes() == expected.read_bytes(), path
            compared += 1
    assert compared > 10


@pytest.mark.parametrize(
    "args",
    [["repair"], ["recover"], ["rebuild"]],
    ids=["repair", "recover", "rebuild-in-place"],
)
def test_a_run_that_writes_in_place_is_refused_on_object_storage(generated, s3, args):
    _, uri = generated
    if args[0] == "repair":  # python -m indexlib has no repair: the same check, through the library
        from indexlib.engine import RunOptionError, check_run
        from indexlib.engine.options import RunOptions

        spec = spec_for([uri], s3[0])
        with pytest.raises(RunOptionError, match="never changed in place, so repair cannot run there"):
            check_run(discover([uri], store=store_for(spec)), RunOptions("repair", store=spec))
        return
    done = indexlib_cli(*args, uri, *storage_flags(s3[0]))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"python -m indexlib: error: s3://{BUCKET}: objects in object storage are never changed in place, so "
        f"{args[0]} cannot run there; verify reads it, and rebuild --output-dir DIR_OR_NEW_PREFIX writes the rebuilt "
        "log dir elsewhere"
    ]


def test_storage_options_from_the_environment_and_bad_ones(generated, s3):
    _, uri = generated
    env = {**os.environ, **s3[0]}
    assert indexlib_cli("verify", uri, env=env).returncode == 1  # found (the damage), configured by AWS_* alone
    bad = indexlib_cli("verify", uri, "--storage-option", "AWS_ENDPOINT_URL")
    assert bad.returncode == 2 and "--storage-option: expected KEY=VALUE, got 'AWS_ENDPOINT_URL'" in bad.stderr
    local = indexlib_cli("verify", str(PROJECT_ROOT / "nowhere"), "--storage-option", "AWS_REGION=x")
    assert local.returncode == 2 and "--storage-option is for log dirs in object storage" in local.stderr
    dead = indexlib_cli("verify", uri, *storage_flags({**s3[0], "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}))
    assert dead.returncode == 2 and len(dead.stderr.strip().splitlines()) == 1 and "Traceback" not in dead.stderr


# ------------------------------------------------------------------------------------------------ faults
def test_bad_credentials_are_one_line_naming_the_service_error(tmp_path):
    """moto checking credentials (after its first request, which makes the bucket): keys it does not know are
    refused, and the run says so in one line with S3's own error code, exit 2, no traceback."""
    import boto3

    from ..conftest import moto_server

    with moto_server(str(tmp_path / "moto.log"), {"INITIAL_NO_AUTH_ACTION_COUNT": "2"}) as endpoint:
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        )  # fmt: skip
        client.put_object(Bucket=audit_writers.BUCKET, Key="logs/orders-0/00000000000000000000.log", Body=b"")
        uri = f"s3://{audit_writers.BUCKET}/logs"
        done = indexlib_cli("verify", uri, *storage_flags(audit_writers.s3_options(endpoint)))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"python -m indexlib: error: {uri}/: ") and "403 Forbidden: InvalidAccessKeyId: " in line


def test_an_endpoint_that_never_answers_times_out_in_one_line(tmp_path):
    """A server that accepts connections and never answers: every request times out (``--storage-option
    timeout=1s``), the retries are bounded (3), and the run ends in one line saying it timed out."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:  # closed at the end
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        options = audit_writers.s3_options(f"http://127.0.0.1:{server.getsockname()[1]}")
        started = time.monotonic()
        done = indexlib_cli("verify", f"s3://{BUCKET}/logs", *storage_flags({**options, "timeout": "1s"}))
        elapsed = time.monotonic() - started
    finally:
        server.close()
        for connection in held:
            connection.close()
    assert done.returncode == 2 and elapsed < 30
    (line,) = done.stderr.strip().splitlines()
    assert "after 3 retries" in line and "timed out" in line
    assert len(held) == 4  # the first request and its 3 retries


class _CutShort:
    """The real client (moto's), except that its ranged reads return a byte less than asked: a response cut short,
    which a real server gives only on a broken connection (moto cannot be made to), hence this wrapper."""

    def __init__(self, client) -> None:
        self.client, self.root = client, client.root

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def get_range(self, key: str, start: int, end: int, version: str) -> bytes:
        return self.client.get_range(key, start, end, version)[:-1]


def test_a_ranged_read_cut_short_is_an_error_never_a_torn_tail(generated, s3):
    """Fewer bytes than the range asked (the object's size per its HEAD) would scan as a torn ``.log``: a finding
    of damage that is not there. It is a failed read instead."""
    from indexlib.storage.object_store import ObjectStore

    _, uri = generated
    real = store_for(spec_for([uri], s3[0]))
    store = ObjectStore(real.spec, _CutShort(real.client), real.bucket)
    log = f"{uri}/orders-1/00000000000000000000.log"
    with pytest.raises(ObjectStoreError, match=rf"{log}: a ranged read of bytes 0-\d+ returned \d+ bytes"):
        store.read_segment(log, f"{uri}/orders-1", 0, 4096, True, True)


# ------------------------------------------------------------------------------------------------ dump
@pytest.mark.skipif(not KAFKA_REAL.is_dir(), reason="needs ../shared/fixtures/kafka-real (real brokers' segments)")
def test_dump_of_an_object_prints_what_the_dump_of_the_file_prints(s3, capsys):
    """Every kind of file ``dump`` reads (segment files, a producer snapshot, checkpoints; text, JSON, records up to
    ``--max-bytes``), from a real broker's log dir in the bucket: the same output as the local file's, the URI in
    place of the path. The log dir's own files and the partitions of each kind of log: transactions, compaction,
    compression, the cluster's metadata, a transaction coordinator's (the other partitions add only more of the
    same records)."""
    from indexlib.cli.main import main

    logs = KAFKA_REAL / "local-apache-kafka-4.1.0"
    uri = upload(s3[1], logs, "dump/local-apache-kafka-4.1.0")
    partitions = {"txn-0", "compacted-0", "comp-zstd-0", "__cluster_metadata-0", "__transaction_state-1"}
    chosen = [p for p in sorted(logs.rglob("*")) if p.is_file() and (p.parent == logs or p.parent.name in partitions)]
    kinds = {p.suffix or p.name for p in chosen}
    assert {".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint", "leader-epoch-checkpoint"} <= kinds
    assert {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint"} <= kinds
    compared = 0
    for path in chosen:
        if path.name in ("MANIFEST.json", "meta.properties", "partition.metadata", ".lock") or path.suffix == ".json":
            continue
        remote = f"{uri}/{path.relative_to(logs)}"
        for extra in ([], ["--json"], ["--deep-iteration", "--max-bytes", "5000"] if path.suffix == ".log" else []):
            local_code = main(["dump", str(path), *extra])
            local = capsys.readouterr()
            remote_code = main(["dump", remote, *extra, *storage_flags(s3[0])])
            got = capsys.readouterr()
            assert remote_code == local_code, (remote, got.err)
            assert got.out.replace(remote, "FILE") == local.out.replace(str(path), "FILE"), (remote, extra)
            assert got.err.replace(remote, "FILE") == local.err.replace(str(path), "FILE"), (remote, extra)
            compared += 1
    assert compared > 30


def test_dump_of_objects_refuses_what_it_cannot_do_in_one_line(generated, s3, capsys):
    from indexlib.cli.main import main

    logs, uri = generated
    missing = f"{uri}/orders-1/00000000000000000000.index"  # deleted before the upload
    assert main(["dump", missing, *storage_flags(s3[0])]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"python -m indexlib: error: {missing}: No such object"]
    one = f"{uri}/orders-0/00000000000000000000.index"
    assert main(["dump", "--check", one, *storage_flags(s3[0])]) == 2
    assert "--check reads index files on a local disk" in capsys.readouterr().err
    assert main(["dump", one, str(logs / "orders-0" / "00000000000000000000.index"), *storage_flags(s3[0])]) == 2
    assert "paths in more than one store" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ cluster metadata
def test_the_cluster_metadata_is_read_from_the_copy_in_the_bucket(s3, tmp_path):
    """A broker's log dir with its KRaft metadata (topic configs, dynamic defaults) in the bucket: both command
    lines take each topic's settings from the metadata there, as from the local copy, and name where it is."""
    from .test_cluster_metadata import CLUSTER_METADATA_DIR, broker_log_dir, run_json

    logs = broker_log_dir(tmp_path)
    uri = upload(s3[1], logs, "metadata/logs")
    for argv in (["indexlib", "verify"], ["jobs.cli", "verify", "--engine", "local", "--audit-table", "none"]):
        local = run_json(*argv, *(["--log-dir"] if argv[0] == "jobs.cli" else []), str(logs))["settings"]
        remote = run_json(*argv, *(["--log-dir"] if argv[0] == "jobs.cli" else []), uri, *storage_flags(s3[0]))
        got = remote["settings"]
        assert got["cluster_metadata"]["dir"] == f"{uri}/{CLUSTER_METADATA_DIR}"
        assert got["cluster_metadata"]["broker_id"] == local["cluster_metadata"]["broker_id"] == 7
        assert json.dumps(got["topics"]).replace(uri, "LOGS") == json.dumps(local["topics"]).replace(str(logs), "LOGS")
        assert got["topics"]["orders"]["index_interval_bytes"]["value"] == 1024  # the topic's config in the metadata
        assert {s["index_interval_bytes"] for s in remote["segments"] if s["topic"] == "orders"} == {1024}


def test_a_stale_empty_txnindex_in_the_bucket_is_rebuilt_as_from_the_disk(s3, tmp_path):
    """A segment with a ``.txnindex`` and no aborted transaction: the rebuild writes it empty, as Kafka does, from
    the bucket as from the disk (whether one is there is the map's read of the bucket, not a local lookup)."""
    logs = tmp_path / "logs"
    generate_partition(logs / "plain-0", segments=2, batches_per_segment=30, seed=3)
    rebuild_partition(logs / "plain-0")
    (logs / "plain-0" / "00000000000000000000.txnindex").write_bytes(bytes(40))  # stale: no aborted transaction
    uri = upload(s3[1], logs, "stale-txn/logs")
    remote = indexlib_cli("rebuild", uri, "--output-dir", str(tmp_path / "from-s3"), *storage_flags(s3[0]))
    local = indexlib_cli("rebuild", str(logs), "--output-dir", str(tmp_path / "from-disk"))
    assert remote.returncode == local.returncode == 0, remote.stderr

    def written(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert written(tmp_path / "from-s3") == written(tmp_path / "from-disk")
    assert written(tmp_path / "from-s3")["plain-0/00000000000000000000.txnindex"] == b""


# ------------------------------------------------------------------------------------ writing to object storage
def objects_under(client, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix`` of the bucket, by its key below the prefix."""
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
    return {o["Key"][len(prefix) + 1 :]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("source", ["local", "s3"])
def test_rebuild_into_a_new_prefix_equals_the_local_rebuild(generated, s3, tmp_path, source):
    """``rebuild --output-dir s3://bucket/new-prefix`` from a local log dir and from its copy in the bucket: the
    objects are the local rebuild's files, byte for byte, under the same names, and no staged object is left."""
    logs, uri = generated
    local = indexlib_cli("rebuild", str(logs), "--output-dir", str(tmp_path / "from-disk"))
    out = f"rebuilt-{source}"
    done = indexlib_cli(
        "rebuild", str(logs) if source == "local" else uri, "--output-dir", f"s3://{BUCKET}/{out}", "--jobs", "2",
        *storage_flags(s3[0]),
    )  # fmt: skip
    assert done.returncode == local.returncode == 0, done.stderr
    assert objects_under(s3[1], out) == files_under(tmp_path / "from-disk")
    again = indexlib_cli("rebuild", uri, "--output-dir", f"s3://{BUCKET}/{out}", *storage_flags(s3[0]))
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"python -m indexlib: error: s3://{BUCKET}/{out}: --output-dir in object storage must be a new prefix "
        "(objects are never replaced), and this one holds objects; give another"
    ]
    inside = indexlib_cli("rebuild", uri, "--output-dir", f"{uri}/rebuilt", *storage_flags(s3[0]))
    assert inside.returncode == 2 and f"lies inside the log dir {uri}" in inside.stderr


def test_a_run_stopped_in_its_map_leaves_no_staged_object(generated, s3):
    """The map stages each segment's files as objects under staged names; stopped midway (as a signal stops it,
    before any commit), the run removes every staged object it can find, its own tasks' and a lost attempt's."""
    from indexlib.engine import RunOptions, process_segments
    from indexlib.engine import run as run_engine
    from indexlib.recovery import IndexSettings

    logs, _ = generated
    out = f"s3://{BUCKET}/stopped"
    staged_first: list[str] = []

    def stopped_map(tasks, run_id, arrived=None):
        outcomes = process_segments(tasks[: len(tasks) // 2], f"{run_id}~7")  # a task attempt's staged objects
        staged_first.extend(path for o in outcomes for path in o.staged.values())
        raise KeyboardInterrupt

    options = RunOptions("rebuild", "stopped-run", out, output_store=spec_for([out], s3[0]))
    with pytest.raises(KeyboardInterrupt):
        run_engine(discover([str(logs)]), options, lambda topic: IndexSettings(), stopped_map)
    assert staged_first and all(p.endswith(".stopped-run~7.rebuild.tmp") for p in staged_first)
    assert objects_under(s3[1], "stopped") == {}


def test_sigterm_while_writing_into_a_prefix_leaves_whole_files_and_no_staged_object(s3, tmp_path):
    """SIGTERM once the run's first object is in the prefix: exit 143, one line saying to give a new prefix (a
    prefix is written once), every object there a whole file of the local rebuild, none under a staged name."""
    import signal

    logs = tmp_path / "logs"
    for p in range(8):
        generate_partition(logs / f"orders-{p}", segments=3, batches_per_segment=1500, seed=p)
    assert indexlib_cli("rebuild", str(logs), "--output-dir", str(tmp_path / "local")).returncode == 0
    out = "sigterm"
    run = subprocess.Popen(
        [sys.executable, "-m", "indexlib", "rebuild", str(logs), "--output-dir", f"s3://{BUCKET}/{out}", "--jobs", "2",
         *storage_flags(s3[0])],
        cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not s3[1].list_objects_v2(Bucket=BUCKET, Prefix=out + "/").get("KeyCount") and run.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    run.send_signal(signal.SIGTERM)
    err = run.communicate(timeout=120)[1]
    objects = objects_under(s3[1], out)
    assert not [k for k in objects if k.endswith(".rebuild.tmp")]
    local = files_under(tmp_path / "local")
    assert all(data == local[key] for key, data in objects.items())
    if run.returncode == 0:  # the run ended before the signal came: nothing to say about a stop
        pytest.skip("the rebuild finished before SIGTERM reached it")
    assert run.returncode == 143
    assert err.strip().splitlines() == [
        "python -m indexlib: error: stopped by SIGTERM; the prefix holds whole files of the segments committed before "
        "the stop (run it again into a new prefix)"
    ]


def test_an_object_copied_whole_takes_one_request_a_chunk_and_none_ahead(s3, moto_log):
    """``copy_to`` (a remote ``.log`` for ``verify-remote --full``, a dump's file): the first ranged GET also says
    the object's size and version, so no HEAD goes before it; an object of one chunk is one request, an empty
    one (no range of it is satisfiable) a GET and a HEAD, a larger one a GET a chunk; the bytes are the object's."""
    import io

    options, client = s3
    bodies = {"copy/small": os.urandom(1000), "copy/empty": b"", "copy/large": os.urandom(CHUNK + 5)}
    for key, body in bodies.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
    store = store_for(spec_for([f"s3://{BUCKET}/copy"], options))
    for key, body in bodies.items():
        since = moto_log.stat().st_size
        target = io.BytesIO()
        assert store.copy_to(f"s3://{BUCKET}/{key}", target) == len(body)
        assert target.getvalue() == body
        with open(moto_log, "rb") as f:
            f.seek(since)
            served = [(m.decode(), s.decode()) for m, _, s in audit_writers.REQUEST.findall(f.read())]
        expected = {
            "copy/small": [("GET", "206")],
            "copy/empty": [("GET", "416"), ("HEAD", "200")],
            "copy/large": [("GET", "206"), ("GET", "206")],
        }[key]
        assert served == expected, key
    with pytest.raises(FileNotFoundError):
        store.copy_to(f"s3://{BUCKET}/copy/none", io.BytesIO())
    nothing = io.BytesIO()  # no byte wanted (a dump's limit of 0): the size alone
    assert store.copy_to(f"s3://{BUCKET}/copy/small", nothing, limit=0) == 1000 and nothing.getvalue() == b""
