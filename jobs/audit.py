"""The Delta Lake audit table: one row per segment per run, plus one ``record_type = 'run'`` row per run.

One schema (:data:`SCHEMA`), one table, partitioned by ``date`` (the run's UTC start date). Writes are a
MERGE on the natural key (run_id, record_type, log_dir, topic, partition, base_offset): a new key is
inserted; a row already there is replaced only by another attempt's row when it is stale
(:data:`REPLACE_WHEN`), so replaying a journal or re-running a verify changes nothing. The writer is ``deltalake``
(delta-rs, no JVM) on the driver, or ``delta-spark`` when the Spark session has Delta Lake's SQL
extension configured. Queries (:func:`query`) run on delta-rs's SQL engine (no Spark needed).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeGuard

import pyarrow as pa

from indexlib.engine import RunOptions, RunReport, SegmentResult

from .config import Settings
from .pipeline import TOOL_VERSION

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEY = ("run_id", "record_type", "log_dir", "topic", "partition", "base_offset")

_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("run_mode", pa.string()),
    ("record_type", pa.string()),  # "segment" or "run"
    ("date", pa.string()),  # partition column: the run's UTC start date, YYYY-MM-DD
    ("run_started", pa.timestamp("us", tz="UTC")),
    ("run_finished", pa.timestamp("us", tz="UTC")),
    ("log_dir", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("base_offset", pa.int64()),
    ("segment_bytes", pa.int64()),
    ("index_bytes", pa.int64()),  # size before the run; null when absent
    ("timeindex_bytes", pa.int64()),
    ("txnindex_bytes", pa.int64()),
    ("segments", pa.int64()),  # 1 for a segment row; the count for a run row
    ("batches_scanned", pa.int64()),
    ("bytes_scanned", pa.int64()),
    ("valid_bytes", pa.int64()),
    ("invalid_tail_bytes", pa.int64()),
    ("finding_kinds", pa.list_(pa.string())),
    ("findings_json", pa.string()),
    ("status", pa.string()),  # ok | findings | repaired | rebuilt | failed | interrupted (a journal's)
    ("action", pa.string()),  # none | rebuilt | repaired | would_rebuild | would_repair | cannot_rebuild | failed
    ("index_entries", pa.int64()),  # entries of the rebuilt files
    ("timeindex_entries", pa.int64()),
    ("txnindex_entries", pa.int64()),
    ("files_written", pa.list_(pa.string())),
    ("backup_location", pa.string()),
    ("duration_s", pa.float64()),
    ("tool_version", pa.string()),
    ("settings_json", pa.string()),
]
SCHEMA = pa.schema(_COLUMNS)


def run_common(run_id: str, mode: str, started: datetime, finished: datetime | None) -> dict[str, Any]:
    """The columns every row of one run shares."""
    return {
        "run_id": run_id,
        "run_mode": mode,
        "date": started.strftime("%Y-%m-%d"),
        "run_started": started,
        "run_finished": finished,
        "tool_version": TOOL_VERSION,
    }


def segment_row(o: SegmentResult, common: dict[str, Any], options: RunOptions) -> dict[str, Any]:
    """The audit row of one segment's result."""
    t = o.task
    errors = [f for f in o.findings if f.severity == "error"]
    status = (
        "failed"
        if o.error or o.action in ("failed", "cannot_rebuild")
        else (o.action if o.action in ("repaired", "rebuilt") else ("findings" if errors else "ok"))
    )
    return {
        **common,
        "record_type": "segment",
        "log_dir": t.log_dir,
        "topic": t.topic,
        "partition": t.partition,
        "base_offset": t.base_offset,
        "segment_bytes": o.file_size,
        "index_bytes": o.index_sizes.get(".index"),
        "timeindex_bytes": o.index_sizes.get(".timeindex"),
        "txnindex_bytes": o.index_sizes.get(".txnindex"),
        "segments": 1,
        "batches_scanned": o.batches,
        "bytes_scanned": o.file_size,
        "valid_bytes": o.valid_bytes,
        "invalid_tail_bytes": o.invalid_bytes,
        "finding_kinds": sorted({f.kind for f in o.findings}),
        "findings_json": json.dumps([f.to_dict() for f in o.findings]),
        "status": status,
        "action": o.action,
        "index_entries": o.plan.index_entries,
        "timeindex_entries": o.plan.timeindex_entries,
        "txnindex_entries": len(o.aborted),
        "files_written": list(o.written),
        "backup_location": os.path.dirname(o.backups[0]) if o.backups else None,
        "duration_s": o.seconds,
        "settings_json": json.dumps(
            {
                "index_interval_bytes": t.index_interval_bytes,
                "segment_index_bytes": t.segment_index_bytes,
                "output_dir": options.output_dir,
                "dry_run": options.dry_run,
                "truncate_corrupt_tail": options.truncate_corrupt_tail,
                "force": options.force,
            }
        ),
    }


