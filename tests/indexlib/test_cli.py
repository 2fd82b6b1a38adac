"""The python -m indexlib command line: every exit-code path, in process through main(argv) and as a subprocess."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest

from indexlib.cli.dump import dump_file
from indexlib.cli.main import main
from indexlib.cli.report import json_text
from indexlib.engine import rebuild_partition, verify_partition
from indexlib.testing.batch_encoder import encode_batch_v2
from indexlib.testing.generate import generate_partition

from ..conftest import (
    KAFKA_REAL,
    PROJECT_ROOT,
    damaged_fixture_files,
    dump_into_head,
    requires_kafka_real,
    run_as_unprivileged,
)

SUFFIXES = (".index", ".timeindex", ".txnindex")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err: str, *names: object) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("python -m indexlib: error: "), err
    assert "Traceback" not in err
    for name in names:
        assert str(name) in lines[0], (name, err)


def snapshot(directory: pathlib.Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.iterdir())}


def index_files(directory: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in SUFFIXES}


@pytest.fixture
def partition(tmp_path) -> pathlib.Path:
    part = tmp_path / "logs" / "orders-0"
    generate_partition(part, segments=3, batches_per_segment=60, transactional_producers=2, seed=5)
    return part


@pytest.fixture
def held_lock(partition):
    """The log dir's .lock held by another process, as a running broker holds it."""
    lock = partition.parent / ".lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
            str(lock),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield lock
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


# --------------------------------------------------------------------------------------------- rebuild
def test_rebuild_in_place(capsys, partition, tmp_path):
    expected = rebuild_partition(partition, index_interval_bytes=1000, output_dir=tmp_path / "expected")
    code, out, err = run(capsys, "rebuild", partition, "--index-interval-bytes", 1000)
    assert code == 0 and err == ""
    produced = index_files(partition)
    assert produced == index_files(tmp_path / "expected" / "orders-0")
    assert len(produced) == 9  # the generated partition has aborted transactions in every segment
    lines = out.splitlines()
    assert lines[0].startswith("rebuild orders-0 (") and "in place" in lines[0]
    assert "index.interval.bytes=1000" in lines[0] and "3 segments" in lines[0]
    for seg in expected.segments:
        line = next(x for x in lines if x.startswith(f"  {seg.task.base_offset:020d}:"))
        assert f"{seg.batches} batches, {seg.valid_bytes} valid bytes" in line
        assert f".index {seg.plan.index_entries} entries" in line
        assert f".timeindex {seg.plan.timeindex_entries} entries" in line
        assert f".txnindex {len(seg.aborted)} entr" in line
    assert re.search(r"^orders-0\s+3\s+\S+\s+0\s+9\s+rebuilt$", out, re.M)  # the summary table
    assert re.fullmatch(r"rebuild rebuild-\S+: 3 segments, .* MiB in .* s; done", lines[-1])


def test_rebuild_output_dir_only_reads_the_input(capsys, partition, tmp_path):
    run(capsys, "rebuild", partition, "--index-interval-bytes", 500)  # give the input index files
    before = snapshot(partition)
    out_dir = tmp_path / "out"
    code, out, _ = run(capsys, "rebuild", partition, "--output-dir", out_dir)
    assert code == 0
    assert snapshot(partition) == before
    target = out_dir / "orders-0"
    assert f"into {target}" in out.splitlines()[0]
    assert sorted(index_files(target)) == sorted(index_files(partition))
    assert index_files(target) != index_files(partition)  # other interval: other files, input untouched
    assert not list(target.glob("*.log"))


def test_rebuild_backup_dir_keeps_the_previous_files(capsys, partition, tmp_path):
    run(capsys, "rebuild", partition, "--index-interval-bytes", 500)
    old = index_files(partition)
    backup = tmp_path / "backup"
    code, out, _ = run(capsys, "rebuild", partition, "--backup-dir", backup, "--json", tmp_path / "r.json")
    assert code == 0
    run_id = json.loads((tmp_path / "r.json").read_text())["run_id"]
    # <backup dir>/<run id>/<partition>, as kafka-index; the .txnindex files do not depend on the interval: they
    # already were their rebuild, kept as they are, so nothing of them needed a copy
    replaced = {name: data for name, data in old.items() if not name.endswith(".txnindex")}
    assert index_files(backup / run_id / "orders-0") == replaced
    assert {n: d for n, d in index_files(partition).items() if n.endswith(".txnindex")} == {
        n: d for n, d in old.items() if n.endswith(".txnindex")
    }


