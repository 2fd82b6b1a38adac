"""The fault matrix (issue 12): every fault a run can meet, each run as users run it (``kafka-index`` as a
real process: its driver, JVM and Python workers), on real filesystems (small tmpfs mounts for a full disk),
with real locks held by other processes and real kills. For every case the same four things are asserted:

1. the exit code documented for it (README "Exit codes");
2. one error line naming the file or directory and the problem, never a trace;
3. every ``.log`` keeps its sha256, and every index file the run did not replace keeps its sha256 (a
   replaced one is the whole correct file: the byte-exact tests check those);
4. a run that wrote anything left its trail: the audit table or the audit journal holds the run.

Cases elsewhere, not repeated here: a run SIGKILLed in its commit and a failed audit table write
(``test_audit_journal.py``), a full output dir and backup dir of ``python -m indexlib``
(``tests/indexlib/test_full_disk.py``), ``python -m indexlib`` stopped by signals
(``tests/indexlib/test_interrupts.py``), a wrong ``.txnindex`` LSO (``test_verify.py``), bad input
(``test_cli.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.format.layout import INDEX_SUFFIXES
from indexlib.testing.generate import generate_partition
from jobs import journal
from jobs.audit_queries import read

from ..conftest import PROJECT_ROOT, fill, remount
from ..conftest import descendants as _descendants

pytest.importorskip("pyspark", reason="the fault matrix runs the Spark jobs (make test installs the [spark] extra)")


def sha256s(root: Path) -> dict[str, str]:
    """Every visible file under ``root`` (hidden names are staged files and locks, which Kafka never reads)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def damaged_logs(root: Path, partitions: int = 3) -> Path:
    """Partitions whose .index files are missing and .timeindex files torn: a repair rewrites them all."""
    logs = root / "logs"
    for p in range(partitions):
        part = logs / f"orders-{p}"
        generate_partition(part, segments=2, batches_per_segment=40, transactional_producers=1, seed=20 + p)
        rebuild_partition(part)  # Kafka's files, then the damage
        for index in part.glob("*.index"):
            index.unlink()
        for times in part.glob("*.timeindex"):
            with open(times, "r+b") as f:
                f.truncate(max(0, os.path.getsize(times) - 5))
    return logs


#: an environment in which Spark's JVM cannot start: a run refused before it needs Spark is refused all the same
NO_JVM = {**os.environ, "JAVA_HOME": "/nonexistent-java"}


