"""``recover`` survives its own crash (issue 36): killed (SIGKILL) at every rename, truncate, unlink and fsync of a
run over a crash state with a cut in a middle segment, or stopped by a full backup disk, then run again: the log
dir ends byte for byte as one uninterrupted run leaves it, and no byte of the original is lost (what a run moved
away or cut is in its backups).

The kills are real SIGKILLs, sent by the process to itself as it is about to make its Nth such call, for every N
the run makes: a ``sitecustomize`` hook (:mod:`indexlib.testing.kill_hook`) wraps ``os``'s calls with one counter for the whole
process. (``strace -e inject=...:when=N`` counts per thread, and the run fsyncs from several threads where an
fsync waits, as it does under strace, so its Nth call is not the same from run to run.) The log dirs are on a tmpfs
of their own; the full disk is a small tmpfs too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from indexlib.format.layout import segment_file
from indexlib.format.producer_snapshot import EMPTY_SNAPSHOT
from indexlib.storage.locks import CREATED_LOCK
from indexlib.testing.kill_hook import KILLED_AT, kill_hook_env

from ..conftest import KAFKA_REAL, PROJECT_ROOT, copy_fixture, fill, remount, requires_kafka_real
from .test_recover import bases, crashed_log_dir, leo

LOCAL_KAFKA = KAFKA_REAL / "local-apache-kafka-4.1.0"


@pytest.fixture
def tmpfs(tmp_path):
    """Mounts a tmpfs (``size``) under ``tmp_path`` for the test; unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting the tmpfs these runs use needs root")
    mounts: list[Path] = []

    def mount(size: str = "256m") -> Path:
        where = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounts.append(where)
        return where

    yield mount
    for where in reversed(mounts):
        subprocess.run(["umount", str(where)], check=True)


def crash_state(root: Path, broker_lock: bool = True) -> Path:
    """Two partitions as a killed broker leaves them; ``orders-0``'s middle segment ends in a torn write (zeros,
    then garbage), its leader epochs and a producer snapshot reach past that cut; the broker's ``.lock`` is there
    unless not ``broker_lock`` (a copy of the log dir: the run creates one)."""
    logs = crashed_log_dir(root, partitions=2)
    part = logs / "orders-0"
    _, middle, last = bases(part)
    with open(segment_file(str(part), middle, ".log"), "ab") as f:
        f.write(b"\x00" * 100 + b"\x07" * 50)
    end = leo(part, middle)
    (part / "leader-epoch-checkpoint").write_text(f"0\n2\n0 0\n1 {end + 5}\n")
    (part / f"{last + 7:020d}.snapshot").write_bytes(EMPTY_SNAPSHOT)
    if broker_lock:
        (logs / ".lock").write_bytes(b"")
    return logs


