"""Producer-state replay for the ``.txnindex`` rebuild: ongoing transactions carried across segments.

Only ``{producer_id -> first offset of its open transaction}`` can change index bytes (epochs,
sequences and coordinator epochs only produce warnings on recovery's path). The replay is sequential per
partition but cheap: it consumes the compact event arrays that :func:`indexlib.recovery.entry_plan.plan_segment`
produced for each segment (in parallel).

Starting state per segment, with ``L`` the partition's log start offset (kafka-index-format.md 2.5):
segments with ``base <= L`` start empty; the first segment with ``base > L`` starts from the newest valid
``.snapshot`` with ``L < offset <= base`` (or empty); later segments carry on. The snapshots are read by
:mod:`indexlib.storage.partition_files`; this module only computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..format.records import ScanProblem
from ..format.values import AbortedTxn
from .log_scan import EVENT_ABORT, EVENT_COMMIT, EVENT_DATA, EVENT_TXN_DATA


@dataclass
class ReplayResult:
    """Per segment: the aborted transactions of its ``.txnindex``, and a fatal replay error if any."""

    aborted: list[AbortedTxn]
    fatal: ScanProblem | None = None


def replay_segment(ongoing: dict[int, int], events: npt.NDArray[np.void]) -> ReplayResult:
    """Apply one segment's events to ``ongoing`` (in place), returning its aborted transactions.

    LSO written with an abort = first offset of the earliest other producer's open transaction, else
    marker offset + 1. A non-transactional batch from a producer with an open transaction is Kafka's
    ``InvalidTxnStateException``: reported as fatal, the replay of the segment stops there.
    """
    aborted: list[AbortedTxn] = []
    for batch, kind, pid, offset, position in events.tolist():
        if kind == EVENT_TXN_DATA:
            if pid not in ongoing:
                ongoing[pid] = offset
        elif kind == EVENT_DATA:
            if pid in ongoing:
                return ReplayResult(
                    aborted,
                    ScanProblem(
                        "non_transactional_in_open_transaction",
                        position,
                        batch,
                        f"non-transactional batch of producer {pid} at offset {offset} while its transaction "
                        f"from offset {ongoing[pid]} is open (Kafka: InvalidTxnStateException)",
                        offset,
                    ),
                )
        elif kind in (EVENT_ABORT, EVENT_COMMIT):
            first = ongoing.get(pid)
            if first is None:
                continue  # a marker without an open transaction completes nothing
            if kind == EVENT_ABORT:
                others = [f for p, f in ongoing.items() if p != pid]
                lso = min(others) if others else offset + 1
                aborted.append(AbortedTxn(pid, first, offset, lso))
            del ongoing[pid]
    return ReplayResult(aborted)


def relevant_events(events: npt.NDArray[np.void], transactional_pids: npt.NDArray[np.int64]) -> npt.NDArray[np.void]:
    """Drop non-transactional events of producers that never open a transaction (they cannot matter)."""
    keep: npt.NDArray[np.bool_] = (events["kind"] != EVENT_DATA) | np.isin(events["producer_id"], transactional_pids)
    return events[keep]
