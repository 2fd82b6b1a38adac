"""``recover`` against a real Apache Kafka 4.1.0 broker (issue 24, item 3): the broker is killed (SIGKILL) while
producers write plain, compressed (every codec), idempotent and transactional data (with aborts, and one
transaction left open); the crashed log dir is copied. The broker recovers one copy itself (A, the expected
output), ``python -m indexlib recover`` (B) and ``kafka-index recover --engine local`` (C) recover others
offline, then the broker starts on each: its ``server.log`` must show no recovery of a segment that holds data,
and each partition must serve what A serves. After clean stops, A's and B's files are compared and every
difference explained (see :func:`explain_differences`). Power-loss states (the active ``.log`` cut inside its
last batch, its last 4 KiB zeroed) are recovered by the broker itself (D) and by ``recover`` then the broker (E).

Skipped, saying why, where ``../shared/kafka_2.13-4.1.0`` (or ``java``) is absent. About three minutes on two cores:
six broker starts, five of them unclean."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from indexlib.testing.kill_hook import kill_hook_env

from .kafka_broker import (
    FILL_TOPICS,
    LIVE_TOPICS,
    PROJECT_ROOT,
    TRANSACTIONAL_IDS,
    KafkaBroker,
    Recovery,
    Served,
    copy_log_dir,
    crash_while_writing,
    fill,
    kafka_home_missing,
    partition_dirs,
    python_env,
    resume_producers,
    serve,
)

pytestmark = pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")

# 1 MiB segments (4.1.0's minimum) so that partitions hold several; the recovery-point checkpoint written every
# 2 s from 1 s after the start (not 30 s/60 s), so that it sits at the active segments' bases at the crash as on
# a long-running broker; a short broker session so that an unclean start does not wait 9 s for the old one.
OVERRIDES = {
    "log.segment.bytes": str(1 << 20),
    "log.initial.task.delay.ms": "1000",
    "log.flush.offset.checkpoint.interval.ms": "2000",
    "transaction.state.log.num.partitions": "4",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}
RECORDS_PER_PARTITION = 4500  # ~600-byte values: 2-3 segments of 1 MiB per uncompressed partition
VALUE_BYTES = 600
METADATA = "__cluster_metadata-0"


@dataclass
class Crash:
    log_dir: Path
    ports: tuple[int, int]
    partitions: list[tuple[str, int]]
    lost_snapshots: list[str] = field(default_factory=list)  # relative paths: deleted, or torn (Kafka refuses it)


@dataclass
class CopyRun:
    """One copy of the crashed log dir: what was done to it, the broker's start on it, what it served."""

    log_dir: Path
    prepared: dict[str, tuple[int, str]]  # the files before the broker's start (after recover, when run)
    recovery: Recovery
    served: dict[tuple[str, int], Served]
    after_stop: dict[str, tuple[int, str]]  # the files after the broker's clean stop
    resumed: dict[tuple[str, int], Served] = field(default_factory=dict)
    command_output: str = ""


def files(log_dir: Path) -> dict[str, tuple[int, str]]:
    """Every regular file of a log dir but the metadata log and ``.lock``: relative path -> (size, sha256)."""
    out = {}
    for path in sorted(log_dir.rglob("*")):
        rel = path.relative_to(log_dir).as_posix()
        if path.is_file() and not rel.startswith(METADATA + "/") and rel != ".lock":
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            out[rel] = (path.stat().st_size, digest.hexdigest())
    return out


def run_command(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=python_env(), capture_output=True, text=True, timeout=600)
    output = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    assert proc.returncode == 0, output
    return output


def recover_with_indexlib(log_dir: Path) -> str:
    backups = log_dir.parent / "backups"
    return run_command(
        [sys.executable, "-m", "indexlib", "recover", str(log_dir), "--backup-dir", str(backups), "--jobs", "2"],
        cwd=PROJECT_ROOT,
    )


def recover_with_kafka_index(log_dir: Path) -> str:
    script = Path(sys.executable).with_name("kafka-index")
    launcher = [str(script)] if script.is_file() else [sys.executable, "-c", "import sys; from jobs.cli import main; sys.exit(main())"]  # fmt: skip
    backups = log_dir.parent / "backups"
    return run_command(
        [*launcher, "recover", "--log-dir", str(log_dir), "--engine", "local", "--audit-table", "none",
         "--backup-dir", str(backups), "--jobs", "2"],
        cwd=log_dir.parent,
    )  # fmt: skip


