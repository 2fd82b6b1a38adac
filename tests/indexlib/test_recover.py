"""``recover`` (``indexlib.engine.recover``, ``python -m indexlib recover``): a stopped broker's log dir left as
its own unclean start would leave it. The broker-side proof (a real 4.1.0 broker started on the result) is in
the real-broker tests; these hold the decisions and the files on generated and real partitions."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexlib.cli.main import main
from indexlib.engine import rebuild_partition
from indexlib.format.checkpoint import format_offset_checkpoint, parse_offset_checkpoint
from indexlib.format.layout import segment_file
from indexlib.format.producer_snapshot import EMPTY_SNAPSHOT
from indexlib.recovery.log_loader import left_to_broker, log_end_offset, segments_to_recover
from indexlib.storage.partition_files import summarize_log
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, PROJECT_ROOT, copy_fixture, requires_kafka_real


# ------------------------------------------------------------------------------------------ decisions
@pytest.mark.parametrize(
    "point, expected",
    [(0, [0, 100, 200]), (50, [0, 100, 200]), (100, [100, 200]), (150, [100, 200]), (200, [200]), (999, [200])],
)
def test_an_unclean_start_recovers_from_the_segment_holding_the_recovery_point(point, expected):
    assert segments_to_recover([0, 100, 200], point) == expected
    assert segments_to_recover([100, 200], 5) == [100, 200]  # below the first base: every segment


def test_what_recover_leaves_to_the_broker():
    assert "Raft" in (left_to_broker("__cluster_metadata", []) or "")
    assert ".swap" in (left_to_broker("orders", ["00000000000000000000.log.swap"]) or "")
    assert ".cleaned" in (left_to_broker("orders", ["00000000000000000000.log.cleaned"]) or "")
    assert left_to_broker("orders", ["00000000000000000000.log", "leader-epoch-checkpoint"]) is None
    assert log_end_offset(100, 0, 99) == 100 and log_end_offset(100, 3, 140) == 141


# ------------------------------------------------------------------------------------------ the files
def crashed_log_dir(root: Path, partitions: int = 2, point: int | None = 0) -> Path:
    """Partitions of three segments with their indexes rebuilt, then the active segment's indexes left as a
    killed broker leaves them (preallocated to 10 MiB), and a recovery-point checkpoint at ``point`` for each
    (None: no file)."""
    logs = root / "logs"
    for p in range(partitions):
        part = logs / f"orders-{p}"
        generate_partition(part, segments=3, batches_per_segment=30, transactional_producers=1, seed=40 + p)
        rebuild_partition(part)
        active = max(int(n.name[:20]) for n in part.glob("*.log"))
        os.truncate(segment_file(str(part), active, ".index"), 10 * 1024 * 1024)
        os.truncate(segment_file(str(part), active, ".timeindex"), 10 * 1024 * 1024 - 4)
    if point is not None:
        entries = {(f"orders-{p}".rsplit("-", 1)[0], p): point for p in range(partitions)}
        (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint(entries))
    return logs


def bases(part: Path) -> list[int]:
    return sorted(int(n.name[:20]) for n in part.glob("*.log"))


def recovery_points(logs: Path) -> dict:
    return parse_offset_checkpoint((logs / "recovery-point-offset-checkpoint").read_text(), "rp")


def leo(part: Path, base: int) -> int:
    summary = summarize_log(segment_file(str(part), base, ".log"), base, 4096)
    return base if summary.last_offset is None else log_end_offset(base, summary.batch_count, summary.last_offset)


def test_recover_rebuilds_from_the_recovery_point_rolls_an_empty_segment_and_moves_the_point(tmp_path):
    logs = crashed_log_dir(tmp_path, point=None)
    (logs / "recovery-point-offset-checkpoint").write_bytes(b"")  # a broker killed in its first minute: 0 bytes
    expected = {}
    for part in sorted(logs.glob("orders-*")):
        copy = tmp_path / "expected" / part.name
        copy.parent.mkdir(exist_ok=True)
        copy_fixture(part, copy)
        rebuild_partition(copy)
        expected[part.name] = {n.name: n.read_bytes() for n in copy.iterdir() if n.suffix != ".log"}
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "backups"), "--jobs", "2", "-q"]) == 0
    points = recovery_points(logs)
    for part in sorted(logs.glob("orders-*")):
        old = bases(part)[:3]
        end = leo(part, old[-1])
        assert bases(part) == old + [end]  # the empty segment the broker's roll would leave
        for suffix in (".log", ".index", ".timeindex"):
            assert os.path.getsize(segment_file(str(part), end, suffix)) == 0
        for name, data in expected[part.name].items():  # every index file of the recovered segments: the rebuild's
            assert (part / name).read_bytes() == data, name
        assert points[("orders", int(part.name.rsplit("-", 1)[1]))] == end
    assert not (logs / ".kafka_cleanshutdown").exists()
    # the next recover finds nothing to do but the empty segment at the recovery point
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "backups"), "--jobs", "1", "-q"]) == 0
    assert all(len(bases(part)) == 4 for part in logs.glob("orders-*"))


def test_a_cut_in_a_middle_segment_drops_the_later_ones_into_the_backups(tmp_path):
    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    first, middle, last = bases(part)
    log = Path(segment_file(str(part), middle, ".log"))
    valid = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x00" * 100 + b"\x07" * 50)  # a torn write: zeros and garbage past the last batch
    end = leo(part, middle)
    (part / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 " + str(end + 5) + "\n")  # an epoch past the cut
    (part / f"{last + 7:020d}.snapshot").write_bytes(EMPTY_SNAPSHOT)  # a snapshot past the cut
    backups = tmp_path / "backups"
    assert main(["recover", str(logs), "--backup-dir", str(backups), "--run-id", "r1"]) == 0
    assert log.stat().st_size == valid
    saved = backups / "r1" / "orders-0"
    assert (saved / f"{log.name}.tail-from-{valid}").read_bytes() == b"\x00" * 100 + b"\x07" * 50
    assert {p.name for p in saved.iterdir()} >= {f"{last:020d}.log", f"{last:020d}.index", f"{last:020d}.timeindex"}
    assert bases(part) == [first, middle, end]
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert (saved / "leader-epoch-checkpoint").read_text().endswith(f"1 {end + 5}\n")
    assert not (part / f"{last + 7:020d}.snapshot").exists()
    assert recovery_points(logs)[("orders", 0)] == end


def test_a_dropped_segment_whose_index_differs_from_its_rebuild_is_moved_whole(tmp_path):
    """Issue 36 (fault trial): a segment after the cut whose ``.index`` is not its rebuild's bytes had its old index
    copied into the backups by the map, and the drop then refused to move the file over that copy ("a backup of that
    name exists"), so the partition was never recovered. The drop moves the segment's files as they are: exit 0,
    the dropped ``.index`` in the backups with its own bytes."""
    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    first, middle, last = bases(part)
    with open(segment_file(str(part), middle, ".log"), "ab") as f:
        f.write(b"\x00" * 80 + b"\x0b" * 45)
    index = Path(segment_file(str(part), last, ".index"))
    scrambled = bytearray(index.read_bytes())
    scrambled[0:8] = (1).to_bytes(4, "big") + (7).to_bytes(4, "big")  # a wrong first entry, then the zero tail
    index.write_bytes(bytes(scrambled))
    backups = tmp_path / "backups"
    assert main(["recover", str(logs), "--backup-dir", str(backups), "--run-id", "r1", "-q"]) == 0
    saved = backups / "r1" / "orders-0"
    assert (saved / index.name).read_bytes() == bytes(scrambled)
    assert bases(part) == [first, middle, leo(part, middle)]
    assert not [p for p in part.iterdir() if ".rebuild" in p.name or p.name.startswith(".")]


def test_a_partition_kafka_would_refuse_keeps_its_recovery_point_and_files(tmp_path):
    logs = crashed_log_dir(tmp_path, partitions=2, point=0)
    part = logs / "orders-1"
    log = Path(segment_file(str(part), bases(part)[0], ".log"))
    data = bytearray(log.read_bytes())
    data[0:8] = (2**62).to_bytes(8, "big")  # the first batch's base offset far beyond the segment's 32-bit range
    log.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b"), "-q"]) == 1
    assert {p.name: p.read_bytes() for p in part.iterdir()} == before
    points = recovery_points(logs)
    assert points[("orders", 1)] == 0 and points[("orders", 0)] > 0


def test_a_dry_run_writes_nothing(tmp_path, capsys):
    logs = crashed_log_dir(tmp_path, partitions=1, point=0)
    before = {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert main(["recover", str(logs), "--dry-run"]) == 0
    assert {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before
    assert "would_recover" in capsys.readouterr().out


@pytest.mark.parametrize("lock", [fcntl.lockf, fcntl.flock], ids=["fcntl, as Java's tryLock", "flock"])
def test_recover_refuses_a_running_brokers_log_dir_in_one_line(tmp_path, lock):
    logs = crashed_log_dir(tmp_path, partitions=1)
    with open(logs / ".lock", "w") as held:
        before = {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
        lock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        holder = subprocess.run(
            [sys.executable, "-m", "indexlib", "recover", str(logs), "--backup-dir", str(tmp_path / "b")],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert holder.returncode == 2
    assert holder.stderr.splitlines() == [
        f"python -m indexlib: error: {logs / '.lock'}: held by another process (a running broker, or another "
        "writing run); recover works only on a stopped broker's log dirs"
    ]
    assert {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "b").exists()


def try_lock_elsewhere(path: Path) -> subprocess.CompletedProcess:
    """Another process takes ``path`` the way a starting broker does (Java's ``FileChannel.tryLock``: an exclusive
    ``fcntl`` lock, not waiting); exit 0 if it got it, else 1 with the error."""
    code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except OSError as exc:\n    sys.exit(f'refused: {exc.strerror}')\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", ["recover", "rebuild", "repair"])
def test_a_writing_run_holds_the_brokers_lock_for_its_whole_length(tmp_path, mode):
    """The broker's own lock, as Kafka takes it, is held from before the first write to after the last: a broker
    (here another process taking the lock as Java does) starting at any point of the run fails to lock the dir."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    logs = crashed_log_dir(tmp_path, partitions=2)
    for part in logs.glob("orders-*"):  # something for a repair to write
        (part / "00000000000000000000.index").unlink()
    tried: list[tuple[str, subprocess.CompletedProcess]] = []

    class Probe:  # told before and after each commit that writes; probes the lock from another process each time
        def run_started(self, options):
            pass

        def before_commit(self, outcome, decision):
            tried.append(("before_commit", try_lock_elsewhere(logs / ".lock")))

        def after_commit(self, result):
            tried.append(("after_commit", try_lock_elsewhere(logs / ".lock")))

        def before_partition_files(self, partition, broker, files):
            tried.append(("before_partition_files", try_lock_elsewhere(logs / ".lock")))

        def after_partition_files(self, partition, broker, written, backups):
            tried.append(("after_partition_files", try_lock_elsewhere(logs / ".lock")))

    options = RunOptions(mode, backup_root=str(tmp_path / "b"))
    run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(1), Probe())
    assert len(tried) >= 4, [when for when, _ in tried]  # two partitions: a commit each at least
    for when, probe in tried:
        assert probe.returncode == 1 and "refused: Resource temporarily unavailable" in probe.stderr, (when, probe)
    assert try_lock_elsewhere(logs / ".lock").returncode == 0  # released at the end


