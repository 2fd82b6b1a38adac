"""After a kill -9: how long is the broker down with Apache Kafka 4.1.0's own recovery, and with ``python -m indexlib
recover`` (its default ``--sync auto``) and then the broker's start on what it left (issues 24, 41)? Whole processes,
on crash states made here by a real broker (``../shared/kafka_2.13-4.1.0``) killed (SIGKILL) while
``kafka-producer-perf-test.sh`` writes to it.

Shapes: a) a few partitions with large active segments (8 partitions, 128 MiB in all: every byte in the active
segments, 1 GiB ``segment.bytes``); b) many small partitions (1000 x ~0.3 MiB); c) issue 24's first shape, 2 GiB
over 8 partitions, all in active segments (``--shapes c``: about 6 GiB of ``/dev/shm`` for the crash and two copies);
d) issue 24's second shape, 2000 x ~0.3 MiB (with ``--disk``: on a disk, where the syncs cost). Per run, on fresh
``cp -a`` copies (each written out by ``sync`` before it is used)
of the crashed log dir (``num.recovery.threads.per.data.dir`` = 2, the cores; the distribution's JVM options):

- Kafka: the broker started on a copy; its own ``Loaded N logs in X ms`` (LogManager.loadLogs, the recovery itself)
  and its whole start (``KafkaBroker.start()`` timed: process start until ``server.log`` says ``Kafka Server
  started``, polled every 0.1 s; it also waits out the killed broker's session); then that broker stopped cleanly
  and started again: its ``Loaded`` and whole start with nothing to recover (its clean-shutdown file found), the
  floor of any start after an offline tool, which must leave the shutdown unclean;
- ``recover --jobs 2`` with the default sync (``--json``: which sync it used, syncfs or fsync): wall time of the
  whole process on another copy, then the broker started on that copy: its ``Loaded N logs in X ms`` (and a check
  that it recovered no segment holding data) and its whole start; ``recover --jobs 2 --sync fsync`` (the old
  default) on a third copy (checked: it leaves the same files);
- the downtime: recover + the broker's ``Loaded`` after it, against Kafka's own ``Loaded``; and on whole starts,
  recover + the whole start after it, against Kafka's whole self-recovering start; the start after recover against
  the clean start (``Loaded``, and whole starts);
- ``verify --jobs 2`` and ``rebuild --jobs 2 --output-dir`` of the crashed dir (read only), whole processes;
- the physical limit: one ``cat`` of the ``.log`` files (recover's, verify's and rebuild's); of the downtime, that
  ``cat`` + the clean start's ``Loaded``.

Data under ``/dev/shm`` (page-cache pages: no disk in any figure; fsync is free there), or with ``--disk`` under
tempfile's default dir, where every copy stays until the benchmark ends (``done_with``: about 2.5 GiB a run of d,
8 GiB of c). Start it a few minutes after any large removal from that file system (an earlier benchmark's copies
too): on ext4 mounted with ``discard`` recover's first runs were slowed by one (RESULTS.md section 8). A broker is
stopped by its PID only. Ratios per run, then medians over ``--runs`` (3).

Run: ``.venv/bin/python benchmarks/crash.py [--runs 3] [--shapes a,b] [--disk]``; ``--quick``: small shapes, one run.
About 15 minutes with the defaults on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    REPO,
    BenchError,
    MachineWatch,
    cat_seconds,
    compare_trees,
    compile_bytecode,
    header,
    med,
    run_indexlib,
    runs_list,
    scratch,
    timed,
)

sys.path.insert(0, REPO)
from tests.broker.kafka_broker import (  # noqa: E402
    BrokerError,
    KafkaBroker,
    Recovery,
    copy_log_dir,
    create_topics,
    kafka_home_missing,
    partition_dirs,
)

# key -> (topic, partitions, total MiB, record bytes)
SHAPES = {
    "a": ("crash-a", 8, 128, 1024),
    "b": ("crash-b", 1000, 300, 512),
    "c": ("crash-c", 8, 2048, 1024),
    "d": ("crash-d", 2000, 600, 512),
}
QUICK = {
    "a": ("crash-a", 8, 16, 1024),
    "b": ("crash-b", 100, 30, 512),
    "c": ("crash-c", 8, 64, 1024),
    "d": ("crash-d", 200, 60, 512),
}
OVERRIDES = {
    "num.recovery.threads.per.data.dir": "2",
    "broker.session.timeout.ms": "3000",  # the start after a kill waits out the old session: shorter, same recovery
    "broker.heartbeat.interval.ms": "500",
    "auto.create.topics.enable": "false",
}


def log_files(log_dir: Path, topic: str) -> list[str]:
    return [str(f) for p in partition_dirs(log_dir) if p.name.startswith(topic + "-") for f in sorted(p.glob("*.log"))]


def data_bytes(log_dir: Path) -> int:
    return sum(f.stat().st_size for f in log_dir.rglob("*.log"))


def make_crash(root: Path, shape: tuple[str, int, int, int]) -> tuple[Path, tuple[int, int]]:
    """A log dir left by SIGKILL of a broker while ``kafka-producer-perf-test.sh`` writes ``shape``'s topic."""
    topic, partitions, mib, record = shape
    log_dir = root / "crash"
    broker = KafkaBroker(root / "crash-broker", log_dir, OVERRIDES, jvm_opts=None)
    perf = None
    try:
        broker.format()
        broker.start()
        create_topics(broker.bootstrap, {topic: partitions})
        target = mib << 20
        env = broker.env(root / "perf-logs")
        (root / "perf-logs").mkdir()
        perf = subprocess.Popen(
            [str(broker.home / "bin" / "kafka-producer-perf-test.sh"), "--topic", topic, "--num-records", "1000000000",
             "--record-size", str(record), "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
             "acks=1", "linger.ms=5", "batch.size=16384"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 600
        while data_bytes(log_dir) < target:
            if perf.poll() is not None:
                raise BenchError(f"kafka-producer-perf-test.sh exited with {perf.returncode}")
            if time.monotonic() > deadline:
                raise BenchError("the producer did not write the shape's data in 10 minutes")
            time.sleep(0.2)
        broker.crash()  # SIGKILL while the producer writes
    finally:
        broker.close()
        if perf is not None and perf.poll() is None:
            os.kill(perf.pid, signal.SIGKILL)
            perf.wait(30)
    return log_dir, (broker.port, broker.controller_port)


def timed_start(broker: KafkaBroker) -> tuple[Recovery, float]:
    """``broker.start()`` and its wall time: process start until ``server.log`` says ``Kafka Server started``."""
    started = time.perf_counter()
    rec = broker.start(timeout=600)
    if not rec.loaded:
        raise BenchError(f"no 'Loaded N logs' line in {broker.current_logs}/server.log")
    return rec, time.perf_counter() - started


def broker_start(
    root: Path, log_dir: Path, ports: tuple[int, int], name: str, clean_restart: bool = False
) -> tuple[dict[str, float], dict[str, list[int]]]:
    """Start a broker on ``log_dir``: its ``Loaded N logs in X ms`` ("loaded", s), its whole start ("whole", s) and
    the segments it recovered. Killed after; with ``clean_restart`` first stopped cleanly (SIGTERM: it writes its
    clean-shutdown file) and started once more: that start, which recovers nothing ("clean", "clean whole")."""
    broker = KafkaBroker(root / name, log_dir, OVERRIDES, ports=ports, jvm_opts=None)
    try:
        rec, whole = timed_start(broker)
        out = {"loaded": rec.loaded_ms / 1000, "whole": whole}
        if clean_restart:
            broker.stop(timeout=600)
            again, out["clean whole"] = timed_start(broker)
            recovering = [tp for tp in again.recovering if tp != "__cluster_metadata-0"]
            if not again.clean_shutdown_seen or recovering:
                raise BenchError(f"the restart after a clean stop recovered logs ({recovering}): {broker.current_logs}")
            out["clean"] = again.loaded_ms / 1000
    finally:
        broker.close()
    return out, {tp: bases for tp, bases in rec.recovering.items() if tp != "__cluster_metadata-0"}


def fresh_copy(crash: Path, target: Path) -> Path:
    """A ``cp -a`` copy of the crash state, written out (``sync``) before anything is timed on it: a run's own
    syncs (and the broker's start) then do not also write the copy."""
    copy = copy_log_dir(crash, target)
    os.sync()
    return copy


def timed_recover(root: Path, copy: Path, name: str, *sync: str) -> tuple[float, str]:
    """``recover --jobs 2`` of ``copy`` (whole process, ``--json`` to a file outside it): seconds, the sync used."""
    report = root / f"{name}.json"
    args = ["recover", str(copy), "--backup-dir", str(root / f"backups-{name}"), "--jobs", "2", "-q"]
    seconds = timed(lambda: run_indexlib([*args, *sync, "--json", str(report)]))
    return seconds, json.loads(report.read_text())["sync"]


def done_with(path: Path, disk: bool) -> None:
    """A copy no longer needed. In memory it is removed now. On a disk it stays until the benchmark ends: a removal
    of hundreds of MiB there leaves the file system busy for tens of seconds (measured on ext4 mounted with
    ``discard``: files created in the next seconds waited on its journal, and recover's commit phase on d took
    2.7-4.9 s instead of 0.7 s, still 1.4 s after 30 s), which no step should be timed in; a broker host after a
    crash has no such removal just before its start or its recover."""
    if not disk:
        shutil.rmtree(path, ignore_errors=True)


def one_run(root: Path, key: str, shape, crash: Path, ports, disk: bool) -> dict:
    topic = shape[0]
    r: dict = {"cat": cat_seconds(log_files(crash, topic))}
    copy = fresh_copy(crash, root / "self")
    kafka, _ = broker_start(root, copy, ports, "self-broker", clean_restart=True)
    r.update(kafka=kafka["loaded"], kafka_whole=kafka["whole"], clean=kafka["clean"], clean_whole=kafka["clean whole"])
    done_with(copy, disk)
    copy = fresh_copy(crash, root / "ours")
    r["recover"], r["sync"] = timed_recover(root, copy, "default")
    twin = fresh_copy(crash, root / "ours-fsync")
    r["recover fsync"], r["sync fsync"] = timed_recover(root, twin, "fsync", "--sync", "fsync")
    compare_trees(str(copy), str(twin))  # the same files, byte for byte (else BenchError)
    done_with(twin, disk)
    after, recovered = broker_start(root, copy, ports, "after-broker")
    r["after"], r["after_whole"] = after["loaded"], after["whole"]
    r["down"] = (r["recover"] + r["after"]) / r["kafka"]  # the downtime against Kafka's own recovery
    r["down whole"] = (r["recover"] + r["after_whole"]) / r["kafka_whole"]
    for tp, bases in recovered.items():  # only the empty segment recover rolled at the log end
        log = copy / tp / f"{bases[0]:020d}.log"
        if len(bases) != 1 or log.stat().st_size != 0:
            raise BenchError(f"after recover the broker recovered {tp} {bases} (not only the empty rolled segment)")
    done_with(copy, disk)
    select = ["--topics", topic, "--jobs", "2", "-q"]
    r["verify"] = timed(lambda: run_indexlib(["verify", str(crash), *select], ok=(0, 1)))
    out = root / "rebuilt"
    r["rebuild"] = timed(lambda: run_indexlib(["rebuild", str(crash), "--output-dir", str(out), *select]))
    done_with(out, disk)
    for name in ("self-broker", "after-broker", "backups-default", "backups-fsync"):
        done_with(root / name, disk)
    return r


def print_tables(results: dict) -> None:
    """Two Markdown tables: the times, then the downtime (ratios per run, medians, the runs' values in brackets)."""

    def col(runs: list[dict], name: str) -> str:
        values = [r[name] for r in runs]
        return f"{med(values):.2f} s ({runs_list(values)})"

    def share(values: list[float], fmt: str = "{:.0%}") -> str:
        return f"**{fmt.format(med(values))}** (per run {runs_list(values, fmt)})"

    print(
        "| crash state | `cat` of the .log files (the limit) | Kafka's own recovery (`Loaded N logs`) "
        "| our `recover --jobs 2` (default sync) | `recover --jobs 2 --sync fsync` "
        "| broker's `Loaded N logs` after recover (after / clean) | broker's `Loaded N logs` after its own clean "
        "shutdown (the floor) | our `verify --jobs 2` | our `rebuild --jobs 2` |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for key, ((_, partitions, _, record), segments, size, runs) in results.items():
        syncs = sorted({r["sync"] for r in runs})
        fsyncs = sorted({r["sync fsync"] for r in runs})
        ratio = [r["kafka"] / r["recover"] for r in runs]
        ratio_fsync = [r["kafka"] / r["recover fsync"] for r in runs]
        print(
            f"| {key}) {partitions} partitions, {size / 2**20:.0f} MiB in {segments} segments ({record}-byte records) "
            f"| {col(runs, 'cat')} | {col(runs, 'kafka')} "
            f"| {col(runs, 'recover')} (sync used: {', '.join(syncs)}; Kafka's / this: {share(ratio, '{:.2f}x')}) "
            f"| {col(runs, 'recover fsync')} (sync used: {', '.join(fsyncs)}; Kafka's / this: {share(ratio_fsync, '{:.2f}x')}) "
            f"| {col(runs, 'after')} ({share([r['after'] / r['clean'] for r in runs])} of the clean start's) "
            f"| {col(runs, 'clean')} ({share([r['clean'] / r['kafka'] for r in runs])} of Kafka's) "
            f"| {col(runs, 'verify')} | {col(runs, 'rebuild')} |"
        )
    print()
    print(
        "| crash state | downtime: recover + `Loaded` after it (of Kafka's `Loaded`) | its limit: `cat` + the clean "
        "`Loaded` (of Kafka's) | Kafka's whole self-recovering start | whole start after recover (after / clean) "
        "| whole start after a clean shutdown | downtime on whole starts: recover + whole start after it (of "
        "Kafka's whole start) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for key, (_, _, _, runs) in results.items():
        down = [r["recover"] + r["after"] for r in runs]
        down_whole = [r["recover"] + r["after_whole"] for r in runs]
        limit = [r["cat"] + r["clean"] for r in runs]
        print(
            f"| {key}) | {med(down):.2f} s ({runs_list(down)}): {share([r['down'] for r in runs])} "
            f"| {med(limit):.2f} s: {share([(r['cat'] + r['clean']) / r['kafka'] for r in runs])} "
            f"| {col(runs, 'kafka_whole')} "
            f"| {col(runs, 'after_whole')} ({share([r['after_whole'] / r['clean_whole'] for r in runs])}) "
            f"| {col(runs, 'clean_whole')} "
            f"| {med(down_whole):.2f} s ({runs_list(down_whole)}): {share([r['down whole'] for r in runs])} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shapes", default="a,b")
    parser.add_argument("--quick", action="store_true", help="small shapes, one run")
    parser.add_argument("--disk", action="store_true", help="the crash state and its copies on a disk, not /dev/shm")
    args = parser.parse_args(argv)
    missing = kafka_home_missing()
    if missing:
        print(f"crash: {missing}", file=sys.stderr)
        return 2
    shapes = QUICK if args.quick else SHAPES
    if args.quick:
        args.runs = 1
    compile_bytecode()
    results = {}
    watch = MachineWatch()
    try:
        with scratch("bench-crash-", memory=not args.disk) as tmp:
            for key in args.shapes.split(","):
                shape = shapes[key]
                root = Path(tmp) / key
                root.mkdir()
                print(f"[{key}] making the crash state", file=sys.stderr, flush=True)
                crash, ports = make_crash(root, shape)
                logs = log_files(crash, shape[0])
                size = sum(os.path.getsize(f) for f in logs)
                runs = []
                for run in range(args.runs):
                    print(f"[{key}] run {run + 1}/{args.runs}", file=sys.stderr, flush=True)
                    watch.before_run()
                    (root / f"run{run}").mkdir()
                    runs.append(one_run(root / f"run{run}", key, shape, crash, ports, args.disk))
                    print(f"[{key}] run {run + 1}: {runs[-1]}", file=sys.stderr, flush=True)
                results[key] = (shape, len(logs), size, runs)
    except (BenchError, BrokerError) as exc:  # a broker that would not start or stop: killed by its PID already
        print(f"crash: FAILED: {exc}", file=sys.stderr)
        return 1
    quick = " --quick" if args.quick else ""
    disk = " --disk" if args.disk else ""
    header(f"benchmarks/crash.py --runs {args.runs} --shapes {args.shapes}{quick}{disk}", args.runs, watch)
    print()
    print_tables(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