def rows_for(report: RunReport, settings: Settings) -> list[dict[str, Any]]:
    """The audit rows of one run: one per segment, then the run's row (see :func:`to_table`)."""
    common = run_common(report.run_id, report.mode, report.started, report.finished)
    rows = [segment_row(o, common, report.options) for o in report.segments]
    kinds = sorted({f.kind for f in report.remaining_findings} | {k for r in rows for k in r["finding_kinds"]})
    rows.append(
        {
            **common,
            "record_type": "run",
            "log_dir": ",".join(sorted({p.log_dir for p in report.partitions})),
            "topic": "",
            "partition": -1,
            "base_offset": -1,
            "segment_bytes": sum(o.file_size for o in report.segments),
            "segments": len(report.segments),
            "batches_scanned": sum(o.batches for o in report.segments),
            "bytes_scanned": sum(o.file_size for o in report.segments),
            "valid_bytes": sum(o.valid_bytes for o in report.segments),
            "invalid_tail_bytes": sum(o.invalid_bytes for o in report.segments),
            "finding_kinds": kinds,
            "findings_json": json.dumps([f.to_dict() for fs in report.partition_findings.values() for f in fs]),
            "status": "failed" if report.failed else "ok" if report.exit_code == 0 else "findings",
            "action": report.mode,
            "files_written": [w for o in report.segments for w in o.written],
            "duration_s": (report.finished - report.started).total_seconds(),
            "settings_json": json.dumps(
                {
                    "log_dirs": settings.log_dirs,
                    "index_interval_bytes": settings.defaults.index_interval_bytes,
                    "segment_index_bytes": settings.defaults.segment_index_bytes,
                    "topic_overrides": settings.topic_overrides,
                    "cli_overrides": settings.cli_overrides,
                    "output_dir": report.options.output_dir,
                    "dry_run": report.options.dry_run,
                }
            ),
        }
    )
    return rows


def to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts with any subset of the columns) as a table in :data:`SCHEMA`."""
    columns = {name: [r.get(name) for r in rows] for name in SCHEMA.names}
    return pa.table(columns, schema=SCHEMA)


def _merge_predicate() -> str:
    return " AND ".join(f"t.{k} = s.{k}" for k in KEY)


def _has_files(alias: str) -> str:
    return f"coalesce(cardinality({alias}.files_written), 0) > 0"


#: When a matched row gives way to the incoming one (SQL that delta-rs and Spark both read). Only another
#: attempt's row (another start, or another status: a repaired journal) replaces one, and only when the row
#: there is stale (``interrupted``, or ``failed`` because a write failed; ``cannot_rebuild`` is the
#: segment's state, not an attempt's) or records no file written while the incoming one does. A row
#: recording files (replaced, or maybe replaced) never gives way to one that records none.
REPLACE_WHEN = (
    "(t.run_started <> s.run_started OR t.status <> s.status) AND ("
    "((t.status = 'interrupted' OR (t.status = 'failed' AND t.action <> 'cannot_rebuild')) "
    f"AND ({_has_files('s')} OR NOT {_has_files('t')})) "
    f"OR ({_has_files('s')} AND NOT {_has_files('t')}))"
)


def spark_has_delta(spark: SparkSession | None) -> TypeGuard[SparkSession]:
    """Whether the session was started with Delta Lake's SQL extension (then ``delta-spark`` writes)."""
    if spark is None:
        return False
    return "DeltaSparkSessionExtension" in (spark.conf.get("spark.sql.extensions", "") or "")


