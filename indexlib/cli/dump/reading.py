"""Reading one segment file for a dump: which kind it is (its name), that it is a regular file, and the
dump of its kind.

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
from .model import DEFAULT_OPTIONS, KINDS, DumpOptions, FileDump, parse_segment_file_name


def _check_regular(path: str) -> os.stat_result:
    st = os.stat(path)  # FileNotFoundError / PermissionError name the file
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "is a directory, not a segment file", path)
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFileError(f"{path}: not a regular file")
    return st


def read_dump(path: str | os.PathLike[str], options: DumpOptions = DEFAULT_OPTIONS) -> FileDump:
    """Open one segment file read-only and read everything a dump shows (``options`` matter for a ``.log``)."""
    path = os.fspath(path)
    base_offset, suffix = parse_segment_file_name(path)
    _check_regular(path)
    kind = KINDS[suffix]
    if kind == "log":
        return dump_log(path, base_offset, options)
    if kind == "transaction_index":
        return dump_txn_index(path, base_offset)
    return dump_mmap_index(path, base_offset, OffsetIndex if kind == "offset_index" else TimeIndex, kind)


def dump_file(path: str | os.PathLike[str], options: DumpOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
    """The dump of one segment file as a JSON-able dict (``read_dump(path, options).to_dict()``)."""
    return read_dump(path, options).to_dict()
