"""What an executor sends to the driver per segment stays small however many batches the segment has
(Spark's ``spark.driver.maxResultSize`` must never be what limits a run), and the executor stages
exactly the files the run will write, invisible to Kafka until the driver commits them. No Spark: the
executor function is called directly."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.engine.options import RunOptions
from indexlib.engine.replay import replay_partition
from indexlib.engine.segment_task import plan_segment_file, plan_tasks, process_segment, process_segments
from indexlib.format.layout import segment_file
from indexlib.recovery.settings import IndexSettings
from indexlib.storage.discovery import discover
from indexlib.storage.publish import discard_staged
from indexlib.testing.batch_encoder import encode_batch_v2, encode_control_batch
from indexlib.testing.generate import generate_partition

BATCHES = 20_000


def write_busy_segment(path):
    """20k small batches: three idempotent producers interleaved, one transactional producer whose
    transactions (aborted every other time) span many batches."""
    chunks = []
    ts = 1_700_000_000_000
    for i in range(BATCHES):
        offset = i  # one record per batch
        if i % 100 == 99:  # close the open transaction of producer 9
            chunks.append(encode_control_batch(offset, 9, 0, abort=(i // 100) % 2 == 1, timestamp=ts + i))
        elif i % 4 == 3:
            chunks.append(
                encode_batch_v2(
                    offset,
                    [(None, b"t" * 40, ts + i)],
                    producer_id=9,
                    producer_epoch=0,
                    base_sequence=i,
                    transactional=True,
                )
            )
        else:
            chunks.append(
                encode_batch_v2(
                    offset, [(None, b"v" * 40, ts + i)], producer_id=i % 3 + 1, producer_epoch=0, base_sequence=i
                )
            )
    path.write_bytes(b"".join(chunks))


@pytest.fixture
def busy_partition(tmp_path):
    part = tmp_path / "logs" / "busy-0"
    part.mkdir(parents=True)
    write_busy_segment(part / "00000000000000000000.log")
    rebuild_partition(str(part), index_interval_bytes=64)  # an entry for almost every batch
    return part


def tasks_for(part, mode, **options):
    run_options = RunOptions(mode, backup_root=str(part.parent.parent / "backups"), **options)
    return plan_tasks(discover([str(part.parent)]), run_options, "run-1", lambda topic: IndexSettings(64))


def test_the_outcome_for_the_driver_does_not_grow_with_batches(busy_partition, tmp_path):
    (task,) = tasks_for(busy_partition, "rebuild", output_dir=str(tmp_path / "out"))
    outcome = process_segment(task)
    assert outcome.batches == BATCHES and outcome.findings == [] and outcome.error is None
    _, library = plan_segment_file(segment_file(str(busy_partition), 0, ".log"), 0, index_interval_bytes=64)
    assert library.index_entries > BATCHES * 0.9  # the full plan is big ...
    assert len(pickle.dumps(library)) > 30 * BATCHES
    # ... what the driver gets is not: 3 idempotent producers -> 3 events, 200 transactions -> 400 events
    assert len(outcome.plan.events) <= 3 + 2 * (BATCHES // 100) + 1
    assert len(pickle.dumps(outcome)) < 32 * 1024
    assert (outcome.plan.index_entries, outcome.plan.timeindex_entries) == (
        library.index_entries,
        library.timeindex_entries,
    )
    # the executor staged both files under hidden names in the output dir; nothing is visible yet
    out = tmp_path / "out" / "busy-0"
    assert sorted(outcome.staged) == [
        str(out / "00000000000000000000.index"),
        str(out / "00000000000000000000.timeindex"),
    ]
    assert sorted(p.name for p in out.iterdir()) == sorted(os.path.basename(p) for p in outcome.staged.values())
    for final, staged in outcome.staged.items():
        assert staged.endswith(".run-1.rebuild.tmp")
        assert Path(staged).read_bytes() == (busy_partition / os.path.basename(final)).read_bytes()
    assert outcome.backups == []  # --output-dir never backs up


def test_the_replay_from_summaries_equals_the_library_rebuild(busy_partition):
    (task,) = tasks_for(busy_partition, "verify")
    outcome = process_segment(task)
    assert outcome.staged == {} and outcome.findings == []
    ((aborted, fatal),) = replay_partition(str(busy_partition), [0], [outcome.plan], 0)
    _, full_plan = plan_segment_file(segment_file(str(busy_partition), 0, ".log"), 0, index_interval_bytes=64)
    ((from_full_plan, _),) = replay_partition(str(busy_partition), [0], [full_plan], 0)
    assert fatal is None and len(aborted) == BATCHES // 200
    assert aborted == from_full_plan == rebuild_partition(busy_partition, 64).segments[0].aborted


def test_repair_stages_only_a_damaged_index_and_backs_it_up(busy_partition):
    (task,) = tasks_for(busy_partition, "repair")
    assert process_segment(task).staged == {}
    index = segment_file(str(busy_partition), 0, ".index")
    good = Path(index).read_bytes()
    with open(index, "r+b") as f:
        f.seek(80)
        f.write(b"\xff" * 8)
    damaged = Path(index).read_bytes()
    outcome = process_segment(task)
    assert list(outcome.staged) == [index]
    assert Path(outcome.staged[index]).read_bytes() == good
    assert Path(index).read_bytes() == damaged  # not installed: that is the driver's commit
    (backup,) = outcome.backups
    assert backup.endswith("backups/run-1/busy-0/00000000000000000000.index") and Path(backup).read_bytes() == damaged


def drop_index_files(part):
    """Segment 0's ``.index``/``.timeindex`` removed: a rebuild stages both (one that is its rebuild is only cut)."""
    for suffix in (".index", ".timeindex"):
        os.unlink(segment_file(str(part), 0, suffix))


