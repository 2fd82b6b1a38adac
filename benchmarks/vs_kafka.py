"""Against Kafka's own recovery? ``python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs 2`` over corpora a
(4 partitions x 2 segments of 256 MiB, 16 KiB batches) and b (2 x 1 x 136,000,000 bytes, 170-byte batches; see
``common.CORPORA``), whole processes timed from outside, beside Apache Kafka 4.1.0's recovery of the same kind of
data on these machines (issues 10, 11).

Kafka's side is not timed by this script: it is the measurement recorded in the project's design notes
(``../shared/docs/design.md``: a broker started with its indexes deleted, 2 recovery threads, its ``Loaded N
logs in X ms``): about 2.3 GB/s on 16 KiB batches (1.6-2.3 GB/s) and 0.87 M batches/s on 170-byte batches (0.9 M
batches/s, 0.11-0.15 GB/s), on a quiet machine. ``--kafka-gbps`` and ``--kafka-mbatches`` replace those figures
with your own broker's (its ``server.log`` after a start without indexes).

Limits beside: one ``cat`` of the ``.log`` files, the fixed cost of a process (``python -m indexlib --help``).

Run: ``.venv/bin/python benchmarks/vs_kafka.py [--runs R] [--scale S]``; ``--quick``: small log dirs, one run.
About a minute with the defaults.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    GB,
    BenchError,
    MachineWatch,
    cat_seconds,
    compile_bytecode,
    header,
    make_corpus,
    med,
    run_indexlib,
    runs_list,
    scratch,
    timed,
)

KAFKA_GBPS = 2.3  # design.md: Kafka 4.1.0's recovery, 16 KiB batches (corpus a)
KAFKA_MBATCHES = 0.87  # the same, 170-byte batches (corpus b), M batches/s
AIM = {"a": 6.0, "b": 15.0}  # issue 11's aims, times Kafka's recovery


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the segment sizes")
    parser.add_argument("--kafka-gbps", type=float, default=KAFKA_GBPS, help="Kafka's recovery, 16 KiB batches")
    parser.add_argument("--kafka-mbatches", type=float, default=KAFKA_MBATCHES, help="the same, 170-byte batches")
    parser.add_argument("--quick", action="store_true", help="small log dirs, one run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.scale = 1, 0.01
    compile_bytecode()
    try:
        with scratch("bench-vs-kafka-") as root:
            corpora = [make_corpus(root, key, args.scale, 100 * i) for i, key in enumerate(("a", "b"))]
            watch = MachineWatch()
            runs = []
            for run in range(args.runs):
                watch.before_run()
                r = {"help": timed(lambda: run_indexlib(["--help"]))}
                for c in corpora:
                    print(f"[run {run + 1}/{args.runs}] {c['key']}", file=sys.stderr, flush=True)
                    r[c["key"] + " cat"] = cat_seconds(c["files"])
                    out = tempfile.mkdtemp(dir=root)
                    cmd = ["rebuild", c["log_dir"], "--output-dir", out, "--jobs", "2"]
                    r[c["key"]] = timed(lambda: run_indexlib(cmd))
                    shutil.rmtree(out)
                runs.append(r)
    except BenchError as exc:
        print(f"vs_kafka: FAILED: {exc}", file=sys.stderr)
        return 1
    header(f"--scale {args.scale}", len(runs), watch)
    print()
    print(
        "`python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs 2`, whole process, beside Kafka 4.1.0's recovery "
        f"(design notes: {args.kafka_gbps} GB/s on 16 KiB batches, {args.kafka_mbatches} M batches/s on 170-byte "
        "batches, 2 recovery threads):"
    )
    print()
    print("| corpus | log-dir command (runs) | vs Kafka's recovery | aim | `cat` of the .log files | fixed cost |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    fixed = med([r["help"] for r in runs])
    for c in corpora:
        key, size, n = c["key"], c["bytes"], c["batches"]
        w = med([r[key] for r in runs])
        ours = f"{w:.3f} s: **{size / w / GB:.2f} GB/s**, {n / w / 1e6:.2f} M batches/s"
        vs = size / w / GB / args.kafka_gbps if key == "a" else n / w / 1e6 / args.kafka_mbatches
        cat = med([r[key + " cat"] for r in runs])
        print(
            f"| {key}: {c['label']} | {ours} ({runs_list([r[key] for r in runs], '{:.3f}')}) | **{vs:.1f}x** "
            f"| {AIM[key]:.0f}x | {size / cat / GB:.2f} GB/s | {fixed:.3f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
