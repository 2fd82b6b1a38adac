"""The scan kernel's own speed against the page-cache copy (``dd``): the compiled streaming scan
(``indexlib.format._kernel.scan_segment`` behind ``indexlib.storage.partition_files.summarize_log``) against the
pure-Python scan, as users run a rebuild and a verify of one segment (issue 11); and two smaller parts
(``--parts``): the read buffer's alignment and the index classes' bulk speeds.

``scan`` (default): per case one partition ``bench-0`` holding one segment and no index file (``--cases``:
``170`` = 1 GiB of 170-byte batches, ``170p`` = the same written by one idempotent producer, ``4k`` = 1 GiB of
4 KiB batches, ``16k`` = 1 GiB of 16 KiB batches; times ``--scale``). Per run, per case:

* limits: ``dd if=FILE of=/dev/null bs=1M``; a bare CRC-32C pass in 16 KiB chunks (``common.crc_pass``) and, for
  small batches, in batch-size chunks (the floor of any per-batch Python loop); the kernel's own CRC-32C over the
  mapped file in one call;
* ``python -m indexlib rebuild PARTITION_DIR --output-dir OUT --jobs 1`` compiled and pure
  (``KAFKA_INDEX_PURE_PYTHON=1``), order alternating, wall and user/system CPU, outputs compared byte for byte;
  the compiled ``verify`` of the healthy partition;
* where the time goes, in this process: ``summarize_log``, ``plan_segment``, ``stage_segment`` + ``install_segment`` (fsync), the
  whole command in-process, the kernel alone with its read-ahead thread and without;
* the start-up as whole processes (best of 3): ``python -c pass``, ``python -c "import numpy"``, ``python -c
  "import indexlib.cli.main"``, ``python -m indexlib --help``; with the 16k case the line's budget (dd's seconds
  over the 50 % target, less the in-process command).

``--other-tree DIR`` adds that checkout's compiled rebuild in the same runs; ``--profile`` a cProfile at the end.
The peak memory of the same commands: ``memory.py``.

``alignment``: a file of ``--mib`` MiB read in 1 MiB ``preadv``s into a buffer 0, 16, 32, 64 or 4000 bytes past a
page, beside ``dd`` (why the kernel keeps each file byte at the same address offset modulo 64 as its source).

``index``: the index classes on ``--entries`` entries (default 1 M): bulk write (``append_many`` + close), bulk
read (``to_numpy`` + native columns), random and warm-section floor lookups, beside a numpy memcpy (issue 2).

Run: ``.venv/bin/python benchmarks/kernel.py [--parts scan,alignment,index] [--runs R] [--cases 170,170p,4k,16k]
[--scale S] [--mib M] [--entries N] [--json FILE] [--profile] [--other-tree DIR]``; ``--quick``: small sizes, one
run. About 10 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import filecmp
import io
import json
import mmap
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    INDEX_INTERVAL_BYTES,
    LOG_NAME,
    REPO,
    SEGMENT_INDEX_BYTES,
    BenchError,
    MachineWatch,
    best_of,
    compile_bytecode,
    crc_pass,
    dd_seconds,
    machine_line,
    med,
    print_other_tree_table,
    timed,
    tree_env,
)

import indexlib  # noqa: E402
from indexlib.cli import main as cli  # noqa: E402
from indexlib.format import control_records, scan_kernel  # noqa: E402
from indexlib.format.batch_walk import open_log, open_segment  # noqa: E402
from indexlib.recovery.entry_plan import plan_segment  # noqa: E402
from indexlib.storage.partition_files import summarize_log  # noqa: E402
from indexlib.storage.publish import install_segment, stage_segment  # noqa: E402
from indexlib.testing.generate import write_uniform_segment  # noqa: E402

try:
    import indexlib.format._kernel as kernel
except ImportError:  # pragma: no cover
    kernel = None

CMD = [sys.executable, "-m", "indexlib"]
PURE_ENV = "KAFKA_INDEX_PURE_PYTHON"
MODES = ("compiled", "pure")
# key, label, segment bytes (times --scale), batch bytes, producer id (-1: none)
CASES = [
    ("170", "1 GiB of 170-byte batches", 1 << 30, 170, -1),
    ("170p", "1 GiB of 170-byte batches of an idempotent producer", 1 << 30, 170, 42),
    ("4k", "1 GiB of 4 KiB batches", 1 << 30, 4096, -1),
    ("16k", "1 GiB of 16 KiB batches", 1 << 30, 16384, -1),
]
# issue 11's targets
TARGET_SMALL_BATCHES = 15.0  # M batches/s, 170-byte batches, 1 GiB segment
TARGET_LARGE_OF_DD = 0.5  # 16 KiB batches: rebuild >= 50 % of a dd bs=1M read
TARGET_VERIFY_OF_REBUILD = 1.2  # 16 KiB batches: verify <= 1.2x rebuild


OTHER_TREE: str | None = None  # --other-tree: the "other" mode runs that checkout's compiled rebuild


def tree_for(mode: str) -> str:
    return OTHER_TREE if mode == "other" and OTHER_TREE else REPO


def env_for(mode: str) -> dict[str, str]:
    return tree_env(tree_for(mode), **{PURE_ENV: "1" if mode == "pure" else ""})


def run_command(args: list[str], mode: str) -> None:
    proc = subprocess.run(CMD + args, cwd=tree_for(mode), env=env_for(mode), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(
            f"`python -m indexlib {' '.join(args)}` ({mode}) exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
        )


def timed_command(args: list[str], mode: str) -> tuple[float, float, float]:
    """Wall, user and system CPU seconds of one whole ``python -m indexlib`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(lambda: run_command(args, mode))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def rebuild_args(partition_dir: str, out: str) -> list[str]:
    return ["rebuild", partition_dir, "--output-dir", out, "--jobs", "1"]


def verify_args(partition_dir: str) -> list[str]:
    return ["verify", partition_dir, "--jobs", "1"]


def check_modes() -> dict[str, str]:
    """Each mode's child really uses the scan it is named for; returns the indexlib each child imports."""
    where = {}
    probe = "import indexlib, indexlib.format.scan_kernel as k; print(k.KERNEL is not None, indexlib.__file__)"
    for mode in MODES:
        out = subprocess.run(
            [sys.executable, "-c", probe], cwd=REPO, env=env_for(mode), capture_output=True, text=True, check=True
        ).stdout.split()
        if (out[0] == "True") != (mode == "compiled"):
            raise BenchError(f"the {mode} child has scan_kernel.KERNEL {'set' if out[0] == 'True' else 'None'}")
        where[mode] = out[1]
    return where


# What a process pays before its first byte of work, step by step, up to a whole command that does none
# (``python -c "import numpy"`` is machine_watch's "start" canary, already timed before each run).
STARTS = {
    "python": ["-c", "pass"],
    "modules": ["-c", "import indexlib.cli.main"],
    "help": ["-m", "indexlib", "--help"],
}


def start_seconds() -> dict[str, float]:
    """Walls of the start-up steps as whole processes (best of 3 each): the interpreter, with every module a
    rebuild loads, a whole ``python -m indexlib --help``."""
    out = {}
    for name, args in STARTS.items():
        out[name] = best_of(
            lambda args=args: subprocess.run([sys.executable, *args], cwd=REPO, env=env_for("compiled"), check=True)
        )
    return out


# ------------------------------------------------------------------------------- in-process breakdown
def breakdown(log: str, out_root: str, partition_dir: str) -> dict[str, float]:
    t: dict[str, float] = {}
    t["map"] = timed(lambda: open_log(log)[1].close())
    size, mm = open_log(log)
    try:
        t["kernel_crc"] = timed(lambda: kernel.crc32c(mm))
    finally:
        mm.close()
    fd = open_segment(log)
    try:
        for prefetch in (True, False):
            t[f"scan_prefetch_{prefetch}"] = timed(
                lambda: kernel.scan_segment(
                    fd, size, 0, INDEX_INTERVAL_BYTES, b"", b"", control_records.marker_type_or_error, 1 << 20, prefetch
                )
            )
    finally:
        os.close(fd)
    box: dict = {}
    t["summary"] = timed(lambda: box.setdefault("summary", summarize_log(log, 0, INDEX_INTERVAL_BYTES, compiled=True)))
    t["plan"] = timed(lambda: box.setdefault("plan", plan_segment(box.pop("summary"), SEGMENT_INDEX_BYTES)))
    out = tempfile.mkdtemp(prefix="out-publish-", dir=out_root)
    t["publish"] = timed(
        lambda: install_segment(
            stage_segment(out, 0, box["plan"], [], (".index", ".timeindex"), False, SEGMENT_INDEX_BYTES)
        )
    )
    shutil.rmtree(out)
    box.clear()
    out = tempfile.mkdtemp(prefix="out-inproc-", dir=out_root)
    with contextlib.redirect_stdout(io.StringIO()):
        codes = []
        t["inproc"] = timed(lambda: codes.append(cli.main(rebuild_args(partition_dir, out))))
    shutil.rmtree(out)
    if codes != [0]:
        raise BenchError(f"in-process rebuild exited with {codes}")
    return t


def profile(partition_dir: str, out_root: str) -> str:
    out = tempfile.mkdtemp(prefix="out-profile-", dir=out_root)
    prof = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()):
        prof.runcall(cli.main, rebuild_args(partition_dir, out))
    shutil.rmtree(out)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    return "\n".join([lines[start - 1] if start else "", *lines[start:]])


# ------------------------------------------------------------------------------------------- report
def report(data: dict, runs: list[dict], args, root: str, watch: MachineWatch, where) -> None:
    gb = 1e9

    def lst(values, fmt="{:.2f}") -> str:
        return ", ".join(fmt.format(x) for x in values)

    print(f"machine: {machine_line()}; compiled kernel CRC-32C hardware: {kernel.hardware()}")
    print(
        f"files in: {root} ; runs: {len(runs)} (medians; ratios per run, then the median) ; --scale {args.scale} ; "
        f"indexlib imported by the children from {os.path.dirname(where['compiled'])}"
    )
    for line in watch.lines():
        print(line)
    fixed = med([r["help"] for r in runs])
    print()
    print(
        "Rebuild, whole process timed from outside: `python -m indexlib rebuild PARTITION_DIR --output-dir OUT "
        f"--jobs 1`, compiled (as is) and pure (`{PURE_ENV}=1`) in the same run, order alternating; outputs "
        "identical byte for byte in every run. Ratio = pure wall / compiled wall (compiled speed-up):"
    )
    print()
    print(
        "| case | compiled: wall, M batches/s, GB/s | pure: wall, M batches/s, GB/s | compiled / pure speed "
        "(runs) | compiled walls of the runs | pure walls of the runs |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key, *_ in CASES:
        if key not in data:
            continue
        d = data[key]
        size, n = d["bytes"], d["batches"]
        cells = []
        for mode in MODES:
            w = med([r[key][mode] for r in runs])
            cells.append(f"{w:.3f} s: {n / w / 1e6:.2f} M/s, {size / w / gb:.2f} GB/s")
        ratio = [r[key]["pure"] / r[key]["compiled"] for r in runs]
        print(
            f"| {d['label']} ({n:,} batches of {d['batch']} B) | {cells[0]} | {cells[1]} "
            f"| **{med(ratio):.2f}x** ({lst(ratio)}) | {lst([r[key]['compiled'] for r in runs], '{:.3f}')} "
            f"| {lst([r[key]['pure'] for r in runs], '{:.3f}')} |"
        )
    if OTHER_TREE:
        rows = []
        for key, *_ in CASES:
            if key in data:
                n = data[key]["batches"]
                this, other = (med([r[key][m] for r in runs]) for m in ("compiled", "other"))
                ratios = [r[key]["other"] / r[key]["compiled"] for r in runs]
                rows.append(
                    (
                        key,
                        f"{this:.3f} s, {n / this / 1e6:.2f} M/s",
                        f"{other:.3f} s, {n / other / 1e6:.2f} M/s",
                        ratios,
                    )
                )
        print_other_tree_table(OTHER_TREE, "its compiled rebuild, same command", rows)
    print()
    print(
        "CPU time of the same timed processes (from `getrusage(RUSAGE_CHILDREN)`; median [min-max]); system time "
        "is page faults and copies from the page cache (the pure scan's mapping, the compiled scan's reads):"
    )
    print()
    print("| case | compiled: user | compiled: system | pure: user | pure: system |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for key, *_ in CASES:
        if key not in data:
            continue
        cells = []
        for k in ("compiled_user", "compiled_sys", "pure_user", "pure_sys"):
            v = [r[key][k] for r in runs]
            cells.append(f"{med(v):.2f} s [{min(v):.2f}-{max(v):.2f}]")
        print(f"| {key} | {' | '.join(cells)} |")
    print()
    print(f"Fixed cost of a process (`python -m indexlib --help`: interpreter start, imports, exit): {fixed:.3f} s.")
    print()
    print("Physical limits in the same runs (one process, one core):")
    print()
    print(
        "| case | `dd if=FILE of=/dev/null bs=1M` | bare CRC-32C pass, 16 KiB chunks (crc32c pkg, map incl.) "
        "| kernel CRC-32C, one call over the mapped file | CRC-32C in batch-size chunks, one Python call each |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for key, *_ in CASES:
        if key not in data:
            continue
        d = data[key]
        size, n = d["bytes"], d["batches"]

        def f(k):
            s = med([r[key][k] for r in runs])
            return f"{size / s / gb:.2f} GB/s, {n / s / 1e6:.1f} M batches/s ({s:.3f} s)"

        crcb = f("crcbatch") if "crcbatch" in runs[0][key] else "-"
        print(f"| {key} | {f('dd')} | {f('crc16k')} | {f('kernel_crc')} | {crcb} |")
    print()
    print("Targets (issue 11):")
    print()
    print("| target | figure | met |")
    print("| --- | ---: | --- |")
    for key in ("170", "170p"):
        if key not in data:
            continue
        d = data[key]
        w = med([r[key]["compiled"] for r in runs])
        rate = d["batches"] / w / 1e6
        print(
            f"| {d['label']}: rebuild >= {TARGET_SMALL_BATCHES:.0f} M batches/s | {rate:.2f} M "
            f"batches/s (compiled) | {'yes' if rate >= TARGET_SMALL_BATCHES else '**no**'} |"
        )
    if "16k" in data:
        ratio = med([r["16k"]["dd"] / r["16k"]["compiled"] for r in runs])
        nets = [r["16k"]["compiled"] - r["help"] for r in runs]
        net = f"{med([r['16k']['dd'] / w for r, w in zip(runs, nets, strict=True)]):.0%}" if min(nets) > 0 else "-"
        print(
            f"| 16 KiB batches: rebuild >= {TARGET_LARGE_OF_DD:.0%} of a `dd bs=1M` read | {ratio:.0%} of dd "
            f"(whole process; {net} net of the {fixed:.2f} s fixed cost, for information) "
            f"| {'yes' if ratio >= TARGET_LARGE_OF_DD else '**no**'} |"
        )
        vr = med([r["16k"]["verify"] / r["16k"]["compiled"] for r in runs])
        print(
            f"| 16 KiB batches: verify <= {TARGET_VERIFY_OF_REBUILD}x rebuild (whole processes, same run) | {vr:.2f}x "
            f"| {'yes' if vr <= TARGET_VERIFY_OF_REBUILD else '**no**'} |"
        )
    print()
    print(
        "Where the compiled rebuild's time goes (in this process, same runs, medians; the walls above are whole "
        "processes):"
    )
    print()
    print(
        "| case | streaming summary (`summarize_log`, compiled) | `plan_segment` "
        "| publish (stage + install, fsync) | whole command in-process | process wall (outside) "
        "| the kernel alone: with read-ahead thread, without |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, *_ in CASES:
        if key not in data:
            continue
        n = data[key]["batches"]

        def g(k):
            if k not in runs[0][key]["bd"]:
                return "-"
            s = med([r[key]["bd"][k] for r in runs])
            return f"{s * 1e3:.0f} ms ({s / n * 1e9:.0f} ns/batch)"

        wall = med([r[key]["compiled"] for r in runs])
        print(
            f"| {key} | {g('summary')} | {g('plan')} | {g('publish')} | {g('inproc')} | {wall * 1e3:.0f} ms "
            f"| {g('scan_prefetch_True')}, {g('scan_prefetch_False')} |"
        )
    if "16k" in data:
        print_start_budget(runs, data["16k"]["label"])
    if data.get("profile"):
        print()
        for key, text in data["profile"].items():
            print(f"cProfile of the in-process compiled rebuild, case {key} (top by own time):")
            print()
            print("```")
            print(text)
            print("```")


def print_start_budget(runs: list[dict], label: str) -> None:
    """Why the 16 KiB line holds or not: the wall it allows (dd's seconds over the target) against the
    in-process command and the start-up steps, all from the same runs."""
    dd = med([r["16k"]["dd"] for r in runs])
    allowed = med([r["16k"]["dd"] / TARGET_LARGE_OF_DD for r in runs])
    inproc = med([r["16k"]["bd"]["inproc"] for r in runs])
    left = allowed - inproc  # of the medians, so that the sentence adds up

    def ms(key: str) -> str:
        return f"{med([r['start'][key] for r in runs]) * 1e3:.0f} ms"

    print()
    print(
        f"The 16 KiB line's budget (same runs, medians): dd reads the {label} in {dd * 1e3:.0f} ms, so the line allows "
        f"a whole rebuild process {allowed * 1e3:.0f} ms; the command itself, in a process already started, takes "
        f"{inproc * 1e3:.0f} ms; that leaves **{left * 1e3:.0f} ms for the process start**, against these start-up "
        "steps, each a whole process:"
    )
    print()
    print(
        '| `python -c pass` (interpreter and site) | `python -c "import numpy"` '
        '| `python -c "import indexlib.cli.main"` (every module a rebuild loads) | `python -m indexlib --help` |'
    )
    print("| ---: | ---: | ---: | ---: |")
    print(f"| {ms('python')} | {ms('numpy')} | {ms('modules')} | {ms('help')} |")


# ------------------------------------------------------------------------------------------- main
def scan_part(args, cases) -> int:
    if kernel is None or scan_kernel.KERNEL is None:
        print(f"kernel: the compiled kernel is not built, or {PURE_ENV} is set", file=sys.stderr)
        return 1
    global OTHER_TREE
    OTHER_TREE = os.path.abspath(args.other_tree) if args.other_tree else None
    compile_bytecode()
    if OTHER_TREE:
        compile_bytecode(OTHER_TREE)
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = tempfile.mkdtemp(prefix="bench-kernel-", dir=parent)
    try:
        where = check_modes()
        data: dict = {"indexlib": os.path.dirname(indexlib.__file__)}
        dirs = {}
        for key, label, seg_bytes, batch, producer_id in cases:
            seg_bytes = max(1 << 20, int(seg_bytes * args.scale))
            pdir = os.path.join(root, f"case-{key}", "bench-0")
            os.makedirs(pdir)
            log = os.path.join(pdir, LOG_NAME)
            print(f"[{key}] generating {seg_bytes} B of {batch} B batches ...", file=sys.stderr, flush=True)
            count = write_uniform_segment(log, total_bytes=seg_bytes, batch_bytes=batch, producer_id=producer_id)
            size = os.path.getsize(log)
            if args.scale != 1.0:
                label = f"{size / 2**20:.0f} MiB of {batch}-byte batches" + (
                    " of a producer" if producer_id >= 0 else ""
                )
            data[key] = {"bytes": size, "batches": count, "batch": size // count, "label": label}
            dirs[key] = (pdir, log)
        runs: list[dict] = []
        watch = MachineWatch(sleep_seconds=2.0)
        for run in range(args.runs):
            watch.before_run()
            r: dict = {"help": timed(lambda: run_command(["--help"], "compiled"))}
            r["start"] = {**start_seconds(), "numpy": watch.canary[-1]["start"]}
            for key, *_ in cases:
                pdir, log = dirs[key]
                batch = data[key]["batch"]
                print(f"[run {run + 1}/{args.runs}] {key}", file=sys.stderr, flush=True)
                x: dict = {}
                x["dd"] = dd_seconds(log)
                x["crc16k"] = timed(lambda: crc_pass(log, 16384))
                if batch < 4096:
                    x["crcbatch"] = timed(lambda: crc_pass(log, batch))
                outs = {}
                modes = MODES + (("other",) if OTHER_TREE else ())
                for mode in modes if run % 2 == 0 else modes[::-1]:
                    outs[mode] = tempfile.mkdtemp(prefix=f"out-{key}-{mode}-", dir=root)
                    x[mode], x[f"{mode}_user"], x[f"{mode}_sys"] = timed_command(rebuild_args(pdir, outs[mode]), mode)
                for suffix in (".index", ".timeindex"):
                    a, *others = (os.path.join(outs[m], "bench-0", LOG_NAME.replace(".log", suffix)) for m in modes)
                    if not all(filecmp.cmp(a, b, shallow=False) for b in others):
                        raise BenchError(f"the rebuilds ({', '.join(modes)}) wrote different {suffix} files")
                # verify of a healthy partition: the rebuilt index files beside a hard link of the .log
                healthy = os.path.join(outs["compiled"], "bench-0")
                os.link(log, os.path.join(healthy, LOG_NAME))
                x["verify"], x["verify_user"], x["verify_sys"] = timed_command(verify_args(healthy), "compiled")
                for o in outs.values():
                    shutil.rmtree(o)
                x["bd"] = breakdown(log, root, pdir)
                x["kernel_crc"] = x["bd"]["kernel_crc"]
                r[key] = x
            runs.append(r)
        if args.profile:
            data["profile"] = {key: profile(dirs[key][0], root) for key, *_ in cases}
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"data": data, "runs": runs, "machine": watch.as_json()}, f, indent=1)
        report(data, runs, args, root, watch, where)
        return 0
    except BenchError as exc:
        print(f"kernel: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -------------------------------------------------------------------------------------- alignment
ALIGN_OFFSETS = (0, 16, 32, 64, 4000)
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


def alignment_part(args) -> None:
    """1 MiB ``preadv``s of a page-cached file into one reused buffer ``offset`` bytes past a page (an anonymous
    mapping, so page-aligned; malloc returns large blocks 16 bytes past a page), beside ``dd``."""
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd_tmp, path = tempfile.mkstemp(prefix="bench-read-alignment-", dir=parent)
    try:
        chunk = os.urandom(WINDOW)
        with os.fdopen(fd_tmp, "wb") as f:
            for _ in range(args.mib):
                f.write(chunk)
        size = os.path.getsize(path)
        buffer = mmap.mmap(-1, WINDOW + 2 * mmap.PAGESIZE)
        times: dict[object, list[float]] = {o: [] for o in (*ALIGN_OFFSETS, "dd")}
        ratios: dict[int, list[float]] = {o: [] for o in ALIGN_OFFSETS}
        fd = os.open(path, os.O_RDONLY)
        try:
            for run in range(args.runs):
                order = ALIGN_OFFSETS if run % 2 == 0 else ALIGN_OFFSETS[::-1]
                got = {o: read_all(fd, size, memoryview(buffer)[o : o + WINDOW]) for o in order}
                for o in ALIGN_OFFSETS:
                    times[o].append(got[o])
                    ratios[o].append(got[o] / got[0])
                times["dd"].append(dd_seconds(path))
        finally:
            os.close(fd)
            buffer.close()
    finally:
        os.unlink(path)
    print()
    print(
        f"alignment: a file of {size / 2**20:.0f} MiB in {parent or tempfile.gettempdir()}; {args.runs} runs, medians:"
    )
    print()
    print("| read into | median | GB/s | time / offset 0 (runs) |")
    print("| --- | ---: | ---: | ---: |")
    for o in ALIGN_OFFSETS:
        m = med(times[o])
        print(
            f"| 1 MiB `preadv`s, buffer {o} bytes past a page | {m:.3f} s | {size / m / 1e9:.2f} "
            f"| {med(ratios[o]):.2f} ({', '.join(f'{x:.2f}' for x in ratios[o])}) |"
        )
    m = med(times["dd"])
    print(f"| `dd bs=1M` (limit) | {m:.3f} s | {size / m / 1e9:.2f} | - |")


# ------------------------------------------------------------------------------------------ index
def rate(fn, count: int, runs: int) -> float:
    return med([count / timed(fn) for _ in range(runs)])


def index_part(args) -> None:
    """The index classes: bulk write, bulk read, floor lookups (cold and warm section), beside a numpy memcpy."""
    import numpy as np

    from indexlib import OffsetIndex, TimeIndex

    n, runs = args.entries, args.runs
    offsets = 2 * np.arange(n, dtype=np.int64)
    positions = np.sort(4096 * np.arange(n, dtype=np.int64) % (2**31 - 1))
    timestamps = 1_700_000_000_000 + 3 * np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(42)
    results: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as d:
        for name, cls, keys, values in (
            ("offset", OffsetIndex, offsets, positions),
            ("time", TimeIndex, timestamps, offsets),
        ):
            path = os.path.join(d, f"00000000000000000000.{name}")

            def write():
                if os.path.exists(path):
                    os.unlink(path)
                with cls(path, 0, max_index_size=cls.ENTRY_SIZE * (n + 1)) as index:
                    index.append_many(keys, values)

            def read():
                with cls(path, 0, writable=False) as index:
                    view = index.to_numpy()
                    a, b = (view[field].astype(np.int64) for field in view.dtype.names[:2])
                    assert len(a) == len(b) == n

            results.append((f"{name} index: bulk write (append_many + close)", rate(write, n, runs), "entries/s"))
            results.append(
                (f"{name} index: bulk read (open + to_numpy + native arrays)", rate(read, n, runs), "entries/s")
            )
            with cls(path, 0, writable=False) as index:
                for what, low in (
                    ("random floor lookups (mostly cold section)", 0),
                    ("floor lookups in the warm section", n - 1000),
                ):
                    targets = rng.integers(int(keys[low]), int(keys[-1]) + 1, args.lookups).tolist()

                    def lookups(lookup=index.lookup, targets=targets):
                        for t in targets:
                            lookup(t)

                    results.append((f"{name} index: {what}", rate(lookups, len(targets), runs), "lookups/s"))
    src, dst = np.ones(n * 12, dtype=np.uint8), np.empty(n * 12, dtype=np.uint8)
    bandwidth = rate(lambda: np.copyto(dst, src), n * 12, runs)
    print()
    print(f"index: entries per index {n:,}, lookups {args.lookups:,}, {runs} runs (median); files in the page cache:")
    print()
    print("| operation | median | unit |")
    print("| --- | ---: | --- |")
    for label, value, unit in results:
        print(f"| {label} | {value / 1e6:.2f} M | {unit} |")
    print(f"| physical reference: numpy memcpy of {n * 12 / 1e6:.0f} MB | {bandwidth / 1e9:.2f} G | bytes/s |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="scan", help="comma-separated subset of scan, alignment, index")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default="170,170p,4k,16k", help="scan: comma-separated subset of 170, 170p, 4k, 16k")
    parser.add_argument("--scale", type=float, default=1.0, help="scan: multiply the segment sizes")
    parser.add_argument("--mib", type=int, default=1024, help="alignment: the file's size")
    parser.add_argument("--entries", type=int, default=1_000_000, help="index: entries per index")
    parser.add_argument("--lookups", type=int, default=1_000_000, help="index: lookups per figure")
    parser.add_argument("--json", metavar="FILE", help="scan: also write every raw figure here")
    parser.add_argument("--profile", action="store_true", help="scan: a cProfile of the in-process rebuild at the end")
    parser.add_argument(
        "--other-tree", metavar="DIR", help="scan: another checkout, its compiled rebuild timed in the same runs"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.scale, args.mib, args.entries, args.lookups = 1, 0.01, 16, 10_000, 10_000
    wanted = set(args.cases.split(","))
    cases = [c for c in CASES if c[0] in wanted]
    if not cases:
        parser.error(f"no known case in {args.cases!r}")
    parts = args.parts.split(",")
    code = scan_part(args, cases) if "scan" in parts else 0
    if "alignment" in parts:
        alignment_part(args)
    if "index" in parts:
        index_part(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
