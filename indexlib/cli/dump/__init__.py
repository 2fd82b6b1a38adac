"""Readable and JSON-able dumps of Kafka segment files: ``.index``, ``.timeindex``, ``.txnindex``, a ``.log``'s
batches and records and a producer snapshot's (``.snapshot``) producers (what Kafka's ``kafka-dump-log.sh`` prints, as
data); of the checkpoints beside them (``leader-epoch-checkpoint``, a log dir's offset checkpoints), which
``kafka-dump-log.sh`` does not read; and ``--check`` of each but a ``.log``.

* :func:`read_dump` opens one file and returns a :class:`FileDump`: a small summary plus the rows in
  numpy columns, so a huge file is read once and its rows are produced one at a time; :class:`DumpOptions`
  asks for records (``--deep-iteration``), payloads, decoders and ``--max-bytes``.
* :func:`dump_file` is ``read_dump(path, options).to_dict()``: a plain dict that ``json.dumps`` accepts.
* :func:`format_dump` yields readable lines (kafka-dump-log's, field for field) from either form; :func:`iter_json`
  yields the JSON text in chunks. Neither builds the whole output in memory.
* :func:`check_index_file` holds one index file to Kafka's sanity rules and verify's checks (``--check``), a
  snapshot or checkpoint to what Kafka reads and verify's checks of it;
  :func:`run_dump_command` is the ``dump`` command of both command lines.

Modules: ``model`` (what a dump is, its options), ``reading`` (one file to its dump), ``index_files``, ``log_file``,
``record_view`` and ``state_files`` (each kind's rows), ``text`` (lines and JSON), ``index_check``, ``command``.

The kind of file comes from its name, which must be ``<20-digit base offset>.<suffix>`` or a checkpoint's name. Every file is
opened read-only, so a dump needs no write permission, never changes a file and never hangs on a FIFO. Bad input
raises ``ValueError`` or ``OSError`` naming the file.

Index rows carry ABSOLUTE offsets. As in Kafka's dump, an index's trailing all-zero slots after the
first (an untrimmed, preallocated tail) are counted, not listed. Anything a reader of the file should
know about (a partial trailing entry, a bad ``.txnindex`` version, a ``.log`` that does not end cleanly, a batch
whose records cannot be read, bytes after a snapshot's entries, leader epochs that do not increase) is listed in
``problems``. A snapshot or checkpoint Kafka refuses to read is bad input (its ``ValueError``), not a dump with
problems: there are no entries to show.
"""

from .command import run_dump_command
from .index_check import CheckResult, check_index_file
from .model import (
    DEFAULT_OPTIONS,
    KINDS,
    NAMED_KINDS,
    DumpOptions,
    DumpUsageError,
    FileDump,
    dump_kind,
    parse_segment_file_name,
)
from .reading import dump_file, read_dump
from .text import format_dump, iter_json, write_dump

__all__ = [
    "DEFAULT_OPTIONS",
    "CheckResult",
    "DumpOptions",
    "DumpUsageError",
    "check_index_file",
    "run_dump_command",
    "FileDump",
    "KINDS",
    "NAMED_KINDS",
    "dump_kind",
    "dump_file",
    "format_dump",
    "iter_json",
    "parse_segment_file_name",
    "read_dump",
    "write_dump",
]
