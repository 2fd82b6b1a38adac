"""An index file that is its rebuild's bytes and then only zeros (a crashed or running broker's preallocated index)
becomes its rebuild by a cut of its zero tail in place (issue 24): the same file, no staged copy, no rename, no
backup; a ``.txnindex`` that already is its rebuild is kept as it is; any other index file is still staged and
renamed. A file that changed since it was read is not cut."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from indexlib.cli.main import main
from indexlib.engine.options import RunOptions
from indexlib.engine.pool import map_locally
from indexlib.engine.runner import run
from indexlib.format.layout import segment_file
from indexlib.recovery.settings import IndexSettings
from indexlib.storage.discovery import discover

from .test_recover import bases, crashed_log_dir


def inode(path: str) -> int:
    return os.stat(path).st_ino


def map_then_append(path: str, data: bytes):
    """The local map step, then ``data`` appended to ``path``: another writer between the map's read and the commit."""
    local = map_locally(1)

    def map_segments(tasks, run_id, arrived=None):
        outcomes = local(tasks, run_id, arrived)
        with open(path, "ab") as f:
            f.write(data)
        return outcomes

    return map_segments


def rebuilt_elsewhere(tmp_path: Path, logs: Path) -> Path:
    """The same log dir rebuilt under an output dir (every file staged and renamed): the expected bytes."""
    out = tmp_path / "expected"
    assert main(["rebuild", str(logs), "--output-dir", str(out), "-q"]) == 0
    return out


def test_a_preallocated_index_is_cut_in_place_and_a_wrong_one_replaced(tmp_path):
    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    first, active = bases(part)[0], bases(part)[-1]
    wrong = segment_file(str(part), first, ".timeindex")
    with open(wrong, "r+b") as f:
        f.write((2**40).to_bytes(8, "big"))  # the first entry's timestamp: wrong
    preallocated = [segment_file(str(part), active, s) for s in (".index", ".timeindex")]
    before = {path: inode(path) for path in [*preallocated, wrong]}
    expected = rebuilt_elsewhere(tmp_path, logs)
    backups = tmp_path / "backups"
    report = tmp_path / "report.json"
    assert main(["rebuild", str(logs), "--backup-dir", str(backups), "--run-id", "r1", "--json", str(report)]) == 0
    for path in preallocated:
        assert inode(path) == before[path]  # the same file, cut
        assert os.path.getsize(path) < 1024 * 1024
    assert inode(wrong) != before[wrong]  # a new file renamed over it
    for name in os.listdir(expected / "orders-0"):
        assert (part / name).read_bytes() == (expected / "orders-0" / name).read_bytes(), name
    copied = sorted(p.name for p in (backups / "r1" / "orders-0").iterdir() if p.suffix in (".index", ".timeindex"))
    assert copied == [os.path.basename(wrong)]  # the cut files lost nothing: no copy
    written = {w for s in json.loads(report.read_text())["segments"] for w in s["written"]}
    assert set(preallocated) | {wrong} <= written
    assert [n for n in os.listdir(part) if n.startswith(".")] == []
    assert main(["verify", str(part), "-q"]) == 0


