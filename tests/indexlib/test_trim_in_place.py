"""An index file that is its rebuild's bytes and then only zeros (a crashed or running broker's preallocated index)
becomes its rebuild by a cut of its zero tail in place (issue 24): the same file, no staged copy, no rename, no
backup; any other index file is still staged and renamed. A file that changed since it was read is not cut."""

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
    assert main(["verify", str(part), "-q"]) == 0


def test_an_index_file_changed_after_it_was_read_is_not_cut(tmp_path):
    """Between the map's read and the commit, the file grows (another writer): its segment fails with a line
    naming the file; the file keeps what was written to it."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    index = segment_file(str(part), bases(part)[-1], ".index")
    local = map_locally(1)

    def map_then_write(tasks, run_id):
        outcomes = local(tasks, run_id)
        with open(index, "ab") as f:
            f.write(b"\x01" * 8)
        return outcomes

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
