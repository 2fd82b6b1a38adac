"""A Spark standalone cluster on this machine, for the cluster test and the cluster benchmark: a master and
N workers bound to 127.0.0.1, started with pyspark's own ``spark-class`` (each worker its own JVM; its
executors their own JVMs and Python workers), stopped by PID (each process group), and ``spark-submit``
as the README runs it (the executors' Python from ``make package``'s archive, the driver on this venv)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ARCHIVE = PROJECT_ROOT / "dist" / "kafka-index-executor-env.tar.gz"


def fresh_archive() -> Path:
    """``make package``'s executor environment, built first when absent or older than the code it packs."""
    sources = [*PROJECT_ROOT.glob("indexlib/**/*.py"), *PROJECT_ROOT.glob("jobs/*.py"), PROJECT_ROOT / "pyproject.toml"]
    sources.append(PROJECT_ROOT / "indexlib" / "format" / "_kernel.c")
    if not ARCHIVE.exists() or ARCHIVE.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        done = subprocess.run(["make", "-s", "package"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"make package failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return ARCHIVE


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_env() -> dict[str, str]:
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT"):
        env.pop(name, None)
    return env


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


@dataclass
class Cluster:
    url: str
    workers: list[Path]  # each worker's work dir (its executors' dirs, stdout and stderr)
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


@contextmanager
def standalone_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """Start the cluster under ``root`` (logs, work dirs); stop every process by its PID on exit."""
    port, ui = free_port(), free_port()
    spark_class = str(spark_home() / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(root / log, "wb") as out:
            proc = subprocess.Popen(argv, env=spark_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        master = start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], "master.log",
        )  # fmt: skip
        _wait_for_port(port, master, "the Spark master")
        dirs = []
        for n in range(workers):
            work = root / f"work-{n}"
            work.mkdir(parents=True, exist_ok=True)
            worker_port = free_port()
            proc = start(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port",
                 str(worker_port), "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
                 "--work-dir", str(work), f"spark://127.0.0.1:{port}"], f"worker-{n}.log",
            )  # fmt: skip
            _wait_for_port(worker_port, proc, f"Spark worker {n}")
            dirs.append(work)
        _wait_registered(root, workers)
        yield Cluster(f"spark://127.0.0.1:{port}", dirs, root, procs)
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


def _wait_registered(root: Path, workers: int, timeout: float = 60) -> None:
    """Until the master's log says every worker registered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (root / "master.log").read_text(errors="replace").count("Registering worker") >= workers:
            return
        time.sleep(0.2)
    raise RuntimeError(f"the workers did not register with the master within {timeout} s")


def spark_submit(
    master: str, job: str, *args: object, archive: Path = ARCHIVE, conf: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``spark-submit jobs/spark_job.py JOB ARGS`` as the README shows it for a standalone cluster (``master`` may
    also be ``local[N]``: then no archive is needed, and none is passed)."""
    argv = submit_argv(master, job, *args, archive=archive, conf=conf)
    return subprocess.run(argv, cwd=PROJECT_ROOT, env=spark_env(), capture_output=True, text=True, timeout=1200)


def submit_argv(
    master: str, job: str, *args: object, archive: Path = ARCHIVE, conf: dict[str, str] | None = None
) -> list[str]:
    """The command line of :func:`spark_submit`."""
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    if master.startswith("spark://"):
        argv += ["--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python"]
    else:
        argv += ["--conf", f"spark.pyspark.python={sys.executable}"]
    argv += ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    argv += [
        "--conf",
        f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile={PROJECT_ROOT}/conf/log4j2.properties",
    ]
    for key, value in (conf or {}).items():
        argv += ["--conf", f"{key}={value}"]
    argv += [str(PROJECT_ROOT / "jobs" / "spark_job.py"), job, *map(str, args)]
    return argv
