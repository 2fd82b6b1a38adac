"""How long for my broker? Whole ``python -m indexlib`` processes over a broker's log dir, as users run them
(issues 10, 12, 21). Cases (``--cases``, default all):

* ``logdir``: ``python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs 2`` (one process, a pool of 2
  workers) against the scripted way, ``rebuild PARTITION_DIR --jobs 1`` per partition, 2 at a time (a new process
  as soon as one ends, as ``xargs -P 2``; wall from the first start to the last end); and the log-dir command with
  the scan's read-ahead thread off (``KAFKA_INDEX_READ_AHEAD=0``). Corpora (``--corpora``, default a,b; see
  ``common.CORPORA``): a = 4 partitions x 2 segments of 256 MiB, 16 KiB batches; b = 2 x 1 x 136,000,000 bytes
  of 170-byte batches; c = 4 x 2 x 128 MiB, 4 KiB batches. Outputs compared byte for byte after every run.
  Limits beside: one ``cat`` of the ``.log`` files, a bare CRC-32C pass in 16 KiB and in batch-size chunks (one
  process, one core), the fixed cost of a process (``python -m indexlib --help``).
* ``small``: many small segments (``--segments``, default 400, of 256 KiB, 4 KiB batches, in 2 partitions):
  the per-file cost of the index writers; ``rebuild LOG_DIR --jobs 2``; limit: ``cat`` of the same files.
* ``prealloc``: a crashed (or running) broker's active segments keep ``.index``/``.timeindex`` preallocated
  (sparse) to ``segment.index.bytes``: ``verify LOG_DIR --jobs 2`` of ``--partitions`` (default 300) partitions
  of one 300 KiB segment, the index files grown to 10 MiB or cut back to their entries, alternately, in a log
  dir with a broker's ``meta.properties`` and offset checkpoints (each listing every partition); data on
  the disk (tempfile's default dir: sparse files as on a broker's disk). Limit: ``cat`` of the ``.log`` and
  trimmed index files. Then ``rebuild LOG_DIR --jobs 2`` in place over the preallocated state (every index file
  made its rebuild, here by a cut of its zero tail, and fsynced on the disk: the file-system cost of a segment),
  and ``recover`` of a copy of it (the log dir holds a broker's ``meta.properties`` and offset checkpoints,
  recovery points at 0: every segment recovered), and ``kafka-index repair --engine local`` of the preallocated
  state (nothing to write: an active segment's preallocated index is what a broker leaves), with and without its
  audit table. Limit beside rebuild and recover: the file system's fsyncs alone (``FSYNCED_PER_PARTITION``); and
  recover's work alone, the same recover with every ``fsync`` skipped (``common.CMD_NOTHING_DURABLE``). And
  ``recover --sync syncfs`` (one ``syncfs`` per file system instead of an fsync per file).

* ``syscalls``: the file-system calls a segment costs (issue 24): ``strace -f -c`` of ``rebuild LOG_DIR --jobs 1``
  (in place: segments without index files, and a crashed broker's with preallocated ones) and ``verify LOG_DIR
  --jobs 1`` over 10 and over 10 + ``--partitions`` partitions of one 300 KiB segment (10, not 1: a run of one
  segment skips imports a run of several makes, such as the threads of concurrent fsyncs, which would count as
  per-segment calls); the difference divided by the added segments, per call (a stat of a path apart from one of a
  descriptor, and how many stats were of a path already stat'ed). Needs ``strace``.

``--other-tree DIR`` times the same commands of another checkout in the same runs (log dir, small, prealloc).

Run: ``.venv/bin/python benchmarks/broker.py [--cases logdir,small,prealloc] [--runs R] [--scale S]
[--corpora a,b,c] [--segments N] [--partitions N] [--other-tree DIR] [--json FILE]``; ``--quick``: the smallest
sizes, one run (seconds). About 3 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    GB,
    MIB,
    REPO,
    BenchError,
    MachineWatch,
    cat_seconds,
    compare_trees,
    compile_bytecode,
    crc_pass,
    fsync_floor_seconds,
    header,
    make_corpus,
    make_log_dir,
    med,
    print_other_tree_table,
    run_indexlib,
    run_kafka_index,
    runs_list,
    scratch,
    timed,
)

JOBS = 2  # --jobs of the log-dir command, and processes at a time of the per-partition way


def rebuild_way(target: str, out: str, tree: str = REPO, jobs: int = JOBS, **env: str) -> float:
    return timed(lambda: run_indexlib(["rebuild", target, "--output-dir", out, "--jobs", str(jobs)], tree, **env))


def per_partition_way(pdirs: list[str], out: str) -> float:
    def all_of_them() -> None:
        with ThreadPoolExecutor(max_workers=JOBS) as pool:
            for future in [pool.submit(rebuild_way, p, out, REPO, 1) for p in pdirs]:
                future.result()

    return timed(all_of_them)


# ------------------------------------------------------------------------------------------ logdir
def logdir_case(root: str, args, other: str | None) -> None:
    corpora = [make_corpus(root, key, args.scale, 100 * i) for i, key in enumerate(args.corpora.split(","))]
    runs: list[dict] = []
    watch = MachineWatch()
    for run in range(args.runs):
        watch.before_run()
        r: dict = {"help": timed(lambda: run_indexlib(["--help"]))}
        for c in corpora:
            key, files = c["key"], c["files"]
            print(f"[run {run + 1}/{args.runs}] logdir {key}", file=sys.stderr, flush=True)
            x: dict = {"cat": cat_seconds(files)}
            x["crc16k"] = timed(lambda: [crc_pass(f, 16384) for f in files])
            x["crcbatch"] = timed(lambda: [crc_pass(f, c["batch"]) for f in files])
            outs = {
                w: tempfile.mkdtemp(prefix=f"out-{key}-{w}-", dir=root) for w in ("logdir", "parts", "off", "other")
            }
            ways = [
                ("logdir", lambda: rebuild_way(c["log_dir"], outs["logdir"])),
                ("parts", lambda: per_partition_way(c["pdirs"], outs["parts"])),
                ("off", lambda: rebuild_way(c["log_dir"], outs["off"], KAFKA_INDEX_READ_AHEAD="0")),
            ]
            if other:
                ways.append(("other", lambda: rebuild_way(c["log_dir"], outs["other"], other)))
            for way, fn in ways if run % 2 == 0 else ways[::-1]:
                x[way] = fn()
            for way, _ in ways[1:]:
                c["compared"] = compare_trees(outs["logdir"], outs[way], c["names"])
            for out in outs.values():
                shutil.rmtree(out)
            r[key] = x
        runs.append(r)
    header(f"logdir: files in {root} ; --scale {args.scale}", len(runs), watch)
    print()
    print(
        f"**log dir** = `python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs {JOBS}`; **per partition** = "
        f"`python -m indexlib rebuild PARTITION_DIR --output-dir OUT --jobs 1`, {JOBS} at a time; **read-ahead off** = "
        "the log-dir command with `KAFKA_INDEX_READ_AHEAD=0`. Whole processes timed from outside, outputs identical "
        "byte for byte. Limits: one process, one core; fixed cost = `python -m indexlib --help`:"
    )
    print()
    print(
        "| corpus | log dir | per partition | log dir / per partition (runs) | read-ahead off / on (runs) "
        "| `cat` of the .log files | bare CRC-32C 16 KiB chunks | CRC-32C in batch-size chunks | fixed cost |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    fixed = med([r["help"] for r in runs])
    for c in corpora:
        key, size, n = c["key"], c["bytes"], c["batches"]
        m = {k: med([r[key][k] for r in runs]) for k in runs[0][key]}
        vs_parts = [r[key]["logdir"] / r[key]["parts"] for r in runs]
        off = [r[key]["off"] / r[key]["logdir"] for r in runs]
        print(
            f"| {key}: {c['label']} | {m['logdir']:.3f} s: {size / m['logdir'] / GB:.2f} GB/s, "
            f"{n / m['logdir'] / 1e6:.2f} M batches/s (runs {runs_list([r[key]['logdir'] for r in runs], '{:.3f}')}) "
            f"| {m['parts']:.3f} s: {size / m['parts'] / GB:.2f} GB/s | **{med(vs_parts):.2f}** ({runs_list(vs_parts)}) "
            f"| {med(off):.2f} ({runs_list(off)}) | {size / m['cat'] / GB:.2f} GB/s | {size / m['crc16k'] / GB:.2f} GB/s "
            f"| {n / m['crcbatch'] / 1e6:.2f} M chunks/s | {fixed:.3f} s |"
        )
    if other:
        rows = []
        for c in corpora:
            key, size, n = c["key"], c["bytes"], c["batches"]
            this, that = (med([r[key][w] for r in runs]) for w in ("logdir", "other"))
            cells = [f"{w:.3f} s, {size / w / GB:.2f} GB/s, {n / w / 1e6:.2f} M/s" for w in (this, that)]
            rows.append((key, *cells, [r[key]["other"] / r[key]["logdir"] for r in runs]))
        print_other_tree_table(other, "its log-dir command", rows)
    args.raw["logdir"] = {"runs": runs, "machine": watch.as_json()}


# ------------------------------------------------------------------------------------------- small
def small_case(root: str, args, other: str | None) -> None:
    seg_bytes = 256 * 1024
    logs = os.path.join(root, "small")
    make_log_dir(logs, "small", 2, args.segments // 2, seg_bytes, 4096)
    files = [p for p in _files(logs)]
    size = sum(os.path.getsize(f) for f in files)
    trees = {"this": REPO} | ({"other": other} if other else {})
    walls: dict[str, list[float]] = {t: [] for t in trees}
    cats = []
    for run in range(args.runs):
        cats.append(cat_seconds(files))
        for name, tree in trees.items() if run % 2 == 0 else reversed(trees.items()):
            out = os.path.join(root, f"out-small-{name}")
            walls[name].append(rebuild_way(logs, out, tree))
        if other:
            compare_trees(os.path.join(root, "out-small-this"), os.path.join(root, "out-small-other"))
        for name in trees:
            shutil.rmtree(os.path.join(root, f"out-small-{name}"))
    segments = len(files)
    print()
    print(
        f"small: {segments} segments of {seg_bytes // 1024} KiB, 4 KiB batches ({size / MIB:.0f} MiB, two index files "
        f"written per segment) in 2 partitions; `python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs {JOBS}`; "
        f"{args.runs} runs, medians:"
    )
    print()
    print("| tree | wall | per segment | this / other (runs) | limit: `cat` of the same files |")
    print("| --- | ---: | ---: | ---: | ---: |")
    ratios = [a / b for a, b in zip(walls["this"], walls.get("other", walls["this"]), strict=True)]
    for name, tree in trees.items():
        w = med(walls[name])
        ratio = f"**{med(ratios):.2f}** ({runs_list(ratios)})" if other and name == "this" else ""
        limit = f"{med(cats):.3f} s ({size / med(cats) / GB:.2f} GB/s)" if name == "this" else ""
        print(f"| {name} ({tree}) | {w:.3f} s | {w / segments * 1e3:.2f} ms | {ratio} | {limit} |")
    args.raw["small"] = {"walls": walls, "cat": cats}


def _files(root: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)


# ---------------------------------------------------------------------------------------- prealloc
PREALLOCATED = 10 * 1024 * 1024  # Kafka's default segment.index.bytes
ENTRY_SIZES = {".index": 8, ".timeindex": 12}


def write_broker_files(logs: str, pdirs: list[str]) -> None:
    """What a broker's log dir holds beside its partitions: ``meta.properties`` and its offset checkpoints, each
    listing every partition (at offset 0: a broker killed in its first minutes)."""
    names = [os.path.basename(p).rpartition("-") for p in pdirs]
    entries = "".join(f"{topic} {n} 0\n" for topic, _, n in names)
    for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        with open(os.path.join(logs, name), "w") as f:
            f.write(f"0\n{len(names)}\n{entries}")
    with open(os.path.join(logs, "meta.properties"), "w") as f:
        f.write("node.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")


#: what each command must make durable per partition of the prealloc state (one segment each), as (new files, files
#: cut in place): rebuild cuts the `.index` and `.timeindex` (their entries are the rebuild's, then zeros); recover
#: cuts those and writes the producer snapshot and leader-epoch-checkpoint at the log end and the rolled empty
#: segment's three files (the backups hold nothing: the old indexes are the new ones and zeros)
FSYNCED_PER_PARTITION = {"rebuild": (0, 2), "recover --backup-dir": (5, 2)}


def prealloc_case(args, other: str | None) -> None:
    with scratch("bench-prealloc-", memory=False) as root:
        logs = os.path.join(root, "logs")
        pdirs, logs_files, _, _ = make_log_dir(logs, "crashed", args.partitions, 1, 300 * 1024, 4096, indexes=True)
        write_broker_files(logs, pdirs)
        index = {p: os.path.getsize(p) for p in _files(logs) if os.path.splitext(p)[1] in ENTRY_SIZES}

        def set_sizes(preallocated: bool) -> None:
            for path, trimmed in index.items():
                es = ENTRY_SIZES[os.path.splitext(path)[1]]
                os.truncate(path, PREALLOCATED - PREALLOCATED % es if preallocated else trimmed)

        trees = {"this": REPO} | ({"other": other} if other else {})
        times: dict[tuple[str, bool], list[float]] = {(t, p): [] for t in trees for p in (False, True)}
        rebuilds: dict[str, list[float]] = {t: [] for t in trees}
        repairs: dict[tuple[str, bool], list[float]] = {(t, a): [] for t in trees for a in (False, True)}
        recovers: dict[str, list[float]] = {t: [] for t in trees}
        syncfs: list[float] = []  # recover --sync syncfs
        unsynced: list[float] = []  # recover with no fsync: its work alone, the floor of any durable recover
        cats = []
        floors: dict[str, list[float]] = {"rebuild": [], "recover --backup-dir": []}
        for run in range(args.runs):
            set_sizes(False)
            cats.append(cat_seconds(logs_files + list(index)))
            for preallocated in (False, True) if run % 2 == 0 else (True, False):
                set_sizes(preallocated)
                for name, tree in trees.items():
                    verify = ["verify", logs, "--jobs", str(JOBS)]
                    times[(name, preallocated)].append(timed(lambda: run_indexlib(verify, tree)))
            for name, tree in trees.items() if run % 2 == 0 else reversed(trees.items()):
                set_sizes(True)  # a crashed broker's active segments: every index file rewritten, in place, on disk
                rebuild = ["rebuild", logs, "--jobs", str(JOBS), "-q"]
                rebuilds[name].append(timed(lambda: run_indexlib(rebuild, tree)))
            set_sizes(True)  # repair finds nothing to write: an active segment's preallocated index is a broker's own
            for name, tree in trees.items() if run % 2 == 0 else reversed(trees.items()):
                for audited in (False, True):
                    table = os.path.join(root, f"audit-{name}-{run}") if audited else "none"
                    repair = ["repair", "--engine", "local", "--log-dir", logs, "--audit-table", table, "-q"]
                    repair += ["--backup-dir", os.path.join(root, "repair-backups")]
                    repairs[(name, audited)].append(timed(lambda: run_kafka_index(repair, tree)))
            set_sizes(True)
            for name, tree in trees.items() if run % 2 == 0 else reversed(trees.items()):
                # recover of a copy (it rolls a segment and moves the recovery points): the copy is not timed
                work, backups = os.path.join(root, "recover"), os.path.join(root, "backups")
                shutil.rmtree(work, ignore_errors=True)
                shutil.rmtree(backups, ignore_errors=True)
                subprocess.run(["cp", "-a", "--sparse=always", logs, work], check=True)
                os.sync()
                recover = ["recover", work, "--jobs", str(JOBS), "--backup-dir", backups, "-q"]
                recovers[name].append(timed(lambda: run_indexlib(recover, tree)))
                if name != "this":
                    continue
                # the same recover of fresh copies: durable by one syncfs per file system; with every fsync skipped
                # (nothing durable: its work alone)
                ways = [("syncfs", syncfs, True), ("none", unsynced, False)]
                for way, walls, durable in ways if run % 2 == 0 else reversed(ways):
                    shutil.rmtree(work)
                    shutil.rmtree(backups, ignore_errors=True)
                    subprocess.run(["cp", "-a", "--sparse=always", logs, work], check=True)
                    os.sync()
                    sync = ["--sync", "syncfs"] if way == "syncfs" else []
                    walls.append(timed(lambda: run_indexlib(recover + sync, tree, durable=durable)))
                    os.sync()  # not timed: what a run left unwritten is not the next command's cost
            # the file system's floor for each: the files it must make durable, alone (see FSYNCED_PER_PARTITION)
            for command, (files, cut) in FSYNCED_PER_PARTITION.items():
                floors[command].append(fsync_floor_seconds(root, args.partitions, files, cut))
    print()
    print(
        f"prealloc: {args.partitions} partitions of one 300 KiB active segment (4 KiB batches), on disk, their "
        f"`.index`/`.timeindex` trimmed or preallocated to {PREALLOCATED // MIB} MiB (sparse); `python -m indexlib "
        f"verify LOG_DIR --jobs {JOBS}`; {args.runs} runs, medians:"
    )
    print()
    print(
        "| tree | trimmed | preallocated | preallocated / trimmed (runs) | limit: `cat` of the .log and trimmed index files |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, tree in trees.items():
        trimmed, pre = times[(name, False)], times[(name, True)]
        ratios = [p / t for p, t in zip(pre, trimmed, strict=True)]
        limit = f"{med(cats):.3f} s" if name == "this" else ""
        print(
            f"| {name} ({tree}) | {med(trimmed):.2f} s | {med(pre):.2f} s | **{med(ratios):.2f}** ({runs_list(ratios)}) "
            f"| {limit} |"
        )
    print()
    print(
        f"`python -m indexlib rebuild LOG_DIR --jobs {JOBS}` in place (the same partitions, on disk: every index file "
        f"made its rebuild and fsynced), and `recover LOG_DIR --jobs {JOBS} --backup-dir DIR` of "
        f"a copy (recovery points at 0: every segment; backups, snapshots, a rolled segment each); {args.runs} runs, "
        "medians:"
    )
    print()
    for command, walls in (("rebuild", rebuilds), ("recover --backup-dir", recovers)):
        files, cut = FSYNCED_PER_PARTITION[command]
        made = f"{files} new files + 1 dir, " if files else ""
        print(
            f"| tree | {command} | per segment | this / other (runs) | limit: {made}{cut} files cut, fsynced "
            "per partition, 16 at once |"
        )
        print("| --- | ---: | ---: | ---: | ---: |")
        ratios = [a / b for a, b in zip(walls["this"], walls.get("other", walls["this"]), strict=True)]
        for name, tree in trees.items():
            w = med(walls[name])
            ratio = f"**{med(ratios):.2f}** ({runs_list(ratios)})" if other and name == "this" else ""
            limit = f"{med(floors[command]):.2f} s ({runs_list(floors[command])})" if name == "this" else ""
            print(f"| {name} ({tree}) | {w:.2f} s | {w / args.partitions * 1e3:.2f} ms | {ratio} | {limit} |")
        if command.startswith("recover"):
            print(
                f"| this, `--sync syncfs` (one syncfs per file system) | {med(syncfs):.2f} s ({runs_list(syncfs)}) | "
                f"{med(syncfs) / args.partitions * 1e3:.2f} ms | | |"
            )
            print(
                f"| this, every fsync skipped (nothing durable: its work alone) | {med(unsynced):.2f} s "
                f"({runs_list(unsynced)}) | {med(unsynced) / args.partitions * 1e3:.2f} ms | | |"
            )
        print()
    print(
        "`kafka-index repair --engine local` of the preallocated state (the JVM-less job: the same engine, its rows "
        "written to a Delta audit table or not):"
    )
    print()
    print("| tree | repair, `--audit-table none` | repair, its rows into a new audit table |")
    print("| --- | ---: | ---: |")
    for name, tree in trees.items():
        print(f"| {name} ({tree}) | {med(repairs[(name, False)]):.2f} s | {med(repairs[(name, True)]):.2f} s |")
    print()
    args.raw["prealloc"] = {f"{t} {'preallocated' if p else 'trimmed'}": v for (t, p), v in times.items()}
    args.raw["prealloc rebuild"] = rebuilds
    args.raw["prealloc repair"] = {f"{t} {'audited' if a else 'no audit'}": v for (t, a), v in repairs.items()}
    args.raw["prealloc recover"] = recovers
    args.raw["prealloc recover, syncfs"] = syncfs
    args.raw["prealloc recover, no fsync"] = unsynced
    args.raw["prealloc fsync floors"] = floors


# ---------------------------------------------------------------------------------------- syscalls
#: the calls a segment's files cost, grouped as RESULTS.md reports them
SYSCALL_GROUPS = {
    "stat (path)": ("newfstatat", "statx", "stat", "lstat", "access", "faccessat", "faccessat2"),
    "stat again": ("stat again",),
    "fstat": ("fstat",),
    "open": ("openat", "open"),
    "ftruncate": ("ftruncate",),
    "fallocate": ("fallocate",),
    "fsync": ("fsync", "fdatasync"),
    "msync": ("msync",),
    "mmap": ("mmap",),
    "rename": ("rename", "renameat", "renameat2"),
    "mkdir": ("mkdir", "mkdirat"),
    "unlink": ("unlink", "unlinkat"),
    "pread": ("pread64", "preadv"),
}


def syscall_counts(args: list[str], tree: str) -> dict[str, int]:
    """Calls per syscall of one whole ``python -m indexlib ARGS`` process and its children (``strace -f``), with
    ``fstat`` (a stat of a descriptor) told apart from a stat of a path, and ``stat again``: stats of a path this
    process had already stat'ed."""
    import re
    import subprocess

    from common import CMD, tree_env

    call = re.compile(r"^\d+\s+(?:<\.\.\. )?(\w+)\(")
    path_stat = re.compile(
        r'^\d+\s+(?:newfstatat|statx|stat|lstat|access)\(AT_FDCWD, "([^"]*)"|^\d+\s+(?:stat|lstat|access)\("([^"]*)"'
    )
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        proc = subprocess.run(
            ["strace", "-f", "-o", out.name, *CMD, *args], cwd=tree, env=tree_env(tree), capture_output=True
        )
        if proc.returncode != 0:
            raise BenchError(
                f"strace of `python -m indexlib {' '.join(args)}` exited with {proc.returncode}: {proc.stderr[-2000:]!r}"
            )
        counts: dict[str, int] = {}
        seen: set[tuple[str, str]] = set()
        for line in out:
            if "resumed>" in line:
                continue
            m = call.match(line)
            if not m:
                continue
            name = m.group(1)
            if name in ("newfstatat", "statx") and "AT_EMPTY_PATH" in line:
                name = "fstat"
            counts[name] = counts.get(name, 0) + 1
            if (ps := path_stat.match(line)) is not None:
                key = (line.split()[0], ps.group(1) or ps.group(2))
                if key in seen:
                    counts["stat again"] = counts.get("stat again", 0) + 1
                seen.add(key)
    return counts


