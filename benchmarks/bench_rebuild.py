"""Benchmark of a whole-segment rebuild and verify, with the machine's physical limits beside each figure.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_rebuild.py [--runs R] [--cases 16k,4k,150]``).

For each case one partition directory ``bench-0`` with one segment ``00000000000000000000.log`` is
generated (``indexlib.testing.generate.write_uniform_segment``) in a temporary directory under ``/dev/shm``
when it exists (else the default temp dir), so the file is in the page cache. Cases: 1 GiB of ~16 KiB
batches, 1 GiB of ~4 KiB batches, 256 MiB of ~150-byte batches. One case at a time; its files are
deleted before the next one is generated, and everything is deleted at the end.

Per run, in one process (this one), in this order:

* physical limits: ``cat file > /dev/null``; a bare CRC-32C pass over the file, mapped as the scan
  maps it, in 16 KiB chunks; the same pass in chunks of the batch size, one Python call per chunk (what
  any per-batch Python loop costs at least);
* scan only: ``indexlib.format.records.scan_log``; plan only: ``indexlib.recovery.entry_plan.plan_segment`` on that scan;
* rebuild: ``indexlib.engine.partition.rebuild_partition(partition_dir, output_dir=<another temp dir>)``
  (scan + plan + publish of ``.index``/``.timeindex`` with fsync; the output is deleted after each run);
* verify: ``indexlib.engine.partition.verify_partition(partition_dir, 4096, 10485760)`` of the partition holding
  correct index files (copied in once from a warm-up rebuild); ``.healthy`` must be True. The
  verify/rebuild ratio is taken per run, then the median of the ratios is reported.

Memory: each run also starts a fresh child process that imports indexlib, reads its baseline from
``/proc/self/status``, resets the peak-RSS counter (``clear_refs`` 5), runs the same rebuild while a
thread samples ``RssAnon``/``VmRSS`` every ~0.2 ms, then reports the sampled peaks and ``VmHWM`` (the
exact peak of total RSS, which includes the mapped file's shared pages) above the baseline. A second
child measures the peak of traced allocations with ``tracemalloc`` (numpy reports its buffers to it),
which no sampling gap can miss.

Every figure is the median over ``--runs`` runs. GB = 1e9 bytes, MiB = 2**20 bytes. Prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import crc32c
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from indexlib.engine.partition import rebuild_partition  # noqa: E402
from indexlib.format.records import open_log, scan_log  # noqa: E402
from indexlib.recovery.entry_plan import plan_segment  # noqa: E402
from indexlib.recovery.log_scan import summarize  # noqa: E402
from indexlib.testing.generate import write_uniform_segment  # noqa: E402

INDEX_INTERVAL_BYTES = 4096
SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
LOG_NAME = "00000000000000000000.log"


@dataclass
class Case:
    key: str
    label: str
    total_bytes: int
    batch_bytes: int
    per_batch: bool  # report batches/s (else GB/s)
    target: float  # GB/s or M batches/s
    memory_target_mib: float | None
    times: dict[str, list[float]] = field(default_factory=dict)
    memory: list[dict] = field(default_factory=list)
    traced: list[int] = field(default_factory=list)
    file_size: int = 0
    batches: int = 0


CASES = [
    Case("16k", "1 GiB of ~16 KiB batches", 1 << 30, 16384, False, 2.0, 200),
    Case("4k", "1 GiB of ~4 KiB batches", 1 << 30, 4096, False, 1.5, 200),
    Case("150", "256 MiB of ~150-byte batches", 256 << 20, 150, True, 1.5, None),
]
VERIFY_TARGET = 1.3

# The child that measures memory. argv: partition_dir, output_dir, mode ("rss" or "tracemalloc").
CHILD = r"""
import json, os, sys, threading, time
mode = sys.argv[3]
if mode == "tracemalloc":
    import tracemalloc
import numpy, crc32c
from indexlib.engine.partition import rebuild_partition

FIELDS = ("RssAnon", "RssFile", "RssShmem", "VmRSS", "VmHWM")

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in FIELDS:
                out[key] = int(value.split()[0]) * 1024
    return out

