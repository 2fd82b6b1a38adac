"""The store a run's files are in, as one object: the names and sizes discovery lists, and what the map side of a
run reads of a segment, in one call.

A :class:`Store` is built in each process that needs it (the driver, a pool worker, a Spark executor) from a
picklable :class:`StoreSpec` that every :class:`~indexlib.engine.SegmentTask` carries (:func:`store_for`). The map
side of a segment is: :meth:`Store.read_segment` (every read, once), then the computation in ``recovery/`` (pure),
then staging. :class:`LocalStore` is a local file system, with the same reads and system calls as the functions of
:mod:`~indexlib.storage.partition_files` it calls.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, BinaryIO, Protocol

from ..format.errors import KafkaIndexError
from ..recovery.checks import has_invalid_tail
from ..recovery.log_scan import NO_PROBES, ExistingIndex, LogSummary, probes_for, unreadable_summary
from . import publish
from .partition_files import index_file_sizes, read_existing_indexes, summarize_log, tail_is_zero

if TYPE_CHECKING:
    from ..format.values import AbortedTxn
    from ..recovery.entry_plan import PlanSummary, SegmentPlan


@dataclass(frozen=True)
class StoreSpec:
    """What a process builds the run's store from (picklable; the same store in every process): the scheme of its
    paths (``file``: a local file system), the bucket's URI (``s3://bucket``; empty for ``file``) and the store's
    options (``--storage-option KEY=VALUE``: credentials, endpoint)."""

    scheme: str = "file"
    root: str = ""
    options: tuple[tuple[str, str], ...] = ()


#: the local file system's spec: every run's until another store is named
LOCAL = StoreSpec()


@dataclass
class SegmentReads:
    """All that the map side of a run reads of one segment: the ``.log``'s summary (one scan; its ``fatal`` says why
    a ``.log`` could not be read), the existing ``.index`` and ``.timeindex`` (None: not asked for), whether the
    ``.log``'s invalid tail is all zeros, and the size of each index file (None: none there, or unreadable)."""

    summary: LogSummary
    existing: dict[str, ExistingIndex] | None
    zero_tail: bool
    index_sizes: dict[str, int | None]


class Store(Protocol):
    """Where a run's files are. Paths are the store's own (a local path, or a URI)."""

    spec: StoreSpec

    def read_segment(
        self,
        log_path: str,
        partition_dir: str,
        base_offset: int,
        index_interval_bytes: int,
        read_indexes: bool,
        probe: bool,
        listed_size: int | None = None,
    ) -> SegmentReads:
        """Read a segment once: its existing indexes when ``read_indexes``, its ``.log`` scanned (probed for the
        existing entries' lookups when ``probe``), its zero tail, its index files' sizes. Never raises on bad file
        contents or an unreadable file: the result says it. ``listed_size``: the ``.log``'s size when discovery
        listed it (a local ``.log`` may grow since, an active segment; an object must not change)."""
        ...

    def read_indexes(self, partition_dir: str, base_offset: int) -> dict[str, ExistingIndex]:
        """A segment's existing ``.index`` and ``.timeindex``, as :meth:`read_segment` reads them."""
        ...

    def exists(self, path: str) -> bool:
        """Whether anything is at ``path`` (a file, or a dir: a prefix with something under it)."""
        ...

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a dir (in an object store: a prefix with something under it)."""
        ...

    def list_names(self, path: str) -> list[str]:
        """The names in the dir ``path`` (files and dirs, unsorted); ``OSError`` when it cannot be listed."""
        ...

    def list_tree(self, path: str) -> dict[str, int]:
        """Every file under the dir ``path``, at any depth: its path relative to ``path`` ('/'-separated) -> its
        size; empty when there is none."""
        ...

    def size(self, path: str) -> int:
        """The size of the file at ``path``; ``OSError`` when there is none or it cannot be read."""
        ...

    def listed_size(self, path: str) -> int | None:
        """The size of the file at ``path``, None when there is none, as a listing of its dir says (one listing a
        dir for an object store: a file written after it is not seen); asks nothing more of the store."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """A small file's whole bytes (a checkpoint, a snapshot); ``FileNotFoundError`` when there is none."""
        ...

    def copy_to(self, path: str, target: BinaryIO, limit: int | None = None) -> int:
        """Write the file at ``path`` (its first ``limit`` bytes) into ``target``; the file's whole size."""
        ...

    # the write side: where a run's rebuilt index files go (the partition dirs, or an output dir or prefix)
    def prefix_is_empty(self, path: str) -> bool:
        """Whether no file is under ``path`` (looked at now, not in a listing read earlier)."""
        ...

    def put_whole(self, path: str, data: bytes, tag: str) -> None:
        """Write a small whole file (an object) at ``path``, its dirs made: a reader sees none of it or all of it,
        and it is durable when this returns (``tag``: the run's, in a local staged name)."""
        ...

    def stage_segment(
        self,
        target_dir: str,
        base_offset: int,
        plan: SegmentPlan | PlanSummary,
        aborted: list[AbortedTxn],
        suffixes: Collection[str],
        stale_txn: bool,
        segment_index_bytes: int,
        tag: str | None,
        unsynced: list[str] | None = None,
    ) -> dict[str, str]:
        """Stage a rebuilt segment's chosen index files under names of their own beside their final names (nothing
        reads them there); ``{final: staged}``. On failure nothing is left. ``unsynced``: the staged files the
        caller makes durable (:meth:`fsync_paths`), where a file system needs it."""
        ...

    def install_segment(self, staged: dict[str, str], written: list[str]) -> None:
        """Put each staged file in its final name (appended to ``written`` as it is); none of them survives."""
        ...

    def discard_staged(self, staged: dict[str, str], backups: list[str]) -> None:
        """Drop staged files (and the backups made for them: ``backups`` is emptied of those); ``staged`` emptied."""
        ...

    def discard_staged_by_run(self, directories: list[str], run_id: str) -> None:
        """Drop every file in ``directories`` that run ``run_id`` staged (a task attempt no outcome accounts for)."""
        ...

    def fsync_paths(self, paths: Collection[str]) -> dict[str, OSError]:
        """Make written files and dirs durable; each path that failed and why."""
        ...


