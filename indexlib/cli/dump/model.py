"""What a dump is: :class:`FileDump` (a summary and its rows in numpy columns), the kinds of file by suffix and
how a file name is read.

Invariants: a :class:`FileDump`'s rows come in file order, built lazily from its columns, a chunk at a time;
``summary`` is JSON-able and holds no rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...format.errors import FileNameError
from ...format.layout import parse_segment_name

#: File suffix -> dump kind.
KINDS = {".index": "offset_index", ".timeindex": "time_index", ".txnindex": "transaction_index", ".log": "log"}

_ROW_CHUNK = 65536


def parse_segment_file_name(path: str | os.PathLike[str]) -> tuple[int, str]:
    """``(base_offset, suffix)`` of ``<20 digits>.<index|timeindex|txnindex|log>``; :class:`FileNameError` naming the file."""
    parsed = parse_segment_name(os.path.basename(os.fspath(path)))
    if parsed is None or parsed[1] not in KINDS:
        raise FileNameError(
            f"{os.fspath(path)}: not a Kafka segment file name (expected <20-digit base offset> followed by "
            f"one of {', '.join(KINDS)}, e.g. 00000000000000000000.index)"
        )
    return parsed


@dataclass
class FileDump:
    """One dumped file: ``summary`` (JSON-able, without the rows) and the rows in numpy columns.

    ``rows_key`` is ``"entries"`` for an index and ``"batches"`` for a ``.log``; :meth:`rows` yields one
    dict per row, in file order, built lazily from ``columns``.
    """

    summary: dict[str, Any]
    rows_key: str
    columns: dict[str, np.ndarray] = field(repr=False)
    _row: Any = field(repr=False, default=None)  # columns chunk (lists) -> iterator of row dicts

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
        for start in range(0, n, _ROW_CHUNK):
            chunk = [self.columns[k][start : start + _ROW_CHUNK].tolist() for k in names]
            yield from self._row(chunk)

    def to_dict(self) -> dict[str, Any]:
        """Summary and rows as one JSON-able dict (rows under ``rows_key``, before ``problems``)."""
        out = {k: v for k, v in self.summary.items() if k != "problems"}
        out[self.rows_key] = list(self.rows())
        out["problems"] = self.summary["problems"]
        return out


def _problem(kind: str, position: int | None, detail: str) -> dict[str, Any]:
    return {"kind": kind, "position": position, "detail": detail}


def problem(kind: str, position: int | None, detail: str) -> dict[str, Any]:
    """One entry of a dump's ``problems``."""
    return {"kind": kind, "position": position, "detail": detail}
