"""Reading index files without a mapping: a private copy read with ``pread`` (a file that a running broker
trims or grows meanwhile cannot fault the reader with SIGBUS), its trailing hole skipped (the preallocated
index of an active segment stores only the pages its entries were written to)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from indexlib import OffsetIndex
from indexlib.cli.main import main
from indexlib.engine import verify_partition
from indexlib.format.index_file import data_end, read_snapshot
from indexlib.format.layout import segment_base_offsets, segment_file
from indexlib.storage.partition_files import read_existing_index
from indexlib.testing.generate import generate_partition

from ..conftest import PROJECT_ROOT

PREALLOCATED = 10 * 1024 * 1024  # Kafka's default segment.index.bytes


def preallocate(path: Path, size: int = PREALLOCATED) -> None:
    """Grow an index file the way Kafka sizes a new one (``setLength``): sparse past its bytes."""
    with open(path, "r+b") as f:
        f.truncate(size)


def densify(path: Path, size: int = PREALLOCATED) -> None:
    """Grow an index file with zeros actually written (a copy that lost its holes): the same bytes, no hole."""
    with open(path, "ab") as f:
        f.write(bytes(size - f.tell()))


def test_data_end_is_where_the_stored_bytes_end(tmp_path):
    sparse, dense, hole = tmp_path / "sparse", tmp_path / "dense", tmp_path / "hole"
    for path in (sparse, dense):
        path.write_bytes(b"\x01" * 100)
    preallocate(sparse)
    densify(dense)
    hole.touch()
    preallocate(hole)
    ends = {}
    for path in (sparse, dense, hole):
        fd = os.open(path, os.O_RDONLY)
        try:
            ends[path.name] = data_end(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
    assert 100 <= ends["sparse"] <= 65536, ends  # the stored block(s) only
    assert ends["dense"] == PREALLOCATED and ends["hole"] == 0, ends


def test_a_snapshot_holds_the_files_bytes_and_reads_only_the_stored_ones(tmp_path):
    path = tmp_path / "f"
    payload = bytes(range(256)) * 20
    path.write_bytes(payload)
    preallocate(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        snapshot = read_snapshot(fd)
    finally:
        os.close(fd)
    assert snapshot.length == PREALLOCATED and not snapshot.changed
    assert len(payload) <= len(snapshot.data) < 65536 + len(payload)
    assert bytes(snapshot.padded()) == path.read_bytes()


def test_a_read_only_index_survives_its_file_being_cut_under_it(tmp_path):
    """A broker trims the active segment's index at every roll. A mapped reader then faults (SIGBUS kills
    the process) on the first page past the new end; the copy read at open stays readable."""
    path = tmp_path / "00000000000000000000.index"
    with OffsetIndex(path, 0, PREALLOCATED) as index:
        for i in range(1, 2000):
            index.append(i * 10, i * 4096)
        index.flush()
        index.close_handler()  # no trim: preallocated, as a broker killed mid-segment leaves it
    assert path.stat().st_size == PREALLOCATED
    script = f"""
