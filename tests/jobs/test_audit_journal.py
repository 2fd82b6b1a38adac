"""A run that replaced files always leaves an audit trail (issue 12): its rows are journaled (fsynced) while
it commits and until the Delta table has them. Real processes, real kills, a real full filesystem under the
table: a table write that fails ends with exit 3, one error line and the rows kept; a run killed in its
commit leaves a journal; the next run or ``kafka-index audit --recover`` merges either into the table."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from indexlib.testing.generate import generate_partition
from jobs import journal
from jobs.cli import main
from jobs.usage import EXIT_AUDIT_FAILED

from ..conftest import PROJECT_ROOT, fill, remount


def run_cli(*args) -> int:
    return main([str(a) for a in args])


def sha256s(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def damaged_log_dir(root, partitions: int, segments: int = 2):
    """Generated partitions whose .index files are all missing, so a repair writes every segment."""
    logs = root / "logs"
    for p in range(partitions):
        part = logs / f"orders-{p}"
        generate_partition(part, segments=segments, batches_per_segment=30, seed=p)
        for index in part.glob("*.index"):
            index.unlink()
    return logs


def table_rows(table) -> list[dict]:
    from jobs.audit_queries import read

    return read(str(table)).to_pylist()


def test_a_journal_holds_what_a_killed_commit_may_have_replaced(tmp_path):
    """The rows of a journal without its final record: segment rows, an interrupted row per intent without
    a row, an interrupted run row; a torn last line is ignored."""
    path = tmp_path / "r1.jsonl"
    header = {"record": "run", "run_id": "r1", "mode": "repair", "table": "t", "started": "2026-11-23T10:00:00+00:00"}
    done = {"record_type": "segment", "log_dir": "/l", "topic": "a", "partition": 0, "base_offset": 0, "status": "repaired",
            "run_started": "2026-11-23T10:00:00+00:00", "files_written": ["/l/a-0/x.index"]}  # fmt: skip
    lines = [
        header,
        {"record": "intent", "log_dir": "/l", "topic": "a", "partition": 0, "base_offset": 0, "files": ["/l/a-0/x"]},
        {"record": "segment", "row": done},
        {
            "record": "intent",
            "log_dir": "/l",
            "topic": "a",
            "partition": 1,
            "base_offset": 7,
            "files": ["/l/a-1/y"],
            "settings_json": '{"sync": "syncfs"}',
        },  # fmt: skip
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"record": "segm')
    rows, finished = journal.rows_of(journal.read(str(path)))
    assert not finished
    by_key = {(r["record_type"], r["partition"]): r for r in rows}
    assert by_key[("segment", 0)]["status"] == "repaired"
    assert by_key[("segment", 0)]["run_started"].year == 2026  # decoded back to a datetime
    assert by_key[("segment", 1)]["status"] == "interrupted" and by_key[("segment", 1)]["files_written"] == ["/l/a-1/y"]
    assert json.loads(by_key[("segment", 1)]["settings_json"])["sync"] == "syncfs"  # how the killed run wrote
    assert by_key[("run", -1)]["status"] == "interrupted" and by_key[("run", -1)]["segments"] == 2


def test_a_journal_holds_the_files_a_killed_run_was_writing_beside_the_segments(tmp_path):
    """A repair or recover writing a partition's snapshots and leader epochs journals an intent first: killed
    there, the journal gives an interrupted ``partition`` row naming them; finished, the partition's row."""
    from indexlib.engine import RunOptions
    from indexlib.format import BrokerIdentity
    from indexlib.storage import Partition

    part = Partition("/l", "/l/a-0", "a", 0, [])
    broker = BrokerIdentity(cluster_id="c", broker_id=3)
    killed = journal.AuditJournal(str(tmp_path), "t", "r1", RunOptions("repair"))
    killed.before_partition_files(part, broker, ["/l/a-0/00000000000000000010.snapshot"])
    rows, finished = journal.rows_of(journal.read(killed.path))
    [row] = [r for r in rows if r["record_type"] == "partition"]
    assert not finished and (row["status"], row["base_offset"], row["broker_id"]) == ("interrupted", -1, 3)
    assert row["files_written"] == ["/l/a-0/00000000000000000010.snapshot"]
    assert [r["segments"] for r in rows if r["record_type"] == "run"] == [0]

    done = journal.AuditJournal(str(tmp_path), "t", "r2", RunOptions("recover"))
    done.before_partition_files(part, broker, ["/l/a-0"])
    done.after_partition_files(part, broker, ["/l/a-0/00000000000000000010.log"], ["/b/r2/a-0/x.snapshot"])
    rows, _ = journal.rows_of(journal.read(done.path))
    [row] = [r for r in rows if r["record_type"] == "partition"]
    assert (row["status"], row["files_written"], row["backup_location"]) == (
        "ok",
        ["/l/a-0/00000000000000000010.log"],
        "/b/r2/a-0",
    )


