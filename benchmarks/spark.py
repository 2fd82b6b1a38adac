"""How does Spark scale? The Spark pipeline (``jobs``, issues 4, 10, 11, 13): throughput against the indexlib
core on the same data, scaling from ``local[1]`` to ``local[2]``, the fixed cost of a run, physical limits beside;
and with ``--cluster`` the same verify on a standalone cluster against ``local[2]`` as whole ``spark-submit``
processes.

Run: ``.venv/bin/python benchmarks/spark.py [--runs R] [--reps K] [--scale S] [--json FILE] [--other-tree DIR]``;
about 13 minutes with the defaults (3 runs, 3 reps). ``--scale`` multiplies the segment sizes; ``--quick``: small
log dirs, one run of one rep (about a minute: the JVMs start four times). ``--cluster``: see :func:`cluster`
(``--runs 3``: about 3 minutes; needs ``make package``'s executor archive, which it builds when missing).

``--other-tree DIR``: another checkout of the project (its extension built in place, e.g. ``python setup.py
build_ext --inplace`` there); one more Spark child per run, ``local[2]`` as shipped, imports that checkout (its
driver's ``indexlib`` and ``jobs`` and its Python workers' ``indexlib`` are checked to come from it), for a
same-run ratio between two versions; the five children's order alternates between runs. Every child's rebuild
output (the first rep's index files) is compared across children.

Data, generated once in a temporary directory under ``/dev/shm`` when it exists (so always in memory),
with ``indexlib.testing.generate.write_uniform_segment`` (equal uncompressed v2 batches of 4096 bytes):

* log dir A: one partition ``bench-a-0`` of 8 segments of 128 MiB (1 GiB); base offsets consecutive
  (each segment's base = the previous segment's last offset + 1);
* log dir B: 16 partitions ``bench-b-0`` .. ``bench-b-15`` of one 64 MiB segment each (1 GiB);
* a tiny log dir: one partition ``tiny-0`` of one 1 MiB segment.

A and B hold different topics, as a broker's log dirs do (a partition lives in one log dir), so that
one job can take both: the rebuild's ``--output-dir`` is laid out by partition name.
Every partition first gets its correct index files (``indexlib.engine.rebuild_partition`` in place),
checked healthy with ``indexlib.engine.verify_partition``, so a verify is a realistic healthy run.
``index.interval.bytes=4096``, ``segment.index.bytes=10485760`` (the defaults) everywhere.

Three Spark jobs are measured per mode: A alone, B alone, and "A+B": ONE job over both log dirs
(``discover([A, B])``, 2 GiB; the job the issue's acceptance text names). For A+B the core figure is
core A + core B and the ceiling is A's plus B's, all measured in the same run.

Per run, in this order:

* physical limits, per log dir: one ``cat`` of all its ``.log`` files to ``/dev/null``; a bare CRC-32C
  pass over every file mapped as the scan maps it, in 16 KiB and in 4 KiB (batch-size) chunks
  (``common.crc_pass``);
* the indexlib core alone, in this process: ``rebuild_partition(p, output_dir=<temp>)`` and
  ``verify_partition(p)`` over every partition of the log dir, one after the other;
* the parallel ceiling of the machine without Spark: the pipeline's executor function
  (``indexlib.engine.segment_task.process_segment``, verify work) over all segments in this process, and split by bytes
  over two forked, warmed-up processes (``multiprocessing``); the ratio is what two processes give at all;
* Spark: for each master (``local[1]``, ``local[2]``) and each Spark conf ("as shipped": the conf of
  ``conf/defaults.yaml``, which enables ``spark.python.unix.domain.socket.enabled``, Unix domain sockets
  between the JVM and its Python workers; "TCP": that set back to ``false``, Spark's default loopback
  TCP, shown for comparison) a FRESH child process builds the session the CLI builds
  (``jobs.session.spark_session``, master overridden; the order of the four children alternates between
  runs), runs a cold tiny verify, warms one Python worker per slot up, then times ``--reps`` warm tiny
  verifies, ``--reps`` jobs of 16 empty Python tasks and, for A, B and A+B, ``--reps`` verifies and
  ``--reps`` rebuilds into a temp ``--output-dir`` (``discover`` + ``jobs.pipeline.run``, audit
  disabled; exit code 0 checked). A run is one Spark job (executors scan, plan, check and, for a
  rebuild, stage the ``.index``/``.timeindex`` files), then the driver's producer-state replay and
  ``.txnindex`` checks, then the driver's commit (renames of the staged files, ``.txnindex`` writes).
  Beside each run's wall time the child records: the pipeline's own ``RunReport.phase_seconds``
  ("scan": the Spark job including collect; "replay"; "commit"); the executor compute (sum of the
  per-segment ``seconds`` the executors report: scan, plan, check and, for a rebuild, the staging
  writes); the ideal makespan of the job's bins on the master's slots (the pipeline's binning,
  ``balance_by_bytes`` into ``jobs.pipeline.task_count(bytes, slots, bytes_per_task)`` bins, each bin's
  compute, bins handed to free slots in order); the CPU seconds the driver, the JVM and the Python workers
  used during the run (``/proc/<pid>/stat``); the size and pickle round trip of the collected outcomes;
* the fixed cost: the wall time of a whole ``kafka-index verify --log-dir <tiny> --audit-table none
  --no-progress`` command (process start, imports, JVM and session start, job, exit; default master
  ``local[*]``, conf as shipped), and of ``python -c "import jobs.cli, jobs.pipeline, pyspark.sql"``.

Each child reports the median of its ``--reps``; every figure below is then the median over ``--runs``
runs, and every ratio is taken within one run (same data, minutes apart) before its median is taken.
GB = 1e9 bytes, MiB = 2**20 bytes. Prints Markdown. Everything generated is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TREE_ENV = "BENCH_JOBS_TREE"  # a Spark child's checkout (--other-tree), before this one on the path
TREE = os.environ.get(TREE_ENV, REPO)
sys.path.insert(0, TREE)

# indexlib and jobs first, from TREE: bench_rebuild puts this checkout first on the path when it loads, and
# a package once imported stays the one every later import of its modules uses
import indexlib  # noqa: E402
import jobs  # noqa: E402
from indexlib.engine import rebuild_partition, verify_partition  # noqa: E402
from indexlib.engine.options import RunOptions  # noqa: E402
from indexlib.engine.segment_task import plan_tasks, process_segment  # noqa: E402
from indexlib.format.layout import segment_file  # noqa: E402
from indexlib.storage.discovery import discover  # noqa: E402
from indexlib.testing.generate import write_uniform_segment  # noqa: E402
from jobs.config import resolve_settings  # noqa: E402
from jobs.pipeline import balance_by_bytes, task_count  # noqa: E402

sys.path.insert(1, HERE)
from common import (  # noqa: E402
    MachineWatch,
    compile_bytecode,
    crc_pass,
    machine_line,
    med,
    print_other_tree_table,
    timed,
    tree_digest,
)

INDEX_INTERVAL_BYTES = 4096
SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
BATCH_BYTES = 4096
MASTERS = ("local[1]", "local[2]")
# Spark children: (name, master, extra Spark conf). "as shipped" = conf/defaults.yaml's conf, which uses Unix
# domain sockets between the JVM and the Python workers (SPARK-51688, Spark >= 4.1); "TCP" turns them off
# again: Spark's default, loopback TCP, shown for comparison.
CONFS = {"as shipped": {}, "TCP": {"spark.python.unix.domain.socket.enabled": "false"}}
VARIANTS = [(f"{m} {c}", m, c) for c in CONFS for m in MASTERS]
OTHER = "local[2] as shipped, other tree"  # --other-tree's child
OTHER_TREE: str | None = None
SCALING_TARGET = 1.7
OVERHEAD_TARGET = 15.0
KAFKA_INDEX = os.path.join(os.path.dirname(sys.executable), "kafka-index")

DATASETS = [
    # key, topic, partitions, segments per partition, segment bytes (times --scale)
    ("A", "bench-a", 1, 8, 128 << 20),
    ("B", "bench-b", 16, 1, 64 << 20),
]
# One Spark job over several log dirs: key -> the DATASETS keys it takes. A+B is the job the issue names.
COMBINED = {"A+B": ("A", "B")}
KEYS = [d[0] for d in DATASETS] + list(COMBINED)
PHASES = ("scan", "replay", "commit")  # indexlib.engine.runner.RunReport.phase_seconds


# ------------------------------------------------------------------------------------------ data
def make_log_dir(log_dir: str, topic: str, partitions: int, segments: int, segment_bytes: int, seed: int) -> list[str]:
    """``partitions`` dirs ``<topic>-<n>`` of ``segments`` consecutive segments each, with correct indexes."""
    dirs = []
    for n in range(partitions):
        pdir = os.path.join(log_dir, f"{topic}-{n}")
        os.makedirs(pdir)
        base = 0
        for s in range(segments):
            count = write_uniform_segment(
                segment_file(pdir, base, ".log"),
                base_offset=base,
                total_bytes=segment_bytes,
                batch_bytes=BATCH_BYTES,
                seed=seed + 1000 * n + s,
            )
            base += count  # one record per batch: next base = last offset + 1
        rebuild_partition(pdir, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES)
        assert verify_partition(pdir, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES).healthy, pdir
        dirs.append(pdir)
    return dirs


def log_files(partition_dirs: list[str]) -> list[str]:
    return [os.path.join(p, name) for p in partition_dirs for name in sorted(os.listdir(p)) if name.endswith(".log")]


# ------------------------------------------------------------------------------ parallel ceiling
def _verify_group(tasks) -> int:
    for t in tasks:
        process_segment(t)
    return len(tasks)


def _noop(x):
    return x


def ceiling(log_dir: str, pool) -> tuple[float, float]:
    """(one process, two forked processes): process_segment (verify work) over every segment."""
    settings = resolve_settings(log_dirs=[log_dir], audit_table="none")
    tasks = plan_tasks(discover([log_dir]), RunOptions("verify"), "bench", settings.for_topic)
    halves = balance_by_bytes(tasks, [t.size for t in tasks], 2)
    one = timed(lambda: _verify_group(tasks))
    two = timed(lambda: pool.map(_verify_group, halves, chunksize=1))
    return one, two


# ------------------------------------------------------------------------------------- the child
def makespan(durations: list[float], slots: int) -> float:
    """Tasks handed, in order, to the first free of ``slots`` (Spark's local scheduler, one task per core)."""
    free = [0.0] * slots
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free) if free else 0.0


def tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of ``root`` ("driver"), the JVM under it ("jvm") and the Python
    workers under the JVM ("workers", with their daemon), from ``/proc/<pid>/stat``."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        close = stat.rindex(")")
        fields = stat[close + 2 :].split()
        procs[int(name)] = (
            int(fields[1]),
            stat[stat.index("(") + 1 : close],
            (int(fields[11]) + int(fields[12])) / tick,
        )
    out = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
    for pid, (_ppid, comm, cpu) in procs.items():
        chain, p = [], pid
        while p in procs and p != root and p > 1:
            chain.append(procs[p][1])
            p = procs[p][0]
        if pid == root:
            out["driver"] += cpu
        elif p == root:
            out["jvm" if comm == "java" else "workers" if "java" in chain[1:] else "driver"] += cpu
    return out


def child(master: str, spec: dict) -> dict:
    """One fresh process per master: session, tiny jobs, then the big jobs; returns medians of ``reps``."""
    from jobs.pipeline import run
    from jobs.session import spark_session

    reps = spec["reps"]
    out: dict = {"master": master}
    settings = resolve_settings(log_dirs=[spec["tiny"]], audit_table="none")
    settings.spark_master = master
    settings.spark_conf.update(CONFS[spec["conf"]])
    holder = {}
    out["session_start"] = timed(lambda: holder.setdefault("spark", spark_session(settings, "bench-jobs")))
    spark = holder["spark"]
    sc = spark.sparkContext
    slots = sc.defaultParallelism

    def job(log_dirs: list[str], mode: str, output_dir: str | None = None):
        box = {}

        def go():
            found = discover(log_dirs)
            box["r"] = run(spark, found, settings, RunOptions(mode, output_dir=output_dir))

        cpu0 = tree_cpu(os.getpid())
        seconds = timed(go)
        cpu1 = tree_cpu(os.getpid())
        assert box["r"].exit_code == 0, f"{mode} of {log_dirs}: exit code {box['r'].exit_code}"
        box["r"].cpu = {k: cpu1[k] - cpu0[k] for k in cpu0}
        return seconds, box["r"]

    out["tiny_cold"] = job([spec["tiny"]], "verify")[0]
    # Start (and import indexlib in) one Python worker per slot, as the big jobs will use them all.
    pids = (
        sc.parallelize(range(4 * slots), 4 * slots)
        .map(lambda _: (__import__("jobs.pipeline"), os.getpid())[1])
        .collect()
    )
    out["workers"] = len(set(pids))
    out["driver_trees"] = sorted({os.path.dirname(os.path.dirname(m.__file__)) for m in (indexlib, jobs)})
    out["worker_indexlib"] = sorted(
        set(
            sc.parallelize(range(2 * slots), 2 * slots)
            .map(lambda _: os.path.dirname(__import__("indexlib").__file__))
            .collect()
        )
    )
    out["tiny_warm"] = med([job([spec["tiny"]], "verify")[0] for _ in range(max(reps, 5))])
    # The cost of a Python task itself: a job of 16 tasks that do nothing, and the JVM's CPU during it.
    empty = []
    for _ in range(max(reps, 3)):
        cpu0 = tree_cpu(os.getpid())
        wall = timed(lambda: sc.parallelize(range(16), 16).map(lambda x: x).collect())
        empty.append((wall, tree_cpu(os.getpid())["jvm"] - cpu0["jvm"]))
    out["empty16"] = med([e[0] for e in empty])
    out["empty16_jvm"] = med([e[1] for e in empty])

    for key, log_dirs in spec["log_dirs"].items():
        for mode in ("verify", "rebuild"):
            rows = []
            digest = ""
            for _ in range(reps):
                target = tempfile.mkdtemp(prefix="spark-out-", dir=spec["root"]) if mode == "rebuild" else None
                try:
                    wall, report = job(log_dirs, mode, target)
                    if target and not digest:
                        digest = tree_digest(target)
                finally:
                    if target:
                        shutil.rmtree(target, ignore_errors=True)
                # The pipeline's binning (jobs.pipeline.run): task_count bins balanced by bytes.
                tasks = plan_tasks(discover(log_dirs), RunOptions(mode), "bench", settings.for_topic)
                sizes = [t.size for t in tasks]
                bins = balance_by_bytes(tasks, sizes, task_count(sum(sizes), slots, settings.bytes_per_task))
                where = {(t.partition_dir, t.base_offset): i for i, b in enumerate(bins) for t in b}
                per_bin = [0.0] * len(bins)
                for o in report.segments:
                    per_bin[where[(o.task.partition_dir, o.task.base_offset)]] += o.seconds
                blob_start = time.perf_counter()
                blob = pickle.dumps(report.segments, protocol=pickle.HIGHEST_PROTOCOL)
                pickle.loads(blob)
                rows.append(
                    {
                        "wall": wall,
                        "compute": sum(o.seconds for o in report.segments),
                        "segment_median": med([o.seconds for o in report.segments]),
                        "makespan": makespan(per_bin, slots),
                        "bins": len(bins),
                        "segments": len(report.segments),
                        **{f"phase_{k}": report.phase_seconds.get(k, 0.0) for k in PHASES},
                        "pickle_bytes": len(blob),
                        "pickle_seconds": time.perf_counter() - blob_start,
                        **{f"cpu_{k}": v for k, v in report.cpu.items()},
                    }
                )
            out[f"{key}/{mode}"] = {k: med([r[k] for r in rows]) for k in rows[0]}
            out[f"{key}/{mode}"]["walls"] = [r["wall"] for r in rows]
            out[f"{key}/{mode}"]["digest"] = digest
    out["session_stop"] = timed(spark.stop)
    return out


