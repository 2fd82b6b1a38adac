"""The console progress bar of local runs: segments done / total, bytes, throughput."""

from __future__ import annotations

import io
import time

from jobs.progress import ConsoleProgress


def test_progress_line_counts_segments_bytes_and_throughput():
    state = {"done": 0, "bytes": 0}
    out = io.StringIO()
    bar = ConsoleProgress(out, interval=0.01, tty=True)
    bar.start(4, 4 * 2**20, lambda: (state["done"], state["bytes"], state["done"] // 2, 1, 2))
    time.sleep(0.05)
    state.update(done=2, bytes=2 * 2**20)
    time.sleep(0.05)
    state.update(done=4, bytes=4 * 2**20)
    bar.stop()
    lines = [line for line in out.getvalue().split("\r") if line]
    assert "0/4 segments, 0/4 MiB" in lines[0]
    assert any("2/4 segments, 2/4 MiB" in line for line in lines)
    final = lines[-1]
    assert final.startswith("[" + "#" * 30 + "]") and "4/4 segments, 4/4 MiB, 2/2 tasks" in final
    assert final.endswith(" MiB/s\n")  # no ETA once everything is done


def test_without_a_terminal_progress_is_a_log_line_every_few_seconds():
    state = {"done": 0, "bytes": 0}
    out = io.StringIO()
    bar = ConsoleProgress(out, tty=False, log_every=0.05)
    bar.start(10, 10 * 2**20, lambda: (state["done"], state["bytes"], 1, 1, 5))
    time.sleep(0.03)
    state.update(done=5, bytes=5 * 2**20)
    time.sleep(0.12)
    bar.stop()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and all(line.startswith("progress: ") for line in lines)
    assert 2 <= len(lines) <= 6  # a line per period, not a redraw every 10 ms
    assert any("5/10 segments, 5/10 MiB, 1/5 tasks" in line and "ETA" in line for line in lines)


def test_before_a_first_task_runs_a_log_says_the_job_waits_for_executors():
    """On a cluster executors take 20-30 s to start: the log has a line at once, saying what it waits for,
    and the wait ends in the lines once a task runs."""
    state = {"running": 0}
    out = io.StringIO()
    bar = ConsoleProgress(out, tty=False, log_every=0.05)
    bar.start(3, 3 * 2**20, lambda: (0, 0, 0, state["running"], 2))
    assert out.getvalue().startswith("progress: 0/3 segments, 0/3 MiB, 0/2 tasks (waiting for executors, 0 s)")
    time.sleep(0.08)
    state["running"] = 2
    time.sleep(0.08)
    bar.stop()
    lines = out.getvalue().splitlines()
    assert "waiting for executors" not in lines[-1] and "0/2 tasks, " in lines[-1], lines
