"""The audit side of ``kafka-index``: a run's rows written (journal first, then the table), journals
recovered, a re-used run id refused, and ``kafka-index audit`` (queries of the table)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TextIO, TypeVar

from indexlib.format import describe_error

from .config import Settings

if TYPE_CHECKING:
    from indexlib.engine import RunReport
    from indexlib.format import BrokerIdentity

    from .journal import AuditJournal

from .usage import EXIT_AUDIT_FAILED, EXIT_JOURNAL_DAMAGED, PROG, UsageError, prog

T = TypeVar("T")


def write_audit(
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
        print(f"{prog()}: warning: audit journal {journal.path}: {describe_error(exc)}", file=sys.stderr)
    try:
        writer, inserted, replaced, retries = quiet_if_it_fails(
            audit.write, table, audit.to_table(rows), spark, settings.audit_storage_options
        )
    except Exception as exc:  # deltalake/DataFusion errors, OSError (a full disk), an unreachable URI
        where = f"kept in {journal.path}; merge them with `{PROG} audit --recover`" if kept else "LOST"
        print(f"{prog()}: error: audit table {table}: {first_line(exc)}; the run's {len(rows)} rows are {where}",
              file=sys.stderr)  # fmt: skip
        return False
    journal.remove()
    added = f"{len(rows)} rows merged" if inserted is None else f"{inserted} of {len(rows)} rows new"
    if replaced:
        added += f", {replaced} replacing stale rows of an earlier attempt"
    if retries:
        added += f", after {retries} commit conflict(s) with other writers"
    if out is not None:
        print(f"audit: {added} in {table} ({writer}), run id {report.run_id}", file=out)
    return True


def quiet_if_it_fails(call: Callable[..., T], *args: object) -> T:
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


#: a terminal colour code (delta-rs colours its chained errors)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: where a Rust backtrace begins in an error's text (``   0: <frame>`` lines, then ``at <file>:<line>:<col>``)
RUST_BACKTRACE = re.compile(r"\n\s*0: ")


def first_line(exc: BaseException) -> str:
    """An error in one line: its first line, and for a chained message (delta-rs prints each cause on a line of
    its own, ``↳`` and colours included) the innermost cause after it, which says what went wrong."""
    text = describe_error(exc) if isinstance(exc, OSError) else str(exc)
    text = RUST_BACKTRACE.split(text, maxsplit=1)[0]  # delta-rs may append one: frames, then source locations
    lines = [line for line in (ANSI.sub("", raw).strip().lstrip("↳").strip() for raw in text.splitlines()) if line]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"


def check_run_id_unused(run_id: str, settings: Settings, brokers: list[BrokerIdentity] | None = None) -> None:
    """UsageError when a writing run's ``--run-id`` was used by an earlier run that may have replaced files,
    by the jobs' evidence (its backup dir is the engine's, :func:`indexlib.engine.options.check_backups_unused`):
    the run's audit journal, or rows of the audit table that record files written. A table that does not
    exist is no evidence; one that cannot be read gets a warning (its write will fail the same way, and the
    rows then wait in the journal). With ``brokers`` only their rows count: a fleet's brokers share run ids."""
    from . import audit
    from .journal import journals_of_run

    earlier = journals_of_run(settings.audit_journal, run_id)
    if earlier:
        raise UsageError(
            f"{earlier[0]}: run id {run_id!r} has the audit journal of an earlier run that may have replaced files; "
            "give a new --run-id"
        )
    if not settings.audit_table:
        return
    try:
        rows = audit.rows_with_files(settings.audit_table, run_id, brokers, settings.audit_storage_options)
    except Exception as exc:  # an unreachable URI, a damaged table
        print(f"{prog()}: warning: audit table {settings.audit_table}: cannot check whether run id {run_id!r} was "
              f"used before: {first_line(exc)}", file=sys.stderr)  # fmt: skip
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


