"""What every benchmark runner shares, written once: timing whole processes, the machine's facts and speed
canaries, the physical limits (``dd``/``cat`` of the page cache, a bare CRC-32C pass), corpus generation, peak
memory of a process tree, output comparison and the ``--other-tree`` A/B comparison.

Conventions of every runner: data is generated under ``/dev/shm`` when it exists (tmpfs pages are page-cache
pages, so always in memory) and deleted at the end; the project's bytecode is written first
(:func:`compile_bytecode`); whole processes are timed from outside (``time.perf_counter`` around
``subprocess.run``, exit code checked); every figure is the median over ``--runs`` runs and every ratio is taken
within one run (the order of the compared ways alternating between runs) before its median; GB = 1e9 bytes,
MiB = 2**20 bytes; reports are Markdown.

``--other-tree DIR``: another checkout of the project (its extension built in place, ``python setup.py
build_ext --inplace`` there); a runner times that checkout's command in the same runs, checks its output is the
same, and prints :func:`print_other_tree_table`.

Nothing here imports ``indexlib`` at import time: ``spark.py``'s children put another checkout first on the
path before they import it.
"""

from __future__ import annotations

import contextlib
import filecmp
import hashlib
import mmap
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

INDEX_INTERVAL_BYTES = 4096  # Kafka's and the CLI's defaults
SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
LOG_NAME = "00000000000000000000.log"
CMD = [sys.executable, "-m", "indexlib"]
#: ``python -m indexlib`` with every ``os.fsync`` a no-op (its pool's workers too, forked from it: Python 3.11-3.13's
#: default on Linux): a command's work without making anything durable, the floor of any way to make it durable
#: (``run_indexlib(..., durable=False)``); never for data anyone keeps
CMD_NOTHING_DURABLE = [
    sys.executable,
    "-c",
    "import os, runpy; os.fsync = lambda fd: None; runpy.run_module('indexlib', run_name='__main__', alter_sys=True)",
]
TIME = "/usr/bin/time"  # GNU time, for -v
GB, MIB = 1e9, 2**20

# The log dirs of "how long for my broker" and "against Kafka's recovery" (and their memory):
# key -> (topic, partitions, segments per partition, segment bytes, batch bytes)
CORPORA = {
    "a": ("bench-a", 4, 2, 256 << 20, 16384),
    "b": ("bench-b", 2, 1, 136_000_000, 170),
    "c": ("bench-c", 4, 2, 128 << 20, 4096),  # bench_jobs' batch size, without Spark
}


class BenchError(Exception):
    """A benchmark run that cannot give a figure (outputs differ, a command failed): one line, exit 1."""


