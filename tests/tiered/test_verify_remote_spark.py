"""``kafka-index verify-remote`` and ``rebuild-remote`` as Spark jobs (local mode, a real session started by the
command): the executors read the bucket themselves and find what the local engine finds, and the run leaves one
audit row per remote segment (its log dir the remote root, its segment id in the key) and one run row in a real
Delta table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import CLUSTER_APP_CONF, PROJECT_ROOT, S3_BUCKET, storage_flags
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
    assert _checked(spark["outcomes"]) == _checked(local["outcomes"]) and spark["failed"] == 1
    rows = DeltaTable(table).to_pyarrow_table().to_pylist()
    segments = [r for r in rows if r["record_type"] == "remote_segment"]
    (run,) = [r for r in rows if r["record_type"] == "run"]
    assert len(segments) == spark["segments"] == sum(len(v) for v in tiered_aiven.copied.values())
    assert {r["log_dir"] for r in rows} == {f"s3://{S3_BUCKET}/{target}".rstrip("/")}
    assert {r["segment_id"] for r in segments} == {o["segment_id"] for o in spark["outcomes"]}
    (bad,) = [r for r in segments if r["status"] == "findings"]
    assert "remote_manifest_mismatch" in bad["finding_kinds"] and bad["segment_id"] in manifest_key
    assert (run["exit_code"], run["segments"], run["status"]) == (1, len(segments), "findings")


def _checked(outcomes: list[dict]) -> list[dict]:
    """The outcomes less their request counts (a previous segment's snapshot is read again or not, as the
    segments share a process)."""
    return [{k: v for k, v in o.items() if k != "requests"} for o in outcomes]


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


def test_verify_remote_full_on_a_standalone_cluster_equals_the_local_engine(
    tiered_kafka, s3, cluster, executor_archive, tmp_path
):
    """The README's cluster command for ``verify-remote --full``: two workers' executors (their Python from ``make
    package``'s archive) read the Kafka layout's objects from the bucket themselves; the outcomes equal the local
    engine's, an index torn in one object is found there, and every segment has its audit row."""
    import shutil

    from deltalake import DeltaTable

    sys.path.insert(0, str(PROJECT_ROOT / "tools"))
    from standalone_cluster import spark_submit

    from ..conftest import upload

    options, client = s3
    assert tiered_kafka.remote_dir is not None
    remote = shutil.copytree(tiered_kafka.remote_dir, tmp_path / "remote")
    torn = sorted(remote.glob("kafka-tiered-storage/txn-0-*/*.index"))[1]
    torn.write_bytes(torn.read_bytes()[:-3])
    uri = upload(client, remote, "cluster-tiered")
    common = ["--log-dir", str(tiered_kafka.log_dir), "--remote", uri, "--layout", "kafka", "--full",
              *storage_flags(options)]  # fmt: skip
    earlier = {d.name for w in cluster.workers for d in w.iterdir() if d.name.startswith("app-")}
    table = tmp_path / "audit"
    done = spark_submit(cluster.url, "verify-remote", *common, "--audit-table", table, "--json",
                        archive=executor_archive, conf=CLUSTER_APP_CONF)  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    spark = json.loads(done.stdout[done.stdout.index("{") :])
    code, local, err = kafka_index("verify-remote", *common, "--engine", "local", "--audit-table", "none")
    assert code == 1, err
    assert _checked(spark["outcomes"]) == _checked(local["outcomes"]) and spark["failed"] == 1
    (bad,) = [o for o in spark["outcomes"] if o["findings"]]
    assert {(f["kind"], f["file"]) for f in bad["findings"]} >= {("bad_length", f"{uri}/{torn.relative_to(remote)}")}
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert sorted(r["segment_id"] for r in rows if r["record_type"] == "remote_segment") == sorted(
        o["segment_id"] for o in local["outcomes"]
    )
    apps = [d for w in cluster.workers for d in w.iterdir() if d.name.startswith("app-") and d.name not in earlier]
    assert len(apps) == 2  # one application, an executor on each worker
    assert all(list(app.glob("*/env/bin/python")) for app in apps), "an executor did not unpack the archive"
    assert "Traceback" not in "".join(p.read_text(errors="replace") for app in apps for p in app.glob("*/stderr"))