def recover_journals(
    journal_dir: str, table: str, at_start: bool, storage_options: dict[str, str] | None = None
) -> int:
    """Merge the rows waiting in ``journal_dir``'s journals for ``table``, a line for each journal on stderr.
    Returns ``audit --recover``'s exit code: 0 every journal merged and removed; EXIT_AUDIT_FAILED a journal
    is kept with rows waiting (the table write failed, or it is another table's: its rows are never merged
    elsewhere); EXIT_JOURNAL_DAMAGED a journal has unreadable lines (its readable rows are merged, the file is
    kept for a person to mend: never removed). At a run's start (``at_start``) problems are warnings that
    never stop the run, and other tables' journals are left to runs on those tables, unsaid."""
    from .journal import journal_paths, merge_lock

    level = "warning" if at_start else "error"
    code = 0
    for path in journal_paths(journal_dir):
        try:
            with merge_lock(path) as free:
                if free:
                    code = max(code, _merge_journal(path, table, at_start, storage_options))
                elif not at_start:  # a run that is still going (or creating it): its own to finish
                    code = max(code, EXIT_AUDIT_FAILED)
                    print(f"{prog()}: error: audit journal {path}: a run that is still going is writing it: not merged",
                          file=sys.stderr)  # fmt: skip
        except FileNotFoundError:  # merged and removed meanwhile (another run)
            continue
        except OSError as exc:
            code = max(code, EXIT_JOURNAL_DAMAGED)
            print(f"{prog()}: {level}: audit journal {path}: cannot read it: {describe_error(exc)}", file=sys.stderr)
    return code


def _merge_journal(path: str, table: str, at_start: bool, storage_options: dict[str, str] | None) -> int:
    """:func:`recover_journals` of one journal, its lock held: its exit code."""
    from .journal import load, recover

    level = "warning" if at_start else "error"
    code = 0
    journal = load(path)
    header = journal.header
    if header is not None and header["table"] != table:
        if not at_start:
            code = max(code, EXIT_AUDIT_FAILED)
            print(f"{prog()}: error: audit journal {journal.path}: its rows are for audit table {header['table']}, "
                  f"not {table}: not merged (`{PROG} audit --recover --audit-table {header['table']}`)",
                  file=sys.stderr)  # fmt: skip
        return code
    if header is None:
        code = max(code, EXIT_JOURNAL_DAMAGED)
        bad = f" (unreadable: {_lines(journal.unreadable)})" if journal.unreadable else ""
        print(f"{prog()}: {level}: audit journal {journal.path}: its first line (the run id and table) is missing "
              f"or unreadable{bad}: nothing in it can be merged; the file is kept: mend or remove it",
              file=sys.stderr)  # fmt: skip
        return code
    try:
        run_id, count, inserted, replaced, finished = quiet_if_it_fails(recover, journal, table, storage_options)
    except Exception as exc:
        code = max(code, EXIT_AUDIT_FAILED)
        print(f"{prog()}: {level}: audit journal {journal.path}: cannot merge into {table}: {first_line(exc)}",
              file=sys.stderr)  # fmt: skip
        return code
    state = "finished" if finished else "interrupted"
    new = f"{inserted} of {count}" if inserted is not None else f"{count}"
    also = f", {replaced} replacing stale rows" if replaced else ""
    print(f"audit: merged {new} rows{also} of {state} run {run_id} from {journal.path} into {table}",
          file=sys.stderr)  # fmt: skip
    if journal.unreadable:
        code = max(code, EXIT_JOURNAL_DAMAGED)
        print(f"{prog()}: {level}: audit journal {journal.path}: {_lines(journal.unreadable)} unreadable (not "
              "journal records), so their rows are not merged; the file is kept: mend or remove those lines, "
              f"then `{PROG} audit --recover`", file=sys.stderr)  # fmt: skip
    return code


