"""``make package``: the wheel for --py-files and the packed virtualenv for --archives work on their own."""

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
    for needed in ("indexlib/records.py", "jobs/cli.py", "jobs/verify.py", "jobs/repair.py", "jobs/rebuild.py"):
        assert needed in names
    assert any(n.endswith("share/kafka-index-rebuild/conf/defaults.yaml") for n in names)
    with tarfile.open(dist / "kafka-index-env.tar.gz") as archive:
        archive.extractall(tmp_path / "env", filter="tar")
    probe = (
        "import indexlib, jobs.audit, jobs.config, crc32c, numpy, deltalake, pyarrow, yaml, javaproperties; "
        "from indexlib.records import scan_buffer; assert crc32c.hardware_based; "
        "assert jobs.config.DEFAULTS_FILE.is_file(), jobs.config.DEFAULTS_FILE; "
        "print(jobs.config.load_config_file()['index_interval_bytes'])"
    )
    ran = subprocess.run([str(tmp_path / "env/bin/python"), "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.strip() == "4096", ran.stderr[-2000:]
