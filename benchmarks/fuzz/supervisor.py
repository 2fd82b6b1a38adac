"""What the long fuzz scripts share: run N worker processes until a deadline and watch them; a worker that
dies (a signal: a crash) or a run that stops making progress for ``STALL_SECONDS`` (a hang) stops everything.
Each worker writes its current case under the work dir before trying it, so what it leaves is the reproducer."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STALL_SECONDS = 30.0


@dataclass
class Outcome:
    started: float
    elapsed: float
    cases: int
    failures: int
    crash: str | None  # why the run was stopped, if it was


def supervise(
    worker: Callable[..., None], seconds: float, workers: int, workdir: str, extra: tuple[Any, ...] = ()
) -> Outcome:
    """Run ``worker(index, deadline, workdir, counter, failures, *extra)`` in ``workers`` forked processes.
    ``counter`` and ``failures`` are shared ints the workers add to (cases tried, cases that failed)."""
    ctx = multiprocessing.get_context("fork")
    counter, failures = ctx.Value("q", 0), ctx.Value("q", 0)
    started = time.time()
    deadline = started + seconds
    procs = [ctx.Process(target=worker, args=(i, deadline, workdir, counter, failures, *extra)) for i in range(workers)]
    for p in procs:
        p.start()
    crash = None
    last, last_change = -1, time.time()
    while any(p.is_alive() for p in procs):
        time.sleep(1)
        for i, p in enumerate(procs):
            if p.exitcode not in (None, 0):
                crash = f"worker {i} died with exit code {p.exitcode}; reproducer: {workdir}/case-{i}*"
        if counter.value != last:
            last, last_change = counter.value, time.time()
        elif time.time() - last_change > STALL_SECONDS:
            crash = f"no progress for {STALL_SECONDS:.0f} s (a hang?); reproducers: {workdir}/case-*"
        if crash:
            for p in procs:
                p.kill()
            break
    for p in procs:
        p.join()
    return Outcome(started, time.time() - started, counter.value, failures.value, crash)
