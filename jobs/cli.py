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
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NoReturn, TextIO, TypeVar

from indexlib.engine import received, stdout_closed, stop_on_signals, stopped_by
from indexlib.format import describe_error, error_line

from .config import Settings, conf_dir

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway  # type: ignore[import-untyped]
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    from indexlib.engine import RunOptions, RunReport

    from .journal import AuditJournal


PROG = "kafka-index"
LOG4J_FILE = conf_dir() / "log4j2.properties"
T = TypeVar("T")


class UsageError(Exception):
    """Bad usage or bad input: one message, exit code 2."""


#: the work is done, but its audit rows are only in the journal (the table write failed)
EXIT_AUDIT_FAILED = 3
#: ``audit --recover``: a journal has lines that are not records (its readable rows merged, the file kept)
EXIT_JOURNAL_DAMAGED = 4


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _job_options(p: argparse.ArgumentParser, mode: str) -> None:
    p.add_argument(
        "--log-dir",
        action="append",
        dest="log_dirs",
        metavar="DIR",
        help="a Kafka log dir (repeatable; Kafka's log.dirs)",
    )
    p.add_argument("--topics", metavar="REGEX", help="only topics whose whole name matches this regex")
    p.add_argument("--partitions", metavar="LIST", help="only these partition numbers, e.g. 0,3,5-7")
    p.add_argument("--topic-config", metavar="FILE", help="JSON/YAML: topic -> Kafka topic configs")
    p.add_argument(
        "--server-properties", metavar="FILE", help="a broker's server.properties (log.dirs, index settings)"
    )
    p.add_argument("--index-interval-bytes", type=int, metavar="N", help="the topics' index.interval.bytes")
    p.add_argument("--segment-index-bytes", type=int, metavar="N", help="the topics' segment.index.bytes")
    p.add_argument("--audit-table", metavar="PATH", help="Delta audit table path/URI; 'none' disables auditing")
    p.add_argument(
        "--audit-journal",
        metavar="DIR",
        help="local dir where the run's audit rows wait (fsynced) until the table has them "
        "(default: ./kafka-index-audit-journal)",
    )
    p.add_argument(
        "--json", metavar="FILE", dest="json_file", help="write the machine-readable report here ('-': stdout)"
    )
    p.add_argument("--config", metavar="FILE", help="settings file instead of conf/defaults.yaml")
    p.add_argument("--run-id", metavar="ID", help="run id for the audit table (default: generated)")
    if mode != "verify":  # verify writes nothing: no backups, no lock to override
        p.add_argument("--backup-dir", metavar="DIR", help="where previous files are kept before being replaced")
        p.add_argument("--force", action="store_true", help="write even if a broker seems to hold the log dir's .lock")
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "-q", "--quiet", action="store_true", help="print only failures, errors and the verdict line; no progress"
    )
    loud.add_argument("-v", "--verbose", action="store_true", help="also the time of each phase, and Spark's warnings")
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
    p.add_argument(
        "--exit-zero-on-findings",
        action="store_true",
        help="exit 0 when the run itself succeeded, even with findings (for schedulers that branch on --json)",
    )
    if mode == "rebuild":
        p.add_argument("--output-dir", metavar="DIR", help="write into DIR/<topic>-<partition>/; log dirs untouched")
        p.add_argument("--dry-run", action="store_true", help="report what would be rebuilt; write nothing")
    if mode == "repair":
        p.add_argument("--dry-run", action="store_true", help="verify and report what would be repaired; write nothing")
    if mode != "verify":
        p.add_argument(
            "--audit-dry-run",
            action="store_true",
            help="with --dry-run: still record the run in the audit table (a dry run writes no rows otherwise)",
        )
        p.add_argument(
            "--truncate-corrupt-tail",
            action="store_true",
            help="also cut a corrupt .log tail (saved to the backup dir first); off by default",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    from indexlib import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for mode, text in (
        ("verify", "check every index file against its .log (read-only)"),
        ("rebuild", "rewrite every selected index file as Kafka's recovery would"),
        ("repair", "verify, then rebuild only what is wrong, with backups"),
    ):
        _job_options(sub.add_parser(mode, help=text, description=text), mode)
    text = "print an index file or a .log's batch headers"
    dump = sub.add_parser("dump", help=text, description=text)
    dump.add_argument("file", help="<20-digit base offset>.{index,timeindex,txnindex,log}")
    dump.add_argument("--json", action="store_true", dest="as_json", help="print JSON instead of text")
    text = "find an offset or timestamp through a segment's indexes, as a broker's fetch would"
    lookup = sub.add_parser("lookup", help=text, description=text)
    lookup.add_argument("--segment", required=True, metavar="PATH.log", help="the segment's .log")
    what = lookup.add_mutually_exclusive_group(required=True)
    what.add_argument("--offset", type=int, help="the offset to find")
    what.add_argument("--timestamp", type=int, metavar="MS", help="the first batch with a timestamp >= MS")
    lookup.add_argument("--ceiling", action="store_true", help="use the smallest entry at or above the target")
    lookup.add_argument("--json", action="store_true", dest="as_json", help="print JSON instead of text")
    text = "query the Delta audit table (the latest run by default), or merge rows kept in the audit journal"
    audit = sub.add_parser("audit", help=text, description=text)
    audit.add_argument("--audit-table", metavar="PATH", help="the table (default: the config's audit_table)")
    audit.add_argument("--config", metavar="FILE", help="settings file instead of conf/defaults.yaml")
    q = audit.add_mutually_exclusive_group()
    q.add_argument("--latest", action="store_true", help="the latest run's summary (default)")
    q.add_argument("--repaired", action="store_true", help="segments repaired in the time window")
    q.add_argument("--failing", action="store_true", help="segments with findings or failures in the time window")
    q.add_argument("--partition", metavar="TOPIC-N", help="history of one partition")
    q.add_argument("--sql", help="free SQL over the table, registered as 'audit'")
    q.add_argument(
        "--recover",
        action="store_true",
        help="merge the rows kept in the audit journal (runs killed in their commit, failed table writes)",
    )
    audit.add_argument("--audit-journal", metavar="DIR", help="the journal dir (default: the config's)")
    audit.add_argument("--since", help="window start: 7d, 12h, 30m, today, yesterday or ISO (UTC); default 7d")
    audit.add_argument("--until", help="window end, same forms as --since; default now")
    audit.add_argument("--json", action="store_true", dest="as_json", help="print JSON rows instead of a table")
    return parser


# ------------------------------------------------------------------------------------- progress
class ConsoleProgress:
    """Progress of the scan on stderr, polled on the driver (segments, MiB, Spark tasks, rate, ETA): on a
    terminal a bar redrawn every ``interval`` seconds; otherwise (a log file, Airflow) a line at the start and
    one every ``log_every`` seconds. Until a first task runs it says it is waiting for executors (a cluster
    takes 20-30 s to start them). Works in local and cluster mode (accumulators and Spark's status tracker)."""

    def __init__(
        self, stream: TextIO = sys.stderr, interval: float = 0.5, tty: bool | None = None, log_every: float = 10.0
    ) -> None:
        self.stream, self.interval, self.log_every = stream, interval, log_every
        self.tty = stream.isatty() if tty is None else tty
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, total: int, total_bytes: int, poll: Callable[[], tuple[int, int, int, int, int]]) -> None:
        self.total, self.total_bytes, self.poll, self.t0 = total, total_bytes, poll, time.monotonic()
        self._stop.clear()
        if not self.tty:  # a log shows at once that the scan was submitted
            self.stream.write(self._line() + "\n")
            self.stream.flush()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _line(self) -> str:
        done, done_bytes, tasks_done, tasks_running, tasks = self.poll()
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        rate = done_bytes / elapsed
        left = self.total_bytes - done_bytes
        eta = f", ETA {left / rate:,.0f} s" if done_bytes and left > 0 else ""
        waiting = f" (waiting for executors, {elapsed:,.0f} s)" if not (tasks_done or tasks_running) else ""
        text = (
            f"{done}/{self.total} segments, {done_bytes / 2**20:,.0f}/{self.total_bytes / 2**20:,.0f} MiB, "
            f"{tasks_done}/{tasks} tasks{waiting}, {rate / 2**20:,.0f} MiB/s{eta}"
        )
        if not self.tty:
            return f"progress: {text}"
        width = 30
        filled = int(width * done / self.total) if self.total else width
        return f"\r[{'#' * filled}{'.' * (width - filled)}] {text}"

    def _loop(self) -> None:
        every = self.interval if self.tty else self.log_every
        while not self._stop.wait(every):
            try:
                line = self._line()
            except Exception:  # Spark is gone (its JVM died): the run reports that, the display just ends
                return
            self.stream.write(line + ("" if self.tty else "\n"))
            self.stream.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            try:
                line = self._line() + "\n"
            except Exception:  # Spark is gone: no last line (a bar still ends its own)
                line = "\n" if self.tty else ""
            self.stream.write(line)
            self.stream.flush()