# ------------------------------------------------------------------------------------------ audit
def run_audit(args: argparse.Namespace) -> int:
    from . import audit_queries
    from .config import ConfigError, load_config_file, parse_storage_options

    try:
        conf = load_config_file(args.config)
        table = args.audit_table or conf["audit_table"]
        storage_options = {**conf["audit_storage_options"], **parse_storage_options(args.audit_storage_option)}
    except ConfigError as exc:
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    if not table or table.lower() == "none":
        print(f"{prog()}: error: no audit table configured (give --audit-table PATH)", file=sys.stderr)
        return 2
    if args.recover:
        if args.since or args.until:
            print(f"{prog()}: error: --since/--until do not apply to --recover", file=sys.stderr)
            return 2
        journal_dir = args.audit_journal or conf["audit_journal"]
        return recover_journals(journal_dir, table, at_start=False, storage_options=storage_options)
    try:
        sql = audit_sql(args)
        result = audit_queries.query(table, sql, storage_options)
        if args.run and not args.as_json:
            kinds = audit_queries.query(table, audit_queries.findings_by_broker_sql(args.run), storage_options)
    except UsageError as exc:
        print(f"{prog()}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # deltalake's TableNotFoundError, DataFusion SQL errors
        print(f"{prog()}: error: audit table {table}: {first_line(exc)}", file=sys.stderr)
        return 2
    if args.run and args.as_json:  # the fleet summary's form: one record per broker, findings by kind
        print(json.dumps(audit_queries.run_summary(table, args.run, storage_options), indent=2, default=str))
        return 0
    rows = result.to_pylist()
    if args.run and not rows:  # a typo, or a run that wrote no row here (the JSON form's [] says the same)
        print(f"{prog()}: error: audit table {table}: no rows of run {args.run!r} (`{PROG} audit` lists the latest runs)",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.as_json:
        print(json.dumps(rows, indent=2, default=str))
    else:
        from indexlib.cli import format_table

        print(format_table(result.column_names, [[_short(r[c]) for c in result.column_names] for r in rows]))
        print(f"({len(rows)} rows)")
        if args.run:
            found = kinds.to_pylist()
            print("\nfindings by broker and kind:" if found else "\nno findings")
            if found:
                print(format_table(kinds.column_names, [[_short(r[c]) for c in kinds.column_names] for r in found]))
    return 0


def audit_sql(args: argparse.Namespace) -> str:
    """The SQL of an ``audit`` query from its options (:class:`UsageError` for options that do not go together)."""
    from . import audit_queries

    who = {"cluster_id": args.cluster, "broker_id": args.broker}
    windowed = args.repaired or args.failing or args.damage
    if (args.since or args.until) and not windowed:
        raise UsageError(
            "--since/--until choose the window of --repaired, --failing and --damage; they do not apply here"
        )
    if (args.broker is not None or args.cluster) and (args.sql or args.run):
        raise UsageError("--broker/--cluster do not apply to --sql (write the WHERE) or --run (every broker)")
    sql: str
    if args.sql:
        sql = str(args.sql)
    elif args.run:
        sql = audit_queries.run_by_broker_sql(args.run)
    elif windowed:
        until = parse_time(args.until, option="--until") if args.until else datetime.now(UTC)
        if args.since:
            since = parse_time(args.since, option="--since")
        elif until.year > 1 or until.month > 1 or until.day > 7:
            since = until - timedelta(days=7)
        else:
            raise UsageError(f"--until: {args.until!r} leaves no 7-day window after year 1; give --since too")
        if args.damage:
            sql = audit_queries.damage_sql(since, until, **who)
        else:
            sql = audit_queries.window_sql(since, until, "repaired" if args.repaired else "failing", **who)
    elif args.brokers:
        sql = audit_queries.brokers_latest_sql(**who)
    elif args.partition:
        from indexlib.format import parse_partition_dir_name

        named = parse_partition_dir_name(args.partition)
        if named is None:
            raise UsageError(f"--partition: expected TOPIC-N, got {args.partition!r}")
        sql = audit_queries.partition_history_sql(*named, **who)
    else:
        sql = audit_queries.latest_run_sql(**who)
    return sql


def _short(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)


def parse_time(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
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
