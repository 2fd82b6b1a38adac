"""A short tour of the index library on a generated segment layout (``make demo``).

Lays out 20 000 batches of varying size as a Kafka segment would hold them, builds the ``.index`` and
``.timeindex`` with Kafka's spacing rule (an entry each time more than ``index.interval.bytes`` were
written since the last one), reopens them read-only and answers a few lookups.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from indexlib import OffsetIndex, TimeIndex


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m indexlib.demo", description=__doc__)
    parser.add_argument("--output-dir", default="demo-output", help="where the index files go")
    parser.add_argument("--index-interval-bytes", type=int, default=4096)
    args = parser.parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)

    rng = np.random.default_rng(7)
    base = 1_000
    batches = 20_000
    records = rng.integers(1, 20, batches)  # records per batch
    sizes = 61 + records * rng.integers(40, 200, batches)  # bytes per batch
    positions = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    last_offsets = base + np.cumsum(records) - 1
    max_timestamps = 1_700_000_000_000 + np.cumsum(rng.integers(0, 50, batches))

    # Kafka's rule: index a batch when the bytes since the last indexed batch's start exceed the interval.
    chosen, last_indexed = [], 0
    for i, position in enumerate(positions.tolist()):
        if position - last_indexed > args.index_interval_bytes:
            chosen.append(i)
            last_indexed = position
    chosen = np.array(chosen)

    index_path = os.path.join(args.output_dir, f"{base:020d}.index")
    time_path = os.path.join(args.output_dir, f"{base:020d}.timeindex")
    for path in (index_path, time_path):
        if os.path.exists(path):
            os.unlink(path)
    with OffsetIndex(index_path, base) as index, TimeIndex(time_path, base) as time_index:
        index.append_many(last_offsets[chosen], positions[chosen])
        time_index.append_many(max_timestamps[chosen], last_offsets[chosen])
        time_index.maybe_append(int(max_timestamps[-1]), int(last_offsets[-1]), skip_full_check=True)

    print(f"segment: {batches} batches, {int(sizes.sum()):,} bytes, offsets {base}..{int(last_offsets[-1])}")
    print(f"wrote {index_path} ({os.path.getsize(index_path)} bytes) and {time_path} ({os.path.getsize(time_path)} bytes)")
    with OffsetIndex(index_path, base, writable=False) as index, TimeIndex(time_path, base, writable=False) as time_index:
        index.sanity_check()
        time_index.sanity_check()
        print(f"offset index: {index.entries} entries, last offset {index.last_offset}")
        print(f"time index:   {time_index.entries} entries, last entry {tuple(time_index.last_entry)}")
        target = int(last_offsets[batches // 2])
        found = index.lookup(target)
        print(f"lookup(offset={target}) -> start scanning the log at byte {found.position} (entry for offset {found.offset})")
        ts = int(max_timestamps[batches // 3])
        print(f"time lookup(timestamp={ts}) -> {tuple(time_index.lookup(ts))}; ceiling -> {tuple(time_index.lookup_ceiling(ts) or ())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