# ----------------------------------------------------------------------------------------- jobs
def spark_session(settings: Settings, app_name: str) -> SparkSession:
    """The session: spark-submit's master when launched by it, else the configured one (``local[*]``). The JVM
    logs nothing below FATAL (a failed job is reported in one line by the run; ``-v`` sets WARN)."""
    from pyspark.sql import SparkSession

    _quiet_py4j()  # before the JVM starts: it may die while the session starts
    # PySpark's worker daemon, quiet when the JVM hangs up on an idle worker at the end (jobs.spark_daemon)
    builder = SparkSession.builder.appName(app_name).config("spark.python.daemon.module", "jobs.spark_daemon")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: embedded local Spark
        from pyspark import SparkConf, SparkContext

        # Python workers must run this interpreter (its packages), not whatever python3 is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        conf = SparkConf().setAppName(app_name).setMaster(settings.spark_master)
        conf.set("spark.python.daemon.module", "jobs.spark_daemon")
        if LOG4J_FILE.exists():
            conf.set("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={LOG4J_FILE}")
        for key, value in settings.spark_conf.items():
            conf.set(key, value)
        if SparkContext._active_spark_context is None:  # the JVM starts here, its stderr filtered
            SparkContext(conf=conf, gateway=_launch_jvm(conf))
        builder = builder.config(conf=conf)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    _quiet_when_the_jvm_dies(spark)
    return spark


