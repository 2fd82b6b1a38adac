"""A long fuzz run of the compiled streaming scan (``indexlib.format._kernel.scan_segment``, issue 11): on random
and mutated logs it must never crash, hang or read past ``end``, and must give exactly the reference
summary (:func:`indexlib.recovery.log_scan.summarize` over :func:`indexlib.format.batch_walk.scan_buffer`'s columns).

Run: ``.venv/bin/python benchmarks/fuzz/fuzz_kernel.py [--seconds S] [--seed N] [--workers W]``; default 600 s,
seed 1, 2 workers. The suite runs a bounded version of the same on every ``make test``
(``tests/indexlib/test_summary.py``, ``tests/indexlib/test_kernel_stream.py``).

Each worker is a separate process that writes the case it is about to try to ``<workdir>/case-<w>.log``
first, so a crash (a signal) or a hang (no progress for 30 s) leaves its reproducer behind; the parent
reports it and exits 1. Per case: a log of 1-12 pieces (plain, gzip, transactional, COMMIT/ABORT markers,
malformed and unknown-type markers, a compressed marker, v0/v1 legacy entries; offsets from a random base,
sometimes near 2^63), then 0-4 random byte flips, sometimes every v2 batch's CRC resealed (so the flips
reach the record parsing), sometimes cut, sometimes random bytes appended; or, one case in four, random
bytes. The file on disk always has 1-64 more bytes past ``end`` (never to be read: the reference sees
only ``data[:end]``), random probes (positions and offsets around the data), a random
``index.interval.bytes``, a random read window (64 B .. 1 MiB) and the read-ahead thread on or off (it starts
for a file longer than two windows). Prints one Markdown line of figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the project

import crc32c  # noqa: E402
import numpy as np  # noqa: E402

from indexlib.format import batch_walk, control_records, scan_kernel  # noqa: E402
from indexlib.recovery.log_scan import Probes, from_kernel, summarize  # noqa: E402
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch, encode_legacy  # noqa: E402

sys.path.insert(0, HERE)
from supervisor import supervise  # noqa: E402

#: what the cases reached (shares of the cases, printed): so a run shows it exercised every outcome
KINDS = ("some batch", "a problem", "a fatal", "events", "plan ended early")


def piece(rng: random.Random, offset: int) -> bytes:
    kind = rng.randrange(10)
    ts = 1_000 + rng.randrange(-5, 50)
    value = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))
    pid = rng.choice([-1, 7, 8, 2**40])
    if kind == 0:
        return encode_batch_v2(offset, [(None, value, ts)] * rng.randrange(1, 4))
    if kind == 1:
        return encode_batch_v2(offset, [(None, value, ts)] * 3, compression=1)
    if kind == 2:
        return encode_batch_v2(offset, [(None, value, ts)], producer_id=abs(pid), producer_epoch=0, transactional=True)
    if kind in (3, 4):
        return encode_control_batch(offset, abs(pid), 0, abort=kind == 4, timestamp=ts)
    if kind == 5:  # a marker whose value is too short, or of an unknown type
        key = struct.pack(">hh", 0, rng.choice([0, 1, 5]))
        return encode_batch_v2(offset, [(key, value[:5], ts)], producer_id=7, producer_epoch=0, control=True)
    if kind == 6:
        return encode_batch_v2(
            offset, [(b"\0\0\0\0", b"\0" * 6, ts)], producer_id=7, producer_epoch=0, control=True, compression=1
        )
    if kind == 7:
        return encode_legacy(offset, value, magic=0)
    if kind == 8:
        return encode_legacy(offset, value, magic=1, timestamp=ts)
    return encode_batch_v2(offset, [(None, value, ts)], producer_id=abs(pid), producer_epoch=0)


def reseal(data: bytearray) -> None:
    pos = 0
    while pos + 61 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if size < 61 or pos + size > len(data):
            return
        if data[pos + 16] == 2:
            struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21 : pos + size])))
        pos += size


def wrap64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


def make_case(rng: random.Random) -> tuple[bytes, int, int, int, Probes, int, bool]:
    """(file bytes, end, base offset, interval, probes, window, prefetch)."""
    if rng.random() < 0.25:
        data = bytearray(rng.randbytes(rng.randrange(0, 800)))
        base = rng.randrange(-3, 5)
    else:
        base = rng.choice([0, rng.randrange(0, 10_000), 2**63 - 40, -5])
        data, offset = bytearray(), base
        for _ in range(rng.randrange(1, 13)):
            data += piece(rng, offset)
            offset = (offset + rng.randrange(-2, 5)) if rng.random() < 0.1 else offset + 3
            if offset >= 2**63 - 1:
                offset = base
        for _ in range(rng.randrange(0, 5)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.5:
            reseal(data)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data) + 1) :]
        if rng.random() < 0.3:
            data += rng.randbytes(rng.randrange(1, 40))
    end = len(data)
    data += rng.randbytes(rng.randrange(1, 65))  # past ``end``: never to be read
    n = end + 10
    probes = Probes.of(
        [rng.randrange(-3, n) for _ in range(rng.randrange(0, 10))],
        [wrap64(base + rng.randrange(-3, 60)) for _ in range(rng.randrange(0, 10))],
    )
    interval = rng.choice([0, 1, 60, 200, 4096, 2**31 - 1])
    window = rng.choice([64, 65, 100, 1000, 4096, 1 << 20])
    return bytes(data), end, base, interval, probes, window, rng.random() < 0.5


def same(a, b) -> bool:
    plain = ("batch_count", "valid_bytes", "stop", "problem", "fatal", "plan_end", "last_offset", "raw_max")
    if any(getattr(a, k) != getattr(b, k) for k in plain):
        return False
    if a.entries.tobytes() != b.entries.tobytes() or a.events.tobytes() != b.events.tobytes():
        return False
    if a.epoch_starts.tobytes() != b.epoch_starts.tobytes() or a.producers.tobytes() != b.producers.tobytes():
        return False
    for k in ("last_row", "stop_row"):
        x, y = getattr(a, k), getattr(b, k)
        if (x is None) != (y is None) or (x is not None and x.tolist() != y.tolist()):
            return False
    return all(
        np.array_equal(getattr(a.answers, k), getattr(b.answers, k))
        for k in ("starts", "bases", "previous_lasts", "running_max")
    )


def compiled_summary(path: str, end: int, base: int, interval: int, probes: Probes, window: int, prefetch: bool):
    """``summarize_log``'s compiled half with an explicit ``end``, read window and read-ahead choice."""
    fd = os.open(path, os.O_RDONLY)
    try:
        raw = scan_kernel.compiled_kernel().scan_segment(
            fd, end, base, interval, probes.positions.tobytes(), probes.offsets.tobytes(),
            control_records.marker_fields_or_error, window, prefetch,
        )  # fmt: skip
    finally:
        os.close(fd)
    return from_kernel(raw, path, end, base, interval, probes)