def test_a_batch_fsyncs_every_staged_file_before_it_returns(busy_partition, monkeypatch):
    """:func:`process_segments` stages without fsyncing, then fsyncs every staged file (and only those) once;
    a segment whose fsync fails is reported failed, nothing of it left staged."""
    import indexlib.storage.publish as publish

    drop_index_files(busy_partition)
    (task,) = plan_tasks(
        discover([str(busy_partition.parent)]), RunOptions("rebuild"), "run-1", lambda topic: IndexSettings(64)
    )
    synced: list[str] = []
    monkeypatch.setattr(publish, "fsync_path", synced.append)
    (outcome,) = process_segments([task], "run-1")
    assert outcome.error is None and len(outcome.staged) == 2 and sorted(synced) == sorted(outcome.staged.values())
    discard_staged(outcome.staged, outcome.backups)

    def fail(path):
        raise OSError(5, "Input/output error", path)

    monkeypatch.setattr(publish, "fsync_path", fail)
    (outcome,) = process_segments([task], "run-1")
    assert outcome.staged == {} and outcome.error is not None and "Input/output error" in outcome.error
    assert not [n for n in os.listdir(busy_partition) if n.startswith(".")]


def test_a_batch_fsyncs_the_backup_dir_once_after_its_copies(busy_partition, monkeypatch, fsynced):
    """A repair's backups: each copy fsynced at its ``.partial`` name with the batch's staged files, then named, then
    the backup dir fsynced once, before the outcome is returned; its failure fails the segment and drops its copies."""
    import indexlib.storage.publish as publish

    index = segment_file(str(busy_partition), 0, ".index")
    with open(index, "r+b") as f:
        f.seek(80)
        f.write(b"\xff" * 8)
    (task,) = tasks_for(busy_partition, "repair")
    (outcome,) = process_segments([task], "run-1")
    (backup,) = outcome.backups
    assert outcome.error is None and fsynced.count(os.path.dirname(backup)) == 1
    (partial,) = [p for p in fsynced if p.startswith(backup + ".") and p.endswith(".partial")]  # its own copy
    made_in = [str(Path(backup).parents[i]) for i in (1, 2, 3)]  # the backup dir was made: the dirs it was made in
    assert sorted(fsynced) == sorted([*outcome.staged.values(), partial, os.path.dirname(backup), *made_in])
    assert fsynced.index(partial) < fsynced.index(os.path.dirname(backup))  # its bytes before its name
    assert not os.path.exists(partial)
    discard_staged(outcome.staged, outcome.backups)
    real = publish.fsync_path

    def failing_dir(path):
        if os.path.isdir(path):
            raise OSError(5, "Input/output error", path)
        real(path)

    monkeypatch.setattr(publish, "fsync_path", failing_dir)
    (outcome,) = process_segments([task], "run-1")
    assert outcome.staged == {} and outcome.backups == [] and "Input/output error" in (outcome.error or "")
    assert not os.path.exists(backup)


def test_an_attempt_that_fails_keeps_the_backup_another_attempt_of_its_task_named(busy_partition, monkeypatch):
    """Two attempts of one repair task (a speculative twin): the first names the backup of the damaged index; the
    second's copy finds that name taken, then its staging fails. It drops its own staged files and copy, never the
    first's backup: the first attempt's outcome may be the one committed, and that backup is then the only copy
    of the index it replaces."""
    import indexlib.storage.publish as publish

    index = segment_file(str(busy_partition), 0, ".index")
    with open(index, "r+b") as f:
        f.seek(80)
        f.write(b"\xff" * 8)
    damaged = Path(index).read_bytes()
    (task,) = tasks_for(busy_partition, "repair")
    (first,) = process_segments([task], "run-1~1")
    (backup,) = first.backups

    def fail(path):
        raise OSError(5, "Input/output error", path)

    monkeypatch.setattr(publish, "fsync_path", fail)
    (second,) = process_segments([task], "run-1~2")
    assert second.error is not None and second.staged == {} and second.backups == []
    assert Path(backup).read_bytes() == damaged
    assert not [n for n in os.listdir(os.path.dirname(backup)) if n.endswith(".partial")]
    assert all(os.path.exists(p) for p in first.staged.values())