#: what Java 17 prints at every start of Spark 4's JVM, whose launcher always adds the incubating Vector API
#: module (no JVM option turns the notice off); :func:`_launch_jvm` drops it
JDK_NOTICE = b"WARNING: Using incubator modules: jdk.incubator.vector"


def _launch_jvm(conf: SparkConf) -> JavaGateway:
    """Start Spark's JVM as PySpark does (``launch_gateway``), its stderr through a pipe that a daemon thread
    copies line by line to ours, all but :data:`JDK_NOTICE`: the JVM's other lines (``-v``'s warnings, a
    FATAL) are printed as before. The thread reads from before the JVM starts, so a full pipe never blocks it."""
    from pyspark.java_gateway import launch_gateway

    read_end, write_end = os.pipe()
    threading.Thread(target=_copy_jvm_stderr, args=(read_end,), name="jvm-stderr", daemon=True).start()
    try:
        return launch_gateway(conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
    finally:
        os.close(write_end)  # the JVM holds its own copy: the thread ends when the JVM does


def _copy_jvm_stderr(read_end: int) -> None:
    with os.fdopen(read_end, "rb", buffering=0) as jvm_stderr:
        for line in iter(jvm_stderr.readline, b""):
            if line.rstrip(b"\r\n") != JDK_NOTICE:
                os.write(2, line)  # the process's stderr, where the JVM's own would go


def _not_from_py4j(record: logging.LogRecord) -> bool:
    return os.path.basename(os.path.dirname(record.pathname)) != "py4j"


def _quiet_py4j() -> None:
    """py4j logs every failed call to the JVM with its trace: through its own loggers (set to CRITICAL here),
    and in some paths (``GatewayClient.send_command``: a failed send, a KeyboardInterrupt while waiting)
    through the *root* logger, whose first use installs a stderr handler (``logging.basicConfig``). When the
    JVM dies those traces would come before the run's one line, at moments that depend on when Python
    collects its Java objects. A filter on the root logger drops py4j's records (only records logged on the
    root logger itself pass its filters); an empty root gets ``logging.lastResort`` as its handler, so a
    first root record no longer installs another and everything else prints as it did."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    root = logging.getLogger()
    if _not_from_py4j not in root.filters:
        root.addFilter(_not_from_py4j)
    if not root.handlers and logging.lastResort is not None:
        root.addHandler(logging.lastResort)


def _quiet_when_the_jvm_dies(spark: SparkSession) -> None:
    """If the JVM dies, the run reports it in one line (a Py4JError reaches ``run_job``), but PySpark's
    accumulator server thread prints an EOFError trace: quiet its error hook (PySpark's own object: no public
    setting reaches it; losing an accumulator update only slows the progress display)."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None


def run_job(args: argparse.Namespace) -> int:
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    from indexlib.cli import check_json_target, print_report, write_json
    from indexlib.engine import LockedLogDirError, RunOptions, check_run, new_run_id
    from indexlib.storage import discover, is_partition_dir, parse_partition_filter

    from .config import resolve_settings
    from .pipeline import SparkJobError, run

    try:
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
        )
        if not settings.log_dirs:
            raise UsageError("no log dir: give --log-dir DIR (repeatable) or --server-properties FILE")
        try:
            topics = re.compile(args.topics) if args.topics else None
        except re.error as exc:
            raise UsageError(f"--topics: invalid regex {args.topics!r}: {exc}") from None
        partitions = parse_partition_filter(args.partitions)
        output_dir = getattr(args, "output_dir", None)
        if output_dir and os.path.exists(output_dir) and not os.path.isdir(output_dir):
            raise UsageError(f"{output_dir}: --output-dir exists and is not a directory")
        check_json_target(args.json_file)
        for log_dir in settings.log_dirs:
            if is_partition_dir(log_dir):
                raise UsageError(
                    f"{log_dir}: --log-dir names a partition dir; give its log dir "
                    f"{os.path.dirname(os.path.abspath(log_dir))} (and --topics/--partitions to choose)"
                )
        found = discover(settings.log_dirs, topics, partitions)
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
            print(f"{PROG}: warning: {message}; their settings are not used", file=sys.stderr)
        if settings.audit_table is not None and "://" not in settings.audit_table:
            _check_dir_can_exist(settings.audit_table, "--audit-table")
        if settings.audit_table is not None:
            _check_dir_can_exist(settings.audit_journal, "--audit-journal")
        options = RunOptions(
            args.command,
            args.run_id or new_run_id(args.command),
            output_dir,
            getattr(args, "dry_run", False),
            getattr(args, "truncate_corrupt_tail", False),
            getattr(args, "force", False),
            settings.backup_dir,
        )
        check_run(found, options)  # also: a writing run's --run-id whose backup dir holds files
        if args.run_id and not options.read_only:
            _check_run_id_unused(args.run_id, settings)
    except (ValueError, UsageError) as exc:  # ConfigError, LogDirError are ValueErrors
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    for path, reason in found.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    journal = None
    if settings.audit_table and (not options.dry_run or getattr(args, "audit_dry_run", False)):
        from .journal import AuditJournal

        _recover_journals(settings.audit_journal, settings.audit_table, at_start=True)
        journal = AuditJournal(settings.audit_journal, settings.audit_table, options.run_id or "", options)
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
        print(f"{PROG}: error: the Spark session could not start, no file was changed: {spark_failure(exc)}",
              file=sys.stderr)  # fmt: skip
        return 1
    progress = None if (args.no_progress or args.quiet) else ConsoleProgress()
    try:
        with stop_on_signals():  # again: PySpark's SparkContext put its own SIGINT handler in place
            report = run(spark, found, settings, options, progress, journal)
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the run's finally blocks swept what it staged
        return _stopped(exc, options, journal)
    except LockedLogDirError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (Py4JError, PySparkException, SparkJobError, OSError) as exc:
        if (stop := received()) is not None:  # SIGINT/SIGTERM, then cleaning up met a failing call to the JVM
            return _stopped(stop, options, journal)
        if not isinstance(exc, OSError):  # the job failed (a killed executor, worker or JVM)
            print(f"{PROG}: error: the Spark job failed, no file was replaced: {spark_failure(exc)}", file=sys.stderr)
            return 1
        # a run lock or the journal could not be written: nothing more was replaced
        print(
            f"{PROG}: error: {error_line(exc, None)}; the run stopped before replacing any more files", file=sys.stderr
        )
        return 1
    text_out = sys.stderr if args.json_file == "-" else sys.stdout  # stdout stays pure JSON
    print_report(report, text_out, "quiet" if args.quiet else "verbose" if args.verbose else "normal")
    if args.json_file:
        write_json(report, args.json_file)
    delta_spark = spark if delta_writer else None  # decided before the run: the JVM may be gone by now
    if journal is not None and not _write_audit(
        report, settings, journal, delta_spark, None if args.quiet else text_out
    ):
        return EXIT_AUDIT_FAILED
    if args.exit_zero_on_findings and not report.failed:
        return 0
    return report.exit_code