def start_copy(crash: Crash, root: Path, prepare=None, resume: bool = False) -> CopyRun:
    """Copy the crashed log dir under ``root``, ``prepare`` it (recover; damage), start the broker on it, read
    every partition, optionally resume the producers (:func:`resume_producers`) and read them again, stop it
    cleanly."""
    root.mkdir(parents=True)
    log_dir = copy_log_dir(crash.log_dir, root / "logs")
    output = prepare(log_dir) if prepare else ""
    prepared = files(log_dir) if prepare else {}
    broker = KafkaBroker(root / "broker", log_dir, OVERRIDES, ports=crash.ports)
    try:
        recovery = broker.start()
        served = serve(broker.bootstrap, crash.partitions)
        resumed = {}
        if resume:
            resume_producers(broker.bootstrap, crash.partitions)
            resumed = serve(broker.bootstrap, crash.partitions)
        broker.stop()
    finally:
        broker.close()
    return CopyRun(log_dir, prepared, recovery, served, files(log_dir), resumed, output or "")


# ------------------------------------------------------------------------------------------ the crash
@pytest.fixture(scope="module")
def crash(tmp_path_factory) -> Crash:
    root = tmp_path_factory.mktemp("crash")
    broker = KafkaBroker(root / "broker", root / "logs", OVERRIDES)
    try:
        broker.format()
        broker.start()
        fill(broker.bootstrap, RECORDS_PER_PARTITION, VALUE_BYTES)
        crash_while_writing(broker)
    finally:
        broker.close()
    assert not (root / "logs" / ".kafka_cleanshutdown").exists()
    partitions = [(t, p) for t in [*FILL_TOPICS, *LIVE_TOPICS] for p in range(2)]
    return Crash(root / "logs", (broker.port, broker.controller_port), partitions, lose_snapshots(root / "logs"))


def lose_snapshots(log_dir: Path) -> list[str]:
    """As a crash right after a roll can leave them (issue 41): in each partition whose recovery starts past its first
    segment, the snapshot at that start is deleted (partition 1) or torn to 10 bytes, which Kafka refuses (partition
    0). The broker's recovery then loads the newest snapshot below and replays the segments from there; recover
    must leave what it leaves. Returns the snapshots lost."""
    from indexlib.format.checkpoint import parse_offset_checkpoint
    from indexlib.recovery.log_loader import segments_to_recover

    text = (log_dir / "recovery-point-offset-checkpoint").read_text()
    points = parse_offset_checkpoint(text, "recovery-point-offset-checkpoint")
    lost = []
    for part in partition_dirs(log_dir):
        topic, number = part.name.rsplit("-", 1)
        bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
        first = segments_to_recover(bases, points.get((topic, int(number)), 0))[0]
        snapshot = part / f"{first:020d}.snapshot"
        if first == bases[0] or not snapshot.exists() or topic.startswith("__"):
            continue
        if number == "1":
            snapshot.unlink()
            # and the one below it torn, where that is not the first segment's: the broker then replays from further
            # back and takes a snapshot on the way, at that base (the log's second-to-last segment's)
            below = part / f"{bases[bases.index(first) - 1]:020d}.snapshot"
            if bases.index(first) >= 2 and below.exists():
                os.truncate(below, 10)
                lost.append(f"{part.name}/{below.name}")
        else:
            os.truncate(snapshot, 10)
        lost.append(f"{part.name}/{snapshot.name}")
    return lost


@pytest.fixture(scope="module")
def self_recovered(crash, tmp_path_factory) -> CopyRun:
    return start_copy(crash, tmp_path_factory.mktemp("a") / "self")


@pytest.fixture(scope="module")
def by_indexlib(crash, tmp_path_factory) -> CopyRun:
    return start_copy(crash, tmp_path_factory.mktemp("b") / "indexlib", recover_with_indexlib)


@pytest.fixture(scope="module")
def by_kafka_index(crash, tmp_path_factory) -> CopyRun:
    return start_copy(crash, tmp_path_factory.mktemp("c") / "kafka-index", recover_with_kafka_index, resume=True)


@pytest.fixture(params=["python -m indexlib", "kafka-index"])
def recovered(request) -> CopyRun:
    return request.getfixturevalue("by_indexlib" if request.param == "python -m indexlib" else "by_kafka_index")


