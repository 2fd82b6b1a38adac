"""The Spark driver of the segment engine (:mod:`indexlib.engine`): what is Spark's and nothing else.

The engine plans, replays, decides and commits on the driver; this module supplies its map step as ONE
Spark job: the segment tasks go out in bins balanced by bytes (:func:`task_count` bins, one per
``bytes_per_task`` of ``.log``, at least one per slot), each executor runs
:func:`indexlib.engine.segment_task.process_segments` on its bin (staged names tagged with the task attempt, so a
speculative or zombie attempt never touches another's files), and accumulators feed the progress bar.
Executors and driver use the log dirs by path, so all of them must see them (local mode, or the same
mount on every node).
"""

from __future__ import annotations

import contextlib
import heapq
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar

from indexlib import __version__
from indexlib.engine import (
    Arrived,
    CommitObserver,
    MapSegments,
    RunOptions,
    RunReport,
    SegmentOutcome,
    SegmentTask,
    process_segments,
)
from indexlib.engine import run as run_engine
from indexlib.format import describe_error
from indexlib.storage import Discovery, ObjectStoreError, sync_for_task, sync_roots

from .config import Settings

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

TOOL_VERSION = __version__
T = TypeVar("T")


class SparkJobError(RuntimeError):
    """The Spark job could not run to its end because the connection to Spark's JVM failed (it died)."""


class Progress(Protocol):
    """What the job reports progress to (``jobs.cli.ConsoleProgress``). ``poll`` returns (segments done,
    bytes done, Spark tasks done, Spark tasks running, Spark tasks in all), read on the driver: from
    accumulators and Spark's status tracker, so it works in local and cluster mode alike."""

    def start(self, total: int, total_bytes: int, poll: Callable[[], tuple[int, int, int, int, int]]) -> None: ...

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
    """The engine's map step as one Spark job over bins of tasks balanced by bytes (its outcomes come back together:
    it does not call ``arrived``)."""

    def map_segments(tasks: list[SegmentTask], run_id: str, arrived: Arrived | None = None) -> list[SegmentOutcome]:
        sizes = [t.size for t in tasks]
        bins = balance_by_bytes(tasks, sizes, task_count(sum(sizes), sc.defaultParallelism, bytes_per_task))
        done = sc.accumulator(0)
        done_bytes = sc.accumulator(0)
        roots = sync_roots()  # a run with --sync syncfs: each task registers them again, for itself

        # runs in Spark's Python workers, which coverage cannot measure (Spark kills them at session stop,
        # before they save); every Spark test runs it
        def run_bin(group: list[SegmentTask]) -> list[SegmentOutcome]:  # pragma: no cover
            from pyspark import TaskContext

            context = TaskContext.get()
            if context is None:
                raise RuntimeError("run_bin must run inside a Spark task")
            with sync_for_task(roots):
                out = process_segments(group, f"{run_id}~{context.taskAttemptId()}")  # the bin's fsyncs together
            done.add(len(group))
            done_bytes.add(sum(t.size for t in group))
            return out

        group = f"kafka-index-{run_id}"
        size = sum(sizes)
        sc.setJobGroup(group, f"kafka-index run {run_id}: {len(tasks)} segments, {size / 2**30:.2f} GiB of .log")

        def poll() -> tuple[int, int, int, int, int]:
            tasks_done, tasks_running, tasks_total = spark_tasks(sc, group)
            tasks_total = tasks_total or len(bins)
            if done.value == len(tasks):  # the accumulators are exact once the job ends; the tracker lags behind
                tasks_done, tasks_running = tasks_total, 0
            return done.value, done_bytes.value, tasks_done, tasks_running, tasks_total

        if progress is not None:
            progress.start(len(tasks), size, poll)
        try:
            with call_site(sc, f"scan {len(tasks)} segments in {len(bins)} tasks"):
                return sc.parallelize(bins, len(bins)).flatMap(run_bin).collect()
        except BaseException as exc:  # SIGINT/SIGTERM, or the job failed: stop its tasks (they stage files)
            stop_job(sc, group)
            if isinstance(exc, OSError):  # a socket to the JVM, never a file of the run: the JVM is gone
                raise SparkJobError(f"lost the connection to Spark's JVM ({describe_error(exc)})") from None
            if isinstance(exc, Exception) and (line := object_store_failure(exc)) is not None:
                raise ObjectStoreError(line) from None
            raise
        finally:
            if progress is not None:
                progress.stop()
            with contextlib.suppress(Exception):  # a dead JVM has nothing left to unset
                for key in ("spark.jobGroup.id", "spark.job.description"):
                    sc.setLocalProperty(key, None)  # type: ignore[arg-type]  # None unsets it

    return map_segments


#: how an executor's :class:`~indexlib.storage.ObjectStoreError` (or a subclass) ends the Python traceback Spark
#: sends back to the driver as text
_OBJECT_STORE_FAILURE = re.compile(r"^(?:[\w.]+\.)?(?:ObjectStoreError|ObjectChangedError): (.+)$", re.MULTILINE)


def object_store_failure(exc: Exception) -> str | None:
    """The message of the object-storage failure that failed a Spark job (its executors' tracebacks reach the
    driver as text inside the job's error), or None when object storage was not why."""
    found = _OBJECT_STORE_FAILURE.findall(str(exc))
    return found[-1].strip() if found else None


def stop_job(sc: SparkContext, group: str, wait: float = 15.0) -> None:
    """Cancel the job group and wait (at most ``wait`` seconds) until Spark reports none of its tasks
    running: each stages files, and the run sweeps its staged files right after. Spark kills a cancelled
    task's Python worker (``spark.python.task.killTimeout``, 2 s by default). Nothing is raised: when the
    JVM is gone, its workers went with it."""
    deadline = time.monotonic() + wait
    for _ in range(3):  # a call interrupted by a signal can leave py4j's next connection failing once
        try:
            sc.cancelJobGroup(group)
            while time.monotonic() < deadline and spark_tasks(sc, group)[1]:
                time.sleep(0.05)
            return
        except Exception:
            time.sleep(0.1)


def call_site(sc: SparkContext, name: str) -> AbstractContextManager[object]:
    """Name the stages of the Spark calls in the block (the UI shows it instead of "collect at
    pipeline.py:105"). PySpark sets the call site of each action itself unless one is already set, through
    ``SCCallSiteSync``; this is that helper with our name (no public API names a stage)."""
    try:
        from pyspark.traceback_utils import SCCallSiteSync
    except ImportError:  # pragma: no cover - a PySpark without it: Spark's own names
        return contextlib.nullcontext()
    sync = SCCallSiteSync(sc)  # type: ignore[no-untyped-call]
    sync._call_site = name
    return sync


def spark_tasks(sc: SparkContext, group: str) -> tuple[int, int, int]:
    """(tasks completed, tasks running, tasks in all) of the job group's stages, from Spark's status tracker."""
    tracker = sc.statusTracker()
    done = running = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
                running += stage.numActiveTasks
                total += stage.numTasks
    return done, running, total


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