def _stopped(exc: KeyboardInterrupt, options: RunOptions | None = None, journal: AuditJournal | None = None) -> int:
    """One line for a run stopped by SIGINT or SIGTERM; its exit code (130, 143)."""
    name, code = stopped_by(exc)
    line = f"{PROG}: error: stopped by {name}"
    if options is not None and not options.read_only:
        line += "; every index file is the old one or the whole new one"
        if journal is not None and os.path.exists(journal.path):
            line += f"; the audit journal {journal.path} keeps what was replaced (the next run merges it)"
    print(line, file=sys.stderr)
    return code


def _write_audit(
    report: RunReport, settings: Settings, journal: AuditJournal, spark: object, out: TextIO | None
) -> bool:
    """Journal every row of the run, then merge them into the table (a line on ``out`` unless None); False
    (one error line) when the table write fails: the rows stay in the journal for ``audit --recover``."""
    from . import audit

    table = settings.audit_table or ""
    rows = audit.rows_for(report, settings)
    kept = True
    try:
        journal.finish(rows)
    except OSError as exc:
        kept = False
        print(f"{PROG}: warning: audit journal {journal.path}: {describe_error(exc)}", file=sys.stderr)
    try:
        writer, inserted, replaced = _quiet_if_it_fails(audit.write, table, audit.to_table(rows), spark)
    except Exception as exc:  # deltalake/DataFusion errors, OSError (a full disk), an unreachable URI
        where = f"kept in {journal.path}; merge them with `{PROG} audit --recover`" if kept else "LOST"
        print(f"{PROG}: error: audit table {table}: {_first_line(exc)}; the run's {len(rows)} rows are {where}",
              file=sys.stderr)  # fmt: skip
        return False
    journal.remove()
    added = f"{len(rows)} rows merged" if inserted is None else f"{inserted} of {len(rows)} rows new"
    if replaced:
        added += f", {replaced} replacing stale rows of an earlier attempt"
    if out is not None:
        print(f"audit: {added} in {table} ({writer}), run id {report.run_id}", file=out)
    return True