def test_a_failed_table_write_keeps_the_rows_and_recover_merges_them(spark, tmp_path, small_fs, capsys):
    """The table lives on a real 64 KiB filesystem: the repair is done, the table write fails (no space),
    exit 3 with one error line naming the table and the journal; grown, ``audit --recover`` merges the
    rows once (a second recover finds nothing), and the table then holds the whole run."""
    logs = damaged_log_dir(tmp_path, partitions=2)
    table, journal_dir = small_fs / "audit", tmp_path / "journal"
    fill(small_fs / "filler")
    before = sha256s(logs)
    code = run_cli(
        "repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
        "--backup-dir", tmp_path / "backups", "--run-id", "full-1", "--no-progress",
    )  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert code == EXIT_AUDIT_FAILED, err
    assert len(err) == 1 and str(table) in err[0] and "full-1.jsonl" in err[0] and "Traceback" not in err[0]
    assert "--recover" in err[0]
    after = sha256s(logs)
    assert {k for k in before if k.endswith(".log")} == {k for k in after if k.endswith(".log")}
    assert all(after[k] == before[k] for k in before if k.endswith(".log"))  # no .log byte changed
    assert len([k for k in after if k.endswith(".index")]) == 4  # the work itself was done
    kept = journal_dir / "full-1.jsonl"
    rows, finished = journal.rows_of(journal.read(str(kept)))
    assert finished and len(rows) == 5  # 4 segments + the run

    (small_fs / "filler").unlink()
    remount(small_fs, "32m")
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir) == 0
    assert "merged 5 of 5 rows of finished run full-1" in capsys.readouterr().err
    assert not kept.exists()
    stored = table_rows(table)
    assert sorted((r["record_type"], r["status"]) for r in stored) == [("run", "ok")] + [("segment", "repaired")] * 4
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir) == 0
    assert len(table_rows(table)) == 5


def _journal_has_a_row(path) -> bool:
    try:
        return any(r.get("record") == "segment" for r in journal.read(str(path)))
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def test_a_run_killed_in_its_commit_leaves_a_journal_the_next_run_merges(tmp_path):
    """A real repair process (driver, JVM, Python workers) is killed with SIGKILL as soon as its journal
    records a committed segment. Every index file that changed is covered by a journaled row (repaired or
    interrupted), no .log byte changed, and the next run merges the journal into the table."""
    logs = damaged_log_dir(tmp_path, partitions=12)
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    before = sha256s(logs)
    path = journal_dir / "killed-1.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "repair", "--log-dir", str(logs), "--audit-table", str(table),
         "--audit-journal", str(journal_dir), "--backup-dir", str(tmp_path / "backups"), "--run-id", "killed-1",
         "--no-progress"],
        cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not _journal_has_a_row(path) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        os.killpg(proc.pid, signal.SIGKILL)  # the whole session: the driver, its JVM, the Python workers
    finally:
        proc.wait()
    if not path.exists():
        pytest.fail("the repair finished (or failed) before it could be killed in its commit")
    rows, finished = journal.rows_of(journal.read(str(path)))
    assert not finished
    after = sha256s(logs)
    assert all(after[k] == before[k] for k in before if k.endswith(".log"))
    # Kafka's files that changed (the killed run's staged temporaries, hidden and never read by Kafka, aside)
    changed = {k for k in after if after.get(k) != before.get(k) and not os.path.basename(k).startswith(".")}
    covered = {os.path.relpath(f, logs) for r in rows if r["record_type"] == "segment" for f in r["files_written"]}
    assert changed and changed <= covered, changed - covered
    # the rows say how the killed run made its files durable: --sync auto chose syncfs (it held the broker lock)
    from indexlib.storage import file_system_sync

    trusted = file_system_sync.file_system_type(os.stat(logs).st_dev) in file_system_sync.SYNCFS_FILE_SYSTEMS
    used = {json.loads(r["settings_json"])["sync"] for r in rows if r["record_type"] == "segment"}
    assert used == {"syncfs" if trusted and file_system_sync.trusted() else "fsync"}

    # the next run (a verify here) merges the interrupted run's rows first
    code = run_cli("verify", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir, "--no-progress")
    assert code in (0, 1)
    assert not path.exists()
    stored = [r for r in table_rows(table) if r["run_id"] == "killed-1"]
    assert {r["status"] for r in stored if r["record_type"] == "run"} == {"interrupted"}
    assert {r["status"] for r in stored if r["record_type"] == "segment"} <= {"repaired", "interrupted"}
    assert len(stored) == len(rows)


