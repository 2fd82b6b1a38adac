"""The audit journal: a run's audit rows on local disk, written while it commits, so that a run that
replaced files leaves a trail even when it dies before its rows reach the Delta table, or when the table
write fails (a full disk, an unreachable URI).

One JSON-lines file per run, ``<journal dir>/<run id>.jsonl`` (``<run id>~N.jsonl`` for another run under that
run id going on at the same time in the same dir), locked by its run while it goes on, every line fsynced before
the run goes on:

* ``{"record": "run", ...}``: the run id, mode, start and the table the rows are for (the first line);
* ``{"record": "intent", ...}``: a segment's key and the files its commit may replace, before the first
  rename (for the files beside a partition's segments: its key with base offset -1, ``record_type``
  ``partition``);
* ``{"record": "segment", "row": {...}}``: that segment's (or partition's) audit row, after its renames;
* ``{"record": "final", "rows": [...]}``: every row of the finished run, just before the table write.

The file is removed once the table has the rows. :func:`rows_of` turns a journal into rows: the final
rows when the run got that far; else its segment rows, an ``interrupted`` row for each intent without one
(its files may or may not have been replaced: the backup dir holds the old ones), and an ``interrupted``
run row. :func:`recover` merges them (the MERGE is idempotent, so merging twice changes nothing).

A line that is not a journal record (garbage, a record missing its fields) is counted by :func:`load`,
never a reason to drop the lines after it; a journal with such lines is merged as far as it can be read
and never removed. Only a torn last line (no newline: the process died writing it) is what a kill leaves.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from indexlib.engine import Decision, RunOptions, SegmentOutcome, SegmentResult, files_to_replace
from indexlib.format import BrokerIdentity
from indexlib.storage import Partition, fsync_path

from . import audit

SUFFIX = ".jsonl"
INTERRUPTED = "interrupted"
_TIMES = ("run_started", "run_finished")


def journal_path(journal_dir: str, run_id: str) -> str:
    return os.path.join(journal_dir, run_id + SUFFIX)


class AuditJournal:
    """The journal of one run (an :class:`indexlib.engine.runner.CommitObserver`). Nothing is created until
    there is something to record. The run holds an exclusive ``flock`` on its journal from its creation to its
    removal (the kernel drops it when the process dies), so no other run merges the journal of a run that is still
    going (:func:`merge_lock`). Runs under one run id at once in one journal dir (a fleet's brokers on one host)
    each get their own file: ``<run id>.jsonl``, else ``<run id>~2.jsonl``, ..."""

    def __init__(self, journal_dir: str, table: str, run_id: str, options: RunOptions) -> None:
        self.path = journal_path(journal_dir, run_id)
        self.table = table
        self.run_id = run_id
        self.options = options
        self.started = datetime.now(UTC)
        self._opened = False
        self._fd = -1

    def _append(self, record: dict[str, Any]) -> None:
        if not self._opened:
            directory = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(directory, exist_ok=True)
            header = {"record": "run", "run_id": self.run_id, "mode": self.options.mode, "table": self.table}
            header["started"] = self.started.isoformat()
            self._create()
            try:
                self._write([header])
                fsync_path(directory)
            except BaseException:  # no half-made journal (a torn later line is ignored by read)
                self._close(remove=True)
                raise
            self._opened = True
        self._write([record])

    def _create(self) -> None:
        """Create this run's journal file, under the first free name, and lock it."""
        stem = self.path[: -len(SUFFIX)]
        for n in range(1, 1000):
            path = self.path if n == 1 else f"{stem}~{n}{SUFFIX}"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                continue
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, self.path) from exc
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits out a merge that opened it meanwhile (it leaves an empty file)
            self.path, self._fd = path, fd
            return
        raise FileExistsError(errno.EEXIST, "999 journals of this run id already", self.path)

    def _write(self, records: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(record, default=_encode) + "\n" for record in records).encode()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self.path) from exc

    def _close(self, remove: bool) -> None:
        if remove:
            _remove(self.path)
        if self._fd >= 0:
            os.close(self._fd)  # the lock goes with it
            self._fd = -1

    def run_started(self, options: RunOptions) -> None:
        self.options = options  # the sync method the run chose (auto resolved): what its segment rows record

    def before_commit(self, outcome: SegmentOutcome, decision: Decision) -> None:
        t = outcome.task
        key = {"log_dir": t.log_dir, "topic": t.topic, "partition": t.partition, "base_offset": t.base_offset}
        key.update(t.broker.to_dict())
        settings = audit.segment_settings_json(t, self.options)  # an interrupted row says how the run wrote too
        self._append(
            {"record": "intent", **key, "files": files_to_replace(outcome, decision), "settings_json": settings}
        )

    def after_commit(self, result: SegmentResult) -> None:
        common = audit.run_common(self.run_id, self.options.mode, self.started, None)
        self._append({"record": "segment", "row": audit.segment_row(result, common, self.options)})

    def before_partition_files(self, partition: Partition, broker: BrokerIdentity, files: list[str]) -> None:
        key = {"log_dir": partition.log_dir, "topic": partition.topic, "partition": partition.partition}
        key.update(broker.to_dict())
        self._append({"record": "intent", **key, "base_offset": -1, "record_type": "partition", "files": files})

    def after_partition_files(
        self, partition: Partition, broker: BrokerIdentity, written: list[str], backups: list[str]
    ) -> None:
        common = audit.run_common(self.run_id, self.options.mode, self.started, None)
        row = audit.partition_row(partition, broker, written, backups, common, self.options)
        self._append({"record": "segment", "row": row})

    def finish(self, rows: list[dict[str, Any]]) -> None:
        """Record every row of the finished run (just before the table write)."""
        self._append({"record": "final", "rows": rows})

    def remove(self) -> None:
        """The table has the rows: the journal is no longer needed."""
        if self._opened:
            self._close(remove=True)

    def release(self) -> None:
        """The run is over and its rows wait in the journal (the table write failed): the journal stays, for the
        next run or ``audit --recover`` to merge."""
        self._close(remove=False)


