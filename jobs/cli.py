"""``kafka-index``: the command line of the Spark jobs and of the everyday tools.

Subcommands: ``verify``, ``rebuild``, ``repair`` (Spark jobs; also ``spark-submit jobs/spark_job.py MODE``),
``dump``, ``lookup`` (one file, no Spark) and ``audit`` (queries of the Delta audit table, no Spark).
Exit codes: 0 healthy / done, 1 findings or failures (also a Spark session or job that died), 2 bad usage or
bad input, 3 the work is done but its audit rows could not be merged into the table (they are kept in the
audit journal; ``audit --recover``), 4 (``audit --recover``) a damaged journal: its readable rows are merged,
the file is kept; 128 + N stopped by signal N: 130 SIGINT, 143 SIGTERM (one line; a run stops between two
segments' commits), 141 the reader of stdout went away (no message, as a tool killed by SIGPIPE).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from indexlib.cli import (
    add_broker_id,
    add_dump_command,
    add_index_settings,
    add_jobs,
    add_json_report,
    add_lookup_command,
    add_not_yet_tiered,
    add_rebuild_remote_command,
    add_remote_index_cache_command,
    add_remote_inventory_command,
    add_run_id,
    add_selection,
    add_settings_files,
    add_storage_options,
    add_verbosity,
    add_verify_remote_command,
    add_write_options,
    report_level,
)
from indexlib.engine import received, stdout_closed, stop_on_signals, stopped_by
from indexlib.format import error_line

from .audit_commands import check_run_id_unused, recover_journals, run_audit, write_audit
from .progress import ConsoleProgress
from .session import java_hint, spark_failure, spark_session
from .usage import EXIT_AUDIT_FAILED, PROG, UsageError, prog, running_as

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.engine import RemoteSegmentOutcome, RemoteSegmentTask, RunOptions, RunReport
    from indexlib.storage import Discovery

    from .config import Settings
    from .journal import AuditJournal


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{prog()}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _job_options(p: argparse.ArgumentParser, mode: str, engines: bool = True) -> None:
    """A job's options; ``engines``: whether it takes ``--engine`` (``python -m indexlib repair`` runs locally)."""
    p.add_argument(
        "--log-dir",
        action="append",
        dest="log_dirs",
        metavar="DIR",
        help="a Kafka log dir (repeatable; Kafka's log.dirs), or a copy of one in object storage "
        "(s3://bucket/prefix, gs://, abfs://; read-only there: verify, and rebuild into another dir)",
    )
    add_storage_options(p)
    add_selection(p)
    add_settings_files(p)
    add_index_settings(p, None)
    p.add_argument("--audit-table", metavar="PATH", help="Delta audit table path/URI; 'none' disables auditing")
    _storage_option(p)
    add_broker_id(p)
    p.add_argument(
        "--audit-journal",
        metavar="DIR",
        help="local dir where the run's audit rows wait (fsynced) until the table has them "
        "(default: the state dir's kafka-index-audit-journal: $KAFKA_INDEX_HOME, else ~/.local/state/kafka-index-rebuild)",
    )
    add_json_report(p)
    p.add_argument("--config", metavar="FILE", help="settings file instead of conf/defaults.yaml")
    add_run_id(p)
    if mode == "verify":
        add_not_yet_tiered(p)
    if mode != "verify":  # verify writes nothing: no backups, no lock to override
        add_write_options(p, mode)
    add_verbosity(p)
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress (a bar on a terminal, else a line every 10 s on stderr)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a --topic-config topic that matches no partition is an error, not a warning",
    )
    if engines:
        p.add_argument(
            "--engine",
            choices=("spark", "local"),
            default="spark",
            help="spark: the map step is a Spark job (local mode unless spark-submit says otherwise; the default); "
            "local: a pool of processes on this machine, no JVM (a broker host), the same findings and audit rows",
        )
    add_jobs(p)  # with --engine local
    p.add_argument(
        "--exit-zero-on-findings",
        action="store_true",
        help="exit 0 when the run itself succeeded, even with findings (for schedulers that branch on --json)",
    )
    if mode == "rebuild":
        p.add_argument("--dry-run", action="store_true", help="report what would be rebuilt; write nothing")
    if mode == "repair":
        p.add_argument("--dry-run", action="store_true", help="verify and report what would be repaired; write nothing")
    if mode != "verify":
        p.add_argument(
            "--audit-dry-run",
            action="store_true",
            help="with --dry-run: still record the run in the audit table (a dry run writes no rows otherwise)",
        )
    if mode in ("rebuild", "repair"):  # recover always cuts an invalid tail, as the broker's start would
        p.add_argument(
            "--truncate-corrupt-tail",
            action="store_true",
            help="also cut a corrupt .log tail (saved to the backup dir first); off by default",
        )


