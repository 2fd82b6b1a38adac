"""Staging and installing index files: the old file or the whole new one, backups never overwritten."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexlib.format.errors import InvalidOffsetError
from indexlib.format.layout import staged_path
from indexlib.storage.publish import install, keep_backup, stage_offset_index


def test_a_staged_file_is_invisible_until_installed(tmp_path):
    final = str(tmp_path / "00000000000000000000.index")
    with open(final, "wb") as f:
        f.write(b"old" * 8)
    staged = stage_offset_index(final, 0, np.array([5, 9]), np.array([0, 4096]), 1 << 20, tag="r1~7")
    assert staged == staged_path(final, "r1~7") == str(tmp_path / ".00000000000000000000.index.r1~7.rebuild.tmp")
    assert Path(final).read_bytes() == b"old" * 8  # Kafka still sees the old file
    install(staged, final)
    assert Path(final).read_bytes() == np.array([[5, 0], [9, 4096]], dtype=">i4").tobytes()
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.index"]


def test_a_failed_stage_leaves_nothing(tmp_path):
    final = str(tmp_path / "00000000000000000000.index")
    with pytest.raises(InvalidOffsetError):
        stage_offset_index(final, 0, np.array([9, 5]), np.array([0, 4096]), 1 << 20)  # offsets go back
    assert os.listdir(tmp_path) == []


def test_the_first_backup_is_kept(tmp_path):
    final = tmp_path / "00000000000000000000.index"
    final.write_bytes(b"original")
    backup = keep_backup(str(final), str(tmp_path / "b"))
    final.write_bytes(b"already rebuilt")
    assert keep_backup(str(final), str(tmp_path / "b")) == backup  # a late second copy must not win
    assert Path(backup).read_bytes() == b"original"
    assert sorted(os.listdir(tmp_path / "b")) == ["00000000000000000000.index"]
    assert keep_backup(str(tmp_path / "missing.index"), str(tmp_path / "b")) is None


def _hold(lock_path, call: str) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
         f"fcntl.{call}(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()", str(lock_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_lock_held_by_another_process_is_seen_posix_or_flock(tmp_path):
    """A broker holds .lock with Java's FileChannel.tryLock (a POSIX record lock); other tools use flock."""
    from indexlib.storage.locks import log_dir_is_locked

    assert not log_dir_is_locked(tmp_path)  # no .lock at all
    (tmp_path / ".lock").write_bytes(b"")
    assert not log_dir_is_locked(tmp_path)  # a .lock nobody holds
    for call in ("lockf", "flock"):
        holder = _hold(tmp_path / ".lock", call)
        try:
            assert log_dir_is_locked(tmp_path), call
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
        assert not log_dir_is_locked(tmp_path), call  # released when the holder ends


def test_a_backup_keeps_a_preallocated_index_sparse(tmp_path):
    """A crashed broker's active segment keeps its indexes preallocated (10 MiB, sparse): its backup is a copy
    that stores the data pages only (once 20 MiB of zeros per partition), the same bytes."""
    final = tmp_path / "00000000000000000000.index"
    with open(final, "wb") as f:
        f.write(b"\x00\x00\x00\x05\x00\x00\x10\x00" * 3)
        f.truncate(10 * 1024 * 1024)
    copy = Path(keep_backup(str(final), str(tmp_path / "backups")) or "")
    assert copy.read_bytes() == final.read_bytes()
    assert os.stat(copy).st_blocks * 512 <= 64 * 1024  # a few pages, not 10 MiB of zeros
    assert os.listdir(tmp_path / "backups") == [final.name]  # no partial copy left


@pytest.mark.parametrize("instant", [0.0, 3600.0], ids=["concurrent", "one-thread"])
def test_fsync_paths_fsyncs_each_path_once_and_returns_the_failures(tmp_path, monkeypatch, fsynced, instant):
    import indexlib.storage.publish as publish

    monkeypatch.setattr(publish, "INSTANT_FSYNC_SECONDS", instant)
    paths = []
    for i in range(40):
        (tmp_path / f"f{i}").write_bytes(b"x")
        paths.append(str(tmp_path / f"f{i}"))
    missing = [str(tmp_path / "gone-1"), str(tmp_path / "gone-2")]
    failed = publish.fsync_paths([missing[0], *paths, missing[1]])
    assert sorted(fsynced) == sorted(paths)
    assert sorted(failed) == missing and all(isinstance(e, FileNotFoundError) for e in failed.values())
    assert publish.fsync_paths([]) == {}