def worker(index: int, deadline: float, workdir: str, counter, mismatches, seed: int, kinds) -> None:
    rng = random.Random(seed * 1000 + index)
    path = os.path.join(workdir, f"case-{index}.log")
    meta = os.path.join(workdir, f"case-{index}.txt")
    while time.time() < deadline:
        data, end, base, interval, probes, window, prefetch = make_case(rng)
        with open(path, "wb") as f:
            f.write(data)
        with open(meta, "w") as f:
            f.write(f"end={end} base={base} interval={interval} window={window} prefetch={prefetch} probes={probes}\n")
        compiled = compiled_summary(path, end, base, interval, probes, window, prefetch)
        reference = summarize(batch_walk.scan_buffer(data, end, path, compiled=False), base, interval, probes)
        reference.file_size = end
        if not same(compiled, reference):
            with mismatches.get_lock():
                mismatches.value += 1
            shutil.copy(path, os.path.join(workdir, f"mismatch-{index}-{counter.value}.log"))
            shutil.copy(meta, os.path.join(workdir, f"mismatch-{index}-{counter.value}.txt"))
        with counter.get_lock():
            counter.value += 1
        seen = (
            reference.batch_count > 0,
            reference.problem is not None,
            reference.fatal is not None,
            len(reference.events) > 0,
            reference.plan_end < reference.batch_count,
        )
        with kinds.get_lock():
            for k, hit in enumerate(seen):
                kinds[k] += hit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    kernel = scan_kernel.compiled_kernel()
    if kernel is None or not hasattr(kernel, "scan_segment"):
        print("fuzz_kernel: the compiled kernel is not built", file=sys.stderr)
        return 1
    workdir = tempfile.mkdtemp(prefix="fuzz-kernel-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    kinds = multiprocessing.get_context("fork").Array("q", len(KINDS))
    run = supervise(worker, args.seconds, args.workers, workdir, (args.seed, kinds))
    print(
        f"| {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(run.started))} | seed {args.seed}, {args.workers} "
        f"workers | {run.elapsed:.0f} s | {run.cases:,} cases ({run.cases / run.elapsed:,.0f}/s) | {run.failures} "
        f"mismatches | {'crash/hang: ' + run.crash if run.crash else 'no crash, no hang'} | "
        + ", ".join(f"{name} {kinds[k] / max(1, run.cases):.0%}" for k, name in enumerate(KINDS))
        + " |"
    )
    if run.crash or run.failures:
        print(f"fuzz_kernel: kept {workdir}", file=sys.stderr)
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