def test_a_second_run_with_the_same_run_id_is_refused_while_the_first_holds_it(spark, tmp_path, capsys):
    """Two runs with one run id would stage and sweep the same file names. A real process holds the run's
    lock in the log dir (as a writing run does); a repair with that id is refused, exit 2, one line, nothing
    written; once the holder is gone the same command runs and leaves no lock file behind."""
    logs = damaged_log_dir(tmp_path, partitions=1, segments=1)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from indexlib.storage.locks import run_locks\n"
         f"with run_locks([{str(logs)!r}], 'same-id'):\n    print('held', flush=True); sys.stdin.read()"],
        cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = sha256s(logs)
        args = ("repair", "--log-dir", logs, "--audit-table", "none", "--run-id", "same-id", "--no-progress",
                "--backup-dir", tmp_path / "backups")  # fmt: skip
        assert run_cli(*args) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kafka-index")]
        assert len(err) == 1 and ".kafka-index-run-same-id.lock" in err[0] and "same-id" in err[0], err
        assert sha256s(logs) == before
    finally:
        holder.communicate("")
    assert run_cli(*args) == 0
    assert not any(p.name.startswith(".kafka-index-run-") for p in logs.iterdir())


def test_a_journal_that_cannot_be_written_stops_the_run_before_any_rename(spark, tmp_path, small_fs, capsys):
    """No trail, no write: with the journal dir on a full filesystem the repair stops before its first
    rename (exit 1, one line naming the journal and "No space left"), every file as it was, no journal."""
    logs = damaged_log_dir(tmp_path, partitions=1)
    fill(small_fs / "filler")
    before = sha256s(logs)
    code = run_cli(
        "repair", "--log-dir", logs, "--audit-table", tmp_path / "audit", "--audit-journal", small_fs / "journal",
        "--backup-dir", tmp_path / "backups", "--run-id", "nojournal", "--no-progress",
    )  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kafka-index")]
    assert code == 1 and len(err) == 1, err
    assert (
        f"{small_fs / 'journal' / 'nojournal.jsonl'}: No space left" in err[0] and "stopped before replacing" in err[0]
    )
    assert sha256s(logs) == before
    assert not list((small_fs / "journal").glob("*.jsonl"))


def test_recover_keeps_a_journal_whose_table_cannot_be_reached(tmp_path, capsys):
    """An unreachable table (nothing listens on the HDFS port): one error line, exit 3, the journal kept."""
    table = "hdfs://127.0.0.1:9/kafka-index-audit"
    path = tmp_path / "journal" / "r9.jsonl"
    path.parent.mkdir()
    header = {"record": "run", "run_id": "r9", "mode": "repair", "table": table, "started": "2026-11-23T10:00:00+00:00"}
    path.write_text(json.dumps(header) + "\n")
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", path.parent) == EXIT_AUDIT_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kafka-index: error: audit journal ") and "Traceback" not in err[0]
    assert path.exists()
    assert run_cli("audit", "--recover", "--since", "7d", "--audit-table", table) == 2


def test_dump_of_a_missing_file_is_one_line(capsys, tmp_path):
    assert run_cli("dump", tmp_path / "00000000000000000000.index") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "00000000000000000000.index" in err[0] and "No such file" in err[0]


def test_a_dry_run_writes_no_audit_rows_unless_asked(spark, tmp_path):
    logs = damaged_log_dir(tmp_path, partitions=1, segments=1)
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    base = ("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir, "--dry-run",
            "--no-progress")  # fmt: skip
    assert run_cli(*base, "--run-id", "dry-1") == 1  # findings remain: nothing was repaired
    assert not table.exists() and not journal_dir.exists()
    assert run_cli(*base, "--run-id", "dry-2", "--audit-dry-run") == 1
    rows = table_rows(table)
    assert {r["run_id"] for r in rows} == {"dry-2"} and {r["action"] for r in rows} == {"would_repair", "repair"}


