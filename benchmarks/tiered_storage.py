"""How long does checking my tiered-storage bucket take? ``verify-remote`` over remote segments in Kafka's
LocalTieredStorage layout, in moto's S3 server on 127.0.0.1 (``audit_writers.moto_server``: plain moto, no
patch), planned from an offline ``__remote_log_metadata-0`` partition.

The data, built once per invocation: ``--segments`` segments (100 a partition, ~575 KiB each: 50 batches of 1-20
records of 200-2000 bytes, ``generate_partition``) with their index files rebuilt (``rebuild_partition``), each
uploaded as Kafka's RSM writes it (``.log``, ``.index``, ``.timeindex``, an empty producer snapshot, the epoch blob
``0 / 1 / 0 0``), and per segment a ``RemoteLogSegmentMetadataRecord`` (COPY_SEGMENT_STARTED) then an update
(COPY_SEGMENT_FINISHED). Before anything is timed, ``remote-inventory`` (both ways) and an index-only and a full
``verify-remote`` must find nothing.

Each run, the order alternating: whole processes, wall clock, as users run them: ``python -m indexlib
verify-remote`` index-only with ``--jobs 1`` and the default (8), ``--full`` (default jobs); the limits, plain
reads (a whole process, N threads, each object one whole GET with obstore, discarded: the server's rate) of the
4 index objects of every segment (N = 1, 8) and of every object ``--full`` reads (the ``.log`` and the 4 index
objects, N = 8); ``kafka-index verify-remote`` on Spark ``local[*]`` (``python -m jobs.cli``; 2 cores here), on a
standalone cluster (a master and 2 workers of 1 core on 127.0.0.1, ``tools/standalone_cluster.py``, started once,
not timed; ``spark-submit`` as the README runs it, the executors' Python from ``make package``'s archive) and with
``--engine local``, index-only and ``--full``, all ``--audit-table none`` (only the check is timed). Targets (the
issue): index-only >= 40 segments/s per core (``--jobs 1``); ``--full`` within 1.5x of the plain read of the same
objects.

    .venv/bin/python benchmarks/tiered_storage.py [--segments 1000] [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median as med
from typing import Any

import obstore
from obstore.store import S3Store

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from audit_writers import BUCKET, moto_server  # noqa: E402
from common import (  # noqa: E402
    CMD,
    MIB,
    BenchError,
    MachineWatch,
    compile_bytecode,
    header,
    run_indexlib,
    run_kafka_index,
    runs_list,
    scratch,
    timed,
    tree_env,
)
from object_storage import REGION, flags, requests_since  # noqa: E402

from indexlib.engine import rebuild_partition  # noqa: E402
from indexlib.format.layout import remote_object_key  # noqa: E402
from indexlib.format.producer_snapshot import format_snapshot  # noqa: E402
from indexlib.format.remote_log_metadata import REMOTE_LOG_METADATA_TYPES  # noqa: E402
from indexlib.testing.batch_encoder import encode_batch_v2  # noqa: E402
from indexlib.testing.generate import generate_partition  # noqa: E402
from indexlib.testing.message_encoder import encode_message, unsigned_varint  # noqa: E402

PER_PARTITION, TOPIC, PREFIX, JOBS = 100, "tiered", "bench", 8
EPOCH_BLOB = b"0\n1\n0 0\n"  # LocalTieredStorage's leader-epoch checkpoint: epoch 0 from offset 0
TARGET_RATE, TARGET_RATIO = 40, 1.5
CASES = ("index 1", "read indexes 1", "index 8", "read indexes 8", "full", "read all", "spark index", "cluster index",
         "local index", "spark full", "cluster full", "local full")  # fmt: skip


def kafka_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def last_offset_and_max_timestamp(log: bytes) -> tuple[int, int]:
    """A v2 segment's last offset and largest batch timestamp, from its batch headers."""
    at, last, largest = 0, -1, -1
    while at < len(log):
        base, length = struct.unpack_from(">qi", log, at)
        delta, _, max_ts = struct.unpack_from(">iqq", log, at + 23)
        last, largest, at = base + delta, max(largest, max_ts), at + 12 + length
    return last, largest


