"""Benchmark: the same verify on a real Spark standalone cluster against local[2] (issue 13), whole
``spark-submit`` processes as the README runs them.

Run: ``.venv/bin/python benchmarks/bench_cluster.py [--runs R] [--scale S]``; quick check:
``--scale 0.1 --runs 1``. About 3 minutes with the defaults. Needs ``make package`` first (its executor
archive); the script builds it when it is missing.

Data (generated once under ``/dev/shm`` when it exists, deleted at the end): a log dir of 4 partitions x 2
segments of 256 MiB of 16 KiB batches (2 GiB, as ``bench_jobs.py``'s large corpus), each partition given its
correct index files first (``rebuild_partition``), so the verify is a healthy one (exit 0 checked).

The two ways, the order alternating between runs, each a whole process timed from outside:
* **local**: ``spark-submit --master local[2] jobs/spark_job.py verify --log-dir DIR --audit-table none``;
* **cluster**: a master and 2 workers of 1 core on 127.0.0.1 (``tools/standalone_cluster.py``, started once
  for all runs, not timed), ``spark-submit --master spark://... --archives
  dist/kafka-index-executor-env.tar.gz#env`` (the README's command; every application ships and unpacks
  the archive on each executor, which is part of what is timed).

Also reported: the size of the archive, and what one application leaves in a worker's work dir (the
unpacked environment per executor). Medians over ``--runs``; the ratio is taken within a run.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(HERE))

from bench_rebuild import machine_line  # noqa: E402
from standalone_cluster import ARCHIVE, spark_submit, standalone_cluster  # noqa: E402

from indexlib.engine.partition import rebuild_partition  # noqa: E402
from indexlib.testing.generate import write_uniform_segment  # noqa: E402


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the segment size (quick checks)")
    args = parser.parse_args(argv)
    if not ARCHIVE.exists():
        subprocess.run(["make", "-s", "package"], cwd=REPO, check=True)
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=parent))
    try:
        logs = root / "logs"
        segment = max(1 << 20, int((256 << 20) * args.scale))
        total = batches = 0
        for p in range(4):
            part = logs / f"bench-{p}"
            part.mkdir(parents=True)
            for s in range(2):
                base = s * 10_000_000
                batches += write_uniform_segment(
                    str(part / f"{base:020d}.log"), total_bytes=segment, batch_bytes=16384, base_offset=base
                )
            rebuild_partition(part)
            total += dir_bytes(part)
        data = sum(p.stat().st_size for p in logs.rglob("*.log"))
        cluster_root = root / "cluster"
        cluster_root.mkdir()
        walls: dict[str, list[float]] = {"local": [], "cluster": []}
        ratios = []
        with standalone_cluster(cluster_root, workers=2, cores=1) as cluster:
            for run in range(args.runs):
                order = ("local", "cluster") if run % 2 == 0 else ("cluster", "local")
                got = {}
                for way in order:
                    master = "local[2]" if way == "local" else cluster.url
                    start = time.perf_counter()
                    done = spark_submit(master, "verify", "--log-dir", logs, "--audit-table", "none",
                                        conf={"spark.cores.max": "2"})  # fmt: skip
                    got[way] = time.perf_counter() - start
                    if done.returncode != 0:
                        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
                        return 1
                    walls[way].append(got[way])
                ratios.append(got["cluster"] / got["local"])
                print(f"[run {run + 1}] local {got['local']:.2f} s, cluster {got['cluster']:.2f} s", file=sys.stderr)
            apps = [d for w in cluster.workers for d in w.iterdir() if d.name.startswith("app-")]
            per_app = max(dir_bytes(d) for d in apps) if apps else 0
        print(f"machine: {machine_line()}")
        print(
            f"data: {data / 2**30:.2f} GiB of .log in 8 segments of 16 KiB batches ({batches:,} batches); runs {args.runs}"
        )
        print()
        print("| way | median wall | GB/s | walls of the runs |")
        print("| --- | ---: | ---: | --- |")
        for way, values in walls.items():
            w = statistics.median(values)
            print(f"| {way} | {w:.2f} s | {data / w / 1e9:.2f} | {', '.join(f'{x:.2f}' for x in values)} |")
        print()
        print(
            f"cluster / local wall (per run, median): **{statistics.median(ratios):.2f}** ({', '.join(f'{r:.2f}' for r in ratios)})"
        )
        print(
            f"executor archive: {ARCHIVE.stat().st_size / 2**20:.1f} MiB; one application's largest work dir on a worker: {per_app / 2**20:.0f} MiB"
        )
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