def test_two_writing_runs_on_one_log_dir_the_second_is_refused(tmp_path):
    """Two recovers (different run ids) on one log dir: the second, started while the first holds the dir, is
    refused in one line (exit 2) and writes nothing; the first finishes."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    logs = crashed_log_dir(tmp_path, partitions=1)
    second: list[subprocess.CompletedProcess] = []

    class Second:
        def run_started(self, options):
            pass

        def before_commit(self, outcome, decision):
            if not second:
                cmd = [sys.executable, "-m", "indexlib", "recover", str(logs), "--backup-dir", str(tmp_path / "b2")]
                second.append(subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120))

        def after_commit(self, result): ...
        def before_partition_files(self, partition, broker, files): ...
        def after_partition_files(self, partition, broker, written, backups): ...

    report = run(
        discover([str(logs)]), RunOptions("recover", backup_root=str(tmp_path / "b1")), lambda topic: IndexSettings(),
        map_locally(1), Second(),
    )  # fmt: skip
    assert report.exit_code == 0 and report.checkpoints
    (refused,) = second
    assert refused.returncode == 2, refused
    assert refused.stderr.splitlines() == [
        f"python -m indexlib: error: {logs / '.lock'}: held by another process (a running broker, or another "
        "writing run); recover works only on a stopped broker's log dirs"
    ]
    assert not (tmp_path / "b2").exists()


def test_a_lock_file_recover_creates_belongs_to_the_log_dirs_owner_and_goes_at_the_end(tmp_path):
    """A log dir without ``.lock`` (a copy): the run creates it as Kafka would, with the dir's owner (a broker
    running as that user must still open it) and a line saying who made it, holds it, and removes it at the end."""
    from indexlib.engine import RunOptions, map_locally, run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover
    from indexlib.storage.locks import CREATED_LOCK

    logs = crashed_log_dir(tmp_path, partitions=1)
    assert not (logs / ".lock").exists()
    seen = []

    class Look:
        def run_started(self, options):
            pass

        def before_commit(self, outcome, decision):
            st, owner = (logs / ".lock").stat(), logs.stat()
            seen.append(((st.st_uid, st.st_gid, st.st_size), (owner.st_uid, owner.st_gid, len(CREATED_LOCK))))
            seen.append(try_lock_elsewhere(logs / ".lock").returncode)

        def after_commit(self, result): ...
        def before_partition_files(self, partition, broker, files): ...
        def after_partition_files(self, partition, broker, written, backups): ...

    run(discover([str(logs)]), RunOptions("recover", backup_root=str(tmp_path / "b")), lambda t: IndexSettings(),
        map_locally(1), Look())  # fmt: skip
    assert seen and seen[0][0] == seen[0][1] and seen[1] == 1
    assert not (logs / ".lock").exists()


@pytest.mark.parametrize(
    ("left", "stays"),
    [(None, False), (b"", True), (b"other tool\n", True)],
    ids=["a-killed-runs", "a-brokers", "other"],
)
def test_a_lock_file_a_killed_run_created_goes_with_the_next_run_and_no_other(tmp_path, left, stays):
    """A ``.lock`` that a killed run created (it says so) is removed by the next writing run as its own, so the log
    dir ends as one run leaves it; a broker's (empty) or anyone else's ``.lock`` stays as it was."""
    from indexlib.storage.locks import CREATED_LOCK, broker_locks

    logs = tmp_path / "logs"
    logs.mkdir()
    content = CREATED_LOCK if left is None else left
    (logs / ".lock").write_bytes(content)
    with broker_locks([str(logs)], False, "stop the broker"):
        assert try_lock_elsewhere(logs / ".lock").returncode == 1  # held meanwhile
    assert (logs / ".lock").exists() == stays
    if stays:
        assert (logs / ".lock").read_bytes() == content


@requires_kafka_real
def test_the_metadata_log_and_an_interrupted_compaction_are_left_to_the_broker(tmp_path):
    local = KAFKA_REAL / "local-apache-kafka-4.1.0"
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("__cluster_metadata-0", "plain-0"):
        copy_fixture(local / name, logs / name)
    (logs / "plain-0" / "00000000000000000000.log.swap").write_bytes(b"")
    before = {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b"), "-q"]) == 0
    assert {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before


# ------------------------------------------------------------------------------------ snapshots and epochs
@requires_kafka_real
@pytest.mark.parametrize("name", ["txn-1", "java-perf-0", "plain-0", "comp-gzip-0", "logappend-0"])
def test_recover_writes_the_producer_snapshots_kafka_wrote(tmp_path, monkeypatch, name):
    """A real partition recovered from its first segment with every snapshot gone: recover writes one at each
    later segment base and at the log end, each equal to the one the broker wrote there, but for producers
    Kafka had dropped as idle for ``producer.id.expiration.ms`` (a day) by then; the leader epochs are the
    file's; the next recover has nothing left but the empty segment."""
    from indexlib.engine import recover as recover_module
    from indexlib.format.leader_epoch_checkpoint import parse_leader_epoch_checkpoint
    from indexlib.format.producer_snapshot import parse_snapshot_entries
    from indexlib.recovery.producer_state import PRODUCER_ID_EXPIRATION_MS

    source = KAFKA_REAL / "local-apache-kafka-4.1.0" / name
    logs = tmp_path / "logs"
    logs.mkdir()
    part = copy_fixture(source, logs / name)
    kafka_snapshots = {p.name: p.read_bytes() for p in part.glob("*.snapshot")}
    for p in part.glob("*.snapshot"):
        p.unlink()
    epochs_before = (part / "leader-epoch-checkpoint").read_text()
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({(name.rsplit("-", 1)[0], 0): 0}))
    newest = max(summarize_log(p, int(p.name[:20]), 4096).raw_max or 0 for p in part.glob("*.log"))
    monkeypatch.setattr(recover_module, "_now_ms", lambda: newest + 1)
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b"), "-q"]) == 0
    ours = {p.name: p.read_bytes() for p in part.glob("*.snapshot")}
    assert set(ours) == set(kafka_snapshots)
    for snapshot, data in kafka_snapshots.items():
        theirs = {e.producer_id: e for e in parse_snapshot_entries(data, snapshot)}
        mine = {e.producer_id: e for e in parse_snapshot_entries(ours[snapshot], snapshot)}
        assert {pid: mine.get(pid) for pid in theirs} == theirs, snapshot
        extra = [e for pid, e in mine.items() if pid not in theirs]
        assert all(not e.has_open_transaction for e in extra), snapshot
        if not extra:
            assert ours[snapshot] == data, snapshot  # byte for byte, Kafka's order
    assert parse_leader_epoch_checkpoint((part / "leader-epoch-checkpoint").read_text(), "x") == (
        parse_leader_epoch_checkpoint(epochs_before, "x")
    )
    assert PRODUCER_ID_EXPIRATION_MS == 86_400_000