def kafka_index(
    *args: object, wait: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    argv = [sys.executable, "-m", "jobs.cli", *map(str, args)]
    if not wait:
        return subprocess.Popen(
            argv, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    return subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env)


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [
        line for line in stderr.splitlines() if line.startswith(("kafka-index: error:", "python -m indexlib: error:"))
    ]


def the_line(stderr: str) -> str:
    """The one line the run printed on stderr: no trace, nothing else (not even the JDK's start-up notice)."""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka-index: error: "), stderr[-5000:]
    return lines[0]


def hidden_files(root: Path) -> list[str]:
    """Staged files and run locks (hidden names), under ``root``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name != ".lock")


def rebuilt(logs: Path, root: Path) -> dict[str, str]:
    """The sha256 of every file once every index is rebuilt (on a copy): what a finished repair leaves."""
    copy = root / "expected"
    shutil.copytree(logs, copy)
    for part in copy.iterdir():
        rebuild_partition(part)
    return sha256s(copy)


def assert_whole_segments(before: dict[str, str], after: dict[str, str], expected: dict[str, str]) -> int:
    """Every segment's index files were replaced together or not at all, each by the whole rebuilt file;
    returns how many segments were replaced."""
    segments: dict[str, set[str]] = {}
    for name in {*before, *after, *expected}:
        stem, suffix = os.path.splitext(name)
        if suffix in INDEX_SUFFIXES:
            segments.setdefault(stem, set()).add(name)
    replaced = 0
    for stem, names in sorted(segments.items()):
        changed = {n for n in names if after.get(n) != before.get(n)}
        due = {n for n in names if expected.get(n) != before.get(n)}
        assert changed in (set(), due), f"{stem}: {sorted(changed)} of {sorted(due)} replaced"
        assert all(after.get(n) == expected.get(n) for n in changed), stem
        replaced += bool(changed)
    return replaced


@dataclass
class Outcome:
    code: int
    errors: list[str]
    before: dict[str, str]
    after: dict[str, str]

    def unchanged_logs(self) -> bool:
        return all(self.after.get(k) == v for k, v in self.before.items() if k.endswith(".log"))

    def unchanged(self) -> bool:
        return self.after == self.before


def audited(table: Path, journal_dir: Path, run_id: str) -> bool:
    """The run is in the audit table, or waits in the journal."""
    if (journal_dir / f"{run_id}.jsonl").exists():
        return True
    return table.exists() and any(r["run_id"] == run_id for r in read(str(table)).to_pylist())


# ------------------------------------------------------------------------------------- full disks
def test_a_full_log_dir_fails_the_segments_and_changes_nothing(tmp_path, small_fs):
    """In place, on a real filesystem that has room for the data but not for one new index file."""
    built = damaged_logs(tmp_path)
    remount(small_fs, "16m")
    logs = small_fs / "logs"
    shutil.copytree(built, logs)
    fill(small_fs / "filler")
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    before = sha256s(logs)
    done = kafka_index("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
                       "--backup-dir", tmp_path / "backups", "--run-id", "full-log-dir", "--no-progress")  # fmt: skip
    out = Outcome(done.returncode, error_lines(done.stderr), before, sha256s(logs))
    assert out.code == 1, done.stderr
    assert "No space left" in done.stdout and str(logs) in done.stdout  # the failed writes, each named
    assert out.unchanged()  # nothing torn: every segment failed before its first rename
    assert not [p for p in logs.rglob(".*.rebuild.tmp")]  # nothing staged is left
    assert audited(table, journal_dir, "full-log-dir")


def test_a_full_backup_dir_replaces_nothing_it_could_not_back_up(tmp_path, small_fs):
    logs = damaged_logs(tmp_path)
    fill(small_fs / "filler")
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    before = sha256s(logs)
    done = kafka_index("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
                       "--backup-dir", small_fs / "backups", "--run-id", "full-backup", "--no-progress")  # fmt: skip
    out = Outcome(done.returncode, error_lines(done.stderr), before, sha256s(logs))
    assert out.code == 1 and "No space left" in done.stdout and str(small_fs) in done.stdout, done.stdout
    assert out.unchanged_logs()
    # a torn .timeindex exists for every segment, so its backup comes first and fails: nothing replaced
    assert out.unchanged()
    assert not [p for p in (small_fs / "backups").rglob("*") if p.is_file() and p.stat().st_size == 0]
    assert audited(table, journal_dir, "full-backup")


def test_a_full_output_dir_writes_nothing_torn(tmp_path, small_fs):
    logs = damaged_logs(tmp_path)
    fill(small_fs / "filler")
    before = sha256s(logs)
    done = kafka_index("rebuild", "--log-dir", logs, "--output-dir", small_fs / "out", "--audit-table", "none",
                       "--run-id", "full-out", "--no-progress")  # fmt: skip
    assert done.returncode == 1 and "No space left" in done.stdout, done.stdout
    assert sha256s(logs) == before
    assert not [p for p in (small_fs / "out").rglob("*") if p.is_file()]  # no torn or partial file


# ------------------------------------------------------------------------------------------ locks
@pytest.mark.parametrize("kind", ["lockf", "flock"])
def test_a_held_log_dir_lock_refuses_the_run_before_any_work(tmp_path, kind):
    """A broker holds .lock with a POSIX record lock (Java's tryLock); a script may hold it with flock. Refused before
    Spark's JVM starts (where none can start, the same line)."""
    logs = damaged_logs(tmp_path, partitions=1)
    lock = logs / ".lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         f"fcntl.{kind}(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nprint('locked', flush=True)\nsys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        before = sha256s(logs)
        done = kafka_index(
            "repair", "--log-dir", logs, "--audit-table", tmp_path / "audit", "--no-progress", env=NO_JVM
        )
        errors = error_lines(done.stderr)
        assert done.returncode == 2 and len(errors) == 1 and f"{lock}: held by another process" in errors[0], errors
        assert "--force" in errors[0]
        assert sha256s(logs) == before and not (tmp_path / "audit").exists()
    finally:
        holder.communicate("")


def test_a_second_run_with_the_same_run_id_is_refused(tmp_path):
    """The first run really runs (a process killed later); the second, same id, same log dir, is refused, before
    Spark's JVM starts."""
    logs = damaged_logs(tmp_path, partitions=2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from indexlib.storage.locks import run_locks\n"
         f"with run_locks([{str(logs)!r}], 'twice'):\n    print('held', flush=True); sys.stdin.read()"],
        cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = sha256s(logs)
        done = kafka_index(
            "repair", "--log-dir", logs, "--audit-table", "none", "--run-id", "twice", "--no-progress", env=NO_JVM
        )
        errors = error_lines(done.stderr)
        assert done.returncode == 2 and len(errors) == 1 and "twice" in errors[0], done.stderr
        assert sha256s(logs) == before
    finally:
        holder.communicate("")


# ------------------------------------------------------------------------------------------- kills
def test_a_run_killed_while_executors_stage_changes_nothing_and_the_next_run_cleans_up(tmp_path):
    """SIGKILL of the whole run (driver, JVM, workers) as soon as an executor has staged a file: every file
    Kafka reads is as it was, no audit trail is owed (nothing was replaced), and the next repair removes
    the dead run's staged files, then repairs everything."""
    logs = damaged_logs(tmp_path, partitions=12)
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    before = sha256s(logs)
    proc = kafka_index("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
                       "--backup-dir", tmp_path / "backups", "--run-id", "killed-in-map", "--no-progress",
                       wait=False)  # fmt: skip
    assert isinstance(proc, subprocess.Popen)
    try:
        deadline = time.monotonic() + 240
        while not list(logs.rglob(".*.rebuild.tmp")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        staged = list(logs.rglob(".*.rebuild.tmp"))
        journaled = (journal_dir / "killed-in-map.jsonl").exists()
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    if not staged or journaled:
        pytest.skip("the run got past its map step before it could be killed there (a very fast machine)")
    after = sha256s(logs)
    if after != before:  # the commit had begun: then the journal holds it (the commit-kill case)
        assert (journal_dir / "killed-in-map.jsonl").exists()
    else:
        assert not (journal_dir / "killed-in-map.jsonl").exists() or after == before
    done = kafka_index("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
                       "--backup-dir", tmp_path / "backups", "--run-id", "after-kill", "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "staged files that killed runs had left" in done.stdout
    assert not list(logs.rglob(".*.rebuild.tmp"))
    assert all(sha256s(logs)[k] == v for k, v in before.items() if k.endswith(".log"))
    assert audited(table, journal_dir, "after-kill")


def _daemon_workers(under: int) -> list[int]:
    """PIDs of the Python workers PySpark's daemon forked under process ``under`` (children of the daemon,
    same command line)."""
    procs = {}
    for entry in map(str, _descendants(under)):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"jobs.spark_daemon" in cmdline:
                procs[int(entry)] = ppid
    return [pid for pid, ppid in procs.items() if ppid in procs]


def test_a_python_worker_killed_in_the_scan_fails_the_job_in_one_line(tmp_path):
    """A Python worker dies mid-task (the OOM killer, say): local Spark does not retry, the job fails; the run
    says so in one line, exit 1, and no file Kafka reads changed (staged files are its own to remove)."""
    logs = damaged_logs(tmp_path, partitions=12)
    before = sha256s(logs)
    proc = kafka_index("repair", "--log-dir", logs, "--audit-table", "none", "--backup-dir", tmp_path / "backups",
                       "--run-id", "worker-killed", "--no-progress", wait=False)  # fmt: skip
    assert isinstance(proc, subprocess.Popen)
    killed: list[int] = []
    deadline = time.monotonic() + 240
    while not killed and proc.poll() is None and time.monotonic() < deadline:
        if list(logs.rglob(".*.rebuild.tmp")):  # a task is staging: its worker is busy
            for pid in _daemon_workers(under=proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        time.sleep(0.002)
    _, stderr = proc.communicate(timeout=300)
    if not killed:
        pytest.skip("the scan finished before a worker could be killed (a very fast machine)")
    assert proc.returncode == 1, stderr[-3000:]
    # one line: not the JVM's log of every failed task with its Java trace before it
    assert "the Spark job failed, no file was replaced" in the_line(stderr)
    assert "Python worker exited unexpectedly" in the_line(stderr)
    assert sha256s(logs) == before
    assert not list(logs.rglob(".*.rebuild.tmp"))


# ------------------------------------------------------------------------- read-only files and mounts
def test_an_immutable_index_file_fails_its_segment_and_the_others_are_repaired(tmp_path):
    """``chattr +i`` on one torn .timeindex: its rename fails (EPERM) and is reported with the file named;
    the file stays as it was, every other segment is repaired, no .log changes."""
    logs = damaged_logs(tmp_path, partitions=2)
    stuck = logs / "orders-0" / "00000000000000000000.timeindex"
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root on ext4/xfs)")
    try:
        before = sha256s(logs)
        done = kafka_index("repair", "--log-dir", logs, "--audit-table", tmp_path / "audit", "--audit-journal",
                           tmp_path / "journal", "--backup-dir", tmp_path / "backups", "--run-id", "immutable",
                           "--no-progress")  # fmt: skip
        after = sha256s(logs)
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Operation not permitted" in done.stdout and str(stuck.parent) in done.stdout
    assert error_lines(done.stderr) == []  # a failed write is a finding of the run, not a usage error
    assert after[str(stuck.relative_to(logs))] == before[str(stuck.relative_to(logs))]
    assert all(after[k] == v for k, v in before.items() if k.endswith(".log"))
    repaired = {k for k in after if after[k] != before.get(k)}
    assert repaired and all(k.startswith("orders-1/") or k.startswith("orders-0/00000000000000000") for k in repaired)
    assert audited(tmp_path / "audit", tmp_path / "journal", "immutable")


def test_a_read_only_mount_of_the_log_dir_refuses_writes_in_one_line(tmp_path):
    """The log dir through a read-only bind mount: a repair stops before any work with one line naming the
    dir and "Read-only file system", exit 2, from both command lines alike; verify still works there. A
    --backup-dir that is a file is refused the same way by both."""
    logs = damaged_logs(tmp_path, partitions=1)
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(logs), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (needs root)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True, capture_output=True)
        before = sha256s(logs)
        done = kafka_index("repair", "--log-dir", ro, "--audit-table", "none", "--backup-dir", tmp_path / "b",
                           "--no-progress")  # fmt: skip
        verify = kafka_index("verify", "--log-dir", ro, "--audit-table", "none", "--no-progress")
        local = subprocess.run([sys.executable, "-m", "indexlib", "rebuild", str(ro)], capture_output=True, text=True)
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    for refused in (done, local):
        errors = error_lines(refused.stderr)
        assert refused.returncode == 2 and len(errors) == 1, refused.stderr
        assert "Read-only file system" in errors[0] and str(ro) in errors[0]
    assert sha256s(logs) == before
    assert verify.returncode == 1 and "index_missing" in verify.stdout
    (tmp_path / "a-file").write_text("")
    for refused in (
        kafka_index("repair", "--log-dir", logs, "--audit-table", "none", "--backup-dir", tmp_path / "a-file"),
        subprocess.run([sys.executable, "-m", "indexlib", "rebuild", str(logs), "--backup-dir", str(tmp_path / "a-file")],
                       capture_output=True, text=True),
    ):  # fmt: skip
        errors = error_lines(refused.stderr)
        assert refused.returncode == 2 and len(errors) == 1 and "must be a directory" in errors[0], refused.stderr
    assert sha256s(logs) == before


def _kill_when_staging(logs: Path, proc: subprocess.Popen[str], victims) -> list[int]:
    """SIGKILL ``victims()`` (PIDs) as soon as an executor has staged a file; the PIDs killed."""
    killed: list[int] = []
    deadline = time.monotonic() + 240
    while not killed and proc.poll() is None and time.monotonic() < deadline:
        if list(logs.rglob(".*.rebuild.tmp")):
            for pid in victims():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        time.sleep(0.002)
    return killed


@pytest.mark.parametrize("victim", ["jvm", "jvm-with-progress", "daemon"])
def test_the_jvm_or_the_python_daemon_killed_in_the_scan_is_one_line(tmp_path, victim):
    """Only the driver's JVM (its Python survives), also with the progress display on (it polls Spark), or
    only PySpark's worker daemon with its workers: the run ends with one error line, exit 1, and no file
    Kafka reads changed."""
    logs = damaged_logs(tmp_path, partitions=12)
    before = sha256s(logs)
    progress = [] if victim == "jvm-with-progress" else ["--no-progress"]
    proc = kafka_index("repair", "--log-dir", logs, "--audit-table", "none", "--backup-dir", tmp_path / "backups",
                       "--run-id", f"{victim}-killed", *progress, wait=False)  # fmt: skip
    assert isinstance(proc, subprocess.Popen)

    def victims() -> list[int]:
        if victim.startswith("jvm"):  # the driver Python's java child
            return [c for c in _descendants(proc.pid) if _program(c).endswith(b"/java")]
        workers = set(_daemon_workers(under=proc.pid))
        daemons = [pid for pid in _descendants(proc.pid) if _cmdline_has(pid, b"jobs.spark_daemon")]
        return [pid for pid in daemons if pid not in workers] + sorted(workers)

    killed = _kill_when_staging(logs, proc, victims)
    _, stderr = proc.communicate(timeout=300)
    if not killed:
        pytest.skip("the scan finished before the process could be killed (a very fast machine)")
    assert proc.returncode == 1, stderr[-3000:]
    without_progress = "\n".join(line for line in stderr.splitlines() if not line.startswith("progress: "))
    assert "the Spark job failed, no file was replaced" in the_line(without_progress)
    assert sha256s(logs) == before


def _program(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return b""


def _cmdline_has(pid: int, text: bytes) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# ------------------------------------------------------------------------------- the session starting
def _driver_jvms(under: int) -> list[int]:
    """The driver's JVM under process ``under`` (spark-submit's launcher, a java that only prints the
    command, aside)."""
    return [
        c
        for c in _descendants(under)
        if _program(c).endswith(b"/java") and not _cmdline_has(c, b"org.apache.spark.launcher.Main")
    ]


def _conn_info_dir(java: int) -> Path | None:
    """The temporary dir where PySpark waits for the JVM's port (the JVM's environment names the file)."""
    with contextlib.suppress(OSError):
        for item in Path(f"/proc/{java}/environ").read_bytes().split(b"\0"):
            if item.startswith(b"_PYSPARK_DRIVER_CONN_INFO_PATH="):
                return Path(os.fsdecode(item.split(b"=", 1)[1])).parent
    return None


@pytest.mark.parametrize("moment", ["launched", "connected"])
def test_the_jvm_killed_while_the_session_starts_is_one_line(tmp_path, moment):
    """The driver's JVM SIGKILLed as soon as it runs (before it gives PySpark its port), or once PySpark
    has read the port (its wait dir is gone) and creates the SparkContext: one line, exit 1, nothing
    written, no run lock (the run had not begun)."""
    logs = damaged_logs(tmp_path, partitions=1)
    before = sha256s(logs)
    proc = kafka_index("repair", "--log-dir", logs, "--audit-table", tmp_path / "audit", "--audit-journal",
                       tmp_path / "journal", "--backup-dir", tmp_path / "backups", "--run-id", "jvm-at-start",
                       "--no-progress", wait=False)  # fmt: skip
    assert isinstance(proc, subprocess.Popen)
    killed: list[int] = []
    waits: dict[int, Path | None] = {}
    deadline = time.monotonic() + 120
    while not killed and proc.poll() is None and time.monotonic() < deadline:
        for java in _driver_jvms(proc.pid):
            if moment == "connected":
                waits.setdefault(java, _conn_info_dir(java))
                wait_dir = waits[java]
                if wait_dir is None or wait_dir.exists():
                    continue  # PySpark still waits for the port
            with contextlib.suppress(ProcessLookupError):
                os.kill(java, signal.SIGKILL)
                killed.append(java)
        time.sleep(0.001)
    _, stderr = proc.communicate(timeout=300)
    assert killed, f"the JVM was not seen starting: {stderr[-3000:]}"
    assert proc.returncode == 1, stderr[-3000:]
    assert "the Spark session could not start, no file was changed" in the_line(stderr)
    assert sha256s(logs) == before and hidden_files(logs) == []
    assert not (tmp_path / "audit").exists() and not (tmp_path / "journal").exists()


def test_py4j_says_nothing_when_the_jvm_dies_under_a_call(tmp_path):
    """py4j logs a failed call through the *root* logger, with its trace, in ``GatewayClient.send_command``
    (a flaky ``make test`` printed ``ERROR:root:Exception while sending command`` and two traces when the JVM
    died during a commit, as Python collected Java objects). Made certain here: the JVM is stopped (SIGSTOP),
    a call is sent (it waits, unread, in the JVM's socket), the JVM is SIGKILLed: the call fails with a
    connection reset, the path that logs. The session of ``kafka-index`` must print nothing there."""
    script = (
        "import os, signal, threading, time\n"
        "from jobs.session import spark_session\n"
        "from jobs.config import resolve_settings\n"
        "settings = resolve_settings(log_dirs=['.'])\n"
        "settings.spark_master = 'local[1]'\n"
        "spark = spark_session(settings, 'py4j-quiet')\n"
        "sc = spark.sparkContext\n"
        "sc.setLocalProperty('k', 'v')  # this thread's connection to the JVM\n"
        "java = int(input())  # its JVM, named by the test\n"
        "os.kill(java, signal.SIGSTOP)\n"
        "while open(f'/proc/{java}/stat').read().rsplit(')', 1)[1].split()[0] != 'T':  # every thread stopped\n"
        "    time.sleep(0.001)\n"
        "threading.Timer(1.0, os.kill, (java, signal.SIGKILL)).start()\n"
        "try:\n"
        "    sc.setLocalProperty('k', 'w')\n"
        "except Exception as exc:\n"
        "    print('failed:', type(exc).__name__, flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    java = None
    deadline = time.monotonic() + 120
    while java is None and proc.poll() is None and time.monotonic() < deadline:
        java = next(iter(_driver_jvms(proc.pid)), None)
        time.sleep(0.01)
    assert java is not None, "the JVM did not start"
    out, err = proc.communicate(f"{java}\n", timeout=120)
    assert re.fullmatch(r"failed: \w+\n", out), (proc.returncode, out + err)
    assert err == "", err[-5000:]


# ----------------------------------------------------------------------------------- SIGINT and SIGTERM
def _journal_has_a_row(path: Path) -> bool:
    try:
        return any(r.get("record") == "segment" for r in journal.read(str(path)))
    except (FileNotFoundError, ValueError):
        return False


@pytest.mark.parametrize(
    "signum, to_group, phase",
    [
        (signal.SIGINT, True, "scan"),  # Ctrl-C: the terminal signals the whole process group
        (signal.SIGTERM, False, "scan"),  # kill PID, a supervisor
        (signal.SIGINT, True, "commit"),
        (signal.SIGTERM, False, "commit"),
    ],
    ids=["sigint-scan", "sigterm-scan", "sigint-commit", "sigterm-commit"],
)
def test_a_signal_stops_the_run_in_one_line_and_leaves_it_whole(tmp_path, signum, to_group, phase):
    """SIGINT or SIGTERM while executors stage files, or once the commit has journaled a segment. The run
    ends with one line naming the signal and exit 128 + its number (130, 143), the way the README says:
    stopped in the scan, no file Kafka reads changed and nothing staged or locked is left; stopped in the
    commit, each segment's files were replaced all together or not at all (the run stops between two
    segments), nothing staged is left, and the journal holds every replaced file until
    ``audit --recover`` merges it into the table."""
    logs = damaged_logs(tmp_path, partitions=12)
    table, journal_dir = tmp_path / "audit", tmp_path / "journal"
    before, expected = sha256s(logs), rebuilt(logs, tmp_path)
    path = journal_dir / "stopped.jsonl"
    proc = kafka_index("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
                       "--backup-dir", tmp_path / "backups", "--run-id", "stopped", "--no-progress",
                       wait=False)  # fmt: skip
    assert isinstance(proc, subprocess.Popen)
    sent = False
    deadline = time.monotonic() + 240
    while not sent and proc.poll() is None and time.monotonic() < deadline:
        if _journal_has_a_row(path) if phase == "commit" else list(logs.rglob(".*.rebuild.tmp")):
            (os.killpg if to_group else os.kill)(proc.pid, signum)
            sent = True
        time.sleep(0.001)
    _, stderr = proc.communicate(timeout=300)
    if not sent:
        pytest.fail(f"the repair ended before it could be stopped in its {phase}: {stderr[-2000:]}")
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr[-3000:]
    line = the_line(stderr)
    assert line.startswith(f"kafka-index: error: stopped by {name}; every index file is the old one or the whole")
    after = sha256s(logs)
    assert hidden_files(logs) == []  # no staged file, no run lock
    if phase == "scan":
        assert after == before and not path.exists()
        return
    assert str(path) in line
    rows, finished = journal.rows_of(journal.read(str(path)))
    assert not finished
    assert 0 < assert_whole_segments(before, after, expected) < len([n for n in before if n.endswith(".log")])
    changed = {k for k in after if after[k] != before.get(k)}
    covered = {os.path.relpath(f, logs) for r in rows if r["record_type"] == "segment" for f in r["files_written"]}
    assert changed <= covered, changed - covered
    done = kafka_index("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir)
    assert done.returncode == 0 and "interrupted run stopped" in done.stderr, done.stderr
    assert not path.exists() and audited(table, journal_dir, "stopped")


# --------------------------------------------------------------------------------- a full audit disk
def test_a_full_audit_table_disk_is_one_line_and_exit_3(tmp_path, small_fs):
    """The Delta table on a real full filesystem: the repair is done, the table write fails and delta-rs
    (Rust) prints a panic message from its own thread before the error reaches Python. The run prints one
    line (the table, the journal, the reason), exit 3; ``audit --recover`` on the still full disk too."""
    logs = damaged_logs(tmp_path, partitions=2)
    fill(small_fs / "filler")
    journal_dir = tmp_path / "journal"
    table = small_fs / "audit"
    done = kafka_index("repair", "--log-dir", logs, "--audit-table", table, "--audit-journal", journal_dir,
                       "--backup-dir", tmp_path / "backups", "--run-id", "full-table", "--no-progress")  # fmt: skip
    assert done.returncode == 3, done.stderr[-3000:]
    line = the_line(done.stderr)
    assert str(table) in line and "No space left" in line and str(journal_dir / "full-table.jsonl") in line
    again = kafka_index("audit", "--recover", "--audit-table", table, "--audit-journal", journal_dir)
    assert again.returncode == 3 and "No space left" in the_line(again.stderr), again.stderr[-3000:]
    assert (journal_dir / "full-table.jsonl").exists()
