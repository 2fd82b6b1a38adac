"""What the Spark driver adds to the engine: how tasks are cut and balanced (the job itself runs in
every Spark test)."""

from __future__ import annotations

import os

import pytest

from jobs.config import ConfigError, load_config_file
from jobs.pipeline import balance_by_bytes, task_count


def test_byte_balancing():
    bins = balance_by_bytes(list("abcdef"), [100, 90, 10, 10, 10, 80], 3)
    totals = sorted(sum({"a": 100, "b": 90, "c": 10, "d": 10, "e": 10, "f": 80}[x] for x in b) for b in bins)
    assert max(totals) - min(totals) <= 20
    assert len(bins) == 3 and sorted(x for b in bins for x in b) == list("abcdef")


def test_task_count_is_one_per_bytes_per_task_and_at_least_one_per_slot(tmp_path):
    gib = 1 << 30
    assert task_count(2 * gib, 2, gib) == 2  # the benchmark's 2 GiB on two cores: one wave
    assert task_count(2 * gib, 8, gib) == 8  # every slot busy even when the data is small
    assert task_count(10 * gib + 1, 2, gib) == 11
    assert task_count(0, 0, gib) == 1
    assert load_config_file()["bytes_per_task"] == 256 << 20  # well below 1 GiB: progress moves
    config = tmp_path / "c.yaml"
    config.write_text("bytes_per_task: 0\n")
    with pytest.raises(ConfigError, match="bytes_per_task must be >= 1"):
        load_config_file(str(config))


def test_the_scan_is_one_named_job_in_the_runs_group_with_task_progress(spark, tmp_path):
    """The Spark UI and the status tracker see the run: a job group named after the run id with a
    description, a stage named for what it does, and task counts the progress polls (driver-side, so the
    same in cluster mode)."""
    from indexlib.engine.options import RunOptions
    from indexlib.engine.segment_task import plan_tasks
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover
    from indexlib.testing.generate import generate_partition
    from jobs.pipeline import spark_map

    for p in range(3):
        generate_partition(tmp_path / "logs" / f"orders-{p}", segments=2, batches_per_segment=30, seed=p)
    found = discover([str(tmp_path / "logs")])
    tasks = plan_tasks(found, RunOptions("verify", "progress-1"), "progress-1", lambda topic: IndexSettings())
    polls = []

    class Recorder:
        def start(self, total, total_bytes, poll):
            self.total, self.poll = total, poll
            polls.append(poll())

        def stop(self):
            polls.append(self.poll())

    sc = spark.sparkContext
    size = sum(t.size for t in tasks)
    outcomes = spark_map(sc, -(-size // 3), Recorder())(tasks, "progress-1")  # three tasks
    assert len(outcomes) == 6
    jobs = sc.statusTracker().getJobIdsForGroup("kafka-index-progress-1")
    assert len(jobs) == 1
    stages = [sc.statusTracker().getStageInfo(s) for s in sc.statusTracker().getJobInfo(jobs[0]).stageIds]
    assert [s.name for s in stages] == ["scan 6 segments in 3 tasks"]
    assert polls[0][0] == 0 and polls[-1][:2] == (6, size)
    assert polls[-1][2:] == (
        3,
        0,
        3,
    )  # every task done at the end, even when the status tracker lags (a loaded machine)
    assert sc.getLocalProperty("spark.jobGroup.id") is None  # the group does not leak into later jobs


FSYNC_LOGGER = """
import os

_log = os.environ.get("KAFKA_INDEX_TEST_FSYNC_LOG")
if _log:
    _fsync = os.fsync
    with open(_log + ".loaded", "a") as f:
        f.write(f"{os.getpid()}\\n")

    def _logged(fd):
        with open(_log, "a") as f:
            f.write(f"{os.getpid()}\\n")
        return _fsync(fd)

    os.fsync = _logged
"""


@pytest.mark.parametrize("sync", ["fsync", "syncfs"])
def test_spark_executors_stage_under_the_runs_sync(tmp_path, sync):
    """A Spark rebuild with ``--sync syncfs`` as a user runs it (its own JVM and Python workers): the executors
    register the run's file systems and fsync none of the index files they stage; with ``fsync`` they fsync them.
    Every Python process of the run logs its ``os.fsync`` calls by pid (a ``sitecustomize`` on the PYTHONPATH the
    JVM hands its workers), so the test sees the executors' own calls."""
    import subprocess
    import sys

    from indexlib.storage import file_system_sync
    from indexlib.testing.generate import generate_partition

    from ..conftest import PROJECT_ROOT

    if sync == "syncfs" and not (
        file_system_sync.kernel_reports_syncfs_errors()
        and file_system_sync.file_system_type(os.stat(tmp_path).st_dev) in file_system_sync.SYNCFS_FILE_SYSTEMS
    ):
        pytest.skip("--sync syncfs needs Linux 5.17+ and a temporary dir on ext4, xfs, btrfs or tmpfs")
    logs = tmp_path / "logs"
    for n in range(2):  # no index files: the executors stage every .index and .timeindex
        generate_partition(logs / f"orders-{n}", segments=2, batches_per_segment=20, seed=n)
        for f in (logs / f"orders-{n}").glob("*index"):
            f.unlink()
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(FSYNC_LOGGER)
    fsyncs = tmp_path / "fsyncs"
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, KAFKA_INDEX_TEST_FSYNC_LOG=str(fsyncs))
    job = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "rebuild", "--log-dir", str(logs), "--audit-table", "none", "--no-progress",
         "-q", "--sync", sync],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0, out + err
    segments = sorted(logs.glob("*/*.log"))
    assert len(segments) == 4 and all(s.with_suffix(x).exists() for s in segments for x in (".index", ".timeindex"))
    loaded = set((tmp_path / "fsyncs.loaded").read_text().split()) - {str(job.pid)}
    assert loaded  # the hook is in the Python workers too: what they fsync is in the log
    others = [pid for pid in fsyncs.read_text().split() if pid != str(job.pid)] if fsyncs.exists() else []
    if sync == "syncfs":
        assert others == []  # the workers registered the log dir's file system: one syncfs, no fsync each
    else:
        assert len(others) >= 8  # each staged .index and .timeindex of the 4 segments, by the workers