def syscalls_case(root: str, args, other: str | None) -> None:
    if shutil.which("strace") is None:
        raise BenchError("syscalls: needs strace (apt-get install strace)")
    added = args.partitions
    made = {}
    base = 10  # not 1: every run of several segments makes the same imports (concurrent fsyncs' threads)
    for n in (base, base + added):
        made[n] = os.path.join(root, f"sys-made-{n}-logs")
        make_log_dir(made[n], "sys", n, 1, 300 * 1024, 4096)
    trees = {"this": REPO} | ({"other": other} if other else {})
    per: dict[tuple[str, str], dict[str, float]] = {}
    for name, tree in trees.items():
        for command in ("rebuild", "verify", "rebuild (preallocated)"):
            counts = {}
            for n, source in made.items():
                logs = os.path.join(root, f"sys-{name}-{n}-logs")  # not "<topic>-<n>": a partition's name
                shutil.copytree(source, logs)
                if command != "rebuild":  # index files beside the segments: rebuilt, then (a crash) preallocated
                    run_indexlib(["rebuild", logs], tree)
                if command == "rebuild (preallocated)":
                    for path in _files(logs):
                        if os.path.splitext(path)[1] in ENTRY_SIZES:
                            es = ENTRY_SIZES[os.path.splitext(path)[1]]
                            os.truncate(path, PREALLOCATED - PREALLOCATED % es)
                counts[n] = syscall_counts([command.split()[0], logs, "--jobs", "1"], tree)
                shutil.rmtree(logs)
            per[(name, command)] = {
                group: sum(counts[base + added].get(c, 0) - counts[base].get(c, 0) for c in calls) / added
                for group, calls in SYSCALL_GROUPS.items()
            }
    print()
    print(
        f"syscalls: per segment (one 300 KiB segment per partition, 4 KiB batches), from `strace -f -c` of "
        f"`python -m indexlib COMMAND LOG_DIR --jobs 1` over {base} and over {base + added} partitions:"
    )
    print()
    print("| tree | command | " + " | ".join(SYSCALL_GROUPS) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in SYSCALL_GROUPS) + " |")
    for (name, command), groups in per.items():
        print(f"| {name} | {command} | " + " | ".join(f"{groups[g]:.1f}" for g in SYSCALL_GROUPS) + " |")
    args.raw["syscalls"] = {f"{n} {c}": g for (n, c), g in per.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="logdir,small,prealloc")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the log dirs' segment sizes")
    parser.add_argument("--corpora", default="a,b", help="logdir: comma-separated subset of a, b, c")
    parser.add_argument("--segments", type=int, default=400, help="small: segments in the log dir")
    parser.add_argument(
        "--partitions", type=int, default=300, help="prealloc: partitions in the log dir; syscalls: partitions added"
    )
    parser.add_argument("--other-tree", metavar="DIR", help="another checkout, timed in the same runs")
    parser.add_argument("--json", metavar="FILE", help="also write every raw figure here")
    parser.add_argument("--quick", action="store_true", help="smallest sizes, one run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.scale, args.segments, args.partitions = 1, 0.01, 20, 20
    args.raw = {}
    other = os.path.abspath(args.other_tree) if args.other_tree else None
    cases = args.cases.split(",")
    compile_bytecode()
    if other:
        compile_bytecode(other)
    try:
        with scratch("bench-broker-") as root:
            if "logdir" in cases:
                logdir_case(root, args, other)
            if "small" in cases:
                small_case(root, args, other)
            if "syscalls" in cases:
                syscalls_case(root, args, other)
        if "prealloc" in cases:
            prealloc_case(args, other)
    except BenchError as exc:
        print(f"broker: FAILED: {exc}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(args.raw, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
