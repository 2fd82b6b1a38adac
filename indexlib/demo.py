"""A short tour of indexlib on a generated partition (``make demo``).

Writes a small Kafka partition (3 segments of v2 batches, with transactions, some aborted), rebuilds
its ``.index`` / ``.timeindex`` / ``.txnindex`` exactly as Kafka's recovery would, then reopens them
read-only and answers a few lookups.
"""

from __future__ import annotations

import argparse
import os
import shutil

from indexlib import OffsetIndex, TimeIndex, TransactionIndex
from indexlib.generate import generate_partition
from indexlib.partition import rebuild_partition, segment_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m indexlib.demo", description=__doc__)
    parser.add_argument("--output-dir", default="demo-output", help="where the generated partition goes")
    parser.add_argument("--index-interval-bytes", type=int, default=4096)
    args = parser.parse_args(argv)
    partition_dir = os.path.join(args.output_dir, "orders-0")
    shutil.rmtree(partition_dir, ignore_errors=True)
    logs = generate_partition(partition_dir, segments=3, batches_per_segment=400, transactional_producers=3, seed=7)
    print(f"generated {partition_dir}: {len(logs)} segments, {sum(os.path.getsize(p) for p in logs):,} bytes")

    result = rebuild_partition(partition_dir, index_interval_bytes=args.index_interval_bytes)
    for seg in result.segments:
        sizes = ", ".join(f"{os.path.basename(p)} {os.path.getsize(p)} B" for p in seg.written)
        print(f"  segment {seg.base_offset}: {seg.scan.batch_count} batches, {len(seg.aborted)} aborted txns -> {sizes}")

    seg = result.segments[1]
    base = seg.base_offset
    with OffsetIndex(segment_file(partition_dir, base, ".index"), base, writable=False) as index, \
            TimeIndex(segment_file(partition_dir, base, ".timeindex"), base, writable=False) as times:
        index.sanity_check()
        times.sanity_check()
        target = int(seg.scan.last_offsets[seg.scan.batch_count // 2])
        found = index.lookup(target)
        print(f"offset {target}: start scanning segment {base} at byte {found.position} (index entry for offset {found.offset})")
        ts = int(seg.scan.max_timestamps[seg.scan.batch_count // 3])
        print(f"timestamp {ts}: floor entry {tuple(times.lookup(ts))}, ceiling entry {tuple(times.lookup_ceiling(ts) or ())}")
    txn_path = segment_file(partition_dir, base, ".txnindex")
    if os.path.exists(txn_path):
        with TransactionIndex(txn_path, base, writable=False) as txns:
            for txn in txns.all_aborted_txns()[:3]:
                print(f"aborted: producer {txn.producer_id} offsets {txn.first_offset}..{txn.last_offset} (LSO {txn.last_stable_offset})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
