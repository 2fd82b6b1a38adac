"""The scan's progress on the console while a Spark job runs."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


class ConsoleProgress:
    """Progress of the scan on stderr, polled on the driver (segments, MiB, Spark tasks, rate, ETA): on a
    terminal a bar redrawn every ``interval`` seconds; otherwise (a log file, Airflow) a line at the start and
    one every ``log_every`` seconds. Until a first task runs it says it is waiting for executors (a cluster
    takes 20-30 s to start them). Works in local and cluster mode (accumulators and Spark's status tracker)."""

    def __init__(
        self, stream: TextIO = sys.stderr, interval: float = 0.5, tty: bool | None = None, log_every: float = 10.0
    ) -> None:
        self.stream, self.interval, self.log_every = stream, interval, log_every
        self.tty = stream.isatty() if tty is None else tty
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, total: int, total_bytes: int, poll: Callable[[], tuple[int, int, int, int, int]]) -> None:
        self.total, self.total_bytes, self.poll, self.t0 = total, total_bytes, poll, time.monotonic()
        self._stop.clear()
        if not self.tty:  # a log shows at once that the scan was submitted
            self.stream.write(self._line() + "\n")
            self.stream.flush()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _line(self) -> str:
        done, done_bytes, tasks_done, tasks_running, tasks = self.poll()
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        rate = done_bytes / elapsed
        left = self.total_bytes - done_bytes
        eta = f", ETA {left / rate:,.0f} s" if done_bytes and left > 0 else ""
        waiting = f" (waiting for executors, {elapsed:,.0f} s)" if not (tasks_done or tasks_running) else ""
        text = (
            f"{done}/{self.total} segments, {done_bytes / 2**20:,.0f}/{self.total_bytes / 2**20:,.0f} MiB, "
            f"{tasks_done}/{tasks} tasks{waiting}, {rate / 2**20:,.0f} MiB/s{eta}"
        )
        if not self.tty:
            return f"progress: {text}"
        width = 30
        filled = int(width * done / self.total) if self.total else width
        return f"\r[{'#' * filled}{'.' * (width - filled)}] {text}"

    def _loop(self) -> None:
        every = self.interval if self.tty else self.log_every
        while not self._stop.wait(every):
            try:
                line = self._line()
            except Exception:  # Spark is gone (its JVM died): the run reports that, the display just ends
                return
            self.stream.write(line + ("" if self.tty else "\n"))
            self.stream.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            try:
                line = self._line() + "\n"
            except Exception:  # Spark is gone: no last line (a bar still ends its own)
                line = "\n" if self.tty else ""
            self.stream.write(line)
            self.stream.flush()
