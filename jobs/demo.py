"""``make demo``: the main job end to end on an embedded default (local Spark, a local Delta table).

Generates a sample broker log dir (three topics, transactions included), damages a few index files the
way real incidents do (a deleted ``.index``, a torn ``.timeindex``, a scrambled ``.index``, a lost
``.txnindex``), then runs ``kafka-index verify`` (shows the findings), ``kafka-index repair`` (fixes
exactly those, with backups) and ``kafka-index audit`` (what the Delta audit table now says).
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import numpy as np

from indexlib.engine import rebuild_partition
from indexlib.format import segment_base_offsets, segment_file
from indexlib.testing import generate_partition

from .cli import main as kafka_index


def make_sample(log_dir: str) -> list[str]:
    """Write the sample partitions with correct index files, then damage four of them. Returns their names."""
    shutil.rmtree(log_dir, ignore_errors=True)
    for i, (name, producers) in enumerate((("orders-0", 2), ("orders-1", 0), ("payments-0", 3))):
        generate_partition(
            os.path.join(log_dir, name),
            segments=3,
            batches_per_segment=300,
            transactional_producers=producers,
            seed=40 + i,
        )
        rebuild_partition(os.path.join(log_dir, name))
    damaged = []

    def seg(name: str, index: int) -> str:  # the index-th segment's file name prefix
        base = segment_base_offsets(os.path.join(log_dir, name))[index]
        return segment_file(os.path.join(log_dir, name), base, "")

    os.unlink(seg("orders-0", 0) + ".index")
    damaged.append(seg("orders-0", 0) + ".index (deleted)")
    path = seg("orders-1", 1) + ".timeindex"
    os.truncate(path, os.path.getsize(path) - 7)
    damaged.append(path + " (torn write)")
    path = seg("payments-0", 0) + ".index"
    data = bytearray(Path(path).read_bytes())
    data[16:64] = np.random.default_rng(1).integers(0, 256, 48, dtype=np.uint8).tobytes()
    Path(path).write_bytes(bytes(data))
    damaged.append(path + " (scrambled)")
    txn = [
        f
        for f in sorted(os.listdir(os.path.join(log_dir, "payments-0")))
        if f.endswith(".txnindex") and os.path.getsize(os.path.join(log_dir, "payments-0", f))
    ]
    os.unlink(os.path.join(log_dir, "payments-0", txn[-1]))
    damaged.append(os.path.join(log_dir, "payments-0", txn[-1]) + " (deleted)")
    return damaged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output-dir", default="demo-output", help="where the sample log dir, audit table and backups go"
    )
    args = parser.parse_args(argv)
    out = os.path.abspath(args.output_dir)
    log_dir, table, backups, journal = (os.path.join(out, n) for n in ("kafka-logs", "audit", "backups", "journal"))
    for old in (table, backups, journal):  # an earlier demo's: its run ids are this one's (a re-used id is refused)
        shutil.rmtree(old, ignore_errors=True)
    print(f"== a sample log dir in {log_dir}, with damaged index files:")
    for d in make_sample(log_dir):
        print(f"   {d}")
    common = ["--log-dir", log_dir, "--audit-table", table, "--audit-journal", journal]
    print("\n== kafka-index verify  (read-only)")
    verify_code = kafka_index(["verify", *common, "--run-id", "demo-verify"])
    print(f"   exit code {verify_code} (1 = findings)")
    print("\n== kafka-index repair  (rebuilds only what verify found, keeps backups)")
    repair_code = kafka_index(["repair", *common, "--backup-dir", backups, "--run-id", "demo-repair"])
    print(f"   exit code {repair_code}; backups in {backups}/demo-repair/")
    print("\n== kafka-index verify  (again)")
    again = kafka_index(["verify", *common, "--run-id", "demo-verify-again"])
    print("\n== kafka-index audit --repaired  (the Delta audit table)")
    kafka_index(["audit", "--audit-table", table, "--repaired", "--since", "2000-01-01"])
    print("\n== kafka-index audit --sql  (free SQL; the table is called 'audit')")
    kafka_index(
        [
            "audit",
            "--audit-table",
            table,
            "--sql",
            "SELECT run_id, run_mode, segments, status FROM audit WHERE record_type = 'run' ORDER BY run_started",
        ]
    )
    return 0 if (verify_code == 1 and repair_code == 0 and again == 0) else 1


if __name__ == "__main__":
    raise SystemExit(main())
