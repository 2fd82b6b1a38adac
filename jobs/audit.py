"""The Delta Lake audit table: one row per segment per run, one ``record_type = 'partition'`` row per partition
whose files beside the segments a run wrote (snapshots, leader epochs, a rolled segment), plus one
``record_type = 'run'`` row per run and broker.

One schema (:data:`SCHEMA`), one table, partitioned by ``date`` (the run's UTC start date), shared by every
broker of a fleet: each row carries its log dir's broker identity (``cluster_id``, ``broker_id``,
``directory_id``, from ``meta.properties``). Writes are a MERGE on the natural key (:data:`KEY`: run id, record
type, cluster id, broker id, log dir, topic, partition, base offset; the identity compared null-safe): a new key
is inserted; a row already there is replaced only by another attempt's row when it is stale
(:data:`REPLACE_WHEN`), so replaying a journal or re-running a verify changes nothing. Many writers share the
table: the MERGE pins with literals what it can touch (the date partition, the run id, the cluster and broker:
:func:`merge_predicate`), so runs of different brokers never conflict; a real conflict is retried with backoff
(:func:`write`), and the journal stays the last resort. A table written before the identity columns existed is
upgraded in place on the first write (:func:`upgrade`: new nullable columns, old rows keep nulls). The table
may live on object storage (``s3://...``), with delta-rs's storage options (``AWS_*`` environment variables, or
the ``audit_storage_options`` setting). The writer is ``deltalake`` (delta-rs, no JVM) on the driver, or
``delta-spark`` when the Spark session has Delta Lake's SQL extension configured. Reading it: :mod:`jobs.audit_queries`.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

import pyarrow as pa

from indexlib.engine import RunOptions, RunReport, SegmentResult, SegmentTask
from indexlib.format import BrokerIdentity
from indexlib.storage import Partition

from .config import Settings
from .pipeline import TOOL_VERSION

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEY = (
    "run_id", "record_type", "cluster_id", "broker_id", "log_dir", "topic", "partition", "base_offset", "segment_id"
)  # fmt: skip
#: key columns that may be null (a log dir without meta.properties names no cluster or broker; a local segment has
#: no remote segment id): compared null-safe
NULLABLE_KEY = ("cluster_id", "broker_id", "segment_id")
#: the columns a MERGE pins with literals of its rows' values, so writers of other brokers never conflict
PINNED = ("date", "run_id", "cluster_id", "broker_id")
#: the columns added after the first release, nullable: a table without them is upgraded in place
IDENTITY_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    ("cluster_id", pa.string(), "string"),
    ("broker_id", pa.int32(), "integer"),
    ("directory_id", pa.string(), "string"),
    ("exit_code", pa.int32(), "integer"),
    # since issue 40: a tiered segment's id (its rows' log_dir is the remote root, record_type "remote_segment")
    ("segment_id", pa.string(), "string"),
]
#: how often a write that lost a real conflict is tried again, and the first backoff (doubling, jittered)
WRITE_RETRIES = 6
BACKOFF_S = 0.2

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
    # since issue 23 (added in place to an older table): the broker whose log dir it is, and a run row's exit code
    *[(name, kind) for name, kind, _ in IDENTITY_COLUMNS],
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
        **t.broker.to_dict(),
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
        "settings_json": segment_settings_json(t, options),
    }


def segment_settings_json(t: SegmentTask, options: RunOptions) -> str:
    """A segment row's ``settings_json``: its index settings and how the run wrote (``sync``: the method used)."""
    return json.dumps(
        {
            "index_interval_bytes": t.index_interval_bytes,
            "segment_index_bytes": t.segment_index_bytes,
            "output_dir": options.output_dir,
            "dry_run": options.dry_run,
            "truncate_corrupt_tail": options.truncate_corrupt_tail,
            "force": options.force,
            "sync": options.sync,
        }
    )


def partition_row(
    partition: Partition,
    broker: BrokerIdentity,
    written: list[str],
    backups: list[str],
    common: dict[str, Any],
    options: RunOptions,
) -> dict[str, Any]:
    """The audit row of the files one run wrote beside a partition's segments (``record_type = 'partition'``,
    base offset -1): a repair's rewritten producer snapshots and ``leader-epoch-checkpoint``; a recover's
    snapshots, leader epochs and rolled empty segment; ``backup_location`` holds the old files (and a recover's
    snapshots past the new log end, moved away)."""
    return {
        **common,
        "record_type": "partition",
        **broker.to_dict(),
        "log_dir": partition.log_dir,
        "topic": partition.topic,
        "partition": partition.partition,
        "base_offset": -1,
        "segments": 0,
        "status": "repaired" if options.mode == "repair" else "ok",
        "action": options.mode,
        "files_written": sorted(written),
        "backup_location": os.path.dirname(backups[0]) if backups else None,
        "finding_kinds": [],
        "findings_json": "[]",
    }


