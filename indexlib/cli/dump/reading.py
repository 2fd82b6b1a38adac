"""Reading one file for a dump: which kind it is (its name: a segment file, a producer snapshot or a checkpoint),
that it is a regular file, and the dump of its kind.

Invariants: bad input raises ``ValueError`` or ``OSError`` naming the file; nothing is written.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ...format.errors import NotARegularFileError
from ...format.offset_index import OffsetIndex
from ...format.time_index import TimeIndex
from .index_files import dump_mmap_index, dump_txn_index
from .log_file import dump_log
from .model import DEFAULT_OPTIONS, DumpOptions, FileDump, dump_kind
from .state_files import dump_leader_epoch_checkpoint, dump_offset_checkpoint, dump_snapshot


def check_regular(path: str) -> os.stat_result:
    st = os.stat(path)  # FileNotFoundError / PermissionError name the file
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "is a directory, not a segment file", path)
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFileError(f"{path}: not a regular file")
    return st


def read_dump(
    path: str | os.PathLike[str], options: DumpOptions = DEFAULT_OPTIONS, shown: str | None = None
) -> FileDump:
    """Open one segment, snapshot or checkpoint file read-only and read everything a dump shows (``options`` matter
    for a ``.log``); the dump names the file ``shown`` when given (an object's URI, for its local copy)."""
    path = os.fspath(path)
    dump = _read_dump(path, options)
    if shown is not None:
        dump.summary["file"] = shown
    return dump


def _read_dump(path: str, options: DumpOptions) -> FileDump:
    base_offset, kind = dump_kind(path)
    check_regular(path)
    if kind == "leader_epoch_checkpoint":
        return dump_leader_epoch_checkpoint(path)
    if kind == "offset_checkpoint":
        return dump_offset_checkpoint(path)
    if kind == "kraft_snapshot":  # record batches, as in a .log (base offset: the snapshot's end offset, if named)
        return dump_log(path, base_offset, options, kraft_snapshot=True)
    assert base_offset is not None  # every other kind has a <20-digit offset> name
    if kind == "producer_snapshot":
        return dump_snapshot(path, base_offset)
    if kind == "log":
        return dump_log(path, base_offset, options)
    if kind == "transaction_index":
        return dump_txn_index(path, base_offset)
    return dump_mmap_index(path, base_offset, OffsetIndex if kind == "offset_index" else TimeIndex, kind)


def dump_file(path: str | os.PathLike[str], options: DumpOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
    """The dump of one segment file as a JSON-able dict (``read_dump(path, options).to_dict()``)."""
    return read_dump(path, options).to_dict()