def test_a_txnindex_that_already_is_its_rebuild_is_kept_and_a_wrong_one_replaced(tmp_path):
    """A rebuild in place keeps each ``.txnindex`` that already holds its rebuild's bytes (the same file: no staged
    copy, no rename, no backup) and still replaces a wrong one (its old bytes in the backups); every one ends as the
    rebuild into an output dir writes it."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    txns = sorted(str(p) for p in part.glob("*.txnindex"))
    assert len(txns) >= 2
    wrong, kept = txns[0], txns[1:]
    old = bytearray(Path(wrong).read_bytes())
    old[-1] ^= 1  # the last aborted transaction's last stable offset
    Path(wrong).write_bytes(old)
    before = {path: inode(path) for path in txns}
    expected = rebuilt_elsewhere(tmp_path, logs)
    backups, report = tmp_path / "backups", tmp_path / "report.json"
    assert main(["rebuild", str(logs), "--backup-dir", str(backups), "--run-id", "r1", "--json", str(report)]) == 0
    assert [inode(path) for path in kept] == [before[path] for path in kept]
    assert inode(wrong) != before[wrong]
    for path in txns:
        assert Path(path).read_bytes() == (expected / "orders-0" / os.path.basename(path)).read_bytes()
    copied = sorted(p.name for p in (backups / "r1" / "orders-0").iterdir() if p.suffix == ".txnindex")
    assert copied == [os.path.basename(wrong)] and (backups / "r1" / "orders-0" / copied[0]).read_bytes() == old
    written = {w for s in json.loads(report.read_text())["segments"] for w in s["written"]}
    assert set(txns) <= written
    assert main(["verify", str(part), "-q"]) == 0


def test_recover_cuts_the_rolled_away_segments_indexes_in_place_and_fsyncs_them_before_the_recovery_point(
    tmp_path, monkeypatch
):
    """The cut files are made durable in the partition's fsync round, before the recovery-point checkpoint is
    written (a power cut cannot be made here: the order of the calls is recorded)."""
    import indexlib.engine.recover as recover_module

    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    active = bases(part)[-1]
    preallocated = [segment_file(str(part), active, s) for s in (".index", ".timeindex")]
    before = {path: inode(path) for path in preallocated}
    txn_before = {str(path): inode(str(path)) for path in part.glob("*.txnindex")}
    events: list[tuple[str, list[str]]] = []
    real_fsync, real_points = recover_module.fsync_paths, recover_module.write_recovery_points

    def fsync_paths(paths):
        events.append(("fsync", list(paths)))
        return real_fsync(paths)

    def write_recovery_points(plans, backup_root):
        events.append(("recovery points", []))
        return real_points(plans, backup_root)

    monkeypatch.setattr(recover_module, "fsync_paths", fsync_paths)
    monkeypatch.setattr(recover_module, "write_recovery_points", write_recovery_points)
    monkeypatch.setattr("indexlib.engine.runner.write_recovery_points", write_recovery_points)
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "backups"), "-q"]) == 0
    for path in preallocated:
        assert inode(path) == before[path] and os.path.getsize(path) < 1024 * 1024
    fsynced_at = min(i for i, (what, paths) in enumerate(events) if set(preallocated) <= set(paths))
    points_at = [i for i, (what, _) in enumerate(events) if what == "recovery points"]
    assert points_at and fsynced_at < points_at[0]
    # the .txnindex files were already their rebuild: kept (the same files), fsynced in that round too
    txn = {str(path): inode(str(path)) for path in part.glob("*.txnindex")}
    assert txn and txn == txn_before
    assert min(i for i, (what, paths) in enumerate(events) if set(txn) <= set(paths)) < points_at[0]
    assert main(["verify", str(part), "-q"]) == 0


def test_an_index_file_changed_after_it_was_read_is_not_cut(tmp_path):
    """Between the map's read and the commit, the file grows (another writer): its segment fails with a line
    naming the file; the file keeps what was written to it."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[-1], ".index")
    map_then_write = map_then_append(index, b"\x01" * 8)
    report = run(discover([str(logs)]), RunOptions("rebuild"), lambda topic: IndexSettings(), map_then_write)
    (failed,) = [s for s in report.segments if s.error]
    assert failed.error is not None and index in failed.error and "changed since this run read it" in failed.error
    assert os.path.getsize(index) == 10 * 1024 * 1024 + 8 and report.exit_code == 1


def test_a_symbolic_link_to_a_preallocated_index_is_replaced_not_followed(tmp_path):
    """A cut follows no link: the link's name gets a new file, as every staged file's does; its target is
    untouched."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[-1], ".index")
    target = tmp_path / "elsewhere.index"
    os.replace(index, target)
    os.symlink(target, index)
    assert main(["rebuild", str(logs), "--backup-dir", str(tmp_path / "backups"), "-q"]) == 0
    assert not os.path.islink(index) and os.path.getsize(target) == 10 * 1024 * 1024
    assert main(["verify", str(part), "-q"]) == 0


@pytest.mark.parametrize("tail", [b"\x00" * 7, b"\x00" * 8])
def test_a_partial_entry_or_a_rebuild_at_its_size_is_handled_as_before(tmp_path, tail):
    """A trailing partial entry (7 zero bytes) is not a cut: staged and renamed (its copy kept); a file one zero
    entry longer than the rebuild is cut in place."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[0], ".index")
    size = os.path.getsize(index)
    with open(index, "ab") as f:
        f.write(tail)
    old = inode(index)
    assert main(["rebuild", str(logs), "--backup-dir", str(tmp_path / "backups"), "--run-id", "r", "-q"]) == 0
    assert os.path.getsize(index) == size
    assert (inode(index) == old) == (len(tail) == 8)
    copy = tmp_path / "backups" / "r" / "orders-0" / os.path.basename(index)
    assert copy.exists() == (len(tail) == 7) and (not copy.exists() or copy.stat().st_size == size + 7)


