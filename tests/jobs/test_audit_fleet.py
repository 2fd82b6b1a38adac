"""A fleet's brokers writing into one audit table (issue 23): many writers at the same instant, on a local path and
on a real S3 API server (moto's, on 127.0.0.1), lose no row and double none; a table an older release wrote is
upgraded in place; each row carries its broker; ``kafka-index audit`` answers per broker."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from indexlib.testing.generate import generate_partition
from jobs import audit, audit_queries
from jobs.cli import main

from ..conftest import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import audit_writers  # noqa: E402  (the benchmark's runner: the same writers, timed there)

HAS_MOTO = importlib.util.find_spec("moto") is not None and importlib.util.find_spec("flask") is not None
needs_moto = pytest.mark.skipif(not HAS_MOTO, reason="needs moto[server] (the spark-test extra) for a real S3 API")


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 (a real process; it enforces If-None-Match, which delta-rs relies on)."""
    if not HAS_MOTO:
        pytest.skip("needs moto[server] (the spark-test extra) for a real S3 API")
    with audit_writers.moto_server() as endpoint:
        yield audit_writers.s3_options(endpoint)


def check_writers(got: dict, writers: int, rows: int) -> None:
    assert got["failed"] == 0, got["results"]
    assert got["duplicates"] == 0
    assert got["rows"] == got["expected"] == writers * (rows + 1)
    assert got["per_broker"] == {b: rows + 1 for b in range(1, writers + 1)}


def test_eight_writers_at_once_on_a_local_table(tmp_path):
    got = audit_writers.run_writers(str(tmp_path / "audit"), writers=8, rows=50, storage_options={})
    check_writers(got, 8, 50)


@needs_moto
def test_eight_writers_at_once_on_s3(s3):
    got = audit_writers.run_writers(f"s3://{audit_writers.BUCKET}/eight", writers=8, rows=50, storage_options=s3)
    check_writers(got, 8, 50)
    # the same run written again by every broker at once adds nothing
    again = audit_writers.run_writers(f"s3://{audit_writers.BUCKET}/eight", writers=8, rows=50, storage_options=s3)
    check_writers(again, 8, 50)
    assert sum(r["inserted"] for r in again["results"]) == 0