class LocalStore:
    """A local file system (and any mount): the reads of :mod:`~indexlib.storage.partition_files`."""

    spec = LOCAL

    def read_segment(
        self,
        log_path: str,
        partition_dir: str,
        base_offset: int,
        index_interval_bytes: int,
        read_indexes: bool,
        probe: bool,
        listed_size: int | None = None,
    ) -> SegmentReads:
        existing = read_existing_indexes(partition_dir, base_offset) if read_indexes else None
        probes = probes_for(existing, base_offset) if probe and existing is not None else NO_PROBES
        try:
            summary = summarize_log(log_path, base_offset, index_interval_bytes, probes)
        except (OSError, ValueError) as exc:
            summary = unreadable_summary(log_path, base_offset, index_interval_bytes, exc)
        zero_tail = has_invalid_tail(summary) and tail_is_zero(log_path, summary.valid_bytes)
        return SegmentReads(summary, existing, zero_tail, index_file_sizes(partition_dir, base_offset, existing))

    def read_indexes(self, partition_dir: str, base_offset: int) -> dict[str, ExistingIndex]:
        return read_existing_indexes(partition_dir, base_offset)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def list_names(self, path: str) -> list[str]:
        return os.listdir(path)

    def list_tree(self, path: str) -> dict[str, int]:
        out = {}
        for top, _, files in os.walk(path):
            for name in files:
                full = os.path.join(top, name)
                with contextlib.suppress(FileNotFoundError):  # gone since the walk listed it
                    out[os.path.relpath(full, path).replace(os.sep, "/")] = os.stat(full).st_size
        return out

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def listed_size(self, path: str) -> int | None:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def prefix_is_empty(self, path: str) -> bool:
        return publish.first_file_under(path) is None

    def put_whole(self, path: str, data: bytes, tag: str) -> None:
        publish.replace_file(path, data, None, tag)
        publish.fsync_path(os.path.dirname(path))

    def stage_segment(
        self,
        target_dir: str,
        base_offset: int,
        plan: SegmentPlan | PlanSummary,
        aborted: list[AbortedTxn],
        suffixes: Collection[str],
        stale_txn: bool,
        segment_index_bytes: int,
        tag: str | None,
        unsynced: list[str] | None = None,
    ) -> dict[str, str]:
        return publish.stage_segment(
            target_dir, base_offset, plan, aborted, suffixes, stale_txn, segment_index_bytes, tag, unsynced
        )

    def install_segment(self, staged: dict[str, str], written: list[str]) -> None:
        publish.install_segment(staged, sync_dir=False, written=written)  # the run fsyncs the dirs at its end

    def discard_staged(self, staged: dict[str, str], backups: list[str]) -> None:
        publish.discard_staged(staged, backups)

    def discard_staged_by_run(self, directories: list[str], run_id: str) -> None:
        publish.discard_staged_by_run(directories, run_id)

    def fsync_paths(self, paths: Collection[str]) -> dict[str, OSError]:
        return publish.fsync_paths(paths)

    def copy_to(self, path: str, target: BinaryIO, limit: int | None = None) -> int:
        written = 0
        with open(path, "rb") as f:
            while limit is None or written < limit:
                data = f.read(1 << 20 if limit is None else min(1 << 20, limit - written))
                if not data:
                    break
                target.write(data)
                written += len(data)
            return os.fstat(f.fileno()).st_size


