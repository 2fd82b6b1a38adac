"""A long fuzz run of the index readers and of verify over damaged index files (issue 12): they must never
crash, hang, raise anything but a ``CorruptIndexError``/``ValueError`` naming the file (the readers), raise at
all (verify: damage is a finding), or change a byte of what they read.

Run: ``.venv/bin/python benchmarks/fuzz/fuzz_indexes.py [--seconds S] [--seed N] [--workers W]``; default 600 s,
seed 1, 2 workers. The suite runs a bounded version on every ``make test`` (``tests/indexlib/test_garbage_files.py``).

Each worker builds one small real partition (3 segments with transactions, correct index files), then per
case copies it, damages its ``.index``/``.timeindex``/``.txnindex`` files (random bytes; or the real file
with 1-6 bytes flipped, cut at a random length, or extended with zeros or garbage), and then: opens every
index file read-only through its class and runs every read operation (sanity check, every entry, floor and
ceiling lookups of random targets, the aborted transactions of random fetch ranges), and runs
``verify_partition`` over the whole partition. The case is written to ``<workdir>/case-<w>/`` first, so a
crash (a signal) or a hang (no progress for 30 s) leaves its reproducer. Prints one Markdown line.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the project

from indexlib import CorruptIndexError, OffsetIndex, TimeIndex, TransactionIndex  # noqa: E402
from indexlib.engine import rebuild_partition, verify_partition  # noqa: E402
from indexlib.testing.generate import generate_partition  # noqa: E402

sys.path.insert(0, HERE)
from supervisor import supervise  # noqa: E402

SUFFIXES = {".index": OffsetIndex, ".timeindex": TimeIndex, ".txnindex": TransactionIndex}


def damage(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(5)
    if kind == 0 or not data:
        return rng.randbytes(rng.randrange(0, 600))
    out = bytearray(data)
    if kind == 1:
        for _ in range(rng.randrange(1, 7)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif kind == 2:
        del out[rng.randrange(len(out) + 1) :]
    elif kind == 3:
        out += bytes(rng.randrange(1, 200))
    else:
        out += rng.randbytes(rng.randrange(1, 200))
    return bytes(out)


def read_everything(path: str, base: int, rng: random.Random) -> None:
    cls = SUFFIXES[os.path.splitext(path)[1]]
    try:
        with cls(path, base, writable=False) as index:
            index.sanity_check()
            if cls is TransactionIndex:
                index.all_aborted_txns()
                for _ in range(4):
                    start = base + rng.randrange(-50, 400)
                    index.collect_aborted_txns(start, start + rng.randrange(0, 300))
            else:
                index.to_numpy()
                for n in range(index.entries):
                    index.entry(n)
                for _ in range(6):
                    target = rng.choice([base + rng.randrange(-50, 2000), rng.randrange(-(2**63), 2**63)])
                    index.lookup(target)
                    index.lookup_ceiling(target)
    except (CorruptIndexError, ValueError) as exc:
        if path not in str(exc):
            raise AssertionError(f"{type(exc).__name__} does not name {path}: {exc}") from exc


def digests(directory: str) -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def worker(index: int, deadline: float, workdir: str, counter, failures, seed: int) -> None:
    rng = random.Random(seed * 1000 + index)
    pristine = os.path.join(workdir, f"pristine-{index}", "fuzz-0")
    generate_partition(pristine, segments=3, batches_per_segment=60, transactional_producers=2, seed=seed + index)
    rebuild_partition(pristine, index_interval_bytes=200)
    case = os.path.join(workdir, f"case-{index}", "fuzz-0")
    while time.time() < deadline:
        shutil.rmtree(os.path.dirname(case), ignore_errors=True)
        shutil.copytree(pristine, case)
        names = sorted(n for n in os.listdir(case) if os.path.splitext(n)[1] in SUFFIXES)
        for name in rng.sample(names, rng.randrange(1, len(names) + 1)):
            path = os.path.join(case, name)
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(damage(rng, data))
        before = digests(case)
        try:
            for name in names:
                read_everything(os.path.join(case, name), int(name[:20]), rng)
            verify_partition(case, index_interval_bytes=200)
            if digests(case) != before:
                raise AssertionError("a read-only pass changed a file")
        except Exception:
            with failures.get_lock():
                failures.value += 1
            kept = os.path.join(workdir, f"failure-{index}-{counter.value}")
            shutil.copytree(case, kept)
            with open(kept + ".txt", "w") as f:
                f.write(traceback.format_exc())
        with counter.get_lock():
            counter.value += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="fuzz-indexes-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    run = supervise(worker, args.seconds, args.workers, workdir, (args.seed,))
    print(
        f"| {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(run.started))} | seed {args.seed}, {args.workers} "
        f"workers | {run.elapsed:.0f} s | {run.cases:,} damaged partitions ({run.cases / run.elapsed:,.0f}/s) "
        f"| {run.failures} failures | {'crash/hang: ' + run.crash if run.crash else 'no crash, no hang'} |"
    )
    if run.crash or run.failures:
        print(f"fuzz_indexes: kept {workdir}", file=sys.stderr)
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
