"""The library's own command line, ``python -m indexlib`` (no Spark): rebuild, verify, dump and lookup, on one
machine.

::

    python -m indexlib rebuild PATH... [--index-interval-bytes N] [--segment-index-bytes N]
                               [--output-dir DIR] [--backup-dir DIR] [--run-id ID] [--force] [--jobs N]
                               [--json FILE]
    python -m indexlib verify  PATH... [--index-interval-bytes N] [--segment-index-bytes N]
                               [--jobs N] [--json FILE]          (FILE may be - for stdout)
    python -m indexlib dump    FILE... [--json] [--deep-iteration] [--print-data-log] [--payload-format F]
                               [--max-bytes N] [--offsets-decoder | --transaction-log-decoder |
                               --cluster-metadata-decoder] [--check]
    python -m indexlib lookup  --segment PATH.log (--offset N | --timestamp MS) [--ceiling] [--json]
    python -m indexlib repair  LOG_DIR... [kafka-index repair's options but --engine]

``repair`` is not the library's own: it writes the audit table, which the jobs package keeps. That package adds it
to this command line as an entry point of :data:`COMMAND_PLUGINS` (``kafka-index repair --engine local``'s code).

Each PATH is a partition dir (``<log dir>/<topic>-<partition>``) or a whole log dir. Both commands run the
segment engine (:mod:`indexlib.engine`) with a local process pool of ``--jobs`` processes (default: the
cores), as the Spark jobs run it on a cluster.

Exit codes: 0 healthy / done; 1 verify found errors, a rebuild could not rebuild a segment (Kafka's
recovery would fail on it), a dumped file has problems (listed), a worker process of ``--jobs`` died (killed,
out of memory: one line; the run stopped before replacing any file), or a writing run could not go on (a full disk:
one line naming the file; every file is the old one or the whole new one); 2 bad usage or bad input (a missing
or unreadable path, a file where a directory is expected, a directory holding no partition or no segment,
a bad setting, a lookup target no segment can hold, a file that cannot be dumped, a log dir held by a
running broker, a ``--run-id`` whose backup dir already holds an earlier run's backups); 128 + N stopped by
signal N: 130 SIGINT, 143 SIGTERM (one line; a run stops between two segments' commits and removes what it
staged: every file is the old one or the whole new one), 141 the reader of stdout went away (``dump FILE |
head``: no message, as a tool killed by SIGPIPE).

Errors are one line on stderr, ``python -m indexlib: error: <file>: <problem>``, never a traceback (set
``KAFKA_INDEX_DEBUG=1`` to get the traceback of an unexpected error).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import TextIO

from .. import __version__
from ..engine import RunOptions, RunReport, SegmentResult, WorkerDiedError, map_locally, run
from ..engine.interrupts import stdout_closed, stop_on_signals, stopped_by
from ..format.errors import ClusterMetadataError, KafkaIndexError, error_line
from ..format.layout import (
    INDEX_SUFFIXES,
    LOG_DIR_LOCK,
    parse_partition_dir_name,
    partition_name,
    segment_base_offsets,
    segment_name,
)
from ..recovery.findings import CUT_TAIL, REFUSE_SEGMENT, kind
from ..recovery.settings import (
    IndexSettings,
    SettingError,
    check_index_setting,
)
from ..storage.discovery import (
    Discovery,
    discover,
    discover_partition_dir,
    parse_partition_filter,
    parse_topic_filter,
)
from ..storage.locks import LockedLogDirError, log_dir_is_locked
from ..storage.store import LOCAL, ObjectStoreError, StoreSpec, is_uri, remote_store, store_for
from .options import (
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
from .report import check_json_target, keep_output_in_order, print_report, write_json
from .run_planning import NotYetTieredError, check_planned_run, run_options, select_not_yet_tiered, store_spec
from .segment_lookup import check_target, lookup, print_lookup
from .settings_files import (
    SettingsFileError,
    TopicSettings,
    load_cluster_settings,
    metadata_log_dir,
    read_server_properties,
    read_topic_config,
    settings_to_dict,
)

PROG = "python -m indexlib"
#: the entry-point group of commands other packages add to this command line: each entry is a function of the
#: command's arguments that returns its exit code (kafka-index-rebuild's jobs package adds ``repair``)
COMMAND_PLUGINS = "kafka_index_rebuild.commands"
PLUGIN_COMMANDS = {"repair": "verify, then rebuild only what is wrong, with backups and audit rows"}
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2


class InputError(KafkaIndexError):
    """Bad usage or bad input: reported as one line, exit code 2."""


# ------------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Verify, rebuild (byte for byte as Kafka's recovery would) and dump Kafka segment "
        "index files (.index, .timeindex, .txnindex).",
        epilog="exit codes: 0 healthy/done; 1 findings (verify), a segment that could not be rebuilt "
        "(rebuild) or a file with problems (dump); 2 bad usage or bad input; 130/143 stopped by SIGINT/SIGTERM; "
        "141 stdout closed",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def run_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "paths",
            nargs="*",
            metavar="PATH",
            help="a Kafka partition dir (<log.dir>/<topic>-<partition>) or a whole log dir; several allowed "
            "(default: --server-properties' log.dirs)",
        )
        add_index_settings(sub, None)
        add_settings_files(sub)
        add_jobs(sub)
        add_json_report(sub)
        add_broker_id(sub)
        add_selection(sub)
        add_storage_options(sub)
        add_verbosity(sub)

    rebuild = commands.add_parser(
        "rebuild",
        help="rebuild every segment's index files as Kafka's recovery would",
        description="Rebuild the .index, .timeindex and .txnindex of every segment of a partition, byte "
        "for byte as Kafka's log recovery would. Each file is published atomically; the .log is never "
        "modified. In place, refuses to write while the log dir's .lock is held (a running broker).",
    )
    run_options(rebuild)
    add_write_options(rebuild, "rebuild")
    add_run_id(rebuild)
    rebuild.set_defaults(run=run_rebuild)

    recover = commands.add_parser(
        "recover",
        help="recover a stopped broker's log dirs as its unclean start would, so that the start recovers nothing",
        description="For the log dirs of a stopped broker after an unclean shutdown: every partition's segments "
        "from its recovery point are validated and their indexes rebuilt as Kafka's LogLoader would, the .log cut "
        "at the first invalid batch (the cut bytes and any later segment kept in the backup dir), an empty segment "
        "rolled at the log end and the recovery point moved there. Never writes .kafka_cleanshutdown. Refuses a "
        "log dir whose .lock is held (a running broker).",
    )
    run_options(recover)
    add_write_options(recover, "recover")
    add_run_id(recover)
    recover.set_defaults(run=run_recover)

    verify = commands.add_parser(
        "verify",
        help="check every index file against the .log (read-only)",
        description="Check every segment's index files against its .log (the invariants that make "
        "lookups correct, not byte equality), and compare each with what a rebuild would write. "
        "Read-only.",
    )
    run_options(verify)
    add_not_yet_tiered(verify)
    verify.set_defaults(run=run_verify)
    add_dump_command(commands, run_dump)
    add_lookup_command(commands, run_lookup)
    add_remote_inventory_command(commands, run_remote_inventory)
    add_verify_remote_command(commands, run_verify_remote)
    add_rebuild_remote_command(commands, run_rebuild_remote)
    add_remote_index_cache_command(commands, run_remote_index_cache)
    for name, text in PLUGIN_COMMANDS.items():  # listed here; main hands their arguments to their package
        commands.add_parser(name, help=f"{text} (see {PROG} {name} --help)", add_help=False)
    return parser


# ------------------------------------------------------------------------------------------ checks
def check_settings(args: argparse.Namespace) -> tuple[TopicSettings, list[str], StoreSpec]:
    """Each topic's index settings (Kafka's defaults < ``--server-properties`` < the cluster's metadata <
    ``--topic-config`` < the command line, as ``kafka-index`` layers them), the paths to run over (``PATH``s,
    else the broker's ``log.dirs``) and the store they are in."""
    if args.jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {args.jobs}")
    try:
        overrides = {
            name: check_index_setting(f"--{name.replace('_', '-')}", name, getattr(args, name))
            for name in ("index_interval_bytes", "segment_index_bytes")
            if getattr(args, name) is not None
        }
        log_dirs, broker = read_server_properties(args.server_properties) if args.server_properties else ([], {})
        metadata_dir = metadata_log_dir(args.server_properties) if args.server_properties else None
        per_topic = read_topic_config(args.topic_config) if args.topic_config else {}
        paths = args.paths or log_dirs
        if not paths:
            raise InputError("no PATH: give a partition dir or a log dir, or --server-properties FILE with log.dirs")
        store = store_spec(paths, args.storage_option, getattr(args, "output_dir", None))
        cluster = load_cluster_settings(paths, args.cluster_metadata, metadata_dir, remote_store(store))
    except (SettingError, SettingsFileError, ClusterMetadataError, ObjectStoreError) as exc:
        raise InputError(str(exc)) from None
    return (
        TopicSettings(
            IndexSettings(**broker),
            per_topic,
            overrides,
            cluster,
            defaults_from={name: f"--server-properties {args.server_properties}" for name in broker},
            per_topic_from=f"--topic-config {args.topic_config}",
        ),
        paths,
        store,
    )


def warn_unused_topic_configs(args: argparse.Namespace, settings: TopicSettings, found: Discovery) -> None:
    unknown = sorted(set(settings.per_topic) - {p.topic for p in found.partitions})
    if unknown:
        _warn(
            f"{args.topic_config}: topic(s) {', '.join(map(repr, unknown))} match no partition of this run; "
            "their settings are not used"
        )


def discover_paths(
    paths: list[str], topics: str | None = None, partitions: str | None = None, store: StoreSpec = LOCAL
) -> Discovery:
    """Each path is a partition dir or a log dir (in object storage: a log dir); InputError naming a path that is
    neither. ``topics`` and ``partitions`` (``--topics``, ``--partitions``) choose among the partitions found; none
    chosen is an InputError."""
    try:
        topic_filter, partition_filter = parse_topic_filter(topics), parse_partition_filter(partitions)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if store != LOCAL:
        try:
            found = discover(paths, topic_filter, partition_filter, store_for(store))
        except (ValueError, ObjectStoreError) as exc:
            raise InputError(str(exc)) from None
        if not found.partitions:
            raise InputError(f"no partition dir (<topic>-<partition>) in {', '.join(paths)}")
        return found
    found = Discovery()
    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise InputError(f"{path}: no such directory") from None
        if not stat.S_ISDIR(st.st_mode):
            raise InputError(f"{path}: not a directory (expected a partition dir or a log dir)")
        if parse_partition_dir_name(os.path.basename(os.path.normpath(path))) is not None:
            if not segment_base_offsets(path):  # PermissionError names the directory
                raise InputError(f"{path}: no segment (<20-digit base offset>.log) in this directory")
            one = discover_partition_dir(path)
        else:
            one = discover([path])
            if not one.partitions:
                raise InputError(f"{path}: neither a partition dir (<topic>-<partition>) nor a log dir holding one")
        found.partitions += [
            p
            for p in one.partitions
            if (topic_filter is None or topic_filter.fullmatch(p.topic))
            and (partition_filter is None or p.partition in partition_filter)
        ]
        found.skipped += one.skipped
        found.foreign += one.foreign
        found.log_dirs += [d for d in one.log_dirs if d not in found.log_dirs]
    if not found.partitions:  # every path held partitions: the selection chose none
        chosen = " and ".join(
            f"{flag} {value!r}" for flag, value in (("--topics", topics), ("--partitions", partitions)) if value
        )
        raise InputError(f"no partition matches {chosen} in {', '.join(paths)}")
    return found


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


# ------------------------------------------------------------------------------ rebuild and verify
def run_rebuild(args: argparse.Namespace) -> int:
    settings, paths, store = check_settings(args)
    found = discover_paths(paths, args.topics, args.partitions, store)
    options = run_options("rebuild", args, settings, args.backup_dir, store)
    if args.force:  # the run holds every .lock it can; one a broker holds it leaves, as asked
        for log_dir in sorted({p.log_dir for p in found.partitions if options.in_place(p)}):
            if log_dir_is_locked(log_dir):
                lock = os.path.join(log_dir, LOG_DIR_LOCK)
                _warn(f"{lock}: held by another process; rebuilding in place anyway (--force)")
    return _run(args, found, options, settings)


def run_recover(args: argparse.Namespace) -> int:
    settings, paths, store = check_settings(args)
    found = discover_paths(paths, args.topics, args.partitions, store)
    return _run(args, found, run_options("recover", args, settings, args.backup_dir, store), settings)


def run_verify(args: argparse.Namespace) -> int:
    settings, paths, store = check_settings(args)
    found = discover_paths(paths, args.topics, args.partitions, store)
    if args.not_yet_tiered:
        try:
            found = select_not_yet_tiered(found, settings, args.remote_log_metadata)
        except (NotYetTieredError, ClusterMetadataError) as exc:
            raise InputError(str(exc)) from None
        if not found.partitions:
            print("no segment of a tiered topic is waiting to be copied: nothing to verify")
            return EXIT_OK
    return _run(args, found, run_options("verify", args, settings, None, store), settings)


def _run(args: argparse.Namespace, found: Discovery, options: RunOptions, settings: TopicSettings) -> int:
    try:
        check_planned_run(found, options, settings)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    try:
        check_json_target(args.json_file)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    warn_unused_topic_configs(args, settings, found)
    try:
        report = run(found, options, settings.for_topic, map_locally(args.jobs))
    except OSError as exc:  # a writing run that could not go on (a full disk, a lock file, a mark): as kafka-index
        if options.read_only:
            raise
        _error(f"{error_line(exc, None)}; the run stopped before replacing any more files")
        return EXIT_FINDINGS
    text_out = sys.stderr if args.json_file == "-" else sys.stdout  # stdout stays pure JSON
    if args.json_file is not None:
        write_json(report, args.json_file, settings_to_dict(settings, [s.task.topic for s in report.segments]))
    level = report_level(args)
    if level != "quiet":
        if settings.cluster is not None:
            print(f"settings: {settings.cluster.describe()}", file=text_out)
        print_segments(report, settings, text_out, level == "verbose")
        if report.mode == "recover":
            print_recovery(report, text_out)
    print_report(report, text_out, level)
    return report.exit_code


def _from(origin: dict[str, str], name: str) -> str:
    return f" (from {origin[name]})" if name in origin else ""


def print_recovery(report: RunReport, out: TextIO) -> None:
    """Per partition of a ``recover``: where its recovery point moved, what it rolled, or why it was left alone."""
    for _, plan in sorted(report.recovered.items()):
        name = plan.partition.name
        if plan.left:
            print(f"recover {name}: left to the broker: {plan.left}", file=out)
        elif plan.new_recovery_point is None:
            why = plan.error or "a segment could not be recovered"
            state = "would move" if report.options.dry_run else f"kept ({why})"
            print(f"recover {name}: recovery point {plan.recovery_point} {state}", file=out)
        else:
            rolled = "; an empty segment rolled there" if any(p.endswith(".log") for p in plan.created) else ""
            print(
                f"recover {name}: recovery point {plan.recovery_point} -> {plan.new_recovery_point}{rolled}", file=out
            )
        for note in plan.notes:
            print(f"recover {name}: {note}", file=out)
    for path in report.checkpoints:
        print(f"recover: {path} rewritten", file=out)
    for log_dir, mark in sorted(report.interrupted.items()):
        state = (
            "finished in this run, its mark removed"
            if mark.path in report.cleared
            else "not finished (its mark stays: run recover again)"
        )
        print(f"recover: {log_dir}: recover run {mark.run_id} had not finished; {state}", file=out)


def print_segments(report: RunReport, settings: TopicSettings, out: TextIO, sources: bool = False) -> None:
    """Per partition, one line per segment: what was scanned and written (rebuild) or how each file
    compares with the rebuild (verify), with a corrupt tail or a refusal spelled out; ``sources``: also where
    each index setting came from."""
    words = {True: "identical", False: "differs", None: "absent, none expected"}
    by_partition: dict[str, list[SegmentResult]] = {}
    for s in report.segments:
        by_partition.setdefault(s.task.partition_dir, []).append(s)
    for path, segments in by_partition.items():
        t = segments[0].task
        topic_settings = settings.for_topic(t.topic)
        origin = settings.sources(t.topic) if sources else {}
        where = ""
        if report.mode == "rebuild":
            target = t.target_dir or path
            where = " in place" if target == path else f" into {target}"  # the task's target is its dir in place
        print(
            f"{report.mode} {partition_name(t.topic, t.partition)} ({path}){where}: "
            f"index.interval.bytes={topic_settings.index_interval_bytes}{_from(origin, 'index_interval_bytes')} "
            f"segment.index.bytes={topic_settings.segment_index_bytes}{_from(origin, 'segment_index_bytes')}, "
            f"{_plural(len(segments), 'segment')}",
            file=out,
        )
        for s in segments:
            line = f"  {segment_name(s.task.base_offset, '')}: {_plural(s.batches, 'batch', 'batches')}, {s.valid_bytes} valid bytes"
            if report.mode == "rebuild" and s.action == "rebuilt":
                counts = {
                    ".index": s.plan.index_entries,
                    ".timeindex": s.plan.timeindex_entries,
                    ".txnindex": len(s.aborted),
                }
                names = {os.path.splitext(p)[1] for p in s.written}
                files = [f"{x} {_plural(counts[x], 'entry', 'entries')}" for x in INDEX_SUFFIXES if x in names]
                if ".txnindex" not in names:
                    files.append(".txnindex not needed (no aborted transaction)")
                line += "; " + ", ".join(files)
            elif report.mode == "recover":
                line += f"; {s.action}" + (
                    f", the .log cut to {s.valid_bytes} bytes" if s.invalid_bytes and s.written else ""
                )
            elif report.mode == "verify":
                line += f" ({'active' if s.task.active else 'inactive'}); " + ", ".join(
                    f"{x} {words.get(s.identical.get(x), str(s.identical.get(x)))}" for x in INDEX_SUFFIXES
                )
            print(line, file=out)
            for f in s.findings:
                if f.file == s.task.log_path and kind(f.kind).triggers == CUT_TAIL:
                    print(
                        f"    corrupt tail: {f.kind} at byte {f.position} (batch {f.entry}): {f.detail} "
                        + (
                            "(cut; the tail is kept in the backups)"
                            if s.task.log_path in s.written
                            else "(the .log is left unchanged)"
                        ),
                        file=out,
                    )
                elif kind(f.kind).triggers == REFUSE_SEGMENT:
                    print(f"    FATAL {f.kind} at byte {f.position} (batch {f.entry}): {f.detail}", file=out)


# --------------------------------------------------------------------------------------------- dump
def run_dump(args: argparse.Namespace) -> int:
    from .dump import DumpUsageError, run_dump_command  # imported here: only this subcommand needs it

    try:
        return run_dump_command(args, sys.stdout, sys.stderr, PROG)
    except DumpUsageError as exc:
        raise InputError(str(exc)) from None


def run_remote_inventory(args: argparse.Namespace) -> int:
    from .remote_inventory import run_remote_inventory_command  # imported here: only this subcommand needs it

    return run_remote_inventory_command(args, sys.stdout, sys.stderr, PROG)


def run_verify_remote(args: argparse.Namespace) -> int:
    from .verify_remote import run_verify_remote_command  # imported here: only this subcommand needs it

    return run_verify_remote_command(args, sys.stdout, sys.stderr, PROG)


def run_rebuild_remote(args: argparse.Namespace) -> int:
    from .verify_remote import run_rebuild_remote_command  # imported here: only this subcommand needs it

    return run_rebuild_remote_command(args, sys.stdout, sys.stderr, PROG)


def run_remote_index_cache(args: argparse.Namespace) -> int:
    from .remote_index_cache import run_remote_index_cache_command  # imported here: only this subcommand needs it

    return run_remote_index_cache_command(args, sys.stdout, sys.stderr, PROG)


def run_lookup(args: argparse.Namespace) -> int:
    try:
        check_target(args.offset, args.timestamp)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return print_lookup(lookup(args.segment, args.offset, args.timestamp, args.ceiling), args.as_json, sys.stdout)


# --------------------------------------------------------------------------------------------- main
def run_plugin_command(name: str, argv: list[str]) -> int:
    """The command ``name`` of :data:`COMMAND_PLUGINS` run on ``argv``; exit 2 with one line where no installed
    package provides it (or it cannot be loaded)."""
    from importlib.metadata import entry_points

    found = list(entry_points(group=COMMAND_PLUGINS, name=name))
    if not found:
        _error(f"{name}: no installed package provides it (it is kafka-index-rebuild's jobs package: pip install "
               "kafka-index-rebuild, or run kafka-index repair --engine local)")  # fmt: skip
        return EXIT_BAD_INPUT
    try:
        command = found[0].load()
    except (ImportError, AttributeError) as exc:  # not what it needs (pyyaml, deltalake), or a stale entry point
        _error(f"{name}: cannot load {found[0].value}: {exc}")
        return EXIT_BAD_INPUT
    code: int = command(argv)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's usage errors give 2, ``--help`` 0)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PLUGIN_COMMANDS:
        return run_plugin_command(argv[0], argv[1:])
    keep_output_in_order()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage error (2) or --help (0): argparse already printed why
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_BAD_INPUT)
    subject = " ".join(getattr(args, "paths", None) or getattr(args, "files", None) or []) or getattr(
        args, "segment", None
    )
    try:
        with stop_on_signals():
            code: int = args.run(args)
            sys.stdout.flush()  # here, where a closed stdout is still caught
        return code
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        return stdout_closed()
    except (InputError, LockedLogDirError) as exc:  # refused before any work
        _error(str(exc))
        return EXIT_BAD_INPUT
    except WorkerDiedError as exc:  # the run stopped before its commit and swept what it staged
        _error(f"{exc} (run it again)")
        return EXIT_FINDINGS
    except ObjectStoreError as exc:  # object storage failed (endpoint, credentials, an object changed): nothing written
        _error(f"{exc}; the run stopped, nothing was written")
        return EXIT_BAD_INPUT
    except (OSError, ValueError) as exc:  # unreadable, not a regular file, garbage, bad name, ...
        _error(error_line(exc, subject))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the run's finally blocks have swept what it staged
        name, code = stopped_by(exc)
        state = "; every index file is the old one or the whole new one (run it again to finish)"
        if is_uri(getattr(args, "output_dir", None) or ""):  # a prefix is written once: a new one for the rerun
            state = "; the prefix holds whole files of the segments committed before the stop (run it again into a new prefix)"
        _error(f"stopped by {name}" + (state if args.command == "rebuild" else ""))
        return code
    except Exception as exc:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("KAFKA_INDEX_DEBUG"):
            raise
        _error(
            f"unexpected {type(exc).__name__} while processing {subject}: {error_line(exc, None)} "
            "(set KAFKA_INDEX_DEBUG=1 for the traceback)"
        )
        return EXIT_BAD_INPUT