@requires_kafka_real
@pytest.mark.parametrize("name", ["txn-1", "txn-0", "java-perf-0", "plain-0", "comp-lz4-0", "compacted-0"])
def test_a_partition_whose_first_segment_retention_deleted_recovers_from_kafkas_snapshot_at_its_new_first_base(
    tmp_path, monkeypatch, name
):
    """A real partition after retention deleted its first segment: the log start is that of the new first segment,
    so the broker's ``log-start-offset-checkpoint`` has no entry for it (read as 0), and Kafka's snapshot at the new
    first base holds the producers of the segment deleted. Recovered from there, Kafka's ``recoverSegment`` loads
    that snapshot (it lies in ``(0, base]``): so does recover; the snapshots it writes at the later bases and at
    the log end are the broker's, and the one at the first base is left as it was."""
    from indexlib.engine import recover as recover_module
    from indexlib.format.producer_snapshot import parse_snapshot_entries

    logs = tmp_path / "logs"
    logs.mkdir()
    part = copy_fixture(KAFKA_REAL / "local-apache-kafka-4.1.0" / name, logs / name)
    kafka_snapshots = {p.name: p.read_bytes() for p in part.glob("*.snapshot")}
    first, *later = bases(part)[1:]
    for p in part.iterdir():  # the first segment and every snapshot but the one at the new first base
        offset = int(p.name[:20]) if p.name[:20].isdigit() else None
        if offset is not None and (offset < first or (offset > first and p.suffix == ".snapshot")):
            p.unlink()
    kept = (part / f"{first:020d}.snapshot").read_bytes()
    assert parse_snapshot_entries(kept, "kept")  # the state Kafka carried over the deleted segment
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({(name.rsplit("-", 1)[0], 0): 0}))
    newest = max(summarize_log(p, int(p.name[:20]), 4096).raw_max or 0 for p in part.glob("*.log"))
    monkeypatch.setattr(recover_module, "_now_ms", lambda: newest + 1)
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b"), "-q"]) == 0
    ours = {p.name: p.read_bytes() for p in part.glob("*.snapshot")}
    assert ours[f"{first:020d}.snapshot"] == kept
    assert set(ours) == {n for n in kafka_snapshots if int(n[:20]) >= first}
    for snapshot in sorted(ours):
        theirs = {e.producer_id: e for e in parse_snapshot_entries(kafka_snapshots[snapshot], snapshot)}
        mine = {e.producer_id: e for e in parse_snapshot_entries(ours[snapshot], snapshot)}
        assert mine == theirs, snapshot
    assert main(["verify", str(logs), "-q"]) == 0