@pytest.mark.parametrize("instant_seconds", [0.0, 60.0])
def test_concurrently_calls_each_item_once_in_this_thread_while_fast_then_in_threads(instant_seconds):
    """Calls that take longer than ``instant_seconds`` each move the rest into threads; fast ones stay here."""
    import threading

    from indexlib.storage.publish import concurrently

    seen: list[tuple[int, int]] = []
    concurrently(range(50), lambda i: seen.append((i, threading.get_ident())), instant_seconds)
    assert sorted(i for i, _ in seen) == list(range(50))
    here = {ident for _, ident in seen} == {threading.get_ident()}
    assert here == (instant_seconds > 0)


def test_a_backup_left_to_the_caller_is_named_only_by_name_backups(tmp_path):
    """With ``unsynced`` the copy stays under a partial name of its own until the caller, having synced it, names it:
    a crash before that leaves no backup under the name a later run would keep as the oldest; a copy another
    writer named first is kept, and this one dropped."""
    from indexlib.storage.publish import name_backups

    finals = []
    for i in range(3):
        final = tmp_path / f"{i:020d}.index"
        final.write_bytes(b"original %d" % i)
        finals.append(final)
    bk = tmp_path / "b"
    bk.mkdir()
    (bk / finals[1].name).write_bytes(b"an earlier copy")  # kept as it is: the first copy is the oldest
    unsynced: list[str] = []
    backups = [keep_backup(str(f), str(bk), unsynced) for f in finals]
    assert backups == [str(bk / f.name) for f in finals]
    assert len(unsynced) == 2 and all(p.endswith(".partial") for p in unsynced)  # the new copies, for the caller
    assert sorted(os.listdir(bk)) == sorted([finals[1].name, *(os.path.basename(p) for p in unsynced)])
    (bk / finals[2].name).write_bytes(b"another writer named it first")
    assert name_backups(backups, unsynced) == [str(bk)]
    assert sorted(os.listdir(bk)) == sorted(f.name for f in finals)  # no partial copy left
    assert (bk / finals[0].name).read_bytes() == b"original 0"
    assert (bk / finals[1].name).read_bytes() == b"an earlier copy"
    assert (bk / finals[2].name).read_bytes() == b"another writer named it first"
    assert name_backups(backups, unsynced) == []  # named already: nothing to sync
    with pytest.raises(FileNotFoundError) as raised:
        name_backups([str(bk / "gone.index")], unsynced)
    assert raised.value.filename == str(bk / "gone.index")


@pytest.mark.parametrize("how", ["keep_backup", "keep_backup_unsynced", "move_to_backup", "drop", "save_log_tail"])
def test_a_backup_dir_made_for_a_copy_has_its_name_synced_in_its_parent_before_the_copy_counts(tmp_path, fsynced, how):
    """A backup dir made on the way (``<backup root>/<run id>/<partition>/``): the dir each new level was created in
    is synced (where files move into it, before the first one leaves), so that a crash after the original is
    replaced or gone cannot take the backup's dir with it; with ``unsynced``, those dirs go to the caller's sync,
    with the copy. A dir that was there already adds nothing."""
    from indexlib.storage.publish import drop_segment_files, move_to_backup, name_backups, save_log_tail

    part = tmp_path / "orders-0"
    part.mkdir()
    files = [part / f"{i:020d}.log" for i in range(2)]
    for f in files:
        f.write_bytes(b"records")
    root = tmp_path / "backups"
    backup_dir = root / "run-1" / "orders-0"
    new_levels = [str(tmp_path), str(root), str(root / "run-1")]  # the dirs whose entries change
    unsynced: list[str] = []
    if how == "keep_backup":
        keep_backup(str(files[0]), str(backup_dir))
    elif how == "keep_backup_unsynced":
        backup = keep_backup(str(files[0]), str(backup_dir), unsynced)
        assert [p for p in unsynced if not p.endswith(".partial")] == new_levels and not fsynced
        name_backups([backup], unsynced)
    elif how == "move_to_backup":
        move_to_backup([str(files[0])], str(backup_dir))
    elif how == "drop":
        drop_segment_files([[str(files[1])]], str(backup_dir))
    else:
        save_log_tail(str(files[0]), 3, str(backup_dir))
    if how != "keep_backup_unsynced":
        assert set(new_levels) <= set(fsynced)
    if how == "drop":  # before the partition dir, whose sync makes the file's leaving durable
        assert max(fsynced.index(d) for d in new_levels) < fsynced.index(str(part))
    fsynced.clear()
    unsynced.clear()
    keep_backup(str(files[0]), str(backup_dir), unsynced)
    assert all(p.endswith(".partial") for p in unsynced) and not set(new_levels) & set(fsynced)


