"""What the machine was doing around each run of a benchmark, so its figures can be read: the load average,
the other tenants' CPU use while the benchmark sleeps, and three speed canaries.

The canaries exist because these shared machines change speed by up to 1.8x within minutes without any busy
CPU showing in ``/proc/stat``: the same in-process scan took 0.16 s at one moment and 0.28 s twelve minutes later,
and ``python -c "import numpy"`` 188 ms at one moment and 105 ms two minutes later. The swings are not in plain
arithmetic (a SHA-256 pass stayed within 5 % while the start-up swung 1.8x) but in what page faults, fresh
memory and mapped files cost, so three canaries are timed before each run, each the best of
``CANARY_REPEATS``:

* ``cpu``: SHA-256 of ``CANARY_BYTES`` in memory, one thread (arithmetic);
* ``memory``: writing ``CANARY_BYTES`` into freshly mapped anonymous memory (page faults and a copy);
* ``start``: a whole ``python -c "import numpy"`` process (the fixed cost every timed command pays).

Their spread over the runs says how far the absolute figures of those runs can be compared. Ratios measured
within one run are less affected: their two sides ran seconds to minutes apart, not hours, and each benchmark
alternates their order between runs.

Used by ``bench_kernel.py``, ``bench_logdir.py`` and ``bench_jobs.py``: ``watch = MachineWatch()``,
``watch.before_run()`` at the start of each run, ``watch.lines()`` in the report, ``watch.as_json()`` in the raw
figures.
"""

from __future__ import annotations

import hashlib
import mmap
import subprocess
import sys
import time
from collections.abc import Callable

CANARY_BYTES = 32 * 2**20
CANARY_REPEATS = 3
CANARY_SPREAD_WARNING = 1.15  # slowest / fastest canary above this: absolute figures differ across runs


def cpu_times() -> list[int]:
    """The machine's CPU time counters from ``/proc/stat``: user nice system idle iowait irq softirq steal."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def background_busy(seconds: float = 3.0) -> float:
    """Share of the machine's CPU time busy (or stolen) while this benchmark sleeps: the other tenants' load."""
    a = cpu_times()
    time.sleep(seconds)
    d = [y - x for x, y in zip(a, cpu_times(), strict=True)]
    return (sum(d) - d[3] - d[4]) / max(1, sum(d))


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def best_of(work: Callable[[], object], repeats: int = CANARY_REPEATS) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``work``."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t)
    return best


def write_fresh_memory(data: bytes) -> None:
    """Copy ``data`` into anonymous memory mapped for the purpose: one page fault per page, then the copy."""
    with mmap.mmap(-1, len(data)) as fresh:
        fresh.write(data)


def canaries() -> dict[str, float]:
    """The three canaries (see the module's docstring), in seconds."""
    data = bytes(range(256)) * (CANARY_BYTES // 256)
    return {
        "cpu": best_of(lambda: hashlib.sha256(data).digest()),
        "memory": best_of(lambda: write_fresh_memory(data)),
        "start": best_of(lambda: subprocess.run([sys.executable, "-c", "import numpy"], check=True)),
    }


CANARY_WORDS = {
    "cpu": f"SHA-256 of {CANARY_BYTES // 2**20} MiB",
    "memory": f"{CANARY_BYTES // 2**20} MiB into fresh memory",
    "start": '`python -c "import numpy"`',
}


class MachineWatch:
    """The machine's state before each run: load average, other tenants' CPU, the three speed canaries."""

    def __init__(self, sleep_seconds: float = 3.0) -> None:
        self.sleep_seconds = sleep_seconds
        self.load: list[str] = []
        self.busy: list[float] = []
        self.canary: list[dict[str, float]] = []

    def before_run(self) -> None:
        self.load.append(load_average())
        self.busy.append(background_busy(self.sleep_seconds))
        self.canary.append(canaries())

    def spread(self, name: str) -> float:
        """Slowest over fastest of one canary: 1.0 when the machine ran at one speed through every run."""
        values = [c[name] for c in self.canary]
        return max(values) / min(values) if values else 1.0

    def lines(self) -> list[str]:
        out = [
            f"before each run: load average {'; '.join(self.load)}; machine CPU busy or stolen while this "
            f"benchmark slept {self.sleep_seconds:g} s (other tenants): {', '.join(f'{b:.0%}' for b in self.busy)}",
            f"canaries before each run (best of {CANARY_REPEATS}, ms; slowest / fastest): "
            + "; ".join(
                f"{words} {', '.join(f'{c[name] * 1000:.0f}' for c in self.canary)} ({self.spread(name):.2f}x)"
                for name, words in CANARY_WORDS.items()
            ),
        ]
        worst = max(CANARY_WORDS, key=self.spread)
        if self.spread(worst) > CANARY_SPREAD_WARNING:
            out.append(
                f"**the machine's speed changed between runs** ({CANARY_WORDS[worst]}: {self.spread(worst):.2f}x): "
                "compare ratios within a run, not absolute figures across runs or days"
            )
        return out

    def as_json(self) -> dict:
        return {"load": self.load, "busy": self.busy, "canary_seconds": self.canary}