def test_after_retention_the_state_carried_in_the_snapshot_at_the_first_base_reaches_every_snapshot_recover_writes(
    tmp_path, monkeypatch
):
    """The same shape where the deleted segment held a producer that no later segment names (an idempotent producer
    that wrote only there, in the snapshot Kafka took at the new first base): recovered from that base with the log
    start read as 0, every snapshot recover writes holds it, beside the state a recover of the whole partition from
    offset 0 gives; the ``.txnindex`` files are that recover's, byte for byte."""
    from dataclasses import replace

    from indexlib.engine import recover as recover_module
    from indexlib.format.producer_snapshot import format_snapshot, parse_snapshot_entries

    def partition(root: Path) -> Path:
        part = root / "orders-0"
        generate_partition(part, segments=4, batches_per_segment=30, transactional_producers=2, epochs=True, seed=7)
        (root / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({("orders", 0): 0}))
        return part

    whole = partition(tmp_path / "whole")
    newest = max(summarize_log(p, int(p.name[:20]), 4096).raw_max or 0 for p in whole.glob("*.log"))
    monkeypatch.setattr(recover_module, "_now_ms", lambda: newest + 1)  # no producer expired when the state loads
    assert main(["recover", str(whole.parent), "--backup-dir", str(tmp_path / "b0"), "-q"]) == 0
    part = partition(tmp_path / "logs")
    first = bases(part)[1]
    for p in part.glob(f"{0:020d}.*"):
        p.unlink()
    carried = parse_snapshot_entries((whole / f"{first:020d}.snapshot").read_bytes(), "carried")
    gone = replace(carried[0], producer_id=3000, current_txn_first_offset=-1, coordinator_epoch=-1, timestamp=newest)
    (part / f"{first:020d}.snapshot").write_bytes(format_snapshot([*carried, gone]))
    assert main(["recover", str(part.parent), "--backup-dir", str(tmp_path / "b"), "-q"]) == 0
    ours = {p.name: p.read_bytes() for p in part.glob("*.snapshot")}
    theirs = {p.name: p.read_bytes() for p in whole.glob("*.snapshot") if int(p.name[:20]) > first}
    assert set(ours) == {*theirs, f"{first:020d}.snapshot"}
    for name, data in theirs.items():
        mine = {e.producer_id: e for e in parse_snapshot_entries(ours[name], name)}
        assert mine == {e.producer_id: e for e in parse_snapshot_entries(data, name)} | {3000: gone}, name
    ours = {p.name: p.read_bytes() for p in part.glob("*.txnindex")}
    assert ours == {p.name: p.read_bytes() for p in whole.glob("*.txnindex") if int(p.name[:20]) >= first}


