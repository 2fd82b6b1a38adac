"""The map step on one machine: segments in this process or a pool of processes, stopped as a whole on a
signal or a failure."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..format import scan_kernel
from ..format.errors import KafkaIndexError
from ..storage import register_sync_roots, sync_roots
from .segment_task import Arrived, MapSegments, SegmentOutcome, SegmentTask, process_segments


class WorkerDiedError(KafkaIndexError, RuntimeError):
    """A pool worker died under the map (killed, or out of memory): the map stopped before any commit, so no file
    was replaced; what the workers staged is swept by the run."""


#: seconds a pool's workers have to exit once the pool is shut down, before they are killed: a worker that waits
#: on the call queue's lock that a killed sibling held, or one that was stopped, never would
EXIT_GRACE = 10.0


def map_locally(jobs: int = 1) -> MapSegments:
    """A map step on this machine: in this process (``jobs=1``) or a pool of ``jobs`` processes. The
    staged files' tag is the run id (each segment is staged by exactly one process). If the map is
    interrupted (SIGINT, SIGTERM) or fails (``arrived`` too: it is handed each batch's outcomes as they come back,
    see :data:`MapSegments`), the pool's workers are stopped before the error goes on, so nothing stages a file
    after the run has swept its own. A worker that dies raises :class:`WorkerDiedError`; the pool's workers are gone
    when the map returns or raises, whatever state a dead worker left its queues in."""

    def map_segments(tasks: list[SegmentTask], run_id: str, arrived: Arrived | None = None) -> list[SegmentOutcome]:
        if jobs <= 1 or len(tasks) <= 1:
            return [o for batch in batches(tasks, 1) for o in _handed(process_segments(batch, run_id), arrived)]
        ordered = sorted(tasks, key=lambda t: -t.size)  # big segments first: the pool ends together
        from concurrent.futures import BrokenExecutor, ProcessPoolExecutor  # here: a pool is rare, ~10 ms

        workers = min(jobs, len(tasks))
        chosen = batches(ordered, workers * BATCHES_PER_WORKER)
        pool = ProcessPoolExecutor(
            max_workers=workers,
            initializer=pool_worker,
            initargs=(pool_reads_ahead(workers), sync_roots()),
            mp_context=_start_method(tasks),
        )
        stopping = contextlib.ExitStack()
        try:
            futures = [pool.submit(process_segments, batch, run_id) for batch in chosen]
            return [o for future in futures for o in _handed(_watched_result(pool, future), arrived)]
        except BaseException as exc:
            stopping.enter_context(_quiet_threads())
            died = _death_of_a_worker(pool) if isinstance(exc, BrokenExecutor) else None
            _stop_workers(pool)
            if died is not None:
                raise WorkerDiedError(f"{died} while the run read the segments; no file was replaced") from None
            raise
        finally:
            with stopping:
                _shut_down(pool)

    return map_segments


#: seconds between looks at the pool's workers while a result is awaited; seconds a dead worker may go unnoticed
#: by the pool itself before the map calls the pool broken
WATCH_INTERVAL, DEATH_GRACE = 1.0, 3.0


def _watched_result(pool: Any, future: Any) -> list[SegmentOutcome]:
    """``future``'s result, the pool's workers watched meanwhile: a worker killed while it sent a result leaves the
    pool's manager thread waiting for the rest of the message, so the pool never learns of the death and the
    future would never end. A worker that exited (none does while the map runs) and is not reported by the pool
    within :data:`DEATH_GRACE` makes the map raise ``BrokenProcessPool`` itself."""
    from concurrent.futures.process import BrokenProcessPool

    dead_since = None
    while True:
        with contextlib.suppress(TimeoutError):  # not yet: look at the workers
            return future.result(timeout=WATCH_INTERVAL)  # type: ignore[no-any-return]
        processes = (getattr(pool, "_processes", None) or {}).values()
        if any(p.exitcode is not None for p in processes):
            dead_since = time.monotonic() if dead_since is None else dead_since
            if time.monotonic() - dead_since >= DEATH_GRACE:
                raise BrokenProcessPool("a worker process died and the pool did not notice")


def _start_method(tasks: list[SegmentTask]) -> Any:
    """How the pool's workers start: forked (cheap), but for tasks that read or write object storage from a fork
    server (a clean process that never opened the store): the object store's client runs its requests on threads a
    forked copy of this process would not have, and hangs there."""
    if all(t.store.scheme == "file" and t.target_store.scheme == "file" for t in tasks):
        return None  # the platform's default: fork on Linux
    import multiprocessing

    return multiprocessing.get_context("forkserver")


def _handed(outcomes: list[SegmentOutcome], arrived: Arrived | None) -> list[SegmentOutcome]:
    if arrived is not None:
        arrived(outcomes)
    return outcomes


#: pool tasks per worker, at least (the last ones end together); segments per pool task, at most
BATCHES_PER_WORKER, BATCH_SEGMENTS = 8, 64


def batches(tasks: list[SegmentTask], parts: int) -> list[list[SegmentTask]]:
    """The tasks in order, cut into consecutive batches of about ``1 / parts`` of their bytes and at most
    :data:`BATCH_SEGMENTS` segments: one pool task each (one pickling each way, one round of fsyncs), so many
    small segments do not cost a round trip each."""
    target = sum(t.size for t in tasks) / parts
    out: list[list[SegmentTask]] = []
    batch: list[SegmentTask] = []
    size = 0
    for t in tasks:
        batch.append(t)
        size += t.size
        if size >= target or len(batch) >= BATCH_SEGMENTS:
            out.append(batch)
            batch, size = [], 0
    if batch:
        out.append(batch)
    return out


@contextlib.contextmanager
def _quiet_threads() -> Iterator[None]:
    """While a stopped run takes its pool down: an exception in a thread (the pool's manager thread, which
    may fail on a worker terminated under it) is not printed. The run's own error is the one line it ends
    with; a trace beside it would only say that the workers were stopped."""
    previous = threading.excepthook
    threading.excepthook = lambda args: None
    try:
        yield
    finally:
        threading.excepthook = previous


def _death_of_a_worker(pool: Any) -> str:
    """How a broken pool's worker died, in words ("a worker process was killed by SIGKILL"): the first worker that
    did not end by the SIGTERM the pool sends its survivors."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    # the pool's manager thread terminates and reaps them all: until it has, a worker's exit code may read as None
    deadline = time.monotonic() + 2.0
    while not all(p.exitcode is not None for p in processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    for p in processes:
        code = p.exitcode
        if code is not None and code < 0 and code != -signal.SIGTERM:
            return f"a worker process was killed by {signal.Signals(-code).name}"
        if code is not None and code > 0:
            return f"a worker process exited with status {code}"
    return "a worker process died"


def _shut_down(pool: Any) -> None:
    """Shut the pool down, its workers gone at the end: each has :data:`EXIT_GRACE` seconds to exit, then is
    killed (``shutdown(wait=True)`` alone joins a worker that can never exit, and the run would hold its locks
    forever)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    results = getattr(pool, "_result_queue", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + EXIT_GRACE
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()  # SIGKILL: it also ends a stopped process
            process.join()
    if manager is not None:
        manager.join(min(EXIT_GRACE, 1.0))
        if manager.is_alive():
            _end_a_torn_result(results, manager)


def _end_a_torn_result(results: Any, manager: threading.Thread) -> None:
    """End the pool's manager thread when a worker died in the middle of sending its result (SIGTERMed by
    :func:`_stop_workers`, or killed): the thread waits in ``recv`` for the rest of a message nobody will write,
    and Python's exit joins it, so the run would never exit. The parent holds the result pipe's write end too:
    zeros written there complete the torn message, which does not unpickle, so the thread calls the pool broken
    and returns. Written without blocking, as fast as the thread reads, until it ends or :data:`EXIT_GRACE` passes."""
    writer = getattr(results, "_writer", None)
    if writer is None or writer.closed:
        return
    fd = writer.fileno()
    os.set_blocking(fd, False)  # the write end's own file description: the reader's stays blocking
    import select

    deadline = time.monotonic() + EXIT_GRACE
    zeros = bytes(65536)
    while manager.is_alive() and time.monotonic() < deadline:
        try:
            os.write(fd, zeros)
        except BlockingIOError:  # the pipe is full: on as soon as the thread has read some (a torn result may be MBs)
            select.select([], [fd], [], 0.05)
        except OSError:  # the pipe is gone (the thread closed it): it is ending
            manager.join(0.05)


def _stop_workers(pool: Any) -> None:
    """SIGTERM every worker of a ``ProcessPoolExecutor`` (``shutdown`` then joins them): a worker
    would otherwise finish its segment, and a shut-down pool would still run every queued one."""
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.terminate()


def pool_worker(read_ahead: bool = True, sync_roots: list[str] | None = None) -> None:
    """A pool worker's initializer. The parent alone decides when the run stops: SIGINT, which a terminal
    sends to the whole process group, is ignored here, and SIGTERM kills (the fork copied the parent's
    handler, which would raise). On Linux a worker dies with its parent instead of waiting forever for work
    that will not come. Without ``read_ahead`` its scans read synchronously (:func:`pool_reads_ahead`). With
    ``sync_roots`` (the run's ``--sync syncfs``) it registers their file systems with descriptors of its own,
    before it writes anything (:mod:`~indexlib.storage.file_system_sync`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    if not read_ahead:
        scan_without_read_ahead()
    if sync_roots:
        register_sync_roots(sync_roots)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    pr_set_pdeathsig = 1
    if prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() != parent:
        os._exit(1)  # the parent died before the request took effect


def pool_reads_ahead(workers: int) -> bool:
    """Whether a pool of ``workers`` scanning processes keeps the kernel's read-ahead thread: only while a
    core is left over for it. With every core scanning, the thread only moves each worker's copy onto a core
    another worker needs (benchmarks/broker.py: 3-8 % slower)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return workers < cores


def scan_without_read_ahead() -> None:
    """A pool worker's initializer: its scans read synchronously (``scan_kernel.READ_AHEAD``)."""
    scan_kernel.READ_AHEAD = False