def _storage_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--audit-storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="a delta-rs storage option for the audit table (repeatable; e.g. AWS_ENDPOINT_URL=http://host:9000); "
        "the AWS_* environment variables work too",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    from indexlib import __version__

    parser.add_argument("--version", action="version", version=f"{prog()} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for mode, text in (
        ("verify", "check every index file against its .log (read-only)"),
        ("rebuild", "rewrite every selected index file as Kafka's recovery would"),
        ("repair", "verify, then rebuild only what is wrong, with backups"),
        (
            "recover",
            "after an unclean shutdown: recover a stopped broker's log dirs as its start would (indexes from the "
            "recovery point, the invalid tail cut, an empty segment rolled at the log end, the recovery point moved "
            "there), so that the start recovers nothing; never writes .kafka_cleanshutdown",
        ),
    ):
        _job_options(sub.add_parser(mode, help=text, description=text), mode)
    add_dump_command(sub, run_dump)
    add_lookup_command(sub, run_lookup)
    add_remote_inventory_command(sub, run_remote_inventory)
    for remote in (
        add_verify_remote_command(sub, run_verify_remote),
        add_rebuild_remote_command(sub, run_rebuild_remote),
    ):
        _remote_job_options(remote)
    add_remote_index_cache_command(sub, run_remote_index_cache)
    text = "query the Delta audit table (the latest run by default), or merge rows kept in the audit journal"
    audit = sub.add_parser("audit", help=text, description=text)
    audit.add_argument("--audit-table", metavar="PATH", help="the table (default: the config's audit_table)")
    audit.add_argument("--config", metavar="FILE", help="settings file instead of conf/defaults.yaml")
    _storage_option(audit)
    q = audit.add_mutually_exclusive_group()
    q.add_argument("--latest", action="store_true", help="the latest run's summary (default)")
    q.add_argument("--repaired", action="store_true", help="segments repaired in the time window")
    q.add_argument("--failing", action="store_true", help="segments with findings or failures in the time window")
    q.add_argument("--partition", metavar="TOPIC-N", help="history of one partition")
    q.add_argument("--brokers", action="store_true", help="the latest verdict of each broker (its newest run)")
    q.add_argument(
        "--damage", action="store_true", help="damage per day, broker and topic in the time window (default 7d)"
    )
    q.add_argument("--run", metavar="RUN_ID", help="one run per broker: segments, findings by kind, status, exit code")
    q.add_argument("--sql", help="free SQL over the table, registered as 'audit'")
    q.add_argument(
        "--recover",
        action="store_true",
        help="merge the rows kept in the audit journal (runs killed in their commit, failed table writes)",
    )
    audit.add_argument("--broker", type=int, metavar="N", help="only this broker's rows (with --latest, --brokers, "
                       "--repaired, --failing, --damage, --partition)")  # fmt: skip
    audit.add_argument("--cluster", metavar="ID", help="only this cluster's rows (same queries as --broker)")
    audit.add_argument("--audit-journal", metavar="DIR", help="the journal dir (default: the config's)")
    audit.add_argument("--since", help="window start: 7d, 12h, 30m, today, yesterday or ISO (UTC); default 7d")
    audit.add_argument("--until", help="window end, same forms as --since; default now")
    audit.add_argument("--json", action="store_true", dest="as_json", help="print JSON rows instead of a table")
    return parser