# ------------------------------------------------------------------------------------------ what the broker did
def rolled_segments(prepared: dict[str, tuple[int, str]]) -> dict[str, int]:
    """Partition -> base of its newest segment, for the partitions whose newest ``.log`` is empty (the segment
    recover rolled at the log end)."""
    newest: dict[str, tuple[int, int]] = {}
    for rel, (size, _) in prepared.items():
        if rel.endswith(".log") and "/" in rel:
            part, name = rel.split("/")
            base = int(name[:20])
            if base >= newest.get(part, (-1, 0))[0]:
                newest[part] = (base, size)
    return {part: base for part, (base, size) in newest.items() if size == 0}


def assert_nothing_with_data_recovered(run: CopyRun) -> None:
    rolled = rolled_segments(run.prepared)
    # KafkaMetadataLog (the Raft layer) loads __cluster_metadata-0 itself and logs its segment at every start,
    # clean or not; recover leaves it alone.
    recovering = {tp: bases for tp, bases in run.recovery.recovering.items() if tp != METADATA}
    partitions = {p.name for p in partition_dirs(run.log_dir)}
    assert set(recovering) == partitions, "an unclean start recovers (logs) every partition's active segment"
    wrong = {tp: bases for tp, bases in recovering.items() if bases != [rolled.get(tp)]}
    assert not wrong, f"segments recovered other than the empty one rolled at the log end: {wrong}\n" + "\n".join(
        run.recovery.lines
    )
    for (topic, p), served in run.served.items():
        assert rolled[f"{topic}-{p}"] == served.hw, "the rolled segment's base is the log end the broker serves"


def test_the_broker_recovers_its_own_copy_from_its_recovery_points(self_recovered):
    rec = self_recovered.recovery
    recovering = {tp: b for tp, b in rec.recovering.items() if tp != METADATA}
    assert recovering and rec.loaded and not rec.clean_shutdown_seen
    with_data = [tp for tp, bases in recovering.items() if len(bases) > 1 or bases[0] > 0]
    print("\nA (self-recovered):", *rec.lines[-3:], f"{len(recovering)} partitions, {with_data[:5]}...", sep="\n")


def test_after_recover_the_broker_recovers_no_segment_that_holds_data(recovered):
    assert_nothing_with_data_recovered(recovered)
    assert recovered.recovery.loaded and not recovered.recovery.clean_shutdown_seen  # still an unclean start
    print("\n", *[line for line in recovered.recovery.lines if "Loaded" in line or "no clean" in line], sep="\n")


def test_the_recovered_copy_serves_what_the_self_recovered_copy_serves(recovered, self_recovered):
    for key, expected in self_recovered.served.items():
        got = recovered.served[key]
        assert got.summary() == expected.summary(), key  # count under read_committed, start, LSO, HW
        assert got.records == expected.records, key
    assert {k: s.for_times for k, s in recovered.served.items()} == {
        k: s.for_times for k, s in self_recovered.served.items()
    }


def test_the_two_command_lines_leave_the_same_files(by_indexlib, by_kafka_index):
    assert by_indexlib.prepared == by_kafka_index.prepared
    assert " -m indexlib recover " in by_indexlib.command_output.splitlines()[0]
    assert " recover --log-dir " in by_kafka_index.command_output.splitlines()[0]


# ------------------------------------------------------------------------------------------ the files
def differences(a: dict[str, tuple[int, str]], b: dict[str, tuple[int, str]]) -> dict[str, str]:
    out = {}
    for rel in sorted(set(a) | set(b)):
        if rel not in a:
            out[rel] = f"only in B ({b[rel][0]} bytes)"
        elif rel not in b:
            out[rel] = f"only in A ({a[rel][0]} bytes)"
        elif a[rel] != b[rel]:
            out[rel] = f"differs (A {a[rel][0]} bytes, B {b[rel][0]} bytes)"
    return out


