"""Shared test helpers: where the real-Kafka fixtures are (and a skip when they are absent), running a
function as an unprivileged user, small filesystems, a command's stdout closed early, and the processes a
run started."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from indexlib.format import scan_kernel

PROJECT_ROOT = Path(__file__).resolve().parent.parent
KAFKA_REAL = PROJECT_ROOT.parent / "shared" / "fixtures" / "kafka-real"

# The commands the tests start get SIGINT as a terminal's user would: a shell starts background jobs with SIGINT
# ignored, and an ignored signal is inherited through exec, so a suite started in the background would see
# every Ctrl-C test's command (rightly) keep running. A Python handler is not inherited: children start with
# SIGINT at its default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# What the tool keeps by default (backups, the jobs' audit table and journal: indexlib.engine.state_dir) goes to
# a dir of the test session's own, never the user's ~/.local/state; every command a test starts inherits it.
os.environ["KAFKA_INDEX_HOME"] = tempfile.mkdtemp(prefix="kafka-index-home-")

# The Spark JVMs the tests start (drivers, embedded or under spark-submit, and a standalone cluster's master, workers
# and executors) run on C1 alone with the serial GC, as the tests' brokers do (broker/kafka_broker.py FAST_JVM): on
# two cores a short job's JVM then takes about a third less CPU (measured with a tiny verify: 9-11 s against 14-17 s).
# The drivers also map Spark's classes from one archive (pytest_configure, spark_class_archive): a third less again
# (6.4-7.0 s). A caller's own setting wins; the benchmarks run Spark's defaults.
FAST_SPARK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", FAST_SPARK_JVM)
#: the settings of every application the tests submit to the standalone cluster: two cores, and executors' JVMs as
#: fast to start as the drivers'
CLUSTER_APP_CONF = {"spark.cores.max": "2", "spark.executor.extraJavaOptions": FAST_SPARK_JVM}
#: a small Spark job in Python, whose driver loads the classes every job's driver loads (SQL, a Python UDF's runner)
ARCHIVED_JOB = (
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
    "spark.sparkContext.parallelize(range(100), 2).mapPartitions(lambda rows: [sum(rows)]).collect()\n"
    "spark.createDataFrame([(1, 'a')], 'n long, s string').groupBy('s').count().collect()\n"
    "spark.stop()\n"
)


def spark_class_archive(make: bool = True) -> Path | None:
    """A JVM class-data archive of the classes a Spark driver loads (Java's AppCDS: ``-XX:ArchiveClassesAtExit``),
    made once per virtualenv and Spark version (where ``make``), beside the venv's Python; None where there is none.
    A driver started with ``-XX:SharedArchiveFile`` maps those classes instead of loading them; where the archive
    does not fit, the JVM loads them as usual (``broker/kafka_broker.py`` ``shared_archive_opts``)."""
    import pyspark

    archive = Path(sys.prefix) / f"spark-{pyspark.__version__}-driver-classes.jsa"
    if archive.is_file() or not make:
        return archive if archive.is_file() else None
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    job = Path(tempfile.mkdtemp(prefix="spark-archive-")) / "job.py"
    job.write_text(ARCHIVED_JOB)
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{FAST_SPARK_JVM} -XX:ArchiveClassesAtExit={partial}"}
    try:  # spark-submit is the driver's JVM (exec'd): it has written the archive when it exits
        subprocess.run([str(submit), str(job)], env=env, capture_output=True, timeout=300, check=True)
        os.replace(partial, archive)
    except (OSError, subprocess.SubprocessError):
        partial.unlink(missing_ok=True)
        return None
    finally:
        job.unlink()
        job.parent.rmdir()
    return archive


def pytest_configure(config):  # type: ignore[no-untyped-def]
    """The JVM options of the Spark drivers (:data:`FAST_SPARK_JVM`, :func:`spark_class_archive`) and of Kafka's
    tools (the brokers' ``FAST_JVM`` and class archive, ``broker/kafka_broker.py``), the archives made by the first
    process (xdist's controller, or a run without workers) before any test; the workers inherit them."""
    from .broker.kafka_broker import FAST_JVM, class_archive_opts, make_class_archive, shared_archive_opts

    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    make = config.getoption("markexpr") != "not slow"  # make check's tier starts few JVMs: it uses, never makes, them
    if "SPARK_SUBMIT_OPTS" not in os.environ:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{FAST_SPARK_JVM} {shared_archive_opts(spark_class_archive(make))}".strip()
    if "KAFKA_JVM_PERFORMANCE_OPTS" not in os.environ:
        if make:
            make_class_archive()
        os.environ["KAFKA_JVM_PERFORMANCE_OPTS"] = f"{FAST_JVM} {class_archive_opts()}".strip()


requires_kafka_real = pytest.mark.skipif(
    not KAFKA_REAL.is_dir(),
    reason=f"real Kafka fixtures not found at {KAFKA_REAL} (../shared is absent beside the checkout)",
)


def written_by_kafka(path: Path) -> bool:
    """Whether a fixture file is the one its set's MANIFEST.json records. An older ``../shared`` held one that was
    not (``local-apache-kafka-4.1.0/txn-0/00000000000000000811.snapshot``, an ``xxd`` hex dump instead of the
    56-byte snapshot Kafka wrote, which verify rightly reports); tests allow for such a file either way."""
    import hashlib

    manifest_file = path.parent.parent / "MANIFEST.json"
    if not manifest_file.is_file():
        return True
    manifest = json.loads(manifest_file.read_text())
    recorded = manifest.get(f"{path.parent.name}/{path.name}", {}).get("sha256")
    return recorded is None or hashlib.sha256(path.read_bytes()).hexdigest() == recorded


def hex_dump_copy(source: Path, directory: Path) -> Path:
    """``source`` replaced by its ``xxd`` hex dump (text) under ``directory``, as an older ``../shared`` held one
    snapshot: a file that starts with ``"00"`` (a snapshot of version 0x3030, which Kafka refuses)."""
    data = source.read_bytes()
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        words = " ".join(chunk[i : i + 2].hex() for i in range(0, len(chunk), 2))
        lines.append(f"{at:08x}: {words}  {''.join(chr(b) if 32 <= b < 127 else '.' for b in chunk)}\n")
    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / source.name
    copy.write_text("".join(lines))
    return copy


def damaged_fixture_files(partition_dir: Path) -> set[str]:
    """The files of a real fixture partition that are not what the broker wrote (see :func:`written_by_kafka`);
    empty for a dir outside the fixture sets (no MANIFEST.json above it)."""
    if not (partition_dir.parent / "MANIFEST.json").is_file():
        return set()
    return {str(p) for p in partition_dir.iterdir() if p.is_file() and not written_by_kafka(p)}


def copy_fixture(source: Path, target: Path, ignore: tuple[str, ...] = ()) -> Path:
    """A writable copy of a real fixture partition or set (``ignore``: names left out, as
    ``shutil.ignore_patterns``), without a file the broker did not write (:func:`written_by_kafka`): the dir
    as Kafka leaves it once it has deleted a snapshot it refuses."""
    import shutil

    patterns = shutil.ignore_patterns(*ignore)

    def left_out(directory: str, names: list[str]) -> set[str]:
        damaged = {n for n in names if (Path(directory) / n).is_file() and not written_by_kafka(Path(directory) / n)}
        return set(patterns(directory, names)) | damaged

    shutil.copytree(source, target, ignore=left_out)
    target.chmod(0o755)
    for p in target.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return target


NOBODY = 65534


def run_as_unprivileged(fn) -> dict:
    """Run ``fn`` in a forked child that dropped to uid/gid 65534 (when we are root); return its JSON-able
    result, or ``{"error": ...}`` if it raised. The child never returns into pytest."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - report, never return into pytest in the child
            result = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_fd, json.dumps(result).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture(scope="module")
def big_partition(tmp_path_factory) -> Path:
    """20,000 one-record batches and their indexes: every dump is far more than a pipe holds."""
    from indexlib.engine import rebuild_partition
    from indexlib.testing.generate import generate_partition

    part = tmp_path_factory.mktemp("pipe") / "big-0"
    generate_partition(
        part, segments=1, batches_per_segment=20000, records_per_batch=(1, 1), value_bytes=(1, 1), seed=1
    )
    rebuild_partition(part, index_interval_bytes=1)
    return part


def dump_into_head(argv: list[str]) -> tuple[int, str, bytes]:
    """``<argv> | head -1`` with a real pipe and a real ``head``, which exits after its line: the dump's
    exit code and stderr, and what ``head`` printed."""
    dump = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=PROJECT_ROOT)
    assert dump.stdout is not None and dump.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=dump.stdout, capture_output=True, timeout=120)
    dump.stdout.close()  # only head holds the read end: when it exits, the pipe is closed
    err = dump.stderr.read().decode()
    return dump.wait(timeout=120), err, head.stdout


@pytest.fixture
def small_fs(tmp_path):
    """A real small filesystem: a 64 KiB tmpfs, unmounted afterwards (``remount(size)`` grows it)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (this test runs where it can mount one)")
    mount = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def remount(mount, size: str) -> None:
    """Resize a ``small_fs`` mount (e.g. "16m"): the same filesystem, now with room."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True, capture_output=True)


def fill(path) -> None:
    """Write zeros to ``path`` until its filesystem is full (unbuffered, so nothing fails later on close)."""
    with open(path, "wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:
            pass


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` (a run's JVM, daemon, workers or pool; never the test session's own)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():  # /proc/<pid>/stat, not task/*/children: the JVM forks from its other threads
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def identities(pids) -> dict[int, str]:
    """Each process of ``pids`` with its start time (so a PID the kernel gives to a new process later is
    never mistaken for it)."""
    return {pid: fields[19] for pid in pids if (fields := _stat(pid)) is not None}


def running(processes: dict[int, str]) -> list[int]:
    """Those of ``processes`` (from :func:`identities`) still running: the same process, not a zombie."""
    alive = []
    for pid, start in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == start and fields[0] != "Z":
            alive.append(pid)
    return alive


@pytest.fixture
def fsynced(monkeypatch):
    """The paths ``indexlib.storage.publish`` fsyncs from now on, in order (each really fsynced first; one that
    fails is not listed)."""
    from indexlib.storage import publish

    synced: list[str] = []
    real = publish.fsync_path

    def counting(path):
        real(path)
        synced.append(path)

    monkeypatch.setattr(publish, "fsync_path", counting)
    return synced


#: the kinds of damage :func:`damage_log_dir` makes
DAMAGE_CASES = ["deleted", "torn", "scrambled", "zero-tailed", "corrupt-log-tail", "bad-checkpoint", "refused-segment"]


def damage_log_dir(log_dir: Path, case: str) -> None:
    """One kind of damage (:data:`DAMAGE_CASES`), as the other tests build it, on a generated log dir holding
    ``orders-0``."""
    from indexlib.testing.batch_encoder import encode_batch_v2

    ts = 1_700_000_000_000
    part = log_dir / "orders-0"
    seg0 = part / "00000000000000000000"
    if case == "deleted":
        os.unlink(f"{seg0}.index")
    elif case == "torn":
        os.truncate(f"{seg0}.timeindex", os.path.getsize(f"{seg0}.timeindex") - 5)
    elif case == "scrambled":
        data = bytearray(Path(f"{seg0}.index").read_bytes())
        data[16:40] = bytes(range(24))
        Path(f"{seg0}.index").write_bytes(bytes(data))
    elif case == "zero-tailed":
        with open(f"{seg0}.index", "ab") as f:
            f.write(b"\0" * 80)
    elif case == "corrupt-log-tail":
        log = Path(f"{seg0}.log")
        data = bytearray(log.read_bytes())
        data[len(data) // 2] ^= 0xFF
        log.write_bytes(bytes(data))
    elif case == "bad-checkpoint":
        (log_dir / "log-start-offset-checkpoint").write_text("0\nnot a number\n")
    elif case == "refused-segment":  # a plain batch of producer 5 inside its open transaction
        refused = log_dir / "payments-0"
        refused.mkdir()
        data = b"".join(
            encode_batch_v2(i, [(None, b"x" * 100, ts + i)], producer_id=5, producer_epoch=0, base_sequence=i,
                            transactional=i < 3)
            for i in range(6)
        )  # fmt: skip
        (refused / "00000000000000000000.log").write_bytes(data)


# ------------------------------------------------------------------------------ object storage (moto's S3 server)
#: the bucket the object-storage tests put log dirs in
S3_BUCKET = "broker-copies"

#: the marks of a test that reads log dirs from moto's real S3 API server
needs_object_storage = [
    pytest.mark.skipif(
        importlib.util.find_spec("moto") is None or importlib.util.find_spec("boto3") is None,
        reason="needs moto[server] and boto3 (the spark-test extra) for a real S3 API",
    ),
    pytest.mark.skipif(importlib.util.find_spec("obstore") is None, reason="needs obstore (the object-storage extra)"),
    pytest.mark.skipif(
        scan_kernel.kernel_for(None) is None,
        reason="object storage is read through the compiled scan kernel only (not built, or the pure-Python pass)",
    ),
]


def requires_object_storage(test):  # type: ignore[no-untyped-def]
    """A test's decorator: :data:`needs_object_storage`'s skips, on one test of a module that has others."""
    for mark in needs_object_storage:
        test = mark(test)
    return test


def moto_server(log_path: str | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """moto's S3 server on 127.0.0.1 (as the benchmarks start it: ``benchmarks/audit_writers.py``)."""
    import sys

    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    import audit_writers

    return audit_writers.moto_server(log_path, env)


@pytest.fixture(scope="session")
def moto_log(tmp_path_factory) -> Path:
    """Where the session's moto server (:func:`s3`) logs each request it serves."""
    return tmp_path_factory.mktemp("moto") / "moto.log"


@pytest.fixture(scope="session")
def s3(moto_log):
    """moto's server for the whole session, :data:`S3_BUCKET` made: (storage options, a boto3 client)."""
    import sys

    import boto3

    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    import audit_writers

    with moto_server(str(moto_log)) as endpoint:
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        )  # fmt: skip
        client.create_bucket(Bucket=S3_BUCKET)
        yield audit_writers.s3_options(endpoint), client


def upload(client, root: Path, prefix: str) -> str:  # type: ignore[no-untyped-def]
    """Every file under ``root`` as an object of :data:`S3_BUCKET` under ``prefix``, laid out as on disk; its URI."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), S3_BUCKET, f"{prefix}/{path.relative_to(root)}")
    return f"s3://{S3_BUCKET}/{prefix}"


def storage_flags(options: dict[str, str]) -> list[str]:
    """``--storage-option KEY=VALUE`` for each option."""
    return [flag for key, value in options.items() for flag in ("--storage-option", f"{key}={value}")]


# ------------------------------------------------------------------------------------------ a standalone cluster
@pytest.fixture(scope="session")
def executor_archive() -> Path:
    """``make package``'s executor environment (built once if absent or older than the code)."""
    sys.path.insert(0, str(PROJECT_ROOT / "tools"))
    from standalone_cluster import fresh_archive

    return fresh_archive()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A Spark standalone master and two one-core workers bound to 127.0.0.1 (``tools/standalone_cluster.py``),
    shared by the session's cluster tests; stopped by PID (their process groups)."""
    sys.path.insert(0, str(PROJECT_ROOT / "tools"))
    from standalone_cluster import standalone_cluster

    with standalone_cluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1) as running:
        yield running


# ------------------------------------------------------------------------------------------ the suite's two tiers
#: what `make check` leaves out (``-m "not slow"``): the dirs that start real brokers, Airflow, Spark clusters and
#: tiered storage, and the tests that use a Spark session, a standalone cluster or a small tmpfs of their own
SLOW_DIRS = ("airflow", "broker", "cluster", "tiered")
SLOW_FIXTURES = frozenset({"spark", "cluster", "executor_archive", "tmpfs", "s3"})
#: tests over a second each that none of the above catches (``make test`` prints the slowest: ``--durations``)
SLOW_MODULES = frozenset(
    {
        "tests/test_packaging.py",
        "tests/indexlib/test_kernel_stream.py",
        "tests/indexlib/test_recover_kills.py",
        "tests/indexlib/test_dump_parity.py",
        "tests/indexlib/test_dump_records.py",
        "tests/indexlib/test_object_store.py",
        "tests/jobs/test_fault_matrix.py",
    }
)
SLOW_TESTS = frozenset(
    {
        "tests/test_readme.py::test_demo_runs_the_real_pipeline",
        "tests/indexlib/test_index_file.py::test_verify_beside_a_broker_trimming_and_growing_the_active_index",
        # whole processes that start Spark's JVM
        "tests/jobs/test_cli.py::test_the_venvs_spark_submit_runs_a_job_from_a_shell_without_the_venv",
        "tests/jobs/test_cli.py::test_json_to_stdout_pipes_into_a_json_reader",
        "tests/jobs/test_cli.py::test_quiet_is_quiet_from_the_jvms_start_as_a_whole_process",
        "tests/jobs/test_jobs_e2e.py::test_spark_submit_runs_the_job_file_as_is",
        "tests/jobs/test_audit_journal.py::test_the_jvm_killed_in_the_commit_leaves_the_run_whole_and_audited",
        "tests/jobs/test_audit_journal.py::test_a_run_killed_in_its_commit_leaves_a_journal_the_next_run_merges",
        "tests/jobs/test_state_dir.py::test_verify_from_inside_a_log_dir_with_default_options_leaves_the_log_dir_as_it_was",
        "tests/jobs/test_pipeline.py::test_spark_executors_stage_under_the_runs_sync",
    }
)
#: the xdist work unit of the tests that share the session's standalone cluster and tiered brokers, and of make
#: package's dist/ (the cluster's executor archive is built there): one worker starts them once, and no two race
SHARED_SESSION_GROUP = "cluster-tiered-and-package"
#: the work units that took longest in ``make test`` (its ``--durations``, 2026-11-29: 130-500 s each), longest first
LONGEST_UNITS = (
    SHARED_SESSION_GROUP,
    "tests/jobs/test_fault_matrix.py",
    "tests/airflow/test_dags.py",
    "tests/indexlib/test_recover_kills.py",
    "tests/indexlib/test_object_store.py",
    "tests/broker/test_cluster_settings_real_broker.py",
    "tests/broker/test_recover_real_broker.py",
    "tests/airflow/test_fleet.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Marks each test ``slow`` or not (:data:`SLOW_DIRS`, :data:`SLOW_FIXTURES`, :data:`SLOW_MODULES`)."""
    for item in items:
        path = Path(str(item.fspath)).relative_to(PROJECT_ROOT).as_posix()
        parts = path.split("/")
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            (len(parts) > 2 and parts[1] in SLOW_DIRS)
            or fixtures & SLOW_FIXTURES
            or path in SLOW_MODULES
            or item.nodeid.split("[")[0] in SLOW_TESTS
        ):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker orders its collection alike: xdist checks they agree
        items[:] = longest_units_first(items)


def longest_units_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the longest work units (:func:`xdist_group`) first, each unit's tests in their order: the
    scheduler hands units out in this order, and a long one started last would keep one worker busy after the other
    has run out of work. :data:`LONGEST_UNITS` first, then the units with the most ``slow`` tests."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(xdist_group(item.nodeid), []).append(item)

    def rank(unit: str) -> tuple[int, int]:
        known = LONGEST_UNITS.index(unit) if unit in LONGEST_UNITS else len(LONGEST_UNITS)
        return known, -sum(1 for i in units[unit] if i.get_closest_marker("slow"))

    return [item for unit in sorted(units, key=rank) for item in units[unit]]


def xdist_group(nodeid: str) -> str:
    """A test's work unit under ``pytest -n N --dist loadgroup``: its module (whose fixtures are then made once, on
    one worker), or :data:`SHARED_SESSION_GROUP` for the tests of the cluster, of tiered storage and of packaging."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    shared = (len(parts) > 2 and parts[1] in ("cluster", "tiered")) or path == "tests/test_packaging.py"
    return SHARED_SESSION_GROUP if shared else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # type: ignore[no-untyped-def]
    """``--dist loadgroup`` by :func:`xdist_group`, decided from each test's node id on the controller. (xdist 3.8's
    own loadgroup appends an ``xdist_group`` mark's name to the node id, which pytest 9.2 no longer lets a plugin
    change: every test became its own unit, and a module's fixtures were made on both workers.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the units in the collection's order: longest_units_first

    class ByGroup(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return ByGroup(config, log)