# ------------------------------------------------------------------------------------- progress
def plan_run(args: argparse.Namespace) -> tuple[Settings, Discovery, RunOptions]:
    """A job's settings, partitions and run options from its arguments, everything checked before Spark starts:
    ``UsageError`` or a ``ValueError`` (a config, log dir or run option error) with the one line to print."""
    from indexlib.cli import check_json_target, check_planned_run, run_options
    from indexlib.engine import check_outside_log_dirs, log_dir_identities
    from indexlib.storage import (
        LOCAL,
        discover,
        is_partition_dir,
        is_uri,
        parse_partition_filter,
        parse_topic_filter,
        store_for,
    )

    from .config import resolve_settings

    settings = resolve_settings(
        config_file=args.config,
        server_properties=args.server_properties,
        topic_config=args.topic_config,
        log_dirs=args.log_dirs,
        index_interval_bytes=args.index_interval_bytes,
        segment_index_bytes=args.segment_index_bytes,
        audit_table=args.audit_table,
        audit_journal=args.audit_journal,
        backup_dir=getattr(args, "backup_dir", None),
        audit_storage_options=args.audit_storage_option,
        cluster_metadata=args.cluster_metadata,
        storage_options=getattr(args, "storage_option", None),
        output_dir=getattr(args, "output_dir", None),
    )
    if not settings.log_dirs:
        raise UsageError("no log dir: give --log-dir DIR (repeatable) or --server-properties FILE")
    store = settings.store
    topics, partitions = parse_topic_filter(args.topics), parse_partition_filter(args.partitions)
    output_dir = getattr(args, "output_dir", None)
    if output_dir and os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise UsageError(f"{output_dir}: --output-dir exists and is not a directory")
    check_json_target(args.json_file)
    for log_dir in settings.log_dirs:
        if not is_uri(log_dir) and is_partition_dir(log_dir):
            raise UsageError(
                f"{log_dir}: --log-dir names a partition dir; give its log dir "
                f"{os.path.dirname(os.path.abspath(log_dir))} (and --topics/--partitions to choose)"
            )
    found = discover(settings.log_dirs, topics, partitions, None if store == LOCAL else store_for(store))
    if not found.partitions:
        chosen = " and ".join(
            f"{flag} {value!r}"
            for flag, value in (("--topics", args.topics), ("--partitions", args.partitions))
            if value
        )
        raise UsageError(f"no partition{f' matches {chosen}' if chosen else ''} in {', '.join(settings.log_dirs)}")
    unknown = sorted(set(settings.topic_overrides) - {p.topic for p in found.partitions})
    if unknown:
        message = f"{args.topic_config}: topic(s) {', '.join(map(repr, unknown))} match no partition of this run"
        if args.strict:
            raise UsageError(message + " (--strict)")
        print(f"{prog()}: warning: {message}; their settings are not used", file=sys.stderr)
    local_table = settings.audit_table if settings.audit_table and "://" not in settings.audit_table else None
    journal = settings.audit_journal if settings.audit_table else None
    json_file = args.json_file if args.json_file not in (None, "-") else None
    check_outside_log_dirs(found, [("--audit-table", local_table), ("--audit-journal", journal), ("--json", json_file)])
    if settings.audit_table is not None and "://" not in settings.audit_table:
        _check_dir_can_exist(settings.audit_table, "--audit-table")
    if settings.audit_table is not None:
        _check_dir_can_exist(settings.audit_journal, "--audit-journal")
    topic_settings = settings.topic_settings()
    if getattr(args, "not_yet_tiered", False):
        from indexlib.cli import select_not_yet_tiered

        found = select_not_yet_tiered(found, topic_settings, args.remote_log_metadata)
        if not found.partitions:
            raise UsageError("--not-yet-tiered: no segment of a tiered topic is waiting to be copied")
    options = run_options(args.command, args, topic_settings, settings.backup_dir, store)
    # also: a writing run's --run-id whose backup dir holds files; a wrong --broker-id
    check_planned_run(found, options, topic_settings)
    if args.run_id is not None and not options.read_only:
        check_run_id_unused(args.run_id, settings, log_dir_identities(found, options.broker_id))
    return settings, found, options


