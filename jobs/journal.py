"""The audit journal: a run's audit rows on local disk, written while it commits, so that a run that
replaced files leaves a trail even when it dies before its rows reach the Delta table, or when the table
write fails (a full disk, an unreachable URI).

One JSON-lines file per run, ``<journal dir>/<run id>.jsonl``, every line fsynced before the run goes on:

* ``{"record": "run", ...}``: the run id, mode, start and the table the rows are for (the first line);
* ``{"record": "intent", ...}``: a segment's key and the files its commit may replace, before the first
  rename;
* ``{"record": "segment", "row": {...}}``: that segment's audit row, after its renames;
* ``{"record": "final", "rows": [...]}``: every row of the finished run, just before the table write.

The file is removed once the table has the rows. :func:`rows_of` turns a journal into rows: the final
rows when the run got that far; else its segment rows, an ``interrupted`` row for each intent without one
(its files may or may not have been replaced: the backup dir holds the old ones), and an ``interrupted``
run row. :func:`recover` merges them (the MERGE is idempotent, so merging twice changes nothing).
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from typing import Any

from indexlib.engine import Decision, RunOptions, SegmentOutcome, SegmentResult, files_to_replace
from indexlib.publish import fsync_path

from . import audit

SUFFIX = ".jsonl"
INTERRUPTED = "interrupted"
_TIMES = ("run_started", "run_finished")


def journal_path(journal_dir: str, run_id: str) -> str:
    return os.path.join(journal_dir, run_id + SUFFIX)


class AuditJournal:
    """The journal of one run (an :class:`indexlib.engine.CommitObserver`). Nothing is created until
    there is something to record."""

    def __init__(self, journal_dir: str, table: str, run_id: str, options: RunOptions) -> None:
        self.path = journal_path(journal_dir, run_id)
        self.table = table
        self.run_id = run_id
        self.options = options
        self.started = datetime.now(UTC)
        self._opened = False

    def _append(self, record: dict[str, Any]) -> None:
        if not self._opened:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            header = {"record": "run", "run_id": self.run_id, "mode": self.options.mode, "table": self.table}
            header["started"] = self.started.isoformat()
            self._write([header], create=True)
            fsync_path(os.path.dirname(os.path.abspath(self.path)))
            self._opened = True
        self._write([record], create=False)

    def _write(self, records: list[dict[str, Any]], create: bool) -> None:
        try:
            with open(self.path, "x" if create else "a", encoding="utf-8") as f:
                for record in records:
                    f.write(json.dumps(record, default=_encode) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            if create:  # no half-made journal (a torn later line is ignored by read)
                _remove(self.path)
            raise

    def before_commit(self, outcome: SegmentOutcome, decision: Decision) -> None:
        t = outcome.task
        key = {"log_dir": t.log_dir, "topic": t.topic, "partition": t.partition, "base_offset": t.base_offset}
        self._append({"record": "intent", **key, "files": files_to_replace(outcome, decision)})

    def after_commit(self, result: SegmentResult) -> None:
        common = audit.run_common(self.run_id, self.options.mode, self.started, None)
        self._append({"record": "segment", "row": audit.segment_row(result, common, self.options)})

    def finish(self, rows: list[dict[str, Any]]) -> None:
        """Record every row of the finished run (just before the table write)."""
        self._append({"record": "final", "rows": rows})

    def remove(self) -> None:
        """The table has the rows: the journal is no longer needed."""
        if self._opened:
            _remove(self.path)


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


def read(path: str) -> list[dict[str, Any]]:
    """The records of a journal; a torn last line (the process died writing it) is ignored."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return records


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
                "record_type": "segment",
                "log_dir": r["log_dir"],
                "topic": r["topic"],
                "partition": r["partition"],
                "base_offset": r["base_offset"],
                "segments": 1,
                "status": INTERRUPTED,
                "action": INTERRUPTED,
                "files_written": r["files"],
                "findings_json": json.dumps(
                    [
                        {
                            "kind": INTERRUPTED,
                            "detail": "the run died while replacing these files; any of them may "
                            "have been replaced (the previous ones are in the run's backup dir)",
                        }
                    ]
                ),  # fmt: skip
            }
        elif r.get("record") == "segment":
            row = _decode(dict(r["row"]))
            rows[(row["log_dir"], row["topic"], row["partition"], row["base_offset"])] = row
    segments = list(rows.values())
    run_row = {
        **common,
        "record_type": "run",
        "log_dir": ",".join(sorted({r["log_dir"] for r in segments})),
        "topic": "",
        "partition": -1,
        "base_offset": -1,
        "segments": len(segments),
        "status": INTERRUPTED,
        "action": header["mode"],
        "files_written": [f for r in segments for f in r.get("files_written") or []],
    }
    return [*segments, run_row], False


def pending(journal_dir: str, table: str) -> list[str]:
    """The journals in ``journal_dir`` whose rows are for ``table`` (oldest first)."""
    try:
        names = sorted(n for n in os.listdir(journal_dir) if n.endswith(SUFFIX))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        path = os.path.join(journal_dir, name)
        records = read(path)
        header = records[0] if records else None
        if header is not None and header.get("table") == table:
            out.append(path)
    return sorted(out, key=os.path.getmtime)


def recover(path: str, table: str) -> tuple[str, int, int | None, bool]:
    """Merge one journal's rows into ``table`` and remove it. Returns (run id, rows, rows new, finished).
    Raises whatever the table write raises (the journal is then kept)."""
    records = read(path)
    rows, finished = rows_of(records)
    run_id = records[0]["run_id"] if records else os.path.basename(path)[: -len(SUFFIX)]
    inserted = None
    if rows:
        _, inserted = audit.write(table, audit.to_table(rows))
    _remove(path)
    return run_id, len(rows), inserted, finished
