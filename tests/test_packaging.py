"""``make package``: the executors' packed virtualenv for --archives (small: the project with its compiled
kernel, numpy, crc32c; no pyarrow, deltalake or pyyaml) works on its own; the wheel it is built from holds
the whole project and its conf. ``tests/cluster`` runs jobs with it on a real standalone cluster."""

from __future__ import annotations

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
    # indexlib's runtime dependencies and nothing else: no pip, setuptools, venv_pack
    assert installed == {"kafka_index_rebuild", "numpy", "crc32c", "javaproperties"}, installed
    unpacked = sum(p.stat().st_size for p in (tmp_path / "env").rglob("*") if p.is_file() and not p.is_symlink())
    assert unpacked < 90 * 2**20, unpacked  # 100 MB with pip, setuptools and the packer inside
    probe = (
        "import importlib.util, indexlib, indexlib.format._kernel, jobs.pipeline, numpy, crc32c; "
        "from indexlib.format.scan_kernel import KERNEL; assert KERNEL is not None; "
        "print(*[importlib.util.find_spec(m) is None for m in ('pyarrow', 'deltalake', 'yaml')])"
    )
    ran = subprocess.run([str(tmp_path / "env/bin/python"), "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.split() == ["True", "True", "True"], ran.stderr[-2000:]