@contextmanager
def local_copy(spec: StoreSpec, path: str, limit: int | None = None) -> Iterator[str]:
    """A local file holding the file at ``path`` of the store of ``spec`` (for a tool that reads one file whole, as
    ``dump`` does): the path itself on the local file system; else the object's bytes (its first ``limit``) copied
    into a private temporary dir, under the object's own name, the file as long as the object (a hole past
    ``limit``, never read), and removed when the block ends."""
    if spec.scheme == "file":
        yield path
        return
    import tempfile  # a dump's alone: not every run's start-up cost

    store = store_for(spec)
    with tempfile.TemporaryDirectory(prefix="kafka-index-object-") as directory:
        local = os.path.join(directory, path.rstrip("/").rsplit("/", 1)[-1])
        with open(local, "wb") as target:
            size = store.copy_to(path, target, limit)
            if limit is not None and size > limit:  # the file's own size, as a hole past ``limit`` (never read)
                target.truncate(size)
        yield local


class ObjectStoreError(KafkaIndexError, RuntimeError):
    """Object storage could not be used: the endpoint failed or timed out, the credentials were refused, the
    bucket does not exist. The run stops (exit 2): nothing it read can be trusted to be whole."""


class ObjectChangedError(ObjectStoreError):
    """An object changed between its listing (or ``HEAD``) and a read of it."""


class UnknownStoreError(KafkaIndexError, ValueError):
    """A store spec whose scheme no store of this build serves."""


@cache
def store_for(spec: StoreSpec) -> Store:
    """The store of ``spec``, one per process (built on first use)."""
    if spec.scheme == "file":
        return LocalStore()
    from .object_clients import SCHEMES, object_client
    from .object_store import ObjectStore, split_uri

    if spec.scheme not in SCHEMES:
        raise UnknownStoreError(f"no store for {spec.scheme}:// paths")
    return ObjectStore(spec, object_client(spec, spec.root), split_uri(spec.root)[1])


def remote_store(spec: StoreSpec) -> Store | None:
    """The store of ``spec`` where it is not the local file system (whose reads keep their own calls), else None."""
    return None if spec.scheme == "file" else store_for(spec)


def is_uri(path: str) -> bool:
    """Whether ``path`` names an object store's location (``scheme://...``), not a local path."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.isalnum()


def spec_for(paths: list[str], options: dict[str, str] | None = None) -> StoreSpec:
    """The store of ``paths``: the local file system, or the one bucket they are all in (``options``: its storage
    options). :class:`UnknownStoreError` for paths in two stores."""
    roots = set()
    for path in paths:
        if is_uri(path):
            scheme, _, rest = path.partition("://")
            roots.add((scheme.lower(), f"{scheme.lower()}://{rest.split('/', 1)[0]}"))
        else:
            roots.add(("file", ""))
    if len(roots) > 1:
        raise UnknownStoreError(
            f"{', '.join(paths)}: paths in more than one store ({', '.join(sorted(r or 'local' for _, r in roots))}); one run reads one"
        )
    if not roots or roots == {("file", "")}:
        return LOCAL
    ((scheme, root),) = roots
    return StoreSpec(scheme, root, tuple(sorted((options or {}).items())))