def run_job(args: argparse.Namespace) -> int:
    from indexlib.storage import LockedLogDirError, ObjectStoreError

    try:  # refused before Spark's JVM starts: bad input (ConfigError, LogDirError: ValueErrors), a held lock
        settings, found, options = plan_run(args)
    except (ValueError, UsageError, ObjectStoreError, LockedLogDirError) as exc:
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    for path, reason in found.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    journal = None
    if settings.audit_table and (not options.dry_run or getattr(args, "audit_dry_run", False)):
        from .journal import AuditJournal

        recover_journals(settings.audit_journal, settings.audit_table, at_start=True,
                         storage_options=settings.audit_storage_options)  # fmt: skip
        journal = AuditJournal(settings.audit_journal, settings.audit_table, options.run_id or "", options)
    try:
        return _run_journaled(args, settings, found, options, journal)
    finally:  # a journal still there (rows the table did not take, a stopped run) is left for a merge
        if journal is not None:
            journal.release()


def _run_journaled(
    args: argparse.Namespace, settings: Settings, found: Discovery, options: RunOptions, journal: AuditJournal | None
) -> int:
    """The run on its engine, its report and audit rows (:func:`run_local` or the Spark job); its exit code."""
    if args.engine == "local":  # before any Spark import: a host with no pyspark runs it (the packed env)
        return run_local(args, settings, found, options, journal)
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    from indexlib.engine import LockedLogDirError
    from indexlib.storage import ObjectStoreError

    from .pipeline import SparkJobError, run

    delta_writer = False
    try:
        spark = spark_session(settings, f"{settings.spark_app_name}-{args.command}")
        if settings.audit_table:
            from .audit import spark_has_delta

            delta_writer = spark_has_delta(spark)
        if args.verbose:
            spark.sparkContext.setLogLevel("WARN")
    except (Py4JError, PySparkException, OSError) as exc:  # its JVM could not start, or died starting
        if (stop := received()) is not None:  # SIGINT/SIGTERM, then a call to the JVM failed
            return _stopped(stop)
        print(f"{prog()}: error: the Spark session could not start, no file was changed: {spark_failure(exc)}"
              f"{java_hint()}", file=sys.stderr)  # fmt: skip
        return 1
    progress = None if (args.no_progress or args.quiet) else ConsoleProgress()
    try:
        with stop_on_signals():  # again: PySpark's SparkContext put its own SIGINT handler in place
            report = run(spark, found, settings, options, progress, journal)
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the run's finally blocks swept what it staged
        return _stopped(exc, options, journal)
    except LockedLogDirError as exc:
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    except ObjectStoreError as exc:  # an executor's (or the driver's) reads of object storage failed
        return _object_store_failed(exc)
    except (Py4JError, PySparkException, SparkJobError, OSError) as exc:
        if (stop := received()) is not None:  # SIGINT/SIGTERM, then cleaning up met a failing call to the JVM
            return _stopped(stop, options, journal)
        if not isinstance(exc, OSError):  # the job failed (a killed executor, worker or JVM)
            print(f"{prog()}: error: the Spark job failed, no file was replaced: {spark_failure(exc)}", file=sys.stderr)
            return 1
        # a run lock or the journal could not be written: nothing more was replaced
        print(
            f"{prog()}: error: {error_line(exc, None)}; the run stopped before replacing any more files",
            file=sys.stderr,
        )
        return 1
    return finish_run(args, report, settings, journal, spark if delta_writer else None)


def finish_run(
    args: argparse.Namespace,
    report: RunReport,
    settings: Settings,
    journal: AuditJournal | None,
    delta_spark: SparkSession | None,
) -> int:
    """After the map and commit, for both engines: the report, its ``--json``, the audit rows, the exit code.
    ``delta_spark``: the session whose delta-spark writes the audit (decided before the run: the JVM may be
    gone by now), else delta-rs."""
    from indexlib.cli import print_report, settings_to_dict, write_json

    text_out = sys.stderr if args.json_file == "-" else sys.stdout  # stdout stays pure JSON
    if settings.cluster is not None and not args.quiet:
        print(f"settings: {settings.cluster.describe()}", file=text_out)
    print_report(report, text_out, report_level(args))
    if args.json_file:
        topics = [s.task.topic for s in report.segments]
        write_json(report, args.json_file, settings_to_dict(settings.topic_settings(), topics))
    if journal is not None and not write_audit(
        report, settings, journal, delta_spark, None if args.quiet else text_out
    ):
        return EXIT_AUDIT_FAILED
    if args.exit_zero_on_findings and not report.failed:
        return 0
    return report.exit_code