def test_a_rebuild_reusing_a_run_id_that_kept_backups_is_refused(capsys, partition, tmp_path):
    """An existing backup is never overwritten, so a second in-place rebuild under one run id would replace
    the files damaged since with no copy kept: refused up front (exit 2, one line naming the backup dir and
    --run-id), nothing written, the first run's backups as they were. A new id runs."""
    backups = tmp_path / "backups"
    args = ("rebuild", partition, "--backup-dir", backups, "--run-id", "nightly-1")
    run(capsys, "rebuild", partition, "--index-interval-bytes", 500)  # files a rebuild will replace
    assert run(capsys, *args)[0] == 0
    kept = {p.relative_to(backups): p.read_bytes() for p in backups.rglob("*") if p.is_file()}
    assert len(kept) == 6  # the first run kept every file it replaced (the .txnindex files were already right)
    (partition / "00000000000000000000.index").write_bytes(b"\x01" * 16)  # new damage
    before = {p.name: p.read_bytes() for p in partition.iterdir()}
    code, _, err = run(capsys, *args)
    assert code == 2
    assert_one_error_line(err, backups / "nightly-1", "'nightly-1'", "--run-id")
    assert {p.name: p.read_bytes() for p in partition.iterdir()} == before
    assert {p.relative_to(backups): p.read_bytes() for p in backups.rglob("*") if p.is_file()} == kept
    assert run(capsys, "rebuild", partition, "--backup-dir", backups, "--run-id", "nightly-2")[0] == 0
    assert (backups / "nightly-2" / "orders-0" / "00000000000000000000.index").read_bytes() == b"\x01" * 16


def test_a_run_id_whose_backup_dir_holds_no_file_is_not_refused(capsys, partition, tmp_path):
    """Empty directories (a staging that failed leaves them) are no evidence; a malformed id is refused."""
    (tmp_path / "backups" / "r1" / "orders-0").mkdir(parents=True)
    assert run(capsys, "rebuild", partition, "--backup-dir", tmp_path / "backups", "--run-id", "r1")[0] == 0
    code, _, err = run(capsys, "rebuild", partition, "--run-id", "../up")
    assert code == 2
    assert_one_error_line(err, "run id '../up'")


def test_rebuild_reports_a_corrupt_tail_and_leaves_the_log(capsys, partition):
    log = partition / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    scan_sizes = [b["size"] for b in dump_file(log)["batches"]]
    bad_at = sum(scan_sizes[:40])
    data[bad_at + 70] ^= 0xFF
    log.write_bytes(bytes(data))
    before = log.stat().st_mtime_ns, log.read_bytes()
    code, out, _ = run(capsys, "rebuild", partition)
    assert code == 0
    assert (log.stat().st_mtime_ns, log.read_bytes()) == before
    lines = out.splitlines()
    assert any(x.startswith("  00000000000000000000: 40 batches,") for x in lines)
    tail = next(x for x in lines if "corrupt tail" in x)
    assert f"log_crc_mismatch at byte {bad_at} (batch 40)" in tail
    assert f"truncate the last {len(data) - bad_at} bytes" in tail and "the .log is left unchanged" in tail


def test_rebuild_impossible_segment_exits_1(capsys, tmp_path):
    part = tmp_path / "t-3"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        b"".join(encode_batch_v2(i * 2, [(None, b"x" * 80, 1000 + i)] * 2) for i in range(5))
    )
    # a batch whose last offset lies 2^31 past the segment's base: Kafka's recovery throws
    (part / "00000000000000000010.log").write_bytes(
        encode_batch_v2(10, [(None, b"y", 5)]) + encode_batch_v2(10 + 2**31, [(None, b"z", 6)])
    )
    code, out, err = run(capsys, "rebuild", part)
    assert code == 1 and err == ""
    fatal = next(x for x in out.splitlines() if "FATAL" in x)
    assert "offset_overflow at byte" in fatal and "(batch 1)" in fatal and "no index is rebuilt" in fatal
    assert out.splitlines()[-1].endswith("1 segment(s) could not be rebuilt (Kafka's recovery would fail on them)")
    assert (part / "00000000000000000000.index").exists()
    assert not (part / "00000000000000000010.index").exists()


def test_locked_log_dir_refuses_in_place_and_force_overrides(capsys, partition, held_lock):
    before = snapshot(partition)
    code, out, err = run(capsys, "rebuild", partition)
    assert code == 2 and out == ""
    assert_one_error_line(err, held_lock, "--force")
    assert snapshot(partition) == before  # nothing written
    # --output-dir naming the log dir itself (or a dir inside it) is refused whatever the lock
    for inside in (partition.parent, partition, partition.parent / "out"):
        code, _, err = run(capsys, "rebuild", partition, "--output-dir", inside)
        assert code == 2, err
        assert_one_error_line(err, f"--output-dir {inside}", "log dir")
        assert snapshot(partition) == before and not (partition.parent / "out").exists()
    # another output dir only reads the partition: allowed
    code, _, _ = run(capsys, "rebuild", partition, "--output-dir", partition.parent.parent / "elsewhere")
    assert code == 0 and snapshot(partition) == before
    code, out, err = run(capsys, "rebuild", partition, "--force")
    assert code == 0
    assert err.startswith("python -m indexlib: warning: ") and str(held_lock) in err
    assert len(index_files(partition)) == 9


