"""A full disk is an input too: on a real small filesystem (a tmpfs mounted by the test), a rebuild whose
output dir or backup dir fills up ends with exit 1 and the path and "No space left" named, never SIGBUS,
with nothing torn and nothing partial left behind. Run as real processes (``python -m indexlib``)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from indexlib.engine import rebuild_partition
from indexlib.testing.batch_encoder import encode_batch_v2
from indexlib.testing.generate import generate_partition

from ..conftest import PROJECT_ROOT


def digests(directory) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def python_m(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "indexlib", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=300,
    )


def test_a_full_output_dir_is_an_error_not_sigbus(tmp_path, small_fs):
    """10,000 one-record batches indexed every batch: 80 KB of .index, more than the 64 KiB filesystem
    holds. Preallocated sparse and filled through the mapping, this used to die by SIGBUS."""
    part = tmp_path / "logs" / "orders-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(b"".join(encode_batch_v2(i, [(None, b"v", 1000 + i)]) for i in range(10_000)))
    before = digests(part)
    done = python_m("rebuild", part, "--output-dir", small_fs, "--index-interval-bytes", 0,
                    "--segment-index-bytes", 200_000, "--jobs", 1)  # fmt: skip
    assert done.returncode == 1, (done.returncode, done.stderr)  # not -7 (SIGBUS)
    failed = [line for line in done.stdout.splitlines() if "No space left on device" in line]
    assert failed and str(small_fs / "orders-0") in failed[0] and "Traceback" not in done.stdout + done.stderr
    assert [p for p in small_fs.rglob("*") if p.is_file()] == []  # nothing staged or partial stays
    assert digests(part) == before


def test_a_full_backup_dir_leaves_no_partial_copy(tmp_path, small_fs):
    part = tmp_path / "logs" / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=60, seed=12)
    rebuild_partition(part, index_interval_bytes=100)  # existing files that a rebuild will replace
    (small_fs / "filler").write_bytes(b"\0" * (os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize))
    before = digests(part)
    done = python_m("rebuild", part, "--backup-dir", small_fs, "--jobs", 1)
    assert done.returncode == 1 and "No space left on device" in done.stdout, done.stdout + done.stderr
    assert digests(part) == before  # nothing replaced without its backup, nothing torn, nothing staged
    assert sorted(p.name for p in small_fs.rglob("*") if p.is_file()) == ["filler"]  # no .partial copy
