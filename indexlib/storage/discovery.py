"""Find the partitions and segments of a broker's log dirs (metadata only: names and sizes).

A partition dir is ``<topic>-<partition>``; Kafka's ``-delete``, ``-future`` and ``-stray`` dirs are
skipped and reported, as are ``.deleted`` / ``.cleaned`` / ``.swap`` files inside partitions. Nothing is
opened for writing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..format.abstract_index import INT32_MAX
from ..format.errors import KafkaIndexError, describe_error
from ..format.layout import (
    LOG_SUFFIX,
    REMOTE_INDEX_CACHE_DIR,
    SNAPSHOT_SUFFIX,
    is_kafka_transient,
    log_base_offsets,
    parse_partition_dir_name,
    parse_segment_name,
    partition_name,
    segment_base_offsets,
    segment_file,
    skipped_dir_kind,
)
from ..format.meta_properties import META_PROPERTIES, BrokerIdentity, MetaPropertiesError, parse_meta_properties
from .store import LOCAL, Store, StoreSpec, store_for


class LogDirError(KafkaIndexError, ValueError):
    """A log dir or partition dir that cannot be used (missing, not a directory, unreadable, not named
    ``<topic>-<partition>``)."""


class PartitionFilterError(KafkaIndexError, ValueError):
    """A ``--partitions`` selection that is not partition numbers or ranges like ``3-7``, or a ``--topics``
    regex that does not compile."""


@dataclass(frozen=True)
class Segment:
    base_offset: int
    log_path: str
    size: int
    active: bool  # the partition's last segment


@dataclass
class Partition:
    """A partition dir and its segments. ``unreadable``: why the dir could not be listed (then it has no
    segments, and a run reports it as a finding: a verdict never covers data that was not read)."""

    log_dir: str
    path: str
    topic: str
    partition: int
    segments: list[Segment]
    unreadable: str | None = None
    snapshots: list[int] = field(default_factory=list)  # the offsets of its ``.snapshot`` files, ascending

    @property
    def name(self) -> str:
        return partition_name(self.topic, self.partition)

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)


@dataclass
class Discovery:
    partitions: list[Partition] = field(default_factory=list)
    log_dirs: list[str] = field(default_factory=list)  # where they were looked for
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    foreign: list[str] = field(default_factory=list)  # dirs in a log dir Kafka's start refuses (not partitions)
    store: StoreSpec = LOCAL  # the store the paths are in


@dataclass(frozen=True)
class PartitionSelection:
    """Partition numbers chosen by ``--partitions``, kept as ranges (``0-2147483647`` costs nothing)."""

    ranges: tuple[tuple[int, int], ...]

    def __contains__(self, number: object) -> bool:
        return isinstance(number, int) and any(lo <= number <= hi for lo, hi in self.ranges)


def directory_key(path: str) -> object:
    """What names one directory whatever the path to it (its device and inode: one ``stat``); its resolved path
    when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)


def parse_topic_filter(text: str | None) -> re.Pattern[str] | None:
    """``--topics``: a regex a topic's whole name must match; :class:`PartitionFilterError` when it does not compile."""
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise PartitionFilterError(f"--topics: invalid regex {text!r}: {exc}") from None


def parse_partition_filter(text: str | None) -> PartitionSelection | None:
    """``"0,2,5-7"`` -> the numbers 0, 2 and 5 to 7 (inclusive ranges); :class:`PartitionFilterError` naming the bad part."""
    if text is None:
        return None
    ranges = []
    for part in text.split(","):
        part = part.strip()
        try:
            lo, dash, hi = part.partition("-")
            first, last = int(lo), int(hi if dash else lo)
            if not 0 <= first <= last <= INT32_MAX or not lo.strip().isdigit():
                raise PartitionFilterError
        except ValueError:
            raise PartitionFilterError(
                f"--partitions: {part!r} is not a partition number or range like 3-7 (0 to {INT32_MAX})"
            ) from None
        ranges.append((first, last))
    return PartitionSelection(tuple(ranges))


@dataclass(frozen=True)
class LogDirMeta:
    """What a log dir's ``meta.properties`` says. ``problem``: None (read), ``"missing"`` (no such file: the
    broker never started on this dir, or it was copied without it) or ``"malformed"`` (Kafka would refuse it;
    ``detail`` says why); then ``identity`` is empty."""

    log_dir: str
    path: str
    identity: BrokerIdentity
    problem: str | None = None
    detail: str = ""


