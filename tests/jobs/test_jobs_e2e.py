"""The Spark jobs end to end on real local Spark, over copies of real brokers' partitions.

Each test calls ``kafka-index`` in process (``jobs.cli.main``), which reuses the session-wide local
Spark session, so every job runs through the real pipeline, the real executors and a real Delta table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexlib.engine import rebuild_partition
from jobs import audit_queries
from jobs.cli import main

from ..conftest import KAFKA_REAL, requires_kafka_real

LOCAL = KAFKA_REAL / "local-apache-kafka-4.1.0"
ICU = KAFKA_REAL / "LoveNui__ETL-IntensiveCareUnit"
LOCAL_PARTS = ["plain-0", "txn-0", "java-perf-0", "compacted-0", "logappend-0"]


def snapshot(log_dir: Path) -> dict[str, tuple[int, int, bytes]]:
    """(inode, mtime_ns, bytes) of every file under the log dir."""
    out = {}
    for p in sorted(log_dir.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(log_dir))] = (st.st_ino, st.st_mtime_ns, p.read_bytes())
    return out


def run_cli(*args) -> int:
    return main([str(a) for a in args])


@pytest.fixture
def broker(copy_set, tmp_path):
    """A log dir with five local partitions and one GitHub partition (with Kafka's rebuilt oracle)."""
    logs = copy_set(LOCAL, LOCAL_PARTS)
    copy_set(ICU, ["ICUsubscription-0"])
    return logs


@requires_kafka_real
def test_verify_finds_nothing_on_real_broker_files(spark, broker, tmp_path, capsys):
    before = snapshot(broker)
    table = tmp_path / "audit"
    report = tmp_path / "report.json"
    assert run_cli("verify", "--log-dir", broker, "--audit-table", table, "--json", report, "--no-progress") == 0
    assert snapshot(broker) == before  # strictly read-only
    data = json.loads(report.read_text())
    assert data["remaining_findings"] == [] and len(data["segments"]) == 15
    rows = audit_queries.read(str(table)).to_pylist()
    assert len(rows) == 16 and {r["status"] for r in rows} == {"ok"}
    assert "healthy" in capsys.readouterr().out


@requires_kafka_real
def test_repair_fixes_exactly_the_damaged_files(spark, broker, tmp_path):
    expected = {  # what Kafka writes: the local originals, and Kafka's own rebuild for the GitHub set
        "plain-0/00000000000000002658.index": (LOCAL / "plain-0/00000000000000002658.index").read_bytes(),
        "java-perf-0/00000000000000013336.timeindex": (
            LOCAL / "java-perf-0/00000000000000013336.timeindex"
        ).read_bytes(),
        "txn-0/00000000000000000011.txnindex": (LOCAL / "txn-0/00000000000000000011.txnindex").read_bytes(),
        "ICUsubscription-0/00000000000000000000.timeindex": (
            ICU / "_rebuilt_by_kafka_4.1.0/ICUsubscription-0/00000000000000000000.timeindex"
        ).read_bytes(),
    }
    os.unlink(broker / "plain-0/00000000000000002658.index")  # deleted
    path = broker / "java-perf-0/00000000000000013336.timeindex"
    os.truncate(path, path.stat().st_size - 5)  # truncated
    os.unlink(broker / "txn-0/00000000000000000011.txnindex")  # deleted
    path = broker / "ICUsubscription-0/00000000000000000000.timeindex"
    data = bytearray(path.read_bytes())
    data[100:400] = np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8).tobytes()  # scrambled
    path.write_bytes(bytes(data))
    damaged = set(expected)
    table, backups, report = tmp_path / "audit", tmp_path / "backups", tmp_path / "verify.json"

    assert run_cli("verify", "--log-dir", broker, "--audit-table", table, "--json", report, "--run-id", "v1") == 1
    flagged = {
        os.path.relpath(f["file"], broker) for s in json.loads(report.read_text())["segments"] for f in s["findings"]
    }
    assert flagged == damaged

    before = snapshot(broker)
    assert (
        run_cli("repair", "--log-dir", broker, "--audit-table", table, "--backup-dir", backups, "--run-id", "r1") == 0
    )
    after = snapshot(broker)
    for name, content in expected.items():
        assert after[name][2] == content, name
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == damaged  # every other file: same inode, mtime and bytes
    # Backups of the files that existed (the truncated and the scrambled one); deleted ones had none.
    kept = {str(p.relative_to(backups / "r1")) for p in backups.rglob("*") if p.is_file()}
    assert kept == {"java-perf-0/00000000000000013336.timeindex", "ICUsubscription-0/00000000000000000000.timeindex"}
    assert (backups / "r1/ICUsubscription-0/00000000000000000000.timeindex").read_bytes() == bytes(data)

    assert run_cli("verify", "--log-dir", broker, "--audit-table", table, "--run-id", "v2") == 0

    # The audit table: chispa on the DataFrame read back, and delta-rs on the table itself.
    from chispa import assert_df_equality

    arrow = audit_queries.read(str(table))
    frame = spark.createDataFrame(arrow)
    repaired = frame.where("run_id = 'r1' AND record_type = 'segment' AND action = 'repaired'").selectExpr(
        "topic", "`partition`", "base_offset", "status", "size(files_written) AS written"
    )
    wanted = spark.createDataFrame(
        [
            ("plain", 0, 2658, "repaired", 1),
            ("java-perf", 0, 13336, "repaired", 1),
            ("txn", 0, 11, "repaired", 1),
            ("ICUsubscription", 0, 0, "repaired", 1),
        ],
        repaired.schema,
    )
    assert_df_equality(repaired, wanted, ignore_row_order=True)
    rows = arrow.to_pylist()
    assert {r["run_id"] for r in rows} == {"v1", "r1", "v2"} and len(rows) == 3 * 16
    v1 = {(r["topic"], r["base_offset"]): r for r in rows if r["run_id"] == "v1" and r["record_type"] == "segment"}
    assert v1[("plain", 2658)]["finding_kinds"] == ["index_missing"]
    assert v1[("txn", 11)]["finding_kinds"] == ["txnindex_missing"]
    assert v1[("java-perf", 13336)]["finding_kinds"] == ["bad_length", "time_index_missing_final_entry"]
    assert sum(1 for r in v1.values() if r["status"] == "findings") == 4
    r1 = {(r["topic"], r["base_offset"]): r for r in rows if r["run_id"] == "r1" and r["record_type"] == "segment"}
    assert r1[("ICUsubscription", 0)]["backup_location"] == str(backups / "r1" / "ICUsubscription-0")
    assert r1[("txn", 11)]["txnindex_entries"] == 26
    assert {r["date"] for r in rows} == {rows[0]["run_started"].strftime("%Y-%m-%d")}
    from deltalake import DeltaTable

    assert DeltaTable(str(table)).metadata().partition_columns == ["date"]


