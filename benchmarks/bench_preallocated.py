"""Benchmark: how long does verify take on a broker that crashed (or still runs), whose active segments keep
their preallocated index files, against the same log dir with those files trimmed?

Every partition's active segment has a ``.index`` and ``.timeindex`` that Kafka sized to ``segment.index.bytes``
(10 MiB by default) when it created them, sparse past the entries written (``setLength``); they stay so after a
kill -9 and while the broker runs. The log dir is ``--partitions`` partitions of one ~0.3 MiB segment each
(4 KiB batches) on the project's disk (tempfile's default dir), their indexes rebuilt, then grown to the
preallocated size with ``truncate`` (sparse, as Kafka's) or cut back to their entries, alternately within each
run. Each figure is a whole ``python -m indexlib verify LOG_DIR --jobs 2`` process; medians over ``--runs``,
the ratio taken within each run. ``--other-tree DIR`` (another checkout, its extension built in place) runs the
same two cases with that tree's code in the same runs (the code before a change, say).

Run: ``.venv/bin/python benchmarks/bench_preallocated.py [--partitions N] [--runs R] [--other-tree DIR]``.
Physical limit beside: ``cat`` of every ``.log`` and trimmed index file (what verify must read at least).
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

SEGMENT_BYTES = 300 * 1024
BATCH_BYTES = 4096
PREALLOCATED = 10 * 1024 * 1024  # Kafka's default segment.index.bytes
ENTRY_SIZES = {".index": 8, ".timeindex": 12}


def make_log_dir(root: str, partitions: int) -> str:
    logs = os.path.join(root, "logs")
    for p in range(partitions):
        part = os.path.join(logs, f"crashed-{p}")
        os.makedirs(part)
        write_uniform_segment(segment_file(part, 0, ".log"), total_bytes=SEGMENT_BYTES, batch_bytes=BATCH_BYTES, seed=p)
    done = subprocess.run([sys.executable, "-m", "indexlib", "rebuild", logs], cwd=REPO, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"rebuild of the corpus failed: {done.stderr.decode()[-2000:]}")
    return logs


def index_files(logs: str) -> dict[str, int]:
    """Every index file with its trimmed size (its entries)."""
    files = {}
    for d, _, names in os.walk(logs):
        for name in names:
            suffix = os.path.splitext(name)[1]
            if suffix in ENTRY_SIZES:
                files[os.path.join(d, name)] = os.path.getsize(os.path.join(d, name))
    return files


def set_sizes(files: dict[str, int], preallocated: bool) -> None:
    for path, trimmed in files.items():
        es = ENTRY_SIZES[os.path.splitext(path)[1]]
        os.truncate(path, PREALLOCATED - PREALLOCATED % es if preallocated else trimmed)


def verify(tree: str, logs: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "indexlib", "verify", logs, "--jobs", "2"],
        cwd=tree, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:  # the preallocated tails of active segments are info: healthy either way
        raise SystemExit(
            f"verify failed in {tree} (exit {done.returncode}): {done.stdout[-1000:]}{done.stderr[-2000:]}"
        )
    return seconds


def cat_seconds(files: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--other-tree", help="another checkout to time the same cases with, in the same runs")
    args = parser.parse_args()
    trees = {"this tree": REPO} | ({"other tree": os.path.abspath(args.other_tree)} if args.other_tree else {})
    root = tempfile.mkdtemp(prefix="bench-prealloc-")
    try:
        logs = make_log_dir(root, args.partitions)
        files = index_files(logs)
        logs_files = [os.path.join(d, f) for d, _, names in os.walk(logs) for f in names if f.endswith(".log")]
        times: dict[tuple[str, bool], list[float]] = {(t, p): [] for t in trees for p in (False, True)}
        cats = []
        for run in range(args.runs):
            set_sizes(files, False)
            cats.append(cat_seconds(logs_files + list(files)))
            order = [False, True] if run % 2 == 0 else [True, False]
            for preallocated in order:
                set_sizes(files, preallocated)
                for name, tree in trees.items():
                    times[(name, preallocated)].append(verify(tree, logs))
            print(f"run {run + 1}/{args.runs}: " + ", ".join(
                f"{n} {'preallocated' if p else 'trimmed'} {v[-1]:.2f} s" for (n, p), v in times.items()
            ), file=sys.stderr)  # fmt: skip
        med = statistics.median
        print(f"{args.partitions} partitions of one {SEGMENT_BYTES // 1024} KiB active segment, indexes trimmed "
              f"or preallocated to {PREALLOCATED // 2**20} MiB (sparse); {args.runs} runs, medians")  # fmt: skip
        for name, tree in trees.items():
            trimmed, pre = times[(name, False)], times[(name, True)]
            ratios = [p / t for p, t in zip(pre, trimmed, strict=True)]
            print(f"{name} ({tree}): trimmed {med(trimmed):.2f} s, preallocated {med(pre):.2f} s; "
                  f"preallocated / trimmed {med(ratios):.2f} (runs {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
        print(f"limit: cat of every .log and trimmed index file {med(cats):.3f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
