"""Cluster mode as the README says it, for real: a Spark standalone master and two workers on 127.0.0.1
(pyspark's ``spark-class``: each worker its own JVM, its executors their own JVMs and Python workers),
the executors' Python from ``make package``'s archive, the driver on the project's own venv, jobs submitted
with ``spark-submit --master spark://...`` exactly as the README shows. Verify and repair must give what
the embedded local run gives, byte for byte, and the executors must really have run from the archive."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexlib.generate import generate_partition
from indexlib.partition import rebuild_partition

from ..conftest import PROJECT_ROOT

pyspark = pytest.importorskip("pyspark", reason="the cluster test needs the [spark] extra (make test installs it)")
SPARK_HOME = Path(pyspark.__file__).parent
ARCHIVE = PROJECT_ROOT / "dist" / "kafka-index-executor-env.tar.gz"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def spark_env() -> dict[str, str]:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    return env


@pytest.fixture(scope="module")
def executor_archive() -> Path:
    """``make package``'s executor environment (built once if absent or older than the code)."""
    sources = [
        *PROJECT_ROOT.glob("indexlib/*.py"),
        PROJECT_ROOT / "indexlib" / "_kernel.c",
        PROJECT_ROOT / "pyproject.toml",
    ]
    if not ARCHIVE.exists() or ARCHIVE.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        done = subprocess.run(["make", "-s", "package"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
    return ARCHIVE


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A master and two one-core workers bound to 127.0.0.1; stopped by PID (their process groups)."""
    root = tmp_path_factory.mktemp("standalone")
    port, ui = free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], log: str) -> subprocess.Popen[bytes]:
        out = open(root / log, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, env=spark_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        master = start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], "master.log",
        )  # fmt: skip
        wait_for_port(port, master, "the Spark master")
        workers = []
        for n in range(2):
            work = root / f"work-{n}"
            work.mkdir()
            worker_port = free_port()
            workers.append(work)
            proc = start(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port",
                 str(worker_port), "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                 "--work-dir", str(work), f"spark://127.0.0.1:{port}"], f"worker-{n}.log",
            )  # fmt: skip
            wait_for_port(worker_port, proc, f"Spark worker {n}")
        time.sleep(2)  # the workers register with the master
        yield {"url": f"spark://127.0.0.1:{port}", "workers": workers, "logs": root}
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def spark_submit(cluster: dict, archive: Path, job: str, *args: object) -> subprocess.CompletedProcess[str]:
    """The README's standalone command."""
    argv = [
        str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster["url"],
        "--archives", f"{archive}#env",
        "--conf", "spark.pyspark.python=./env/bin/python",
        "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2",
        str(PROJECT_ROOT / "jobs" / f"{job}.py"), *map(str, args),
    ]  # fmt: skip
    return subprocess.run(argv, cwd=PROJECT_ROOT, env=spark_env(), capture_output=True, text=True, timeout=600)


def index_bytes(logs: Path) -> dict[str, bytes]:
    return {str(p.relative_to(logs)): p.read_bytes() for p in sorted(logs.rglob("*")) if p.is_file()}


def test_verify_and_repair_on_a_standalone_cluster_match_the_local_run(cluster, executor_archive, tmp_path):
    logs = tmp_path / "logs"
    expected = tmp_path / "expected"
    for p in range(4):
        generate_partition(logs / f"orders-{p}", segments=2, batches_per_segment=80, transactional_producers=2, seed=p)
        rebuild_partition(logs / f"orders-{p}")
    shutil.copytree(logs, expected)
    for index in logs.glob("orders-*/*.index"):
        index.write_bytes(index.read_bytes()[:-3])  # torn
    (logs / "orders-2" / "00000000000000000000.timeindex").unlink()

    report = tmp_path / "verify.json"
    done = spark_submit(cluster, executor_archive, "verify", "--log-dir", logs, "--audit-table", tmp_path / "audit",
                        "--json", report)  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    kinds = {f["kind"] for s in json.loads(report.read_text())["segments"] for f in s["findings"]}
    assert kinds == {"bad_length", "timeindex_missing"}

    done = spark_submit(cluster, executor_archive, "repair", "--log-dir", logs, "--audit-table", tmp_path / "audit",
                        "--backup-dir", tmp_path / "backups")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert index_bytes(logs) == index_bytes(expected)

    # the executors were the workers' own processes, running Python from the unpacked archive
    apps = [d for w in cluster["workers"] for d in w.iterdir() if d.name.startswith("app-")]
    assert len({d.name for d in apps}) == 2  # one application per spark-submit
    pythons = list(cluster["workers"][0].glob("app-*/*/env/bin/python")) + list(
        cluster["workers"][1].glob("app-*/*/env/bin/python")
    )
    assert pythons, "no executor unpacked the archive"
    stderr = "".join(p.read_text(errors="replace") for w in cluster["workers"] for p in w.glob("app-*/*/stderr"))
    assert "Traceback" not in stderr