def _encode(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot journal {type(value).__name__}")


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for name in _TIMES:
        if isinstance(row.get(name), str):
            row[name] = datetime.fromisoformat(row[name])
    return row


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


#: the fields each kind of record needs (what :func:`rows_of` reads), and their types
_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "run": {"run_id": str, "mode": str, "table": str, "started": str},
    "intent": {"log_dir": str, "topic": str, "partition": int, "base_offset": int, "files": list},
    "segment": {"row": dict},
    "final": {"rows": list},
}
_ROW_FIELDS: dict[str, type | tuple[type, ...]] = {"log_dir": str, "topic": str, "partition": int, "base_offset": int}


@dataclass
class Journal:
    """One journal file as read: its records, in order, and the numbers (from 1) of the lines that are not
    journal records. A torn last line (the process died writing it) is in neither."""

    path: str
    records: list[dict[str, Any]]
    unreadable: list[int]

    @property
    def header(self) -> dict[str, Any] | None:
        """The first line's ``run`` record (run id, mode, start, table); None when that line is unreadable."""
        if self.records and self.records[0].get("record") == "run" and 1 not in self.unreadable:
            return self.records[0]
        return None


def _has(record: dict[str, Any], fields: dict[str, type | tuple[type, ...]]) -> bool:
    return all(isinstance(record.get(name), kind) for name, kind in fields.items())


def _record(line: bytes) -> dict[str, Any] | None:
    """The journal record on one line, or None when it is not one (not JSON, an unknown kind, a field missing)."""
    try:
        parsed: object = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(parsed, dict):
        return None
    record: dict[str, Any] = parsed
    kind = record.get("record")
    if not isinstance(kind, str) or kind not in _FIELDS or not _has(record, _FIELDS[kind]):
        return None
    if kind == "run":
        try:
            datetime.fromisoformat(record["started"])
        except ValueError:
            return None
    rows = [record["row"]] if kind == "segment" else record["rows"] if kind == "final" else []
    if not all(isinstance(row, dict) and _has(row, _ROW_FIELDS) for row in rows):
        return None
    return record