def test_after_clean_stops_every_file_but_the_rolled_segment_is_the_self_recovered_copys(by_indexlib, self_recovered):
    """After both brokers stopped cleanly, A (recovered by the broker) and B (recovered offline, then started)
    hold the same bytes in every file (the metadata log aside: the Raft layer's own, not recover's), every
    ``.log``, index, ``.txnindex``, ``.snapshot``, ``leader-epoch-checkpoint``, the dir's checkpoints and
    ``.kafka_cleanshutdown`` (the same broker epoch: both copies register from the same metadata), but for one
    thing: the empty segment recover rolled at each partition's log end, three files of 0 bytes that only B has.

    Why only that, in Kafka 4.1.0's code: A's broker recovers its active segment in place and keeps it active
    (LogLoader.recoverLog does not roll), so at its clean shutdown LogSegment.close trims that segment's
    ``.index``/``.timeindex`` (AbstractIndex.trimToValidSize, after the time index's final maybeAppend) to what
    recover wrote for the same segment when it rolled it away (LocalLog.roll -> onBecomeInactiveSegment does
    the same trim). B's rolled segment: LogLoader.load L212 resizes its indexes to 10 MiB at the start, the clean
    shutdown trims them back to 0 bytes, and nothing deletes an empty segment. The ``<log end>.snapshot`` both
    have is written by each broker (A at its recovery and shutdown, B by recoverSegment of the empty segment: see
    the next test), ``leader-epoch-checkpoint`` is unchanged (one epoch from offset 0)."""
    diff = differences(self_recovered.after_stop, by_indexlib.after_stop)
    rolled = rolled_segments(by_indexlib.prepared)
    expected = {
        f"{part}/{base:020d}{suffix}": "only in B (0 bytes)"
        for part, base in rolled.items()
        if not (self_recovered.log_dir / part / f"{base:020d}.log").exists()
        for suffix in (".log", ".index", ".timeindex")
    }
    print("\nA vs B after clean stops:", *[f"{k}: {v}" for k, v in diff.items()], sep="\n")
    diff.pop(".kafka_cleanshutdown", None)
    assert diff == expected
    marker = [json.loads((run.log_dir / ".kafka_cleanshutdown").read_text()) for run in (self_recovered, by_indexlib)]
    assert [sorted(m) for m in marker] == [["brokerEpoch", "version"]] * 2 and marker[0]["version"] == marker[1][
        "version"
    ]


def test_recover_leaves_the_snapshots_the_self_recovered_broker_leaves(by_indexlib, self_recovered, crash):
    """Also where the crash lost the snapshot at a partition's first recovered segment (:func:`lose_snapshots`): the
    broker's recovery rebuilds it from an older one, and so does recover."""

    def snapshots(tree):
        return {rel: v for rel, v in tree.items() if rel.endswith(".snapshot")}

    assert snapshots(by_indexlib.prepared) == snapshots(self_recovered.after_stop)
    assert crash.lost_snapshots and set(crash.lost_snapshots) <= set(snapshots(by_indexlib.prepared))
    print("\nsnapshots lost in the crash and rebuilt:", *crash.lost_snapshots, sep="\n")


def test_recover_truncates_the_leader_epochs_as_the_broker_does(by_indexlib, crash):
    """Every batch carries epoch 0 and each checkpoint already says ``0 0``. LogLoader.load truncates the cache from
    the end at the log end (LeaderEpochFileCache.truncateFromEnd: entries whose start offset >= LEO): a partition
    that holds nothing (LEO 0, the __transaction_state partitions no transactional id hashes to) loses its ``0 0``
    entry, every other file stays as it was. (After the start both brokers add the new leader epoch,
    Partition.makeLeader -> maybeAssignEpochStartOffset: ``2 <LEO>``, or ``2 0`` alone; the same in A and B, see
    the test above.)"""
    before = {p.name: (p / "leader-epoch-checkpoint").read_text() for p in partition_dirs(crash.log_dir)}
    ends = rolled_segments(by_indexlib.prepared)  # every partition's log end, where recover rolled
    expected = {}
    for part, text in before.items():
        lines = text.splitlines()
        entries = [line for line in lines[2:] if int(line.split()[1]) < ends[part]]
        expected[part] = "".join(f"{line}\n" for line in [lines[0], str(len(entries)), *entries])
    prepared = {
        rel.split("/")[0]: v for rel, v in by_indexlib.prepared.items() if rel.endswith("/leader-epoch-checkpoint")
    }
    assert prepared == {p: (len(t), hashlib.sha256(t.encode()).hexdigest()) for p, t in expected.items()}
    assert any(e != before[p] for p, e in expected.items())  # the empty partitions' entries went


# ------------------------------------------------------------------------------------------ recover killed part way
def damage_a_middle_segment(log_dir: Path) -> str:
    """A torn write at the end of the first segment of the first partition with three or more (zeros, then
    garbage), its recovery point set to 0: the broker's unclean start and recover both validate it, cut there and
    drop every later segment."""
    for part in partition_dirs(log_dir):
        logs = sorted(part.glob("*.log"))
        if len(logs) >= 3:
            break
    else:
        raise AssertionError("no partition with three segments")
    with open(logs[0], "ab") as f:
        f.write(b"\x00" * 100 + b"\x07" * 50)
    checkpoint = log_dir / "recovery-point-offset-checkpoint"
    lines = checkpoint.read_text().splitlines()
    topic, number = part.name.rsplit("-", 1)
    lines = [f"{topic} {number} 0" if line.split()[:2] == [topic, number] else line for line in lines]
    checkpoint.write_text("".join(f"{line}\n" for line in lines))
    return part.name