def test_discarding_a_segment_never_drops_a_saved_log_tail(busy_partition, tmp_path):
    """What a failed commit throws away: the staged files and the backups of the files they would have
    replaced; a cut .log tail saved in the same backup dir is the only copy of its bytes and stays."""
    drop_index_files(busy_partition)
    (task,) = tasks_for(busy_partition, "rebuild")
    outcome = process_segment(task)
    backups = tmp_path / "b"
    backups.mkdir()
    tail = backups / "00000000000000000000.log.tail-from-100"
    tail.write_bytes(b"cut bytes")
    index_copy = backups / "00000000000000000000.index"
    index_copy.write_bytes(b"old index")
    outcome.backups = [str(index_copy), str(tail)]
    staged = list(outcome.staged.values())
    discard_staged(outcome.staged, outcome.backups)
    assert outcome.staged == {} and outcome.backups == [str(tail)]
    assert tail.read_bytes() == b"cut bytes" and not index_copy.exists()
    assert not any(os.path.exists(p) for p in staged)


# ------------------------------------------------------------------------------------- the decision
def outcome_with(part, mode, findings=(), error=None, **options):
    """A real outcome of segment 0 in ``mode``, with chosen findings and error."""
    import dataclasses

    (task,) = tasks_for(part, mode, **options)
    outcome = process_segment(task)
    return dataclasses.replace(outcome, findings=list(findings), error=error, staged={}, backups=[])


def test_the_decision_is_a_pure_function_of_outcome_replay_and_options(busy_partition):
    from indexlib.engine.commit import Decision, decide
    from indexlib.engine.replay import SegmentReplay
    from indexlib.format.records import ScanProblem
    from indexlib.recovery.findings import Finding

    log = str(busy_partition / "00000000000000000000.log")
    index = segment_file(str(busy_partition), 0, ".index")
    txn = segment_file(str(busy_partition), 0, ".txnindex")
    clean = SegmentReplay([], None, [], None)
    fatal = ScanProblem("non_transactional_in_open_transaction", 0, 0, "x")
    tail = Finding("log_crc_mismatch", log, 7, 700, found=99)
    cases = [
        ("verify", {}, [], None, clean, Decision("none")),
        ("verify", {}, [], None, SegmentReplay([], fatal, [], None), Decision("cannot_rebuild")),
        ("rebuild", {}, [], None, clean, Decision("rebuilt", install=True, write_txn=True)),
        ("rebuild", {"dry_run": True}, [], None, clean, Decision("would_rebuild")),
        ("rebuild", {}, [], "disk full", clean, Decision("failed")),
        ("repair", {}, [], None, clean, Decision("none")),
        ("repair", {}, [Finding("bad_length", index)], None, clean, Decision("repaired", install=True)),
        ("repair", {}, [], None, SegmentReplay([], None, [Finding("txn_entry_missing", txn)], False),
         Decision("repaired", install=True, write_txn=True)),
        ("repair", {"dry_run": True}, [Finding("bad_length", index)], None, clean, Decision("would_repair")),
        ("repair", {}, [tail], None, clean, Decision("none")),  # the .log is cut only when asked
        ("repair", {"truncate_corrupt_tail": True}, [tail], None, clean, None),
        ("repair", {}, [Finding("preallocated_zero_tail", index)], None, clean, Decision("none")),  # info
    ]  # fmt: skip
    for mode, options, findings, error, replay, expected in cases:
        outcome = outcome_with(busy_partition, mode, findings, error, **options)
        if expected is None:  # the cut is at the valid prefix the scan found
            expected = Decision("repaired", install=True, cut_tail_at=outcome.valid_bytes)
        assert decide(outcome, replay, RunOptions(mode, **options)) == expected, (mode, options, findings)
        assert decide(outcome, replay, RunOptions(mode, **options)) == expected  # same input, same answer


# ------------------------------------------------------------------------------ found in review
def damaged_log_dir(tmp_path):
    from indexlib.testing.generate import generate_partition

    logs = tmp_path / "logs"
    generate_partition(logs / "t-0", segments=1, batches_per_segment=60, seed=11)
    rebuild_partition(logs / "t-0")
    for suffix in (".index", ".timeindex"):
        path = Path(segment_file(str(logs / "t-0"), 0, suffix))
        path.write_bytes(path.read_bytes()[:-3])  # torn
    return logs


def test_an_interrupted_commit_keeps_the_backup_of_a_file_it_replaced(tmp_path, monkeypatch):
    """Ctrl-C between the two renames of one segment: the .index is already replaced, so its backup is
    the only copy of the old file and must stay; nothing staged is left."""
    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run
    from indexlib.storage import publish as publish_module

    logs = damaged_log_dir(tmp_path)
    old_index = Path(segment_file(str(logs / "t-0"), 0, ".index")).read_bytes()
    real_install, calls = publish_module.install, []

    def install_then_interrupt(staged, final, sync_dir=True):
        calls.append(final)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_install(staged, final, sync_dir=sync_dir)

    monkeypatch.setattr(publish_module, "install", install_then_interrupt)
    found = discover([str(logs)])
    options = RunOptions("repair", run_id="r1", backup_root=str(tmp_path / "backups"))
    with pytest.raises(KeyboardInterrupt):
        run(found, options, lambda topic: IndexSettings(), map_locally(1))
    assert calls[0].endswith(".index")
    backup = tmp_path / "backups" / "r1" / "t-0" / "00000000000000000000.index"
    assert backup.read_bytes() == old_index  # the only copy of the replaced file
    assert not [p for p in (logs / "t-0").iterdir() if p.name.startswith(".")]  # no staged file left


