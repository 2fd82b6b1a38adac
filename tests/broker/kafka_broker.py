"""A real Apache Kafka 4.1.0 broker (``../shared/kafka_2.13-4.1.0``) for tests and benchmarks: a single-node KRaft
broker+controller on 127.0.0.1, started on a log dir of ours, stopped cleanly (SIGTERM) or killed (SIGKILL) by
its PID, and what its ``server.log`` says about recovery.

Every start gets its own directory for the broker's own logs (``LOG_DIR``), so its ``server.log`` holds that start
alone. The listeners bind 127.0.0.1 on ports picked free when the broker object is made; a copy of a log dir is
started with the same ports, because the KRaft voter set stored in ``__cluster_metadata`` (``--standalone``)
names the controller's endpoint.

Nothing here is stopped by name: :meth:`KafkaBroker.stop` and :meth:`KafkaBroker.crash` signal the PID this object
started (``kafka-server-start.sh`` execs java, so the ``Popen`` PID is the broker's), and :meth:`KafkaBroker.close`
kills it if it still runs (use it in ``finally``).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KAFKA_HOME = Path(os.environ.get("KAFKA_HOME_4_1", PROJECT_ROOT.parent / "shared" / "kafka_2.13-4.1.0"))
HEAP = "-Xmx512m -Xms256m"
# For tests: a JVM that starts faster on two cores (serial GC, C1 only). Benchmarks of the broker's own recovery
# pass ``jvm_opts=None`` (the distribution's defaults: G1, both JIT tiers).
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k"
#: a JVM class-data archive (AppCDS) of the classes a broker loads, made once per virtualenv by the first test process
#: (tests/conftest.py, :func:`make_class_archive`); brokers started with :data:`FAST_JVM` map them from it
CLASS_ARCHIVE = Path(sys.prefix) / "kafka-4.1.0-broker-classes.jsa"


def shared_archive_opts(archive: Path | None) -> str:
    """The JVM options that map the classes of a class-data archive ("" for None); a JVM it does not fit (another
    class path, another JVM) loads them as usual, silently (without ``-Xlog:cds=off`` it warns on stdout)."""
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off" if archive is not None else ""


def class_archive_opts() -> str:
    """:func:`shared_archive_opts` of :data:`CLASS_ARCHIVE` where it exists."""
    return shared_archive_opts(CLASS_ARCHIVE if CLASS_ARCHIVE.is_file() else None)


STARTED = "Kafka Server started"


def kafka_home_missing(home: Path = KAFKA_HOME) -> str | None:
    """Why no broker can be started here (None when one can): the distribution or a ``java`` is absent."""
    if not (home / "bin" / "kafka-server-start.sh").is_file():
        return f"Apache Kafka 4.1.0 not found at {home} (../shared is absent beside the checkout)"
    if not any((Path(d) / "java").is_file() for d in os.environ.get("PATH", "").split(os.pathsep)):
        return "no java on PATH to run the Kafka broker"
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now (bound together, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def random_cluster_id() -> str:
    """A cluster id as ``kafka-storage.sh random-uuid`` prints it (16 random bytes, URL-safe base64, no padding),
    without starting a JVM for it."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka's Uuid.randomUuid avoids ids that look like options
            return text


def read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


# ------------------------------------------------------------------------------------------ server.log
# LogLoader.recoverLog (4.1.0 L477): "Recovering unflushed segment {base}. {n} recovered for {tp}." (n: the
# segments of that partition recovered before this one), with the loader's prefix "[LogLoader partition=<tp>,
# dir=<log dir>] ".
RECOVERING = re.compile(
    r"\[LogLoader partition=(?P<tp>\S+), dir=(?P<dir>[^\]]+)\] Recovering unflushed segment (?P<base>\d+)"
)
UNCLEAN = re.compile(r"Recovering (?P<n>\d+) logs from (?P<dir>\S+) since no clean shutdown file was found")
# LogManager.loadLogs: "Loaded {n} logs in {ms}ms" per log dir (4.1.0: "Loaded 12 logs in 345ms")
LOADED = re.compile(r"Loaded (?P<n>\d+) logs in (?P<ms>\d+)ms")
SKIPPED_CLEAN = re.compile(r"Skipping recovery of \d+ logs from \S+ since clean shutdown file was found")


