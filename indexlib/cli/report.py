"""A run's report as both command lines print it (tables and a verdict) and write it (``--json``)."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ..engine import RunReport, summary_rows
from ..format.errors import KafkaIndexError
from ..recovery.findings import Finding


class JsonTargetError(KafkaIndexError, ValueError):
    """A ``--json`` target a report cannot be written to (a directory, or in a directory that does not exist)."""


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: a header, a rule, left-aligned columns (``None`` prints empty)."""
    cells = [[str(c) for c in headers]] + [[_cell(c) for c in r] for r in rows]
    widths = [max(map(len, column)) for column in zip(*cells, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [line.format(*r).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """One cell: empty for ``None``, its whitespace runs one space."""
    if value is None:
        return ""
    if type(value) is int:
        return str(value)
    return " ".join(str(value).split())


def relative_paths() -> Callable[[str], str]:
    """``os.path.relpath`` from this process's working directory, each directory's worked out once from its parent's
    (a report names thousands of files in thousands of dirs of a few log dirs): a file's is its dir's and its name,
    except below an ancestor of the working directory (the path may lead back into it). A URI stays as it is."""
    dirs: dict[str, str] = {}

    def relative(path: str) -> str:
        if "://" in path:  # an object's URI is shown whole
            return path
        head, name = os.path.split(path)
        if not name or name in (os.curdir, os.pardir) or head == path:
            return os.path.relpath(path)
        if head not in dirs:
            dirs[head] = relative(head) if head else os.curdir
        base = dirs[head]
        if base == os.curdir:
            return name
        if all(part == os.pardir for part in base.split(os.sep)):  # an ancestor of the working dir: may lead back in
            return os.path.relpath(path)
        return os.path.join(base, name)

    return relative


def keep_output_in_order() -> None:
    """When stdout and stderr are one file (``cmd > log 2>&1``, a task log): stdout line-buffered, so that each
    line lands where it was printed among stderr's (block-buffered, the report would follow every warning and
    error printed after it). Elsewhere (a terminal: already line-buffered; a pipe of its own) nothing changes."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind one of them (a test's capture)
        return
    if (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino) and isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)


def print_report(report: RunReport, out: TextIO, level: str = "normal") -> None:
    """The findings table, failed writes, the per-partition summary and the verdict line. ``level``:
    ``quiet`` prints only failed writes, the error findings that remain (one line each) and the verdict line;
    ``verbose`` adds the time of each phase."""
    if level == "quiet":
        _print_failures(report, out)
        relative = relative_paths()
        for f in report.remaining_findings:
            print(f"{f.kind} {relative(f.file)}" + (f": {f.detail}" if f.detail else ""), file=out)
        print(_verdict_line(report).lstrip("\n"), file=out)
        return
    findings = [f for fs in report.partition_findings.values() for f in fs] + [
        f for s in report.segments for f in s.findings
    ]
    # one line per log dir names its broker; the tables add a broker column when the run reads several brokers'
    several = len({identity.broker_id for identity in report.brokers.values()}) > 1
    for log_dir, identity in report.brokers.items():
        directory = f" (directory id {identity.directory_id})" if identity.directory_id else ""
        print(f"log dir {log_dir}: {identity.describe()}{directory}", file=out)
    if report.brokers:
        print(file=out)
    relative = relative_paths()
    if findings:
        rows = [
            [
                *([_broker(report.broker_of(f.file).broker_id)] if several else []),
                f.kind if f.severity == "error" else f"{f.kind} (info)",
                relative(f.file),
                f.entry,
                f.expected,
                f.found,
                f.detail if f.count == 1 else f"{f.detail} (x{f.count})",
            ]
            for f in findings
        ]
        headers = ["kind", "file", "entry", "expected", "found", "detail"]
        print(format_table(["broker", *headers] if several else headers, rows), file=out)
        print(file=out)
    if report.swept:
        print(f"removed {len(report.swept)} staged files that killed runs had left (never installed):", file=out)
        print("\n".join(f"  {relative(path)}" for path in report.swept) + "\n", file=out)
    if report.rewritten:
        print("rewritten from the log (the old files are in the backups):", file=out)
        print("\n".join(f"  {relative(path)}" for path in report.rewritten) + "\n", file=out)
    _print_failures(report, out)
    summary = [
        [
            *([_broker(report.broker_of(r["log_dir"]).broker_id)] if several else []),
            r["partition"],
            r["segments"],
            f"{r['bytes'] / 2**20:.1f}",
            r["findings"],
            ",".join(sorted(r["kinds"])),
            r["written"],
            ",".join(sorted(r["actions"])) or "-",
        ]
        for r in summary_rows(report)
    ]
    written = "files to write" if report.options.dry_run else "files written"
    headers = ["partition", "segments", "MiB", "findings", "kinds", written, "action"]
    print(format_table(["broker", *headers] if several else headers, summary), file=out)
    if level == "verbose" and report.phase_seconds:
        phases = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in report.phase_seconds.items())
        print(f"\nphases: {phases}", file=out)
    print(_verdict_line(report), file=out)


def _broker(broker_id: int | None) -> str:
    return "?" if broker_id is None else str(broker_id)


def _print_failures(report: RunReport, out: TextIO) -> None:
    failures = [s.error for s in report.segments if s.error] + report.errors
    if failures:
        print("failed writes (each file is either unchanged or wholly replaced; see written in --json):", file=out)
        print("\n".join(f"  {error}" for error in failures) + "\n", file=out)


def _verdict_line(report: RunReport) -> str:
    total = sum(s.file_size for s in report.segments)
    seconds = (report.finished - report.started).total_seconds()
    return (
        f"\n{report.mode} {report.run_id}: {len(report.segments)} segments, {total / 2**20:,.1f} MiB "
        f"in {seconds:.1f} s; {_verdict(report)}"
    )


def _verdict(report: RunReport) -> str:
    refused = sum(s.action == "cannot_rebuild" for s in report.segments)
    failed = sum(s.action == "failed" for s in report.segments)
    left = len(report.remaining_findings)
    if report.exit_code == 0:
        return "done" if report.mode == "rebuild" else "healthy"
    parts = []
    if report.mode != "rebuild" and left:
        parts.append(f"{left} finding(s) remain")
    if refused:
        parts.append(f"{refused} segment(s) could not be rebuilt (Kafka's recovery would fail on them)")
    if failed:
        parts.append(f"{failed} segment(s) failed")
    if report.errors:
        parts.append(f"{len(report.errors)} other write(s) failed")
    return "; ".join(parts) or "failures"


def report_to_dict(report: RunReport, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``--json`` report (JSON-able). Every segment and every finding carries the cluster id, broker id and
    directory id of its log dir (``brokers`` lists them per log dir); ``settings``: where each topic's index
    settings came from (:func:`~.settings_files.settings_to_dict`)."""

    def finding(f: Finding) -> dict[str, Any]:
        return {**f.to_dict(), **report.broker_of(f.file).to_dict()}

    return {
        "run_id": report.run_id,
        "mode": report.mode,
        "sync": report.options.sync,
        "exit_code": report.exit_code,
        "started": report.started.isoformat(),
        "finished": report.finished.isoformat(),
        "phase_seconds": {k: round(v, 4) for k, v in report.phase_seconds.items()},
        "errors": report.errors,
        "log_dirs": report.log_dirs,
        "brokers": [{"log_dir": d, **identity.to_dict()} for d, identity in report.brokers.items()],
        "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
        "swept": list(report.swept),
        "partition_files_written": report.partition_files_written,
        "partition_files_would_write": report.would_write,
        "partition_findings": {k: [finding(f) for f in v] for k, v in report.partition_findings.items() if v},
        "segments": [
            {
                "log_dir": s.task.log_dir,
                **s.task.broker.to_dict(),
                "topic": s.task.topic,
                "partition": s.task.partition,
                "base_offset": s.task.base_offset,
                "log_path": s.task.log_path,
                "bytes": s.file_size,
                "batches": s.batches,
                "valid_bytes": s.valid_bytes,
                "invalid_bytes": s.invalid_bytes,
                "index_interval_bytes": s.task.index_interval_bytes,
                "segment_index_bytes": s.task.segment_index_bytes,
                "findings": [{**f.to_dict(), **s.task.broker.to_dict()} for f in s.findings],
                "identical": s.identical,
                "action": s.action,
                "written": s.written,
                "would_write": s.would_write,
                "backups": s.backups,
                "error": s.error,
                "seconds": round(s.seconds, 4),
            }
            for s in report.segments
        ],
        "remaining_findings": [finding(f) for f in report.remaining_findings],
        **({} if settings is None else {"settings": settings}),
    }


def check_json_target(target: str | None) -> None:
    """:class:`JsonTargetError` naming ``target`` unless a report can be written there, checked before a run starts:
    ``-`` (stdout), or a file (replaced if it exists) in a directory that exists; never creates one."""
    if target is None or target == "-":
        return
    if os.path.isdir(target):
        raise JsonTargetError(f"{target}: --json names a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise JsonTargetError(f"{target}: --json: the directory {parent} does not exist")


#: how deep :func:`json_text` indents: the report's keys, then one line per segment, finding or partition
JSON_INDENTED_LEVELS = 2


def json_text(value: Any, level: int = 0) -> str:
    """``value`` as JSON, indented by two spaces for its first :data:`JSON_INDENTED_LEVELS` levels, each value below
    on one line: a large report stays readable and greppable (a segment per line), and the values below are written
    by the standard library's C encoder (``indent`` makes it use its pure-Python one: several times slower)."""
    if level >= JSON_INDENTED_LEVELS or not isinstance(value, dict | list) or not value:
        return json.dumps(value, default=str)
    pad = "  " * (level + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(str(k))}: {json_text(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    return "[\n" + ",\n".join(pad + json_text(v, level + 1) for v in value) + "\n" + "  " * level + "]"


def write_json(report: RunReport, target: str, settings: dict[str, Any] | None = None) -> None:
    """The ``--json`` report to ``target`` (``-``: stdout)."""
    text = json_text(report_to_dict(report, settings)) + "\n"
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
