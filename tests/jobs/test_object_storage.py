"""``kafka-index`` over log dirs in object storage (moto's real S3 API server on 127.0.0.1): the Spark job (real
local Spark, its executors reading the bucket themselves) and ``--engine local`` find what ``python -m indexlib``
finds on the local copies, over every real fixture set and generated damage at once; rebuild from the bucket into a
local dir equals the local rebuild byte for byte; audit rows name the URIs; an object that changes after the
listing stops the run in one line (exit 2) with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexlib.cli.main import main as indexlib_main
from indexlib.engine import rebuild_partition
from indexlib.testing.generate import generate_partition
from jobs.cli import main as kafka_index_main

from ..conftest import KAFKA_REAL, S3_BUCKET, damage_log_dir, needs_object_storage, storage_flags, upload

pytestmark = needs_object_storage


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def copies(tmp_path_factory, s3) -> list[tuple[Path, str]]:
    """(local log dir, its copy's URI): every real fixture set, and a generated log dir with damage of each kind
    the CLI tests build."""
    generated = tmp_path_factory.mktemp("generated") / "logs"
    for i, name in enumerate(("orders-0", "orders-1", "payments-3")):
        generate_partition(generated / name, segments=3, batches_per_segment=60, transactional_producers=2, seed=40 + i)
        rebuild_partition(generated / name)
    damage_log_dir(generated, "torn")
    (generated / "orders-1" / "00000000000000000001.index").unlink(missing_ok=True)
    for index in sorted((generated / "payments-3").glob("*.index"))[:1]:
        index.write_bytes(index.read_bytes()[:-3])
    found = [(generated, upload(s3[1], generated, "jobs/generated"))]
    if KAFKA_REAL.is_dir():
        found += [
            (d, upload(s3[1], d, f"jobs/real/{d.name}")) for d in sorted(p for p in KAFKA_REAL.iterdir() if p.is_dir())
        ]
    return found


def findings(report: dict, copies: list[tuple[Path, str]], remote: bool) -> list[tuple]:
    """Every finding of a ``--json`` report, its file named by (log dir number, path inside it)."""
    roots = [uri if remote else str(local) for local, uri in copies]

    def where(path: str) -> tuple[int, str]:
        for i, root in enumerate(roots):
            if path == root or path.startswith(root + "/"):
                return i, path[len(root) :].lstrip("/")
        raise AssertionError(f"{path} is in no log dir of the run")

    found = [
        (*where(f["file"]), f["kind"], f["entry"], f["position"], f["severity"]) for f in report["remaining_findings"]
    ]
    for s in report["segments"]:
        found += [(*where(f["file"]), f["kind"], f["entry"], f["position"], f["severity"]) for f in s["findings"]]
    return sorted(found)


def test_verify_from_s3_finds_on_every_engine_what_the_local_verify_finds(spark, s3, copies, tmp_path):
    """One run over every copy: ``python -m indexlib verify`` and ``kafka-index verify`` on Spark and on ``--engine
    local`` of the copies, against ``python -m indexlib verify`` of the local dirs; the audit rows name the URIs."""
    from deltalake import DeltaTable

    local_json = tmp_path / "local.json"
    local = indexlib_main(["verify", *(str(d) for d, _ in copies), "--jobs", "2", "--json", str(local_json), "-q"])
    expected = findings(json.loads(local_json.read_text()), copies, remote=False)
    assert local == 1 and len(expected) >= 4  # the generated damage is seen
    uris = [flag for _, uri in copies for flag in ("--log-dir", uri)]
    from_bucket = tmp_path / "indexlib-s3.json"
    code = indexlib_main(["verify", *(u for _, u in copies), "--jobs", "2", "--json", str(from_bucket), "-q",
                          *storage_flags(s3[0])])  # fmt: skip
    assert code == local and findings(json.loads(from_bucket.read_text()), copies, remote=True) == expected
    for engine in ("spark", "local"):
        report = tmp_path / f"{engine}.json"
        code = kafka_index_main(
            ["verify", *uris, "--engine", engine, "--json", str(report), "--no-progress", "-q",
             "--audit-table", str(tmp_path / "audit"), "--audit-journal", str(tmp_path / "journal"),
             *storage_flags(s3[0])]
        )  # fmt: skip
        assert code == local, engine
        assert findings(json.loads(report.read_text()), copies, remote=True) == expected, engine
    rows = DeltaTable(str(tmp_path / "audit")).to_pyarrow_table().to_pylist()
    segment_dirs = {r["log_dir"] for r in rows if r["record_type"] == "segment"}
    assert segment_dirs == {uri for _, uri in copies}
    named = [f["file"] for r in rows if r["findings_json"] for f in json.loads(r["findings_json"])]
    assert named and all(path.startswith(f"s3://{S3_BUCKET}/jobs/") for path in named)  # findings name the URIs


def test_rebuild_from_s3_on_spark_equals_the_local_rebuild_byte_for_byte(spark, s3, copies, tmp_path):
    """Every copy rebuilt by the Spark job from the bucket into a local dir: ``python -m indexlib rebuild`` of the
    local copy's files, byte for byte, the same names."""
    for i, (local_dir, uri) in enumerate(copies):  # every real fixture set, and the generated damage
        out_local, out_s3 = tmp_path / f"local-{i}", tmp_path / f"s3-{i}"
        assert indexlib_main(["rebuild", str(local_dir), "--output-dir", str(out_local), "-q"]) == 0
        code = kafka_index_main(
            ["rebuild", "--log-dir", uri, "--output-dir", str(out_s3), "--audit-table", "none", "--no-progress", "-q",
             *storage_flags(s3[0])]
        )  # fmt: skip
        assert code == 0
        assert files(out_s3) == files(out_local) and files(out_s3), local_dir.name


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_an_object_changed_after_the_listing_stops_the_run_in_one_line(
    spark, s3, tmp_path, monkeypatch, capsys, engine
):
    """The planned run lists the bucket; then one ``.log`` is replaced by a shorter copy (a truncated upload) before
    the executors read it: they refuse it (its size is not the listed one), the run stops, exit 2, one line, and
    nothing is written to the output dir."""
    import jobs.cli

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=40, seed=7)
    rebuild_partition(logs / "orders-0")
    uri = upload(s3[1], logs, f"jobs/changing-{engine}")
    key = f"jobs/changing-{engine}/orders-0/00000000000000000000.log"
    planned = jobs.cli.plan_run

    def plan_then_truncate(args):  # the upload is cut short right after the driver listed the bucket
        found = planned(args)
        data = (logs / "orders-0" / "00000000000000000000.log").read_bytes()
        s3[1].put_object(Bucket=S3_BUCKET, Key=key, Body=data[: len(data) // 2])
        return found

    monkeypatch.setattr(jobs.cli, "plan_run", plan_then_truncate)
    capsys.readouterr()
    code = kafka_index_main(
        ["rebuild", "--log-dir", uri, "--output-dir", str(tmp_path / "out"), "--engine", engine, "--audit-table",
         "none", "--no-progress", "-q", *storage_flags(s3[0])]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        f"kafka-index: error: s3://{S3_BUCKET}/{key}: the object changed since the log dir was listed "
        f"({(logs / 'orders-0' / '00000000000000000000.log').stat().st_size} bytes then, "
        f"{(logs / 'orders-0' / '00000000000000000000.log').stat().st_size // 2} now); the run stopped, nothing was "
        "written"
    ]
    assert not (tmp_path / "out").exists() or files(tmp_path / "out") == {}


def test_the_spark_job_rebuilds_into_a_new_prefix(spark, s3, copies, tmp_path):
    """Its executors stage each segment's index files as objects and the driver's commit copies them to their names:
    the objects are the local rebuild's files, byte for byte, and none is left under a staged name."""
    local_dir, uri = copies[0]
    assert indexlib_main(["rebuild", str(local_dir), "--output-dir", str(tmp_path / "local"), "-q"]) == 0
    out = "jobs/rebuilt-by-spark"
    code = kafka_index_main(
        ["rebuild", "--log-dir", uri, "--output-dir", f"s3://{S3_BUCKET}/{out}", "--audit-table", "none",
         "--no-progress", "-q", *storage_flags(s3[0])]
    )  # fmt: skip
    assert code == 0
    listed = s3[1].list_objects_v2(Bucket=S3_BUCKET, Prefix=out + "/")["Contents"]
    got = {o["Key"][len(out) + 1 :]: s3[1].get_object(Bucket=S3_BUCKET, Key=o["Key"])["Body"].read() for o in listed}
    assert got == files(tmp_path / "local")
