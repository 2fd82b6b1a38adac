"""A dry run lists every file the real run writes (issue 37): per segment its index files, ``.txnindex`` and cut
``.log``, and beside the segments the producer snapshots and leader epochs a repair rewrites, a recover's snapshots,
leader epochs, rolled segment and recovery-point checkpoint, and the segments a cut drops; in ``--json``
(``would_write``, ``partition_files_would_write``) and in the summary table's counts. Each test runs the dry run,
checks that it wrote nothing, then the real run on the same files, and compares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from indexlib.cli.main import main
from indexlib.cli.report import report_to_dict
from indexlib.engine import RunOptions, map_locally, rebuild_partition, run, summary_rows
from indexlib.recovery.settings import IndexSettings
from indexlib.storage.discovery import discover
from indexlib.testing.generate import generate_partition

from ..conftest import DAMAGE_CASES, KAFKA_REAL, copy_fixture, damage_log_dir, requires_kafka_real
from .test_recover import crashed_log_dir


def contents(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def written(report: dict) -> set[str]:
    return {w for s in report["segments"] for w in s["written"]} | set(report["partition_files_written"])


def would_write(report: dict) -> set[str]:
    return {w for s in report["segments"] for w in s["would_write"]} | set(report["partition_files_would_write"])


def dry_then_real(logs: Path, mode: str, tmp_path: Path, **options) -> tuple[dict, dict, list, list]:
    """The dry run's and the real run's JSON reports and summary rows, over the same files (the dry run first)."""
    before = contents(logs)
    reports = []
    for dry_run in (True, False):
        opts = RunOptions(mode, dry_run=dry_run, backup_root=str(tmp_path / f"backups-{dry_run}"), **options)
        report = run(discover([str(logs)]), opts, lambda topic: IndexSettings(), map_locally(1))
        reports.append(report)
        if dry_run:
            assert contents(logs) == before  # wrote nothing
    dry, real = reports
    return report_to_dict(dry), report_to_dict(real), summary_rows(dry), summary_rows(real)


def assert_same_lists(dry: dict, real: dict, dry_rows: list, real_rows: list) -> None:
    assert would_write(dry) == written(real)
    assert {s["log_path"]: sorted(s["written"]) for s in dry["segments"]} == {
        s["log_path"]: [] for s in dry["segments"]
    }  # a dry run writes nothing
    assert [(r["partition"], r["written"]) for r in dry_rows] == [(r["partition"], r["written"]) for r in real_rows]


@pytest.mark.parametrize("case", DAMAGE_CASES)
def test_a_dry_repair_lists_the_files_the_repair_writes(tmp_path, case):
    logs = tmp_path / "logs"
    for i, name in enumerate(("orders-0", "orders-1")):
        generate_partition(logs / name, segments=2, batches_per_segment=50, transactional_producers=2, seed=20 + i)
        rebuild_partition(logs / name)
    damage_log_dir(logs, case)
    dry, real, dry_rows, real_rows = dry_then_real(logs, "repair", tmp_path, truncate_corrupt_tail=True)
    assert_same_lists(dry, real, dry_rows, real_rows)
    if case not in ("bad-checkpoint", "refused-segment"):  # findings a repair cannot write away
        assert written(real), case


@pytest.mark.parametrize("case", ["deleted", "corrupt-log-tail"])
def test_a_dry_rebuild_into_an_output_dir_lists_the_files_the_rebuild_writes(tmp_path, case):
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=50, transactional_producers=2, seed=3)
    rebuild_partition(logs / "orders-0")
    damage_log_dir(logs, case)
    out = tmp_path / "out"
    dry, real, dry_rows, real_rows = dry_then_real(logs, "rebuild", tmp_path, output_dir=str(out))
    assert_same_lists(dry, real, dry_rows, real_rows)
    assert written(real) and all(path.startswith(str(out)) for path in written(real))


@requires_kafka_real
def test_a_dry_repair_lists_the_snapshots_and_leader_epochs_it_rewrites(tmp_path):
    """A real broker's partition with a snapshot Kafka would refuse and a leader-epoch checkpoint emptied: the dry
    run lists both, as the real repair writes them."""
    logs = tmp_path / "logs"
    copy_fixture(KAFKA_REAL / "local-apache-kafka-4.1.0" / "txn-0", logs / "txn-0")
    snapshot = logs / "txn-0" / "00000000000000000011.snapshot"
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[:3] + bytes([data[3] ^ 0x10]) + data[4:])
    (logs / "txn-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    dry, real, dry_rows, real_rows = dry_then_real(logs, "repair", tmp_path)
    assert_same_lists(dry, real, dry_rows, real_rows)
    assert {str(snapshot), str(logs / "txn-0" / "leader-epoch-checkpoint")} <= set(dry["partition_files_would_write"])


def test_a_dry_recover_lists_what_the_recover_writes_and_moves_away(tmp_path, capsys):
    """A crashed log dir with a torn middle segment: the dry run lists the cut ``.log``, every index file, the
    later segment's files (moved away), the snapshots, the rolled segment and the recovery-point checkpoint; the
    command line's table says "files to write" with the real run's counts."""
    logs = crashed_log_dir(tmp_path, partitions=2)
    middle = sorted((logs / "orders-0").glob("*.log"))[1]
    with open(middle, "ab") as f:
        f.write(b"\x00" * 64 + b"\x07" * 30)
    dry, real, dry_rows, real_rows = dry_then_real(logs, "recover", tmp_path)
    assert_same_lists(dry, real, dry_rows, real_rows)
    listed = would_write(dry)
    assert str(middle) in listed and str(logs / "recovery-point-offset-checkpoint") in listed
    last = sorted((tmp_path / "backups-False").rglob("*.log"))  # the dropped segment's .log, moved away
    assert any(os.path.basename(str(p)) in {os.path.basename(w) for w in listed} for p in last)
    assert main(["recover", str(logs), "--dry-run", "--backup-dir", str(tmp_path / "b")]) == 0  # now nothing to do
    assert "files to write" in capsys.readouterr().out