def _quiet_if_it_fails(call: Callable[..., T], *args: object) -> T:
    """``call(*args)`` with file descriptor 2 led into a pipe: if it raises, what was written there is dropped (the
    caller reports the failure in one line); if it returns, that text goes to stderr as it would have. For
    the audit table's writer: delta-rs prints a Rust panic message to fd 2 from one of its own threads when
    a write fails (a full disk) before the error reaches Python, and a panic in the calling thread arrives
    as pyo3's ``PanicException``, a ``BaseException``: it is raised as a ``RuntimeError`` here."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    held: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(read_end, held), daemon=True)
    reader.start()
    saved = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    failed = True
    try:
        result = call(*args)
        failed = False
        return result
    except BaseException as exc:
        if type(exc).__name__ == "PanicException":
            raise RuntimeError(f"the writer panicked: {exc}") from None
        raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last write end closes: the reader sees its end
        os.close(saved)
        reader.join(timeout=10)
        if not failed and held:
            sys.stderr.write(b"".join(held).decode(errors="replace"))
            sys.stderr.flush()


def _drain(fd: int, into: list[bytes]) -> None:
    with open(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            into.append(chunk)


def _first_line(exc: BaseException) -> str:
    text = describe_error(exc) if isinstance(exc, OSError) else str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_run_id_unused(run_id: str, settings: Settings) -> None:
    """UsageError when a writing run's ``--run-id`` was used by an earlier run that may have replaced files,
    by the jobs' evidence (its backup dir is the engine's, :func:`indexlib.engine.options.check_backups_unused`):
    the run's audit journal, or rows of the audit table that record files written. A table that does not
    exist is no evidence; one that cannot be read gets a warning (its write will fail the same way, and the
    rows then wait in the journal)."""
    from . import audit
    from .journal import journal_path

    path = journal_path(settings.audit_journal, run_id)
    if os.path.lexists(path):
        raise UsageError(
            f"{path}: run id {run_id!r} has the audit journal of an earlier run that may have replaced files; "
            "give a new --run-id"
        )
    if not settings.audit_table:
        return
    try:
        rows = audit.rows_with_files(settings.audit_table, run_id)
    except Exception as exc:  # an unreachable URI, a damaged table
        print(f"{PROG}: warning: audit table {settings.audit_table}: cannot check whether run id {run_id!r} was "
              f"used before: {_first_line(exc)}", file=sys.stderr)  # fmt: skip
        return
    segments = [r for r in rows if r["record_type"] == "segment"]
    if rows:
        first = segments[0] if segments else rows[0]
        example = f", e.g. {first['topic']}-{first['partition']} base offset {first['base_offset']}" if segments else ""
        raise UsageError(
            f"audit table {settings.audit_table}: run id {run_id!r} has rows of an earlier run that replaced files "
            f"({len(segments)} segment rows{example}); a re-run under that id could not record its own: give a new "
            "--run-id"
        )


def _lines(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:10])) + (f", ... ({len(numbers)} lines)" if len(numbers) > 10 else "")
    return f"line{'s' if len(numbers) > 1 else ''} {shown}"


def _recover_journals(journal_dir: str, table: str, at_start: bool) -> int:
    """Merge the rows waiting in ``journal_dir``'s journals for ``table``, a line for each journal on stderr.
    Returns ``audit --recover``'s exit code: 0 every journal merged and removed; EXIT_AUDIT_FAILED a journal
    is kept with rows waiting (the table write failed, or it is another table's: its rows are never merged
    elsewhere); EXIT_JOURNAL_DAMAGED a journal has unreadable lines (its readable rows are merged, the file is
    kept for a person to mend: never removed). At a run's start (``at_start``) problems are warnings that
    never stop the run, and other tables' journals are left to runs on those tables, unsaid."""
    from .journal import journal_paths, load, recover

    level = "warning" if at_start else "error"
    code = 0
    for path in journal_paths(journal_dir):
        try:
            journal = load(path)
        except FileNotFoundError:  # merged and removed meanwhile (another run)
            continue
        except OSError as exc:
            code = max(code, EXIT_JOURNAL_DAMAGED)
            print(f"{PROG}: {level}: audit journal {path}: cannot read it: {describe_error(exc)}", file=sys.stderr)
            continue
        header = journal.header
        if header is not None and header["table"] != table:
            if not at_start:
                code = max(code, EXIT_AUDIT_FAILED)
                print(f"{PROG}: error: audit journal {journal.path}: its rows are for audit table {header['table']}, "
                      f"not {table}: not merged (`{PROG} audit --recover --audit-table {header['table']}`)",
                      file=sys.stderr)  # fmt: skip
            continue
        if header is None:
            code = max(code, EXIT_JOURNAL_DAMAGED)
            bad = f" (unreadable: {_lines(journal.unreadable)})" if journal.unreadable else ""
            print(f"{PROG}: {level}: audit journal {journal.path}: its first line (the run id and table) is missing "
                  f"or unreadable{bad}: nothing in it can be merged; the file is kept: mend or remove it",
                  file=sys.stderr)  # fmt: skip
            continue
        try:
            run_id, count, inserted, replaced, finished = _quiet_if_it_fails(recover, journal, table)
        except Exception as exc:
            code = max(code, EXIT_AUDIT_FAILED)
            print(f"{PROG}: {level}: audit journal {journal.path}: cannot merge into {table}: {_first_line(exc)}",
                  file=sys.stderr)  # fmt: skip
            continue
        state = "finished" if finished else "interrupted"
        new = f"{inserted} of {count}" if inserted is not None else f"{count}"
        also = f", {replaced} replacing stale rows" if replaced else ""
        print(f"audit: merged {new} rows{also} of {state} run {run_id} from {journal.path} into {table}",
              file=sys.stderr)  # fmt: skip
        if journal.unreadable:
            code = max(code, EXIT_JOURNAL_DAMAGED)
            print(f"{PROG}: {level}: audit journal {journal.path}: {_lines(journal.unreadable)} unreadable (not "
                  "journal records), so their rows are not merged; the file is kept: mend or remove those lines, "
                  f"then `{PROG} audit --recover`", file=sys.stderr)  # fmt: skip
    return code