@dataclass
class Recovery:
    """What one start's ``server.log`` says about log recovery."""

    recovering: dict[str, list[int]] = field(default_factory=dict)  # partition -> bases of the recovered segments
    loaded: list[tuple[int, int]] = field(default_factory=list)  # (logs, ms) per log dir
    clean_shutdown_seen: bool = False
    lines: list[str] = field(default_factory=list)  # the recovery lines themselves

    @property
    def loaded_ms(self) -> int:
        return sum(ms for _, ms in self.loaded)


def parse_recovery(text: str) -> Recovery:
    out = Recovery()
    for line in text.splitlines():
        if m := RECOVERING.search(line):
            out.recovering.setdefault(m["tp"], []).append(int(m["base"]))
            out.lines.append(line)
        elif m := LOADED.search(line):
            out.loaded.append((int(m["n"]), int(m["ms"])))
            out.lines.append(line)
        elif UNCLEAN.search(line):
            out.lines.append(line)
        elif SKIPPED_CLEAN.search(line):
            out.clean_shutdown_seen = True
            out.lines.append(line)
    return out


# ------------------------------------------------------------------------------------------ the broker
class BrokerError(Exception):
    """The broker did not start, stop or answer as the harness expects (its server.log says why)."""


class KafkaBroker:
    """One single-node KRaft broker on ``log_dir``; its config, and its own logs per start, under ``work``."""

    def __init__(
        self,
        work: Path,
        log_dir: Path,
        overrides: dict[str, str] | None = None,
        ports: tuple[int, int] | None = None,
        home: Path = KAFKA_HOME,
        jvm_opts: str | None = FAST_JVM,
    ) -> None:
        self.home = home
        self.work = Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir)
        self.port, self.controller_port = ports or tuple(free_ports(2))
        self.overrides = dict(overrides or {})
        self.jvm_opts = jvm_opts
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.current_logs: Path | None = None
        self.config = self.work / "server.properties"
        self.write_config()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def write_config(self) -> None:
        """The distribution's ``config/server.properties`` with our ports on 127.0.0.1, our log dir, two recovery
        threads (the machine's cores) and ``overrides``. ``log.flush.*`` stay Kafka's defaults: nothing is
        fsynced before a roll, so a SIGKILL leaves unflushed segments past the recovery point."""
        props = read_properties(self.home / "config" / "server.properties")
        p, c = self.port, self.controller_port
        props.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
                "controller.quorum.bootstrap.servers": f"127.0.0.1:{c}",
                "log.dirs": str(self.log_dir),
                "num.recovery.threads.per.data.dir": "2",
                "num.network.threads": "2",
                "num.io.threads": "2",
                "group.initial.rebalance.delay.ms": "0",
                "auto.create.topics.enable": "false",
            }
        )
        props.update(self.overrides)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def env(self, logs: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(LOG_DIR=str(logs), KAFKA_HEAP_OPTS=HEAP, KAFKA_JMX_OPTS="-Djava.awt.headless=true")
        env.pop("KAFKA_OPTS", None)
        env.pop("KAFKA_JVM_PERFORMANCE_OPTS", None)
        if self.jvm_opts is not None:
            env["KAFKA_JVM_PERFORMANCE_OPTS"] = self.jvm_opts
            if self.jvm_opts == FAST_JVM:  # the options the archive was made with
                env["KAFKA_JVM_PERFORMANCE_OPTS"] += f" {class_archive_opts()}"
        return env

    def format(self, cluster_id: str | None = None) -> str:
        """``kafka-storage.sh format --standalone`` of the log dir (a new cluster); returns the cluster id."""
        cluster_id = cluster_id or random_cluster_id()
        logs = self.work / "format-logs"
        logs.mkdir(exist_ok=True)
        cmd = [str(self.home / "bin" / "kafka-storage.sh"), "format", "-t", cluster_id, "-c", str(self.config)]
        proc = subprocess.run(
            [*cmd, "--standalone"], env=self.env(logs), capture_output=True, text=True, timeout=120
        )  # fmt: skip
        if proc.returncode != 0:
            raise BrokerError(f"kafka-storage.sh format failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return cluster_id

    def start(self, timeout: float = 180.0) -> Recovery:
        """Start the broker and wait until its ``server.log`` says ``Kafka Server started``; returns what that
        start's log says about recovery. Raises (after killing it) if it exits or does not start in time."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerError("already running")
        self.starts += 1
        logs = self.work / f"broker-logs-{self.starts}"
        logs.mkdir()
        self.current_logs = logs
        with open(logs / "stdout.txt", "wb") as out:
            self.proc = subprocess.Popen(
                [str(self.home / "bin" / "kafka-server-start.sh"), str(self.config)],
                env=self.env(logs), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if STARTED in self.server_log():
                return self.recovery()
            if self.proc.poll() is not None:
                raise BrokerError(f"broker exited with {self.proc.returncode} before it started:\n{self.tail()}")
            time.sleep(0.1)
        self.crash()
        raise BrokerError(f"broker not started within {timeout:.0f} s:\n{self.tail()}")

    def server_log(self) -> str:
        """This start's ``server.log``, with the hourly files log4j rolled it into (``server.log.<yyyy-MM-dd-HH>``:
        a start that runs over an hour's turn has its earlier lines there) first."""
        if self.current_logs is None:
            return ""
        text = ""
        for path in [*sorted(self.current_logs.glob("server.log.*")), self.current_logs / "server.log"]:
            try:
                text += path.read_text(errors="replace")
            except FileNotFoundError:
                continue
        return text

    def tail(self, lines: int = 40) -> str:
        text = self.server_log()
        if self.current_logs is not None and (self.current_logs / "stdout.txt").exists():
            text += (self.current_logs / "stdout.txt").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def recovery(self) -> Recovery:
        return parse_recovery(self.server_log())

    def stop(self, timeout: float = 120.0) -> None:
        """A clean shutdown: SIGTERM to our PID, then wait for it to exit (SIGKILL if it does not in time)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.crash()
            raise BrokerError(f"broker did not stop within {timeout:.0f} s of SIGTERM (killed)") from None
        if self.proc.returncode not in (0, 143, -signal.SIGTERM):
            raise BrokerError(f"broker exited with {self.proc.returncode} on SIGTERM:\n{self.tail()}")

    def crash(self) -> None:
        """An unclean shutdown: SIGKILL to our PID (no clean-shutdown file, unflushed data in the page cache)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def close(self) -> None:
        """Make sure nothing of ours still runs (for ``finally``): SIGKILL if alive."""
        self.crash()

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_class_archive() -> None:
    """:data:`CLASS_ARCHIVE`, where it is missing and a broker can start here: a broker formatted, started and
    stopped cleanly with ``-XX:ArchiveClassesAtExit`` (the JVM writes it as it exits), then named. Nothing where that
    fails: the brokers then load their classes as usual."""
    if CLASS_ARCHIVE.is_file() or kafka_home_missing() is not None:
        return
    partial = CLASS_ARCHIVE.with_name(f"{CLASS_ARCHIVE.name}.{os.getpid()}.partial")
    root = Path(tempfile.mkdtemp(prefix="kafka-class-archive-"))
    broker = KafkaBroker(root / "broker", root / "logs")
    try:
        broker.format()
        broker.jvm_opts = f"{FAST_JVM} -XX:ArchiveClassesAtExit={partial}"
        broker.start()
        broker.stop()
        os.replace(partial, CLASS_ARCHIVE)
    except (OSError, BrokerError, subprocess.SubprocessError):
        partial.unlink(missing_ok=True)
    finally:
        broker.close()
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------------------------------ log dirs
def copy_log_dir(source: Path, target: Path) -> Path:
    """``cp -a --sparse=always``: a byte-for-byte copy keeping times and holes (preallocated indexes stay sparse)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)
    return target


def partition_dirs(log_dir: Path) -> list[Path]:
    """The partition dirs of a log dir (``<topic>-<n>``), without the KRaft metadata log."""
    return sorted(
        p
        for p in log_dir.iterdir()
        if p.is_dir() and re.fullmatch(r".+-\d+", p.name) and p.name != "__cluster_metadata-0"
    )


# ------------------------------------------------------------------------------------------ clients (kafka-python)
def create_topics(bootstrap: str, topics: dict[str, int], configs: dict[str, str] | None = None) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    try:
        admin.create_topics([NewTopic(t, n, 1, topic_configs=dict(configs or {})) for t, n in topics.items()])
    finally:
        admin.close()


@dataclass
class Served:
    """What a broker serves of one partition: the records under read_committed (offset, timestamp, key, a hash
    of the value), the log start, the last stable offset and the high watermark, and offsets for timestamps
    (both isolation levels)."""

    records: list[tuple[int, int, bytes | None, str]]
    start: int
    lso: int
    hw: int
    for_times: dict[tuple[str, int], int | None] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.records)

    def summary(self) -> tuple[int, int, int, int]:
        return self.count, self.start, self.lso, self.hw


def _consumer(bootstrap: str, isolation: str):
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, isolation_level=isolation,
        fetch_max_wait_ms=50, request_timeout_ms=30000, max_partition_fetch_bytes=4 << 20,
    )  # fmt: skip


def serve(
    bootstrap: str, partitions: list[tuple[str, int]], times: dict[tuple[str, int], list[int]] | None = None,
    timeout: float = 60.0,
) -> dict[tuple[str, int], Served]:  # fmt: skip
    """Read every partition from its start to its last stable offset under read_committed, and its offsets; then
    the offsets for ``times`` (default: :func:`lookup_times` of the records read) under both isolation levels."""
    import hashlib

    from kafka import TopicPartition

    tps = [TopicPartition(t, p) for t, p in partitions]
    committed = _consumer(bootstrap, "read_committed")
    uncommitted = _consumer(bootstrap, "read_uncommitted")
    try:
        start = committed.beginning_offsets(tps, timeout_ms=30000)
        lso = committed.end_offsets(tps, timeout_ms=30000)
        hw = uncommitted.end_offsets(tps, timeout_ms=30000)
        out = {(tp.topic, tp.partition): Served([], start[tp], lso[tp], hw[tp]) for tp in tps}
        committed.assign(tps)
        committed.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        left = {tp for tp in tps if lso[tp] > start[tp]}
        while left:
            if time.monotonic() > deadline:
                raise BrokerError(f"read_committed did not reach the last stable offset of {sorted(map(str, left))}")
            for tp, records in committed.poll(timeout_ms=500, max_records=100000).items():
                out[(tp.topic, tp.partition)].records.extend(
                    (r.offset, r.timestamp, r.key, hashlib.sha1(r.value or b"").hexdigest()) for r in records
                )
            left = {tp for tp in left if committed.position(tp) < lso[tp]}
        times = lookup_times(out) if times is None else times
        for isolation, consumer in (("read_committed", committed), ("read_uncommitted", uncommitted)):
            for i in range(max(len(v) for v in times.values())):
                ask = {TopicPartition(t, p): v[i] for (t, p), v in times.items() if i < len(v)}
                for tp, found in consumer.offsets_for_times(ask, timeout_ms=30000).items():
                    out[(tp.topic, tp.partition)].for_times[(isolation, ask[tp])] = (
                        None if found is None else found.offset
                    )
        return out
    finally:
        committed.close()
        uncommitted.close()


def lookup_times(served: dict[tuple[str, int], Served], per_partition: int = 4) -> dict[tuple[str, int], list[int]]:
    """Timestamps worth looking up in each partition: spread over its records' timestamps, the first minus one
    and the last plus one."""
    out = {}
    for key, s in served.items():
        stamps = sorted(ts for _, ts, _, _ in s.records)
        if not stamps:
            out[key] = [0]
            continue
        picks = [stamps[(len(stamps) - 1) * i // (per_partition - 1)] for i in range(per_partition)]
        out[key] = [stamps[0] - 1, *picks, stamps[-1] + 1]
    return out


# What `fill` writes, topic -> (compression, producer): every codec, plain (no idempotence, acks=1), idempotent and
# transactional (commits and aborts). Two partitions each; `live_writer.py` adds the topics written at the crash.
FILL_TOPICS: dict[str, tuple[str | None, str]] = {
    "plain": (None, "plain"),
    "gzip": ("gzip", "idempotent"),
    "snappy": ("snappy", "idempotent"),
    "lz4": ("lz4", "idempotent"),
    "zstd": ("zstd", "idempotent"),
    "idem": (None, "idempotent"),
    "txn": (None, "transactional"),
    "txn-lz4": ("lz4", "transactional"),
}
LIVE_TOPICS = {"live-plain": 2, "live-idem": 2, "live-txn": 2}
LIVE_TRANSACTIONAL_ID = "live-writer"


def record_value(rng, size: int) -> bytes:
    """``size`` bytes of hex text: random enough that each codec has work, compressible about 2x."""
    return rng.randbytes(size // 2).hex().encode()


def producer(bootstrap: str, kind: str, compression: str | None = None, transactional_id: str | None = None):
    from kafka import KafkaProducer

    common = dict(
        bootstrap_servers=bootstrap, compression_type=compression, linger_ms=5, batch_size=16384,
        request_timeout_ms=30000, max_block_ms=60000,
    )  # fmt: skip
    if kind == "plain":
        return KafkaProducer(enable_idempotence=False, acks=1, **common)
    if kind == "idempotent":
        return KafkaProducer(enable_idempotence=True, acks="all", **common)
    return KafkaProducer(transactional_id=transactional_id, transaction_timeout_ms=900000, **common)


def fill(
    bootstrap: str, records_per_partition: int, value_bytes: int = 300, partitions: int = 2, seed: int = 7,
    topics: dict[str, tuple[str | None, str]] | None = None, txn_size: int = 100, abort_every: int = 3,
    configs: dict[str, str] | None = None,
) -> dict[str, int]:  # fmt: skip
    """Create ``topics`` (default :data:`FILL_TOPICS`) and write each partition ``records_per_partition`` keyed
    records whose timestamps rise 10 ms apart from an hour ago; a transactional topic in transactions of
    ``txn_size`` records per partition, every ``abort_every``-th aborted. ``configs``: every topic's settings.
    Returns topic -> partitions."""
    import random

    topics = FILL_TOPICS if topics is None else topics
    create_topics(bootstrap, {t: partitions for t in topics}, configs)
    rng = random.Random(seed)
    t0 = int(time.time() * 1000) - 3600_000
    for n, (topic, (compression, kind)) in enumerate(topics.items()):
        prod = producer(bootstrap, kind, compression, transactional_id=f"fill-{topic}")
        try:
            if kind == "transactional":
                prod.init_transactions()
            step = txn_size if kind == "transactional" else records_per_partition
            for first in range(0, records_per_partition, step):
                if kind == "transactional":
                    prod.begin_transaction()
                for i in range(first, min(first + step, records_per_partition)):
                    for p in range(partitions):
                        prod.send(
                            topic, value=record_value(rng, value_bytes), key=f"key-{i % 500}".encode(), partition=p,
                            timestamp_ms=t0 + 10 * i + n,
                        )  # fmt: skip
                if kind == "transactional":
                    if (first // step) % abort_every == abort_every - 1:
                        prod.abort_transaction()
                    else:
                        prod.commit_transaction()
            prod.flush()
        finally:
            prod.close(timeout=30)
    return {t: partitions for t in topics}


TRANSACTIONAL_IDS = {"txn": "fill-txn", "txn-lz4": "fill-txn-lz4", "live-txn": LIVE_TRANSACTIONAL_ID}


def resume_producers(bootstrap: str, partitions: list[tuple[str, int]], records: int = 5) -> None:
    """After a start on a recovered log dir: each transactional id that wrote (``fill-txn``, ``fill-txn-lz4``,
    ``live-writer``) initialises again (its coordinator bumps the epoch and aborts a transaction left open, as
    ``live-writer``'s) and commits one record to each partition of its topic; then a fresh idempotent producer
    writes ``records`` to every partition. Any error raises."""
    for topic, transactional_id in TRANSACTIONAL_IDS.items():
        prod = producer(bootstrap, "transactional", transactional_id=transactional_id)
        try:
            prod.init_transactions()
            prod.begin_transaction()
            futures = [
                prod.send(topic, value=b"resumed", key=b"resume", partition=p) for t, p in partitions if t == topic
            ]
            prod.commit_transaction()
            for f in futures:
                f.get(timeout=30)
        finally:
            prod.close(timeout=30)
    prod = producer(bootstrap, "idempotent")
    try:
        futures = [
            prod.send(t, value=b"resumed-%d" % i, key=b"resume", partition=p)
            for t, p in partitions for i in range(records)
        ]  # fmt: skip
        prod.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        prod.close(timeout=30)


def python_env() -> dict[str, str]:
    """The environment of a Python child running this checkout's code first (PYTHONPATH as ours, the project
    before it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def crash_while_writing(broker: KafkaBroker, min_sent: int = 4000, timeout: float = 120.0) -> None:
    """Start ``live_writer.py`` against the running broker, wait until its transaction is open and at least
    ``min_sent`` plain records were sent, then SIGKILL the broker while the writer still writes, and kill the
    writer (by its PID)."""
    import sys

    create_topics(broker.bootstrap, LIVE_TOPICS)
    out_path = broker.work / "live-writer.txt"
    with open(out_path, "wb") as out:
        writer = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("live_writer.py")), broker.bootstrap],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=python_env(),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while True:
            text = out_path.read_text(errors="replace")
            sent = [int(m) for m in re.findall(r"^sent (\d+)$", text, re.M)]
            if "OPEN" in text and sent and sent[-1] >= min_sent:
                break
            if writer.poll() is not None:
                raise BrokerError(f"live_writer.py exited with {writer.returncode}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise BrokerError(f"live_writer.py did not reach OPEN and {min_sent} records:\n{text[-3000:]}")
            time.sleep(0.05)
        broker.crash()
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait(30)