import os
from indexlib import OffsetIndex
index = OffsetIndex({str(path)!r}, 0, writable=False)
os.truncate({str(path)!r}, 0)
entries = index.to_numpy()
print(index.entries, int(entries["position"].astype("int64").sum()), tuple(index.entry(1499)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr)  # -7 (SIGBUS) with a mapping
    expected_sum = sum(i * 4096 for i in range(1, 2000))
    assert done.stdout.split() == [str(PREALLOCATED // 8), str(expected_sum), "(15000,", "6144000)"], done.stdout


def _findings(part: Path) -> list[tuple[str, str, int | None, int | str | None, int]]:
    result = verify_partition(str(part))
    return sorted(
        (f.kind, os.path.basename(f.file), f.entry, f.found, f.count) for s in result.segments for f in s.findings
    )


def test_verify_of_a_sparse_preallocated_index_equals_that_of_its_dense_copy(tmp_path):
    """The same bytes with and without the hole give the same findings; only the stored entries are read."""
    sparse = tmp_path / "sparse" / "t-0"
    generate_partition(sparse, segments=3, batches_per_segment=200, seed=11)
    assert main(["rebuild", str(sparse)]) == 0
    bases = segment_base_offsets(str(sparse))
    dense = tmp_path / "dense" / "t-0"
    shutil.copytree(sparse, dense)
    for base in (bases[0], bases[-1]):  # an inactive segment (an error) and the active one (info)
        for suffix, entry_size in ((".index", 8), (".timeindex", 12)):
            size = PREALLOCATED - PREALLOCATED % entry_size  # Kafka rounds down to whole entries
            preallocate(Path(segment_file(str(sparse), base, suffix)), size)
            densify(Path(segment_file(str(dense), base, suffix)), size)
    kinds = _findings(sparse)
    assert kinds == _findings(dense)
    assert {k[0] for k in kinds} == {"untrimmed_zero_tail", "preallocated_zero_tail"}, kinds
    existing = read_existing_index(OffsetIndex, segment_file(str(sparse), bases[-1], ".index"))
    assert existing.length == PREALLOCATED and not existing.changed
    assert len(existing.entries) < 8192 and len(existing.entries) + existing.sparse_entries == PREALLOCATED // 8
    assert np.count_nonzero(existing.entries["position"]) > 0


def test_verify_beside_a_broker_trimming_and_growing_the_active_index(tmp_path):
    """Whole ``python -m indexlib verify`` processes while a thread trims the active segment's index to its
    entries and grows it back to the preallocated size, again and again (a broker's roll and a new segment's
    preallocation): every run ends with a verdict (exit 0 or 1), never a signal or a trace; the file is
    either checked or reported as changed during the read."""
    part = tmp_path / "t-0"
    generate_partition(part, segments=2, batches_per_segment=400, seed=5)
    assert main(["rebuild", str(part)]) == 0
    active = Path(segment_file(str(part), segment_base_offsets(str(part))[-1], ".index"))
    trimmed = active.stat().st_size
    stop = threading.Event()

    def broker() -> None:
        fd = os.open(active, os.O_RDWR)
        try:
            while not stop.is_set():
                os.ftruncate(fd, PREALLOCATED)
                os.ftruncate(fd, trimmed)
        finally:
            os.close(fd)

    thread = threading.Thread(target=broker)
    thread.start()
    kinds: set[str] = set()
    dumped: set[str] = set()
    try:
        for _ in range(12):
            done = subprocess.run(
                [sys.executable, "-m", "indexlib", "verify", str(part), "--jobs", "1", "--json", "-"],
                capture_output=True, text=True, cwd=PROJECT_ROOT,
            )  # fmt: skip
            assert done.returncode in (0, 1), (done.returncode, done.stderr)
            assert "Traceback" not in done.stderr and "error" not in done.stderr, done.stderr
            report = json.loads(done.stdout)
            kinds |= {f["kind"] for s in report["segments"] for f in s["findings"] if f["file"] == str(active)}
            dump = subprocess.run(
                [sys.executable, "-m", "indexlib", "dump", str(active), "--json"],
                capture_output=True, text=True, cwd=PROJECT_ROOT,
            )  # fmt: skip
            assert dump.returncode in (0, 1) and dump.stderr == "", (dump.returncode, dump.stderr)  # -7 with a mapping
            problems = {p["kind"] for p in json.loads(dump.stdout)["problems"]}
            assert dump.returncode == (1 if problems else 0)  # dump's exit code for a file with problems
            dumped |= problems
    finally:
        stop.set()
        thread.join()
    assert kinds <= {"preallocated_zero_tail", "index_changed_during_read"}, kinds
    assert dumped <= {"changed_while_read"}, dumped


def test_an_index_that_cannot_be_read_is_a_finding_not_a_crash(tmp_path):
    """A FIFO (or anything that is not a regular file) where the .index should be: read_existing_index never
    blocks or raises; verify reports unreadable_file and the repair would rebuild it."""
    part = tmp_path / "t-0"
    generate_partition(part, segments=1, batches_per_segment=50, seed=8)
    assert main(["rebuild", str(part)]) == 0
    index = Path(segment_file(str(part), 0, ".index"))
    index.unlink()
    os.mkfifo(index)
    existing = read_existing_index(OffsetIndex, str(index))
    assert existing.exists and existing.error is not None and "not a regular file" in existing.error
    assert ("unreadable_file", index.name, None, None, 1) in _findings(part)


def test_an_index_is_read_alike_through_any_name_and_only_a_regular_file_of_one_name_has_an_identity(tmp_path):
    """read_existing_index of one index file as a regular file, preallocated (sparse: its hole not read), grown
    with written zeros (dense: read whole), through a symbolic link and with a second hard link: the same entries
    and zero entries; an identity (the file a cut may change) only for the regular file of one name; a missing file
    does not exist; a dangling link exists and cannot be read."""
    part = tmp_path / "t-0"
    generate_partition(part, segments=1, batches_per_segment=200, seed=3)
    assert main(["rebuild", str(part)]) == 0
    index = Path(segment_file(str(part), 0, ".index"))
    entries = np.frombuffer(index.read_bytes(), OffsetIndex.DTYPE)
    sparse, dense = tmp_path / "sparse.index", tmp_path / "dense.index"
    shutil.copyfile(index, sparse)
    preallocate(sparse)
    dense.write_bytes(index.read_bytes() + bytes(PREALLOCATED - len(entries) * 8))
    link, hard = tmp_path / "link.index", tmp_path / "hard.index"
    os.symlink(sparse, link)
    shutil.copyfile(index, hard)
    os.link(hard, tmp_path / "hard-too.index")
    read = {p.name: read_existing_index(OffsetIndex, str(p)) for p in (index, sparse, dense, link, hard)}
    for name, existing in read.items():
        assert existing.exists and existing.error is None and not existing.changed, name
        total = len(existing.entries) + existing.sparse_entries
        assert existing.entries[: len(entries)].tobytes() == entries.tobytes(), name
        assert not existing.entries[len(entries) :].tobytes().strip(b"\0"), name
        assert total == (PREALLOCATED // 8 if name in ("sparse.index", "dense.index", "link.index") else len(entries))
    assert read["sparse.index"].sparse_entries > 0 and read["dense.index"].sparse_entries == 0
    assert read[index.name].identity is not None and read["sparse.index"].identity is not None
    assert read["link.index"].identity is None and read["hard.index"].identity is None
    missing = read_existing_index(OffsetIndex, str(tmp_path / "missing.index"))
    assert not missing.exists and missing.error is None
    os.symlink(tmp_path / "nowhere.index", tmp_path / "dangling.index")
    dangling = read_existing_index(OffsetIndex, str(tmp_path / "dangling.index"))
    assert dangling.exists and dangling.error is not None and "cannot read" in dangling.error