def test_one_partition_given_twice_is_refused(tmp_path):
    from indexlib.engine.options import check_run

    logs = damaged_log_dir(tmp_path)
    twice = discover([str(logs), str(logs) + "/"])
    for mode in ("verify", "rebuild"):
        with pytest.raises(ValueError, match="the same partition dir as"):
            check_run(twice, RunOptions(mode))


def test_an_output_or_backup_dir_at_or_inside_a_log_dir_is_refused(tmp_path):
    """--output-dir or the backup root naming the log dir, a partition dir, or a dir inside either would
    replace the broker's files with no backup or add dirs it reads as partitions: refused before anything is
    written; a dir beside the log dir is fine."""
    from indexlib.engine.options import check_run

    logs = damaged_log_dir(tmp_path)
    found = discover([str(logs)])
    before = sorted(str(p) for p in logs.rglob("*"))
    inside = [logs, logs / "t-0", logs / "t-0" / "out", logs / "out", tmp_path / "link"]
    (tmp_path / "link").symlink_to(logs / "t-0")
    for directory in inside:
        with pytest.raises(ValueError, match=r"--output-dir .* (is the log dir|lies inside the log dir)"):
            check_run(found, RunOptions("rebuild", output_dir=str(directory)))
        for mode in ("rebuild", "repair"):
            with pytest.raises(ValueError, match=r"--backup-dir .* (is the log dir|lies inside the log dir)"):
                check_run(found, RunOptions(mode, backup_root=str(directory)))
    assert sorted(str(p) for p in logs.rglob("*")) == before  # nothing made
    check_run(found, RunOptions("rebuild", output_dir=str(tmp_path / "out"), backup_root=str(tmp_path / "b")))
    check_run(found, RunOptions("verify", output_dir=str(logs)))  # reads only
    check_run(found, RunOptions("repair", dry_run=True, backup_root=str(logs)))  # a dry run keeps no backup


def test_a_writing_run_removes_the_staged_files_of_dead_runs_only(tmp_path, capsys):
    """Staged files are what a killed run leaves (hidden names Kafka never reads). A later writing run
    removes those whose run holds no lock any more, and says so; a live run's (its lock held by another
    open of the lock file, as a running process holds it) and verify's read-only runs leave them alone."""
    from indexlib.cli.main import main
    from indexlib.format.layout import staged_path
    from indexlib.storage.locks import run_is_alive, run_locks

    logs = tmp_path / "logs"
    part = logs / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=20, seed=8)
    index = str(part / "00000000000000000000.index")
    dead = [staged_path(index, "killed-run~3"), staged_path(str(part / "00000000000000000000.timeindex"), "killed-run")]
    alive = staged_path(index, "live-run")
    for path in [*dead, alive]:
        Path(path).write_bytes(b"\0" * 16)
    with run_locks([str(logs)], "live-run"):
        assert run_is_alive(str(logs), "live-run") and not run_is_alive(str(logs), "killed-run")
        assert main(["verify", str(part)]) == 1  # read-only: reports them (and the missing indexes), removes nothing
        assert all(os.path.exists(p) for p in [*dead, alive])
        capsys.readouterr()
        assert main(["rebuild", str(part)]) == 0
        out = capsys.readouterr().out
    assert "removed 2 staged files that killed runs had left" in out
    assert not any(os.path.exists(p) for p in dead) and os.path.exists(alive)
    assert not run_is_alive(str(logs), "live-run")


