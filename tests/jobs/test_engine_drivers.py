"""The two drivers of the segment engine agree: ``python -m indexlib`` (a local process pool) and the
Spark job (``kafka-index``, real local Spark) give the same findings, the same actions, the same bytes
and the same exit code, over every real fixture set and over each kind of damage the tests build; their
``repair`` also the same backups and audit rows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from indexlib.cli.main import main as indexlib_main
from indexlib.engine import rebuild_partition
from indexlib.testing.generate import generate_partition
from jobs.cli import main as kafka_index_main

from ..conftest import DAMAGE_CASES, KAFKA_REAL, copy_fixture, damage_log_dir, requires_kafka_real

ORACLE = "_rebuilt_by_kafka_4.1.0"


def fixture_sets() -> list[Path]:
    return sorted(p for p in KAFKA_REAL.iterdir() if p.is_dir()) if KAFKA_REAL.is_dir() else []


def copy_log_dir(source: Path, target: Path) -> Path:
    return copy_fixture(source, target, ignore=(ORACLE, "MANIFEST.json"))


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def both(mode: str, log_dir: Path, tmp: Path, *extra: str) -> tuple[tuple[int, dict], tuple[int, dict]]:
    """(exit code, JSON report) of ``python -m indexlib`` and of the Spark job, same mode and log dir."""
    local_json, spark_json = tmp / f"{mode}-local.json", tmp / f"{mode}-spark.json"
    local = indexlib_main([mode, str(log_dir), "--jobs", "2", "--json", str(local_json), *extra])
    spark = kafka_index_main(
        [mode, "--log-dir", str(log_dir), "--json", str(spark_json), "--audit-table", "none", "--no-progress", *extra]
    )
    return (local, json.loads(local_json.read_text())), (spark, json.loads(spark_json.read_text()))


def facts(report: dict) -> dict:
    """What both drivers must agree on: per segment the findings (kind, file, entry, position, found),
    the action and the files written, the partition-level findings, and what remains."""

    def finding(f: dict) -> tuple:
        return (f["kind"], f["file"], f["entry"], f["position"], f["found"], f["severity"])

    return {
        "segments": {
            (s["topic"], s["partition"], s["base_offset"]): (
                sorted(map(finding, s["findings"])),
                s["action"],
                sorted(s["written"]),
                s["identical"],
            )
            for s in report["segments"]
        },
        "partition_findings": {k: sorted(map(finding, v)) for k, v in report["partition_findings"].items()},
        "remaining": sorted(map(finding, report["remaining_findings"])),
    }


def assert_same_verify_and_rebuild(log_dir: Path, tmp: Path) -> dict:
    before = files(log_dir)
    (local_code, local), (spark_code, spark) = both("verify", log_dir, tmp)
    assert files(log_dir) == before  # both only read
    assert local_code == spark_code == local["exit_code"] == spark["exit_code"]
    assert facts(local) == facts(spark)
    out_local, out_spark = tmp / "out-local", tmp / "out-spark"
    code_local = indexlib_main(["rebuild", str(log_dir), "--jobs", "2", "--output-dir", str(out_local)])
    code_spark = kafka_index_main(
        ["rebuild", "--log-dir", str(log_dir), "--output-dir", str(out_spark), "--audit-table", "none", "--no-progress"]
    )
    assert code_local == code_spark
    assert files(out_local) == files(out_spark)  # the same files, byte for byte
    assert files(log_dir) == before
    assert_same_repair(log_dir, tmp)
    return local


def assert_same_repair(log_dir: Path, tmp: Path) -> None:
    """``python -m indexlib repair`` and the Spark job's ``kafka-index repair``, each on its own copy of ``log_dir``
    with an audit table of its own: the same exit code, report facts, files after, backups and audit rows (their
    times and the copies' paths aside)."""
    from jobs import audit_queries

    runs = []
    for name, main in (("library", indexlib_main), ("spark", kafka_index_main)):
        root = tmp / f"repair-{name}"
        logs = copy_fixture(log_dir, root / "logs")
        options = ["--audit-table", str(root / "audit"), "--audit-journal", str(root / "journal"), "--backup-dir",
                   str(root / "backups"), "--run-id", "same", "--json", str(root / "report.json"), "--no-progress"]  # fmt: skip
        code = main(["repair", str(logs), "--jobs", "2", *options] if name == "library" else
                    ["repair", "--log-dir", str(logs), *options])  # fmt: skip
        rows = sorted(
            json.dumps({k: v for k, v in r.items() if k not in ("run_started", "run_finished", "date", "duration_s")},
                       sort_keys=True, default=str).replace(str(root), "ROOT")
            for r in audit_queries.read(str(root / "audit")).to_pylist()
        )  # fmt: skip
        report = json.loads((root / "report.json").read_text())
        runs.append((code, repr(facts(report)).replace(str(root), "ROOT"), files(logs), files(root / "backups"), rows))
    assert runs[0] == runs[1]
    code, _, _, _, rows = runs[0]
    assert code in (0, 1) and any('"record_type": "run"' in r for r in rows)


@requires_kafka_real
@pytest.mark.parametrize("fixture_set", fixture_sets(), ids=lambda p: p.name)
def test_the_drivers_agree_on_every_real_fixture_set(spark, tmp_path, fixture_set):
    report = assert_same_verify_and_rebuild(copy_log_dir(fixture_set, tmp_path / "logs"), tmp_path)
    assert report["exit_code"] == 0 and report["remaining_findings"] == []


@pytest.mark.parametrize("case", DAMAGE_CASES)
def test_the_drivers_agree_on_each_kind_of_damage(spark, tmp_path, case):
    logs = tmp_path / "logs"
    for i, name in enumerate(("orders-0", "orders-1")):
        generate_partition(logs / name, segments=2, batches_per_segment=50, transactional_producers=2, seed=20 + i)
        rebuild_partition(logs / name)
    damage_log_dir(logs, case)
    report = assert_same_verify_and_rebuild(logs, tmp_path)
    assert report["exit_code"] == 1 and report["remaining_findings"]  # the damage is seen


def test_the_drivers_recover_a_crashed_log_dir_alike(spark, tmp_path):
    """``python -m indexlib recover`` and ``kafka-index recover`` (the Spark job) on two copies of one crashed log
    dir (a torn tail in a middle segment, the active segments' indexes preallocated, recovery points at 0): the
    same report facts and, after, the same files byte for byte (the backups named by their run ids aside)."""
    from ..indexlib.test_recover import crashed_log_dir

    made = crashed_log_dir(tmp_path / "made", partitions=3, point=0)
    middle = sorted((made / "orders-1").glob("*.log"))[1]
    with open(middle, "ab") as f:
        f.write(b"\x00" * 64)
    local_dir, spark_dir = copy_fixture(made, tmp_path / "local"), copy_fixture(made, tmp_path / "spark")
    local_json, spark_json = tmp_path / "local.json", tmp_path / "spark.json"
    local = indexlib_main(["recover", str(local_dir), "--jobs", "2", "--json", str(local_json),
                           "--backup-dir", str(tmp_path / "b-local"), "--run-id", "r", "-q"])  # fmt: skip
    spark_code = kafka_index_main(["recover", "--log-dir", str(spark_dir), "--audit-table", "none", "--no-progress",
                                   "--json", str(spark_json), "--backup-dir", str(tmp_path / "b-spark"),
                                   "--run-id", "r", "-q"])  # fmt: skip
    assert local == spark_code == 0

    def relative(report: dict, root: Path) -> str:
        return repr(facts(report)).replace(str(root), "ROOT")

    local_report, spark_report = json.loads(local_json.read_text()), json.loads(spark_json.read_text())
    assert relative(local_report, local_dir) == relative(spark_report, spark_dir)
    assert files(local_dir) == files(spark_dir)

    def backups(root: Path) -> dict[str, bytes]:  # a log dir's own files are kept under a label of its path
        return {re.sub(r"log-dirs/[^/]+/", "log-dirs/LOG_DIR/", k): v for k, v in files(root).items()}

    assert backups(tmp_path / "b-local") == backups(tmp_path / "b-spark")
    assert any(s["action"] == "dropped" for s in local_report["segments"])