def spark_failure(exc: BaseException) -> str:
    """The reason of a failed Spark job in one line (a Py4JJavaError's message is a Java stack trace)."""
    text = str(exc)
    for marker in ("Job aborted due to stage failure: ", "SparkException: "):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return line if len(line) <= 300 else line[:297] + "..."


def _check_dir_can_exist(path: str, option: str) -> None:
    """UsageError unless ``path`` is a directory or can be created as one (no file in the way)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(f"{path}: {option} must be a directory, but {probe} is a file")


# ------------------------------------------------------------------------------ dump / lookup
def run_dump(args: argparse.Namespace) -> int:
    """``kafka-index dump``: :func:`indexlib.cli.dump.write_dump`, as ``python -m indexlib dump``."""
    from indexlib.cli import write_dump

    try:
        return write_dump(args.file, args.as_json, sys.stdout)
    except BrokenPipeError:  # stdout, not the file: main ends quietly
        raise
    except (OSError, ValueError) as exc:
        print(f"{PROG}: error: {error_line(exc, args.file)}", file=sys.stderr)
        return 2


def run_lookup(args: argparse.Namespace) -> int:
    from indexlib.cli import check_target, lookup, print_lookup

    try:
        check_target(args.offset, args.timestamp)
    except ValueError as exc:  # a usage error: no file to name
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    try:
        answer = lookup(args.segment, args.offset, args.timestamp, args.ceiling)
    except (OSError, ValueError) as exc:
        print(f"{PROG}: error: {error_line(exc, args.segment)}", file=sys.stderr)
        return 2
    return print_lookup(answer, args.as_json, sys.stdout)


# ------------------------------------------------------------------------------------------ audit
def run_audit(args: argparse.Namespace) -> int:
    from . import audit
    from .config import ConfigError, load_config_file

    try:
        conf = load_config_file(args.config)
        table = args.audit_table or conf["audit_table"]
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if not table or table.lower() == "none":
        print(f"{PROG}: error: no audit table configured (give --audit-table PATH)", file=sys.stderr)
        return 2
    if args.recover:
        if args.since or args.until:
            print(f"{PROG}: error: --since/--until do not apply to --recover", file=sys.stderr)
            return 2
        journal_dir = args.audit_journal or conf["audit_journal"]
        return _recover_journals(journal_dir, table, at_start=False)
    try:
        if (args.since or args.until) and not (args.repaired or args.failing):
            raise UsageError("--since/--until choose the window of --repaired and --failing; they do not apply here")
        if args.sql:
            sql = args.sql
        elif args.repaired or args.failing:
            until = _parse_time(args.until, option="--until") if args.until else datetime.now(UTC)
            if args.since:
                since = _parse_time(args.since, option="--since")
            elif until.year > 1 or until.month > 1 or until.day > 7:
                since = until - timedelta(days=7)
            else:
                raise UsageError(f"--until: {args.until!r} leaves no 7-day window after year 1; give --since too")
            sql = audit.window_sql(since, until, "repaired" if args.repaired else "failing")
        elif args.partition:
            from indexlib.format import parse_partition_dir_name

            named = parse_partition_dir_name(args.partition)
            if named is None:
                raise UsageError(f"--partition: expected TOPIC-N, got {args.partition!r}")
            sql = audit.partition_history_sql(*named)
        else:
            sql = audit.latest_run_sql()
        result = audit.query(table, sql)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # deltalake's TableNotFoundError, DataFusion SQL errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{PROG}: error: audit table {table}: {first}", file=sys.stderr)
        return 2
    rows = result.to_pylist()
    if args.as_json:
        print(json.dumps(rows, indent=2, default=str))
    else:
        from indexlib.cli import format_table

        print(format_table(result.column_names, [[_short(r[c]) for c in result.column_names] for r in rows]))
        print(f"({len(rows)} rows)")
    return 0


def _short(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)


def _parse_time(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """``7d``, ``12h``, ``30m`` (ago), ``today``, ``yesterday`` (UTC midnights) or an ISO date/time (UTC
    unless it says otherwise), in UTC. UsageError naming ``option`` for anything else, or a time before
    the calendar's year 1."""
    now = now or datetime.now(UTC)
    word = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        if word in ("today", "yesterday"):
            return midnight - timedelta(days=1 if word == "yesterday" else 0)
        match = re.fullmatch(r"(\d+)\s*([dhm])", word)
        if match:
            amount, unit = int(match.group(1)), match.group(2)
            unit_name = {"d": "days", "h": "hours", "m": "minutes"}[unit]
            return now - timedelta(**{unit_name: amount})
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise UsageError(
                f"{option}: not a time: {text!r} (give 7d, 12h, 30m, today, yesterday or an ISO date/time)"
            ) from None
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except OverflowError:  # timedelta(days=10**11), or a date before year 1
        raise UsageError(f"{option}: {text!r} reaches before year 1; give a later time") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # usage error (2) or --help (0); argparse printed why
        return exc.code if isinstance(exc.code, int) else 2
    try:
        with stop_on_signals():
            if args.command in ("verify", "rebuild", "repair"):
                code = run_job(args)
            elif args.command == "dump":
                code = run_dump(args)
            elif args.command == "lookup":
                code = run_lookup(args)
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
