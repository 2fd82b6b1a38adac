"""How long does reading the cluster's metadata add to a run? (issue 38: under 1 s for 10,000 partitions with 1,000
topic configs)

A KRaft metadata log as a controller writes it for ``--topics`` topics of ``--partitions-per-topic`` partitions, each
topic with one config record (``index.interval.bytes``), every partition once re-elected (a
``PartitionChangeRecord``), NoOp records between: batches of up to 500 records, as the controller's appends. Two
whole-process figures, medians over ``--runs``, the order alternating in each run:

* ``read``: ``read_cluster_metadata(dir)`` in a fresh process, less the same process without it (Python's start
  and the imports), so the figure is the reading and the replay alone;
* ``verify``: ``python -m indexlib verify`` of one partition of that log dir, against the same with
  ``--cluster-metadata none``: what a user waits for more.

    .venv/bin/python benchmarks/cluster_metadata.py [--topics 1000] [--partitions-per-topic 10] [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from common import MachineWatch, compile_bytecode, header, med, runs_list, scratch, timed, tree_env

from indexlib.testing.batch_encoder import encode_batch_v2
from indexlib.testing.generate import generate_partition
from indexlib.testing.message_encoder import encode_metadata_record

TOPIC, PARTITION, CONFIG, CHANGE, NO_OP = 2, 3, 4, 5, 20
BATCH = 500


def topic_id(n: int) -> str:
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.UUID(int=n + 1).bytes).decode().rstrip("=")


def metadata_records(topics: int, partitions: int) -> list[bytes]:
    out = []
    for t in range(topics):
        tid = topic_id(t)
        out.append(encode_metadata_record(TOPIC, {"name": f"topic-{t}", "topicId": tid}))
        out.append(
            encode_metadata_record(
                CONFIG,
                {"resourceType": 2, "resourceName": f"topic-{t}", "name": "index.interval.bytes", "value": "1024"},
            )
        )
        for p in range(partitions):
            record = {"partitionId": p, "topicId": tid, "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1 + p % 3}
            out.append(encode_metadata_record(PARTITION, {**record, "leaderEpoch": 0, "partitionEpoch": 0}))
    for t in range(topics):
        for p in range(partitions):
            out.append(encode_metadata_record(CHANGE, {"partitionId": p, "topicId": topic_id(t), "leader": 2}))
        out.append(encode_metadata_record(NO_OP, {}))
    return out


def write_log_dir(root: str, topics: int, partitions: int) -> str:
    logs = os.path.join(root, "logs")
    meta = os.path.join(logs, "__cluster_metadata-0")
    os.makedirs(meta)
    records = metadata_records(topics, partitions)
    with open(os.path.join(meta, "00000000000000000000.log"), "wb") as f:
        for first in range(0, len(records), BATCH):
            chunk = records[first : first + BATCH]
            f.write(encode_batch_v2(first, [(None, v, 1_700_000_000_000) for v in chunk]))
    generate_partition(os.path.join(logs, "topic-0-0"), segments=1, batches_per_segment=20, seed=1)
    return logs


def python(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, env=tree_env(), capture_output=True)


def run_verify(cmd: list[str]) -> None:
    """One whole ``verify``; its exit code 0 or 1 (the generated partition has no index files: findings)."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=tree_env())
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited with {done.returncode}: {done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions-per-topic", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 topics, one run: a smoke test, not a figure")
    args = parser.parse_args(argv)
    if args.quick:
        args.topics, args.runs = 100, 1
    compile_bytecode()
    watch = MachineWatch()
    with scratch("ki-metadata-") as root:
        logs = write_log_dir(root, args.topics, args.partitions_per_topic)
        meta = os.path.join(logs, "__cluster_metadata-0")
        size = os.path.getsize(os.path.join(meta, "00000000000000000000.log"))
        imports = "from indexlib.storage import read_cluster_metadata"
        read = f"{imports}; s = read_cluster_metadata({meta!r}); assert len(s.partitions) == {args.topics * args.partitions_per_topic}"
        partition = os.path.join(logs, "topic-0-0")
        verify = [sys.executable, "-m", "indexlib", "verify", partition]
        reads, verifies, plain, with_metadata = [], [], [], []
        for run in range(args.runs):
            watch.before_run()
            ways = [("bare", lambda: python(imports)), ("read", lambda: python(read))]
            checks = [
                ("none", lambda: run_verify([*verify, "--cluster-metadata", "none"])),
                ("metadata", lambda: run_verify(verify)),
            ]
            if run % 2:
                ways.reverse()
                checks.reverse()
            seconds = {name: timed(work) for name, work in [*ways, *checks]}
            reads.append(seconds["read"] - seconds["bare"])
            verifies.append(seconds["metadata"] - seconds["none"])
            plain.append(seconds["none"])
            with_metadata.append(seconds["metadata"])

    partitions = args.topics * args.partitions_per_topic
    header(f"cluster metadata: {args.topics} topics x {args.partitions_per_topic} partitions", args.runs, watch)
    print(f"metadata log: {size / 2**20:.1f} MiB, {partitions} partitions, {args.topics} topic configs")
    print()
    print("| figure | median | runs |")
    print("| --- | ---: | --- |")
    print(
        f"| read and replay the metadata (process less its bare start) | {med(reads):.3f} s | {runs_list(reads, '{:.3f}')} |"
    )
    print(
        f"| `verify` of one partition, with the metadata less without | {med(verifies):.3f} s | {runs_list(verifies, '{:.3f}')} |"
    )
    print(
        f"| `verify` with the metadata (whole process) | {med(with_metadata):.3f} s | {runs_list(with_metadata, '{:.3f}')} |"
    )
    print(f"| `verify --cluster-metadata none` (whole process) | {med(plain):.3f} s | {runs_list(plain, '{:.3f}')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
