"""Kafka's file layout in a log dir, in one place: what every other module asks about names.

A log dir holds partition dirs ``<topic>-<partition>`` (topic: Kafka's legal characters
``[A-Za-z0-9._-]``). Dirs Kafka is deleting, moving between log dirs or has found stray end in
``-delete``, ``-future`` or ``-stray`` and are not partitions to work on. A partition dir holds segments,
each ``<base offset:020d>`` plus a suffix (``.log``, ``.index``, ``.timeindex``, ``.txnindex``,
``.snapshot``); ``.deleted``, ``.cleaned`` and ``.swap`` appended to a name mark a file Kafka is deleting,
cleaning or swapping (Kafka's ``LogFileUtils``). This project's own files are *staged* index files:
``.<final name>.<tag>.rebuild.tmp`` beside the final name (hidden, so Kafka never loads one), where a
run's tag is ``<run id>`` or ``<run id>~<task attempt>``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from .errors import FileNameError

LOG_SUFFIX = ".log"
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
SNAPSHOT_SUFFIX = ".snapshot"
#: appended by Kafka to a segment file it is deleting, cleaning or swapping
KAFKA_TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")
#: the file a running broker holds locked in each of its log dirs
LOG_DIR_LOCK = ".lock"
#: the mark a recover keeps in a log dir while it changes it (:mod:`indexlib.storage.recovery_mark`)
RECOVERING_MARK = ".kafka-index-recovering"
#: held (flock) by a writing run in each dir it writes under, so two runs with one run id never meet
RUN_LOCK_PREFIX = ".kafka-index-run-"
#: a log dir's checkpoint of each partition's log start offset
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
#: each partition's recovery point: where the broker's next unclean start begins recovering it, in the log dir
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
#: what a broker's clean shutdown leaves in each log dir (its next start then recovers nothing there)
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: the topic of the KRaft metadata log: the Raft layer owns it (LogManager never loads it)
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: the partition's leader epochs (each epoch's first offset), in the partition dir
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: files Kafka keeps in a partition dir besides segments
#: a partition dir's topic id (``version: 0`` and ``topic_id: <id>`` lines)
PARTITION_METADATA = "partition.metadata"
PARTITION_METADATA_FILES = frozenset({LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, "quorum-state"})
STAGED_SUFFIX = ".rebuild.tmp"

_TOPIC = r"[A-Za-z0-9._-]+"
_PARTITION_DIR = re.compile(rf"(?P<topic>{_TOPIC})-(?P<partition>\d+)")
_SKIPPED_DIR = re.compile(r".+-(?P<kind>delete|future|stray)")
_SEGMENT_FILE = re.compile(r"(?P<base>\d{20})(?P<suffix>\.log|\.index|\.timeindex|\.txnindex|\.snapshot)")
_KRAFT_SNAPSHOT = re.compile(r"(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint")  # __cluster_metadata snapshots
#: the bootstrap snapshot a KRaft log dir's formatting writes beside ``meta.properties``
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
_STAGED = re.compile(
    r"\.(?P<final>\d{20}(?:\.index|\.timeindex|\.txnindex|\.snapshot))\.(?P<tag>.+)" + re.escape(STAGED_SUFFIX)
)


# ----------------------------------------------------------------------------- partition dirs
def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a ``<topic>-<partition>`` dir name, or None."""
    match = _PARTITION_DIR.fullmatch(name)
    return (match.group("topic"), int(match.group("partition"))) if match else None


def parse_partition_dir(path: str | os.PathLike[str]) -> tuple[str, int]:
    """``(topic, partition)`` from a partition dir's path; :class:`FileNameError` naming it if it is not one."""
    parsed = parse_partition_dir_name(os.path.basename(os.path.normpath(os.fspath(path))))
    if parsed is None:
        raise FileNameError(f"{os.fspath(path)}: not a Kafka partition directory (expected <topic>-<partition>)")
    return parsed


def skipped_dir_kind(name: str) -> str | None:
    """``"delete"``, ``"future"`` or ``"stray"`` for a dir Kafka is deleting, moving or has orphaned."""
    match = _SKIPPED_DIR.fullmatch(name)
    return match.group("kind") if match else None


#: the one dir in a log dir that is not a partition and that Kafka's start accepts (tiered storage's index cache)
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"


# ----------------------------------------------------------------------------- tiered storage (KIP-405)
#: the root dir of Kafka's LocalTieredStorage under its ``dir``
KAFKA_TIERED_ROOT = "kafka-tiered-storage"
_ID = r"[A-Za-z0-9_-]{22}"  # a Kafka uuid as its toString writes it (base64url, no padding)
_REMOTE_FILE = rf"(?P<offset>\d{{20}})-(?P<segment_id>{_ID})\.(?P<suffix>[a-z_-]+)"
#: an RSM layout -> the shape of its object keys (relative to the root the RSM writes under)
_REMOTE_KEYS = {
    "kafka": re.compile(
        rf"(?:{KAFKA_TIERED_ROOT}/)?(?P<topic>.+)-(?P<partition>\d+)-(?P<topic_id>{_ID})/{_REMOTE_FILE}"
    ),
    "aiven": re.compile(rf"(?P<topic>.+)-(?P<topic_id>{_ID})/(?P<partition>\d+)/{_REMOTE_FILE}"),
}
#: an entry of a broker's remote-log-index-cache: ``<start offset>_<segment id>.<index suffix>``, and its states
_REMOTE_CACHE_ENTRY = re.compile(
    rf"(?P<start>\d+)_(?P<segment_id>{_ID})\.(?P<suffix>index|timeindex|txnindex)(?P<state>\.tmp|\.deleted)?"
)


