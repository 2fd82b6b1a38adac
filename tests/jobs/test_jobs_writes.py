"""How the Spark jobs write: executors stage, the driver commits after the producer-state replay. On
generated partitions (no fixtures needed), real local Spark, in process through ``jobs.cli.main``."""

from __future__ import annotations

import json
import os

from indexlib.engine import rebuild_partition
from indexlib.engine.segment_task import plan_segment_file
from indexlib.format.layout import segment_file
from indexlib.testing.batch_encoder import encode_batch_v2
from indexlib.testing.generate import generate_partition
from jobs.cli import main

TS = 1_700_000_000_000


def run_cli(*args) -> int:
    return main([str(a) for a in args])


def files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def segments_by_base(report) -> dict[int, dict]:
    return {s["base_offset"]: s for s in json.loads(report.read_text())["segments"]}


def write_segments(part, segments: list[list[tuple[bool, int]]]) -> None:
    """Segments of one-record batches ``(transactional, producer id)``, offsets contiguous."""
    part.mkdir(parents=True)
    offset = 0
    for batches in segments:
        data = b""
        base = offset
        for transactional, pid in batches:
            data += encode_batch_v2(
                offset,
                [(None, b"x" * 300, TS + offset)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=offset,
                transactional=transactional,
            )
            offset += 1
        (part / f"{base:020d}.log").write_bytes(data)


def test_a_segment_kafka_would_refuse_gets_nothing_and_leaves_nothing(spark, tmp_path):
    """Segment 1 holds a plain batch of producer 5 while its transaction from segment 0 is open (Kafka's
    recovery throws InvalidTxnStateException there). Its executor staged files before the replay could
    know; the commit must throw them away, backups included, and still rebuild segment 0."""
    logs, backups = tmp_path / "logs", tmp_path / "backups"
    part = logs / "orders-0"
    write_segments(part, [[(True, 5), (False, 7)] * 10, [(False, 7), (False, 5), (False, 7)] * 5])
    for base in (0, 20):
        for suffix in (".index", ".timeindex"):
            with open(segment_file(str(part), base, suffix), "wb") as f:
                f.write(b"\x00" * 24)  # existing (wrong) files, so there is something to back up
    before = files(part)
    report = tmp_path / "r.json"
    assert (
        run_cli(
            "rebuild",
            "--log-dir",
            logs,
            "--index-interval-bytes",
            0,
            "--backup-dir",
            backups,
            "--run-id",
            "rb",
            "--audit-table",
            "none",
            "--json",
            report,
            "--no-progress",
        )
        == 1
    )
    segs = segments_by_base(report)
    assert segs[20]["action"] == "cannot_rebuild" and segs[20]["written"] == [] and segs[20]["backups"] == []
    assert "non_transactional_in_open_transaction" in {f["kind"] for f in segs[20]["findings"]}
    assert segs[0]["action"] == "rebuilt"
    after = files(part)
    assert set(after) == set(before)  # no staged file left behind
    for name in before:
        if name.startswith(f"{20:020d}"):
            assert after[name] == before[name], name  # the refused segment is untouched
    _, expected = plan_segment_file(str(part / f"{0:020d}.log"), 0, index_interval_bytes=0)
    assert len(after[f"{0:020d}.index"]) == 8 * expected.index_entries > 0
    kept = sorted(p.name for p in (backups / "rb" / "orders-0").iterdir())
    assert kept == [f"{0:020d}.index", f"{0:020d}.timeindex"]  # only segment 0's replaced files


def test_write_failures_are_reported_and_leave_nothing_half_written(spark, tmp_path, capsys):
    """One partition cannot be staged (its output dir is a file: the executor fails), another cannot be
    installed (a directory sits at a final name: the driver's rename fails). Both are ``failed``, the
    rest is written, and no staged file survives."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    for n in range(3):
        generate_partition(logs / f"orders-{n}", segments=2, batches_per_segment=40, seed=n)
    out.mkdir()
    (out / "orders-0").write_text("in the way")
    (out / "orders-1").mkdir()
    (out / "orders-1" / f"{0:020d}.timeindex").mkdir()
    report = tmp_path / "r.json"
    assert (
        run_cli(
            "rebuild",
            "--log-dir",
            logs,
            "--output-dir",
            out,
            "--audit-table",
            "none",
            "--json",
            report,
            "--no-progress",
        )
        == 1
    )
    printed = capsys.readouterr().out
    assert "failed writes" in printed and f"{out / 'orders-0'}/{0:020d}" in printed
    data = json.loads(report.read_text())
    actions = {(f"{s['topic']}-{s['partition']}", s["base_offset"]): s for s in data["segments"]}
    failed = sorted(k for k, s in actions.items() if s["action"] == "failed")
    assert failed == sorted([k for k in actions if k[0] == "orders-0"] + [("orders-1", 0)])
    assert all(
        s["error"] and (str(out / "orders-0") in s["error"] or str(out / "orders-1") in s["error"])
        for s in actions.values()
        if s["action"] == "failed"
    )
    assert (out / "orders-0").read_text() == "in the way"
    # orders-1's .index went in before its .timeindex could not; the report says so
    assert actions[("orders-1", 0)]["written"] == [str(out / "orders-1" / f"{0:020d}.index")]
    assert (out / "orders-1" / f"{0:020d}.timeindex").is_dir()
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".rebuild.tmp")]
    assert leftovers == []
    ref = tmp_path / "ref"
    rebuild_partition(logs / "orders-2", output_dir=ref)
    assert files(out / "orders-2") == files(ref / "orders-2")


def test_output_and_backup_dirs_inside_the_log_dir_are_refused(spark, tmp_path, capsys):
    """The same refusal as python -m indexlib's (one engine): exit 2, one line, nothing made in the log dir."""
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=10, seed=1)
    before = sorted(logs.rglob("*"))
    for argv in (
        ["rebuild", "--output-dir", logs],
        ["rebuild", "--output-dir", logs / "out"],
        ["repair", "--backup-dir", logs / "orders-0"],
    ):
        assert run_cli(*argv, "--log-dir", logs, "--audit-table", "none", "--no-progress") == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "log dir" in err and str(argv[2]) in err, err
    assert sorted(logs.rglob("*")) == before