def test_unlocked_lock_file_does_not_block(capsys, partition):
    (partition.parent / ".lock").write_bytes(b"")
    assert run(capsys, "rebuild", partition)[0] == 0


# ------------------------------------------------------------------------------------- bad input -> 2
@pytest.mark.parametrize("command", ["rebuild", "verify"])
def test_bad_partition_dirs(capsys, tmp_path, partition, command):
    missing = tmp_path / "nope-0"
    code, out, err = run(capsys, command, missing)
    assert code == 2 and out == ""
    assert_one_error_line(err, missing, "no such directory")

    a_file = partition / "00000000000000000000.log"
    code, _, err = run(capsys, command, a_file)
    assert code == 2
    assert_one_error_line(err, a_file, "not a directory")

    neither = tmp_path / "not-a-log-dir"
    neither.mkdir()
    code, _, err = run(capsys, command, neither)
    assert code == 2
    assert_one_error_line(err, neither, "neither a partition dir (<topic>-<partition>) nor a log dir")

    empty = tmp_path / "empty-7"
    empty.mkdir()
    code, _, err = run(capsys, command, empty)
    assert code == 2
    assert_one_error_line(err, empty, "no segment")


@pytest.mark.parametrize("command", ["rebuild", "verify"])
@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--index-interval-bytes", "-1", "--index-interval-bytes: index.interval.bytes must be between 0"),
        ("--segment-index-bytes", "11", "--segment-index-bytes: segment.index.bytes must be between 12"),
        ("--segment-index-bytes", str(2**31), "--segment-index-bytes: segment.index.bytes must be between 12"),
        ("--segment-index-bytes", str(2**63), "segment.index.bytes must be between 12 and 2147483647"),
        ("--jobs", "0", "--jobs must be at least 1"),
    ],
)
def test_bad_settings(capsys, partition, command, option, value, message):
    before = snapshot(partition)
    code, out, err = run(capsys, command, partition, option, value)
    assert code == 2 and out == ""
    assert_one_error_line(err, message)
    assert snapshot(partition) == before


def test_usage_errors_exit_2(capsys, partition):
    for argv in (
        [],
        ["frobnicate"],
        ["dump"],
        ["rebuild", str(partition), "--index-interval-bytes", "x"],
        ["verify", str(partition), "--json"],
        ["dump", "a", "--payload-format", "utf-16"],
    ):
        code, out, err = run(capsys, *argv)
        assert code == 2, argv
        assert "usage: python -m indexlib" in err and "Traceback" not in err
    code, out, err = run(capsys, "rebuild")  # no PATH and no --server-properties to take log.dirs from
    assert (
        code == 2
        and out == ""
        and err.strip().splitlines()
        == [
            "python -m indexlib: error: no PATH: give a partition dir or a log dir, or --server-properties FILE with log.dirs"
        ]
    )
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "rebuild" in out and "verify" in out and "dump" in out


def run_cli_as_unprivileged(argv: list[str]) -> dict:
    """main(argv) as uid/gid 65534 (when root): its code, stdout and stderr."""

    def captured() -> dict:
        import io

        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        try:
            code = main(argv)
        except BaseException as exc:  # noqa: BLE001
            return {"code": None, "out": "", "err": f"raised {type(exc).__name__}: {exc}"}
        return {"code": code, "out": sys.stdout.getvalue(), "err": sys.stderr.getvalue()}

    return run_as_unprivileged(captured)


