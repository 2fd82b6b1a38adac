"""The Spark driver of the segment engine (:mod:`indexlib.engine`): what is Spark's and nothing else.

The engine plans, replays, decides and commits on the driver; this module supplies its map step as ONE
Spark job: the segment tasks go out in bins balanced by bytes (:func:`task_count` bins, one per
``bytes_per_task`` of ``.log``, at least one per slot), each executor runs
:func:`indexlib.engine.process_segment` on its bin (staged names tagged with the task attempt, so a
speculative or zombie attempt never touches another's files), and accumulators feed the progress bar.
Executors and driver use the log dirs by path, so all of them must see them (local mode, or the same
mount on every node).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from indexlib import __version__
from indexlib.discovery import Discovery
from indexlib.engine import (
    CommitObserver,
    MapSegments,
    RunOptions,
    RunReport,
    SegmentOutcome,
    SegmentTask,
    process_segment,
)
from indexlib.engine import run as run_engine

from .config import Settings

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

TOOL_VERSION = __version__
T = TypeVar("T")


class Progress(Protocol):
    """What the job reports progress to (the console bar in ``jobs.cli``)."""

    def start(self, total: int, total_bytes: int, poll: Callable[[], tuple[int, int]]) -> None: ...

    def stop(self) -> None: ...


def run(
    spark: SparkSession,
    discovery: Discovery,
    settings: Settings,
    options: RunOptions,
    progress: Progress | None = None,
    observer: CommitObserver | None = None,
) -> RunReport:
    """One verify/rebuild/repair of the discovered partitions, its map step a Spark job; ``observer``
    (the audit journal) is told about every commit that writes."""
    return run_engine(
        discovery,
        options,
        settings.for_topic,
        spark_map(spark.sparkContext, settings.bytes_per_task, progress),
        observer,
    )


def spark_map(sc: SparkContext, bytes_per_task: int, progress: Progress | None = None) -> MapSegments:
    """The engine's map step as one Spark job over bins of tasks balanced by bytes."""

    def map_segments(tasks: list[SegmentTask], run_id: str) -> list[SegmentOutcome]:
        sizes = [t.size for t in tasks]
        bins = balance_by_bytes(tasks, sizes, task_count(sum(sizes), sc.defaultParallelism, bytes_per_task))
        done = sc.accumulator(0)
        done_bytes = sc.accumulator(0)

        # runs in Spark's Python workers, which coverage cannot measure (Spark kills them at session stop,
        # before they save); every Spark test runs it
        def run_bin(group: list[SegmentTask]) -> list[SegmentOutcome]:  # pragma: no cover
            from pyspark import TaskContext

            context = TaskContext.get()
            if context is None:
                raise RuntimeError("run_bin must run inside a Spark task")
            out = [process_segment(t, f"{run_id}~{context.taskAttemptId()}") for t in group]
            done.add(len(group))
            done_bytes.add(sum(t.size for t in group))
            return out

        if progress is not None:
            progress.start(len(tasks), sum(sizes), lambda: (done.value, done_bytes.value))
        try:
            return sc.parallelize(bins, len(bins)).flatMap(run_bin).collect()
        finally:
            if progress is not None:
                progress.stop()

    return map_segments


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