def remote_object_key(
    layout: str, topic: str, topic_id: str, partition: int, start: int, segment_id: str, suffix: str
) -> str:
    """A tiered segment's object key in an RSM layout: ``kafka`` (LocalTieredStorage)
    ``kafka-tiered-storage/<topic>-<partition>-<topicId>/<start:020>-<segmentId>.<suffix>``, ``aiven``
    ``<topic>-<topicId>/<partition>/<start:020>-<segmentId>.<suffix>``."""
    name = f"{start:020d}-{segment_id}.{suffix}"
    if layout == "kafka":
        return f"{KAFKA_TIERED_ROOT}/{topic}-{partition}-{topic_id}/{name}"
    return f"{topic}-{topic_id}/{partition}/{name}"


def parse_remote_object_key(layout: str, key: str) -> dict[str, str] | None:
    """The parts of a layout's object key (``topic``, ``topic_id``, ``partition``, ``offset``, ``segment_id``,
    ``suffix``, as text), or None when it is not one."""
    m = _REMOTE_KEYS[layout].fullmatch(key)
    return None if m is None else m.groupdict()


def parse_remote_cache_name(name: str) -> dict[str, str | None] | None:
    """The parts of a remote-log-index-cache file name (``start``, ``segment_id``, ``suffix``, ``state``: ``.tmp``,
    ``.deleted`` or None), or None when it is not an entry's."""
    m = _REMOTE_CACHE_ENTRY.fullmatch(name)
    return None if m is None else m.groupdict()


def partition_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


# ----------------------------------------------------------------------------- segment files
def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_file(partition_dir: str, base_offset: int, suffix: str) -> str:
    return os.path.join(partition_dir, segment_name(base_offset, suffix))


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """``(base offset, suffix)`` of a segment file name (``.log``, an index suffix, ``.snapshot``), or None."""
    match = _SEGMENT_FILE.fullmatch(name)
    return (int(match.group("base")), match.group("suffix")) if match else None


def segment_base_offsets(partition_dir: str | os.PathLike[str]) -> list[int]:
    """Base offsets of the ``.log`` segments in a partition dir, ascending."""
    return log_base_offsets(os.listdir(partition_dir))


def log_base_offsets(names: Iterable[str]) -> list[int]:
    """Base offsets of the ``.log`` segments among a partition dir's ``names``, ascending."""
    parsed = (parse_segment_name(name) for name in names)
    return sorted(p[0] for p in parsed if p is not None and p[1] == LOG_SUFFIX)


def is_kafka_transient(name: str) -> bool:
    """A file Kafka is deleting, cleaning or swapping (``.deleted``, ``.cleaned``, ``.swap``)."""
    return name.endswith(KAFKA_TRANSIENT_SUFFIXES)


def is_kafka_metadata(name: str) -> bool:
    """A partition dir file of Kafka's that is not a segment (checkpoints, metadata, KRaft snapshots)."""
    return name in PARTITION_METADATA_FILES or _KRAFT_SNAPSHOT.fullmatch(name) is not None


# ----------------------------------------------------------------------------- staged files
def parse_kraft_snapshot_name(name: str) -> tuple[int, int] | None:
    """``(end offset, epoch)`` of a KRaft snapshot's name (``<20-digit offset>-<10-digit epoch>.checkpoint``)."""
    m = _KRAFT_SNAPSHOT.fullmatch(name)
    if m is None or int(m["offset"]) >= 1 << 63:  # Kafka's offsets are longs: it cannot name one above
        return None
    return int(m["offset"]), int(m["epoch"])


def run_lock_name(run_id: str) -> str:
    return f"{RUN_LOCK_PREFIX}{run_id}.lock"


def run_lock_run_id(name: str) -> str | None:
    """The run id of a run lock file's name (see :func:`run_lock_name`), or None for any other name."""
    return _run_file_run_id(name, ".lock")


def stage_fence_name(run_id: str) -> str:
    """The run's stage fence (``indexlib.storage.locks.StageFence``), beside its run lock."""
    return f"{RUN_LOCK_PREFIX}{run_id}.fence"


def stage_fence_run_id(name: str) -> str | None:
    """The run id of a stage fence's name (see :func:`stage_fence_name`), or None for any other name."""
    return _run_file_run_id(name, ".fence")


def _run_file_run_id(name: str, suffix: str) -> str | None:
    if name.startswith(RUN_LOCK_PREFIX) and name.endswith(suffix) and len(name) > len(RUN_LOCK_PREFIX) + len(suffix):
        return name[len(RUN_LOCK_PREFIX) : -len(suffix)]
    return None


def staged_path(final: str, tag: str) -> str:
    """The hidden name a new version of ``final`` is written under before it is renamed over it."""
    directory, name = os.path.split(final)
    return os.path.join(directory, f".{name}.{tag}{STAGED_SUFFIX}")


def is_staged_name(name: str) -> bool:
    """Any run's staged index or producer snapshot file (an interrupted run leaves them; safe to delete)."""
    return _STAGED.fullmatch(name) is not None


def staged_run_id(name: str) -> str | None:
    """The run id in a staged file's tag (``<run id>`` or ``<run id>~<task attempt>``; run ids hold no
    ``~``), or None when ``name`` is not a staged file."""
    match = _STAGED.fullmatch(name)
    return match.group("tag").split("~", 1)[0] if match is not None else None


def staged_by_run(name: str, run_id: str) -> bool:
    """A staged file of this run: tag ``<run id>`` or ``<run id>~<task attempt>``, never another run's."""
    match = _STAGED.fullmatch(name)
    return match is not None and re.fullmatch(re.escape(run_id) + r"(~\d+)?", match.group("tag")) is not None
