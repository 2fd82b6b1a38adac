"""The library's own command line, ``python -m indexlib`` (no Spark): rebuild, verify and dump, on one machine.

::

    python -m indexlib rebuild PARTITION_DIR [--index-interval-bytes N] [--segment-index-bytes N]
                               [--output-dir DIR] [--backup-dir DIR] [--force]
    python -m indexlib verify  PARTITION_DIR [--index-interval-bytes N] [--segment-index-bytes N]
                               [--json FILE]            (FILE may be - for stdout)
    python -m indexlib dump    FILE [--json]

Exit codes: 0 healthy / done; 1 verify found errors, a rebuild could not rebuild a segment (Kafka's
recovery would fail on it), or a dumped file has problems (listed); 2 bad usage or bad input (a missing
or unreadable path, a file where a directory is expected, a directory that is not ``<topic>-<partition>``
or holds no segment, a bad setting, a file that cannot be dumped, a log dir held by a running broker).

Errors are one line on stderr, ``python -m indexlib: error: <file>: <problem>``, never a traceback (set
``KAFKA_INDEX_DEBUG=1`` to get the traceback of an unexpected error).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from .abstract_index import INT32_MAX
from .dump import format_dump, iter_json, read_dump
from .layout import INDEX_SUFFIXES, parse_partition_dir, segment_base_offsets, segment_name
from .partition import PartitionRebuild, rebuild_partition
from .publish import log_dir_is_locked
from .rebuild import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES

PROG = "python -m indexlib"
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2


class InputError(Exception):
    """Bad usage or bad input: reported as one line, exit code 2."""


# ------------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Verify, rebuild (byte for byte as Kafka's recovery would) and dump Kafka segment "
        "index files (.index, .timeindex, .txnindex).",
        epilog="exit codes: 0 healthy/done; 1 findings (verify), a segment that could not be rebuilt "
        "(rebuild) or a file with problems (dump); 2 bad usage or bad input",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def settings(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "partition_dir", metavar="PARTITION_DIR", help="a Kafka partition directory, <log.dir>/<topic>-<partition>"
        )
        sub.add_argument(
            "--index-interval-bytes",
            type=int,
            default=DEFAULT_INDEX_INTERVAL_BYTES,
            metavar="N",
            help="the topic's index.interval.bytes (default %(default)s)",
        )
        sub.add_argument(
            "--segment-index-bytes",
            type=int,
            default=DEFAULT_SEGMENT_INDEX_BYTES,
            metavar="N",
            help="the topic's segment.index.bytes (default %(default)s)",
        )

    rebuild = commands.add_parser(
        "rebuild",
        help="rebuild every segment's index files as Kafka's recovery would",
        description="Rebuild the .index, .timeindex and .txnindex of every segment of a partition, byte "
        "for byte as Kafka's log recovery would. Each file is published atomically; the .log is never "
        "modified. In place, refuses to write while the log dir's .lock is held (a running broker).",
    )
    settings(rebuild)
    rebuild.add_argument(
        "--output-dir", metavar="DIR", help="write to DIR/<topic>-<partition>/ and only read the partition"
    )
    rebuild.add_argument("--backup-dir", metavar="DIR", help="copy each replaced index file here first")
    rebuild.add_argument("--force", action="store_true", help="write in place even though the log dir's .lock is held")
    rebuild.set_defaults(run=run_rebuild)

    verify = commands.add_parser(
        "verify",
        help="check every index file against the .log (read-only)",
        description="Check every segment's index files against its .log (the invariants that make "
        "lookups correct, not byte equality), and compare each with what a rebuild would write. "
        "Read-only.",
    )
    settings(verify)
    verify.add_argument(
        "--json",
        metavar="FILE",
        help="also write the full report as JSON to FILE (- for stdout; the text report then goes to stderr)",
    )
    verify.set_defaults(run=run_verify)

    dump = commands.add_parser(
        "dump",
        help="print an index file's entries or a .log's batch headers",
        description="Print the entries of a .index, .timeindex or .txnindex (absolute offsets) or the "
        "batch headers of a .log, in the spirit of kafka-dump-log.sh. Read-only.",
    )
    dump.add_argument("file", metavar="FILE", help="<20-digit base offset>.{index,timeindex,txnindex,log}")
    dump.add_argument("--json", action="store_true", help="print JSON instead of text")
    dump.set_defaults(run=run_dump)
    return parser


# ------------------------------------------------------------------------------------------ checks
def check_settings(args: argparse.Namespace) -> None:
    if not 0 <= args.index_interval_bytes <= INT32_MAX:
        raise InputError(f"--index-interval-bytes must be between 0 and {INT32_MAX}, got {args.index_interval_bytes}")
    if not 12 <= args.segment_index_bytes <= INT32_MAX:
        raise InputError(
            f"--segment-index-bytes must be between 12 (one time-index entry) and {INT32_MAX}, "
            f"got {args.segment_index_bytes}"
        )


def check_partition_dir(path: str) -> tuple[str, int]:
    """``(topic, partition)``; InputError naming ``path`` unless it is a readable partition directory
    with at least one segment."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such directory") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: not a directory (expected a <topic>-<partition> partition directory)")
    try:
        topic, partition = parse_partition_dir(path)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    bases = segment_base_offsets(path)  # PermissionError names the directory
    if not bases:
        raise InputError(f"{path}: no segment (<20-digit base offset>.log) in this directory")
    return topic, partition