# ------------------------------------------------------------------------------------------ timing
def med(values):
    return statistics.median(values)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(work: Callable[[], object], repeats: int = 3) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``work``."""
    return min(timed(work) for _ in range(repeats))


def runs_list(values, fmt: str = "{:.2f}") -> str:
    return ", ".join(fmt.format(x) for x in values)


def tree_env(tree: str = REPO, **extra: str) -> dict[str, str]:
    """The environment of a child running ``tree``'s code (first on its path), C locale, plus ``extra``
    (an empty value removes the variable)."""
    env = dict(os.environ, LC_ALL="C")
    env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for key, value in extra.items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    return env


def run_indexlib(
    args: list[str], tree: str = REPO, ok: tuple[int, ...] = (0,), durable: bool = True, **env: str
) -> None:
    """One whole ``python -m indexlib ARGS`` process of ``tree``; its exit code must be in ``ok``. ``durable=False``:
    with no ``fsync`` (:data:`CMD_NOTHING_DURABLE`)."""
    cmd = CMD if durable else CMD_NOTHING_DURABLE
    proc = subprocess.run(cmd + args, cwd=tree, env=tree_env(tree, **env), capture_output=True, text=True)
    if proc.returncode not in ok:
        raise BenchError(
            f"`python -m indexlib {' '.join(args)}` ({tree}, {env or 'as is'}) exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
        )


def run_kafka_index(args: list[str], tree: str = REPO) -> None:
    """One whole ``kafka-index ARGS`` process of ``tree`` (``python -m jobs.cli``); it must exit 0."""
    cmd = [sys.executable, "-m", "jobs.cli", *args]
    proc = subprocess.run(cmd, cwd=tree, env=tree_env(tree), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(
            f"`kafka-index {' '.join(args)}` ({tree}) exited with {proc.returncode}\n{proc.stderr[-3000:]}"
        )


def timed_indexlib(args: list[str], tree: str = REPO, **env: str) -> tuple[float, float, float]:
    """Wall, user and system CPU seconds of one whole ``python -m indexlib`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(lambda: run_indexlib(args, tree, **env))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def compile_bytecode(tree: str = REPO) -> None:
    """Write the project's bytecode (``__pycache__``) before anything is timed, as a user's first run does: in
    an environment with ``PYTHONDONTWRITEBYTECODE`` set, every timed process would otherwise compile every
    module of the project again (about 50 ms of each process's start on the machines measured)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    dirs = [os.path.join(tree, name) for name in ("indexlib", "jobs")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], env=env, check=True, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def scratch(prefix: str, memory: bool = True) -> Iterator[str]:
    """A temporary directory, under ``/dev/shm`` when ``memory`` and it exists (else tempfile's default, a disk);
    removed at the end."""
    parent = "/dev/shm" if memory and os.path.isdir("/dev/shm") else None
    root = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -------------------------------------------------------------------------------- physical limits
def dd_seconds(path: str) -> float:
    """``dd if=PATH of=/dev/null bs=1M``: dd's own seconds (the page-cache copy, the scan's ceiling)."""
    proc = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True)
    match = re.search(r"copied, ([0-9.e+-]+) s", proc.stderr)
    if proc.returncode != 0 or not match:
        raise BenchError(f"dd failed: {proc.stderr}")
    return float(match.group(1))


def cat_seconds(files: list[str]) -> float:
    """One ``cat`` of ``files`` to ``/dev/null``, timed from outside."""
    return timed(lambda: subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True))


def fsync_floor_seconds(root: str, dirs: int, files_per_dir: int, cut_per_dir: int = 0, in_flight: int = 16) -> float:
    """The file system's floor for a run's durability: ``dirs`` new dirs under ``root`` (made first, not timed),
    each given ``files_per_dir`` new 600-byte files, each file fsynced, then each dir that got one; and each holding
    ``cut_per_dir`` 600-byte files grown to 10 MiB (made and synced first, not timed) that are cut back to 600 bytes
    and fsynced (a preallocated index cut in place); ``in_flight`` fsyncs at once (a journaling file system commits
    those in flight together). Nothing else: no scan, no rename."""
    import shutil
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    base = tempfile.mkdtemp(prefix="fsync-floor-", dir=root)
    try:
        paths = [os.path.join(base, f"d{i}") for i in range(dirs)]
        cut = [os.path.join(d, f"c{k}") for d in paths for k in range(cut_per_dir)]
        for path in paths:
            os.mkdir(path)
        for path in cut:
            with open(path, "wb") as f:
                f.write(b"x" * 600)
                f.truncate(10 * MIB)
        os.sync()

        def write(path: str) -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, b"x" * 600)
                os.fsync(fd)
            finally:
                os.close(fd)

        def cut_back(path: str) -> None:
            fd = os.open(path, os.O_RDWR)
            try:
                os.ftruncate(fd, 600)
                os.fsync(fd)
            finally:
                os.close(fd)

        def sync_dir(path: str) -> None:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        started = time.perf_counter()
        with ThreadPoolExecutor(in_flight) as threads:
            list(threads.map(write, [os.path.join(d, f"f{k}") for d in paths for k in range(files_per_dir)]))
            list(threads.map(cut_back, cut))
            list(threads.map(sync_dir, paths if files_per_dir else []))
        return time.perf_counter() - started
    finally:
        shutil.rmtree(base, ignore_errors=True)


def crc_pass(path: str, chunk: int) -> None:
    """CRC-32C of the file mapped (``open_log``: MAP_POPULATE, MADV_SEQUENTIAL), one call of the crc32c package
    per ``chunk`` bytes: in 16 KiB chunks a bare CRC pass; in batch-size chunks the floor of any per-batch
    Python loop."""
    import crc32c

    from indexlib.format.batch_walk import open_log

    _, mm = open_log(path)
    view = memoryview(mm)
    try:
        crc = crc32c.crc32c
        for pos in range(0, len(mm), chunk):
            crc(view[pos : pos + chunk])
    finally:
        view.release()
        mm.close()


# ----------------------------------------------------------------------------------------- memory
STATUS_FIELDS = ("VmRSS", "RssAnon")


def _descendants(pid: int) -> list[int]:
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


def memory_run(args: list[str], tree: str = REPO, interval: float = 0.001, **env: str) -> dict:
    """Run ``python -m indexlib ARGS`` once (untimed) under ``/usr/bin/time -v``: ``maxrss`` = its "Maximum
    resident set size" (the largest RSS of any single process of the command, its reaped pool workers
    included; RSS counts mapped file pages), and the peaks of ``VmRSS`` and ``RssAnon`` (the processes' own
    memory) summed over the command's process tree (``time`` left out), sampled every ``interval`` s, with
    ``single_VmRSS`` (the largest single process sampled) and ``procs``.

    Under GNU time, not ``os.wait4`` on a child of this process: ``subprocess`` starts children with vfork, and
    at exec Linux folds this big process's RSS high-water mark into the child's ru_maxrss."""
    proc = subprocess.Popen(
        [TIME, "-v", *CMD, *args], cwd=tree, env=tree_env(tree, **env), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    peak = {"VmRSS": 0, "RssAnon": 0, "procs": 0, "samples": 0, "single_VmRSS": 0}
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            pids = [p for p in _descendants(proc.pid) if p != proc.pid]
            total = dict.fromkeys(STATUS_FIELDS, 0)
            for p in pids:
                status = _status(p)
                for k, v in status.items():
                    total[k] += v
                peak["single_VmRSS"] = max(peak["single_VmRSS"], status.get("VmRSS", 0))
            for k in STATUS_FIELDS:
                peak[k] = max(peak[k], total[k])
            peak["procs"] = max(peak["procs"], len(pids))
            peak["samples"] += 1
            time.sleep(interval)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    _out, stderr = proc.communicate()
    done.set()
    thread.join()
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    status_line = re.search(r"Exit status: (\d+)", stderr)
    if proc.returncode != 0 or not match or not status_line or status_line.group(1) != "0":
        raise BenchError(f"`python -m indexlib {' '.join(args)}` under {TIME} -v failed\n{stderr[-3000:]}")
    return {"maxrss": int(match.group(1)) * 1024, **peak}


# ------------------------------------------------------------------------------------------ data
def make_log_dir(
    log_dir: str,
    topic: str,
    partitions: int,
    segments: int,
    seg_bytes: int,
    batch: int,
    seed: int = 0,
    producer_id: int = -1,
    indexes: bool = False,
) -> tuple[list[str], list[str], int, dict[str, list[str]]]:
    """``partitions`` dirs ``<topic>-<n>`` of ``segments`` consecutive segments each of equal uncompressed v2
    batches (``indexlib.testing.generate.write_uniform_segment``); ``indexes``: each partition also gets its
    correct index files (rebuilt in place, checked healthy). Returns (partition dirs, .log files, batches,
    segment names per partition)."""
    from indexlib.engine import rebuild_partition, verify_partition
    from indexlib.format.layout import segment_file, segment_name
    from indexlib.testing.generate import write_uniform_segment

    pdirs, files, batches, names = [], [], 0, {}
    for n in range(partitions):
        pdir = os.path.join(log_dir, f"{topic}-{n}")
        os.makedirs(pdir)
        base = 0
        names[os.path.basename(pdir)] = []
        for s in range(segments):
            path = segment_file(pdir, base, ".log")
            count = write_uniform_segment(
                path, base_offset=base, total_bytes=seg_bytes, batch_bytes=batch, seed=seed + 1000 * n + s,
                producer_id=producer_id,
            )  # fmt: skip
            names[os.path.basename(pdir)].append(segment_name(base, ""))
            files.append(path)
            batches += count
            base += count  # one record per batch: next base = last offset + 1
        if indexes:
            rebuild_partition(pdir, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES)
            if not verify_partition(pdir, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES).healthy:
                raise BenchError(f"{pdir}: not healthy after its rebuild")
        pdirs.append(pdir)
    return pdirs, files, batches, names


def make_corpus(root: str, key: str, scale: float, seed: int = 0, indexes: bool = False) -> dict:
    """Corpus ``key`` of :data:`CORPORA` as log dir ``root/logs-KEY``, segment sizes times ``scale``."""
    topic, partitions, segments, seg_bytes, batch = CORPORA[key]
    seg_bytes = max(1 << 20, int(seg_bytes * scale))
    log_dir = os.path.join(root, f"logs-{key}")
    print(f"[{key}] generating {partitions} x {segments} x {seg_bytes} B ...", file=sys.stderr, flush=True)
    pdirs, files, batches, names = make_log_dir(
        log_dir, topic, partitions, segments, seg_bytes, batch, seed, indexes=indexes
    )
    size = sum(os.path.getsize(f) for f in files)
    label = (
        f"{partitions} partitions x {segments} segment{'s' if segments > 1 else ''} of {seg_bytes / MIB:.0f} MiB, "
        f"{batch} B batches ({size / MIB:.0f} MiB = {size / 1e6:.0f} MB, {batches:,} batches)"
    )
    return {"key": key, "log_dir": log_dir, "pdirs": pdirs, "files": files, "names": names, "bytes": size,
            "batches": batches, "batch": batch, "label": label}  # fmt: skip


def tree_files(root: str) -> dict[str, str]:
    found = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = path
    return found


def compare_trees(a: str, b: str, names: dict[str, list[str]] | None = None) -> int:
    """Every file of both output trees, byte for byte (and each named segment's ``.index``/``.timeindex``
    present); returns the number of files compared."""
    fa, fb = tree_files(a), tree_files(b)
    if set(fa) != set(fb):
        raise BenchError(
            f"different files: only in {a}: {sorted(set(fa) - set(fb))}; only in {b}: {sorted(set(fb) - set(fa))}"
        )
    for partition, segments in (names or {}).items():
        for seg in segments:
            for suffix in (".index", ".timeindex"):
                if os.path.join(partition, seg + suffix) not in fa:
                    raise BenchError(f"{partition}/{seg}{suffix}: not written")
    differ = [rel for rel in sorted(fa) if not filecmp.cmp(fa[rel], fb[rel], shallow=False)]
    if differ:
        raise BenchError(f"different bytes in: {differ}")
    return len(fa)


def tree_digest(root: str) -> str:
    """SHA-256 over every file under ``root``: its path relative to ``root`` and its bytes, in path order."""
    h = hashlib.sha256()
    for rel, path in sorted(tree_files(root).items()):
        h.update(rel.encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def print_other_tree_table(other_tree: str, what: str, rows: list[tuple[str, str, str, list[float]]]) -> None:
    """The same-run comparison ``--other-tree DIR`` adds: ``what`` says what was timed; one row a case: its name,
    this tree's figures, the other tree's, and each run's ratio other wall / this wall."""
    print()
    print(
        f"Against another checkout in the same runs (`--other-tree {other_tree}`: {what}, order alternating, "
        "outputs identical); ratio = other wall / this wall (speed-up):"
    )
    print()
    print("| case | this tree | other tree | speed-up (runs) |")
    print("| --- | ---: | ---: | ---: |")
    for case, this, other, ratios in rows:
        print(f"| {case} | {this} | {other} | **{med(ratios):.2f}x** ({runs_list(ratios)}) |")


# --------------------------------------------------------------------------------------- machine
def machine_line() -> str:
    import crc32c
    import numpy as np

    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.machine()} {model}, {os.cpu_count()} cores, {mem:.0f} GiB; Python {platform.python_version()}, "
        f"numpy {np.__version__}, crc32c {'hardware' if crc32c.hardware_based else 'SOFTWARE'}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


# What the machine was doing around each run. These shared machines change speed by up to 1.8x within minutes
# without any busy CPU showing in /proc/stat, and not in plain arithmetic (a SHA-256 pass stayed within 5 % while
# the start-up swung 1.8x) but in what page faults, fresh memory and mapped files cost: so three canaries are
# timed before each run, each the best of 3: "cpu" SHA-256 of 32 MiB; "memory" 32 MiB written into freshly
# mapped memory (page faults and a copy); "start" a whole `python -c "import numpy"` (the fixed cost every timed
# command pays). Their spread says how far the absolute figures of the runs compare; ratios within one run
# are less affected.
CANARY_BYTES = 32 * 2**20
CANARY_SPREAD_WARNING = 1.15
CANARY_WORDS = {
    "cpu": f"SHA-256 of {CANARY_BYTES // 2**20} MiB",
    "memory": f"{CANARY_BYTES // 2**20} MiB into fresh memory",
    "start": '`python -c "import numpy"`',
}


def _cpu_times() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def _write_fresh_memory(data: bytes) -> None:
    with mmap.mmap(-1, len(data)) as fresh:
        fresh.write(data)


class MachineWatch:
    """Before each run (``before_run``): load average, the share of the machine's CPU busy or stolen while this
    process sleeps (the other tenants), and the three canaries; ``lines()`` for the report."""

    def __init__(self, sleep_seconds: float = 3.0) -> None:
        self.sleep_seconds = sleep_seconds
        self.load: list[str] = []
        self.busy: list[float] = []
        self.canary: list[dict[str, float]] = []

    def before_run(self) -> None:
        with open("/proc/loadavg") as f:
            self.load.append(" ".join(f.read().split()[:3]))
        a = _cpu_times()
        time.sleep(self.sleep_seconds)
        d = [y - x for x, y in zip(a, _cpu_times(), strict=True)]
        self.busy.append((sum(d) - d[3] - d[4]) / max(1, sum(d)))
        data = bytes(range(256)) * (CANARY_BYTES // 256)
        self.canary.append(
            {
                "cpu": best_of(lambda: hashlib.sha256(data).digest()),
                "memory": best_of(lambda: _write_fresh_memory(data)),
                "start": best_of(lambda: subprocess.run([sys.executable, "-c", "import numpy"], check=True)),
            }
        )

    def spread(self, name: str) -> float:
        values = [c[name] for c in self.canary]
        return max(values) / min(values) if values else 1.0

    def lines(self) -> list[str]:
        out = [
            f"before each run: load average {'; '.join(self.load)}; machine CPU busy or stolen while this "
            f"benchmark slept {self.sleep_seconds:g} s (other tenants): {runs_list(self.busy, '{:.0%}')}",
            "canaries before each run (best of 3, ms; slowest / fastest): "
            + "; ".join(
                f"{words} {', '.join(f'{c[name] * 1000:.0f}' for c in self.canary)} ({self.spread(name):.2f}x)"
                for name, words in CANARY_WORDS.items()
            ),
        ]
        worst = max(CANARY_WORDS, key=self.spread)
        if self.spread(worst) > CANARY_SPREAD_WARNING:
            out.append(
                f"**the machine's speed changed between runs** ({CANARY_WORDS[worst]}: {self.spread(worst):.2f}x): "
                "compare ratios within a run, not absolute figures across runs or days"
            )
        return out

    def as_json(self) -> dict:
        return {"load": self.load, "busy": self.busy, "canary_seconds": self.canary}


def header(what: str, runs: int, watch: MachineWatch | None = None) -> None:
    """The first lines of every report: the machine, the date, what was run and the canaries."""
    print(f"machine: {machine_line()}")
    print(f"{what} ; runs: {runs} (medians; ratios per run, then the median)")
    for line in watch.lines() if watch else []:
        print(line)