if mode == "tracemalloc":
    tracemalloc.start()
    rebuild_partition(sys.argv[1], output_dir=sys.argv[2])
    current, peak = tracemalloc.get_traced_memory()
    print(json.dumps({"traced_peak": peak}))
    sys.exit(0)

sys.setswitchinterval(0.0002)  # let the sampler run often while the main thread holds the GIL
base = status()
peak = {"RssAnon": base["RssAnon"], "VmRSS": base["VmRSS"]}
done = threading.Event()

def sample():
    while not done.is_set():
        s = status()
        if s["RssAnon"] > peak["RssAnon"]:
            peak["RssAnon"] = s["RssAnon"]
        if s["VmRSS"] > peak["VmRSS"]:
            peak["VmRSS"] = s["VmRSS"]
        time.sleep(0.0002)

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM to the current RSS
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
rebuild_partition(sys.argv[1], output_dir=sys.argv[2])
done.set()
sampler.join()
end = status()
print(json.dumps({"base": base, "peak": peak, "end": end}))
"""


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cat_to_devnull(path: str) -> None:
    with open(os.devnull, "wb") as null:
        subprocess.run(["cat", path], stdout=null, check=True)


def crc_pass(path: str, chunk: int) -> None:
    """CRC-32C of the file mapped as the scan maps it (``open_log``: MAP_POPULATE, MADV_SEQUENTIAL),
    one call per ``chunk`` bytes (each chunk a memoryview slice)."""
    _, mm = open_log(path)
    view = memoryview(mm)
    try:
        crc = crc32c.crc32c
        for pos in range(0, len(mm), chunk):
            crc(view[pos : pos + chunk])
    finally:
        view.release()
        mm.close()


def run_child(partition_dir: str, out_root: str, mode: str) -> dict:
    out = tempfile.mkdtemp(prefix="out-", dir=out_root)
    try:
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, partition_dir, out, mode],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_case(case: Case, root: str, runs: int, verify_partition) -> None:
    case_dir = tempfile.mkdtemp(prefix=f"case-{case.key}-", dir=root)
    try:
        partition_dir = os.path.join(case_dir, "bench-0")
        os.makedirs(partition_dir)
        log = os.path.join(partition_dir, LOG_NAME)
        print(f"[{case.key}] generating {case.label} ...", file=sys.stderr, flush=True)
        case.batches = write_uniform_segment(log, total_bytes=case.total_bytes, batch_bytes=case.batch_bytes)
        case.file_size = os.path.getsize(log)
        batch_size = case.file_size // case.batches
        out_root = tempfile.mkdtemp(prefix="outputs-", dir=root)

        # Warm-up rebuild; its index files become the "already correct" ones verify checks.
        warm = os.path.join(out_root, "warm")
        result = rebuild_partition(partition_dir, output_dir=warm)
        assert result.segments[0].summary.batch_count == case.batches, "the scan did not accept every batch"
        for written in result.segments[0].written:
            shutil.copyfile(written, os.path.join(partition_dir, os.path.basename(written)))
        shutil.rmtree(warm)
        if verify_partition is not None:
            report = verify_partition(
                partition_dir, index_interval_bytes=INDEX_INTERVAL_BYTES, segment_index_bytes=SEGMENT_INDEX_BYTES
            )
            assert report.healthy, "verify found problems in a freshly rebuilt partition"

        t = case.times
        for run in range(runs):
            print(f"[{case.key}] run {run + 1}/{runs}", file=sys.stderr, flush=True)
            t.setdefault("cat", []).append(timed(lambda: cat_to_devnull(log)))
            t.setdefault("crc16k", []).append(timed(lambda: crc_pass(log, 16384)))
            t.setdefault("crc_batch", []).append(timed(lambda: crc_pass(log, batch_size)))
            holder = {}
            t.setdefault("scan", []).append(timed(lambda: holder.setdefault("scan", scan_log(log))))
            t.setdefault("plan", []).append(
                timed(lambda: plan_segment(summarize(holder["scan"], 0, INDEX_INTERVAL_BYTES), SEGMENT_INDEX_BYTES))
            )
            holder.clear()  # frees the scan before the rebuild is timed
            out = tempfile.mkdtemp(prefix="out-", dir=out_root)
            rebuild = timed(
                lambda: rebuild_partition(partition_dir, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES, output_dir=out)
            )
            t.setdefault("rebuild", []).append(rebuild)
            shutil.rmtree(out)
            if verify_partition is not None:
                box = {}
                verify = timed(
                    lambda: box.setdefault(
                        "r",
                        verify_partition(
                            partition_dir,
                            index_interval_bytes=INDEX_INTERVAL_BYTES,
                            segment_index_bytes=SEGMENT_INDEX_BYTES,
                        ),
                    )
                )
                assert box["r"].healthy
                t.setdefault("verify", []).append(verify)
                t.setdefault("ratio", []).append(verify / rebuild)
            case.memory.append(run_child(partition_dir, out_root, "rss"))
            case.traced.append(run_child(partition_dir, out_root, "tracemalloc")["traced_peak"])
        shutil.rmtree(out_root)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


def med(values: list[float]) -> float:
    return statistics.median(values)


def compile_bytecode(tree: str = REPO) -> None:
    """Write the project's bytecode (``__pycache__``) before anything is timed, as a user's first run does: in
    an environment with ``PYTHONDONTWRITEBYTECODE`` set, every timed process would otherwise compile every
    module of the project again (about 50 ms of each process's start on the machines measured)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    dirs = [os.path.join(tree, name) for name in ("indexlib", "jobs")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], env=env, check=True, stdout=subprocess.DEVNULL)


def print_other_tree_table(other_tree: str, what: str, rows: list[tuple[str, str, str, list[float]]]) -> None:
    """The same-run comparison a benchmark's ``--other-tree DIR`` adds: ``what`` says what was timed; one row a
    case: its name, this tree's figures, the other tree's, and each run's ratio other wall / this wall."""
    print()
    print(
        f"Against another checkout in the same runs (`--other-tree {other_tree}`: {what}, order alternating, "
        "outputs identical); ratio = other wall / this wall (speed-up):"
    )
    print()
    print("| case | this tree | other tree | speed-up (runs) |")
    print("| --- | ---: | ---: | ---: |")
    for case, this, other, ratios in rows:
        print(f"| {case} | {this} | {other} | **{med(ratios):.2f}x** ({', '.join(f'{r:.2f}' for r in ratios)}) |")


def machine_line() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.machine()} {model}, {os.cpu_count()} cores, {mem:.0f} GiB; Python {platform.python_version()}, "
        f"numpy {np.__version__}, crc32c {'hardware' if crc32c.hardware_based else 'SOFTWARE'}"
    )