def test_the_jvm_killed_in_the_commit_leaves_the_run_whole_and_audited(tmp_path):
    """Only the driver's JVM is SIGKILLed once the journal records a committed segment. The commit runs in
    the driver's Python and needs no JVM, so the run finishes its renames, writes its audit rows (deltalake,
    no JVM) and ends without a trace; every changed file is in the table."""
    from .test_fault_matrix import _descendants, _program

    logs = damaged_log_dir(tmp_path, partitions=12)
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    before = sha256s(logs)
    path = journal_dir / "jvm-killed.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "repair", "--log-dir", str(logs), "--audit-table", str(table),
         "--audit-journal", str(journal_dir), "--backup-dir", str(tmp_path / "backups"), "--run-id", "jvm-killed",
         "--no-progress"],
        cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed = []
    deadline = time.monotonic() + 240
    while not killed and proc.poll() is None and time.monotonic() < deadline:
        if _journal_has_a_row(path):
            for pid in (p for p in _descendants(proc.pid) if _program(p).endswith(b"/java")):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.001)
    _, stderr = proc.communicate(timeout=300)
    if not killed:
        pytest.fail("the repair finished before its JVM could be killed in the commit")
    # nothing at all on stderr (the JDK's start-up notice aside): py4j once logged a failed call with two
    # traces there, through the root logger, when Python collected a Java object after the JVM died
    assert stderr == "", stderr[-3000:]
    assert proc.returncode == 0, stderr[-3000:]
    after = sha256s(logs)
    assert all(after[k] == before[k] for k in before if k.endswith(".log"))
    changed = {k for k in after if after.get(k) != before.get(k) and not os.path.basename(k).startswith(".")}
    written = {
        os.path.relpath(f, logs) for r in table_rows(table) if r["run_id"] == "jvm-killed" for f in r["files_written"]
    }
    assert changed and changed <= written
    assert not path.exists()


# ------------------------------------------------------------------------------------ re-used run ids
def _row(base_offset: int, started: str, status: str, action: str, files: list[str]) -> dict:
    from datetime import datetime

    return {"run_id": "r", "run_mode": "repair", "record_type": "segment", "date": "2026-11-23",
            "run_started": datetime.fromisoformat(started), "log_dir": "/l", "topic": "a", "partition": 0,
            "base_offset": base_offset, "status": status, "action": action, "files_written": files}  # fmt: skip


def test_the_merge_replaces_only_stale_rows_and_never_loses_a_recorded_write(tmp_path):
    """A real Delta table: which rows of a first attempt give way to a second attempt's rows of the same key
    (jobs.audit.REPLACE_WHEN), and that merging the second attempt again changes nothing."""
    from jobs import audit, audit_queries

    first, second = "2026-11-23T10:00:00+00:00", "2026-11-23T11:00:00+00:00"
    table = str(tmp_path / "audit")
    earlier = {  # base offset: (status, action, files) of the first attempt
        0: ("interrupted", "interrupted", ["/l/a-0/0.index"]),  # stale: gives way to a write
        1: ("interrupted", "interrupted", ["/l/a-0/1.index"]),  # ... but not to a row recording no file
        2: ("failed", "failed", []),  # stale: its staging failed
        3: ("failed", "cannot_rebuild", []),  # the segment's state, not the attempt's
        4: ("findings", "none", []),  # a verify's or dry run's row: gives way to a write only
        5: ("findings", "none", []),
        6: ("repaired", "repaired", ["/l/a-0/6.index"]),  # a recorded write: never replaced
    }
    later = {
        0: ("repaired", "repaired", ["/l/a-0/0.index"]),
        1: ("ok", "none", []),
        2: ("ok", "none", []),
        3: ("failed", "cannot_rebuild", []),
        4: ("repaired", "repaired", ["/l/a-0/4.index"]),
        5: ("findings", "none", []),
        6: ("repaired", "repaired", ["/l/a-0/6.index"]),
        7: ("ok", "none", []),
    }
    audit.write(table, audit.to_table([_row(b, first, *v) for b, v in earlier.items()]))
    second_rows = audit.to_table([_row(b, second, *v) for b, v in later.items()])
    assert audit.write(table, second_rows)[1:3] == (1, 3)  # 7 is new; 0, 2 and 4 replaced
    stored = {r["base_offset"]: r for r in audit_queries.read(table).to_pylist()}
    assert len(stored) == 8
    replaced = {b for b, r in stored.items() if r["run_started"].isoformat() == second}
    assert replaced == {0, 2, 4, 7}
    assert stored[1]["status"] == "interrupted" and stored[6]["files_written"] == ["/l/a-0/6.index"]
    assert audit.write(table, second_rows)[1:3] == (0, 0)  # a replay: nothing new, nothing replaced
    assert audit.write(table, audit.to_table([_row(b, first, *v) for b, v in earlier.items()]))[1:3] == (0, 0)
    assert {r["base_offset"]: r for r in audit_queries.read(table).to_pylist()} == stored