def test_output_dir_refuses_one_partition_from_two_log_dirs(spark, tmp_path, capsys):
    """Two brokers' mounts in one run: both hold orders-0, and --output-dir has room for one."""
    for broker in ("b1", "b2"):
        generate_partition(tmp_path / broker / "orders-0", segments=1, batches_per_segment=10, seed=1)
    out = tmp_path / "out"
    assert (
        run_cli(
            "rebuild",
            "--log-dir",
            tmp_path / "b1",
            "--log-dir",
            tmp_path / "b2",
            "--output-dir",
            out,
            "--audit-table",
            "none",
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"orders-0 is in both {tmp_path / 'b1'} and {tmp_path / 'b2'}" in err and "Traceback" not in err
    assert not out.exists()
    # in place too: both would back up into <backup dir>/<run id>/orders-0/
    assert (
        run_cli(
            "repair",
            "--log-dir",
            tmp_path / "b1",
            "--log-dir",
            tmp_path / "b2",
            "--backup-dir",
            tmp_path / "bk",
            "--audit-table",
            "none",
        )
        == 2
    )
    assert "orders-0 is in both" in capsys.readouterr().err and not (tmp_path / "bk").exists()
    # reading both is fine
    assert run_cli("verify", "--log-dir", tmp_path / "b1", "--log-dir", tmp_path / "b2", "--audit-table", "none") == 1


def test_staged_files_of_a_lost_task_attempt_are_swept(spark, tmp_path):
    """A task attempt that died after staging leaves a file no outcome names; the run removes its own
    such files, and another run's only when that run is dead: here "sweep-run.7" is alive (it holds its
    run lock), so its file stays."""
    from indexlib.storage.locks import run_locks

    logs = tmp_path / "logs"
    part = logs / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=30, seed=2)
    lost = part / f".{0:020d}.index.sweep-run~12345.rebuild.tmp"
    foreign = part / f".{0:020d}.index.sweep-run.7~3.rebuild.tmp"  # run "sweep-run.7", not ours
    lost.write_bytes(b"half")
    foreign.write_bytes(b"not ours")
    with run_locks([str(logs)], "sweep-run.7"):
        code = run_cli("rebuild", "--log-dir", logs, "--run-id", "sweep-run", "--audit-table", "none", "--no-progress")
    assert code == 0
    assert not lost.exists() and foreign.read_bytes() == b"not ours"
    assert sorted(p.name for p in part.iterdir()) == sorted(
        [foreign.name] + [f"{0:020d}{s}" for s in (".log", ".index", ".timeindex")]
    )


def test_repair_does_not_report_its_own_staged_files(spark, tmp_path):
    """The driver lists the partition dirs after the executors staged: those files are not leftovers."""
    logs = tmp_path / "logs"
    part = logs / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=40, seed=4)
    rebuild_partition(part)
    os.unlink(segment_file(str(part), 0, ".index"))
    report = tmp_path / "r.json"
    assert (
        run_cli(
            "repair",
            "--log-dir",
            logs,
            "--backup-dir",
            tmp_path / "b",
            "--audit-table",
            "none",
            "--json",
            report,
            "--no-progress",
        )
        == 0
    )
    data = json.loads(report.read_text())
    kinds = {f["kind"] for findings in data["partition_findings"].values() for f in findings}
    assert kinds == {"no_meta_properties"}  # the log dir's, not a staged file
    assert [s["action"] for s in data["segments"]] == ["repaired", "none"]


def test_a_dry_run_rebuild_writes_nothing(spark, tmp_path):
    """``rebuild --dry-run``, in place and with --output-dir: every segment is reported as it would be
    rebuilt, and no file, staged file, backup or output dir is created or changed."""
    logs, out, backups = tmp_path / "logs", tmp_path / "out", tmp_path / "backups"
    part = logs / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=40, seed=5)
    rebuild_partition(part)
    os.unlink(segment_file(str(part), 0, ".index"))
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in part.iterdir()}
    for extra in ([], ["--output-dir", out]):
        report = tmp_path / "r.json"
        assert (
            run_cli(
                "rebuild",
                "--dry-run",
                "--log-dir",
                logs,
                "--backup-dir",
                backups,
                "--audit-table",
                "none",
                "--json",
                report,
                "--no-progress",
                *extra,
            )
            == 0
        )
        data = json.loads(report.read_text())
        assert [(s["action"], s["written"]) for s in data["segments"]] == [("would_rebuild", [])] * 2
        assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in part.iterdir()} == before
        assert not out.exists() and not backups.exists()