def run_local(
    args: argparse.Namespace, settings: Settings, found: Discovery, options: RunOptions, journal: AuditJournal | None
) -> int:
    """``--engine local``: the engine's map step in a pool of processes on this machine (``--jobs``), no JVM and
    no pyspark import; the report, ``--json`` and audit rows are those of a Spark run (:func:`finish_run`)."""
    from indexlib.engine import LockedLogDirError, WorkerDiedError, map_locally
    from indexlib.engine import run as run_engine
    from indexlib.storage import ObjectStoreError

    try:  # main's stop_on_signals is in place (no Spark replaced its handler)
        report = run_engine(found, options, settings.for_topic, map_locally(args.jobs), journal)
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the run's finally blocks swept what it staged
        return _stopped(exc, options, journal)
    except LockedLogDirError as exc:
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    except WorkerDiedError as exc:  # as a killed Spark executor: the map stopped, the run swept what it staged
        print(f"{prog()}: error: {exc} (run it again)", file=sys.stderr)
        return 1
    except ObjectStoreError as exc:
        return _object_store_failed(exc)
    except OSError as exc:  # a run lock or the journal could not be written: nothing more was replaced
        print(
            f"{prog()}: error: {error_line(exc, None)}; the run stopped before replacing any more files",
            file=sys.stderr,
        )
        return 1
    return finish_run(args, report, settings, journal, None)


def _object_store_failed(exc: Exception) -> int:
    """One line for a run whose reads of object storage failed (endpoint, credentials, an object that changed): it
    stopped before its commit, so nothing was written; exit 2, as ``python -m indexlib`` says it."""
    print(f"{prog()}: error: {exc}; the run stopped, nothing was written", file=sys.stderr)
    return 2


def _stopped(exc: KeyboardInterrupt, options: RunOptions | None = None, journal: AuditJournal | None = None) -> int:
    """One line for a run stopped by SIGINT or SIGTERM; its exit code (130, 143)."""
    name, code = stopped_by(exc)
    line = f"{prog()}: error: stopped by {name}"
    if options is not None and not options.read_only:
        line += "; every index file is the old one or the whole new one"
        if journal is not None and os.path.exists(journal.path):
            line += f"; the audit journal {journal.path} keeps what was replaced (the next run merges it)"
    print(line, file=sys.stderr)
    return code


def _check_dir_can_exist(path: str, option: str) -> None:
    """UsageError unless ``path`` is a directory or can be created as one (no file in the way)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(f"{path}: {option} must be a directory, but {probe} is a file")


# ------------------------------------------------------------------------------ dump / lookup
def run_dump(args: argparse.Namespace) -> int:
    """``kafka-index dump``: the library's dump command, as ``python -m indexlib dump``."""
    from indexlib.cli import DumpUsageError, run_dump_command

    try:
        return run_dump_command(args, sys.stdout, sys.stderr, prog())
    except DumpUsageError as exc:
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2


def run_remote_inventory(args: argparse.Namespace) -> int:
    """``kafka-index remote-inventory``: the library's command, as ``python -m indexlib remote-inventory``."""
    from indexlib.cli import run_remote_inventory_command

    return run_remote_inventory_command(args, sys.stdout, sys.stderr, prog())