def run_child(master: str, conf: str, spec: dict, tree: str = REPO) -> dict:
    """One fresh Spark child (``child``) importing ``tree`` (driver and Python workers); its figures."""
    # closed and removed in the finally below (the child writes to it by fd)
    log = tempfile.NamedTemporaryFile(prefix="child-", suffix=".log", dir=spec["root"], delete=False)  # noqa: SIM115
    try:
        env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env[TREE_ENV] = tree
        env.pop("PYSPARK_GATEWAY_PORT", None)
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", master, json.dumps(dict(spec, conf=conf))],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=spec["root"],
        )
        if proc.returncode != 0:
            log.close()
            with open(log.name) as f:
                sys.stderr.write(f.read()[-5000:])
            raise SystemExit(f"child {master} failed with exit code {proc.returncode}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if out["worker_indexlib"] != [os.path.join(tree, "indexlib")] or out["driver_trees"] != [tree]:
            raise SystemExit(
                f"child {master}: its driver imported indexlib and jobs from {out['driver_trees']} and its Python "
                f"workers indexlib from {out['worker_indexlib']}, not all from {tree}"
            )
        return out
    finally:
        log.close()
        os.unlink(log.name)


def check_same_output(run: dict, children: list[str]) -> None:
    """Every Spark child of a run wrote the same index files for each log dir (first rep of each rebuild)."""
    for key in KEYS:
        digests = {name: run[name][f"{key}/rebuild"]["digest"] for name in children}
        if len(set(digests.values())) != 1:
            raise SystemExit(f"the Spark children's rebuilds of {key} differ: {digests}")


def whole_command(tiny: str, cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [KAFKA_INDEX, "verify", "--log-dir", tiny, "--audit-table", "none", "--no-progress"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return seconds


def imports_only(cwd: str) -> float:
    return timed(
        lambda: subprocess.run(
            [sys.executable, "-c", "import jobs.cli, jobs.pipeline, pyspark.sql"], cwd=cwd, check=True
        )
    )


# ---------------------------------------------------------------------------------------- report
def report(data: dict, runs: list[dict], args, root: str, watch: MachineWatch) -> None:
    gb = 1e9

    def runs_list(values) -> str:
        return ", ".join(f"{x:.2f}" for x in values)

    def label(key: str) -> str:
        if key in COMBINED:
            return f"**{key}** (the job the issue names): {data[key]['label']}"
        return f"{key}: {data[key]['label']}"

    combined = ", ".join(f"{k} = {' + '.join(v)}" for k, v in COMBINED.items())
    combined_gib = ", ".join(f"{data[k]['bytes'] / 2**30:.2f} GiB" for k in COMBINED)
    print(f"machine: {machine_line()}; pyspark {data['pyspark']}, Java {data['java']}")
    print(
        f"files in: {root} ; runs: {len(runs)} (medians; each Spark child: median of {args.reps} reps) ; "
        f"index.interval.bytes={INDEX_INTERVAL_BYTES}, segment.index.bytes={SEGMENT_INDEX_BYTES}, batches of {BATCH_BYTES} B"
    )
    for line in watch.lines():
        print(line)
    print()
    print(
        "Throughput (GB/s; Spark = `discover` + `jobs.pipeline.run` on a warm session in a fresh process, audit off; "
        "core = indexlib in one process; ratios per run, then the median). "
        f"{combined}: ONE Spark job over both log dirs ({combined_gib}), the job the issue's "
        "acceptance text names; its core and its 2-process ceiling are A's and B's added up (same run). "
        'Spark conf "as shipped" = `conf/defaults.yaml` (Unix domain sockets to the Python workers); '
        '"TCP" = Spark\'s default loopback TCP instead, for comparison:'
    )
    print()
    print(
        "| log dir | mode | Spark conf | core, 1 process | Spark local[1] | Spark local[2] | local[2] / core "
        "| scaling local[1] -> local[2] | target | met | 2 bare processes / 1 (machine ceiling) |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for key in KEYS:
        size = data[key]["bytes"]
        for mode in ("verify", "rebuild"):
            for conf in CONFS:
                one, two = f"local[1] {conf}", f"local[2] {conf}"
                core = med([r[f"core/{key}/{mode}"] for r in runs])
                s1 = med([r[one][f"{key}/{mode}"]["wall"] for r in runs])
                s2 = med([r[two][f"{key}/{mode}"]["wall"] for r in runs])
                vs_core = [r[f"core/{key}/{mode}"] / r[two][f"{key}/{mode}"]["wall"] for r in runs]
                scaling = [r[one][f"{key}/{mode}"]["wall"] / r[two][f"{key}/{mode}"]["wall"] for r in runs]
                ceil = [r[f"ceiling/{key}"][0] / r[f"ceiling/{key}"][1] for r in runs]
                sc = med(scaling)
                print(
                    f"| {label(key)} | {mode} | {conf} | {size / core / gb:.2f} ({core:.2f} s) "
                    f"| {size / s1 / gb:.2f} ({s1:.2f} s) | {size / s2 / gb:.2f} ({s2:.2f} s) | {med(vs_core):.2f} "
                    f"| {sc:.2f}x (runs {runs_list(scaling)}) | >= {SCALING_TARGET}x | {'yes' if sc >= SCALING_TARGET else '**no**'} "
                    f"| {med(ceil):.2f}x (runs {runs_list(ceil)}) |"
                )
    if OTHER_TREE:
        two = f"local[2] {next(iter(CONFS))}"
        rows = []
        for key in KEYS:
            for mode in ("verify", "rebuild"):
                this, other = (med([r[n][f"{key}/{mode}"]["wall"] for r in runs]) for n in (two, OTHER))
                ratios = [r[OTHER][f"{key}/{mode}"]["wall"] / r[two][f"{key}/{mode}"]["wall"] for r in runs]
                size = data[key]["bytes"]
                rows.append((f"{key} {mode}", *(f"{w:.3f} s, {size / w / gb:.2f} GB/s" for w in (this, other)), ratios))
        print_other_tree_table(OTHER_TREE, f"a Spark child `{two}` of each checkout", rows)
    print()
    print(f"Physical limits in the same runs ({combined}: A's and B's times added up):")
    print()
    print(
        "| log dir | `cat` of the .log files > /dev/null | bare CRC-32C, 16 KiB chunks | bare CRC-32C, 4 KiB chunks "
        "| pipeline executor function, 1 process | same, 2 forked processes |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key in KEYS:
        size = data[key]["bytes"]
        row = [med([r[f"{lim}/{key}"] for r in runs]) for lim in ("cat", "crc16k", "crc4k")]
        row += [med([r[f"ceiling/{key}"][i] for r in runs]) for i in (0, 1)]
        print(
            f"| {key} ({size / 2**20:.0f} MiB, {data[key]['files']} files) | "
            + " | ".join(f"{size / t / gb:.2f} GB/s ({t:.3f} s)" for t in row)
            + " |"
        )
    print()
    print(
        "Where a Spark run's time goes (medians; compute = sum of the executors' per-segment seconds: scan, plan, check, "
        "and the staging writes of a rebuild; makespan = those seconds on the master's slots with the pipeline's binning "
        "(`task_count` bins balanced by bytes); other = wall - makespan: discovery, job and task launch, "
        "JVM <-> Python worker round trips, (de)serialization, collect, "
        "driver replay and commit; phases = the pipeline's own `RunReport.phase_seconds`: scan = the Spark job "
        "incl. collect, replay = driver producer-state replay + `.txnindex` checks, commit = driver renames and "
        "`.txnindex` writes):"
    )
    print()
    print(
        "| log dir | mode | Spark | wall | compute (sum) | per segment | bins | makespan | other "
        "| CPU during the run: driver / JVM / Python workers (cores busy) | phases: scan / replay / commit "
        "| collected outcomes (pickle size; dumps+loads) |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in KEYS:
        for mode in ("verify", "rebuild"):
            for name, _master, _conf in VARIANTS:
                rows = [r[name][f"{key}/{mode}"] for r in runs]
                m = {k: med([x[k] for x in rows]) for k in rows[0] if k != "walls"}
                other = med([x["wall"] - x["makespan"] for x in rows])
                phases = " / ".join(f"{m[f'phase_{p}']:.3f}" for p in PHASES)
                cpu = m["cpu_driver"] + m["cpu_jvm"] + m["cpu_workers"]
                print(
                    f"| {key} | {mode} | {name} | {m['wall']:.3f} s | {m['compute']:.3f} s | {m['segment_median'] * 1e3:.0f} ms "
                    f"| {m['bins']:.0f} | {m['makespan']:.3f} s | {other:.3f} s "
                    f"| {m['cpu_driver']:.2f} / {m['cpu_jvm']:.2f} / {m['cpu_workers']:.2f} s ({cpu / m['wall']:.2f}) "
                    f"| {phases} s | {m['pickle_bytes'] / 2**20:.2f} MiB; {m['pickle_seconds'] * 1e3:.0f} ms |"
                )
    print()
    print("Fixed cost of a run (tiny log dir: one partition, one 1 MiB segment):")
    print()
    whole = [r["whole"] for r in runs]
    wm = med(whole)
    print("| figure | median | target | met |")
    print("| --- | ---: | ---: | --- |")
    print(
        f"| whole `kafka-index verify --log-dir <tiny> --audit-table none --no-progress` (as shipped: local[*]) "
        f"| {wm:.2f} s (runs {runs_list(whole)}) | <= {OVERHEAD_TARGET:.0f} s | {'yes' if wm <= OVERHEAD_TARGET else '**no**'} |"
    )
    print(
        f'| of which: `python -c "import jobs.cli, jobs.pipeline, pyspark.sql"` | {med([r["imports"] for r in runs]):.2f} s | - | |'
    )
    for name, _master, _conf in VARIANTS:
        g = lambda k: med([r[name][k] for r in runs])  # noqa: E731
        print(
            f"| {name}: session start (`jobs.session.spark_session`: JVM + SparkContext) | {g('session_start'):.2f} s | - | |"
        )
        print(f"| {name}: first (cold) tiny verify job (starts a Python worker) | {g('tiny_cold'):.3f} s | - | |")
        print(f"| {name}: tiny verify job on a warm session | {g('tiny_warm'):.3f} s | - | |")
        print(
            f"| {name}: a job of 16 empty Python tasks on a warm session (per task; JVM CPU per task) "
            f"| {g('empty16'):.3f} s ({g('empty16') / 16 * 1e3:.0f} ms; {g('empty16_jvm') / 16 * 1e3:.0f} ms) | - | |"
        )
        print(f"| {name}: `spark.stop()` | {g('session_stop'):.2f} s | - | |")


# --------------------------------------------------------------------------------------- cluster
def cluster(args) -> int:
    """The same verify on a real Spark standalone cluster against ``local[2]`` (issue 13), whole ``spark-submit``
    processes as the README runs them, order alternating: **local** = ``spark-submit --master local[2]
    jobs/spark_job.py verify --log-dir DIR --audit-table none``; **cluster** = a master and 2 workers of 1 core on
    127.0.0.1 (``tools/standalone_cluster.py``, started once, not timed), ``--archives
    dist/kafka-index-executor-env.tar.gz#env`` (each application ships and unpacks the archive on each executor:
    timed). Data: 4 partitions x 2 segments of 256 MiB of 16 KiB batches (2 GiB) with their correct index files
    (a healthy verify, exit 0 checked). Also: the archive's size and one application's work dir on a worker."""
    from pathlib import Path

    sys.path.insert(0, os.path.join(REPO, "tools"))
    from common import make_log_dir, scratch
    from standalone_cluster import ARCHIVE, fresh_archive, spark_submit, standalone_cluster

    fresh_archive()
    with scratch("bench-cluster-") as root:
        logs = os.path.join(root, "logs")
        _, files, batches, _ = make_log_dir(
            logs, "bench", 4, 2, max(1 << 20, int((256 << 20) * args.scale)), 16384, indexes=True
        )
        data = sum(os.path.getsize(f) for f in files)
        os.makedirs(os.path.join(root, "cluster"))
        walls: dict[str, list[float]] = {"local": [], "cluster": []}
        ratios = []
        with standalone_cluster(Path(root) / "cluster", workers=2, cores=1) as running:
            for run in range(args.runs):
                got = {}
                for way in ("local", "cluster") if run % 2 == 0 else ("cluster", "local"):
                    master = "local[2]" if way == "local" else running.url
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
            apps = [d for w in running.workers for d in w.iterdir() if d.name.startswith("app-")]
            per_app = (
                max(sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and not p.is_symlink()) for d in apps)
                if apps
                else 0
            )
    print(f"machine: {machine_line()}")
    print(
        f"data: {data / 2**30:.2f} GiB of .log in 8 segments of 16 KiB batches ({batches:,} batches); runs {args.runs}"
    )
    print()
    print("| way | median wall | GB/s | walls of the runs |")
    print("| --- | ---: | ---: | --- |")
    for way, values in walls.items():
        w = med(values)
        print(f"| {way} | {w:.2f} s | {data / w / 1e9:.2f} | {', '.join(f'{x:.2f}' for x in values)} |")
    print()
    print(f"cluster / local wall (per run, median): **{med(ratios):.2f}** ({', '.join(f'{r:.2f}' for r in ratios)})")
    print(
        f"executor archive: {ARCHIVE.stat().st_size / 2**20:.1f} MiB; one application's largest work dir on a worker: "
        f"{per_app / 2**20:.0f} MiB"
    )
    return 0


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3, help="timed jobs per log dir and mode in each Spark child")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the segment sizes (quick checks)")
    parser.add_argument("--json", metavar="FILE", help="also write every raw figure here")
    parser.add_argument(
        "--other-tree", metavar="DIR", help="another checkout: one more local[2] Spark child runs it, same runs"
    )
    parser.add_argument("--cluster", action="store_true", help="a standalone cluster against local[2] instead")
    parser.add_argument("--quick", action="store_true", help="small log dirs, one run of one rep")
    parser.add_argument("--child", nargs=2, metavar=("MASTER", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global OTHER_TREE
    OTHER_TREE = os.path.abspath(args.other_tree) if args.other_tree else None
    if args.quick:
        args.runs, args.reps, args.scale = 1, 1, 0.01
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(args.child[1]))))
        return 0
    if args.cluster:
        return cluster(args)

    import pyspark

    compile_bytecode()
    if OTHER_TREE:
        compile_bytecode(OTHER_TREE)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = tempfile.mkdtemp(prefix="bench-jobs-", dir=parent)
    try:
        data: dict = {"pyspark": pyspark.__version__, "java": java}
        dirs = {}
        for i, (key, topic, partitions, segments, seg_bytes) in enumerate(DATASETS):
            seg_bytes = max(1 << 20, int(seg_bytes * args.scale))
            label = (
                f"{partitions} partition{'s' if partitions > 1 else ''} x {segments} segment{'s' if segments > 1 else ''} "
                f"of {seg_bytes / 2**20:.0f} MiB"
            )
            print(f"[{key}] generating {label} ...", file=sys.stderr, flush=True)
            log_dir = os.path.join(root, f"logs-{key}")
            os.makedirs(log_dir)
            pdirs = make_log_dir(log_dir, topic, partitions, segments, seg_bytes, 100 * i)
            files = log_files(pdirs)
            dirs[key] = (log_dir, pdirs, files)
            data[key] = {"bytes": sum(os.path.getsize(f) for f in files), "files": len(files), "label": label}
        for key, parts in COMBINED.items():
            data[key] = {
                "bytes": sum(data[k]["bytes"] for k in parts),
                "files": sum(data[k]["files"] for k in parts),
                "label": f"{' and '.join(parts)} in ONE job ({len(parts)} log dirs)",
            }
        tiny = os.path.join(root, "logs-tiny")
        os.makedirs(tiny)
        make_log_dir(tiny, "tiny", 1, 1, 1 << 20, 7)
        spec = {
            "root": root,
            "tiny": tiny,
            "reps": args.reps,
            "log_dirs": {
                **{k: [v[0]] for k, v in dirs.items()},
                **{k: [dirs[d][0] for d in parts] for k, parts in COMBINED.items()},
            },
        }
        out_root = tempfile.mkdtemp(prefix="core-out-", dir=root)

        runs: list[dict] = []
        watch = MachineWatch()
        pool = multiprocessing.get_context("fork").Pool(2)
        try:
            for run in range(args.runs):
                watch.before_run()
                r: dict = {}
                pool.map(_noop, range(8), chunksize=1)  # both workers up
                for key, (log_dir, pdirs, files) in dirs.items():
                    print(f"[run {run + 1}/{args.runs}] {key}: limits, core, ceiling", file=sys.stderr, flush=True)
                    with open(os.devnull, "wb") as null:
                        r[f"cat/{key}"] = timed(lambda: subprocess.run(["cat", *files], stdout=null, check=True))
                    r[f"crc16k/{key}"] = timed(lambda: [crc_pass(f, 16384) for f in files])
                    r[f"crc4k/{key}"] = timed(lambda: [crc_pass(f, 4096) for f in files])
                    out = tempfile.mkdtemp(prefix="out-", dir=out_root)
                    r[f"core/{key}/rebuild"] = timed(
                        lambda: [
                            rebuild_partition(p, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES, output_dir=out)
                            for p in pdirs
                        ]
                    )
                    shutil.rmtree(out)
                    box = []
                    r[f"core/{key}/verify"] = timed(
                        lambda: box.extend(
                            verify_partition(p, INDEX_INTERVAL_BYTES, SEGMENT_INDEX_BYTES) for p in pdirs
                        )
                    )
                    assert all(v.healthy for v in box)
                    r[f"ceiling/{key}"] = ceiling(log_dir, pool)
                for key, parts in COMBINED.items():  # a combined job's limits, core and ceiling: its parts' added up
                    for lim in ("cat", "crc16k", "crc4k"):
                        r[f"{lim}/{key}"] = sum(r[f"{lim}/{k}"] for k in parts)
                    for mode in ("verify", "rebuild"):
                        r[f"core/{key}/{mode}"] = sum(r[f"core/{k}/{mode}"] for k in parts)
                    r[f"ceiling/{key}"] = tuple(sum(r[f"ceiling/{k}"][i] for k in parts) for i in (0, 1))
                children = [(name, master, conf, REPO) for name, master, conf in VARIANTS]
                if OTHER_TREE:
                    children.append((OTHER, "local[2]", "as shipped", OTHER_TREE))
                for name, master, conf, tree in children if run % 2 == 0 else children[::-1]:
                    print(f"[run {run + 1}/{args.runs}] Spark {name} (fresh process)", file=sys.stderr, flush=True)
                    r[name] = run_child(master, conf, spec, tree)
                check_same_output(r, [c[0] for c in children])
                print(f"[run {run + 1}/{args.runs}] whole command", file=sys.stderr, flush=True)
                r["whole"] = whole_command(tiny, root)
                r["imports"] = imports_only(root)
                runs.append(r)
        finally:
            pool.close()
            pool.join()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"data": data, "runs": runs, "machine": watch.as_json()}, f, indent=1)
        report(data, runs, args, root, watch)
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