@pytest.mark.parametrize("victims", ["driver", "process group"])
def test_a_run_sigkilled_leaves_a_lock_the_next_writing_run_removes(tmp_path, victims):
    """``python -m indexlib rebuild`` with a pool of two SIGKILLed while the pool stages files: its driver
    alone (as the OOM killer does), or the whole process group. Its workers die with it (they once waited
    forever for work, holding the dead run's lock through the descriptor the fork copied); its run lock
    file and the ``.lock`` it created stay, and the next writing run removes them with the staged files, leaving a
    live run's lock."""
    import signal
    import subprocess
    import sys
    import time

    from indexlib.storage.locks import run_is_alive, run_locks

    from ..conftest import PROJECT_ROOT, descendants, identities, running

    logs = tmp_path / "logs"
    for p in range(60):
        generate_partition(logs / f"orders-{p}", segments=2, batches_per_segment=40, seed=p)
    holder = subprocess.Popen(  # a live run of another id writing in the same log dir
        [sys.executable, "-c", "import sys; from indexlib.storage.locks import run_locks\n"
         f"with run_locks([{str(logs)!r}], 'live-run'):\n    print('held', flush=True); sys.stdin.read()"],
        cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: dict[int, str] = {}
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"  # before the run starts
        proc = subprocess.Popen(
            [sys.executable, "-m", "indexlib", "rebuild", str(logs), "--jobs", "2"],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        killed = False
        while not killed and proc.poll() is None and time.monotonic() < deadline:
            if any(logs.glob("*/.*.rebuild.tmp")):  # only a cheap look here: the window is short
                os.killpg(proc.pid, signal.SIGSTOP)  # frozen, so the files seen are still staged when it dies
                seen.update(identities(descendants(proc.pid)))
                if any(logs.glob("*/.*.rebuild.tmp")):
                    (os.kill if victims == "driver" else os.killpg)(proc.pid, signal.SIGKILL)
                    killed = True
                os.killpg(proc.pid, signal.SIGCONT)  # the workers of a killed driver die with it (SIGKILL)
            time.sleep(0.001)
        proc.wait(timeout=30)
        if not killed:
            pytest.fail(f"the rebuild ended (exit {proc.returncode}) before it could be killed in its scan")
        time.sleep(1)
        assert seen and running(seen) == [], "the pool outlived its run"
        left = sorted(p.name for p in logs.iterdir() if p.name.startswith(".kafka-index-run-rebuild-"))
        assert [os.path.splitext(name)[1] for name in left] == [
            ".fence",
            ".lock",
        ]  # the killed run's: nobody removed them
        dead_run = left[1].removeprefix(".kafka-index-run-").removesuffix(".lock")
        assert left[0] == f".kafka-index-run-{dead_run}.fence"
        assert not run_is_alive(str(logs), dead_run)
        done = subprocess.run(
            [sys.executable, "-m", "indexlib", "rebuild", str(logs)],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0 and "staged files that killed runs had left" in done.stdout, done.stderr
        # the live run's lock only: the .lock the killed run created went with the next run, as its own, and its
        # run lock and stage fence as a dead run's
        assert sorted(p.name for p in logs.iterdir() if p.name.startswith(".")) == [".kafka-index-run-live-run.lock"]
        assert not list(logs.glob("*/.*"))
        assert run_is_alive(str(logs), "live-run")
        with pytest.raises(RuntimeError, match="another run with run id 'live-run'"):
            with run_locks([str(logs)], "live-run"):
                pass
    finally:
        holder.communicate("", timeout=30)
        for pid in running(seen):  # only the killed run's own processes, by PID and start time
            os.kill(pid, signal.SIGKILL)


def _read_ahead_in_this_process(_: int) -> bool:
    from indexlib.format import scan_kernel

    return scan_kernel.READ_AHEAD


def test_a_pool_that_keeps_every_core_scanning_turns_the_read_ahead_off(monkeypatch):
    """``map_locally``'s pool: with a core left over, each worker's scans keep the read-ahead thread; with
    every core scanning, its initializer turns it off in the workers (and only there)."""
    from concurrent.futures import ProcessPoolExecutor

    from indexlib.engine.pool import pool_reads_ahead, pool_worker
    from indexlib.format import scan_kernel

    cores = len(os.sched_getaffinity(0))
    assert not pool_reads_ahead(cores) and not pool_reads_ahead(cores + 3)
    assert pool_reads_ahead(cores - 1) == (cores > 1)
    with monkeypatch.context() as m:  # where sched_getaffinity does not exist (macOS): the machine's cores
        m.delattr(os, "sched_getaffinity")
        assert pool_reads_ahead((os.cpu_count() or 1) - 1) == ((os.cpu_count() or 1) > 1)
        assert not pool_reads_ahead(os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=2, initializer=pool_worker, initargs=(False,)) as pool:
        assert list(pool.map(_read_ahead_in_this_process, range(4))) == [False] * 4
    with ProcessPoolExecutor(max_workers=2, initializer=pool_worker, initargs=(True,)) as pool:
        assert list(pool.map(_read_ahead_in_this_process, range(4))) == [scan_kernel.READ_AHEAD] * 4
    assert (os.environ.get("KAFKA_INDEX_READ_AHEAD", "1") != "0") == scan_kernel.READ_AHEAD


def test_a_partition_that_could_not_be_listed_makes_the_run_unhealthy(tmp_path):
    """The engine's side of an unreadable partition dir (discovery marks it; as root no dir is unlistable, so
    the mark is set here: tests/indexlib/test_cli.py makes a real one as another user): one error finding,
    nothing replayed or read in it, a summary row, exit 1, in a run whose other partitions are checked."""
    from dataclasses import replace

    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run, summary_rows

    logs = damaged_log_dir(tmp_path)
    found = discover([str(logs)])
    hidden = found.partitions[0]
    found.partitions[0] = replace(hidden, segments=[], unreadable="cannot list it: Permission denied")
    report = run(found, RunOptions("verify"), lambda topic: IndexSettings(), map_locally(1))
    assert report.partition_findings[hidden.path][0].kind == "unreadable_partition"
    assert "nothing in it was verified" in report.partition_findings[hidden.path][0].detail
    assert {f.kind for f in report.remaining_findings} >= {"unreadable_partition"}
    assert report.exit_code == 1 and all(s.task.partition_dir != hidden.path for s in report.segments)
    row = next(r for r in summary_rows(report) if r["partition"] == hidden.name)
    assert row["segments"] == 0 and row["findings"] == 1 and row["kinds"] == {"unreadable_partition"}


def test_a_stopping_pool_keeps_its_threads_quiet():
    """While a stopped run takes its pool down, a thread that fails (the pool's manager thread, when a worker
    is terminated under it) prints no trace beside the run's one line; outside that, a thread's failure is
    printed as usual. (In a child process: pytest replaces the hook that prints.)"""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    script = """if True:
        import threading
        from indexlib.engine.pool import _quiet_threads

        def fail(what):
            raise OSError(what)

        def run(what):
            thread = threading.Thread(target=fail, args=(what,))
            thread.start()
            thread.join()

        with _quiet_threads():
            run("inside")
        run("outside")
    """
    child = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert "OSError: outside" in child.stderr and "inside" not in child.stderr


def test_a_partition_is_replayed_as_soon_as_its_outcomes_are_in_and_the_report_is_the_same(tmp_path, monkeypatch):
    """The local pool hands each batch of outcomes to the run as it comes back, and a partition whose outcomes are
    all in is replayed then, while the pool maps the rest (the driver's replay beside the workers). The report is
    the one of a map that hands nothing over (a Spark job's: every partition replayed after it): the same findings,
    aborted transactions and verdicts, for transactional partitions spread over several batches."""
    from indexlib.engine import runner as runner_module
    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run as run_engine

    logs = tmp_path / "logs"
    for n in range(4):
        generate_partition(logs / f"t-{n}", segments=3, batches_per_segment=40, transactional_producers=2, seed=n)
        rebuild_partition(logs / f"t-{n}")
    os.unlink(segment_file(str(logs / "t-1"), 0, ".txnindex"))  # a finding only the replay makes
    Path(segment_file(str(logs / "t-2"), 0, ".index")).write_bytes(b"\0" * 5)  # one the map makes
    found = discover([str(logs)])
    events: list[str] = []
    real_replay = runner_module.replay_outcomes

    def recorded_replay(partition, outcomes, check, run_id, cluster=None, store=None):
        events.append(f"replay {partition.name}")
        return real_replay(partition, outcomes, check, run_id, cluster, store)

    monkeypatch.setattr(runner_module, "replay_outcomes", recorded_replay)
    local = map_locally(2)

    def handing_over(tasks, run_id, arrived=None):
        outcomes = local(tasks, run_id, arrived)
        events.append("map returned")
        return outcomes

    def handing_nothing_over(tasks, run_id, arrived=None):
        return handing_over(tasks, run_id)

    def summary(report):
        segments = [
            (s.task.partition_dir, s.task.base_offset, s.identical, s.aborted, sorted(f.kind for f in s.findings))
            for s in report.segments
        ]
        partitions = {p: sorted((f.kind, f.file) for f in fs) for p, fs in report.partition_findings.items()}
        return segments, partitions, report.exit_code

    handed = run_engine(found, RunOptions("verify"), lambda topic: IndexSettings(), handing_over)
    assert events.index("map returned") > events.index("replay t-0")  # replayed while the pool still mapped
    assert sorted(e for e in events if e.startswith("replay")) == [f"replay t-{n}" for n in range(4)]  # once each
    events.clear()
    after = run_engine(found, RunOptions("verify"), lambda topic: IndexSettings(), handing_nothing_over)
    assert events[0] == "map returned" and len(events) == 5
    assert summary(handed) == summary(after)
    kinds = {f.kind for f in handed.remaining_findings}
    assert "txnindex_missing" in kinds and any(s.aborted for s in handed.segments) and handed.exit_code == 1


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_replay_that_fails_while_the_map_goes_on_leaves_no_backup_of_a_file_it_did_not_replace(
    tmp_path, monkeypatch, jobs
):
    """A partition's replay fails (here an unreadable dir, simulated) while the map still runs: the run stops with
    that error, every partition's files are as they were, and nothing staged or backed up for the outcomes the map
    had handed over is left (a copy in the backups would say that the file was replaced)."""
    from indexlib.engine import runner as runner_module
    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run as run_engine

    logs = tmp_path / "logs"
    for n in range(3):
        generate_partition(logs / f"t-{n}", segments=3, batches_per_segment=40, seed=20 + n)
        rebuild_partition(logs / f"t-{n}")
        index = Path(segment_file(str(logs / f"t-{n}"), 0, ".index"))
        index.write_bytes(b"\x7f" * 8 + index.read_bytes()[8:])  # a wrong first entry: staged, its old bytes copied
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    real_replay = runner_module.replay_outcomes

    def failing_replay(partition, outcomes, check, run_id, cluster=None, store=None):
        if partition.name == "t-1":
            raise OSError(5, "Input/output error", partition.path)
        return real_replay(partition, outcomes, check, run_id, cluster, store)

    monkeypatch.setattr(runner_module, "replay_outcomes", failing_replay)
    backups = tmp_path / "backups"
    options = RunOptions("repair", run_id="r1", backup_root=str(backups))
    with pytest.raises(OSError, match="Input/output error"):
        run_engine(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(jobs))
    assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before
    assert [p for p in backups.rglob("*") if p.is_file()] == []


def _killed_on_first_batch(batch, run_id):
    """A pool task that dies as an out-of-memory kill would (a real SIGKILL), in the worker given the biggest batch."""
    import signal

    if any(t.base_offset == 0 and t.partition_dir.endswith("t-0") for t in batch):
        os.kill(os.getpid(), signal.SIGKILL)
    return process_segments(batch, run_id)


def test_a_worker_killed_under_the_map_stops_the_run_with_one_named_error_and_nothing_replaced(tmp_path, monkeypatch):
    """A pool worker SIGKILLed while it maps (the kernel's OOM killer, an operator): the run raises
    :class:`WorkerDiedError` saying how it died, every file is as it was, nothing staged or backed up is left, and
    no worker outlives the run (its locks are free)."""
    import multiprocessing

    from indexlib.engine import pool as pool_module
    from indexlib.engine import run as run_engine
    from indexlib.engine.pool import WorkerDiedError, map_locally

    logs = tmp_path / "logs"
    for n in range(3):
        generate_partition(logs / f"t-{n}", segments=3, batches_per_segment=40, seed=40 + n)
        rebuild_partition(logs / f"t-{n}")
        index = Path(segment_file(str(logs / f"t-{n}"), 0, ".index"))
        index.write_bytes(b"\x7f" * 8 + index.read_bytes()[8:])  # repaired by the run: staged and backed up
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    monkeypatch.setattr(pool_module, "process_segments", _killed_on_first_batch)
    backups = tmp_path / "backups"
    options = RunOptions("repair", run_id="r1", backup_root=str(backups))
    with pytest.raises(WorkerDiedError, match="a worker process was killed by SIGKILL .*no file was replaced"):
        run_engine(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(2))
    assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before
    assert [p for p in backups.rglob("*") if p.is_file()] == []
    assert multiprocessing.active_children() == []


def test_a_pool_whose_worker_cannot_exit_still_ends_and_leaves_no_worker():
    """A worker that can never exit once the map is done (stopped here; in life, one waiting on the call queue's lock
    that a SIGKILLed sibling held) does not hold the run forever: the pool is shut down, the worker killed after the
    grace, and the map's results are returned. (In a child process, with a short grace: without it the child hangs,
    and the timeout fails the test.)"""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    script = """if True:
        import os, signal, time
        from types import SimpleNamespace
        from indexlib.engine import pool
        from indexlib.storage.store import StoreSpec

        def stop_the_others(batch, run_id):
            if batch[0].size == 2:  # the bigger task: the other worker is idle by the time it stops it
                time.sleep(1.0)
                children = open(f"/proc/{os.getppid()}/task/{os.getppid()}/children").read().split()
                for child in map(int, children):
                    if child != os.getpid():
                        os.kill(child, signal.SIGSTOP)
            return [batch[0].size]

        pool.process_segments = stop_the_others
        pool.EXIT_GRACE = 0.5
        started = time.monotonic()
        local = StoreSpec()
        out = pool.map_locally(2)([SimpleNamespace(size=2, store=local, target_store=local), SimpleNamespace(size=1, store=local, target_store=local)], "r1")
        left = open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()
        print(sorted(out), left, time.monotonic() - started < 30)
    """
    child = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split("\n")[0] == "[1, 2] [] True"


def test_a_run_stopped_while_a_worker_sends_its_result_exits():
    """SIGTERM while a worker is in the middle of sending its batch's outcomes: the run stops its workers, one dies
    with half a message in the result pipe, and the pool's manager thread waits for the rest, which Python's exit
    would join forever. The run still exits, at once, with no child left. (The worker here writes the torn message
    itself, then signals the run, so the tear is certain; in a child process: without the fix it hangs, and the
    timeout fails the test.)"""
    import subprocess
    import sys
    import time

    from ..conftest import PROJECT_ROOT

    script = """if True:
        import os, signal, struct, sys, time
        from types import SimpleNamespace
        from indexlib.engine import pool
        from indexlib.engine.interrupts import Interrupted, stop_on_signals
        from indexlib.storage.store import StoreSpec

        def torn_result(batch, run_id):
            frame = sys._getframe()
            while "result_queue" not in frame.f_locals:
                frame = frame.f_back
            writer = frame.f_locals["result_queue"]._writer
            os.write(writer.fileno(), struct.pack("!i", 64 << 20) + b"x" * 100)  # 100 B of 64 MiB, then dies
            os.kill(os.getppid(), signal.SIGTERM)
            time.sleep(60)

        pool.process_segments = torn_result
        pool.EXIT_GRACE = 2.0
        local = StoreSpec()
        tasks = [SimpleNamespace(size=n, store=local, target_store=local) for n in (2, 1)]
        try:
            with stop_on_signals():
                pool.map_locally(2)(tasks, "r1")
        except Interrupted:
            print("stopped", open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split(), flush=True)
    """
    started = time.monotonic()
    child = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split("\n")[0] == "stopped []"
    assert time.monotonic() - started < 30


def test_a_worker_killed_while_it_sends_its_result_stops_the_run_with_one_named_error():
    """A worker SIGKILLed (the OOM killer) halfway through sending its outcomes: the pool's own manager thread waits
    for the rest of the message and never sees the death, so nothing would ever end the map. The map watches the
    workers itself: it raises :class:`WorkerDiedError` naming the signal within seconds, and no child is left.
    (In a child process: without the watch it hangs, and the timeout fails the test.)"""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    script = """if True:
        import os, signal, struct, sys
        from types import SimpleNamespace
        from indexlib.engine import pool
        from indexlib.storage.store import StoreSpec

        def torn_result(batch, run_id):
            if batch[0].size == 1:
                return [1]
            frame = sys._getframe()
            while "result_queue" not in frame.f_locals:
                frame = frame.f_back
            writer = frame.f_locals["result_queue"]._writer
            os.write(writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 100)  # 100 of 1 MiB
            os.kill(os.getpid(), signal.SIGKILL)

        pool.process_segments = torn_result
        pool.EXIT_GRACE = 2.0
        local = StoreSpec()
        tasks = [SimpleNamespace(size=n, store=local, target_store=local) for n in (2, 1)]
        try:
            pool.map_locally(2)(tasks, "r1")
        except pool.WorkerDiedError as exc:
            print(exc, open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split(), flush=True)
    """
    child = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split("\n")[0] == (
        "a worker process was killed by SIGKILL while the run read the segments; no file was replaced []"
    )


_ZOMBIE_EXECUTOR = """
import pickle, sys
from indexlib.engine import StagingClosedError, process_segments
tasks = pickle.load(open(sys.argv[1], "rb"))
try:
    for one in tasks:  # a bin per segment: each a new look at the fence, as Spark's task attempts are
        process_segments([one], sys.argv[2])
except StagingClosedError:
    sys.exit(3)
"""


def test_an_executor_the_run_cannot_stop_stages_nothing_after_the_run_swept(tmp_path):
    """A Spark task goes on after its job is cancelled until Spark kills it, and Spark's own status may call it
    ended before that: a run that failed (or was stopped) in its map sweeps its staged files, and a task still
    running must not stage one after that sweep. Here the "executor" is a process the run never sees; the map fails
    as soon as it has staged its first file. The run's stage fence makes the run wait for the executor's batch, and
    every later batch finds the fence gone: nothing staged is left, and no file of the log dir changed."""
    import subprocess
    import sys
    import time

    from indexlib.engine.runner import run

    from ..conftest import PROJECT_ROOT

    logs = tmp_path / "logs"
    for p in range(40):
        generate_partition(logs / f"t-{p}", segments=2, batches_per_segment=40, seed=p)
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    executors: list[subprocess.Popen[bytes]] = []

    def map_then_lose_the_executor(tasks, run_id, arrived=None):
        (tmp_path / "tasks.pickle").write_bytes(pickle.dumps(tasks))
        executors.append(
            subprocess.Popen(
                [sys.executable, "-c", _ZOMBIE_EXECUTOR, str(tmp_path / "tasks.pickle"), f"{run_id}~7"],
                cwd=PROJECT_ROOT,
            )  # fmt: skip
        )
        deadline = time.monotonic() + 60
        while not any(logs.glob("*/.*.rebuild.tmp")) and time.monotonic() < deadline:
            time.sleep(0.001)
        raise RuntimeError("lost the executor")  # as a cancelled Spark job: the task goes on regardless

    try:
        with pytest.raises(RuntimeError, match="lost the executor"):
            run(
                discover([str(logs)]),
                RunOptions("rebuild", run_id="r1"),
                lambda t: IndexSettings(),
                map_then_lose_the_executor,
            )
        assert executors[0].wait(timeout=60) == 3  # it went on, and found the run's staging closed
        assert sorted(str(p.relative_to(logs)) for p in logs.rglob(".*")) == []  # no staged file, fence or lock
        assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before
    finally:
        for executor in executors:
            executor.kill()
            executor.wait()


def test_a_stage_fence_waits_for_a_batch_inside_it_and_then_refuses_every_batch(tmp_path):
    """:class:`StageFence`: a batch holding it delays ``close`` until the batch ends (the file is gone at once);
    after ``close`` a new batch is refused; ``close`` gives up after ``wait`` on a batch that never ends."""
    import threading
    import time

    from indexlib.storage.locks import StageFence, StagingClosedError, staging_open

    fence = StageFence(str(tmp_path), "r1")
    path = fence.create()
    assert os.path.basename(path) == ".kafka-index-run-r1.fence"
    closed_at: list[float] = []
    with staging_open(path):
        closer = threading.Thread(target=lambda: closed_at.append(fence.close() and time.monotonic()))
        closer.start()
        time.sleep(0.3)
        assert not closed_at and not os.path.exists(path)  # unlinked at once, waiting for this batch
        left = time.monotonic()
    closer.join(10)
    assert closed_at and closed_at[0] >= left
    with pytest.raises(StagingClosedError, match="takes no more staged files"):
        with staging_open(path):
            pass
    stuck = StageFence(str(tmp_path), "r2")
    with staging_open(stuck.create()):
        assert stuck.close(wait=0.2) is False
    assert not os.path.exists(stuck.path)