def _who(identity: BrokerIdentity) -> tuple[str | None, int | None]:
    return identity.cluster_id, identity.broker_id


def rows_for(report: RunReport, settings: Settings) -> list[dict[str, Any]]:
    """The audit rows of one run: one per segment, then one run row per broker the run read (one for the usual
    run on one broker's host; see :func:`to_table`). A run row counts its broker's segments and findings; its
    ``exit_code`` is the whole run's."""
    common = run_common(report.run_id, report.mode, report.started, report.finished)
    rows = [segment_row(o, common, report.options) for o in report.segments]
    rows += [
        partition_row(p, report.broker_of(p.log_dir), written, backups, common, report.options)
        for p, written, backups in report.files_beside_segments()
    ]
    brokers: dict[tuple[str | None, int | None], list[str]] = {}
    for log_dir, identity in report.brokers.items():
        brokers.setdefault(_who(identity), []).append(log_dir)
    for o in report.segments:  # a report made without its brokers' identities
        brokers.setdefault(_who(o.task.broker), []).append(o.task.log_dir)
    if not brokers:
        brokers[(None, None)] = []
    remaining = report.remaining_findings
    for who, log_dirs in brokers.items():
        segments = [o for o in report.segments if _who(o.task.broker) == who]
        seg_rows = [r for r in rows if (r["cluster_id"], r["broker_id"]) == who]
        left = [f for f in remaining if _who(report.broker_of(f.file)) == who]
        partition_findings = [
            f for path, fs in report.partition_findings.items() if _who(report.broker_of(path)) == who for f in fs
        ]
        kinds = sorted({f.kind for f in left} | {k for r in seg_rows for k in r["finding_kinds"]})
        failed = any(o.error for o in segments)
        refused = report.mode == "rebuild" and any(o.action in ("cannot_rebuild", "failed") for o in segments)
        directories = sorted(
            {d for d in (report.brokers.get(ld, BrokerIdentity()).directory_id for ld in log_dirs) if d}
        )
        dirs = sorted(set(log_dirs)) or sorted({p.log_dir for p in report.partitions})
        rows.append(
            {
                **common,
                "record_type": "run",
                "cluster_id": who[0],
                "broker_id": who[1],
                "directory_id": ",".join(directories) or None,
                "log_dir": ",".join(dirs),
                "topic": "",
                "partition": -1,
                "base_offset": -1,
                "segment_bytes": sum(o.file_size for o in segments),
                "segments": len(segments),
                "batches_scanned": sum(o.batches for o in segments),
                "bytes_scanned": sum(o.file_size for o in segments),
                "valid_bytes": sum(o.valid_bytes for o in segments),
                "invalid_tail_bytes": sum(o.invalid_bytes for o in segments),
                "finding_kinds": kinds,
                "findings_json": json.dumps([f.to_dict() for f in partition_findings]),
                "status": "failed"
                if failed
                else "findings"
                if (refused or (left and report.mode != "rebuild"))
                else "ok",
                "action": report.mode,
                "files_written": [w for o in segments for w in o.written]
                + [w for w in report.partition_files_written if _who(report.broker_of(w)) == who],
                "duration_s": (report.finished - report.started).total_seconds(),
                "exit_code": report.exit_code,
                "settings_json": json.dumps(
                    {
                        "log_dirs": settings.log_dirs,
                        "index_interval_bytes": settings.defaults.index_interval_bytes,
                        "segment_index_bytes": settings.defaults.segment_index_bytes,
                        "topic_overrides": settings.topic_overrides,
                        "cli_overrides": settings.cli_overrides,
                        "output_dir": report.options.output_dir,
                        "dry_run": report.options.dry_run,
                        "broker_id_option": report.options.broker_id,
                        "sync": report.options.sync,
                    }
                ),
            }
        )
    return rows


