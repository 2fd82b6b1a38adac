"""The console progress bar of local runs: segments done / total, bytes, throughput."""

from __future__ import annotations

import io
import time

from jobs.cli import ConsoleProgress


def test_progress_line_counts_segments_bytes_and_throughput():
    state = {"done": 0, "bytes": 0}
    out = io.StringIO()
    bar = ConsoleProgress(out, interval=0.01)
    bar.start(4, 4 * 2**20, lambda: (state["done"], state["bytes"]))
    time.sleep(0.05)
    state.update(done=2, bytes=2 * 2**20)
    time.sleep(0.05)
    state.update(done=4, bytes=4 * 2**20)
    bar.stop()
    lines = [line for line in out.getvalue().split("\r") if line]
    assert "0/4 segments, 0/4 MiB" in lines[0]
    assert any("2/4 segments, 2/4 MiB" in line for line in lines)
    final = lines[-1]
    assert final.startswith("[" + "#" * 30 + "]") and "4/4 segments, 4/4 MiB" in final and final.endswith(" MiB/s\n")