def _describe(exc: BaseException, subject: str | None) -> str:
    """One line naming the file: OSError as '<file>: <reason>', others as their message."""
    if isinstance(exc, OSError) and exc.filename is not None:
        message = f"{os.fsdecode(exc.filename)}: {exc.strerror or exc}"
        if exc.filename2 is not None:
            message += f" ({os.fsdecode(exc.filename2)})"
    else:
        message = str(exc) or type(exc).__name__
        if subject and subject not in message:
            message = f"{subject}: {message}"
    return " ".join(message.split())


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


# ------------------------------------------------------------------------------------------ rebuild
def run_rebuild(args: argparse.Namespace) -> int:
    check_settings(args)
    source = args.partition_dir
    check_partition_dir(source)
    name = os.path.basename(os.path.normpath(source))
    target = source if args.output_dir is None else os.path.join(args.output_dir, name)
    in_place = os.path.realpath(target) == os.path.realpath(source)
    if in_place:
        log_dir = os.path.dirname(os.path.realpath(source))
        if log_dir_is_locked(log_dir):
            lock = os.path.join(log_dir, ".lock")
            if not args.force:
                raise InputError(
                    f"{lock}: held by another process (a running broker?); refusing to rebuild "
                    f"{source} in place (stop the broker, use --output-dir, or pass --force)"
                )
            _warn(f"{lock}: held by another process; rebuilding in place anyway (--force)")
        if not os.access(source, os.W_OK | os.X_OK):
            raise InputError(
                f"{source}: Permission denied: cannot write the rebuilt index files into this "
                "directory (rebuild elsewhere with --output-dir DIR)"
            )
    result = rebuild_partition(
        source,
        index_interval_bytes=args.index_interval_bytes,
        segment_index_bytes=args.segment_index_bytes,
        output_dir=None if in_place else args.output_dir,
        backup_dir=args.backup_dir,
    )
    print_rebuild(result, target, in_place, args, sys.stdout)
    return EXIT_FINDINGS if any(seg.fatal is not None for seg in result.segments) else EXIT_OK


def print_rebuild(result: PartitionRebuild, target: str, in_place: bool, args: argparse.Namespace, out: TextIO) -> None:
    where = "in place" if in_place else f"into {target}"
    print(
        f"rebuild {result.topic}-{result.partition} ({result.partition_dir}) {where}: "
        f"index.interval.bytes={args.index_interval_bytes} segment.index.bytes={args.segment_index_bytes}, "
        f"log start offset {result.log_start_offset}",
        file=out,
    )
    written = backups = failed = 0
    for seg in result.segments:
        scan, plan = seg.scan, seg.plan
        line = (
            f"segment {segment_name(seg.base_offset, '')}: {_plural(scan.batch_count, 'batch', 'batches')}, "
            f"{scan.valid_bytes} valid bytes"
        )
        if seg.fatal is None:
            counts = {
                ".index": len(plan.offset_offsets),
                ".timeindex": len(plan.time_timestamps),
                ".txnindex": len(seg.aborted),
            }
            names = {os.path.splitext(p)[1] for p in seg.written}
            files = [
                f"{suffix} {_plural(counts[suffix], 'entry', 'entries')}"
                for suffix in INDEX_SUFFIXES
                if suffix in names
            ]
            if ".txnindex" not in names:
                files.append(".txnindex not needed (no aborted transaction)")
            line += "; " + ", ".join(files)
        print(line, file=out)
        if seg.truncation is not None:
            p = seg.truncation
            print(
                f"  corrupt tail: {p.kind} at byte {p.position} (batch {p.batch_index}): {p.detail}; "
                f"{scan.invalid_bytes} bytes after the valid data, which Kafka's recovery would truncate "
                "(the .log is left unchanged)",
                file=out,
            )
        elif scan.invalid_bytes:
            print(
                f"  short tail: {scan.invalid_bytes} bytes after the last batch, which Kafka's recovery "
                "would truncate (the .log is left unchanged)",
                file=out,
            )
        if seg.fatal is not None:
            p = seg.fatal
            failed += 1
            print(
                f"  FATAL {p.kind} at byte {p.position} (batch {p.batch_index}): {p.detail}; "
                "Kafka's recovery would fail here, so no index file was written for this segment",
                file=out,
            )
        written += len(seg.written)
        backups += len(seg.backups)
    summary = f"done: {_plural(len(result.segments), 'segment')}, {_plural(written, 'file')} written to {target}"
    if args.backup_dir is not None:
        summary += f", {_plural(backups, 'previous file')} kept in {args.backup_dir}"
    if failed:
        summary += f"; {_plural(failed, 'segment')} could not be rebuilt"
    print(summary, file=out)


