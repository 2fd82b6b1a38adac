"""Benchmark: a whole-process rebuild of a log dir of many small segments, where the per-file cost of the
index writers (creating, reserving, staging, renaming two files per segment) shows, not the scan.

Run: ``.venv/bin/python benchmarks/bench_small_segments.py [--segments N] [--runs R] [--other-tree DIR]``.
It writes a log dir of ``--segments`` segments of 256 KiB (4 KiB batches) in 2 partitions under /dev/shm,
then times ``python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs 2`` as a whole process, ``--runs``
times (median). With ``--other-tree DIR`` (another checkout of the project, its extension built in place)
the same command from that tree runs alternately in the same runs, and the ratio is taken within each run.
Physical limit beside: ``cat`` of the same files to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from indexlib.format.layout import segment_file  # noqa: E402
from indexlib.testing.generate import write_uniform_segment  # noqa: E402

SEGMENT_BYTES = 256 * 1024
BATCH_BYTES = 4096


def make_log_dir(root: str, segments: int) -> str:
    logs = os.path.join(root, "logs")
    for p in range(2):
        part = os.path.join(logs, f"small-{p}")
        os.makedirs(part)
        base = 0
        for s in range(segments // 2):
            base += write_uniform_segment(
                segment_file(part, base, ".log"), base_offset=base, total_bytes=SEGMENT_BYTES,
                batch_bytes=BATCH_BYTES, seed=p * 10_000 + s,
            )  # fmt: skip
    return logs


def rebuild(tree: str, logs: str, out: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "indexlib", "rebuild", logs, "--output-dir", out, "--jobs", "2"],
        cwd=tree, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"rebuild failed in {tree}: {done.stderr[-2000:]}")
    return seconds


def cat_seconds(logs: str) -> float:
    files = [os.path.join(d, f) for d, _, names in os.walk(logs) for f in names]
    start = time.perf_counter()
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=400)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--other-tree", help="another checkout to compare with, alternately in each run")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-small-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        logs = make_log_dir(root, args.segments)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(logs) for f in names)
        ours, other, ratios, cats = [], [], [], []
        for run in range(args.runs):
            cats.append(cat_seconds(logs))
            a = rebuild(REPO, logs, os.path.join(root, "out-a"))
            ours.append(a)
            if args.other_tree:
                b = rebuild(os.path.abspath(args.other_tree), logs, os.path.join(root, "out-b"))
                other.append(b)
                ratios.append(a / b)
            print(f"run {run + 1}/{args.runs}: this tree {a:.3f} s" + (f", other {b:.3f} s" if args.other_tree else ""),
                  file=sys.stderr)  # fmt: skip
        med = statistics.median
        print(f"{args.segments} segments of {SEGMENT_BYTES // 1024} KiB ({size / 2**20:.0f} MiB, two index files "
              f"written per segment) in 2 partitions, {args.runs} runs, medians")  # fmt: skip
        print(f"this tree ({REPO}): {med(ours):.3f} s ({med(ours) / args.segments * 1e3:.2f} ms per segment)")
        if args.other_tree:
            print(f"other tree ({args.other_tree}): {med(other):.3f} s; this / other {med(ratios):.2f} "
                  f"(runs {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
        print(f"limit: cat of the same files {med(cats):.3f} s ({size / med(cats) / 1e9:.2f} GB/s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