def load(path: str) -> Journal:
    """Read a journal: every line that is a record, and the numbers of those that are not."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline, else the line its writer never finished
    records, unreadable = [], []
    for number, line in enumerate(lines, 1):
        record = _record(line)
        if record is None:
            unreadable.append(number)
        else:
            records.append(record)
    if torn and (record := _record(torn)) is not None:  # whole but for its newline
        records.append(record)
    return Journal(path, records, unreadable)


def read(path: str) -> list[dict[str, Any]]:
    """The records of a journal (:func:`load`); a torn last line is ignored, so is any unreadable line."""
    return load(path).records


def rows_of(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The audit rows a journal holds, and whether the run finished (see the module docstring)."""
    finals = [r for r in records if r.get("record") == "final"]
    if finals:
        return [_decode(dict(row)) for row in finals[-1]["rows"]], True
    header = next((r for r in records if r.get("record") == "run"), None)
    if header is None:
        return [], False
    started = datetime.fromisoformat(header["started"])
    common = audit.run_common(header["run_id"], header["mode"], started, None)
    rows: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for r in records:
        if r.get("record") == "intent":
            key = (r["log_dir"], r["topic"], r["partition"], r["base_offset"])
            rows[key] = {
                **common,
                "record_type": r.get("record_type", "segment"),  # "partition": files beside the segments
                "cluster_id": r.get("cluster_id"),
                "broker_id": r.get("broker_id"),
                "directory_id": r.get("directory_id"),
                "log_dir": r["log_dir"],
                "topic": r["topic"],
                "partition": r["partition"],
                "base_offset": r["base_offset"],
                "segments": 1 if r["base_offset"] >= 0 else 0,
                "status": INTERRUPTED,
                "action": INTERRUPTED,
                "files_written": r["files"],
                "settings_json": r.get("settings_json"),  # a segment's (a journal of an older version: none)
                "findings_json": json.dumps(
                    [
                        {
                            "kind": INTERRUPTED,
                            "detail": "the run died while replacing these files; any of them may "
                            "have been replaced (the previous ones are in the run's backup dir, or were "
                            "their rebuild and then zeros, now cut to it)",
                        }
                    ]
                ),  # fmt: skip
            }
        elif r.get("record") == "segment":
            row = _decode(dict(r["row"]))
            rows[(row["log_dir"], row["topic"], row["partition"], row["base_offset"])] = row
    segments = list(rows.values())
    brokers: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in segments:
        brokers.setdefault((row.get("cluster_id"), row.get("broker_id")), []).append(row)
    run_rows = [
        {
            **common,
            "record_type": "run",
            "cluster_id": who[0],
            "broker_id": who[1],
            "log_dir": ",".join(sorted({r["log_dir"] for r in mine})),
            "topic": "",
            "partition": -1,
            "base_offset": -1,
            "segments": sum(1 for r in mine if r["base_offset"] >= 0),
            "status": INTERRUPTED,
            "action": header["mode"],
            "files_written": [f for r in mine for f in r.get("files_written") or []],
        }
        for who, mine in (brokers or {(None, None): []}).items()
    ]
    return [*segments, *run_rows], False


def journals_of_run(journal_dir: str, run_id: str) -> list[str]:
    """The journals of runs under ``run_id`` in ``journal_dir`` (``<run id>.jsonl``, ``<run id>~N.jsonl``)."""
    return [
        path
        for path in journal_paths(journal_dir)
        if os.path.basename(path) == run_id + SUFFIX
        or (
            os.path.basename(path).startswith(run_id + "~")
            and os.path.basename(path)[len(run_id) + 1 : -len(SUFFIX)].isdigit()
        )
    ]


@contextlib.contextmanager
def merge_lock(path: str) -> Iterator[bool]:
    """Hold ``path``'s journal lock while it is merged: yields False, holding nothing, when a run that is still going
    holds it (its journal is not merged), or when the file is empty (a run creating it); raises
    ``FileNotFoundError`` when it is gone (merged and removed by another run)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield os.fstat(fd).st_size > 0
    finally:
        os.close(fd)


def journal_paths(journal_dir: str) -> list[str]:
    """The journals in ``journal_dir``, oldest first (one removed meanwhile is left out)."""
    try:
        names = [n for n in os.listdir(journal_dir) if n.endswith(SUFFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    times = {}
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            times[os.path.join(journal_dir, name)] = os.path.getmtime(os.path.join(journal_dir, name))
    return sorted(times, key=lambda path: (times[path], path))


def recover(
    journal: Journal, table: str, storage_options: dict[str, str] | None = None
) -> tuple[str, int, int | None, int, bool]:
    """Merge one journal's readable rows into ``table`` and remove it, unless it has unreadable lines (then
    it is kept for a person to mend). Returns (run id, rows, rows new, rows replaced, finished). Raises
    whatever the table write raises (the journal is then kept)."""
    rows, finished = rows_of(journal.records)
    header = journal.header
    run_id = header["run_id"] if header else os.path.basename(journal.path)[: -len(SUFFIX)]
    inserted: int | None = 0
    replaced = 0
    if rows:
        result = audit.write(table, audit.to_table(rows), storage_options=storage_options)
        inserted, replaced = result.inserted, result.replaced
    if not journal.unreadable:
        _remove(journal.path)
    return run_id, len(rows), inserted, replaced, finished