@pytest.fixture
def shared_partition():
    """A generated partition in a directory another user can enter (pytest's tmp_path is private)."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="kafka-index-cli-"))
    os.chmod(root, 0o755)
    part = root / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=30, seed=2)
    os.chmod(part, 0o755)
    for p in part.iterdir():
        os.chmod(p, 0o644)
    yield part
    shutil.rmtree(root)


def test_unreadable_inputs_as_another_user(shared_partition):
    log = shared_partition / "00000000000000000000.log"
    assert run_cli_as_unprivileged(["dump", str(log)])["code"] == 0  # readable, not writable: fine
    os.chmod(log, 0o000)
    result = run_cli_as_unprivileged(["dump", str(log)])
    assert result["code"] == 2 and result["out"] == ""
    assert_one_error_line(result["err"], log, "Permission denied")
    os.chmod(log, 0o644)

    os.chmod(shared_partition, 0o311)  # can enter, cannot list
    result = run_cli_as_unprivileged(["verify", str(shared_partition)])
    assert result["code"] == 2
    assert_one_error_line(result["err"], shared_partition, "Permission denied")
    os.chmod(shared_partition, 0o755)

    # in place, the directory is not writable by that user: a clear error, nothing written
    result = run_cli_as_unprivileged(["rebuild", str(shared_partition)])
    assert result["code"] == 2, result
    assert_one_error_line(result["err"], shared_partition, "Permission denied", "--output-dir")
    assert not list(shared_partition.glob("*.index"))
    # rebuilding elsewhere (outside the log dir) needs only read access
    out_dir = pathlib.Path(tempfile.mkdtemp(prefix="kafka-index-cli-out-"))
    try:
        os.chmod(out_dir, 0o777)
        result = run_cli_as_unprivileged(
            ["rebuild", str(shared_partition), "--output-dir", str(out_dir), "--jobs", "1"]
        )
        assert result["code"] == 0, result
        assert len(list((out_dir / "orders-0").glob("*.index"))) == 2
    finally:
        shutil.rmtree(out_dir)


def test_a_partition_verify_cannot_list_is_a_finding_not_healthy(shared_partition):
    """A log dir holding a partition dir another user cannot list: the verdict is not "healthy" (exit 1),
    and the text report and --json name the partition."""
    log_dir = shared_partition.parent
    main(["rebuild", str(shared_partition)])  # healthy indexes, written as root
    hidden = log_dir / "orders-1"
    generate_partition(hidden, segments=1, batches_per_segment=5, seed=3)
    os.chmod(hidden, 0o700)  # root's; uid 65534 cannot list it
    report = log_dir / "report.json"
    os.chmod(log_dir, 0o777)
    result = run_cli_as_unprivileged(["verify", str(log_dir), "--json", str(report)])
    assert result["code"] == 1, result
    assert "unreadable_partition" in result["out"] and "orders-1" in result["out"], result["out"]
    assert "healthy" not in result["out"].splitlines()[-1], result["out"]
    data = json.loads(report.read_text())
    kinds = {f["kind"]: f["file"] for f in data["remaining_findings"]}
    assert kinds == {"unreadable_partition": str(hidden)}, kinds
    assert not data["skipped"]
    # root reads it and finds what is wrong inside (no indexes were ever written for orders-1)
    main(["verify", str(log_dir), "--json", str(report)])
    data = json.loads(report.read_text())
    assert {f["kind"] for f in data["remaining_findings"]} == {"index_missing", "timeindex_missing"}


# ---------------------------------------------------------------------------------------------- verify
def test_verify_healthy(capsys, partition):
    run(capsys, "rebuild", partition)
    (partition.parent / "meta.properties").write_text("version=1\nnode.id=7\ncluster.id=C1\ndirectory.id=D1\n")
    code, out, err = run(capsys, "verify", partition)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("verify orders-0 (") and "3 segments" in lines[0]
    assert not any(x.startswith("kind ") for x in lines)  # no findings table
    assert f"log dir {partition.parent}: broker 7 of cluster C1 (directory id D1)" in lines
    segment_lines = [x for x in lines if x.startswith("  000")]
    assert len(segment_lines) == 3
    assert all(".index identical, .timeindex identical, .txnindex identical" in x for x in segment_lines)
    assert "(active)" in segment_lines[-1] and "(inactive)" in segment_lines[0]
    assert re.fullmatch(r"verify verify-\S+: 3 segments, .* MiB in .* s; healthy", lines[-1])


def test_verify_damaged_index_exits_1_with_a_finding_row(capsys, partition, tmp_path):
    run(capsys, "rebuild", partition)
    index = partition / "00000000000000000000.index"
    os.truncate(index, index.stat().st_size - 3)  # not a multiple of 8
    before = snapshot(partition)
    report_path = tmp_path / "report.json"
    code, out, err = run(capsys, "verify", partition, "--json", report_path)
    assert code == 1 and err == ""
    assert snapshot(partition) == before  # verify only reads
    lines = out.splitlines()
    header = next(i for i, x in enumerate(lines) if x.startswith("kind "))
    assert lines[header].split() == ["kind", "file", "entry", "expected", "found", "detail"]
    rows = lines[header + 2 : lines.index("", header)]
    assert any(x.startswith("bad_length ") and "00000000000000000000.index" in x for x in rows)
    assert any(".index differs" in x for x in lines if x.startswith("  00000000000000000000"))
    assert lines[-1].endswith("; 1 finding(s) remain")
    report = json.loads(report_path.read_text())
    assert report["exit_code"] == 1 and report["mode"] == "verify"
    seg = report["segments"][0]
    assert (seg["index_interval_bytes"], seg["segment_index_bytes"]) == (4096, 10485760)
    library = {(f.kind, f.file, f.entry) for f in verify_partition(partition).findings if f.severity == "error"}
    assert {(f["kind"], f["file"], f["entry"]) for f in report["remaining_findings"]} == library
    assert [(f["kind"], f["severity"]) for f in seg["findings"]] == [("bad_length", "error")]


def test_verify_json_to_stdout_is_pure_json(capsys, partition):
    code, out, err = run(capsys, "verify", partition, "--json", "-")  # no index files yet: findings
    assert code == 1
    report = json.loads(out)
    assert {(s["topic"], s["partition"]) for s in report["segments"]} == {("orders", 0)}
    assert len(report["segments"]) == 3 and report["exit_code"] == 1
    assert "finding(s) remain" in err.splitlines()[-1]  # the text report went to stderr


def test_json_report_has_one_line_per_segment_and_finding(capsys, partition):
    """The report's keys indented, each segment (and each partition's findings) on one line of its own: what a
    reader greps; the JSON the same as the standard library reads it."""
    code, out, _ = run(capsys, "verify", partition, "--json", "-")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and lines[1].startswith('  "run_id": ')
    segments = [x for x in lines if x.startswith("    {") and '"base_offset": ' in x]
    assert len(segments) == 3 and all(json.loads(x.rstrip(",")) for x in segments)
    report = json.loads(out)
    for line, segment in zip(segments, report["segments"], strict=True):
        assert json.loads(line.rstrip(",")) == segment
    assert (
        json_text({"a": {"b": {"c": [1, {}]}}, "d": [], "e": None})
        == '{\n  "a": {\n    "b": {"c": [1, {}]}\n  },\n  "d": [],\n  "e": null\n}'
    )


def test_verify_json_to_an_unwritable_place(capsys, partition, tmp_path):
    target = tmp_path / "no-such-dir" / "r.json"
    code, _, err = run(capsys, "verify", partition, "--json", target)
    assert code == 2
    assert_one_error_line(err, target)


# ------------------------------------------------------------------------------------------------ dump
def test_dump_text_and_json(capsys, partition):
    run(capsys, "rebuild", partition, "--index-interval-bytes", 800)
    index = partition / "00000000000000000000.index"
    code, out, err = run(capsys, "dump", index)
    assert code == 0 and err == ""
    entries = dump_file(index)["entries"]
    assert out.splitlines()[2:] == [f"offset: {e['offset']} position: {e['position']}" for e in entries]
    code, out, _ = run(capsys, "dump", index, "--json")
    assert code == 0 and json.loads(out) == dump_file(index)
    log = partition / "00000000000000000000.log"
    code, out, _ = run(capsys, "dump", log, "--json")
    assert code == 0 and json.loads(out)["batch_count"] == 60
    code, out, _ = run(capsys, "dump", partition / "00000000000000000000.timeindex")
    assert code == 0 and out.splitlines()[2].startswith("timestamp: ")


def test_dump_with_problems_exits_1(capsys, partition):
    log = partition / "00000000000000000000.log"
    with open(log, "ab") as f:
        f.write(b"\x00" * 40)  # a zero tail, as a preallocated log after a crash
    code, out, err = run(capsys, "dump", log)
    assert code == 1 and err == ""
    assert "Problem: size_below_minimum" in out
    index = partition / "00000000000000000000.index"
    index.write_bytes(struct.pack(">ii", 5, 100) + b"\x01")
    code, out, _ = run(capsys, "dump", index, "--json")
    assert code == 1 and json.loads(out)["partial_entry_bytes"] == 1


def test_dump_bad_input_exits_2(capsys, tmp_path, partition):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(os.urandom(100))
    fifo = tmp_path / "00000000000000000000.index"
    os.mkfifo(fifo)
    directory = tmp_path / "00000000000000000000.log"
    directory.mkdir()
    snapshot_file = tmp_path / "00000000000000000000.snapshot"
    snapshot_file.write_bytes(b"x")
    cases = [
        (garbage, "not a Kafka segment file name"),
        (snapshot_file, "too short for a producer snapshot"),  # a snapshot Kafka refuses
        (tmp_path / "00000000000000000000.timeindex", "No such file"),
        (fifo, "not a regular file"),
        (directory, "is a directory"),
    ]
    for path, message in cases:
        code, out, err = run(capsys, "dump", path)
        assert code == 2 and out == "", path
        assert_one_error_line(err, path, message)


# ------------------------------------------------------------------------------------------ subprocess
def python_m(*argv: object, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "indexlib", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=120,
        **kwargs,
    )


def test_entry_point_as_a_subprocess(partition, tmp_path):
    done = python_m("rebuild", partition, "--output-dir", tmp_path / "out")
    assert done.returncode == 0 and done.stderr == "" and done.stdout.startswith("rebuild orders-0")
    index = tmp_path / "out" / "orders-0" / "00000000000000000000.index"
    done = python_m("dump", index, "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == dump_file(index)
    done = python_m("verify", partition)
    assert done.returncode == 1 and "finding(s) remain" in done.stdout  # no index files in place
    done = python_m("dump", tmp_path / "nope.index")
    assert done.returncode == 2 and done.stdout == ""
    assert_one_error_line(done.stderr, tmp_path / "nope.index")
    done = python_m("rebuild", partition, "--index-interval-bytes", "-5")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = python_m()
    assert done.returncode == 2 and "usage: python -m indexlib" in done.stderr


@pytest.mark.parametrize("suffix, as_json", [(".log", False), (".log", True), (".index", True), (".timeindex", True)])
def test_closed_pipe_ends_quietly(big_partition, suffix, as_json):
    """``dump FILE | head -1``: no message and exit 141, as a Unix tool killed by SIGPIPE (was
    ``[Errno 32] Broken pipe``, exit 2, for some files)."""
    argv = [sys.executable, "-m", "indexlib", "dump", str(big_partition / f"00000000000000000000{suffix}")]
    code, err, first = dump_into_head(argv + (["--json"] if as_json else []))
    assert first and (first.startswith(b"Dumping ") or as_json)
    assert err == "" and code == 141


@pytest.mark.parametrize(
    "target, message",
    [
        (["--offset", "-1"], "--offset -1: an offset is 0 to 9223372036854775807"),
        (["--offset", str(2**63)], f"--offset {2**63}: an offset is 0 to 9223372036854775807"),
        (["--timestamp", str(2**63)], f"--timestamp {2**63}: a timestamp is a Java long"),
        (["--timestamp", str(-(2**63) - 1)], f"--timestamp {-(2**63) - 1}: a timestamp is a Java long"),
    ],
)
def test_lookup_refuses_a_target_no_segment_can_hold(capsys, partition, target, message):
    """A usage error (exit 2, one line naming the option), not a lookup: an offset is a non-negative long,
    a timestamp a long (``--offset -1`` found the first batch, exit 0; ``--offset 2**63`` exit 1)."""
    segment = partition / "00000000000000000000.log"
    rebuild_partition(partition)
    code, out, err = run(capsys, "lookup", "--segment", segment, *target)
    assert code == 2 and out == ""
    assert_one_error_line(err, message)
    assert run(capsys, "lookup", "--segment", segment, "--offset", str(2**63 - 1))[0] == 1  # a long: not here


# ----------------------------------------------------------------------------------------- real Kafka
@requires_kafka_real
def test_real_partition_rebuild_to_output_and_verify(capsys, tmp_path):
    part = KAFKA_REAL / "local-apache-kafka-4.1.0" / "txn-0"
    before = snapshot(part)
    code, out, _ = run(capsys, "rebuild", part, "--output-dir", tmp_path)
    assert code == 0
    assert snapshot(part) == before
    assert index_files(tmp_path / "txn-0") == index_files(part)  # Kafka 4.1.0's own files, byte for byte
    assert ".txnindex 26 entries" in out
    code, out, _ = run(capsys, "verify", part)
    # healthy, but for a fixture file the broker did not write (conftest.written_by_kafka; an older ../shared
    # held an xxd dump as txn-0's 811.snapshot), never an index file
    damaged = damaged_fixture_files(part)
    assert damaged <= {str(part / "00000000000000000811.snapshot")}
    if damaged:
        assert code == 1 and out.splitlines()[-1].endswith("; 1 finding(s) remain")
        assert "bad_producer_snapshot" in out and "00000000000000000811.snapshot" in out
    else:
        assert code == 0 and out.splitlines()[-1].endswith("; healthy"), out
    code, out, _ = run(capsys, "dump", part / "00000000000000000011.txnindex")
    assert code == 0 and len(out.splitlines()) == 2 + 26


# ------------------------------------------------------------------------------- log dirs and --jobs
def test_a_whole_log_dir_with_a_process_pool_equals_per_partition_rebuilds(capsys, tmp_path):
    logs = tmp_path / "logs"
    for i, name in enumerate(("orders-0", "orders-1", "payments-0")):
        generate_partition(logs / name, segments=2, batches_per_segment=40, transactional_producers=2, seed=30 + i)
    (logs / "orders-2.abcdef-delete").mkdir()  # Kafka is deleting it: skipped
    code, out, err = run(capsys, "rebuild", logs, "--output-dir", tmp_path / "pool", "--jobs", "2")
    assert code == 0 and "skipped" not in err
    for name in ("orders-0", "orders-1", "payments-0"):
        rebuild_partition(logs / name, output_dir=tmp_path / "one-by-one")
        assert index_files(tmp_path / "pool" / name) == index_files(tmp_path / "one-by-one" / name)
        assert f"rebuild {name} ({logs / name}) into {tmp_path / 'pool' / name}" in out
    assert not (tmp_path / "pool" / "orders-2.abcdef-delete").exists()
    # several paths at once, partition dirs and log dirs mixed, serial: the same answer
    code, out, _ = run(capsys, "verify", logs / "orders-0", logs / "payments-0", "--jobs", "1", "--json", "-")
    assert code == 1  # no index files in place yet
    report = json.loads(out)
    assert sorted({(s["topic"], s["partition"]) for s in report["segments"]}) == [("orders", 0), ("payments", 0)]


def test_importing_indexlib_starts_no_blas_threads():
    """numpy's OpenBLAS would start a spinning thread per extra core; indexlib uses no BLAS and asks for none
    (unless the environment already says), so a process importing it has its one thread only."""
    probe = "import os, indexlib, numpy; print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
    env["OPENBLAS_NUM_THREADS"] = "2"  # the user's own setting wins
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[1] == "2"


# Makes `import indexlib.format._kernel` fail as a module whose load fails does (a missing build, or the kernel's CRC
# self-test refusing it), then runs the command line.
WITHOUT_KERNEL = """
import runpy, sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "indexlib.format._kernel":
            raise ImportError("indexlib.format._kernel: refused by this test")