def _remote_job_options(p: argparse.ArgumentParser) -> None:
    """What ``verify-remote`` and ``rebuild-remote`` take as jobs: the engine, the config, the audit table."""
    p.add_argument(
        "--engine",
        choices=("spark", "local"),
        default="spark",
        help="spark: one Spark task per bin of segments, the executors reading the bucket themselves (the "
        "default); local: threads on this machine (--jobs), no JVM; the same report and audit rows",
    )
    p.add_argument("--config", metavar="FILE", help="settings file instead of conf/defaults.yaml")
    p.add_argument("--audit-table", metavar="PATH", help="Delta audit table path/URI; 'none' disables auditing")
    _storage_option(p)


def run_verify_remote(args: argparse.Namespace) -> int:
    """``kafka-index verify-remote``: tiered segments checked by Spark's executors (or ``--engine local``)."""
    return run_remote_job(args)


def run_rebuild_remote(args: argparse.Namespace) -> int:
    """``kafka-index rebuild-remote``: tiered segments' index objects rebuilt by Spark's executors (or locally)."""
    args.full = False
    return run_remote_job(args)


def _remote_on_spark(
    args: argparse.Namespace, settings: Settings, tasks: list[RemoteSegmentTask], run_id: str
) -> list[RemoteSegmentOutcome]:
    """The remote tasks' outcomes from a Spark job; :class:`SparkJobError` (one line) when the job fails (an
    executor's error, a lost JVM)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from .pipeline import SparkJobError
    from .remote_pipeline import spark_verify_remote

    try:
        spark = spark_session(settings, f"{settings.spark_app_name}-{args.command}")
        return spark_verify_remote(spark.sparkContext, tasks, settings.bytes_per_task, run_id, max(1, args.jobs))
    except (Py4JError, PySparkException) as exc:
        raise SparkJobError(spark_failure(exc)) from None


def run_remote_job(args: argparse.Namespace) -> int:
    """``verify-remote`` / ``rebuild-remote`` as a job: plan from the metadata, map on Spark (or threads), print
    the library's report, write one audit row per remote segment and one for the run."""
    from datetime import UTC, datetime

    from indexlib.cli import plan_remote_tasks, report_rebuild_remote, report_verify_remote
    from indexlib.engine import new_run_id, verify_remote_segments
    from indexlib.storage import ObjectStoreError

    from .config import resolve_settings
    from .pipeline import SparkJobError

    rebuild = args.command == "rebuild-remote"
    started = datetime.now(UTC)
    run_id = new_run_id(args.command)
    try:
        settings = resolve_settings(
            config_file=args.config, audit_table=args.audit_table, audit_storage_options=args.audit_storage_option
        )
        tasks = plan_remote_tasks(args)
        if args.engine == "local":
            outcomes = list(verify_remote_segments(tasks, max(1, args.jobs)))
        else:
            outcomes = _remote_on_spark(args, settings, tasks, run_id)
    except (ValueError, OSError, ObjectStoreError) as exc:  # KafkaIndexErrors are ValueErrors
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    except SparkJobError as exc:
        print(f"{prog()}: error: the Spark job failed, no object was written: {exc}", file=sys.stderr)
        return 1
    code = (report_rebuild_remote if rebuild else report_verify_remote)(args, outcomes, sys.stdout)
    if settings.audit_table:
        from . import audit

        mode = "rebuild" if rebuild else ("full" if args.full else "index-only")
        common = audit.run_common(run_id, args.command, started, datetime.now(UTC))
        seconds = (common["run_finished"] - started).total_seconds()
        rows = audit.remote_rows(outcomes, common, args.remote.rstrip("/"), args.layout, mode, code, seconds)
        try:
            audit.write(settings.audit_table, audit.to_table(rows), storage_options=settings.audit_storage_options)
        except Exception as exc:  # the table cannot take the rows: the report stands, the exit says so
            print(f"{prog()}: error: the audit table {settings.audit_table} did not take the run's rows: {exc}",
                  file=sys.stderr)  # fmt: skip
            return EXIT_AUDIT_FAILED
    return code


def run_remote_index_cache(args: argparse.Namespace) -> int:
    """``kafka-index remote-index-cache``: a broker's remote-log-index-cache checked (and repaired)."""
    from indexlib.cli import run_remote_index_cache_command

    return run_remote_index_cache_command(args, sys.stdout, sys.stderr, prog())


