"""``verify-remote`` and ``rebuild-remote`` as one Spark job: the remote segments go out in bins balanced by what a
task costs (the bytes of each ``.log`` read with ``--full`` or a rebuild, else one unit per segment: the
index-only pass costs a few small reads whatever the size), each executor runs
:func:`indexlib.engine.verify_remote_segments` on its bin (on threads) and reads the bucket itself (the tasks carry a picklable
store spec, no client), and the outcomes come back to the driver, which reports and writes the audit rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from indexlib.engine import RemoteSegmentOutcome, RemoteSegmentTask, verify_remote_segments
from indexlib.storage import ObjectStoreError

from .pipeline import balance_by_bytes, call_site, object_store_failure, stop_job, task_count

if TYPE_CHECKING:
    from pyspark import SparkContext


def reads_log(task: RemoteSegmentTask) -> bool:
    return task.full or task.output_root is not None


def spark_verify_remote(
    sc: SparkContext, tasks: list[RemoteSegmentTask], bytes_per_task: int, run_id: str, threads: int = 8
) -> list[RemoteSegmentOutcome]:
    """Each task's outcome (in the tasks' order), computed by Spark's executors: each Spark task checks its bin's
    segments in their order, ``threads`` at once (the reads wait on the store, not on the core)."""
    if not tasks:
        return []
    sizes = [t.segment.size if reads_log(t) else 1 for t in tasks]
    per_task = bytes_per_task if reads_log(tasks[0]) else 64  # index-only: about 64 segments a Spark task
    bins = balance_by_bytes(list(enumerate(tasks)), sizes, task_count(sum(sizes), sc.defaultParallelism, per_task))

    # runs in Spark's Python workers, which coverage cannot measure; every Spark test of verify-remote runs it
    def run_bin(
        group: list[tuple[int, RemoteSegmentTask]],
    ) -> list[tuple[int, RemoteSegmentOutcome]]:  # pragma: no cover
        ordered = sorted(group, key=lambda pair: pair[0])  # a partition's segments in offset order
        outcomes = verify_remote_segments([t for _, t in ordered], threads)
        return list(zip([i for i, _ in ordered], outcomes, strict=True))

    group = f"kafka-index-{run_id}"
    sc.setJobGroup(group, f"kafka-index remote run {run_id}: {len(tasks)} remote segments")
    try:
        with call_site(sc, f"check {len(tasks)} remote segments in {len(bins)} tasks"):
            done = dict(sc.parallelize(bins, len(bins)).flatMap(run_bin).collect())
    except BaseException as exc:
        stop_job(sc, group)
        if isinstance(exc, Exception) and (line := object_store_failure(exc)) is not None:
            raise ObjectStoreError(line) from None
        raise
    return [done[i] for i in range(len(tasks))]