def read_log_dir_meta(log_dir: str, store: Store | None = None) -> LogDirMeta:
    """Read ``<log_dir>/meta.properties`` (:func:`indexlib.format.meta_properties.parse_meta_properties`), from the
    local disk or through ``store``."""
    path = os.path.join(log_dir, META_PROPERTIES)
    try:
        if store is None:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        else:
            text = store.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        return LogDirMeta(log_dir, path, BrokerIdentity(), "missing", "no meta.properties in this log dir")
    except (OSError, UnicodeDecodeError) as exc:
        return LogDirMeta(log_dir, path, BrokerIdentity(), "malformed", f"cannot read it: {describe_error(exc)}")
    try:
        return LogDirMeta(log_dir, path, parse_meta_properties(text, path))
    except MetaPropertiesError as exc:
        return LogDirMeta(log_dir, path, BrokerIdentity(), "malformed", str(exc).removeprefix(f"{path}: "))


def discover(
    log_dirs: list[str],
    topics: re.Pattern[str] | None = None,
    partitions: PartitionSelection | None = None,
    store: Store | None = None,
) -> Discovery:
    """Every selected partition of every log dir, with its segments' sizes (ascending base offset), as ``store``
    (default: the local file system) lists them."""
    store = store_for(LOCAL) if store is None else store
    found = Discovery(log_dirs=list(log_dirs), store=store.spec)
    for log_dir in log_dirs:
        if not store.exists(log_dir):
            raise LogDirError(f"{log_dir}: log dir does not exist")
        if not store.is_dir(log_dir):
            raise LogDirError(f"{log_dir}: expected a log dir (a directory), found a file")
        try:
            names = sorted(store.list_names(log_dir))
        except OSError as exc:
            raise LogDirError(f"{log_dir}: cannot list the log dir: {exc.strerror}") from None
        for name in names:
            path = os.path.join(log_dir, name)
            if not store.is_dir(path):
                continue  # checkpoints, meta.properties, .lock
            skipped = skipped_dir_kind(name)
            if skipped:
                found.skipped.append((path, f"a '-{skipped}' dir (Kafka is moving or deleting it)"))
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None:
                found.skipped.append((path, "not a <topic>-<partition> dir"))
                if name != REMOTE_INDEX_CACHE_DIR:
                    found.foreign.append(path)
                continue
            topic, number = parsed
            if topics is not None and not topics.fullmatch(topic):
                continue
            if partitions is not None and number not in partitions:
                continue
            _add_partition(found, log_dir, path, topic, number, store)
    return found


def discover_partition_dir(path: str) -> Discovery:
    """One partition dir given by its path (its log dir is the parent); LogDirError if it is not one."""
    if not os.path.isdir(path):
        raise LogDirError(f"{path}: no such partition dir" if not os.path.exists(path) else f"{path}: not a directory")
    path = os.path.normpath(path)
    parsed = parse_partition_dir_name(os.path.basename(path))
    if parsed is None:
        raise LogDirError(f"{path}: not a Kafka partition directory (expected <topic>-<partition>)")
    found = Discovery(log_dirs=[os.path.dirname(os.path.abspath(path))])
    _add_partition(found, found.log_dirs[0], path, *parsed, store_for(LOCAL))
    return found


def is_partition_dir(path: str) -> bool:
    """A readable dir named ``<topic>-<partition>`` holding at least one ``.log``."""
    if parse_partition_dir_name(os.path.basename(os.path.normpath(path))) is None:
        return False
    try:
        return bool(segment_base_offsets(path))
    except OSError:
        return False


def _add_partition(found: Discovery, log_dir: str, path: str, topic: str, number: int, store: Store) -> None:
    try:
        names = sorted(store.list_names(path))
    except OSError as exc:
        found.partitions.append(Partition(log_dir, path, topic, number, [], f"cannot list it: {exc.strerror}"))
        return
    bases = log_base_offsets(names)
    segments = []
    for i, base in enumerate(bases):
        log_path = segment_file(path, base, LOG_SUFFIX)
        try:
            size = store.size(log_path)
        except OSError:
            size = 0
        segments.append(Segment(base, log_path, size, i == len(bases) - 1))
    for leftover in names:
        if is_kafka_transient(leftover):
            found.skipped.append((os.path.join(path, leftover), "a file Kafka is deleting, cleaning or swapping"))
    snapshots = sorted(
        p[0] for name in names if (p := parse_segment_name(name)) is not None and p[1] == SNAPSHOT_SUFFIX
    )
    found.partitions.append(Partition(log_dir, path, topic, number, segments, snapshots=snapshots))