def _error_lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("kafka-index: error")]


def _by_key(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["run_id"], r["record_type"], r["topic"], r["partition"], r["base_offset"]))


def test_a_repair_reusing_a_run_id_that_replaced_files_is_refused(spark, tmp_path, capsys):
    """Issue 21: a repair run again under its run id after new damage replaced files with no backup (an
    existing backup is never overwritten) and no audit row. It is refused before any work: exit 2, one line
    naming the evidence (the run's backup dir; with another --backup-dir its audit rows; with no table its
    journal) and asking for a new --run-id; no file changes, the first run's backups stay as they were. A new
    id repairs the new damage and keeps the damaged file."""
    from indexlib.engine import rebuild_partition

    logs = damaged_log_dir(tmp_path, partitions=2)
    for part in logs.iterdir():  # Kafka's files, then torn .timeindex files: the repair backs them up
        rebuild_partition(part)
        for times in part.glob("*.timeindex"):
            os.truncate(times, times.stat().st_size - 5)
    table, journal_dir, backups = tmp_path / "audit", tmp_path / "journal", tmp_path / "backups"
    same = ("--audit-journal", journal_dir, "--no-progress", "--run-id", "fix-1")
    assert run_cli("repair", "--log-dir", logs, "--audit-table", table, "--backup-dir", backups, *same) == 0
    index = logs / "orders-0" / "00000000000000000000.index"
    kept, rows = sha256s(backups), _by_key(table_rows(table))
    assert kept and {r["status"] for r in rows if r["record_type"] == "segment"} == {"repaired"}
    index.write_bytes(b"\x07" * 24)  # new damage since
    before = sha256s(logs)
    capsys.readouterr()
    for argv, evidence in (
        (("--audit-table", table, "--backup-dir", backups), f"{backups / 'fix-1'}: run id 'fix-1'"),
        (("--audit-table", table, "--backup-dir", tmp_path / "other"), f"audit table {table}: run id 'fix-1'"),
    ):
        assert run_cli("repair", "--log-dir", logs, *argv, *same) == 2
        err = _error_lines(capsys)
        assert len(err) == 1 and evidence in err[0] and "new --run-id" in err[0], err
        assert sha256s(logs) == before and sha256s(backups) == kept and _by_key(table_rows(table)) == rows
    assert "4 segment rows, e.g. orders-0 base offset 0" in err[0]
    (journal_dir / "fix-1.jsonl").write_text(  # rows of a run under that id still wait in the journal
        json.dumps({"record": "run", "run_id": "fix-1", "mode": "repair", "table": str(table),
                    "started": "2026-11-23T10:00:00+00:00"}) + "\n"
    )  # fmt: skip
    assert run_cli("repair", "--log-dir", logs, "--audit-table", "none", "--backup-dir", tmp_path / "other", *same) == 2
    err = _error_lines(capsys)
    assert len(err) == 1 and f"{journal_dir / 'fix-1.jsonl'}: run id 'fix-1'" in err[0], err
    assert sha256s(logs) == before and not (tmp_path / "other").exists()
    assert run_cli("repair", "--log-dir", logs, "--audit-table", table, "--backup-dir", backups,
                   "--audit-journal", journal_dir, "--no-progress", "--run-id", "fix-2") == 0  # fmt: skip
    assert (backups / "fix-2" / "orders-0" / index.name).read_bytes() == b"\x07" * 24
    assert sha256s(backups / "fix-1") == {k[len("fix-1/") :]: v for k, v in kept.items()}