sys.meta_path.insert(0, Refuse())
sys.argv = ["indexlib", *sys.argv[1:]]
runpy.run_module("indexlib", run_name="__main__")
"""


def test_without_the_kernel_one_warning_names_why_and_the_pure_scan_gives_the_same_files(partition, tmp_path):
    compiled_out, pure_out = tmp_path / "compiled", tmp_path / "pure"
    args = ["rebuild", str(partition), "--output-dir"]
    subprocess.run([sys.executable, "-m", "indexlib", *args, str(compiled_out)], check=True, capture_output=True)
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_KERNEL, *args, str(pure_out)], capture_output=True, text=True, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr
    warnings = [line for line in ran.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1, ran.stderr
    assert "cannot be loaded (indexlib.format._kernel: refused by this test)" in warnings[0]
    assert "pure Python" in warnings[0]
    compiled, pure = index_files(compiled_out / partition.name), index_files(pure_out / partition.name)
    assert compiled and compiled == pure


def test_quiet_prints_the_verdict_and_verbose_the_phases(capsys, partition):
    """``-q``/``-v`` as ``kafka-index`` has them (one declaration, indexlib.cli.options): quiet is the findings that
    remain, one line each, and the verdict line; verbose adds the time of each phase; both at once is a usage
    error."""
    code, out, _ = run(capsys, "verify", partition.parent, "--jobs", "1", "-q")  # no index files yet: findings
    lines = [line for line in out.splitlines() if line.strip()]
    segments = len(list(partition.glob("*.log")))
    assert code == 1 and lines[-1].startswith("verify ") and f"{len(lines) - 1} finding(s) remain" in lines[-1]
    kinds = [line.split(" ")[0] for line in lines[:-1]]  # every index file of every segment is missing
    assert sorted(set(kinds)) == ["index_missing", "timeindex_missing", "txnindex_missing"]
    assert kinds.count("index_missing") == segments
    assert all(f"/{partition.name}/" in line and line.endswith("does not exist") for line in lines[:-1]
               if not line.startswith("txnindex"))  # fmt: skip
    code, out, _ = run(capsys, "verify", partition.parent, "--jobs", "1", "-v")
    assert code == 1 and "index_missing" in out and re.search(r"^phases: scan \d+\.\d\d s, replay", out, flags=re.M)
    code, _, err = run(capsys, "verify", partition.parent, "-q", "-v")
    assert code == 2 and "not allowed with argument" in err


def test_a_misspelt_index_setting_and_a_log_dir_given_twice_are_refused_by_name(capsys, tmp_path):
    """Issue 37: a topic config key one typo away from an index setting would silently give Kafka's default: one
    line naming the file, the topic, the key and what was meant, exit 2 (other Kafka topic configs are accepted); a
    ``log.dirs`` naming one dir twice (Kafka refuses to start on it) is refused naming that dir."""
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=20, seed=3)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"orders": {"index.interval.byte": 700, "retention.ms": 1000}}))
    code, _, err = run(capsys, "verify", logs, "--topic-config", topics)
    assert code == 2
    assert_one_error_line(err, topics, "'orders'", "'index.interval.byte'", "did you mean 'index.interval.bytes'?")
    topics.write_text(json.dumps({"orders": {"index.interval.bytes": 700, "retention.ms": 1000, "segment.bytes": 9}}))
    assert run(capsys, "verify", logs, "--topic-config", topics, "-q")[0] == 1  # no index files yet: findings
    server = tmp_path / "server.properties"
    server.write_text(f"log.dirs={logs},{logs}/\n")
    code, _, err = run(capsys, "verify", "--server-properties", server)
    assert code == 2
    assert_one_error_line(err, server, f"log.dirs names {logs}/ twice")


def test_settings_come_from_server_properties_and_the_topic_config_as_kafka_index_layers_them(capsys, tmp_path):
    """``--server-properties`` gives the log dirs and the broker's index settings, ``--topic-config`` a topic's own,
    the command line wins over both (the layers and the readers are kafka-index's: indexlib.cli.settings_files)."""
    logs = tmp_path / "logs"
    for topic in ("orders", "clicks"):
        generate_partition(logs / f"{topic}-0", segments=2, batches_per_segment=60, seed=3)
    server = tmp_path / "server.properties"
    server.write_text(f"log.dirs={logs}\nlog.index.interval.bytes=1000\n")
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"orders": {"index.interval.bytes": "700", "cleanup.policy": "delete"}, "gone": {}}))
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys, "rebuild", "--server-properties", server, "--topic-config", topics, "--output-dir", out_dir
    )
    assert code == 0
    assert err.strip() == (
        f"python -m indexlib: warning: {topics}: topic(s) 'gone' match no partition of this run; "
        "their settings are not used"
    )
    assert "rebuild orders-0" in out and "index.interval.bytes=700" in out and "index.interval.bytes=1000" in out
    for topic, interval in (("orders", 700), ("clicks", 1000)):
        expected = tmp_path / f"expected-{interval}"
        rebuild_partition(logs / f"{topic}-0", interval, output_dir=expected)
        assert index_files(out_dir / f"{topic}-0") == index_files(expected / f"{topic}-0"), topic
    code, _, _ = run(capsys, "rebuild", "--server-properties", server, "--topic-config", topics, "-q")  # in place
    assert code == 0
    report = tmp_path / "verify.json"
    for extra, differs in (([], set()), (["--index-interval-bytes", "700"], {"clicks"})):
        code, _, _ = run(
            capsys, "verify", "--server-properties", server, "--topic-config", topics, "--json", report, *extra
        )
        assert code == 0  # verify checks what makes lookups right; the bytes a rebuild would write are "identical"
        segments = json.loads(report.read_text())["segments"]
        assert {s["topic"] for s in segments if not s["identical"][".index"]} == differs  # the command line wins
    server.write_text("log.index.interval.bytes=ten\n")
    code, _, err = run(capsys, "verify", str(logs), "--server-properties", server)
    assert code == 2 and err.strip() == (
        f"python -m indexlib: error: {server}: log.index.interval.bytes must be an integer, got 'ten'"
    )


