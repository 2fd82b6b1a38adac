"""One partition directory, verified or rebuilt by :func:`indexlib.engine.run` (the library's calls for one
partition; the command lines and the Spark job call ``run`` themselves). Both run in this process, with one
topic's index settings, and return the run's :class:`RunReport`."""

from __future__ import annotations

import os

from ..recovery.settings import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES, IndexSettings
from ..storage import discover_partition_dir
from .options import RunOptions
from .pool import map_locally
from .runner import RunReport, run


def verify_partition(
    partition_dir: str | os.PathLike[str],
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
) -> RunReport:
    """Verify every segment's index files against its ``.log``; writes nothing."""
    return _run_one(partition_dir, RunOptions("verify"), IndexSettings(index_interval_bytes, segment_index_bytes))


def rebuild_partition(
    partition_dir: str | os.PathLike[str],
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    output_dir: str | os.PathLike[str] | None = None,
    backup_root: str | os.PathLike[str] | None = None,
) -> RunReport:
    """Rebuild the ``.index``, ``.timeindex`` and ``.txnindex`` of every segment, as Kafka's recovery would.

    With ``output_dir`` the files go to ``output_dir/<topic>-<partition>/`` and the partition is only read;
    with ``backup_root`` every replaced file is kept under ``<backup_root>/<run id>/<topic>-<partition>/``.
    A segment Kafka's recovery would refuse gets no file (``action == "cannot_rebuild"``, its ``fatal`` says
    why). The ``.log`` is never modified. A ``.txnindex`` is written when there are aborted transactions, and
    emptied (0 bytes) when a stale one exists, as Kafka does."""
    options = RunOptions(
        "rebuild",
        output_dir=None if output_dir is None else os.fspath(output_dir),
        backup_root=None if backup_root is None else os.fspath(backup_root),
    )
    return _run_one(partition_dir, options, IndexSettings(index_interval_bytes, segment_index_bytes))


def _run_one(partition_dir: str | os.PathLike[str], options: RunOptions, settings: IndexSettings) -> RunReport:
    return run(discover_partition_dir(os.fspath(partition_dir)), options, lambda topic: settings, map_locally())