@needs_moto
def test_the_s3_table_is_a_real_delta_table_on_the_server(s3):
    """The rows are read back through delta-rs from the server, and the server holds the log's JSON commits."""
    import boto3

    table = f"s3://{audit_writers.BUCKET}/objects"
    audit.write(table, audit.to_table(audit_writers.broker_rows(4, "r-obj", 3, datetime.now(UTC))), None, s3)
    client = boto3.client(
        "s3",
        endpoint_url=s3["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=audit_writers.BUCKET, Prefix="objects/")["Contents"]]
    assert "objects/_delta_log/00000000000000000000.json" in keys
    assert any(k.endswith(".parquet") and "/date=" in k for k in keys)
    assert {r["broker_id"] for r in audit_queries.read(table, s3).to_pylist()} == {4}


def test_same_broker_writers_racing_keep_one_row_per_key(tmp_path):
    """Two attempts of one broker's run at once (the same keys, the same files): the loser of the commit race
    retries, its MERGE then finds the rows there: one row per key."""
    table = str(tmp_path / "audit")
    started = datetime.now(UTC)
    audit.write(table, audit.to_table(audit_writers.broker_rows(9, "other", 2, started)))  # the table exists
    got = audit_writers.run_writers(table, writers=4, rows=30, storage_options={}, run_id="dup")
    check_writers(got, 4, 30)
    rows = audit.to_table(audit_writers.broker_rows(1, "dup", 30, started))
    assert audit.write(table, rows).inserted == 0  # a replay of broker 1's rows


def old_release_rows(run_id: str) -> pa.Table:
    """Rows as the release before broker identity wrote them (its schema: no identity or exit code columns)."""
    new = {name for name, _, _ in audit.IDENTITY_COLUMNS}
    old_schema = pa.schema([f for f in audit.SCHEMA if f.name not in new])
    started = datetime(2026, 11, 20, 8, tzinfo=UTC)
    common = audit.run_common(run_id, "verify", started, started)
    rows = [
        {**common, "record_type": "segment", "log_dir": "/var/lib/kafka/data", "topic": "orders", "partition": p,
         "base_offset": 0, "status": "ok", "action": "none", "segments": 1}
        for p in range(3)
    ]  # fmt: skip
    rows.append({**common, "record_type": "run", "log_dir": "/var/lib/kafka/data", "topic": "", "partition": -1,
                 "base_offset": -1, "status": "ok", "action": "verify", "segments": 3})  # fmt: skip
    return pa.table({n: [r.get(n) for r in rows] for n in old_schema.names}, schema=old_schema)


def test_a_table_the_previous_release_wrote_is_upgraded_in_place(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    table = str(tmp_path / "audit")
    write_deltalake(table, old_release_rows("old-1"), partition_by=["date"], mode="append")
    before = DeltaTable(table)
    assert "broker_id" not in before.schema().to_arrow().names
    version = before.version()
    new_rows = audit.to_table(audit_writers.broker_rows(3, "new-1", 4, datetime.now(UTC)))
    result = audit.write(table, new_rows)
    assert result.inserted == 5
    after = DeltaTable(table)
    names = after.schema().to_arrow().names
    assert [n for n, _, _ in audit.IDENTITY_COLUMNS] == names[-len(audit.IDENTITY_COLUMNS) :]
    assert after.version() == version + 2  # one commit adds the columns, one merges the rows
    assert after.metadata().partition_columns == ["date"]
    rows = audit_queries.read(table).to_pylist()
    old = [r for r in rows if r["run_id"] == "old-1"]
    assert len(old) == 4 and all(r["broker_id"] is None and r["cluster_id"] is None for r in old)
    assert {r["topic"] for r in old} == {"orders", ""}
    assert len([r for r in rows if r["run_id"] == "new-1" and r["broker_id"] == 3]) == 5
    assert audit.write(table, new_rows).inserted == 0  # upgraded once: a replay adds nothing, changes no schema
    assert DeltaTable(table).version() == version + 2  # nothing to merge: no commit at all
    # the queries by broker read the upgraded table, old rows as an unknown broker
    latest = audit_queries.query(table, audit_queries.brokers_latest_sql()).to_pylist()
    assert [(r["broker_id"], r["run_id"]) for r in latest] == [(3, "new-1"), (None, "old-1")]


def test_a_log_dir_without_identity_re_run_adds_no_row(tmp_path):
    """Null cluster and broker ids are compared null-safe in the key: a re-run of the run id adds nothing."""
    table = str(tmp_path / "audit")
    rows = audit_writers.broker_rows(1, "anon", 3, datetime.now(UTC))
    for r in rows:
        r["cluster_id"] = r["broker_id"] = r["directory_id"] = None
    assert audit.write(table, audit.to_table(rows)).inserted == 4
    assert audit.write(table, audit.to_table(rows)).inserted == 0
    assert len(audit_queries.read(table).to_pylist()) == 4


def test_the_merge_predicate_pins_date_run_cluster_and_broker_with_literals():
    started = datetime(2026, 11, 25, tzinfo=UTC)
    rows = audit.to_table(audit_writers.broker_rows(7, "r'1", 2, started))
    predicate = audit.merge_predicate(rows, ["2026-11-24"])
    assert predicate.startswith(
        "t.date IN ('2026-11-24', '2026-11-25') AND t.run_id = 'r''1' AND t.cluster_id = 'fleet-cluster' AND "
        "t.broker_id = 7 AND "
    )
    assert "(t.broker_id IS NOT DISTINCT FROM s.broker_id)" in predicate
    mixed = audit.to_table([{"broker_id": 1}, {"broker_id": None}, {"broker_id": 2}])
    assert audit._pin("broker_id", mixed.column("broker_id").to_pylist()) == (
        "(t.broker_id IN (1, 2) OR t.broker_id IS NULL)"
    )


# ------------------------------------------------------------------------------------ real runs, by broker
def test_runs_of_three_brokers_then_the_audit_queries_by_broker(spark, tmp_path, capsys):
    """Three brokers' log dirs at their own paths (meta.properties of each), one shared run id, one table:
    every row names its broker; a log dir without meta.properties is named by --broker-id; ``kafka-index audit``
    answers the latest verdict per broker, one run per broker (the fleet summary) and damage per broker."""
    table = tmp_path / "audit"
    for broker in (1, 2, 3):
        logs = tmp_path / f"broker-{broker}"
        generate_partition(logs / "orders-0", segments=2, batches_per_segment=20, seed=broker)
        generate_partition(logs / "payments-0", segments=1, batches_per_segment=20, seed=10 + broker)
        if broker != 3:
            (logs / "meta.properties").write_text(
                f"version=1\nnode.id={broker}\ncluster.id=CL\ndirectory.id=D{broker}\n"
            )
        assert main(["rebuild", "--log-dir", str(logs), "--audit-table", "none", "--no-progress", "-q"]) == 0
    (tmp_path / "broker-2" / "orders-0" / "00000000000000000000.index").unlink()
    common = ["--audit-table", str(table), "--audit-journal", str(tmp_path / "journal"), "--no-progress", "-q"]
    codes = [
        main(["verify", "--log-dir", str(tmp_path / f"broker-{b}"), "--run-id", "fleet-1", *common, *extra])
        for b, extra in ((1, []), (2, []), (3, ["--broker-id", "3"]))
    ]
    assert codes == [0, 1, 0]
    rows = audit_queries.read(str(table)).to_pylist()
    assert sorted((r["broker_id"], r["record_type"]) for r in rows) == sorted(
        [(b, "segment") for b in (1, 2, 3) for _ in range(3)] + [(b, "run") for b in (1, 2, 3)]
    )
    assert {(r["broker_id"], r["cluster_id"], r["directory_id"]) for r in rows if r["record_type"] == "segment"} == {
        (1, "CL", "D1"), (2, "CL", "D2"), (3, None, None)
    }  # fmt: skip
    assert {r["broker_id"]: r["exit_code"] for r in rows if r["record_type"] == "run"} == {1: 0, 2: 1, 3: 0}
    # a verify of broker 1 again under the same run id changes nothing
    assert main(["verify", "--log-dir", str(tmp_path / "broker-1"), "--run-id", "fleet-1", *common]) == 0
    assert len(audit_queries.read(str(table)).to_pylist()) == len(rows)

    capsys.readouterr()
    assert main(["audit", "--audit-table", str(table), "--run", "fleet-1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [(s["broker_id"], s["segments"], s["with_findings"], s["status"], s["exit_code"]) for s in summary] == [
        (1, 3, 0, "ok", 0), (2, 3, 1, "findings", 1), (3, 3, 0, "ok", 0)
    ]  # fmt: skip
    assert [s["findings"] for s in summary] == [{}, {"index_missing": 1}, {}]
    assert json.loads(json.dumps(audit_queries.run_summary(str(table), "fleet-1"), default=str)) == summary

    assert main(["audit", "--audit-table", str(table), "--run", "fleet-1"]) == 0
    out = capsys.readouterr().out
    assert "findings by broker and kind:" in out and "(3 rows)" in out
    assert main(["audit", "--audit-table", str(table), "--run", "fleet-l"]) == 2  # a typo: one line, not "no findings"
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"kafka-index: error: audit table {table}: no rows of run 'fleet-l' (`kafka-index audit` lists the latest "
        "runs)\n"
    )
    assert main(["audit", "--audit-table", str(table), "--run", "fleet-l", "--json"]) == 0  # the fleet summary's form
    assert json.loads(capsys.readouterr().out) == []
    assert main(["audit", "--audit-table", str(table), "--brokers", "--json"]) == 0
    latest = json.loads(capsys.readouterr().out)
    assert [(r["broker_id"], r["status"]) for r in latest] == [(1, "ok"), (2, "findings"), (3, "ok")]
    assert main(["audit", "--audit-table", str(table), "--damage", "--json"]) == 0
    damage = json.loads(capsys.readouterr().out)
    assert [(d["broker_id"], d["topic"], d["damaged"], d["kinds"]) for d in damage] == [
        (2, "orders", 1, ["index_missing"])
    ]
    assert main(["audit", "--audit-table", str(table), "--failing", "--broker", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["audit", "--audit-table", str(table), "--failing", "--broker", "2", "--json"]) == 0
    assert [r["broker_id"] for r in json.loads(capsys.readouterr().out)] == [2]
    assert main(["audit", "--audit-table", str(table), "--partition", "orders-0", "--broker", "3", "--json"]) == 0
    assert {r["broker_id"] for r in json.loads(capsys.readouterr().out)} == {3}
    assert main(["audit", "--audit-table", str(table), "--sql", "SELECT 1", "--broker", "3"]) == 2
    assert "--broker/--cluster do not apply to --sql" in capsys.readouterr().err

    # the README's SQL examples run as they are written (its run id is this test's)
    [block] = re.findall(r"```sql\n(.*?)```", (PROJECT_ROOT / "README.md").read_text(), flags=re.S)
    statements = [q.strip() for q in block.replace("fleet-2026-11-25", "fleet-1").split(";") if q.strip()]
    answers = [audit_queries.query(str(table), q).to_pylist() for q in statements]
    assert [(r["broker_id"], r["exit_code"]) for r in answers[0]] == [(1, 0), (2, 1), (3, 0)]
    assert answers[1] == [{"broker_id": 2, "kind": "index_missing", "segments": 1}]
    assert [(r["broker_id"], r["topic"], r["damaged"]) for r in answers[2] if r["damaged"]] == [(2, "orders", 1)]


def test_a_garbage_delta_log_is_one_line_without_a_backtrace(capsys, tmp_path):
    """Issue 37: a ``_delta_log`` that is not JSON: ``audit --brokers`` is one line naming the table and the reason,
    exit 2; delta-rs's Rust backtrace (frames and C library source locations) is not printed."""
    table = tmp_path / "audit"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("garbage\n")
    assert main(["audit", "--audit-table", str(table), "--brokers"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kafka-index: error: audit table {table}: ") and len(err.splitlines()) == 1, err
    assert "Json error" in err and ".S:" not in err and "<unknown>" not in err
