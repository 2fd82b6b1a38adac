"""Reading the audit table (:mod:`jobs.audit`): SQL over it on delta-rs's DataFusion engine (no Spark), the
queries ``kafka-index audit`` runs (the latest run, a time window, a partition's history, per broker: latest
verdicts, damage over time, one run), and a run's summary per broker (the fleet DAG's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from .audit import open_table, sql_literal


def read(table_uri: str, storage_options: dict[str, str] | None = None) -> pa.Table:
    return pa.table(open_table(table_uri, storage_options).to_pyarrow_table())


def query(table_uri: str, sql: str, storage_options: dict[str, str] | None = None) -> pa.Table:
    """Run SQL over the audit table, registered as ``audit`` (delta-rs's DataFusion engine)."""
    from deltalake import QueryBuilder

    result = QueryBuilder().register("audit", open_table(table_uri, storage_options)).execute(sql)
    return pa.table(result.read_all()) if hasattr(result, "read_all") else pa.table(result)


def latest_run_sql(cluster_id: str | None = None, broker_id: int | None = None) -> str:
    """The latest run's row (one per broker for a fleet's run: every run row of the newest run id)."""
    where = f"record_type = 'run'{_broker_filter(cluster_id, broker_id)}"
    return (
        "SELECT run_id, run_mode, run_started, run_finished, broker_id, segments, bytes_scanned, finding_kinds, "
        f"status, duration_s FROM audit WHERE {where} AND run_id = (SELECT run_id FROM audit WHERE {where} "
        "ORDER BY run_started DESC LIMIT 1) ORDER BY cluster_id, broker_id"
    )


def window_sql(
    since: datetime, until: datetime, status: str, cluster_id: str | None = None, broker_id: int | None = None
) -> str:
    wanted = {"repaired": "('repaired')", "failing": "('findings', 'failed')"}[status]
    return (
        'SELECT run_id, run_started, broker_id, log_dir, topic, "partition", base_offset, finding_kinds, action, '
        f"status, backup_location FROM audit WHERE record_type = 'segment' AND status IN {wanted} "
        f"AND run_started >= '{since.astimezone(UTC).isoformat()}' "
        f"AND run_started < '{until.astimezone(UTC).isoformat()}'{_broker_filter(cluster_id, broker_id)} "
        'ORDER BY run_started, broker_id, topic, "partition", base_offset'
    )


def partition_history_sql(
    topic: str, partition: int, cluster_id: str | None = None, broker_id: int | None = None
) -> str:
    safe_topic = topic.replace("'", "''")
    return (
        "SELECT run_id, run_mode, run_started, broker_id, base_offset, finding_kinds, action, status, files_written "
        f"FROM audit WHERE record_type = 'segment' AND topic = '{safe_topic}' AND \"partition\" = {int(partition)}"
        f"{_broker_filter(cluster_id, broker_id)} ORDER BY run_started, broker_id, base_offset"
    )


# ----------------------------------------------------------------------------------------- by broker
def _broker_filter(cluster_id: str | None, broker_id: int | None) -> str:
    """`` AND ...`` limiting a query to one broker (and cluster), or nothing."""
    where = ""
    if broker_id is not None:
        where += f" AND broker_id = {int(broker_id)}"
    if cluster_id is not None:
        where += f" AND cluster_id = {sql_literal(cluster_id)}"
    return where


def brokers_latest_sql(cluster_id: str | None = None, broker_id: int | None = None) -> str:
    """The latest verdict of each broker: its newest run row (rows an older release wrote have no broker)."""
    return (
        "SELECT cluster_id, broker_id, run_id, run_mode, run_started, segments, finding_kinds, status, exit_code "
        "FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id, broker_id ORDER BY run_started DESC) AS n "
        f"FROM audit WHERE record_type = 'run'{_broker_filter(cluster_id, broker_id)}) WHERE n = 1 "
        "ORDER BY cluster_id, broker_id"
    )


def damage_sql(since: datetime, until: datetime, cluster_id: str | None = None, broker_id: int | None = None) -> str:
    """Damage per broker and topic over time: per day, broker and topic, the segments found damaged (findings,
    failed), repaired or rebuilt, and the finding kinds seen, in the window."""
    return (
        "SELECT date, cluster_id, broker_id, topic, "
        "count(DISTINCT run_id) AS runs, "
        "sum(CASE WHEN status IN ('findings', 'failed') THEN 1 ELSE 0 END) AS damaged, "
        "sum(CASE WHEN status IN ('repaired', 'rebuilt') THEN 1 ELSE 0 END) AS repaired, "
        "array_distinct(flatten(array_agg(finding_kinds))) AS kinds "
        f"FROM audit WHERE record_type = 'segment' AND (cardinality(finding_kinds) > 0 OR status <> 'ok') "
        f"AND run_started >= '{since.astimezone(UTC).isoformat()}' "
        f"AND run_started < '{until.astimezone(UTC).isoformat()}'{_broker_filter(cluster_id, broker_id)} "
        "GROUP BY date, cluster_id, broker_id, topic ORDER BY date, cluster_id, broker_id, topic"
    )


def run_by_broker_sql(run_id: str) -> str:
    """One run (a fleet's brokers share its id) per broker: segments checked, segments with findings, the finding
    kinds, status and exit code (from each broker's run row): what a fleet's summary prints."""
    run = sql_literal(run_id)
    return (
        "SELECT r.cluster_id, r.broker_id, r.log_dir, r.segments, coalesce(s.with_findings, 0) AS with_findings, "
        "r.finding_kinds, r.status, r.exit_code, r.run_started, r.duration_s "
        "FROM (SELECT * FROM audit WHERE record_type = 'run' AND run_id = " + run + ") r "
        "LEFT JOIN (SELECT cluster_id, broker_id, "
        "sum(CASE WHEN cardinality(finding_kinds) > 0 THEN 1 ELSE 0 END) AS with_findings "
        "FROM audit WHERE record_type = 'segment' AND run_id = " + run + " GROUP BY cluster_id, broker_id) s "
        "ON (r.cluster_id IS NOT DISTINCT FROM s.cluster_id) AND (r.broker_id IS NOT DISTINCT FROM s.broker_id) "
        "ORDER BY r.cluster_id, r.broker_id"
    )


def findings_by_broker_sql(run_id: str) -> str:
    """One run's findings by broker and kind (segment rows' kinds, one count per segment)."""
    return (
        "SELECT cluster_id, broker_id, kind, count(*) AS segments FROM (SELECT cluster_id, broker_id, "
        f"unnest(finding_kinds) AS kind FROM audit WHERE record_type = 'segment' AND run_id = {sql_literal(run_id)}) "
        "GROUP BY cluster_id, broker_id, kind ORDER BY cluster_id, broker_id, kind"
    )


def run_summary(table_uri: str, run_id: str, storage_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A run's outcome per broker, read from the table (what a fleet DAG's summary task needs): one dict per
    broker with its run row's facts and ``findings`` (kind -> segments)."""
    brokers = query(table_uri, run_by_broker_sql(run_id), storage_options).to_pylist()
    kinds = query(table_uri, findings_by_broker_sql(run_id), storage_options).to_pylist()
    for b in brokers:
        b["findings"] = {
            k["kind"]: k["segments"]
            for k in kinds
            if (k["cluster_id"], k["broker_id"]) == (b["cluster_id"], b["broker_id"])
        }
    return brokers
