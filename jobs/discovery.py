"""Find the partitions and segments of a broker's log dirs (driver side, metadata only).

A partition dir is ``<topic>-<partition>``; Kafka's ``-delete``, ``-future`` and ``-stray`` dirs are
skipped and reported, as are ``.deleted`` / ``.cleaned`` / ``.swap`` files inside partitions. Nothing is
opened for writing.
"""

from __future__ import annotations

import heapq
import os
import re
from dataclasses import dataclass, field
from typing import TypeVar

from indexlib.layout import (
    LOG_SUFFIX,
    is_kafka_transient,
    parse_partition_dir_name,
    segment_base_offsets,
    segment_file,
    skipped_dir_kind,
)

T = TypeVar("T")


class LogDirError(ValueError):
    """A log dir that cannot be used (missing, not a directory, unreadable)."""


@dataclass(frozen=True)
class Segment:
    base_offset: int
    log_path: str
    size: int
    active: bool  # the partition's last segment


@dataclass
class Partition:
    log_dir: str
    path: str
    topic: str
    partition: int
    segments: list[Segment]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)


@dataclass
class Discovery:
    partitions: list[Partition] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def parse_partition_filter(text: str | None) -> set[int] | None:
    """``"0,2,5-7"`` -> {0, 2, 5, 6, 7}; ValueError with the offending part."""
    if text is None:
        return None
    chosen: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi or lo < 0:
                    raise ValueError
                chosen.update(range(lo, hi + 1))
            else:
                value = int(part)
                if value < 0:
                    raise ValueError
                chosen.add(value)
        except ValueError:
            raise ValueError(f"--partitions: {part!r} is not a partition number or range like 3-7") from None
    return chosen


def discover(
    log_dirs: list[str], topics: re.Pattern[str] | None = None, partitions: set[int] | None = None
) -> Discovery:
    """Every selected partition of every log dir, with its segments' sizes (ascending base offset)."""
    found = Discovery()
    for log_dir in log_dirs:
        if not os.path.exists(log_dir):
            raise LogDirError(f"{log_dir}: log dir does not exist")
        if not os.path.isdir(log_dir):
            raise LogDirError(f"{log_dir}: expected a log dir (a directory), found a file")
        try:
            names = sorted(os.listdir(log_dir))
        except OSError as exc:
            raise LogDirError(f"{log_dir}: cannot list the log dir: {exc.strerror}") from None
        for name in names:
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue  # checkpoints, meta.properties, .lock
            skipped = skipped_dir_kind(name)
            if skipped:
                found.skipped.append((path, f"a '-{skipped}' dir (Kafka is moving or deleting it)"))
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None:
                found.skipped.append((path, "not a <topic>-<partition> dir"))
                continue
            topic, number = parsed
            if topics is not None and not topics.fullmatch(topic):
                continue
            if partitions is not None and number not in partitions:
                continue
            try:
                bases = segment_base_offsets(path)
            except OSError as exc:
                found.skipped.append((path, f"cannot list: {exc.strerror}"))
                continue
            segments = []
            for i, base in enumerate(bases):
                log_path = segment_file(path, base, LOG_SUFFIX)
                try:
                    size = os.stat(log_path).st_size
                except OSError:
                    size = 0
                segments.append(Segment(base, log_path, size, i == len(bases) - 1))
            for leftover in sorted(os.listdir(path)):
                if is_kafka_transient(leftover):
                    found.skipped.append(
                        (os.path.join(path, leftover), "a file Kafka is deleting, cleaning or swapping")
                    )
            found.partitions.append(Partition(log_dir, path, topic, number, segments))
    return found


def balance_by_bytes(items: list[T], sizes: list[int], bins: int) -> list[list[T]]:
    """Greedy longest-first assignment of items to ``bins`` lists with near-equal byte totals (LPT:
    the fullest list is at most 4/3 of the best possible); empty lists are dropped."""
    bins = max(1, min(bins, len(items)))
    groups: list[list[T]] = [[] for _ in range(bins)]
    lightest = [(0, b) for b in range(bins)]  # (total bytes, bin) heap
    for size, item in sorted(zip(sizes, items, strict=True), key=lambda pair: -pair[0]):
        total, target = heapq.heappop(lightest)
        groups[target].append(item)
        heapq.heappush(lightest, (total + size, target))
    return [g for g in groups if g]


def task_count(total_bytes: int, slots: int, bytes_per_task: int) -> int:
    """How many Spark tasks to cut a run into: one per ``bytes_per_task`` of ``.log``, but at least one
    per slot (every core busy). Few tasks keep Spark's fixed cost per task small against the scan;
    enough of them let free slots pick up work when segments scan at different speeds."""
    return max(max(1, slots), -(-total_bytes // max(1, bytes_per_task)))