@requires_kafka_real
def test_rebuild_output_dir_with_topic_config(spark, broker, tmp_path):
    config = tmp_path / "topics.yaml"
    config.write_text(
        "plain:\n  index.interval.bytes: 512\n  segment.index.bytes: 1000000\n"
        "java-perf:\n  index.interval.bytes: 100\n  retention.ms: 1000\n"
    )
    out = tmp_path / "out"
    before = snapshot(broker)
    assert (
        run_cli(
            "rebuild",
            "--log-dir",
            broker,
            "--topic-config",
            config,
            "--output-dir",
            out,
            "--audit-table",
            "none",
            "--no-progress",
        )
        == 0
    )
    assert snapshot(broker) == before  # the log dirs are untouched
    for name, interval in (("plain-0", 512), ("java-perf-0", 100), ("txn-0", 4096)):
        ref = tmp_path / "ref"
        rebuild_partition(
            broker / name,
            index_interval_bytes=interval,
            segment_index_bytes=1000000 if name == "plain-0" else 10485760,
            output_dir=ref,
        )
        ours = {p.name: p.read_bytes() for p in (out / name).iterdir()}
        theirs = {p.name: p.read_bytes() for p in (ref / name).iterdir()}
        assert ours == theirs, name
    assert not (tmp_path / "audit").exists()


@requires_kafka_real
def test_same_run_id_is_idempotent_and_runs_append(spark, copy_set, tmp_path, capsys):
    logs = copy_set(LOCAL, ["plain-0"])
    table = str(tmp_path / "audit")
    assert run_cli("verify", "--log-dir", logs, "--audit-table", table, "--run-id", "same") == 0
    assert "audit: 4 of 4 rows new" in capsys.readouterr().out
    first = sorted(audit_queries.read(table).to_pylist(), key=lambda r: (r["record_type"], r["base_offset"]))
    assert run_cli("verify", "--log-dir", logs, "--audit-table", table, "--run-id", "same") == 0
    assert "audit: 0 of 4 rows new" in capsys.readouterr().out  # the count printed is true
    again = sorted(audit_queries.read(table).to_pylist(), key=lambda r: (r["record_type"], r["base_offset"]))
    assert again == first and len(first) == 4
    assert run_cli("verify", "--log-dir", logs, "--audit-table", table, "--run-id", "other") == 0
    assert "audit: 4 of 4 rows new" in capsys.readouterr().out
    assert len(audit_queries.read(table).to_pylist()) == 8