def recover_under_hook(log_dir: Path, backups: Path, kill_at: str) -> subprocess.CompletedProcess:
    """``python -m indexlib recover`` under the kill hook (:mod:`indexlib.testing.kill_hook`): ``kill_at`` is
    ``<call>:<N>`` (SIGKILL before the Nth such call) or ``count:<file>``."""
    cmd = [sys.executable, "-m", "indexlib", "recover", str(log_dir), "--backup-dir", str(backups), "--jobs", "1"]
    env = python_env()
    env.update(kill_hook_env(backups.parent / f"hook-{backups.name}", kill_at, env.get("PYTHONPATH", "")))
    return subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def damaged_self_recovered(crash, tmp_path_factory) -> CopyRun:
    return start_copy(crash, tmp_path_factory.mktemp("d") / "self", damage_a_middle_segment)


@pytest.mark.parametrize("call, fraction", [("rename", 0.5), ("fsync", 0.75), ("rename", 0.95)])
def test_recover_killed_part_way_then_again_serves_what_the_brokers_own_recovery_serves(
    crash, damaged_self_recovered, tmp_path, call, fraction
):
    """A sample of the kill points the kill matrix (tests/indexlib/test_recover_kills.py) covers on generated
    states, on the real crash state with a cut in a middle segment: recover SIGKILLed at its ``fraction``-th
    ``call`` (counted in a run on another copy), then run again. The broker then recovers no segment holding data
    and serves what its own recovery of the damaged state serves."""
    counted = copy_log_dir(crash.log_dir, tmp_path / "counted")
    damage_a_middle_segment(counted)
    done = recover_under_hook(counted, tmp_path / "counted-b", f"count:{tmp_path / 'counts.json'}")
    assert done.returncode == 0, done.stdout + done.stderr
    n = max(1, int(json.loads((tmp_path / "counts.json").read_text())[call] * fraction))

    def prepare(log_dir: Path) -> str:
        damage_a_middle_segment(log_dir)
        killed = recover_under_hook(log_dir, log_dir.parent / "b1", f"{call}:{n}")
        assert killed.returncode == -9, f"not killed at {call} #{n}: {killed.stdout}{killed.stderr}"
        return run_command(
            [sys.executable, "-m", "indexlib", "recover", str(log_dir), "--backup-dir", str(log_dir.parent / "b2")],
            cwd=PROJECT_ROOT,
        )

    run = start_copy(crash, tmp_path / "run", prepare)
    assert_nothing_with_data_recovered(run)
    for key, expected in damaged_self_recovered.served.items():
        got = run.served[key]
        assert got.summary() == expected.summary(), key
        assert got.records == expected.records, key


# ------------------------------------------------------------------------------------------ producers resume
def assert_resumed(run: CopyRun, hanging: tuple[str, ...] = ()) -> None:
    """Every producer wrote without error (:func:`resume_producers`); each partition grew by exactly what they
    wrote (5 idempotent records; a committed record and its commit marker on a transactional topic; the abort
    marker of live-writer's open transaction) and has no transaction left open; ``hanging``: partitions whose
    transaction markers a power loss erased (checked against the broker's own recovery instead)."""
    for key, before in run.served.items():
        if f"{key[0]}-{key[1]}" in hanging:
            continue
        after = run.resumed[key]
        assert after.lso == after.hw, f"{key}: a transaction still open after its producer initialised again"
        committed = 1 if key[0] in TRANSACTIONAL_IDS else 0
        assert after.count == before.count + 5 + committed, key
        markers = committed + (1 if key[0] == "live-txn" else 0)
        assert after.hw == before.hw + 5 + committed + markers, key


def test_producers_resume_after_recover(by_kafka_index):
    assert_resumed(by_kafka_index)


# ------------------------------------------------------------------------------------------ power loss
def batch_starts(log: Path) -> list[int]:
    data = log.read_bytes()
    starts, pos = [], 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        if size < 61 or pos + size > len(data):
            break
        starts.append(pos)
        pos += size
    return starts


def active_log(log_dir: Path, part: str) -> Path:
    return max((log_dir / part).glob("*.log"))


