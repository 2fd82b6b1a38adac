"""Benchmark of ``python -m indexlib rebuild`` over a whole Kafka log dir with a process pool, against the
previous way (one single-partition process per partition, two at a time), with the machine's physical
limits beside each figure (issue 10).

Run: ``.venv/bin/python benchmarks/bench_logdir.py [--runs R] [--scale S] [--json FILE] [--other-tree DIR]
[--corpora a,b]``;
``--scale`` multiplies the segment sizes (quick checks: ``--scale 0.05 --runs 2``); ``--other-tree DIR`` (another
checkout, its extension built in place) adds a way, that checkout's log-dir command, in the same runs. The
log-dir command also runs with the scan's read-ahead thread off (``KAFKA_INDEX_READ_AHEAD=0``) in every run.

Data, generated once in a temporary directory under ``/dev/shm`` when it exists (so always in memory),
with ``indexlib.testing.generate.write_uniform_segment`` (equal uncompressed v2 batches, no index files: a
rebuild with ``--output-dir`` only reads the log dir):

* corpus a: log dir ``logs-a`` of 4 partitions ``bench-a-0`` .. ``bench-a-3`` x 2 segments of 256 MiB
  (2 GiB), batches of 16 KiB; base offsets consecutive within a partition;
* corpus b: log dir ``logs-b`` of 2 partitions ``bench-b-0``, ``bench-b-1`` x 1 segment of 136,000,000
  bytes (800,000 batches of 170 bytes each; 272 MB, 1.6 M batches in all);
* corpus c, only when asked for (``--corpora``): log dir ``logs-c`` of 4 partitions x 2 segments of 128 MiB (1 GiB),
  batches of 4 KiB: the batch size of ``bench_jobs.py``'s corpora, for the same data without Spark.

The two ways, each timed from outside as a user runs it (``time.perf_counter`` around
``subprocess.run`` of whole processes, exit code 0 checked):

* log dir: ``python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs 2`` (one process; its pool of 2
  worker processes takes the segments, biggest first);
* per partition: ``python -m indexlib rebuild PARTITION_DIR --output-dir OUT --jobs 1``, one process per
  partition, at most 2 at a time (a pool of 2 threads each running ``subprocess.run``: a new process
  starts as soon as one ends, as ``xargs -P 2`` does); the wall time runs from the first start to the last
  end. For 2 partitions that is both at once; for 4 partitions it is 2 processes at a time.

Both write to their own fresh OUT (``OUT/<topic>-<partition>/``); after each run every file of both trees
is compared byte for byte (same relative paths, same bytes, each segment's ``.index`` and ``.timeindex``
present); any difference fails the benchmark. The order of the two ways alternates between runs.

Per run, per corpus, in this order: the physical limits (one ``cat`` of all the ``.log`` files to
``/dev/null``; a bare CRC-32C pass over every file, mapped as the scan maps it, in 16 KiB chunks and in
chunks of the batch size, one Python call each: ``bench_rebuild.crc_pass``; all in one process, one
core); the two ways; then, untimed, the memory of the log-dir command: a fresh run under ``/usr/bin/time
-v`` (its "Maximum resident set size" is the command's ``ru_maxrss``: the largest RSS any single process
of the tree reached, the pool's workers included once reaped), while a thread of this process sums
``VmRSS`` and ``RssAnon`` over the command's process tree (``/proc/<pid>/status``, the tree from
``/proc/<pid>/task/<tid>/children``) every ~2 ms; the same ``ru_maxrss`` for one single-partition process
(``--jobs 1``) beside it. Once per run: the fixed cost of a process,
``python -m indexlib --help``. The project's bytecode is written before anything is timed (``compileall``), as
a user's first run writes it.

Every figure is the median over ``--runs`` runs; ratios are taken within one run, then the median.
GB = 1e9 bytes, MiB = 2**20 bytes. Prints Markdown. Everything generated is deleted at the end.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(1, HERE)

from bench_jobs import med, timed  # noqa: E402
from bench_rebuild import compile_bytecode, crc_pass, machine_line, print_other_tree_table  # noqa: E402
from machine_watch import MachineWatch  # noqa: E402

from indexlib.format.layout import segment_file, segment_name  # noqa: E402
from indexlib.testing.generate import write_uniform_segment  # noqa: E402

JOBS = 2  # --jobs of the log-dir run, and processes at a time of the per-partition way
ALL_CORPORA = [
    # key, topic, partitions, segments per partition, segment bytes (times --scale), batch bytes
    ("a", "bench-a", 4, 2, 256 << 20, 16384),
    ("b", "bench-b", 2, 1, 136_000_000, 170),
    ("c", "bench-c", 4, 2, 128 << 20, 4096),
]
CORPORA = ALL_CORPORA[:2]  # --corpora: the ones this run generates and times
CMD = [sys.executable, "-m", "indexlib"]
TIME = "/usr/bin/time"  # GNU time, for -v


class BenchError(Exception):
    pass


# ------------------------------------------------------------------------------------------ data
def make_log_dir(log_dir: str, topic: str, partitions: int, segments: int, seg_bytes: int, batch: int, seed: int):
    """``partitions`` dirs ``<topic>-<n>`` of ``segments`` consecutive segments each (``.log`` files only).
    Returns (partition dirs, .log files, batches, segment names per partition)."""
    pdirs, files, batches, names = [], [], 0, {}
    for n in range(partitions):
        pdir = os.path.join(log_dir, f"{topic}-{n}")
        os.makedirs(pdir)
        base = 0
        names[os.path.basename(pdir)] = []
        for s in range(segments):
            path = segment_file(pdir, base, ".log")
            count = write_uniform_segment(
                path, base_offset=base, total_bytes=seg_bytes, batch_bytes=batch, seed=seed + 1000 * n + s
            )
            names[os.path.basename(pdir)].append(segment_name(base, ""))
            files.append(path)
            batches += count
            base += count  # one record per batch: next base = last offset + 1
        pdirs.append(pdir)
    return pdirs, files, batches, names


# ----------------------------------------------------------------------------------------- the ways
OTHER_TREE: str | None = None  # --other-tree: a third way, that checkout's log-dir command


def run_command(args: list[str], tree: str = REPO, read_ahead: bool = True) -> None:
    env = dict(os.environ, PYTHONPATH=tree) if tree != REPO else dict(os.environ)
    if not read_ahead:
        env["KAFKA_INDEX_READ_AHEAD"] = "0"
    proc = subprocess.run(CMD + args, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(
            f"`{' '.join(['python -m indexlib', *args])}` exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-5000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"
        )


def log_dir_way(log_dir: str, out: str, tree: str = REPO, read_ahead: bool = True) -> float:
    return timed(lambda: run_command(["rebuild", log_dir, "--output-dir", out, "--jobs", str(JOBS)], tree, read_ahead))


def per_partition_way(pdirs: list[str], out: str) -> float:
    def one(pdir: str) -> None:
        run_command(["rebuild", pdir, "--output-dir", out, "--jobs", "1"])

    def all_of_them() -> None:
        with ThreadPoolExecutor(max_workers=JOBS) as pool:
            for future in [pool.submit(one, p) for p in pdirs]:
                future.result()

    return timed(all_of_them)


def tree_files(root: str) -> dict[str, str]:
    found = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = path
    return found


def compare_outputs(a: str, b: str, names: dict[str, list[str]]) -> int:
    """Every file of both trees, byte for byte; returns the number of files compared."""
    fa, fb = tree_files(a), tree_files(b)
    if set(fa) != set(fb):
        raise BenchError(
            f"the two ways wrote different files: only the log-dir run: {sorted(set(fa) - set(fb))}; "
            f"only the per-partition runs: {sorted(set(fb) - set(fa))}"
        )
    for partition, segments in names.items():
        for seg in segments:
            for suffix in (".index", ".timeindex"):
                rel = os.path.join(partition, seg + suffix)
                if rel not in fa:
                    raise BenchError(f"{rel}: not written by either way")
    differ = [rel for rel in sorted(fa) if not filecmp.cmp(fa[rel], fb[rel], shallow=False)]
    if differ:
        raise BenchError(f"the two ways wrote different bytes in: {differ}")
    return len(fa)


# ------------------------------------------------------------------------------------------ memory
STATUS_FIELDS = ("VmRSS", "RssAnon")


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _status(pid: int) -> dict[str, int]:
    values = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in STATUS_FIELDS:
                    values[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return values


def memory_run(args: list[str], sample: bool) -> dict:
    """Run ``python -m indexlib ARGS`` once (untimed) under ``/usr/bin/time -v``: its "Maximum resident set
    size" (the ru_maxrss of the command, its reaped pool workers included: the largest RSS of any single
    process of the tree) and, when ``sample``, the peaks of VmRSS and RssAnon summed over the command's
    process tree (``time`` itself left out), sampled every ~2 ms.

    Not ``os.wait4`` on a child of this process: ``subprocess`` starts children with vfork, and at exec
    Linux folds the old (this big process's) RSS high-water mark into the child's ru_maxrss; GNU time
    starts the command from its own small process."""
    proc = subprocess.Popen(
        [TIME, "-v", *CMD, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    peak = {"VmRSS": 0, "RssAnon": 0, "procs": 0, "samples": 0, "single_VmRSS": 0}
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            pids = [p for p in _tree(proc.pid) if p != proc.pid]
            total = {k: 0 for k in STATUS_FIELDS}
            for p in pids:
                status = _status(p)
                for k, v in status.items():
                    total[k] += v
                peak["single_VmRSS"] = max(peak["single_VmRSS"], status.get("VmRSS", 0))
            for k in STATUS_FIELDS:
                peak[k] = max(peak[k], total[k])
            peak["procs"] = max(peak["procs"], len(pids))
            peak["samples"] += 1
            time.sleep(0.002)

    thread = threading.Thread(target=sampler, daemon=True)
    if sample:
        thread.start()
    _out, stderr = proc.communicate()
    done.set()
    if sample:
        thread.join()
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    status_line = re.search(r"Exit status: (\d+)", stderr)
    if proc.returncode != 0 or not match or not status_line or status_line.group(1) != "0":
        raise BenchError(
            f"`python -m indexlib {' '.join(args)}` under {TIME} -v failed ({proc.returncode})\n{stderr[-5000:]}"
        )
    return {"maxrss": int(match.group(1)) * 1024, **peak}


# ------------------------------------------------------------------------------------------- report
def report(data: dict, runs: list[dict], args, root: str, watch: MachineWatch) -> None:
    gb, mib = 1e9, 2**20

    def runs_list(values, fmt="{:.2f}") -> str:
        return ", ".join(fmt.format(x) for x in values)

    print(f"machine: {machine_line()}")
    print(
        f"files in: {root} ; runs: {len(runs)} (medians; ratios per run, then the median) ; "
        f"--scale {args.scale} ; default index.interval.bytes / segment.index.bytes (4096 / 10485760)"
    )
    for line in watch.lines():
        print(line)
    print()
    print(
        f"Ways: **log dir** = `python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs {JOBS}` (one command); "
        f"**per partition** = `python -m indexlib rebuild PARTITION_DIR --output-dir OUT --jobs 1`, one process per "
        f"partition, {JOBS} at a time (a new one starts when one ends, as `xargs -P {JOBS}` would run them: "
        "corpus a = 4 partitions in 2 waves of 2, corpus b = 2 partitions at once); wall = from the first start to "
        "the last end, whole processes timed from outside. The output of both ways is compared byte for byte "
        "after every run (every index file):"
    )
    print()
    print(
        "| corpus | way | median wall | GB/s | M batches/s | walls of the runs | log dir / per partition "
        "(wall ratio; runs) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for key, *_ in CORPORA:
        d = data[key]
        size, n = d["bytes"], d["batches"]
        ratio = [r[key]["logdir"] / r[key]["parts"] for r in runs]
        for way, name in (("logdir", f"log dir, `--jobs {JOBS}`"), ("parts", f"per partition, {JOBS} at a time")):
            walls = [r[key][way] for r in runs]
            w = med(walls)
            last = f"**{med(ratio):.2f}** ({runs_list(ratio)})" if way == "logdir" else ""
            print(
                f"| {key}: {d['label']} | {name} | {w:.3f} s | {size / w / gb:.2f} | {n / w / 1e6:.2f} "
                f"| {runs_list(walls, '{:.3f}')} | {last} |"
            )
    print()
    print(
        "The log-dir command with the scan's read-ahead thread off (`KAFKA_INDEX_READ_AHEAD=0`), in the same runs, "
        "order alternating, outputs identical; ratio = its wall / the default's (above 1: the thread helps):"
    )
    print()
    print("| corpus | default (read-ahead on) | read-ahead off | off / on (runs) |")
    print("| --- | ---: | ---: | ---: |")
    for key, *_ in CORPORA:
        on, off = (med([r[key][w] for r in runs]) for w in ("logdir", "no_read_ahead"))
        ratio = [r[key]["no_read_ahead"] / r[key]["logdir"] for r in runs]
        print(f"| {key} | {on:.3f} s | {off:.3f} s | **{med(ratio):.2f}** ({runs_list(ratio)}) |")
    if OTHER_TREE:
        rows = []
        for key, *_ in CORPORA:
            size, n = data[key]["bytes"], data[key]["batches"]
            this, other = (med([r[key][w] for r in runs]) for w in ("logdir", "other"))
            ratios = [r[key]["other"] / r[key]["logdir"] for r in runs]
            cells = [f"{w:.3f} s, {size / w / gb:.2f} GB/s, {n / w / 1e6:.2f} M/s" for w in (this, other)]
            rows.append((key, cells[0], cells[1], ratios))
        print_other_tree_table(OTHER_TREE, "its log-dir command", rows)
    print()
    print(
        "Physical limits in the same runs (ONE process, one core; GB/s and, for the per-batch pass, M chunks/s; "
        "two cores could at best double the CRC figures):"
    )
    print()
    print(
        "| corpus | `cat` of the .log files > /dev/null | bare CRC-32C, 16 KiB chunks "
        "| bare CRC-32C, batch-size chunks (one Python call each) | fixed cost: `python -m indexlib --help` |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    fixed = med([r["help"] for r in runs])
    for key, *_, batch in CORPORA:
        d = data[key]
        size, n = d["bytes"], d["batches"]
        cat, c16, cb = (med([r[key][k] for r in runs]) for k in ("cat", "crc16k", "crcbatch"))
        print(
            f"| {key} ({size / 2**20:.0f} MiB, {d['files']} files) | {size / cat / gb:.2f} GB/s ({cat:.3f} s) "
            f"| {size / c16 / gb:.2f} GB/s ({c16:.3f} s) "
            f"| {size / cb / gb:.2f} GB/s, {n / cb / 1e6:.2f} M chunks of {batch} B/s ({cb:.3f} s) | {fixed:.3f} s |"
        )
    print()
    print(
        "Memory of the log-dir command (a separate, untimed run per run, under `/usr/bin/time -v`; median [max]): "
        "ru_maxrss = largest RSS of any single process of the tree (parent or a pool worker), as `/usr/bin/time -v` "
        "reports it; tree sum = VmRSS / RssAnon summed over the parent and its workers, sampled every ~2 ms "
        "(largest single process sampled, as a cross-check of ru_maxrss). RSS includes the mapped segments' "
        "shared tmpfs pages (`MAP_POPULATE`); RssAnon is the process's own memory:"
    )
    print()
    print(
        "| corpus | log dir: ru_maxrss | log dir: tree sum VmRSS | log dir: tree sum RssAnon | largest single "
        "process VmRSS (sampled) | processes seen | one single-partition process (`--jobs 1`): ru_maxrss |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, *_ in CORPORA:
        m = [r[key]["mem"] for r in runs]
        one = [r[key]["mem_one"]["maxrss"] for r in runs]

        def f(values) -> str:
            return f"{med(values) / mib:.0f} MiB [{max(values) / mib:.0f}]"

        print(
            f"| {key} | {f([x['maxrss'] for x in m])} | {f([x['VmRSS'] for x in m])} | {f([x['RssAnon'] for x in m])} "
            f"| {f([x['single_VmRSS'] for x in m])} | {max(x['procs'] for x in m)} | {f(one)} |"
        )
    print()
    compared = ", ".join(f"{key}: {data[key]['compared']} files" for key, *_ in CORPORA)
    print(f"Output bytes: identical in every run ({compared} compared per run).")


# ------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the segment sizes (quick checks)")
    parser.add_argument("--json", metavar="FILE", help="also write every raw figure here")
    parser.add_argument("--corpora", default="a,b", help="comma-separated subset of a, b, c (see above)")
    parser.add_argument(
        "--other-tree", metavar="DIR", help="another checkout: its log-dir command is timed in the same runs"
    )
    args = parser.parse_args(argv)
    global OTHER_TREE, CORPORA
    OTHER_TREE = os.path.abspath(args.other_tree) if args.other_tree else None
    wanted = args.corpora.split(",")
    unknown = set(wanted) - {c[0] for c in ALL_CORPORA}
    if unknown:
        parser.error(f"--corpora: unknown {', '.join(sorted(unknown))} (known: a, b, c)")
    CORPORA = [c for c in ALL_CORPORA if c[0] in wanted]

    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    compile_bytecode()
    if OTHER_TREE:
        compile_bytecode(OTHER_TREE)
    root = tempfile.mkdtemp(prefix="bench-logdir-", dir=parent)
    try:
        data: dict = {}
        dirs = {}
        for i, (key, topic, partitions, segments, seg_bytes, batch) in enumerate(CORPORA):
            seg_bytes = max(1 << 20, int(seg_bytes * args.scale))
            log_dir = os.path.join(root, f"logs-{key}")
            os.makedirs(log_dir)
            print(f"[{key}] generating {partitions} x {segments} x {seg_bytes} B ...", file=sys.stderr, flush=True)
            pdirs, files, batches, names = make_log_dir(log_dir, topic, partitions, segments, seg_bytes, batch, 100 * i)
            size = sum(os.path.getsize(f) for f in files)
            dirs[key] = (log_dir, pdirs, files, names)
            label = (
                f"{partitions} partitions x {segments} segment{'s' if segments > 1 else ''} of "
                f"{seg_bytes / 2**20:.0f} MiB, {batch} B batches ({size / 2**20:.0f} MiB = {size / 1e6:.0f} MB, "
                f"{batches:,} batches)"
            )
            data[key] = {"bytes": size, "batches": batches, "files": len(files), "label": label, "batch": batch}
        runs: list[dict] = []
        watch = MachineWatch()
        for run in range(args.runs):
            watch.before_run()
            r: dict = {"help": timed(lambda: run_command(["--help"]))}
            for key, *_, batch in CORPORA:
                log_dir, pdirs, files, names = dirs[key]
                print(f"[run {run + 1}/{args.runs}] {key}: limits, both ways, memory", file=sys.stderr, flush=True)
                x: dict = {}
                with open(os.devnull, "wb") as null:
                    x["cat"] = timed(lambda: subprocess.run(["cat", *files], stdout=null, check=True))
                x["crc16k"] = timed(lambda: [crc_pass(f, 16384) for f in files])
                x["crcbatch"] = timed(lambda: [crc_pass(f, batch) for f in files])
                out_l = tempfile.mkdtemp(prefix=f"out-{key}-logdir-", dir=root)
                out_p = tempfile.mkdtemp(prefix=f"out-{key}-parts-", dir=root)
                ways = [
                    ("logdir", lambda: log_dir_way(log_dir, out_l)),
                    ("parts", lambda: per_partition_way(pdirs, out_p)),
                ]
                out_n = tempfile.mkdtemp(prefix=f"out-{key}-no-read-ahead-", dir=root)
                ways.append(("no_read_ahead", lambda: log_dir_way(log_dir, out_n, read_ahead=False)))
                if OTHER_TREE:
                    out_o = tempfile.mkdtemp(prefix=f"out-{key}-other-", dir=root)
                    ways.append(("other", lambda: log_dir_way(log_dir, out_o, OTHER_TREE)))
                for way, fn in ways if run % 2 == 0 else ways[::-1]:
                    x[way] = fn()
                data[key]["compared"] = compare_outputs(out_l, out_p, names)
                compare_outputs(out_l, out_n, names)
                shutil.rmtree(out_n)
                if OTHER_TREE:
                    compare_outputs(out_l, out_o, names)
                    shutil.rmtree(out_o)
                shutil.rmtree(out_l)
                shutil.rmtree(out_p)
                out_m = tempfile.mkdtemp(prefix=f"out-{key}-mem-", dir=root)
                x["mem"] = memory_run(["rebuild", log_dir, "--output-dir", out_m, "--jobs", str(JOBS)], True)
                shutil.rmtree(out_m)
                out_m = tempfile.mkdtemp(prefix=f"out-{key}-mem1-", dir=root)
                x["mem_one"] = memory_run(["rebuild", pdirs[0], "--output-dir", out_m, "--jobs", "1"], False)
                shutil.rmtree(out_m)
                r[key] = x
            runs.append(r)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"data": data, "runs": runs, "machine": watch.as_json()}, f, indent=1)
        report(data, runs, args, root, watch)
        return 0
    except BenchError as exc:
        print(f"bench_logdir: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