@requires_kafka_real
def test_dry_run_and_truncate_corrupt_tail(spark, copy_set, tmp_path):
    logs = copy_set(LOCAL, ["plain-0"])
    log = logs / "plain-0/00000000000000002658.log"
    good = log.read_bytes()
    log.write_bytes(good + b"\x00" * 3000 + b"garbage")
    before = snapshot(logs)
    assert run_cli("repair", "--log-dir", logs, "--audit-table", "none", "--dry-run") == 1
    assert snapshot(logs) == before
    backups = tmp_path / "b"
    assert (
        run_cli(
            "repair",
            "--log-dir",
            logs,
            "--audit-table",
            "none",
            "--backup-dir",
            backups,
            "--run-id",
            "cut",
            "--truncate-corrupt-tail",
        )
        == 0
    )
    assert log.read_bytes() == good
    saved = next((backups / "cut/plain-0").glob("00000000000000002658.log.tail-from-*"))
    assert saved.read_bytes() == b"\x00" * 3000 + b"garbage" and saved.name.endswith(str(len(good)))


@requires_kafka_real
def test_locked_log_dir_is_refused_unless_forced(spark, copy_set, tmp_path):
    logs = copy_set(LOCAL, ["plain-0"])
    os.unlink(logs / "plain-0/00000000000000000000.index")
    (logs / ".lock").write_bytes(b"")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); "
                "print('locked', flush=True); time.sleep(120)"
            ),
            str(logs / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(logs)
        assert run_cli("repair", "--log-dir", logs, "--audit-table", tmp_path / "audit") == 2
        assert snapshot(logs) == before and not (tmp_path / "audit").exists()
        assert run_cli("verify", "--log-dir", logs, "--audit-table", "none") == 1  # verify never needs the lock
        assert (
            run_cli("repair", "--log-dir", logs, "--audit-table", "none", "--force", "--backup-dir", tmp_path / "b")
            == 0
        )
        assert (logs / "plain-0/00000000000000000000.index").read_bytes() == (
            LOCAL / "plain-0/00000000000000000000.index"
        ).read_bytes()
    finally:
        holder.kill()
        holder.wait()


def test_bad_input_gives_one_message_and_exit_2(spark, tmp_path, capsys):
    table = tmp_path / "audit"
    cases = [
        ["verify", "--log-dir", tmp_path / "missing"],
        ["verify", "--log-dir", tmp_path / "file"],
        ["verify", "--log-dir", tmp_path, "--topic-config", tmp_path / "bad.yaml"],
        ["verify", "--log-dir", tmp_path, "--topic-config", tmp_path / "neg.json"],
        ["verify", "--log-dir", tmp_path, "--no-such-option"],
        ["verify", "--log-dir", tmp_path, "--partitions", "x-1"],
        ["verify", "--log-dir", tmp_path, "--topics", "("],
        ["verify", "--log-dir", tmp_path, "--config", tmp_path / "unknown.yaml"],
        ["repair", "--log-dir", tmp_path, "--run-id", "../escape"],
        ["verify"],
    ]
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad.yaml").write_text("orders: [unclosed\n")
    (tmp_path / "neg.json").write_text('{"orders": {"index.interval.bytes": -1}}')
    (tmp_path / "unknown.yaml").write_text("index_interval_byte: 10\n")
    for case in cases:
        capsys.readouterr()
        assert run_cli(*case, "--audit-table", table) == 2, case
        err = capsys.readouterr().err
        assert "kafka-index: error:" in err and "Traceback" not in err, (case, err)
    assert not table.exists()


def test_data_problems_are_findings(spark, tmp_path, capsys):
    from indexlib.testing.generate import generate_partition

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=40, seed=3)
    rebuild_partition(logs / "orders-0")
    (logs / "orders-0" / "README.txt").write_text("not Kafka")
    (logs / "orders-0.abc123-delete").mkdir()
    report = tmp_path / "r.json"
    assert run_cli("verify", "--log-dir", logs, "--audit-table", "none", "--json", report) == 0  # info only
    data = json.loads(report.read_text())
    assert [f["kind"] for f in data["partition_findings"][str(logs / "orders-0")]] == ["unknown_file"]
    assert data["skipped"][0]["path"] == str(logs / "orders-0.abc123-delete")
    os.chmod(logs / "orders-0/00000000000000000000.log", 0)
    os.mkfifo(logs / "orders-0/00000000000000099999.log")
    assert run_cli("verify", "--log-dir", logs, "--audit-table", "none", "--json", report) == 1
    kinds = {f["kind"] for s in json.loads(report.read_text())["segments"] for f in s["findings"]}
    assert "unreadable_segment" in kinds


@requires_kafka_real
def test_lookup_answers_with_the_entry_and_the_batch(capsys):
    segment = LOCAL / "plain-0/00000000000000002658.log"
    assert run_cli("lookup", "--segment", segment, "--offset", 3000, "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["index_entry"]["offset"] <= 3000 <= answer["batch"]["last_offset"]
    assert answer["batch"]["base_offset"] <= 3000 and answer["batch"]["position"] >= answer["index_entry"]["position"]
    assert run_cli("lookup", "--segment", segment, "--timestamp", 0, "--json") == 0
    first = json.loads(capsys.readouterr().out)
    assert first["batch"]["base_offset"] == 2658
    assert run_cli("lookup", "--segment", tmp_name := segment.with_name("x.log"), "--offset", 1) == 2
    assert str(tmp_name) in capsys.readouterr().err


@requires_kafka_real
def test_audit_queries(spark, copy_set, tmp_path, capsys):
    logs = copy_set(LOCAL, ["plain-0", "txn-0"])
    table = tmp_path / "audit"
    os.unlink(logs / "txn-0/00000000000000000000.index")
    assert (
        run_cli("repair", "--log-dir", logs, "--audit-table", table, "--backup-dir", tmp_path / "b", "--run-id", "r")
        == 0
    )
    capsys.readouterr()
    assert run_cli("audit", "--audit-table", table, "--json") == 0
    latest = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in latest] == ["r"] and latest[0]["segments"] == 5
    assert run_cli("audit", "--audit-table", table, "--repaired", "--json") == 0
    repaired = json.loads(capsys.readouterr().out)
    assert [(r["topic"], r["base_offset"]) for r in repaired] == [("txn", 0)]
    assert run_cli("audit", "--audit-table", table, "--partition", "plain-0", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    assert run_cli("audit", "--audit-table", table, "--sql", "SELECT count(*) AS n FROM audit", "--json") == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 6}]
    assert run_cli("audit", "--audit-table", table, "--sql", "SELECT nope FROM audit") == 2
    assert run_cli("audit", "--audit-table", tmp_path / "none-here") == 2