def test_a_re_run_after_a_failed_attempt_runs_and_its_rows_replace_the_failed_ones(spark, tmp_path, small_fs, capsys):
    """The first attempt meets a full log dir (a real 64 KiB-then-16 MiB tmpfs, filled): every segment fails
    to stage, nothing is replaced or backed up, its rows say ``failed``. Given room, the same command under
    the same run id runs (no evidence of a write), and its rows replace the failed ones: one row per key."""
    import shutil

    built = damaged_log_dir(tmp_path, partitions=2)
    remount(small_fs, "16m")
    logs = small_fs / "logs"
    shutil.copytree(built, logs)
    fill(small_fs / "filler")
    table, backups = tmp_path / "audit", tmp_path / "backups"
    args = ("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", tmp_path / "journal",
            "--backup-dir", backups, "--run-id", "retry-1", "--no-progress")  # fmt: skip
    assert run_cli(*args) == 1
    first = table_rows(table)
    assert sorted((r["record_type"], r["status"]) for r in first) == [("run", "failed")] + [("segment", "failed")] * 4
    assert not [p for p in backups.rglob("*") if p.is_file()]
    (small_fs / "filler").unlink()
    capsys.readouterr()
    assert run_cli(*args) == 0
    assert "audit: 0 of 5 rows new, 5 replacing stale rows of an earlier attempt" in capsys.readouterr().out
    rows = table_rows(table)
    assert sorted((r["record_type"], r["status"]) for r in rows) == [("run", "ok")] + [("segment", "repaired")] * 4
    assert min(r["run_started"] for r in rows) > max(r["run_started"] for r in first)
    assert len(list(logs.rglob("*.index"))) == 4


def test_a_re_run_after_an_interrupted_rebuild_replaces_its_rows_and_a_replay_changes_nothing(spark, tmp_path, capsys):
    """An in-place rebuild keeps no backup unless asked: killed in its commit it leaves only its journal,
    merged by ``audit --recover`` as ``interrupted`` rows (files that may have been replaced). They are no
    evidence of a write, so the same rebuild under the same id runs; its rows replace the interrupted ones.
    Merging the old journal again, or a verify under that id, then changes no row."""
    logs = damaged_log_dir(tmp_path, partitions=1)
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    journal_dir.mkdir()
    header = {"record": "run", "run_id": "rb-1", "mode": "rebuild", "table": str(table),
              "started": "2026-11-23T10:00:00+00:00"}  # fmt: skip
    intent = {"record": "intent", "log_dir": str(logs), "topic": "orders", "partition": 0, "base_offset": 0,
              "files": [str(logs / "orders-0" / "00000000000000000000.index")]}  # fmt: skip
    killed = json.dumps(header) + "\n" + json.dumps(intent) + "\n"
    (journal_dir / "rb-1.jsonl").write_text(killed)
    common = ("--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir, "--no-progress")
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir) == 0
    assert sorted((r["record_type"], r["status"]) for r in table_rows(table)) == [
        ("run", "interrupted"),
        ("segment", "interrupted"),
    ]
    capsys.readouterr()
    assert run_cli("rebuild", *common, "--run-id", "rb-1") == 0
    assert "audit: 1 of 3 rows new, 2 replacing stale rows of an earlier attempt" in capsys.readouterr().out
    rows = _by_key(table_rows(table))
    assert [(r["record_type"], r["status"]) for r in rows] == [
        ("run", "ok"),
        ("segment", "rebuilt"),
        ("segment", "rebuilt"),
    ]
    (journal_dir / "rb-1.jsonl").write_text(killed)  # the same journal once more
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir) == 0
    assert "merged 0 of 2 rows of interrupted run rb-1" in capsys.readouterr().err
    assert run_cli("verify", *common, "--run-id", "rb-1") == 0
    assert "audit: 0 of 3 rows new in" in capsys.readouterr().out
    assert _by_key(table_rows(table)) == rows


# ------------------------------------------------------------------------------------ damaged journals
def _journal(path, table, intents: int, garbage_at: int | None = None) -> None:
    """A killed repair's journal: the header and ``intents`` intents; garbage as line ``garbage_at``."""
    lines = [json.dumps({"record": "run", "run_id": path.stem, "mode": "repair", "table": str(table),
                         "started": "2026-11-23T10:00:00+00:00"})]  # fmt: skip
    for p in range(intents):
        lines.append(json.dumps({"record": "intent", "log_dir": "/l", "topic": "a", "partition": p,
                                 "base_offset": 0, "files": [f"/l/a-{p}/x.index"]}))  # fmt: skip
    if garbage_at is not None:
        lines.insert(garbage_at - 1, '{"record": "intent", "log_dir": "/l", "topic": "a", "partit')
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_recover_merges_a_damaged_journal_as_far_as_it_reads_and_keeps_it(tmp_path, capsys):
    """One garbage line in the middle used to end the reading there: "merged 2 of 2 rows", the later rows
    dropped, the journal deleted, exit 0. Now every readable row is merged, one line names the file and the
    unreadable line, the file is kept, exit 4; merging it again adds nothing."""
    table, path = tmp_path / "audit", tmp_path / "journal" / "k1.jsonl"
    _journal(path, table, intents=4, garbage_at=3)
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", path.parent) == 4
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("audit: merged 5 of 5 rows of interrupted run k1") and len(err) == 2, err
    assert err[1].startswith(f"kafka-index: error: audit journal {path}: line 3 unreadable"), err
    stored = table_rows(table)
    assert sorted(r["partition"] for r in stored) == [-1, 0, 1, 2, 3]  # the 4 intents (and the run row)
    assert path.exists()
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", path.parent) == 4
    assert "merged 0 of 5 rows" in capsys.readouterr().err and len(table_rows(table)) == 5