_PATH_PARTS = ["a", "b", "logs", "t-0", ".", "..", "", "x.index"]


def test_the_report_names_files_as_os_path_relpath_does():
    """The report's file names (each directory's relative path worked out once) are ``os.path.relpath``'s, for
    absolute and relative paths, inside and outside the working directory, with ``.``/``..`` parts."""
    from hypothesis import given
    from hypothesis import strategies as st

    from indexlib.cli.report import relative_paths

    cwd = os.getcwd()
    names = _PATH_PARTS + cwd.split(os.sep)[1:]  # paths that lead back into the working dir too
    parts = st.lists(st.sampled_from(names), min_size=1, max_size=6)
    ancestors = [os.sep.join(cwd.split(os.sep)[:n]) + os.sep for n in range(1, cwd.count(os.sep) + 2)]
    roots = st.sampled_from(["", *ancestors])

    @given(roots, st.lists(st.tuples(parts), min_size=1, max_size=8))
    def check(root, paths):
        relative = relative_paths()  # one per report: its cache sees several paths
        for (p,) in paths:
            path = root + "/".join(p)
            if path:
                assert relative(path) == os.path.relpath(path), path

    check()


def test_a_report_table_is_a_header_a_rule_and_left_aligned_columns():
    """format_table: each column as wide as its widest cell, two spaces apart, left-aligned, no trailing spaces;
    ``None`` prints empty and a cell's whitespace runs (newlines too) print as one space."""
    from indexlib.cli.report import format_table

    table = format_table(["kind", "n", "detail"], [["a_b", 7, "two  words\nhere"], [None, 12345, None], ["x", 0, ""]])
    assert table.splitlines() == [
        "kind  n      detail",
        "----  -----  --------------",
        "a_b   7      two words here",
        "      12345",
        "x     0",
    ]
