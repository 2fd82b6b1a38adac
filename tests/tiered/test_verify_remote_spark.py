"""``kafka-index verify-remote`` and ``rebuild-remote`` as Spark jobs (local mode, a real session started by the
command): the executors read the bucket themselves and find what the local engine finds, and the run leaves one
audit row per remote segment (its log dir the remote root, its segment id in the key) and one run row in a real
Delta table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import PROJECT_ROOT, S3_BUCKET, storage_flags
from .conftest import AIVEN_PREFIX, copy_prefix

pytest.importorskip("pyspark", reason="the Spark job needs the [spark] extra (make test installs it)")


def kafka_index(*args: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *args, "--json"], capture_output=True, text=True, cwd=PROJECT_ROOT,
        timeout=600,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.startswith("{") else {}, proc.stderr


def test_verify_remote_on_spark_finds_what_the_local_engine_finds_and_audits_each_segment(tiered_aiven, s3, tmp_path):
    from deltalake import DeltaTable

    options, client = s3
    target = "tiered-spark/"
    keys = copy_prefix(client, AIVEN_PREFIX, target)
    manifest_key = next(k for k in keys if k.endswith(".rsm-manifest") and "/txn-" in k)
    manifest = json.loads(client.get_object(Bucket=S3_BUCKET, Key=manifest_key)["Body"].read())
    manifest["segmentIndexes"]["timestamp"]["size"] -= 12
    client.put_object(Bucket=S3_BUCKET, Key=target + manifest_key[len(AIVEN_PREFIX) :], Body=json.dumps(manifest))
    common = [
        "--log-dir", str(tiered_aiven.log_dir), "--remote", f"s3://{S3_BUCKET}/{target}", "--layout", "aiven",
        "--full", *storage_flags(options),
    ]  # fmt: skip
    table = str(tmp_path / "audit")
    code, spark, err = kafka_index("verify-remote", *common, "--audit-table", table)
    assert code == 1, err
    code, local, err = kafka_index("verify-remote", *common, "--engine", "local", "--audit-table", "none")
    assert code == 1, err
    assert spark["outcomes"] == local["outcomes"] and spark["failed"] == 1
    rows = DeltaTable(table).to_pyarrow_table().to_pylist()
    segments = [r for r in rows if r["record_type"] == "remote_segment"]
    (run,) = [r for r in rows if r["record_type"] == "run"]
    assert len(segments) == spark["segments"] == sum(len(v) for v in tiered_aiven.copied.values())
    assert {r["log_dir"] for r in rows} == {f"s3://{S3_BUCKET}/{target}".rstrip("/")}
    assert {r["segment_id"] for r in segments} == {o["segment_id"] for o in spark["outcomes"]}
    (bad,) = [r for r in segments if r["status"] == "findings"]
    assert "remote_manifest_mismatch" in bad["finding_kinds"] and bad["segment_id"] in manifest_key
    assert (run["exit_code"], run["segments"], run["status"]) == (1, len(segments), "findings")


def test_rebuild_remote_on_spark_stages_the_rebuilt_objects(tiered_kafka, tmp_path):
    import shutil
    import struct

    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    (tp_dir,) = (remote / "kafka-tiered-storage").glob("zstd-1-*")
    index = sorted(tp_dir.glob("*.index"))[0]
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, struct.unpack_from(">i", data, 8 + 4)[0])  # the first entry one batch too far
    index.write_bytes(bytes(data))
    staging = tmp_path / "staging"
    code, report, err = kafka_index(
        "rebuild-remote", "--log-dir", str(tiered_kafka.log_dir), "--remote", str(remote), "--layout", "kafka",
        "--output-uri", str(staging), "--audit-table", "none",
    )  # fmt: skip
    assert code == 0 and report["rebuilt"] == 1, err
    (staged,) = [p for p in staging.rglob("*") if p.is_file()]
    assert staged.relative_to(staging) == index.relative_to(remote)
    assert staged.read_bytes() == (tiered_kafka.remote_dir / index.relative_to(remote)).read_bytes()