def run_lookup(args: argparse.Namespace) -> int:
    from indexlib.cli import check_target, lookup, print_lookup

    try:
        check_target(args.offset, args.timestamp)
    except ValueError as exc:  # a usage error: no file to name
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    try:
        answer = lookup(args.segment, args.offset, args.timestamp, args.ceiling)
    except (OSError, ValueError) as exc:
        print(f"{prog()}: error: {error_line(exc, args.segment)}", file=sys.stderr)
        return 2
    return print_lookup(answer, args.as_json, sys.stdout)


#: the commands that run the engine over log dirs
JOB_COMMANDS = ("verify", "rebuild", "repair", "recover")


def main(argv: list[str] | None = None) -> int:
    from indexlib.cli import keep_output_in_order

    keep_output_in_order()
    parser = build_parser()
    try:
        known, extra = parser.parse_known_args(argv)
        if extra and getattr(known, "command", None) in JOB_COMMANDS and not any(a.startswith("-") for a in extra):
            # `kafka-index verify /var/lib/kafka/data`, as `python -m indexlib verify` takes it
            paths = " ".join(f"--log-dir {a}" for a in extra)
            print(f"{prog()}: error: unrecognized arguments: {' '.join(extra)} (log dirs are given as {paths})",
                  file=sys.stderr)  # fmt: skip
            return 2
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage error (2) or --help (0); argparse printed why
        return exc.code if isinstance(exc.code, int) else 2
    return _run_command(args)


def indexlib_repair(argv: list[str]) -> int:
    """``python -m indexlib repair LOG_DIR...``: ``kafka-index repair --engine local``, the same code path, report,
    ``--json``, audit rows and journal, on the library's command line (which has no audit of its own: it finds
    this function through the entry point ``repair`` of ``indexlib.cli.COMMAND_PLUGINS``). Its LOG_DIRs are
    ``--log-dir``s; its error lines say ``python -m indexlib``."""
    from indexlib.cli import PROG as INDEXLIB_PROG
    from indexlib.cli import keep_output_in_order

    keep_output_in_order()
    with running_as(INDEXLIB_PROG):
        try:
            args = indexlib_repair_parser().parse_args(argv)
        except SystemExit as exc:  # usage error (2) or --help (0); argparse printed why
            return exc.code if isinstance(exc.code, int) else 2
        args.command, args.engine = "repair", "local"
        args.log_dirs = [*args.paths, *(args.log_dirs or [])] or None
        return _run_command(args)


def indexlib_repair_parser() -> argparse.ArgumentParser:
    """``python -m indexlib repair``'s options: ``kafka-index repair``'s but ``--engine``, and LOG_DIRs."""
    from indexlib.cli import PROG as INDEXLIB_PROG

    text = "verify, then rebuild only what is wrong, with backups and audit rows (kafka-index repair --engine local)"
    parser = _Parser(prog=f"{INDEXLIB_PROG} repair", description=text)
    parser.add_argument("paths", nargs="*", metavar="LOG_DIR", help="a Kafka log dir (repeatable; as --log-dir)")
    _job_options(parser, "repair", engines=False)
    return parser


def _run_command(args: argparse.Namespace) -> int:
    """A parsed command run under the signal handlers; its exit code."""
    try:
        with stop_on_signals():
            if args.command in JOB_COMMANDS:
                code = run_job(args)
            elif args.command == "dump":
                code = run_dump(args)
            elif args.command == "lookup":
                code = run_lookup(args)
            elif args.command == "remote-inventory":
                code = run_remote_inventory(args)
            elif args.command == "verify-remote":
                code = run_verify_remote(args)
            elif args.command == "rebuild-remote":
                code = run_rebuild_remote(args)
            elif args.command == "remote-index-cache":
                code = run_remote_index_cache(args)
            else:
                code = run_audit(args)
            sys.stdout.flush()  # here, where a closed stdout is still caught
        return code
    except BrokenPipeError:  # the reader of stdout went away (| head): end quietly
        return stdout_closed()
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM outside a run's scan and commit
        return _stopped(exc)


if __name__ == "__main__":
    raise SystemExit(main())