def test_recover_reports_a_journal_whose_first_line_is_unreadable(tmp_path, capsys):
    """The first line names the run and its table: without it nothing can be merged. It used to be skipped
    without a word, forever; now one line names the file, exit 4, the file kept, no table written."""
    table, path = tmp_path / "audit", tmp_path / "journal" / "k2.jsonl"
    _journal(path, table, intents=2, garbage_at=1)
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", path.parent) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kafka-index: error: audit journal {path}: its first line"), err
    assert "(unreadable: line 1)" in err[0]
    assert path.exists() and not table.exists()


def test_recover_names_a_journal_it_cannot_read_and_merges_the_others(tmp_path, capsys):
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    _journal(journal_dir / "k5.jsonl", table, intents=1)
    (journal_dir / "odd.jsonl").mkdir()  # not a file: cannot be read
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir) == 4
    err = capsys.readouterr().err
    assert f"kafka-index: error: audit journal {journal_dir / 'odd.jsonl'}: cannot read it: Is a directory" in err
    assert "merged 2 of 2 rows of interrupted run k5" in err and not (journal_dir / "k5.jsonl").exists()


def test_recover_into_another_table_than_the_journals_refuses(tmp_path, capsys):
    """Rows are never merged into a table they were not written for: one line names the journal's table and
    how to recover into it, exit 3 (rows still waiting), the journal kept; into its own table it merges."""
    table, other, path = tmp_path / "audit", tmp_path / "other", tmp_path / "journal" / "k3.jsonl"
    _journal(path, table, intents=1)
    assert run_cli("audit", "--recover", "--audit-table", other, "--audit-journal", path.parent) == EXIT_AUDIT_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"audit journal {path}: its rows are for audit table {table}, not {other}" in err[0]
    assert f"--audit-table {table}" in err[0]
    assert path.exists() and not other.exists() and not table.exists()
    assert run_cli("audit", "--recover", "--audit-table", table, "--audit-journal", path.parent) == 0
    assert not path.exists() and len(table_rows(table)) == 2


def test_a_run_merges_a_damaged_journal_it_finds_keeps_it_and_goes_on(spark, tmp_path, capsys):
    """At a run's start waiting journals are merged: a damaged one gets its readable rows merged and a
    warning naming the file and line, is kept, and the run goes on to its own result and rows."""
    logs = damaged_log_dir(tmp_path, partitions=1, segments=1)
    table, path = tmp_path / "audit", tmp_path / "journal" / "k4.jsonl"
    _journal(path, table, intents=3, garbage_at=2)
    code = run_cli("verify", "--log-dir", logs, "--audit-table", table, "--audit-journal", path.parent, "--no-progress")
    assert code == 1  # the verify's own result: an .index is missing
    err = capsys.readouterr().err
    assert f"kafka-index: warning: audit journal {path}: line 2 unreadable" in err and "Traceback" not in err
    assert path.exists()
    assert sorted(r["run_id"] for r in table_rows(table) if r["record_type"] == "run")[0] == "k4"
    assert len([r for r in table_rows(table) if r["run_id"] == "k4"]) == 4


def _live_journal(journal_dir, table, run_id):
    """The journal of a run that is still going: a partition's intent recorded, the journal neither removed nor
    released (this process holds its lock, as the run's process would)."""
    from indexlib.engine import RunOptions
    from indexlib.format import BrokerIdentity
    from indexlib.storage import Partition

    live = journal.AuditJournal(str(journal_dir), str(table), run_id, RunOptions("repair"))
    part = Partition(str(journal_dir.parent / "logs"), str(journal_dir.parent / "logs" / "t-0"), "t", 0, [])
    live.before_partition_files(part, BrokerIdentity(broker_id=1), [part.path + "/leader-epoch-checkpoint"])
    return live


