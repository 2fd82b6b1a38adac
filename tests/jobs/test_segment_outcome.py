"""What an executor sends to the driver per segment stays small however many batches the segment has
(Spark's ``spark.driver.maxResultSize`` must never be what limits a run), and the full plans stay on the
executors only where a write may need them. No Spark: the executor function is called directly."""

from __future__ import annotations

import pickle

import pytest

from indexlib.generate import encode_batch_v2, encode_control_batch
from indexlib.partition import plan_partition, rebuild_partition, segment_file
from jobs.config import resolve_settings
from jobs.discovery import discover
from jobs.pipeline import plan_tasks, process_segment

BATCHES = 20_000


def write_busy_segment(path):
    """20k small batches: three idempotent producers interleaved, one transactional producer whose
    transactions (aborted every other time) span many batches."""
    offset, chunks = 0, []
    ts = 1_700_000_000_000
    for i in range(BATCHES):
        if i % 100 == 99:  # close the open transaction of producer 9
            chunks.append(encode_control_batch(offset, 9, 0, abort=(i // 100) % 2 == 1, timestamp=ts + i))
        elif i % 4 == 3:
            chunks.append(encode_batch_v2(offset, [(None, b"t" * 40, ts + i)], producer_id=9, producer_epoch=0,
                                          base_sequence=i, transactional=True))
        else:
            chunks.append(encode_batch_v2(offset, [(None, b"v" * 40, ts + i)], producer_id=i % 3 + 1,
                                          producer_epoch=0, base_sequence=i))
        offset += 1
    path.write_bytes(b"".join(chunks))


@pytest.fixture
def busy_partition(tmp_path):
    part = tmp_path / "logs" / "busy-0"
    part.mkdir(parents=True)
    write_busy_segment(part / "00000000000000000000.log")
    rebuild_partition(str(part), index_interval_bytes=64)  # an entry for almost every batch
    return part


def tasks_for(part, keep_plan):
    settings = resolve_settings(log_dirs=[str(part.parent)], index_interval_bytes=64)
    return plan_tasks(discover([str(part.parent)]), settings, check=True, keep_plan=keep_plan)


def test_the_outcome_for_the_driver_does_not_grow_with_batches(busy_partition):
    (task,) = tasks_for(busy_partition, "all")
    outcome, plan = process_segment(task)
    assert outcome.batches == BATCHES and outcome.findings == []
    assert plan.index_entries > BATCHES * 0.9  # the full plan is big ...
    assert len(pickle.dumps(plan)) > 30 * BATCHES
    # ... what the driver gets is not: 3 idempotent producers -> 3 events, 200 transactions -> 400 events
    assert len(outcome.plan.events) <= 3 + 2 * (BATCHES // 100) + 1
    assert len(pickle.dumps(outcome)) < 32 * 1024
    assert (outcome.plan.index_entries, outcome.plan.timeindex_entries) == (plan.index_entries, plan.timeindex_entries)


def test_the_replay_from_summaries_equals_the_library_rebuild(busy_partition):
    (task,) = tasks_for(busy_partition, "none")
    outcome, plan = process_segment(task)
    assert plan is None
    from indexlib.partition import replay_partition

    ((aborted, fatal),) = replay_partition(str(busy_partition), [0], [outcome.plan], 0)
    library = plan_partition(str(busy_partition), index_interval_bytes=64)
    assert fatal is None and len(aborted) == BATCHES // 200
    assert aborted == library.segments[0].aborted


def test_damaged_keeps_the_full_plan_only_for_a_damaged_index(busy_partition):
    (task,) = tasks_for(busy_partition, "damaged")
    assert process_segment(task)[1] is None
    index = segment_file(str(busy_partition), 0, ".index")
    with open(index, "r+b") as f:
        f.seek(80)
        f.write(b"\xff" * 8)
    outcome, plan = process_segment(task)
    assert {f.kind for f in outcome.findings} and plan is not None and plan.index_entries == outcome.plan.index_entries