def test_spark_submit_runs_the_job_file_as_is(tmp_path):
    """``spark-submit jobs/spark_job.py verify`` (a real spark-submit, its own JVM) on a generated log dir."""
    from indexlib.testing.generate import generate_partition

    spark_submit = Path(sys.executable).with_name("spark-submit")
    if not spark_submit.exists():
        pytest.skip("spark-submit is not installed beside this Python (pyspark provides it)")
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=30, seed=1)
    rebuild_partition(logs / "orders-0")
    job = Path(__file__).resolve().parents[2] / "jobs" / "spark_job.py"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    done = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            str(job),
            "verify",
            "--log-dir",
            str(logs),
            "--audit-table",
            str(tmp_path / "audit"),
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "r.json").read_text())["remaining_findings"] == []
    assert len(audit_queries.read(str(tmp_path / "audit")).to_pylist()) == 3


@requires_kafka_real
def test_repair_rewrites_a_txnindex_whose_last_stable_offset_is_wrong(spark, copy_set, tmp_path):
    """A raised LSO makes Kafka stop collecting aborted transactions early (read_committed consumers are
    sent aborted records): verify exits 1 naming the file, repair rewrites only that file to Kafka's bytes."""
    import struct

    from indexlib import TransactionIndex

    logs = copy_set(LOCAL, ["txn-0"])
    target = logs / "txn-0/00000000000000000011.txnindex"
    original = target.read_bytes()
    data = bytearray(original)
    struct.pack_into(">q", data, 26, 2**62)  # record 0's last stable offset
    target.write_bytes(bytes(data))
    before = snapshot(logs)
    report = tmp_path / "v.json"
    assert run_cli("verify", "--log-dir", logs, "--audit-table", "none", "--json", report, "--no-progress") == 1
    remaining = json.loads(report.read_text())["remaining_findings"]
    assert [(f["kind"], f["file"], f["found"]) for f in remaining] == [
        ("txn_last_stable_offset_mismatch", str(target), 2**62)
    ]
    assert (
        run_cli(
            "repair",
            "--log-dir",
            logs,
            "--audit-table",
            "none",
            "--backup-dir",
            tmp_path / "b",
            "--run-id",
            "lso",
            "--no-progress",
        )
        == 0
    )
    assert target.read_bytes() == original
    after = snapshot(logs)
    assert {k for k in after if after[k] != before[k]} == {"txn-0/00000000000000000011.txnindex"}
    with TransactionIndex(target, 11, writable=False) as index:
        collected, _ = index.collect_aborted_txns(0, 811)
        assert len(collected) == 26 == len(index.all_aborted_txns())
