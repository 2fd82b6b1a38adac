"""``make package``: the executors' packed virtualenv for --archives (small: the project with its compiled
kernel, numpy, crc32c, obstore for log dirs in object storage; no pyarrow, deltalake or pyyaml) works on its own; the wheel it is built from holds
the whole project and its conf. ``tests/cluster`` runs jobs with it on a real standalone cluster."""

from __future__ import annotations

import json
import subprocess
import tarfile
import zipfile

from .conftest import PROJECT_ROOT


def test_make_package_builds_a_wheel_and_a_working_packed_env(tmp_path):
    done = subprocess.run(["make", "package"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    dist = PROJECT_ROOT / "dist"
    wheel = next(dist.glob("kafka_index_rebuild-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("indexlib/format/batch_walk.py", "jobs/cli.py", "jobs/spark_job.py"):
        assert needed in names
    assert any(n.endswith("share/kafka-index-rebuild/conf/defaults.yaml") for n in names)
    archive_path = dist / "kafka-index-executor-env.tar.gz"
    assert archive_path.stat().st_size < 60 * 2**20  # the full environment was 411 MB unpacked
    with tarfile.open(archive_path) as archive:
        # the extraction filters came in 3.11.4; Debian 12's Python is 3.11.2 (our own archive: nothing to filter)
        if hasattr(tarfile, "tar_filter"):
            archive.extractall(tmp_path / "env", filter="tar")
        else:
            archive.extractall(tmp_path / "env")  # noqa: S202
    site = tmp_path / "env/lib/python3.11/site-packages"
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    # indexlib's runtime dependencies and the object-storage extra (obstore needs typing_extensions), nothing else
    assert installed == {"kafka_index_rebuild", "numpy", "crc32c", "javaproperties", "obstore", "typing_extensions"}, (
        installed
    )
    unpacked = sum(p.stat().st_size for p in (tmp_path / "env").rglob("*") if p.is_file() and not p.is_symlink())
    assert unpacked < 100 * 2**20, unpacked  # 92 MB, 16 of them obstore's; 110 with pip, setuptools and the packer
    probe = (
        "import importlib.util, indexlib, indexlib.format._kernel, jobs.pipeline, numpy, crc32c, obstore; "
        "from indexlib.format.scan_kernel import KERNEL; assert KERNEL is not None; "
        "print(*[importlib.util.find_spec(m) is None for m in ('pyarrow', 'deltalake', 'yaml')])"
    )
    ran = subprocess.run([str(tmp_path / "env/bin/python"), "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.split() == ["True", "True", "True"], ran.stderr[-2000:]


def test_make_package_full_verifies_a_log_dir_from_a_bare_environment_without_activation(tmp_path):
    """Issue 37: the packed env a fleet's brokers unpack runs as their SSH command runs it, from ``env -i`` with a
    minimal PATH and no activation: ``bin/kafka-index verify --engine local`` finds the damage (exit 1, one report,
    no traceback) and writes its audit rows with delta-rs into the state dir, with no pyspark or py4j in the env."""
    from indexlib.engine import rebuild_partition
    from indexlib.testing.generate import generate_partition

    done = subprocess.run(["make", "package-full"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    env_dir = tmp_path / "env"
    with tarfile.open(PROJECT_ROOT / "dist" / "kafka-index-env.tar.gz") as archive:
        if hasattr(tarfile, "tar_filter"):  # 3.11.4+; our own archive: nothing to filter
            archive.extractall(env_dir, filter="tar")
        else:
            archive.extractall(env_dir)  # noqa: S202
    site = env_dir / "lib/python3.11/site-packages"
    assert not (site / "pyspark").exists() and not (site / "py4j").exists()
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=30, seed=5)
    rebuild_partition(logs / "orders-0")
    (logs / "orders-0" / "00000000000000000000.index").unlink()
    home = tmp_path / "home"
    home.mkdir()
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    argv = [str(env_dir / "bin/kafka-index"), "verify", "--log-dir", str(logs), "--engine", "local", "--no-progress",
            "--json", str(tmp_path / "report.json")]  # fmt: skip
    ran = subprocess.run(argv, env=bare, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stdout[-2000:] + ran.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert [f["kind"] for f in report["remaining_findings"]] == ["index_missing"]
    assert (home / ".local/state/kafka-index-rebuild/kafka-index-audit/_delta_log").is_dir()
