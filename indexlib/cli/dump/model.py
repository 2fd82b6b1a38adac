"""What a dump is: :class:`FileDump` (a summary and its rows in numpy columns), the kinds of file by suffix and
how a file name is read.

Invariants: a :class:`FileDump`'s rows come in file order, built lazily from its columns, a chunk at a time;
``summary`` is JSON-able and holds no rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...format.errors import FileNameError, KafkaIndexError
from ...format.layout import (
    BOOTSTRAP_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    parse_kraft_snapshot_name,
    parse_segment_name,
)

#: how ``--print-data-log`` shows keys, values and header values
PAYLOAD_FORMATS = ("text", "hex", "base64")
#: ``--offsets-decoder`` / ``--transaction-log-decoder`` / ``--cluster-metadata-decoder`` /
#: ``--remote-log-metadata-decoder``
DECODERS = ("offsets", "transaction-log", "cluster-metadata", "remote-log-metadata")

#: a chunk of columns (one list per column) -> its rows
RowMaker = Callable[[list[list[Any]]], Iterator[dict[str, Any]]]


class DumpUsageError(KafkaIndexError, ValueError):
    """Dump options that cannot go together, or a bad value: one line, exit 2."""


@dataclass(frozen=True)
class DumpOptions:
    """What a dump shows beyond its default (``kafka-dump-log.sh``'s options, README "dump").

    ``deep_iteration``: each batch's records; ``print_data_log``: also their keys and values, as
    ``payload_format``; ``decoder``: keys and values of ``__consumer_offsets`` (``offsets``) or
    ``__transaction_state`` (``transaction-log``), of KRaft's metadata log (``cluster-metadata``) or of
    ``__remote_log_metadata`` (``remote-log-metadata``) decoded; ``max_bytes``: only the batches that end within the
    first ``max_bytes`` bytes of a ``.log``. A decoder implies ``print_data_log``, which implies ``deep_iteration``.
    """

    deep_iteration: bool = False
    print_data_log: bool = False
    payload_format: str = "text"
    decoder: str | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.payload_format not in PAYLOAD_FORMATS:
            raise DumpUsageError(f"payload format {self.payload_format!r} is not one of {', '.join(PAYLOAD_FORMATS)}")
        if self.decoder is not None and self.decoder not in DECODERS:
            raise DumpUsageError(f"decoder {self.decoder!r} is not one of {', '.join(DECODERS)}")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise DumpUsageError(f"--max-bytes must be at least 0, got {self.max_bytes}")
        if self.decoder is not None:
            object.__setattr__(self, "print_data_log", True)
        if self.print_data_log:
            object.__setattr__(self, "deep_iteration", True)


#: a dump as it always was: batch headers and index entries only
DEFAULT_OPTIONS = DumpOptions()

#: File suffix -> dump kind (a ``<20-digit offset><suffix>`` name).
KINDS = {
    ".index": "offset_index",
    ".timeindex": "time_index",
    ".txnindex": "transaction_index",
    ".log": "log",
    ".snapshot": "producer_snapshot",
}
#: File name -> dump kind: the checkpoints Kafka keeps in a partition dir and in a log dir.
NAMED_KINDS = {
    LEADER_EPOCH_CHECKPOINT: "leader_epoch_checkpoint",
    RECOVERY_POINT_OFFSET_CHECKPOINT: "offset_checkpoint",
    LOG_START_OFFSET_CHECKPOINT: "offset_checkpoint",
    "replication-offset-checkpoint": "offset_checkpoint",
    "cleaner-offset-checkpoint": "offset_checkpoint",
}

_ROW_CHUNK = 65536


def _name_error(path: str | os.PathLike[str]) -> FileNameError:
    return FileNameError(
        f"{os.fspath(path)}: not a Kafka segment file name (expected <20-digit base offset> followed by one of "
        f"{', '.join(KINDS)}, e.g. 00000000000000000000.index) nor a checkpoint ({', '.join(NAMED_KINDS)}, "
        f"a KRaft snapshot <20-digit offset>-<10-digit epoch>.checkpoint, {BOOTSTRAP_CHECKPOINT})"
    )


def parse_segment_file_name(path: str | os.PathLike[str]) -> tuple[int, str]:
    """``(base_offset, suffix)`` of ``<20 digits>.<index|timeindex|txnindex|log|snapshot>``; :class:`FileNameError`
    naming the file."""
    parsed = parse_segment_name(os.path.basename(os.fspath(path)))
    if parsed is None or parsed[1] not in KINDS:
        raise _name_error(path)
    return parsed


def dump_kind(path: str | os.PathLike[str]) -> tuple[int | None, str]:
    """``(base offset, kind)`` of a file dump reads, by its name (the offset is None for a checkpoint, a KRaft
    snapshot's is its end offset); :class:`FileNameError` naming the file."""
    name = os.path.basename(os.fspath(path))
    kind = NAMED_KINDS.get(name)
    if kind is not None:
        return None, kind
    if name == BOOTSTRAP_CHECKPOINT:
        return None, "kraft_snapshot"
    snapshot = parse_kraft_snapshot_name(name)
    if snapshot is not None:
        return snapshot[0], "kraft_snapshot"
    base_offset, suffix = parse_segment_file_name(path)
    return base_offset, KINDS[suffix]


@dataclass
class FileDump:
    """One dumped file: ``summary`` (JSON-able, without the rows) and the rows in numpy columns.

    ``rows_key`` is ``"entries"`` for an index and ``"batches"`` for a ``.log``; :meth:`rows` yields one
    dict per row, in file order, built lazily from ``columns``.
    """

    summary: dict[str, Any]
    rows_key: str
    columns: dict[str, np.ndarray] = field(repr=False)
    _row: RowMaker | None = field(repr=False, default=None)
    #: opens what making rows needs (a ``.log``'s mapping for its records) for one pass over the rows
    _row_source: Callable[[], AbstractContextManager[RowMaker]] | None = field(repr=False, default=None)

    @property
    def kind(self) -> str:
        kind: str = self.summary["kind"]
        return kind

    @property
    def row_count(self) -> int:
        count: int = self.summary["batch_count" if self.rows_key == "batches" else "entry_count"]
        return count

    @property
    def problems(self) -> list[dict[str, Any]]:
        problems: list[dict[str, Any]] = self.summary["problems"]
        return problems

    def rows(self) -> Iterator[dict[str, Any]]:
        names = list(self.columns)
        n = len(next(iter(self.columns.values()))) if names else 0
        source = self._row_source() if self._row_source is not None else nullcontext(self._row)
        with source as make_rows:
            assert make_rows is not None
            for start in range(0, n, _ROW_CHUNK):
                chunk = [self.columns[k][start : start + _ROW_CHUNK].tolist() for k in names]
                yield from make_rows(chunk)

    def to_dict(self) -> dict[str, Any]:
        """Summary and rows as one JSON-able dict (rows under ``rows_key``, before ``problems``)."""
        out = {k: v for k, v in self.summary.items() if k != "problems"}
        out[self.rows_key] = list(self.rows())
        out["problems"] = self.summary["problems"]
        return out


def problem(kind: str, position: int | None, detail: str) -> dict[str, Any]:
    """One entry of a dump's ``problems``."""
    return {"kind": kind, "position": position, "detail": detail}