def test_a_cleanly_shut_down_log_dir_is_left_as_it_is(tmp_path):
    """The broker's start skips recovery where its clean shutdown left ``.kafka_cleanshutdown``: so does recover."""
    logs = crashed_log_dir(tmp_path, partitions=1)
    (logs / ".kafka_cleanshutdown").write_text("{}")
    before = {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b")]) == 0
    assert {str(p): p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before


def test_a_recovery_point_file_kafka_cannot_read_recovers_everything_as_the_broker_would(tmp_path, capsys):
    """The broker reads an unreadable ``recovery-point-offset-checkpoint`` as empty (every partition from 0): so
    does recover, with a finding, and it rewrites the file with the new points."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    (logs / "recovery-point-offset-checkpoint").write_text("0\n2\norders 0 5\n")  # one entry of two
    (logs / "log-start-offset-checkpoint").write_text("0\nnot a number\n")  # the log start: read as 0, as Kafka
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b"), "--run-id", "r", "--json", "-"]) == 1
    out = capsys.readouterr().out
    assert "bad_recovery_point_checkpoint" in out
    part = logs / "orders-0"
    assert recovery_points(logs)[("orders", 0)] == bases(part)[-1]  # recovered from 0, rolled at the end
    assert (tmp_path / "b" / "r" / "log-dirs").is_dir()  # the unreadable file kept


def test_without_a_snapshot_at_the_first_recovered_base_the_state_is_rebuilt_as_kafkas_recovery_does(tmp_path, capsys):
    """Issue 41: recovering from a middle segment needs the producer state at its base. Without a snapshot there (or
    with one Kafka refuses), Kafka's ``recoverSegment`` loads the newest readable snapshot below (none: the empty
    state at the log start), replays the segments from there and writes the snapshot at the base; so does recover:
    its snapshots are those of a recover of the same partitions from offset 0, byte for byte, the refused file is
    kept in the backups, and verify finds nothing."""
    logs = crashed_log_dir(tmp_path / "mid", partitions=4, point=None)
    points = {("orders", p): bases(logs / f"orders-{p}")[1 if p < 2 else 2] for p in range(4)}
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint(points))
    whole = crashed_log_dir(tmp_path / "whole", partitions=4, point=0)  # the same partitions, from offset 0
    assert main(["recover", str(whole), "--backup-dir", str(tmp_path / "b0"), "-q"]) == 0
    garbage = b"\x00\x01garbage"
    (logs / "orders-1" / f"{points[('orders', 1)]:020d}.snapshot").write_bytes(garbage)
    older = bases(logs / "orders-2")[1]  # orders-2: from the snapshot at its second base, its third recovered
    older_bytes = (whole / "orders-2" / f"{older:020d}.snapshot").read_bytes()
    (logs / "orders-2" / f"{older:020d}.snapshot").write_bytes(older_bytes)
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b"), "--run-id", "r"]) == 0
    out = capsys.readouterr().out
    assert "recovery point" in out and "rebuilds producer state" not in out
    for p in range(4):  # orders-3: from its last segment, no snapshot: the one Kafka takes on the way, at bases[1]
        name = f"orders-{p}"
        ours = {s.name: s.read_bytes() for s in (logs / name).glob("*.snapshot")}
        theirs = {s.name: s.read_bytes() for s in (whole / name).glob("*.snapshot")}
        if p == 2:  # Kafka writes none below the state it loads
            theirs = {n: b for n, b in theirs.items() if int(n[:20]) >= older}
        assert ours == theirs, name
        assert f"{points[('orders', p)]:020d}.snapshot" in ours
        if p == 3:
            assert f"{bases(logs / name)[1]:020d}.snapshot" in ours
        assert recovery_points(logs)[("orders", p)] == bases(logs / name)[-1]
    assert (tmp_path / "b" / "r" / "orders-1" / f"{points[('orders', 1)]:020d}.snapshot").read_bytes() == garbage
    assert main(["verify", str(logs), "-q"]) == 0


def test_a_replay_that_would_start_inside_a_segment_is_left_to_the_broker(tmp_path, capsys):
    """A snapshot inside a segment (an older clean shutdown's) as the newest below the first recovered base: Kafka
    replays from the batch holding it; recover leaves that to the broker's start, writes no snapshot, says so."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    first = bases(part)[2]
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({("orders", 0): first}))
    inside = bases(part)[1] + 3
    (part / f"{inside:020d}.snapshot").write_bytes(EMPTY_SNAPSHOT)
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b")]) == 0
    assert (
        f"recover orders-0: the producer state before {first}, replayed from {inside}, is not known"
        in capsys.readouterr().out
    )
    assert sorted(int(s.name[:20]) for s in part.glob("*.snapshot")) == [inside]


def test_a_state_that_would_be_replayed_from_a_log_start_inside_a_segment_leaves_the_partition_to_the_broker(
    tmp_path, capsys
):
    """No snapshot below the first recovered base and the log start inside an earlier segment: Kafka replays from the
    batch holding the log start, which may begin below it; recover cannot say which transactions were open there, so
    it leaves the partition to the broker's start: its recovery point stays and the run says why."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    first, inside = bases(part)[2], bases(part)[1] + 3
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({("orders", 0): first}))
    (logs / "log-start-offset-checkpoint").write_text(format_offset_checkpoint({("orders", 0): inside}))
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert recovery_points(logs)[("orders", 0)] == first
    assert not list(part.glob("*.snapshot"))
    assert (
        f"recover orders-0: left to the broker: the producer state before {first} is replayed from the log start "
        f"{inside}, inside a segment: the broker's start recovers its segments from the recovery point {first}"
    ) in out


def test_only_index_files_holding_more_than_their_rebuild_are_copied_into_the_backups(tmp_path):
    """A crashed broker's preallocated index whose entries are the rebuild's, and a rebuilt one, hold nothing the
    new file lacks: not copied. A byte in the zero tail or a wrong entry is kept in the backups, as are the other
    files a recover replaces."""
    logs = crashed_log_dir(tmp_path, partitions=2)
    p0, p1 = logs / "orders-0", logs / "orders-1"
    active = bases(p0)[-1]
    with open(segment_file(str(p0), active, ".index"), "r+b") as f:  # past the entries, inside the zeros
        f.seek(5 * 1024 * 1024)
        f.write(b"\x01")
    middle = bases(p1)[1]
    timeindex = segment_file(str(p1), middle, ".timeindex")
    with open(timeindex, "r+b") as f:
        f.seek(0)
        f.write((2**40).to_bytes(8, "big"))  # the first entry's timestamp: wrong
    old_timeindex = Path(timeindex).read_bytes()
    backups = tmp_path / "backups"
    assert main(["recover", str(logs), "--backup-dir", str(backups), "--run-id", "r1", "-q"]) == 0
    saved = (backups / "r1").rglob("*")
    copied = sorted(str(f.relative_to(backups / "r1")) for f in saved if f.suffix in (".index", ".timeindex"))
    assert copied == [f"orders-0/{active:020d}.index", f"orders-1/{middle:020d}.timeindex"]
    assert (backups / "r1" / "orders-1" / f"{middle:020d}.timeindex").read_bytes() == old_timeindex
    assert os.path.getsize(backups / "r1" / "orders-0" / f"{active:020d}.index") == 10 * 1024 * 1024
    for part in (p0, p1):  # every recovered index is the rebuild's, trimmed
        assert main(["verify", str(part), "-q"]) == 0


def test_a_rebuild_in_place_copies_only_index_files_holding_more_than_their_rebuild(tmp_path):
    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    first = bases(part)[0]
    with open(segment_file(str(part), first, ".index"), "ab") as f:
        f.write(b"\x00" * 7)  # a partial entry of zeros: Kafka's length check refuses it; kept
    backups = tmp_path / "backups"
    assert main(["rebuild", str(logs), "--backup-dir", str(backups), "--run-id", "r2", "-q"]) == 0
    copied = sorted(f.name for f in (backups / "r2" / "orders-0").iterdir() if f.suffix in (".index", ".timeindex"))
    assert copied == [f"{first:020d}.index"]


def test_a_partition_whose_files_cannot_be_written_is_left_whole_and_the_recovery_points_stay(
    tmp_path, monkeypatch, capsys
):
    """A "No space left" while one partition's roll is written (injected: a real full disk cannot be timed to that
    step): one failed-write line naming the file and exit 1 (work was done: not 2); that partition keeps no staged
    file or half-made segment and its recovery point (its snapshots, written before the roll, are the ones the
    next run writes again); the other finishes (its dir is whole) and its point moves. The next recover finishes
    both."""
    import errno

    import indexlib.engine.recover as recover_module

    logs = crashed_log_dir(tmp_path, partitions=2)
    p0, p1 = logs / "orders-0", logs / "orders-1"
    points = (logs / "recovery-point-offset-checkpoint").read_bytes()
    p1_snapshots = sorted(n.name for n in p1.glob("*.snapshot"))
    real = recover_module.create_empty_segment

    def full(directory, base, unsynced=None):
        if directory == str(p1):
            path = segment_file(directory, base, ".log")
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(directory, base, unsynced)

    monkeypatch.setattr(recover_module, "create_empty_segment", full)
    backups = tmp_path / "backups"
    assert main(["recover", str(logs), "--backup-dir", str(backups), "-q"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("failed writes") and "No space left on device" in out[1] and "orders-1" in out[1]
    assert out[-1].endswith("1 other write(s) failed")
    moved = recovery_points(logs)
    assert moved[("orders", 1)] == parse_offset_checkpoint(points.decode(), "rp")[("orders", 1)]
    assert moved[("orders", 0)] > 0
    assert [n.name for n in p1.iterdir() if n.name.startswith(".") or n.name.endswith(".tmp")] == []
    assert len(bases(p1)) == 3 and len(bases(p0)) == 4  # orders-0 rolled its empty segment, orders-1 did not
    written = {n.name: n.read_bytes() for n in p1.glob("*.snapshot") if n.name not in p1_snapshots}
    assert len(written) >= 2  # at its later segments' bases and at its log end, before the roll
    assert (p0 / f"{bases(p0)[-1]:020d}.snapshot").exists()  # orders-0's snapshot at its new log end
    monkeypatch.setattr(recover_module, "create_empty_segment", real)
    assert main(["recover", str(logs), "--backup-dir", str(backups), "-q"]) == 0
    assert {name: (p1 / name).read_bytes() for name in written} == written  # the next run's are the same
    moved = recovery_points(logs)
    for part in (p0, p1):
        assert moved[("orders", int(part.name.rsplit("-", 1)[1]))] == bases(part)[-1]
        assert main(["verify", str(part), "-q"]) == 0


def test_partitions_finished_in_threads_leave_the_files_of_partitions_finished_one_by_one(tmp_path, monkeypatch):
    """Where creating a file waits (a disk), the partitions' files are written in threads: forced here both ways
    (threads from the first call on, or never), the log dirs end byte for byte the same."""
    import shutil
    import threading

    import indexlib.engine.recover as recover_module
    from indexlib.storage.publish import concurrently

    logs = crashed_log_dir(tmp_path / "a", partitions=4)
    for part in logs.iterdir():  # a byte in each active index's zero tail: each has a backup to write
        if part.is_dir():
            with open(segment_file(str(part), bases(part)[-1], ".index"), "r+b") as f:
                f.seek(5 * 1024 * 1024)
                f.write(b"\x01")
    twin = tmp_path / "b" / "logs"
    shutil.copytree(logs, twin)
    threads: dict[float, set[int]] = {}
    for target, instant in ((logs, 0.0), (twin, 60.0)):
        seen = threads.setdefault(instant, set())

        def recorded(items, one, _, i=instant, seen=seen):
            return concurrently(items, lambda item: (seen.add(threading.get_ident()), one(item)), i)

        monkeypatch.setattr(recover_module, "concurrently", recorded)
        backups = tmp_path / f"backups-{instant}"
        assert main(["recover", str(target), "--backup-dir", str(backups), "--run-id", "r", "-q"]) == 0
    assert len(threads[0.0] - {threading.get_ident()}) >= 1 and threads[60.0] == {threading.get_ident()}
    for a, b in ((logs, twin), (tmp_path / "backups-0.0", tmp_path / "backups-60.0")):
        names = sorted(str(p.relative_to(a)) for p in a.rglob("*") if "log-dirs" not in p.parts)  # named by path
        assert names == sorted(str(p.relative_to(b)) for p in b.rglob("*") if "log-dirs" not in p.parts) and names
        for name in names:
            if (a / name).is_file():
                assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert recovery_points(logs) == recovery_points(twin) != {}


def test_the_intent_before_a_partitions_files_names_each_file_the_recover_then_changes(tmp_path):
    """What a journal records before recover writes beside a partition's segments (``before_partition_files``)
    names files, never the partition dir, and with the segments' own intents covers every file of the partition
    the run then creates, replaces, cuts or moves away: the dropped segments after a cut, a snapshot past the new
    log end, the snapshots written, the rewritten ``leader-epoch-checkpoint`` and the rolled empty segment."""
    from indexlib.engine.options import RunOptions
    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    logs = crashed_log_dir(tmp_path, partitions=1)
    part = logs / "orders-0"
    _, middle, last = bases(part)
    with open(segment_file(str(part), middle, ".log"), "ab") as f:
        f.write(b"\x00" * 100 + b"\x07" * 50)
    end = leo(part, middle)
    (part / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 " + str(end + 5) + "\n")
    (part / f"{last + 7:020d}.snapshot").write_bytes(EMPTY_SNAPSHOT)
    before = {p.name: p.read_bytes() for p in part.iterdir()}

    recorder = IntentRecorder()
    options = RunOptions("recover", run_id="r1", backup_root=str(tmp_path / "backups"))
    report = run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(1), recorder)
    assert report.exit_code == 0 and bases(part)[-1] == end
    after = {p.name: p.read_bytes() for p in part.iterdir()}
    changed = {str(part / n) for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    (intent,) = recorder.partition_files.values()
    assert intent and all(os.path.dirname(f) == str(part) for f in intent)  # files in it, not the dir
    assert changed <= recorder.segment_files | set(intent), changed - recorder.segment_files - set(intent)
    assert {str(part / f"{last:020d}.log"), str(part / f"{last + 7:020d}.snapshot")} <= set(intent)  # moved away
    assert {segment_file(str(part), end, s) for s in (".log", ".index", ".timeindex")} <= set(intent)  # rolled


def test_the_intent_names_the_snapshots_a_state_rebuilt_from_the_log_start_writes_and_moves(tmp_path):
    """Issue 41: from the last segment, with no snapshot Kafka reads below it (one torn at the middle base, one torn
    inside a segment): the state is replayed from the log start; the snapshots written at the middle base and at the
    first recovered base, and the torn one moved into the backups, are all in the journal's intent."""
    from indexlib.engine.options import RunOptions
    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    part = logs / "orders-0"
    _, middle, last = bases(part)
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({("orders", 0): last}))
    for offset in (middle, middle + 3):
        (part / f"{offset:020d}.snapshot").write_bytes(EMPTY_SNAPSHOT[:7])
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    recorder = IntentRecorder()
    options = RunOptions("recover", run_id="r1", backup_root=str(tmp_path / "backups"))
    report = run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(1), recorder)
    assert report.exit_code == 0
    after = {p.name: p.read_bytes() for p in part.iterdir()}
    changed = {str(part / n) for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    (intent,) = recorder.partition_files.values()
    assert changed <= recorder.segment_files | set(intent), changed - recorder.segment_files - set(intent)
    snapshots = {str(part / f"{o:020d}.snapshot") for o in (middle, middle + 3, last)}
    assert snapshots <= changed and f"{middle + 3:020d}.snapshot" not in after
    assert (tmp_path / "backups" / "r1" / "orders-0" / f"{middle + 3:020d}.snapshot").read_bytes() == EMPTY_SNAPSHOT[:7]


def test_a_partition_whose_files_cannot_be_named_for_the_journal_does_not_stop_the_others(tmp_path, monkeypatch):
    """Naming the files of a partition for the journal's intent lists its dir; if that fails, the intent names the
    dir (as much as is known) and the partitions are finished as without a journal: the others are not held up."""
    import indexlib.engine.runner as runner_module
    from indexlib.engine.options import RunOptions
    from indexlib.engine.pool import map_locally
    from indexlib.engine.runner import run
    from indexlib.recovery.settings import IndexSettings
    from indexlib.storage.discovery import discover

    logs = crashed_log_dir(tmp_path, partitions=2)
    real = runner_module.partition_files_to_write

    def unlistable_first(plan, results):
        if plan.partition.name == "orders-0":
            raise PermissionError(13, "Permission denied", plan.partition.path)
        return real(plan, results)

    monkeypatch.setattr(runner_module, "partition_files_to_write", unlistable_first)
    recorder = IntentRecorder()
    intents = recorder.partition_files
    options = RunOptions("recover", run_id="r1", backup_root=str(tmp_path / "backups"))
    report = run(discover([str(logs)]), options, lambda topic: IndexSettings(), map_locally(1), recorder)
    assert report.exit_code == 0
    assert intents["orders-0"] == [str(logs / "orders-0")] and str(logs / "orders-1") not in intents["orders-1"]
    for p in (0, 1):
        part = logs / f"orders-{p}"
        assert recovery_points(logs)[("orders", p)] == bases(part)[-1]  # both finished: the rolled segment's base


class IntentRecorder:
    """A run's observer that records what a journal's intents would name: the files of every segment commit
    (``segment_files``) and, per partition name, the files before its partition files (``partition_files``); the
    rows after them are not needed here (no-op methods)."""

    def __init__(self):
        self.segment_files: set[str] = set()
        self.partition_files: dict[str, list[str]] = {}

    def run_started(self, options):
        pass

    def before_commit(self, outcome, decision):
        from indexlib.engine.commit import files_to_replace

        self.segment_files |= set(files_to_replace(outcome, decision))

    def after_commit(self, result):
        pass

    def before_partition_files(self, partition, broker, files):
        self.partition_files[partition.name] = list(files)

    def after_partition_files(self, partition, broker, written, backups):
        pass


# ------------------------------------------------------------------------------------ exit codes that tell the truth
def recover_cli(logs: Path, backups: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "indexlib", "recover", str(logs), "--backup-dir", str(backups), *extra]
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


def test_a_recovery_point_file_that_cannot_be_replaced_fails_the_run_after_its_work_with_exit_1(tmp_path):
    """A dir where ``recovery-point-offset-checkpoint`` should be: the broker would recover everything, and so does
    recover, but it cannot write the file: exit 1 (not 2, "refused before any work": the index files were
    written), one failed-write line naming it, the mark stays (verify: interrupted); once the dir is gone, recover
    again finishes and removes the mark."""
    logs = crashed_log_dir(tmp_path, partitions=1, point=None)
    (logs / "recovery-point-offset-checkpoint").mkdir()
    done = recover_cli(logs, tmp_path / "b", "--json", str(tmp_path / "report.json"))
    assert done.returncode == 1, done.stdout + done.stderr
    line = f"  {logs / 'recovery-point-offset-checkpoint'}: Is a directory"
    assert any(out.startswith(line) and out.endswith("its recovery points were not moved") for out in
               done.stdout.splitlines()), done.stdout  # fmt: skip
    assert done.stdout.splitlines()[-1].endswith("1 other write(s) failed") and "Traceback" not in done.stderr
    assert f"recover orders-0: recovery point 0 kept ({logs / 'recovery-point-offset-checkpoint'}: Is a directory)" \
        in done.stdout.splitlines()  # not "0 -> N": the point did not move  # fmt: skip
    assert (logs / ".kafka-index-recovering").is_file()
    report = json.loads((tmp_path / "report.json").read_text())
    assert sorted((f["kind"], os.path.basename(f["file"])) for f in report["remaining_findings"]) == [
        ("bad_recovery_point_checkpoint", "recovery-point-offset-checkpoint"),
        ("interrupted_recovery", ".kafka-index-recovering"),  # the mark it left: still true after the run
        ("not_a_partition_dir", "recovery-point-offset-checkpoint"),  # a dir Kafka would not start on
    ]
    assert main(["verify", str(logs), "-q"]) == 1
    (logs / "recovery-point-offset-checkpoint").rmdir()
    done = recover_cli(logs, tmp_path / "b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (logs / ".kafka-index-recovering").exists()
    assert "had not finished; finished in this run, its mark removed" in done.stdout


@pytest.mark.parametrize(
    "damage",
    [b"0\n2\norders 0 0\n", b"0\n1\norders\xff 0 0\n", b"1\n1\norders 0 0\n"],
    ids=["truncated", "not UTF-8", "version 1"],
)
def test_a_bad_recovery_point_file_that_recover_rewrites_is_not_a_remaining_finding(tmp_path, damage):
    logs = crashed_log_dir(tmp_path, partitions=1)
    (logs / "recovery-point-offset-checkpoint").write_bytes(damage)
    done = recover_cli(logs, tmp_path / "b")
    assert done.returncode == 0 and "bad_recovery_point_checkpoint" in done.stdout, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith("; healthy")
    assert recovery_points(logs)[("orders", 0)] > 0


@pytest.mark.parametrize("command", ["python -m indexlib", "kafka-index"])
def test_a_log_start_checkpoint_that_is_not_utf8_is_one_finding_naming_the_file_on_both_command_lines(
    tmp_path, command
):
    """Kafka cannot parse it (it assumes no log start); recover does not rewrite it: the finding remains, exit 1,
    and it names the file, with no traceback (both command lines)."""
    logs = crashed_log_dir(tmp_path, partitions=1)
    checkpoint = logs / "log-start-offset-checkpoint"
    checkpoint.write_bytes(b"0\n1\norders\xff 0 0\n")
    if command == "kafka-index":
        cmd = [sys.executable, "-m", "jobs.cli", "recover", "--log-dir", str(logs), "--engine", "local",
               "--audit-table", "none", "--backup-dir", str(tmp_path / "b")]  # fmt: skip
        done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})  # fmt: skip
    else:
        done = recover_cli(logs, tmp_path / "b")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"{checkpoint}: not UTF-8 text (byte 10: b'\\xff')" in done.stdout
    assert recovery_points(logs)[("orders", 0)] > 0  # the rest of the work was done


