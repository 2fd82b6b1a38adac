"""The mark a ``recover`` keeps in each log dir while it changes it: ``.kafka-index-recovering``, one JSON object
(``run_id``, ``partitions``: the partition dir names it recovers there).

Invariants: the mark is durable (written as a checkpoint: a temporary file, fsync, rename, fsync of the dir) before
the run's first change in that log dir, and removed only after its recovery points there are durable. So a mark
found by a later run is a recover that died in between: its partitions may be part way through (each in a state
from which recover reaches the uninterrupted result), and the next recover takes them in first. Kafka ignores a
regular file in a log dir (it loads only dirs), so the mark never stops a broker."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import Store

from ..format.layout import RECOVERING_MARK
from .publish import fsync_path, write_checkpoint_file


@dataclass(frozen=True)
class RecoveringMark:
    """A mark as read: the run that left it and its partition dir names; ``unreadable``: why it could not be read
    (its partitions then unknown: every partition of the log dir may be part way)."""

    path: str
    run_id: str
    partitions: list[str] = field(default_factory=list)
    unreadable: str | None = None


def mark_path(log_dir: str) -> str:
    return os.path.join(log_dir, RECOVERING_MARK)


def read_mark(log_dir: str, store: Store | None = None) -> RecoveringMark | None:
    """The log dir's mark, or None when it has none (read through ``store``, or from the local disk)."""
    path = mark_path(log_dir)
    try:
        if store is None:
            with open(path, "rb") as f:
                data = f.read()
        else:
            data = store.read_bytes(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return RecoveringMark(path, "?", unreadable=exc.strerror or str(exc))
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON
        return RecoveringMark(path, "?", unreadable=f"not a mark this tool wrote ({exc})")
    run_id = record.get("run_id") if isinstance(record, dict) else None
    partitions = record.get("partitions") if isinstance(record, dict) else None
    if (
        not isinstance(run_id, str)
        or not isinstance(partitions, list)
        or not all(isinstance(p, str) and p and os.sep not in p for p in partitions)
    ):
        return RecoveringMark(path, "?", unreadable="not a mark this tool wrote (no run_id and partition names)")
    return RecoveringMark(path, run_id, sorted(partitions))


def write_mark(log_dir: str, run_id: str, partitions: list[str]) -> None:
    """Write (or replace) the log dir's mark, durable before this returns."""
    write_checkpoint_file(mark_path(log_dir), json.dumps({"run_id": run_id, "partitions": sorted(set(partitions))}))


def remove_mark(log_dir: str) -> bool:
    """Remove the log dir's mark, durably (the dir fsynced); whether there was one."""
    try:
        os.unlink(mark_path(log_dir))
    except FileNotFoundError:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(mark_path(log_dir) + ".tmp")  # a writer killed before its rename
    fsync_path(log_dir)
    return True