def test_two_writers_copying_the_same_file_never_share_a_partial_copy(tmp_path):
    """A speculative Spark attempt and the original copy the same index at once: each into its own partial file."""
    final = tmp_path / "00000000000000000000.index"
    final.write_bytes(b"original")
    first: list[str] = []
    second: list[str] = []
    keep_backup(str(final), str(tmp_path / "b"), first)
    keep_backup(str(final), str(tmp_path / "b"), second)
    assert second == [second[0]] and first == [first[0], str(tmp_path)]  # the first made the dir: its parent too
    assert first[0] != second[0] and {Path(p).read_bytes() for p in first[:1] + second} == {b"original"}


def test_segments_dropped_across_file_systems_leave_nothing_in_the_backups_when_a_copy_cannot_be_named(
    tmp_path, small_fs, monkeypatch
):
    """Segments dropped into a backup dir on another file system are copied first, every copy durable and named
    before the first file leaves. A copy that cannot be named (a write error of the backup disk: no real one exists
    here, so the naming of the second copy fails) stops the drop with nothing moved, and none of its copies stays:
    neither a partial one nor one named before the failure."""
    from indexlib.storage import publish
    from indexlib.storage.publish import drop_segment_files

    from ..conftest import remount

    remount(small_fs, "4m")
    part = tmp_path / "orders-0"
    part.mkdir()
    segments = [[str(part / f"{base:020d}{suffix}") for suffix in (".index", ".log")] for base in (200, 100)]
    for path in (p for files in segments for p in files):
        Path(path).write_bytes(b"bytes of " + path.encode())
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    real, calls = publish._name_copy, []

    def second_fails(partial, backup):
        calls.append(backup)
        if len(calls) == 2:
            raise OSError(5, "Input/output error", backup)
        return real(partial, backup)

    monkeypatch.setattr(publish, "_name_copy", second_fails)
    with pytest.raises(OSError, match="Input/output error"):
        drop_segment_files(segments, str(small_fs / "r" / "orders-0"))
    assert len(calls) == 2 and {p.name: p.read_bytes() for p in part.iterdir()} == before
    assert [p for p in small_fs.rglob("*") if p.is_file()] == []
    monkeypatch.setattr(publish, "_name_copy", real)  # the next attempt, under the same run id, moves them all
    moved = drop_segment_files(segments, str(small_fs / "r" / "orders-0"))
    assert [[Path(p).read_bytes() for p in files] for files in moved] == [
        [before[os.path.basename(p)] for p in files] for files in segments
    ]
    assert list(part.iterdir()) == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_output_dirs_new_dirs_have_their_names_synced(tmp_path, monkeypatch, jobs):
    """``rebuild --output-dir`` into dirs that do not exist yet: each dir whose entries changed when the run made the
    output dir and its partition dirs (the output dir's parents, the output dir) is synced, with the staged files,
    before the files are reported written (in this process, or by the pool's workers that staged them); a power loss
    cannot take a partition dir's name with the files in it."""
    from indexlib.cli.main import main
    from indexlib.storage import publish
    from indexlib.testing.generate import generate_partition

    logs = tmp_path / "logs"
    for p in range(2):
        generate_partition(logs / f"orders-{p}", segments=2, batches_per_segment=5, seed=p)
    synced = tmp_path / "fsynced"  # one line per path fsynced, by this process and its forked workers
    real = publish.fsync_path

    def logged(path):
        real(path)
        with open(synced, "a") as f:
            f.write(path + "\n")

    monkeypatch.setattr(publish, "fsync_path", logged)
    out = tmp_path / "new" / "out"
    assert main(["rebuild", str(logs), "--output-dir", str(out), "--sync", "fsync", "--jobs", jobs, "-q"]) == 0
    assert sorted(os.listdir(out)) == ["orders-0", "orders-1"]
    paths = synced.read_text().splitlines()
    assert {str(tmp_path), str(tmp_path / "new"), str(out)} <= set(paths)
    for p in range(2):  # the partition dir itself, after the renames into it
        assert str(out / f"orders-{p}") in paths