def remote_rows(
    outcomes: list[Any], common: dict[str, Any], remote: str, layout: str, mode: str, exit_code: int, seconds: float
) -> list[dict[str, Any]]:
    """The audit rows of a ``verify-remote`` or ``rebuild-remote`` run: one ``remote_segment`` row per segment
    (``log_dir`` the remote root, ``base_offset`` its start offset, ``segment_id`` its id), then one run row."""
    rows = []
    for o in outcomes:
        s = o.segment
        errors = [f for f in o.findings if f.severity == "error"]
        rows.append(
            {
                **common, "record_type": "remote_segment", "log_dir": remote, "topic": s.topic,
                "partition": s.partition, "base_offset": s.start_offset, "segment_id": s.segment_id,
                "segment_bytes": s.size, "segments": 1, "bytes_scanned": s.size if mode != "index-only" else 0,
                "finding_kinds": sorted({f.kind for f in o.findings}),
                "findings_json": json.dumps([f.to_dict() for f in o.findings]),
                "status": "rebuilt" if o.written else ("findings" if errors else "ok"),
                "action": "rebuilt" if o.written else "none", "files_written": list(o.written),
                "settings_json": json.dumps({"layout": layout, "mode": mode, "skipped": o.skipped}),
            }
        )  # fmt: skip
    rows.append(
        {
            **common, "record_type": "run", "log_dir": remote, "topic": "", "partition": -1, "base_offset": -1,
            "segments": len(outcomes), "segment_bytes": sum(o.segment.size for o in outcomes),
            "finding_kinds": sorted({k for r in rows for k in r["finding_kinds"]}), "findings_json": "[]",
            "status": "findings" if exit_code == 1 else "ok", "action": common["run_mode"],
            "files_written": [w for o in outcomes for w in o.written], "duration_s": seconds, "exit_code": exit_code,
            "settings_json": json.dumps({"layout": layout, "mode": mode}),
        }
    )  # fmt: skip
    return rows