def metadata_value(type_id: int, data: dict[str, Any]) -> bytes:
    """A ``__remote_log_metadata`` value, framed as Kafka frames it: frame version 1, type, version 0, body."""
    schema = REMOTE_LOG_METADATA_TYPES[type_id][1]
    return unsigned_varint(1) + unsigned_varint(type_id) + unsigned_varint(0) + encode_message(schema, data, 0)


def s3_store(endpoint: str) -> S3Store:
    return S3Store(BUCKET, endpoint=endpoint, region=REGION, access_key_id="testing", secret_access_key="testing",
                   client_options={"allow_http": True})  # fmt: skip


def build(root: str, endpoint: str, segments: int) -> tuple[str, dict[str, int]]:
    """The segments in the bucket under ``PREFIX`` and their metadata: the metadata's log dir, each object's size."""
    objects: dict[str, bytes | Path] = {}
    values: list[bytes] = []
    for p in range((segments + PER_PARTITION - 1) // PER_PARTITION):
        pdir = os.path.join(root, "local", f"{TOPIC}-{p}")
        count = min(PER_PARTITION, segments - p * PER_PARTITION)
        paths = generate_partition(pdir, segments=count, batches_per_segment=50, value_bytes=(200, 2000), seed=p)
        rebuild_partition(pdir)
        topic_id = kafka_uuid()
        tip = {"name": TOPIC, "id": topic_id, "partition": p}
        for path in paths:
            start, segment_id, log = int(path.stem), kafka_uuid(), path.read_bytes()
            blobs: dict[str, bytes | Path] = {
                "log": path, "index": path.with_suffix(".index"), "timeindex": path.with_suffix(".timeindex"),
                "snapshot": format_snapshot([]), "leader_epoch_checkpoint": EPOCH_BLOB,
            }  # fmt: skip
            for suffix, blob in blobs.items():
                objects[f"{PREFIX}/{remote_object_key('kafka', TOPIC, topic_id, p, start, segment_id, suffix)}"] = blob
            end, max_ts = last_offset_and_max_timestamp(log)
            common = {"remoteLogSegmentId": {"topicIdPartition": tip, "id": segment_id}, "brokerId": 0,
                      "eventTimestampMs": max_ts, "customMetadata": None}  # fmt: skip
            values.append(metadata_value(0, {**common, "startOffset": start, "endOffset": end, "maxTimestampMs": max_ts,
                                             "segmentLeaderEpochs": [{"leaderEpoch": 0, "offset": start}],
                                             "segmentSizeInBytes": len(log), "remoteLogSegmentState": 0,
                                             "txnIndexEmpty": True}))  # fmt: skip
            values.append(metadata_value(1, {**common, "remoteLogSegmentState": 1}))
    store = s3_store(endpoint)
    with ThreadPoolExecutor(JOBS) as threads:
        list(threads.map(lambda item: obstore.put(store, *item), objects.items()))
    log_dir = os.path.join(root, "metadata")
    os.makedirs(os.path.join(log_dir, "__remote_log_metadata-0"))
    with open(os.path.join(log_dir, "__remote_log_metadata-0", f"{0:020d}.log"), "wb") as f:
        for offset, value in enumerate(values):
            f.write(encode_batch_v2(offset, [(None, value, 1_700_000_000_000 + offset)]))
    sizes = {key: blob.stat().st_size if isinstance(blob, Path) else len(blob) for key, blob in objects.items()}
    return log_dir, sizes


def plain_read(spec: dict[str, Any]) -> None:
    """The child: every object whole (one GET each, discarded) by ``jobs`` threads."""
    store = s3_store(spec["endpoint"])

    def whole(key: str) -> int:
        return len(obstore.get(store, key).bytes())

    with ThreadPoolExecutor(spec["jobs"]) as threads:
        got = sum(threads.map(whole, spec["keys"]))
    if got != spec["bytes"]:
        raise SystemExit(f"read {got} bytes, not {spec['bytes']}")


def expect(args: list[str], words: str) -> None:
    """``python -m indexlib ARGS`` must exit 0 and say ``words``."""
    proc = subprocess.run(CMD + args, env=tree_env(), capture_output=True, text=True)
    if proc.returncode != 0 or words not in proc.stdout:
        raise BenchError(
            f"`{' '.join(args[:1])}` (exit {proc.returncode}) did not say {words!r}:\n{proc.stdout[-3000:]}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="40 segments, one run: a smoke test, not a figure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # spec on stdin
    args = parser.parse_args()
    if args.quick:
        args.segments, args.runs = 40, 1
    if args.child:
        plain_read(json.load(sys.stdin))
        return 0
    compile_bytecode()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from standalone_cluster import fresh_archive, spark_submit, standalone_cluster

    fresh_archive()
    with scratch("bench-tiered-") as root, moto_server(os.path.join(root, "moto.log")) as endpoint:
        os.makedirs(os.path.join(root, "cluster"))
        with standalone_cluster(Path(root) / "cluster", workers=2, cores=1) as cluster:
            return measure(args, root, endpoint, cluster, spark_submit)


def measure(args: argparse.Namespace, root: str, endpoint: str, cluster: Any, spark_submit: Any) -> int:
    """Build the data, check it, time every case (module docstring) and print the report."""
    print(f"[tiered] building {args.segments} remote segments ...", file=sys.stderr, flush=True)
    log_dir, sizes = build(root, endpoint, args.segments)
    remote = ["--log-dir", log_dir, "--remote", f"s3://{BUCKET}/{PREFIX}", "--layout", "kafka", *flags(endpoint)]
    logs = {key: size for key, size in sizes.items() if key.endswith(".log")}
    indexes = {key: size for key, size in sizes.items() if key not in logs}
    nbytes = sum(logs.values())

    def read(objects: dict[str, int], jobs: int) -> None:
        spec = {"endpoint": endpoint, "keys": list(objects), "bytes": sum(objects.values()), "jobs": jobs}
        subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(spec), text=True, check=True)

    no_audit = ["--audit-table", "none"]

    def on_cluster(*extra: str) -> None:
        done = spark_submit(cluster.url, "verify-remote", *remote, *extra, *no_audit, conf={"spark.cores.max": "2"})
        if done.returncode != 0:
            raise BenchError(f"verify-remote on the cluster exited with {done.returncode}\n{done.stderr[-3000:]}")

    commands = {
        "index 1": lambda: run_indexlib(["verify-remote", *remote, "--jobs", "1"]),
        "index 8": lambda: run_indexlib(["verify-remote", *remote]),
        "full": lambda: run_indexlib(["verify-remote", *remote, "--full"]),
        "read all": lambda: read(sizes, JOBS),
        "read indexes 1": lambda: read(indexes, 1),
        "read indexes 8": lambda: read(indexes, JOBS),
        "spark index": lambda: run_kafka_index(["verify-remote", *remote, *no_audit]),
        "cluster index": on_cluster,
        "cluster full": lambda: on_cluster("--full"),
        "local index": lambda: run_kafka_index(["verify-remote", *remote, "--engine", "local", *no_audit]),
        "spark full": lambda: run_kafka_index(["verify-remote", *remote, "--full", *no_audit]),
        "local full": lambda: run_kafka_index(["verify-remote", *remote, "--full", "--engine", "local", *no_audit]),
    }
    print("[tiered] checking the data (nothing may be found) ...", file=sys.stderr, flush=True)
    n = args.segments
    expect(["remote-inventory", "--log-dir", log_dir], f"{2 * n} metadata records; 0 problems")
    expect(["remote-inventory", *remote], f"{5 * n} objects of tiered segments, 0 other keys")
    for mode, flag in (("index-only", []), ("full", ["--full"])):
        expect(["verify-remote", *remote, *flag], f"{n} remote segments checked ({mode}), 0 with findings, 0 skipped")
    watch, runs, requests = MachineWatch(), [], {}
    for run in range(args.runs):
        watch.before_run()
        seconds = {}
        for case in CASES if run % 2 == 0 else CASES[::-1]:
            print(f"[tiered run {run + 1}/{args.runs}] {case}", file=sys.stderr, flush=True)
            offset = os.path.getsize(os.path.join(root, "moto.log"))
            seconds[case] = timed(commands[case])
            if run == 0:
                requests[case] = requests_since(os.path.join(root, "moto.log"), offset)
        runs.append(seconds)
    report(args, runs, requests, watch, nbytes)
    return 0


def report(
    args: argparse.Namespace, runs: list[dict[str, float]], requests: dict[str, str], watch: MachineWatch, nbytes: int
) -> None:
    n = args.segments
    s = {case: [r[case] for r in runs] for case in CASES}

    def ratio(a: str, b: str) -> str:
        values = [x / y for x, y in zip(s[a], s[b], strict=True)]
        return f"**{med(values):.2f}x** ({runs_list(values)})"

    def wall(case: str) -> str:
        return f"{med(s[case]):.1f} s ({runs_list(s[case], '{:.1f}')})"

    header(f"tiered storage: {n} remote segments, {nbytes / MIB:.0f} MiB of .log, in moto's S3", args.runs, watch)
    print()
    print("| figure | value (runs) | target |")
    print("| --- | ---: | --- |")
    for jobs in (1, JOBS):
        met = "met" if med([n / x for x in s[f"index {jobs}"]]) >= TARGET_RATE * min(jobs, 2) else "**missed**"
        print(f"| index-only `--jobs {jobs}` | {wall(f'index {jobs}')} = **{n / med(s[f'index {jobs}']):.0f} "
              f"segments/s** | >= {TARGET_RATE * min(jobs, 2)}/s ({TARGET_RATE} a core): {met} |")  # fmt: skip
        print(f"| limit: plain read of the {4 * n} index objects, {jobs} thread(s) | {wall(f'read indexes {jobs}')} "
              f"= {n / med(s[f'read indexes {jobs}']):.0f} segments/s | |")  # fmt: skip
        print(f"| index-only / plain read, `--jobs {jobs}` | {ratio(f'index {jobs}', f'read indexes {jobs}')} | |")
    met = "met" if med([f / r for f, r in zip(s["full"], s["read all"], strict=True)]) <= TARGET_RATIO else "**missed**"
    print(f"| `--full` (jobs {JOBS}) | {wall('full')} = {nbytes / med(s['full']) / 1e6:.0f} MB/s of .log | |")
    print(f"| limit: plain read of the {5 * n} objects it reads ({JOBS} threads) | {wall('read all')} = "
          f"{nbytes / med(s['read all']) / 1e6:.0f} MB/s of .log | |")  # fmt: skip
    print(f"| `--full` / plain read of the same objects | {ratio('full', 'read all')} | <= {TARGET_RATIO}x: {met} |")
    for what in ("index", "full"):
        print(f"| kafka-index Spark `local[*]`, {what} | {wall('spark ' + what)} | |")
        print(f"| kafka-index standalone cluster (2 workers x 1 core), {what} | {wall('cluster ' + what)} | |")
        print(f"| kafka-index `--engine local`, {what} | {wall('local ' + what)} | |")
        print(f"| Spark `local[*]` / local engine, {what} | {ratio('spark ' + what, 'local ' + what)} | |")
        print(f"| cluster / local engine, {what} | {ratio('cluster ' + what, 'local ' + what)} | |")
    print()
    print("Requests moto logged (run 1):")
    print()
    for case, counts in requests.items():
        print(f"* {case}: {counts}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
