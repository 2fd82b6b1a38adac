"""``--sync syncfs`` (issue 24): a writing run makes its files durable by one ``syncfs`` per file system instead of an
fsync per file, with the same files as an fsync run; a path on a file system the run did not register is still
fsynced, and a failed ``syncfs`` fails every path it covered. Real file systems and real system calls; fakes only
where the real thing cannot exist here, each saying so: a disk's write error (EIO), an older kernel's name (none
older than 5.17 here), an open refused to root."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from indexlib.cli.main import main
from indexlib.engine.pool import pool_worker
from indexlib.format.layout import segment_file
from indexlib.storage import file_system_sync
from indexlib.storage.publish import fsync_paths
from indexlib.testing.generate import generate_partition

from .test_recover import bases, crashed_log_dir, recovery_points


@pytest.fixture(autouse=True)
def _nothing_registered_after():
    yield
    file_system_sync.release()


def count_fsyncs(monkeypatch) -> list[int]:
    """Every ``os.fsync`` of this process from now on, by descriptor (each still made)."""
    calls: list[int] = []
    real = os.fsync

    def fsync(fd):
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


@pytest.mark.parametrize(
    "system, release, reports",
    [
        ("Linux", "6.18.44-fc-v657", True),
        ("Linux", "5.17.0", True),
        ("Linux", "5.15.0-91-generic", False),  # reports data write-back errors, not the journal's own
        ("Linux", "5.8.0-63-generic", False),
        ("Linux", "5.4.0-100-generic", False),
        ("Linux", "4.19.0", False),
        ("Linux", "garbage", False),
        ("Darwin", "23.1.0", False),
    ],
)
def test_syncfs_is_trusted_only_where_it_reports_write_errors(system, release, reports):
    assert file_system_sync.kernel_reports_syncfs_errors(system, release) is reports


def test_paths_on_a_registered_file_system_are_synced_without_an_fsync_each(tmp_path, monkeypatch):
    files = []
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x" * 100)
        files.append(str(tmp_path / f"f{i}"))
    missing = str(tmp_path / "gone")
    file_system_sync.register([str(tmp_path / "not-yet" / "made")])  # a dir the run will create: its ancestor's
    assert file_system_sync.roots() == [str(tmp_path)] and file_system_sync.active()
    calls = count_fsyncs(monkeypatch)
    failed = fsync_paths([*files, str(tmp_path), missing])
    assert calls == [] and list(failed) == [missing] and isinstance(failed[missing], FileNotFoundError)
    file_system_sync.release()
    assert not file_system_sync.active() and fsync_paths(files) == {} and len(calls) == len(files)


def test_a_path_on_another_file_system_is_still_fsynced(tmp_path, monkeypatch):
    other = "/dev/shm"
    if not os.path.isdir(other) or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm as a file system apart from the test's temporary dir")
    here = tmp_path / "here"
    here.write_bytes(b"x")
    with open(os.path.join(other, f"kafka-index-sync-{os.getpid()}"), "wb") as f:
        f.write(b"y")
    try:
        with file_system_sync.by_file_system([str(tmp_path)]):
            calls = count_fsyncs(monkeypatch)
            assert fsync_paths([str(here), f.name]) == {}
            assert len(calls) == 1  # the one on /dev/shm
        assert not file_system_sync.active()
    finally:
        os.unlink(f.name)


def test_a_failed_syncfs_fails_every_path_it_covered_and_every_later_one_on_its_file_system(tmp_path, monkeypatch):
    """The kernel reports a write error once per descriptor: after it, a syncfs of that file system succeeds over the
    lost pages, so none is trusted again in this run. (EIO from the disk cannot be made here: the C call is faked
    to fail once, as a disk's write error would fail it.)"""
    import ctypes
    import errno

    files = [str(tmp_path / n) for n in ("a", "b", "c")]
    for path in files:
        open(path, "wb").close()
    file_system_sync.register([str(tmp_path)])
    results = [-1]  # fails once, then would succeed

    def syncfs(fd):
        if results and results.pop() != 0:
            ctypes.set_errno(errno.EIO)
            return -1
        return 0

    monkeypatch.setattr(file_system_sync, "_syncfs_function", lambda: syncfs)
    failed = fsync_paths(files[:2])
    assert sorted(failed) == files[:2]
    for path, exc in failed.items():
        assert exc.filename == path and exc.errno == errno.EIO and "syncfs of its file system failed" in str(exc)
    later = fsync_paths(files[2:])
    assert list(later) == files[2:] and later[files[2]].errno == errno.EIO
    file_system_sync.release()  # a new run starts afresh
    file_system_sync.register([str(tmp_path)])
    assert fsync_paths(files) == {}


def test_a_forked_child_keeps_no_inherited_registration(tmp_path):
    file_system_sync.register([str(tmp_path)])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        os.write(write, b"active" if file_system_sync.active() else b"none")
        os._exit(0)
    os.close(write)
    assert os.read(read, 16) == b"none" and os.waitpid(pid, 0)[1] == 0
    os.close(read)
    assert file_system_sync.active()  # the parent's own stays


def test_only_local_file_systems_it_knows_are_registered(tmp_path):
    kind = file_system_sync.file_system_type(os.stat(tmp_path).st_dev)
    assert isinstance(kind, str) and kind
    assert file_system_sync.file_system_type(os.makedev(4095, 12345)) is None  # no such mount
    file_system_sync.register([str(tmp_path), "/proc"])  # proc: never synced by syncfs here
    assert file_system_sync.roots() == ([str(tmp_path)] if kind in file_system_sync.SYNCFS_FILE_SYSTEMS else [])


def _registered_in_worker() -> tuple[list[str], int]:
    ((_, fd),) = file_system_sync._registered.values()
    return file_system_sync.roots(), os.lseek(fd, 0, os.SEEK_CUR)


def test_a_pool_worker_registers_the_file_systems_with_descriptors_of_its_own(tmp_path):
    """A descriptor inherited across the fork would share the parent's open file (its error cursor, and its
    position, which tells the two apart here): the worker's is at position 0, the parent's was moved."""
    file_system_sync.register([str(tmp_path)])
    ((_, parent_fd),) = file_system_sync._registered.values()
    os.lseek(parent_fd, 1, os.SEEK_SET)
    with ProcessPoolExecutor(1, initializer=pool_worker, initargs=(True, file_system_sync.roots())) as pool:
        roots, position = pool.submit(_registered_in_worker).result()
    assert roots == [str(tmp_path)] and position == 0 and os.lseek(parent_fd, 0, os.SEEK_CUR) == 1


def test_recover_with_syncfs_leaves_what_recover_with_fsync_leaves_and_fsyncs_only_its_checkpoints(
    tmp_path, monkeypatch
):
    logs = crashed_log_dir(tmp_path / "a", partitions=3)
    part = logs / "orders-1"
    for suffix in (".index", ".timeindex"):  # staged by the workers: their own registration
        os.unlink(segment_file(str(part), bases(part)[0], suffix))
    twin = tmp_path / "b" / "logs"
    shutil.copytree(logs, twin)
    assert main(["recover", str(twin), "--backup-dir", str(tmp_path / "bk-b"), "--run-id", "r", "-q"]) == 0
    fsyncs = tmp_path / "fsyncs"  # one line per os.fsync of this process and of the pool's workers (forked: inherited)
    real = os.fsync

    def logged(fd):
        with open(fsyncs, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(fd)

    monkeypatch.setattr(os, "fsync", logged)
    args = ["recover", str(logs), "--backup-dir", str(tmp_path / "bk-a"), "--run-id", "r", "--jobs", "2", "-q"]
    assert main([*args, "--sync", "syncfs"]) == 0
    assert not file_system_sync.active()  # released at the run's end
    # none per partition and none in the workers (they staged orders-1's index files under their own registration):
    # the old recovery-point checkpoint's copy in the backups and its dir, the new checkpoint's temporary file and
    # the log dir after its rename (as Kafka writes a checkpoint); the run's mark in the log dir, written the same
    # way before the first change (its temporary file, the dir) and removed at the end (the dir); the dirs the copy's
    # backup dir was made in, four levels new here (bk-a, r, log-dirs, the log dir's label): all in this process
    assert fsyncs.read_text().split() == [str(os.getpid())] * (7 + 4)
    for a, b in ((logs, twin), (tmp_path / "bk-a", tmp_path / "bk-b")):
        names = sorted(str(p.relative_to(a)) for p in a.rglob("*") if "log-dirs" not in p.parts)
        assert names == sorted(str(p.relative_to(b)) for p in b.rglob("*") if "log-dirs" not in p.parts) and names
        for name in names:
            if (a / name).is_file():
                assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert recovery_points(logs) == recovery_points(twin) != {}


def test_a_rebuild_with_syncfs_writes_the_same_files(tmp_path):
    part = tmp_path / "logs" / "orders-0"
    generate_partition(part, segments=3, batches_per_segment=30, seed=3)
    out = {m: tmp_path / f"out-{m}" for m in ("fsync", "syncfs")}
    for method, target in out.items():
        assert main(["rebuild", str(part), "--output-dir", str(target), "--sync", method, "--jobs", "2", "-q"]) == 0
    names = sorted(p.name for p in (out["fsync"] / "orders-0").iterdir())
    assert names and names == sorted(p.name for p in (out["syncfs"] / "orders-0").iterdir())
    for name in names:
        assert (out["fsync"] / "orders-0" / name).read_bytes() == (out["syncfs"] / "orders-0" / name).read_bytes()


def test_syncfs_on_a_kernel_that_would_not_report_write_errors_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    import platform

    logs = crashed_log_dir(tmp_path)
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file() and p.stat().st_size < 1 << 20}
    monkeypatch.setattr(platform, "release", lambda: "5.4.0-100-generic")  # no such kernel here: its name only
    assert main(["recover", str(logs), "--sync", "syncfs", "--backup-dir", str(tmp_path / "bk")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sync syncfs needs Linux 5.17 or later" in err[0] and "5.4.0-100-generic" in err[0]
    assert {p: p.read_bytes() for p in before} == before and not (tmp_path / "bk").exists()
    # a read-only run does not care how writes would be synced
    assert main(["recover", str(logs), "--sync", "syncfs", "--dry-run", "-q"]) == 0


def test_a_dir_that_cannot_be_opened_registers_nothing(tmp_path, monkeypatch):
    """Its ``open`` refused (EACCES, which root never meets here: injected for the second dir only)."""
    import errno

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    real = os.open

    def refusing(path, flags, *args):
        if str(path).endswith("/b"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)
    with pytest.raises(PermissionError):
        file_system_sync.register([str(tmp_path / "a"), str(tmp_path / "b")])
    assert not file_system_sync.active() and file_system_sync.roots() == []


def test_a_task_registers_the_drivers_file_systems_for_itself_only(tmp_path, monkeypatch):
    """:func:`file_system_sync.for_task` (a Spark task's): the roots registered for the task and released after it
    (a Python worker runs many tasks); none without roots; where a dir cannot be opened or the kernel would not
    report syncfs's write errors (an executor on another host), nothing registered: each staged file fsynced, durable
    the same, and the task's own error is not chained to that refusal."""
    import errno
    import platform

    with file_system_sync.for_task([str(tmp_path)]):
        assert file_system_sync.roots() == [str(tmp_path)]
    assert not file_system_sync.active()
    with file_system_sync.for_task([]):
        assert not file_system_sync.active()

    def refused(path, *args):  # EACCES on a host where another user runs the executor (root never meets it here)
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refused)
    with file_system_sync.for_task([str(tmp_path)]):  # fsyncs: the task goes on
        assert not file_system_sync.active()
    monkeypatch.undo()
    monkeypatch.setattr(platform, "release", lambda: "5.4.0-100-generic")  # no such kernel here: its name only
    with pytest.raises(ValueError) as raised, file_system_sync.for_task([str(tmp_path)]):
        assert not file_system_sync.active()
        raise ValueError("the task's own error")
    assert raised.value.__context__ is None  # not shown as raised while handling the refusal


def _sync_used(argv: list[str], report) -> str:  # type: ignore[no-untyped-def]
    """The sync method a run's ``--json`` report says it used."""
    import json

    assert main([*argv, "--json", str(report), "-q"]) == 0
    return json.loads(report.read_text())["sync"]


def test_auto_syncs_by_file_system_only_where_that_is_safe(tmp_path, monkeypatch):
    """``--sync auto``, every writing mode's default: syncfs when the run holds the broker ``.lock`` of every log dir
    it writes (the broker is stopped) or writes only to an output dir, on a kernel whose syncfs reports write errors;
    fsync beside a running broker (``--force`` past its held lock) and on an older kernel; what was asked, when asked.
    The report says which; a read-only run writes nothing and says fsync."""
    import fcntl
    import platform

    from indexlib.format.layout import LOG_DIR_LOCK

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=20, seed=5)
    report = tmp_path / "report.json"
    assert _sync_used(["rebuild", str(logs)], report) == "syncfs"  # the default, the lock held: the broker stopped
    assert not file_system_sync.active()  # released at the run's end
    assert _sync_used(["rebuild", str(logs), "--output-dir", str(tmp_path / "out")], report) == "syncfs"
    assert _sync_used(["rebuild", str(logs), "--sync", "fsync"], report) == "fsync"
    assert _sync_used(["verify", str(logs)], report) == "fsync"
    with open(logs / LOG_DIR_LOCK, "a+b") as broker:  # a running broker's lock, held by another descriptor
        fcntl.flock(broker.fileno(), fcntl.LOCK_EX)
        assert _sync_used(["rebuild", str(logs), "--force"], report) == "fsync"
        assert _sync_used(["rebuild", str(logs), "--force", "--sync", "syncfs"], report) == "syncfs"  # as asked
    crashed = crashed_log_dir(tmp_path / "crashed")
    assert _sync_used(["recover", str(crashed), "--dry-run", "--sync", "syncfs"], report) == "fsync"  # writes nothing
    monkeypatch.setattr(platform, "release", lambda: "5.4.0-100-generic")  # no such kernel here: its name only
    assert _sync_used(["rebuild", str(logs)], report) == "fsync"


def test_auto_falls_back_to_fsync_where_a_dir_cannot_be_registered(tmp_path, monkeypatch, capsys):
    """A root the run cannot open for its syncfs (refused: injected, since root opens every dir here) does not fail
    an ``auto`` run, which fsyncs instead and says so; an explicit ``--sync syncfs`` stops before it writes, in one
    line (exit 1: a writing run that could not go on)."""
    import errno

    def refused(dirs):  # type: ignore[no-untyped-def]
        raise PermissionError(errno.EACCES, "Permission denied", sorted(dirs)[0])

    monkeypatch.setattr(file_system_sync, "register", refused)
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=20, seed=7)
    assert _sync_used(["rebuild", str(logs)], tmp_path / "report.json") == "fsync"
    assert main(["rebuild", str(logs), "--sync", "syncfs", "-q"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Permission denied" in line


def test_auto_on_a_file_system_syncfs_is_not_trusted_on_says_fsync(tmp_path, monkeypatch):
    """A log dir on a file system outside ext4, xfs, btrfs and tmpfs is fsynced file by file even under syncfs, and
    the report says fsync (the type is what ``/proc/self/mountinfo`` says: made unknown here, since every file
    system this machine mounts for tests is a trusted one)."""
    monkeypatch.setattr(file_system_sync, "file_system_type", lambda device: "fuse.sshfs")
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=20, seed=6)
    assert _sync_used(["rebuild", str(logs)], tmp_path / "report.json") == "fsync"


def test_backup_copies_are_made_durable_in_one_batch_and_named_only_after_it(tmp_path, monkeypatch):
    """Under syncfs a recover's backup copies cost no fsync each: the copies of a batch (the segments' index files,
    the partition's leader-epoch checkpoint) are synced together, then named, then their dirs synced, and only then
    is a file they keep replaced. A crash at any point leaves no backup named over bytes that were not durable."""
    from indexlib.storage import publish

    logs = crashed_log_dir(tmp_path, partitions=3)
    finals = []
    for p in range(3):
        part = logs / f"orders-{p}"
        index = segment_file(str(part), bases(part)[0], ".index")  # scrambled: rebuilt, its old bytes backed up
        with open(index, "r+b") as f:
            f.seek(16)
            f.write(bytes(range(24)))
        finals.append(index)
    epochs = logs / "orders-1" / "leader-epoch-checkpoint"  # an epoch past the log end: cut, the old file kept
    epochs.write_text("0\n2\n0 0\n1 999999\n")
    finals.append(str(epochs))
    events: list[tuple[str, ...]] = []
    real_link = os.link
    real_syncfs, real_copy, real_replace, real_fsync = (
        file_system_sync._syncfs_function(),
        publish._copy_sparse,
        os.replace,
        os.fsync,
    )

    def syncfs(fd):
        events.append(("syncfs",))
        return real_syncfs(fd)

    def copy(source, target):
        partial = real_copy(source, target)
        events.append(("copy", partial))
        return partial

    def rename(source, target):
        real_replace(source, target)
        events.append(("rename", str(source), str(target)))

    def link(source, target):
        real_link(source, target)
        events.append(("name", str(source), str(target)))

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    monkeypatch.setattr(file_system_sync, "_syncfs_function", lambda: syncfs)
    monkeypatch.setattr(publish, "_copy_sparse", copy)
    monkeypatch.setattr(os, "replace", rename)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "fsync", fsync)
    backups = tmp_path / "bk"
    args = [
        "recover",
        str(logs),
        "--backup-dir",
        str(backups),
        "--run-id",
        "r",
        "--jobs",
        "1",
        "-q",
        "--sync",
        "syncfs",
    ]
    assert main(args) == 0
    kept = backups / "r"
    for final in finals:
        backup = str(kept / os.path.basename(os.path.dirname(final)) / os.path.basename(final))
        copied, partial = next((i, e[1]) for i, e in enumerate(events) if e[0] == "copy" and e[1].startswith(backup))
        named = events.index(("name", partial, backup))
        replaced = next(i for i, e in enumerate(events) if e[0] == "rename" and e[2] == final)
        assert copied < named < replaced, final
        assert ("syncfs",) in events[copied:named], f"{final}: its backup was named before a sync of its bytes"
        assert ("syncfs",) in events[named:replaced], f"{final}: replaced before its backup's name was durable"
    in_partitions = [  # under kept, but for the recovery-point checkpoint's copy (log-dirs/), made on its own, and
        e[1]  # kept itself, the dir log-dirs/ was made in
        for e in events
        if e[0] == "fsync"
        and Path(e[1]).is_relative_to(kept)
        and Path(e[1]).relative_to(kept).parts[:1] not in [(), ("log-dirs",)]
    ]
    assert in_partitions == [], in_partitions
    assert sorted(p.name for p in kept.rglob("*") if p.is_file() and "log-dirs" not in p.parts) == sorted(
        [os.path.basename(f) for f in finals]
    )
    for final in finals[:3]:  # the copies hold the scrambled bytes
        backup = kept / os.path.basename(os.path.dirname(final)) / os.path.basename(final)
        assert backup.read_bytes()[16:40] == bytes(range(24))