def to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts with any subset of the columns) as a table in :data:`SCHEMA`."""
    columns = {name: [r.get(name) for r in rows] for name in SCHEMA.names}
    return pa.table(columns, schema=SCHEMA)


def sql_literal(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))  # type: ignore[call-overload]


def _pin(column: str, values: Iterable[object]) -> str:
    """``t.<column>`` limited to ``values`` with literals (null-aware)."""
    distinct = sorted({v for v in values if v is not None}, key=str)
    has_null = any(v is None for v in values)
    parts = []
    if len(distinct) == 1:
        parts.append(f"t.{column} = {sql_literal(distinct[0])}")
    elif distinct:
        parts.append(f"t.{column} IN ({', '.join(map(sql_literal, distinct))})")
    if has_null:
        parts.append(f"t.{column} IS NULL")
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def merge_predicate(rows: pa.Table | None = None, earlier_dates: Iterable[str] = ()) -> str:
    """The MERGE's predicate: the key (:data:`KEY`, its nullable columns null-safe), and, given the rows to
    merge, literals pinning the :data:`PINNED` columns to their values. delta-rs reads only the files those
    literals can match (the date partition; the run and broker by the files' statistics), and its conflict
    check asks only whether a concurrent commit added or removed such files: runs of other brokers (or other
    runs) never conflict with this one. ``earlier_dates``: the date partitions holding rows of these runs
    already (an attempt of the same run id on an earlier day, whose rows the key must still match)."""
    join = " AND ".join(f"(t.{k} IS NOT DISTINCT FROM s.{k})" if k in NULLABLE_KEY else f"t.{k} = s.{k}" for k in KEY)
    if rows is None or rows.num_rows == 0:
        return join
    values = {c: rows.column(c).to_pylist() for c in PINNED}
    values["date"] += list(earlier_dates)
    pins = [_pin(c, values[c]) for c in PINNED]
    return " AND ".join([*pins, join])


def _merge_predicate() -> str:
    return merge_predicate()


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


class WriteResult(NamedTuple):
    writer: str  # "deltalake" or "delta-spark"
    inserted: int | None  # rows new (None where the writer does not say: delta-spark)
    replaced: int  # rows that replaced stale rows (REPLACE_WHEN); 0 where the writer does not say
    retries: int = 0  # conflicts lost and tried again


def open_table(table_uri: str, storage_options: dict[str, str] | None = None) -> Any:
    """The table as delta-rs opens it (``TableNotFoundError`` when there is none)."""
    from deltalake import DeltaTable

    return DeltaTable(table_uri, storage_options=storage_options or None)


def upgrade(target: Any) -> list[str]:
    """Add the columns a table written by an older release lacks (:data:`IDENTITY_COLUMNS`, nullable: its rows
    keep nulls there), in one metadata commit; returns their names ([] when none was missing)."""
    from deltalake.schema import Field, PrimitiveType

    have = set(target.schema().to_arrow().names)
    missing = [(name, kind) for name, _, kind in IDENTITY_COLUMNS if name not in have]
    if missing:
        target.alter.add_columns([Field(name, PrimitiveType(kind), nullable=True) for name, kind in missing])
    return [name for name, _ in missing]


def _create(table_uri: str, storage_options: dict[str, str] | None) -> None:
    """Create the empty table (schema, partitioning) unless it exists: writers racing to create it all end with
    the one table, and every row then goes through the MERGE (two first writers never both insert a key)."""
    from deltalake import DeltaTable

    try:
        DeltaTable.create(
            table_uri,
            SCHEMA,
            mode="ignore",
            partition_by=["date"],
            description="kafka-index-rebuild audit: one row per segment per run",
            storage_options=storage_options or None,
        )
    except Exception as exc:  # another writer created it first: fine if it is there now
        try:
            open_table(table_uri, storage_options)
        except Exception:  # it is not: the create's own error (a full disk, a denied bucket) says why
            raise exc from None


def _dates_of_runs(target: Any, rows: pa.Table) -> list[str]:
    """The date partitions that already hold rows of ``rows``' run ids (usually none, or today's)."""
    run_ids = sorted({str(r) for r in rows.column("run_id").to_pylist()})
    if not run_ids:
        return []
    found = target.to_pyarrow_table(columns=["date"], filters=[("run_id", "in", run_ids)])
    return sorted(set(found.column("date").to_pylist()))


def _backoff(attempt: int) -> float:
    return float(min(5.0, BACKOFF_S * 2**attempt) * random.uniform(0.5, 1.5))


def write(
    table_uri: str,
    rows: pa.Table,
    spark: SparkSession | None = None,
    storage_options: dict[str, str] | None = None,
    retries: int = WRITE_RETRIES,
) -> WriteResult:
    """MERGE ``rows`` into the audit table (created on first use, upgraded in place when an older release
    wrote it). A commit that loses a real conflict (another writer touched the same files) is tried again, up
    to ``retries`` times with a jittered doubling backoff; the MERGE is idempotent, so a retry never adds a
    row twice."""
    if spark_has_delta(spark):  # pragma: no cover - the Delta Lake jars cannot be fetched on CI's machines
        from delta.tables import DeltaTable as SparkDeltaTable

        frame = spark.createDataFrame(rows)
        if not SparkDeltaTable.isDeltaTable(spark, table_uri):
            frame.write.format("delta").partitionBy("date").save(table_uri)
        else:
            (
                SparkDeltaTable.forPath(spark, table_uri)
                .alias("t")
                .merge(frame.alias("s"), merge_predicate(rows))
                .whenMatchedUpdateAll(condition=REPLACE_WHEN)
                .whenNotMatchedInsertAll()
                .execute()
            )
        return WriteResult("delta-spark", None, 0)
    from deltalake.exceptions import CommitFailedError, TableNotFoundError

    attempt = 0
    while True:
        try:
            try:
                target = open_table(table_uri, storage_options)
            except TableNotFoundError:
                _create(table_uri, storage_options)
                target = open_table(table_uri, storage_options)
            if upgrade(target):
                target = open_table(table_uri, storage_options)
            metrics = (
                target.merge(
                    rows, merge_predicate(rows, _dates_of_runs(target, rows)), source_alias="s", target_alias="t"
                )
                .when_matched_update_all(predicate=REPLACE_WHEN)
                .when_not_matched_insert_all()
                .execute()
            )
        except CommitFailedError:
            if attempt >= retries:
                raise
            time.sleep(_backoff(attempt))
            attempt += 1
            continue
        inserted, replaced = int(metrics["num_target_rows_inserted"]), int(metrics["num_target_rows_updated"])
        return WriteResult("deltalake", inserted, replaced, attempt)


def rows_with_files(
    table_uri: str,
    run_id: str,
    brokers: Iterable[BrokerIdentity] | None = None,
    storage_options: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``run_id`` that record files a run replaced (``files_written`` not empty; not the
    ``interrupted`` rows, whose files only may have been replaced); only those of ``brokers`` when given (the
    brokers of a fleet share a run id; rows an older release wrote, without a broker, count for every
    broker). [] when the table does not exist."""
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_table(table_uri, storage_options)
    except TableNotFoundError:
        return []
    have = set(table.schema().to_arrow().names)
    columns = ["record_type", "topic", "partition", "base_offset", "status", "files_written"]
    columns += [c for c in ("cluster_id", "broker_id") if c in have]
    rows = table.to_pyarrow_table(columns=columns, filters=[("run_id", "=", run_id)]).to_pylist()
    wanted = None if brokers is None else {_who(b) for b in brokers}

    def ours(r: dict[str, Any]) -> bool:
        who = (r.get("cluster_id"), r.get("broker_id"))
        return wanted is None or who in wanted or who == (None, None)

    return [r for r in rows if r["files_written"] and r["status"] != "interrupted" and ours(r)]