# ------------------------------------------------------------------------------------------- verify
def run_verify(args: argparse.Namespace) -> int:
    check_settings(args)
    check_partition_dir(args.partition_dir)
    from .verify import verify_partition  # imported here: dump and rebuild do not need it

    report = verify_partition(
        args.partition_dir,
        index_interval_bytes=args.index_interval_bytes,
        segment_index_bytes=args.segment_index_bytes,
    )
    text_out = sys.stdout
    if args.json is not None:
        data = report.to_dict()
        data.setdefault("healthy", report.healthy)
        data.setdefault(
            "settings",
            {"index_interval_bytes": args.index_interval_bytes, "segment_index_bytes": args.segment_index_bytes},
        )
        if args.json == "-":
            json.dump(data, sys.stdout, indent=2)
            sys.stdout.write("\n")
            sys.stdout.flush()
            text_out = sys.stderr
        else:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2)
                f.write("\n")
    print_verify(report, args, text_out)
    return EXIT_OK if report.healthy else EXIT_FINDINGS


def _cell(value: Any) -> str:
    return "-" if value is None else " ".join(str(value).split())


def print_verify(report: Any, args: argparse.Namespace, out: TextIO) -> None:
    print(
        f"verify {report.topic}-{report.partition} ({report.partition_dir}): "
        f"index.interval.bytes={args.index_interval_bytes} segment.index.bytes={args.segment_index_bytes}, "
        f"{_plural(len(report.segments), 'segment')}",
        file=out,
    )
    findings = report.all_findings
    if findings:
        header = ("SEVERITY", "KIND", "FILE", "ENTRY", "EXPECTED", "FOUND", "DETAIL")
        rows = []
        for f in findings:
            detail = f.detail if f.count == 1 else f"{f.detail} (x{f.count})"
            rows.append(
                (
                    f.severity,
                    f.kind,
                    os.path.basename(f.file) if f.file else "-",
                    _cell(f.entry),
                    _cell(f.expected),
                    _cell(f.found),
                    _cell(detail),
                )
            )
        widths = [min(40, max(len(r[i]) for r in [header, *rows])) for i in range(len(header) - 1)]
        for r in [header, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1], file=out)
    else:
        print("no findings", file=out)
    print("identical to rebuild:", file=out)
    words = {True: "identical", False: "differs", None: "absent, none expected"}
    for seg in report.segments:
        state = "active" if seg.active else "inactive"
        states = ", ".join(
            f"{suffix} {words.get(seg.identical.get(suffix), _cell(seg.identical.get(suffix)))}"
            for suffix in INDEX_SUFFIXES
        )
        print(f"  {segment_name(seg.base_offset, '')} ({state}): {states}", file=out)
    errors = [f for f in findings if f.severity == "error"]
    infos = len(findings) - len(errors)
    if report.healthy:
        verdict = f"verdict: healthy ({_plural(len(report.segments), 'segment')}, no errors"
        verdict += f", {_plural(infos, 'info finding')})" if infos else ")"
    else:
        files = {f.file for f in errors}
        verdict = f"verdict: NOT healthy: {_plural(len(errors), 'error finding')} in {_plural(len(files), 'file')}"
        if infos:
            verdict += f" (and {_plural(infos, 'info finding')})"
    print(verdict, file=out)


# --------------------------------------------------------------------------------------------- dump
def run_dump(args: argparse.Namespace) -> int:
    dump = read_dump(args.file)
    if args.json:
        _write_chunks(sys.stdout, iter_json(dump), "")
        sys.stdout.write("\n")
    else:
        _write_chunks(sys.stdout, format_dump(dump), "\n")
    sys.stdout.flush()
    return EXIT_FINDINGS if dump.problems else EXIT_OK


def _write_chunks(out: TextIO, chunks: Iterable[str], sep: str, batch: int = 4096) -> None:
    """Write ``chunks`` (each followed by ``sep``) in batches: one write per ``batch`` chunks."""
    pending: list[str] = []
    for chunk in chunks:
        pending.append(chunk)
        if len(pending) >= batch:
            out.write(sep.join(pending) + sep)
            pending.clear()
    if pending:
        out.write(sep.join(pending) + sep)


# --------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's usage errors give 2, ``--help`` 0)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage error (2) or --help (0): argparse already printed why
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_BAD_INPUT)
    subject = getattr(args, "partition_dir", None) or getattr(args, "file", None)
    try:
        code: int = args.run(args)
        return code
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK
    except InputError as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    except (OSError, ValueError) as exc:  # unreadable, not a regular file, garbage, bad name, ...
        _error(_describe(exc, subject))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as exc:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("KAFKA_INDEX_DEBUG"):
            raise
        _error(
            f"unexpected {type(exc).__name__} while processing {subject}: {_describe(exc, None)} "
            "(set KAFKA_INDEX_DEBUG=1 for the traceback)"
        )
        return EXIT_BAD_INPUT