def report(cases: list[Case], runs: int, root: str, have_verify: bool) -> None:
    print(f"machine: {machine_line()}")
    print(
        f"files in: {root} ; runs: {runs} (medians) ; index.interval.bytes={INDEX_INTERVAL_BYTES}, "
        f"segment.index.bytes={SEGMENT_INDEX_BYTES}"
    )
    print()
    print("Throughput (rebuild = scan + plan + publish with fsync; limits measured in the same run):")
    print()
    print(
        "| case | rebuild | target | met | scan only | plan only | `cat > /dev/null` | CRC-32C 16 KiB chunks "
        "| CRC-32C per batch-size chunk | rebuild / cat | rebuild / CRC per batch |"
    )
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in cases:
        t = {k: med(v) for k, v in c.times.items()}
        size, n = c.file_size, c.batches

        def fmt(seconds: float) -> str:
            if c.per_batch:
                return f"{n / seconds / 1e6:.2f} M batches/s ({size / seconds / 1e9:.2f} GB/s)"
            return f"{size / seconds / 1e9:.2f} GB/s"

        rate = n / t["rebuild"] / 1e6 if c.per_batch else size / t["rebuild"] / 1e9
        met = "yes" if rate >= c.target else "**no**"
        unit = "M batches/s" if c.per_batch else "GB/s"
        print(
            f"| {c.label} ({n} batches of {size // n} B, {size / 2**20:.0f} MiB) | {fmt(t['rebuild'])} ({t['rebuild']:.3f} s) "
            f"| >= {c.target} {unit} | {met} | {fmt(t['scan'])} ({t['scan']:.3f} s) | {t['plan']:.3f} s "
            f"| {fmt(t['cat'])} | {fmt(t['crc16k'])} | {fmt(t['crc_batch'])} "
            f"| {t['cat'] / t['rebuild']:.2f} | {t['crc_batch'] / t['rebuild']:.2f} |"
        )
    print()
    if have_verify:
        print("Verify of an already correct partition (ratio taken per run, then the median):")
        print()
        print("| case | verify | rebuild | verify / rebuild | target | met | verify throughput | `cat > /dev/null` |")
        print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
        for c in cases:
            t = {k: med(v) for k, v in c.times.items()}
            ratio = t["ratio"]
            print(
                f"| {c.label} | {t['verify']:.3f} s | {t['rebuild']:.3f} s | {ratio:.2f} "
                f"(runs: {', '.join(f'{r:.2f}' for r in c.times['ratio'])}) | <= {VERIFY_TARGET} "
                f"| {'yes' if ratio <= VERIFY_TARGET else '**no**'} "
                f"| {c.file_size / t['verify'] / 1e9:.2f} GB/s | {c.file_size / t['cat'] / 1e9:.2f} GB/s |"
            )
        print()
    print(
        "Memory of one rebuild in a fresh child process, above its baseline after `import indexlib` "
        "(median over runs; max in brackets):"
    )
    print()
    print(
        "| case | peak RssAnon (sampled) | target | met | peak VmRSS (sampled) | VmHWM (exact peak RSS) "
        "| tracemalloc peak | baseline RssAnon / VmRSS |"
    )
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    mib = 2**20
    for c in cases:
        anon = [m["peak"]["RssAnon"] - m["base"]["RssAnon"] for m in c.memory]
        rss = [m["peak"]["VmRSS"] - m["base"]["VmRSS"] for m in c.memory]
        hwm = [m["end"]["VmHWM"] - m["base"]["VmRSS"] for m in c.memory]
        a = med(anon) / mib
        target = f"< {c.memory_target_mib} MiB" if c.memory_target_mib else "-"
        met = ("yes" if a < c.memory_target_mib else "**no**") if c.memory_target_mib else "-"
        base = c.memory[0]["base"]
        print(
            f"| {c.label} | {a:.1f} MiB [{max(anon) / mib:.1f}] | {target} | {met} "
            f"| {med(rss) / mib:.1f} MiB [{max(rss) / mib:.1f}] | {med(hwm) / mib:.1f} MiB [{max(hwm) / mib:.1f}] "
            f"| {med(c.traced) / mib:.1f} MiB [{max(c.traced) / mib:.1f}] "
            f"| {base['RssAnon'] / mib:.1f} / {base['VmRSS'] / mib:.1f} MiB |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default="16k,4k,150", help="comma-separated subset of 16k, 4k, 150")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the segment sizes (quick checks)")
    args = parser.parse_args(argv)
    wanted = [k.strip() for k in args.cases.split(",") if k.strip()]
    cases = [c for c in CASES if c.key in wanted]
    if not cases:
        parser.error(f"no known case in {args.cases!r}")
    for c in cases:
        c.total_bytes = max(1 << 20, int(c.total_bytes * args.scale))
    try:
        from indexlib.engine.partition import verify_partition
    except ImportError:
        verify_partition = None
        print("indexlib.engine.partition.verify_partition is not available: verify is skipped", file=sys.stderr)
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="bench-rebuild-", dir=parent) as root:
        for c in cases:
            run_case(c, root, args.runs, verify_partition)
        report(cases, args.runs, root, verify_partition is not None)


if __name__ == "__main__":
    main()
