"""The store seam (:mod:`indexlib.storage.store`): the map side of a segment reads through one call of the run's
store, which every task names by a picklable spec."""

from __future__ import annotations

import pickle

import pytest

from indexlib.engine import rebuild_partition
from indexlib.engine.options import RunOptions
from indexlib.engine.segment_task import plan_tasks, process_segment
from indexlib.format.layout import segment_file
from indexlib.recovery.log_scan import probes_for
from indexlib.recovery.settings import IndexSettings
from indexlib.storage.discovery import discover
from indexlib.storage.partition_files import index_file_sizes, read_existing_indexes, summarize_log
from indexlib.storage.store import LOCAL, LocalStore, StoreSpec, UnknownStoreError, store_for
from indexlib.testing.generate import generate_partition


@pytest.fixture
def damaged(tmp_path):
    """One partition of two segments: the first's .index torn, the second's .log with a zero tail."""
    part = tmp_path / "logs" / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=30, seed=5)
    rebuild_partition(part)
    index = segment_file(str(part), 0, ".index")
    with open(index, "r+b") as f:
        f.truncate(f.seek(0, 2) - 3)
    second = sorted(part.glob("*.log"))[1]
    with open(second, "ab") as f:
        f.write(bytes(700))
    return part


def test_a_segment_is_read_in_one_call_as_the_separate_reads_read_it(damaged):
    """LocalStore.read_segment: the same summary (probed by the existing entries), existing indexes, zero tail and
    index file sizes as the reads it replaced, for a torn index and for a zero tail."""
    store = store_for(LOCAL)
    for log in sorted(damaged.glob("*.log")):
        base = int(log.stem)
        reads = store.read_segment(str(log), str(damaged), base, 4096, read_indexes=True, probe=True)
        existing = read_existing_indexes(str(damaged), base)
        summary = summarize_log(str(log), base, 4096, probes_for(existing, base))
        assert reads.summary.valid_bytes == summary.valid_bytes and reads.summary.batch_count == summary.batch_count
        assert reads.summary.answers.probes.positions.size > 0  # probed by the existing entries
        for name in ("starts", "bases", "previous_lasts"):
            assert getattr(reads.summary.answers, name).tolist() == getattr(summary.answers, name).tolist()
        assert reads.existing is not None
        assert {k: v.entries.tobytes() for k, v in reads.existing.items()} == {
            k: v.entries.tobytes() for k, v in existing.items()
        }
        assert reads.index_sizes == index_file_sizes(str(damaged), base)
        assert reads.zero_tail is (base != 0)  # only the second .log ends in zeros
    unread = store.read_segment(str(log), str(damaged), base, 4096, read_indexes=False, probe=False)
    assert unread.existing is None and unread.index_sizes == index_file_sizes(str(damaged), base)


def test_an_unreadable_log_is_a_summary_that_says_why(tmp_path):
    reads = store_for(LOCAL).read_segment(
        str(tmp_path / "00000000000000000000.log"), str(tmp_path), 0, 4096, True, True
    )
    assert reads.summary.fatal is not None and "No such file" in reads.summary.fatal.detail
    assert reads.index_sizes == {".index": None, ".timeindex": None, ".txnindex": None}


def test_every_task_carries_the_runs_store_spec_and_a_worker_builds_the_same_store(damaged):
    spec = StoreSpec("file", (("region", "here"),))
    tasks = plan_tasks(
        discover([str(damaged.parent)]), RunOptions("verify", store=spec), "r1", lambda t: IndexSettings()
    )
    assert {t.store for t in tasks} == {spec}
    assert pickle.loads(pickle.dumps(tasks[0])).store == spec  # crosses to a pool worker or an executor
    assert isinstance(store_for(StoreSpec()), LocalStore) and store_for(StoreSpec()) is store_for(LOCAL)
    with pytest.raises(UnknownStoreError, match="no store for gopher:// paths"):
        store_for(StoreSpec("gopher"))
    bad = plan_tasks(
        discover([str(damaged.parent)]),
        RunOptions("verify", store=StoreSpec("gopher")),
        "r1",
        lambda t: IndexSettings(),
    )
    with pytest.raises(UnknownStoreError):
        process_segment(bad[0])