def write(table_uri: str, rows: pa.Table, spark: SparkSession | None = None) -> tuple[str, int | None, int]:
    """MERGE ``rows`` into the audit table (created on first use). Returns the writer used, how many rows
    were new (``None`` where the writer does not say: delta-spark) and how many replaced stale rows
    (:data:`REPLACE_WHEN`; 0 where the writer does not say)."""
    if spark_has_delta(spark):  # pragma: no cover - the Delta Lake jars cannot be fetched on CI's machines
        from delta.tables import DeltaTable as SparkDeltaTable

        frame = spark.createDataFrame(rows)
        if not SparkDeltaTable.isDeltaTable(spark, table_uri):
            frame.write.format("delta").partitionBy("date").save(table_uri)
        else:
            (
                SparkDeltaTable.forPath(spark, table_uri)
                .alias("t")
                .merge(frame.alias("s"), _merge_predicate())
                .whenMatchedUpdateAll(condition=REPLACE_WHEN)
                .whenNotMatchedInsertAll()
                .execute()
            )
        return "delta-spark", None, 0
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import TableNotFoundError

    try:
        target = DeltaTable(table_uri)
    except TableNotFoundError:
        write_deltalake(
            table_uri,
            rows,
            partition_by=["date"],
            mode="append",
            description="kafka-index-rebuild audit: one row per segment per run",
        )
        return "deltalake", rows.num_rows, 0
    metrics = (
        target.merge(rows, _merge_predicate(), source_alias="s", target_alias="t")
        .when_matched_update_all(predicate=REPLACE_WHEN)
        .when_not_matched_insert_all()
        .execute()
    )
    return "deltalake", int(metrics["num_target_rows_inserted"]), int(metrics["num_target_rows_updated"])


def rows_with_files(table_uri: str, run_id: str) -> list[dict[str, Any]]:
    """The rows of ``run_id`` that record files a run replaced (``files_written`` not empty; not the
    ``interrupted`` rows, whose files only may have been replaced). [] when the table does not exist."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(table_uri)
    except TableNotFoundError:
        return []
    columns = ["record_type", "topic", "partition", "base_offset", "status", "files_written"]
    rows = table.to_pyarrow_table(columns=columns, filters=[("run_id", "=", run_id)]).to_pylist()
    return [r for r in rows if r["files_written"] and r["status"] != "interrupted"]


def read(table_uri: str) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(table_uri).to_pyarrow_table()


def query(table_uri: str, sql: str) -> pa.Table:
    """Run SQL over the audit table, registered as ``audit`` (delta-rs's DataFusion engine)."""
    from deltalake import DeltaTable, QueryBuilder

    result = QueryBuilder().register("audit", DeltaTable(table_uri)).execute(sql)
    return pa.table(result.read_all()) if hasattr(result, "read_all") else pa.table(result)


def latest_run_sql() -> str:
    return (
        "SELECT run_id, run_mode, run_started, run_finished, segments, bytes_scanned, finding_kinds, status, "
        "duration_s FROM audit WHERE record_type = 'run' ORDER BY run_started DESC LIMIT 1"
    )


def window_sql(since: datetime, until: datetime, status: str) -> str:
    wanted = {"repaired": "('repaired')", "failing": "('findings', 'failed')"}[status]
    return (
        'SELECT run_id, run_started, log_dir, topic, "partition", base_offset, finding_kinds, action, status, '
        f"backup_location FROM audit WHERE record_type = 'segment' AND status IN {wanted} "
        f"AND run_started >= '{since.astimezone(UTC).isoformat()}' "
        f"AND run_started < '{until.astimezone(UTC).isoformat()}' "
        'ORDER BY run_started, topic, "partition", base_offset'
    )


def partition_history_sql(topic: str, partition: int) -> str:
    safe_topic = topic.replace("'", "''")
    return (
        "SELECT run_id, run_mode, run_started, base_offset, finding_kinds, action, status, files_written "
        f"FROM audit WHERE record_type = 'segment' AND topic = '{safe_topic}' AND \"partition\" = {int(partition)} "
        "ORDER BY run_started, base_offset"
    )
