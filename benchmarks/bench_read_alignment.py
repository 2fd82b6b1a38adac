"""How the address of a read buffer changes the page-cache copy of ``pread`` (why the compiled scan's reader keeps
each file byte at the same address offset modulo 64 as its source; issue 11).

Run: ``.venv/bin/python benchmarks/bench_read_alignment.py [--runs R] [--mib M]``; default 5 runs of 1024 MiB,
under a minute.

A file of ``--mib`` MiB of random bytes is written under ``/dev/shm`` when it exists (tmpfs: page-cache pages).
Per run, in an order that alternates between runs: the whole file is read with ``os.preadv`` in 1 MiB reads into
one reused buffer whose first byte sits ``offset`` bytes past a page boundary (the buffer is an anonymous
mapping, so page-aligned; the file positions are multiples of 1 MiB), for each offset of 0, 16, 32, 64 and
4000; and ``dd if=FILE of=/dev/null bs=1M`` as the limit. Prints each median in seconds and GB/s, and each
offset's time over offset 0's within the run (median). malloc returns large blocks 16 bytes past a page.
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

OFFSETS = (0, 16, 32, 64, 4000)
WINDOW = 1 << 20


def read_all(fd: int, size: int, view: memoryview) -> float:
    start = time.perf_counter()
    pos = 0
    while pos < size:
        got = os.preadv(fd, [view], pos)
        if got <= 0:
            raise OSError(f"short read at {pos}")
        pos += got
    return time.perf_counter() - start


def dd_seconds(path: str) -> float:
    proc = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True, check=True)
    match = re.search(r"copied, ([0-9.e+-]+) s", proc.stderr)
    if not match:
        raise RuntimeError(f"dd printed no time: {proc.stderr}")
    return float(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mib", type=int, default=1024)
    args = parser.parse_args(argv)
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd_tmp, path = tempfile.mkstemp(prefix="bench-read-alignment-", dir=parent)
    try:
        chunk = os.urandom(WINDOW)
        with os.fdopen(fd_tmp, "wb") as f:
            for _ in range(args.mib):
                f.write(chunk)
        size = os.path.getsize(path)
        buffer = mmap.mmap(-1, WINDOW + 2 * mmap.PAGESIZE)
        times: dict[str, list[float]] = {str(o): [] for o in OFFSETS}
        times["dd"] = []
        ratios: dict[int, list[float]] = {o: [] for o in OFFSETS}
        fd = os.open(path, os.O_RDONLY)
        try:
            for run in range(args.runs):
                order = list(OFFSETS) if run % 2 == 0 else list(reversed(OFFSETS))
                got = {o: read_all(fd, size, memoryview(buffer)[o : o + WINDOW]) for o in order}
                for o in OFFSETS:
                    times[str(o)].append(got[o])
                    ratios[o].append(got[o] / got[0])
                times["dd"].append(dd_seconds(path))
        finally:
            os.close(fd)
            buffer.close()
        print(f"file: {size / 2**20:.0f} MiB in {parent or tempfile.gettempdir()}; runs: {args.runs} (medians)")
        print()
        print("| read into | median | GB/s | time / offset 0 (runs) |")
        print("| --- | ---: | ---: | ---: |")
        for o in OFFSETS:
            m = statistics.median(times[str(o)])
            r = ratios[o]
            print(
                f"| 1 MiB `preadv`s, buffer {o} bytes past a page | {m:.3f} s | {size / m / 1e9:.2f} "
                f"| {statistics.median(r):.2f} ({', '.join(f'{x:.2f}' for x in r)}) |"
            )
        m = statistics.median(times["dd"])
        print(f"| `dd bs=1M` (limit) | {m:.3f} s | {size / m / 1e9:.2f} | - |")
        return 0
    finally:
        os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