def cut_inside_last_batch(log: Path) -> None:
    last = batch_starts(log)[-1]
    os.truncate(log, last + (log.stat().st_size - last) // 2)


def zero_last_4k(log: Path) -> None:
    size = log.stat().st_size
    assert size > 4096
    with open(log, "r+b") as f:
        f.seek(size - 4096)
        f.write(bytes(4096))


POWER_LOSS = {
    "live-plain-0": cut_inside_last_batch,
    "live-txn-0": cut_inside_last_batch,  # the open transaction's last batch
    "live-idem-1": zero_last_4k,
    "txn-lz4-1": zero_last_4k,  # its last transaction's markers and records
}


def lose_power(log_dir: Path) -> str:
    for part, damage in POWER_LOSS.items():
        damage(active_log(log_dir, part))
    return ""


@pytest.fixture(scope="module")
def power_loss_self(crash, tmp_path_factory) -> CopyRun:
    return start_copy(crash, tmp_path_factory.mktemp("d") / "self", lose_power, resume=True)


@pytest.fixture(scope="module")
def power_loss_recovered(crash, tmp_path_factory) -> CopyRun:
    def damage_and_recover(log_dir: Path) -> str:
        lose_power(log_dir)
        return recover_with_indexlib(log_dir)

    return start_copy(crash, tmp_path_factory.mktemp("e") / "indexlib", damage_and_recover, resume=True)


def test_power_loss_states_recover_as_the_broker_recovers_them(power_loss_self, power_loss_recovered, self_recovered):
    assert_nothing_with_data_recovered(power_loss_recovered)
    for key, expected in power_loss_self.served.items():
        got = power_loss_recovered.served[key]
        assert got.summary() == expected.summary(), key
        assert got.records == expected.records and got.for_times == expected.for_times, key
        if f"{key[0]}-{key[1]}" in POWER_LOSS:  # the damage cost records: the broker cut the tail too
            assert expected.hw < self_recovered.served[key].hw, key
    assert "tail" in power_loss_recovered.command_output


def test_producers_resume_after_a_power_loss_on_both(power_loss_self, power_loss_recovered):
    """The zeroed tail of txn-lz4-1 took its last transaction's marker (and records): that transaction now hangs
    in the partition (its coordinator completed it), the broker's own recovery and recover's alike."""
    assert_resumed(power_loss_self, hanging=("txn-lz4-1",))
    assert_resumed(power_loss_recovered, hanging=("txn-lz4-1",))
    assert {k: s.summary() for k, s in power_loss_recovered.resumed.items()} == {
        k: s.summary() for k, s in power_loss_self.resumed.items()
    }


def test_verify_of_the_crashed_log_dir_finds_only_what_kafkas_recovery_changes(crash):
    """``verify`` on the log dir a kill -9 left (read-only, in place): every error it reports is about a file Kafka's
    next start rewrites (a segment from the one containing its partition's recovery point on, or a producer
    snapshot or the leader-epoch cache that the recovery of those segments rewrites): no false finding."""
    from indexlib.format.checkpoint import parse_offset_checkpoint
    from indexlib.format.layout import parse_segment_name
    from indexlib.recovery.log_loader import segments_to_recover

    out = subprocess.run(
        [sys.executable, "-m", "indexlib", "verify", str(crash.log_dir), "--jobs", "2", "--json", "-", "-q"],
        cwd=PROJECT_ROOT, env=python_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = json.loads(out.stdout)
    text = (crash.log_dir / "recovery-point-offset-checkpoint").read_text()
    points = parse_offset_checkpoint(text, "recovery-point-offset-checkpoint")
    errors = [f for f in report["remaining_findings"] if f["severity"] == "error"]
    wrong = []
    for f in errors:
        path = Path(f["file"])
        part = path.parent
        if part.parent != crash.log_dir:
            wrong.append(f)
            continue
        topic, number = part.name.rsplit("-", 1)
        bases = sorted(p[0] for n in os.listdir(part) if (p := parse_segment_name(n)) and p[1] == ".log")
        first = segments_to_recover(bases, points.get((topic, int(number)), 0))[0]
        parsed = parse_segment_name(path.name)
        lost = f"{part.name}/{path.name}" in crash.lost_snapshots  # torn by lose_snapshots: Kafka's load deletes it
        if path.name == "leader-epoch-checkpoint" or (parsed is not None and parsed[0] >= first) or lost:
            continue
        wrong.append(f)
    assert wrong == [], wrong
    kinds = {f["kind"] for s in report["segments"] for f in s["findings"]}
    assert "preallocated_zero_tail" in kinds  # it did read the crashed state: active indexes as the kill left them