def test_a_damaged_snapshot_recover_rewrites_is_not_a_remaining_finding(tmp_path):
    logs = crashed_log_dir(tmp_path, partitions=1)
    assert main(["recover", str(logs), "--backup-dir", str(tmp_path / "b1"), "-q"]) == 0
    part = logs / "orders-0"
    snapshot = segment_file(str(part), bases(part)[1], ".snapshot")
    data = bytearray(Path(snapshot).read_bytes())
    data[3] ^= 0x01  # its CRC
    Path(snapshot).write_bytes(bytes(data))
    (logs / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint({("orders", 0): 0}))
    done = recover_cli(logs, tmp_path / "b2")
    assert done.returncode == 0 and "bad_producer_snapshot" in done.stdout, done.stdout + done.stderr
    assert Path(snapshot).read_bytes() != bytes(data)
    assert main(["verify", str(logs), "-q"]) == 0


@requires_kafka_real
@pytest.mark.parametrize("epochs", ["missing", "0 bytes"])
def test_a_missing_or_empty_leader_epoch_file_is_read_as_kafka_reads_it_before_and_after_recover(tmp_path, epochs):
    """Kafka reads a missing and a 0-byte ``leader-epoch-checkpoint`` alike (an empty cache); its unclean start then
    assigns the epochs of the batches it recovers, so the file starts at the first recovered batch, not at the
    epoch's first batch in the log. verify says the same of both files (nothing), and of what recover writes then
    (what Kafka writes): healthy."""
    logs = tmp_path / "logs"
    copy_fixture(KAFKA_REAL / "local-apache-kafka-4.1.0", logs)
    (logs / ".kafka_cleanshutdown").unlink(missing_ok=True)
    part = logs / "plain-0"
    if epochs == "missing":
        (part / "leader-epoch-checkpoint").unlink()
    else:
        (part / "leader-epoch-checkpoint").write_bytes(b"")
    assert main(["verify", str(part), "-q"]) == 0
    first = segments_to_recover(bases(part), recovery_points(logs)[("plain", 0)])[0]
    assert main(["recover", str(logs), "--topics", "plain", "--backup-dir", str(tmp_path / "b"), "-q"]) == 0
    assert (part / "leader-epoch-checkpoint").read_text() == f"0\n1\n0 {first}\n" and first > 0
    assert main(["verify", str(part), "-q"]) == 0


def test_a_lock_file_created_on_a_full_disk_is_held_and_goes_at_the_end(small_fs):
    """No room for the line saying who made it: the ``.lock`` is still created and held (a broker that starts
    meanwhile cannot lock it), left empty, and removed at the end all the same."""
    from indexlib.storage.locks import broker_locks

    from ..conftest import fill

    logs = small_fs / "logs"
    logs.mkdir()
    fill(small_fs / "filler")
    with broker_locks([str(logs)], False, "stop the broker"):
        assert (logs / ".lock").stat().st_size == 0  # (not opened here: closing it would drop this process's lock)
        assert try_lock_elsewhere(logs / ".lock").returncode == 1
    assert not (logs / ".lock").exists()
