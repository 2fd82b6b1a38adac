"""A log dir in object storage (:mod:`indexlib.storage.object_store`), read through the store seam from moto's real
S3 API server on 127.0.0.1: discovery lists what the local disk lists, every segment reads to what the local store
reads (summary, existing indexes, zero tail, sizes), for generated partitions and every real fixture set; and the
faults: an object replaced while it is read, a missing ``.log``, an endpoint where nothing listens."""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.format import scan_kernel
from indexlib.storage.discovery import discover
from indexlib.storage.object_store import CHUNK, ObjectChangedError, ObjectSource, ObjectStoreError
from indexlib.storage.store import LOCAL, StoreSpec, UnknownStoreError, spec_for, store_for
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import audit_writers  # noqa: E402  (moto's server on 127.0.0.1, as the audit benchmarks start it)

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("moto") is None or importlib.util.find_spec("boto3") is None,
        reason="needs moto[server] and boto3 (the spark-test extra) for a real S3 API",
    ),
    pytest.mark.skipif(importlib.util.find_spec("obstore") is None, reason="needs obstore (the object-storage extra)"),
    pytest.mark.skipif(
        scan_kernel.kernel_for(None) is None, reason="object storage is read through the compiled kernel only"
    ),
]

BUCKET = "broker-copies"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's server, a bucket, and a client to put objects with: (storage options, boto3 client)."""
    import boto3

    with audit_writers.moto_server(str(tmp_path_factory.mktemp("moto") / "moto.log")) as endpoint:
        options = audit_writers.s3_options(endpoint)
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        )  # fmt: skip
        client.create_bucket(Bucket=BUCKET)
        yield options, client


def upload(client, root: Path, prefix: str) -> str:
    """Every file under ``root`` as an object under ``prefix``, laid out as on disk; the prefix's URI."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(root)}")
    return f"s3://{BUCKET}/{prefix}"


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
    key = "generated/logs/orders-1/00000000000000000000.log"
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