def test_a_hard_linked_preallocated_index_is_replaced_and_its_other_name_kept(tmp_path):
    """A file with a second name (a hard-linked copy of the log dir, as ``cp -al`` makes) is not cut: a cut would
    change the copy too. It is staged and renamed; the other name keeps the old bytes."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[-1], ".index")
    copy = tmp_path / "copy.index"
    os.link(index, copy)
    assert main(["rebuild", str(logs), "--backup-dir", str(tmp_path / "backups"), "-q"]) == 0
    assert inode(index) != inode(str(copy)) and os.path.getsize(copy) == 10 * 1024 * 1024
    assert os.path.getsize(index) < 1024 * 1024


def test_a_forced_run_beside_a_held_lock_replaces_and_never_cuts(tmp_path):
    """``--force`` past a held ``.lock`` (a broker that may be running, its active segment's indexes mapped): a cut
    under its mapping would kill it with SIGBUS, so the preallocated files are replaced (a new inode; the old one,
    still whole, stays with whoever maps it)."""
    import fcntl
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[-1], ".index")
    old = inode(index)
    with open(index, "rb") as mapped_by_broker, open(logs / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = subprocess.run(
            [sys.executable, "-m", "indexlib", "rebuild", str(logs), "--force", "-q"],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert os.fstat(mapped_by_broker.fileno()).st_size == 10 * 1024 * 1024  # the broker's file: not cut
    assert inode(index) != old and os.path.getsize(index) < 1024 * 1024


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the log dir to another user (uid 65534)")
def test_a_file_this_process_cannot_write_is_replaced_not_cut(tmp_path):
    """A cut needs write access to the file, a rename only to the dir: a preallocated index the run's user cannot
    write (another owner's, mode 0644) is staged and renamed as before, not a failed segment."""
    import shutil
    import tempfile

    from ..conftest import NOBODY, run_as_unprivileged

    root = Path(tempfile.mkdtemp(prefix="kafka-index-trim-"))
    try:
        os.chmod(root, 0o755)
        logs = shutil.copytree(crashed_log_dir(tmp_path, partitions=1, point=None), root / "logs")
        part = logs / "orders-0"
        index = segment_file(str(part), bases(part)[-1], ".index")
        for path in [logs, *logs.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        os.chown(index, 0, 0)
        os.chmod(index, 0o644)
        old = inode(index)
        result = run_as_unprivileged(lambda: {"code": main(["rebuild", str(logs), "-q"])})
        assert result == {"code": 0}
        assert inode(index) != old and os.stat(index).st_uid == NOBODY and os.path.getsize(index) < 1024 * 1024
    finally:
        shutil.rmtree(root)


def test_a_cut_that_fails_stops_the_commit_before_the_log_tail_is_cut(tmp_path):
    """recover of a partition whose middle segment ends in a torn batch (Kafka cuts it there and deletes the later
    segments): its index changes after the map's read, so its commit fails first, before the .log is cut or a later
    segment moved; the recovery point stays."""
    import shutil

    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    middle = bases(part)[1]
    log = Path(segment_file(str(part), middle, ".log"))
    with open(log, "ab") as f:
        f.write(b"\x07" * 100)  # a torn batch at its end
    log_bytes = log.read_bytes()
    index = segment_file(str(part), middle, ".index")
    names = sorted(p.name for p in part.iterdir())
    points = (logs / "recovery-point-offset-checkpoint").read_bytes()
    options = RunOptions("recover", backup_root=str(tmp_path / "backups"))
    map_then_write = map_then_append(index, b"\x00" * 8)
    report = run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_then_write)
    (failed,) = [s for s in report.segments if s.error]
    assert failed.task.base_offset == middle and "changed since this run read it" in (failed.error or "")
    assert log.read_bytes() == log_bytes  # not cut
    assert sorted(p.name for p in part.iterdir()) == names  # the later segment still there
    assert (logs / "recovery-point-offset-checkpoint").read_bytes() == points
    shutil.rmtree(tmp_path / "backups", ignore_errors=True)


def test_repair_cuts_an_inactive_segments_zero_padded_index_in_place(tmp_path):
    """An inactive segment's index with zeros after its entries (Kafka would read them as entries): repair's
    rebuild of it is a cut, the same file, and nothing to back up."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[0], ".index")
    size = os.path.getsize(index)
    os.truncate(index, size + 80)
    old = inode(index)
    backups = tmp_path / "backups"
    assert main(["verify", str(part), "-q"]) == 1
    options = RunOptions("repair", backup_root=str(backups))
    report = run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(1))
    assert report.exit_code == 0 and index in report.segments[0].written
    assert inode(index) == old and os.path.getsize(index) == size
    assert not [p for p in backups.rglob("*") if p.name.endswith(".index")]
    assert main(["verify", str(part), "-q"]) == 0