def test_the_journal_of_a_run_still_going_is_not_merged_until_its_run_ends(tmp_path, capsys):
    """Another run's start passes over a journal whose run is still going (it holds the journal's lock); ``audit
    --recover`` names it and exits 3; once its run has ended (the lock gone with it) the journal is merged: its
    partition's row, interrupted."""
    from jobs.audit_commands import recover_journals

    journal_dir, table = tmp_path / "journal", tmp_path / "audit"
    live = _live_journal(journal_dir, table, "going-1")
    assert recover_journals(str(journal_dir), str(table), at_start=True) == 0
    assert os.path.exists(live.path) and not table.exists() and capsys.readouterr().err == ""
    assert recover_journals(str(journal_dir), str(table), at_start=False) == EXIT_AUDIT_FAILED
    assert f"audit journal {live.path}: a run that is still going is writing it" in capsys.readouterr().err
    live.release()  # its run ended (a killed process's lock goes with it)
    assert recover_journals(str(journal_dir), str(table), at_start=False) == 0
    assert not os.path.exists(live.path)
    assert sorted((r["record_type"], r["status"], r["broker_id"]) for r in table_rows(table)) == [
        ("partition", "interrupted", 1),
        ("run", "interrupted", 1),
    ]


def test_runs_under_one_run_id_at_once_in_one_journal_dir_keep_a_journal_each(tmp_path):
    """A fleet's brokers share a run id; on one host with one journal dir each run gets its own journal file
    (``<run id>.jsonl``, ``<run id>~2.jsonl``): neither replaces nor removes the other's."""
    journal_dir, table = tmp_path / "journal", tmp_path / "audit"
    first = _live_journal(journal_dir, table, "fleet-1")
    second = _live_journal(journal_dir, table, "fleet-1")
    assert os.path.basename(first.path) == "fleet-1.jsonl" and os.path.basename(second.path) == "fleet-1~2.jsonl"
    second.remove()
    assert os.path.exists(first.path) and not os.path.exists(second.path)
    records = journal.load(first.path).records
    assert [r["record"] for r in records] == ["run", "intent"] and records[0]["run_id"] == "fleet-1"
    assert journal.journals_of_run(str(journal_dir), "fleet-1") == [first.path]
    first.release()


def test_a_journal_line_is_a_record_only_when_whole_and_well_typed(tmp_path):
    """``journal.load`` counts as unreadable every line that is not a whole record of a known kind with its fields'
    types (bad UTF-8, not JSON, not an object, an unknown kind, a field of the wrong type, a start that is not a
    time, a row without its partition's keys); a last line whole but for its newline is read, a torn one is
    neither. A journal without its header holds no rows."""
    run = {"record": "run", "run_id": "r-1", "mode": "repair", "table": "t", "started": "2026-11-26T20:00:00+00:00"}
    row = {"log_dir": "/l", "topic": "t", "partition": 0, "base_offset": 0}
    lines = [
        json.dumps(run).encode(),
        b"\xff\xfe",
        b"{not json",
        b"[1, 2]",
        json.dumps({"record": "wish"}).encode(),
        json.dumps({**run, "run_id": 7}).encode(),
        json.dumps({**run, "started": "yesterday"}).encode(),
        json.dumps({"record": "segment", "row": {**row, "partition": "0"}}).encode(),
        json.dumps({"record": "final", "rows": [row, 5]}).encode(),
        json.dumps({"record": "segment", "row": row}).encode(),
    ]
    path = tmp_path / "r-1.jsonl"
    path.write_bytes(b"\n".join(lines))  # the last line whole, without its newline
    loaded = journal.load(str(path))
    assert loaded.unreadable == [2, 3, 4, 5, 6, 7, 8, 9]
    assert [r["record"] for r in loaded.records] == ["run", "segment"] and loaded.header == loaded.records[0]
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"record": "seg')  # torn: neither a record nor unreadable
    assert journal.load(str(path)).unreadable == loaded.unreadable and len(journal.load(str(path)).records) == 2
    assert journal.rows_of(loaded.records[1:]) == ([], False)
    with pytest.raises(TypeError, match="cannot journal set"):
        json.dumps({"x": {1}}, default=journal._encode)