def copy(source: Path, target: Path) -> None:
    """``cp -a --sparse=always``: the preallocated indexes stay holes (a plain copy fills the tmpfs)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)


def contents(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``: relative path -> bytes."""
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def recover(
    logs: Path, backups: Path, run_id: str, kill_at: str | None = None, sync: str = "fsync"
) -> subprocess.CompletedProcess:
    """``python -m indexlib recover`` as a user runs it (``--sync sync``); with ``kill_at``, under the kill hook."""
    cmd = [sys.executable, "-m", "indexlib", "recover", str(logs), "--backup-dir", str(backups), "--jobs", "1",
           "--sync", sync]  # fmt: skip
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # no .pyc renamed into place among the counted calls
    if kill_at is not None:
        env.update(kill_hook_env(logs.parent / "hook", kill_at, env.get("PYTHONPATH", "")))
        # not measured by the suite's coverage (`make test`): a killed run never saves what it measured, and the
        # counting run must make the calls the killed ones make (coverage's own writes at exit are calls too)
        env.pop("COVERAGE_PROCESS_CONFIG", None)
    return subprocess.run([*cmd, "--run-id", run_id], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def original_bytes_kept(pristine: dict[str, bytes], final: dict[str, bytes], backups: Path) -> None:
    """Every ``.log`` byte of the crash state is still in the log dir or in a backup: a dropped segment's ``.log``
    whole, a cut one's tail under ``<name>.tail-from-<size>``."""
    saved: dict[str, list[bytes]] = {}
    for path in backups.rglob("*"):
        if path.is_file():
            saved.setdefault(path.name, []).append(path.read_bytes())
    for rel, data in pristine.items():
        if not rel.endswith(".log"):
            continue
        now = final.get(rel)
        name = rel.rsplit("/", 1)[-1]
        if now == data or data in saved.get(name, []):
            continue
        assert now is not None and data.startswith(now), f"{rel}: lost"
        assert data[len(now) :] in saved.get(f"{name}.tail-from-{len(now)}", []), f"{rel}: its cut tail was not kept"


def every_kill_then_recover(fs: Path, pristine_logs: Path, sync: str = "fsync") -> tuple[dict[str, int], list[str]]:
    """Recover copies of ``pristine_logs`` once uninterrupted, once counting its calls, then once killed at each of
    them and again, each run with ``--sync sync``: the counts, and what went wrong (nothing when every final state is
    the uninterrupted one's, every original byte is kept, verify did not call a part-way state healthy and no
    partial copy stays)."""
    pristine = contents(pristine_logs)
    expected_logs = fs / "expected" / "logs"
    copy(pristine_logs, expected_logs)
    done = recover(expected_logs, fs / "expected" / "backups", "once", sync=sync)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = contents(expected_logs)
    count_logs = fs / "count" / "logs"
    copy(pristine_logs, count_logs)
    done = recover(count_logs, fs / "count" / "backups", "count", f"count:{fs / 'counts.json'}", sync)
    assert done.returncode == 0, done.stderr
    counts = json.loads((fs / "counts.json").read_text())
    assert contents(count_logs) == expected

    def kill_then_recover(point: tuple[str, int]) -> str | None:
        name, n = point
        root = fs / f"{name}-{n}"
        logs, backups = root / "logs", root / "backups"
        copy(pristine_logs, logs)
        killed = recover(logs, backups, "killed", f"{name}:{n}", sync)
        if killed.returncode != -9:
            return f"{name} #{n}: not killed (exit {killed.returncode}): {killed.stderr[-300:]}"
        left = {
            k: v
            for k, v in contents(logs).items()
            if not os.path.basename(k).startswith(".kafka-index-run-") and (k, v) != (".lock", CREATED_LOCK)
        }  # without the lock files the killed run made (the next run removes them)
        if left != expected:  # part way: verify must not call it healthy
            verify = subprocess.run([sys.executable, "-m", "indexlib", "verify", str(logs)], cwd=PROJECT_ROOT,
                                    capture_output=True, text=True, timeout=120)  # fmt: skip
            if verify.returncode != 1:
                return f"{name} #{n}: verify of the killed state exited {verify.returncode}: {verify.stdout[-500:]}"
            if ".kafka-index-recovering" in left and "interrupted_recovery" not in verify.stdout:
                return f"{name} #{n}: verify does not report the interrupted recovery: {verify.stdout[-500:]}"
        again = recover(logs, backups, "again", sync=sync)
        if again.returncode != 0:
            return f"{name} #{n}: the next recover exited {again.returncode}: {(again.stdout + again.stderr)[-800:]}"
        final = contents(logs)
        if final != expected:
            differ = sorted(k for k in final.keys() | expected.keys() if final.get(k) != expected.get(k))
            return f"{name} #{n}: differs from one uninterrupted run in {differ}"
        original_bytes_kept(pristine, final, backups)
        if any(backups.rglob("*.partial")):
            return f"{name} #{n}: a partial copy stays in the backups: {sorted(backups.rglob('*.partial'))}"
        shutil.rmtree(root)
        return None

    points = [(name, n) for name in KILLED_AT for n in range(1, counts.get(name, 0) + 1)]
    with ThreadPoolExecutor(2) as pool:  # two processes at a time: one per core
        problems = [p for p in pool.map(kill_then_recover, points) if p is not None]
    assert len(points) == sum(counts.values())
    return counts, problems


@pytest.mark.parametrize("sync", ["fsync", "auto"])
def test_a_kill_at_any_call_of_recover_then_recover_again_ends_as_one_run(tmpfs, sync):
    """Over a copied log dir (no ``.lock``): a killed run leaves the ``.lock`` it created, which the next run
    removes as its own. With ``--sync auto`` (the default: syncfs here, the run holds the lock on a tmpfs) the
    files are made durable by one syncfs each time instead of an fsync each, so fewer calls are kill points; every
    rename, truncate, unlink and the backups' fsyncs still are."""
    fs = tmpfs()
    pristine_logs = crash_state(fs / "pristine", broker_lock=False)
    counts, problems = every_kill_then_recover(fs, pristine_logs, sync)
    assert counts["rename"] >= 10 and counts["truncate"] >= 2, counts
    assert counts["fsync"] >= 20 if sync == "fsync" else sum(counts.values()) >= 20, counts
    assert not problems, "\n".join(problems)


@requires_kafka_real
def test_a_kill_at_any_call_of_recover_over_a_real_brokers_crash_ends_as_one_run(tmpfs):
    """A real broker's partitions (producers idle for longer than Kafka keeps them, so recover's snapshots differ
    from the broker's; transactions; several segments) after an unclean stop, one with a torn write in a middle
    segment and its recovery point at 0, the others recovered from their last segment, which rolls a new one:
    killed at any call, then run again, each ends as one uninterrupted run. With the default ``--sync auto`` (what
    users run; the test above kills the ``fsync`` runs' every fsync too, on the synthetic crash)."""
    fs = tmpfs("2g")
    logs = fs / "pristine" / "logs"
    logs.mkdir(parents=True)
    names = ("java-perf-0", "java-perf-1", "plain-0", "txn-1")
    for name in names:
        copy_fixture(LOCAL_KAFKA / name, logs / name)
    for name in ("meta.properties", "log-start-offset-checkpoint"):
        shutil.copyfile(LOCAL_KAFKA / name, logs / name)
    points = (LOCAL_KAFKA / "recovery-point-offset-checkpoint").read_text().splitlines()
    kept = [line for line in points[2:] if f"{line.split()[0]}-{line.split()[1]}" in names]
    kept = [("plain 0 0" if line.startswith("plain 0 ") else line) for line in kept]
    (logs / "recovery-point-offset-checkpoint").write_text("\n".join(["0", str(len(kept)), *kept, ""]))
    with open(logs / "plain-0" / "00000000000000002658.log", "ab") as f:
        f.write(b"\x00" * 64 + b"\x09" * 40)  # a torn write in the middle segment
    counts, problems = every_kill_then_recover(fs, logs, "auto")
    assert counts["rename"] >= 10 and sum(counts.values()) >= 20, counts
    assert not problems, "\n".join(problems)


def test_a_full_backup_disk_stops_the_partition_before_any_change_and_the_next_run_finishes_it(tmpfs):
    """The backup dir on a file system of its own that fills up while the segments after the cut are copied
    there: that partition is left exactly as it was (exit 1, its segments failed, one line naming the file), the
    other partition recovered; after room is made, recover again ends as one uninterrupted run."""
    fs, small = tmpfs(), tmpfs("1m")
    pristine_logs = crash_state(fs / "pristine")
    pristine = contents(pristine_logs)
    expected_logs = fs / "expected" / "logs"
    copy(pristine_logs, expected_logs)
    assert recover(expected_logs, fs / "expected" / "backups", "once").returncode == 0
    expected = contents(expected_logs)
    logs = fs / "logs"
    copy(pristine_logs, logs)
    fill(small / "filler")  # the backups' file system full, then 32 KiB freed: room for the cut tail (150
    os.truncate(small / "filler", os.path.getsize(small / "filler") - 32 * 1024)  # bytes), not the dropped segment
    failed = recover(logs, small / "backups", "full")
    assert failed.returncode == 1, failed.stderr
    after = contents(logs)
    orders_0 = {k: v for k, v in pristine.items() if k.startswith("orders-0/")}
    assert {k: v for k, v in after.items() if k.startswith("orders-0/")} == orders_0  # untouched
    assert {k: v for k, v in after.items() if k.startswith("orders-1/")} == {
        k: v for k, v in expected.items() if k.startswith("orders-1/")
    }
    full = small / "backups" / "full" / "orders-0" / "00000000000000000536.log"
    assert f"[Errno 28] No space left on device: '{full}'" in failed.stdout, failed.stdout
    remount(small, "64m")
    again = recover(logs, small / "backups", "again")
    assert again.returncode == 0, again.stdout + again.stderr
    assert contents(logs) == expected
    assert not list(small.rglob("*.partial"))


def test_a_killed_recovers_mark_makes_the_next_recover_finish_its_partitions_first(tmpfs):
    """A mark left by a recover killed after its cut (here written as that run writes it) names ``orders-0``; the
    next recover, asked only for partition 1, finishes ``orders-0`` too, says so, and removes the mark; verify
    reports the mark until then (an unreadable mark too)."""
    from indexlib.storage.recovery_mark import write_mark

    fs = tmpfs()
    pristine_logs = crash_state(fs / "pristine")
    expected_logs = fs / "expected" / "logs"
    copy(pristine_logs, expected_logs)
    assert recover(expected_logs, fs / "expected" / "backups", "once").returncode == 0
    expected = contents(expected_logs)
    logs = fs / "logs"
    copy(pristine_logs, logs)
    write_mark(str(logs), "killed-run", ["orders-0"])
    verify = subprocess.run([sys.executable, "-m", "indexlib", "verify", str(logs / "orders-1")], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert verify.returncode == 1 and "interrupted_recovery" in verify.stdout
    assert "recover run killed-run (1 partition(s): orders-0) did not finish" in verify.stdout
    cmd = [sys.executable, "-m", "indexlib", "recover", str(logs), "--partitions", "1", "--backup-dir", str(fs / "b")]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"recover: {logs}: recover run killed-run had not finished; finished in this run" in done.stdout
    assert contents(logs) == expected
    (logs / ".kafka-index-recovering").write_bytes(b"\xff not json")
    verify = subprocess.run([sys.executable, "-m", "indexlib", "verify", str(logs)], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert verify.returncode == 1 and "unreadable: not a mark this tool wrote" in verify.stdout


def test_a_full_log_dir_file_system_stops_recover_before_any_change_naming_the_file(tmpfs):
    """The log dir's own file system full: recover stops before its first change (the mark it writes first cannot
    be written), exit 1 as with kafka-index, one line naming that file, nothing changed or left behind; with room,
    it ends as one run."""
    fs, small = tmpfs(), tmpfs("4m")
    expected_logs = crash_state(fs / "expected", broker_lock=False)  # a copy: the runs create the .lock, on a
    assert recover(expected_logs, fs / "backups-expected", "once").returncode == 0  # full disk too, and remove it
    expected = contents(expected_logs)
    logs = crash_state(small / "state", broker_lock=False)
    pristine = contents(logs)
    fill(small / "filler")
    done = recover(logs, fs / "backups", "full")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"python -m indexlib: error: {logs / '.kafka-index-recovering.tmp'}: No space left on device; the run "
        "stopped before replacing any more files"
    ]
    assert contents(logs) == pristine
    argv = [sys.executable, "-m", "jobs.cli", "recover", "--log-dir", str(logs), "--backup-dir", str(fs / "backups"),
            "--engine", "local", "--audit-table", "none", "--no-progress"]  # fmt: skip
    same = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert same.returncode == 1 and same.stderr.splitlines()[-1] == done.stderr.splitlines()[-1].replace(
        "python -m indexlib", "kafka-index"
    ), same.stderr  # the same exit code and line on both command lines
    assert contents(logs) == pristine
    os.unlink(small / "filler")
    assert recover(logs, fs / "backups", "again").returncode == 0
    assert contents(logs) == expected
