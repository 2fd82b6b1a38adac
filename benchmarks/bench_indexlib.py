"""Benchmark of the index library: bulk write, bulk read and single lookups on 1 M entries per type.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_indexlib.py [--entries N] [--runs R]``).
Files live in a temporary directory (page cache); each figure is the median of ``--runs`` runs.
Prints a Markdown table for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

import numpy as np

from indexlib import OffsetIndex, TimeIndex


def median_rate(fn, count: int, runs: int) -> float:
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def memory_bandwidth(nbytes: int, runs: int) -> float:
    """Physical reference: a plain numpy copy of the same number of bytes (bytes/s)."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    return median_rate(lambda: np.copyto(dst, src), nbytes, runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    n, runs = args.entries, args.runs
    base = 0
    offsets = base + 2 * np.arange(n, dtype=np.int64)
    positions = 4096 * np.arange(n, dtype=np.int64) % (2**31 - 1)
    positions = np.sort(positions)
    timestamps = 1_700_000_000_000 + 3 * np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(42)
    results: list[tuple[str, float, str]] = []

    with tempfile.TemporaryDirectory() as d:
        for name, cls, keys, values, append in (
            ("offset", OffsetIndex, offsets, positions, "append_many"),
            ("time", TimeIndex, timestamps, offsets, "append_many"),
        ):
            path = os.path.join(d, f"00000000000000000000.{name}")
            size = cls.ENTRY_SIZE * (n + 1)

            def write():
                if os.path.exists(path):
                    os.unlink(path)
                with cls(path, base, max_index_size=size) as index:
                    getattr(index, append)(keys, values)

            results.append(
                (f"{name} index: bulk write (append_many + close)", median_rate(write, n, runs), "entries/s")
            )

            def read():
                with cls(path, base, writable=False) as index:
                    view = index.to_numpy()
                    a = view[view.dtype.names[0]].astype(np.int64)
                    b = view[view.dtype.names[1]].astype(np.int64)
                    assert len(a) == len(b) == n

            results.append(
                (f"{name} index: bulk read (open + to_numpy + native arrays)", median_rate(read, n, runs), "entries/s")
            )

            with cls(path, base, writable=False) as index:
                targets = rng.integers(int(keys[0]), int(keys[-1]) + 1, args.lookups).tolist()
                lookup = index.lookup

                def random_lookups():
                    for t in targets:
                        lookup(t)

                results.append(
                    (
                        f"{name} index: random floor lookups (mostly cold section)",
                        median_rate(random_lookups, len(targets), runs),
                        "lookups/s",
                    )
                )
                warm = rng.integers(int(keys[n - 1000]), int(keys[-1]) + 1, args.lookups).tolist()

                def warm_lookups():
                    for t in warm:
                        lookup(t)

                results.append(
                    (
                        f"{name} index: floor lookups in the warm section",
                        median_rate(warm_lookups, len(warm), runs),
                        "lookups/s",
                    )
                )

    bandwidth = memory_bandwidth(n * 12, runs)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(f"entries per index: {n}, lookups: {args.lookups}, runs: {runs} (median)")
    print()
    print("| operation | median | unit |")
    print("| --- | ---: | --- |")
    for label, rate, unit in results:
        print(f"| {label} | {rate / 1e6:.2f} M | {unit} |")
    print(f"| physical reference: numpy memcpy of {n * 12 / 1e6:.0f} MB | {bandwidth / 1e9:.2f} G | bytes/s |")


if __name__ == "__main__":
    main()
