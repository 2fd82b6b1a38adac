"""The producer-state replay reads compacted events (``rebuild.compact_events``); compaction must never
change what the replay finds: the aborted transactions, their LSOs, the fatal problem, the state after."""

import numpy as np
import pytest

from indexlib.recovery.log_scan import (
    EVENT_ABORT,
    EVENT_COMMIT,
    EVENT_DATA,
    EVENT_DTYPE,
    EVENT_TXN_DATA,
    compact_events,
)
from indexlib.recovery.producer_state import replay_segment


def make_events(kinds_pids) -> np.ndarray:
    events = np.zeros(len(kinds_pids), dtype=EVENT_DTYPE)
    for i, (kind, pid) in enumerate(kinds_pids):
        events[i] = (i, kind, pid, 10 * i, 100 * i)
    return events


def replay(start: dict[int, int], events: np.ndarray):
    state = dict(start)
    result = replay_segment(state, events)
    return result.aborted, result.fatal, state


def random_segment(rng, producers: int, length: int):
    # producers are mostly transactional or mostly not; markers are rarer than data; data comes in runs
    transactional = rng.random(producers) < 0.6
    out = []
    while len(out) < length:
        pid = int(rng.integers(0, producers))
        roll = rng.random()
        if roll < 0.15:
            out.append((EVENT_ABORT if rng.random() < 0.5 else EVENT_COMMIT, pid))
        else:
            kind = EVENT_TXN_DATA if transactional[pid] != (roll < 0.2) else EVENT_DATA
            out += [(kind, pid)] * int(rng.integers(1, 4))
    return make_events(out[:length])


@pytest.mark.parametrize("seed", range(300))
def test_compaction_never_changes_the_replay(seed):
    rng = np.random.default_rng(seed)
    producers = int(rng.integers(1, 5))
    events = random_segment(rng, producers, int(rng.integers(0, 40)))
    start = {pid: -1000 - pid for pid in range(producers) if rng.random() < 0.4}  # carried-over open transactions
    compacted = compact_events(events)
    assert replay(start, compacted) == replay(start, events)
    assert len(compacted) <= len(events)


def test_runs_of_data_collapse_to_their_first_event_and_markers_stay():
    events = make_events(
        [(EVENT_DATA, 7)] * 5
        + [(EVENT_TXN_DATA, 7)] * 3
        + [(EVENT_DATA, 8), (EVENT_TXN_DATA, 7), (EVENT_ABORT, 7), (EVENT_COMMIT, 7), (EVENT_DATA, 7), (EVENT_DATA, 8)]
    )
    kept = compact_events(events)
    # batch numbers of the survivors: first DATA of 7, first TXN_DATA of 7, DATA of 8, both markers,
    # the DATA of 7 after its markers; the repeated TXN_DATA of 7 (interleaved with 8) and the second DATA of 8 go
    assert kept["batch"].tolist() == [0, 5, 8, 10, 11, 12]


def test_an_idempotent_producer_leaves_one_event_per_segment():
    events = make_events([(EVENT_DATA, pid) for _ in range(1000) for pid in (1, 2, 3)])
    assert compact_events(events)["batch"].tolist() == [0, 1, 2]


def test_the_event_that_makes_the_replay_fatal_survives():
    # producer 1's transaction is open from the previous segment; its first plain batch is fatal
    events = make_events([(EVENT_DATA, 2), (EVENT_DATA, 1), (EVENT_DATA, 1)])
    aborted, fatal, _ = replay({1: 0}, compact_events(events))
    assert fatal is not None and fatal.kind == "non_transactional_in_open_transaction"
    assert (fatal.batch_index, fatal.position) == (1, 100)
